/* The jemalloc frame allocator (cexec/allocators.h, "jemalloc") and pools
 * with per-worker arenas (EX_POOL_FRAMES_ARENAS, the default): argument checks, creating
 * and destroying many allocators, alignment / size / pattern / counter
 * checks, which arena owns a block (jemalloc's "arenas.lookup", plain builds
 * only: sanitizer builds route the allocator to malloc and have no
 * exi_je_* symbols), round-robin slots of non-worker threads, the pool
 * making its work allocate from its arenas, an explicit pool allocator
 * winning over the arenas, and blocks handed between threads. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cexec/allocators.h>

#include "common/helpers.h"

TEST_SUITE(jemalloc_allocator, 30);

/* ----------------------------------------------- which build this is */

/* Sanitizer builds route the allocator to malloc and link no private
 * jemalloc: exi_je_mallctl must not even be referenced there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define JE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define JE_SANITIZED 1
#endif
#endif

#define NO_ARENA 0xffffffffu /* arena not known or not observed */

#ifndef JE_SANITIZED
/* The private jemalloc's mallctl.  Weak: a plain build made with
 * CEXEC_JEMALLOC=malloc has no private jemalloc either, and then this is
 * NULL (the arena checks are skipped, the rest still runs). */
int exi_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));
static bool have_mallctl(void) { return exi_je_mallctl != NULL; }

/* The jemalloc arena that owns p; NO_ARENA if jemalloc does not know p.
 * jemalloc registers every page of a slab but only the first and last page
 * of a large extent, and places a large block at a random cache-line offset
 * in its first page: see lookup_works for the blocks this can answer for. */
