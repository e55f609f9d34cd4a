/* SPDX-License-Identifier: MIT */
/* exi_scheduler.h - the schedule operation of a queued resource.
 * Internal. */
#ifndef EXI_SCHEDULER_H
#define EXI_SCHEDULER_H

#include <cexec/cexec.h>

/* The schedule operation of a resource with a queue (run_loop, pool): its
 * work item, when run, completes with set_stopped if the receiver's stop
 * token has stop requested, else with set_value(); when the resource drops
 * it, with set_stopped.  The resource's start queues &work. */
typedef struct exi_queued_op {
    ex_operation base;
    ex_work work;
    void *resource;
    ex_receiver r;
} exi_queued_op;

void exi_queued_op_init(exi_queued_op *o, const ex_operation_vtable *vt, void *resource, ex_receiver r);

#endif
