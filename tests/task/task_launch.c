/* SPDX-License-Identifier: MIT */
/* [task] many tasks in a scope and ex_task_launch: detached tasks and
 * their handlers (exec_task suite, see task_results.c). */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "task/local_fixtures.h"

static const ex_sig sig_void = { 0, { 0 } };

/* A stack allocator that knows which blocks are live (thread-safe), to
 * ask whether an address still lies in a task's stack.  Freed blocks are
 * kept until reg_alloc_fini: a block reused by a later task would make a
 * finished task's address look live again. */
enum { REG_MAX = 256 };
typedef struct reg_alloc {
    ex_allocator base;
    pthread_mutex_t mu;
    uintptr_t lo[REG_MAX], hi[REG_MAX];
    long live;
    void *dead[REG_MAX];
    int ndead;
} reg_alloc;

static void *reg_allocate(void *ctx, size_t size, size_t align) {
    reg_alloc *a = ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size)) return NULL;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < REG_MAX; i++)
        if (!a->lo[i]) {
            a->lo[i] = (uintptr_t)p;
            a->hi[i] = (uintptr_t)p + size;
            a->live++;
            break;
        }
    pthread_mutex_unlock(&a->mu);
    return p;
}

static void reg_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)size, (void)align;
    reg_alloc *a = ctx;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < REG_MAX; i++)
        if (a->lo[i] == (uintptr_t)p) {
            a->lo[i] = a->hi[i] = 0;
            a->live--;
            break;
        }
    bool keep = a->ndead < REG_MAX;
    if (keep) a->dead[a->ndead++] = p;
    pthread_mutex_unlock(&a->mu);
    if (!keep) free(p);
}

static void reg_alloc_fini(reg_alloc *a) {
    for (int i = 0; i < a->ndead; i++) free(a->dead[i]);
    a->ndead = 0;
    pthread_mutex_destroy(&a->mu);
}

static void reg_alloc_init(reg_alloc *a) {
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    a->base.allocate = reg_allocate;
    a->base.deallocate = reg_deallocate;
    a->base.ctx = a;
    a->base.name = "test.registry";
}

/* Whether addr lies in a live block. */
static bool reg_live(reg_alloc *a, uintptr_t addr) {
    bool live = false;
    pthread_mutex_lock(&a->mu);
    for (int i = 0; i < REG_MAX; i++)
        if (a->lo[i] && addr >= a->lo[i] && addr < a->hi[i]) live = true;
    pthread_mutex_unlock(&a->mu);
    return live;
}

/* ------------------------------- a sender that completes when stop is asked */

/* ======================================================== many tasks */

enum { MANY = 1000, MANY_STEPS = 6 };

typedef struct many_slot {
    atomic_int steps, done;
    atomic_int bad;
} many_slot;

typedef struct many_ctx {
    ex_pool *pool, *other;
    many_slot slots[MANY];
} many_ctx;

typedef struct many_arg {
    many_ctx *c;
    int i;
} many_arg;

static ex_task_result body_many(ex_task *t, void *arg) {
    const many_arg *m = arg;
    many_ctx *c = m->c;
    many_slot *s = &c->slots[m->i];
    volatile uint64_t canary = 0x5eed0000u + (uint64_t)m->i;
    for (int k = 0; k < MANY_STEPS; k++) {
        ex_pool *p = (k & 1) ? c->other : c->pool;
        ex_await_result r = ex_await(t, ex_schedule(ex_pool_scheduler(p)));
        if (r.status != EX_AWAIT_VALUE) atomic_fetch_add(&s->bad, 1);
        if (ex_pool_current_worker(c->pool) < 0) atomic_fetch_add(&s->bad, 1);
        if (canary != 0x5eed0000u + (uint64_t)m->i) atomic_fetch_add(&s->bad, 1);
        atomic_fetch_add(&s->steps, 1);
    }
    atomic_fetch_add(&s->done, 1);
    return ex_task_void();
}

