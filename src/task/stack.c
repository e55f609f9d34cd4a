/* SPDX-License-Identifier: MIT */
/* stack.c - guarded, pooled stacks (exi_stack.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cexec/cexec.h>

#include "allocators/exi_counters.h"
#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "base/exi_poison.h"
#include "task/exi_stack.h"

#ifdef EXI_ASAN
void __lsan_register_root_region(const void *p, size_t size);
void __lsan_unregister_root_region(const void *p, size_t size);
#endif

enum { BATCH = EXI_STACK_CACHE / 2 };

typedef struct slot {
    void *p;
    size_t size;  /* usable bytes, a multiple of the page size */
} slot;

/* A thread's cache: written by its thread only; the counters are also read
 * by stats (relaxed). */
typedef struct tcache {
    struct tcache *prev, *next;  /* registry, under g.mu */
    uint32_t n;
    uint64_t allocations, frees, bytes;  /* bytes: handed out minus returned; wraps */
    slot s[EXI_STACK_CACHE];
} tcache;

static struct {
    pthread_mutex_t mu;  /* the registry, the depot, the retired counters */
    tcache *caches;
    uint32_t ndepot;
    slot depot[EXI_STACK_DEPOT];
    uint64_t retired_allocations, retired_frees, retired_bytes;  /* exited threads, cacheless calls */
    uint64_t failures, mapped, peak_mapped;                      /* atomics */
} g = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* Set once (pthread_once) before any thread has a cache, so a thread that
 * reaches the hit path has seen them. */
static size_t page;
static pthread_key_t key;
static bool have_key;  /* false: out of keys, so no thread caches (depot only) */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static EXI_TLS tcache *my;

static void thread_exit(void *arg);

static void init_once(void) {
    long ps = sysconf(_SC_PAGESIZE);
    page = ps > 0 ? (size_t)ps : 4096;
    have_key = pthread_key_create(&key, thread_exit) == 0;
}

size_t exi_page_size(void) {
    pthread_once(&once, init_once);
    return page;
}

/* size rounded up to whole pages; 0 when that would wrap (no cached
 * stack has size 0, so the hit paths miss and the slow path refuses). */
static inline size_t page_round(size_t size) {
    size_t u;
    return __builtin_add_overflow(size, page - 1, &u) ? 0 : u & ~(page - 1);
}

/* Usable size of a request; 0 when it cannot be mapped at all (the guard
 * page is added to it, and half the address space is more than any). */
static size_t usable(size_t size) {
    if (size > SIZE_MAX / 2) return 0;
    size_t u = page_round(size);
    return u ? u : page;
}

static void *map_stack(size_t size) {
    size_t len = size + page;
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base == MAP_FAILED) return NULL;
    if (mprotect(base, page, PROT_NONE)) {
        munmap(base, len);
        return NULL;
    }
    exi_peak_update(&g.peak_mapped, exi_faa_u64(&g.mapped, size) + size);
#ifdef EXI_ASAN
    __lsan_register_root_region(base + page, size);
#endif
    return base + page;
}

static void unmap_stack(void *p, size_t size) {
#ifdef EXI_ASAN
    exi_unpoison(p, size);
    __lsan_unregister_root_region(p, size);
#endif
    munmap((char *)p - page, size + page);
    exi_faa_u64(&g.mapped, (uint64_t)0 - size);
}

/* Puts stacks in the depot; unmaps those that do not fit. */
static void to_depot(const slot *s, uint32_t n) {
    uint32_t kept = 0;
    pthread_mutex_lock(&g.mu);
    while (kept < n && g.ndepot < EXI_STACK_DEPOT) g.depot[g.ndepot++] = s[kept++];
    pthread_mutex_unlock(&g.mu);
    for (uint32_t k = kept; k < n; k++) unmap_stack(s[k].p, s[k].size);
}

/* Moves up to `room` depot stacks of `size` into t's cache; how many. */
static uint32_t from_depot(tcache *t, size_t size, uint32_t room) {
    uint32_t got = 0;
    pthread_mutex_lock(&g.mu);
    for (uint32_t k = g.ndepot; k-- > 0 && got < room;) {
        if (g.depot[k].size != size) continue;
        t->s[t->n++] = g.depot[k];
        g.depot[k] = g.depot[--g.ndepot];
        got++;
    }
    pthread_mutex_unlock(&g.mu);
    return got;
}

static void thread_exit(void *arg) {
    tcache *t = arg;
    to_depot(t->s, t->n);
    pthread_mutex_lock(&g.mu);
    g.retired_allocations += t->allocations;
    g.retired_frees += t->frees;
    g.retired_bytes += t->bytes;
    if (t->prev) t->prev->next = t->next;
    else g.caches = t->next;
    if (t->next) t->next->prev = t->prev;
    pthread_mutex_unlock(&g.mu);
    if (my == t) my = NULL;
    free(t);
}

/* This thread's cache, created on first use; NULL if out of memory. */
static tcache *cache(void) {
    if (my) return my;
    if (!have_key) return NULL;
    tcache *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    if (pthread_setspecific(key, t)) {
        free(t);
        return NULL;
    }
    pthread_mutex_lock(&g.mu);
    t->next = g.caches;
    if (g.caches) g.caches->prev = t;
    g.caches = t;
    pthread_mutex_unlock(&g.mu);
    my = t;
    return t;
}

