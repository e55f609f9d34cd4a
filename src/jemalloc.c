/* jemalloc.c - per-worker jemalloc arenas with explicit tcaches.
 *
 * The jemalloc entry points are a private copy linked into cexec
 * (exi_je_*, see the Makefile): the application's malloc stays whatever it
 * is.  CEXEC_JEMALLOC_VIA_MALLOC (sanitizer / valgrind builds) replaces the
 * three calls with malloc-based equivalents. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "exi_core.h"
#include "exi_counters.h"
#include "exi_pool.h"

#define HEADER 16
#define MAX_ARENAS 1024
#define NO_TCACHE 0xffffffffu   /* jemalloc refused a tcache: use none */

#ifdef CEXEC_JEMALLOC_VIA_MALLOC
static int je_arena_create(unsigned *out) { static unsigned n; *out = n++; return 0; }
static int je_tcache_create(unsigned *out) { *out = 0; return 0; }
static void je_tcache_destroy(unsigned tc) { (void)tc; }
static void je_arena_destroy(unsigned a) { (void)a; }
static void *je_alloc(size_t size, size_t align, unsigned arena, unsigned tc) {
    (void)arena, (void)tc;
    void *p = NULL;
    return posix_memalign(&p, align, size) ? NULL : p;
}
static void je_free(void *p, size_t size, size_t align, unsigned arena, unsigned tc) {
    (void)size, (void)align, (void)arena, (void)tc;
    free(p);
}
bool ex_jemalloc_is_malloc(void) { return true; }
#else
void *exi_je_mallocx(size_t size, int flags);
void exi_je_sdallocx(void *p, size_t size, int flags);
int exi_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);

#define MALLOCX_LG_ALIGN(la) ((int)(la))
#define MALLOCX_TCACHE(tc) ((int)(((tc) + 2) << 8))
#define MALLOCX_ARENA(a) ((((int)(a)) + 1) << 20)

static int je_arena_create(unsigned *out) {
    size_t sz = sizeof *out;
    return exi_je_mallctl("arenas.create", out, &sz, NULL, 0);
}
static int je_tcache_create(unsigned *out) {
    size_t sz = sizeof *out;
    return exi_je_mallctl("tcache.create", out, &sz, NULL, 0);
}
static void je_tcache_destroy(unsigned tc) { (void)exi_je_mallctl("tcache.destroy", NULL, NULL, &tc, sizeof tc); }
static void je_arena_destroy(unsigned a) {
    char name[64];
    snprintf(name, sizeof name, "arena.%u.destroy", a);
    (void)exi_je_mallctl(name, NULL, NULL, NULL, 0);
}
/* jemalloc's size classes are 16-byte aligned already: asking for an
 * alignment of 16 or less would only take its slower aligned path. */
static int flags_of(size_t align, unsigned arena, unsigned tc) {
    /* MALLOCX_TCACHE(0) is explicit tcache 0, somebody's; "none" is -1. */
    int f = MALLOCX_ARENA(arena) | (tc == NO_TCACHE ? MALLOCX_TCACHE(-1) : MALLOCX_TCACHE(tc));
    return align > 16 ? f | MALLOCX_LG_ALIGN(__builtin_ctzll(align)) : f;
}
static void *je_alloc(size_t size, size_t align, unsigned arena, unsigned tc) {
    return exi_je_mallocx(size, flags_of(align, arena, tc));
}
static void je_free(void *p, size_t size, size_t align, unsigned arena, unsigned tc) {
    exi_je_sdallocx(p, size, flags_of(align, arena, tc));
}
bool ex_jemalloc_is_malloc(void) { return false; }
#endif

/* One per (thread, allocator): the thread's tcache for each arena. */
typedef struct jthread {
    struct ex_jemalloc_allocator *owner;
    struct jthread *prev, *next;  /* registry, under owner->mu */
    unsigned slot;                 /* arena this thread allocates from */
    /* counters written by this thread only (relaxed), summed by stats */
    uint64_t allocations, frees, bytes, peak;
    unsigned tc[];                 /* tcache per arena; 0 = not created (ids are stored + 1) */
} jthread;

struct ex_jemalloc_allocator {
    ex_allocator base;
    uint64_t id;
    unsigned narenas;
    unsigned arenas[MAX_ARENAS];
    pthread_key_t key;
    pthread_mutex_t mu;
    jthread *threads;
    uint32_t next_slot;
    uint64_t failures;
    uint64_t retired_allocations, retired_frees, retired_bytes, retired_peak;  /* under mu */
};

