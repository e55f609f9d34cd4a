/* SPDX-License-Identifier: MIT */
/* helpers.h - every shared test fixture (one header per concept, see
 * README.md): the test allocators, recording receivers, running and
 * checking senders, bounded waits, pools, run loops and controllable
 * senders. */
#ifndef CEXEC_TEST_HELPERS_H
#define CEXEC_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <cexec/cexec.h>

#include "common/callbacks.h"
#include "common/contexts.h"
#include "common/owned_errors.h"
#include "common/pool.h"
#include "common/receivers.h"
#include "common/run.h"
#include "common/schedulers.h"
#include "common/senders.h"
#include "common/sigs.h"
#include "common/test_alloc.h"
#include "common/wait.h"

#endif
