/* SPDX-License-Identifier: MIT */
/* jemalloc.c - per-worker jemalloc arenas with explicit tcaches.
 *
 * The jemalloc entry points are a private copy (exi_je_*, see the
 * Makefile): the application's malloc stays whatever it is.  Linked into
 * libcexec.a.  libcexec.so cannot hold it (its 2.7 KB of initial-exec TLS
 * would make the library impossible to dlopen), so there it lives in
 * libcexec-jemalloc.so, found at first use (CEXEC_JEMALLOC_DYNAMIC): in the
 * process if the program linked it, else by dlopen, else not at all, and
 * then the allocator is malloc-based.  CEXEC_JEMALLOC_VIA_MALLOC
 * (sanitizer / valgrind builds) always uses the malloc-based equivalents. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "allocators/exi_alloc_limits.h"
#include "allocators/exi_counters.h"
#include "allocators/exi_jemalloc.h"
#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "base/exi_poison.h"
#include "base/exi_worker.h"

#define HEADER 16
#define MAX_ARENAS 1024
#define NO_TCACHE 0xffffffffu   /* jemalloc refused a tcache: use none */
#define NO_SLOT 0xffffffffu     /* a thread that has only freed: every block is another arena's */

/* The malloc-based equivalents: arenas are numbers, tcaches nothing. */
static int m_arena_create(unsigned *out) {
    static unsigned n;
    *out = exi_faa_u32(&n, 1);
    return 0;
}
static void *m_alloc(size_t size, size_t align) {
    void *p = NULL;
    return posix_memalign(&p, align, size) ? NULL : p;
}

#ifdef CEXEC_JEMALLOC_VIA_MALLOC
static int je_arena_create(unsigned *out) { return m_arena_create(out); }
static int je_tcache_create(unsigned *out) { *out = 0; return 0; }
static void je_tcache_destroy(unsigned tc) { (void)tc; }
static void je_arena_destroy(unsigned a) { (void)a; }
static void je_arena_purge(unsigned a) { (void)a; }
static void *je_alloc(size_t size, size_t align, unsigned arena, unsigned tc) {
    (void)arena, (void)tc;
    return m_alloc(size, align);
}
static void je_free(void *p, size_t size, size_t align, unsigned arena, unsigned tc) {
    (void)size, (void)align, (void)arena, (void)tc;
    free(p);
}
bool ex_jemalloc_is_malloc(void) { return true; }
#else
#ifdef CEXEC_JEMALLOC_DYNAMIC
#include <dlfcn.h>

#ifndef CEXEC_JEMALLOC_SONAME  /* the Makefile's JE_SONAME */
#define CEXEC_JEMALLOC_SONAME "libcexec-jemalloc.so.0"
#endif

/* libcexec-jemalloc.so's three entry points, or NULL: found once, before
 * the first arena exists, so a process uses one kind of block throughout. */
static struct {
    void *(*mallocx)(size_t size, int flags);
    void (*sdallocx)(void *p, size_t size, int flags);
    int (*mallctl)(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
} je_dyn;
static pthread_once_t je_once = PTHREAD_ONCE_INIT;

static void je_find(void) {
    /* Linked by the program (pkg-config cexec): already in the global
     * scope.  Else a dlopen, which fails where the static TLS it needs is
     * not left (a process that dlopened cexec itself): then malloc. */
    void *h = RTLD_DEFAULT;  /* (NULL in glibc) */
    if (!dlsym(h, "exi_je_mallctl") && !(h = dlopen(CEXEC_JEMALLOC_SONAME, RTLD_NOW | RTLD_LOCAL))) {
        (void)dlerror();
        return;
    }
    void *x = dlsym(h, "exi_je_mallocx"), *d = dlsym(h, "exi_je_sdallocx"), *c = dlsym(h, "exi_je_mallctl");
    if (!x || !d || !c) return;
    /* (POSIX: a data pointer from dlsym converts to a function pointer) */
    memcpy(&je_dyn.mallocx, &x, sizeof x);
    memcpy(&je_dyn.sdallocx, &d, sizeof d);
    memcpy(&je_dyn.mallctl, &c, sizeof c);
}

static bool je_found(void) {
    pthread_once(&je_once, je_find);
    return je_dyn.mallctl != NULL;
}

static void *exi_je_mallocx(size_t size, int flags) { return je_dyn.mallocx(size, flags); }
static void exi_je_sdallocx(void *p, size_t size, int flags) { je_dyn.sdallocx(p, size, flags); }
static int exi_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
    return je_dyn.mallctl(name, oldp, oldlenp, newp, newlen);
}
#else
void *exi_je_mallocx(size_t size, int flags);
void exi_je_sdallocx(void *p, size_t size, int flags);
int exi_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
static bool je_found(void) { return true; }
#endif