static unsigned arena_of(const void *p) {
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
static bool lookup_works(size_t size, size_t align) {
    size_t off = align < 16 ? 16 : align;
    return off <= 32 || size + off <= 14336;
}

static unsigned mallctl_unsigned(const char *name) {
    unsigned v = 0;
    size_t sz = sizeof v;
    cr_assert_eq(exi_je_mallctl(name, &v, &sz, NULL, 0), 0, "mallctl %s", name);
    return v;
}
#endif

/* Whether this test run can ask jemalloc which arena owns a block. */
static bool arenas_observable(void) {
#ifdef JE_SANITIZED
    return false;
#else
    return have_mallctl() && !ex_jemalloc_is_malloc();
#endif
}

#define SKIP_UNLESS_ARENAS_OBSERVABLE()                                                                               \
    do {                                                                                                              \
        if (!arenas_observable()) {                                                                                   \
            expect_no_leaks();                                                                                        \
            cr_skip_test("this build routes the jemalloc allocator to malloc: arena ownership is not observable");   \
        }                                                                                                             \
    } while (0)

/* ------------------------------------------------------------ utilities */

/* Bounded waits (not timing assertions: the bound only turns a hang into a
 * failure with a message). */
#define WAIT_LIMIT_S 20.0

static ex_alloc_stats stats_of(const ex_allocator *a) {
    ex_alloc_stats s;
    memset(&s, 0, sizeof s);
    ex_error e = ex_allocator_stats(a, &s);
    cr_assert_eq(e.code, 0, "ex_allocator_stats(%s): %s", a->name, e.msg ? e.msg : "");
    return s;
}

static bool aligned_to(const void *p, size_t align) { return ((uintptr_t)p & (align - 1)) == 0; }

static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Pattern byte k of a block tagged seed. */
static unsigned char pat(uint32_t seed, size_t k) {
    return (unsigned char)((seed * 131u) ^ (uint32_t)(k * 7u) ^ (uint32_t)(k >> 8));
}

static void fill(void *p, size_t size, uint32_t seed) {
    unsigned char *b = p;
    for (size_t k = 0; k < size; k++) b[k] = pat(seed, k);
}

/* Index of the first byte that differs from the pattern, or size. */
static size_t first_bad(const void *p, size_t size, uint32_t seed) {
    const unsigned char *b = p;
    for (size_t k = 0; k < size; k++)
        if (b[k] != pat(seed, k)) return k;
    return size;
}

static ex_jemalloc_allocator *make_je(unsigned arenas) {
    ex_jemalloc_allocator *j = NULL;
    ex_error e = ex_jemalloc_allocator_create(arenas, &j);
    cr_assert_eq(e.code, 0, "ex_jemalloc_allocator_create(%u): %s", arenas, e.msg ? e.msg : "");
    cr_assert_not_null(j);
    return j;
}

/* Errors seen on other threads, asserted on the test thread after joining. */
typedef struct thread_errors {
    atomic_int count;
    char first[256];
    pthread_mutex_t mu;
} thread_errors;

static void terr_init(thread_errors *t) {
    atomic_init(&t->count, 0);
    t->first[0] = 0;
    pthread_mutex_init(&t->mu, NULL);
}

static void terr_record(thread_errors *t, const char *what, long a, long b) {
    pthread_mutex_lock(&t->mu);
    if (atomic_fetch_add(&t->count, 1) == 0) snprintf(t->first, sizeof t->first, "%s (%ld, %ld)", what, a, b);
    pthread_mutex_unlock(&t->mu);
}

static void terr_check(thread_errors *t, const char *test) {
    pthread_mutex_lock(&t->mu);
    int n = atomic_load(&t->count);
    cr_expect_eq(n, 0, "%s: %d error(s) on other threads, first: %s", test, n, t->first);
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_destroy(&t->mu);
}

/* ---------------------------------------------------------------- pools */

static ex_pool *make_pool(unsigned threads, bool arenas, const ex_allocator *frame_alloc) {
    ex_pool_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.threads = threads;
    cfg.name_prefix = "je";
    cfg.allocator = frame_alloc;
    cfg.frames = arenas ? EX_POOL_FRAMES_ARENAS : EX_POOL_FRAMES_PROCESS;
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(&cfg, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    cr_assert_not_null(p);
    return p;
}

static void destroy_pool(ex_pool *p) { cr_assert_eq(ex_pool_destroy(p).code, 0); }

/* The default frame allocator the pool gives its work. */
static const ex_allocator *pool_frame_allocator(ex_pool *p) {
    ex_env_pair sp;
    ex_env_pair_init(&sp, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(p)), ex_env_empty());
    return ex_get_allocator(ex_env_of_pair(&sp));
}

/* A gang: one item per worker of a pool, each waiting (bounded) until all
 * have started, so each runs on a different worker (a worker busy with one
 * cannot take another); then fn runs with the worker's index. */
#define MAX_GANG 8

typedef struct gang gang;
typedef void (*gang_fn)(void *arg, unsigned worker);

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
    double deadline = test_now_s() + WAIT_LIMIT_S;
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
static void on_each_worker(ex_pool *p, gang_fn fn, void *arg) {
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
    double deadline = test_now_s() + 2 * WAIT_LIMIT_S;
    while (atomic_load(&g.finished) < g.n && test_now_s() < deadline) sched_yield();
    cr_assert_eq(atomic_load(&g.finished), g.n, "the gang items finished within the bound");
    cr_assert_eq(atomic_load(&g.stray), 0, "each gang item ran on its own worker of the pool");
    for (unsigned i = 0; i < g.n; i++) cr_assert_eq(atomic_load(&g.ran[i]), 1, "worker %u ran one item", i);
}

/* ============================================================ arguments */

Test(jemalloc_allocator, create_rejects_bad_arguments) {
    ex_jemalloc_allocator *j = (ex_jemalloc_allocator *)(uintptr_t)1;
    ex_error e = ex_jemalloc_allocator_create(0, &j);
    cr_expect_eq(e.code, EX_EINVAL, "0 arenas");
    cr_expect_null(j, "*out is cleared on failure");

    j = (ex_jemalloc_allocator *)(uintptr_t)1;
    e = ex_jemalloc_allocator_create(1025, &j);
    cr_expect_eq(e.code, EX_EINVAL, "1025 arenas");
    cr_expect_null(j);
    e = ex_jemalloc_allocator_create(0xffffffffu, &j);
    cr_expect_eq(e.code, EX_EINVAL, "UINT_MAX arenas");
    cr_expect_null(j);

    cr_expect_eq(ex_jemalloc_allocator_create(1, NULL).code, EX_EINVAL, "NULL out");
    cr_expect_eq(ex_jemalloc_allocator_create(0, NULL).code, EX_EINVAL, "NULL out and 0 arenas");

    ex_jemalloc_allocator_destroy(NULL); /* NULL-safe */
    cr_expect_eq(test_alloc_count(), 0, "nothing came from the default allocator");
    expect_no_leaks();
}

Test(jemalloc_allocator, create_accepts_one_and_1024_arenas) {
    unsigned counts[2] = { 1, 1024 };
    for (int k = 0; k < 2; k++) {
        ex_jemalloc_allocator *j = make_je(counts[k]);
        const ex_allocator *a = ex_jemalloc_allocator_get(j);
        cr_assert_not_null(a);
        cr_expect_str_eq(a->name, "jemalloc");
        cr_expect_not_null(a->stats, "keeps statistics");
        ex_alloc_stats s = stats_of(a);
        cr_expect_eq(s.allocations, 0u);
        cr_expect_eq(s.frees, 0u);
        cr_expect_eq(s.bytes_in_use, 0u);
        void *p = ex_allocate(a, 100, 8);
        cr_assert_not_null(p, "%u arenas: allocation", counts[k]);
        fill(p, 100, 7);
        cr_expect_eq(first_bad(p, 100, 7), 100u);
        ex_deallocate(a, p, 100, 8);
        s = stats_of(a);
        cr_expect_eq(s.allocations, 1u);
        cr_expect_eq(s.frees, 1u);
        cr_expect_eq(s.bytes_in_use, 0u);
        ex_jemalloc_allocator_destroy(j);
    }
    cr_expect_eq(test_alloc_count(), 0, "the jemalloc allocator does not use the default allocator");
    expect_no_leaks();
}

/* More rounds than jemalloc has arena indices (4095) and explicit tcaches
 * (about 4094) when multiplied by the arenas and tcaches of each round: a
 * destroyed allocator must give both back. */
#define CYCLE_ROUNDS 4200
#define CYCLE_ARENAS 2

Test(jemalloc_allocator, create_and_destroy_many_times) {
#ifndef JE_SANITIZED
    unsigned narenas_before = arenas_observable() ? mallctl_unsigned("arenas.narenas") : 0;
#endif
    for (int i = 0; i < CYCLE_ROUNDS; i++) {
        ex_jemalloc_allocator *j = NULL;
        ex_error e = ex_jemalloc_allocator_create(CYCLE_ARENAS, &j);
        cr_assert_eq(e.code, 0, "round %d: %s", i, e.msg ? e.msg : "");
        const ex_allocator *a = ex_jemalloc_allocator_get(j);
        size_t size = (size_t)(16 + (i % 7) * 40);
        void *p = ex_allocate(a, size, 16);
        cr_assert_not_null(p, "round %d", i);
        fill(p, size, (uint32_t)i);
        cr_assert_eq(first_bad(p, size, (uint32_t)i), size, "round %d", i);
        ex_deallocate(a, p, size, 16);
        ex_alloc_stats s = stats_of(a);
        cr_assert_eq(s.allocations, 1u, "round %d: a new allocator starts from zero", i);
        cr_assert_eq(s.frees, 1u, "round %d", i);
        cr_assert_eq(s.bytes_in_use, 0u, "round %d", i);
        ex_jemalloc_allocator_destroy(j);
    }
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        /* jemalloc reuses destroyed arenas: the total stays far below what
         * CYCLE_ROUNDS * CYCLE_ARENAS fresh arenas would need. */
        unsigned narenas_after = mallctl_unsigned("arenas.narenas");
        cr_expect_leq(narenas_after, narenas_before + 2 * CYCLE_ARENAS,
                      "destroyed arenas are reused (%u arenas before, %u after %d rounds)", narenas_before,
                      narenas_after, CYCLE_ROUNDS);
        /* and an explicit tcache is still available */
        unsigned tc = 0;
        size_t sz = sizeof tc;
        int rc = exi_je_mallctl("tcache.create", &tc, &sz, NULL, 0);
        cr_expect_eq(rc, 0, "the tcaches were given back (tcache.create: %d)", rc);
        if (rc == 0) cr_expect_eq(exi_je_mallctl("tcache.destroy", NULL, NULL, &tc, sizeof tc), 0);
    }
#endif
    cr_expect_eq(test_alloc_count(), 0, "the jemalloc allocator does not use the default allocator");
    expect_no_leaks();
}

Test(jemalloc_allocator, is_malloc_matches_the_build) {
#ifdef JE_SANITIZED
    cr_expect(ex_jemalloc_is_malloc(), "sanitizer builds route the jemalloc allocator to malloc");
#else
    if (have_mallctl())
        cr_expect(!ex_jemalloc_is_malloc(), "the plain build uses its private jemalloc");
    else
        cr_expect(ex_jemalloc_is_malloc(), "no private jemalloc linked (CEXEC_JEMALLOC=malloc): routed to malloc");
#endif
    expect_no_leaks();
}

/* ========================================================== allocation */

