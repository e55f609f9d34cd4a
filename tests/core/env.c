/* [exec.queries], [exec.fwd.env], write-env: environments, forwarding,
 * defaults, and the allocator a running operation uses. */
#include <pthread.h>
#include <stdlib.h>

#include "common/helpers.h"

TEST_SUITE(exec_env, 10);

static const ex_key fwd_key = { "test.env.forwarding", true };
static const ex_key local_key = { "test.env.non_forwarding", false };
static const ex_key other_key = { "test.env.other", true };

/* int -> int + 1 */
static ex_error plus1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

/* any -> the same datum */
static ex_error identity1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    int *calls = ctx;
    (void)n;
    if (calls) ++*calls;
    out[0] = in[0];
    return ex_ok();
}

/* ---------------------------------------------------- a second allocator */

typedef struct count_alloc {
    ex_allocator a;
    pthread_mutex_t mu;
    long allocs, frees, in_use;
} count_alloc;

static void *ca_allocate(void *ctx, size_t size, size_t align) {
    count_alloc *c = ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    pthread_mutex_lock(&c->mu);
    c->allocs++;
    c->in_use++;
    pthread_mutex_unlock(&c->mu);
    return p;
}

static void ca_deallocate(void *ctx, void *p, size_t size, size_t align) {
    count_alloc *c = ctx;
    (void)size, (void)align;
    free(p);
    pthread_mutex_lock(&c->mu);
    c->frees++;
    c->in_use--;
    pthread_mutex_unlock(&c->mu);
}

static void count_alloc_init(count_alloc *c) {
    c->a.allocate = ca_allocate;
    c->a.deallocate = ca_deallocate;
    c->a.ctx = c;
    c->a.name = "second";
    pthread_mutex_init(&c->mu, NULL);
    c->allocs = c->frees = c->in_use = 0;
}

static void count_alloc_destroy(count_alloc *c) { pthread_mutex_destroy(&c->mu); }

/* ----------------------------------------------------------- forwarding */

Test(exec_env, standard_keys_are_forwarding) {
    cr_assert(ex_key_get_scheduler.forwarding);
    cr_assert(ex_key_get_delegation_scheduler.forwarding);
    cr_assert(ex_key_get_stop_token.forwarding);
    cr_assert(ex_key_get_allocator.forwarding);
    cr_assert(ex_key_completion_scheduler_value.forwarding);
    cr_assert(ex_key_completion_scheduler_error.forwarding);
    cr_assert(ex_key_completion_scheduler_stopped.forwarding);
    expect_no_leaks();
}

Test(exec_env, fwd_env_answers_forwarding_keys_only) {
    ex_env_pair p;
    ex_env_pair_init(&p, &local_key, ex_int(1), ex_env_empty());
    p.key2 = &fwd_key;
    p.value2 = ex_int(2);
    ex_env e = ex_env_of_pair(&p);
    ex_value v;
    cr_assert(ex_env_query(e, &local_key, &v));
    cr_assert_eq(v.as.i, 1);
    cr_assert(ex_env_query(e, &fwd_key, &v));
    cr_assert_eq(v.as.i, 2);
    ex_env f = ex_env_forward(e);
    cr_assert_not(ex_env_query(f, &local_key, &v), "FWD-ENV must not answer a non-forwarding key");
    v = ex_int(0);
    cr_assert(ex_env_query(f, &fwd_key, &v));
    cr_assert_eq(v.as.i, 2);
    cr_assert_not(ex_env_query(e, &other_key, &v));
    cr_assert_not(ex_env_query(e, NULL, &v));
    cr_assert_not(ex_env_query(ex_env_empty(), &fwd_key, &v));
    expect_no_leaks();
}

Test(exec_env, fwd_env_filters_non_forwarding_keys_of_the_parent_chain) {
    ex_env_pair parent, child;
    ex_env_pair_init(&parent, &local_key, ex_int(1), ex_env_empty());
    /* A node added below a FWD-ENV sees only forwarding keys of what is above. */
    ex_env_pair_init(&child, &other_key, ex_int(3), ex_env_forward(ex_env_of_pair(&parent)));
    ex_value v;
    cr_assert(ex_env_query(ex_env_of_pair(&child), &other_key, &v));
    cr_assert_eq(v.as.i, 3);
    cr_assert_not(ex_env_query(ex_env_of_pair(&child), &local_key, &v));
    expect_no_leaks();
}

