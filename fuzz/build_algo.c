/* SPDX-License-Identifier: MIT */
/* build_algo.c - the parallel-algorithm nodes (G_ALGO): their arrays, made
 * before the run and freed after it, the algorithm sender, and the
 * converter that checks the output against the serial model
 * (algo_model.c) and sends one int. */
#include "harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static ex_error algo_range_fn(void *ctx, size_t begin, size_t end) {
    const g_node *nd = ctx;
    unsigned i = sg_node_index(nd);
    algo_data *d = &G.algo[i];
    size_t at;
    switch (g_algo_for_each_range(nd, d->orig, d->out, d->hits, begin, end, &at)) {
    case FE_FAIL: return ex_err(g_algo_fail_code(nd), "fuzz: for_each error");
    case FE_OUT_OF_RANGE: sg_cb_fail(i, "ex_for_each_index called its function beyond n", at); break;
    case FE_TWICE: sg_cb_fail(i, "ex_for_each_index ran an index twice", at); break;
    default: break;
    }
    return ex_ok();
}

/* The algorithm of node nd on sch over (in, out), with the node's bad
 * argument when it has one. */
static ex_sender *algo_sender(const g_node *nd, algo_data *d, ex_scheduler sch, void *in, void *out) {
    size_t n = nd->n, isz = g_algo_in_size(nd);
    if (nd->aflags & AF_BAD_NULL || ((nd->aflags & AF_BAD_OVERLAP) && !g_algo_out_size(nd))) in = NULL;
    else if (nd->aflags & AF_BAD_OVERLAP) out = (unsigned char *)in + isz;
    double finit = (double)(int8_t)nd->k / 256.0;
    switch (nd->op) {
    case AO_ISCAN_I64: return ex_inclusive_scan_i64(sch, in, out, n);
    case AO_ESCAN_I64: return ex_exclusive_scan_i64(sch, in, out, n, nd->k);
    case AO_REDUCE_I64: return ex_reduce_i64(sch, in, n, nd->k);
    case AO_ISCAN_F64: return ex_inclusive_scan_f64(sch, in, out, n);
    case AO_ESCAN_F64: return ex_exclusive_scan_f64(sch, in, out, n, finit);
    case AO_REDUCE_F64: return ex_reduce_f64(sch, in, n, finit);
    case AO_ISCAN_GEN: return ex_inclusive_scan(sch, &d->m, in, out, n);
    case AO_ESCAN_GEN: return ex_exclusive_scan(sch, &d->m, in, out, n, d->init);
    case AO_REDUCE_GEN: return ex_reduce(sch, &d->m, in, n, d->result);
    case AO_FOR_EACH:
        return ex_for_each_index(sch, n, nd->agrain, (nd->aflags & (AF_BAD_NULL | AF_BAD_OVERLAP)) ? NULL : algo_range_fn,
                                 (void *)nd);
    case AO_TRANSFORM: return ex_transform(sch, in, isz, out, 8, n, g_algo_transform_fn, (void *)nd);
    default: return ex_transform_f64(sch, in, out, n, g_algo_f64_fn, (void *)nd);
    }
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) abort();
    return p;
}

/* g_algo_wide: the same algorithm on the inline scheduler, the run every
 * other scheduler must match bit for bit; checked against the documented
 * error bound here. */
static void algo_inline_run(unsigned i, const g_node *nd, algo_data *d) {
    d->det = xmalloc((nd->n ? nd->n : 1) * sizeof(double));
    ex_result r = ex_sync_wait(algo_sender(nd, d, ex_inline_scheduler(), d->orig, d->det));
    if (r.disposition != EX_DISP_VALUE || r.n != 1 || r.values[0].type != EX_T_DOUBLE) {
        sg_cb_fail(i, "the algorithm on the inline scheduler did not complete with a double", 0);
        ex_result_destroy(&r);
        return;
    }
    d->det_total = r.values[0].as.d;
    ex_result_destroy(&r);
    if (nd->op == AO_REDUCE_F64) d->det[0] = d->det_total;
    size_t bad;
    if (!g_algo_f64_check(nd, d->orig, d->det, &bad)) sg_cb_fail(i, "a double result is outside the documented error bound", bad);
}

/* Makes the arrays of every algorithm node of the graph.  Before the
 * fault allocator is installed: the inline reference run must not fail. */
void sg_algo_prepare(void) {
    for (unsigned i = 0; i < G.g.nnodes; i++) {
        const g_node *nd = &G.g.nodes[i];
        if (nd->kind != G_ALGO) continue;
        algo_data *d = &G.algo[i];
        memset(d, 0, sizeof *d);
        size_t n = nd->n, isz = g_algo_in_size(nd), osz = g_algo_out_size(nd);
        size_t wide = isz > osz ? isz : osz;
        d->orig = xmalloc(n * isz);
        g_algo_inputs(nd, d->orig);
        d->in = xmalloc((n + 1) * wide);  /* + 1: the overlapping output of AF_BAD_OVERLAP */
        memcpy(d->in, d->orig, n * isz);
        if (nd->op == AO_FOR_EACH) osz = 8;
        if (osz) {
            d->out = (nd->aflags & AF_INPLACE) && isz == osz && nd->op != AO_FOR_EACH ? d->in : xmalloc(n * osz);
            if (d->out != d->in) memset(d->out, 0x5a, n * osz);  /* an element never written shows */
            d->expect = xmalloc(n * osz);
        }
        g_algo_expect(nd, d->orig, d->expect, &d->value);
        if (nd->op == AO_FOR_EACH) d->hits = calloc(n ? n : 1, sizeof *d->hits);
        size_t gsz = g_algo_gsize(nd);
        d->identity = calloc(1, gsz);
        d->init = calloc(1, gsz);
        d->result = xmalloc(gsz);
        if (!d->identity || !d->init || (nd->op == AO_FOR_EACH && !d->hits)) abort();
        memset(d->result, 0x5a, gsz);
        g_affine id = { 1, 0 }, init = { 2 * (uint64_t)nd->k + 1, (uint64_t)nd->k };
        memcpy(d->identity, &id, sizeof id);
        memcpy(d->init, &init, sizeof init);
        d->m = (ex_monoid){ gsz, d->identity, g_affine_combine, NULL };
        if (g_algo_wide(nd) && !g_algo_invalid(nd)) algo_inline_run(i, nd, d);
    }
}

