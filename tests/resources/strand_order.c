/* SPDX-License-Identifier: MIT */
/* The strand: mutual exclusion and FIFO under load, completions on the
 * underlying pool's workers, stop tokens, and the fairness turn of 64
 * items (suite exec_strand, declared in strand_create.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resources/strand_fixtures.h"

/* ======================================================= mutual exclusion */

enum { ME_POSTERS = 3, ME_PER_POSTER = 2000, ME_WAITERS = 2, ME_PER_WAITER = 100, ME_SPAWNS = 1000 };

typedef struct me_state {
    ex_strand *s;
    box *b;
    atomic_int go;
    item *items[ME_POSTERS];
    int post_errors;
    int wait_bad;
    ex_counting_scope scope;
    int spawn_errors;
} me_state;

static me_state ME;

static ex_error me_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    box *b = ctx;
    box_enter(b);
    b->plain++;
    for (volatile int k = 0; k < 50; k++) {}
    box_leave(b);
    atomic_fetch_add(&b->ran, 1);
    return ex_ok();
}

static ex_sender *me_sender(void) {
    return ex_then(ex_schedule(ex_strand_scheduler(ME.s)), me_fn, ME.b, EX_SIG0, EX_SIG0);
}

static void me_wait_go(void) {
    while (!atomic_load(&ME.go)) sched_yield();
}

static void *me_poster(void *arg) {
    item *its = arg;
    me_wait_go();
    for (int i = 0; i < ME_PER_POSTER; i++) {
        ex_error e = ex_post(ex_strand_scheduler(ME.s), &its[i].w);
        if (e.code) __atomic_fetch_add(&ME.post_errors, 1, __ATOMIC_RELAXED);
        if (i % 256 == 0) sched_yield();
    }
    return NULL;
}

static void *me_waiter(void *arg) {
    (void)arg;
    me_wait_go();
    for (int i = 0; i < ME_PER_WAITER; i++) {
        ex_result r = ex_sync_wait(me_sender());
        if (r.disposition != EX_DISP_VALUE) __atomic_fetch_add(&ME.wait_bad, 1, __ATOMIC_RELAXED);
        ex_result_destroy(&r);
    }
    return NULL;
}