#define MALLOCX_LG_ALIGN(la) ((int)(la))
#define MALLOCX_TCACHE(tc) ((int)(((tc) + 2) << 8))
#define MALLOCX_ARENA(a) ((((int)(a)) + 1) << 20)

static int je_arena_create(unsigned *out) {
    if (!je_found()) return m_arena_create(out);
    size_t sz = sizeof *out;
    return exi_je_mallctl("arenas.create", out, &sz, NULL, 0);
}
static int je_tcache_create(unsigned *out) {
    if (!je_found()) {
        *out = 0;
        return 0;
    }
    size_t sz = sizeof *out;
    return exi_je_mallctl("tcache.create", out, &sz, NULL, 0);
}
static void je_tcache_destroy(unsigned tc) {
    if (je_found()) (void)exi_je_mallctl("tcache.destroy", NULL, NULL, &tc, sizeof tc);
}
static void je_arena_destroy(unsigned a) {
    if (!je_found()) return;
    char name[64];
    snprintf(name, sizeof name, "arena.%u.destroy", a);
    (void)exi_je_mallctl(name, NULL, NULL, NULL, 0);
}
/* Gives the arena's unused dirty pages back to the system now; its
 * allocations stay valid. */
static void je_arena_purge(unsigned a) {
    if (!je_found()) return;
    char name[64];
    snprintf(name, sizeof name, "arena.%u.purge", a);
    (void)exi_je_mallctl(name, NULL, NULL, NULL, 0);
}
/* jemalloc's size classes are 16-byte aligned already: asking for an
 * alignment of 16 or less would only take its slower aligned path. */
static int flags_of(size_t align, unsigned arena, unsigned tc) {
    /* MALLOCX_TCACHE(0) is explicit tcache 0, somebody's; "none" is -1. */
    int f = MALLOCX_ARENA(arena) | (tc == NO_TCACHE ? MALLOCX_TCACHE(-1) : MALLOCX_TCACHE(tc));
    return align > 16 ? f | MALLOCX_LG_ALIGN(__builtin_ctzll(align)) : f;
}
/* (je_found is a constant true when jemalloc is linked in: no branch.) */
static void *je_alloc(size_t size, size_t align, unsigned arena, unsigned tc) {
    if (!je_found()) return m_alloc(size, align);
    return exi_je_mallocx(size, flags_of(align, arena, tc));
}
static void je_free(void *p, size_t size, size_t align, unsigned arena, unsigned tc) {
    if (!je_found()) {
        free(p);
        return;
    }
    exi_je_sdallocx(p, size, flags_of(align, arena, tc));
}
bool ex_jemalloc_is_malloc(void) { return !je_found(); }
#endif

/* Blocks of up to CLASS_MAX bytes (header included, alignment <= HEADER)
 * are cached by cexec itself in front of jemalloc, by power-of-two class.
 * A thread keeps free blocks of its own arena in an array per class (a pop
 * or push never touches the block, so a block another core wrote costs no
 * cache miss until its user touches it).  A freed block of another arena is
 * gathered into a batch for that (arena, class): the batch's first block is
 * the node and holds the others' addresses; a full node goes onto that
 * arena's remote list with one compare-and-swap, and a thread of that arena
 * takes the whole list with one exchange when its array is empty.  A
 * cached block only ever serves its own arena; the fast paths write no
 * shared cache line and call no jemalloc. */
#define MIN_SHIFT 5                        /* 32-byte smallest class */
#define NCLASSES 9                         /* 32 .. 8192 bytes */
#define CLASS_MAX ((size_t)1 << (MIN_SHIFT + NCLASSES - 1))
#define CACHE_BYTES ((size_t)256 << 10)    /* bytes a thread keeps per class, at most */
#define CACHE_MAX 512u                     /* blocks a thread keeps per class, at most */
#define BATCH_MAX 32u                      /* blocks per hand-over, at most */

