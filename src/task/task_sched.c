/* SPDX-License-Identifier: MIT */
/* task_sched.c - a task and its scheduler: ex_task_yield and
 * ex_change_coroutine_scheduler (see cexec/task.h). */
#include <stdlib.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "task/exi_task.h"

/* ex_task_yield's resumption ran (or was dropped): it completes the
 * "await" the yield is. */
static void yield_execute(ex_work *w) {
    ex_task *t = EXI_CONTAINER_OF(w, ex_task, yield_work);
    ex_await_result *out = t->await_out;
    out->status = EX_AWAIT_VALUE;
    out->n = 0;
    out->error = ex_ok();
    exi_task_await_complete(t);
}

static void yield_cancel(ex_work *w) { exi_task_await_stopped(EXI_CONTAINER_OF(w, ex_task, yield_work)); }

ex_error ex_task_yield(ex_task *t) {
    if (!t) return ex_err(EX_EINVAL, "ex_task_yield: NULL task");
    if (t->stopped) return ex_err(EX_ECANCELED, "ex_task_yield: the task is stopped");
    ex_scheduler s = t->sched;
    ex_await_result out;
    if (!s.vt->yield) {
        ex_await_into(t, ex_schedule(s), &out);
    } else {
        /* An await whose "operation" is the resumption queued behind the
         * waiting work: the same handshake as any suspending await. */
        release_await(t);
        t->await_out = &out;
        t->yield_work = (ex_work){ NULL, yield_execute, yield_cancel };
        exi_store_rlx_u32(&t->await_state, AWAITING);
        ex_error e = s.vt->yield(s.self, &t->yield_work);
        if (e.code) return e;
        if (exi_load_acq_u32(&t->await_state) != DONE) {
            exi_task_flush_deferred(t->carrier);
            t->carrier->switches++;
            (void)exi_fiber_switch(&t->carrier->fiber, t->carrier->resumer, t);
        }
        if (out.status == EX_AWAIT_STOPPED) t->stopped = true;
    }
    if (out.status == EX_AWAIT_VALUE) return ex_ok();
    if (out.status == EX_AWAIT_ERROR) return out.error;
    return ex_err(EX_ECANCELED, "ex_task_yield: the task was stopped");
}

/* Index of sch among the holds in `left` (see held_schedulers), or -1. */
static ptrdiff_t left_find(const ex_task *t, ex_scheduler sch) {
    if (!t->left) return -1;
    for (size_t i = 0; i < t->left->n; i++)
        if (ex_scheduler_equal(t->left->s[i], sch)) return (ptrdiff_t)i;
    return -1;
}

/* Room in `left` for one more hold.  False: no memory. */
static bool left_reserve(ex_task *t) {
    held_schedulers *l = t->left;
    if (l && l->n < l->cap) return true;
    size_t cap = l ? l->cap * 2 : 4;
    held_schedulers *g = realloc(l, sizeof *g + cap * sizeof g->s[0]);
    if (!g) return false;
    if (!l) g->n = 0;
    g->cap = cap;
    t->left = g;
    return true;
}

/* Hops t back to prev after a move that failed once t had suspended.  If
 * prev refuses too, t carries on where it is, as after any refused hop. */
static void return_to(ex_task *t, ex_scheduler prev) {
    t->must_hop = true;
    ex_await_result back;
    ex_await_into(t, ex_schedule(prev), &back);
    t->must_hop = false;
}

ex_scheduler ex_change_coroutine_scheduler(ex_task *t, ex_scheduler sch) {
    if (!t) return (ex_scheduler){ NULL, NULL };
    ex_scheduler prev = t->sched;
    if (!sch.vt || t->stopped) return prev;  /* a stopped task stays where it is */
    /* The task keeps its hold on prev until it completes (see held_schedulers),
     * so the handle returned stays valid: room for it first. */
    bool same = ex_scheduler_equal(sch, prev);
    if (!same && !t->sched_borrowed && !left_reserve(t)) return prev;
    ptrdiff_t found = same ? -1 : left_find(t, sch);  /* sch held already: that hold moves to current */
    if (!same && found < 0) ex_scheduler_retain(sch);
    t->sched = sch;
    bool was_inline = t->inline_affinity;
    t->inline_affinity = false;
    t->must_hop = true;  /* even if the schedule completes at once, end on sch */
    uint32_t switches = t->carrier->switches;
    ex_await_result moved;
    ex_await_into(t, ex_schedule(sch), &moved);
    t->must_hop = false;
    t->inline_affinity = was_inline;
    if (moved.status == EX_AWAIT_ERROR) {
        /* The task did not get there: it stays with its scheduler. */
        t->sched = prev;
        if (!same && found < 0) ex_scheduler_release(sch);
        /* It had left prev's agent, though, if the move was queued and then
         * dropped (a pool shut down with it queued resumes the task on the
         * thread that shuts it down): back to prev, as if it never left. */
        if (t->carrier->switches != switches && !was_inline) return_to(t, prev);
        return prev;
    }
    if (same) return prev;
    held_schedulers *l = t->left;
    if (found >= 0) l->s[found] = l->s[--l->n];
    if (t->sched_borrowed) t->sched_borrowed = false;  /* prev is its fork's, held until the fork ends */
    else l->s[l->n++] = prev;                          /* `left` never holds the current one */
    return prev;
}
