/* SPDX-License-Identifier: MIT */
/* build_nodes.c - sg_build: a node's cexec sender, wrapped in its tap.
 * Here the adaptors' functions (then / upon_*, let_*, bulk) and the
 * read_env, write_env and variant nodes; the algorithm, task and scope
 * nodes have files of their own. */
#include "harness.h"

#include <string.h>

/* ------------------------------------------------------------- functions */

static ex_error call_then(const g_node *nd, const int64_t *in, size_t n, ex_value *out) {
    int64_t res[G_MAX_VALUES];
    int code = g_then_apply(nd, in, n, res);
    if (nd->fn == TF_STOPREQ) ex_stop_source_request_stop(&G.top_src);
    if (code) return ex_err(code, "fuzz: function error");
    for (unsigned i = 0; i < nd->arity; i++) out[i] = ex_int(res[i]);
    return ex_ok();
}

static ex_error then_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    int64_t v[G_MAX_VALUES];
    if (!sg_ints_of(in, n, v)) {
        sg_fn_inputs_bad();
        return ex_err(EX_EUSER + 999, "fuzz: bad input");
    }
    return call_then(ctx, v, n, out);
}

static ex_error upon_error_fn(void *ctx, ex_error err, ex_value *out) {
    int64_t v[1] = { err.code };
    return call_then(ctx, v, 1, out);
}

static ex_error upon_stopped_fn(void *ctx, ex_value *out) { return call_then(ctx, NULL, 0, out); }

static ex_sender *just_ints(const int64_t *v, size_t n) {
    ex_value vals[G_MAX_VALUES];
    for (size_t i = 0; i < n; i++) vals[i] = ex_int(v[i]);
    return ex_just_n(vals, n);
}

/* just(box(v)...): the tuples live on this stack; ex_just_n copies them deeply. */
static ex_sender *just_boxed(const int64_t *v, size_t n) {
    ex_value inner_v[3], outer_v[3][2], vals[3];
    ex_tuple inner[3], outer[3];
    for (size_t i = 0; i < n; i++) {
        inner_v[i] = ex_int(v[i] ^ G_BOX_KEY);
        inner[i] = (ex_tuple){ 0, 1, &inner_v[i] };
        outer_v[i][0] = ex_int(v[i]);
        outer_v[i][1] = ex_tuple_value(&inner[i]);
        outer[i] = (ex_tuple){ 0, 2, outer_v[i] };
        vals[i] = ex_tuple_value(&outer[i]);
    }
    return ex_just_n(vals, n);
}

ex_sender *sg_build_tree(unsigned root) {
    ex_sender *memo[G_MAX_SPLITS] = { 0 };
    ex_sender *s = sg_build(root, memo);
    for (unsigned i = 0; i < G_MAX_SPLITS; i++) ex_sender_release(memo[i]);
    return s;
}

static ex_sender *let_make(const g_node *nd, const int64_t *in, size_t n) {
    int64_t vals[G_MAX_VALUES];
    switch (nd->fn) {
    case LF_JUST: {
        uint64_t base = (uint64_t)nd->k;
        for (size_t i = 0; i < n; i++) base += (uint64_t)in[i];
        for (unsigned a = 0; a < nd->arity; a++) vals[a] = (int64_t)(base + a);
        return just_ints(vals, nd->arity);
    }
    case LF_ERR: return ex_just_error(ex_err(G_EUSER + (int)(nd->k & 15), "fuzz: let error"));
    case LF_STOPPED: return ex_just_stopped();
    case LF_BODY: return sg_build_tree(nd->child[1]);
    case LF_NULL: return NULL;
    default: return just_ints(in, n);
    }
}

static ex_sender *let_value_fn(void *ctx, const ex_value *in, size_t n) {
    int64_t v[G_MAX_VALUES];
    if (!sg_ints_of(in, n, v)) {
        sg_fn_inputs_bad();
        return NULL;
    }
    return let_make(ctx, v, n);
}

static ex_sender *let_error_fn(void *ctx, ex_error err) {
    int64_t v[1] = { err.code };
    return let_make(ctx, v, 1);
}

static ex_sender *let_stopped_fn(void *ctx) { return let_make(ctx, NULL, 0); }

static ex_error bulk_one(const g_node *nd, size_t i, const ex_value *v, size_t n) {
    unsigned idx = (unsigned)(nd - G.g.nodes);
    int64_t tmp[G_MAX_VALUES];
    if (!sg_ints_of(v, n, tmp)) sg_fn_inputs_bad();
    if (i >= nd->shape) {
        sg_fn_inputs_bad();
        return ex_ok();
    }
    atomic_fetch_add(&G.bulk_hits[idx][i], 1);
    if (i == nd->fail_at) return ex_err(G_EUSER + (int)(nd->k & 15), "fuzz: bulk error");
    return ex_ok();
}

