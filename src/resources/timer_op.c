/* SPDX-License-Identifier: MIT */
/* timer_op.c - the timed schedule operation (exi_timer_op.h). */
#include "resources/exi_timer_op.h"

void exi_timer_op_fired(ex_work *w) {
    exi_timer_op *op = (exi_timer_op *)(void *)((char *)w - offsetof(exi_timer_op, work));
    /* Waits for a stop callback running elsewhere: it found the timer gone
     * and only left its mark. */
    ex_stop_callback_deregister(&op->on_stop);
    if (ex_stop_token_stop_requested(ex_get_stop_token(ex_receiver_env(op->r)))) ex_set_stopped(op->r);
    else ex_set_value(op->r, NULL, 0);
}

void exi_timer_op_dropped(ex_work *w) {
    exi_timer_op *op = (exi_timer_op *)(void *)((char *)w - offsetof(exi_timer_op, work));
    ex_stop_callback_deregister(&op->on_stop);
    ex_set_stopped(op->r);
}

/* The receiver's stop request: a timer still armed is removed and
 * completes stopped here, on the requesting thread (inside the callback:
 * the operation may go away once it completed, which request_stop
 * allows). */
static void on_stop(ex_stop_callback *cb) {
    exi_timer_op *op = (exi_timer_op *)(void *)((char *)cb - offsetof(exi_timer_op, on_stop));
    if (op->svc->cancel(op->resource, op)) ex_set_stopped(op->r);
}

static int64_t deadline_of(const ex_clock *clock, ex_timer_when when) {
    if (!when.relative) return when.ns;
    int64_t now = exi_clock_now(clock);
    return when.ns > INT64_MAX - now ? INT64_MAX : now + when.ns;
}

static void timer_start(ex_operation *base) {
    exi_timer_op *op = (exi_timer_op *)base;
    ex_stop_token tok = ex_get_stop_token(ex_receiver_env(op->r));
    if (ex_stop_token_stop_requested(tok)) {
        ex_set_stopped(op->r);
        return;
    }
    /* Registered before arming: once armed, the timer may fire and the
     * operation complete on another thread at any moment. */
    (void)ex_stop_callback_register(&op->on_stop, tok, on_stop);
    op->node.deadline = deadline_of(op->clock, op->when);
    enum exi_timer_arm a = op->svc->arm(op->resource, op);
    if (a == EXI_TIMER_ARMED) return;
    ex_stop_callback_deregister(&op->on_stop);
    if (a == EXI_TIMER_REFUSED_SHUTDOWN)
        ex_set_error(op->r, ex_err(EX_ESHUTDOWN, "ex_schedule_at: the resource no longer accepts work"));
    else
        ex_set_stopped(op->r);
}

const ex_operation_vtable exi_timer_op_vt = { timer_start, NULL };
