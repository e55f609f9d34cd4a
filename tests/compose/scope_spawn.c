/* SPDX-License-Identifier: MIT */
/* Counting scopes (cexec/scope.h), spawning: ex_spawn / ex_spawn_env -
 * the results join reports (errors of spawned work are kept and reported by
 * join), the environment's allocator, allocation failures, request_stop
 * and many threads spawning into one scope.
 *
 * Nothing here asserts on timing: every wait for asynchronous work is
 * bounded so a lost completion fails with a message instead of hanging. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

/* let_value(read_env(get_stop_token), token -> starts_on(pool, then(just(token), poll))) */
static ex_sender *let_stop_fn(void *ctx, const ex_value *in, size_t n) {
    stopper *s = ctx;
    if (n != 1 || in[0].type != EX_T_TOKEN) return NULL;
    return ex_starts_on(ex_pool_scheduler(s->pool),
                        ex_then(ex_just(in[0]), poll_stop_fn, s, EX_SIG(EX_T_TOKEN), EX_SIG(EX_T_BOOL)));
}

static ex_sender *let_stop_waiter(stopper *s) {
    return ex_let_value(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), let_stop_fn, s, EX_SIG(EX_T_TOKEN));
}

/* then(read_env(key), record the value) - runs inline. */
typedef struct seen_value {
    atomic_int calls;
    ex_value v;
} seen_value;

static ex_error record_value_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    seen_value *s = ctx;
    (void)out;
    if (n == 1) s->v = in[0];
    atomic_fetch_add(&s->calls, 1);
    return ex_ok();
}

static ex_sender *read_into(const ex_key *key, ex_type type, seen_value *s) {
    return ex_then(ex_read_env(key, type), record_value_fn, s, EX_SIG_VARIADIC, EX_SIG0);
}

/* Fails with the error in ctx on a pool worker. */
static ex_error fail_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    return *(const ex_error *)ctx;
}

static const ex_key user_key = { "test.scope_key", true };
/* ================================================================ results */

SCOPE_TEST(failing_spawned_work_makes_join_complete_with_the_first_error, 0) {
    static int payload1, payload2;
    atomic_int counter = 0;
    cr_assert_eq(ex_spawn(inline_inc(&counter), sc_token(s)).code, 0);
    cr_assert_eq(ex_spawn(ex_just_error(ex_err_data(EX_EUSER + 1, "first", &payload1)), sc_token(s)).code, 0);
    cr_assert_eq(ex_spawn(ex_just_error(ex_err_data(EX_EUSER + 2, "second", &payload2)), sc_token(s)).code, 0);
    cr_assert_eq(ex_spawn(inline_inc(&counter), sc_token(s)).code, 0);
    ex_result r = ex_sync_wait(sc_join(s));
    expect_error(&r, EX_EUSER + 1);
    cr_assert_str_eq(r.error.msg, "first");
    cr_assert_eq(r.error.data, &payload1);
    cr_assert_eq(atomic_load(&counter), 2);
}

SCOPE_TEST(failing_work_on_the_pool_is_reported_by_join, 2) {
    static const ex_error boom = { EX_EUSER + 3, "boom on a worker", NULL, NULL };
    atomic_int counter = 0;
    for (int i = 0; i < 200; i++) {
        ex_sender *w = i == 100 ? ex_then(ex_schedule(ex_pool_scheduler(p)), fail_fn, (void *)&boom, EX_SIG0, EX_SIG0)
                                : pool_inc(p, &counter);
        cr_assert_eq(ex_spawn(w, sc_token(s)).code, 0);
    }
    ex_result r = ex_sync_wait(sc_join(s));
    expect_error(&r, EX_EUSER + 3);
    cr_assert_str_eq(r.error.msg, "boom on a worker");
    cr_assert_eq(atomic_load(&counter), 199, "join completed before all work ran");
}

SCOPE_TEST(spawned_values_are_discarded, 2) {
    work_gate g;
    work_gate_init(&g, p, 7);
    work_gate_open(&g);
    ex_value inner[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 0, 2, inner };
    cr_assert_eq(ex_spawn(ex_just(ex_int(5), ex_str("five")), sc_token(s)).code, 0);
    cr_assert_eq(ex_spawn(ex_just(ex_tuple_value(&t)), sc_token(s)).code, 0);
    cr_assert_eq(ex_spawn(work_gated(&g, ex_pool_scheduler(p)), sc_token(s)).code, 0);
    ex_result r = ex_sync_wait(sc_join(s));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.n, 0, "join completes with set_value() whatever the spawned work produced");
    cr_assert_eq(atomic_load(&g.finished), 1);
    ex_result_destroy(&r);
}

SCOPE_TEST(stopped_spawned_work_is_not_an_error, 0) {
    cr_assert_eq(ex_spawn(ex_just_stopped(), sc_token(s)).code, 0);
    sc_join_ok(s);
}