Test(exec_env, forwarding_user_key_passes_through_then) {
    ex_result r = ex_sync_wait(
        ex_write_env(ex_then(ex_read_env(&fwd_key, EX_T_INT), plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)), &fwd_key,
                     ex_int(41)));
    expect_value_int(&r, 42);
    expect_no_leaks();
}

Test(exec_env, standard_key_passes_through_adaptors) {
    /* get_scheduler from sync_wait reaches a read_env below then. */
    int calls = 0;
    ex_result r = ex_sync_wait(ex_then(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), identity1, &calls,
                                       EX_SIG(EX_T_SCHED), EX_SIG(EX_T_SCHED)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_str_eq(r.values[0].as.sched.vt->name, "run_loop");
    cr_assert_eq(calls, 1);
    expect_no_leaks();
}

Test(exec_env, non_forwarding_key_does_not_pass_through_then) {
    int calls = 0;
    ex_sender *s = ex_write_env(ex_then(ex_read_env(&local_key, EX_T_ANY), identity1, &calls, EX_SIG_ANY1, EX_SIG_ANY1),
                                &local_key, ex_int(5));
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    cr_assert_eq(calls, 0);
    expect_no_leaks();
}

Test(exec_env, non_forwarding_key_does_not_pass_through_into_variant) {
    ex_result r = ex_sync_wait(ex_write_env(ex_into_variant(ex_read_env(&local_key, EX_T_ANY)), &local_key, ex_int(5)));
    expect_error(&r, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_env, non_forwarding_key_directly_under_write_env_is_found) {
    ex_result r = ex_sync_wait(ex_write_env(ex_read_env(&local_key, EX_T_ANY), &local_key, ex_int(5)));
    expect_value_int(&r, 5);
    /* and under an adaptor when write_env is below it */
    int calls = 0;
    ex_result r2 = ex_sync_wait(ex_then(ex_write_env(ex_read_env(&local_key, EX_T_ANY), &local_key, ex_int(6)), identity1,
                                        &calls, EX_SIG_ANY1, EX_SIG_ANY1));
    expect_value_int(&r2, 6);
    cr_assert_eq(calls, 1);
    expect_no_leaks();
}

Test(exec_env, write_env_joins_the_unfiltered_receiver_env) {
    /* write-env's child env is JOIN-ENV(env, get_env(rcvr)): no FWD-ENV, so a
     * non-forwarding key of the receiver's own environment is visible. */
    rec rc;
    rec_init(&rc);
    ex_env_pair_init(&rc.pair, &local_key, ex_int(9), ex_env_empty());
    rc.env = ex_env_of_pair(&rc.pair);
    ex_sender *s = ex_write_env(ex_read_env(&local_key, EX_T_ANY), &other_key, ex_int(1));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.values, 1, "error: %s", rc.err.msg ? rc.err.msg : "");
    cr_assert_eq(rc.v[0].as.i, 9);
    run_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_env, nested_write_env_inner_wins) {
    ex_result r = ex_sync_wait(ex_write_env(ex_write_env(ex_read_env(&fwd_key, EX_T_ANY), &fwd_key, ex_int(1)), &fwd_key,
                                            ex_int(2)));
    expect_value_int(&r, 1);
    /* The outer one still answers the keys the inner one does not know. */
    ex_result r2 = ex_sync_wait(ex_write_env(ex_write_env(ex_read_env(&other_key, EX_T_ANY), &fwd_key, ex_int(1)),
                                             &other_key, ex_int(2)));
    expect_value_int(&r2, 2);
    expect_no_leaks();
}

Test(exec_env, write_env_overrides_sync_waits_scheduler) {
    ex_result r = ex_sync_wait(ex_write_env(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), &ex_key_get_scheduler,
                                            ex_sched_value(ex_inline_scheduler())));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert(ex_scheduler_equal(r.values[0].as.sched, ex_inline_scheduler()));
    /* the delegation scheduler is still sync_wait's */
    ex_result r2 = ex_sync_wait(ex_write_env(ex_read_env(&ex_key_get_delegation_scheduler, EX_T_SCHED),
                                             &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler())));
    cr_assert_eq(r2.disposition, EX_DISP_VALUE);
    cr_assert_str_eq(r2.values[0].as.sched.vt->name, "run_loop");
    expect_no_leaks();
}