static many_ctx *many_setup(many_arg **args) {
    many_ctx *c = calloc(1, sizeof *c);
    cr_assert_not_null(c);
    c->pool = test_pool_new(2);
    c->other = test_pool_new(2);
    *args = calloc(MANY, sizeof **args);
    cr_assert_not_null(*args);
    for (int i = 0; i < MANY; i++) (*args)[i] = (many_arg){ c, i };
    return c;
}

static void many_check(many_ctx *c) {
    for (int i = 0; i < MANY; i++) {
        cr_assert_eq(atomic_load(&c->slots[i].done), 1, "task %d completed %d times", i, atomic_load(&c->slots[i].done));
        cr_assert_eq(atomic_load(&c->slots[i].steps), MANY_STEPS, "task %d", i);
        cr_assert_eq(atomic_load(&c->slots[i].bad), 0, "task %d saw %d bad steps", i, atomic_load(&c->slots[i].bad));
    }
}

static void many_teardown(many_ctx *c, many_arg *args) {
    ex_pool_destroy(c->other);
    ex_pool_destroy(c->pool);
    free(args);
    free(c);
}

Test(exec_task, thousand_tasks_on_a_pool_via_when_all) {
    many_arg *args;
    many_ctx *c = many_setup(&args);
    ex_sender **kids = calloc(MANY, sizeof *kids);
    cr_assert_not_null(kids);
    ex_task_options o = { .value_sig = &sig_void };
    for (int i = 0; i < MANY; i++) kids[i] = ex_task_create(body_many, &args[i], &o);
    ex_result r = run(ex_starts_on(ex_pool_scheduler(c->pool), ex_when_all_n(kids, MANY)));
    free(kids);
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(r.n, 0);
    many_check(c);
    many_teardown(c, args);
    expect_no_leaks();
}

Test(exec_task, thousand_tasks_on_a_pool_via_a_counting_scope) {
    many_arg *args;
    many_ctx *c = many_setup(&args);
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    ex_env_pair env;
    ex_env_pair_init(&env, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(c->pool)), ex_env_empty());
    for (int i = 0; i < MANY; i++) {
        ex_error e = ex_spawn_env(ex_task_create(body_many, &args[i], NULL), ex_counting_scope_token(&scope),
                                  ex_env_of_pair(&env));
        cr_assert_eq(e.code, 0, "spawn %d: %s", i, e.msg ? e.msg : "");
    }
    ex_result r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    many_check(c);
    many_teardown(c, args);
    expect_no_leaks();
}

/* ================================================================ launch */

typedef struct launch_ctx {
    ex_pool *pool;
    reg_alloc *stacks;
    atomic_int values, errors, stops;
    atomic_int on_pool;          /* handlers that ran on a worker of pool */
    atomic_int stack_live;       /* handlers that ran while their task's stack was still allocated */
    atomic_long sum;
    atomic_int last_error;
    atomic_int started;
} launch_ctx;

typedef struct launch_arg {
    launch_ctx *c;
    int kind;   /* 0 value, 1 error, 2 stopped, 3 wait for stop */
    int64_t v;
    _Atomic(uintptr_t) local;  /* an address on the task's stack */
} launch_arg;

static void lh_note(launch_arg *a) {
    launch_ctx *c = a->c;
    if (ex_pool_current_worker(c->pool) >= 0) atomic_fetch_add(&c->on_pool, 1);
    if (c->stacks && reg_live(c->stacks, atomic_load(&a->local))) atomic_fetch_add(&c->stack_live, 1);
}
static void lh_value(void *ctx, const ex_value *v, size_t n) {
    launch_arg *a = ctx;
    lh_note(a);
    if (n == 1) atomic_fetch_add(&a->c->sum, (long)v[0].as.i);
    atomic_fetch_add(&a->c->values, 1);
}
static void lh_error(void *ctx, ex_error e) {
    launch_arg *a = ctx;
    lh_note(a);
    atomic_store(&a->c->last_error, e.code);
    atomic_fetch_add(&a->c->errors, 1);
}
static void lh_stopped(void *ctx) {
    launch_arg *a = ctx;
    lh_note(a);
    atomic_fetch_add(&a->c->stops, 1);
}

