/* SPDX-License-Identifier: MIT */
/* algo_helpers.c - fixtures shared by the algorithm suites. */
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/algo_helpers.h"
#include "common/compensated_sum.h"

const size_t algo_sizes[] = { 0, 1, 7, 8, 9, 15, 16, 17, 16383, 16384, 16385, 3 * 16384 + 5 };
const size_t algo_nsizes = sizeof algo_sizes / sizeof algo_sizes[0];

void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    cr_assert_not_null(p, "malloc(%zu)", bytes);
    return p;
}

/* -------------------------------------------------------------- schedulers */

ex_pool *algo_pool_new(unsigned threads) {
    ex_pool_config c = test_pool_config(threads, "algo");
    return test_pool_new_cfg(&c);
}

void as_init(algo_sched *a, as_kind k) {
    memset(a, 0, sizeof *a);
    a->kind = k;
    switch (k) {
    case AS_INLINE:
        a->name = "inline";
        a->sch = ex_inline_scheduler();
        break;
    case AS_RUN_LOOP:
        a->name = "run_loop";
        cr_assert_eq(ex_run_loop_init(&a->loop).code, 0);
        a->sch = ex_run_loop_scheduler(&a->loop);
        break;
    case AS_STC:
        a->name = "single_thread_context";
        cr_assert_eq(ex_single_thread_context_init(&a->stc).code, 0);
        a->sch = ex_single_thread_context_scheduler(&a->stc);
        break;
    case AS_POOL1:
    case AS_POOL2:
    case AS_POOL4:
        a->name = k == AS_POOL1 ? "pool(1)" : k == AS_POOL2 ? "pool(2)" : "pool(4)";
        a->pool = algo_pool_new(k == AS_POOL1 ? 1 : k == AS_POOL2 ? 2 : 4);
        a->sch = ex_pool_scheduler(a->pool);
        break;
    default:
        cr_assert_fail("bad scheduler kind %d", (int)k);
    }
}

void as_fini(algo_sched *a) {
    switch (a->kind) {
    case AS_RUN_LOOP:
        cr_assert_eq(ex_run_loop_destroy(&a->loop).code, 0, "run_loop still busy");
        break;
    case AS_STC:
        cr_assert_eq(ex_single_thread_context_destroy(&a->stc).code, 0);
        break;
    case AS_POOL1:
    case AS_POOL2:
    case AS_POOL4:
        test_pool_free(a->pool);
        a->pool = NULL;
        break;
    default:
        break;
    }
}

static bool arec_completed(void *r) { return atomic_load(&((arec *)r)->total) >= 1; }

bool algo_wait(arec *r, ex_run_loop *loop, double limit_s) { return test_wait_until(arec_completed, r, loop, limit_s); }

void as_run(algo_sched *a, const ex_sender *s, arec *r) {
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, arec_receiver(r), &op);
    cr_assert_eq(e.code, 0, "%s: connect: %d %s", a->name, e.code, e.msg ? e.msg : "");
    ex_start(op);
    bool done = algo_wait(r, a->kind == AS_RUN_LOOP ? &a->loop : NULL, 30.0);
    cr_assert(done, "%s: the operation did not complete within 30 s", a->name);
    /* A second completion would come right after the first, on the same
     * agent; give it a moment to show. */
    sched_yield();
    cr_assert_eq(atomic_load(&r->total), 1, "%s: completed %d times", a->name, atomic_load(&r->total));
    ex_operation_free(op);
}

void as_run_plain(algo_sched *a, const ex_sender *s, arec *r) {
    arec_init(r, a->pool);
    as_run(a, s, r);
}

void algo_expect_value(const arec *r, size_t nv, const char *what) {
    cr_assert_eq(atomic_load(&r->values), 1, "%s: expected set_value, got values %d errors %d (%d: %s) stops %d", what,
                 atomic_load(&r->values), atomic_load(&r->errors), r->err.code, r->err.msg ? r->err.msg : "",
                 atomic_load(&r->stops));
    cr_assert_eq(r->n, nv, "%s: %zu values, expected %zu", what, r->n, nv);
}

void algo_expect_einval(ex_sender *s, const char *builder, const char *what) {
    cr_assert_not_null(s, "%s: builders never return NULL", what);
    ex_error e = ex_sender_status(s);
    cr_assert_eq(e.code, EX_EINVAL, "%s: status %d (%s), expected EX_EINVAL", what, e.code, e.msg ? e.msg : "");
    cr_assert_not_null(e.msg, "%s", what);
    size_t len = strlen(builder);
    cr_assert(strncmp(e.msg, builder, len) == 0 && e.msg[len] == ':', "%s: message \"%s\" does not name %s", what,
              e.msg, builder);
    ex_result r = ex_sync_wait(s);
    cr_assert_eq(r.disposition, EX_DISP_ERROR, "%s: an invalid sender must complete with an error", what);
    cr_assert_eq(r.error.code, EX_EINVAL, "%s", what);
    ex_result_destroy(&r);
}

