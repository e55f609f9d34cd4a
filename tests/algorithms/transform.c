/* SPDX-License-Identifier: MIT */
/* algo_loops, transform: ex_transform and ex_transform_f64
 * (cexec/algorithms.h) on every kind of scheduler: every element is
 * transformed exactly once; stop before start writes nothing; argument
 * checks; in-place forms with wider or narrower outputs (algo_loops suite,
 * see for_each.c).  No timing assertions. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithms/local_fixtures.h"

/* ============================================================== transform */

typedef struct tf_ctx {
    const unsigned char *base;     /* the input array, to find the index */
    size_t in_size, n;
    ex_pool *pool;
    atomic_uchar *hits;
    atomic_int bad, off_pool;
} tf_ctx;

static void tf_init(tf_ctx *c, const void *base, size_t in_size, size_t n, ex_pool *p) {
    memset(c, 0, sizeof *c);
    c->base = base;
    c->in_size = in_size;
    c->n = n;
    c->pool = p;
    c->hits = xmalloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) atomic_init(&c->hits[i], 0);
}

static size_t tf_note(tf_ctx *c, const void *x) {
    size_t off = (size_t)((const unsigned char *)x - c->base);
    if (off % c->in_size || off / c->in_size >= c->n) {
        atomic_store(&c->bad, 1);
        return 0;
    }
    size_t i = off / c->in_size;
    if (atomic_fetch_add(&c->hits[i], 1)) atomic_store(&c->bad, 1);
    if (c->pool && ex_pool_current_worker(c->pool) < 0) atomic_store(&c->off_pool, 1);
    return i;
}

static void tf_expect_each_once(tf_ctx *c, const char *what) {
    cr_assert_eq(atomic_load(&c->bad), 0, "%s n=%zu: an element was transformed twice or out of range", what, c->n);
    for (size_t i = 0; i < c->n; i++)
        cr_assert_eq(atomic_load(&c->hits[i]), 1, "%s n=%zu: element %zu transformed %d times", what, c->n, i,
                     atomic_load(&c->hits[i]));
    cr_assert_eq(atomic_load(&c->off_pool), 0, "%s: transformed outside the pool", what);
}

/* int32 -> int64: y = x * x - index */
static void sq_fn(void *ctx, const void *x, void *y) {
    tf_ctx *c = ctx;
    size_t i = tf_note(c, x);
    int32_t v;
    memcpy(&v, x, 4);
    int64_t r = (int64_t)v * v - (int64_t)i;
    memcpy(y, &r, 8);
}

/* 200 bytes -> 1 byte: a checksum */
static void sum8_fn(void *ctx, const void *x, void *y) {
    tf_note(ctx, x);
    const unsigned char *p = x;
    unsigned s = 0;
    for (int k = 0; k < 200; k++) s = s * 31 + p[k];
    *(unsigned char *)y = (unsigned char)s;
}

/* 1 byte -> 200 bytes: the byte spread out */
static void spread_fn(void *ctx, const void *x, void *y) {
    tf_note(ctx, x);
    unsigned char v = *(const unsigned char *)x;
    unsigned char *q = y;
    for (int k = 0; k < 200; k++) q[k] = (unsigned char)(v + k);
}

/* 8 -> 8 bytes, for in place: y = ~x */
static void not_fn(void *ctx, const void *x, void *y) {
    tf_note(ctx, x);
    uint64_t v;
    memcpy(&v, x, 8);
    v = ~v;
    memcpy(y, &v, 8);
}

static double f64_fn(void *ctx, double x) {
    const double *scale = ctx;
    return x * *scale + 0.5;
}

static void run_tf(algo_sched *a, ex_sender *s, const char *what) {
    cr_assert_eq(ex_sender_status(s).code, 0, "%s %s: %s", a->name, what,
                 ex_sender_status(s).msg ? ex_sender_status(s).msg : "");
    arec r;
    as_run_plain(a, s, &r);
    algo_expect_value(&r, 0, what);
    if (a->pool) cr_assert_geq(r.worker, 0, "%s: completes on a worker", a->name);
    ex_sender_release(s);
}

