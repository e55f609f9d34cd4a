/* SPDX-License-Identifier: MIT */
/* manual_scheduler.c - cexec/manual_scheduler.h: a FIFO of intrusive work
 * items and a timer heap under one mutex, run by whoever calls a run
 * function.
 *
 * Everything is under the mutex, items run outside it: a test tool is no
 * hot path, and one lock keeps the order easy to state.  A timer whose
 * deadline has passed leaves the heap for the queue's tail (its
 * operation's work item is the queued item), so due timers and items share
 * one order.  A stop request then finds the timer in the heap or in the
 * queue and unlinks it (a walk of the queue: tests queue few items). */
#include <stdalign.h>
#include <cexec/cexec.h>
#include <cexec/manual_scheduler.h>

#include "base/exi_thread.h"
#include "core/exi_clock.h"
#include "core/exi_scheduler.h"
#include "resources/exi_timer_op.h"

/* The one place the scheduler reads the time: a timer is due once this
 * reaches its deadline.  m->clock: a virtual clock, or NULL
 * (CLOCK_MONOTONIC). */
static int64_t manual_now(const ex_manual_scheduler *m) { return exi_clock_now(m->clock); }

static const exi_clock_client_vt manual_clock_client;

ex_error ex_manual_scheduler_init_clock(ex_manual_scheduler *m, ex_clock *clock) {
    if (!m) return ex_err(EX_EINVAL, "ex_manual_scheduler_init_clock: NULL scheduler");
    ex_error e = ex_manual_scheduler_init(m);
    if (e.code || !clock) return e;
    if (exi_clock_attach(clock, m, &manual_clock_client).code) {
        pthread_mutex_destroy(&m->mu);
        return ex_err(EX_ENOMEM, "ex_manual_scheduler_init_clock: out of memory to attach the scheduler to its clock");
    }
    m->clock = clock;
    return ex_ok();
}

ex_error ex_manual_scheduler_init(ex_manual_scheduler *m) {
    if (!m) return ex_err(EX_EINVAL, "ex_manual_scheduler_init: NULL scheduler");
    if (pthread_mutex_init(&m->mu, NULL))
        return ex_err(EX_EAGAIN, "ex_manual_scheduler_init: pthread_mutex_init failed");
    m->head = m->tail = NULL;
    m->queued = 0;
    m->batch = 0;
    exi_timer_heap_init(&m->timers);
    m->runner = NULL;
    m->clock = NULL;
    m->shut_down = false;
    return ex_ok();
}

/* ------------------------------------------------- the queue (under mu) */

static void append(ex_manual_scheduler *m, ex_work *w) {
    w->next = NULL;
    if (m->tail) m->tail->next = w;
    else m->head = w;
    m->tail = w;
    m->queued++;
}

static ex_work *take_front(ex_manual_scheduler *m) {
    ex_work *w = m->head;
    m->head = w->next;
    if (!m->head) m->tail = NULL;
    m->queued--;
    if (m->batch) m->batch--;  /* the round's items are the queue's first `batch` */
    return w;
}

/* Unlinks w if it is queued. */
static bool unlink_queued(ex_manual_scheduler *m, ex_work *w) {
    ex_work *prev = NULL;
    size_t pos = 0;
    for (ex_work *it = m->head; it; prev = it, it = it->next, pos++) {
        if (it != w) continue;
        if (prev) prev->next = it->next;
        else m->head = it->next;
        if (m->tail == it) m->tail = prev;
        m->queued--;
        if (pos < m->batch) m->batch--;  /* the round loses it, and runs no later item instead */
        return true;
    }
    return false;
}

/* The look at the clock: every timer due by now joins the tail, in
 * deadline order (the heap's order, which breaks ties by arming order). */
static void queue_due_timers(ex_manual_scheduler *m) {
    int64_t now = manual_now(m);
    for (exi_timer *t = exi_timer_heap_min(&m->timers); t && t->deadline <= now; t = exi_timer_heap_min(&m->timers)) {
        exi_timer_heap_remove(&m->timers, t);
        append(m, &exi_timer_op_of(t)->work);
    }
}

/* Refuses new work and takes everything queued, then every armed timer in
 * deadline order, as one list (linked by the work items' next). */
static ex_work *close_and_take_all(ex_manual_scheduler *m) {
    m->shut_down = true;
    for (exi_timer *t = exi_timer_heap_min(&m->timers); t; t = exi_timer_heap_min(&m->timers)) {
        exi_timer_heap_remove(&m->timers, t);
        append(m, &exi_timer_op_of(t)->work);
    }
    ex_work *all = m->head;
    m->head = m->tail = NULL;
    m->queued = 0;
    m->batch = 0;
    return all;
}

/* Outside mu: a schedule operation or a timer completes set_stopped. */
static void cancel_all(ex_work *w) {
    while (w) {
        ex_work *next = w->next;  /* the cancel may free w's operation */
        if (w->cancel) w->cancel(w);
        w = next;
    }
}

