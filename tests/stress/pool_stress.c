/* SPDX-License-Identifier: MIT */
/* pool_stress.c - every item posted to the pool runs exactly once: many
 * external submitting threads, and items that submit more items from inside
 * the workers (nested submission). */
#include <pthread.h>
#include <sched.h>

#include <cexec/cexec.h>
#include "base/exi_macros.h"
#include "stress.h"

enum { SUBMITTERS = 6, PER_THREAD = 4000, FANOUT = 3 };
/* Each external item spawns FANOUT nested children (one level). */
enum { TOTAL = SUBMITTERS * PER_THREAD * (1 + FANOUT) };

typedef struct item { ex_work work; uint32_t id; } item;

static item items[TOTAL];
static uint32_t runs[TOTAL];
static uint32_t completed;
static ex_pool *pool;

static void run_child(ex_work *w) {
    item *it = EXI_CONTAINER_OF(w, item, work);
    __atomic_fetch_add(&runs[it->id], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&completed, 1, __ATOMIC_RELEASE);
}

static void run_parent(ex_work *w) {
    item *it = EXI_CONTAINER_OF(w, item, work);
    __atomic_fetch_add(&runs[it->id], 1, __ATOMIC_RELAXED);
    uint32_t base = SUBMITTERS * PER_THREAD + it->id * FANOUT;
    for (uint32_t k = 0; k < FANOUT; k++) {
        item *c = &items[base + k];
        c->id = base + k;
        c->work.execute = run_child;
        c->work.cancel = NULL;
        ex_error e = ex_post(ex_pool_scheduler(pool), &c->work);
        if (e.code) fprintf(stderr, "nested post failed: %s\n", e.msg);
    }
    __atomic_fetch_add(&completed, 1, __ATOMIC_RELEASE);
}

static void *submitter(void *arg) {
    uint32_t t = (uint32_t)(uintptr_t)arg;
    for (uint32_t i = 0; i < PER_THREAD; i++) {
        item *it = &items[t * PER_THREAD + i];
        it->id = t * PER_THREAD + i;
        it->work.execute = run_parent;
        it->work.cancel = NULL;
        ex_error e = ex_post(ex_pool_scheduler(pool), &it->work);
        if (e.code) fprintf(stderr, "post failed: %s\n", e.msg);
        if (i % 512 == 0) sched_yield();
    }
    return NULL;
}

int main(void) {
    int checks = 0;
    ex_pool_config cfg = { .threads = 3 };
    ex_error e = ex_pool_create(&cfg, &pool);
    CHECK(e.code == 0, "create: %s", e.msg ? e.msg : "");
    pthread_t t[SUBMITTERS];
    for (uintptr_t i = 0; i < SUBMITTERS; i++) pthread_create(&t[i], NULL, submitter, (void *)i);
    for (int i = 0; i < SUBMITTERS; i++) pthread_join(t[i], NULL);
    while (__atomic_load_n(&completed, __ATOMIC_ACQUIRE) < TOTAL) sched_yield();
    uint32_t bad = 0;
    for (uint32_t i = 0; i < TOTAL; i++)
        if (__atomic_load_n(&runs[i], __ATOMIC_RELAXED) != 1) bad++;
    CHECK(bad == 0, "%u items not run exactly once", bad);
    uint64_t executed = 0;
    for (unsigned i = 0; i < ex_pool_size(pool); i++) {
        ex_pool_worker_stats st;
        ex_pool_worker_stats_get(pool, i, &st);
        executed += st.executed;
    }
    CHECK(executed == TOTAL, "stats say %llu executed, expected %u", (unsigned long long)executed, TOTAL);
    checks += 2;
    e = ex_pool_destroy(pool);
    CHECK(e.code == 0, "destroy");
    checks++;
    return stress_finish("pool_stress", checks);
}
