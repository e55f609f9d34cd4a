/* SPDX-License-Identifier: MIT */
/* worker.c - the worker slot the pool publishes (exi_worker.h). */
#include "base/exi_worker.h"

#include "base/exi_macros.h"

EXI_TLS exi_worker_slot exi_this_worker = {.index = -1, .help_one = 0};