Test(exec_env, write_env_copies_tuple_values) {
    ex_value inner[2] = { ex_int(1), ex_int(2) };
    ex_tuple t = { 0, 2, inner };
    ex_sender *s = ex_write_env(ex_read_env(&fwd_key, EX_T_TUPLE), &fwd_key, ex_tuple_value(&t));
    inner[0] = ex_int(100);
    ex_result r = ex_sync_wait(ex_sender_retain(s));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.tuple->n, 2);
    cr_assert_eq(r.values[0].as.tuple->v[0].as.i, 1, "write_env holds its own copy of the tuple");
    ex_result_destroy(&r);
    /* an operation can outlive the last sender reference */
    rec rc;
    rec_init(&rc);
    ex_operation *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(&rc), &op).code, 0);
    ex_sender_release(s);
    ex_start(op);
    cr_assert_eq(rc.values, 1);
    cr_assert_eq(rc.v[0].as.tuple->v[1].as.i, 2);
    ex_operation_free(op);
    expect_no_leaks();
}

Test(exec_env, write_env_rejects_null_key_and_child) {
    ex_sender *s = ex_write_env(ex_just(ex_int(1)), NULL, ex_int(1));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    cr_assert_not_null(ex_sender_status(s).msg);
    ex_sender_release(s);
    s = ex_write_env(NULL, &fwd_key, ex_int(1));
    cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
    ex_result r = ex_sync_wait(s);
    expect_error(&r, EX_EINVAL);
    expect_no_leaks();
}

Test(exec_env, write_env_keeps_the_childs_sigs) {
    ex_sender *s = ex_write_env(ex_just(ex_int(1), ex_double(2)), &fwd_key, ex_int(0));
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 2);
    cr_assert_eq(sg->values[0].types[1], EX_T_DOUBLE);
    cr_assert_eq(sg->flags, 0);
    ex_sender_release(s);
    expect_no_leaks();
}

/* --------------------------------------------------------------- defaults */

Test(exec_env, get_stop_token_defaults_to_never_stop) {
    ex_stop_token t = ex_get_stop_token(ex_env_empty());
    cr_assert_not(ex_stop_token_stop_possible(t));
    cr_assert_not(ex_stop_token_stop_requested(t));
    cr_assert(ex_stop_token_equal(t, ex_never_stop_token()));
    /* a value of another type under the key is not a stop token */
    ex_env_pair p;
    ex_env_pair_init(&p, &ex_key_get_stop_token, ex_int(3), ex_env_empty());
    cr_assert_not(ex_stop_token_stop_possible(ex_get_stop_token(ex_env_of_pair(&p))));
    expect_no_leaks();
}

Test(exec_env, get_stop_token_answers_the_env) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_env_pair p;
    ex_env_pair_init(&p, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&src)), ex_env_empty());
    ex_stop_token t = ex_get_stop_token(ex_env_of_pair(&p));
    cr_assert(ex_stop_token_stop_possible(t));
    cr_assert(ex_stop_token_equal(t, ex_stop_source_token(&src)));
    cr_assert_not(ex_stop_token_stop_requested(t));
    ex_stop_source_request_stop(&src);
    cr_assert(ex_stop_token_stop_requested(t));
    /* forwarded through FWD-ENV */
    cr_assert(ex_stop_token_equal(ex_get_stop_token(ex_env_forward(ex_env_of_pair(&p))), t));
    expect_no_leaks();
}

Test(exec_env, read_env_stop_token_from_receiver) {
    rec rc;
    rec_init(&rc);
    rec_with_stop(&rc);
    ex_sender *s = ex_then(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), identity1, NULL, EX_SIG(EX_T_TOKEN),
                           EX_SIG(EX_T_TOKEN));
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(rc.values, 1);
    cr_assert(ex_stop_token_equal(rc.v[0].as.token, ex_stop_source_token(&rc.stop)));
    run_destroy(op);
    ex_sender_release(s);
    expect_no_leaks();
}

