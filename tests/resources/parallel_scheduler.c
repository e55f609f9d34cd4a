/* SPDX-License-Identifier: MIT */
/* The process's parallel scheduler (parallel_scheduler.h; P2079,
 * [exec.par.scheduler], [exec.sysctxrepl]): the default pool, an installed
 * backend, bulk through either, stop, shutdown, failed creation.
 *
 * Criterion runs each test in a process of its own: "before first use"
 * is per test.  The suite installs no test allocator: the parallel
 * scheduler keeps its pool for the process's life by design, so only
 * LeakSanitizer (reachable memory is no leak) checks what tests leave. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "resources/parallel_fixtures.h"

TestSuite(parallel_scheduler, .timeout = 30);

static unsigned expected_workers(void) {
    unsigned n = ex_default_thread_count();
    return n < 4096 ? n : 4096;
}

/* ---------------------------------------------------- where work runs */

/* A then() callback that notes the agent it ran on. */
typedef struct spot {
    int worker;          /* ex_pool_current_worker of the parallel pool */
    bool on_backend;     /* test_backend_on_thread() */
    pthread_t thread;
} spot;

static ex_error note_spot(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    spot *s = ctx;
    ex_pool *p = ex_parallel_scheduler_pool();
    s->worker = p ? ex_pool_current_worker(p) : -1;
    s->on_backend = test_backend_on_thread();
    s->thread = pthread_self();
    return ex_ok();
}

static spot run_spot(ex_scheduler sch) {
    spot s = { -2, false, 0 };
    ex_result r = ex_sync_wait(ex_then(ex_schedule(sch), note_spot, &s, EX_SIG0, EX_SIG0));
    expect_value_arity(&r, 0);
    ex_result_destroy(&r);
    return s;
}

/* A work item that notes its thread's name, for ex_post. */
typedef struct named_item {
    ex_work w;
    char name[32];
    pthread_t thread;
    atomic_int done;
} named_item;

static void named_run(ex_work *w) {
    named_item *it = (named_item *)(void *)w;
    pthread_getname_np(pthread_self(), it->name, sizeof it->name);
    it->thread = pthread_self();
    atomic_store(&it->done, 1);
}

static void named_init(named_item *it) {
    memset(it, 0, sizeof *it);
    it->w.execute = named_run;
    it->w.cancel = named_run;
    atomic_init(&it->done, 0);
}

Test(parallel_scheduler, schedule_completes_on_an_agent_of_its_pool) {
    cr_assert_null(ex_parallel_scheduler_pool(), "no pool before the first call");
    ex_scheduler sch = ex_parallel_scheduler();
    ex_pool *p = ex_parallel_scheduler_pool();
    cr_assert_not_null(p, "the first call creates the pool");
    cr_assert(ex_scheduler_equal(sch, ex_pool_scheduler(p)), "the default handle is the pool's");
    cr_assert_eq(ex_pool_size(p), expected_workers(), "sized by ex_default_thread_count()");
    spot s = run_spot(sch);
    cr_assert_geq(s.worker, 0, "ran on a worker or, waiting in sync_wait, as a lent caller of the pool");
    expect_no_leaks();
}

Test(parallel_scheduler, post_runs_on_a_worker_thread_of_its_own) {
    ex_scheduler sch = ex_parallel_scheduler();
    named_item it;
    named_init(&it);
    cr_assert_eq(ex_post(sch, &it.w).code, EX_OK);
    cr_assert_eq(wait_int_equals(&it.done, 1), true, "the posted item never ran");
    cr_assert(!pthread_equal(it.thread, pthread_self()), "post never runs inline");
    cr_assert_eq(strncmp(it.name, "cexec-par-", 10), 0, "a worker of the parallel pool, not \"%s\"", it.name);
}

Test(parallel_scheduler, every_handle_is_equal_and_parallel) {
    ex_scheduler a = ex_parallel_scheduler(), b = ex_parallel_scheduler();
    cr_assert(ex_scheduler_equal(a, b));
    cr_assert_eq(ex_get_forward_progress_guarantee(a), EX_PROGRESS_PARALLEL);
    cr_assert(!ex_scheduler_equal(a, ex_inline_scheduler()));
}

