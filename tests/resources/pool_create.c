/* SPDX-License-Identifier: MIT */
/* The work-stealing thread pool (cexec/pool.h): create and destroy, where
 * work runs (workers, names, pinning), the scheduler's queries and owning
 * handles.  The other exec_pool files: pool_submit.c, pool_post_dispatch.c,
 * pool_destroy.c, pool_stats_trace.c (the suite is declared here). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "resources/pool_fixtures.h"

TEST_SUITE(exec_pool, 20);

/* ======================================================= create / destroy */

Test(exec_pool, default_thread_count_is_within_the_cpus) {
    unsigned n = ex_default_thread_count();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_geq(n, 1u);
    cr_assert_leq((long)n, online, "ex_default_thread_count() = %u > %ld online CPUs", n, online);
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    cr_assert_leq((int)n, CPU_COUNT(&set), "more threads (%u) than CPUs in the affinity mask (%d)", n,
                  CPU_COUNT(&set));
    cr_assert_eq(ex_default_thread_count(), n, "the answer is stable");
    expect_no_leaks();
}

Test(exec_pool, create_destroy_default_config) {
    ex_pool *p = test_pool_new_cfg(NULL);
    cr_assert_eq(ex_pool_size(p), ex_default_thread_count());
    where w;
    run_where(p, &w);
    cr_assert_geq(w.worker, 0);
    cr_assert_lt(w.worker, (int)(ex_pool_size(p) + ex_pool_lend_slots(p)), "a worker or a lent caller");
    test_pool_free(p);

    ex_pool_config zero;
    memset(&zero, 0, sizeof zero);
    p = test_pool_new_cfg(&zero);
    cr_assert_eq(ex_pool_size(p), ex_default_thread_count(), "threads = 0 means the default");
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, create_destroy_explicit_thread_counts) {
    static const unsigned counts[] = { 1, 2, 4 };
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        ex_pool_config c = test_pool_config(counts[k], "explicit");
        c.spin_rounds = k == 0 ? 1 : 1000;
        ex_pool *p = test_pool_new_cfg(&c);
        cr_assert_eq(ex_pool_size(p), counts[k]);
        for (int i = 0; i < 20; i++) {
            where w;
            run_where(p, &w);
            cr_assert_geq(w.worker, 0);
            cr_assert_lt(w.worker, 2 * (int)counts[k], "agent index %d of a %u-thread pool (and as many lent slots)",
                         w.worker, counts[k]);
        }
        test_pool_free(p);
    }
    expect_no_leaks();
}

Test(exec_pool, create_destroy_repeatedly_without_work) {
    for (int i = 0; i < 25; i++) {
        ex_pool *p = pool_named((unsigned)(1 + i % 4), NULL);
        if (i % 2) test_sleep_ms(1); /* sometimes destroy parked workers, sometimes spinning ones */
        test_pool_free(p);
    }
    expect_no_leaks();
}

Test(exec_pool, too_many_threads_is_einval) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    ex_pool *p = (ex_pool *)&c; /* must be overwritten with NULL */
    c.threads = 4097;
    ex_error e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, EX_EINVAL, "threads = 4097: got %d", e.code);
    cr_assert_not_null(e.msg);
    cr_assert_null(p, "*out is NULL on failure");
    c.threads = 0xffffffffu;
    p = (ex_pool *)&c;
    e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_null(p);
    expect_no_leaks();
}

Test(exec_pool, null_out_is_einval) {
    ex_error e = ex_pool_create(NULL, NULL);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = 2;
    e = ex_pool_create(&c, NULL);
    cr_assert_eq(e.code, EX_EINVAL);
    expect_no_leaks();
}

/* test_allocator, but fresh blocks are filled with garbage, so code that
 * reads memory it never initialised fails here and not only under ASan. */
static void *poison_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    void *p = test_allocator.allocate(test_allocator.ctx, size, align);
    if (p) memset(p, 0xa5, size);
    return p;
}

static void poison_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx;
    test_allocator.deallocate(test_allocator.ctx, p, size, align);
}

static ex_allocator poison_allocator = { poison_allocate, poison_deallocate, NULL, "poison", NULL };

/* A failure at any allocation of ex_pool_create gives EX_ENOMEM and
 * releases everything (a crash here means the error path touched memory it
 * never initialised). */
