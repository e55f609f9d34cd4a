/* SPDX-License-Identifier: MIT */
/* sync_wait.c - [exec.sync.wait]: run a sender to completion on a run_loop
 * driven by the calling thread. */
#include <sched.h>

#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "core/exi_value.h"
#include "base/exi_worker.h"
#include "resources/exi_pool.h"
#include "resources/exi_single_thread_context.h"

/* sync_state.flags */
#define SYNC_DONE 1u     /* the operation completed (the result is written) */
#define SYNC_RUNNING 2u  /* the waiter runs the loop until it is finished */

typedef struct sync_state {
    ex_run_loop loop;
    ex_env_pair env;    /* get_scheduler and get_delegation_scheduler: the loop */
    ex_result *res;
    uint32_t flags;     /* SYNC_DONE | SYNC_RUNNING, each set once */
    uint32_t finished;  /* SYNC_RUNNING only: set after the loop was finished */
} sync_state;

/* Tells the waiting thread.  The loop needs finishing (its mutex and
 * condition variable) only when the waiter runs it, about to sleep: a wait
 * that sees SYNC_DONE first costs no lock.  The last access to st by the
 * completing side: the read-modify-write, or the store of `finished`. */
static void complete(sync_state *st) {
    if (!(exi_faa_u32(&st->flags, SYNC_DONE) & SYNC_RUNNING)) return;
    ex_run_loop_finish(&st->loop);
    exi_store_rel_u32(&st->finished, 1);
}

static bool completed(sync_state *st) { return exi_load_acq_u32(&st->flags) & SYNC_DONE; }

/* The waiter, once the operation completed or it is about to sleep: runs
 * the loop's items until it is finished (and empty), as run() does. */
static void run_loop_to_end(sync_state *st) {
    uint32_t f = exi_load_acq_u32(&st->flags);
    if (!(f & SYNC_DONE)) f = exi_faa_u32(&st->flags, SYNC_RUNNING);
    if (f & SYNC_DONE) {
        /* complete() will not touch the loop: what it holds runs here. */
        while (ex_run_loop_run_one(&st->loop)) {}
        return;
    }
    (void)ex_run_loop_run(&st->loop);
    while (!exi_load_acq_u32(&st->finished)) exi_pause();
}

static void sync_set_value(void *self, const ex_value *v, size_t n) {
    sync_state *st = self;
    ex_result *r = st->res;
    if (n > EX_MAX_ARITY) {
        r->disposition = EX_DISP_ERROR;
        r->error = ex_err(EX_EINVAL, "ex_sync_wait: more than EX_MAX_ARITY values");
    } else {
        r->nested_alloc = ex_default_allocator();
        ex_error e = exi_values_copy(r->values, v, n, r->nested_alloc, &r->nested, &r->nested_size);
        if (e.code) {
            r->disposition = EX_DISP_ERROR;
            r->error = e;
        } else {
            r->disposition = EX_DISP_VALUE;
            r->n = n;
        }
    }
    complete(st);
}

static void sync_set_error(void *self, ex_error e) {
    sync_state *st = self;
    st->res->disposition = EX_DISP_ERROR;
    st->res->error = e;
    complete(st);
}

static void sync_set_stopped(void *self) {
    sync_state *st = self;
    st->res->disposition = EX_DISP_STOPPED;
    complete(st);
}

static ex_env sync_env(void *self) { return ex_env_of_pair(&((sync_state *)self)->env); }

static const ex_receiver_vtable sync_rcvr_vt = { sync_set_value, sync_set_error, sync_set_stopped, sync_env, NULL };

static ex_result error_result(ex_error e) {
    ex_result r;
    memset(&r, 0, sizeof r);
    r.disposition = EX_DISP_ERROR;
    r.error = e;
    return r;
}

/* Rounds a thread outside any pool spins before it blocks (~20-50 us);
 * after the first SYNC_WAIT_PAUSE rounds each round yields the CPU. */
#define SYNC_WAIT_SPIN 2000
#define SYNC_WAIT_PAUSE 64

/* Starts op and waits for it to complete.
 *
 * Outside every pool the thread offers itself to the pool its operation
 * submits to (exi_pool.h, lending): if it gets a lent slot it runs its own
 * items there, with no wake-up in between.  Short operations finish within
 * microseconds: it spins briefly before giving the slot back and sleeping
 * on the loop's condition variable, to save the cost of a wake-up round
 * trip.
 *
 * On a pool agent it keeps running the loop's items and the pool's work
 * instead of blocking, so a task that waits for work on its own pool
 * cannot deadlock it. */
