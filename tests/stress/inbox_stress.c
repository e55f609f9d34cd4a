/* SPDX-License-Identifier: MIT */
/* inbox_stress.c - the pool's inbox (Vyukov-style MPSC queue with a
 * consumer try-lock), producers against consumers.
 *
 * Phase 1 (throughput): several producers and consumers run freely; every
 * item is delivered exactly once.
 * Phase 2 (quiescence): producers push small bursts at the same moment,
 * then the queue must drain completely before exi_inbox_nonempty reports
 * empty.  A wrong "empty" (it once happened when a consumer re-inserted the
 * stub while a producer was mid-push) strands items there: the pool would
 * park its workers on queued work. */
#include <pthread.h>
#include <sched.h>

#include <string.h>

#include <cexec/cexec.h>

#include "base/exi_macros.h"
#include "resources/exi_inbox.h"
#include "stress.h"

enum { PRODUCERS = 3, CONSUMERS = 2, PER_PRODUCER = 40000, ROUNDS = 3, PHASES = 3000, BURST = 1 };
/* Phase 2 uses 2 producers and 1 spinning consumer (the pool's shape: one
 * worker polling while submitters push), so the race window is hit often. */
enum { BURST_PRODUCERS = 2 };
enum { TOTAL = PRODUCERS * PER_PRODUCER };

typedef struct item { ex_work work; uint32_t id; } item;

static item items[TOTAL];
static uint32_t seen[TOTAL];
static exi_inbox q;
static uint32_t producers_left, delivered, inflight, stop_consumers;
static uint32_t phase, phase_done;

static void consume_one(void) {
    __atomic_fetch_add(&inflight, 1, __ATOMIC_SEQ_CST);
    ex_work *w = exi_inbox_pop(&q);
    if (w) {
        item *it = EXI_CONTAINER_OF(w, item, work);
        __atomic_fetch_add(&seen[it->id], 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&delivered, 1, __ATOMIC_SEQ_CST);
    }
    __atomic_fetch_sub(&inflight, 1, __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------- phase 1 */

static void *free_producer(void *arg) {
    uint32_t base = (uint32_t)(uintptr_t)arg * PER_PRODUCER;
    for (uint32_t i = 0; i < PER_PRODUCER; i++) {
        items[base + i].id = base + i;
        exi_inbox_push(&q, &items[base + i].work);
        if (i % 1024 == 0) sched_yield();
    }
    __atomic_fetch_sub(&producers_left, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void *free_consumer(void *arg) {
    (void)arg;
    while (__atomic_load_n(&producers_left, __ATOMIC_ACQUIRE) || exi_inbox_nonempty(&q)) consume_one();
    return NULL;
}

/* ------------------------------------------------------- phase 2 */

static void *burst_producer(void *arg) {
    uint32_t t = (uint32_t)(uintptr_t)arg;
    for (uint32_t ph = 1; ph <= PHASES; ph++) {
        while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) < ph) sched_yield();
        for (uint32_t k = 0; k < BURST; k++) {
            uint32_t id = ((ph - 1) * BURST_PRODUCERS + t) * BURST + k;
            items[id].id = id;
            exi_inbox_push(&q, &items[id].work);
        }
        __atomic_fetch_add(&phase_done, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void *burst_consumer(void *arg) {
    (void)arg;
    while (!__atomic_load_n(&stop_consumers, __ATOMIC_ACQUIRE)) consume_one();
    return NULL;
}

int main(void) {
    int checks = 0;
    for (int r = 0; r < ROUNDS; r++) {
        memset(seen, 0, sizeof seen);
        delivered = 0;
        producers_left = PRODUCERS;
        exi_inbox_init(&q);
        pthread_t p[PRODUCERS], c[CONSUMERS];
        for (uintptr_t i = 0; i < CONSUMERS; i++) pthread_create(&c[i], NULL, free_consumer, NULL);
        for (uintptr_t i = 0; i < PRODUCERS; i++) pthread_create(&p[i], NULL, free_producer, (void *)i);
        for (int i = 0; i < PRODUCERS; i++) pthread_join(p[i], NULL);
        for (int i = 0; i < CONSUMERS; i++) pthread_join(c[i], NULL);
        uint32_t bad = 0;
        for (uint32_t i = 0; i < TOTAL; i++) bad += seen[i] != 1;
        CHECK(bad == 0, "free round %d: %u items not delivered exactly once (%u of %u)", r, bad, delivered, TOTAL);
        checks++;
    }

    memset(seen, 0, sizeof seen);
    delivered = inflight = stop_consumers = phase = phase_done = 0;
    exi_inbox_init(&q);
    pthread_t p[BURST_PRODUCERS], c1;
    pthread_create(&c1, NULL, burst_consumer, NULL);
    for (uintptr_t i = 0; i < BURST_PRODUCERS; i++) pthread_create(&p[i], NULL, burst_producer, (void *)i);
    uint32_t stranded_phases = 0;
    for (uint32_t ph = 1; ph <= PHASES; ph++) {
        __atomic_store_n(&phase, ph, __ATOMIC_RELEASE);
        while (__atomic_load_n(&phase_done, __ATOMIC_ACQUIRE) < ph * BURST_PRODUCERS) sched_yield();
        /* Wait for "empty" and no pop in flight, then everything pushed so
         * far must have been delivered. */
        while (exi_inbox_nonempty(&q) || __atomic_load_n(&inflight, __ATOMIC_SEQ_CST)) sched_yield();
        if (__atomic_load_n(&delivered, __ATOMIC_SEQ_CST) != ph * BURST_PRODUCERS * BURST) {
            stranded_phases++;
            /* Let the consumers catch up so later phases stay meaningful. */
            while (__atomic_load_n(&delivered, __ATOMIC_SEQ_CST) < ph * BURST_PRODUCERS * BURST) {
                sched_yield();
                if (!exi_inbox_nonempty(&q)) break;
            }
        }
    }
    __atomic_store_n(&stop_consumers, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < BURST_PRODUCERS; i++) pthread_join(p[i], NULL);
    pthread_join(c1, NULL);
    CHECK(stranded_phases == 0, "%u of %u phases reported empty with items still queued", stranded_phases, PHASES);
    checks++;
    return stress_finish("inbox_stress", checks);
}