Test(exec_pool, create_out_of_memory_at_every_allocation) {
    ex_set_default_allocator(&poison_allocator);
    char path[] = "/tmp/cexec_pool_oom_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    ex_pool_config c = test_pool_config(2, NULL);
    c.trace_path = path;
    c.trace_capacity = 16;
    bool created = false;
    for (long nth = 1; nth < 64 && !created; nth++) {
        ex_pool *p = (ex_pool *)&c;
        test_alloc_fail_at(nth);
        ex_error e = ex_pool_create(&c, &p);
        test_alloc_reset();
        if (e.code == 0) {
            created = true;
            cr_assert_not_null(p);
            test_pool_free(p);
        } else {
            cr_assert_eq(e.code, EX_ENOMEM, "allocation %ld failing: got %d (%s)", nth, e.code, e.msg ? e.msg : "");
            cr_assert_null(p);
            cr_assert_eq(test_stats.in_use, 0, "allocation %ld failing leaked %ld block(s)", nth, test_stats.in_use);
        }
    }
    cr_assert(created, "the pool was never created");
    ex_set_default_allocator(&test_allocator);
    unlink(path);
    expect_no_leaks();
}

/* ============================================================ where work runs */

Test(exec_pool, completion_runs_on_a_worker) {
    ex_pool_config c = test_pool_config(2, NULL);
    c.lend_slots = -1;  /* no lending: the waiting main thread only sleeps */
    ex_pool *p = test_pool_new_cfg(&c);
    ex_pool *q = test_pool_new(1);
    cr_assert_eq(ex_pool_current_worker(p), -1, "main is not a worker");
    where w;
    run_where(p, &w);
    cr_assert_geq(w.worker, 0);
    cr_assert_lt(w.worker, 2);
    cr_assert_not(pthread_equal(w.tid, pthread_self()), "completed on the main thread");

    /* A worker of p is not a worker of q. */
    where wq;
    memset(&wq, 0, sizeof wq);
    wq.pool = q;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), where_fn, &wq, EX_SIG0, EX_SIG(EX_T_INT)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(wq.worker, -1, "a worker of p claims to be worker %d of q", wq.worker);

    /* The value completion of schedule has no datums. */
    slot s;
    slot_init(&s, p);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    atomic_store(&g_completed, 0);
    slot_start(&s, snd);
    cr_assert_eq(wait_long_reaches(&g_completed, 1), 1);
    cr_assert_eq(atomic_load(&s.r.values), 1);
    cr_assert_eq(s.r.n, 0u);
    cr_assert_geq(s.r.worker, 0);
    slots_destroy(&s, 1);
    ex_sender_release(snd);
    test_pool_free(q);
    test_pool_free(p);
    expect_no_leaks();
}

/* Notes, the first time each worker runs an item, its thread name and
 * the one CPU it may run on (-1: not pinned to one CPU). */
typedef struct first_runs {
    ex_pool *pool;
    int bad_index;
    atomic_int have[8];  /* 2: noted */
    char names[8][32];
    int cpu[8];
} first_runs;

static ex_error first_run_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    first_runs *f = ctx;
    (void)in, (void)n;
    int i = ex_pool_current_worker(f->pool);
    int expected = 0;
    if (i < 0 || i >= 8) {
        f->bad_index = 1;
    } else if (atomic_compare_exchange_strong(&f->have[i], &expected, 1)) {
        pthread_getname_np(pthread_self(), f->names[i], sizeof f->names[i]);
        cpu_set_t set;
        f->cpu[i] = -1;
        if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
            for (int c = 0; c < CPU_SETSIZE; c++)
                if (CPU_ISSET((size_t)c, &set)) f->cpu[i] = c;
        atomic_store(&f->have[i], 2);
    }
    out[0] = ex_int(i);
    return ex_ok();
}

static unsigned first_runs_seen(first_runs *f, unsigned threads) {
    unsigned seen = 0;
    for (unsigned i = 0; i < threads; i++) seen += atomic_load(&f->have[i]) == 2;
    return seen;
}

static bool batches_left(first_runs *f, int rounds, int round, double end) {
    if (rounds) return round < rounds;
    unsigned threads = ex_pool_size(f->pool);
    return first_runs_seen(f, threads) < threads && test_now_s() < end;
}

/* Runs batches of 64 items on p through first_run_fn: `rounds` of them, or
 * (rounds 0) until each of the pool's workers ran one (bounded). */
