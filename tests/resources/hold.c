/* SPDX-License-Identifier: MIT */
/* hold.c - see hold.h. */
#include <string.h>

#include "common/helpers.h"
#include "resources/hold.h"

static void hold_exec(ex_work *w) {
    hold *h = (hold *)(void *)w;
    atomic_store(&h->started, 1);
    (void)wait_int_reaches(&h->release, 1); /* bounded: a lost release fails the test, not the suite */
    atomic_store(&h->done, 1);
}

static void hold_cancel(ex_work *w) { atomic_store(&((hold *)(void *)w)->cancelled, 1); }

void hold_post(ex_pool *p, hold *h) {
    memset(h, 0, sizeof *h);
    h->w.execute = hold_exec;
    h->w.cancel = hold_cancel;
    ex_error e = ex_post(ex_pool_scheduler(p), &h->w);
    cr_assert_eq(e.code, 0, "ex_post: %s", e.msg ? e.msg : "");
    EXPECT_INT_REACHES(&h->started, 1);
}

void hold_release(hold *h) { atomic_store(&h->release, 1); }

ex_pool *held_pool(hold *h) {
    ex_pool *p = test_pool_new(1);
    hold_post(p, h);
    return p;
}
