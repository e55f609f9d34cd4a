/* SPDX-License-Identifier: MIT */
/* pool.c - see pool.h. */
#include <string.h>

#include "common/pool.h"
#include "common/wait.h"

ex_pool_config test_pool_config(unsigned threads, const char *name_prefix) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = threads;
    c.name_prefix = name_prefix;
    return c;
}

ex_pool *test_pool_new_cfg(const ex_pool_config *cfg) {
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(cfg, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    cr_assert_not_null(p);
    return p;
}

ex_pool *test_pool_new(unsigned threads) {
    ex_pool_config c = test_pool_config(threads, NULL);
    return test_pool_new_cfg(&c);
}

void test_pool_free(ex_pool *p) {
    ex_error e = ex_pool_destroy(p);
    cr_assert_eq(e.code, 0, "ex_pool_destroy: %s", e.msg ? e.msg : "");
}

ex_pool_config test_pool_passive_config(unsigned threads, int lend_slots) {
    ex_pool_config c = test_pool_config(threads, NULL);
    c.wait_policy = EX_POOL_WAIT_PASSIVE;
    c.spin_rounds = 1;
    c.lend_slots = lend_slots;
    return c;
}

static ex_pool_worker_stats stats_of(ex_pool *p, unsigned i) {
    ex_pool_worker_stats st;
    ex_error e = ex_pool_worker_stats_get(p, i, &st);
    cr_assert_eq(e.code, 0, "ex_pool_worker_stats_get(%u): %s", i, e.msg ? e.msg : "");
    return st;
}

void test_pool_wait_parked(ex_pool *p) {
    double end = test_now_s() + TEST_WAIT_LIMIT_S;
    for (;;) {
        bool all = true;
        for (unsigned i = 0; i < ex_pool_size(p); i++)
            if (stats_of(p, i).parked == 0) all = false;
        if (all) return;
        cr_assert_lt(test_now_s(), end, "an idle worker never parked");
        test_sleep_ms(2);
    }
}

ex_pool *test_pool_parked(unsigned threads, int lend_slots) {
    ex_pool_config c = test_pool_passive_config(threads, lend_slots);
    ex_pool *p = test_pool_new_cfg(&c);
    test_pool_wait_parked(p);
    return p;
}

uint64_t test_pool_workers_woken(ex_pool *p) {
    uint64_t sum = 0;
    for (unsigned i = 0; i < ex_pool_size(p); i++) sum += stats_of(p, i).woken;
    return sum;
}