static void transform_every_size(algo_sched *a) {
    for (size_t j = 0; j <= algo_nsizes; j++) {
        size_t n = j < algo_nsizes ? algo_sizes[j] : ALGO_HUGE;
        /* the double form */
        double *din = xmalloc(n * 8), *dout = xmalloc(n * 8);
        fill_f64_mixed(din, n, 60 + j);
        double scale = -3.0;
        run_tf(a, ex_transform_f64(a->sch, din, dout, n, f64_fn, &scale), "ex_transform_f64");
        for (size_t i = 0; i < n; i++)
            cr_assert(dout[i] == din[i] * scale + 0.5, "%s n=%zu: out[%zu] = %g", a->name, n, i, dout[i]);
        /* in place */
        memcpy(dout, din, n * 8);
        run_tf(a, ex_transform_f64(a->sch, dout, dout, n, f64_fn, &scale), "ex_transform_f64 in place");
        for (size_t i = 0; i < n; i++) cr_assert(dout[i] == din[i] * scale + 0.5, "%s n=%zu in place: out[%zu]", a->name, n, i);
        free(din), free(dout);

        /* int32 -> int64 */
        int32_t *in = xmalloc(n * 4);
        int64_t *out = xmalloc(n * 8);
        for (size_t i = 0; i < n; i++) in[i] = (int32_t)(i * 2654435761u);
        tf_ctx c;
        tf_init(&c, in, 4, n, a->pool);
        run_tf(a, ex_transform(a->sch, in, 4, out, 8, n, sq_fn, &c), "ex_transform 4->8");
        tf_expect_each_once(&c, a->name);
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(out[i], (int64_t)in[i] * in[i] - (int64_t)i, "%s n=%zu: out[%zu]", a->name, n, i);
        free((void *)c.hits);

        /* 8 -> 8 in place */
        uint64_t *buf = (uint64_t *)(void *)out;
        for (size_t i = 0; i < n; i++) buf[i] = i * 0x9e3779b97f4a7c15ull;
        tf_init(&c, buf, 8, n, a->pool);
        run_tf(a, ex_transform(a->sch, buf, 8, buf, 8, n, not_fn, &c), "ex_transform in place");
        tf_expect_each_once(&c, a->name);
        for (size_t i = 0; i < n; i++) cr_assert_eq(buf[i], ~(i * 0x9e3779b97f4a7c15ull), "%s in place: out[%zu]", a->name, i);
        free((void *)c.hits);
        free(in), free(out);
    }
    /* large and 1-byte elements */
    static const size_t wide[] = { 0, 1, 255, 256, 257, 5000 };
    for (size_t j = 0; j < sizeof wide / sizeof wide[0]; j++) {
        size_t n = wide[j];
        unsigned char *big = xmalloc(n * 200), *small = xmalloc(n ? n : 1), *big2 = xmalloc(n * 200);
        uint64_t seed = 70 + j;
        for (size_t i = 0; i < n * 200; i++) big[i] = (unsigned char)algo_rand(&seed);
        tf_ctx c;
        tf_init(&c, big, 200, n, a->pool);
        run_tf(a, ex_transform(a->sch, big, 200, small, 1, n, sum8_fn, &c), "ex_transform 200->1");
        tf_expect_each_once(&c, a->name);
        for (size_t i = 0; i < n; i++) {
            unsigned s = 0;
            for (size_t q = 0; q < 200; q++) s = s * 31 + big[i * 200 + q];
            cr_assert_eq(small[i], (unsigned char)s, "%s n=%zu: checksum %zu", a->name, n, i);
        }
        free((void *)c.hits);
        tf_init(&c, small, 1, n, a->pool);
        run_tf(a, ex_transform(a->sch, small, 1, big2, 200, n, spread_fn, &c), "ex_transform 1->200");
        tf_expect_each_once(&c, a->name);
        for (size_t i = 0; i < n; i++)
            for (size_t q = 0; q < 200; q++) cr_assert_eq(big2[i * 200 + q], (unsigned char)(small[i] + q));
        free((void *)c.hits);
        free(big), free(small), free(big2);
    }
}

TEST_EVERY_SCHEDULER(algo_loops, transform_every_size, transform_every_size)

