/* SPDX-License-Identifier: MIT */
/* reduce.c - reductions on double, int64 and generic elements.  Each tile
 * is summed with the vector kernel, and the tile sums are folded in index
 * order, so the result never depends on timing or on the number of
 * workers.  Typed reductions of up to EXI_REDUCE_INLINE_TILES tiles wait
 * for nothing: each tile's sum goes to its own slot in the operation and
 * the completion folds them (a chain hands the running prefix from core to
 * core at every tile, a cache miss on each tile's critical path, which
 * costs most where tiles are few).  Larger ones, and generic ones, whose
 * slots may be large, fold through the chain. */
#include "algorithms/exi_algo.h"
#include "algorithms/exi_kernels.h"
#include "core/exi_sender.h"

typedef struct reduce_sender {
    exi_tiled_sender t;
    exi_elem_kind ek;
    const void *in;
    exi_carry init;
    ex_monoid m;
    bool prefetch;    /* typed: a participant's share is more than a core's L2 holds */
    void *result;
    unsigned char identity[];
} reduce_sender;

/* Typed tiles: a slot per tile in the operation (op_extra), or the chain;
 * a lone participant claims the tiles in order and folds them as it goes. */
static ex_error typed_tile(exi_tiled_op *o, unsigned part, size_t k, size_t b, size_t e, size_t nb, size_t ne) {
    (void)part, (void)nb, (void)ne;
    const reduce_sender *s = (const reduce_sender *)o->s;
    exi_carry t;
    if (s->ek == ELEM_F64) t.d = exi_sum_f64((const double *)s->in + b, e - b, s->prefetch);
    else t.u = exi_sum_u64((const uint64_t *)s->in + b, e - b, s->prefetch);
    if (s->t.op_extra) {
        ((exi_carry *)exi_tiled_extra(o))[k] = t;
        return ex_ok();
    }
    bool chained = s->t.kind->chained;
    if (chained) exi_tiled_chain_wait(o, k);
    if (s->ek == ELEM_F64) {
        o->prefix.d = (k ? o->prefix.d : s->init.d) + t.d;
    } else {
        o->prefix.u = (k ? o->prefix.u : s->init.u) + t.u;
    }
    if (chained) exi_tiled_chain_publish(o, k);
    return ex_ok();
}

/* The same fold as a single participant's, in index order. */
static size_t typed_finish(exi_tiled_op *o, ex_value *out) {
    const reduce_sender *s = (const reduce_sender *)o->s;
    exi_carry acc = s->t.n == 0 || s->t.op_extra ? s->init : o->prefix;
    const exi_carry *sums = s->t.op_extra ? exi_tiled_extra(o) : NULL;
    for (size_t k = 0; sums && k < s->t.ntiles; k++)
        if (s->ek == ELEM_F64) acc.d += sums[k].d;
        else acc.u += sums[k].u;
    out[0] = s->ek == ELEM_F64 ? ex_double(acc.d) : ex_int((int64_t)acc.u);
    return 1;
}

/* Generic scratch: slot 0 the chained accumulator, slot 1 + p participant
 * p's tile total. */
static ex_error reduce_tile(exi_tiled_op *o, unsigned part, size_t k, size_t b, size_t e, size_t nb, size_t ne) {
    (void)nb, (void)ne;
    const reduce_sender *s = (const reduce_sender *)o->s;
    const ex_monoid *m = &s->m;
    unsigned char *acc = exi_slot_at(o->scratch, m->size, 0);
    unsigned char *t = exi_slot_at(o->scratch, m->size, 1 + (size_t)part);
    memcpy(t, m->identity, m->size);
    exi_fold(m, t, (const unsigned char *)s->in + b * m->size, e - b);
    exi_tiled_chain_wait(o, k);
    if (k) m->combine(m->ctx, acc, t);
    else memcpy(acc, t, m->size);
    exi_tiled_chain_publish(o, k);
    return ex_ok();
}

static size_t reduce_finish(exi_tiled_op *o, ex_value *out) {
    const reduce_sender *s = (const reduce_sender *)o->s;
    memcpy(s->result, s->t.n == 0 ? s->identity : exi_slot_at(o->scratch, s->m.size, 0), s->m.size);
    out[0] = ex_ptr(s->result);
    return 1;
}