/* ============================================================ allocation */

SCOPE_TEST(spawn_env_allocates_from_the_environments_allocator, 2) {
    cnt_alloc ca;
    cnt_alloc_init(&ca);
    ex_env_pair env;
    ex_env_pair_init(&env, &ex_key_get_allocator, ex_alloc_value(&ca.base), ex_env_empty());
    env.key2 = &user_key;
    env.value2 = ex_int(99);
    work_gate g;
    work_gate_init(&g, p, 7);
    ex_sender *w = work_gated(&g, ex_pool_scheduler(p));
    long test_in_use = test_stats.in_use;
    ex_error e = ex_spawn_env(w, sc_token(s), ex_env_of_pair(&env));
    cr_assert_eq(e.code, 0, "ex_spawn_env: %s", e.msg ? e.msg : "");
    work_gate_wait_entered(&g, 1);
    cr_assert_eq(atomic_load(&ca.allocs), 1, "%s: the operation was not allocated from the env allocator",
                 scope_kind_name(s));
    cr_assert_eq(atomic_load(&ca.in_use), 1);
    cr_assert_leq(test_stats.in_use, test_in_use, "the default allocator was used for the operation");

    /* The spawned work sees that environment. */
    seen_value sa, su;
    memset(&sa, 0, sizeof sa);
    memset(&su, 0, sizeof su);
    cr_assert_eq(ex_spawn_env(read_into(&ex_key_get_allocator, EX_T_ALLOC, &sa), sc_token(s), ex_env_of_pair(&env)).code, 0);
    cr_assert_eq(ex_spawn_env(read_into(&user_key, EX_T_ANY, &su), sc_token(s), ex_env_of_pair(&env)).code, 0);
    cr_assert_eq(atomic_load(&sa.calls), 1);
    cr_assert_eq(sa.v.as.alloc, &ca.base);
    cr_assert_eq(atomic_load(&su.calls), 1);
    cr_assert_eq(su.v.as.i, 99);

    work_gate_open(&g);
    sc_join_ok(s);
    cr_assert_eq(atomic_load(&ca.allocs), 3);
    cr_assert_eq(atomic_load(&ca.in_use), 0, "%s: the operation was not returned to its allocator",
                 scope_kind_name(s));
}

SCOPE_TEST(spawn_allocation_failure_is_enomem_and_starts_nothing, 0) {
    atomic_int counter = 0;
    ex_sender *w = inline_inc(&counter);
    test_alloc_fail_at(1);
    ex_error e = ex_spawn(w, sc_token(s));
    test_alloc_fail_at(0);
    cr_assert_eq(e.code, EX_ENOMEM, "%s: %d", scope_kind_name(s), e.code);
    cr_assert_not_null(e.msg);
    cr_assert_eq(atomic_load(&counter), 0);

    cnt_alloc ca;
    cnt_alloc_init(&ca);
    cnt_alloc_fail_nth(&ca, 1);
    ex_env_pair env;
    ex_env_pair_init(&env, &ex_key_get_allocator, ex_alloc_value(&ca.base), ex_env_empty());
    e = ex_spawn_env(inline_inc(&counter), sc_token(s), ex_env_of_pair(&env));
    cr_assert_eq(e.code, EX_ENOMEM);
    cr_assert_eq(atomic_load(&counter), 0);
    cr_assert_eq(atomic_load(&ca.in_use), 0);

    expect_nothing_associated(s, "a failed spawn");
}

SCOPE_TEST(spawn_oom_sweep, 2) {
    atomic_int counter = 0;
    int ok = 0;
    bool clean = false;
    for (long n = 1; n <= 100 && !clean; n++) {
        long failed_before = test_stats.failed;
        test_alloc_fail_at(n);
        ex_error e = ex_spawn(ex_then(pool_inc(p, &counter), inc_fn, &counter, EX_SIG0, EX_SIG0), sc_token(s));
        test_alloc_fail_at(0);
        bool failed = test_stats.failed != failed_before;
        if (e.code) {
            cr_assert_eq(e.code, EX_ENOMEM, "fail at %ld: %d (%s)", n, e.code, e.msg ? e.msg : "");
            cr_assert(failed);
        } else {
            ok++;
            clean = !failed;
        }
    }
    cr_assert(clean, "never reached a spawn without an injected failure");
    sc_join_ok(s);
    cr_assert_eq(atomic_load(&counter), 2 * ok, "%s: %d spawns succeeded, counter %d", scope_kind_name(s), ok,
                 atomic_load(&counter));
}

/* ================================================================== stop */

