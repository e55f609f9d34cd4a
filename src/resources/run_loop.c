/* SPDX-License-Identifier: MIT */
/* run_loop.c - [exec.run.loop]: mutex + condition variable around an
 * intrusive FIFO; the schedule operation embeds its work item.
 *
 * The item count, the running flag and the runner are also read without
 * the mutex: run_one on an empty loop, count, dispatch and destroy take no
 * lock (a loop polled for work that rarely comes pays no lock per poll). */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_thread.h"
#include "core/exi_scheduler.h"

ex_error ex_run_loop_init(ex_run_loop *loop) {
    if (pthread_mutex_init(&loop->mu, NULL)) return ex_err(EX_EAGAIN, "ex_run_loop_init: pthread_mutex_init failed");
    if (pthread_cond_init(&loop->cv, NULL)) {
        pthread_mutex_destroy(&loop->mu);
        return ex_err(EX_EAGAIN, "ex_run_loop_init: pthread_cond_init failed");
    }
    loop->head = loop->tail = NULL;
    loop->count = 0;
    loop->state = EX_RUN_LOOP_STARTING;
    loop->runner = NULL;
    loop->in_run = 0;
    return ex_ok();
}

void ex_run_loop_push(ex_run_loop *loop, ex_work *w) {
    w->next = NULL;
    pthread_mutex_lock(&loop->mu);
    if (loop->tail) loop->tail->next = w;
    else loop->head = w;
    loop->tail = w;
    exi_store_rel_u64(&loop->count, exi_load_rlx_u64(&loop->count) + 1);
    pthread_cond_signal(&loop->cv);
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

/* pop-front: blocks until an item or (empty and finishing). */
static ex_work *pop_front(ex_run_loop *loop) {
    pthread_mutex_lock(&loop->mu);
    while (!loop->head && loop->state != EX_RUN_LOOP_FINISHING) pthread_cond_wait(&loop->cv, &loop->mu);
    ex_work *w = loop->head ? take_front(loop) : NULL;
    pthread_mutex_unlock(&loop->mu);
    return w;
}

ex_error ex_run_loop_run(ex_run_loop *loop) {
    uint32_t idle = 0;
    if (!exi_cas_u32(&loop->in_run, &idle, 1)) return ex_err(EX_EINVAL, "ex_run_loop_run: the loop is already running");
    pthread_mutex_lock(&loop->mu);
    if (loop->state == EX_RUN_LOOP_STARTING) loop->state = EX_RUN_LOOP_RUNNING;
    pthread_mutex_unlock(&loop->mu);
    exi_store_rlx_ptr((void **)&loop->runner, (void *)(uintptr_t)exi_thread_id());
    for (ex_work *w; (w = pop_front(loop));) w->execute(w);
    exi_store_rlx_ptr((void **)&loop->runner, NULL);
    /* The last touch of the loop (the mutex was released before): once
     * in_run is false, destroy may succeed and the storage may go away. */
    exi_store_rel_u32(&loop->in_run, 0);
    return ex_ok();
}

bool ex_run_loop_run_one(ex_run_loop *loop) {
    /* An item pushed just now may be missed, as if this call came first. */
    if (!exi_load_acq_u64(&loop->count)) return false;
    pthread_mutex_lock(&loop->mu);
    ex_work *w = loop->head ? take_front(loop) : NULL;
    pthread_mutex_unlock(&loop->mu);
    if (w) w->execute(w);
    return w != NULL;
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
    bool busy = exi_load_acq_u64(&loop->count) != 0 || exi_load_acq_u32(&loop->in_run);
    if (busy) return ex_err(EX_EBUSY, "ex_run_loop_destroy: work is queued or the loop is running");
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
};

ex_scheduler ex_run_loop_scheduler(ex_run_loop *loop) {
    ex_scheduler s = { loop ? &loop_vt : NULL, loop };  /* NULL: the invalid handle */
    return s;
}
