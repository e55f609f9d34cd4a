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

#define T ALGO_TILE

/* ============================================================ allocations */

/* The typed forms allocate nothing per run once the sender is built:
 * connect into caller storage, start, destroy. */
static void typed_runs_allocate_nothing(as_kind k) {
    algo_sched a;
    as_init(&a, k);
    static const size_t sizes[] = { 0, 9, 16385, 3 * 16384 + 5 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        size_t n = sizes[j];
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
        double *din = xmalloc(n * 8), *dout = xmalloc(n * 8);
        fill_i64(in, n, 1234 + j);
        fill_f64_int(din, n, 4321 + j);
        ex_sender *s[4] = { ex_inclusive_scan_i64(a.sch, in, out, n), ex_exclusive_scan_i64(a.sch, in, out, n, 5),
                            ex_inclusive_scan_f64(a.sch, din, dout, n), ex_exclusive_scan_f64(a.sch, din, dout, n, 5) };
        for (int b = 0; b < 4; b++) {
            cr_assert_eq(ex_sender_status(s[b]).code, 0);
            size_t size = ex_sender_op_size(s[b]), align = ex_sender_op_align(s[b]);
            void *storage = NULL;
            cr_assert_eq(posix_memalign(&storage, align < sizeof(void *) ? sizeof(void *) : align, size), 0);
            for (int run = 0; run < 3; run++) {
                arec r;
                arec_init(&r, a.pool);
                long before = test_alloc_count();
                ex_operation *op = NULL;
                ex_error e = ex_connect(s[b], arec_receiver(&r), storage, size, &op);
                cr_assert_eq(e.code, 0, "connect: %s", e.msg ? e.msg : "");
                ex_start(op);
                cr_assert(algo_wait(&r, NULL, 30.0), "%s: did not complete", a.name);
                ex_operation_destroy(op);
                long made = test_alloc_count() - before;
                cr_assert_eq(made, 0, "%s builder %d n=%zu run %d: %ld allocation(s) per run", a.name, b, n, run, made);
                algo_expect_value(&r, 1, a.name);
                if (b < 2) {
                    ref_scan_i64(in, want, n, b == 1, 5);
                    cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX);
                }
            }
            free(storage);
            ex_sender_release(s[b]);
        }
        free(in), free(out), free(want), free(din), free(dout);
    }
    as_fini(&a);
    expect_no_leaks();
}

Test(algo_scan, typed_runs_allocate_nothing_inline) { typed_runs_allocate_nothing(AS_INLINE); }
Test(algo_scan, typed_runs_allocate_nothing_pool2) { typed_runs_allocate_nothing(AS_POOL2); }
Test(algo_scan, typed_runs_allocate_nothing_pool4) { typed_runs_allocate_nothing(AS_POOL4); }

/* A counting allocator the receiver's environment names. */
typedef struct env_alloc {
    ex_allocator a;
    atomic_long allocs, frees, fail_next;
} env_alloc;

static void *ea_allocate(void *ctx, size_t size, size_t align) {
    env_alloc *e = ctx;
    atomic_fetch_add(&e->allocs, 1);
    if (atomic_exchange(&e->fail_next, 0)) return NULL;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    return p;
}

static void ea_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)size, (void)align;
    env_alloc *e = ctx;
    atomic_fetch_add(&e->frees, 1);
    free(p);
}

/* The generic forms allocate their scratch at connect, from the
 * environment's allocator, and free it with the operation; a failed
 * allocation fails connect with EX_ENOMEM and leaves nothing behind. */