Test(exec_env, get_allocator_defaults_to_default_allocator) {
    cr_assert_eq(ex_default_allocator(), &test_allocator);
    cr_assert_eq(ex_get_allocator(ex_env_empty()), &test_allocator);
    ex_env_pair p;
    ex_env_pair_init(&p, &ex_key_get_allocator, ex_alloc_value(NULL), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&p)), &test_allocator, "a NULL allocator means the default");
    ex_env_pair_init(&p, &ex_key_get_allocator, ex_int(1), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&p)), &test_allocator);
    ex_env_pair_init(&p, &ex_key_get_allocator, ex_alloc_value(ex_libc_allocator()), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&p)), ex_libc_allocator());
    expect_no_leaks();
}

Test(exec_env, get_scheduler_has_no_default) {
    ex_scheduler s = ex_inline_scheduler();
    cr_assert_not(ex_get_scheduler(ex_env_empty(), &s));
    cr_assert_not(ex_get_delegation_scheduler(ex_env_empty(), &s));
    cr_assert(ex_scheduler_equal(s, ex_inline_scheduler()), "out is untouched when not answered");
    ex_env_pair p;
    ex_env_pair_init(&p, &ex_key_get_scheduler, ex_int(1), ex_env_empty());
    cr_assert_not(ex_get_scheduler(ex_env_of_pair(&p), &s), "a non-scheduler value is not a scheduler");
    expect_no_leaks();
}

Test(exec_env, sync_wait_env_has_never_stop_token_and_delegation_scheduler) {
    ex_result r = ex_sync_wait(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_not(ex_stop_token_stop_possible(r.values[0].as.token));
    ex_result r2 = ex_sync_wait(ex_read_env(&ex_key_get_delegation_scheduler, EX_T_SCHED));
    cr_assert_eq(r2.disposition, EX_DISP_VALUE);
    cr_assert_str_eq(r2.values[0].as.sched.vt->name, "run_loop");
    expect_no_leaks();
}

/* ------------------------------------------------------------ env pairs */

Test(exec_env, env_pair_key2_and_parent_chain) {
    ex_env_pair parent, p;
    ex_env_pair_init(&parent, &other_key, ex_int(30), ex_env_empty());
    ex_env_pair_init(&p, &fwd_key, ex_int(10), ex_env_of_pair(&parent));
    cr_assert_null(p.key2, "init leaves the second key unset");
    ex_value v;
    cr_assert_not(ex_env_query(ex_env_of_pair(&p), &local_key, &v));
    p.key2 = &local_key;
    p.value2 = ex_int(20);
    ex_env e = ex_env_of_pair(&p);
    cr_assert(ex_env_query(e, &fwd_key, &v));
    cr_assert_eq(v.as.i, 10);
    cr_assert(ex_env_query(e, &local_key, &v));
    cr_assert_eq(v.as.i, 20);
    cr_assert(ex_env_query(e, &other_key, &v), "unknown keys go to the parent");
    cr_assert_eq(v.as.i, 30);
    cr_assert_not(ex_env_query(e, &ex_key_get_scheduler, &v));
    /* key2 obeys forwarding like the first key */
    cr_assert_not(ex_env_query(ex_env_forward(e), &local_key, &v));
    expect_no_leaks();
}

Test(exec_env, env_pair_shadows_parent) {
    ex_env_pair parent, p;
    ex_env_pair_init(&parent, &fwd_key, ex_int(1), ex_env_empty());
    parent.key2 = &other_key;
    parent.value2 = ex_int(2);
    ex_env_pair_init(&p, &other_key, ex_int(3), ex_env_of_pair(&parent));
    ex_value v;
    cr_assert(ex_env_query(ex_env_of_pair(&p), &other_key, &v));
    cr_assert_eq(v.as.i, 3);
    cr_assert(ex_env_query(ex_env_of_pair(&p), &fwd_key, &v));
    cr_assert_eq(v.as.i, 1);
    expect_no_leaks();
}

Test(exec_env, receiver_without_env_fn_has_empty_env) {
    ex_receiver_vtable vt = { 0 };
    ex_receiver r = { &vt, NULL };
    ex_env e = ex_receiver_env(r);
    cr_assert_null(e.node);
    ex_value v;
    cr_assert_not(ex_env_query(e, &ex_key_get_scheduler, &v));
    expect_no_leaks();
}

/* ------------------------------------------------------------- allocator */

static ex_sender *let_plus1(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(ex_int(in[0].as.i + 1));
}

Test(exec_env, write_env_allocator_is_used_by_let_value) {
    count_alloc ca;
    count_alloc_init(&ca);
    ex_sender *s = ex_write_env(ex_let_value(ex_let_value(ex_just(ex_int(1)), let_plus1, NULL, EX_SIG(EX_T_INT)), let_plus1,
                                             NULL, EX_SIG(EX_T_INT)),
                                &ex_key_get_allocator, ex_alloc_value(&ca.a));
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 3);
    cr_assert_geq(ca.allocs, 2, "each let_value allocates its function's operation from the env's allocator (got %ld)",
                  ca.allocs);
    cr_assert_eq(ca.in_use, 0, "and frees it");
    cr_assert_eq(ca.allocs, ca.frees);
    count_alloc_destroy(&ca);
    expect_no_leaks();
}

