/* SPDX-License-Identifier: MIT */
/* run_loop.c - [exec.run.loop]: mutex + condition variable around an
 * intrusive FIFO; the schedule operation embeds its work item.
 *
 * Timers (cexec/timer.h) wait in a heap under the same mutex: run() sleeps
 * on the condition variable (on CLOCK_MONOTONIC) until the earliest
 * deadline, and completes an expired timer as it would run an item.  When
 * the loop finishes, timers already due still fire and the others are
 * dropped (set_stopped): nobody would run the loop to fire them.  On a
 * virtual clock (core/exi_clock.h) run() never waits for a deadline: the
 * clock's advance queues due timers as items.
 *
 * The item count, the running flag and the runner are also read without
 * the mutex: run_one on an empty loop, count, dispatch and destroy take no
 * lock (a loop polled for work that rarely comes pays no lock per poll). */
#include <stdalign.h>
#include <time.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_thread.h"
#include "core/exi_clock.h"
#include "core/exi_scheduler.h"
#include "resources/exi_run_loop.h"

static const exi_clock_client_vt loop_clock_client;

ex_error ex_run_loop_init_clock(ex_run_loop *loop, ex_clock *clock) {
    if (!loop) return ex_err(EX_EINVAL, "ex_run_loop_init_clock: NULL loop");
    ex_error e = ex_run_loop_init(loop);
    if (e.code || !clock) return e;
    e = exi_clock_attach(clock, loop, &loop_clock_client);
    if (e.code) {
        (void)ex_run_loop_destroy(loop);
        return ex_err(EX_ENOMEM, "ex_run_loop_init_clock: out of memory to attach the loop to its clock");
    }
    loop->clock = clock;
    return ex_ok();
}

