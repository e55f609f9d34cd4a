/* SPDX-License-Identifier: MIT */
/* cexec/manual_scheduler.h - a scheduler whose work runs only when a test
 * says so.
 *
 * Work scheduled on a manual scheduler (ex_schedule, ex_post, ex_dispatch
 * from another thread, ex_schedule_at / ex_schedule_after) waits in one
 * FIFO queue until the test calls a run function: ex_manual_run_one (one
 * item), ex_manual_run_pending (the items queued when it was called),
 * ex_manual_run_until_idle (until nothing is runnable) or ex_manual_run
 * (the same with a step limit).  Items run on the thread that calls the run
 * function, one at a time, in the order they were queued.  Nothing runs
 * behind the test's back, so a test can check the state of a pipeline
 * between any two steps, and decide where a stop request or a shutdown
 * lands.  Scheduling allocates nothing (the item lives in the operation
 * state) and is thread-safe: work may arrive from a pool's workers while
 * the test thread runs the scheduler.
 *
 * Order.  Schedule operations and posted items join the queue's tail when
 * they are started or posted.  A timer joins the tail once its deadline
 * has passed and the scheduler looks at the clock: at each step of a run
 * function, in ex_manual_pending and ex_manual_timers_armed, and when it
 * is armed (a deadline already
 * past queues it at once, like ex_schedule).  Timers that become due at
 * the same look join in deadline order, equal deadlines in the order they
 * were armed.  A timer whose deadline has not passed is "armed", not
 * pending (ex_manual_timers_armed); no run function waits for it.
 *
 * Stop requests.  A schedule operation whose receiver's stop was requested
 * stays queued and completes with set_stopped when it runs (as on a run
 * loop or a pool).  A timer is removed at once by a stop request and
 * completes with set_stopped on the requesting thread, inside the request
 * (cexec/timer.h), whether it was armed or already queued: exactly one
 * completion either way.
 *
 * Shutdown.  ex_manual_scheduler_shutdown (and destroy) refuse new work
 * with EX_ESHUTDOWN and complete everything queued or armed with
 * set_stopped, as a pool's shutdown does: the code under test sees its
 * resource go away.  To run the queued work first, call
 * ex_manual_run_until_idle before.
 *
 * One runner.  One run call at a time: a run call made while another is
 * under way, on another thread or from inside an item it runs, runs
 * nothing (ex_manual_run says EX_EBUSY).  The test's thread decides what
 * runs and when; a second runner would make the order depend on timing.
 *
 * Use (examples/manual_scheduler.c):
 *
 *     ex_manual_scheduler m;
 *     if (ex_manual_scheduler_init(&m).code) return 1;
 *     ex_scheduler sch = ex_manual_scheduler_get(&m);
 *
 *     ex_sender *first = ex_then(ex_schedule(sch), count_step, &steps, EX_SIG0, EX_SIG0);
 *     ex_sender *second = ex_then(ex_schedule(sch), count_step, &steps, EX_SIG0, EX_SIG0);
 *     start(first, &op[0]);
 *     start(second, &op[1]);
 *     check(steps == 0, "nothing runs until the test runs it");
 *     check(ex_manual_pending(&m) == 2, "two items wait");
 *
 *     check(ex_manual_run_one(&m), "one item ran");
 *     check(steps == 1 && op[0].values == 1 && op[1].values == 0, "the first one, in FIFO order");
 *     check(ex_manual_run_until_idle(&m) == 1, "the second one");
 *
 *     check(ex_manual_scheduler_destroy(&m).code == 0, "destroyed");
 *
 * The clock is CLOCK_MONOTONIC (ex_now()), or a virtual clock that the
 * test advances (ex_manual_scheduler_init_clock, cexec/virtual_clock.h):
 * then time stands still until the test moves it, and an advance queues
 * each timer it reaches, in deadline order. */
#ifndef CEXEC_MANUAL_SCHEDULER_H
#define CEXEC_MANUAL_SCHEDULER_H

#include <pthread.h>
#include <cexec/types.h>
#include <cexec/detail/timer_heap.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_manual_scheduler {
    /* private: every field under mu */
    pthread_mutex_t mu;
    ex_work *head, *tail;    /* the FIFO of runnable items (due timers included) */
    size_t queued;
    size_t batch;            /* items of the current ex_manual_run_pending still queued */
    exi_timer_heap timers;   /* armed timers whose deadline has not been seen pass */
    const void *runner;      /* thread inside a run call, or NULL */
    struct ex_clock *clock;  /* the time source: a virtual clock, or NULL: CLOCK_MONOTONIC */
    bool shut_down;
} ex_manual_scheduler;

/* Initialises an empty manual scheduler in storage the caller owns (no
 * allocation).  EX_EINVAL for NULL; EX_EAGAIN when its mutex cannot be
 * created. */