static void *me_spawner(void *arg) {
    (void)arg;
    me_wait_go();
    for (int i = 0; i < ME_SPAWNS; i++) {
        ex_error e = ex_spawn(me_sender(), ex_counting_scope_token(&ME.scope));
        if (e.code) __atomic_fetch_add(&ME.spawn_errors, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

Test(exec_strand, mutual_exclusion_under_load_post_sync_wait_and_spawn) {
    ex_pool *p = test_pool_new(4);
    memset(&ME, 0, sizeof ME);
    ME.s = strand_new(ex_pool_scheduler(p));
    ME.b = box_new(p);
    cr_assert_eq(ex_counting_scope_init(&ME.scope).code, 0);
    for (int t = 0; t < ME_POSTERS; t++) {
        ME.items[t] = items_new(ME_PER_POSTER, ME.b);
        for (int i = 0; i < ME_PER_POSTER; i++) ME.items[t][i].spin = 50;
    }
    pthread_t th[ME_POSTERS + ME_WAITERS + 1];
    int n = 0;
    for (int t = 0; t < ME_POSTERS; t++) cr_assert_eq(pthread_create(&th[n++], NULL, me_poster, ME.items[t]), 0);
    for (int t = 0; t < ME_WAITERS; t++) cr_assert_eq(pthread_create(&th[n++], NULL, me_waiter, NULL), 0);
    cr_assert_eq(pthread_create(&th[n++], NULL, me_spawner, NULL), 0);
    atomic_store(&ME.go, 1);
    for (int t = 0; t < n; t++) pthread_join(th[t], NULL);
    ex_result jr = ex_sync_wait(ex_counting_scope_join(&ME.scope));
    cr_assert_eq(jr.disposition, EX_DISP_VALUE);
    ex_result_destroy(&jr);

    const int total = ME_POSTERS * ME_PER_POSTER + ME_WAITERS * ME_PER_WAITER + ME_SPAWNS;
    EXPECT_INT_REACHES(&ME.b->ran, total);
    cr_assert_eq(ME.post_errors, 0);
    cr_assert_eq(ME.wait_bad, 0);
    cr_assert_eq(ME.spawn_errors, 0);
    cr_assert_eq(atomic_load(&ME.b->violations), 0, "%d item(s) ran while another was inside the strand",
                 atomic_load(&ME.b->violations));
    cr_assert_eq(ME.b->plain, total, "the unsynchronised counter is %ld, expected %d", ME.b->plain, total);
    for (int t = 0; t < ME_POSTERS; t++)
        for (int i = 0; i < ME_PER_POSTER; i++) {
            cr_assert_eq(atomic_load(&ME.items[t][i].runs), 1, "item %d/%d ran %d times", t, i,
                         atomic_load(&ME.items[t][i].runs));
            cr_assert_geq(ME.items[t][i].worker, 0, "item %d/%d ran off the pool", t, i);
        }
    cr_assert_eq(ex_strand_executed(ME.s), (uint64_t)total);
    cr_assert_eq(ex_counting_scope_destroy(&ME.scope).code, 0);
    strand_free(ME.s);
    test_pool_free(p);
    for (int t = 0; t < ME_POSTERS; t++) free(ME.items[t]);
    free(ME.b);
    expect_no_leaks();
}

/* Items of one strand see what the previous one wrote, whichever worker ran
 * it: a chain of non-atomic increments, on four workers. */
Test(exec_strand, each_item_sees_the_writes_of_the_previous_one) {
    ex_pool *p = test_pool_new(4);
    enum { N = 3000, STRANDS = 3 };
    ex_strand *s[STRANDS];
    box *b[STRANDS];
    item *it[STRANDS];
    for (int k = 0; k < STRANDS; k++) {
        s[k] = strand_new(ex_pool_scheduler(p));
        b[k] = box_new(p);
        it[k] = items_new(N, b[k]);
    }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < STRANDS; k++) post_ok(ex_strand_scheduler(s[k]), &it[k][i]);
    for (int k = 0; k < STRANDS; k++) {
        EXPECT_INT_REACHES(&b[k]->ran, N);
        cr_assert_eq(atomic_load(&b[k]->violations), 0);
        cr_assert_eq(b[k]->plain, N);
        expect_log_in_order(b[k], N);
    }
    for (int k = 0; k < STRANDS; k++) {
        strand_free(s[k]);
        free(it[k]);
        free(b[k]);
    }
    test_pool_free(p);
    expect_no_leaks();
}

/* ================================================================ FIFO */

Test(exec_strand, fifo_for_posts_and_schedules_from_one_thread) {
    enum { N = 3000 };
    rig r;
    rig_open(&r, 4, N, N);
    bool is_sop[N];
    for (int i = 0; i < N; i++) {
        is_sop[i] = i % 3 == 2;
        r.o[i].id = i;
        if (is_sop[i]) rig_start(&r, i, i + 1);
        else if (i % 3 == 1) dispatch_ok(r.sch, &r.it[i]); /* from outside: queued */
        else rig_post(&r, i, i + 1);
    }
    EXPECT_INT_REACHES(&r.b->ran, N);
    expect_log_in_order(r.b, N);
    cr_assert_eq(atomic_load(&r.b->violations), 0);
    for (int i = 0; i < N; i++) {
        if (is_sop[i]) {
            cr_assert_eq(atomic_load(&r.o[i].values), 1);
            cr_assert_eq(atomic_load(&r.o[i].hits), 1);
        } else {
            cr_assert_eq(atomic_load(&r.it[i].runs), 1);
            cr_assert_not(r.it[i].saw_in_call, "item %d ran inside the posting call", i);
        }
    }
    rig_close(&r, false);
}

/* Posts it->arg (an item) to it->sch from inside an item. */
static void post_arg_action(item *it) {
    it->call_err = ex_post(it->sch, &((item *)it->arg)->w);
}

/* Item 0 posts item N from inside: it goes behind everything already queued. */
Test(exec_strand, items_posted_from_inside_go_to_the_back) {
    enum { N = 150 };
    rig r;
    rig_open_held(&r, N + 1, 0); /* everything is queued before item 0 runs */
    r.it[0].action = post_arg_action;
    r.it[0].arg = &r.it[N];
    r.it[0].sch = r.sch;
    rig_post(&r, 0, N);
    rig_release(&r);
    EXPECT_INT_REACHES(&r.b->ran, N + 1);
    cr_assert_eq(r.it[0].call_err.code, 0);
    expect_log_in_order(r.b, N + 1);
    rig_close(&r, false);
}

/* ===================================================== completion agents */

Test(exec_strand, completions_run_on_workers_of_the_underlying_pool) {
    enum { N = 300 };
    rig r;
    rig_open(&r, 3, N, N);
    for (int i = 0; i < N; i++) {
        rig_post(&r, i, i + 1);
        rig_start(&r, i, i + 1);
    }
    EXPECT_INT_REACHES(&r.b->ran, 2 * N);
    for (int i = 0; i < N; i++) {
        cr_assert_geq(r.it[i].worker, 0, "item %d ran off the pool's workers", i);
        cr_assert_lt(r.it[i].worker, 3);
        cr_assert_eq(atomic_load(&r.o[i].values), 1);
        cr_assert_geq(r.o[i].worker, 0, "schedule op %d completed off the pool's workers", i);
        cr_assert_not(pthread_equal(r.o[i].tid, pthread_self()));
    }
    cr_assert_eq(atomic_load(&r.b->violations), 0);
    rig_close(&r, false);
}

/* ================================================================== stop */

Test(exec_strand, stop_requested_before_the_items_turn_completes_stopped) {
    enum { N = 12 };
    rig r;
    rig_open_held(&r, 0, N);
    for (int i = 0; i < N; i++) {
        r.o[i].id = i;
        sop_with_stop(&r.o[i]);
        if (i % 3 == 0) ex_stop_source_request_stop(&r.o[i].stop); /* before start */
        rig_start(&r, i, i + 1);
        if (i % 3 == 1) ex_stop_source_request_stop(&r.o[i].stop); /* started, queued */
    }
    for (int i = 0; i < N; i++) cr_assert_eq(atomic_load(&r.o[i].hits), 0, "op %d completed before its turn", i);
    rig_release(&r);
    EXPECT_INT_REACHES(&r.b->ran, N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&r.o[i].hits), 1);
        cr_assert_eq(atomic_load(&r.o[i].errors), 0);
        if (i % 3 == 2) cr_assert_eq(atomic_load(&r.o[i].values), 1, "op %d (no stop) did not complete with a value", i);
        else cr_assert_eq(atomic_load(&r.o[i].stops), 1, "op %d (stop requested) did not complete stopped", i);
        cr_assert_eq(r.o[i].worker, 0);
    }
    expect_log_in_order(r.b, N); /* stopped completions take their turn too */
    rig_close(&r, false);
}

