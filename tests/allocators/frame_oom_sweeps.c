/* SPDX-License-Identifier: MIT */
/* Out-of-memory sweeps driven by ex_fault_allocator, the fault allocator
 * as the default or as the chain's allocator (suite frame_allocators,
 * declared in libc_default.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "allocators/alloc_fixtures.h"

/* ============================================================ OOM sweeps */

#define SPAWN_MAX_K 400

static void check_value_int(const ex_result *r, int64_t want, const char *name, long k) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "%s, k=%ld: expected EX_ENOMEM or the value, got disposition %d (%d: %s)",
                 name, k, r->disposition, r->error.code, r->error.msg ? r->error.msg : "");
    cr_assert_eq(r->n, 1, "%s, k=%ld", name, k);
    cr_assert_eq(r->values[0].type, EX_T_INT, "%s, k=%ld", name, k);
    cr_assert_eq(r->values[0].as.i, want, "%s, k=%ld: got %lld", name, k, (long long)r->values[0].as.i);
}

/* ---- let_value chain of 3 */

static ex_sender *build_let3(void *ctx) {
    (void)ctx;
    ex_sender *s = ex_just(ex_int(1));
    s = ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
    s = ex_let_value(s, let_plus3, NULL, EX_SIG(EX_T_INT));
    return ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
}

static void check_let3(const ex_result *r, void *ctx, long k, bool failed) {
    (void)ctx, (void)failed;
    check_value_int(r, 6, "let_value chain", k);
}

Test(frame_allocators, oom_sweep_let_value_chain_fault_as_default) {
    long hits = oom_sweep("let_value chain (default)", SWEEP_FAULT_DEFAULT, build_let3, check_let3, NULL);
    cr_expect_geq(hits, 6, "senders and inner operations were all swept (%ld)", hits);
    expect_no_leaks();
}

Test(frame_allocators, oom_sweep_let_value_chain_fault_as_chain_allocator) {
    long hits = oom_sweep("let_value chain (chain)", SWEEP_FAULT_CHAIN, build_let3, check_let3, NULL);
    cr_expect_eq(hits, 3, "the chain allocator serves exactly the three inner operations (%ld)", hits);
    expect_no_leaks();
}

/* ---- when_all where one child errors */

static ex_error fail_user(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_err(EX_EUSER + 7, "fail_user");
}

static ex_sender *build_when_all_error(void *ctx) {
    (void)ctx;
    static const ex_value inner[2] = { { EX_T_INT, { .i = 1 } }, { EX_T_INT, { .i = 2 } } };
    ex_tuple t = { 0, 2, inner };
    ex_sender *a = ex_just(ex_tuple_value(&t)); /* when_all copies its tuple with the env's allocator */
    ex_sender *b = ex_let_value(ex_just(ex_int(1)), let_plus3, NULL, EX_SIG(EX_T_INT));
    ex_sender *c = ex_then(ex_just(ex_int(3)), fail_user, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    return ex_when_all(a, b, c);
}

static void check_when_all_error(const ex_result *r, void *ctx, long k, bool failed) {
    (void)ctx, (void)failed;
    cr_assert_eq(r->disposition, EX_DISP_ERROR, "when_all, k=%ld: expected an error, got disposition %d", k,
                 r->disposition);
    cr_assert_eq(r->error.code, EX_EUSER + 7, "when_all, k=%ld: expected the child's error, got %d (%s)", k,
                 r->error.code, r->error.msg ? r->error.msg : "");
}

Test(frame_allocators, oom_sweep_when_all_with_an_erroring_child) {
    oom_sweep("when_all error (default)", SWEEP_FAULT_DEFAULT, build_when_all_error, check_when_all_error, NULL);
    long hits = oom_sweep("when_all error (chain)", SWEEP_FAULT_CHAIN, build_when_all_error, check_when_all_error, NULL);
    cr_expect_geq(hits, 2, "the tuple copy and the inner operation come from the chain allocator (%ld)", hits);
    expect_no_leaks();
}

/* ---- split with 3 consumers */

static ex_error sum3(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + in[1].as.i + in[2].as.i);
    return ex_ok();
}

