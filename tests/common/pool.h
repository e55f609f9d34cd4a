/* SPDX-License-Identifier: MIT */
/* pool.h - making and destroying thread pools in a test: each call
 * asserts it worked, so a test body can use the pool at once. */
#ifndef CEXEC_TEST_POOL_H
#define CEXEC_TEST_POOL_H

#include <criterion/criterion.h>
#include <cexec/cexec.h>

/* A zeroed configuration with `threads` workers and the thread-name
 * prefix (NULL: the library's); set allocator, frames, ... on it. */
ex_pool_config test_pool_config(unsigned threads, const char *name_prefix);
/* A pool of `threads` workers with the default configuration. */
ex_pool *test_pool_new(unsigned threads);
/* A pool made from cfg. */
ex_pool *test_pool_new_cfg(const ex_pool_config *cfg);
/* Destroys p, asserting EX_OK (no work left behind). */
void test_pool_free(ex_pool *p);

/* test_pool_config with the passive wait policy and one spin round: idle
 * workers park at once and stay parked until something wakes them.  With
 * every worker parked, only a wake-up or a lent caller runs an item, so a
 * test can tell which it was. */
ex_pool_config test_pool_passive_config(unsigned threads, int lend_slots);
/* Waits (bounded: fails the test) until every worker of p has parked at
 * least once. */
void test_pool_wait_parked(ex_pool *p);
/* A pool of test_pool_passive_config(threads, lend_slots) whose workers
 * have all parked. */
ex_pool *test_pool_parked(unsigned threads, int lend_slots);
/* The workers' `woken` counters added up (the lent slots have none). */
uint64_t test_pool_workers_woken(ex_pool *p);

#endif