static const size_t test_sizes[] = { 0,    1,     7,     15,    16,    17,     63,         64,     100,
                                     255,  256,   1000,  4095,  4096,  4097,   16383,      16384,  32767,
                                     32768, 65539, 262144, 524288, 1048575, 1u << 20 };
#define N_SIZES (sizeof test_sizes / sizeof test_sizes[0])
#define N_ALIGNS 13 /* 1 .. 4096 */

Test(jemalloc_allocator, alignments_sizes_patterns_and_counters) {
    ex_jemalloc_allocator *j = make_je(2);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    static void *blocks[N_ALIGNS][N_SIZES];
    uint64_t total = 0;
    for (int la = 0; la < N_ALIGNS; la++) {
        size_t align = (size_t)1 << la;
        for (size_t k = 0; k < N_SIZES; k++) {
            size_t size = test_sizes[k];
            void *p = ex_allocate(a, size, align);
            cr_assert_not_null(p, "size %zu align %zu", size, align);
            cr_assert(aligned_to(p, align), "%p is aligned to %zu (size %zu)", p, align, size);
            fill(p, size, (uint32_t)(la * 100 + (int)k));
            blocks[la][k] = p;
            total += size;
        }
    }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)(N_ALIGNS * N_SIZES));
    cr_expect_eq(s.frees, 0u);
    cr_expect_eq(s.failures, 0u);
    cr_expect_eq(s.bytes_in_use, total, "bytes in use are the sizes asked for (%llu, expected %llu)",
                 (unsigned long long)s.bytes_in_use, (unsigned long long)total);
    cr_expect_geq(s.peak_bytes, total);
    /* every block intact once all are filled: no two overlap */
    for (int la = 0; la < N_ALIGNS; la++)
        for (size_t k = 0; k < N_SIZES; k++) {
            size_t size = test_sizes[k];
            size_t bad = first_bad(blocks[la][k], size, (uint32_t)(la * 100 + (int)k));
            cr_assert_eq(bad, size, "size %zu align %zu: byte %zu changed", size, (size_t)1 << la, bad);
        }
    /* free in an order different from allocation */
    for (size_t k = N_SIZES; k-- > 0;)
        for (int la = 0; la < N_ALIGNS; la++) ex_deallocate(a, blocks[la][k], test_sizes[k], (size_t)1 << la);
    s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)(N_ALIGNS * N_SIZES));
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.failures, 0u);
    ex_jemalloc_allocator_destroy(j);
    cr_expect_eq(test_alloc_count(), 0);
    expect_no_leaks();
}

Test(jemalloc_allocator, reuse_after_free_keeps_patterns) {
    /* alloc / free churn with random sizes and alignments, a window of
     * live blocks whose patterns are checked when they are freed */
    ex_jemalloc_allocator *j = make_je(1);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    enum { WINDOW = 64, STEPS = 20000 };
    struct { void *p; size_t size, align; uint32_t seed; } live[WINDOW];
    memset(live, 0, sizeof live);
    uint32_t rng = 12345;
    uint64_t allocs = 0;
    for (uint32_t step = 0; step < STEPS; step++) {
        int w = (int)(lcg(&rng) % WINDOW);
        if (live[w].p) {
            size_t bad = first_bad(live[w].p, live[w].size, live[w].seed);
            cr_assert_eq(bad, live[w].size, "step %u: block of %zu (align %zu) changed at %zu", step, live[w].size,
                         live[w].align, bad);
            ex_deallocate(a, live[w].p, live[w].size, live[w].align);
            live[w].p = NULL;
        }
        uint32_t r = lcg(&rng);
        size_t size = (r & 63) == 0 ? (size_t)(lcg(&rng) % (1u << 20)) : (size_t)(lcg(&rng) % 2048);
        size_t align = (size_t)1 << (lcg(&rng) % N_ALIGNS);
        void *p = ex_allocate(a, size, align);
        cr_assert_not_null(p);
        cr_assert(aligned_to(p, align));
        fill(p, size, step);
        live[w].p = p, live[w].size = size, live[w].align = align, live[w].seed = step;
        allocs++;
    }
    for (int w = 0; w < WINDOW; w++)
        if (live[w].p) {
            cr_assert_eq(first_bad(live[w].p, live[w].size, live[w].seed), live[w].size);
            ex_deallocate(a, live[w].p, live[w].size, live[w].align);
        }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, allocs);
    cr_expect_eq(s.frees, allocs);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.failures, 0u);
    ex_jemalloc_allocator_destroy(j);
    expect_no_leaks();
}

Test(jemalloc_allocator, two_allocators_on_one_thread_keep_their_own_blocks_and_counters) {
    ex_jemalloc_allocator *j1 = make_je(2), *j2 = make_je(3);
    const ex_allocator *a1 = ex_jemalloc_allocator_get(j1), *a2 = ex_jemalloc_allocator_get(j2);
    enum { N = 200 };
    static void *b1[N], *b2[N];
    for (int i = 0; i < N; i++) { /* alternate: the thread's cached allocator changes every call */
        b1[i] = ex_allocate(a1, 48, 8);
        b2[i] = ex_allocate(a2, 80, 32);
        cr_assert(b1[i] && b2[i]);
        fill(b1[i], 48, (uint32_t)i);
        fill(b2[i], 80, (uint32_t)(i + N));
    }
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        unsigned r1 = arena_of(b1[0]), r2 = arena_of(b2[0]);
        cr_expect_neq(r1, NO_ARENA);
        cr_expect_neq(r2, NO_ARENA);
        cr_expect_neq(r1, r2, "two allocators never share an arena");
        for (int i = 0; i < N; i++) {
            cr_expect_eq(arena_of(b1[i]), r1, "block %d of allocator 1", i);
            cr_expect_eq(arena_of(b2[i]), r2, "block %d of allocator 2", i);
        }
    }
#endif
    ex_alloc_stats s1 = stats_of(a1), s2 = stats_of(a2);
    cr_expect_eq(s1.allocations, (uint64_t)N);
    cr_expect_eq(s2.allocations, (uint64_t)N);
    cr_expect_eq(s1.bytes_in_use, (uint64_t)N * 48);
    cr_expect_eq(s2.bytes_in_use, (uint64_t)N * 80);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(first_bad(b1[i], 48, (uint32_t)i), 48u);
        cr_assert_eq(first_bad(b2[i], 80, (uint32_t)(i + N)), 80u);
        ex_deallocate(a2, b2[i], 80, 32);
        ex_deallocate(a1, b1[i], 48, 8);
    }
    s1 = stats_of(a1), s2 = stats_of(a2);
    cr_expect_eq(s1.frees, (uint64_t)N);
    cr_expect_eq(s2.frees, (uint64_t)N);
    cr_expect_eq(s1.bytes_in_use, 0u);
    cr_expect_eq(s2.bytes_in_use, 0u);
    ex_jemalloc_allocator_destroy(j1);
    /* the other one still works after its neighbour is gone */
    void *p = ex_allocate(a2, 1000, 64);
    cr_assert_not_null(p);
    fill(p, 1000, 3);
    cr_expect_eq(first_bad(p, 1000, 3), 1000u);
    ex_deallocate(a2, p, 1000, 64);
    ex_jemalloc_allocator_destroy(j2);
    expect_no_leaks();
}