/* Queues w unless m is shut down. */
static bool submit(ex_manual_scheduler *m, ex_work *w) {
    pthread_mutex_lock(&m->mu);
    bool open = !m->shut_down;
    if (open) append(m, w);
    pthread_mutex_unlock(&m->mu);
    return open;
}

static ex_error refused(void) {
    return ex_err(EX_ESHUTDOWN, "ex_manual_scheduler: the scheduler is shut down");
}

/* -------------------------------------------------------------- running */

/* Makes the calling thread the runner, unless a run call is under way. */
static bool begin_run(ex_manual_scheduler *m) {
    pthread_mutex_lock(&m->mu);
    bool free_ = m->runner == NULL;
    if (free_) m->runner = exi_thread_id();
    pthread_mutex_unlock(&m->mu);
    return free_;
}

/* Ends the run call; returns whether items are still runnable. */
static bool end_run(ex_manual_scheduler *m) {
    pthread_mutex_lock(&m->mu);
    m->runner = NULL;
    m->batch = 0;
    queue_due_timers(m);
    bool more = m->head != NULL;
    pthread_mutex_unlock(&m->mu);
    return more;
}

/* Runs the next item (of the round only, if round_only); whether one ran. */
static bool step(ex_manual_scheduler *m, bool round_only) {
    ex_work *w = NULL;
    pthread_mutex_lock(&m->mu);
    queue_due_timers(m);
    if (m->head && (!round_only || m->batch)) w = take_front(m);
    pthread_mutex_unlock(&m->mu);
    if (w) w->execute(w);
    return w != NULL;
}

ex_error ex_manual_run(ex_manual_scheduler *m, size_t max_steps, size_t *ran) {
    if (ran) *ran = 0;
    if (!m) return ex_err(EX_EINVAL, "ex_manual_run: NULL scheduler");
    if (!begin_run(m)) return ex_err(EX_EBUSY, "ex_manual_run: another run call is under way");
    size_t n = 0;
    while (n < max_steps && step(m, false)) n++;
    bool more = end_run(m);
    if (ran) *ran = n;
    if (more) return ex_err(EX_EAGAIN, "ex_manual_run: the step limit was reached with items still runnable");
    return ex_ok();
}

bool ex_manual_run_one(ex_manual_scheduler *m) {
    size_t n = 0;
    (void)ex_manual_run(m, 1, &n);
    return n == 1;
}

size_t ex_manual_run_pending(ex_manual_scheduler *m) {
    if (!m || !begin_run(m)) return 0;
    pthread_mutex_lock(&m->mu);
    queue_due_timers(m);
    m->batch = m->queued;
    pthread_mutex_unlock(&m->mu);
    size_t n = 0;
    while (step(m, true)) n++;
    (void)end_run(m);
    return n;
}

size_t ex_manual_run_until_idle(ex_manual_scheduler *m) {
    size_t n = 0;
    (void)ex_manual_run(m, SIZE_MAX, &n);
    return n;
}

size_t ex_manual_pending(ex_manual_scheduler *m) {
    if (!m) return 0;
    pthread_mutex_lock(&m->mu);
    queue_due_timers(m);
    size_t n = m->queued;
    pthread_mutex_unlock(&m->mu);
    return n;
}

size_t ex_manual_timers_armed(ex_manual_scheduler *m) {
    if (!m) return 0;
    pthread_mutex_lock(&m->mu);
    queue_due_timers(m);
    size_t n = m->timers.count;
    pthread_mutex_unlock(&m->mu);
    return n;
}

/* ------------------------------------------------------------ life cycle */

ex_error ex_manual_scheduler_shutdown(ex_manual_scheduler *m) {
    if (!m) return ex_err(EX_EINVAL, "ex_manual_scheduler_shutdown: NULL scheduler");
    pthread_mutex_lock(&m->mu);
    ex_work *all = close_and_take_all(m);
    pthread_mutex_unlock(&m->mu);
    cancel_all(all);
    return ex_ok();
}

ex_error ex_manual_scheduler_destroy(ex_manual_scheduler *m) {
    if (!m) return ex_err(EX_EINVAL, "ex_manual_scheduler_destroy: NULL scheduler");
    pthread_mutex_lock(&m->mu);
    if (m->runner) {
        pthread_mutex_unlock(&m->mu);
        return ex_err(EX_EBUSY, "ex_manual_scheduler_destroy: a run call is under way");
    }
    ex_work *all = close_and_take_all(m);
    pthread_mutex_unlock(&m->mu);
    /* Before the mutex goes: a completion may still submit (refused). */
    cancel_all(all);
    if (m->clock) {
        exi_clock_detach(m->clock, m);  /* waits for an advance that looks at m */
        exi_clock_release(m->clock);
    }
    pthread_mutex_destroy(&m->mu);
    return ex_ok();
}

/* ------------------------------------------------------------ scheduler */

