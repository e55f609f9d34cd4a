/* SPDX-License-Identifier: MIT */
/* [task] environment: what a task's environment answers and forwards
 * (exec_task suite, see task_results.c). */
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

static const ex_key key_fwd = { "test.task.forwarding", true };
static const ex_key key_nofwd = { "test.task.non_forwarding", false };

/* ======================================================== environment */

typedef struct env_arg {
    ex_pool *pool;
    const ex_allocator *want_alloc;
    ex_scheduler decoy;
    bool expect_user;        /* key_fwd answers 42 (opt.env) */
    int64_t expect_fwd;      /* key_fwd value expected (0: not answered) */
    bool expect_nofwd;       /* whether key_nofwd is answered */
} env_arg;

static ex_task_result body_env(ex_task *t, void *arg) {
    env_arg *a = arg;
    ex_env e = ex_task_env(t);
    ex_scheduler s;
    TCHECK(ex_get_scheduler(e, &s));
    TCHECK(ex_scheduler_equal(s, ex_task_scheduler(t)));
    TCHECK(!ex_scheduler_equal(s, a->decoy));
    TCHECK(ex_get_allocator(e) == a->want_alloc);
    ex_stop_token tok = ex_get_stop_token(e);
    TCHECK(ex_stop_token_equal(tok, ex_task_stop_token(t)));
    ex_value v;
    bool has = ex_env_query(e, &key_fwd, &v);
    if (a->expect_fwd) TCHECK(has && v.type == EX_T_INT && v.as.i == a->expect_fwd);
    else TCHECK(!has);
    TCHECK(ex_env_query(e, &key_nofwd, &v) == a->expect_nofwd);
    /* Awaited children see the same environment. */
    ex_await_result r = ex_await(t, ex_read_env(&ex_key_get_scheduler, EX_T_SCHED));
    TCHECK(r.status == EX_AWAIT_VALUE && ex_scheduler_equal(r.v[0].as.sched, ex_task_scheduler(t)));
    r = ex_await(t, ex_read_env(&ex_key_get_allocator, EX_T_ALLOC));
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.alloc == a->want_alloc);
    r = ex_await(t, ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN));
    TCHECK(r.status == EX_AWAIT_VALUE && ex_stop_token_equal(r.v[0].as.token, ex_task_stop_token(t)));
    if (a->expect_fwd) {
        r = ex_await(t, ex_read_env(&key_fwd, EX_T_INT));
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == a->expect_fwd);
    }
    return ex_task_void();
}

Test(exec_task, env_answers_scheduler_allocator_stop_token) {
    ex_pool *pool = test_pool_new(2);
    env_arg a = { .pool = pool, .decoy = ex_inline_scheduler() };
    /* defaults: the receiver environment's allocator (here the process default) */
    a.want_alloc = ex_default_allocator();
    ex_result r = run(ex_task_create(body_env, &a, NULL));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    /* on a pool: the pool's (its per-worker arenas) */
    ex_env_pair ps;
    ex_env_pair_init(&ps, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(pool)), ex_env_empty());
    a.want_alloc = ex_get_allocator(ex_env_of_pair(&ps));
    cr_assert_str_eq(a.want_alloc->name, "jemalloc");
    r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_env, &a, NULL)));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    /* the receiver environment's allocator */
    cnt_alloc env_alloc;
    cnt_alloc_init(&env_alloc);
    a.want_alloc = &env_alloc.base;
    r = run(ex_write_env(ex_task_create(body_env, &a, NULL), &ex_key_get_allocator, ex_alloc_value(&env_alloc.base)));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    /* the allocator option wins over the environment's */
    cnt_alloc opt_alloc;
    cnt_alloc_init(&opt_alloc);
    ex_task_options o = { .allocator = &opt_alloc.base };
    a.want_alloc = &opt_alloc.base;
    r = run(ex_write_env(ex_task_create(body_env, &a, &o), &ex_key_get_allocator, ex_alloc_value(&env_alloc.base)));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    cr_assert_eq(atomic_load(&opt_alloc.in_use), 0);
    cr_assert_eq(atomic_load(&env_alloc.in_use), 0);
    task_test_end(pool, NULL);
}

Test(exec_task, env_forwards_the_user_environment) {
    ex_env_pair p1, p2;
    ex_env_pair_init(&p1, &key_fwd, ex_int(42), ex_env_empty());
    p1.key2 = &ex_key_get_scheduler;  /* the task's own answer wins */
    ex_pool *decoy_pool = test_pool_new(1);
    p1.value2 = ex_sched_value(ex_pool_scheduler(decoy_pool));
    ex_env_pair_init(&p2, &key_nofwd, ex_int(43), ex_env_of_pair(&p1));
    ex_task_options o = { .env = ex_env_of_pair(&p2) };
    env_arg a = { .decoy = ex_pool_scheduler(decoy_pool), .want_alloc = ex_default_allocator(), .expect_fwd = 42 };
    a.expect_nofwd = false;  /* only forwarding queries */
    ex_result r = run(ex_task_create(body_env, &a, &o));
    expect_disp(&r, EX_DISP_VALUE);
    task_test_end(decoy_pool, NULL);
}

Test(exec_task, env_forwards_the_receiver_environment_without_a_user_one) {
    env_arg a = {
        .decoy = ex_inline_scheduler(),
        .want_alloc = ex_default_allocator(),
        .expect_fwd = 5,
        .expect_nofwd = false,
    };
    ex_sender *s = ex_task_create(body_env, &a, NULL);
    s = ex_write_env(s, &key_fwd, ex_int(5));
    s = ex_write_env(s, &key_nofwd, ex_int(6));
    ex_result r = run(s);
    expect_disp(&r, EX_DISP_VALUE);
    task_test_end(NULL, NULL);
}

Test(exec_task, task_scheduler_of_an_inline_task_is_the_inline_scheduler) {
    ex_run_loop decoy;
    test_loop_init(&decoy);
    env_arg a;
    memset(&a, 0, sizeof a);
    a.decoy = ex_run_loop_scheduler(&decoy);  /* never run: only compared */
    a.want_alloc = ex_default_allocator();
    ex_task_options o = { .affinity = EX_TASK_INLINE };
    ex_result r = run(ex_task_create(body_env, &a, &o));
    expect_disp(&r, EX_DISP_VALUE);
    EXPECT_PROBE();
    test_loop_destroy(&decoy);
    expect_no_leaks();
}
