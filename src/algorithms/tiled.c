/* SPDX-License-Identifier: MIT */
/* tiled.c - the engine under the parallel algorithms: tiles claimed in
 * order by the participants of a bulk, a chain for running prefixes, stop
 * checks between tiles. */
#include <sched.h>
#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include "algorithms/exi_tiled.h"
#include "base/exi_atomic.h"
#include "core/exi_domain.h"
#include "core/exi_error.h"
#include "core/exi_value.h"

/* The key under which the inner operation finds its tiled operation. */
static const ex_key tiled_run_key = { "cexec.tiled_run", true };

unsigned exi_scheduler_concurrency(ex_scheduler sch) {
    if (!sch.vt || !sch.vt->concurrency) return 1;
    unsigned n = sch.vt->concurrency(sch.self);
    return n ? n : 1;
}

/* ------------------------------------------------------------- the tiles */

void exi_tiled_chain_wait(exi_tiled_op *o, size_t k) {
    unsigned spins = 0;
    while (exi_load_acq_u64(&o->chain) != (uint64_t)k) {
        /* The predecessor is running on another agent; it may have been
         * descheduled by the OS, so stop burning its CPU after a while. */
        if (++spins < 2048) exi_pause();
        else sched_yield();
    }
}

/* Whether the participants should stop claiming: a failure, or a stop
 * request (noted). */
static bool claims_over(exi_tiled_op *o) {
    if (exi_load_acq_u32(&o->failed)) return true;
    if (!ex_stop_token_stop_requested(o->token)) return false;
    exi_store_rel_u32(&o->stopped, 1);
    return true;
}

/* Claims the next tile, or returns ntiles when the participant should stop
 * (no tiles left, a failure, or a stop request).  Chained kinds claim from
 * one counter; the others from participant `part`'s block, then from each
 * other block in turn (*from: the block being drained). */
static uint64_t claim(exi_tiled_op *o, unsigned part, unsigned *from) {
    const exi_tiled_sender *s = o->s;
    if (s->kind->chained) {
        if ((s->ntiles && exi_load_rlx_u64(&o->next_tile) >= s->ntiles) || claims_over(o)) return s->ntiles;
        uint64_t k = exi_faa_u64(&o->next_tile, 1);
        return k < s->ntiles ? k : s->ntiles;
    }
    for (; *from < s->parts; ++*from) {
        exi_tiled_block *b = &o->blocks[(part + *from) % s->parts];
        if (exi_load_rlx_u64(&b->next) >= b->end) continue;
        if (claims_over(o)) return s->ntiles;
        uint64_t k = exi_faa_u64(&b->next, 1);
        if (k < b->end) return k;
    }
    /* With no tiles at all, a stop request still counts (complete). */
    if (!s->ntiles) (void)claims_over(o);
    return s->ntiles;
}

/* The first tile of block p (p == parts: ntiles): the tile boundary
 * nearest to element p * n / parts, so that the blocks hold about as many
 * elements each although the last tile is partial. */
static uint64_t block_start(const exi_tiled_sender *s, unsigned p) {
    if (p >= s->parts) return s->ntiles;
    size_t at = s->n / s->parts * p + s->n % s->parts * p / s->parts;  /* p * n / parts, without p * n */
    size_t k = at / s->tile + (at % s->tile > s->tile / 2);
    return k < s->ntiles ? k : s->ntiles;
}

static size_t tile_end(const exi_tiled_sender *s, size_t begin) {
    return s->n - begin > s->tile ? begin + s->tile : s->n;  /* no overflow near SIZE_MAX */
}

/* A chained participant (a scan) claims its next tile before it
 * processes the current one, so the tile can prefetch it.  An unchained
 * one (the reductions and loops, whose tiles prefetch nothing) claims a
 * tile only when it is about to process it, from its own block as from
 * another's: a tile claimed ahead is one that a participant that has run
 * out cannot take.  (A worker that arrived late at a reduction of 1e5
 * doubles had claimed the last tile of its block while it processed the
 * one before; the caller, done with its own block, waited for both.) */
