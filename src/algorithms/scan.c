/* SPDX-License-Identifier: MIT */
/* scan.c - inclusive and exclusive scans on double, int64 and generic
 * elements.  One pass over memory per tile: reduce the tile (typed: during
 * the scan of the participant's previous tile, which also brings it into
 * L2), take the running prefix from the previous tile and pass it on, then
 * scan the tile from cache (a chained scan: the prefix is handed from tile
 * to tile in index order, so the rounding never depends on timing). */
#include "algorithms/exi_algo.h"
#include "algorithms/exi_kernels.h"
#include "core/exi_sender.h"

typedef struct scan_sender {
    exi_tiled_sender t;
    exi_elem_kind ek;
    bool exclusive, stream;
    bool init_given;     /* exclusive, or inclusive from an initial value */
    const void *in;
    void *out;
    exi_carry init;      /* typed: tile 0's carry (-0.0 or 0 for a plain inclusive scan) */
    ex_monoid m;         /* generic: identity points at `bytes` */
    const unsigned char *init_bytes;
    unsigned char bytes[];  /* identity, then init (generic, when given) */
} scan_sender;

/* Generic scratch: slot 0 is the chained prefix; participant p owns slots
 * 1 + 3p (tile total), 2 + 3p (carry), 3 + 3p (a copy of the element being
 * replaced, for in-place exclusive scans). */
enum { SLOTS_SHARED = 1, SLOTS_PER_PART = 3 };

/* Typed tiles.  The tile's sum is the one this participant's scan of its
 * previous tile computed on the way (blocks[part].sum), or, for its first
 * tile, a pass of the sum kernel; the scan then sums the participant's
 * next tile while it computes (exi_kernels.h), unless that is the last
 * tile, whose sum nobody needs. */
static void typed_tile(exi_tiled_op *o, unsigned part, size_t k, size_t b, size_t e, size_t nb, size_t ne) {
    const scan_sender *s = (const scan_sender *)o->s;
    exi_tiled_block *mine = &o->blocks[part];
    bool last = k + 1 == s->t.ntiles, have = mine->sum_tile == k;
    bool sum_next = ne > nb && ne < s->t.n;  /* a next tile, not the last one */
    size_t n = e - b;
    if (s->ek == ELEM_F64) {
        const double *in = (const double *)s->in + b;
        double *out = (double *)s->out + b;
        /* No prefetch: the scan of this participant's previous tile
         * brought this one into L2 (exi_scan_f64's next). */
        double agg = last ? 0.0 : have ? mine->sum.d : exi_sum_f64(in, n, false);
        exi_tiled_chain_wait(o, k);
        double carry = k ? o->prefix.d : s->init.d;
        if (!last) o->prefix.d = carry + agg;
        exi_tiled_chain_publish(o, k);
        const double *next = ne > nb ? (const double *)s->in + nb : NULL;
        double total = exi_scan_f64(in, out, n, carry, s->exclusive, s->stream, next, ne - nb,
                                    sum_next ? &mine->sum.d : NULL);
        if (last) o->total.d = total;
    } else {
        const uint64_t *in = (const uint64_t *)s->in + b;
        uint64_t *out = (uint64_t *)s->out + b;
        uint64_t agg = last ? 0 : have ? mine->sum.u : exi_sum_u64(in, n, false);
        exi_tiled_chain_wait(o, k);
        uint64_t carry = k ? o->prefix.u : s->init.u;
        if (!last) o->prefix.u = carry + agg;
        exi_tiled_chain_publish(o, k);
        const uint64_t *next = ne > nb ? (const uint64_t *)s->in + nb : NULL;
        uint64_t total = exi_scan_u64(in, out, n, carry, s->exclusive, s->stream, next, ne - nb,
                                      sum_next ? &mine->sum.u : NULL);
        if (last) o->total.u = total;
    }
    mine->sum_tile = sum_next ? nb / s->t.tile : UINT64_MAX;
    if (s->stream) exi_stream_fence();  /* the output is complete before completion is signalled */
}

