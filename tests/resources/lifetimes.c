/* SPDX-License-Identifier: MIT */
/* lifetimes.c - what keeps an execution resource alive (docs/design.md,
 * "What keeps a resource alive"): a pool destroyed while a task is away
 * from it, a pool shut down from inside its own shutdown, a pool used in a
 * fork() child, and a task whose body breaks its declared signature. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/task_fixtures.h"
#include "resources/hold.h"

TEST_SUITE(lifetimes, 60);

/* ------------------------------------------- a pool destroyed under a task */

/* What a task away from its pool and the thread destroying that pool share. */
typedef struct away {
    ex_scheduler pool_sched, other;
    ex_pool *pool;
    atomic_int away;             /* the task is off the pool */
    atomic_int destroy_started;
    atomic_int completed;        /* the task's completion has returned */
    atomic_int completed_at_destroy_return;
    atomic_int destroy_code;
    atomic_int destroy_done;
    atomic_int values;
    atomic_int errors;
    int slow_ms;                 /* the value handler's delay */
    ex_env_pair env;             /* get_scheduler: the pool */
} away;

static void away_value(void *self, const ex_value *v, size_t n) {
    away *a = self;
    test_sleep_ms(a->slow_ms);   /* a slow handler: destroy must still wait for it */
    bool ok = n == 1 && v[0].type == EX_T_TUPLE && v[0].as.tuple->n == 2 && v[0].as.tuple->v[1].as.i == 2;
    atomic_fetch_add(&a->values, ok ? 1 : 100);
    atomic_store(&a->completed, 1);
}
static void away_error(void *self, ex_error e) {
    away *a = self;
    (void)e;
    atomic_fetch_add(&a->errors, 1);
    atomic_store(&a->completed, 1);
}
static void away_stopped(void *self) { away_error(self, ex_ok()); }

static ex_env away_env(void *self) { return ex_env_of_pair(&((away *)self)->env); }

static const ex_receiver_vtable away_vt = { away_value, away_error, away_stopped, away_env, NULL };

static void *destroy_thread(void *arg) {
    away *a = arg;
    if (!wait_int(&a->away)) return NULL;
    atomic_store(&a->destroy_started, 1);
    ex_error e = ex_pool_destroy(a->pool);
    atomic_store(&a->completed_at_destroy_return, atomic_load(&a->completed));
    atomic_store(&a->destroy_code, e.code);
    atomic_store(&a->destroy_done, 1);
    return NULL;
}

/* Waits until destroy began, then a little longer, so that a destroy that
 * does not wait for the task would have freed the pool by now. */
static void wait_for_destroy(away *a) {
    TCHECK(wait_int(&a->destroy_started));
    test_sleep_ms(50);
}

static ex_task_result body_change_back(ex_task *t, void *arg) {
    away *a = arg;
    ex_scheduler prev = ex_change_coroutine_scheduler(t, a->other);
    TCHECK(ex_scheduler_equal(prev, a->pool_sched));
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), a->other));
    atomic_store(&a->away, 1);
    wait_for_destroy(a);
    /* The pool is shutting down but still held by this task: the move is
     * refused, the task stays where it is. */
    (void)ex_change_coroutine_scheduler(t, prev);
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), a->other));
    ex_await_result r = ex_await(t, ex_into_variant(ex_just(ex_int(1), ex_int(2))));
    TCHECK(r.status == EX_AWAIT_VALUE);
    return ex_task_values(r.n, r.v);
}

static ex_error wait_destroy_then(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    away *a = ctx;
    atomic_store(&a->away, 1);
    wait_for_destroy(a);
    return ex_ok();
}

