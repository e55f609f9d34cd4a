/* SPDX-License-Identifier: MIT */
/* wait.c - see wait.h. */
#include <sched.h>
#include <time.h>

#include "common/wait.h"

double test_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void test_sleep_ms(long ms) {
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {}
}

void test_nap_us(long us) {
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000L };
    while (nanosleep(&ts, &ts) != 0) {}
}

bool test_wait_until(bool (*done)(void *ctx), void *ctx, ex_run_loop *loop, double limit_s) {
    double end = test_now_s() + limit_s;
    unsigned idle = 0;
    while (!done(ctx)) {
        if (loop && ex_run_loop_run_one(loop)) continue;
        if (++idle < 64) {
            sched_yield();
            continue;
        }
        test_nap_us(50);
        if ((idle & 63) == 0 && test_now_s() > end) return done(ctx);
    }
    return true;
}

typedef struct int_target { atomic_int *c; int target; } int_target;
typedef struct long_target { atomic_long *c; long target; } long_target;

static bool int_reached(void *ctx) {
    int_target *t = ctx;
    return atomic_load(t->c) >= t->target;
}

static bool int_equal(void *ctx) {
    int_target *t = ctx;
    return atomic_load(t->c) == t->target;
}

static bool long_reached(void *ctx) {
    long_target *t = ctx;
    return atomic_load(t->c) >= t->target;
}

int wait_int_reaches(atomic_int *c, int target) {
    int_target t = { c, target };
    test_wait_until(int_reached, &t, NULL, TEST_WAIT_LIMIT_S);
    return atomic_load(c);
}

long wait_long_reaches(atomic_long *c, long target) {
    long_target t = { c, target };
    test_wait_until(long_reached, &t, NULL, TEST_WAIT_LIMIT_S);
    return atomic_load(c);
}

bool wait_int_equals(atomic_int *c, int want) {
    int_target t = { c, want };
    return test_wait_until(int_equal, &t, NULL, TEST_WAIT_LIMIT_S);
}
