/* SPDX-License-Identifier: MIT */
/* local_fixtures.c - see local_fixtures.h. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/local_fixtures.h"

const char *kind_name(bool excl) { return excl ? "exclusive" : "inclusive"; }

ex_sender *scan_i64(ex_scheduler sch, bool excl, const int64_t *in, int64_t *out, size_t n, int64_t init) {
    return excl ? ex_exclusive_scan_i64(sch, in, out, n, init) : ex_inclusive_scan_i64(sch, in, out, n);
}

ex_sender *gscan(ex_scheduler sch, const ex_monoid *m, bool excl, const void *in, void *out, size_t n,
                 const void *init) {
    return excl ? ex_exclusive_scan(sch, m, in, out, n, init) : ex_inclusive_scan(sch, m, in, out, n);
}

void run_gscan(algo_sched *a, const ex_monoid *m, bool excl, const void *in, void *out, size_t n, const void *init) {
    ex_sender *s = gscan(a->sch, m, excl, in, out, n, init);
    cr_assert_eq(ex_sender_status(s).code, 0, "%s: %s", a->name, ex_sender_status(s).msg ? ex_sender_status(s).msg : "");
    arec r;
    as_run_plain(a, s, &r);
    ex_sender_release(s);
    algo_expect_value(&r, 0, a->name);
}

size_t first_diff_bytes(const void *x, const void *y, size_t n, size_t sz) {
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)x + i * sz, (const char *)y + i * sz, sz)) return i;
    return SIZE_MAX;
}

bool same_bits(double x, double y) { return memcmp(&x, &y, sizeof x) == 0; }

static void fill_m22_v(void *a, size_t n, uint64_t seed) { fill_m22(a, n, seed); }
static void fill_aff200_v(void *a, size_t n, uint64_t seed) { fill_aff200(a, n, seed); }
static void fill_aff8_v(void *a, size_t n, uint64_t seed) { fill_aff8(a, n, seed); }
static void fill_big4k_v(void *a, size_t n, uint64_t seed) { fill_big4k(a, n, seed); }

gcase gcase_m22(void) {
    gcase g = { { sizeof(m22), &m22_identity, m22_combine, NULL }, fill_m22_v, "2x2 matrix product" };
    return g;
}

gcase gcase_aff200(void) {
    gcase g = { { sizeof(aff200), &aff200_identity, aff200_combine, NULL }, fill_aff200_v, "200-byte affine maps" };
    return g;
}

gcase gcase_aff8(void) {
    gcase g = { { 1, &aff8_identity, aff8_combine, NULL }, fill_aff8_v, "1-byte affine maps" };
    return g;
}

gcase gcase_big4k(void) {
    gcase g = { { sizeof(big4k), &big4k_identity, big4k_combine, NULL }, fill_big4k_v, "4096-byte elements" };
    return g;
}

void sum_combine(void *ctx, void *acc, const void *x) {
    sum_ctx *c = ctx;
    if (c && c->magic != SUM_MAGIC) {
        atomic_store(&c->bad_ctx, 1);
        return;
    }
    if (c) atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    *(uint64_t *)acc += *(const uint64_t *)x;
}

void as_init_each(algo_sched *a, size_t n, const as_kind *kinds) {
    for (size_t i = 0; i < n; i++) as_init(&a[i], kinds ? kinds[i] : (as_kind)i);
}

void as_fini_each(algo_sched *a, size_t n) {
    for (size_t i = 0; i < n; i++) as_fini(&a[i]);
}

void expect_stopped_before_start(algo_sched *a, const ex_sender *s, int builder, size_t n) {
    arec r;
    arec_init(&r, a->pool);
    arec_with_stop(&r);
    ex_stop_source_request_stop(&r.stop);
    as_run(a, s, &r);
    cr_assert_eq(atomic_load(&r.stops), 1, "%s builder %d n=%zu: values %d errors %d", a->name, builder, n,
                 atomic_load(&r.values), atomic_load(&r.errors));
}

void expect_shutdown_result(const arec *r, const char *what) {
    cr_assert_eq(atomic_load(&r->total), 1);
    if (atomic_load(&r->errors))
        cr_assert_eq(r->err.code, EX_ESHUTDOWN, "%s: error %d (%s)", what, r->err.code, r->err.msg ? r->err.msg : "");
    else
        cr_assert_eq(atomic_load(&r->stops), 1, "%s: a run on a shut-down pool completed with a value", what);
}

void expect_run_after_shutdown(ex_pool *p, const ex_sender *s, const char *what) {
    arec r;
    arec_init(&r, p);
    ex_operation *op = arec_run_start(s, &r);
    cr_assert(algo_wait(&r, NULL, 20.0), "%s: hangs after shutdown", what);
    expect_shutdown_result(&r, what);
    ex_operation_free(op);
}

ex_operation *start_then_shut_down(ex_pool *p, const ex_sender *s, arec *r, const char *what) {
    arec_init(r, p);
    ex_operation *op = arec_run_start(s, r);
    cr_assert_eq(ex_pool_shutdown(p).code, 0);
    cr_assert(algo_wait(r, NULL, 20.0), "%s: hangs when the pool shuts down during the run", what);
    sched_yield();  /* a second completion would come right after the first */
    cr_assert_eq(atomic_load(&r->total), 1);
    if (atomic_load(&r->errors)) cr_assert_eq(r->err.code, EX_ESHUTDOWN);
    return op;
}