static ex_task_result body_launched(ex_task *t, void *arg) {
    launch_arg *a = arg;
    volatile char here = 0;
    atomic_store(&a->local, (uintptr_t)&here);
    TCHECK(ex_scheduler_equal(ex_task_scheduler(t), ex_pool_scheduler(a->c->pool)));
    TCHECK(ex_pool_current_worker(a->c->pool) >= 0);
    TCHECK(ex_stop_token_stop_possible(ex_task_stop_token(t)));  /* the scope's token */
    atomic_fetch_add(&a->c->started, 1);
    ex_await_result r = ex_await(t, ex_schedule(ex_pool_scheduler(a->c->pool)));
    switch (a->kind) {
    case 0: return ex_task_i64(a->v);
    case 1: return ex_task_with_error(ex_err(EX_EUSER + 3, "launched task failed"));
    case 2: return ex_task_stopped();
    default:
        r = ex_await(t, until_stopped());  /* until the scope's stop request */
        TCHECK(r.status == EX_AWAIT_STOPPED);
        TCHECK(ex_pool_current_worker(a->c->pool) >= 0);
        return ex_task_i64(0);
    }
}

Test(exec_task, launch_runs_tasks_detached_into_a_scope) {
    ex_pool *pool = test_pool_new(2);
    reg_alloc stacks;
    reg_alloc_init(&stacks);
    launch_ctx c = { .pool = pool, .stacks = &stacks };
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    ex_task_options o = { .stack_allocator = &stacks.base };
    enum { N = 30 };
    launch_arg args[N];
    ex_task_handlers h[N];
    long want = 0;
    for (int i = 0; i < N; i++) {
        args[i] = (launch_arg){ &c, i % 3, i, 0 };
        h[i] = (ex_task_handlers){ lh_value, lh_error, lh_stopped, &args[i] };
        if (i % 3 == 0) want += i;
        ex_error e = ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                    ex_task_create(body_launched, &args[i], &o), &h[i]);
        cr_assert_eq(e.code, 0, "%s", e.msg ? e.msg : "");
    }
    ex_result r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);  /* errors went to the handler */
    cr_assert_eq(atomic_load(&c.values), N / 3);
    cr_assert_eq(atomic_load(&c.errors), N / 3);
    cr_assert_eq(atomic_load(&c.stops), N / 3);
    cr_assert_eq(atomic_load(&c.sum), want);
    cr_assert_eq(atomic_load(&c.last_error), EX_EUSER + 3);
    cr_assert_eq(atomic_load(&c.on_pool), N, "handlers run on the task's scheduler");
    cr_assert_eq(atomic_load(&c.stack_live), 0, "handlers run after the task's stack is gone");
    cr_assert_eq(stacks.live, 0);
    EXPECT_PROBE();
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    ex_pool_destroy(pool);
    reg_alloc_fini(&stacks);
    expect_no_leaks();
}

Test(exec_task, launch_with_the_scope_stop_token) {
    ex_pool *pool = test_pool_new(2);
    launch_ctx c = { .pool = pool };
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    enum { N = 8 };
    launch_arg args[N];
    ex_task_handlers hs[N];
    for (int i = 0; i < N; i++) {
        args[i] = (launch_arg){ &c, 3, 0, 0 };
        hs[i] = (ex_task_handlers){ lh_value, lh_error, lh_stopped, &args[i] };
        cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                    ex_task_create(body_launched, &args[i], NULL), &hs[i]).code, 0);
    }
    double deadline = test_now_s() + 20.0;
    while (atomic_load(&c.started) < N && test_now_s() < deadline) sched_yield();
    cr_assert_eq(atomic_load(&c.started), N);
    ex_counting_scope_request_stop(&scope);
    ex_result r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(atomic_load(&c.stops), N, "a stop request on the scope stops launched tasks");
    EXPECT_PROBE();
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    task_test_end(pool, NULL);
}