Test(exec_env, let_value_without_allocator_uses_the_default) {
    ex_sender *s = ex_let_value(ex_just(ex_int(1)), let_plus1, NULL, EX_SIG(EX_T_INT));
    long before = test_alloc_count();
    ex_result r = ex_sync_wait(s);
    expect_value_int(&r, 2);
    /* the function's just and its operation both come from the default */
    cr_assert_geq(test_alloc_count() - before, 2);
    expect_no_leaks();
}

Test(exec_env, read_env_sees_written_allocator_through_adaptors) {
    count_alloc ca;
    count_alloc_init(&ca);
    ex_result r = ex_sync_wait(ex_write_env(ex_then(ex_read_env(&ex_key_get_allocator, EX_T_ALLOC), identity1, NULL,
                                                    EX_SIG(EX_T_ALLOC), EX_SIG(EX_T_ALLOC)),
                                            &ex_key_get_allocator, ex_alloc_value(&ca.a)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.alloc, &ca.a);
    count_alloc_destroy(&ca);
    expect_no_leaks();
}

Test(exec_env, connect_alloc_uses_receiver_env_allocator) {
    count_alloc ca;
    count_alloc_init(&ca);
    rec rc;
    rec_init(&rc);
    ex_env_pair_init(&rc.pair, &ex_key_get_allocator, ex_alloc_value(&ca.a), ex_env_empty());
    rc.env = ex_env_of_pair(&rc.pair);
    ex_sender *s = ex_just(ex_int(1));
    long before = test_alloc_count();
    ex_operation *op = run_start(s, &rc);
    cr_assert_eq(ca.allocs, 1);
    cr_assert_eq(test_alloc_count(), before, "the operation does not come from the default allocator");
    cr_assert_eq(rc.values, 1);
    run_destroy(op);
    cr_assert_eq(ca.in_use, 0);
    ex_sender_release(s);
    count_alloc_destroy(&ca);
    expect_no_leaks();
}

/* ------------------------------------------------ completion schedulers */

Test(exec_env, schedule_has_value_and_stopped_completion_scheduler) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_scheduler sch = ex_run_loop_scheduler(&loop);
    ex_sender *s = ex_schedule(sch);
    ex_scheduler got = ex_inline_scheduler();
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sch));
    got = ex_inline_scheduler();
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_stopped, &got));
    cr_assert(ex_scheduler_equal(got, sch));
    cr_assert_not(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_error, &got));
    ex_value v;
    cr_assert(ex_env_query(ex_sender_attrs(s), &ex_key_completion_scheduler_value, &v));
    cr_assert_eq(v.type, EX_T_SCHED);
    cr_assert_not(ex_env_query(ex_sender_attrs(s), &ex_key_get_scheduler, &v), "attrs are not an environment");
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

static ex_error void_to_int(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(1);
    return ex_ok();
}