void with_scheduler(as_kind k, void (*fn)(algo_sched *a)) {
    algo_sched a;
    as_init(&a, k);
    fn(&a);
    as_fini(&a);
    expect_no_leaks();
}

void for_kinds(size_t n, const as_kind *kinds, void (*fn)(algo_sched *a)) {
    for (size_t i = 0; i < n; i++) {
        algo_sched a;
        as_init(&a, kinds[i]);
        fn(&a);
        as_fini(&a);
    }
    expect_no_leaks();
}

void for_each_kind(as_kind first, as_kind last, void (*fn)(algo_sched *a)) {
    as_kind kinds[AS_COUNT];
    size_t n = 0;
    for (int k = (int)first; k <= (int)last; k++) kinds[n++] = (as_kind)k;
    for_kinds(n, kinds, fn);
}

ex_value run_one_value(algo_sched *a, ex_sender *s, ex_type type, const char *what) {
    ex_error st = ex_sender_status(s);
    cr_assert_eq(st.code, 0, "%s %s: %s", a->name, what, st.msg ? st.msg : "");
    arec r;
    as_run_plain(a, s, &r);
    ex_sender_release(s);
    algo_expect_value(&r, 1, a->name);
    cr_assert_eq(r.v[0].type, type, "%s %s: the value is of type %d, not %d", a->name, what, r.v[0].type, type);
    return r.v[0];
}

void *op_storage_new(const ex_sender *s, size_t *size) {
    size_t align = ex_sender_op_align(s);
    void *storage = NULL;
    *size = ex_sender_op_size(s);
    cr_assert_eq(posix_memalign(&storage, align < sizeof(void *) ? sizeof(void *) : align, *size), 0);
    return storage;
}

static ex_run_loop *loop_of(algo_sched *a) { return a->kind == AS_RUN_LOOP ? &a->loop : NULL; }

void run_in_storage(algo_sched *a, const ex_sender *s, void *storage, size_t size, arec *r) {
    ex_operation *op = NULL;
    ex_error e = ex_connect(s, arec_receiver(r), storage, size, &op);
    cr_assert_eq(e.code, 0, "%s: connect: %s", a->name, e.msg ? e.msg : "");
    ex_start(op);
    cr_assert(algo_wait(r, loop_of(a), 30.0), "%s: did not complete", a->name);
    ex_operation_destroy(op);
}

void expect_runs_allocate_nothing(algo_sched *a, const ex_sender *s, size_t nvalues,
                                  void (*check)(const arec *r, void *ctx), void *ctx) {
    cr_assert_eq(ex_sender_status(s).code, 0);
    size_t size;
    void *storage = op_storage_new(s, &size);
    for (int run = 0; run < 3; run++) {
        arec r;
        arec_init(&r, a->pool);
        long before = test_alloc_count();
        run_in_storage(a, s, storage, size, &r);
        long made = test_alloc_count() - before;
        cr_assert_eq(made, 0, "%s run %d: %ld allocation(s) per run", a->name, run, made);
        algo_expect_value(&r, nvalues, a->name);
        if (check) check(&r, ctx);
    }
    free(storage);
}

void expect_concurrent_runs_int(algo_sched *a, const ex_sender *s, int runs, int64_t want) {
    arec r[8];
    ex_operation *op[8];
    cr_assert_leq(runs, 8);
    for (int k = 0; k < runs; k++) {
        arec_init(&r[k], a->pool);
        cr_assert_eq(ex_connect_alloc(s, arec_receiver(&r[k]), &op[k]).code, 0);
    }
    for (int k = 0; k < runs; k++) ex_start(op[k]);
    for (int k = 0; k < runs; k++) {
        cr_assert(algo_wait(&r[k], loop_of(a), 30.0));
        algo_expect_value(&r[k], 1, "concurrent run");
        cr_assert_eq(r[k].v[0].as.i, want);
        ex_operation_free(op[k]);
    }
}

int run_connected(algo_sched *a, ex_sender *s, arec *r) {
    ex_operation *op = NULL;
    ex_error ce = ex_connect_alloc(s, arec_receiver(r), &op);
    if (!ce.code) {
        ex_start(op);
        cr_assert(algo_wait(r, loop_of(a), 30.0), "%s: no completion", a->name);
        ex_operation_free(op);
    }
    ex_sender_release(s);
    if (ce.code) return ce.code;
    return atomic_load(&r->errors) ? r->err.code : 0;
}

int algo_oom_sweep(int (*run)(void *ctx, long k), void *ctx, long max_k, const char *what) {
    long base = test_stats.in_use;
    bool clean = false;
    int nomem = 0;
    for (long k = 1; k <= max_k && !clean; k++) {
        long failed_before = test_stats.failed;
        test_alloc_fail_at(k);
        int code = run(ctx, k);
        bool failed = test_stats.failed != failed_before;
        test_alloc_fail_at(0);
        if (code) {
            cr_assert_eq(code, EX_ENOMEM, "%s k=%ld: error %d", what, k, code);
            cr_assert(failed, "%s k=%ld: EX_ENOMEM without a failed allocation", what, k);
            nomem++;
        } else {
            clean = !failed;
        }
        cr_assert_eq(test_stats.in_use, base, "%s k=%ld: %ld block(s) leaked", what, k, test_stats.in_use - base);
    }
    cr_assert(clean, "%s: the sweep never reached a run without an injected failure", what);
    return nomem;
}