Test(exec_task, launch_errors_release_the_task) {
    ex_pool *pool = test_pool_new(1);
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    atomic_int ran = 0;
    /* invalid task, invalid scheduler */
    cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool), NULL, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                ex_invalid_sender(EX_EUSER, "bad"), NULL).code, EX_EINVAL);
    ex_scheduler none = { NULL, NULL };
    cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), none, ex_task_create(body_mark, &ran, NULL), NULL).code,
                 EX_EINVAL);
    /* closed scope */
    ex_counting_scope_close(&scope);
    cr_assert_eq(ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                ex_task_create(body_mark, &ran, NULL), NULL).code, EX_ESHUTDOWN);
    ex_result r = run(ex_counting_scope_join(&scope));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(atomic_load(&ran), 0);
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    task_test_end(pool, NULL);
}

/* An error with no on_error handler is the scope's: its join completes
 * with it (it used to be printed on stderr while the join said value). */
Test(exec_task, launch_without_an_error_handler_fails_the_scopes_join) {
    ex_pool *pool = test_pool_new(1);
    launch_ctx c = { .pool = pool };
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    FILE *cap = tmpfile();
    cr_assert_not_null(cap);
    fflush(stderr);
    int saved = dup(2);
    cr_assert_geq(saved, 0);
    dup2(fileno(cap), 2);
    launch_arg a = { &c, 1, 0, 0 };
    ex_task_handlers h = { lh_value, NULL, lh_stopped, &a };  /* no on_error */
    ex_error e = ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                ex_task_create(body_launched, &a, NULL), &h);
    launch_arg b = { &c, 0, 9, 0 };
    ex_error e2 = ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool),
                                 ex_task_create(body_launched, &b, NULL), NULL);  /* h NULL: dropped */
    ex_result r = run(ex_counting_scope_join(&scope));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    cr_assert_eq(e.code, 0);
    cr_assert_eq(e2.code, 0);
    expect_disp(&r, EX_DISP_ERROR);
    cr_assert_eq(r.error.code, EX_EUSER + 3);
    cr_assert_str_eq(r.error.msg, "launched task failed");
    char buf[1024] = { 0 };
    rewind(cap);
    size_t got = fread(buf, 1, sizeof buf - 1, cap);
    fclose(cap);
    cr_assert_eq(got, 0, "the library printed: %s", buf);
    cr_assert_eq(atomic_load(&c.values), 0, "h NULL: results dropped");
    EXPECT_PROBE();
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
    task_test_end(pool, NULL);
}

Test(exec_task, launch_out_of_memory_sweep) {
    ex_pool *pool = test_pool_new(2);
    launch_ctx c = { .pool = pool };
    int ok = 0, enomem = 0;
    long k, base = test_stats.in_use;  /* the pool's */
    for (k = 1; k < 1000; k++) {
        ex_counting_scope scope;
        cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
        atomic_store(&c.values, 0);
        atomic_store(&c.started, 0);
        launch_arg a = { &c, 0, 5, 0 };
        ex_task_handlers h = { lh_value, lh_error, lh_stopped, &a };
        ex_sender *task = ex_task_create(body_launched, &a, NULL);
        test_alloc_reset();
        test_alloc_fail_at(k);
        ex_error e = ex_task_launch(ex_counting_scope_token(&scope), ex_pool_scheduler(pool), task, &h);
        long failed = test_stats.failed;
        test_alloc_fail_at(0);
        ex_result r = run(ex_counting_scope_join(&scope));
        cr_assert(e.code == 0 || e.code == EX_ENOMEM, "k=%ld: launch error %d (%s)", k, e.code, e.msg ? e.msg : "");
        expect_disp(&r, EX_DISP_VALUE);
        if (e.code == 0) {
            ok++;
            cr_assert_eq(atomic_load(&c.started), 1, "k=%ld", k);
            cr_assert_eq(atomic_load(&c.values) + atomic_load(&c.errors), 1, "k=%ld: handlers", k);
        } else {
            enomem++;
            cr_assert_eq(atomic_load(&c.started), 0, "k=%ld: a refused task ran", k);
        }
        atomic_store(&c.errors, 0);
        cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);
        cr_assert_eq(test_stats.in_use, base, "k=%ld: %ld block(s) leaked", k, test_stats.in_use - base);
        if (!failed) break;
    }
    cr_assert_lt(k, 1000);
    cr_assert_geq(enomem, 1);
    cr_assert_geq(ok, 1);
    task_test_end(pool, NULL);
}