static void participate(exi_tiled_op *o, unsigned part) {
    const exi_tiled_sender *s = o->s;
    unsigned from = 0;
    uint64_t k = claim(o, part, &from), done = 0;
    while (k < s->ntiles) {
        uint64_t next = s->kind->chained ? claim(o, part, &from) : s->ntiles;
        size_t begin = exi_tile_begin(s, (size_t)k), end = tile_end(s, begin);
        size_t nb = next < s->ntiles ? exi_tile_begin(s, (size_t)next) : 0;
        size_t ne = next < s->ntiles ? tile_end(s, nb) : 0;
        /* After a failure or a stop request an unchained tile is dropped
         * (no range starts after them); a chained one is always processed,
         * as a successor may be waiting for its prefix. */
        if (!s->kind->chained && (exi_load_acq_u32(&o->failed) || ex_stop_token_stop_requested(o->token))) {
            exi_store_rel_u32(&o->stopped, 1);
            break;
        }
        ex_error e = s->kind->tile(o, part, (size_t)k, begin, end, nb, ne);
        if (e.code) {
            uint32_t expected = 0;
            if (exi_cas_u32(&o->failed, &expected, 1)) o->err = e;  /* the first error is the result */
            else exi_error_drop(e);
        } else {
            done++;
        }
        k = s->kind->chained ? next : claim(o, part, &from);
    }
    o->blocks[part].done = done;  /* (read once every participant has left) */
}

/* Tiles processed successfully, once every participant has left. */
static uint64_t done_tiles(const exi_tiled_op *o) {
    uint64_t done = 0;
    for (unsigned p = 0; p < o->s->parts; p++) done += o->blocks[p].done;
    return done;
}

/* Every participant has left: complete the receiver. */
static void complete(exi_tiled_op *o) {
    if (exi_load_acq_u32(&o->failed)) {
        ex_set_error(o->r, o->err);
    } else if (exi_load_acq_u32(&o->stopped) && (!o->s->ntiles || done_tiles(o) < o->s->ntiles)) {
        /* Stopped means some tile did not run (or, with no tiles, that stop
         * came before start): a request that came after the last tile was
         * claimed does not discard a finished result. */
        ex_set_stopped(o->r);
    } else {
        ex_value v[1];
        size_t nv = o->s->kind->finish(o, v);
        ex_set_value(o->r, v, nv);
    }
}

/* ------------------------------------------------------- inner receivers */

/* parts == 1: the schedule completed on an agent of sch; run every tile. */
static void one_set_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    participate(self, 0);
    complete(self);
}

/* parts > 1: the bulk has run every participant. */
static void bulk_set_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    complete(self);
}

static void inner_set_error(void *self, ex_error e) { ex_set_error(((exi_tiled_op *)self)->r, e); }
static void inner_set_stopped(void *self) { ex_set_stopped(((exi_tiled_op *)self)->r); }
static ex_env inner_env(void *self) { return ex_env_of_pair(&((exi_tiled_op *)self)->env); }

static const ex_receiver_vtable one_rcvr_vt = { one_set_value, inner_set_error, inner_set_stopped, inner_env, NULL };
static const ex_receiver_vtable bulk_rcvr_vt = { bulk_set_value, inner_set_error, inner_set_stopped, inner_env, NULL };

/* One participant of the bulk: the run comes from the environment (the
 * bulk sender is built once and shared by every run). */
static ex_error participant(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx;
    if (n != 1 || v[0].type != EX_T_PTR) return ex_err(EX_EINVAL, "cexec algorithm: lost its operation");
    participate(v[0].as.p, (unsigned)i);
    return ex_ok();
}

/* -------------------------------------------------------------- operation */

static ex_operation *inner_of(exi_tiled_op *o, const exi_tiled_sender *s) {
    return (ex_operation *)(void *)((char *)o + s->inner_off);
}

static void tiled_start(ex_operation *op) {
    exi_tiled_op *o = (exi_tiled_op *)op;
    ex_start(inner_of(o, o->s));
}

static void tiled_op_destroy(ex_operation *op) {
    exi_tiled_op *o = (exi_tiled_op *)op;
    ex_operation_destroy(inner_of(o, o->s));
    if (o->scratch) ex_deallocate(o->alloc, o->scratch, o->s->scratch_size, alignof(max_align_t));
    ex_sender_release((ex_sender *)(uintptr_t)o->s);
}

static const ex_operation_vtable tiled_op_vt = { tiled_start, tiled_op_destroy };