/* ====================================================== round-robin slots */

#define RR_ARENAS 3
#define RR_THREADS 6
#define RR_BLOCKS 16

typedef struct rr_arg {
    const ex_allocator *a;
    thread_errors *errs;
    int index;
    unsigned arena;
} rr_arg;

static void *rr_thread(void *v) {
    rr_arg *r = v;
    void *b[RR_BLOCKS];
    size_t sizes[RR_BLOCKS];
    r->arena = 0;
    for (int i = 0; i < RR_BLOCKS; i++) {
        sizes[i] = (size_t)(8 + i * 97);
        b[i] = ex_allocate(r->a, sizes[i], 16);
        if (!b[i]) {
            terr_record(r->errs, "allocation failed", r->index, i);
            return NULL;
        }
        fill(b[i], sizes[i], (uint32_t)(r->index * 1000 + i));
    }
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        r->arena = arena_of(b[0]);
        if (r->arena == NO_ARENA) terr_record(r->errs, "arenas.lookup failed", r->index, 0);
        for (int i = 1; i < RR_BLOCKS; i++)
            if (arena_of(b[i]) != r->arena)
                terr_record(r->errs, "a thread's blocks come from more than one arena", r->index, i);
    }
#endif
    for (int i = 0; i < RR_BLOCKS; i++) {
        if (first_bad(b[i], sizes[i], (uint32_t)(r->index * 1000 + i)) != sizes[i])
            terr_record(r->errs, "pattern changed", r->index, i);
        ex_deallocate(r->a, b[i], sizes[i], 16);
    }
    return NULL;
}

Test(jemalloc_allocator, threads_other_than_workers_get_slots_round_robin) {
    ex_jemalloc_allocator *j = make_je(RR_ARENAS);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    thread_errors errs;
    terr_init(&errs);
    rr_arg args[RR_THREADS];
    for (int t = 0; t < RR_THREADS; t++) {
        /* one after another, so the order of first use is known */
        args[t] = (rr_arg){ a, &errs, t, 0 };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, rr_thread, &args[t]), 0);
        cr_assert_eq(pthread_join(th, NULL), 0);
    }
    terr_check(&errs, "round-robin threads");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)(RR_THREADS * RR_BLOCKS), "counters of exited threads are kept");
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    /* the test thread is the next newcomer: slot RR_THREADS % RR_ARENAS */
    void *mine = ex_allocate(a, 64, 8);
    cr_assert_not_null(mine);
    fill(mine, 64, 99);
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        unsigned auto_arenas = mallctl_unsigned("opt.narenas");
        for (int t = 0; t < RR_THREADS; t++)
            cr_expect_geq(args[t].arena, auto_arenas, "thread %d: an explicit arena (%u), not an automatic one",
                          t, args[t].arena);
        for (int t = 0; t < RR_ARENAS; t++)
            for (int u = t + 1; u < RR_ARENAS; u++)
                cr_expect_neq(args[t].arena, args[u].arena, "threads %d and %d have different slots", t, u);
        for (int t = RR_ARENAS; t < RR_THREADS; t++)
            cr_expect_eq(args[t].arena, args[t - RR_ARENAS].arena, "thread %d takes the slot of thread %d again", t,
                         t - RR_ARENAS);
        cr_expect_eq(arena_of(mine), args[RR_THREADS % RR_ARENAS].arena, "the test thread came next in turn");
    }
#endif
    cr_expect_eq(first_bad(mine, 64, 99), 64u);
    ex_deallocate(a, mine, 64, 8);
    s = stats_of(a);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    ex_jemalloc_allocator_destroy(j);
    expect_no_leaks();
}

/* ---- destroy while a thread that used it is still alive */

typedef struct linger_arg {
    const ex_allocator *first;
    const ex_allocator *_Atomic second;
    atomic_int phase; /* 1: used first, 2: may use second, 3: done */
    thread_errors *errs;
} linger_arg;

static void *linger_thread(void *v) {
    linger_arg *l = v;
    void *p = ex_allocate(l->first, 200, 16);
    if (!p) terr_record(l->errs, "allocation from the first allocator failed", 0, 0);
    else {
        fill(p, 200, 1);
        ex_deallocate(l->first, p, 200, 16);
    }
    atomic_store(&l->phase, 1);
    double deadline = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(&l->phase) != 2 && test_now_s() < deadline) sched_yield();
    if (atomic_load(&l->phase) != 2) {
        terr_record(l->errs, "the test thread did not go on", 0, 0);
        return NULL;
    }
    const ex_allocator *b = atomic_load(&l->second);
    for (int i = 0; i < 100; i++) {
        p = ex_allocate(b, 300, 16);
        if (!p) {
            terr_record(l->errs, "allocation from the second allocator failed", i, 0);
            break;
        }
        fill(p, 300, (uint32_t)i);
        if (first_bad(p, 300, (uint32_t)i) != 300) terr_record(l->errs, "pattern changed", i, 0);
        ex_deallocate(b, p, 300, 16);
    }
    atomic_store(&l->phase, 3);
    return NULL; /* exits: the second allocator's thread record is retired */
}

Test(jemalloc_allocator, destroy_while_a_thread_that_used_it_lives_on) {
    thread_errors errs;
    terr_init(&errs);
    ex_jemalloc_allocator *j1 = make_je(2);
    linger_arg l;
    l.first = ex_jemalloc_allocator_get(j1);
    atomic_init(&l.second, NULL);
    atomic_init(&l.phase, 0);
    l.errs = &errs;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, linger_thread, &l), 0);
    double deadline = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(&l.phase) != 1 && test_now_s() < deadline) sched_yield();
    cr_assert_eq(atomic_load(&l.phase), 1, "the thread used the first allocator");
    ex_alloc_stats s = stats_of(l.first);
    cr_expect_eq(s.allocations, 1u);
    cr_expect_eq(s.frees, 1u);
    /* the thread is idle, alive, and no longer uses j1 */
    ex_jemalloc_allocator_destroy(j1);
    ex_jemalloc_allocator *j2 = make_je(2); /* may get the same thread key */
    atomic_store(&l.second, ex_jemalloc_allocator_get(j2));
    atomic_store(&l.phase, 2);
    cr_assert_eq(pthread_join(th, NULL), 0);
    terr_check(&errs, "lingering thread");
    cr_expect_eq(atomic_load(&l.phase), 3);
    s = stats_of(ex_jemalloc_allocator_get(j2));
    cr_expect_eq(s.allocations, 100u, "the exited thread's counters are kept");
    cr_expect_eq(s.frees, 100u);
    cr_expect_eq(s.bytes_in_use, 0u);
    ex_jemalloc_allocator_destroy(j2);
    expect_no_leaks();
}