static ex_task_result body_away_in_await(ex_task *t, void *arg) {
    away *a = arg;
    ex_sig none = { 0, { 0 } };
    ex_await_result r = ex_await(t, ex_then(ex_schedule(a->other), wait_destroy_then, a, none, none));
    /* The hop back to the pool was refused: the task carries on here. */
    TCHECK(r.status == EX_AWAIT_ERROR && r.error.code == EX_ESHUTDOWN);
    /* The tuple's deep copy comes from the pool's allocator and is freed
     * after the (slow) completion. */
    r = ex_await(t, ex_into_variant(ex_just(ex_int(1), ex_int(2))));
    TCHECK(r.status == EX_AWAIT_VALUE);
    return ex_task_values(r.n, r.v);
}

/* Runs body as a task on a fresh pool, destroys the pool while the task is
 * away on a single-thread context, and checks that destroy returned only
 * after the task's completion had. */
static void run_away(ex_task_fn body, int slow_ms) {
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    static away a;
    memset(&a, 0, sizeof a);
    a.pool = test_pool_new(2);
    a.pool_sched = ex_pool_scheduler(a.pool);
    a.other = ex_single_thread_context_scheduler(&ctx);
    a.slow_ms = slow_ms;
    ex_env_pair_init(&a.env, &ex_key_get_scheduler, ex_sched_value(a.pool_sched), ex_env_empty());
    ex_sender *s = ex_task_create(body, &a, NULL);
    ex_receiver r = { &away_vt, &a };
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, r, &op).code, 0);
    ex_sender_release(s);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, destroy_thread, &a), 0);
    ex_start(op);
    cr_assert(wait_int(&a.destroy_done), "ex_pool_destroy did not return");
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&a.destroy_code), 0);
    cr_assert_eq(atomic_load(&a.completed_at_destroy_return), 1,
                 "ex_pool_destroy returned before the task that held the pool completed");
    cr_assert_eq(atomic_load(&a.values), 1);
    cr_assert_eq(atomic_load(&a.errors), 0);
    ex_operation_free(op);
    test_stc_destroy(&ctx);
    EXPECT_PROBE();
    expect_no_leaks();
}

Test(lifetimes, destroy_waits_for_a_task_that_changed_scheduler) { run_away(body_change_back, 0); }

Test(lifetimes, destroy_waits_for_a_task_finishing_away_with_a_slow_handler) { run_away(body_away_in_await, 50); }

Test(lifetimes, destroy_waits_for_a_task_finishing_away) { run_away(body_away_in_await, 0); }

/* ---------------------------------- the returned handle outlives its moves */

typedef struct moves {
    ex_scheduler pool, s1, s2;
    atomic_int moved;            /* the task is on s2, having left s1 */
    atomic_int release;          /* main has checked the holds */
} moves;

/* pool -> s1 -> s2 -> s1 -> s2: every handle returned names a resource the
 * task still holds; s1 cannot be destroyed before the task completes. */
static ex_task_result body_many_moves(ex_task *t, void *arg) {
    moves *m = arg;
    ex_scheduler p1 = ex_change_coroutine_scheduler(t, m->s1);
    ex_scheduler p2 = ex_change_coroutine_scheduler(t, m->s2);
    ex_scheduler p3 = ex_change_coroutine_scheduler(t, p2);
    ex_scheduler p4 = ex_change_coroutine_scheduler(t, p3);
    TCHECK(ex_scheduler_equal(p1, m->pool));
    TCHECK(ex_scheduler_equal(p2, m->s1));
    TCHECK(ex_scheduler_equal(p3, m->s2));
    TCHECK(ex_scheduler_equal(p4, m->s1));
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), m->s2));
    atomic_store(&m->moved, 1);
    TCHECK(wait_int(&m->release));
    return ex_task_values(0, NULL);
}