static void generic_tile(exi_tiled_op *o, unsigned part, size_t k, size_t b, size_t e) {
    const scan_sender *s = (const scan_sender *)o->s;
    const ex_monoid *m = &s->m;
    size_t sz = m->size;
    bool last = k + 1 == s->t.ntiles;
    const unsigned char *in = (const unsigned char *)s->in + b * sz;
    unsigned char *out = (unsigned char *)s->out + b * sz;
    unsigned char *prefix = exi_slot_at(o->scratch, sz, 0);
    unsigned char *agg = exi_slot_at(o->scratch, sz, SLOTS_SHARED + SLOTS_PER_PART * part);
    unsigned char *carry = agg + exi_slot(sz), *tmp = carry + exi_slot(sz);
    if (!last) {
        memcpy(agg, m->identity, sz);
        exi_fold(m, agg, in, e - b);
    }
    exi_tiled_chain_wait(o, k);
    memcpy(carry, k ? prefix : s->init_bytes ? s->init_bytes : m->identity, sz);
    if (!last) {
        if (!k) memcpy(prefix, carry, sz);
        m->combine(m->ctx, prefix, agg);
    }
    exi_tiled_chain_publish(o, k);
    for (size_t i = 0; i < e - b; i++) {
        const unsigned char *x = in + i * sz;
        unsigned char *y = out + i * sz;
        if (s->exclusive) {
            memcpy(tmp, x, sz);  /* x may be y */
            memcpy(y, carry, sz);
            m->combine(m->ctx, carry, tmp);
        } else {
            m->combine(m->ctx, carry, x);
            memcpy(y, carry, sz);
        }
    }
}

static ex_error scan_tile(exi_tiled_op *o, unsigned part, size_t k, size_t b, size_t e, size_t nb, size_t ne) {
    const scan_sender *s = (const scan_sender *)o->s;
    if (s->ek == ELEM_GENERIC) generic_tile(o, part, k, b, e);
    else typed_tile(o, part, k, b, e, nb, ne);
    return ex_ok();
}

static size_t scan_finish(exi_tiled_op *o, ex_value *out) {
    const scan_sender *s = (const scan_sender *)o->s;
    bool empty = s->t.n == 0;
    switch (s->ek) {
    case ELEM_F64:
        out[0] = ex_double(empty ? (s->init_given ? s->init.d : 0.0) : o->total.d);
        return 1;
    case ELEM_I64:
        out[0] = ex_int((int64_t)(empty ? (s->init_given ? s->init.u : 0) : o->total.u));
        return 1;
    case ELEM_GENERIC:
        return 0;
    }
    return 0;
}

static const exi_tiled_kind scan_kind = { true, scan_tile, scan_finish, EXI_SCAN_TILES_PER_PART };
static const ex_sender_vtable inclusive_vt = { "ex_inclusive_scan", exi_tiled_connect, exi_tiled_attrs, exi_tiled_destroy,
                                               &ex_tag_inclusive_scan };
static const ex_sender_vtable exclusive_vt = { "ex_exclusive_scan", exi_tiled_connect, exi_tiled_attrs, exi_tiled_destroy,
                                               &ex_tag_exclusive_scan };

static scan_sender *scan_alloc(bool exclusive, size_t extra, ex_scheduler sch, size_t n, size_t elem, ex_sig sig) {
    exi_tiled_sender *t = exi_tiled_alloc(exclusive ? &exclusive_vt : &inclusive_vt, sizeof(scan_sender) + extra,
                                          &scan_kind, sch, n, exi_tile_elems(elem), sig);
    if (!t) return NULL;
    scan_sender *s = (scan_sender *)t;
    s->exclusive = exclusive;
    s->stream = false;
    s->init_given = false;
    s->init.u = 0;
    s->init_bytes = NULL;
    memset(&s->m, 0, sizeof s->m);
    return s;
}

/* init is tile 0's carry; init_given says whether it is the caller's
 * (an empty scan then completes with it) or the identity. */
static ex_sender *typed_scan(const char *const *msgs, exi_elem_kind ek, bool exclusive, ex_scheduler sch, const void *in,
                             void *out, size_t n, exi_carry init, bool init_given) {
    int bad = exi_check_arrays(sch, in, 8, out, 8, n);
    if (bad) return exi_algo_reject(msgs, bad);
    scan_sender *s = scan_alloc(exclusive, 0, sch, n, 8, EX_SIG(ek == ELEM_F64 ? EX_T_DOUBLE : EX_T_INT));
    if (!s) return exi_oom_sender();
    s->ek = ek;
    s->in = in;
    s->out = out;
    s->init = init;
    s->init_given = init_given;
    s->stream = n * 8 >= exi_stream_threshold();
    return exi_tiled_finish(&s->t);
}

