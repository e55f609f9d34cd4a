/* SPDX-License-Identifier: MIT */
/* exi_run_loop.h - a run loop's timers, for resources built on a run loop
 * (the single-thread context adds its shutdown gate around them).
 * Internal. */
#ifndef EXI_RUN_LOOP_H
#define EXI_RUN_LOOP_H

#include <cexec/cexec.h>

#include "resources/exi_timer_op.h"

/* The run loop's arm and cancel (exi_timer_service_vtable). */
enum exi_timer_arm exi_run_loop_arm(void *loop, exi_timer_op *op);
bool exi_run_loop_cancel(void *loop, exi_timer_op *op);

#endif