Test(lifetimes, a_task_holds_every_scheduler_it_left_until_it_completes) {
    ex_pool *pool = test_pool_new(2);
    ex_strand *s1, *s2;
    cr_assert_eq(ex_strand_create(ex_pool_scheduler(pool), NULL, &s1).code, 0);
    cr_assert_eq(ex_strand_create(ex_pool_scheduler(pool), NULL, &s2).code, 0);
    static moves m;
    memset(&m, 0, sizeof m);
    m.pool = ex_pool_scheduler(pool);
    m.s1 = ex_strand_scheduler(s1);
    m.s2 = ex_strand_scheduler(s2);
    static trec tr;
    trec_init(&tr);
    rec_with_scheduler(&tr.r, m.pool);
    ex_receiver r = trec_receiver(&tr);
    ex_sender *s = ex_task_create(body_many_moves, &m, NULL);
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, r, &op).code, 0);
    ex_sender_release(s);
    ex_start(op);
    cr_assert(wait_int(&m.moved));
    cr_assert_eq(ex_strand_destroy(s1).code, EX_EBUSY, "s1 was left, but the task still holds it");
    atomic_store(&m.release, 1);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    ex_operation_free(op);
    ex_error e;
    double deadline = test_now_s() + 20;
    while ((e = ex_strand_destroy(s1)).code == EX_EBUSY && test_now_s() < deadline) sched_yield();
    cr_assert_eq(e.code, 0);
    while ((e = ex_strand_destroy(s2)).code == EX_EBUSY && test_now_s() < deadline) sched_yield();
    cr_assert_eq(e.code, 0);
    cr_assert_eq(ex_pool_destroy(pool).code, 0);
    EXPECT_PROBE();
    expect_no_leaks();
}

/* ------------------------------------------- shutdown inside its own drain */


typedef struct reentry {
    ex_pool *pool;
    hold b;
    atomic_int cancelled, shutdown_code, destroy_code;
    atomic_int outer_done;
} reentry;

static reentry R;

static void reentrant_run(ex_work *w) { (void)w; }

/* Cancelled by the pool's own shutdown: calls shutdown and destroy again. */
static void reentrant_cancel(ex_work *w) {
    (void)w;
    if (atomic_fetch_add(&R.cancelled, 1) == 0) {
        atomic_store(&R.shutdown_code, ex_pool_shutdown(R.pool).code);
        atomic_store(&R.destroy_code, ex_pool_destroy(R.pool).code);
    }
}

static void *outer_shutdown(void *arg) {
    (void)arg;
    (void)ex_pool_shutdown(R.pool);
    atomic_store(&R.outer_done, 1);
    return NULL;
}

Test(lifetimes, shutdown_called_from_a_cancellation_it_runs_returns) {
    memset(&R, 0, sizeof R);
    R.pool = test_pool_new(1);
    hold_post(R.pool, &R.b);
    enum { N = 4 };
    ex_work items[N];
    for (int i = 0; i < N; i++) {
        items[i] = (ex_work){ NULL, reentrant_run, reentrant_cancel };
        cr_assert_eq(ex_post(ex_pool_scheduler(R.pool), &items[i]).code, 0);
    }
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, outer_shutdown, NULL), 0);
    test_sleep_ms(20);  /* lets shutdown reach the join (not required for the checks) */
    hold_release(&R.b);
    cr_assert(wait_int(&R.outer_done), "ex_pool_shutdown called from its own cancellation deadlocked");
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&R.cancelled), N);
    cr_assert_eq(atomic_load(&R.shutdown_code), 0, "shutdown is idempotent, also from inside itself");
    cr_assert_eq(atomic_load(&R.destroy_code), EX_EBUSY, "destroy from inside the shutdown is refused");
    cr_assert_eq(ex_pool_destroy(R.pool).code, 0);
    expect_no_leaks();
}

/* ------------------------------------------------ the declared signature */

static ex_task_result body_returns_double(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v = ex_double(1.5);
    return ex_task_values(1, &v);
}

static ex_task_result body_returns_int(ex_task *t, void *arg) {
    (void)t, (void)arg;
    ex_value v = ex_int(7);
    return ex_task_values(1, &v);
}