ex_error ex_manual_scheduler_init(ex_manual_scheduler *m);

/* As ex_manual_scheduler_init, with the scheduler's timers on clock (a
 * virtual clock, cexec/virtual_clock.h; NULL: CLOCK_MONOTONIC): relative
 * deadlines count from its time, and a timer becomes due when an advance
 * of the clock reaches its deadline, which queues it.  The clock must
 * outlive the scheduler.  EX_EINVAL for NULL; EX_ENOMEM; EX_EAGAIN. */
ex_error ex_manual_scheduler_init_clock(ex_manual_scheduler *m, ex_clock *clock);

/* The scheduler of m.  schedule() queues the operation; when a run
 * function runs it, it completes with set_value() on the running thread,
 * or set_stopped() if the receiver's stop was requested by then; started
 * after shutdown, it completes with set_error(EX_ESHUTDOWN) at once, on
 * the starting thread.  ex_post queues an item; ex_dispatch runs it
 * inline when called from an item that a run function is running, else
 * queues it; both return EX_ESHUTDOWN after shutdown.  ex_schedule_at /
 * ex_schedule_after arm a timer (see the header's comment for when it
 * becomes runnable); after shutdown they complete with
 * set_error(EX_ESHUTDOWN).  Forward progress: weakly parallel.  Schedulers
 * of the same m are equal.  NULL m: the invalid handle (vt NULL). */
ex_scheduler ex_manual_scheduler_get(ex_manual_scheduler *m);

/* Runs at most max_steps items, one after the other on the calling
 * thread, until nothing is runnable (timers due by now included; armed
 * timers are not waited for).  *ran (if not NULL) gets the number of items
 * run.  Returns:
 *   EX_OK      nothing is runnable any more;
 *   EX_EAGAIN  max_steps items ran and more are runnable: the guard
 *              against items that keep queueing themselves;
 *   EX_EBUSY   another run call is under way (on another thread, or this
 *              call comes from an item it runs): nothing ran;
 *   EX_EINVAL  m is NULL. */
ex_error ex_manual_run(ex_manual_scheduler *m, size_t max_steps, size_t *ran);

/* Runs the first runnable item, if any; whether one ran (false also when
 * another run call is under way, or m is NULL). */
bool ex_manual_run_one(ex_manual_scheduler *m);

/* Runs the items runnable when it is called (their number, counted after
 * due timers joined the queue), and not the ones they queue, nor timers
 * that become due meanwhile: one "round".  Returns how many ran (0 when
 * another run call is under way, or m is NULL).  A queued timer of the
 * round removed by a stop request is not replaced by a later item. */
size_t ex_manual_run_pending(ex_manual_scheduler *m);

/* Runs items until nothing is runnable, including the items they queue
 * and timers that become due meanwhile; returns how many ran (0 when
 * another run call is under way, or m is NULL).  Does not wait for armed
 * timers.  Items that keep queueing themselves make it run forever: use
 * ex_manual_run with a step limit where that may happen. */
size_t ex_manual_run_until_idle(ex_manual_scheduler *m);

/* The number of runnable items: queued schedule operations and posts, and
 * timers whose deadline has passed (this call queues them).  Thread-safe
 * (a snapshot when other threads submit).  0 for NULL. */
size_t ex_manual_pending(ex_manual_scheduler *m);

/* The number of armed timers whose deadline has not passed yet (this call
 * looks at the clock too, queueing those that are due).  0 for NULL. */
size_t ex_manual_timers_armed(ex_manual_scheduler *m);

/* Refuses new work from now on (EX_ESHUTDOWN, see ex_manual_scheduler_get)
 * and completes everything queued or armed on the calling thread before
 * it returns: queued items through their cancel function (schedule
 * operations and timers: set_stopped; a posted item without cancel is
 * dropped), armed timers with set_stopped.  Thread-safe, idempotent, and
 * allowed from inside an item (the run call then finds nothing more to
 * run).  EX_EINVAL for NULL. */
ex_error ex_manual_scheduler_shutdown(ex_manual_scheduler *m);

/* Shuts m down (above), so every operation scheduled on it has completed
 * when this returns, then releases its mutex; m's storage may then be
 * freed.  Completing the leftover work rather than refusing to destroy
 * (as ex_run_loop_destroy does) keeps a test's teardown from leaking or
 * hanging on work it chose not to run; assert ex_manual_pending(m) == 0
 * first to check that everything ran.  Errors, nothing done: EX_EBUSY
 * when a run call is under way (on another thread, or from inside an item
 * it runs); EX_EINVAL for NULL.  Other threads must have stopped using m
 * (submissions included) before it is destroyed. */
ex_error ex_manual_scheduler_destroy(ex_manual_scheduler *m);

#ifdef __cplusplus
}
#endif
#endif
