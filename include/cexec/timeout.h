/* SPDX-License-Identifier: MIT */
/* cexec/timeout.h - ex_timeout: a sender with a deadline, whose timeout is
 * an error a caller can tell from a stop: a result with code EX_ETIMEDOUT
 * is late work, a stopped result a shutdown or a stop from outside.
 *
 * The race of the sender against a timer on a scheduler with a clock
 * (cexec/timer.h), in one operation state holding both operations: no
 * allocation when it starts or when the sender wins; a timeout allocates
 * its message, and values kept while the timer completes elsewhere
 * allocate only for tuples.  docs/time.md, "Timeouts and sleeps", has the
 * choices and their reasons. */
#ifndef CEXEC_TIMEOUT_H
#define CEXEC_TIMEOUT_H

#include <cexec/types.h>
#include <cexec/scheduler.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Runs s with a deadline duration_ns after the operation starts, timed on
 * sch (ex_schedule_after's timer: on sch's resource, never early).
 *
 *   - s completes first, with a value, an error or stopped: the timer is
 *     cancelled (a stop request on it) and s's completion is passed on
 *     unchanged, values uncopied unless the timer is firing at that moment
 *     on another thread (they are then kept until it is done).
 *   - The timer fires first: stop is requested on s and the operation
 *     waits for s to complete.  Then, if s completed with set_error or
 *     set_stopped (its error released), the result is set_error with code
 *     EX_ETIMEDOUT and an owned message (cexec/error.h: the receiver
 *     releases it) naming the operation and the limit, e.g.
 *     "ex_timeout: ex_then(parse) did not complete within 50 ms" (a named
 *     stage; a builder's name, "ex_when_all", otherwise); without memory
 *     for the message, a static one, still EX_ETIMEDOUT.  If s completes
 *     with a VALUE anyway (it ignored the stop or finished at the same
 *     moment), the value wins: the work was done, and reporting a timeout
 *     would invite the caller to redo it.
 *   - The timer fails to arm (the resource refuses it, EX_ESHUTDOWN):
 *     as a timeout, with that error in place of EX_ETIMEDOUT.  The timer
 *     completes stopped without firing (its resource shut down with it
 *     pending): stop is requested on s and s's completion is the result.
 *   - A stop request on the receiver's token reaches s and the timer; the
 *     result is s's completion (stopped, usually), unless the timer had
 *     fired before.  Requested before start: both start with their token
 *     stopped, and s decides.
 *
 * So EX_ETIMEDOUT means the deadline passed and s produced no value;
 * set_stopped comes only from s (a shutdown, an outer stop).  The
 * operation completes once both s and the timer have: on the agent of
 * whichever completes last (s's, mostly; the timer's resource when it
 * fires while s completes).  No completion scheduler.
 *
 * Signatures: s's, plus set_error.  Takes s.  Invalid senders, s
 * released: s NULL (EX_EINVAL) or invalid (its error); an invalid
 * scheduler handle, a negative duration or one that overflows the clock
 * (EX_EINVAL); a scheduler without a clock (EX_ENOTSUP); no memory
 * (EX_ENOMEM).  Keeping s's values while the timer completes may fail
 * for tuples (EX_ENOMEM) or a child sending more values than its
 * signatures allow (EX_EINVAL). */
ex_sender *ex_timeout(ex_sender *s, ex_scheduler sch, int64_t duration_ns);

#ifdef __cplusplus
}
#endif
#endif