static const exi_tiled_kind typed_kind = { false, typed_tile, typed_finish, EXI_REDUCE_TILES_PER_PART };
static const exi_tiled_kind typed_chained_kind = { true, typed_tile, typed_finish, EXI_REDUCE_TILES_PER_PART };
static const exi_tiled_kind reduce_kind = { true, reduce_tile, reduce_finish, EXI_REDUCE_TILES_PER_PART };
static const ex_sender_vtable reduce_vt = { "ex_reduce", exi_tiled_connect, exi_tiled_attrs, exi_tiled_destroy, &ex_tag_reduce };

static reduce_sender *reduce_alloc(const exi_tiled_kind *kind, size_t extra, ex_scheduler sch, size_t n, size_t elem,
                                   ex_sig sig) {
    exi_tiled_sender *t =
        exi_tiled_alloc(&reduce_vt, sizeof(reduce_sender) + extra, kind, sch, n, exi_tile_elems(elem), sig);
    if (!t) return NULL;
    reduce_sender *s = (reduce_sender *)t;
    memset(&s->m, 0, sizeof s->m);
    s->result = NULL;
    s->init.u = 0;
    s->prefetch = false;
    return s;
}

static ex_sender *typed_reduce(const char *const *msgs, exi_elem_kind ek, ex_scheduler sch, const void *in, size_t n,
                               exi_carry init) {
    int bad = exi_check_arrays(sch, in, 8, NULL, 0, n);
    if (bad) return exi_algo_reject(msgs, bad);
    reduce_sender *s = reduce_alloc(&typed_kind, 0, sch, n, 8, EX_SIG(ek == ELEM_F64 ? EX_T_DOUBLE : EX_T_INT));
    if (!s) return exi_oom_sender();
    s->ek = ek;
    s->in = in;
    s->init = init;
    /* A share that fits in its core's L2 stays there from run to run; a
     * larger one comes from the last-level cache or memory, and the kernel
     * fetches it ahead (exi_kernels.h).  n * 8 does not overflow (checked). */
    s->prefetch = n / s->t.parts * 8 > exi_core_cache_bytes();
    if (s->t.parts > 1 && s->t.ntiles <= EXI_REDUCE_INLINE_TILES) s->t.op_extra = s->t.ntiles * sizeof(exi_carry);
    else if (s->t.parts > 1) s->t.kind = &typed_chained_kind;
    return exi_tiled_finish(&s->t);
}

ex_sender *ex_reduce_f64(ex_scheduler sch, const double *in, size_t n, double init) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_reduce_f64");
    exi_carry c = { .d = init };
    return typed_reduce(msgs, ELEM_F64, sch, in, n, c);
}

ex_sender *ex_reduce_i64(ex_scheduler sch, const int64_t *in, size_t n, int64_t init) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_reduce_i64");
    exi_carry c = { .u = (uint64_t)init };
    return typed_reduce(msgs, ELEM_I64, sch, in, n, c);
}

ex_sender *ex_reduce(ex_scheduler sch, const ex_monoid *m, const void *in, size_t n, void *result) {
    static const char *const msgs[] = EXI_ALGO_MESSAGES("ex_reduce");
    int bad = exi_check_monoid(m);
    if (!bad) bad = exi_check_arrays(sch, in, m->size, NULL, 0, n);
    if (!bad && !result) bad = BAD_NULL_ARRAY;
    if (bad) return exi_algo_reject(msgs, bad);
    reduce_sender *s = reduce_alloc(&reduce_kind, m->size, sch, n, m->size, EX_SIG(EX_T_PTR));
    if (!s) return exi_oom_sender();
    s->ek = ELEM_GENERIC;
    s->in = in;
    s->m = *m;
    memcpy(s->identity, m->identity, m->size);
    s->m.identity = s->identity;
    s->result = result;
    s->t.scratch_size = exi_slot(m->size) * (1 + (size_t)s->t.parts);
    return exi_tiled_finish(&s->t);
}
