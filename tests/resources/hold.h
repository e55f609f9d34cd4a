/* hold.h - a work item posted straight to a pool that holds its worker
 * until the test releases it (pool and strand tests). */
#ifndef CEXEC_TEST_RES_HOLD_H
#define CEXEC_TEST_RES_HOLD_H

#include <stdatomic.h>
#include <cexec/cexec.h>

typedef struct hold {
    ex_work w;
    atomic_int started, done, cancelled;
    atomic_int *release;
} hold;

void hold_init(hold *h, atomic_int *release);
/* Posts h to the pool and waits (bounded) until it occupies a worker. */
void hold_post(ex_pool *p, hold *h);

#endif
