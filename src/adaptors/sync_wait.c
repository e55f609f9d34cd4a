/* SPDX-License-Identifier: MIT */
/* sync_wait.c - [exec.sync.wait]: run a sender to completion on a run
 * loop driven by the calling thread (its own, below: cheaper than an
 * ex_run_loop when nothing is posted to it, which is most waits). */
#include <sched.h>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_test_hooks.h"
#include "base/exi_thread.h"
#include "core/exi_debug.h"
#include "core/exi_domain.h"
#include "core/exi_env.h"
#include "core/exi_error.h"
#include "core/exi_scheduler.h"
#include "core/exi_value.h"
#include "base/exi_worker.h"
#include "resources/exi_pool.h"
#include "resources/exi_single_thread_context.h"
#include "resources/exi_timer_op.h"

/* The loop: sync_wait's own run loop ([exec.run.loop] semantics: FIFO,
 * items run on the waiting thread), built for the common case where
 * nothing is ever posted to it.  It needs no initialisation beyond a few
 * stores and nothing to destroy: posts go on a lock-free stack that only
 * the waiter takes from, and the waiter sleeps on a futex word (flags),
 * not on a mutex and condition variable.
 *
 * It has a clock (cexec/timer.h): timers wait in a heap under a spin lock
 * (arms and cancels come from any thread and hold it for a heap insert or
 * removal); the waiter fires due ones as it would run an item and sleeps
 * on the futex word until the earliest deadline.  An arm is a post as far
 * as waking goes: it pins, and its unpin sets SYNC_POSTED, so a waiter
 * that looked at the earliest deadline before the arm does not sleep past
 * it.  When the wait ends, timers already due fire and the others
 * complete stopped, as ex_run_loop_finish does.
 *
 * sync_state.flags, the futex word: */
#define SYNC_DONE 1u      /* the operation completed (the result is written) */
#define SYNC_SLEEPING 2u  /* the waiter may sleep on the word: wake it (set once) */
#define SYNC_POSTED 4u    /* posted since the waiter last looked: set by posters, cleared by the waiter */
#define SYNC_PIN 8u       /* a poster inside loop_post: counted from this bit up */

typedef struct sync_state {
    void *posted;         /* ex_work *: items posted, newest first (pushed by anyone) */
    ex_work *ready;       /* the waiter's: items taken from posted, oldest first */
    const void *runner;   /* the waiter's thread id while it runs a loop item, else NULL */
    uint32_t flags;       /* SYNC_DONE | SYNC_SLEEPING | SYNC_POSTED | posters * SYNC_PIN */
    uint32_t finished;    /* set by a completion that saw SYNC_SLEEPING, after its wake-up */
    bool done_here;       /* completed on the waiter's own thread while it was awake (complete) */
    ex_env_pair env;      /* get_scheduler and get_delegation_scheduler: the loop */
    ex_result *res;
    uint32_t timer_lock;  /* 1 while someone holds the heap */
    uint64_t earliest;    /* the earliest armed deadline, NO_TIMER if none (stored under the lock) */
    exi_timer_heap timers;
} sync_state;

#define NO_TIMER ((uint64_t)INT64_MAX)

void (*exi_sync_sleep_hook)(void);
void (*exi_sync_cancel_hook)(void);

