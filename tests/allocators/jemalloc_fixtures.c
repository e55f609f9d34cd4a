/* SPDX-License-Identifier: MIT */
/* jemalloc_fixtures.c - see jemalloc_fixtures.h. */
#include <sched.h>
#include <string.h>

#include "allocators/jemalloc_fixtures.h"

#ifndef JE_SANITIZED
bool have_mallctl(void) { return exi_je_mallctl != NULL; }

/* The jemalloc arena that owns p; NO_ARENA if jemalloc does not know p.
 * jemalloc registers every page of a slab but only the first and last page
 * of a large extent, and places a large block at a random cache-line offset
 * in its first page: see lookup_works for the blocks this can answer for. */
unsigned arena_of(const void *p) {
    unsigned a = NO_ARENA;
    size_t sz = sizeof a;
    void *ptr = (void *)(uintptr_t)p;
    if (exi_je_mallctl("arenas.lookup", &a, &sz, &ptr, sizeof ptr)) return NO_ARENA;
    return a;
}

/* Whether arena_of can find a block of the allocator of this size and
 * alignment: the allocator returns the address `max(align, 16)` bytes into
 * jemalloc's block (its header), which is in the first page of a large
 * block when that offset is at most 32 (cache-line offset <= 4096 - 64),
 * and anywhere in a slab (small classes: up to 14 KiB). */
bool lookup_works(size_t size, size_t align) {
    size_t off = align < 16 ? 16 : align;
    return off <= 32 || size + off <= 14336;
}

unsigned mallctl_unsigned(const char *name) {
    unsigned v = 0;
    size_t sz = sizeof v;
    cr_assert_eq(exi_je_mallctl(name, &v, &sz, NULL, 0), 0, "mallctl %s", name);
    return v;
}
#endif

/* Whether this test run can ask jemalloc which arena owns a block. */
bool arenas_observable(void) {
#ifdef JE_SANITIZED
    return false;
#else
    return have_mallctl() && !ex_jemalloc_is_malloc();
#endif
}

/* ------------------------------------------------------------ blocks */

/* Pattern byte k of a block tagged seed. */
static unsigned char pat(uint32_t seed, size_t k) {
    return (unsigned char)((seed * 131u) ^ (uint32_t)(k * 7u) ^ (uint32_t)(k >> 8));
}

void fill(void *p, size_t size, uint32_t seed) {
    unsigned char *b = p;
    for (size_t k = 0; k < size; k++) b[k] = pat(seed, k);
}

/* Index of the first byte that differs from the pattern, or size. */
size_t first_bad(const void *p, size_t size, uint32_t seed) {
    const unsigned char *b = p;
    for (size_t k = 0; k < size; k++)
        if (b[k] != pat(seed, k)) return k;
    return size;
}

ex_jemalloc_allocator *make_je(unsigned arenas) {
    ex_jemalloc_allocator *j = NULL;
    ex_error e = ex_jemalloc_allocator_create(arenas, &j);
    expect_made(e, j, "ex_jemalloc_allocator_create");
    return j;
}

/* The default frame allocator the pool gives its work. */
const ex_allocator *pool_frame_allocator(ex_pool *p) {
    ex_env_pair sp;
    ex_env_pair_init(&sp, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(p)), ex_env_empty());
    return ex_get_allocator(ex_env_of_pair(&sp));
}

/* A gang: one item per worker of a pool, each waiting (bounded) until all
 * have started, so each runs on a different worker (a worker busy with one
 * cannot take another); then fn runs with the worker's index. */
typedef struct gang gang;

typedef struct gang_item {
    ex_work work;
    gang *g;
} gang_item;

struct gang {
    ex_pool *p;
    unsigned n;
    gang_fn fn;
    void *arg;
    atomic_uint arrived, finished;
    atomic_int ran[MAX_GANG];
    atomic_int stray;  /* ran off a worker, twice on one, or never met the others */
    gang_item items[MAX_GANG];
};

static void gang_execute(ex_work *w) {
    gang *g = ((gang_item *)(void *)w)->g;
    int idx = ex_pool_current_worker(g->p);
    atomic_fetch_add(&g->arrived, 1);
    double deadline = test_now_s() + ALLOC_WAIT_LIMIT_S;
    while (atomic_load(&g->arrived) < g->n && test_now_s() < deadline) sched_yield();
    if (idx < 0 || (unsigned)idx >= g->n || atomic_load(&g->arrived) < g->n ||
        atomic_fetch_add(&g->ran[idx], 1) != 0)
        atomic_fetch_add(&g->stray, 1);
    else
        g->fn(g->arg, (unsigned)idx);
    atomic_fetch_add(&g->finished, 1); /* last access to g */
}

static void gang_cancel(ex_work *w) {
    gang *g = ((gang_item *)(void *)w)->g;
    atomic_fetch_add(&g->stray, 1);
    atomic_fetch_add(&g->finished, 1);
}

/* Runs fn(arg, i) once on each worker i of p; returns when all are done. */
void on_each_worker(ex_pool *p, gang_fn fn, void *arg) {
    gang g;
    memset(&g, 0, sizeof g);
    g.p = p;
    g.n = ex_pool_size(p);
    cr_assert_leq(g.n, MAX_GANG);
    g.fn = fn;
    g.arg = arg;
    atomic_init(&g.arrived, 0);
    atomic_init(&g.finished, 0);
    atomic_init(&g.stray, 0);
    for (unsigned i = 0; i < g.n; i++) {
        atomic_init(&g.ran[i], 0);
        g.items[i].g = &g;
        g.items[i].work.next = NULL;
        g.items[i].work.execute = gang_execute;
        g.items[i].work.cancel = gang_cancel;
    }
    for (unsigned i = 0; i < g.n; i++) {
        ex_error e = ex_post(ex_pool_scheduler(p), &g.items[i].work);
        cr_assert_eq(e.code, 0, "ex_post: %s", e.msg ? e.msg : "");
    }
    double deadline = test_now_s() + 2 * ALLOC_WAIT_LIMIT_S;
    while (atomic_load(&g.finished) < g.n && test_now_s() < deadline) sched_yield();
    cr_assert_eq(atomic_load(&g.finished), g.n, "the gang items finished within the bound");
    cr_assert_eq(atomic_load(&g.stray), 0, "each gang item ran on its own worker of the pool");
    for (unsigned i = 0; i < g.n; i++) cr_assert_eq(atomic_load(&g.ran[i]), 1, "worker %u ran one item", i);
}

/* ---------------------------------- block shapes of the ownership tests */

#define OWN_SIZES 4
static const size_t own_sizes[OWN_SIZES] = { 48, 64, 3000, 40000 }; /* the last is beyond the tcache */
static const size_t own_aligns[OWN_SIZES] = { 8, 16, 64, 32 };

size_t own_size(int k) { return own_sizes[k % OWN_SIZES]; }
size_t own_align(int k) { return own_aligns[k % OWN_SIZES]; }
uint32_t own_seed(unsigned w, int round, int k) {
    return (uint32_t)(w * 100000u + (unsigned)round * 100u + (unsigned)k);
}