static ex_result run_declared_int(ex_task_fn body) {
    ex_sig int_sig = { 1, { EX_T_INT } };
    ex_task_options o = { 0 };
    o.affinity = EX_TASK_INLINE;
    o.value_sig = &int_sig;
    return ex_sync_wait(ex_task_create(body, NULL, &o));
}

Test(lifetimes, a_task_body_breaking_its_declared_signature_is_an_error) {
    ex_result r = run_declared_int(body_returns_double);
    expect_error(&r, EX_EINVAL);
    ex_result_destroy(&r);
    r = run_declared_int(body_returns_int);
    expect_value_int(&r, 7);
    ex_result_destroy(&r);
    expect_no_leaks();
}

/* --------------------------------------------------------------- fork() */

/* The exit status of child pid, or -1 (after killing it) when it has not
 * exited within 20 s: it hung. */
static int wait_child(pid_t pid) {
    int status = 0;
    double deadline = test_now_s() + 20;
    pid_t got;
    while ((got = waitpid(pid, &status, WNOHANG)) == 0 && test_now_s() < deadline) test_sleep_ms(5);
    if (got != 0) return status;
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* In the child: the parent's pool refuses work at once (no hang), refuses
 * shutdown and destroy, and a pool of the child's own works. */
static int child_uses_pools(ex_pool *parents) {
    ex_result r = ex_sync_wait(ex_schedule(ex_pool_scheduler(parents)));
    bool refused = r.disposition == EX_DISP_ERROR && r.error.code == EX_ESHUTDOWN;
    ex_result_destroy(&r);
    if (!refused) return 1;
    ex_work w = { NULL, reentrant_run, NULL };
    if (ex_post(ex_pool_scheduler(parents), &w).code != EX_ESHUTDOWN) return 2;
    if (ex_pool_shutdown(parents).code != EX_EINVAL) return 3;
    if (ex_pool_destroy(parents).code != EX_EINVAL) return 4;
    ex_pool *own = NULL;
    ex_pool_config c = { 0 };
    c.threads = 2;
    if (ex_pool_create(&c, &own).code) return 5;
    r = ex_sync_wait(ex_schedule(ex_pool_scheduler(own)));
    bool ran = r.disposition == EX_DISP_VALUE;
    ex_result_destroy(&r);
    if (!ran) return 6;
    if (ex_pool_destroy(own).code) return 7;
    return 0;
}

Test(lifetimes, a_pool_of_the_parent_is_a_clear_error_in_a_fork_child) {
    ex_pool *p = test_pool_new(2);
    ex_result warm = ex_sync_wait(ex_schedule(ex_pool_scheduler(p)));  /* workers running */
    ex_result_destroy(&warm);
    /* Workers past that item's completion and parked: ASan's allocator is
     * not fork-safe while another thread is inside it (its lock stays taken
     * in the child).  Not needed with the libc allocator. */
    test_sleep_ms(100);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) _exit(child_uses_pools(p));
    int status = wait_child(pid);
    cr_assert_neq(status, -1, "the fork child hung using the parent's pool");
    cr_assert(WIFEXITED(status), "the fork child died");
    cr_assert_eq(WEXITSTATUS(status), 0, "the fork child failed check %d", WEXITSTATUS(status));
    /* The parent's pool is untouched. */
    ex_result r = ex_sync_wait(ex_schedule(ex_pool_scheduler(p)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(ex_pool_destroy(p).code, 0);
    expect_no_leaks();
}

/* ------------------------------------- address space across pool cycles */

static long vm_size_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmSize:", 7)) kb = atol(line + 7);
    fclose(f);
    return kb;
}

/* Each pool used to create (and destroy) its own jemalloc arenas, and every
 * destroyed arena kept about 2 MiB of address space: 300 cycles of a
 * 2-worker pool grew VmSize by about 1.2 GiB.  Parked arenas are reused. */
Test(lifetimes, pool_create_destroy_cycles_keep_address_space_flat) {
    long before = -1;
    for (int i = 0; i < 300; i++) {
        if (i == 20) before = vm_size_kb();  /* after the first cycles' one-time set-up */
        ex_pool *p = test_pool_new(2);
        ex_result r = ex_sync_wait(ex_schedule(ex_pool_scheduler(p)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        ex_result_destroy(&r);
        cr_assert_eq(ex_pool_destroy(p).code, 0);
    }
    long after = vm_size_kb();
    cr_assert(before > 0 && after > 0);
    cr_assert_lt(after - before, 128 * 1024, "280 pool cycles grew VmSize by %ld kB", after - before);
    expect_no_leaks();
}

/* ------------------------------- a single-thread context a task has left */

typedef struct ctx_away {
    ex_single_thread_context ctx;
    atomic_int left, destroy_started, destroy_done, completed_at_return;
    trec tr;                     /* done: the task's completion has returned */
} ctx_away;

static ctx_away CA;

static ex_task_result body_leaves_context(ex_task *t, void *arg) {
    (void)arg;
    ex_scheduler pool = ex_change_coroutine_scheduler(t, ex_single_thread_context_scheduler(&CA.ctx));
    ex_scheduler ctx = ex_change_coroutine_scheduler(t, pool);
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), pool));
    atomic_store(&CA.left, 1);
    TCHECK(wait_int(&CA.destroy_started));
    test_sleep_ms(50);
    /* The context is being destroyed but still held: the move is refused. */
    (void)ex_change_coroutine_scheduler(t, ctx);
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), pool));
    return ex_task_values(0, NULL);
}