static void request_stop_action(item *it) { ex_stop_source_request_stop(it->arg); }

Test(exec_strand, stop_requested_by_an_earlier_item_completes_stopped) {
    rig r;
    rig_open(&r, 2, 1, 2);
    hold h[2];
    hold_post(r.p, &h[0]);
    hold_post(r.p, &h[1]);
    sop_with_stop(&r.o[0]);
    sop_with_stop(&r.o[1]);
    r.it[0].action = request_stop_action;
    r.it[0].arg = &r.o[0].stop;
    rig_post(&r, 0, 1);
    rig_start(&r, 0, 2);
    hold_release(&h[0]);
    hold_release(&h[1]);
    EXPECT_INT_REACHES(&r.b->ran, 3);
    cr_assert_eq(atomic_load(&r.o[0].stops), 1, "stop was requested before its turn");
    cr_assert_eq(atomic_load(&r.o[1].values), 1);
    expect_log_in_order(r.b, 3);
    rig_close(&r, false);
}

Test(exec_strand, sync_wait_on_a_strand_schedule) {
    rig r;
    rig_open(&r, 2, 0, 0);
    for (int i = 0; i < 100; i++) {
        ex_result res = ex_sync_wait(ex_schedule(r.sch));
        cr_assert_eq(res.disposition, EX_DISP_VALUE, "disposition %d", res.disposition);
        cr_assert_eq(res.n, 0);
        ex_result_destroy(&res);
    }
    rig_close(&r, false);
}

/* =============================================================== fairness */

/* One worker; the strand gets 200 items (and, when by_item, its first item
 * posts an item straight to the pool; else main does, after them).  The
 * strand runs at most 64 items per turn and then queues itself again, so
 * the direct item runs before the 200th strand item. */
static void fairness_on_a_pool(bool by_item) {
    enum { N = 200 };
    rig r;
    rig_open_held(&r, N, 0);
    direct d;
    direct_init(&d, r.b);
    if (by_item) {
        r.it[0].action = post_arg_action;  /* posts it->arg (the direct item) to it->sch (the pool) */
        r.it[0].arg = &d;
        r.it[0].sch = ex_pool_scheduler(r.p);
    }
    rig_post(&r, 0, N);
    if (!by_item) cr_assert_eq(ex_post(ex_pool_scheduler(r.p), &d.w).code, 0);
    rig_release(&r);
    EXPECT_INT_REACHES(&r.b->ran, N);
    EXPECT_INT_REACHES(&d.runs, 1);
    cr_assert_eq(r.it[0].call_err.code, 0);
    expect_log_in_order(r.b, N);
    cr_expect_lt(d.ran_seen, N,
                 "the item posted to the pool (%s) ran only after all %d strand items (it saw %d): the strand's "
                 "re-queued turn was preferred to older pool work",
                 by_item ? "from the strand's turn" : "by main", N, d.ran_seen);
    rig_close(&r, false);
}

Test(exec_strand, fairness_a_busy_strand_lets_other_pool_work_run) { fairness_on_a_pool(false); }

/* As above, with the direct item posted by the first strand item from the
 * worker itself. */
Test(exec_strand, fairness_the_same_from_a_strand_item_on_the_worker) { fairness_on_a_pool(true); }

Test(exec_strand, fairness_on_a_run_loop_the_turn_ends_after_64_items) {
    enum { N = 200 };
    ex_run_loop loop;
    test_loop_init(&loop);
    rig r;
    rig_open_over(&r, ex_run_loop_scheduler(&loop), N, 0);
    rig_post(&r, 0, N);
    direct d;
    direct_init(&d, r.b);
    ex_run_loop_push(&loop, &d.w);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(atomic_load(&r.b->ran), N);
    cr_assert_eq(atomic_load(&d.runs), 1);
    cr_assert_leq(d.ran_seen, 64, "a turn ran %d items before the loop's other item", d.ran_seen);
    cr_assert_gt(d.ran_seen, 0);
    expect_log_in_order(r.b, N);
    rig_close(&r, true);
    test_loop_destroy(&loop);
    expect_no_leaks();
}
