/* SPDX-License-Identifier: MIT */
/* pool_fixtures.h - what the exec_pool suite's files share: a named pool,
 * the sum of the workers' statistics, a then() callback that notes where
 * it ran, and a receiver slot (an arec) with its own operation storage.
 *
 * Nothing here asserts on timing; every wait for asynchronous completions
 * is bounded so a lost item fails the test with a message instead of
 * hanging. */
#ifndef CEXEC_TEST_POOL_FIXTURES_H
#define CEXEC_TEST_POOL_FIXTURES_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/helpers.h"
#include "resources/hold.h"

/* A pool of `threads` workers named prefix-<i> (asserts creation worked). */
ex_pool *pool_named(unsigned threads, const char *prefix);

/* The statistics of all workers added up (asserting each read worked). */
ex_pool_worker_stats stats_sum(ex_pool *p);

/* ---------------------------------------- where a then callback ran */

typedef struct where {
    ex_pool *pool;
    int calls;
    int worker;       /* ex_pool_current_worker(pool) inside the callback */
    pthread_t tid;
    char name[32];    /* thread name inside the callback */
} where;

/* A then() callback (ctx: a where) that notes where it ran. */
ex_error where_fn(void *ctx, const ex_value *in, size_t n, ex_value *out);
/* Runs one then(schedule(pool)) through sync_wait from the calling thread. */
void run_where(ex_pool *p, where *w);

/* --------------------------------------------- a thread-safe receiver slot */

extern atomic_long g_completed;  /* completions of every slot */

#define SLOT_STORAGE 256

/* An arec (common/receivers.h: atomic counters, the worker and thread of
 * the completion) that also counts its completion in g_completed, with
 * operation storage of its own. */
typedef struct slot {
    arec r;
    ex_operation *op;
    _Alignas(max_align_t) unsigned char storage[SLOT_STORAGE];
} slot;

void slot_init(slot *s, ex_pool *p);
/* Connects snd into the slot's own storage; does not start. */
ex_error slot_connect(slot *s, const ex_sender *snd);
/* Main-thread version: connect (asserting) and start. */
void slot_start(slot *s, const ex_sender *snd);
/* n zeroed slots on the heap (asserting). */
slot *slots_new(int n);
/* Sets g_completed to 0, then initialises and starts n slots on snd. */
void slots_start(slot *s, int n, ex_pool *p, const ex_sender *snd);
/* Every slot completed exactly once; returns how many with a value. */
int slots_expect_once(slot *s, int n);
void slots_destroy(slot *s, int n);

#endif
