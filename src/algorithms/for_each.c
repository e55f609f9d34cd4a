/* SPDX-License-Identifier: MIT */
/* for_each.c - for_each_index and transform: independent tiles, no chain;
 * the tile counter balances uneven work. */
#include "algorithms/exi_algo.h"
#include "core/exi_sender.h"

typedef enum loop_kind { LOOP_INDEX, LOOP_TRANSFORM, LOOP_TRANSFORM_F64 } loop_kind;

typedef struct loop_sender {
    exi_tiled_sender t;
    loop_kind lk;
    ex_index_range_fn index_fn;
    ex_transform_fn transform_fn;
    double (*f64_fn)(void *ctx, double x);
    void *ctx;
    const void *in;
    void *out;
    size_t in_size, out_size;
} loop_sender;

static ex_error loop_tile(exi_tiled_op *o, unsigned part, size_t k, size_t b, size_t e, size_t nb, size_t ne) {
    (void)part, (void)k, (void)nb, (void)ne;
    const loop_sender *s = (const loop_sender *)o->s;
    switch (s->lk) {
    case LOOP_INDEX: {
        ex_error err = s->index_fn(s->ctx, b, e);
        if (err.code && !err.msg) err.msg = "ex_for_each_index: the function failed";
        return err;
    }
    case LOOP_TRANSFORM: {
        const unsigned char *in = s->in;
        unsigned char *out = s->out;
        for (size_t i = b; i < e; i++) s->transform_fn(s->ctx, in + i * s->in_size, out + i * s->out_size);
        return ex_ok();
    }
    case LOOP_TRANSFORM_F64: {
        const double *in = s->in;
        double *out = s->out;
        for (size_t i = b; i < e; i++) out[i] = s->f64_fn(s->ctx, in[i]);
        return ex_ok();
    }
    }
    return ex_ok();
}

static size_t loop_finish(exi_tiled_op *o, ex_value *out) {
    (void)o, (void)out;
    return 0;
}

static const exi_tiled_kind loop_kind_vt = { false, loop_tile, loop_finish, EXI_TILES_PER_PART };
static const ex_sender_vtable for_each_vt = { "ex_for_each_index", exi_tiled_connect, exi_tiled_attrs,
                                              exi_tiled_destroy, &ex_tag_for_each_index };
static const ex_sender_vtable transform_vt = { "ex_transform", exi_tiled_connect, exi_tiled_attrs, exi_tiled_destroy,
                                               &ex_tag_transform };

/* About 16 tiles per participant (the counter evens out uneven tiles), and
 * no tile below `least` indices. */
static size_t default_grain(ex_scheduler sch, size_t n, size_t least) {
    size_t parts = exi_scheduler_concurrency(sch);
    size_t g = n / (16 * parts) + 1;
    return g < least ? least : g;
}

static loop_sender *loop_alloc(const ex_sender_vtable *vt, loop_kind lk, ex_scheduler sch, size_t n, size_t grain) {
    exi_tiled_sender *t = exi_tiled_alloc(vt, sizeof(loop_sender), &loop_kind_vt, sch, n, grain, EX_SIG0);
    if (!t) return NULL;
    loop_sender *s = (loop_sender *)t;
    s->lk = lk;
    s->index_fn = NULL;
    s->transform_fn = NULL;
    s->f64_fn = NULL;
    s->ctx = NULL;
    s->in = NULL;
    s->out = NULL;
    s->in_size = s->out_size = 0;
    return s;
}

ex_sender *ex_for_each_index(ex_scheduler sch, size_t n, size_t grain, ex_index_range_fn fn, void *ctx) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_for_each_index");
    if (!ex_scheduler_valid(sch)) return exi_algo_reject(msgs, BAD_SCHED);
    if (!fn) return exi_algo_reject(msgs, BAD_FN);
    loop_sender *s = loop_alloc(&for_each_vt, LOOP_INDEX, sch, n, grain ? grain : default_grain(sch, n, 1));
    if (!s) return exi_oom_sender();
    s->index_fn = fn;
    s->ctx = ctx;
    return exi_tiled_finish(&s->t);
}

ex_sender *ex_transform(ex_scheduler sch, const void *in, size_t in_size, void *out, size_t out_size, size_t n,
                        ex_transform_fn fn, void *ctx) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_transform");
    int bad = !in_size || !out_size ? BAD_SIZE : exi_check_arrays(sch, in, in_size, out, out_size, n);
    if (!bad && !fn) bad = BAD_FN;
    if (bad) return exi_algo_reject(msgs, bad);
    loop_sender *s = loop_alloc(&transform_vt, LOOP_TRANSFORM, sch, n, default_grain(sch, n, 256));
    if (!s) return exi_oom_sender();
    s->transform_fn = fn;
    s->ctx = ctx;
    s->in = in;
    s->out = out;
    s->in_size = in_size;
    s->out_size = out_size;
    return exi_tiled_finish(&s->t);
}

ex_sender *ex_transform_f64(ex_scheduler sch, const double *in, double *out, size_t n,
                            double (*fn)(void *ctx, double x), void *ctx) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_transform_f64");
    int bad = exi_check_arrays(sch, in, sizeof(double), out, sizeof(double), n);
    if (!bad && !fn) bad = BAD_FN;
    if (bad) return exi_algo_reject(msgs, bad);
    loop_sender *s = loop_alloc(&transform_vt, LOOP_TRANSFORM_F64, sch, n, default_grain(sch, n, 256));
    if (!s) return exi_oom_sender();
    s->f64_fn = fn;
    s->ctx = ctx;
    s->in = in;
    s->out = out;
    return exi_tiled_finish(&s->t);
}