/* ------------------------------------------------------------------ inputs */

uint64_t algo_rand(uint64_t *s) {
    /* splitmix64: any seed, including 0, gives a good sequence */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void fill_i64(int64_t *a, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) a[i] = (int64_t)algo_rand(&seed);
}

void fill_f64_int(double *a, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) a[i] = (double)(int)(algo_rand(&seed) % 2001) - 1000.0;
}

void fill_f64_mixed(double *a, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        uint64_t r = algo_rand(&seed);
        double m = (double)(r >> 11) * 0x1p-53;           /* [0, 1) */
        int e = (int)(algo_rand(&seed) % 61) - 30;        /* 2^-30 .. 2^30 */
        double x = ldexp(0.5 + m, e);
        a[i] = (r & 1) ? -x : x;
    }
}

/* -------------------------------------------------------------- references */

int64_t ref_scan_i64(const int64_t *in, int64_t *out, size_t n, bool exclusive, int64_t init) {
    uint64_t s = exclusive ? (uint64_t)init : 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t x = (uint64_t)in[i];
        if (exclusive) {
            out[i] = (int64_t)s;
            s += x;
        } else {
            s += x;
            out[i] = (int64_t)s;
        }
    }
    return (int64_t)s;
}

int64_t ref_sum_i64(const int64_t *in, size_t n, int64_t init) {
    uint64_t s = (uint64_t)init;
    for (size_t i = 0; i < n; i++) s += (uint64_t)in[i];
    return (int64_t)s;
}

double ref_scan_f64(const double *in, double *out, size_t n, bool exclusive, double init) {
    double s = exclusive ? init : 0.0;
    for (size_t i = 0; i < n; i++) {
        if (exclusive) {
            out[i] = s;
            s += in[i];
        } else {
            s += in[i];
            out[i] = s;
        }
    }
    return s;
}

double ref_sum_f64(const double *in, size_t n, double init) {
    double s = init;
    for (size_t i = 0; i < n; i++) s += in[i];
    return s;
}

static long double ksum_value(const ksum *k) { return k->s + k->c; }

/* (c + k) u sum|x|, plus a sliver for the reference's own rounding. */
static bool within(double got, const ksum *k, size_t c, size_t tile, double *ratio) {
    long double bound = ((long double)(c + tile) * 0x1p-53L + 0x1p-62L) * k->abs;
    long double err = fabsl((long double)got - ksum_value(k));
    if (bound > 0) {
        double r = (double)(err / bound);
        if (r > *ratio) *ratio = r;
    } else if (err > 0 && *ratio < INFINITY) {
        *ratio = INFINITY;
    }
    return err <= bound;
}

size_t check_f64_scan_bound(const double *in, const double *out, size_t n, bool exclusive, double init, double total,
                            double *err_ratio) {
    ksum k = { 0, 0, 0 };
    *err_ratio = 0;
    size_t bad = SIZE_MAX;
    if (exclusive) ksum_add(&k, init);
    for (size_t i = 0; i < n; i++) {
        if (!exclusive) ksum_add(&k, in[i]);
        if (!within(out[i], &k, ALGO_SCAN_BOUND, i / ALGO_TILE, err_ratio) && bad == SIZE_MAX) bad = i;
        if (exclusive) ksum_add(&k, in[i]);
    }
    if (!within(total, &k, ALGO_SCAN_BOUND, n ? (n - 1) / ALGO_TILE : 0, err_ratio) && bad == SIZE_MAX) bad = n;
    return bad;
}

bool check_f64_sum_bound(const double *in, size_t n, double init, double got, double *err_ratio) {
    ksum k = { 0, 0, 0 };
    *err_ratio = 0;
    ksum_add(&k, init);
    for (size_t i = 0; i < n; i++) ksum_add(&k, in[i]);
    return within(got, &k, ALGO_REDUCE_BOUND, (n + ALGO_TILE - 1) / ALGO_TILE, err_ratio);
}

size_t first_diff_i64(const int64_t *a, const int64_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) return i;
    return SIZE_MAX;
}

size_t first_diff_f64(const double *a, const double *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(double)) != 0) return i;
    return SIZE_MAX;
}

/* ---------------------------------------------------------------- monoids */

const m22 m22_identity = { 1, 0, 0, 1 };

void m22_combine(void *ctx, void *acc, const void *x) {
    (void)ctx;
    m22 *p = acc;
    const m22 *q = x;
    m22 r = { p->a * q->a + p->b * q->c, p->a * q->b + p->b * q->d, p->c * q->a + p->d * q->c,
              p->c * q->b + p->d * q->d };
    *p = r;
}