Test(parallel_scheduler, its_timers_are_the_pools) {
    expect_sync_values(ex_schedule_after(ex_parallel_scheduler(), EX_NS_PER_MS), 0);
}

/* ------------------------------------------------------------------ bulk */

#define BULK_SHAPE 4096

static atomic_int visits[BULK_SHAPE];
static atomic_int started_pair;  /* indices 0 and 1 that have started */

static ex_error visit_index(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    atomic_fetch_add(&visits[i], 1);
    return ex_ok();
}

static void expect_each_index_once(size_t shape) {
    for (size_t i = 0; i < shape; i++) cr_assert_eq(atomic_load(&visits[i]), 1, "index %zu ran %d times", i, atomic_load(&visits[i]));
}

static ex_error visit_chunk(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    for (size_t i = begin; i < end; i++) visit_index(ctx, i, v, n);
    return ex_ok();
}

/* Indices 0 and 1 each wait (bounded) until both have started: only two
 * agents running at once get past it. */
static ex_error meet(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    atomic_fetch_add(&started_pair, 1);
    if (wait_int_reaches(&started_pair, 2) < 2) return ex_err(EX_EUSER, "index ran alone: no second agent");
    atomic_fetch_add(&visits[i], 1);
    return ex_ok();
}

Test(parallel_scheduler, bulk_runs_every_index_once) {
    ex_sender *s = ex_bulk(ex_schedule(ex_parallel_scheduler()), EX_PAR, BULK_SHAPE, visit_index, NULL);
    expect_sync_values(s, 0);
    expect_each_index_once(BULK_SHAPE);
    expect_no_leaks();
}

Test(parallel_scheduler, bulk_runs_its_indices_in_parallel) {
    if (expected_workers() < 2) cr_skip_test("one CPU: a pool of one worker");
    atomic_store(&started_pair, 0);
    /* A grain: the pool shares the chunks out at once. */
    ex_sender *s = ex_bulk_grain(ex_schedule(ex_parallel_scheduler()), EX_PAR, 2, 1, meet, NULL);
    expect_sync_values(s, 0);
    expect_each_index_once(2);
}

Test(parallel_scheduler, bulk_chunked_covers_the_shape) {
    ex_sender *s = ex_bulk_chunked(ex_schedule(ex_parallel_scheduler()), EX_PAR, BULK_SHAPE, 0, visit_chunk, NULL);
    expect_sync_values(s, 0);
    expect_each_index_once(BULK_SHAPE);
}

Test(parallel_scheduler, algorithms_run_on_it) {
    enum { N = 100000 };
    double *x = malloc(N * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < N; i++) x[i] = (double)(i % 7);
    ex_result r = ex_sync_wait(ex_reduce_f64(ex_parallel_scheduler(), x, N, 1.0));
    double want = 1.0;
    for (size_t i = 0; i < N; i++) want += x[i];
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.d, want);
    ex_result_destroy(&r);
    free(x);
}

/* ------------------------------------------------------- a custom backend */

static test_backend tb;

Test(parallel_scheduler, an_installed_backend_runs_the_schedule) {
    test_backend_install(&tb, 2, false);
    ex_scheduler sch = ex_parallel_scheduler();
    cr_assert_null(ex_parallel_scheduler_pool(), "no pool with a custom backend");
    cr_assert(ex_scheduler_equal(sch, ex_parallel_scheduler()));
    cr_assert_eq(ex_get_forward_progress_guarantee(sch), EX_PROGRESS_PARALLEL);
    spot s = run_spot(sch);
    cr_assert(s.on_backend, "completed on a backend thread");
    cr_assert_eq(atomic_load(&tb.schedules), 1, "one schedule call, not %d", atomic_load(&tb.schedules));
    named_item posted, dispatched;
    named_init(&posted);
    named_init(&dispatched);
    cr_assert_eq(ex_post(sch, &posted.w).code, EX_OK);
    cr_assert_eq(ex_dispatch(sch, &dispatched.w).code, EX_OK);
    cr_assert(wait_int_equals(&posted.done, 1));
    cr_assert(wait_int_equals(&dispatched.done, 1));
    cr_assert_eq(atomic_load(&tb.schedules), 3, "post and dispatch both queue on the backend");
    cr_assert(!pthread_equal(dispatched.thread, pthread_self()), "dispatch off the backend queues");
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    cr_assert_eq(atomic_load(&tb.shutdowns), 1);
    expect_no_leaks();
}

