/* SPDX-License-Identifier: MIT */
/* algo_model.c - the parallel-algorithm nodes' inputs and their serial
 * reference results, shared by the harness (which passes the inputs to
 * cexec and checks the outputs) and the reference interpreter (which needs
 * the value the node's converter sends).
 *
 * What cexec promises (algorithms.h, docs/algorithms.md) and how it is
 * compared here:
 *  - int64 scans and reductions are exact and wrap: compared element for
 *    element with a serial loop on uint64_t;
 *  - double results follow a fixed order of operations that depends only on
 *    n, so they are bit-identical on every scheduler; they differ from the
 *    serial loop by rounding only.  Inputs that are multiples of 2^-8 of
 *    small magnitude sum exactly in any order: compared with ==.  Inputs of
 *    many magnitudes (AF_WIDE) are compared bit for bit with a run of the
 *    same algorithm on the inline scheduler (the harness does that run
 *    before the graph), and that run is checked against the documented
 *    error bound around a compensated long double serial sum;
 *  - the generic forms only re-associate: an associative, non-commutative
 *    monoid (affine maps) is compared element for element. */
#include "graph.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

#define TILE_ELEMS_8 16384u  /* 128 KiB of 8-byte elements: the scans' tile (docs/algorithms.md) */

static uint64_t splitmix(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int64_t g_hash(const int64_t *v, size_t n) {
    uint64_t h = n, p = 1;
    for (size_t i = 0; i < n; i++) {
        p *= 0x100000001B3ull;
        h += (uint64_t)v[i] * p;
    }
    return (int64_t)h;
}

void g_affine_combine(void *ctx, void *acc, const void *x) {
    (void)ctx;
    g_affine p, q;
    memcpy(&p, acc, sizeof p);
    memcpy(&q, x, sizeof q);
    g_affine r = { q.a * p.a, q.a * p.b + q.b };
    memcpy(acc, &r, sizeof r);
}

size_t g_algo_gsize(const g_node *nd) {
    static const size_t sizes[4] = { 16, 1024, 4096, 16 };
    return sizes[(nd->aflags >> AF_GSIZE_SHIFT) & 3];
}

static bool is_generic(unsigned op) { return op >= AO_ISCAN_GEN && op <= AO_REDUCE_GEN; }
static bool is_f64(unsigned op) { return op >= AO_ISCAN_F64 && op <= AO_REDUCE_F64; }
static bool wide_inputs(const g_node *nd) {
    return (is_f64(nd->op) || nd->op == AO_TRANSFORM_F64) && (nd->aflags & AF_WIDE);
}

bool g_algo_wide(const g_node *nd) { return is_f64(nd->op) && (nd->aflags & AF_WIDE); }

size_t g_algo_in_size(const g_node *nd) {
    if (is_generic(nd->op)) return g_algo_gsize(nd);
    if (nd->op == AO_TRANSFORM) return (nd->aflags & AF_INPLACE) ? 8 : 4;
    return 8;
}

size_t g_algo_out_size(const g_node *nd) {
    switch (nd->op) {
    case AO_REDUCE_I64: case AO_REDUCE_F64: case AO_REDUCE_GEN: return 0;
    case AO_ISCAN_GEN: case AO_ESCAN_GEN: return g_algo_gsize(nd);
    default: return 8;
    }
}

bool g_algo_invalid(const g_node *nd) { return (nd->aflags & (AF_BAD_NULL | AF_BAD_OVERLAP)) != 0; }

int g_algo_fail_code(const g_node *nd) { return G_EUSER + (int)(nd->seed & 15); }

void g_algo_inputs(const g_node *nd, void *in) {
    uint64_t st = nd->seed * 0x2545F4914F6CDD1Dull + nd->op;
    size_t esz = g_algo_in_size(nd);
    unsigned char *p = in;
    for (size_t i = 0; i < nd->n; i++, p += esz) {
        uint64_t r = splitmix(&st);
        if (is_generic(nd->op)) {
            memset(p, 0, esz);
            g_affine e = { r | 1, splitmix(&st) };
            memcpy(p, &e, sizeof e);
        } else if (is_f64(nd->op) || nd->op == AO_TRANSFORM_F64) {
            double d = wide_inputs(nd) ? ldexp((double)(int32_t)r, (int)((r >> 40) % 61) - 61)
                                   : (double)(int8_t)(r >> 8) / 256.0;
            memcpy(p, &d, sizeof d);
        } else if (esz == 4) {
            int32_t v = (int32_t)r;
            memcpy(p, &v, sizeof v);
        } else {
            int64_t v = (r & 3) == 0 ? (int64_t)r : (int64_t)(int16_t)(r >> 16);
            memcpy(p, &v, sizeof v);
        }
    }
}

static g_affine affine_at(const void *base, size_t esz, size_t i) {
    g_affine e;
    memcpy(&e, (const unsigned char *)base + i * esz, sizeof e);
    return e;
}

/* The generic forms' init (exclusive scan) and the identity. */
static g_affine affine_init(const g_node *nd) { return (g_affine){ 2 * (uint64_t)nd->k + 1, (uint64_t)nd->k }; }

/* A scan's output element i: written (when out is wanted) and folded into
 * the value the converter sends (sum of 3a + b). */
static void emit(void *out, size_t esz, size_t i, g_affine e, uint64_t *fold) {
    if (out) {
        memset((unsigned char *)out + i * esz, 0, esz);
        memcpy((unsigned char *)out + i * esz, &e, sizeof e);
    }
    *fold += e.a * 3 + e.b;
}

static void expect_generic(const g_node *nd, const void *in, void *out, int64_t *value) {
    size_t esz = g_algo_gsize(nd);
    g_affine acc = nd->op == AO_ESCAN_GEN ? affine_init(nd) : (g_affine){ 1, 0 };
    uint64_t fold = 0;
    for (size_t i = 0; i < nd->n; i++) {
        g_affine x = affine_at(in, esz, i);
        if (nd->op == AO_ESCAN_GEN) emit(out, esz, i, acc, &fold);
        g_affine_combine(NULL, &acc, &x);
        if (nd->op == AO_ISCAN_GEN) emit(out, esz, i, acc, &fold);
    }
    *value = nd->op == AO_REDUCE_GEN ? (int64_t)(acc.a * 3 + acc.b) : (int64_t)fold;
}

void g_algo_expect(const g_node *nd, const void *in, void *out, int64_t *value) {
    size_t n = nd->n;
    *value = 0;
    if (is_generic(nd->op)) {
        expect_generic(nd, in, out, value);
        return;
    }
    switch (nd->op) {
    case AO_ISCAN_I64: case AO_ESCAN_I64: case AO_REDUCE_I64: {
        const int64_t *x = in;
        int64_t *y = out;
        uint64_t s = nd->op == AO_ISCAN_I64 ? 0 : (uint64_t)nd->k;
        for (size_t i = 0; i < n; i++) {
            if (nd->op == AO_ESCAN_I64 && y) y[i] = (int64_t)s;
            s += (uint64_t)x[i];
            if (nd->op == AO_ISCAN_I64 && y) y[i] = (int64_t)s;
        }
        *value = (int64_t)s;
        break;
    }
    case AO_ISCAN_F64: case AO_ESCAN_F64: case AO_REDUCE_F64: {
        const double *x = in;
        double *y = out;
        double s = nd->op == AO_ISCAN_F64 ? 0.0 : (double)(int8_t)nd->k / 256.0;
        for (size_t i = 0; i < n; i++) {
            if (nd->op == AO_ESCAN_F64 && y) y[i] = s;
            s += x[i];
            if (nd->op == AO_ISCAN_F64 && y) y[i] = s;
        }
        *value = g_algo_wide(nd) ? (int64_t)n : (int64_t)(s * 256.0);
        break;
    }
    case AO_FOR_EACH: case AO_TRANSFORM: {
        uint64_t s = 0;
        for (size_t i = 0; i < n; i++) {
            int64_t xi;
            if (g_algo_in_size(nd) == 4) {
                int32_t v;
                memcpy(&v, (const unsigned char *)in + 4 * i, 4);
                xi = v;
            } else {
                memcpy(&xi, (const unsigned char *)in + 8 * i, 8);
            }
            uint64_t yi = nd->op == AO_FOR_EACH ? (uint64_t)xi * 3 + 1 : (uint64_t)xi * 7 - 1;
            if (out) ((int64_t *)out)[i] = (int64_t)yi;
            s += yi;
        }
        *value = (int64_t)s;
        break;
    }
    case AO_TRANSFORM_F64: {
        const double *x = in;
        uint64_t s = 0;
        for (size_t i = 0; i < n; i++) {
            double yi = x[i] * 2.0 + 1.0;
            uint64_t bits;
            memcpy(&bits, &yi, sizeof bits);
            if (out) ((double *)out)[i] = yi;
            s += bits;
        }
        *value = (int64_t)s;
        break;
    }
    default: break;
    }
}

/* Neumaier-compensated long double sums: an error of about 2^-64 sum|x|,
 * far below the bound being checked. */
typedef struct csum { long double s, c, abs; } csum;

static void csum_add(csum *k, double x) {
    long double t = k->s + x;
    if (fabsl(k->s) >= fabsl((long double)x)) k->c += (k->s - t) + x;
    else k->c += ((long double)x - t) + k->s;
    k->s = t;
    k->abs += fabsl((long double)x);
}

static bool within(double got, const csum *k, double factor) {
    long double exact = k->s + k->c;
    long double bound = factor * ldexpl(k->abs, -53) * (1.0L + 1e-9L) + ldexpl(k->abs, -60);
    return fabsl((long double)got - exact) <= bound;
}

bool g_algo_f64_check(const g_node *nd, const double *in, const double *out, size_t *bad) {
    size_t n = nd->n;
    csum k = { 0, 0, 0 };
    if (nd->op != AO_ISCAN_F64) csum_add(&k, (double)(int8_t)nd->k / 256.0);
    if (nd->op == AO_REDUCE_F64) {
        for (size_t i = 0; i < n; i++) csum_add(&k, in[i]);
        double tiles = (double)((n + TILE_ELEMS_8 - 1) / TILE_ELEMS_8);
        *bad = 0;
        return within(out[0], &k, 1029.0 + tiles);
    }
    for (size_t i = 0; i < n; i++) {
        if (nd->op == AO_ISCAN_F64) csum_add(&k, in[i]);
        if (!within(out[i], &k, 3080.0 + (double)(i / TILE_ELEMS_8))) {
            *bad = i;
            return false;
        }
        if (nd->op == AO_ESCAN_F64) csum_add(&k, in[i]);
    }
    return true;
}

/* ------------------------------------------------ the harness's hot loops */

/* These run per element; this file is built without the fuzzer's
 * comparison tracing (mk/fuzz.mk), which cost most of a big input's time. */

static bool words_equal(const unsigned char *a, const unsigned char *b, size_t bytes) {
    for (size_t k = 0; k + 8 <= bytes; k += 8) {
        uint64_t x, y;
        memcpy(&x, a + k, 8);
        memcpy(&y, b + k, 8);
        if (x != y) return false;
    }
    return true;
}

size_t g_algo_first_diff(const void *a, const void *b, size_t n, size_t esz, size_t cmp) {
    for (size_t i = 0; i < n; i++)
        if (!words_equal((const unsigned char *)a + i * esz, (const unsigned char *)b + i * esz, cmp)) return i;
    return n;
}

size_t g_algo_first_value_diff(const double *a, const double *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(a[i] == b[i])) return i;
    return n;
}

