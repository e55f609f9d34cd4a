/* SPDX-License-Identifier: MIT */
/* wait.h - bounded waits on asynchronous work, and the clock they use.
 * A wait gives up after a generous limit so that a lost completion fails
 * its test with a message instead of hanging the suite; the limits are
 * never timing assertions. */
#ifndef CEXEC_TEST_WAIT_H
#define CEXEC_TEST_WAIT_H

#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <cexec/cexec.h>

/* Far above what any wait needs on a loaded machine or under ASan and
 * valgrind (the waits this replaced allowed 20 s).  A suite with a
 * shorter .timeout ends a hung test first, as a timeout. */
#define TEST_WAIT_LIMIT_S 20.0

/* Monotonic clock in seconds (for deadlines, never for timing asserts). */
double test_now_s(void);
/* Sleeps ms milliseconds (resumes after signals). */
void test_sleep_ms(long ms);
/* Sleeps us microseconds. */
void test_nap_us(long us);

/* Waits until done(ctx) holds or limit_s passed; returns whether it held.
 * Yields at first, then naps, so a waiter on a loaded 2-core machine lets
 * the work it waits for run.  With loop, runs its items while waiting. */
bool test_wait_until(bool (*done)(void *ctx), void *ctx, ex_run_loop *loop, double limit_s);

/* Waits (TEST_WAIT_LIMIT_S) until *c >= target; returns the last value
 * seen (>= target unless the wait timed out). */
int wait_int_reaches(atomic_int *c, int target);
long wait_long_reaches(atomic_long *c, long target);
/* Waits (TEST_WAIT_LIMIT_S) until *c == want; returns whether it got there. */
bool wait_int_equals(atomic_int *c, int want);

/* Asserts *c reaches target within TEST_WAIT_LIMIT_S. */
#define EXPECT_INT_REACHES(c, target)                                                                \
    do {                                                                                             \
        int er_target_ = (target);                                                                   \
        int er_seen_ = wait_int_reaches((c), er_target_);                                            \
        cr_assert_geq(er_seen_, er_target_, "timed out waiting for %s: %d of %d", #c, er_seen_, er_target_); \
    } while (0)

#endif
