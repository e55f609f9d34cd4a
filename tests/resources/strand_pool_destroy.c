/* SPDX-License-Identifier: MIT */
/* The strand when its underlying pool is destroyed or shut down with strand
 * items queued (suite exec_strand, declared in strand_create.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resources/strand_fixtures.h"


/* An item that keeps its worker until the pool refuses new work (destroy
 * began); the probes it managed to post are queued and later cancelled. */
#define PROBES 4096
typedef struct refuser {
    ex_work w;
    ex_pool *pool;
    atomic_int started, done;
    int accepted;
    int refusal;              /* the code that ended the wait */
    ex_work probes[PROBES];
    atomic_int probe_runs, probe_cancels;
} refuser;

static refuser *g_refuser;  /* probes find their counters here */

static void probe_exec(ex_work *w) { (void)w; atomic_fetch_add(&g_refuser->probe_runs, 1); }
static void probe_cancel(ex_work *w) { (void)w; atomic_fetch_add(&g_refuser->probe_cancels, 1); }

static void refuser_exec(ex_work *w) {
    refuser *r = (refuser *)(void *)w;
    atomic_store(&r->started, 1);
    r->refusal = -1;
    double end = test_now_s() + TEST_WAIT_LIMIT_S;
    for (int k = 0; k < PROBES && test_now_s() < end; k++) {
        ex_work *pr = &r->probes[k];
        pr->next = NULL;
        pr->execute = probe_exec;
        pr->cancel = probe_cancel;
        ex_error e = ex_post(ex_pool_scheduler(r->pool), pr);
        if (e.code) {
            r->refusal = e.code;
            break;
        }
        r->accepted++;
        test_sleep_ms(1);
    }
    atomic_store(&r->done, 1);
}

static refuser *refuser_new(ex_pool *p) {
    refuser *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->w.execute = refuser_exec;
    r->pool = p;
    g_refuser = r;
    return r;
}

/* Posts the blocker to sch (the pool or a strand over it) and waits until
 * it runs. */
static void refuser_post(refuser *r, ex_scheduler sch) {
    cr_assert_eq(ex_post(sch, &r->w).code, 0);
    EXPECT_INT_REACHES(&r->started, 1);
}

static void refuser_check(refuser *r) {
    cr_assert_eq(atomic_load(&r->done), 1, "the blocker never returned");
    cr_assert_eq(r->refusal, EX_ESHUTDOWN, "the blocker ended with %d, not the pool's refusal", r->refusal);
    cr_assert_eq(atomic_load(&r->probe_runs) + atomic_load(&r->probe_cancels), r->accepted,
                 "probes: %d accepted, %d ran, %d cancelled", r->accepted, atomic_load(&r->probe_runs),
                 atomic_load(&r->probe_cancels));
}

/* ========================================= the underlying pool is destroyed */

enum { PD_STRANDS = 3, PD_SOPS = 100, PD_WORKS = 50 };

typedef struct pd_set {
    ex_strand *s[PD_STRANDS];
    box *b[PD_STRANDS];
    sop *o[PD_STRANDS];
    item *with_cancel[PD_STRANDS];
    item *without_cancel[PD_STRANDS];
    ex_sender *snd[PD_STRANDS];
} pd_set;

static void pd_queue(pd_set *x, ex_pool *p) {
    for (int k = 0; k < PD_STRANDS; k++) {
        x->s[k] = strand_new(ex_pool_scheduler(p));
        x->b[k] = box_new(p);
        x->o[k] = sops_new(PD_SOPS, x->b[k], 0);
        x->with_cancel[k] = items_new(PD_WORKS, x->b[k]);
        x->without_cancel[k] = items_new(PD_WORKS, x->b[k]);
        x->snd[k] = ex_schedule(ex_strand_scheduler(x->s[k]));
    }
    for (int i = 0; i < PD_SOPS; i++)
        for (int k = 0; k < PD_STRANDS; k++) {
            sop_start(&x->o[k][i], x->snd[k]);
            if (i < PD_WORKS) {
                post_ok(ex_strand_scheduler(x->s[k]), &x->with_cancel[k][i]);
                x->without_cancel[k][i].w.cancel = NULL;
                post_ok(ex_strand_scheduler(x->s[k]), &x->without_cancel[k][i]);
            }
        }
}

/* Every operation completed exactly once; returns how many with a value. */
static int pd_check(pd_set *x, bool all_stopped) {
    int values = 0;
    for (int k = 0; k < PD_STRANDS; k++) {
        for (int i = 0; i < PD_SOPS; i++) {
            sop *o = &x->o[k][i];
            cr_assert_eq(atomic_load(&o->hits), 1, "strand %d op %d completed %d times", k, i, atomic_load(&o->hits));
            cr_assert_eq(atomic_load(&o->errors), 0, "strand %d op %d completed with an error", k, i);
            if (all_stopped) cr_assert_eq(atomic_load(&o->stops), 1, "strand %d op %d ran although dropped", k, i);
            values += atomic_load(&o->values);
        }
        for (int i = 0; i < PD_WORKS; i++) {
            item *a = &x->with_cancel[k][i], *c = &x->without_cancel[k][i];
            cr_assert_eq(atomic_load(&a->runs) + atomic_load(&a->cancels), 1,
                         "strand %d work %d: %d runs, %d cancels", k, i, atomic_load(&a->runs),
                         atomic_load(&a->cancels));
            if (all_stopped) cr_assert_eq(atomic_load(&a->cancels), 1, "a dropped item with a cancel must be cancelled");
            cr_assert_eq(atomic_load(&c->runs), 1, "strand %d work %d without cancel: %d runs (a dropped item "
                         "without cancel runs its execute)", k, i, atomic_load(&c->runs));
            cr_assert_eq(atomic_load(&c->cancels), 0);
        }
        cr_assert_eq(atomic_load(&x->b[k]->violations), 0);
    }
    return values;
}

