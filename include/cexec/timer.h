/* SPDX-License-Identifier: MIT */
/* cexec/timer.h - the clock and timed scheduling: ex_schedule_at and
 * ex_schedule_after.
 *
 * Time is CLOCK_MONOTONIC in nanoseconds (int64_t: about 292 years).  A
 * resource with a clock keeps its timers in one intrusive heap under its
 * own lock: arming allocates nothing (the timer lives in the operation
 * state) and costs O(log n); no thread per timer.  Pools, run loops,
 * single-thread contexts and ex_sync_wait's own loop have a clock: the
 * thread that runs a loop sleeps until the earliest deadline and
 * completes expired timers there (a pool's workers share the wait).  A
 * manual scheduler (cexec/manual_scheduler.h) queues expired timers for
 * the test to run.  docs/time.md says how accurate timers are and what
 * they cost. */
#ifndef CEXEC_TIMER_H
#define CEXEC_TIMER_H

#include <cexec/types.h>
#include <cexec/scheduler.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EX_NS_PER_US INT64_C(1000)
#define EX_NS_PER_MS INT64_C(1000000)
#define EX_NS_PER_S INT64_C(1000000000)

/* CLOCK_MONOTONIC now, in nanoseconds. */
int64_t ex_now(void);

/* A sender that completes with set_value() on sch's resource once
 * CLOCK_MONOTONIC reaches deadline_ns (at once, though still on the
 * resource, for a deadline already past).  A stop request on the
 * receiver's token before then completes it with set_stopped at once, on
 * the requesting thread; a resource that shuts down with the timer
 * pending completes it with set_stopped on its own thread.  Multi-shot:
 * each operation arms its own timer.  Invalid senders: EX_EINVAL for an
 * invalid handle or a negative deadline; EX_ENOTSUP for a scheduler
 * without a clock (its vtable's connect_schedule_at is NULL). */
ex_sender *ex_schedule_at(ex_scheduler sch, int64_t deadline_ns);

/* ex_schedule_at with the deadline duration_ns after each operation
 * starts.  EX_EINVAL for a negative duration or one that overflows the
 * clock (ex_now() + duration_ns > INT64_MAX when the sender is built; a
 * start late enough to overflow after all waits until INT64_MAX), else as
 * ex_schedule_at. */
ex_sender *ex_schedule_after(ex_scheduler sch, int64_t duration_ns);

#ifdef __cplusplus
}
#endif
#endif
