/* SPDX-License-Identifier: MIT */
/* Counting scopes (cexec/scope.h), spawn and spawn_future with an explicit
 * environment ([exec.spawn], [exec.spawn.future]): the environment's
 * allocator holds the spawned operation (one block, also when the stop
 * tokens are linked), a sender's own allocator attribute is used when the
 * environment has none, the environment's stop token stops the work while
 * the scope's request_stop still does, and failures undo everything.
 *
 * The work here runs on the test's thread (until_stopped completes inside
 * the stop request, inline work inside the spawn), and the joins use the
 * inline scheduler, so every check is a plain one. */
#include <string.h>

#include "compose/compose_fixtures.h"

/* An environment of a test's: get_allocator and/or get_stop_token. */
typedef struct test_env {
    ex_env_pair pair;
    ex_stop_source src;
} test_env;

static ex_env env_with(test_env *te, const ex_allocator *a, bool token) {
    ex_stop_source_init(&te->src);
    ex_value tv = ex_token_value(ex_stop_source_token(&te->src));
    if (a && token) ex_env_pair_init2(&te->pair, &ex_key_get_allocator, ex_alloc_value(a), &ex_key_get_stop_token, tv, ex_env_empty());
    else if (a) ex_env_pair_init(&te->pair, &ex_key_get_allocator, ex_alloc_value(a), ex_env_empty());
    else ex_env_pair_init(&te->pair, &ex_key_get_stop_token, tv, ex_env_empty());
    return ex_env_of_pair(&te->pair);
}

/* A sender whose attributes answer get_allocator (C++: the sender's own
 * allocator, get_allocator(get_env(sndr))). */
static ex_env_pair attr_pair;
static ex_sender_vtable attr_vt;

static ex_env attrs_with_allocator(const ex_sender *s) {
    (void)s;
    return ex_env_of_pair(&attr_pair);
}

static ex_sender *with_allocator_attr(ex_sender *s, const ex_allocator *a) {
    attr_vt = test_sender_vt;
    attr_vt.attrs = attrs_with_allocator;
    ex_env_pair_init(&attr_pair, &ex_key_get_allocator, ex_alloc_value(a), ex_env_empty());
    s->vt = &attr_vt;
    return s;
}

/* ================================================================ spawn */

COUNTING_SCOPE_TEST(spawn_env_linking_takes_one_block_from_the_env_allocator, 0) {
    cnt_alloc ca;
    cnt_alloc_init(&ca);
    test_env te;
    ex_env env = env_with(&te, &ca.base, true);
    ex_sender *w = until_stopped();
    long allocs = test_stats.allocs;
    cr_assert_eq(ex_spawn_env(w, sc_token(s), env).code, 0);
    cr_assert_eq(test_stats.allocs, allocs, "the default allocator was used by the spawn");
    cr_assert_eq(atomic_load(&ca.allocs), 1, "the operation, its state and its linked stop source: one block");
    cr_assert_eq(atomic_load(&ca.in_use), 1);
    ex_stop_source_request_stop(&te.src);
    cr_assert_eq(atomic_load(&ca.in_use), 0, "the block was not freed when the work completed");
    sc_join_ok(s);
}

SCOPE_TEST(spawn_env_stop_token_stops_the_spawned_work, 0) {
    test_env te;
    ex_env env = env_with(&te, NULL, true);
    rec jr;
    rec_init(&jr);
    cr_assert_eq(ex_spawn_env(until_stopped(), sc_token(s), env).code, 0);
    join_run j = join_start_rec(s, &jr);
    cr_assert_eq(rec_total(&jr), 0);
    /* The work completes inside this request (until_stopped's callback),
     * on this thread: the spawn's block must outlive the request. */
    ex_stop_source_request_stop(&te.src);
    cr_assert_eq(jr.values, 1, "%s: the environment's stop token did not stop the spawned work", scope_kind_name(s));
    join_run_free(&j);
}

