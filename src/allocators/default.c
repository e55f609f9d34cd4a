/* SPDX-License-Identifier: MIT */
/* default.c - the built-in default allocator and the process default.
 *
 * Above libc.c and recycling.c: the built-in default is a recycling
 * allocator over libc. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>

#include <cexec/cexec.h>

#include "allocators/exi_builtin.h"
#include "allocators/exi_libc.h"
#include "allocators/exi_recycling.h"
#include "base/exi_atomic.h"

/* The built-in default: a recycling allocator over libc, made at the first
 * use and kept for the life of the process (threads return their caches
 * when they exit).  Senders and the frames of operations whose environment
 * names no allocator come and go in the same few sizes on the same
 * threads; with plain malloc a fork-join of tasks took 10-20 % longer
 * (docs/PERFORMANCE.md).  Its shared depot keeps at most BUILTIN_DEPOT
 * batches of 128 blocks per class (the public allocator's keeps 64): a
 * process default should not sit on much memory freed by threads that
 * only free. */
#define BUILTIN_DEPOT 4

static void *builtin_allocator;  /* const ex_allocator *, set once */
static ex_recycling_allocator *builtin_recycling;
static pthread_once_t builtin_once = PTHREAD_ONCE_INIT;
ex_recycling_allocator *exi_builtin_recycler;  /* written before exi_builtin_fast */
void *exi_builtin_fast;                          /* const ex_allocator *: its interface */

/* fork() while another thread holds one of the default's locks would
 * leave the child's copy locked for ever, and the child allocates senders
 * through it: its handlers hold every lock across the fork, as malloc
 * does with its own (after libc's, see libc_key_make).  Blocks the
 * parent's other threads cached stay unused in the child. */
static void builtin_lock(void) { exi_recycling_lock_all(builtin_recycling); }
static void builtin_unlock(void) { exi_recycling_unlock_all(builtin_recycling); }

void exi_builtin_prefork(void) {
    if (builtin_recycling) builtin_lock();
    exi_libc_prefork();
}
void exi_builtin_postfork(void) {
    exi_libc_postfork_parent();
    if (builtin_recycling) builtin_unlock();
}

static void builtin_make(void) {
    ex_recycling_allocator *r;
    const ex_allocator *a = ex_libc_allocator();  /* no memory or no thread key left: plain libc */
    if (exi_recycling_allocator_create_bounded(ex_libc_allocator(), BUILTIN_DEPOT, &r).code == EX_OK) {
        builtin_recycling = r;
        if (pthread_atfork(builtin_lock, builtin_unlock, builtin_unlock) == 0) {
            a = ex_recycling_allocator_get(r);
            exi_builtin_recycler = r;
            exi_store_rel_ptr(&exi_builtin_fast, (void *)(uintptr_t)a);
        }
        /* else (no memory for the handlers): plain libc; r stays unused */
    }
    exi_store_rel_ptr(&builtin_allocator, (void *)(uintptr_t)a);
}

const ex_allocator *ex_builtin_allocator(void) {
    const ex_allocator *a = exi_load_acq_ptr(&builtin_allocator);
    if (__builtin_expect(a != NULL, 1)) return a;
    pthread_once(&builtin_once, builtin_make);
    return exi_load_acq_ptr(&builtin_allocator);
}

void *exi_default_set; /* const ex_allocator *, NULL = the built-in one */

const ex_allocator *ex_default_allocator(void) {
    const ex_allocator *a = exi_load_acq_ptr(&exi_default_set);
    return a ? a : ex_builtin_allocator();
}

void ex_set_default_allocator(const ex_allocator *a) {
    exi_store_rel_ptr(&exi_default_set, (void *)(uintptr_t)a);
}