Test(parallel_scheduler, a_backend_without_bulk_gets_jobs_shared_through_schedule) {
    test_backend_install(&tb, 3, false);
    ex_sender *s = ex_bulk(ex_schedule(ex_parallel_scheduler()), EX_PAR, BULK_SHAPE, visit_index, NULL);
    expect_sync_values(s, 0);
    expect_each_index_once(BULK_SHAPE);
    /* The schedule, and a helper per other agent. */
    cr_assert_eq(atomic_load(&tb.schedules), 1 + 2, "schedule calls: %d", atomic_load(&tb.schedules));
    cr_assert_eq(atomic_load(&tb.bulks), 0);
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    expect_no_leaks();
}

/* EX_SEQ on the shared path: no helper is scheduled, the indices run in
 * order on the agent that started the bulk. */
static size_t seq_order[64];
static atomic_size_t seq_n;
static _Atomic(const void *) seq_thread;
static atomic_int seq_other_thread;

static ex_error note_seq(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    const void *expected = NULL;
    if (!atomic_compare_exchange_strong(&seq_thread, &expected, test_thread_id()) && expected != test_thread_id())
        atomic_store(&seq_other_thread, 1);
    size_t k = atomic_fetch_add(&seq_n, 1);
    if (k < 64) seq_order[k] = i;
    return ex_ok();
}

/* Runs an EX_SEQ bulk of 64 on the parallel scheduler and checks it ran
 * in index order on one agent. */
static void expect_sequenced_run(void) {
    ex_sender *s = ex_bulk_grain(ex_schedule(ex_parallel_scheduler()), EX_SEQ, 64, 1, note_seq, NULL);
    expect_sync_values(s, 0);
    cr_assert_eq(atomic_load(&seq_n), 64u);
    for (size_t i = 0; i < 64; i++) cr_assert_eq(seq_order[i], i, "index %zu ran %zu-th", seq_order[i], i);
    cr_assert_eq(atomic_load(&seq_other_thread), 0, "a sequenced bulk ran on two agents");
}

Test(parallel_scheduler, a_shared_sequenced_bulk_runs_in_order_on_one_agent) {
    test_backend_install(&tb, 3, false);
    expect_sequenced_run();
    cr_assert_eq(atomic_load(&tb.schedules), 1, "helpers were scheduled for a sequenced bulk: %d schedules",
                 atomic_load(&tb.schedules));
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    expect_no_leaks();
}

/* A backend with a bulk of its own never gets a sequenced job: its bulk
 * runs in parallel, which EX_SEQ forbids. */
Test(parallel_scheduler, a_backend_bulk_never_gets_a_sequenced_job) {
    test_backend_install(&tb, 3, true);
    expect_sequenced_run();
    cr_assert_eq(atomic_load(&tb.bulks), 0, "the backend's bulk got a sequenced job");
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    expect_no_leaks();
}

Test(parallel_scheduler, a_backend_bulk_gets_the_job) {
    test_backend_install(&tb, 2, true);
    ex_sender *s = ex_bulk_chunked(ex_schedule(ex_parallel_scheduler()), EX_PAR, BULK_SHAPE, 0, visit_chunk, NULL);
    expect_sync_values(s, 0);
    expect_each_index_once(BULK_SHAPE);
    cr_assert_eq(atomic_load(&tb.bulks), 1, "the backend's bulk ran the job");
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    expect_no_leaks();
}

