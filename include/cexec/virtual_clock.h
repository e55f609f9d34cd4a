/* SPDX-License-Identifier: MIT */
/* cexec/virtual_clock.h - time that a test moves by hand.
 *
 * A virtual clock is a time source for the timers of the resources given
 * it (ex_pool_config.clock, ex_run_loop_init_clock, the manual
 * scheduler): their ex_schedule_after, ex_schedule_at, ex_timeout and task
 * sleeps measure its time, not CLOCK_MONOTONIC.  It stands still until
 * ex_virtual_clock_advance moves it: the advance fires exactly the timers
 * that fall due on the way, in deadline order across every resource on
 * the clock (equal deadlines on one resource: first armed first; across
 * resources: in the order they were given the clock), each with the clock at
 * its own deadline, and returns.  A 30-second timeout is tested in
 * microseconds, the same way every run.
 *
 * A test creates the clock, gives it to a run loop (ex_run_loop_init_clock),
 * starts ex_timeout(work, the loop's scheduler, 30 s), advances the clock
 * by 30 s (the timeout's timer falls due and is queued on the loop) and
 * runs the loop: the operation completes with EX_ETIMEDOUT at once
 * (docs/testing.md).
 *
 * "Fires" means the timer's completion is handed to the resource's agents
 * as an item: on a run loop or a manual scheduler it runs when the test
 * runs them (after the advance returns; the order is the deadline order);
 * on a pool a worker runs it, concurrently with the rest of the advance,
 * and timers that those completions arm inside the advanced span may fire
 * in this advance or in the next.  For steps that happen in an order the
 * test decides, use a run loop or the manual scheduler.
 *
 * A resource on a virtual clock never waits for a deadline in real time.
 * Stop requests still remove a pending timer at once.  The clock must
 * outlive every resource given it: destroy is EX_EBUSY until each is
 * destroyed (a pool shut down but not destroyed still counts).
 * Thread-safe: advances are serialised; arming and cancelling on the
 * resources go on during an advance. */
#ifndef CEXEC_VIRTUAL_CLOCK_H
#define CEXEC_VIRTUAL_CLOCK_H

#include <stddef.h>
#include <stdint.h>

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Creates a virtual clock reading start_ns.  EX_EINVAL for a NULL out or
 * a negative start; EX_ENOMEM. */
ex_error ex_virtual_clock_create(int64_t start_ns, ex_clock **out);

/* Destroys the clock.  EX_EBUSY (and nothing is destroyed) while a
 * resource keeps time on it; NULL is EX_OK. */
ex_error ex_virtual_clock_destroy(ex_clock *clock);

/* The time on clock in nanoseconds; NULL: CLOCK_MONOTONIC (ex_now). */
int64_t ex_clock_now(const ex_clock *clock);

/* Moves the clock forward by duration_ns, firing the timers that fall due
 * (see above); *fired (if not NULL) gets how many.  EX_EINVAL for a NULL
 * clock, a negative duration, or one that overflows the clock. */
ex_error ex_virtual_clock_advance(ex_clock *clock, int64_t duration_ns, size_t *fired);

/* Moves the clock forward to deadline_ns, as ex_virtual_clock_advance.
 * EX_EINVAL for a NULL clock or a deadline before the clock's time. */
ex_error ex_virtual_clock_advance_to(ex_clock *clock, int64_t deadline_ns, size_t *fired);

/* The earliest deadline armed on the clock's resources; INT64_MAX if none
 * (or clock NULL).  ex_virtual_clock_advance_to(clock, that) fires it. */
int64_t ex_virtual_clock_next_deadline(ex_clock *clock);

/* How many timers are armed on the clock's resources (0 for NULL): a test
 * can check that an operation armed its timer before it advances. */
size_t ex_virtual_clock_armed(ex_clock *clock);

#ifdef __cplusplus
}
#endif

#endif