static EXI_TLS struct { uint64_t id; jthread *t; } last;
static uint64_t next_id = 1;

static void jthread_retire_locked(ex_jemalloc_allocator *j, jthread *t) {
    j->retired_allocations += t->allocations;
    j->retired_frees += t->frees;
    j->retired_bytes += t->bytes;
    j->retired_peak += t->peak;
    for (unsigned a = 0; a < j->narenas; a++)
        if (t->tc[a]) je_tcache_destroy(t->tc[a] - 1);
    if (t->prev) t->prev->next = t->next;
    else j->threads = t->next;
    if (t->next) t->next->prev = t->prev;
    free(t);  /* bookkeeping of the allocator itself, not a frame */
}

static void thread_exit(void *arg) {
    jthread *t = arg;
    ex_jemalloc_allocator *j = t->owner;
    if (last.t == t) {
        last.id = 0;
        last.t = NULL;
    }
    pthread_mutex_lock(&j->mu);
    jthread_retire_locked(j, t);
    pthread_mutex_unlock(&j->mu);
}

static jthread *new_thread(ex_jemalloc_allocator *j) {
    jthread *t = pthread_getspecific(j->key);
    if (!t) {
        t = calloc(1, sizeof *t + j->narenas * sizeof(unsigned));
        if (!t) return NULL;
        t->owner = j;
        int w = exi_pool_worker_index();
        t->slot = w >= 0 ? (unsigned)w % j->narenas : exi_faa_u32(&j->next_slot, 1) % j->narenas;
        if (pthread_setspecific(j->key, t)) {
            free(t);
            return NULL;
        }
        pthread_mutex_lock(&j->mu);
        t->next = j->threads;
        if (j->threads) j->threads->prev = t;
        j->threads = t;
        pthread_mutex_unlock(&j->mu);
    }
    last.id = j->id;
    last.t = t;
    return t;
}

static inline jthread *my_thread(ex_jemalloc_allocator *j) {
    if (__builtin_expect(last.id == j->id, 1)) return last.t;
    return new_thread(j);
}

/* The thread's tcache for arena a, created on first use; NO_TCACHE when
 * jemalloc refuses one (it allows about 4094 explicit tcaches per process,
 * and this design wants one per thread and arena). */
static unsigned tcache_for(jthread *t, unsigned a) {
    if (__builtin_expect(t->tc[a] != 0, 1)) return t->tc[a] - 1;
    unsigned tc;
    if (je_tcache_create(&tc)) return NO_TCACHE;
    t->tc[a] = tc + 1;
    return tc;
}

/* The block behind a user pointer: `align` (>= HEADER) bytes before it,
 * with the arena slot and that offset in the 16 bytes just before it. */
static inline void *finish_block(char *block, size_t align, unsigned a) {
    char *p = block + align;
    ((uint32_t *)(void *)(p - HEADER))[0] = a;
    ((uint32_t *)(void *)(p - HEADER))[1] = (uint32_t)align;
    return p;
}

static inline void count_alloc(jthread *t, size_t size) {
    exi_store_rlx_u64(&t->allocations, t->allocations + 1);
    uint64_t in = t->bytes + size;
    exi_store_rlx_u64(&t->bytes, in);
    if ((int64_t)in > (int64_t)t->peak) exi_store_rlx_u64(&t->peak, in);
}

__attribute__((noinline)) static void *allocate_slow(ex_jemalloc_allocator *j, size_t size, size_t align) {
    jthread *t = my_thread(j);
    if (!t) {
        exi_faa_u64(&j->failures, 1);
        return NULL;
    }
    unsigned a = t->slot;
    char *block = je_alloc(size + align, align, j->arenas[a], tcache_for(t, a));
    if (!block) {
        exi_faa_u64(&j->failures, 1);
        return NULL;
    }
    count_alloc(t, size);
    return finish_block(block, align, a);
}

static void *j_allocate(void *ctx, size_t size, size_t align) {
    ex_jemalloc_allocator *j = ctx;
    if (align < HEADER) align = HEADER;
    /* Fast path: the thread's record and its tcache for its arena exist. */
    if (__builtin_expect(last.id == j->id, 1)) {
        jthread *t = last.t;
        unsigned a = t->slot, tc1 = t->tc[a];
        if (__builtin_expect(tc1 != 0, 1)) {
            char *block = je_alloc(size + align, align, j->arenas[a], tc1 - 1);
            if (__builtin_expect(block != NULL, 1)) {
                count_alloc(t, size);
                return finish_block(block, align, a);
            }
        }
    }
    return allocate_slow(j, size, align);
}