Test(parallel_scheduler, a_shared_bulk_runs_on_agents_at_once) {
    test_backend_install(&tb, 2, false);
    atomic_store(&started_pair, 0);
    expect_sync_values(ex_bulk(ex_schedule(ex_parallel_scheduler()), EX_PAR, 2, meet, NULL), 0);
    expect_each_index_once(2);
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
}

static ex_error fail_at_0(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    return i == 0 ? ex_err(EX_EUSER + 5, "index 0 failed") : ex_ok();
}

Test(parallel_scheduler, a_shared_bulk_fails_with_the_first_error) {
    test_backend_install(&tb, 2, false);
    expect_sync_error_msg(ex_bulk_grain(ex_schedule(ex_parallel_scheduler()), EX_PAR, 64, 1, fail_at_0, NULL), EX_EUSER + 5,
                          "index 0 failed");
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    expect_no_leaks();
}

Test(parallel_scheduler, algorithms_run_on_a_backend) {
    test_backend_install(&tb, 2, false);
    enum { N = 100000 };
    double *x = malloc(N * sizeof *x);
    cr_assert_not_null(x);
    for (size_t i = 0; i < N; i++) x[i] = (double)(i % 5);
    ex_result r = ex_sync_wait(ex_reduce_f64(ex_parallel_scheduler(), x, N, 0.0));
    double want = 0.0;
    for (size_t i = 0; i < N; i++) want += x[i];
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.d, want);
    ex_result_destroy(&r);
    free(x);
    cr_assert_gt(atomic_load(&tb.schedules), 1, "the schedule and helpers of the shared bulk: %d",
                 atomic_load(&tb.schedules));
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
}

Test(parallel_scheduler, a_backend_has_no_clock) {
    test_backend_install(&tb, 1, false);
    expect_sync_error(ex_schedule_after(ex_parallel_scheduler(), EX_NS_PER_MS), EX_ENOTSUP);
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
}

Test(parallel_scheduler, set_backend_after_first_use_is_busy) {
    ex_scheduler sch = ex_parallel_scheduler();
    test_backend_start(&tb, 1);
    ex_parallel_backend be = test_backend_iface(&tb, false);
    ex_error e = ex_parallel_scheduler_set_backend(&be);
    expect_err(e, EX_EBUSY);
    cr_assert(ex_scheduler_equal(sch, ex_parallel_scheduler()), "still the default pool");
    cr_assert_not_null(ex_parallel_scheduler_pool());
    spot s = run_spot(sch);
    cr_assert(!s.on_backend);
    cr_assert_eq(atomic_load(&tb.schedules), 0, "the late backend was never called");
}

Test(parallel_scheduler, set_backend_checks_and_can_be_undone) {
    ex_parallel_backend none = { 0 };
    expect_err(ex_parallel_scheduler_set_backend(&none), EX_EINVAL);
    test_backend_install(&tb, 1, false);
    cr_assert_eq(ex_parallel_scheduler_set_backend(NULL).code, EX_OK, "NULL: the default again");
    spot s = run_spot(ex_parallel_scheduler());
    cr_assert_geq(s.worker, 0, "on the default pool");
    cr_assert_eq(atomic_load(&tb.schedules), 0);
}

Test(parallel_scheduler, a_refusing_backend_fails_schedule_and_post) {
    test_backend_install(&tb, 2, false);
    atomic_store(&tb.refuse, true);
    ex_scheduler sch = ex_parallel_scheduler();
    expect_sync_error_msg(ex_schedule(sch), TEST_BACKEND_REFUSED, "test backend: refused");
    named_item it;
    named_init(&it);
    cr_assert_eq(ex_post(sch, &it.w).code, TEST_BACKEND_REFUSED);
    /* A bulk whose helpers are refused (the handle is the environment's
     * scheduler): the caller runs every chunk. */
    rec r;
    rec_init(&r);
    rec_with_scheduler(&r, sch);
    run_in_place(ex_bulk(ex_just(), EX_PAR, BULK_SHAPE, visit_index, NULL), &r);
    rec_expect_values(&r, 0);
    expect_each_index_once(BULK_SHAPE);
    cr_assert_eq(atomic_load(&tb.schedules), 3, "the helper was offered to the backend");
    atomic_store(&tb.refuse, false);
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
}