COUNTING_SCOPE_TEST(counting_scope_request_stop_stops_work_spawned_with_a_token, 0) {
    test_env te;
    ex_env env = env_with(&te, NULL, true);
    rec jr;
    rec_init(&jr);
    cr_assert_eq(ex_spawn_env(until_stopped(), sc_token(s), env).code, 0);
    join_run j = join_start_rec(s, &jr);
    ex_counting_scope_request_stop(&s->full);
    cr_assert_eq(jr.values, 1, "the scope's request_stop did not reach work spawned with its own token");
    cr_assert_not(ex_stop_source_stop_requested(&te.src), "the scope's stop reached the caller's source");
    join_run_free(&j);
}

SCOPE_TEST(spawn_env_token_stopped_already_is_seen_by_the_work, 0) {
    test_env te;
    ex_env env = env_with(&te, NULL, true);
    ex_stop_source_request_stop(&te.src);
    seen_env seen;
    cr_assert_eq(ex_spawn_env(env_recorder(&seen), sc_token(s), env).code, 0);
    cr_assert_eq(seen.calls, 1);
    cr_assert(seen.stop_possible);
    cr_assert(seen.stop_requested, "%s: work spawned with a stopped token starts stopped", scope_kind_name(s));
    sc_join_ok(s);
}

COUNTING_SCOPE_TEST(spawn_env_failures_leave_no_link_on_the_callers_token, 0) {
    /* A connect failure (a join needs a scheduler in its environment) and
     * an allocation failure, both with tokens to link: nothing stays
     * registered on the caller's source (a request after would reach freed
     * memory), nothing stays associated. */
    test_env te;
    ex_env env = env_with(&te, NULL, true);
    any_scope other;
    sc_init(&other, false);
    ex_error e = ex_spawn_env(sc_join(&other), sc_token(s), env);
    cr_assert_eq(e.code, EX_EINVAL, "%d (%s)", e.code, e.msg ? e.msg : "");
    sc_destroy_ok(&other);

    cnt_alloc ca;
    cnt_alloc_init(&ca);
    cnt_alloc_fail_nth(&ca, 1);
    test_env te2;
    ex_env env2 = env_with(&te2, &ca.base, true);
    e = ex_spawn_env(until_stopped(), sc_token(s), env2);
    cr_assert_eq(e.code, EX_ENOMEM);
    cr_assert_eq(atomic_load(&ca.in_use), 0);

    ex_stop_source_request_stop(&te.src);
    ex_stop_source_request_stop(&te2.src);
    expect_nothing_associated(s, "failed spawns");
}

SCOPE_TEST(spawn_uses_the_senders_allocator_attribute_without_one_in_env, 0) {
    cnt_alloc ca, ca2;
    cnt_alloc_init(&ca);
    cnt_alloc_init(&ca2);
    seen_env seen;
    cr_assert_eq(ex_spawn(with_allocator_attr(env_recorder(&seen), &ca.base), sc_token(s)).code, 0);
    cr_assert_eq(atomic_load(&ca.allocs), 1, "%s: the sender's allocator did not hold the operation", scope_kind_name(s));
    cr_assert_eq(seen.alloc, &ca.base, "the work's environment does not answer the allocator used");
    cr_assert_eq(atomic_load(&ca.in_use), 0);

    /* The environment's allocator overrides the sender's. */
    test_env te;
    ex_env env = env_with(&te, &ca2.base, false);
    cr_assert_eq(ex_spawn_env(with_allocator_attr(env_recorder(&seen), &ca.base), sc_token(s), env).code, 0);
    cr_assert_eq(atomic_load(&ca.allocs), 1, "the sender's allocator was used although env had one");
    cr_assert_eq(atomic_load(&ca2.allocs), 1);
    cr_assert_eq(seen.alloc, &ca2.base);
    cr_assert_eq(atomic_load(&ca2.in_use), 0);
    sc_join_ok(s);
}

/* ========================================================= spawn_future */

