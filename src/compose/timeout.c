/* SPDX-License-Identifier: MIT */
/* timeout.c - ex_timeout: a child raced against a timer (cexec/timeout.h).
 *
 * One block: the header, room for the child's values, the child's
 * operation, the timer's (the scheduler's connect_schedule_at, no sender
 * of its own).  Both see the token of one in-place stop source, linked to
 * the receiver's token: any completion of either requests stop on it (so
 * on the other) before it arrives on the count (exi_join's: the child,
 * the timer, and the stop requests from outside in flight), and the last
 * arrival completes.  A completion never completes the operation while a
 * request it made, or one from outside, still walks the source.
 *
 * The outcome: a value of the child always wins; otherwise the first to
 * claim it decides (a CAS on `claim`): the child's error or stopped, or
 * the timer's firing (EX_ETIMEDOUT) or failure (its error).  The child,
 * completing after the timer did (the usual case: its request cancels
 * the timer, which completes inside it), finds the count at its own
 * arrival alone and completes at once, values uncopied; otherwise it
 * keeps its result for the timer's arrival. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "adaptors/exi_stage_name.h"
#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "compose/exi_bulk.h"
#include "compose/exi_join.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

/* Who decided the outcome, unless the child sends a value. */
enum { CLAIM_NONE, CLAIM_CHILD, CLAIM_TIMEOUT, CLAIM_TIMER_ERROR };

/* The child's completion, kept for the last arrival. */
enum { KEPT_NONE, KEPT_VALUE, KEPT_ERROR, KEPT_STOPPED, KEPT_TIMED_OUT };

typedef struct timeout_op {
    ex_operation base;
    ex_receiver r;
    exi_join join;             /* count and the children's stop source (its error and disposition unused) */
    uint32_t claim;            /* atomic: CLAIM_* */
    uint8_t kept;              /* KEPT_*: written by the child before it arrives */
    uint8_t cap, nv;           /* room for values, values kept */
    ex_operation *child, *timer;
    ex_value *v;               /* cap values, in the block */
    void *nested;              /* tuple contents, from alloc */
    size_t nested_size;
    ex_error err;              /* the child's kept error (or why its values could not be kept) */
    ex_error timer_err;        /* the timer's error, when it claimed the outcome */
    ex_stop_callback on_stop;  /* on the receiver's token */
    ex_stop_token token;       /* the receiver's */
    ex_env_pair child_env;
    const ex_allocator *alloc;
    int64_t duration;          /* for the message */
    const char *builder, *name;
} timeout_op;

typedef struct timeout_sender {
    ex_sender base;
    ex_sender *child;
    ex_scheduler sch;
    int64_t duration;
    uint8_t cap;
    size_t values_off, child_off, timer_off;
    const char *builder, *name;  /* the child's, for the message */
} timeout_sender;

/* ---------------------------------------------------------- the message */

/* ns as "50 ms", "1.5 s", "250 us", "7 ns": the largest unit it reaches,
 * exact (trailing zeros of the fraction dropped). */
static void duration_text(char *buf, size_t size, int64_t ns) {
    static const struct { int64_t per; int digits; const char *unit; } units[] = {
        { EX_NS_PER_S, 9, "s" }, { EX_NS_PER_MS, 6, "ms" }, { EX_NS_PER_US, 3, "us" }, { 1, 0, "ns" },
    };
    size_t u = 0;
    while (units[u].per > 1 && ns < units[u].per) u++;
    int64_t whole = ns / units[u].per, rest = ns % units[u].per;
    if (!rest) {
        snprintf(buf, size, "%" PRId64 " %s", whole, units[u].unit);
        return;
    }
    int digits = units[u].digits;
    while (rest % 10 == 0) {
        rest /= 10;
        digits--;
    }
    snprintf(buf, size, "%" PRId64 ".%0*" PRId64 " %s", whole, digits, rest, units[u].unit);
}

