/* SPDX-License-Identifier: MIT */
/* alloc_stress.c - the frame allocators under concurrency: threads pass
 * blocks to each other through a ring (so most frees happen on another
 * thread) through recycling(budget(libc)) (through the ex_allocator
 * interface, then mixed with the inline entry points), a monotonic
 * allocator and the jemalloc arenas.  Every
 * live block carries its owner's tag in every word: two owners of one block
 * at a time would overwrite each other's tags, and the check catches it. */
#include <pthread.h>
#include <sched.h>

#include <cexec/cexec.h>
#include "stress.h"

enum { THREADS = 4, OPS = 60000, SLOTS = 64 };

typedef struct slot { void *p; size_t size; uint64_t tag; } slot;

static slot ring[SLOTS];
static uint32_t ring_lock[SLOTS];
static const ex_allocator *alloc;
static ex_recycling_allocator *inline_rec;  /* set: every other call goes through the inline entry points */
static uint64_t corrupt;

static void fill(void *p, size_t size, uint64_t tag) {
    uint64_t *w = p;
    for (size_t i = 0; i < size / 8; i++) w[i] = tag;
}

static bool intact(const void *p, size_t size, uint64_t tag) {
    const uint64_t *w = p;
    for (size_t i = 0; i < size / 8; i++)
        if (w[i] != tag) return false;
    return true;
}

static void *worker(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg, seed = 0x9E3779B97F4A7C15ull * (id + 1);
    for (uint64_t op = 0; op < OPS; op++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        unsigned k = (unsigned)(seed % SLOTS);
        uint32_t unlocked = 0;
        if (!__atomic_compare_exchange_n(&ring_lock[k], &unlocked, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) continue;
        slot *s = &ring[k];
        if (s->p) {  /* take someone's block: check, then free it here */
            if (!intact(s->p, s->size, s->tag)) __atomic_fetch_add(&corrupt, 1, __ATOMIC_RELAXED);
            if (inline_rec && (op & 1)) ex_recycling_deallocate(inline_rec, s->p, s->size, 16);
            else ex_deallocate(alloc, s->p, s->size, 16);
            s->p = NULL;
        } else {
            size_t size = 16u << (seed >> 60 & 7);  /* 16 .. 2048 */
            void *p = inline_rec && (op & 2) ? ex_recycling_allocate(inline_rec, size, 16) : ex_allocate(alloc, size, 16);
            if (p) {
                uint64_t tag = (id << 56) | op;
                fill(p, size, tag);
                *s = (slot){ p, size, tag };
            }
        }
        __atomic_store_n(&ring_lock[k], 0, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int run(const char *what, const ex_allocator *a, int *checks) {
    alloc = a;
    corrupt = 0;
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    for (unsigned k = 0; k < SLOTS; k++)
        if (ring[k].p) {
            if (!intact(ring[k].p, ring[k].size, ring[k].tag)) corrupt++;
            ex_deallocate(a, ring[k].p, ring[k].size, 16);
            ring[k].p = NULL;
        }
    CHECK(corrupt == 0, "%s: %llu blocks had two owners at once", what, (unsigned long long)corrupt);
    ex_alloc_stats st;
    ex_allocator_stats(a, &st);
    CHECK(st.allocations == st.frees && st.bytes_in_use == 0, "%s: %llu allocations, %llu frees, %llu bytes in use",
          what, (unsigned long long)st.allocations, (unsigned long long)st.frees, (unsigned long long)st.bytes_in_use);
    *checks += 2;
    return 0;
}

int main(void) {
    int checks = 0;
    ex_budget_allocator budget;
    ex_budget_allocator_init(&budget, ex_libc_allocator(), 4u << 20);
    ex_recycling_allocator *rec;
    CHECK(!ex_recycling_allocator_create(ex_budget_allocator_get(&budget), &rec).code, "recycling");
    run("recycling over budget", ex_recycling_allocator_get(rec), &checks);
    inline_rec = rec;
    run("recycling over budget, inline entry points", ex_recycling_allocator_get(rec), &checks);
    inline_rec = NULL;
    ex_recycling_allocator_destroy(rec);
    ex_alloc_stats st;
    ex_allocator_stats(ex_budget_allocator_get(&budget), &st);
    CHECK(st.bytes_in_use == 0 && st.peak_bytes <= (4u << 20), "budget: %llu in use, peak %llu",
          (unsigned long long)st.bytes_in_use, (unsigned long long)st.peak_bytes);
    checks++;

    static char buf[1 << 20];
    ex_monotonic_allocator mono;
    ex_monotonic_allocator_init(&mono, buf, sizeof buf, ex_libc_allocator());
    run("monotonic", ex_monotonic_allocator_get(&mono), &checks);

    ex_jemalloc_allocator *je;
    CHECK(!ex_jemalloc_allocator_create(2, &je).code, "jemalloc");
    run("jemalloc arenas", ex_jemalloc_allocator_get(je), &checks);
    ex_jemalloc_allocator_destroy(je);
    return stress_finish("alloc_stress", checks);
}