static void *destroy_context(void *arg) {
    (void)arg;
    if (!wait_int(&CA.left)) return NULL;
    atomic_store(&CA.destroy_started, 1);
    ex_error e = ex_single_thread_context_destroy(&CA.ctx);
    atomic_store(&CA.completed_at_return, atomic_load(&CA.tr.done) + (e.code ? 10 : 0));
    atomic_store(&CA.destroy_done, 1);
    return NULL;
}

Test(lifetimes, context_destroy_waits_for_a_task_that_left_it) {
    memset(&CA, 0, sizeof CA);
    test_stc_init(&CA.ctx);
    ex_pool *pool = test_pool_new(2);
    trec_init(&CA.tr);
    rec_with_scheduler(&CA.tr.r, ex_pool_scheduler(pool));
    ex_sender *s = ex_task_create(body_leaves_context, NULL, NULL);
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, trec_receiver(&CA.tr), &op).code, 0);
    ex_sender_release(s);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, destroy_context, NULL), 0);
    ex_start(op);
    cr_assert(wait_int(&CA.tr.done));
    cr_assert(wait_int(&CA.destroy_done));
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&CA.completed_at_return), 1,
                 "ex_single_thread_context_destroy returned before the task holding it completed");
    cr_assert_eq(CA.tr.r.values, 1);
    ex_operation_free(op);
    cr_assert_eq(ex_pool_destroy(pool).code, 0);
    EXPECT_PROBE();
    expect_no_leaks();
}

Test(lifetimes, a_context_of_the_parent_is_a_clear_error_in_a_fork_child) {
    ex_single_thread_context ctx;
    test_stc_init(&ctx);
    /* Its thread past its start-up: ASan's allocator is not fork-safe while
     * another thread is inside it (its lock stays taken in the child). */
    ex_result warm = ex_sync_wait(ex_schedule(ex_single_thread_context_scheduler(&ctx)));
    cr_assert_eq(warm.disposition, EX_DISP_VALUE);
    ex_result_destroy(&warm);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        ex_result r = ex_sync_wait(ex_schedule(ex_single_thread_context_scheduler(&ctx)));
        int code = r.disposition == EX_DISP_ERROR && r.error.code == EX_ESHUTDOWN ? 0 : 1;
        ex_result_destroy(&r);
        if (!code && ex_single_thread_context_destroy(&ctx).code != EX_EINVAL) code = 2;
        ex_single_thread_context own;
        if (!code && ex_single_thread_context_init(&own).code) code = 3;
        if (!code) {
            r = ex_sync_wait(ex_schedule(ex_single_thread_context_scheduler(&own)));
            if (r.disposition != EX_DISP_VALUE) code = 4;
            ex_result_destroy(&r);
            if (ex_single_thread_context_destroy(&own).code) code = 5;
        }
        _exit(code);
    }
    int status = wait_child(pid);
    cr_assert_neq(status, -1, "the fork child hung using the parent's context");
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), 0, "the fork child failed check %d", WEXITSTATUS(status));
    test_stc_destroy(&ctx);
    expect_no_leaks();
}

