/* SPDX-License-Identifier: MIT */
/* algo_scan, allocations: the typed forms allocate nothing per run, the
 * generic ones their scratch at connect from the environment's allocator,
 * and every failed allocation gives EX_ENOMEM or the exact result, leaking
 * nothing (algo_scan suite, see scan_typed.c). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/local_fixtures.h"

/* ============================================================ allocations */

/* An int64 scan's output against the serial loop (init 5). */
typedef struct scan_i64_check {
    const int64_t *in, *out;
    int64_t *want;
    size_t n;
    bool excl;
} scan_i64_check;

static void check_scan_i64(const arec *r, void *ctx) {
    (void)r;
    scan_i64_check *c = ctx;
    ref_scan_i64(c->in, c->want, c->n, c->excl, 5);
    cr_assert_eq(first_diff_i64(c->out, c->want, c->n), SIZE_MAX);
}

/* The typed forms allocate nothing per run once the sender is built:
 * connect into caller storage, start, destroy. */
static void typed_runs_allocate_nothing(algo_sched *a) {
    static const size_t sizes[] = { 0, 9, 16385, 3 * 16384 + 5 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
        double *din = xmalloc(n * 8), *dout = xmalloc(n * 8);
        fill_i64(in, n, 1234 + j);
        fill_f64_int(din, n, 4321 + j);
        ex_sender *s[4] = { ex_inclusive_scan_i64(a->sch, in, out, n), ex_exclusive_scan_i64(a->sch, in, out, n, 5),
                            ex_inclusive_scan_f64(a->sch, din, dout, n), ex_exclusive_scan_f64(a->sch, din, dout, n, 5) };
        scan_i64_check chk = { in, out, want, n, false };
        for (int b = 0; b < 4; b++) {
            chk.excl = b == 1;
            expect_runs_allocate_nothing(a, s[b], 1, b < 2 ? check_scan_i64 : NULL, &chk);
            ex_sender_release(s[b]);
        }
        free(in), free(out), free(want), free(din), free(dout);
    }
}

Test(algo_scan, typed_runs_allocate_nothing_inline) { with_scheduler(AS_INLINE, typed_runs_allocate_nothing); }
Test(algo_scan, typed_runs_allocate_nothing_pool2) { with_scheduler(AS_POOL2, typed_runs_allocate_nothing); }
Test(algo_scan, typed_runs_allocate_nothing_pool4) { with_scheduler(AS_POOL4, typed_runs_allocate_nothing); }

/* Inits r with an environment naming a (its counters zeroed). */
static void arec_with_allocator(arec *r, ex_pool *pool, cnt_alloc *a) {
    arec_init(r, pool);
    ex_env_pair_init(&r->pair, &ex_key_get_allocator, ex_alloc_value(&a->base), ex_env_empty());
    r->has_env = true;
    atomic_store(&a->allocs, 0);
    atomic_store(&a->frees, 0);
}

/* The generic forms allocate their scratch at connect, from the
 * environment's allocator, and free it with the operation; a failed
 * allocation fails connect with EX_ENOMEM and leaves nothing behind. */
Test(algo_scan, generic_scratch_comes_from_the_environment_allocator_at_connect) {
    cnt_alloc ea;  /* the receiver's environment names it */
    cnt_alloc_init(&ea);
    algo_sched a[2];
    as_init_each(a, 2, (const as_kind[]){ AS_INLINE, AS_POOL2 });
    size_t n = 3 * ALGO_GTILE(sizeof(m22)) + 1;
    m22 *in = xmalloc(n * sizeof(m22)), *out = xmalloc(n * sizeof(m22)), *want = xmalloc(n * sizeof(m22));
    fill_m22(in, n, 99);
    ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
    for (int s = 0; s < 2; s++) {
        for (int excl = 0; excl < 2; excl++) {
            ex_sender *snd = gscan(a[s].sch, &m, excl, in, out, n, &m22_identity);
            size_t size;
            void *storage = op_storage_new(snd, &size);
            arec r;
            arec_with_allocator(&r, a[s].pool, &ea);
            long t0 = test_alloc_count();
            ex_operation *op = NULL;
            ex_error e = ex_connect(snd, arec_receiver(&r), storage, size, &op);
            cr_assert_eq(e.code, 0);
            cr_assert_eq(atomic_load(&ea.allocs), 1, "%s: connect allocates the scratch (%ld allocations)", a[s].name,
                         atomic_load(&ea.allocs));
            ex_start(op);
            cr_assert(algo_wait(&r, NULL, 30.0));
            algo_expect_value(&r, 0, a[s].name);
            cr_assert_eq(atomic_load(&ea.frees), 0, "the scratch lives as long as the operation");
            ex_operation_destroy(op);
            cr_assert_eq(atomic_load(&ea.frees), 1, "destroying the operation frees the scratch");
            cr_assert_eq(atomic_load(&ea.allocs), 1, "%s: one allocation per run", a[s].name);
            cr_assert_eq(test_alloc_count(), t0, "nothing came from the default allocator");
            ref_fold(&m, in, want, n, excl, &m22_identity, NULL);
            cr_assert_eq(first_diff_bytes(out, want, n, sizeof(m22)), SIZE_MAX);

            /* The allocation fails: connect reports it, nothing completes. */
            arec_with_allocator(&r, a[s].pool, &ea);
            atomic_store(&ea.fail_next, 1);
            e = ex_connect(snd, arec_receiver(&r), storage, size, &op);
            cr_assert_eq(e.code, EX_ENOMEM, "%s: a failed scratch allocation gives EX_ENOMEM at connect, got %d",
                         a[s].name, e.code);
            cr_assert_not_null(e.msg);
            cr_assert_eq(atomic_load(&r.total), 0, "a failed connect completes nothing");
            cr_assert_eq(atomic_load(&ea.frees), 0);
            free(storage);
            ex_sender_release(snd);
        }
    }
    free(in), free(out), free(want);
    as_fini_each(a, 2);
    expect_no_leaks();
}

