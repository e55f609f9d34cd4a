/* SPDX-License-Identifier: MIT */
/* cexec/cexec.h - umbrella header: std::execution for C.
 *
 * See README.md for an overview and docs/design.md for the C model.  Every
 * public function is documented in the component header that declares it. */
#ifndef CEXEC_CEXEC_H
#define CEXEC_CEXEC_H

#include <cexec/types.h>
#include <cexec/value.h>
#include <cexec/allocator.h>
#include <cexec/stop_token.h>
#include <cexec/env.h>
#include <cexec/sender.h>
#include <cexec/scheduler.h>
#include <cexec/domain.h>
#include <cexec/run_loop.h>
#include <cexec/single_thread_context.h>
#include <cexec/manual_scheduler.h>
#include <cexec/just.h>
#include <cexec/then.h>
#include <cexec/let.h>
#include <cexec/into_variant.h>
#include <cexec/on.h>
#include <cexec/write_env.h>
#include <cexec/sync_wait.h>
#include <cexec/when_all.h>
#include <cexec/when_any.h>
#include <cexec/bulk.h>
#include <cexec/split.h>
#include <cexec/scope.h>
#include <cexec/pool.h>
#include <cexec/poller.h>
#include <cexec/parallel_scheduler.h>
#include <cexec/allocators.h>
#include <cexec/algorithms.h>
#include <cexec/strand.h>
#include <cexec/task.h>
#include <cexec/version.h>
#include <cexec/debug.h>
#include <cexec/owning.h>
#include <cexec/error.h>
#include <cexec/timer.h>
#include <cexec/timeout.h>
#include <cexec/virtual_clock.h>

#endif
