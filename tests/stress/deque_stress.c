/* SPDX-License-Identifier: MIT */
/* deque_stress.c - Chase-Lev deque: every item pushed by the owner is taken
 * or stolen exactly once, with the owner pushing and taking against several
 * thieves while the array grows from 2 slots. */
#include <pthread.h>
#include <sched.h>

#include <cexec/cexec.h>

#include "base/exi_macros.h"
#include "base/exi_atomic.h"
#include "resources/exi_deque.h"
#include "stress.h"

enum { ITEMS = 200000, TAIL = 1000, THIEVES = 3, ROUNDS = 4 };

typedef struct item { ex_work work; uint32_t id; } item;

static item items[ITEMS];
static uint32_t seen[ITEMS];
static exi_deque dq;
static uint32_t done;
static uint64_t stolen_total;

static void mark(ex_work *w) {
    item *it = EXI_CONTAINER_OF(w, item, work);
    __atomic_fetch_add(&seen[it->id], 1, __ATOMIC_RELAXED);
}

static void *thief(void *arg) {
    (void)arg;
    uint64_t n = 0;
    while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE) || exi_deque_nonempty(&dq)) {
        ex_work *w;
        if (exi_deque_steal(&dq, &w) == EXI_STEAL_OK) {
            mark(w);
            n++;
        }
    }
    __atomic_fetch_add(&stolen_total, n, __ATOMIC_RELAXED);
    return NULL;
}

int main(void) {
    int checks = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (uint32_t i = 0; i < ITEMS; i++) {
            items[i].id = i;
            seen[i] = 0;
        }
        done = 0;
        stolen_total = 0;
        ex_error e = exi_deque_init(&dq, 2, ex_libc_allocator());
        CHECK(e.code == 0, "init");
        pthread_t t[THIEVES];
        for (int i = 0; i < THIEVES; i++) pthread_create(&t[i], NULL, thief, NULL);
        uint64_t seed = UINT64_C(88172645463325252) + (uint64_t)round;
        uint32_t next = 0;
        while (next < ITEMS - TAIL) {
            /* Bursts of pushes (growth) and takes (owner LIFO). */
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            unsigned burst = (unsigned)(seed % 64) + 1;
            for (unsigned k = 0; k < burst && next < ITEMS - TAIL; k++) CHECK(exi_deque_push(&dq, &items[next++].work), "push");
            unsigned takes = (unsigned)((seed >> 8) % 48);
            for (unsigned k = 0; k < takes; k++) {
                ex_work *w = exi_deque_take(&dq);
                if (!w) break;
                mark(w);
            }
        }
        /* A last batch the owner leaves to the thieves: they must steal. */
        while (next < ITEMS) CHECK(exi_deque_push(&dq, &items[next++].work), "push");
        __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
        for (int i = 0; i < THIEVES; i++) pthread_join(t[i], NULL);
        uint32_t bad = 0;
        for (uint32_t i = 0; i < ITEMS; i++)
            if (seen[i] != 1) bad++;
        CHECK(bad == 0, "round %d: %u items not seen exactly once", round, bad);
        CHECK(exi_load_rlx_u64(&stolen_total) > 0, "round %d: thieves stole nothing", round);
        checks += 2;
        exi_deque_destroy(&dq);
    }
    return stress_finish("deque_stress", checks);
}
