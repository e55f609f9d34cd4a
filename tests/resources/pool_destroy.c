/* SPDX-License-Identifier: MIT */
/* The pool: destroy cancels queued work, refuses new work with
 * EX_ESHUTDOWN, and is EX_EINVAL on its own worker (suite exec_pool,
 * declared in pool_create.c). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "resources/pool_fixtures.h"

/* ================================================================ destroy */

static struct {
    ex_pool *pool;
    int nblockers;
    bool check_refusals;
    pthread_t main_tid;
    ex_work blockers[4];
    atomic_int started, finished, blockers_cancelled;
    atomic_int probes_ok, probes_exec, probes_cancel, probes_cancel_off_main;
    atomic_int shutdown_seen, other_errors;
    ex_error post_err;
    /* refusals seen by blocker 0 once shutdown began */
    slot worker_sched;
    int worker_sched_sync;
    ex_result worker_sync;
    ex_work ext_work;
    atomic_int ext_work_runs;
    ex_error ext_post_err, ext_dispatch_err;
    slot ext_sched;
    int ext_sched_sync, ext_connect_err;
} D;

typedef struct probe {
    ex_work w;
} probe;

static void probe_exec(ex_work *w) {
    atomic_fetch_add(&D.probes_exec, 1);
    ex_deallocate(ex_default_allocator(), w, sizeof(probe), alignof(probe));
}

static void probe_cancel(ex_work *w) {
    atomic_fetch_add(&D.probes_cancel, 1);
    if (!pthread_equal(pthread_self(), D.main_tid)) atomic_fetch_add(&D.probes_cancel_off_main, 1);
    ex_deallocate(ex_default_allocator(), w, sizeof(probe), alignof(probe));
}

static void ext_work_fn(ex_work *w) {
    (void)w;
    atomic_fetch_add(&D.ext_work_runs, 1);
}

/* An outside thread submitting while destroy waits for the workers. */
static void *ext_main(void *arg) {
    (void)arg;
    ex_scheduler sch = ex_pool_scheduler(D.pool);
    D.ext_post_err = ex_post(sch, &D.ext_work);
    D.ext_dispatch_err = ex_dispatch(sch, &D.ext_work);
    ex_sender *snd = ex_schedule(sch);
    slot_init(&D.ext_sched, D.pool);
    D.ext_connect_err = slot_connect(&D.ext_sched, snd).code;
    if (!D.ext_connect_err) {
        ex_start(D.ext_sched.op);
        D.ext_sched_sync = atomic_load(&D.ext_sched.r.total);
    }
    ex_sender_release(snd);
    return NULL;
}

static void blocker_refusals(void) {
    ex_scheduler sch = ex_pool_scheduler(D.pool);
    /* schedule from the worker: set_error(EX_ESHUTDOWN) inside start */
    ex_sender *snd = ex_schedule(sch);
    slot_init(&D.worker_sched, D.pool);
    if (!slot_connect(&D.worker_sched, snd).code) {
        ex_start(D.worker_sched.op);
        D.worker_sched_sync = atomic_load(&D.worker_sched.r.total);
    }
    ex_sender_release(snd);
    D.worker_sync = ex_sync_wait(ex_schedule(sch));
    pthread_t t;
    if (pthread_create(&t, NULL, ext_main, NULL) == 0) pthread_join(t, NULL);
}

/* Holds its worker until ex_post reports the shutdown. */
static void blocker_exec(ex_work *w) {
    atomic_fetch_add(&D.started, 1);
    double end = test_now_s() + TEST_WAIT_LIMIT_S;
    while (atomic_load(&D.started) < D.nblockers && test_now_s() < end) sched_yield();
    while (test_now_s() < end) {
        probe *pr = ex_allocate(ex_default_allocator(), sizeof *pr, alignof(probe));
        if (!pr) {
            atomic_fetch_add(&D.other_errors, 1);
            break;
        }
        pr->w.next = NULL;
        pr->w.execute = probe_exec;
        pr->w.cancel = probe_cancel;
        ex_error e = ex_post(ex_pool_scheduler(D.pool), &pr->w);
        if (e.code == 0) {
            atomic_fetch_add(&D.probes_ok, 1);
            test_sleep_ms(1);
            continue;
        }
        ex_deallocate(ex_default_allocator(), pr, sizeof *pr, alignof(probe));
        if (e.code != EX_ESHUTDOWN) {
            atomic_fetch_add(&D.other_errors, 1);
            break;
        }
        if (w == &D.blockers[0]) {
            D.post_err = e;
            if (D.check_refusals) blocker_refusals();
        }
        atomic_fetch_add(&D.shutdown_seen, 1);
        break;
    }
    atomic_fetch_add(&D.finished, 1);
}