/* The EX_ETIMEDOUT error, owned by whoever it is given to. */
static ex_error timeout_error(const timeout_op *o) {
    char within[48];
    duration_text(within, sizeof within, o->duration);
    ex_error e;
    if (!o->builder)
        e = ex_error_format(EX_ETIMEDOUT, "ex_timeout: the operation did not complete within %s", within);
    else if (!o->name)
        e = ex_error_format(EX_ETIMEDOUT, "ex_timeout: %s did not complete within %s", o->builder, within);
    else
        e = ex_error_format(EX_ETIMEDOUT, "ex_timeout: %s(%s) did not complete within %s", o->builder, o->name, within);
    /* No memory for the text: the code stays, with a text of our own. */
    if (!ex_error_is_owned(e)) e = ex_err(EX_ETIMEDOUT, "ex_timeout: the operation did not complete within its time limit");
    return e;
}

/* ----------------------------------------------------------- completing */

/* The timer's error, unless it was passed on: the child's completion
 * decided. */
static void drop_timer_error(timeout_op *o) {
    exi_error_drop(o->timer_err);
    o->timer_err = ex_ok();
}

/* Completes with the timer's outcome (it fired, or failed to arm). */
static void complete_timed_out(timeout_op *o) {
    ex_error e;
    if (exi_load_acq_u32(&o->claim) == CLAIM_TIMER_ERROR) {
        e = o->timer_err;
        o->timer_err = ex_ok();  /* the receiver's now: the destroy must not release it */
    } else {
        e = timeout_error(o);
    }
    ex_set_error(o->r, e);
}

/* The last arrival: completes with what the child left. */
static void complete_kept(timeout_op *o) {
    ex_stop_callback_deregister(&o->on_stop);
    uint8_t kept = o->kept;
    if (kept != KEPT_TIMED_OUT) drop_timer_error(o);
    switch (kept) {
    case KEPT_VALUE: ex_set_value(o->r, o->v, o->nv); break;
    case KEPT_ERROR: {
        ex_error e = o->err;
        o->err = ex_ok();  /* the receiver's now */
        ex_set_error(o->r, e);
        break;
    }
    case KEPT_STOPPED: ex_set_stopped(o->r); break;
    default: complete_timed_out(o); break;
    }
}

static void arrive(timeout_op *o) {
    if (exi_join_arrive(&o->join)) complete_kept(o);
}

/* The child completes: true when the timer has arrived and no stop
 * request from outside holds the operation, nor can from now on (the
 * count was the child's alone): the child completes the operation at
 * once. */
static bool completes_now(timeout_op *o) {
    uint32_t alone = 1;
    if (!exi_cas_u32(&o->join.count, &alone, 0)) return false;
    ex_stop_callback_deregister(&o->on_stop);
    return true;
}

/* Whether `who` decides the outcome (the first claim wins). */
static bool claim(timeout_op *o, uint32_t who) {
    uint32_t none = CLAIM_NONE;
    return exi_cas_u32(&o->claim, &none, who);
}

/* ------------------------------------------------------------ the child */

static void child_value(void *self, const ex_value *v, size_t n) {
    timeout_op *o = self;
    exi_join_request_stop(&o->join);  /* cancels the timer */
    if (completes_now(o)) {
        drop_timer_error(o);
        ex_set_value(o->r, v, n);
        return;
    }
    /* The timer completes on another thread: keep the values for it. */
    ex_error e = n > o->cap ? ex_err(EX_EINVAL, "ex_timeout: the child sent more values than its signature allows")
                            : exi_values_copy(o->v, v, n, o->alloc, &o->nested, &o->nested_size);
    if (e.code) {
        o->kept = KEPT_ERROR;
        o->err = e;
    } else {
        o->kept = KEPT_VALUE;
        o->nv = (uint8_t)n;
    }
    arrive(o);
}