static void futex_wake(uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* Sleeps while *word == seen, until woken or until the CLOCK_MONOTONIC
 * deadline (NO_TIMER: none). */
static void futex_wait_until(uint32_t *word, uint32_t seen, uint64_t deadline) {
    if (deadline == NO_TIMER) {
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
        return;
    }
    struct timespec at = { (time_t)(deadline / EX_NS_PER_S), (long)(deadline % EX_NS_PER_S) };
    syscall(SYS_futex, word, FUTEX_WAIT_BITSET_PRIVATE, seen, &at, NULL, FUTEX_BITSET_MATCH_ANY);
}

/* From any thread while the wait lasts.  The pin keeps the waiter from
 * returning (and st from going away) until the poster is done with st.
 * The unpin sets SYNC_POSTED in the same read-modify-write and reads
 * SYNC_SLEEPING, after the push: a waiter that cleared SYNC_POSTED before
 * looking for items either finds the item or sleeps on a word that no
 * longer holds the value it compares (model/syncloop.pml).  The pin alone
 * would not do: it comes and goes, and a waiter that read the word before
 * a whole post slept on the same value again and missed its wake-up.  The
 * wake-up comes after the unpin; st may be gone by then, and a futex
 * wake-up at a stale address is a system call that touches no memory
 * (and wakes nobody not ready for a spurious wake-up). */
static void unpin_posted(sync_state *st) {
    uint32_t old = exi_load_rlx_u32(&st->flags);
    while (!exi_cas_u32(&st->flags, &old, (old | SYNC_POSTED) - SYNC_PIN)) {}
    if (old & SYNC_SLEEPING) futex_wake(&st->flags);
}

static void loop_post(sync_state *st, ex_work *w) {
    (void)exi_faa_u32(&st->flags, SYNC_PIN);
    void *head = exi_load_rlx_ptr(&st->posted);
    do w->next = head;
    while (!exi_cas_ptr(&st->posted, &head, w));
    unpin_posted(st);
}

/* The waiter: moves what was posted to `ready` (empty), oldest first;
 * whether there was anything. */
static bool loop_refill(sync_state *st) {
    ex_work *w = NULL;
    for (ex_work *newest = exi_fas_ptr(&st->posted, NULL); newest;) {
        ex_work *older = newest->next;
        newest->next = w;
        w = newest;
        newest = older;
    }
    st->ready = w;
    return w != NULL;
}

/* The waiter: the oldest item, or NULL.  `ready` holds what an earlier
 * refill found; anything posted since is newer. */
static ex_work *loop_take(sync_state *st) {
    ex_work *w = st->ready;
    if (!w) {
        if (!exi_load_rlx_ptr(&st->posted) || !loop_refill(st)) return NULL;
        w = st->ready;
    }
    st->ready = w->next;
    return w;
}

/* The waiter: runs the oldest item; false when there is none. */
static bool loop_run_one(sync_state *st) {
    ex_work *w = loop_take(st);
    if (!w) return false;
    const void *outer = st->runner;  /* an item may wait in this loop again */
    exi_store_rlx_ptr((void **)&st->runner, (void *)(uintptr_t)exi_thread_id());
    w->execute(w);
    exi_store_rlx_ptr((void **)&st->runner, (void *)(uintptr_t)outer);
    return true;
}

/* ------------------------------------------------------------ the timers */

static void timers_lock(sync_state *st) {
    for (unsigned spins = 0;; spins++) {
        uint32_t free_ = 0;
        if (!exi_load_rlx_u32(&st->timer_lock) && exi_cas_u32(&st->timer_lock, &free_, 1)) return;
        if (spins < 64) exi_pause();
        else sched_yield();  /* the holder may be descheduled: a heap update is short */
    }
}

static void timers_unlock(sync_state *st) { exi_store_rel_u32(&st->timer_lock, 0); }

/* Under the lock. */
static void timers_take(sync_state *st, exi_timer *t) {
    exi_timer_heap_remove(&st->timers, t);
    exi_timer *min = exi_timer_heap_min(&st->timers);
    exi_store_rel_u64(&st->earliest, min ? (uint64_t)min->deadline : NO_TIMER);
}

/* From any thread, in the timer's start.  Pinned like a post: once the
 * timer is in the heap it may complete (and the wait end) at any moment,
 * and the wake-up still reads st. */
static enum exi_timer_arm sloop_arm(void *resource, exi_timer_op *op) {
    sync_state *st = resource;
    (void)exi_faa_u32(&st->flags, SYNC_PIN);
    timers_lock(st);
    enum exi_timer_arm a = EXI_TIMER_REFUSED_STOPPED;
    if (!op->cancel_requested) {
        exi_timer_heap_insert(&st->timers, &op->node);
        exi_store_rel_u64(&st->earliest, (uint64_t)exi_timer_heap_min(&st->timers)->deadline);
        a = EXI_TIMER_ARMED;
    }
    timers_unlock(st);
    unpin_posted(st);
    return a;
}

/* From the stop callback's thread.  Pinned like an arm: the timer need
 * not belong to the waited operation (a spawned one still armed when it
 * completed), so once it is out of the heap the wait may see nothing
 * left and end, while this thread still holds st's lock.  The unpin is
 * the last access. */
static bool sloop_cancel(void *resource, exi_timer_op *op) {
    sync_state *st = resource;
    (void)exi_faa_u32(&st->flags, SYNC_PIN);
    timers_lock(st);
    bool armed = op->node.in_heap;
    if (armed) timers_take(st, &op->node);
    else op->cancel_requested = true;
    void (*hook)(void) = exi_load_rlx_ptr((void *const *)&exi_sync_cancel_hook);
    if (hook) hook();
    timers_unlock(st);
    (void)exi_faa_u32(&st->flags, (uint32_t)-SYNC_PIN);
    return armed;
}

static const exi_timer_service_vtable sloop_timers = { sloop_arm, sloop_cancel };

/* The waiter: takes the earliest timer if it is due (or, finishing, in
 * any case; *due says which); NULL if none. */
static exi_timer *timers_take_due(sync_state *st, bool finishing, bool *due) {
    uint64_t e = exi_load_acq_u64(&st->earliest);
    if (e == NO_TIMER) return NULL;
    int64_t now = ex_now();
    if (!finishing && (int64_t)e > now) return NULL;
    timers_lock(st);
    exi_timer *t = exi_timer_heap_min(&st->timers);
    if (t && (finishing || t->deadline <= now)) timers_take(st, t);
    else t = NULL;
    timers_unlock(st);
    if (t) *due = t->deadline <= now;
    return t;
}

/* The waiter: completes a timer it took, due, on this thread as the loop
 * runs an item. */
static void timer_fire_here(sync_state *st, exi_timer *t) {
    const void *outer = st->runner;
    exi_store_rlx_ptr((void **)&st->runner, (void *)(uintptr_t)exi_thread_id());
    exi_timer_fire(t);
    exi_store_rlx_ptr((void **)&st->runner, (void *)(uintptr_t)outer);
}

/* The waiter: fires the earliest timer if it is due; whether it did. */
static bool timers_fire_one(sync_state *st) {
    bool due;
    exi_timer *t = timers_take_due(st, false, &due);
    if (t) timer_fire_here(st, t);
    return t != NULL;
}

/* The waiter, once the wait is over: the earliest timer left fires if it
 * is due and completes stopped if not; whether there was one. */
static bool timers_finish_one(sync_state *st) {
    bool due;
    exi_timer *t = timers_take_due(st, true, &due);
    if (!t) return false;
    if (due) timer_fire_here(st, t);
    else exi_timer_drop(t);
    return true;
}

/* The wait this thread is in and awake for (start_and_wait sets it
 * around its start and spin, nested waits restore the outer one): a
 * completion on that thread is then a plain store.  A waiter never leaves
 * its thread inside the wait (ex_sync_wait blocks; a task calling it does
 * not suspend there). */
static EXI_TLS sync_state *tls_waiting;

/* Tells the waiting thread.  The last access to st by the completing side:
 * the read-modify-write, or the store of `finished` when the waiter may be
 * asleep (it waits for that store before it returns).  On the waiter's own
 * thread while it is awake in its loop, the flag it reads first instead: a
 * lent caller runs its request itself, and the locked instruction was a
 * twentieth of a small request's cost. */
static void complete(sync_state *st) {
    if (tls_waiting == st) {
        st->done_here = true;
        return;
    }
    if (!(exi_faa_u32(&st->flags, SYNC_DONE) & SYNC_SLEEPING)) return;
    futex_wake(&st->flags);
    exi_store_rel_u32(&st->finished, 1);
}

static bool completed(sync_state *st) { return st->done_here || (exi_load_acq_u32(&st->flags) & SYNC_DONE); }

/* The waiter, once the operation completed: runs what is still posted and
 * waits for the posters (and, if it slept, the completing side) to be
 * done with st. */
static inline __attribute__((always_inline)) void loop_end(sync_state *st, bool slept) {
    /* Mostly nothing was ever posted or armed: four loads. */
    if (!slept && !st->ready && exi_load_acq_u32(&st->flags) < SYNC_PIN && !exi_load_acq_ptr(&st->posted) &&
        exi_load_acq_u64(&st->earliest) == NO_TIMER)
        return;
    for (;;) {
        while (loop_run_one(st) || timers_finish_one(st)) {}
        if (exi_load_acq_u32(&st->flags) < SYNC_PIN && !exi_load_acq_ptr(&st->posted) &&
            exi_load_acq_u64(&st->earliest) == NO_TIMER)
            break;
        exi_pause();
    }
    if (slept)
        while (!exi_load_acq_u32(&st->finished)) exi_pause();
}

/* The waiter, with nothing else to do: runs the loop's items and due
 * timers, sleeping on the futex word while there are none (until the
 * earliest deadline), until the operation completed.  Each look for items
 * and at the earliest deadline first clears SYNC_POSTED; the sleep
 * compares the word as that left it: a post or an arm since then set
 * SYNC_POSTED again (a completion sets SYNC_DONE), so the word differs and
 * the sleep ends at once. */
static void run_loop_to_end(sync_state *st) {
    uint32_t f = exi_load_acq_u32(&st->flags) | (st->done_here ? SYNC_DONE : 0);
    bool slept = false;
    if (!(f & SYNC_DONE)) {
        f = exi_fas_or_u32(&st->flags, SYNC_SLEEPING) | SYNC_SLEEPING;
        slept = !(f & SYNC_DONE);  /* then complete() sees SYNC_SLEEPING: it stores `finished` */
    }
    while (!(f & SYNC_DONE)) {
        f = exi_fas_and_u32(&st->flags, ~SYNC_POSTED) & ~SYNC_POSTED;
        if (f & SYNC_DONE) break;
        if (loop_refill(st)) {
            while (loop_run_one(st)) {}
        } else if (!timers_fire_one(st)) {
            void (*hook)(void) = exi_load_rlx_ptr((void *const *)&exi_sync_sleep_hook);
            if (hook) hook();
            futex_wait_until(&st->flags, f, exi_load_acq_u64(&st->earliest));
        }
        f = exi_load_acq_u32(&st->flags);
    }
    loop_end(st, slept);
}

/* ------------------------------------------------------- the loop's scheduler */

static void sloop_start(ex_operation *op) {
    exi_queued_op *o = (exi_queued_op *)op;
    loop_post(o->resource, &o->work);
}

static const ex_operation_vtable sloop_op_vt = { sloop_start, NULL };

static ex_error sloop_connect_at(void *self, ex_timer_when when, ex_receiver r, void *storage) {
    exi_timer_op_init(storage, &sloop_timers, self, NULL, when, r);
    return ex_ok();
}

static ex_error sloop_connect(void *self, ex_receiver r, void *storage) {
    exi_queued_op_init(storage, &sloop_op_vt, self, r);
    return ex_ok();
}

static ex_error sloop_post(void *self, ex_work *w) {
    loop_post(self, w);
    return ex_ok();
}

static ex_error sloop_dispatch(void *self, ex_work *w) {
    sync_state *st = self;
    /* Only the waiter stores its own id there: a stale read is never it. */
    if (exi_load_rlx_ptr((void *const *)&st->runner) == (const void *)exi_thread_id()) w->execute(w);
    else loop_post(st, w);
    return ex_ok();
}

/* Named as ex_run_loop's: it is sync_wait's run loop. */
static const ex_scheduler_vtable sloop_vt = {
    .name = "run_loop",
    .schedule_op_size = sizeof(exi_queued_op),
    .schedule_op_align = alignof(exi_queued_op),
    .schedule_flags = EX_SIGS_STOPPED,
    .connect_schedule = sloop_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .equal = NULL,
    .post = sloop_post,
    .dispatch = sloop_dispatch,
    .timer_op_size = sizeof(exi_timer_op),
    .timer_op_align = alignof(exi_timer_op),
    .connect_schedule_at = sloop_connect_at,
};

/* ---------------------------------------------------------------- receiver */

static void sync_set_value(void *self, const ex_value *v, size_t n) {
    sync_state *st = self;
    ex_result *r = st->res;
    if (n > EX_MAX_ARITY) {
        r->disposition = EX_DISP_ERROR;
        r->error = ex_err(EX_EINVAL, "ex_sync_wait: more than EX_MAX_ARITY values");
    } else {
        /* The allocator is for tuple contents only (flat values are copied as they are). */
        const ex_allocator *a = exi_values_flat(v, n) ? NULL : ex_default_allocator();
        r->nested_alloc = a;
        ex_error e = exi_values_copy(r->values, v, n, a, &r->nested, &r->nested_size);
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

/* A result with no outcome yet.  Only what a reader may look at: values
 * beyond n are left as they are (clearing them all was a twentieth of a
 * short wait's cost). */
static void result_clear(ex_result *r) {
    r->disposition = (ex_disposition)0;
    r->n = 0;
    r->error = ex_ok();
    r->nested = NULL;
    r->nested_size = 0;
    r->nested_alloc = NULL;
}

static ex_result error_result(ex_error e) {
    ex_result r;
    result_clear(&r);
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
 * on the loop's futex word, to save the cost of a wake-up round trip.
 *
 * On a pool agent it keeps running the loop's items and the pool's work
 * instead of blocking, so a task that waits for work on its own pool
 * cannot deadlock it. */
static void start_and_wait(sync_state *st, ex_operation *op) {
    sync_state *outer_wait = tls_waiting;
    tls_waiting = st;
    if (exi_worker_index() < 0) {
        exi_lend_state outer;
        exi_lend_open(&outer);
        ex_start(op);
        for (unsigned spin = 0; spin < SYNC_WAIT_SPIN && !completed(st); spin++) {
            if (exi_lend_run_one() || loop_run_one(st) || timers_fire_one(st)) spin = 0;
            else if (completed(st)) break;  /* by a poll that left nothing pending: no pause */
            else if (spin < SYNC_WAIT_PAUSE) exi_pause();
            else sched_yield();  /* cores may all be busy with the work we wait for: let it run */
        }
        /* Nothing is left in the slot that only this thread would run:
         * close hands what remains to a worker before this thread sleeps. */
        exi_lend_close(&outer);
        tls_waiting = outer_wait;  /* it may sleep from here: completions tell it through the futex word */
        run_loop_to_end(st);
        return;
    }
    ex_start(op);
    unsigned idle = 0;
    while (!completed(st)) {
        if (loop_run_one(st) || timers_fire_one(st) || exi_worker_help_one()) {
            idle = 0;
        } else if (++idle < 64) {
            exi_pause();
        } else {
            sched_yield();
        }
    }
    tls_waiting = outer_wait;
    loop_end(st, false);
}

/* Operation states up to this size live on the caller's stack. */
#define SYNC_WAIT_STACK_OP 1024

ex_result ex_sync_wait(ex_sender *s) {
    if (!s) return error_result(ex_err(EX_EINVAL, "ex_sync_wait: NULL sender"));
    if (exi_sender_dead(s)) exi_debug_dead_sender(s, "ex_sync_wait");
    if (s->sigs.nvalues <= 1 && s->vt->attrs) {
        /* apply_sender: the domain the sender completes in may run it. */
        ex_result applied;
        result_clear(&applied);
        if (exi_apply_sync_wait(s, &applied)) {
            ex_sender_release(s);
            return applied;
        }
    }
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
    result_clear(&res);
    sync_state st;
    st.posted = NULL;
    st.ready = NULL;
    st.runner = NULL;
    st.flags = 0;
    st.finished = 0;
    st.done_here = false;
    st.res = &res;
    st.timer_lock = 0;
    st.earliest = NO_TIMER;
    exi_timer_heap_init(&st.timers);
    const ex_scheduler loop = { &sloop_vt, &st };
    exi_env_pair_init_root_scheds(&st.env, loop);

    _Alignas(max_align_t) unsigned char stack_op[SYNC_WAIT_STACK_OP];
    void *storage = stack_op;
    bool heap = s->op_size > sizeof stack_op || s->op_align > alignof(max_align_t);
    const ex_allocator *a = heap ? ex_default_allocator() : NULL;
    if (heap && !(storage = ex_allocate(a, s->op_size, s->op_align))) {
        ex_sender_release(s);
        return error_result(ex_err(EX_ENOMEM, "ex_sync_wait: out of memory for the operation state"));
    }
    ex_receiver r = { &sync_rcvr_vt, &st };
    ex_operation *op;
    ex_error e;
    if (!heap && !(s->op_align & (s->op_align - 1))) {
        /* What ex_connect checks holds: a valid receiver, storage sized
         * and aligned for a valid alignment, a receiver accepting all
         * (its checks were a twentieth of a short wait).  The late
         * domain is known: the environment names only the loop (which
         * has the default), so no connect below asks the environment. */
        exi_late region;
        exi_late_enter_known(&region, sloop_vt.domain, loop);
        e = ex_connect_child(s, r, storage);
        exi_late_leave(&region);
        op = storage;
    } else {
        e = ex_connect(s, r, storage, heap ? s->op_size : sizeof stack_op, &op);
    }
    if (e.code) {
        res = error_result(e);
    } else {
        start_and_wait(&st, op);
        ex_operation_destroy(op);
    }
    if (heap) ex_deallocate(a, storage, s->op_size, s->op_align);
    ex_sender_release(s);
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
    if (r->disposition == EX_DISP_ERROR) exi_error_drop(r->error);  /* the result held its reference */
    r->error = ex_ok();
}
