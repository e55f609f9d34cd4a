/* SPDX-License-Identifier: MIT */
/* [stoptoken.inplace]: registration, deregistration and requests racing (suite stoptoken_inplace, declared in stop_token.c). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stop_fixtures.h"

/* ------------------------------------------------------------------ stress */

enum { ST_WORKERS = 4, ST_CAP = 20000, ST_EXTRA = 200, ST_ROUNDS = 20, ST_HEAD_START = 1000 };

typedef struct st_slot {
    ex_stop_callback cb;
    atomic_int calls;
    atomic_int dereg_returned;   /* set once deregistration returned */
    atomic_int late;             /* the callback ran (or was still running) after deregistration returned */
    pthread_t runner;
    bool stop_seen_before;       /* stop_requested() was true before registering */
    bool ran_inline;             /* register returned true */
    bool deregistered;
    int calls_at_dereg;
} st_slot;

static void st_slot_fn(ex_stop_callback *cb) {
    st_slot *sl = (st_slot *)(void *)cb;
    if (atomic_load(&sl->dereg_returned)) atomic_store(&sl->late, 1);
    sl->runner = pthread_self();
    atomic_fetch_add(&sl->calls, 1);
    if (atomic_load(&sl->dereg_returned)) atomic_store(&sl->late, 1);
}

typedef struct st_worker {
    ex_stop_source *src;
    st_slot *slots;
    int used;
    pthread_t self;
    atomic_int progress;
} st_worker;

static void st_worker_step(st_worker *w, int i) {
    st_slot *sl = &w->slots[i];
    sl->stop_seen_before = ex_stop_source_stop_requested(w->src);
    sl->ran_inline = ex_stop_callback_register(&sl->cb, ex_stop_source_token(w->src), st_slot_fn);
    if (i % 2 == 0) { /* even slots: deregister at once, racing the request */
        ex_stop_callback_deregister(&sl->cb);
        sl->calls_at_dereg = atomic_load(&sl->calls);
        atomic_store(&sl->dereg_returned, 1);
        sl->deregistered = true;
    }
    w->used = i + 1;
}

static void *st_worker_main(void *arg) {
    st_worker *w = arg;
    w->self = pthread_self();
    int i = 0;
    for (; i < ST_CAP && !ex_stop_source_stop_requested(w->src); i++) {
        st_worker_step(w, i);
        atomic_store(&w->progress, i + 1);
    }
    atomic_store(&w->progress, ST_CAP); /* done with the racing phase */
    while (!ex_stop_source_stop_requested(w->src)) sched_yield();
    for (int k = 0; k < ST_EXTRA; k++, i++) st_worker_step(w, i);
    return NULL;
}

/* One round: workers churn registrations on a fresh source while this
 * thread requests stop.  Returns "" or what went wrong. */
static void st_stress_round(st_worker *w, char *why, size_t why_size, long *inline_runs, long *requester_runs) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    pthread_t th[ST_WORKERS];
    for (int t = 0; t < ST_WORKERS; t++) {
        w[t].src = &s;
        w[t].used = 0;
        atomic_store(&w[t].progress, 0);
        memset(w[t].slots, 0, (ST_CAP + ST_EXTRA) * sizeof(st_slot));
        for (int i = 0; i < ST_CAP + ST_EXTRA; i++) {
            atomic_init(&w[t].slots[i].calls, 0);
            atomic_init(&w[t].slots[i].dereg_returned, 0);
            atomic_init(&w[t].slots[i].late, 0);
        }
    }
    for (int t = 0; t < ST_WORKERS; t++)
        if (pthread_create(&th[t], NULL, st_worker_main, &w[t])) abort();
    /* Let every worker get going, then request stop while they churn. */
    for (int t = 0; t < ST_WORKERS; t++)
        while (atomic_load(&w[t].progress) < ST_HEAD_START) sched_yield();
    bool first = ex_stop_source_request_stop(&s);
    pthread_t me = pthread_self();
    for (int t = 0; t < ST_WORKERS; t++) pthread_join(th[t], NULL);

    if (!first) snprintf(why, why_size, "the only request_stop returned false");
    for (int t = 0; t < ST_WORKERS && !why[0]; t++) {
        for (int i = 0; i < w[t].used && !why[0]; i++) {
            st_slot *sl = &w[t].slots[i];
            int calls = atomic_load(&sl->calls);
            if (calls > 1) snprintf(why, why_size, "worker %d slot %d ran %d times", t, i, calls);
            else if (atomic_load(&sl->late))
                snprintf(why, why_size, "worker %d slot %d ran after its deregistration returned", t, i);
            else if (sl->stop_seen_before && !sl->ran_inline)
                snprintf(why, why_size, "worker %d slot %d: register after stop returned false", t, i);
            else if (sl->ran_inline && calls != 1)
                snprintf(why, why_size, "worker %d slot %d: register returned true but calls=%d", t, i, calls);
            else if (sl->ran_inline && !pthread_equal(sl->runner, w[t].self))
                snprintf(why, why_size, "worker %d slot %d: inline call not on the registering thread", t, i);
            else if (!sl->ran_inline && !sl->deregistered && calls != 1)
                snprintf(why, why_size,
                         "worker %d slot %d: registered before the request, never deregistered, calls=%d", t, i, calls);
            else if (!sl->ran_inline && calls == 1 && !pthread_equal(sl->runner, me))
                snprintf(why, why_size, "worker %d slot %d: registered callback not run by the requester", t, i);
            else if (sl->deregistered && calls != sl->calls_at_dereg)
                snprintf(why, why_size, "worker %d slot %d: ran after deregistration (%d -> %d)", t, i,
                         sl->calls_at_dereg, calls);
            if (sl->ran_inline) (*inline_runs)++;
            else if (calls == 1) (*requester_runs)++;
        }
    }
    for (int t = 0; t < ST_WORKERS; t++)
        for (int i = 0; i < w[t].used; i++) ex_stop_callback_deregister(&w[t].slots[i].cb);
}

Test(stoptoken_inplace, stress_register_deregister_race_request_stop) {
    st_worker w[ST_WORKERS];
    for (int t = 0; t < ST_WORKERS; t++) {
        w[t].slots = malloc((ST_CAP + ST_EXTRA) * sizeof(st_slot));
        cr_assert_not_null(w[t].slots);
        atomic_init(&w[t].progress, 0);
    }
    char why[256] = "";
    long inline_runs = 0, requester_runs = 0;
    int round = 0;
    for (; round < ST_ROUNDS && !why[0]; round++) st_stress_round(w, why, sizeof why, &inline_runs, &requester_runs);
    for (int t = 0; t < ST_WORKERS; t++) free(w[t].slots);
    cr_assert_str_empty(why, "round %d: %s", round, why);
    cr_assert_geq(inline_runs, (long)ST_ROUNDS * ST_WORKERS * ST_EXTRA,
                  "every registration after stop was seen ran inline");
    cr_assert_gt(requester_runs, 0, "held callbacks registered before the request ran on the requester");
    expect_no_leaks();
}
