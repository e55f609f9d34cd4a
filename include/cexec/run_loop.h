/* SPDX-License-Identifier: MIT */
/* cexec/run_loop.h - the run loop execution resource ([exec.run.loop]).
 *
 * A multi-producer, single-consumer FIFO of intrusive work items.  Scheduling
 * onto it allocates nothing: the work item lives in the schedule operation. */
#ifndef CEXEC_RUN_LOOP_H
#define CEXEC_RUN_LOOP_H

#include <pthread.h>
#include <cexec/types.h>
#include <cexec/detail/timer_heap.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ex_run_loop_state {
    EX_RUN_LOOP_STARTING,
    EX_RUN_LOOP_RUNNING,
    EX_RUN_LOOP_FINISHING
} ex_run_loop_state;

typedef struct ex_run_loop {
    /* private */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ex_work *head, *tail;
    uint64_t count;       /* written under mu, read without it (an empty loop costs no lock) */
    ex_run_loop_state state;
    const void *runner;   /* thread inside run(), for dispatch */
    uint32_t in_run;      /* run() has not returned: destroy is EX_EBUSY */
    exi_timer_heap timers;  /* armed timers (cexec/timer.h), under mu */
    uint64_t armed;       /* timers.count, also read without mu */
    struct ex_clock *clock;  /* the timers' clock; NULL: CLOCK_MONOTONIC */
} ex_run_loop;

/* Initialises an empty loop in the starting state.  EX_EAGAIN if the
 * mutex or condition variable cannot be created. */
ex_error ex_run_loop_init(ex_run_loop *loop);

/* As ex_run_loop_init, with the loop's timers on clock (cexec/
 * virtual_clock.h; NULL: CLOCK_MONOTONIC, as ex_run_loop_init): run()
 * then never waits for a deadline, and an advance of the clock queues
 * each due timer as an item, which run() and run_one fire in queue order.
 * The clock must outlive the loop.  EX_EINVAL for a NULL loop; EX_ENOMEM;
 * as ex_run_loop_init. */
ex_error ex_run_loop_init_clock(ex_run_loop *loop, ex_clock *clock);

/* Runs items in FIFO order on the calling thread until finish() was called
 * and the queue is empty.  Returns EX_EINVAL when run() is already under way
 * on any thread, finished or not (the wording's precondition: state is
 * starting).  A loop that was finished before run() drains its queue and
 * returns. */
ex_error ex_run_loop_run(ex_run_loop *loop);

/* Moves the loop to finishing; run() returns once the queue is empty.
 * Thread-safe. */
void ex_run_loop_finish(ex_run_loop *loop);

/* Appends an item.  Thread-safe; synchronises with the run() that executes
 * it.  For authors of operations that queue themselves. */
void ex_run_loop_push(ex_run_loop *loop, ex_work *w);

/* Runs at most one queued item without blocking; returns whether it ran
 * one.  Lets a thread that waits for something else help the loop. */
bool ex_run_loop_run_one(ex_run_loop *loop);

/* The loop's scheduler: schedule() queues the operation; when it runs, it
 * completes with set_stopped if the receiver's stop token has stop
 * requested, else set_value().  Equal schedulers come from the same loop.
 * ex_post queues a work item; ex_dispatch runs it inline when called from
 * the thread inside run(), else queues it.  NULL loop: the invalid handle
 * (vt NULL). */
ex_scheduler ex_run_loop_scheduler(ex_run_loop *loop);

/* Items queued and not yet run (a snapshot; no lock taken). */
size_t ex_run_loop_count(ex_run_loop *loop);

/* Destroys the loop.  EX_EBUSY (and nothing is destroyed) when items are
 * still queued or run() has not returned yet: where C++ calls terminate(),
 * cexec reports the misuse.  "Not returned" includes the time after
 * finish() while run() executes its last items and leaves: destroy returns
 * EX_OK only once run() no longer touches the loop, so a thread that
 * finished the loop may retry on EX_EBUSY (or join the thread in run())
 * and then free the loop's storage.  push, run_one and dispatch calls still
 * under way on other threads are the caller's to end before destroying. */
ex_error ex_run_loop_destroy(ex_run_loop *loop);

#ifdef __cplusplus
}
#endif
#endif