/* The first bytes of a block.  The header (arena, offset of the user
 * pointer) stays valid for the block's whole life; a batch node also uses
 * the header's spare half and the start of its (free) user area. */
typedef struct fblock {
    uint32_t arena, offset;
    struct fblock *next_node;              /* node of a remote list */
    uint32_t n, unused;                    /* node: addresses in items */
    struct fblock *items[];
} fblock;
_Static_assert(offsetof(fblock, n) == HEADER, "the header is 16 bytes");

static inline size_t class_size(unsigned c) { return (size_t)1 << (c + MIN_SHIFT); }
static inline unsigned cache_cap(unsigned c) {
    size_t by_bytes = CACHE_BYTES / class_size(c);
    return by_bytes < CACHE_MAX ? (unsigned)by_bytes : CACHE_MAX;
}
/* Blocks in a batch: the node and as many addresses as it can hold. */
static inline unsigned batch_cap(unsigned c) {
    size_t fit = 1 + (class_size(c) - sizeof(fblock)) / sizeof(fblock *);
    return fit < BATCH_MAX ? (unsigned)fit : BATCH_MAX;
}

/* Per arena: nodes handed over by other threads, one list per class; the
 * count bounds how much waits there. */
typedef struct remote {
    fblock *nodes[NCLASSES];
    uint32_t blocks[NCLASSES];
} __attribute__((aligned(64))) remote;

typedef struct stack { fblock **items; uint32_t n, cap; } stack;

/* One per (thread, allocator). */
typedef struct jthread {
    struct ex_jemalloc_allocator *owner;
    struct jthread *prev, *next;  /* registry, under owner->mu */
    unsigned slot;                 /* arena this thread allocates from; NO_SLOT until it allocates */
    stack cache[NCLASSES];         /* free blocks of arena `slot` */
    fblock **out;                  /* [narenas][NCLASSES] batch being filled; made on the first foreign free */
    /* counters written by this thread only (relaxed), summed by stats */
    uint64_t allocations, frees, bytes, peak;
    unsigned tc[];                 /* tcache per arena; 0 = not created (ids are stored + 1); then the stacks */
} jthread;

struct ex_jemalloc_allocator {
    ex_allocator base;
    uint64_t id;
    unsigned narenas;
    unsigned arenas[MAX_ARENAS];
    remote *remotes;               /* [narenas] */
    pthread_key_t key;
    pthread_mutex_t mu;
    jthread *threads;
    uint32_t next_slot;
    uint64_t failures;
    uint64_t retired_allocations, retired_frees, retired_bytes, retired_peak;  /* under mu */
    /* A pool's allocator is never destroyed but parked for the next pool
     * (exi_jemalloc_acquire): its stats then start from this baseline. */
    ex_alloc_stats baseline;
    struct ex_jemalloc_allocator *idle_next;
};

static EXI_TLS struct { uint64_t id; jthread *t; } last;
static uint64_t next_id = 1;

/* A power-of-two alignment up to HEADER is met by every class block (a
 * non-power-of-two one goes to allocate_slow, which refuses it). */
static inline bool is_class(size_t size, size_t align) {
    return align <= HEADER && (align & (align - 1)) == 0 && size <= CLASS_MAX - HEADER;
}
/* The same for a block being freed, without the power-of-two test: no
 * block was given out for another alignment (3 instructions less). */
static inline bool freed_is_class(size_t size, size_t align) { return align <= HEADER && size <= CLASS_MAX - HEADER; }
static inline unsigned class_of(size_t size) {
    size_t total = size + HEADER;
    if (total <= ((size_t)1 << MIN_SHIFT)) return 0;
    return (unsigned)(64 - __builtin_clzll((unsigned long long)total - 1)) - MIN_SHIFT;
}

/* A cached block's user area is poisoned (ASan builds); allocation
 * unpoisons the size asked for. */