void fill_m22(m22 *a, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        /* small entries keep some structure visible in a failure message;
         * the products still wrap after a few dozen elements */
        a[i].a = algo_rand(&seed) % 7;
        a[i].b = algo_rand(&seed) % 7;
        a[i].c = algo_rand(&seed) % 7;
        a[i].d = algo_rand(&seed) % 7 + 1;
    }
}

const aff200 aff200_identity = { { { 1, 0 }, { 1, 0 }, { 1, 0 }, { 1, 0 }, { 1, 0 }, { 1, 0 }, { 1, 0 }, { 1, 0 },
                                   { 1, 0 }, { 1, 0 }, { 1, 0 }, { 1, 0 } },
                                 0 };

/* acc then x: t -> x.a * (acc.a * t + acc.b) + x.b */
void aff200_combine(void *ctx, void *acc, const void *x) {
    (void)ctx;
    aff200 *p = acc;
    const aff200 *q = x;
    for (int j = 0; j < 12; j++) {
        uint64_t a = q->f[j].a * p->f[j].a, b = q->f[j].a * p->f[j].b + q->f[j].b;
        p->f[j].a = a;
        p->f[j].b = b;
    }
    p->sum += q->sum;
}

void fill_aff200(aff200 *a, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        for (int j = 0; j < 12; j++) {
            a[i].f[j].a = algo_rand(&seed) | 1;
            a[i].f[j].b = algo_rand(&seed);
        }
        a[i].sum = algo_rand(&seed);
    }
}

const uint8_t aff8_identity = 0x10;

void aff8_combine(void *ctx, void *acc, const void *x) {
    (void)ctx;
    uint8_t *p = acc;
    uint8_t q = *(const uint8_t *)x;
    unsigned a1 = *p >> 4, b1 = *p & 15, a2 = q >> 4, b2 = q & 15;
    *p = (uint8_t)((((a2 * a1) & 15) << 4) | ((a2 * b1 + b2) & 15));
}

void fill_aff8(uint8_t *a, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        uint64_t r = algo_rand(&seed);
        a[i] = (uint8_t)((((r & 7) * 2 + 1) << 4) | ((r >> 8) & 15));
    }
}

const big4k big4k_identity = { { 1, 0, 0, 1 }, { 0 } };

void big4k_combine(void *ctx, void *acc, const void *x) {
    big4k *p = acc;
    const big4k *q = x;
    m22_combine(ctx, &p->m, &q->m);
    for (int j = 0; j < 508; j++) p->v[j] += q->v[j];
}

void fill_big4k(big4k *a, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        a[i].m.a = algo_rand(&seed) % 7;
        a[i].m.b = algo_rand(&seed) % 7;
        a[i].m.c = algo_rand(&seed) % 7;
        a[i].m.d = algo_rand(&seed) % 7 + 1;
        for (int j = 0; j < 508; j++) a[i].v[j] = algo_rand(&seed);
    }
}

void ref_fold(const ex_monoid *m, const void *in, void *out, size_t n, bool exclusive, const void *init, void *total) {
    unsigned char acc[EX_MONOID_MAX_SIZE], tmp[EX_MONOID_MAX_SIZE];
    size_t sz = m->size;
    memcpy(acc, exclusive ? init : m->identity, sz);
    for (size_t i = 0; i < n; i++) {
        const unsigned char *x = (const unsigned char *)in + i * sz;
        memcpy(tmp, x, sz);
        if (exclusive && out) memcpy((unsigned char *)out + i * sz, acc, sz);
        m->combine(m->ctx, acc, tmp);
        if (!exclusive && out) memcpy((unsigned char *)out + i * sz, acc, sz);
    }
    if (total) memcpy(total, acc, sz);
}

/* ------------------------------------------------------ stop during a run */

void algo_stop_ctx_init(algo_stop_ctx *c, ex_stop_source *src, bool external) {
    memset(c, 0, sizeof *c);
    c->src = src;
    c->external = external;
}

void algo_stop_combine(void *ctx, void *acc, const void *x) {
    algo_stop_ctx *c = ctx;
    uint64_t v = *(const uint64_t *)x;
    atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    if (v == ALGO_STOP_MARK && !atomic_exchange(&c->reached, 1)) {
        if (!c->external) {
            ex_stop_source_request_stop(c->src);
        } else {
            double end = test_now_s() + 20;
            while (!atomic_load(&c->requested) && test_now_s() < end) sched_yield();
            if (!atomic_load(&c->requested)) atomic_store(&c->timed_out, 1);
        }
    }
    *(uint64_t *)acc += v;
}

void *algo_stopper_main(void *ctx) {
    algo_stop_ctx *c = ctx;
    double end = test_now_s() + 20;
    while (!atomic_load(&c->reached) && test_now_s() < end) sched_yield();
    ex_stop_source_request_stop(c->src);
    atomic_store(&c->requested, 1);
    return NULL;
}
