/* compose_fixtures.c - the generic part of compose_fixtures.h. */
#include <sched.h>
#include <string.h>

#include "compose/compose_fixtures.h"

void wait_count(atomic_int *c, int target, const char *what) {
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(c) < target && test_now_s() < end) sched_yield();
    cr_assert_geq(atomic_load(c), target, "timed out waiting for %s: %d of %d", what, atomic_load(c), target);
}

/* Waits (bounded) until *f >= target; returns whether it got there. */
bool wait_flag(atomic_int *f, int target) {
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(f) < target) {
        if (test_now_s() > end) return false;
        sched_yield();
    }
    return true;
}

ex_pool *pool_new(unsigned threads) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = threads;
    c.name_prefix = "compose";
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    return p;
}

void pool_free(ex_pool *p) {
    ex_error e = ex_pool_destroy(p);
    cr_assert_eq(e.code, 0, "ex_pool_destroy: %s", e.msg ? e.msg : "");
}

/* --------------------------------------------- a thread-safe receiver */

ex_operation *arec_start(arec *r, const ex_sender *s) {
    ex_operation *op = NULL;
    ex_receiver x = { &arec_vt, r };
    ex_error e = ex_connect_alloc(s, x, &op);
    cr_assert_eq(e.code, 0, "ex_connect_alloc: %s", e.msg ? e.msg : "");
    ex_start(op);
    return op;
}

void arec_wait(arec *r, const char *what) {
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(&r->total) < 1 && test_now_s() < end) sched_yield();
    cr_assert_eq(atomic_load(&r->total), 1, "%s did not complete exactly once (%d completions)", what,
                 atomic_load(&r->total));
}

