/* SPDX-License-Identifier: MIT */
/* run_loop.c - [exec.run.loop]: mutex + condition variable around an
 * intrusive FIFO; the schedule operation embeds its work item. */
#include <stdalign.h>
#include <cexec/cexec.h>

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
    loop->in_run = false;
    return ex_ok();
}

void ex_run_loop_push(ex_run_loop *loop, ex_work *w) {
    w->next = NULL;
    pthread_mutex_lock(&loop->mu);
    if (loop->tail) loop->tail->next = w;
    else loop->head = w;
    loop->tail = w;
    loop->count++;
    pthread_cond_signal(&loop->cv);
    pthread_mutex_unlock(&loop->mu);
}

/* Caller holds mu. */
static ex_work *take_front(ex_run_loop *loop) {
    ex_work *w = loop->head;
    loop->head = w->next;
    if (!loop->head) loop->tail = NULL;
    loop->count--;
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
    pthread_mutex_lock(&loop->mu);
    if (loop->in_run) {
        pthread_mutex_unlock(&loop->mu);
        return ex_err(EX_EINVAL, "ex_run_loop_run: the loop is already running");
    }
    if (loop->state == EX_RUN_LOOP_STARTING) loop->state = EX_RUN_LOOP_RUNNING;
    loop->runner = exi_thread_id();
    loop->in_run = true;
    pthread_mutex_unlock(&loop->mu);
    for (ex_work *w; (w = pop_front(loop));) w->execute(w);
    /* The last touch of the loop: once in_run is false and the mutex is
     * released, destroy may succeed and the storage may go away. */
    pthread_mutex_lock(&loop->mu);
    loop->runner = NULL;
    loop->in_run = false;
    pthread_mutex_unlock(&loop->mu);
    return ex_ok();
}

bool ex_run_loop_run_one(ex_run_loop *loop) {
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

size_t ex_run_loop_count(ex_run_loop *loop) {
    pthread_mutex_lock(&loop->mu);
    size_t n = loop->count;
    pthread_mutex_unlock(&loop->mu);
    return n;
}

ex_error ex_run_loop_destroy(ex_run_loop *loop) {
    pthread_mutex_lock(&loop->mu);
    /* in_run, not state: after finish() the state says finishing while
     * run() may still execute an item and then lock the mutex. */
    bool busy = loop->count != 0 || loop->in_run;
    pthread_mutex_unlock(&loop->mu);
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
    pthread_mutex_lock(&loop->mu);
    bool inside = loop->runner == exi_thread_id();
    pthread_mutex_unlock(&loop->mu);
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