/* Fails allocation k = 1, 2, ... of a whole run (building the sender,
 * connecting, the scratch, a pool's helpers): each run ends with EX_ENOMEM
 * or with the exact result, and leaks nothing, until a run fails nothing. */
typedef struct scan_oom {
    algo_sched a;
    bool generic, excl;
    size_t n;
    m22 *gin, *gout, *gwant, init;
    int64_t *in, *out, *want, twant;
    ex_monoid m;
} scan_oom;

static int scan_oom_run(void *ctx, long k) {
    scan_oom *c = ctx;
    algo_sched *a = &c->a;
    ex_sender *s = c->generic ? gscan(a->sch, &c->m, c->excl, c->gin, c->gout, c->n, &c->init)
                              : scan_i64(a->sch, c->excl, c->in, c->out, c->n, -9);
    arec r;
    arec_init(&r, a->pool);
    int code = run_connected(a, s, &r);
    if (code) return code;
    algo_expect_value(&r, c->generic ? 0 : 1, a->name);
    if (c->generic) {
        cr_assert_eq(first_diff_bytes(c->gout, c->gwant, c->n, sizeof(m22)), SIZE_MAX, "%s k=%ld: wrong output",
                     a->name, k);
    } else {
        cr_assert_eq(first_diff_i64(c->out, c->want, c->n), SIZE_MAX, "%s k=%ld: wrong output", a->name, k);
        cr_assert_eq(r.v[0].as.i, c->twant);
    }
    return 0;
}

static void oom_sweep(as_kind kind, bool generic, bool excl) {
    scan_oom c = { .generic = generic, .excl = excl, .init = { 1, 2, 3, 4 } };
    as_init(&c.a, kind);
    size_t n = c.n = generic ? 3 * ALGO_GTILE(sizeof(m22)) + 5 : 3 * ALGO_TILE + 5;
    c.gin = xmalloc(n * sizeof(m22)), c.gout = xmalloc(n * sizeof(m22)), c.gwant = xmalloc(n * sizeof(m22));
    c.in = xmalloc(n * 8), c.out = xmalloc(n * 8), c.want = xmalloc(n * 8);
    fill_m22(c.gin, n, 5);
    fill_i64(c.in, n, 6);
    c.m = (ex_monoid){ sizeof(m22), &m22_identity, m22_combine, NULL };
    ref_fold(&c.m, c.gin, c.gwant, n, excl, &c.init, NULL);
    c.twant = ref_scan_i64(c.in, c.want, n, excl, -9);
    int nomem = algo_oom_sweep(scan_oom_run, &c, 300, c.a.name);
    cr_assert_gt(nomem, 0, "%s: no injected failure gave EX_ENOMEM", c.a.name);
    free(c.gin), free(c.gout), free(c.gwant), free(c.in), free(c.out), free(c.want);
    as_fini(&c.a);
    expect_no_leaks();
}

Test(algo_scan, oom_sweep_generic_inline) {
    oom_sweep(AS_INLINE, true, false);
    oom_sweep(AS_INLINE, true, true);
}
Test(algo_scan, oom_sweep_generic_run_loop) { oom_sweep(AS_RUN_LOOP, true, true); }
Test(algo_scan, oom_sweep_generic_single_thread_context) { oom_sweep(AS_STC, true, false); }
Test(algo_scan, oom_sweep_generic_pools) {
    oom_sweep(AS_POOL1, true, true);
    oom_sweep(AS_POOL2, true, false);
    oom_sweep(AS_POOL4, true, true);
}
Test(algo_scan, oom_sweep_typed) {
    oom_sweep(AS_INLINE, false, false);
    oom_sweep(AS_POOL4, false, true);
}

/* A pool with more workers than inline bulk helpers: the helper array is
 * allocated; failing it costs workers, never the result. */
typedef struct six_oom {
    ex_pool *p;
    int64_t *in, *out, *want;
    size_t n;
    int64_t tw;
} six_oom;

static int six_oom_run(void *ctx, long k) {
    six_oom *c = ctx;
    ex_result r = ex_sync_wait(ex_inclusive_scan_i64(ex_pool_scheduler(c->p), c->in, c->out, c->n));
    int code = r.disposition == EX_DISP_ERROR ? r.error.code : 0;
    if (!code) {
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "k=%ld: disposition %d", k, r.disposition);
        cr_assert_eq(r.values[0].as.i, c->tw);
        cr_assert_eq(first_diff_i64(c->out, c->want, c->n), SIZE_MAX, "k=%ld: wrong output", k);
    }
    ex_result_destroy(&r);
    return code;
}

Test(algo_scan, oom_sweep_on_a_six_worker_pool) {
    ex_pool *p = algo_pool_new(6);
    size_t n = 12 * ALGO_TILE + 5;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 61);
    int64_t tw = ref_scan_i64(in, want, n, false, 0);
    six_oom c = { p, in, out, want, n, tw };
    algo_oom_sweep(six_oom_run, &c, 100, "six workers");
    free(in), free(out), free(want);
    test_pool_free(p);
    expect_no_leaks();
}