/* ============================================= arena ownership on a pool */

#define OWN_K 48
#define OWN_ROUNDS 40
#define OWN_SIZES 4
static const size_t own_sizes[OWN_SIZES] = { 48, 64, 3000, 40000 }; /* the last is beyond the tcache */
static const size_t own_aligns[OWN_SIZES] = { 8, 16, 64, 32 };

static size_t own_size(int k) { return own_sizes[k % OWN_SIZES]; }
static size_t own_align(int k) { return own_aligns[k % OWN_SIZES]; }
static uint32_t own_seed(unsigned w, int round, int k) {
    return (uint32_t)(w * 100000u + (unsigned)round * 100u + (unsigned)k);
}

#ifndef JE_SANITIZED
enum { PH_ALLOC, PH_FREE_NEIGHBOUR, PH_FREE_OWN };

typedef struct own_ctx {
    const ex_allocator *a;
    unsigned n;
    int phase;
    int round;
    thread_errors *errs;
    void *blocks[MAX_GANG][OWN_K];
    unsigned arena[MAX_GANG];        /* arena of the worker's first block */
    unsigned foreign[MAX_GANG];      /* new blocks of worker i from another arena */
} own_ctx;


static void own_free(own_ctx *c, unsigned owner) {
    for (int k = 0; k < OWN_K; k++) {
        void *p = c->blocks[owner][k];
        if (!p) continue;
        if (first_bad(p, own_size(k), own_seed(owner, c->round, k)) != own_size(k))
            terr_record(c->errs, "pattern changed before the free (owner, block)", (long)owner, k);
        ex_deallocate(c->a, p, own_size(k), own_align(k));
        c->blocks[owner][k] = NULL;
    }
}

static void own_step(void *v, unsigned w) {
    own_ctx *c = v;
    switch (c->phase) {
    case PH_ALLOC:
        for (int k = 0; k < OWN_K; k++) {
            void *p = ex_allocate(c->a, own_size(k), own_align(k));
            if (!p) {
                terr_record(c->errs, "allocation failed (worker, block)", (long)w, k);
                continue;
            }
            if (!aligned_to(p, own_align(k))) terr_record(c->errs, "misaligned (worker, block)", (long)w, k);
            fill(p, own_size(k), own_seed(w, c->round, k));
            c->blocks[w][k] = p;
            unsigned ar = arena_of(p);
            if (ar == NO_ARENA) terr_record(c->errs, "arenas.lookup failed (worker, block)", (long)w, k);
            if (c->round == 0 && k == 0) c->arena[w] = ar;
            else if (ar != c->arena[w]) c->foreign[w]++;
        }
        break;
    case PH_FREE_NEIGHBOUR: /* blocks of worker w+1 freed on worker w */
        own_free(c, (w + 1) % c->n);
        break;
    case PH_FREE_OWN:
        own_free(c, w);
        break;
    }
}

typedef struct slot_probe {
    const ex_allocator *a;
    unsigned arena;
} slot_probe;

static void *slot_probe_thread(void *v) {
    slot_probe *s = v;
    void *p = ex_allocate(s->a, 64, 16);
    if (p) {
        s->arena = arena_of(p);
        ex_deallocate(s->a, p, 64, 16);
    }
    return NULL;
}

static void ownership_on_pool(unsigned workers) {
    SKIP_UNLESS_ARENAS_OBSERVABLE();
    ex_pool *p = make_pool(workers, true, NULL);
    static own_ctx c;
    memset(&c, 0, sizeof c);
    thread_errors errs;
    terr_init(&errs);
    c.a = pool_frame_allocator(p);
    cr_assert_not_null(c.a);
    cr_assert_str_eq(c.a->name, "jemalloc", "EX_POOL_FRAMES_ARENAS makes the pool's work allocate from jemalloc arenas");
    c.n = workers;
    c.errs = &errs;
    for (c.round = 0; c.round < OWN_ROUNDS; c.round++) {
        c.phase = PH_ALLOC;
        on_each_worker(p, own_step, &c);
        if (c.round == 0) {
            unsigned auto_arenas = mallctl_unsigned("opt.narenas");
            for (unsigned w = 0; w < workers; w++) {
                cr_assert_neq(c.arena[w], NO_ARENA);
                cr_expect_geq(c.arena[w], auto_arenas, "worker %u allocates from an explicit arena, not automatic %u",
                              w, c.arena[w]);
                for (unsigned u = w + 1; u < workers; u++)
                    cr_expect_neq(c.arena[w], c.arena[u], "workers %u and %u allocate from different arenas", w, u);
            }
        }
        if (c.round % 4 == 3) {
            /* freed on the test thread (which has a slot of its own) */
            for (unsigned w = 0; w < workers; w++) own_free(&c, w);
        } else {
            c.phase = PH_FREE_NEIGHBOUR;
            on_each_worker(p, own_step, &c);
        }
    }
    /* Non-worker threads take slots in turn from 0: the test thread (first
     * used above to free) has slot 0, worker 0's arena; the next newcomer
     * slot 1, worker 1's arena.  So worker i's arena is slot i's. */
    void *mine = ex_allocate(c.a, 64, 16);
    cr_assert_not_null(mine);
    cr_expect_eq(arena_of(mine), c.arena[0], "the test thread's slot 0 is worker 0's arena (%u, worker 0: %u)",
                 arena_of(mine), c.arena[0]);
    ex_deallocate(c.a, mine, 64, 16);
    slot_probe probe = { c.a, NO_ARENA };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, slot_probe_thread, &probe), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect_eq(probe.arena, c.arena[1], "the next thread's slot 1 is worker 1's arena (%u, worker 1: %u)",
                 probe.arena, c.arena[1]);
    terr_check(&errs, "ownership");
    for (unsigned w = 0; w < workers; w++)
        cr_expect_eq(c.foreign[w], 0u,
                     "worker %u: %u of its %d new blocks came from another arena after blocks of other workers were "
                     "freed on it (a block must return to its own arena)",
                     w, c.foreign[w], OWN_ROUNDS * OWN_K - 1);
    ex_alloc_stats s = stats_of(c.a);
    cr_expect_eq(s.allocations, (uint64_t)workers * OWN_ROUNDS * OWN_K + 2);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.failures, 0u);
    destroy_pool(p);
    expect_no_leaks();
}
#else
static void ownership_on_pool(unsigned workers) {
    (void)workers;
    SKIP_UNLESS_ARENAS_OBSERVABLE();
}
#endif