static first_runs *run_batches(ex_pool *p, int rounds) {
    first_runs *f = calloc(1, sizeof *f);
    cr_assert_not_null(f);
    f->pool = p;
    ex_sender *snd = ex_then(ex_schedule(ex_pool_scheduler(p)), first_run_fn, f, EX_SIG0, EX_SIG(EX_T_INT));
    enum { BATCH = 64 };
    slot *s = slots_new(BATCH);
    double end = test_now_s() + TEST_WAIT_LIMIT_S;
    for (int round = 0; batches_left(f, rounds, round, end); round++) {
        slots_start(s, BATCH, p, snd);
        cr_assert_eq(wait_long_reaches(&g_completed, BATCH), BATCH);
        slots_destroy(s, BATCH);
    }
    ex_sender_release(snd);
    free(s);
    return f;
}

static void check_names(const char *prefix, unsigned threads) {
    ex_pool *p = pool_named(threads, prefix);
    first_runs *f = run_batches(p, 0);
    cr_assert_not(f->bad_index, "a callback ran outside the pool's workers");
    cr_assert_geq(first_runs_seen(f, threads), 1u);
    char full[64];
    for (unsigned i = 0; i < threads; i++) {
        if (atomic_load(&f->have[i]) != 2) continue;
        snprintf(full, sizeof full, "%s-%u", prefix ? prefix : "cexec", i);
        if (strlen(full) <= 15) {
            cr_assert_str_eq(f->names[i], full, "worker %u is named \"%s\"", i, f->names[i]);
        } else {
            cr_assert_eq(strlen(f->names[i]), 15u, "name \"%s\" is not cut to 15 characters", f->names[i]);
            cr_assert_eq(strncmp(f->names[i], full, 15), 0, "worker %u is named \"%s\", expected a cut \"%s\"", i,
                         f->names[i], full);
        }
    }
    free(f);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, workers_are_named_with_the_prefix) { check_names("tpool", 4); }

Test(exec_pool, workers_default_name_prefix) { check_names(NULL, 2); }

Test(exec_pool, long_prefix_is_cut_to_15_characters) { check_names("abcdefghijklmnopqrstuvwxyz", 2); }

Test(exec_pool, pinned_workers_run_on_one_cpu_each) {
    cpu_set_t mask;
    cr_assert_eq(sched_getaffinity(0, sizeof mask, &mask), 0);
    int ncpu = CPU_COUNT(&mask);
    int nth_cpu[CPU_SETSIZE];
    int k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET((size_t)c, &mask)) nth_cpu[k++] = c;

    ex_pool_config cfg = test_pool_config(4, NULL);
    cfg.pin_threads = true;
    ex_pool *p = test_pool_new_cfg(&cfg);
    first_runs *f = run_batches(p, 10);
    int checked = 0;
    for (int i = 0; i < 4; i++) {
        if (atomic_load(&f->have[i]) != 2) continue;
        checked++;
        cr_assert_eq(f->cpu[i], nth_cpu[i % ncpu], "worker %d runs on CPU %d, expected CPU %d", i, f->cpu[i],
                     nth_cpu[i % ncpu]);
    }
    cr_assert_geq(checked, 1);
    free(f);
    test_pool_free(p);
    expect_no_leaks();
}

/* ====================================================== scheduler queries */

Test(exec_pool, forward_progress_is_parallel) {
    ex_pool *p = test_pool_new(1);
    cr_assert_eq(ex_get_forward_progress_guarantee(ex_pool_scheduler(p)), EX_PROGRESS_PARALLEL);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, schedulers_compare_by_pool) {
    ex_pool *p = test_pool_new(1);
    ex_pool *q = test_pool_new(1);
    cr_assert(ex_scheduler_valid(ex_pool_scheduler(p)));
    cr_assert(ex_scheduler_equal(ex_pool_scheduler(p), ex_pool_scheduler(p)));
    cr_assert_not(ex_scheduler_equal(ex_pool_scheduler(p), ex_pool_scheduler(q)));
    cr_assert_not(ex_scheduler_equal(ex_pool_scheduler(q), ex_pool_scheduler(p)));
    cr_assert_not(ex_scheduler_equal(ex_pool_scheduler(p), ex_inline_scheduler()));
    test_pool_free(q);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, schedule_sender_attributes_name_the_pool) {
    ex_pool *p = test_pool_new(1);
    ex_pool *q = test_pool_new(1);
    ex_scheduler sch = ex_pool_scheduler(p);
    ex_sender *s = ex_schedule(sch);
    cr_assert_eq(ex_sender_status(s).code, 0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 0);
    cr_assert(sg->flags & EX_SIGS_STOPPED);
    cr_assert(sg->flags & EX_SIGS_ERROR, "schedule may fail with EX_ESHUTDOWN");
    ex_scheduler got = { 0, 0 };
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sch));
    cr_assert_not(ex_scheduler_equal(got, ex_pool_scheduler(q)));
    ex_scheduler got2 = { 0, 0 };
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_stopped, &got2));
    cr_assert(ex_scheduler_equal(got2, sch));
    ex_sender_release(s);
    test_pool_free(q);
    test_pool_free(p);
    expect_no_leaks();
}

