/* SPDX-License-Identifier: MIT */
/* fork.c - the fork generation (exi_fork.h). */
#include <pthread.h>

#include "base/exi_atomic.h"
#include "base/exi_fork.h"

static uint64_t generation;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Runs in the child, single-threaded. */
static void in_child(void) { exi_store_rlx_u64(&generation, exi_load_rlx_u64(&generation) + 1); }

static void install(void) { (void)pthread_atfork(NULL, NULL, in_child); }

uint64_t exi_fork_watch(void) {
    (void)pthread_once(&once, install);
    return exi_fork_generation();
}

uint64_t exi_fork_generation(void) { return exi_load_rlx_u64(&generation); }