static void child_error(void *self, ex_error e) {
    timeout_op *o = self;
    bool decides = claim(o, CLAIM_CHILD);
    exi_join_request_stop(&o->join);
    if (!decides) {
        exi_error_drop(e);  /* the deadline passed first: most likely the stop's own doing */
        if (completes_now(o)) {
            complete_timed_out(o);
            return;
        }
        o->kept = KEPT_TIMED_OUT;
    } else {
        if (completes_now(o)) {
            drop_timer_error(o);
            ex_set_error(o->r, e);
            return;
        }
        o->kept = KEPT_ERROR;
        o->err = e;  /* the child's reference, passed on by complete_kept */
    }
    arrive(o);
}

static void child_stopped(void *self) {
    timeout_op *o = self;
    bool decides = claim(o, CLAIM_CHILD);
    exi_join_request_stop(&o->join);
    if (completes_now(o)) {
        if (!decides) {
            complete_timed_out(o);
            return;
        }
        drop_timer_error(o);
        ex_set_stopped(o->r);
        return;
    }
    o->kept = decides ? KEPT_STOPPED : KEPT_TIMED_OUT;
    arrive(o);
}

static ex_env op_env(void *self) { return ex_env_of_pair(&((timeout_op *)self)->child_env); }

static const ex_receiver_vtable child_rcvr_vt = { child_value, child_error, child_stopped, op_env, NULL };

/* ------------------------------------------------------------ the timer */

static void timer_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    timeout_op *o = self;
    (void)claim(o, CLAIM_TIMEOUT);
    exi_join_request_stop(&o->join);  /* stops the child */
    arrive(o);
}

static void timer_error(void *self, ex_error e) {
    timeout_op *o = self;
    o->timer_err = e;  /* before the claim: whoever reads it saw the claim */
    if (!claim(o, CLAIM_TIMER_ERROR)) drop_timer_error(o);
    exi_join_request_stop(&o->join);
    arrive(o);
}

/* Cancelled by the child's completion or a stop from outside, or dropped
 * by its resource shutting down: then the child is stopped too (it would
 * otherwise run with no deadline), and its completion is the result. */
static void timer_stopped(void *self) {
    timeout_op *o = self;
    exi_join_request_stop(&o->join);
    arrive(o);
}

static const ex_receiver_vtable timer_rcvr_vt = { timer_value, timer_error, timer_stopped, op_env, NULL };

/* The receiver asked for stop: forwarded to both, holding the operation
 * across the request (exi_join.h). */
static void forward_stop(ex_stop_callback *cb) {
    timeout_op *o = EXI_CONTAINER_OF(cb, timeout_op, on_stop);
    if (exi_join_forward_stop(&o->join)) arrive(o);
}

/* ------------------------------------------------------------ operation */

static void t_start(ex_operation *op) {
    timeout_op *o = (timeout_op *)op;
    /* A stop requested already is forwarded here: both start stopped. */
    (void)ex_stop_callback_register(&o->on_stop, o->token, forward_stop);
    ex_operation *child = o->child;
    /* The timer first: the deadline counts from the operation's start.
     * The child has not arrived, so nothing completes before its start. */
    ex_start(o->timer);
    ex_start(child);  /* the operation may be gone after this */
}

static void t_destroy_op(ex_operation *op) {
    timeout_op *o = (timeout_op *)op;
    ex_operation_destroy(o->child);
    ex_operation_destroy(o->timer);
    if (o->nested) ex_deallocate(o->alloc, o->nested, o->nested_size, alignof(ex_value));
    o->nested = NULL;
    exi_error_drop(o->err);  /* errors kept and never passed on */
    o->err = ex_ok();
    drop_timer_error(o);
}

static const ex_operation_vtable timeout_op_vt = { t_start, t_destroy_op };

