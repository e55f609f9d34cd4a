/* SPDX-License-Identifier: MIT */
/* ref_adaptors.c - the reference's adaptor nodes: then / upon_*, let_*,
 * when_all, bulk, and into_variant and its siblings. */
#include "ref_private.h"

#include <errno.h>
#include <string.h>

static void input_of(const r_out *o, int64_t *in, size_t *n) {
    if (o->disp == R_VALUE) {
        memcpy(in, o->v, o->n * sizeof *in);
        *n = o->n;
    } else if (o->disp == R_ERROR) {
        in[0] = o->code;
        *n = 1;
    } else {
        *n = 0;
    }
}

static uint8_t channel_of(unsigned kind) {
    switch (kind) {
    case G_THEN: case G_LET_VALUE: return R_VALUE;
    case G_UPON_ERROR: case G_LET_ERROR: return R_ERROR;
    default: return R_STOPPED;
    }
}

void r_eval_then(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    r_set c;
    r_eval(st, nd->child[0], cx, &c);
    out->any = c.any;
    out->sync = c.sync;
    uint8_t ch = channel_of(nd->kind);
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        if (o->disp != ch) {
            r_set_add(out, *o);
            continue;
        }
        int64_t in[G_MAX_VALUES], res[G_MAX_VALUES];
        size_t n;
        input_of(o, in, &n);
        int code = g_then_apply(nd, in, n, res);
        if (code) r_set_add(out, r_out_error(code, o->top_req));
        else r_set_add(out, r_out_value(res, nd->arity, o->top_req || nd->fn == TF_STOPREQ));
    }
}

/* The body's environment: the child's completion scheduler for the let's
 * channel, when it has one, with the allocator resolved under it cached
 * for the body (let.c's join_completion_scheduler: the same shortcut as
 * starts_on's, README "findings"). */
static rctx let_body_ctx(const rstate *st, rctx cx, uint8_t body_sched) {
    rctx bc = cx;
    if (body_sched != CS_NONE) {
        bc.env_sched = body_sched;
        r_alloc_shortcut(st, &bc);
    }
    return bc;
}

void r_eval_let(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    r_set c;
    r_eval(st, nd->child[0], cx, &c);
    out->any = c.any;
    uint8_t ch = channel_of(nd->kind);
    ssig cs = r_sig_of(st->g, nd->child[0]);
    uint8_t body_sched = ch == R_VALUE ? cs.cs_value : ch == R_ERROR ? cs.cs_error : cs.cs_stopped;
    bool body_done[2] = { false, false };
    r_set body[2];
    bool called = c.any;
    out->sync = c.sync;
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        if (o->disp != ch) {
            r_set_add(out, *o);
            continue;
        }
        called = true;
        int64_t in[G_MAX_VALUES], vals[G_MAX_VALUES];
        size_t n;
        input_of(o, in, &n);
        switch (nd->fn) {
        case LF_JUST: {
            uint64_t base = r_sum_plus(nd->k, in, n);
            for (unsigned a = 0; a < nd->arity; a++) vals[a] = (int64_t)(base + a);
            r_set_add(out, r_out_value(vals, nd->arity, o->top_req));
            break;
        }
        case LF_ERR: r_set_add(out, r_out_error(G_EUSER + (int)(nd->k & 15), o->top_req)); break;
        case LF_STOPPED: r_set_add(out, r_out_stopped(o->top_req)); break;
        case LF_NULL: r_set_add(out, r_out_error(EINVAL, o->top_req)); break;
        case LF_ECHO: r_set_add(out, r_out_value(in, n, o->top_req)); break;
        case LF_BODY: {
            unsigned v = o->top_req ? 1 : 0;
            if (!body_done[v]) {
                rctx bc = let_body_ctx(st, cx, body_sched);
                bc.stop = (uint8_t)r_observe(st, cx, o->top_req);
                r_eval_conn(st, nd->child[1], bc, &body[v]);
                r_walk_spawns(st, nd->child[1]);
                body_done[v] = true;
                out->sync = out->sync && body[v].sync;
            }
            if (body[v].any) out->any = true;
            for (unsigned b = 0; b < body[v].n; b++) {
                r_out r = body[v].o[b];
                r.top_req = r.top_req || o->top_req;
                r_set_add(out, r);
            }
            break;
        }
        default: break;
        }
    }
    /* Phase 1 walks the body whenever it might run (the child's set may
     * be a placeholder there). */
    if (nd->fn == LF_BODY && called && !body_done[0] && !body_done[1] && st->phase == 1) {
        rctx bc = let_body_ctx(st, cx, body_sched);
        r_set tmp;
        r_eval_conn(st, nd->child[1], bc, &tmp);
        r_walk_spawns(st, nd->child[1]);
    }
}

static bool set_has_nonvalue(const r_set *s) {
    if (s->any) return true;
    for (unsigned i = 0; i < s->n; i++)
        if (s->o[i].disp != R_VALUE) return true;
    return false;
}

static bool set_all_nonvalue(const r_set *s) {
    if (s->any || !s->n) return false;
    for (unsigned i = 0; i < s->n; i++)
        if (s->o[i].disp == R_VALUE) return false;
    return true;
}