Test(exec_env, then_forwards_childs_completion_scheduler) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_scheduler sch = ex_run_loop_scheduler(&loop);
    ex_sender *s = ex_then(ex_schedule(sch), void_to_int, NULL, EX_SIG0, EX_SIG(EX_T_INT));
    ex_scheduler got = ex_inline_scheduler();
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sch));
    ex_sender *w = ex_write_env(s, &fwd_key, ex_int(0));
    got = ex_inline_scheduler();
    cr_assert(ex_get_completion_scheduler(w, &ex_key_completion_scheduler_value, &got), "write_env forwards too");
    cr_assert(ex_scheduler_equal(got, sch));
    ex_sender_release(w);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    expect_no_leaks();
}

Test(exec_env, just_has_no_completion_scheduler) {
    ex_sender *ss[] = { ex_just(ex_int(1)), ex_just_error(ex_err(EX_EUSER, "e")), ex_just_stopped(),
                        ex_read_env(&fwd_key, EX_T_ANY) };
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) {
        ex_scheduler got;
        cr_assert_not(ex_get_completion_scheduler(ss[i], &ex_key_completion_scheduler_value, &got), "sender %zu", i);
        cr_assert_not(ex_get_completion_scheduler(ss[i], &ex_key_completion_scheduler_error, &got), "sender %zu", i);
        cr_assert_not(ex_get_completion_scheduler(ss[i], &ex_key_completion_scheduler_stopped, &got), "sender %zu", i);
        cr_assert_null(ex_sender_attrs(ss[i]).node);
        ex_sender_release(ss[i]);
    }
    expect_no_leaks();
}

static ex_sender *let_read_sched(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_read_env(&ex_key_get_scheduler, EX_T_SCHED);
}

Test(exec_env, let_value_function_sender_env_has_childs_completion_scheduler) {
    ex_single_thread_context c;
    cr_assert_eq(ex_single_thread_context_init(&c).code, 0);
    ex_scheduler sch = ex_single_thread_context_scheduler(&c);
    ex_result r = ex_sync_wait(ex_let_value(ex_schedule(sch), let_read_sched, NULL, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s", r.error.msg ? r.error.msg : "");
    cr_assert(ex_scheduler_equal(r.values[0].as.sched, sch));
    cr_assert_eq(ex_single_thread_context_destroy(&c).code, 0);
    expect_no_leaks();
}

Test(exec_env, write_env_stop_token_reaches_scheduler_through_continues_on) {
    ex_single_thread_context c;
    cr_assert_eq(ex_single_thread_context_init(&c).code, 0);
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    ex_result r = ex_sync_wait(ex_write_env(ex_continues_on(ex_just(ex_int(1)), ex_single_thread_context_scheduler(&c)),
                                            &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&src))));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "disposition %d", r.disposition);
    cr_assert_eq(ex_single_thread_context_destroy(&c).code, 0);
    expect_no_leaks();
}

/* ------------------------------------------------- deep chains of pairs */

/* Chains as recursions build them: each level adds a node below a FWD-ENV
 * of the level above, {get_scheduler, get_allocator} (let_value on a
 * scheduler) or, in turn with it, {get_stop_token, get_allocator}
 * (when_all).  The root answers a user key and the delegation scheduler.
 * Walking the chain from each node would take about 2e10 steps (and a
 * recursion as deep as the chain): the suite's timeout fails it.  (One
 * assertion at the end: Criterion reports every assertion it runs.) */
#define DEEP_PAIRS 200000

static ex_env_pair *deep_chain(bool alternate) {
    ex_env_pair *p = malloc(DEEP_PAIRS * sizeof *p);
    cr_assert_not_null(p);
    ex_env_pair_init2(&p[0], &fwd_key, ex_int(7), &ex_key_get_delegation_scheduler, ex_int(8), ex_env_empty());
    for (size_t i = 1; i < DEEP_PAIRS; i++) {
        ex_env up = ex_env_forward(ex_env_of_pair(&p[i - 1]));
        if (i % 2 || !alternate)
            ex_env_pair_init2(&p[i], &ex_key_get_scheduler, ex_int((int64_t)i), &ex_key_get_allocator, ex_int(-1), up);
        else
            ex_env_pair_init2(&p[i], &ex_key_get_stop_token, ex_int((int64_t)i), &ex_key_get_allocator, ex_int(-2), up);
    }
    return p;
}

