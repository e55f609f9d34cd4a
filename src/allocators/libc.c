/* SPDX-License-Identifier: MIT */
/* libc.c - the libc allocator (malloc / aligned_alloc with counters). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>

#include <pthread.h>

#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "allocators/exi_alloc_limits.h"
#include "allocators/exi_libc.h"
#include "base/exi_atomic.h"
#include "base/exi_macros.h"

/* Counters per thread: every sender of the process is allocated here by
 * default, and shared atomic counters made all threads contend on one
 * cache line (a third of a two-worker task benchmark's time).  Written by
 * their thread only (relaxed stores), summed by libc_stats; a thread's
 * bytes may be negative (it frees what others allocated), the sum is
 * exact. */
typedef struct libc_thread {
    uint64_t allocations, frees, failures, bytes, peak;
    struct libc_thread *prev, *next;  /* registry, under libc_mu */
    bool listed;
} libc_thread;

static pthread_mutex_t libc_mu = PTHREAD_MUTEX_INITIALIZER;
static libc_thread *libc_threads;
static libc_thread libc_retired;     /* exited threads' counters, under libc_mu */
static pthread_key_t libc_key;
static pthread_once_t libc_key_once = PTHREAD_ONCE_INIT;
static bool libc_key_ok;
static EXI_TLS libc_thread libc_mine;

static void libc_thread_exit(void *arg) {
    libc_thread *t = arg;
    pthread_mutex_lock(&libc_mu);
    libc_retired.allocations += t->allocations;
    libc_retired.frees += t->frees;
    libc_retired.failures += t->failures;
    libc_retired.bytes += t->bytes;
    libc_retired.peak += t->peak;
    if (t->prev) t->prev->next = t->next;
    else libc_threads = t->next;
    if (t->next) t->next->prev = t->prev;
    memset(t, 0, sizeof *t);  /* a later allocation on this thread lists it again */
    pthread_mutex_unlock(&libc_mu);
}

/* fork(): the registry's lock is held across it, so a child never finds it
 * taken by a thread it does not have; and the child forgets the parent's
 * other threads (their counters go to the retired ones), whose records
 * live in thread-local storage that glibc hands to the threads the child
 * creates: one listed twice would close the list into a cycle. */
void exi_libc_prefork(void) { pthread_mutex_lock(&libc_mu); }
void exi_libc_postfork_parent(void) { pthread_mutex_unlock(&libc_mu); }
static void libc_postfork_child(void) {
    libc_thread *mine = libc_mine.listed ? &libc_mine : NULL;
    for (libc_thread *t = libc_threads, *next; t; t = next) {
        next = t->next;
        if (t == mine) continue;
        libc_retired.allocations += t->allocations;
        libc_retired.frees += t->frees;
        libc_retired.failures += t->failures;
        libc_retired.bytes += t->bytes;
        libc_retired.peak += t->peak;
    }
    libc_threads = mine;
    if (mine) mine->prev = mine->next = NULL;
    pthread_mutex_unlock(&libc_mu);
}

/* Registered before any recycling allocator over libc registers its own
 * (that allocator's creation allocates through libc), so fork takes the
 * recycling locks first and libc_mu last: the order a thread's exit nests
 * them in (it returns its cache to libc under the recycling registry lock).
 * Without memory for the handlers the registry is not fork-safe. */
static void libc_key_make(void) {
    libc_key_ok = pthread_key_create(&libc_key, libc_thread_exit) == 0;
    (void)pthread_atfork(exi_libc_prefork, exi_libc_postfork_parent, libc_postfork_child);
}

/* The calling thread's counters, listed at its first use.  Without a
 * thread key (none left) the thread's counts are still summed while it
 * lives but lost when it exits. */
static libc_thread *libc_self(void) {
    libc_thread *t = &libc_mine;
    if (__builtin_expect(t->listed, 1)) return t;
    pthread_once(&libc_key_once, libc_key_make);
    pthread_mutex_lock(&libc_mu);
    t->listed = true;
    t->prev = NULL;
    t->next = libc_threads;
    if (libc_threads) libc_threads->prev = t;
    libc_threads = t;
    pthread_mutex_unlock(&libc_mu);
    if (libc_key_ok) (void)pthread_setspecific(libc_key, t);
    return t;
}

static void *libc_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    void *p = NULL;
    if (!exi_alloc_request_ok(size, align)) p = NULL;  /* malloc would give a block of the wrong alignment */
    else if (align <= alignof(max_align_t)) p = malloc(size ? size : 1);
    else if (posix_memalign(&p, align, size ? size : 1)) p = NULL;
    libc_thread *t = libc_self();
    if (!p) {
        exi_owner_add_u64(&t->failures, 1);
        return NULL;
    }
    exi_owner_add_u64(&t->allocations, 1);
    uint64_t b = exi_load_rlx_u64(&t->bytes) + size;
    exi_store_rlx_u64(&t->bytes, b);
    if ((int64_t)b > (int64_t)exi_load_rlx_u64(&t->peak)) exi_store_rlx_u64(&t->peak, b);
    return p;
}

static void libc_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)align;
    free(p);
    libc_thread *t = libc_self();
    exi_owner_add_u64(&t->frees, 1);
    exi_owner_add_u64(&t->bytes, (uint64_t)0 - size);
}

/* peak_bytes is the sum of each thread's own peak: an upper bound of the
 * true peak, kept without any shared write on the allocation path. */
static void libc_stats(void *ctx, ex_alloc_stats *out) {
    (void)ctx;
    pthread_mutex_lock(&libc_mu);
    ex_alloc_stats s = { libc_retired.allocations, libc_retired.frees, libc_retired.failures, libc_retired.bytes,
                         libc_retired.peak };
    for (libc_thread *t = libc_threads; t; t = t->next) {
        s.allocations += exi_load_rlx_u64(&t->allocations);
        s.frees += exi_load_rlx_u64(&t->frees);
        s.failures += exi_load_rlx_u64(&t->failures);
        s.bytes_in_use += exi_load_rlx_u64(&t->bytes);
        s.peak_bytes += exi_load_rlx_u64(&t->peak);
    }
    pthread_mutex_unlock(&libc_mu);
    *out = s;
}

static const ex_allocator libc_allocator = { libc_allocate, libc_deallocate, NULL, "libc", libc_stats };

ex_error ex_allocator_stats(const ex_allocator *a, ex_alloc_stats *out) {
    if (!a || !out) return ex_err(EX_EINVAL, "ex_allocator_stats: NULL argument");
    if (!a->stats) return ex_err(EX_EINVAL, "ex_allocator_stats: this allocator keeps no statistics");
    a->stats(a->ctx, out);
    return ex_ok();
}

const ex_allocator *ex_libc_allocator(void) { return &libc_allocator; }
