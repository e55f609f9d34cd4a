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

Test(exec_strand, pool_destroyed_with_strand_items_queued_drops_each_once) {
    ex_pool *p = test_pool_new(1);
    refuser *r = refuser_new(p);
    cr_assert_eq(ex_post(ex_pool_scheduler(p), &r->w).code, 0);
    EXPECT_INT_REACHES(&r->started, 1);
    pd_set x;
    pd_queue(&x, p);
    test_pool_free(p);
    refuser_check(r);
    int values = pd_check(&x, true);
    cr_assert_eq(values, 0);
    for (int k = 0; k < PD_STRANDS; k++) cr_assert_eq(ex_strand_executed(x.s[k]), 0);
    pd_free(&x);
    free(r);
    expect_no_leaks();
}

Test(exec_strand, pool_destroyed_during_a_strand_turn_completes_each_once) {
    ex_pool *p = test_pool_new(1);
    refuser *r = refuser_new(p);
    pd_set x;
    /* The blocker is the first item of strand 0: its turn is under way when
     * destroy begins, with many items behind it. */
    ex_strand *s0 = strand_new(ex_pool_scheduler(p));
    cr_assert_eq(ex_post(ex_strand_scheduler(s0), &r->w).code, 0);
    EXPECT_INT_REACHES(&r->started, 1);
    pd_queue(&x, p);
    test_pool_free(p);
    refuser_check(r);
    (void)pd_check(&x, false);
    strand_free_now(s0);
    pd_free(&x);
    free(r);
    expect_no_leaks();
}

/* The blocker shares strand 0 with the queued items. */
Test(exec_strand, pool_destroyed_during_a_turn_of_the_same_strand) {
    ex_pool *p = test_pool_new(1);
    refuser *r = refuser_new(p);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    enum { N = 300 };
    box *b = box_new(p);
    sop *o = sops_new(N, b, 0);
    item *w = items_new(N, b);
    ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
    cr_assert_eq(ex_post(ex_strand_scheduler(s), &r->w).code, 0);
    EXPECT_INT_REACHES(&r->started, 1);
    for (int i = 0; i < N; i++) {
        sop_start(&o[i], snd);
        post_ok(ex_strand_scheduler(s), &w[i]);
    }
    test_pool_free(p);
    refuser_check(r);
    int values = 0, stops = 0;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&o[i].hits), 1, "op %d completed %d times", i, atomic_load(&o[i].hits));
        cr_assert_eq(atomic_load(&o[i].errors), 0);
        values += atomic_load(&o[i].values);
        stops += atomic_load(&o[i].stops);
        cr_assert_eq(atomic_load(&w[i].runs) + atomic_load(&w[i].cancels), 1, "work %d: %d runs %d cancels", i,
                     atomic_load(&w[i].runs), atomic_load(&w[i].cancels));
    }
    cr_assert_eq(values + stops, N);
    cr_assert_gt(stops, 0, "a pool being destroyed cannot run all %d items of the turn", 2 * N);
    /* What ran, ran in order, before anything was dropped. */
    for (int i = 1; i < N; i++)
        if (atomic_load(&o[i].values)) cr_assert_eq(atomic_load(&o[i - 1].values), 1, "op %d ran, op %d did not", i, i - 1);
    cr_assert_eq(atomic_load(&b->violations), 0);
    strand_free_now(s);
    sops_destroy(o, N);
    ex_sender_release(snd);
    free(o);
    free(w);
    free(b);
    free(r);
    expect_no_leaks();
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
    ex_pool *p = test_pool_new(1);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    cr_assert_eq(ex_pool_shutdown(p).code, 0);
    ex_result r = ex_sync_wait(ex_schedule(ex_strand_scheduler(s)));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "schedule on a strand whose pool refuses: disposition %d",
                 r.disposition);
    ex_result_destroy(&r);
    box *b = box_new(p);
    item a, c;
    item_init(&a, 0, b);
    item_init(&c, 1, b);
    c.w.cancel = NULL;
    post_ok(ex_strand_scheduler(s), &a);
    cr_assert_eq(atomic_load(&a.cancels), 1, "the refused item's cancel runs");
    cr_assert_eq(atomic_load(&a.runs), 0);
    tl_in_call = true;
    cr_assert_eq(ex_dispatch(ex_strand_scheduler(s), &c.w).code, 0);
    tl_in_call = false;
    cr_assert_eq(atomic_load(&c.runs), 1, "a refused item without cancel runs its execute");
    cr_assert_eq(ex_strand_executed(s), 0);
    strand_free_now(s);
    test_pool_free(p);
    free(b);
    expect_no_leaks();
}