static void blocker_cancel(ex_work *w) {
    (void)w;
    atomic_fetch_add(&D.blockers_cancelled, 1);
}

/* Occupies every worker, queues k schedule operations from main, destroys
 * the pool, and checks that each one completed exactly once with
 * set_stopped, on the destroying thread. */
static void destroy_with_pending(unsigned threads, int k, bool check_refusals) {
    memset(&D, 0, sizeof D);
    D.main_tid = pthread_self();
    D.nblockers = (int)threads;
    D.check_refusals = check_refusals;
    D.ext_work.execute = ext_work_fn;
    D.ext_work.cancel = ext_work_fn;
    D.pool = test_pool_new(threads);
    for (unsigned i = 0; i < threads; i++) {
        D.blockers[i].execute = blocker_exec;
        D.blockers[i].cancel = blocker_cancel;
        cr_assert_eq(ex_post(ex_pool_scheduler(D.pool), &D.blockers[i]).code, 0);
    }
    EXPECT_INT_REACHES(&D.started, (int)threads);

    ex_sender *snd = ex_schedule(ex_pool_scheduler(D.pool));
    slot *s = calloc((size_t)k, sizeof *s);
    cr_assert_not_null(s);
    slots_start(s, k, D.pool, snd);
    for (int i = 0; i < k; i++)
        cr_assert_eq(atomic_load(&s[i].r.total), 0, "every worker is busy: op %d cannot have completed", i);

    test_pool_free(D.pool); /* the blockers see EX_ESHUTDOWN and return */

    cr_assert_eq(atomic_load(&D.other_errors), 0);
    cr_assert_eq(atomic_load(&D.finished), (int)threads);
    cr_assert_eq(atomic_load(&D.shutdown_seen), (int)threads, "every blocker saw EX_ESHUTDOWN");
    cr_assert_eq(atomic_load(&D.blockers_cancelled), 0, "running items are finished, not cancelled");
    cr_assert_eq(D.post_err.code, EX_ESHUTDOWN);
    cr_assert_not_null(D.post_err.msg, "EX_ESHUTDOWN comes with a message");
    cr_assert_gt(strlen(D.post_err.msg), 0u);

    for (int i = 0; i < k; i++) {
        cr_assert_eq(atomic_load(&s[i].r.total), 1, "op %d completed %d times", i, atomic_load(&s[i].r.total));
        cr_assert_eq(atomic_load(&s[i].r.stops), 1, "op %d: values %d errors %d, expected set_stopped", i,
                     atomic_load(&s[i].r.values), atomic_load(&s[i].r.errors));
        cr_assert(s[i].r.thread == test_thread_id(), "op %d was cancelled off the destroying thread", i);
        cr_assert_eq(s[i].r.worker, -1);
    }
    cr_assert_eq(atomic_load(&D.probes_exec), 0, "a queued item ran after destroy began");
    cr_assert_eq(atomic_load(&D.probes_cancel), atomic_load(&D.probes_ok),
                 "items posted from workers: %d accepted, %d cancelled", atomic_load(&D.probes_ok),
                 atomic_load(&D.probes_cancel));
    cr_assert_eq(atomic_load(&D.probes_cancel_off_main), 0);

    if (check_refusals) {
        cr_assert_eq(atomic_load(&D.worker_sched.r.total), 1);
        cr_assert_eq(atomic_load(&D.worker_sched.r.errors), 1, "schedule on a worker after shutdown began");
        cr_assert_eq(D.worker_sched.r.err.code, EX_ESHUTDOWN);
        cr_assert_not_null(D.worker_sched.r.err.msg);
        cr_assert_eq(D.worker_sched_sync, 1, "the refusal completes inside start");
        cr_assert_eq(D.worker_sync.disposition, EX_DISP_ERROR);
        cr_assert_eq(D.worker_sync.error.code, EX_ESHUTDOWN);
        ex_result_destroy(&D.worker_sync);

        cr_assert_eq(D.ext_post_err.code, EX_ESHUTDOWN, "ex_post from outside during destroy: %d",
                     D.ext_post_err.code);
        cr_assert_not_null(D.ext_post_err.msg);
        cr_assert_eq(D.ext_dispatch_err.code, EX_ESHUTDOWN, "ex_dispatch from outside during destroy: %d",
                     D.ext_dispatch_err.code);
        cr_assert_not_null(D.ext_dispatch_err.msg);
        cr_assert_eq(atomic_load(&D.ext_work_runs), 0, "a refused item must not run");
        cr_assert_eq(D.ext_connect_err, 0);
        cr_assert_eq(atomic_load(&D.ext_sched.r.errors), 1, "schedule from outside during destroy");
        cr_assert_eq(atomic_load(&D.ext_sched.r.total), 1);
        cr_assert_eq(D.ext_sched.r.err.code, EX_ESHUTDOWN);
        cr_assert_not_null(D.ext_sched.r.err.msg);
        cr_assert_eq(D.ext_sched_sync, 1);
        cr_assert_eq(atomic_load(&g_completed), k + 2);
    } else {
        cr_assert_eq(atomic_load(&g_completed), k);
    }
    slots_destroy(s, k);
    free(s);
    ex_sender_release(snd);
}