static void start_and_wait(sync_state *st, ex_operation *op) {
    if (exi_worker_index() < 0) {
        exi_lend_state outer;
        exi_lend_open(&outer);
        ex_start(op);
        for (unsigned spin = 0; spin < SYNC_WAIT_SPIN && !completed(st); spin++) {
            if (exi_lend_run_one() || ex_run_loop_run_one(&st->loop)) spin = 0;
            else if (spin < SYNC_WAIT_PAUSE) exi_pause();
            else sched_yield();  /* cores may all be busy with the work we wait for: let it run */
        }
        /* Nothing is left in the slot that only this thread would run:
         * close hands what remains to a worker before this thread sleeps. */
        exi_lend_close(&outer);
        run_loop_to_end(st);
        return;
    }
    ex_start(op);
    unsigned idle = 0;
    while (!completed(st)) {
        if (ex_run_loop_run_one(&st->loop) || exi_worker_help_one()) {
            idle = 0;
        } else if (++idle < 64) {
            exi_pause();
        } else {
            sched_yield();
        }
    }
    while (ex_run_loop_run_one(&st->loop)) {}
}

/* Operation states up to this size live on the caller's stack. */
#define SYNC_WAIT_STACK_OP 1024

ex_result ex_sync_wait(ex_sender *s) {
    if (!s) return error_result(ex_err(EX_EINVAL, "ex_sync_wait: NULL sender"));
    if (exi_single_thread_context_here()) {
        /* Its work runs only on this thread, which would be blocked. */
        ex_sender_release(s);
        return error_result(ex_err(EX_EDEADLK, "ex_sync_wait: called on a single_thread_context's own thread, which "
                                               "alone runs that context's work; start the sender and complete "
                                               "asynchronously instead"));
    }
    if (s->sigs.nvalues > 1) {
        ex_sender_release(s);
        return error_result(ex_err(EX_EINVAL, "ex_sync_wait: the sender has more than one value signature; use ex_sync_wait_with_variant"));
    }
    ex_result res;
    memset(&res, 0, sizeof res);
    sync_state st;
    st.res = &res;
    st.flags = 0;
    st.finished = 0;
    ex_error e = ex_run_loop_init(&st.loop);
    if (e.code) {
        ex_sender_release(s);
        return error_result(e);
    }
    ex_scheduler sch = ex_run_loop_scheduler(&st.loop);
    ex_env_pair_init2(&st.env, &ex_key_get_scheduler, ex_sched_value(sch), &ex_key_get_delegation_scheduler,
                      ex_sched_value(sch), ex_env_empty());

    _Alignas(max_align_t) unsigned char stack_op[SYNC_WAIT_STACK_OP];
    void *storage = stack_op;
    const ex_allocator *a = ex_default_allocator();
    bool heap = s->op_size > sizeof stack_op || s->op_align > alignof(max_align_t);
    if (heap && !(storage = ex_allocate(a, s->op_size, s->op_align))) {
        ex_sender_release(s);
        (void)ex_run_loop_destroy(&st.loop);
        return error_result(ex_err(EX_ENOMEM, "ex_sync_wait: out of memory for the operation state"));
    }
    ex_receiver r = { &sync_rcvr_vt, &st };
    ex_operation *op;
    e = ex_connect(s, r, storage, heap ? s->op_size : sizeof stack_op, &op);
    if (e.code) {
        res = error_result(e);
    } else {
        start_and_wait(&st, op);
        ex_operation_destroy(op);
    }
    if (heap) ex_deallocate(a, storage, s->op_size, s->op_align);
    ex_sender_release(s);
    (void)ex_run_loop_destroy(&st.loop);
    return res;
}

ex_result ex_sync_wait_with_variant(ex_sender *s) {
    if (!s) return error_result(ex_err(EX_EINVAL, "ex_sync_wait_with_variant: NULL sender"));
    return ex_sync_wait(ex_into_variant(s));
}

void ex_result_destroy(ex_result *r) {
    if (!r) return;
    if (r->nested) ex_deallocate(r->nested_alloc, r->nested, r->nested_size, alignof(ex_value));
    r->nested = NULL;
    r->nested_size = 0;
}