static void transform_stop_before_start_writes_nothing_on(algo_sched *a) {
    size_t n = 40000;
    double *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    fill_f64_int(in, n, 9);
    memset(out, 0, n * 8);
    double scale = 2;
    tf_ctx c;
    tf_init(&c, in, 8, n, a->pool);
    ex_sender *s[2] = { ex_transform_f64(a->sch, in, out, n, f64_fn, &scale),
                        ex_transform(a->sch, in, 8, out, 8, n, not_fn, &c) };
    for (int b = 0; b < 2; b++) {
        arec r;
        arec_init(&r, a->pool);
        arec_with_stop(&r);
        ex_stop_source_request_stop(&r.stop);
        as_run(a, s[b], &r);
        cr_assert_eq(atomic_load(&r.stops), 1, "%s builder %d", a->name, b);
        ex_sender_release(s[b]);
    }
    for (size_t i = 0; i < n; i++) cr_assert(out[i] == 0, "%s: element %zu written although stopped", a->name, i);
    for (size_t i = 0; i < n; i++) cr_assert_eq(atomic_load(&c.hits[i]), 0, "%s: fn ran although stopped", a->name);
    free((void *)c.hits);
    free(in), free(out);
}

Test(algo_loops, transform_stop_before_start_writes_nothing) {
    for_each_kind(AS_INLINE, AS_POOL4, transform_stop_before_start_writes_nothing_on);
}

Test(algo_loops, transform_bad_arguments_give_einval) {
    ex_scheduler bad = { NULL, NULL };
    ex_scheduler sch = ex_inline_scheduler();
    static double d[64];
    static unsigned char b[1024];
    algo_expect_einval(ex_transform_f64(bad, d, d + 32, 8, f64_fn, NULL), "ex_transform_f64", "invalid scheduler");
    algo_expect_einval(ex_transform_f64(sch, NULL, d, 8, f64_fn, NULL), "ex_transform_f64", "NULL in");
    algo_expect_einval(ex_transform_f64(sch, d, NULL, 8, f64_fn, NULL), "ex_transform_f64", "NULL out");
    algo_expect_einval(ex_transform_f64(sch, d, d + 32, 8, NULL, NULL), "ex_transform_f64", "NULL fn");
    algo_expect_einval(ex_transform_f64(sch, d, d + 4, 8, f64_fn, NULL), "ex_transform_f64", "overlap");
    algo_expect_einval(ex_transform_f64(sch, d + 1, d, 8, f64_fn, NULL), "ex_transform_f64", "overlap");
    algo_expect_einval(ex_transform(bad, b, 8, b + 512, 8, 8, not_fn, NULL), "ex_transform", "invalid scheduler");
    algo_expect_einval(ex_transform(sch, NULL, 8, b, 8, 8, not_fn, NULL), "ex_transform", "NULL in");
    algo_expect_einval(ex_transform(sch, b, 8, NULL, 8, 8, not_fn, NULL), "ex_transform", "NULL out");
    algo_expect_einval(ex_transform(sch, b, 8, b + 512, 8, 8, NULL, NULL), "ex_transform", "NULL fn");
    algo_expect_einval(ex_transform(sch, b, 0, b + 512, 8, 8, not_fn, NULL), "ex_transform", "in_size 0");
    algo_expect_einval(ex_transform(sch, b, 8, b + 512, 0, 8, not_fn, NULL), "ex_transform", "out_size 0");
    algo_expect_einval(ex_transform(sch, b, 8, b + 8, 8, 8, not_fn, NULL), "ex_transform", "overlap");
    algo_expect_einval(ex_transform(sch, b + 100, 4, b, 200, 2, not_fn, NULL), "ex_transform", "overlap, wider out");
    algo_expect_einval(ex_transform(sch, b, 8, b + 512, 8, SIZE_MAX / 4, not_fn, NULL), "ex_transform", "overflow");
    algo_expect_einval(ex_transform(sch, b, 1, b + 512, 16, SIZE_MAX / 8, not_fn, NULL), "ex_transform",
                       "overflow of the wider size");
    /* NULL arrays with n == 0 are fine; adjacent arrays too */
    ex_sender *s = ex_transform(sch, NULL, 8, NULL, 8, 0, not_fn, NULL);
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_sender_release(s);
    s = ex_transform_f64(sch, NULL, NULL, 0, f64_fn, NULL);
    cr_assert_eq(ex_sender_status(s).code, 0);
    ex_sender_release(s);
    s = ex_transform(sch, b, 4, b + 32, 8, 8, not_fn, NULL);
    cr_assert_eq(ex_sender_status(s).code, 0, "adjacent arrays do not overlap");
    ex_sender_release(s);
    expect_no_leaks();
}

/* in == out is "in place", which the overlap check lets through whatever
 * the element sizes.  With out_size > in_size, out[i] covers inputs that
 * have not been read yet (on any scheduler), so such a call must either be
 * rejected (EX_EINVAL) or still produce out[i] = fn(in[i]).  It does
 * neither: the builder accepts it and the output is wrong. */
