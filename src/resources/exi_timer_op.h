/* SPDX-License-Identifier: MIT */
/* exi_timer_op.h - the timed schedule operation every cexec resource with
 * a clock uses, over the resource's arm and cancel (its timer heap under
 * its lock).  Internal.
 *
 * Exactly one completion: whoever takes the timer out of the heap under
 * the resource's lock completes it: the resource when it fires (value) or
 * drops it (stopped), the stop callback when it cancels (stopped).  A stop
 * callback that finds the timer not armed leaves a mark the arm sees
 * under the same lock, so a stop that comes between the start's
 * registration and its arm is not lost: the arm refuses and the start
 * completes stopped. */
#ifndef EXI_TIMER_OP_H
#define EXI_TIMER_OP_H

#include <cexec/cexec.h>

#include "core/exi_clock.h"
#include "resources/exi_timer_heap.h"

struct exi_timer_op;

enum exi_timer_arm { EXI_TIMER_ARMED, EXI_TIMER_REFUSED_STOPPED, EXI_TIMER_REFUSED_SHUTDOWN };

typedef struct exi_timer_service_vtable {
    /* Under the lock: op->cancel_requested -> EXI_TIMER_REFUSED_STOPPED; a
     * resource that takes no more timers -> REFUSED_STOPPED or
     * REFUSED_SHUTDOWN; else inserts op->node (deadline set) and wakes
     * whoever sleeps until the earliest deadline if it changed. */
    enum exi_timer_arm (*arm)(void *resource, struct exi_timer_op *op);
    /* Under the lock: removes op->node if it is in the heap (true), else
     * sets op->cancel_requested (false). */
    bool (*cancel)(void *resource, struct exi_timer_op *op);
} exi_timer_service_vtable;

typedef struct exi_timer_op {
    ex_operation base;
    ex_receiver r;
    exi_timer node;
    ex_work work;              /* execute: the timer fired; cancel: the resource dropped it */
    ex_stop_callback on_stop;
    const exi_timer_service_vtable *svc;
    void *resource;
    const ex_clock *clock;     /* the resource's: relative deadlines count from its time */
    ex_timer_when when;
    bool cancel_requested;     /* under the resource's lock */
} exi_timer_op;

extern const ex_operation_vtable exi_timer_op_vt;
void exi_timer_op_fired(ex_work *w);
void exi_timer_op_dropped(ex_work *w);

/* Constructs the operation in storage (sizeof(exi_timer_op)); clock is
 * the resource's (NULL: CLOCK_MONOTONIC).  Inline: called, its seven
 * arguments put the receiver on the stack, and reading it back stalled
 * on store forwarding for a tenth of an arm-and-cancel. */
static inline void exi_timer_op_init(exi_timer_op *op, const exi_timer_service_vtable *svc, void *resource,
                                     const ex_clock *clock, ex_timer_when when, ex_receiver r) {
    op->base.vt = &exi_timer_op_vt;
    op->r = r;
    op->node.in_heap = false;
    op->work = (ex_work){ NULL, exi_timer_op_fired, exi_timer_op_dropped };
    op->on_stop = (ex_stop_callback){ 0 };
    op->svc = svc;
    op->resource = resource;
    op->clock = clock;
    op->when = when;
    op->cancel_requested = false;
}

/* The operation whose node n is. */
static inline exi_timer_op *exi_timer_op_of(exi_timer *n) {
    return (exi_timer_op *)(void *)((char *)n - offsetof(exi_timer_op, node));
}

/* What a resource calls for a timer it took out of its heap, outside its
 * lock, on its own agent: fired (set_value, or set_stopped if stop was
 * requested meanwhile) or dropped (set_stopped). */
static inline void exi_timer_fire(exi_timer *n) { exi_timer_op_of(n)->work.execute(&exi_timer_op_of(n)->work); }
static inline void exi_timer_drop(exi_timer *n) { exi_timer_op_of(n)->work.cancel(&exi_timer_op_of(n)->work); }

#endif
