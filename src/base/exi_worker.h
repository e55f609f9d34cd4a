/* SPDX-License-Identifier: MIT */
/* exi_worker.h - what a pool publishes about the calling thread, for the
 * layers below it.  Internal.
 *
 * The allocators (which pick a per-worker arena) and sync_wait (which
 * helps instead of blocking a worker) need to know whether the calling
 * thread is a pool worker.  They sit below the pool, so the pool writes
 * this thread-local slot when a worker starts and they read it; nothing
 * below resources/ calls into the pool. */
#ifndef EXI_WORKER_H
#define EXI_WORKER_H

#include <stdbool.h>

#include "base/exi_macros.h"

typedef struct exi_worker_slot {
    int index;               /* among its pool's workers; -1 on other threads */
    bool (*help_one)(void);  /* runs one queued item of the worker's pool; whether it ran one */
} exi_worker_slot;

extern EXI_TLS exi_worker_slot exi_this_worker;

/* The calling thread's index among its pool's workers, or -1. */
static inline int exi_worker_index(void) { return exi_this_worker.index; }

/* On a pool worker: runs one queued item of its pool and returns whether
 * it ran one.  Elsewhere: false. */
static inline bool exi_worker_help_one(void) {
    return exi_this_worker.help_one && exi_this_worker.help_one();
}

#endif