/* ------------------------------------------------------------------ stop */

static void expect_stopped_when_started_stopped(ex_scheduler sch) {
    trec t;
    trec_init(&t);
    rec_with_stop(&t.r);
    ex_stop_source_request_stop(&t.r.stop);
    ex_sender *s = ex_schedule(sch);
    ex_operation *op = trec_run_start(s, &t);
    trec_wait_done(&t);
    rec_expect_stopped(&t.r);
    run_destroy_release(op, s);
}

Test(parallel_scheduler, a_stopped_receiver_completes_stopped) {
    expect_stopped_when_started_stopped(ex_parallel_scheduler());
    expect_no_leaks();
}

Test(parallel_scheduler, a_stopped_receiver_completes_stopped_on_a_backend) {
    test_backend_install(&tb, 1, false);
    expect_stopped_when_started_stopped(ex_parallel_scheduler());
    cr_assert_eq(atomic_load(&tb.executed), 1, "the item ran and saw the stop");
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
}

Test(parallel_scheduler, items_a_backend_drops_complete_stopped) {
    test_backend_install(&tb, 1, false);
    test_backend_pause(&tb);
    trec t;
    trec_init(&t);
    ex_sender *s = ex_schedule(ex_parallel_scheduler());
    ex_operation *op = trec_run_start(s, &t);
    cr_assert_eq(test_backend_queued(&tb), 1);
    cr_assert_eq(atomic_load(&t.done), 0);
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK, "the hook cancels what is queued");
    trec_wait_done(&t);
    rec_expect_stopped(&t.r);
    cr_assert_eq(atomic_load(&tb.cancelled), 1);
    run_destroy_release(op, s);
}

/* -------------------------------------------------------------- shutdown */

Test(parallel_scheduler, shutdown_refuses_work_on_every_handle) {
    ex_scheduler before = ex_parallel_scheduler();
    spot s = run_spot(before);
    cr_assert_geq(s.worker, 0);
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK, "idempotent");
    expect_sync_error(ex_schedule(before), EX_ESHUTDOWN);
    ex_scheduler after = ex_parallel_scheduler();
    cr_assert(ex_scheduler_equal(before, after));
    expect_sync_error(ex_schedule(after), EX_ESHUTDOWN);
    named_item it;
    named_init(&it);
    cr_assert_eq(ex_post(after, &it.w).code, EX_ESHUTDOWN);
    /* A bulk on it runs on the calling thread. */
    expect_sync_values(ex_bulk(ex_just(), EX_PAR, BULK_SHAPE, visit_index, NULL), 0);
    test_backend_start(&tb, 1);
    ex_parallel_backend be = test_backend_iface(&tb, false);
    expect_err(ex_parallel_scheduler_set_backend(&be), EX_EBUSY);
    expect_no_leaks();
}

Test(parallel_scheduler, shutdown_before_first_use_closes_it) {
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    ex_scheduler sch = ex_parallel_scheduler();
    cr_assert_null(ex_parallel_scheduler_pool(), "no pool is created once shut down");
    cr_assert_eq(ex_get_forward_progress_guarantee(sch), EX_PROGRESS_PARALLEL);
    expect_sync_error_msg(ex_schedule(sch), EX_ESHUTDOWN, "ex_parallel_scheduler: shut down (ex_parallel_scheduler_shutdown)");
    cr_assert(ex_scheduler_equal(sch, ex_parallel_scheduler()));
}