static ex_error t_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const timeout_sender *ts = (const timeout_sender *)s;
    timeout_op *o = storage;
    o->base.vt = &timeout_op_vt;
    o->r = r;
    exi_join_init(&o->join, 2);
    o->claim = CLAIM_NONE;
    o->kept = KEPT_NONE;
    o->cap = ts->cap;
    o->nv = 0;
    o->child = (ex_operation *)(void *)((char *)storage + ts->child_off);
    o->timer = (ex_operation *)(void *)((char *)storage + ts->timer_off);
    o->v = (ex_value *)(void *)((char *)storage + ts->values_off);
    o->nested = NULL;
    o->nested_size = 0;
    o->err = ex_ok();
    o->timer_err = ex_ok();
    o->duration = ts->duration;
    o->builder = ts->builder;
    o->name = ts->name;
    ex_env env = ex_receiver_env(r);
    o->alloc = ex_get_allocator(env);
    o->token = ex_get_stop_token(env);
    ex_value tv;
    tv.type = EX_T_TOKEN;
    tv.as.token = exi_join_token(&o->join);
    ex_env_pair_init(&o->child_env, &ex_key_get_stop_token, tv, ex_env_forward(env));
    ex_error e = ex_connect_child(ts->child, (ex_receiver){ &child_rcvr_vt, o }, o->child);
    if (e.code) return e;
    ex_timer_when when = { ts->duration, true };
    e = ts->sch.vt->connect_schedule_at(ts->sch.self, when, (ex_receiver){ &timer_rcvr_vt, o }, o->timer);
    if (e.code) ex_operation_destroy(o->child);
    return e;
}

static void t_destroy(ex_sender *s) { ex_sender_release(((timeout_sender *)s)->child); }

static const ex_sender_vtable timeout_vt = { "ex_timeout", t_connect, NULL, t_destroy, NULL };

/* -------------------------------------------------------------- building */

/* The child's builder and stage name, for the message. */
static void child_label(const ex_sender *child, const char **builder, const char **name) {
    *builder = child->vt->name;
    *name = exi_then_stage_name(child);
    if (!*name) *name = exi_let_stage_name(child);
    if (!*name) (void)exi_bulk_stage(child, builder, name);
}

/* Why sch and duration_ns cannot make a timer (code and message), or
 * EX_OK. */
static ex_error timer_input(ex_scheduler sch, int64_t duration_ns) {
    if (!sch.vt || !sch.vt->connect_schedule) return ex_err(EX_EINVAL, "ex_timeout: invalid scheduler handle");
    if (!sch.vt->connect_schedule_at)
        return ex_err(EX_ENOTSUP, "ex_timeout: the scheduler has no clock (no connect_schedule_at)");
    if (duration_ns < 0) return ex_err(EX_EINVAL, "ex_timeout: negative duration");
    if (duration_ns > INT64_MAX - ex_now()) return ex_err(EX_EINVAL, "ex_timeout: the duration overflows the clock");
    return ex_ok();
}

ex_sender *ex_timeout(ex_sender *child, ex_scheduler sch, int64_t duration_ns) {
    ex_error e = ex_check_input(child, "ex_timeout: NULL input sender");
    if (!e.code) e = timer_input(sch, duration_ns);
    if (e.code) return exi_reject1(e.code, e.msg, child);
    ex_sender *s = ex_sender_alloc(&timeout_vt, sizeof(timeout_sender));
    if (!s) return exi_reject1(EX_ENOMEM, NULL, child);
    timeout_sender *ts = (timeout_sender *)s;
    ts->child = child;
    ts->sch = sch;
    ts->duration = duration_ns;
    ts->cap = exi_sigs_max_arity(&child->sigs);
    child_label(child, &ts->builder, &ts->name);
    s->sigs = child->sigs;
    s->sigs.flags |= EX_SIGS_ERROR;  /* the timeout, the timer's error, keeping the values */
    ts->values_off = ex_align_up(sizeof(timeout_op), alignof(ex_value));
    size_t own = ex_size_add(ts->values_off, (size_t)ts->cap * sizeof(ex_value));
    ts->child_off = exi_child_offset(own, child);
    ts->timer_off = ex_align_up(ex_size_add(ts->child_off, child->op_size), sch.vt->timer_op_align);
    s->op_size = ex_size_add(ts->timer_off, sch.vt->timer_op_size);
    s->op_align = ex_max_size(ex_max_size(alignof(timeout_op), child->op_align), sch.vt->timer_op_align);
    s->depth = child->depth + 1;
    return s;
}