static void pd_free(pd_set *x) {
    for (int k = 0; k < PD_STRANDS; k++) {
        strand_free_now(x->s[k]); /* the pool is gone: nothing can run any more */
        sops_destroy(x->o[k], PD_SOPS);
        ex_sender_release(x->snd[k]);
        free(x->o[k]);
        free(x->with_cancel[k]);
        free(x->without_cancel[k]);
        free(x->b[k]);
    }
}

/* Destroys the rig's pool (the rig then closes without it). */
static void rig_destroy_pool(rig *r) {
    test_pool_free(r->p);
    r->p = NULL;
}

/* A blocker holds the only worker of a pool (posted straight to it, or as
 * the first item of a strand of its own), the strands get their work, and
 * the pool is destroyed. */
static void destroy_with_a_blocker(bool blocker_on_a_strand, bool all_stopped) {
    ex_pool *p = test_pool_new(1);
    refuser *r = refuser_new(p);
    ex_strand *s0 = strand_new(ex_pool_scheduler(p));
    refuser_post(r, blocker_on_a_strand ? ex_strand_scheduler(s0) : ex_pool_scheduler(p));
    pd_set x;
    pd_queue(&x, p);
    test_pool_free(p);
    refuser_check(r);
    int values = pd_check(&x, all_stopped);
    if (all_stopped) {
        cr_assert_eq(values, 0);
        for (int k = 0; k < PD_STRANDS; k++) cr_assert_eq(ex_strand_executed(x.s[k]), 0);
    }
    strand_free_now(s0);
    pd_free(&x);
    free(r);
    expect_no_leaks();
}

Test(exec_strand, pool_destroyed_with_strand_items_queued_drops_each_once) {
    destroy_with_a_blocker(false, true);
}

/* The blocker is the first item of strand 0: its turn is under way when
 * destroy begins, with many items behind it. */
Test(exec_strand, pool_destroyed_during_a_strand_turn_completes_each_once) {
    destroy_with_a_blocker(true, false);
}

/* The blocker shares the strand with the queued items. */
Test(exec_strand, pool_destroyed_during_a_turn_of_the_same_strand) {
    enum { N = 300 };
    rig x;
    rig_open(&x, 1, N, N);
    refuser *r = refuser_new(x.p);
    for (int i = 0; i < N; i++) x.o[i].id = i;
    refuser_post(r, x.sch);
    for (int i = 0; i < N; i++) {
        rig_start(&x, i, i + 1);
        rig_post(&x, i, i + 1);
    }
    rig_destroy_pool(&x);
    refuser_check(r);
    int values = 0, stops = 0;
    for (int i = 0; i < N; i++) {
        sop *o = &x.o[i];
        item *w = &x.it[i];
        cr_assert_eq(atomic_load(&o->hits), 1, "op %d completed %d times", i, atomic_load(&o->hits));
        cr_assert_eq(atomic_load(&o->errors), 0);
        values += atomic_load(&o->values);
        stops += atomic_load(&o->stops);
        cr_assert_eq(atomic_load(&w->runs) + atomic_load(&w->cancels), 1, "work %d: %d runs %d cancels", i,
                     atomic_load(&w->runs), atomic_load(&w->cancels));
    }
    cr_assert_eq(values + stops, N);
    cr_assert_gt(stops, 0, "a pool being destroyed cannot run all %d items of the turn", 2 * N);
    /* What ran, ran in order, before anything was dropped. */
    for (int i = 1; i < N; i++)
        if (atomic_load(&x.o[i].values))
            cr_assert_eq(atomic_load(&x.o[i - 1].values), 1, "op %d ran, op %d did not", i, i - 1);
    cr_assert_eq(atomic_load(&x.b->violations), 0);
    free(r);
    rig_close(&x, true);
}

Test(exec_strand, pool_destroyed_right_after_submission_loses_nothing) {
    for (int round = 0; round < 10; round++) {
        ex_pool *p = test_pool_new(round % 2 ? 4 : 2);
        pd_set x;
        pd_queue(&x, p);
        test_pool_free(p);
        (void)pd_check(&x, false);
        pd_free(&x);
    }
    expect_no_leaks();
}

Test(exec_strand, after_the_pool_shut_down_new_work_is_dropped_at_once) {
    rig x;
    rig_open(&x, 1, 2, 0);
    cr_assert_eq(ex_pool_shutdown(x.p).code, 0);
    ex_result r = ex_sync_wait(ex_schedule(x.sch));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "schedule on a strand whose pool refuses: disposition %d",
                 r.disposition);
    ex_result_destroy(&r);
    item *a = &x.it[0], *c = &x.it[1];
    c->w.cancel = NULL;
    rig_post(&x, 0, 1);
    cr_assert_eq(atomic_load(&a->cancels), 1, "the refused item's cancel runs");
    cr_assert_eq(atomic_load(&a->runs), 0);
    dispatch_ok(x.sch, c);
    cr_assert_eq(atomic_load(&c->runs), 1, "a refused item without cancel runs its execute");
    cr_assert_eq(ex_strand_executed(x.s), 0);
    rig_close(&x, true);
}