static ex_sender *generic_scan(const char *const *msgs, bool exclusive, bool init_given, ex_scheduler sch,
                               const ex_monoid *m, const void *in, void *out, size_t n, const void *init) {
    int bad = exi_check_monoid(m);
    if (!bad) bad = exi_check_arrays(sch, in, m->size, out, m->size, n);
    if (!bad && init_given && !init) bad = BAD_INIT;
    if (bad) return exi_algo_reject(msgs, bad);
    scan_sender *s = scan_alloc(exclusive, (init_given ? 2 : 1) * m->size, sch, n, m->size, EX_SIG0);
    if (!s) return exi_oom_sender();
    s->ek = ELEM_GENERIC;
    s->in = in;
    s->out = out;
    s->m = *m;
    memcpy(s->bytes, m->identity, m->size);
    s->m.identity = s->bytes;
    if (init_given) {
        memcpy(s->bytes + m->size, init, m->size);
        s->init_bytes = s->bytes + m->size;
        s->init_given = true;
    }
    s->t.scratch_size = exi_slot(m->size) * (SLOTS_SHARED + SLOTS_PER_PART * (size_t)s->t.parts);
    return exi_tiled_finish(&s->t);
}

/* -0.0 is the identity of IEEE addition for every x, signed zeros
 * included: the first carry of a plain inclusive scan. */
static const exi_carry f64_identity = { .d = -0.0 };
static const exi_carry i64_identity = { .u = 0 };

ex_sender *ex_inclusive_scan_f64(ex_scheduler sch, const double *in, double *out, size_t n) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_inclusive_scan_f64");
    return typed_scan(msgs, ELEM_F64, false, sch, in, out, n, f64_identity, false);
}

ex_sender *ex_inclusive_scan_init_f64(ex_scheduler sch, const double *in, double *out, size_t n, double init) {
    exi_carry c = { .d = init };
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_inclusive_scan_init_f64");
    return typed_scan(msgs, ELEM_F64, false, sch, in, out, n, c, true);
}

ex_sender *ex_exclusive_scan_f64(ex_scheduler sch, const double *in, double *out, size_t n, double init) {
    exi_carry c = { .d = init };
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_exclusive_scan_f64");
    return typed_scan(msgs, ELEM_F64, true, sch, in, out, n, c, true);
}

ex_sender *ex_inclusive_scan_i64(ex_scheduler sch, const int64_t *in, int64_t *out, size_t n) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_inclusive_scan_i64");
    return typed_scan(msgs, ELEM_I64, false, sch, in, out, n, i64_identity, false);
}

ex_sender *ex_inclusive_scan_init_i64(ex_scheduler sch, const int64_t *in, int64_t *out, size_t n, int64_t init) {
    exi_carry c = { .u = (uint64_t)init };
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_inclusive_scan_init_i64");
    return typed_scan(msgs, ELEM_I64, false, sch, in, out, n, c, true);
}

ex_sender *ex_exclusive_scan_i64(ex_scheduler sch, const int64_t *in, int64_t *out, size_t n, int64_t init) {
    exi_carry c = { .u = (uint64_t)init };
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_exclusive_scan_i64");
    return typed_scan(msgs, ELEM_I64, true, sch, in, out, n, c, true);
}

ex_sender *ex_inclusive_scan(ex_scheduler sch, const ex_monoid *m, const void *in, void *out, size_t n) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_inclusive_scan");
    return generic_scan(msgs, false, false, sch, m, in, out, n, NULL);
}

ex_sender *ex_inclusive_scan_init(ex_scheduler sch, const ex_monoid *m, const void *in, void *out, size_t n,
                                  const void *init) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_inclusive_scan_init");
    return generic_scan(msgs, false, true, sch, m, in, out, n, init);
}

ex_sender *ex_exclusive_scan(ex_scheduler sch, const ex_monoid *m, const void *in, void *out, size_t n,
                             const void *init) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_exclusive_scan");
    return generic_scan(msgs, true, true, sch, m, in, out, n, init);
}