static void j_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)align;
    ex_jemalloc_allocator *j = ctx;
    unsigned a = ((uint32_t *)(void *)((char *)p - HEADER))[0];
    size_t off = ((uint32_t *)(void *)((char *)p - HEADER))[1];
    jthread *t = __builtin_expect(last.id == j->id, 1) ? last.t : my_thread(j);
    /* Through this thread's tcache for the block's arena: the block goes
     * back to the arena it came from. */
    unsigned tc = !t ? NO_TCACHE : __builtin_expect(t->tc[a] != 0, 1) ? t->tc[a] - 1 : tcache_for(t, a);
    je_free((char *)p - off, size + off, off, j->arenas[a], tc);
    if (t) {
        exi_store_rlx_u64(&t->frees, t->frees + 1);
        exi_store_rlx_u64(&t->bytes, t->bytes - size);
    }
}

/* Sums the threads' counters.  A thread's bytes may be negative (it frees
 * what others allocated); the sum is exact.  peak_bytes is the sum of each
 * thread's own peak: an upper bound of the true peak, kept without any
 * shared write on the allocation path. */
static void j_stats(void *ctx, ex_alloc_stats *out) {
    ex_jemalloc_allocator *j = ctx;
    pthread_mutex_lock(&j->mu);
    uint64_t a = j->retired_allocations, f = j->retired_frees, b = j->retired_bytes, pk = j->retired_peak;
    for (jthread *t = j->threads; t; t = t->next) {
        a += exi_load_rlx_u64(&t->allocations);
        f += exi_load_rlx_u64(&t->frees);
        b += exi_load_rlx_u64(&t->bytes);
        pk += exi_load_rlx_u64(&t->peak);
    }
    pthread_mutex_unlock(&j->mu);
    out->allocations = a;
    out->frees = f;
    out->failures = exi_load_rlx_u64(&j->failures);
    out->bytes_in_use = b;
    out->peak_bytes = pk;
}

ex_error ex_jemalloc_allocator_create(unsigned arenas, ex_jemalloc_allocator **out) {
    if (!out) return ex_err(EX_EINVAL, "ex_jemalloc_allocator_create: out is NULL");
    *out = NULL;
    if (arenas == 0 || arenas > MAX_ARENAS)
        return ex_err(EX_EINVAL, "ex_jemalloc_allocator_create: arenas must be in [1, 1024]");
    ex_jemalloc_allocator *j = calloc(1, sizeof *j);
    if (!j) return ex_err(EX_ENOMEM, "ex_jemalloc_allocator_create: out of memory");
    j->id = exi_faa_u64(&next_id, 1);
    j->narenas = arenas;
    for (unsigned a = 0; a < arenas; a++)
        if (je_arena_create(&j->arenas[a])) {
            for (unsigned b = 0; b < a; b++) je_arena_destroy(j->arenas[b]);
            free(j);
            return ex_err(EX_EAGAIN, "ex_jemalloc_allocator_create: jemalloc could not create an arena");
        }
    if (pthread_key_create(&j->key, thread_exit) || pthread_mutex_init(&j->mu, NULL)) {
        for (unsigned a = 0; a < arenas; a++) je_arena_destroy(j->arenas[a]);
        free(j);
        return ex_err(EX_EAGAIN, "ex_jemalloc_allocator_create: no thread key or mutex");
    }
    j->base = (ex_allocator){ j_allocate, j_deallocate, j, "jemalloc", j_stats };
    *out = j;
    return ex_ok();
}

const ex_allocator *ex_jemalloc_allocator_get(ex_jemalloc_allocator *j) { return &j->base; }

void ex_jemalloc_allocator_destroy(ex_jemalloc_allocator *j) {
    if (!j) return;
    if (last.id == j->id) {
        last.id = 0;
        last.t = NULL;
    }
    pthread_key_delete(j->key);
    pthread_mutex_lock(&j->mu);
    while (j->threads) jthread_retire_locked(j, j->threads);
    pthread_mutex_unlock(&j->mu);
    pthread_mutex_destroy(&j->mu);
    for (unsigned a = 0; a < j->narenas; a++) je_arena_destroy(j->arenas[a]);
    free(j);
}