Test(jemalloc_allocator, arena_ownership_two_workers) { ownership_on_pool(2); }
Test(jemalloc_allocator, arena_ownership_four_workers) { ownership_on_pool(4); }

/* The pool's worker index is also the slot of a standalone allocator
 * (modulo its arenas). */
typedef struct slot_ctx {
    const ex_allocator *a;
    thread_errors *errs;
    unsigned arena[MAX_GANG];
} slot_ctx;

static void slot_step(void *v, unsigned w) {
    slot_ctx *c = v;
    void *b[8];
    for (int k = 0; k < 8; k++) {
        b[k] = ex_allocate(c->a, 128, 16);
        if (!b[k]) {
            terr_record(c->errs, "allocation failed", (long)w, k);
            return;
        }
        fill(b[k], 128, w);
    }
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        c->arena[w] = arena_of(b[0]);
        for (int k = 1; k < 8; k++)
            if (arena_of(b[k]) != c->arena[w]) terr_record(c->errs, "blocks of one worker in two arenas", (long)w, k);
    }
#endif
    for (int k = 0; k < 8; k++) {
        if (first_bad(b[k], 128, w) != 128) terr_record(c->errs, "pattern changed", (long)w, k);
        ex_deallocate(c->a, b[k], 128, 16);
    }
}

Test(jemalloc_allocator, standalone_allocator_on_pool_workers_uses_worker_index_slots) {
    ex_jemalloc_allocator *j = make_je(2);
    ex_pool *p = make_pool(4, false, NULL);
    thread_errors errs;
    terr_init(&errs);
    slot_ctx c;
    memset(&c, 0, sizeof c);
    c.a = ex_jemalloc_allocator_get(j);
    c.errs = &errs;
    on_each_worker(p, slot_step, &c);
    terr_check(&errs, "worker slots");
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        cr_expect_eq(c.arena[0], c.arena[2], "workers 0 and 2: slot 0");
        cr_expect_eq(c.arena[1], c.arena[3], "workers 1 and 3: slot 1");
        cr_expect_neq(c.arena[0], c.arena[1], "slots 0 and 1 are different arenas");
    }
#endif
    destroy_pool(p); /* the workers exit: their records are retired */
    ex_alloc_stats s = stats_of(c.a);
    cr_expect_eq(s.allocations, 32u);
    cr_expect_eq(s.frees, 32u);
    cr_expect_eq(s.bytes_in_use, 0u);
    ex_jemalloc_allocator_destroy(j);
    expect_no_leaks();
}

/* ====================================== pool work allocates from its arenas */

static ex_error plus1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

/* An inner sender with a real operation: just -> then -> then. */
static ex_sender *let_plus3(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    ex_sender *s = ex_then(ex_just(ex_int(in[0].as.i + 1)), plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    return ex_then(s, plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

static ex_sender *let_plus1(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(ex_int(in[0].as.i + 1));
}

#define LET_RUNS 40

/* Runs LET_RUNS pipelines of two let_values on p; returns how many
 * allocations the default (test) allocator saw meanwhile. */
static long run_lets(ex_pool *p) {
    ex_scheduler sch = ex_pool_scheduler(p);
    long before = test_alloc_count();
    for (int i = 0; i < LET_RUNS; i++) {
        ex_sender *s = ex_let_value(ex_just(ex_int(i)), let_plus3, NULL, EX_SIG(EX_T_INT));
        s = ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
        ex_result r = ex_sync_wait(ex_starts_on(sch, s));
        expect_value_int(&r, i + 4);
        ex_result_destroy(&r);
    }
    return test_alloc_count() - before;
}

Test(jemalloc_allocator, let_value_on_per_worker_arena_pool_allocates_from_the_arenas) {
    ex_pool *plain = make_pool(2, false, NULL);
    cr_expect_eq(pool_frame_allocator(plain), &test_allocator, "a plain pool's work uses the process default");
    long on_plain = run_lets(plain);
    destroy_pool(plain);

    ex_pool *arenas = make_pool(2, true, NULL);
    const ex_allocator *a = pool_frame_allocator(arenas);
    cr_assert_not_null(a);
    cr_expect_neq(a, &test_allocator);
    cr_expect_str_eq(a->name, "jemalloc");
    long on_arenas = run_lets(arenas);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)(2 * LET_RUNS), "the two inner operations of each run came from the arenas");
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(on_plain - on_arenas, 2 * LET_RUNS,
                 "the inner operations are not in the default allocator's count (plain pool %ld, arena pool %ld)",
                 on_plain, on_arenas);
    destroy_pool(arenas);
    expect_no_leaks();
}

static ex_error bulk_count(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)v, (void)n;
    atomic_uint *hits = ctx;
    atomic_fetch_add(&hits[i], 1);
    return ex_ok();
}

#define BULK_SHAPE 1000
#define BULK_RUNS 10

static long run_bulks(ex_pool *p, atomic_uint *hits) {
    long before = test_alloc_count();
    for (int k = 0; k < BULK_RUNS; k++) {
        for (int i = 0; i < BULK_SHAPE; i++) atomic_init(&hits[i], 0);
        ex_sender *s = ex_bulk(ex_just(ex_int(5)), BULK_SHAPE, bulk_count, hits);
        ex_result r = ex_sync_wait(ex_starts_on(ex_pool_scheduler(p), s));
        expect_value_int(&r, 5);
        ex_result_destroy(&r);
        for (int i = 0; i < BULK_SHAPE; i++) cr_assert_eq(atomic_load(&hits[i]), 1u, "run %d: index %d ran once", k, i);
    }
    return test_alloc_count() - before;
}