void sg_algo_free(void) {
    for (unsigned i = 0; i < G.g.nnodes; i++) {
        if (G.g.nodes[i].kind != G_ALGO) continue;
        algo_data *d = &G.algo[i];
        if (d->out != d->in) free(d->out);
        free(d->in);
        free(d->orig);
        free(d->expect);
        free(d->det);
        free(d->hits);
        free(d->result);
        free(d->identity);
        free(d->init);
        memset(d, 0, sizeof *d);
    }
}

/* First differing element (algo_model.c): into *at; true when none. */
static bool elems_equal(const void *a, const void *b, size_t n, size_t esz, size_t cmp, size_t *at) {
    return (*at = g_algo_first_diff(a, b, n, esz, cmp)) == n;
}

/* Exact doubles compare by value (the algorithm's -0.0 identity may
 * differ from the serial loop's +0.0 in sign). */
static bool doubles_equal(const double *a, const double *b, size_t n, size_t *at) {
    return (*at = g_algo_first_value_diff(a, b, n)) == n;
}

/* The algorithm completed with values: check its output against the
 * reference and send one int for the graph (the reference computes the
 * same from its serial run). */
static ex_error algo_conv(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    const g_node *nd = ctx;
    unsigned i = sg_node_index(nd);
    algo_data *d = &G.algo[i];
    size_t at = 0, cnt = nd->n;
    int64_t v = d->value;
    bool wide = g_algo_wide(nd);
    switch (nd->op) {
    case AO_ISCAN_I64: case AO_ESCAN_I64: case AO_REDUCE_I64:
        if (n != 1 || in[0].type != EX_T_INT) {
            sg_cb_fail(i, "an int64 algorithm completed without one int", n);
            break;
        }
        v = in[0].as.i;
        if (d->out && !elems_equal(d->out, d->expect, cnt, 8, 8, &at)) sg_cb_fail(i, "an int64 scan wrote a wrong element", at);
        break;
    case AO_ISCAN_F64: case AO_ESCAN_F64: case AO_REDUCE_F64: {
        if (n != 1 || in[0].type != EX_T_DOUBLE) {
            sg_cb_fail(i, "a double algorithm completed without one double", n);
            break;
        }
        double total = in[0].as.d;
        if (wide) {
            if (memcmp(&total, &d->det_total, sizeof total) != 0)
                sg_cb_fail(i, "a double result differs from the inline scheduler's bit for bit", cnt);
            if (d->out && !elems_equal(d->out, d->det, cnt, 8, 8, &at))
                sg_cb_fail(i, "a double scan element differs from the inline scheduler's bit for bit", at);
        } else {
            if (!(fabs(total) < 0x1p50)) {
                sg_cb_fail(i, "an exact double sum is out of range", cnt);
                break;
            }
            v = (int64_t)(total * 256.0);
            if (d->out && !doubles_equal(d->out, d->expect, cnt, &at)) sg_cb_fail(i, "an exact double scan wrote a wrong element", at);
        }
        break;
    }
    case AO_REDUCE_GEN: {
        g_affine r;
        if (n != 1 || in[0].type != EX_T_PTR || in[0].as.p != d->result) {
            sg_cb_fail(i, "ex_reduce did not complete with a pointer to its result", n);
            break;
        }
        memcpy(&r, d->result, sizeof r);
        v = (int64_t)(r.a * 3 + r.b);
        break;
    }
    default:
        if (n != 0) sg_cb_fail(i, "an algorithm without a value completed with values", n);
        if (nd->op == AO_FOR_EACH && (at = g_algo_not_once(d->hits, cnt)) != cnt)
            sg_cb_fail(i, "ex_for_each_index completed without running every index once", at);
        size_t osz = g_algo_out_size(nd);
        size_t cmp = nd->op == AO_ISCAN_GEN || nd->op == AO_ESCAN_GEN ? sizeof(g_affine) : osz;
        if (!elems_equal(d->out, d->expect, cnt, osz, cmp, &at)) {
            sg_cb_fail(i, "an algorithm wrote a wrong element", at);
            v ^= 1;
        }
        break;
    }
    out[0] = ex_int(v);
    return ex_ok();
}

ex_sender *sg_build_algo(unsigned i) {
    const g_node *nd = &G.g.nodes[i];
    algo_data *d = &G.algo[i];
    ex_sender *s = algo_sender(nd, d, sg_sched_of(nd->sched), d->in, d->out);
    /* Opaque: whether the algorithm names its completion scheduler depends
     * on how many participants it uses (not specified); hidden, the
     * reference needs no model of it. */
    return ex_then(sg_wrap(s, NO_REC, true), algo_conv, (void *)nd, EX_SIG_VARIADIC, sg_int_sig(1));
}