Test(algo_scan, generic_scratch_comes_from_the_environment_allocator_at_connect) {
    env_alloc ea;
    memset(&ea, 0, sizeof ea);
    ea.a.allocate = ea_allocate;
    ea.a.deallocate = ea_deallocate;
    ea.a.ctx = &ea;
    ea.a.name = "env-counting";
    algo_sched a[2];
    as_init(&a[0], AS_INLINE);
    as_init(&a[1], AS_POOL2);
    size_t n = 3 * ALGO_GTILE(sizeof(m22)) + 1;
    m22 *in = xmalloc(n * sizeof(m22)), *out = xmalloc(n * sizeof(m22)), *want = xmalloc(n * sizeof(m22));
    fill_m22(in, n, 99);
    ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
    for (int s = 0; s < 2; s++) {
        for (int excl = 0; excl < 2; excl++) {
            ex_sender *snd = gscan(a[s].sch, &m, excl, in, out, n, &m22_identity);
            size_t size = ex_sender_op_size(snd), align = ex_sender_op_align(snd);
            void *storage = NULL;
            cr_assert_eq(posix_memalign(&storage, align < sizeof(void *) ? sizeof(void *) : align, size), 0);
            arec r;
            arec_init(&r, a[s].pool);
            ex_env_pair_init(&r.pair, &ex_key_get_allocator, ex_alloc_value(&ea.a), ex_env_empty());
            r.has_env = true;
            long t0 = test_alloc_count();
            atomic_store(&ea.allocs, 0);
            atomic_store(&ea.frees, 0);
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
            arec_init(&r, a[s].pool);
            ex_env_pair_init(&r.pair, &ex_key_get_allocator, ex_alloc_value(&ea.a), ex_env_empty());
            r.has_env = true;
            atomic_store(&ea.allocs, 0);
            atomic_store(&ea.frees, 0);
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
    as_fini(&a[0]);
    as_fini(&a[1]);
    expect_no_leaks();
}

/* Fails allocation k = 1, 2, ... of a whole run (building the sender,
 * connecting, the scratch, a pool's helpers): each run ends with EX_ENOMEM
 * or with the exact result, and leaks nothing, until a run fails nothing. */
static void oom_sweep(as_kind kind, bool generic, bool excl) {
    algo_sched a;
    as_init(&a, kind);
    size_t n = generic ? 3 * ALGO_GTILE(sizeof(m22)) + 5 : 3 * T + 5;
    m22 *gin = xmalloc(n * sizeof(m22)), *gout = xmalloc(n * sizeof(m22)), *gwant = xmalloc(n * sizeof(m22));
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_m22(gin, n, 5);
    fill_i64(in, n, 6);
    ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
    m22 init = { 1, 2, 3, 4 };
    ref_fold(&m, gin, gwant, n, excl, &init, NULL);
    int64_t twant = ref_scan_i64(in, want, n, excl, -9);
    long base = test_stats.in_use;
    bool clean = false;
    int nomem = 0;
    long k;
    for (k = 1; k <= 300 && !clean; k++) {
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        ex_sender *s = generic ? gscan(a.sch, &m, excl, gin, gout, n, &init) : scan_i64(a.sch, excl, in, out, n, -9);
        arec r;
        arec_init(&r, a.pool);
        ex_operation *op = NULL;
        ex_error ce = ex_connect_alloc(s, arec_receiver(&r), &op);
        if (!ce.code) {
            ex_start(op);
            cr_assert(algo_wait(&r, kind == AS_RUN_LOOP ? &a.loop : NULL, 30.0), "%s k=%ld: no completion", a.name, k);
            ex_operation_free(op);
        }
        ex_sender_release(s);
        bool failed = test_stats.failed != failed_before;
        test_alloc_fail_at(0);
        if (ce.code || atomic_load(&r.errors)) {
            int code = ce.code ? ce.code : r.err.code;
            cr_assert_eq(code, EX_ENOMEM, "%s k=%ld: error %d (%s)", a.name, k, code,
                         ce.code ? ce.msg : r.err.msg ? r.err.msg : "");
            cr_assert(failed, "%s k=%ld: EX_ENOMEM without a failed allocation", a.name, k);
            nomem++;
        } else {
            algo_expect_value(&r, generic ? 0 : 1, a.name);
            if (generic) {
                cr_assert_eq(first_diff_bytes(gout, gwant, n, sizeof(m22)), SIZE_MAX, "%s k=%ld: wrong output", a.name,
                             k);
            } else {
                cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX, "%s k=%ld: wrong output", a.name, k);
                cr_assert_eq(r.v[0].as.i, twant);
            }
            clean = !failed;
        }
        cr_assert_eq(test_stats.in_use, base, "%s k=%ld: %ld block(s) leaked", a.name, k, test_stats.in_use - base);
    }
    cr_assert(clean, "%s: the sweep never reached a run without an injected failure", a.name);
    cr_assert_gt(nomem, 0, "%s: no injected failure gave EX_ENOMEM", a.name);
    free(gin), free(gout), free(gwant), free(in), free(out), free(want);
    as_fini(&a);
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
Test(algo_scan, oom_sweep_on_a_six_worker_pool) {
    ex_pool *p = algo_pool_new(6);
    size_t n = 12 * T + 5;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 61);
    int64_t tw = ref_scan_i64(in, want, n, false, 0);
    long base = test_stats.in_use;
    bool clean = false;
    for (long k = 1; k <= 100 && !clean; k++) {
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        ex_result r = ex_sync_wait(ex_inclusive_scan_i64(ex_pool_scheduler(p), in, out, n));
        bool failed = test_stats.failed != failed_before;
        test_alloc_fail_at(0);
        if (r.disposition == EX_DISP_ERROR) {
            cr_assert_eq(r.error.code, EX_ENOMEM, "k=%ld: error %d (%s)", k, r.error.code, r.error.msg ? r.error.msg : "");
            cr_assert(failed);
        } else {
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "k=%ld: disposition %d", k, r.disposition);
            cr_assert_eq(r.values[0].as.i, tw);
            cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX, "k=%ld: wrong output", k);
            clean = !failed;
        }
        ex_result_destroy(&r);
        cr_assert_eq(test_stats.in_use, base, "k=%ld: leaked", k);
    }
    cr_assert(clean);
    free(in), free(out), free(want);
    algo_pool_free(p);
    expect_no_leaks();
}