static void count(tcache *t, bool alloc, size_t size) {
    if (t) {
        exi_owner_add_u64(alloc ? &t->allocations : &t->frees, 1);
        exi_owner_add_u64(&t->bytes, alloc ? size : (uint64_t)0 - size);
        return;
    }
    pthread_mutex_lock(&g.mu);
    if (alloc) g.retired_allocations++;
    else g.retired_frees++;
    g.retired_bytes += alloc ? size : (uint64_t)0 - size;
    pthread_mutex_unlock(&g.mu);
}

__attribute__((noinline)) static void *allocate_slow(size_t size, size_t align) {
    pthread_once(&once, init_once);
    size_t u = usable(size);
    void *p = NULL;
    tcache *t = cache();
    if (u && align <= page) {
        if (t) {
            /* A cached stack of this size below the top, else a batch from the depot. */
            uint32_t k = t->n, room = EXI_STACK_CACHE - t->n;
            while (k > 0 && t->s[k - 1].size != u) k--;
            if (!k && room && from_depot(t, u, room < BATCH ? room : BATCH)) k = t->n;
            if (k) {
                p = t->s[k - 1].p;
                t->s[k - 1] = t->s[--t->n];
                exi_unpoison(p, u);
            }
        }
        if (!p) p = map_stack(u);
    }
    if (!p) {
        exi_faa_u64(&g.failures, 1);
        return NULL;
    }
    count(t, true, u);
    return p;
}

/* The hit path: the top of this thread's cache has the size asked for. */
static void *stack_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    tcache *t = my;
    if (__builtin_expect(t != NULL, 1)) {
        uint32_t n = t->n;
        size_t u = page_round(size);
        if (__builtin_expect(n && t->s[n - 1].size == u && align <= page, 1)) {
            void *p = t->s[n - 1].p;
            t->n = n - 1;
            exi_owner_add_u64(&t->allocations, 1);
            exi_owner_add_u64(&t->bytes, u);
            exi_unpoison(p, u);
            return p;
        }
    }
    return allocate_slow(size, align);
}

__attribute__((noinline)) static void deallocate_slow(void *p, size_t size) {
    pthread_once(&once, init_once);
    size_t u = usable(size);
    tcache *t = cache();
    exi_poison(p, u);
    if (t) {
        if (t->n == EXI_STACK_CACHE) {
            /* Hand the oldest half (coldest in the CPU caches) to the depot. */
            to_depot(t->s, BATCH);
            memmove(t->s, t->s + BATCH, (EXI_STACK_CACHE - BATCH) * sizeof t->s[0]);
            t->n -= BATCH;
        }
        t->s[t->n++] = (slot){ p, u };
    } else {
        to_depot(&(slot){ p, u }, 1);
    }
    count(t, false, u);
}

static void stack_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)align;
    tcache *t = my;
    size_t u;  /* page is read only once this thread has a cache (set before any has) */
    if (__builtin_expect(t != NULL && t->n < EXI_STACK_CACHE && (u = page_round(size)) != 0, 1)) {
        exi_poison(p, u);
        t->s[t->n++] = (slot){ p, u };
        exi_owner_add_u64(&t->frees, 1);
        exi_owner_add_u64(&t->bytes, (uint64_t)0 - u);
        return;
    }
    deallocate_slow(p, size);
}

static void stack_stats(void *ctx, ex_alloc_stats *out) {
    (void)ctx;
    pthread_mutex_lock(&g.mu);
    uint64_t a = g.retired_allocations, f = g.retired_frees, b = g.retired_bytes;
    for (tcache *t = g.caches; t; t = t->next) {
        a += exi_load_rlx_u64(&t->allocations);
        f += exi_load_rlx_u64(&t->frees);
        b += exi_load_rlx_u64(&t->bytes);
    }
    pthread_mutex_unlock(&g.mu);
    out->allocations = a;
    out->frees = f;
    out->failures = exi_load_rlx_u64(&g.failures);
    out->bytes_in_use = b;
    out->peak_bytes = exi_load_rlx_u64(&g.peak_mapped);
}

const ex_allocator exi_guarded_stack = { stack_allocate, stack_deallocate, NULL, "guarded_stack", stack_stats };

void exi_stack_trim(void) {
    tcache *t = my;
    if (t) {
        for (uint32_t k = 0; k < t->n; k++) unmap_stack(t->s[k].p, t->s[k].size);
        t->n = 0;
    }
    slot all[EXI_STACK_DEPOT];
    pthread_mutex_lock(&g.mu);
    uint32_t n = g.ndepot;
    memcpy(all, g.depot, n * sizeof all[0]);
    g.ndepot = 0;
    pthread_mutex_unlock(&g.mu);
    for (uint32_t k = 0; k < n; k++) unmap_stack(all[k].p, all[k].size);
}

uint64_t exi_stack_mapped_bytes(void) { return exi_load_rlx_u64(&g.mapped); }