static void manual_start(ex_operation *op) {
    exi_queued_op *o = (exi_queued_op *)op;
    if (!submit(o->resource, &o->work)) ex_set_error(o->r, refused());
}

static const ex_operation_vtable manual_op_vt = { manual_start, NULL };

static ex_error manual_connect(void *self, ex_receiver r, void *storage) {
    exi_queued_op_init(storage, &manual_op_vt, self, r);
    return ex_ok();
}

static ex_error manual_post(void *self, ex_work *w) { return submit(self, w) ? ex_ok() : refused(); }

static ex_error manual_dispatch(void *self, ex_work *w) {
    ex_manual_scheduler *m = self;
    pthread_mutex_lock(&m->mu);
    bool open = !m->shut_down;
    bool inside = m->runner == exi_thread_id();  /* called from an item this thread runs */
    if (open && !inside) append(m, w);
    pthread_mutex_unlock(&m->mu);
    if (!open) return refused();
    if (inside) w->execute(w);
    return ex_ok();
}

/* ---------------------------------------------------------------- timers */

static int64_t deadline_from(int64_t now, ex_timer_when when) {
    if (!when.relative) return when.ns;
    return when.ns > INT64_MAX - now ? INT64_MAX : now + when.ns;
}

/* Arming is a look at the clock: a timer already due joins the queue at
 * once, in deadline order with any other that became due. */
static enum exi_timer_arm manual_arm(void *self, exi_timer_op *op) {
    ex_manual_scheduler *m = self;
    enum exi_timer_arm a = EXI_TIMER_ARMED;
    pthread_mutex_lock(&m->mu);
    if (op->cancel_requested) {
        a = EXI_TIMER_REFUSED_STOPPED;
    } else if (m->shut_down) {
        a = EXI_TIMER_REFUSED_SHUTDOWN;
    } else {
        /* A relative deadline counts from this scheduler's clock, not the
         * start's ex_now(): they differ once the clock is not the system's. */
        op->node.deadline = deadline_from(manual_now(m), op->when);
        exi_timer_heap_insert(&m->timers, &op->node);
        queue_due_timers(m);
    }
    pthread_mutex_unlock(&m->mu);
    return a;
}

static bool manual_cancel(void *self, exi_timer_op *op) {
    ex_manual_scheduler *m = self;
    pthread_mutex_lock(&m->mu);
    bool removed = op->node.in_heap;
    if (removed) exi_timer_heap_remove(&m->timers, &op->node);
    else removed = unlink_queued(m, &op->work);
    if (!removed) op->cancel_requested = true;  /* not armed yet, or taken to run or drop */
    pthread_mutex_unlock(&m->mu);
    return removed;
}

static const exi_timer_service_vtable manual_timers = { manual_arm, manual_cancel };

/* On a virtual clock: an advance moves each timer it reaches to the
 * queue's tail, as a look at the clock would. */
static int64_t clock_earliest(void *self) {
    ex_manual_scheduler *m = self;
    pthread_mutex_lock(&m->mu);
    exi_timer *t = exi_timer_heap_min(&m->timers);
    int64_t d = t ? t->deadline : INT64_MAX;
    pthread_mutex_unlock(&m->mu);
    return d;
}

static bool clock_fire_due(void *self, int64_t now) {
    ex_manual_scheduler *m = self;
    pthread_mutex_lock(&m->mu);
    exi_timer *t = exi_timer_heap_min(&m->timers);
    bool due = t && t->deadline <= now;
    if (due) {
        exi_timer_heap_remove(&m->timers, t);
        append(m, &exi_timer_op_of(t)->work);
    }
    pthread_mutex_unlock(&m->mu);
    return due;
}

static size_t clock_armed(void *self) {
    ex_manual_scheduler *m = self;
    pthread_mutex_lock(&m->mu);
    size_t n = m->timers.count;
    pthread_mutex_unlock(&m->mu);
    return n;
}

static const exi_clock_client_vt manual_clock_client = { clock_earliest, clock_fire_due, clock_armed };

static ex_error manual_connect_at(void *self, ex_timer_when when, ex_receiver r, void *storage) {
    exi_timer_op_init(storage, &manual_timers, self, ((ex_manual_scheduler *)self)->clock, when, r);
    return ex_ok();
}

static const ex_scheduler_vtable manual_vt = {
    .name = "manual_scheduler",
    .schedule_op_size = sizeof(exi_queued_op),
    .schedule_op_align = alignof(exi_queued_op),
    .schedule_flags = EX_SIGS_STOPPED | EX_SIGS_ERROR,
    .connect_schedule = manual_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .equal = NULL,
    .post = manual_post,
    .dispatch = manual_dispatch,
    .timer_op_size = sizeof(exi_timer_op),
    .timer_op_align = alignof(exi_timer_op),
    .connect_schedule_at = manual_connect_at,
};

ex_scheduler ex_manual_scheduler_get(ex_manual_scheduler *m) {
    ex_scheduler s = { m ? &manual_vt : NULL, m };  /* NULL: the invalid handle */
    return s;
}