ex_error ex_run_loop_init(ex_run_loop *loop) {
    if (pthread_mutex_init(&loop->mu, NULL)) return ex_err(EX_EAGAIN, "ex_run_loop_init: pthread_mutex_init failed");
    pthread_condattr_t ca;
    bool cv_ok = !pthread_condattr_init(&ca);
    if (cv_ok) {
        /* Timers sleep until a CLOCK_MONOTONIC deadline. */
        cv_ok = !pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) && !pthread_cond_init(&loop->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    if (!cv_ok) {
        pthread_mutex_destroy(&loop->mu);
        return ex_err(EX_EAGAIN, "ex_run_loop_init: pthread_cond_init failed");
    }
    loop->head = loop->tail = NULL;
    loop->count = 0;
    loop->state = EX_RUN_LOOP_STARTING;
    loop->runner = NULL;
    loop->in_run = 0;
    exi_timer_heap_init(&loop->timers);
    loop->armed = 0;
    loop->clock = NULL;
    return ex_ok();
}

/* Caller holds mu. */
static void push_locked(ex_run_loop *loop, ex_work *w) {
    w->next = NULL;
    if (loop->tail) loop->tail->next = w;
    else loop->head = w;
    loop->tail = w;
    exi_store_rel_u64(&loop->count, exi_load_rlx_u64(&loop->count) + 1);
    pthread_cond_signal(&loop->cv);
}

void ex_run_loop_push(ex_run_loop *loop, ex_work *w) {
    pthread_mutex_lock(&loop->mu);
    push_locked(loop, w);
    pthread_mutex_unlock(&loop->mu);
}

/* Caller holds mu. */
static ex_work *take_front(ex_run_loop *loop) {
    ex_work *w = loop->head;
    loop->head = w->next;
    if (!loop->head) loop->tail = NULL;
    exi_store_rlx_u64(&loop->count, exi_load_rlx_u64(&loop->count) - 1);
    return w;
}

/* Caller holds mu. */
static exi_timer *take_timer(ex_run_loop *loop, exi_timer *t) {
    exi_timer_heap_remove(&loop->timers, t);
    exi_store_rlx_u64(&loop->armed, loop->timers.count);
    return t;
}

/* Caller holds mu: sleeps until signalled or CLOCK_MONOTONIC reaches ns. */
static void wait_until(ex_run_loop *loop, int64_t ns) {
    struct timespec ts = { (time_t)(ns / EX_NS_PER_S), (long)(ns % EX_NS_PER_S) };
    (void)pthread_cond_timedwait(&loop->cv, &loop->mu, &ts);
}

/* What run() does next: an item, a timer to fire or drop, or nothing
 * (finishing, with no item and no timer left).  Blocks until then. */
typedef struct next_step {
    ex_work *item;
    exi_timer *timer;
    bool drop;
} next_step;

static next_step next(ex_run_loop *loop) {
    next_step s = { NULL, NULL, false };
    pthread_mutex_lock(&loop->mu);
    for (;;) {
        if (loop->head) {
            s.item = take_front(loop);
            break;
        }
        exi_timer *t = exi_timer_heap_min(&loop->timers);
        bool finishing = loop->state == EX_RUN_LOOP_FINISHING;
        if (t) {
            bool due = t->deadline <= exi_clock_now(loop->clock);
            if (due || finishing) {
                s.timer = take_timer(loop, t);
                s.drop = !due;
                break;
            }
            if (exi_clock_is_real(loop->clock)) wait_until(loop, t->deadline);
            else pthread_cond_wait(&loop->cv, &loop->mu);  /* the clock's advance queues it */
        } else if (finishing) {
            break;
        } else {
            pthread_cond_wait(&loop->cv, &loop->mu);
        }
    }
    pthread_mutex_unlock(&loop->mu);
    return s;
}

/* Runs what next() chose; false when there was nothing. */
static bool run_step(next_step s) {
    if (s.item) s.item->execute(s.item);
    else if (s.timer && s.drop) exi_timer_drop(s.timer);
    else if (s.timer) exi_timer_fire(s.timer);
    return s.item || s.timer;
}

ex_error ex_run_loop_run(ex_run_loop *loop) {
    uint32_t idle = 0;
    if (!exi_cas_u32(&loop->in_run, &idle, 1)) return ex_err(EX_EINVAL, "ex_run_loop_run: the loop is already running");
    pthread_mutex_lock(&loop->mu);
    if (loop->state == EX_RUN_LOOP_STARTING) loop->state = EX_RUN_LOOP_RUNNING;
    pthread_mutex_unlock(&loop->mu);
    exi_store_rlx_ptr((void **)&loop->runner, (void *)(uintptr_t)exi_thread_id());
    while (run_step(next(loop))) {
    }
    exi_store_rlx_ptr((void **)&loop->runner, NULL);
    /* The last touch of the loop (the mutex was released before): once
     * in_run is false, destroy may succeed and the storage may go away. */
    exi_store_rel_u32(&loop->in_run, 0);
    return ex_ok();
}

bool ex_run_loop_run_one(ex_run_loop *loop) {
    /* An item pushed just now may be missed, as if this call came first. */
    if (!exi_load_acq_u64(&loop->count) && !exi_load_rlx_u64(&loop->armed)) return false;
    next_step s = { NULL, NULL, false };
    pthread_mutex_lock(&loop->mu);
    exi_timer *t = exi_timer_heap_min(&loop->timers);
    if (loop->head) s.item = take_front(loop);
    else if (t && t->deadline <= exi_clock_now(loop->clock)) s.timer = take_timer(loop, t);
    pthread_mutex_unlock(&loop->mu);
    return run_step(s);
}

void ex_run_loop_finish(ex_run_loop *loop) {
    pthread_mutex_lock(&loop->mu);
    loop->state = EX_RUN_LOOP_FINISHING;
    pthread_cond_broadcast(&loop->cv);
    pthread_mutex_unlock(&loop->mu);
}

size_t ex_run_loop_count(ex_run_loop *loop) { return (size_t)exi_load_acq_u64(&loop->count); }

ex_error ex_run_loop_destroy(ex_run_loop *loop) {
    /* in_run, not state: after finish() the state says finishing while
     * run() may still execute an item and then lock the mutex.  Its
     * release store is run()'s last touch of the loop. */
    bool busy = exi_load_acq_u64(&loop->count) != 0 || exi_load_acq_u32(&loop->in_run) ||
                exi_load_acq_u64(&loop->armed) != 0;
    if (busy) return ex_err(EX_EBUSY, "ex_run_loop_destroy: work is queued, timers are armed or the loop is running");
    if (loop->clock) {
        exi_clock_detach(loop->clock, loop);
        exi_clock_release(loop->clock);
    }
    pthread_cond_destroy(&loop->cv);
    pthread_mutex_destroy(&loop->mu);
    return ex_ok();
}

/* ------------------------------------------------------------ scheduler */

static void loop_start(ex_operation *op) {
    exi_queued_op *o = (exi_queued_op *)op;
    ex_run_loop_push(o->resource, &o->work);
}

static const ex_operation_vtable loop_op_vt = { loop_start, NULL };

static ex_error loop_connect(void *self, ex_receiver r, void *storage) {
    exi_queued_op_init(storage, &loop_op_vt, self, r);
    return ex_ok();
}

static ex_error loop_post(void *self, ex_work *w) {
    ex_run_loop_push(self, w);
    return ex_ok();
}

static ex_error loop_dispatch(void *self, ex_work *w) {
    ex_run_loop *loop = self;
    /* Only this thread stores its own id there: a stale read is never it. */
    bool inside = exi_load_rlx_ptr((void *const *)&loop->runner) == (const void *)exi_thread_id();
    if (inside) w->execute(w);
    else ex_run_loop_push(loop, w);
    return ex_ok();
}

/* ---------------------------------------------------------------- timers */

enum exi_timer_arm exi_run_loop_arm(void *resource, exi_timer_op *op) {
    ex_run_loop *loop = resource;
    enum exi_timer_arm a = EXI_TIMER_ARMED;
    pthread_mutex_lock(&loop->mu);
    if (op->cancel_requested || loop->state == EX_RUN_LOOP_FINISHING) {
        a = EXI_TIMER_REFUSED_STOPPED;  /* a finishing loop would only drop it */
    } else {
        exi_timer_heap_insert(&loop->timers, &op->node);
        exi_store_rlx_u64(&loop->armed, loop->timers.count);
        if (exi_timer_heap_min(&loop->timers) == &op->node) pthread_cond_signal(&loop->cv);  /* an earlier wake-up */
    }
    pthread_mutex_unlock(&loop->mu);
    return a;
}

bool exi_run_loop_cancel(void *resource, exi_timer_op *op) {
    ex_run_loop *loop = resource;
    pthread_mutex_lock(&loop->mu);
    bool armed = op->node.in_heap;
    if (armed) take_timer(loop, &op->node);
    else op->cancel_requested = true;
    pthread_mutex_unlock(&loop->mu);
    return armed;
}

static const exi_timer_service_vtable loop_timers = { exi_run_loop_arm, exi_run_loop_cancel };

/* On a virtual clock. */
static int64_t loop_clock_earliest(void *resource) {
    ex_run_loop *loop = resource;
    pthread_mutex_lock(&loop->mu);
    exi_timer *t = exi_timer_heap_min(&loop->timers);
    int64_t d = t ? t->deadline : INT64_MAX;
    pthread_mutex_unlock(&loop->mu);
    return d;
}

/* The due timer becomes an item: run() fires it in queue order. */
static bool loop_clock_fire_due(void *resource, int64_t now) {
    ex_run_loop *loop = resource;
    pthread_mutex_lock(&loop->mu);
    exi_timer *t = exi_timer_heap_min(&loop->timers);
    bool due = t && t->deadline <= now;
    if (due) push_locked(loop, &exi_timer_op_of(take_timer(loop, t))->work);
    pthread_mutex_unlock(&loop->mu);
    return due;
}

static size_t loop_clock_armed(void *resource) {
    return (size_t)exi_load_acq_u64(&((ex_run_loop *)resource)->armed);
}

static const exi_clock_client_vt loop_clock_client = { loop_clock_earliest, loop_clock_fire_due, loop_clock_armed };

static ex_error loop_connect_at(void *self, ex_timer_when when, ex_receiver r, void *storage) {
    exi_timer_op_init(storage, &loop_timers, self, ((ex_run_loop *)self)->clock, when, r);
    return ex_ok();
}

static const ex_scheduler_vtable loop_vt = {
    .name = "run_loop",
    .schedule_op_size = sizeof(exi_queued_op),
    .schedule_op_align = alignof(exi_queued_op),
    .schedule_flags = EX_SIGS_STOPPED,
    .connect_schedule = loop_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .equal = NULL,
    .post = loop_post,
    .dispatch = loop_dispatch,
    .timer_op_size = sizeof(exi_timer_op),
    .timer_op_align = alignof(exi_timer_op),
    .connect_schedule_at = loop_connect_at,
};

ex_scheduler ex_run_loop_scheduler(ex_run_loop *loop) {
    ex_scheduler s = { loop ? &loop_vt : NULL, loop };  /* NULL: the invalid handle */
    return s;
}