static ex_sender *build_split3(void *ctx) {
    (void)ctx;
    ex_sender *sp = ex_split(ex_let_value(ex_just(ex_int(20)), let_plus1, NULL, EX_SIG(EX_T_INT)));
    ex_sender *w = ex_when_all(ex_then(ex_sender_retain(sp), then_plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                               ex_sender_retain(sp), ex_let_value(sp, let_plus1, NULL, EX_SIG(EX_T_INT)));
    return ex_then(w, sum3, NULL, EX_SIG(EX_T_INT, EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
}

static void check_split3(const ex_result *r, void *ctx, long k, bool failed) {
    (void)ctx, (void)failed;
    check_value_int(r, 22 + 21 + 22, "split", k);
}

Test(frame_allocators, oom_sweep_split_with_three_consumers) {
    oom_sweep("split (default)", SWEEP_FAULT_DEFAULT, build_split3, check_split3, NULL);
    oom_sweep("split (chain)", SWEEP_FAULT_CHAIN, build_split3, check_split3, NULL);
    expect_no_leaks();
}

/* ---- bulk on a pool */

typedef struct bulk_ctx {
    ex_pool *pool;
    atomic_uint hits[600];
} bulk_ctx;

static ex_sender *build_bulk(void *v) {
    bulk_ctx *c = v;
    for (int i = 0; i < 600; i++) atomic_store(&c->hits[i], 0);
    ex_sender *s = ex_then(ex_schedule(ex_pool_scheduler(c->pool)), then_ret1, NULL, EX_SIG0, EX_SIG(EX_T_INT));
    s = ex_bulk(s, EX_PAR, 600, bulk_count, c->hits);
    return ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
}

static void check_bulk(const ex_result *r, void *v, long k, bool failed) {
    bulk_ctx *c = v;
    (void)failed;
    check_value_int(r, 2, "bulk", k);
    for (int i = 0; i < 600; i++) cr_assert_eq(atomic_load(&c->hits[i]), 1u, "bulk, k=%ld: index %d ran once", k, i);
}

static void bulk_sweeps(unsigned threads) {
    static bulk_ctx c;
    c.pool = alloc_pool(threads, false, NULL);
    char name[64];
    snprintf(name, sizeof name, "bulk on %u threads (default)", threads);
    oom_sweep(name, SWEEP_FAULT_DEFAULT, build_bulk, check_bulk, &c);
    snprintf(name, sizeof name, "bulk on %u threads (chain)", threads);
    long hits = oom_sweep(name, SWEEP_FAULT_CHAIN, build_bulk, check_bulk, &c);
    if (threads > EX_BULK_INLINE_HELPERS + 1)
        cr_expect_eq(hits, 2, "%s: the helper items and the inner operation (%ld)", name, hits);
    else
        cr_expect_eq(hits, 1, "%s: only the inner operation (%ld)", name, hits);
    test_pool_free(c.pool);
}

Test(frame_allocators, oom_sweep_bulk_on_three_threads) {
    bulk_sweeps(3);
    expect_no_leaks();
}

Test(frame_allocators, oom_sweep_bulk_on_five_threads_with_allocated_helpers) {
    bulk_sweeps(5);
    expect_no_leaks();
}

/* ---- ex_spawn into a counting scope, then join */

static atomic_long spawn_sum;

static ex_error spawn_add(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n, (void)out;
    atomic_fetch_add(&spawn_sum, in[0].as.i);
    return ex_ok();
}

static ex_sender *spawned_work(ex_scheduler sch, int64_t v) {
    ex_sender *s = ex_starts_on(sch, ex_let_value(ex_just(ex_int(v)), let_plus1, NULL, EX_SIG(EX_T_INT)));
    return ex_then(s, spawn_add, NULL, EX_SIG(EX_T_INT), EX_SIG0);
}

static void spawn_sweep(sweep_mode mode) {
    const char *name = mode == SWEEP_FAULT_DEFAULT ? "spawn (default)" : "spawn (chain)";
    ex_pool *p = alloc_pool(2, false, NULL);
    ex_scheduler sch = ex_pool_scheduler(p);
    long base = test_stats.in_use; /* the pool */
    long hits = 0, k;
    for (k = 1; k <= SPAWN_MAX_K; k++) {
        ex_counting_scope scope;
        cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
        ex_scope_token tok = ex_counting_scope_token(&scope);
        atomic_store(&spawn_sum, 0);
        ex_fault_allocator f;
        ex_fault_allocator_init(&f, &test_allocator);
        const ex_allocator *fa = ex_fault_allocator_get(&f);
        ex_fault_allocator_fail_nth(&f, (uint64_t)k);
        ex_env_pair ep;
        ex_env_pair_init(&ep, &ex_key_get_allocator, ex_alloc_value(fa), ex_env_empty());
        if (mode == SWEEP_FAULT_DEFAULT) ex_set_default_allocator(fa);
        int refused = 0;
        long want = 0;
        for (int i = 0; i < 3; i++) {
            ex_sender *w = spawned_work(sch, 10 * (i + 1));
            ex_error e = mode == SWEEP_FAULT_DEFAULT ? ex_spawn(w, tok) : ex_spawn_env(w, tok, ex_env_of_pair(&ep));
            if (e.code) {
                cr_assert_eq(e.code, EX_ENOMEM, "%s, k=%ld: spawn %d failed with %d (%s)", name, k, i, e.code,
                             e.msg ? e.msg : "");
                refused++;
            } else {
                want += 10 * (i + 1) + 1;
            }
        }
        ex_result r = ex_sync_wait(ex_counting_scope_join(&scope));
        ex_set_default_allocator(&test_allocator);
        ex_alloc_stats fs = stats_of(fa);
        cr_assert_leq(fs.failures, 1u, "%s, k=%ld", name, k);
        bool failed = fs.failures == 1;
        bool join_failed = r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM;
        if (r.disposition != EX_DISP_VALUE)
            cr_assert(join_failed, "%s, k=%ld: join completed with disposition %d (%d: %s)", name, k, r.disposition,
                      r.error.code, r.error.msg ? r.error.msg : "");
        ex_result_destroy(&r);
        /* The join sender itself may have failed to build: join again (with
         * the test allocator) so nothing runs any more. */
        r = ex_sync_wait(ex_counting_scope_join(&scope));
        cr_assert(r.disposition == EX_DISP_VALUE || (r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM),
                  "%s, k=%ld: second join: disposition %d", name, k, r.disposition);
        ex_result_destroy(&r);
        cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0, "%s, k=%ld: the scope is idle", name, k);
        if (!failed) {
            cr_assert_eq(refused, 0, "%s, k=%ld", name, k);
            cr_assert(!join_failed, "%s, k=%ld: EX_ENOMEM without a failed allocation", name, k);
            cr_assert_eq(atomic_load(&spawn_sum), want, "%s, k=%ld: every spawned sender ran", name, k);
        } else {
            cr_assert(refused == 1 || join_failed, "%s, k=%ld: the failed allocation shows (refused spawn or join error)",
                      name, k);
            if (!join_failed) cr_assert_eq(atomic_load(&spawn_sum), want, "%s, k=%ld: the accepted spawns ran", name, k);
            else cr_assert_leq(atomic_load(&spawn_sum), want, "%s, k=%ld", name, k);
        }
        fs = stats_of(fa);
        cr_assert_eq(fs.allocations, fs.frees, "%s, k=%ld: fault allocator not balanced", name, k);
        cr_assert_eq(test_stats.in_use, base, "%s, k=%ld: leaked %ld block(s)", name, k, test_stats.in_use - base);
        if (!failed) break;
        hits++;
    }
    cr_assert_leq(k, SPAWN_MAX_K, "%s: the sweep did not reach a run without failures", name);
    cr_assert_gt(hits, 0, "%s: no run hit an allocation failure", name);
    if (mode == SWEEP_FAULT_CHAIN) cr_expect_eq(hits, 6, "%s: three spawn blocks and three inner operations (%ld)", name, hits);
    test_pool_free(p);
}

Test(frame_allocators, oom_sweep_spawn_into_counting_scope_fault_as_default) {
    spawn_sweep(SWEEP_FAULT_DEFAULT);
    expect_no_leaks();
}

Test(frame_allocators, oom_sweep_spawn_into_counting_scope_fault_as_chain_allocator) {
    spawn_sweep(SWEEP_FAULT_CHAIN);
    expect_no_leaks();
}
