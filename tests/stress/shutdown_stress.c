/* SPDX-License-Identifier: MIT */
/* shutdown_stress.c - ex_pool_shutdown racing external submissions: every
 * accepted item is either run or cancelled exactly once before shutdown
 * returns; refused items (EX_ESHUTDOWN) are never touched. */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <string.h>

#include <cexec/cexec.h>
#include "base/exi_macros.h"
#include "stress.h"

enum { ROUNDS = 30, SUBMITTERS = 3, MAX_ITEMS = 6000 };

typedef struct item { ex_work work; uint32_t id; } item;

static item items[SUBMITTERS][MAX_ITEMS];
static uint32_t ran[SUBMITTERS][MAX_ITEMS], cancelled[SUBMITTERS][MAX_ITEMS];
static uint32_t accepted[SUBMITTERS];
static ex_pool *pool;

static void on_run(ex_work *w) {
    item *it = EXI_CONTAINER_OF(w, item, work);
    __atomic_fetch_add(&ran[it->id / MAX_ITEMS][it->id % MAX_ITEMS], 1, __ATOMIC_RELAXED);
}

static void on_cancel(ex_work *w) {
    item *it = EXI_CONTAINER_OF(w, item, work);
    __atomic_fetch_add(&cancelled[it->id / MAX_ITEMS][it->id % MAX_ITEMS], 1, __ATOMIC_RELAXED);
}

static void *submitter(void *arg) {
    uint32_t t = (uint32_t)(uintptr_t)arg;
    uint32_t n = 0;
    for (uint32_t i = 0; i < MAX_ITEMS; i++) {
        item *it = &items[t][i];
        it->id = t * MAX_ITEMS + i;
        it->work.execute = on_run;
        it->work.cancel = on_cancel;
        ex_error e = ex_post(ex_pool_scheduler(pool), &it->work);
        if (e.code) {
            if (e.code != EX_ESHUTDOWN) fprintf(stderr, "unexpected error %d\n", e.code);
            break;
        }
        n++;
    }
    __atomic_store_n(&accepted[t], n, __ATOMIC_RELEASE);
    return NULL;
}

int main(void) {
    int checks = 0;
    for (int round = 0; round < ROUNDS; round++) {
        memset(ran, 0, sizeof ran);
        memset(cancelled, 0, sizeof cancelled);
        ex_pool_config cfg = { .threads = 2 };
        ex_error e = ex_pool_create(&cfg, &pool);
        CHECK(e.code == 0, "create");
        pthread_t t[SUBMITTERS];
        for (uintptr_t i = 0; i < SUBMITTERS; i++) pthread_create(&t[i], NULL, submitter, (void *)i);
        struct timespec d = { 0, (round % 5) * 200000L };
        nanosleep(&d, NULL);
        e = ex_pool_shutdown(pool);
        CHECK(e.code == 0, "shutdown");
        /* Submitters still running are refused from here on. */
        for (int i = 0; i < SUBMITTERS; i++) pthread_join(t[i], NULL);
        CHECK(ex_pool_destroy(pool).code == 0, "destroy");
        uint32_t bad = 0, total = 0, was_cancelled = 0;
        for (int s = 0; s < SUBMITTERS; s++) {
            uint32_t n = __atomic_load_n(&accepted[s], __ATOMIC_ACQUIRE);
            total += n;
            for (uint32_t i = 0; i < MAX_ITEMS; i++) {
                uint32_t c = ran[s][i] + cancelled[s][i];
                if ((i < n && c != 1) || (i >= n && c != 0)) bad++;
                was_cancelled += cancelled[s][i];
            }
        }
        CHECK(bad == 0, "round %d: %u items not settled exactly once (of %u accepted, %u cancelled)", round, bad,
              total, was_cancelled);
        checks += 4;
    }
    return stress_finish("shutdown_stress", checks);
}