Test(exec_pool, destroy_cancels_queued_ops_one_thread) {
    destroy_with_pending(1, 64, false);
    expect_no_leaks();
}

Test(exec_pool, destroy_cancels_queued_ops_all_four_workers_busy) {
    destroy_with_pending(4, 256, false);
    expect_no_leaks();
}

Test(exec_pool, new_work_is_refused_with_eshutdown_once_destroy_began) {
    destroy_with_pending(1, 8, true);
    expect_no_leaks();
}

Test(exec_pool, destroy_right_after_submission_loses_nothing) {
    enum { K = 2000 };
    slot *s = slots_new(K);
    for (int round = 0; round < 10; round++) {
        ex_pool *p = test_pool_new(round % 2 ? 4 : 2);
        ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
        slots_start(s, K, p, snd);
        test_pool_free(p);
        cr_assert_eq(atomic_load(&g_completed), K, "round %d: %ld of %d completed by the time destroy returned",
                     round, atomic_load(&g_completed), K);
        int values = slots_expect_once(s, K);
        int stops = 0;
        for (int i = 0; i < K; i++) {
            cr_assert_eq(atomic_load(&s[i].r.errors), 0);
            stops += atomic_load(&s[i].r.stops);
        }
        cr_assert_eq(values + stops, K);
        slots_destroy(s, K);
        ex_sender_release(snd);
    }
    free(s);
    expect_no_leaks();
}

static ex_error destroy_self_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    ex_pool *p = ctx;
    (void)in, (void)n;
    ex_error e = ex_pool_destroy(p);
    out[0] = ex_int(e.code);
    out[1] = ex_str(e.msg);
    return ex_ok();
}

Test(exec_pool, destroy_on_a_worker_is_einval) {
    ex_pool *p = test_pool_new(2);
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(p)), destroy_self_fn, p, EX_SIG0, EX_SIG(EX_T_INT, EX_T_STR)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.i, EX_EINVAL, "ex_pool_destroy on a worker: %lld", (long long)r.values[0].as.i);
    cr_assert_not_null(r.values[1].as.s);
    ex_result_destroy(&r);
    /* nothing was done: the pool still works */
    where w;
    run_where(p, &w);
    cr_assert_geq(w.worker, 0);
    test_pool_free(p);
    expect_no_leaks();
}

static ex_error destroy_other_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    out[0] = ex_int(ex_pool_destroy(ctx).code);
    return ex_ok();
}

Test(exec_pool, destroy_from_a_worker_of_another_pool_is_allowed) {
    ex_pool *p = test_pool_new(2);
    ex_pool *q = test_pool_new(1);
    where w;
    run_where(p, &w);
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(q)), destroy_other_fn, p, EX_SIG0, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 0);
    ex_result_destroy(&r);
    test_pool_free(q);
    expect_no_leaks();
}

