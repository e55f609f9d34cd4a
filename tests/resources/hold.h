/* SPDX-License-Identifier: MIT */
/* hold.h - a work item posted straight to a pool that holds its worker
 * until the test releases it (pool and strand tests). */
#ifndef CEXEC_TEST_RES_HOLD_H
#define CEXEC_TEST_RES_HOLD_H

#include <stdatomic.h>
#include <cexec/cexec.h>

typedef struct hold {
    ex_work w;
    atomic_int started, done, cancelled;
    atomic_int release;
} hold;

/* Posts h (initialised here) to p and waits (bounded) until it occupies a
 * worker. */
void hold_post(ex_pool *p, hold *h);
/* Lets the held worker go. */
void hold_release(hold *h);
/* A one-worker pool whose only worker h holds. */
ex_pool *held_pool(hold *h);

#endif