SCOPE_TEST(spawn_future_env_allocates_from_the_env_allocator, 0) {
    cnt_alloc ca;
    cnt_alloc_init(&ca);
    test_env te;
    ex_env env = env_with(&te, &ca.base, false);
    ex_sender *f = ex_spawn_future_env(ex_just(ex_int(4)), sc_token(s), env);
    cr_assert_eq(ex_sender_status(f).code, 0);
    cr_assert_eq(atomic_load(&ca.allocs), 1, "%s: the future's state was not allocated from env's allocator",
                 scope_kind_name(s));
    cr_assert_eq(atomic_load(&ca.in_use), 1, "the state lives until the future is released");
    ex_result r = ex_sync_wait(f);
    expect_value_int(&r, 4);
    cr_assert_eq(atomic_load(&ca.in_use), 0);

    /* A tuple result is kept in a block of the same allocator. */
    ex_value inner[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 0, 2, inner };
    f = ex_spawn_future_env(ex_just(ex_tuple_value(&t)), sc_token(s), env);
    cr_assert_eq(atomic_load(&ca.allocs), 3, "the tuple was not kept with env's allocator");
    r = ex_sync_wait(f);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&ca.in_use), 0);
    sc_join_ok(s);
}

SCOPE_TEST(spawn_future_uses_the_senders_allocator_attribute, 0) {
    cnt_alloc ca;
    cnt_alloc_init(&ca);
    seen_env seen;
    ex_sender *f = ex_spawn_future(with_allocator_attr(env_recorder(&seen), &ca.base), sc_token(s));
    cr_assert_eq(ex_sender_status(f).code, 0);
    cr_assert_eq(atomic_load(&ca.allocs), 1);
    cr_assert_eq(seen.alloc, &ca.base);
    ex_sender_release(f);
    cr_assert_eq(atomic_load(&ca.in_use), 0);
    sc_join_ok(s);
}

SCOPE_TEST(spawn_future_env_stop_token_stops_the_work, 0) {
    test_env te;
    ex_env env = env_with(&te, NULL, true);
    ex_sender *f = ex_spawn_future_env(until_stopped(), sc_token(s), env);
    rec rc;
    rec_init(&rc);  /* no token of its own */
    ex_operation *op = run_start(f, &rc);
    cr_assert_eq(rec_total(&rc), 0);
    ex_stop_source_request_stop(&te.src);
    rec_expect_stopped(&rc);
    run_destroy_release(op, f);
    sc_join_ok(s);
}

COUNTING_SCOPE_TEST(counting_scope_request_stop_stops_a_future_spawned_with_a_token, 0) {
    test_env te;
    ex_env env = env_with(&te, NULL, true);
    ex_sender *f = ex_spawn_future_env(until_stopped(), sc_token(s), env);
    rec rc;
    rec_init(&rc);
    ex_operation *op = run_start(f, &rc);
    ex_counting_scope_request_stop(&s->full);
    rec_expect_stopped(&rc);
    cr_assert_not(ex_stop_source_stop_requested(&te.src));
    run_destroy_release(op, f);
    sc_join_ok(s);
}

SCOPE_TEST(spawn_future_env_token_stopped_already_is_seen_by_the_work, 0) {
    test_env te;
    ex_env env = env_with(&te, NULL, true);
    ex_stop_source_request_stop(&te.src);
    seen_env seen;
    ex_sender *f = ex_spawn_future_env(env_recorder(&seen), sc_token(s), env);
    cr_assert_eq(seen.calls, 1);
    cr_assert(seen.stop_requested);
    ex_sender_release(f);
    sc_join_ok(s);
}

SCOPE_TEST(spawn_future_env_allocation_failure_is_enomem, 0) {
    cnt_alloc ca;
    cnt_alloc_init(&ca);
    cnt_alloc_fail_nth(&ca, 1);
    test_env te;
    ex_env env = env_with(&te, &ca.base, true);
    atomic_int counter = 0;
    ex_sender *f = ex_spawn_future_env(inline_inc(&counter), sc_token(s), env);
    cr_assert_eq(ex_sender_status(f).code, EX_ENOMEM);
    ex_sender_release(f);
    cr_assert_eq(atomic_load(&counter), 0);
    cr_assert_eq(atomic_load(&ca.in_use), 0);
    ex_stop_source_request_stop(&te.src);  /* nothing registered on it */
    expect_nothing_associated(s, "a future that ran out of memory");
}