Test(exec_env, a_chain_of_the_same_pairs_answers_root_and_missing_keys_at_every_depth) {
    ex_env_pair *p = deep_chain(false);
    size_t wrong = 0, first_wrong = 0;
    for (size_t i = 1; i < DEEP_PAIRS; i++) {
        ex_env e = ex_env_of_pair(&p[i]);
        ex_value v;
        bool ok = ex_env_query(e, &fwd_key, &v) && v.as.i == 7;
        ok = ok && ex_env_query(e, &ex_key_get_delegation_scheduler, &v) && v.as.i == 8;
        ok = ok && !ex_env_query(e, &other_key, &v) && !ex_env_query(e, &local_key, &v);
        ok = ok && !ex_env_query(e, &ex_key_get_stop_token, &v);
        ok = ok && ex_env_query(e, &ex_key_get_scheduler, &v) && v.as.i == (int64_t)i;
        if (!ok && !wrong++) first_wrong = i;
    }
    cr_assert_eq(wrong, 0, "%zu nodes answered wrongly, the first at depth %zu", wrong, first_wrong);
    free(p);
    expect_no_leaks();
}

Test(exec_env, a_chain_of_alternating_pairs_answers_missing_and_near_keys_at_every_depth) {
    ex_env_pair *p = deep_chain(true);
    size_t wrong = 0, first_wrong = 0;
    for (size_t i = 1; i < DEEP_PAIRS; i++) {
        ex_env e = ex_env_of_pair(&p[i]);
        ex_value v, w;
        int64_t sched = (int64_t)(i % 2 ? i : i - 1), stop = (int64_t)(i % 2 ? i - 1 : i);
        bool ok = !ex_env_query(e, &other_key, &v) && !ex_env_query(e, &local_key, &v);
        ok = ok && ex_env_query(e, &ex_key_get_scheduler, &v) && v.as.i == sched;
        ok = ok && ex_env_query(e, &ex_key_get_allocator, &v) && v.as.i == (i % 2 ? -1 : -2);
        ok = ok && (i == 1 ? !ex_env_query(e, &ex_key_get_stop_token, &w)
                           : ex_env_query(e, &ex_key_get_stop_token, &w) && w.as.i == stop);
        if (!ok && !wrong++) first_wrong = i;
    }
    cr_assert_eq(wrong, 0, "%zu nodes answered wrongly, the first at depth %zu", wrong, first_wrong);
    /* A key only the root answers is found (one step per level here). */
    ex_value v;
    cr_assert(ex_env_query(ex_env_of_pair(&p[DEEP_PAIRS - 1]), &fwd_key, &v) && v.as.i == 7);
    free(p);
    expect_no_leaks();
}

Test(exec_env, a_shortcut_past_shadowed_pairs_keeps_the_fwd_env_filter) {
    /* root answers a non-forwarding key; a is below a FWD-ENV of it; b
     * shadows a entirely, so b's lookups skip a, but not a's filter. */
    ex_env_pair root, a, b, c;
    ex_env_pair_init2(&root, &local_key, ex_int(1), &other_key, ex_int(2), ex_env_empty());
    ex_env_pair_init(&a, &fwd_key, ex_int(3), ex_env_forward(ex_env_of_pair(&root)));
    ex_env_pair_init(&b, &fwd_key, ex_int(4), ex_env_of_pair(&a));
    ex_env_pair_init(&c, &fwd_key, ex_int(5), ex_env_of_pair(&root));
    ex_value v;
    cr_assert_not(ex_env_query(ex_env_of_pair(&b), &local_key, &v), "FWD-ENV above a hides the non-forwarding key");
    cr_assert(ex_env_query(ex_env_of_pair(&b), &other_key, &v) && v.as.i == 2);
    cr_assert(ex_env_query(ex_env_of_pair(&b), &fwd_key, &v) && v.as.i == 4);
    cr_assert(ex_env_query(ex_env_of_pair(&c), &local_key, &v) && v.as.i == 1, "no filter on c's path");
    expect_no_leaks();
}

