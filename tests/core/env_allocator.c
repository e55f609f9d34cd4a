/* SPDX-License-Identifier: MIT */
/* [exec.queries]: the allocator a running operation uses (suite exec_env, declared in env.c). */
#include "core/env_fixtures.h"

/* ------------------------------------------------------------- allocator */

static ex_sender *let_plus1(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(ex_int(in[0].as.i + 1));
}

Test(exec_env, write_env_allocator_is_used_by_let_value) {
    cnt_alloc ca;
    cnt_alloc_init(&ca);
    ex_sender *s = ex_write_env(ex_let_value(ex_let_value(ex_just(ex_int(1)), let_plus1, NULL, EX_SIG(EX_T_INT)), let_plus1,
                                             NULL, EX_SIG(EX_T_INT)),
                                &ex_key_get_allocator, ex_alloc_value(&ca.base));
    expect_sync_int(s, 3);
    cr_assert_geq(atomic_load(&ca.allocs), 2, "each let_value allocates its function's operation from the env's allocator (got %ld)",
                  atomic_load(&ca.allocs));
    cr_assert_eq(atomic_load(&ca.in_use), 0, "and frees it");
    cr_assert_eq(atomic_load(&ca.allocs), atomic_load(&ca.frees));
    expect_no_leaks();
}

Test(exec_env, let_value_without_allocator_uses_the_default) {
    ex_sender *s = ex_let_value(ex_just(ex_int(1)), let_plus1, NULL, EX_SIG(EX_T_INT));
    long before = test_alloc_count();
    expect_sync_int(s, 2);
    /* the function's just and its operation both come from the default */
    cr_assert_geq(test_alloc_count() - before, 2);
    expect_no_leaks();
}

Test(exec_env, read_env_sees_written_allocator_through_adaptors) {
    cnt_alloc ca;
    cnt_alloc_init(&ca);
    ex_result r = ex_sync_wait(ex_write_env(ex_then(ex_read_env(&ex_key_get_allocator, EX_T_ALLOC), identity1, NULL,
                                                    EX_SIG(EX_T_ALLOC), EX_SIG(EX_T_ALLOC)),
                                            &ex_key_get_allocator, ex_alloc_value(&ca.base)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.alloc, &ca.base);
    expect_no_leaks();
}

Test(exec_env, connect_alloc_uses_receiver_env_allocator) {
    cnt_alloc ca;
    cnt_alloc_init(&ca);
    rec rc;
    rec_init(&rc);
    ex_env_pair_init(&rc.pair, &ex_key_get_allocator, ex_alloc_value(&ca.base), ex_env_empty());
    rc.env = ex_env_of_pair(&rc.pair);
    ex_sender *s = ex_just(ex_int(1));
    long before = test_alloc_count();
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(atomic_load(&ca.allocs), 1);
    cr_assert_eq(test_alloc_count(), before, "the operation does not come from the default allocator");
    cr_assert_eq(rc.values, 1);
    run_destroy(op);
    cr_assert_eq(atomic_load(&ca.in_use), 0);
    ex_sender_release(s);
    expect_no_leaks();
}

/* An environment of pairs alone that names no allocator (sync_wait's, and
 * what adaptors add under it): the scheduler it names answers, whether the
 * first pair names it or one above; without one, the default. */
Test(exec_env, an_environment_without_an_allocator_asks_its_scheduler) {
    cnt_alloc ca;
    cnt_alloc_init(&ca);
    ex_pool_config cfg = { 0 };
    cfg.threads = 1;
    cfg.allocator = &ca.base;
    ex_pool *pool = NULL;
    cr_assert_eq(ex_pool_create(&cfg, &pool).code, EX_OK);

    ex_env_pair root, above, loop_pair, bare;
    ex_env_pair_init(&root, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(pool)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&root)), &ca.base, "the first pair names the pool");
    ex_env_pair_init(&above, &ex_key_get_stop_token, ex_token_value(ex_never_stop_token()), ex_env_of_pair(&root));
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&above)), &ca.base, "a pair above names the pool");

    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, EX_OK);
    ex_env_pair_init(&loop_pair, &ex_key_get_scheduler, ex_sched_value(ex_run_loop_scheduler(&loop)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&loop_pair)), ex_default_allocator(), "a run loop has none");
    ex_env_pair_init(&bare, &ex_key_get_stop_token, ex_token_value(ex_never_stop_token()), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&bare)), ex_default_allocator(), "no scheduler: the default");

    ex_run_loop_finish(&loop);
    ex_run_loop_destroy(&loop);
    cr_assert_eq(ex_pool_destroy(pool).code, EX_OK);
    expect_no_leaks();
}