void r_eval_when_all_valid(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    out->sync = true;
    if (cx.stop == RS_ALWAYS) {
        r_set_add(out, r_out_stopped(false));
        return;
    }
    if (cx.stop == RS_RACE) r_set_add(out, r_out_stopped(false));
    /* Children see the when_all's own source: stopped by the parent's
     * token, and by a sibling that fails or stops. */
    rctx cc = cx;
    cc.tok = TOK_OTHER;
    r_alloc_shortcut(st, &cc);
    if (cc.stop == RS_NEVER) {
        /* The children's source is only requested by a child that fails
         * or stops on its own: if none can while it is not requested (an
         * evaluation with the parent's NEVER context), it never is. */
        bool saved = st->record;
        st->record = false;
        bool influence = false;
        for (unsigned j = 0; j < nd->nchild && !influence; j++) {
            r_set d;
            r_eval(st, nd->child[j], cx, &d);
            influence = set_has_nonvalue(&d);
        }
        st->record = saved;
        if (influence) cc.stop = RS_RACE;
    }
    /* Children are started in order: one that completed inside its start
     * with an error or stopped has requested stop before the next ones
     * start. */
    r_set c[3];
    bool requested = false;
    for (unsigned j = 0; j < nd->nchild; j++) {
        rctx cj = cc;
        if (requested) cj.stop = RS_ALWAYS;
        r_eval(st, nd->child[j], cj, &c[j]);
        if (c[j].any) out->any = true;
        out->sync = out->sync && c[j].sync;
        if (c[j].sync && set_all_nonvalue(&c[j])) requested = true;
    }
    if (out->any) return;
    unsigned idx[3] = { 0, 0, 0 };
    unsigned nc = nd->nchild;
    for (unsigned j = 0; j < nc; j++)
        if (c[j].n == 0) return;  /* a child that cannot complete */
    for (;;) {
        const r_out *o[3];
        bool req = false, any_err = false, any_stop = false;
        for (unsigned j = 0; j < nc; j++) {
            o[j] = &c[j].o[idx[j]];
            req = req || o[j]->top_req;
            any_err = any_err || o[j]->disp == R_ERROR;
            any_stop = any_stop || o[j]->disp == R_STOPPED;
        }
        if (any_err) {
            for (unsigned j = 0; j < nc; j++)
                if (o[j]->disp == R_ERROR) r_set_add(out, r_out_error(o[j]->code, req));
        } else if (any_stop) {
            r_set_add(out, r_out_stopped(req));
        } else {
            int64_t all[3 * G_MAX_VALUES];
            unsigned k = 0;
            for (unsigned j = 0; j < nc; j++) {
                memcpy(&all[k], o[j]->v, o[j]->n * sizeof all[0]);
                k += o[j]->n;
            }
            if (k > G_MAX_VALUES) r_set_add(out, r_out_error(EINVAL, req));
            else r_set_add(out, r_out_value(all, k, req));
        }
        if (out->any) return;
        unsigned j = 0;
        while (j < nc && ++idx[j] == c[j].n) idx[j++] = 0;
        if (j == nc) break;
    }
}

void r_eval_bulk(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    r_set c;
    r_eval(st, nd->child[0], cx, &c);
    out->any = c.any;
    ssig cs = r_sig_of(st->g, nd->child[0]);
    bool par = cs.cs_value == GS_POOL || cx.env_sched == GS_POOL;
    out->sync = c.sync && (!par || nd->shape == 0);
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        if (o->disp != R_VALUE) {
            r_set_add(out, *o);
            continue;
        }
        r_out normal = nd->fail_at < nd->shape ? r_out_error(G_EUSER + (int)(nd->k & 15), o->top_req) : *o;
        if (!par || nd->shape == 0) {
            r_set_add(out, normal);
            continue;
        }
        unsigned s = r_observe(st, cx, o->top_req);
        if (s != RS_ALWAYS) r_set_add(out, normal);
        if (s != RS_NEVER) r_set_add(out, r_out_stopped(o->top_req));
    }
}

/* into_variant and friends, then the converter's (n, hash). */
void r_eval_variant(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    r_set c;
    r_eval(st, nd->child[0], cx, &c);
    out->any = c.any;
    out->sync = c.sync;
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        int64_t pair[2];
        if (o->disp == R_VALUE) {
            if (nd->op == VK_STOPPED_AS_OPTIONAL && o->n == 0) {
                r_set_add(out, r_out_error(EINVAL, o->top_req));
                continue;
            }
            pair[0] = o->n;
            pair[1] = g_hash(o->v, o->n);
            r_set_add(out, r_out_value(pair, 2, o->top_req));
        } else if (o->disp == R_STOPPED && nd->op == VK_STOPPED_AS_OPTIONAL) {
            pair[0] = -1;
            pair[1] = 0;
            r_set_add(out, r_out_value(pair, 2, o->top_req));
        } else if (o->disp == R_STOPPED && nd->op == VK_STOPPED_AS_ERROR) {
            r_set_add(out, r_out_error(G_EUSER + (int)(nd->k & 15), o->top_req));
        } else {
            r_set_add(out, *o);
        }
    }
}