size_t g_algo_not_once(atomic_int *hits, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (atomic_load_explicit(&hits[i], memory_order_relaxed) != 1) return i;
    return n;
}

int g_algo_for_each_range(const g_node *nd, const int64_t *in, int64_t *out, atomic_int *hits, size_t begin, size_t end,
                          size_t *at) {
    for (size_t i = begin; i < end; i++) {
        *at = i;
        if (i >= nd->n) return FE_OUT_OF_RANGE;
        if (atomic_fetch_add_explicit(&hits[i], 1, memory_order_relaxed)) return FE_TWICE;
        out[i] = (int64_t)((uint64_t)in[i] * 3 + 1);
        if (i == nd->fail_idx) return FE_FAIL;
    }
    return FE_OK;
}

void g_algo_transform_fn(void *ctx, const void *x, void *y) {
    const g_node *nd = ctx;
    int64_t v;
    if (g_algo_in_size(nd) == 4) {
        int32_t w;
        memcpy(&w, x, sizeof w);
        v = w;
    } else {
        memcpy(&v, x, sizeof v);
    }
    v = (int64_t)((uint64_t)v * 7 - 1);
    memcpy(y, &v, sizeof v);
}

double g_algo_f64_fn(void *ctx, double x) {
    (void)ctx;
    return x * 2.0 + 1.0;
}