COUNTING_SCOPE_TEST(counting_scope_request_stop_reaches_spawned_work, 2) {
    stopper st;
    stopper_init(&st, p);
    cr_assert_eq(ex_spawn(stop_waiter(&st), sc_token(s)).code, 0);
    cr_assert_eq(ex_spawn(let_stop_waiter(&st), sc_token(s)).code, 0);
    EXPECT_INT_REACHES(&st.started, 2);
    cr_assert_eq(atomic_load(&st.finished), 0);
    ex_counting_scope_request_stop(&s->full);
    sc_join_ok(s);
    cr_assert_eq(atomic_load(&st.no_token), 0, "spawned work of a counting scope has a stop token");
    cr_assert_eq(atomic_load(&st.observed), 2, "the scope's stop request was not seen by its work");

}

COUNTING_SCOPE_TEST(counting_scope_work_spawned_after_request_stop_sees_it, 0) {
    ex_counting_scope_request_stop(&s->full);
    seen_value sv;
    memset(&sv, 0, sizeof sv);
    cr_assert_eq(ex_spawn(read_into(&ex_key_get_stop_token, EX_T_TOKEN, &sv), sc_token(s)).code, 0);
    cr_assert_eq(atomic_load(&sv.calls), 1);
    cr_assert(ex_stop_token_stop_possible(sv.v.as.token));
    cr_assert(ex_stop_token_stop_requested(sv.v.as.token), "work spawned after request_stop starts stopped");
    sc_join_ok(s);
}

SIMPLE_SCOPE_TEST(simple_scope_gives_spawned_work_no_stop_token, 0) {
    seen_value sv;
    memset(&sv, 0, sizeof sv);
    cr_assert_eq(ex_spawn(read_into(&ex_key_get_stop_token, EX_T_TOKEN, &sv), sc_token(s)).code, 0);
    cr_assert_eq(atomic_load(&sv.calls), 1);
    cr_assert_not(ex_stop_token_stop_possible(sv.v.as.token));
    sc_join_ok(s);
}

COUNTING_SCOPE_TEST(spawn_env_stop_token_is_linked_to_the_counting_scopes, 2) {
    /* The spawned work of a counting scope sees a token linked to the
     * scope's, so the scope's request_stop reaches it even if env carried
     * another token (scope_spawn_env.c: env's token reaches it too). */
    ex_stop_source other;
    ex_stop_source_init(&other);
    ex_env_pair env;
    ex_env_pair_init(&env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&other)), ex_env_empty());
    stopper st;
    stopper_init(&st, p);
    cr_assert_eq(ex_spawn_env(stop_waiter(&st), sc_token(s), ex_env_of_pair(&env)).code, 0);
    EXPECT_INT_REACHES(&st.started, 1);
    ex_counting_scope_request_stop(&s->full);
    sc_join_ok(s);
    cr_assert_eq(atomic_load(&st.observed), 1);
}

/* ============================================================ concurrency */

typedef struct spawner {
    pthread_t tid;
    ex_pool *pool;
    ex_scope_token token;
    atomic_int *go;
    atomic_int *hits;     /* this thread's 500 slots */
    int spawned, refused;
} spawner;

enum { SPAWN_THREADS = 4, SPAWN_EACH = 500 };

static void *spawner_main(void *arg) {
    spawner *sp = arg;
    while (!atomic_load(sp->go)) sched_yield();
    for (int i = 0; i < SPAWN_EACH; i++) {
        ex_error e = ex_spawn(pool_inc(sp->pool, &sp->hits[i]), sp->token);
        if (e.code) sp->refused++;
        else sp->spawned++;
    }
    return NULL;
}

SCOPE_TEST(many_threads_spawning_into_one_scope, 2) {
    static atomic_int hits[SPAWN_THREADS * SPAWN_EACH];
    for (int i = 0; i < SPAWN_THREADS * SPAWN_EACH; i++) atomic_store(&hits[i], 0);
    atomic_int go = 0;
    spawner sp[SPAWN_THREADS];
    for (int t = 0; t < SPAWN_THREADS; t++) {
        memset(&sp[t], 0, sizeof sp[t]);
        sp[t].pool = p;
        sp[t].token = sc_token(s);
        sp[t].go = &go;
        sp[t].hits = &hits[t * SPAWN_EACH];
        cr_assert_eq(pthread_create(&sp[t].tid, NULL, spawner_main, &sp[t]), 0);
    }
    atomic_store(&go, 1);
    for (int t = 0; t < SPAWN_THREADS; t++) pthread_join(sp[t].tid, NULL);
    for (int t = 0; t < SPAWN_THREADS; t++) {
        cr_assert_eq(sp[t].refused, 0, "thread %d: %d spawns refused", t, sp[t].refused);
        cr_assert_eq(sp[t].spawned, SPAWN_EACH);
    }
    sc_join_ok(s);
    for (int i = 0; i < SPAWN_THREADS * SPAWN_EACH; i++)
        cr_assert_eq(atomic_load(&hits[i]), 1, "%s: op %d ran %d times", scope_kind_name(s), i, atomic_load(&hits[i]));
}