/* ======================================== owning handles and destroy */

/* ex_scheduler_retain on a pool keeps its memory: destroy waits for the
 * last handle.  The pool counts handles per worker (a worker's count can
 * go negative when its handles are dropped elsewhere) and sums them once
 * the workers are joined. */
typedef struct hold_ctx {
    ex_pool *pool;
    ex_scheduler held[4];
    atomic_int taken;
    atomic_int released;  /* set just before each outside release */
} hold_ctx;

static ex_error take_handles(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    hold_ctx *h = ctx;
    for (int i = 0; i < 4; i++) h->held[i] = ex_scheduler_retain(ex_pool_scheduler(h->pool));  /* on a worker */
    atomic_store(&h->taken, 1);
    return ex_ok();
}

static void *drop_handles_later(void *arg) {
    hold_ctx *h = arg;
    test_sleep_ms(50);
    for (int i = 0; i < 4; i++) {
        atomic_fetch_add(&h->released, 1);
        ex_scheduler_release(h->held[i]);  /* outside the pool */
    }
    return NULL;
}

Test(exec_pool, destroy_waits_for_handles_taken_on_a_worker_and_dropped_outside) {
    ex_pool *p = pool_named(2, "hold");
    hold_ctx h;
    memset(&h, 0, sizeof h);
    h.pool = p;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), take_handles, &h, EX_SIG0, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&h.taken), 1);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, drop_handles_later, &h), 0);
    cr_assert_eq(ex_pool_destroy(p).code, 0);  /* returns only after the last release */
    cr_assert_eq(atomic_load(&h.released), 4, "destroy returned with %d of 4 handles dropped",
                 atomic_load(&h.released));
    pthread_join(th, NULL);
    expect_no_leaks();
}

static ex_error drop_handles_here(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    hold_ctx *h = ctx;
    for (int i = 0; i < 4; i++) ex_scheduler_release(h->held[i]);  /* on a worker */
    return ex_ok();
}

/* Taken outside, dropped on a worker: the counts cancel across counters
 * and destroy does not wait. */
Test(exec_pool, handles_taken_outside_and_dropped_on_a_worker_balance) {
    ex_pool *p = pool_named(2, "hold");
    hold_ctx h;
    memset(&h, 0, sizeof h);
    h.pool = p;
    for (int i = 0; i < 4; i++) h.held[i] = ex_scheduler_retain(ex_pool_scheduler(p));
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), drop_handles_here, &h, EX_SIG0, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(ex_pool_destroy(p).code, 0);  /* would hang if the counts did not cancel */
    expect_no_leaks();
}

static void never_runs(ex_work *w) {
    (void)w;
    cr_assert_fail("a work item posted to an invalid handle ran");
}

/* The scheduler of a NULL resource is the invalid handle: its schedule
 * sender is invalid (it used to report OK and crash when run). */
Test(exec_pool, schedulers_of_null_resources_are_invalid_handles) {
    const ex_scheduler handles[] = { ex_pool_scheduler(NULL), ex_strand_scheduler(NULL),
                                     ex_single_thread_context_scheduler(NULL), ex_run_loop_scheduler(NULL) };
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++) {
        cr_assert_null(handles[i].vt, "handle %zu", i);
        expect_invalid(ex_schedule(handles[i]), EX_EINVAL);
        ex_work w = { NULL, never_runs, NULL };
        expect_err(ex_post(handles[i], &w), EX_EINVAL);
    }
    expect_no_leaks();
}