static inline void cache_poison(fblock *b, unsigned c) { exi_poison((char *)b + HEADER, class_size(c) - HEADER); }
static inline void cache_unpoison(fblock *b, unsigned c) { exi_unpoison((char *)b + HEADER, class_size(c) - HEADER); }

/* The thread's tcache for arena a, created on first use; NO_TCACHE when
 * jemalloc refuses one (it allows about 4094 explicit tcaches per process,
 * and this design wants one per thread and arena) or t is NULL. */
static unsigned tcache_for(jthread *t, unsigned a) {
    if (!t) return NO_TCACHE;
    if (__builtin_expect(t->tc[a] != 0, 1)) return t->tc[a] - 1;
    unsigned tc;
    if (je_tcache_create(&tc)) return NO_TCACHE;
    t->tc[a] = tc + 1;
    return tc;
}

/* Returns a cached class-c block of arena a to jemalloc, through t's tcache
 * for that arena (t may be NULL). */
static void release(ex_jemalloc_allocator *j, jthread *t, unsigned a, unsigned c, fblock *b) {
    cache_unpoison(b, c);
    je_free(b, class_size(c), HEADER, j->arenas[a], tcache_for(t, a));
}

/* Returns a batch node and the blocks it lists. */
static void release_batch(ex_jemalloc_allocator *j, jthread *t, unsigned a, unsigned c, fblock *node) {
    for (uint32_t k = 0; k < node->n; k++) release(j, t, a, c, node->items[k]);
    release(j, t, a, c, node);
}