/* Differential test of the shortcuts: random forests of pairs (one or two
 * keys, the second sometimes set after init, FWD-ENV edges) and of nodes
 * of another kind, over standard and user keys (several share a bucket,
 * some do not forward), against a
 * plain walk of the parent links. */
enum { RK_KEYS = 10, RK_NODES = 400 };
static const ex_key rk_user[6] = {
    { "rk0", true }, { "rk1", false }, { "rk2", true }, { "rk3", false }, { "rk4", true }, { "rk5", false },
};
static const ex_key *const rk_keys[RK_KEYS] = {
    &ex_key_get_scheduler, &ex_key_get_stop_token, &ex_key_get_allocator, &ex_key_get_delegation_scheduler,
    &rk_user[0], &rk_user[1], &rk_user[2], &rk_user[3], &rk_user[4], &rk_user[5],
};

typedef struct rk_node {
    ex_env_pair pair;    /* when !custom */
    ex_env_node node;    /* when custom: answers k1, else asks parent */
    bool custom;
    int parent;          /* -1: empty */
    bool fwd;            /* the edge to the parent is a FWD-ENV */
    int k1, k2;          /* key indices, -1: none */
    int64_t v1, v2;
    ex_env up;
} rk_node;

static rk_node rk[RK_NODES];

static bool rk_custom_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
    const rk_node *r = (const rk_node *)(const void *)((const char *)n - offsetof(rk_node, node));
    if (key == rk_keys[r->k1]) { *out = ex_int(r->v1); return true; }
    return ex_env_query(r->up, key, out);
}

static ex_env rk_env(int i) {
    if (i < 0) return ex_env_empty();
    ex_env e = { rk[i].custom ? &rk[i].node : &rk[i].pair.node, 0 };
    return e;
}

/* The answer by walking parent links one node at a time. */
static bool rk_reference(int i, int key, int64_t *out) {
    bool filtered = false;
    for (; i >= 0; i = rk[i].parent) {
        if (filtered && !rk_keys[key]->forwarding) return false;
        if (rk[i].k1 == key) { *out = rk[i].v1; return true; }
        if (rk[i].k2 == key) { *out = rk[i].v2; return true; }
        filtered = filtered || rk[i].fwd;
    }
    return false;
}

Test(exec_env, pair_shortcuts_answer_as_a_walk_of_the_chain_does) {
    srand(12345);
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < RK_NODES; i++) {
            rk_node *r = &rk[i];
            /* mostly chains, sometimes a branch or a new root */
            r->parent = i == 0 || rand() % 16 == 0 ? -1 : rand() % 4 ? i - 1 : rand() % i;
            r->fwd = rand() % 3 == 0;
            r->custom = rand() % 10 == 0;
            r->k1 = rand() % RK_KEYS;
            r->k2 = r->custom || rand() % 3 == 0 ? -1 : rand() % RK_KEYS;
            if (r->k2 == r->k1) r->k2 = -1;
            r->v1 = i * 2;
            r->v2 = i * 2 + 1;
            ex_env up = rk_env(r->parent);
            if (r->fwd) up = ex_env_forward(up);
            r->up = up;
            if (r->custom) {
                r->node.query = rk_custom_query;
            } else if (r->k2 >= 0 && rand() % 2) {
                ex_env_pair_init2(&r->pair, rk_keys[r->k1], ex_int(r->v1), rk_keys[r->k2], ex_int(r->v2), up);
            } else {
                ex_env_pair_init(&r->pair, rk_keys[r->k1], ex_int(r->v1), up);
                if (r->k2 >= 0) {  /* set after init, as the header allows */
                    r->pair.key2 = rk_keys[r->k2];
                    r->pair.value2 = ex_int(r->v2);
                }
            }
        }
        for (int i = 0; i < RK_NODES; i++)
            for (int k = 0; k < RK_KEYS; k++) {
                int64_t want = -1;
                ex_value got = ex_int(-1);
                bool ref = rk_reference(i, k, &want);
                bool res = ex_env_query(rk_env(i), rk_keys[k], &got);
                cr_assert_eq(res, ref, "round %d node %d key %d: answered %d, the walk %d", round, i, k, res, ref);
                if (ref) cr_assert_eq(got.as.i, want, "round %d node %d key %d", round, i, k);
            }
    }
    expect_no_leaks();
}