static ex_error bulk_fn(void *ctx, size_t i, const ex_value *v, size_t n) { return bulk_one(ctx, i, v, n); }

static ex_error bulk_chunk_fn(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    for (size_t i = begin; i < end; i++) {
        ex_error e = bulk_one(ctx, i, v, n);
        if (e.code) return e;
    }
    return ex_ok();
}

/* ------------------------------------------- read_env, into_variant */

static int64_t sched_id(ex_scheduler s) {
    for (unsigned k = 0; k < GS_COUNT; k++)
        if (ex_scheduler_equal(s, sg_sched_of(k))) return k;
    return ID_SCHED_OTHER;
}

static int64_t token_id(ex_stop_token t) {
    if (!t.src) return TOK_NEVER;
    if (t.src == &G.top_src) return TOK_TOP;
    for (unsigned k = 0; k < G_MAX_NODES; k++)
        if (t.src == &G.node_src[k]) return TOK_NODE0 + k;
    return TOK_OTHER;
}

static int64_t alloc_id(const ex_allocator *a) {
    if (a == &sg_counting_alloc) return A_COUNT;
    if (a == ex_fault_allocator_get(&G.fault)) return A_FAULT;
    if (a == &sg_alt_alloc) return A_ALT;
    if (a == G.pool_alloc) return A_POOL;
    return A_OTHER;
}

static ex_error read_conv(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    const g_node *nd = ctx;
    static const ex_type types[RK_COUNT] = { EX_T_SCHED, EX_T_TOKEN, EX_T_ALLOC, EX_T_INT };
    int64_t v = 0;
    if (n != 1 || in[0].type != types[nd->op]) {
        sg_cb_fail(sg_node_index(nd), "read_env completed with a value of the wrong type", n);
    } else {
        switch (nd->op) {
        case RK_SCHED: v = sched_id(in[0].as.sched); break;
        case RK_TOKEN: v = token_id(in[0].as.token); break;
        case RK_ALLOC: v = alloc_id(in[0].as.alloc); break;
        default: v = in[0].as.i; break;
        }
    }
    out[0] = ex_int(v);
    return ex_ok();
}

static ex_sender *build_read_env(unsigned i) {
    const g_node *nd = &G.g.nodes[i];
    static const ex_key *const keys[RK_COUNT] = { &ex_key_get_scheduler, &ex_key_get_stop_token, &ex_key_get_allocator,
                                                   &sg_user_key };
    static const ex_type types[RK_COUNT] = { EX_T_SCHED, EX_T_TOKEN, EX_T_ALLOC, EX_T_INT };
    return ex_then(ex_read_env(keys[nd->op], types[nd->op]), read_conv, (void *)nd, EX_SIG_VARIADIC, sg_int_sig(1));
}

/* (n, hash) of a value list: a tuple (into_variant, stopped_as_optional of
 * several values) is unpacked, none (a stopped optional) is (-1, 0). */
static ex_error variant_conv(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    const g_node *nd = ctx;
    unsigned i = sg_node_index(nd);
    int64_t v[G_MAX_VALUES], pair[2] = { 0, 0 };
    if (nd->op == VK_INTO_VARIANT && (n != 1 || in[0].type != EX_T_TUPLE)) {
        sg_cb_fail(i, "into_variant completed without one tuple", n);
    } else if (n == 1 && in[0].type == EX_T_TUPLE) {
        const ex_tuple *t = in[0].as.tuple;
        if (!sg_ints_of(t->v, t->n, v)) sg_fn_inputs_bad();
        pair[0] = t->n;
        pair[1] = g_hash(v, t->n);
        if (nd->op == VK_INTO_VARIANT) {
            /* The index is the child's value signature that matched; 0
             * when none did (run-time signatures). */
            const ex_sigs *cs = &G.variant_sigs[i];
            int want = ex_sigs_find(cs, t->v, t->n);
            if (want < 0 && !(cs->flags & EX_SIGS_DYNAMIC)) sg_cb_fail(i, "into_variant sent values outside its child's signatures", t->n);
            if ((uint32_t)(want < 0 ? 0 : want) != t->index) sg_cb_fail(i, "into_variant's tuple has the wrong index", t->index);
        }
    } else if (n == 1 && in[0].type == EX_T_NONE) {
        pair[0] = -1;
    } else {
        if (!sg_ints_of(in, n, v)) sg_fn_inputs_bad();
        pair[0] = (int64_t)n;
        pair[1] = g_hash(v, n);
    }
    out[0] = ex_int(pair[0]);
    out[1] = ex_int(pair[1]);
    return ex_ok();
}

