/* SPDX-License-Identifier: MIT */
/* pool_stats.c - a work-stealing pool at work: a tree of uneven tasks is
 * spawned from one root; idle workers steal the rest.  Prints per-worker
 * counters.  Run with CEXEC_TRACE=trace.json to record a timeline (view it
 * in ui.perfetto.dev or render it with scripts/trace_plot.sh). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cexec/cexec.h>

typedef struct node {
    ex_work work;
    ex_pool *pool;
    unsigned depth;
    unsigned long long *result;  /* one slot per node */
} node;

static unsigned count_primes(unsigned from, unsigned to) {
    unsigned n = 0;
    for (unsigned x = from; x < to; x++) {
        bool prime = x > 1;
        for (unsigned d = 2; d * d <= x && prime; d++) prime = x % d != 0;
        n += prime;
    }
    return n;
}

enum { DEPTH = 11 };
static node nodes[1u << (DEPTH + 1)];
static unsigned long long results[1u << (DEPTH + 1)];
static unsigned long long remaining = (1u << (DEPTH + 1)) - 1;

static void run_node(ex_work *w) {
    node *n = (node *)w;
    size_t i = (size_t)(n - nodes);
    if (n->depth < DEPTH) {
        for (size_t c = 2 * i + 1; c <= 2 * i + 2; c++) {
            nodes[c] = (node){ .work = { .execute = run_node }, .pool = n->pool, .depth = n->depth + 1 };
            ex_error e = ex_post(ex_pool_scheduler(n->pool), &nodes[c].work);
            if (e.code) fprintf(stderr, "post: %s\n", e.msg);
        }
    }
    /* Uneven leaves: the cost grows with the index. */
    unsigned base = (unsigned)i * 40;
    results[i] = count_primes(base, base + 200 + (unsigned)(i % 7) * 400);
    __atomic_fetch_sub(&remaining, 1, __ATOMIC_RELEASE);
}

int main(void) {
    ex_pool *pool;
    ex_error e = ex_pool_create(NULL, &pool);
    if (e.code) {
        fprintf(stderr, "pool_stats: %s\n", e.msg);
        return 1;
    }
    nodes[0] = (node){ .work = { .execute = run_node }, .pool = pool, .depth = 0 };
    if ((e = ex_post(ex_pool_scheduler(pool), &nodes[0].work)).code) {
        fprintf(stderr, "pool_stats: %s\n", e.msg);
        return 1;
    }
    while (__atomic_load_n(&remaining, __ATOMIC_ACQUIRE)) {
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    unsigned long long total = 0;
    for (size_t i = 0; i < sizeof results / sizeof results[0]; i++) total += results[i];
    printf("pool_stats: %u workers, %u tasks, checksum %llu\n", ex_pool_size(pool), (1u << (DEPTH + 1)) - 1, total);
    printf("worker  executed    stolen    parked     woken\n");
    for (unsigned i = 0; i < ex_pool_size(pool); i++) {
        ex_pool_worker_stats st;
        ex_pool_worker_stats_get(pool, i, &st);
        printf("%6u %9llu %9llu %9llu %9llu\n", i, (unsigned long long)st.executed, (unsigned long long)st.stolen,
               (unsigned long long)st.parked, (unsigned long long)st.woken);
    }
    return ex_pool_destroy(pool).code ? 1 : 0;
}