static inline __attribute__((always_inline)) ex_error exi_tiled_connect_now(const ex_sender *sender,
                                                                            ex_receiver r, void *storage) {
    const exi_tiled_sender *s = (const exi_tiled_sender *)sender;
    exi_tiled_op *o = storage;
    ex_env env = ex_receiver_env(r);
    o->base.vt = &tiled_op_vt;
    o->r = r;
    o->token = ex_get_stop_token(env);
    o->alloc = ex_get_allocator(env);
    o->scratch = NULL;
    if (s->scratch_size && !(o->scratch = ex_allocate(o->alloc, s->scratch_size, alignof(max_align_t))))
        return ex_err(EX_ENOMEM, "cexec algorithm: cannot allocate scratch");
    o->err = ex_ok();
    o->failed = o->stopped = 0;
    o->total.u = 0;
    o->next_tile = 0;
    o->chain = 0;
    for (unsigned p = 0; p < s->parts; p++) {
        o->blocks[p].next = block_start(s, p);
        o->blocks[p].end = block_start(s, p + 1);
        o->blocks[p].done = 0;
        o->blocks[p].sum_tile = UINT64_MAX;
    }
    o->prefix.u = 0;
    ex_env_pair_init2(&o->env, &tiled_run_key, ex_ptr(o), &ex_key_get_scheduler, ex_sched_value(s->sch),
                      ex_env_forward(env));
    ex_receiver ir = { s->parts > 1 ? &bulk_rcvr_vt : &one_rcvr_vt, o };
    o->s = s;
    ex_error e = exi_connect_child_in_env(s->inner, ir, inner_of(o, s));
    if (e.code) {
        if (o->scratch) ex_deallocate(o->alloc, o->scratch, s->scratch_size, alignof(max_align_t));
        return e;
    }
    ex_sender_retain((ex_sender *)(uintptr_t)s);
    return ex_ok();
}

ex_error exi_tiled_connect(const ex_sender *sender, ex_receiver r, void *storage) {
    if (exi_late_wants(sender)) return exi_connect_late(sender, r, storage, exi_tiled_connect_now);
    return exi_tiled_connect_now(sender, r, storage);
}

/* The algorithm completes on sch (its value completion scheduler). */
ex_env exi_tiled_attrs(const ex_sender *s) { return ex_sender_attrs(((const exi_tiled_sender *)s)->inner); }

void exi_tiled_destroy(ex_sender *s) { ex_sender_release(((exi_tiled_sender *)s)->inner); }

/* ---------------------------------------------------------------- builder */

exi_tiled_sender *exi_tiled_alloc(const ex_sender_vtable *vt, size_t size, const exi_tiled_kind *kind, ex_scheduler sch,
                                  size_t n, size_t tile, ex_sig value_sig) {
    ex_sender *base = ex_sender_alloc(vt, size);
    if (!base) return NULL;
    exi_tiled_sender *s = (exi_tiled_sender *)base;
    s->kind = kind;
    s->sch = sch;
    s->inner = NULL;
    s->inner_off = 0;
    s->n = n;
    s->tile = tile;
    s->ntiles = n / tile + (n % tile != 0);
    /* A participant that would get fewer than tiles_per_part tiles costs
     * more to bring in than it saves (exi_tiled.h). */
    size_t c = exi_scheduler_concurrency(sch), useful = s->ntiles / kind->tiles_per_part;
    if (useful < 1) useful = 1;
    s->parts = (unsigned)(useful < c ? useful : c);
    s->scratch_size = 0;
    s->op_extra = 0;
    base->sigs = exi_sigs_of(&value_sig, EX_SIGS_ERROR | EX_SIGS_STOPPED);
    return s;
}

ex_sender *exi_tiled_finish(exi_tiled_sender *s) {
    ex_sender *inner = s->parts > 1 ? ex_bulk_grain(ex_starts_on(s->sch, ex_read_env(&tiled_run_key, EX_T_PTR)), EX_PAR,
                                                    s->parts, 1, participant, NULL)
                                    : ex_schedule(s->sch);
    /* The participants' bulk runs on sch: offered to its domain now (the
     * pool's and the parallel scheduler's run it on their agents), not
     * at every connect. */
    const ex_domain *d = s->sch.vt->domain;
    if (s->parts > 1 && d) inner = exi_transform_early(inner, d, s->sch);
    ex_error e = ex_sender_status(inner);
    if (e.code) {
        ex_sender_release(inner);
        ex_sender_release(&s->base);
        return ex_invalid_sender(e.code, e.msg);
    }
    s->inner = inner;
    s->inner_off = ex_align_up(ex_size_add(exi_tiled_head_size(s), s->op_extra), inner->op_align);
    s->base.op_size = ex_size_add(s->inner_off, inner->op_size);
    s->base.op_align = ex_max_size(alignof(exi_tiled_op), inner->op_align);
    s->base.depth = inner->depth + 1;
    /* The algorithm itself: offered to sch's domain, as starts_on is. */
    return d ? exi_transform_early(&s->base, d, s->sch) : &s->base;
}