Test(jemalloc_allocator, bulk_on_per_worker_arena_pool_allocates_helpers_from_the_arenas) {
    static atomic_uint hits[BULK_SHAPE];
    /* 6 workers: 5 helpers, more than EX_BULK_INLINE_HELPERS: one allocation per run */
    ex_pool *plain = make_pool(6, false, NULL);
    long on_plain = run_bulks(plain, hits);
    destroy_pool(plain);

    ex_pool *arenas = make_pool(6, true, NULL);
    const ex_allocator *a = pool_frame_allocator(arenas);
    cr_assert_str_eq(a->name, "jemalloc");
    long on_arenas = run_bulks(arenas, hits);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)BULK_RUNS, "the helper items of each run came from the arenas (%llu)",
                 (unsigned long long)s.allocations);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(on_plain - on_arenas, BULK_RUNS,
                 "the helpers are not in the default allocator's count (plain pool %ld, arena pool %ld)", on_plain,
                 on_arenas);
    destroy_pool(arenas);
    expect_no_leaks();
}

/* ---- an explicit allocator wins over the arenas */

typedef struct count_alloc {
    ex_allocator a;
    atomic_long allocs, frees, in_use;
} count_alloc;

static void *ca_allocate(void *ctx, size_t size, size_t align) {
    count_alloc *c = ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    atomic_fetch_add(&c->allocs, 1);
    atomic_fetch_add(&c->in_use, 1);
    return p;
}

static void ca_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)size, (void)align;
    count_alloc *c = ctx;
    free(p);
    atomic_fetch_add(&c->frees, 1);
    atomic_fetch_sub(&c->in_use, 1);
}

static void ca_init(count_alloc *c) {
    memset(c, 0, sizeof *c);
    c->a = (ex_allocator){ ca_allocate, ca_deallocate, c, "counted", NULL };
    atomic_init(&c->allocs, 0);
    atomic_init(&c->frees, 0);
    atomic_init(&c->in_use, 0);
}

Test(jemalloc_allocator, explicit_pool_allocator_wins_over_the_arenas) {
    count_alloc x;
    ca_init(&x);
#ifndef JE_SANITIZED
    unsigned narenas_before = arenas_observable() ? mallctl_unsigned("arenas.narenas") : 0;
#endif
    ex_pool *p = make_pool(3, true, &x.a);
#ifndef JE_SANITIZED
    if (arenas_observable())
        cr_expect_eq(mallctl_unsigned("arenas.narenas"), narenas_before, "no arena was created for the pool");
#endif
    cr_expect_eq(pool_frame_allocator(p), &x.a, "the configured allocator is the pool's");
    long on_default = run_lets(p);
    cr_expect_eq(atomic_load(&x.allocs), 2 * LET_RUNS, "the inner operations came from the configured allocator (%ld)",
                 atomic_load(&x.allocs));
    cr_expect_eq(atomic_load(&x.in_use), 0);
    cr_expect_gt(on_default, 0, "the senders still come from the default allocator");
    destroy_pool(p);
    cr_expect_eq(atomic_load(&x.allocs), 2 * LET_RUNS, "creating and destroying the pool did not use it");
    expect_no_leaks();
}

/* A pool created without a config, or with a zeroed one, gives its work
 * per-worker jemalloc arenas; EX_POOL_FRAMES_PROCESS opts out. */
Test(jemalloc_allocator, pools_default_to_per_worker_arenas) {
    ex_pool *p = NULL;
    cr_assert_eq(ex_pool_create(NULL, &p).code, 0);
    const ex_allocator *a = pool_frame_allocator(p);
    cr_assert_not_null(a);
    cr_expect_str_eq(a->name, "jemalloc", "a pool made with a NULL config allocates frames from its arenas");
    long on_default = run_lets(p);
    ex_alloc_stats st = stats_of(a);
    cr_expect_geq(st.allocations, (uint64_t)(2 * LET_RUNS), "the let operations came from the arenas (%llu)",
                  (unsigned long long)st.allocations);
    cr_expect_eq(st.bytes_in_use, 0u);
    cr_expect_gt(on_default, 0, "the senders still come from the process default");
    destroy_pool(p);

    ex_pool_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.threads = 2;
    cr_assert_eq(ex_pool_create(&cfg, &p).code, 0);
    cr_expect_str_eq(pool_frame_allocator(p)->name, "jemalloc", "a zeroed config means the arenas too");
    destroy_pool(p);

    cfg.frames = EX_POOL_FRAMES_PROCESS;
    cr_assert_eq(ex_pool_create(&cfg, &p).code, 0);
    cr_expect_eq(pool_frame_allocator(p), &test_allocator, "EX_POOL_FRAMES_PROCESS: the process default");
    destroy_pool(p);
    expect_no_leaks();
}

/* ===================================================== many threads */

#define MT_THREADS 8
#define MT_ARENAS 4
#define MT_BLOCKS 3000

typedef struct handed {
    void *p;
    size_t size, align;
    uint32_t seed;
    unsigned arena; /* the producer's arena (NO_ARENA: not observed) */
} handed;

/* Blocks handed from thread i to thread i+1: a ring as large as all a
 * thread will ever receive, so pushing never waits. */
typedef struct mt_queue {
    pthread_mutex_t mu;
    handed items[MT_BLOCKS];
    int head, tail;
} mt_queue;

typedef struct mt_arg {
    const ex_allocator *a;
    int index;
    mt_queue *in, *out;
    atomic_int *go;
    thread_errors *errs;
    unsigned my_arena;
    long foreign; /* own blocks from another arena */
} mt_arg;

static bool mt_pop(mt_queue *q, handed *h) {
    pthread_mutex_lock(&q->mu);
    bool any = q->head != q->tail;
    if (any) *h = q->items[q->head++];
    pthread_mutex_unlock(&q->mu);
    return any;
}

static void mt_check_free(mt_arg *m, const handed *h) {
    size_t bad = first_bad(h->p, h->size, h->seed);
    if (bad != h->size) terr_record(m->errs, "a handed block changed (thread, byte)", m->index, (long)bad);
#ifndef JE_SANITIZED
    if (h->arena != NO_ARENA && arena_of(h->p) != h->arena)
        terr_record(m->errs, "a handed block changed arena (thread, seed)", m->index, (long)h->seed);
#endif
    ex_deallocate(m->a, h->p, h->size, h->align);
}