/* ------------------------------- a move dropped by a pool's shutdown */

typedef struct dropped_move {
    ex_pool *pool;
    ex_single_thread_context ctx;
    hold b;
    atomic_int moving, marker_ran;
    int stayed, on_ctx;
} dropped_move;

static dropped_move DM;

static void dm_marker(ex_work *w) { (void)w; atomic_store(&DM.marker_ran, 1); }
static void dm_nothing(ex_work *w) { (void)w; }

static ex_task_result body_move_to_dying_pool(ex_task *t, void *arg) {
    (void)arg;
    atomic_store(&DM.moving, 1);
    (void)ex_change_coroutine_scheduler(t, ex_pool_scheduler(DM.pool));
    DM.stayed = ex_scheduler_equal(ex_task_scheduler(t), ex_single_thread_context_scheduler(&DM.ctx));
    DM.on_ctx = pthread_equal(pthread_self(), ex_single_thread_context_thread_id(&DM.ctx)) != 0;
    return ex_task_values(0, NULL);
}

static void *dm_shutdown(void *arg) {
    (void)arg;
    (void)ex_pool_shutdown(DM.pool);  /* joins the blocked worker, then cancels the queue here */
    return NULL;
}

/* Found by the soak's churn: the move, queued behind a busy worker, was
 * dropped by the shutdown, and the task went on running on the thread
 * that shut the pool down while ex_task_scheduler named the context. */
Test(lifetimes, a_move_dropped_by_a_shutdown_returns_the_task_to_its_scheduler) {
    memset(&DM, 0, sizeof DM);
    DM.pool = test_pool_new(1);
    test_stc_init(&DM.ctx);
    hold_post(DM.pool, &DM.b);
    static trec tr;
    trec_init(&tr);
    rec_with_scheduler(&tr.r, ex_single_thread_context_scheduler(&DM.ctx));
    ex_sender *s = ex_task_create(body_move_to_dying_pool, NULL, NULL);
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, trec_receiver(&tr), &op).code, 0);
    ex_sender_release(s);
    ex_start(op);
    cr_assert(wait_int(&DM.moving));
    ex_work m = { NULL, dm_marker, NULL };  /* runs once the task has suspended in its move */
    cr_assert_eq(ex_post(ex_single_thread_context_scheduler(&DM.ctx), &m).code, 0);
    cr_assert(wait_int(&DM.marker_ran));
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, dm_shutdown, NULL), 0);
    static ex_work probes[20000];
    int i = 0;
    for (; i < 20000; i++) {  /* until shutdown has begun */
        probes[i] = (ex_work){ NULL, dm_nothing, dm_nothing };
        if (ex_post(ex_pool_scheduler(DM.pool), &probes[i]).code == EX_ESHUTDOWN) break;
        test_sleep_ms(1);
    }
    cr_assert_lt(i, 20000);
    hold_release(&DM.b);
    pthread_join(th, NULL);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.values, 1);
    cr_assert(DM.stayed, "the failed move names the context");
    cr_assert(DM.on_ctx, "the task runs on the context's thread after its move was dropped");
    ex_operation_free(op);
    cr_assert_eq(ex_pool_destroy(DM.pool).code, 0);
    test_stc_destroy(&DM.ctx);
    expect_no_leaks();
}