static void widen_fn(void *ctx, const void *x, void *y) {
    (void)ctx;
    int32_t v;
    memcpy(&v, x, 4);
    int64_t w = (int64_t)v * 3;
    memcpy(y, &w, 8);
}

/* In place with different element sizes, a builder must reject s
 * (EX_EINVAL; s is released) or its run must give the right output: runs
 * s when accepted, for the caller to check the output. */
static bool accepted_and_ran(ex_sender *s) {
    if (ex_sender_status(s).code) {
        cr_assert_eq(ex_sender_status(s).code, EX_EINVAL);
        ex_sender_release(s);
        return false;
    }
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    return true;
}

Test(algo_loops, transform_in_place_with_a_wider_output_is_rejected_or_correct) {
    size_t n = 1000;
    unsigned char *buf = xmalloc(n * 8);
    int32_t *orig = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) orig[i] = (int32_t)i + 1;
    memcpy(buf, orig, n * 4);
    ex_sender *s = ex_transform(ex_inline_scheduler(), buf, 4, buf, 8, n, widen_fn, NULL);
    if (accepted_and_ran(s)) {
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < n && bad == SIZE_MAX; i++) {
            int64_t y;
            memcpy(&y, buf + i * 8, 8);
            if (y != (int64_t)orig[i] * 3) bad = i;
        }
        cr_expect_eq(bad, SIZE_MAX,
                     "ex_transform(in == out, in_size 4, out_size 8) was accepted but out[%zu] != fn(in[%zu]): "
                     "in place with different element sizes must be rejected",
                     bad, bad);
    }
    free(buf), free(orig);
    expect_no_leaks();
}

/* The same with a narrower output (8 -> 4 bytes): a serial loop would get
 * it right (out[i] lies below in[i]), but tiles run at once: tile 1 writes
 * out[g .. 2g), the bytes of tile 0's inputs in[g/2 .. g).  Tile 0 waits
 * here until tile 1 is done, so the overwrite is certain. */
typedef struct narrow_ctx {
    const unsigned char *base;
    size_t g;
    atomic_long tile1_done;
    atomic_int waited_out;
} narrow_ctx;

static void narrow_fn(void *ctx, const void *x, void *y) {
    narrow_ctx *c = ctx;
    size_t i = (size_t)((const unsigned char *)x - c->base) / 8;
    int64_t v;
    memcpy(&v, x, 8);
    if (i == 0) {
        double end = test_now_s() + 5;
        while (atomic_load(&c->tile1_done) < (long)c->g && test_now_s() < end) sched_yield();
        if (atomic_load(&c->tile1_done) < (long)c->g) atomic_store(&c->waited_out, 1);
    }
    int32_t w = (int32_t)v + 1;
    memcpy(y, &w, 4);
    if (i >= c->g && i < 2 * c->g) atomic_fetch_add(&c->tile1_done, 1);
}

Test(algo_loops, transform_in_place_with_a_narrower_output_on_a_pool_is_rejected_or_correct) {
    ex_pool *p = algo_pool_new(2);
    size_t n = 65536;
    size_t g = n / (16 * 2) + 1;  /* the default grain on 2 workers */
    unsigned char *buf = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) {
        int64_t v = (int64_t)i * 1000 + 7;
        memcpy(buf + i * 8, &v, 8);
    }
    narrow_ctx c = { .base = buf, .g = g };
    ex_sender *s = ex_transform(ex_pool_scheduler(p), buf, 8, buf, 4, n, narrow_fn, &c);
    if (accepted_and_ran(s)) {
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < n && bad == SIZE_MAX; i++) {
            int32_t y;
            memcpy(&y, buf + i * 4, 4);
            if (y != (int32_t)(i * 1000 + 8)) bad = i;
        }
        cr_expect_eq(bad, SIZE_MAX,
                     "ex_transform(in == out, in_size 8, out_size 4) on a pool was accepted but out[%zu] != fn(in[%zu])%s",
                     bad, bad, atomic_load(&c.waited_out) ? " (tile 1 did not finish first)" : "");
    }
    free(buf);
    test_pool_free(p);
    expect_no_leaks();
}

/* for_each_index over an index space that ends near SIZE_MAX: the ranges
 * must stay inside [0, n).  The function only records the ranges. */