static ex_sender *build_variant(unsigned i, ex_sender **memo) {
    const g_node *nd = &G.g.nodes[i];
    ex_sender *c = sg_build(nd->child[0], memo);
    G.variant_sigs[i] = *ex_sender_sigs(c);
    ex_sender *v;
    if (nd->op == VK_INTO_VARIANT) v = ex_into_variant(c);
    else if (nd->op == VK_STOPPED_AS_OPTIONAL) v = ex_stopped_as_optional(c);
    else v = ex_stopped_as_error(c, ex_err(G_EUSER + (int)(nd->k & 15), "fuzz: stopped_as_error"));
    return ex_then(v, variant_conv, (void *)nd, EX_SIG_VARIADIC, sg_int_sig(2));
}

static ex_sender *build_write_env(unsigned i, ex_sender **memo) {
    const g_node *nd = &G.g.nodes[i];
    ex_sender *c = sg_build(nd->child[0], memo);
    switch (nd->op) {
    case WK_USER: return ex_write_env(c, &sg_user_key, ex_int(nd->k));
    case WK_SCHED: return ex_write_env(c, &ex_key_get_scheduler, ex_sched_value(sg_sched_of(nd->sched)));
    default: return ex_write_env(c, &ex_key_get_allocator, ex_alloc_value(&sg_alt_alloc));
    }
}

/* ---------------------------------------------------------------- build */

ex_sender *sg_build(unsigned i, ex_sender **memo) {
    g_node *nd = &G.g.nodes[i];
    ex_sender *s = NULL;
    switch (nd->kind) {
    case G_JUST: s = nd->boxed ? just_boxed(nd->vals, nd->arity) : just_ints(nd->vals, nd->arity); break;
    case G_JUST_ERROR: s = ex_just_error(ex_err(nd->code, "fuzz: just_error")); break;
    case G_JUST_STOPPED: s = ex_just_stopped(); break;
    case G_THEN: s = ex_then(sg_build(nd->child[0], memo), then_fn, nd, EX_SIG_VARIADIC, sg_int_sig(nd->arity)); break;
    case G_UPON_ERROR: s = ex_upon_error(sg_build(nd->child[0], memo), upon_error_fn, nd, sg_int_sig(nd->arity)); break;
    case G_UPON_STOPPED: s = ex_upon_stopped(sg_build(nd->child[0], memo), upon_stopped_fn, nd, sg_int_sig(nd->arity)); break;
    case G_LET_VALUE: s = ex_let_value(sg_build(nd->child[0], memo), let_value_fn, nd, EX_SIG_VARIADIC); break;
    case G_LET_ERROR: s = ex_let_error(sg_build(nd->child[0], memo), let_error_fn, nd); break;
    case G_LET_STOPPED: s = ex_let_stopped(sg_build(nd->child[0], memo), let_stopped_fn, nd); break;
    case G_WHEN_ALL: {
        ex_sender *c[3];
        for (unsigned j = 0; j < nd->nchild; j++) c[j] = sg_build(nd->child[j], memo);
        s = ex_when_all_n(c, nd->nchild);
        break;
    }
    case G_BULK: {
        ex_sender *c = sg_build(nd->child[0], memo);
        if (nd->grain == 0) s = ex_bulk(c, EX_PAR, nd->shape, bulk_fn, nd);
        else if (nd->grain < 3) s = ex_bulk_grain(c, EX_PAR, nd->shape, nd->grain, bulk_fn, nd);
        else s = ex_bulk_chunked(c, EX_PAR, nd->shape, 2, bulk_chunk_fn, nd);
        break;
    }
    case G_SPLIT: {
        ex_sender **m = &memo[nd->split_id];
        if (!*m) *m = ex_split(sg_build(G.g.splits[nd->split_id].child, memo));
        s = ex_sender_retain(*m);
        break;
    }
    case G_CONTINUES_ON: s = ex_continues_on(sg_build(nd->child[0], memo), sg_sched_of(nd->sched)); break;
    case G_STARTS_ON: s = ex_starts_on(sg_sched_of(nd->sched), sg_build(nd->child[0], memo)); break;
    case G_STOP_ENV: {
        ex_stop_token t = nd->stop_env == SE_NEVER ? ex_never_stop_token() : ex_stop_source_token(&G.node_src[i]);
        s = ex_write_env(sg_build(nd->child[0], memo), &ex_key_get_stop_token, ex_token_value(t));
        break;
    }
    case G_TASK: s = sg_build_task(i, memo); break;
    case G_SPAWN_FUTURE: s = ex_spawn_future(sg_build(nd->child[0], memo), ex_counting_scope_token(&G.scope)); break;
    case G_ALGO: s = sg_build_algo(i); break;
    case G_VARIANT: s = build_variant(i, memo); break;
    case G_READ_ENV: s = build_read_env(i); break;
    case G_WRITE_ENV: s = build_write_env(i, memo); break;
    case G_SCOPE: s = sg_build_scope(i, memo); break;
    default: s = ex_just_stopped(); break;
    }
    return G.g.mode.taps ? sg_tap(s, i) : s;
}