static void jthread_retire_locked(ex_jemalloc_allocator *j, jthread *t) {
    j->retired_allocations += t->allocations;
    j->retired_frees += t->frees;
    j->retired_bytes += t->bytes;
    j->retired_peak += t->peak;
    for (unsigned c = 0; c < NCLASSES; c++)  /* empty while the thread has no slot */
        for (uint32_t k = 0; k < t->cache[c].n; k++) release(j, t, t->slot, c, t->cache[c].items[k]);
    if (t->out)
        for (unsigned a = 0; a < j->narenas; a++)
            for (unsigned c = 0; c < NCLASSES; c++)
                if (t->out[a * NCLASSES + c]) release_batch(j, t, a, c, t->out[a * NCLASSES + c]);
    free(t->out);
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

/* The record with its tcache ids and, after them, every class's stack. */
static jthread *jthread_new(ex_jemalloc_allocator *j) {
    size_t slots = 0;
    for (unsigned c = 0; c < NCLASSES; c++) slots += cache_cap(c);
    size_t head = sizeof(jthread) + j->narenas * sizeof(unsigned);
    head = (head + alignof(fblock *) - 1) & ~(alignof(fblock *) - 1);
    jthread *t = calloc(1, head + slots * sizeof(fblock *));
    if (!t) return NULL;
    fblock **items = (fblock **)(void *)((char *)t + head);
    for (unsigned c = 0; c < NCLASSES; c++) {
        t->cache[c] = (stack){ items, 0, cache_cap(c) };
        items += cache_cap(c);
    }
    return t;
}

static jthread *new_thread(ex_jemalloc_allocator *j) {
    jthread *t = pthread_getspecific(j->key);
    if (!t) {
        if (!(t = jthread_new(j))) return NULL;
        t->owner = j;
        /* A pool worker's slot is its index.  Another thread gets one in turn
         * at its first allocation: a thread that only frees (a consumer)
         * sends every block home instead of keeping an arena's blocks. */
        int w = exi_worker_index();
        t->slot = w >= 0 ? (unsigned)w % j->narenas : NO_SLOT;
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

static inline void count_alloc(jthread *t, size_t size) {
    exi_store_rlx_u64(&t->allocations, t->allocations + 1);
    uint64_t in = t->bytes + size;
    exi_store_rlx_u64(&t->bytes, in);
    if ((int64_t)in > (int64_t)t->peak) exi_store_rlx_u64(&t->peak, in);
}

static inline void count_free(jthread *t, size_t size) {
    exi_store_rlx_u64(&t->frees, t->frees + 1);
    exi_store_rlx_u64(&t->bytes, t->bytes - size);
}

/* Moves the batches other threads handed to this thread's arena for class
 * c into its (empty) stack; what does not fit goes back to jemalloc.  False
 * if there was none. */
static bool take_remote(ex_jemalloc_allocator *j, jthread *t, unsigned c) {
    remote *r = &j->remotes[t->slot];
    if (!exi_load_rlx_ptr((void *const *)&r->nodes[c])) return false;
    fblock *node = exi_fas_ptr((void **)&r->nodes[c], NULL);  /* acquires the nodes' contents */
    stack *s = &t->cache[c];
    uint32_t taken = 0;
    for (fblock *nn; node; node = nn) {
        nn = node->next_node;
        uint32_t n = node->n;
        taken += n + 1;
        if (s->n + n + 1 > s->cap) {
            release_batch(j, t, t->slot, c, node);
            continue;
        }
        for (uint32_t k = 0; k < n; k++) s->items[s->n++] = node->items[k];
        cache_poison(node, c);
        s->items[s->n++] = node;
    }
    exi_faa_u32(&r->blocks[c], (uint32_t)0 - taken);
    return s->n > 0;
}

/* Adds a freed block of another arena to the batch for its (arena, class);
 * a full batch goes to that arena's remote list, or back to jemalloc when
 * as many blocks already wait there as a thread would keep. */
static void free_foreign(ex_jemalloc_allocator *j, jthread *t, fblock *b, unsigned c) {
    unsigned a = b->arena;
    if (!t->out && !(t->out = calloc((size_t)j->narenas * NCLASSES, sizeof *t->out))) {
        release(j, t, a, c, b);
        return;
    }
    fblock **slot = &t->out[a * NCLASSES + c], *node = *slot;
    if (!node) {
        exi_unpoison(&b->n, (size_t)batch_cap(c) * sizeof(fblock *));  /* n, unused, items */
        b->n = 0;
        *slot = b;
        return;
    }
    node->items[node->n++] = b;
    if (node->n + 1 < batch_cap(c)) return;
    *slot = NULL;
    remote *r = &j->remotes[a];
    if (exi_load_rlx_u32(&r->blocks[c]) >= cache_cap(c)) {
        release_batch(j, t, a, c, node);
        return;
    }
    exi_faa_u32(&r->blocks[c], node->n + 1);
    void *head = exi_load_rlx_ptr((void *const *)&r->nodes[c]);
    do node->next_node = head;
    while (!exi_cas_ptr((void **)&r->nodes[c], &head, node));  /* releases the node's contents */
}

/* The block behind a user pointer of the direct path: `align` (>= HEADER)
 * bytes before it, with the arena slot and that offset in the header. */
static inline void *finish_block(char *block, size_t align, unsigned a) {
    char *p = block + align;
    fblock *h = (fblock *)(void *)(p - HEADER);
    h->arena = a;
    h->offset = (uint32_t)align;
    return p;
}

__attribute__((noinline)) static void *allocate_slow(ex_jemalloc_allocator *j, size_t size, size_t align) {
    /* Bounded, size + align below cannot wrap to a small block, and the
     * header's 32-bit offset holds the alignment. */
    _Static_assert(EX_ALLOC_MAX_ALIGN <= UINT32_MAX, "the header's offset holds every alignment");
    jthread *t = exi_alloc_request_ok(size, align) ? my_thread(j) : NULL;
    if (!t) {
        exi_faa_u64(&j->failures, 1);
        return NULL;
    }
    if (t->slot == NO_SLOT) t->slot = exi_faa_u32(&j->next_slot, 1) % j->narenas;
    unsigned a = t->slot;
    size_t block_size = size + (align < HEADER ? HEADER : align);
    if (is_class(size, align)) {
        unsigned c = class_of(size);
        stack *s = &t->cache[c];
        if (s->n || take_remote(j, t, c)) {
            fblock *b = s->items[--s->n];
            count_alloc(t, size);
            exi_unpoison((char *)b + HEADER, size);
            return (char *)b + HEADER;
        }
        block_size = class_size(c);  /* the block is the whole class */
    }
    if (align < HEADER) align = HEADER;
    char *block = je_alloc(block_size, align, j->arenas[a], tcache_for(t, a));
    if (!block) {
        exi_faa_u64(&j->failures, 1);
        return NULL;
    }
    count_alloc(t, size);
    return finish_block(block, align, a);
}

static void *j_allocate(void *ctx, size_t size, size_t align) {
    ex_jemalloc_allocator *j = ctx;
    /* Fast path: this thread's stack for the class has a block. */
    if (__builtin_expect(last.id == j->id && is_class(size, align), 1)) {
        jthread *t = last.t;
        unsigned c = class_of(size);
        stack *s = &t->cache[c];
        if (__builtin_expect(s->n != 0, 1)) {
            fblock *b = s->items[--s->n];
            count_alloc(t, size);
            exi_unpoison((char *)b + HEADER, size);
            return (char *)b + HEADER;
        }
    }
    return allocate_slow(j, size, align);
}

__attribute__((noinline)) static void deallocate_slow(ex_jemalloc_allocator *j, void *p, size_t size, size_t align) {
    fblock *b = (fblock *)(void *)((char *)p - HEADER);
    unsigned a = b->arena;
    jthread *t = my_thread(j);
    if (t && freed_is_class(size, align)) {
        count_free(t, size);
        unsigned c = class_of(size);
        cache_poison(b, c);
        if (a != t->slot) {
            free_foreign(j, t, b, c);
            return;
        }
        stack *s = &t->cache[c];
        if (s->n == s->cap) {
            /* Keep half: a thread that only frees hands the rest back. */
            while (s->n > s->cap / 2) release(j, t, a, c, s->items[--s->n]);
        }
        s->items[s->n++] = b;
        return;
    }
    if (t) {
        count_free(t, size);
    } else {
        pthread_mutex_lock(&j->mu);
        j->retired_frees++;
        j->retired_bytes -= size;
        pthread_mutex_unlock(&j->mu);
    }
    size_t off = b->offset;
    if (freed_is_class(size, align)) size = class_size(class_of(size)) - off;  /* no thread record: a class block */
    /* Through this thread's tcache for the block's arena: the block goes
     * back to the arena it came from. */
    je_free((char *)p - off, size + off, off, j->arenas[a], tcache_for(t, a));
}

static void j_deallocate(void *ctx, void *p, size_t size, size_t align) {
    ex_jemalloc_allocator *j = ctx;
    if (__builtin_expect(last.id == j->id && freed_is_class(size, align), 1)) {
        jthread *t = last.t;
        fblock *b = (fblock *)(void *)((char *)p - HEADER);
        unsigned c = class_of(size);
        stack *s = &t->cache[c];
        if (__builtin_expect(b->arena == t->slot && s->n != s->cap, 1)) {
            cache_poison(b, c);
            s->items[s->n++] = b;
            count_free(t, size);
            return;
        }
        /* Freed by another arena's thread: batched home from here (the slow
         * path's copy of these lines stays: one shared inline helper for
         * both paths measured 2-3 ns slower across threads). */
        if (b->arena != t->slot) {
            count_free(t, size);
            cache_poison(b, c);
            free_foreign(j, t, b, c);
            return;
        }
    }
    deallocate_slow(j, p, size, align);
}

/* Sums the threads' counters.  A thread's bytes may be negative (it frees
 * what others allocated); the sum is exact.  peak_bytes is the sum of each
 * thread's own peak: an upper bound of the true peak, kept without any
 * shared write on the allocation path. */
/* The sums since the allocator was made, and the baseline; under j->mu. */
static void raw_stats_locked(ex_jemalloc_allocator *j, ex_alloc_stats *out) {
    uint64_t a = j->retired_allocations, f = j->retired_frees, b = j->retired_bytes, pk = j->retired_peak;
    for (jthread *t = j->threads; t; t = t->next) {
        a += exi_load_rlx_u64(&t->allocations);
        f += exi_load_rlx_u64(&t->frees);
        b += exi_load_rlx_u64(&t->bytes);
        pk += exi_load_rlx_u64(&t->peak);
    }
    *out = (ex_alloc_stats){ .allocations = a, .frees = f, .failures = exi_load_rlx_u64(&j->failures),
                             .bytes_in_use = b, .peak_bytes = pk };
}

static void j_stats(void *ctx, ex_alloc_stats *out) {
    ex_jemalloc_allocator *j = ctx;
    ex_alloc_stats raw;
    pthread_mutex_lock(&j->mu);
    raw_stats_locked(j, &raw);
    ex_alloc_stats base = j->baseline;
    pthread_mutex_unlock(&j->mu);
    out->allocations = raw.allocations - base.allocations;
    out->frees = raw.frees - base.frees;
    out->failures = raw.failures - base.failures;
    out->bytes_in_use = raw.bytes_in_use - base.bytes_in_use;
    out->peak_bytes = raw.peak_bytes - base.peak_bytes;
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
    j->remotes = aligned_alloc(alignof(remote), arenas * sizeof(remote));
    if (!j->remotes) {
        free(j);
        return ex_err(EX_ENOMEM, "ex_jemalloc_allocator_create: out of memory");
    }
    memset(j->remotes, 0, arenas * sizeof(remote));
    for (unsigned a = 0; a < arenas; a++)
        if (je_arena_create(&j->arenas[a])) {
            for (unsigned b = 0; b < a; b++) je_arena_destroy(j->arenas[b]);
            free(j->remotes);
            free(j);
            return ex_err(EX_EAGAIN, "ex_jemalloc_allocator_create: jemalloc could not create an arena");
        }
    if (pthread_key_create(&j->key, thread_exit) || pthread_mutex_init(&j->mu, NULL)) {
        for (unsigned a = 0; a < arenas; a++) je_arena_destroy(j->arenas[a]);
        free(j->remotes);
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
    /* Batches handed over and never taken go back before their arena does. */
    for (unsigned a = 0; a < j->narenas; a++)
        for (unsigned c = 0; c < NCLASSES; c++)
            for (fblock *node = j->remotes[a].nodes[c], *nn; node; node = nn) {
                nn = node->next_node;
                release_batch(j, NULL, a, c, node);
            }
    for (unsigned a = 0; a < j->narenas; a++) je_arena_destroy(j->arenas[a]);
    free(j->remotes);
    free(j);
}

/* ------------------------------------------------------- a pool's arenas
 *
 * A pool's allocator outlives the pool: a task or an operation that got
 * frames from it may return them after the pool is gone (a task finishing
 * away from its pool, an operation freed after ex_pool_destroy), and
 * jemalloc's arena.destroy would take those blocks with it.  So destroy
 * parks the allocator here instead, with its arenas' dirty pages purged,
 * and the next pool takes it back: arenas are created only when no parked
 * allocator has enough (a process that creates and destroys pools keeps
 * the address space of its largest set of live pools, not of every pool
 * it ever made).  Parked allocators are never freed. */
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static ex_jemalloc_allocator *idle_list;

ex_error exi_jemalloc_acquire(unsigned arenas, ex_jemalloc_allocator **out) {
    pthread_mutex_lock(&idle_mu);
    ex_jemalloc_allocator **best = NULL;
    for (ex_jemalloc_allocator **it = &idle_list; *it; it = &(*it)->idle_next)
        if ((*it)->narenas >= arenas && (!best || (*it)->narenas < (*best)->narenas)) best = it;
    ex_jemalloc_allocator *j = best ? *best : NULL;
    if (j) *best = j->idle_next;
    pthread_mutex_unlock(&idle_mu);
    if (!j) return ex_jemalloc_allocator_create(arenas, out);
    j->idle_next = NULL;
    pthread_mutex_lock(&j->mu);
    raw_stats_locked(j, &j->baseline);
    pthread_mutex_unlock(&j->mu);
    *out = j;
    return ex_ok();
}

void exi_jemalloc_park(ex_jemalloc_allocator *j) {
    if (!j) return;
    /* The calling thread's cached blocks and batches go back first, so
     * the purge below can return their pages. */
    pthread_mutex_lock(&j->mu);
    jthread *t = last.id == j->id ? last.t : NULL;
    if (t) {
        for (unsigned c = 0; c < NCLASSES; c++) {
            while (t->cache[c].n) release(j, t, t->slot, c, t->cache[c].items[--t->cache[c].n]);
        }
    }
    pthread_mutex_unlock(&j->mu);
    for (unsigned a = 0; a < j->narenas; a++) je_arena_purge(j->arenas[a]);
    pthread_mutex_lock(&idle_mu);
    j->idle_next = idle_list;
    idle_list = j;
    pthread_mutex_unlock(&idle_mu);
}