static void *mt_thread(void *v) {
    mt_arg *m = v;
    uint32_t rng = 0x9e37u + 7919u * (uint32_t)m->index;
    double deadline = test_now_s() + WAIT_LIMIT_S;
    while (!atomic_load(m->go) && test_now_s() < deadline) sched_yield();
    m->my_arena = NO_ARENA;
    int received = 0;
    for (int i = 0; i < MT_BLOCKS; i++) {
        uint32_t r = lcg(&rng);
        size_t size = (r & 31) == 0 ? (size_t)(lcg(&rng) % 300000) : (size_t)(lcg(&rng) % 1500);
        size_t align = (size_t)1 << (lcg(&rng) % N_ALIGNS);
        handed h = { ex_allocate(m->a, size, align), size, align, (uint32_t)(m->index * 1000000 + i), NO_ARENA };
        if (!h.p) {
            terr_record(m->errs, "allocation failed (thread, i)", m->index, i);
            continue;
        }
        if (!aligned_to(h.p, align)) terr_record(m->errs, "misaligned (thread, i)", m->index, i);
        fill(h.p, size, h.seed);
#ifndef JE_SANITIZED
        if (arenas_observable() && lookup_works(size, align)) {
            h.arena = arena_of(h.p);
            if (m->my_arena == NO_ARENA) m->my_arena = h.arena;
            else if (h.arena != m->my_arena) m->foreign++;
        }
#endif
        pthread_mutex_lock(&m->out->mu);
        m->out->items[m->out->tail++] = h;
        pthread_mutex_unlock(&m->out->mu);
        /* take what the previous thread handed over so far */
        handed got;
        while (received < MT_BLOCKS && mt_pop(m->in, &got)) {
            mt_check_free(m, &got);
            received++;
        }
    }
    /* the rest, with a bound */
    deadline = test_now_s() + WAIT_LIMIT_S;
    while (received < MT_BLOCKS && test_now_s() < deadline) {
        handed got;
        if (mt_pop(m->in, &got)) {
            mt_check_free(m, &got);
            received++;
        } else {
            sched_yield();
        }
    }
    if (received != MT_BLOCKS) terr_record(m->errs, "blocks never arrived (thread, received)", m->index, received);
    return NULL;
}

Test(jemalloc_allocator, many_threads_hand_blocks_to_each_other) {
    ex_jemalloc_allocator *j = make_je(MT_ARENAS);
    const ex_allocator *a = ex_jemalloc_allocator_get(j);
    static mt_queue queues[MT_THREADS];
    mt_arg args[MT_THREADS];
    pthread_t th[MT_THREADS];
    thread_errors errs;
    terr_init(&errs);
    atomic_int go;
    atomic_init(&go, 0);
    for (int i = 0; i < MT_THREADS; i++) {
        pthread_mutex_init(&queues[i].mu, NULL);
        queues[i].head = queues[i].tail = 0;
    }
    for (int i = 0; i < MT_THREADS; i++)
        args[i] = (mt_arg){ a, i, &queues[i], &queues[(i + 1) % MT_THREADS], &go, &errs, NO_ARENA, 0 };
    for (int i = 0; i < MT_THREADS; i++) cr_assert_eq(pthread_create(&th[i], NULL, mt_thread, &args[i]), 0);
    atomic_store(&go, 1);
    for (int i = 0; i < MT_THREADS; i++) cr_assert_eq(pthread_join(th[i], NULL), 0);
    terr_check(&errs, "many threads");
    for (int i = 0; i < MT_THREADS; i++) {
        cr_expect_eq(queues[i].head, queues[i].tail, "queue %d drained", i);
        pthread_mutex_destroy(&queues[i].mu);
    }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)MT_THREADS * MT_BLOCKS);
    cr_expect_eq(s.frees, s.allocations, "allocations %llu, frees %llu", (unsigned long long)s.allocations,
                 (unsigned long long)s.frees);
    cr_expect_eq(s.bytes_in_use, 0u, "bytes in use %lld", (long long)s.bytes_in_use);
    cr_expect_eq(s.failures, 0u);
    cr_expect_gt(s.peak_bytes, 0u);
#ifndef JE_SANITIZED
    if (arenas_observable()) {
        /* fresh allocator, 8 newcomers, 4 arenas: each arena serves two */
        for (int i = 0; i < MT_THREADS; i++) {
            cr_expect_eq(args[i].foreign, 0, "thread %d allocated only from its own arena", i);
            int same = 0;
            for (int k = 0; k < MT_THREADS; k++) same += args[k].my_arena == args[i].my_arena;
            cr_expect_eq(same, MT_THREADS / MT_ARENAS, "thread %d shares its arena with %d thread(s)", i, same - 1);
        }
    }
#endif
    ex_jemalloc_allocator_destroy(j);
    cr_expect_eq(test_alloc_count(), 0);
    expect_no_leaks();
}

/* Blocks allocated on pool workers of a pool with per-worker arenas and freed
 * by plain threads, concurrently (runs in every build). */
typedef struct xfree_ctx {
    const ex_allocator *a;
    thread_errors *errs;
    void *blocks[MAX_GANG][OWN_K];
} xfree_ctx;

static void xfree_alloc(void *v, unsigned w) {
    xfree_ctx *c = v;
    for (int k = 0; k < OWN_K; k++) {
        void *p = ex_allocate(c->a, own_size(k), own_align(k));
        if (!p) {
            terr_record(c->errs, "allocation failed", (long)w, k);
            continue;
        }
        fill(p, own_size(k), own_seed(w, 0, k));
        c->blocks[w][k] = p;
    }
}

typedef struct xfree_arg {
    xfree_ctx *c;
    unsigned owner;
} xfree_arg;

static void *xfree_thread(void *v) {
    xfree_arg *x = v;
    xfree_ctx *c = x->c;
    for (int k = 0; k < OWN_K; k++) {
        void *p = c->blocks[x->owner][k];
        if (!p) continue;
        if (first_bad(p, own_size(k), own_seed(x->owner, 0, k)) != own_size(k))
            terr_record(c->errs, "pattern changed", (long)x->owner, k);
        ex_deallocate(c->a, p, own_size(k), own_align(k));
        c->blocks[x->owner][k] = NULL;
    }
    return NULL;
}

Test(jemalloc_allocator, pool_blocks_freed_by_other_threads) {
    ex_pool *p = make_pool(4, true, NULL);
    static xfree_ctx c;
    memset(&c, 0, sizeof c);
    thread_errors errs;
    terr_init(&errs);
    c.a = pool_frame_allocator(p);
    cr_assert_str_eq(c.a->name, "jemalloc");
    c.errs = &errs;
    for (int round = 0; round < 20; round++) {
        on_each_worker(p, xfree_alloc, &c);
        pthread_t th[4];
        xfree_arg args[4];
        for (unsigned w = 0; w < 4; w++) {
            args[w] = (xfree_arg){ &c, w };
            cr_assert_eq(pthread_create(&th[w], NULL, xfree_thread, &args[w]), 0);
        }
        for (int w = 0; w < 4; w++) cr_assert_eq(pthread_join(th[w], NULL), 0);
    }
    terr_check(&errs, "freed by other threads");
    ex_alloc_stats s = stats_of(c.a);
    cr_expect_eq(s.allocations, 20u * 4u * OWN_K);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    destroy_pool(p);
    expect_no_leaks();
}