Test(parallel_scheduler, a_backend_shut_down_refuses_and_runs_bulk_on_the_caller) {
    test_backend_install(&tb, 2, true);
    ex_scheduler sch = ex_parallel_scheduler();
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    cr_assert_eq(ex_parallel_scheduler_shutdown().code, EX_OK);
    cr_assert_eq(atomic_load(&tb.shutdowns), 1, "the hook runs once");
    expect_sync_error(ex_schedule(sch), EX_ESHUTDOWN);
    cr_assert_eq(atomic_load(&tb.schedules), 0, "nothing reaches a backend once shut down");
    /* The bulk hook of the handle still completes the job, here. */
    rec r;
    rec_init(&r);
    rec_with_scheduler(&r, sch);
    run_in_place(ex_bulk(ex_just(), EX_PAR, 64, visit_index, NULL), &r);
    rec_expect_values(&r, 0);
    expect_each_index_once(64);
    cr_assert_eq(atomic_load(&tb.bulks), 0);
}

static atomic_int shutdown_code;

static void shutdown_here(ex_work *w) {
    (void)w;
    atomic_store(&shutdown_code, ex_parallel_scheduler_shutdown().code);
}

Test(parallel_scheduler, shutdown_on_a_worker_is_refused) {
    atomic_store(&shutdown_code, -1);
    ex_work w = { NULL, shutdown_here, shutdown_here };
    cr_assert_eq(ex_post(ex_parallel_scheduler(), &w).code, EX_OK);
    cr_assert(wait_int_reaches(&shutdown_code, 0) >= 0);
    cr_assert_eq(atomic_load(&shutdown_code), EX_EINVAL);
    spot s = run_spot(ex_parallel_scheduler());
    cr_assert_geq(s.worker, 0, "still running");
}

/* ---------------------------------------------------- failed creation */

Test(parallel_scheduler, a_pool_out_of_memory_gives_a_failing_handle_then_retries) {
    cnt_alloc a;
    cnt_alloc_init(&a);
    cnt_alloc_fail_nth(&a, 1);
    ex_set_default_allocator(&a.base);
    ex_scheduler failed = ex_parallel_scheduler();
    ex_set_default_allocator(NULL);
    cr_assert_eq(a.failed, 1, "the pool's first allocation failed");
    cnt_alloc_expect_balanced(&a, "a failed creation");
    cr_assert(ex_scheduler_valid(failed), "never the invalid handle");
    cr_assert_null(ex_parallel_scheduler_pool());
    cr_assert_eq(ex_get_forward_progress_guarantee(failed), EX_PROGRESS_PARALLEL);
    expect_sync_error_msg(ex_schedule(failed), EX_ENOMEM, "ex_parallel_scheduler: out of memory creating its pool");
    named_item it;
    named_init(&it);
    cr_assert_eq(ex_post(failed, &it.w).code, EX_ENOMEM);
    /* Nothing was decided: a backend may still be installed ... */
    test_backend_start(&tb, 1);
    ex_parallel_backend be = test_backend_iface(&tb, false);
    cr_assert_eq(ex_parallel_scheduler_set_backend(&be).code, EX_OK);
    cr_assert_eq(ex_parallel_scheduler_set_backend(NULL).code, EX_OK);
    /* ... and the next call tries again. */
    ex_scheduler sch = ex_parallel_scheduler();
    cr_assert_not_null(ex_parallel_scheduler_pool());
    cr_assert(!ex_scheduler_equal(failed, sch));
    spot s = run_spot(sch);
    cr_assert_geq(s.worker, 0);
    expect_no_leaks();
}

Test(parallel_scheduler, a_bad_wait_policy_in_the_environment_is_reported) {
    cr_assert_eq(setenv("CEXEC_WAIT_POLICY", "sometimes", 1), 0);
    ex_scheduler failed = ex_parallel_scheduler();
    expect_sync_error_msg(ex_schedule(failed), EX_EINVAL,
                          "ex_parallel_scheduler: its pool could not be created: bad CEXEC_WAIT_POLICY or CEXEC_LINGER_US");
    cr_assert(ex_scheduler_equal(failed, ex_parallel_scheduler()), "failures for one reason compare equal");
    cr_assert_eq(unsetenv("CEXEC_WAIT_POLICY"), 0);
    spot s = run_spot(ex_parallel_scheduler());
    cr_assert_geq(s.worker, 0);
}
