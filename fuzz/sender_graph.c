/* sender_graph.c - libFuzzer harness: decode the input into a random sender
 * graph, build it with cexec, run it, and compare what happened with the
 * reference interpreter (ref_interp.c).
 *
 * Checked on every input:
 *  - the outcome of the whole graph is one the reference allows;
 *  - with taps (every node wrapped in a recording pass-through sender),
 *    each node that started completed exactly once, with an outcome the
 *    reference allows for that node, and only nodes the reference can
 *    reach started; all consumers of a split got the same result; a bulk
 *    that completed with values ran every index exactly once;
 *  - the top-level receiver completed exactly once;
 *  - every block allocated through cexec's default allocator was freed
 *    (a counting allocator), LeakSanitizer finds nothing (libFuzzer's
 *    -detect_leaks), and no stop callback is left registered;
 *  - the run_loop is empty and can be destroyed.
 *
 * GRAPH_VERBOSE=1 in the environment prints the graph, the reference's
 * sets and what happened.  Built with -DGRAPH_SEED_WRITER, main() writes
 * the seed corpus instead (see writer at the end). */
#include <cexec/cexec.h>

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph.h"
#include "ref_interp.h"

/* ================================================================ decoder */

typedef struct reader {
    const uint8_t *p;
    size_t n, i;
} reader;

static uint8_t rd(reader *r) { return r->i < r->n ? r->p[r->i++] : 0; }

typedef struct dstate {
    g_graph *g;
    reader r;
    unsigned reserved;  /* node slots promised to children not yet decoded */
    unsigned splits_reserved;  /* splits whose child is being decoded */
    uint8_t scope;      /* 0xff: root tree; else the let whose body we are in */
    bool in_body;
} dstate;

static const uint8_t then_fns[8] = { TF_ADD, TF_MUL, TF_ERR, TF_ADD, TF_MUL, TF_ERR, TF_ADD, TF_STOPREQ };
static const uint8_t let_fns[8] = { LF_JUST, LF_ERR, LF_STOPPED, LF_BODY, LF_NULL, LF_ECHO, LF_BODY, LF_JUST };

static unsigned dec_node(dstate *d, unsigned depth);

/* Takes one of the reserved slots for a child and decodes it there. */
static uint8_t dec_child(dstate *d, unsigned depth) { return (uint8_t)dec_node(d, depth); }

static unsigned dec_node(dstate *d, unsigned depth) {
    g_graph *g = d->g;
    unsigned idx = g->nnodes++;
    d->reserved--;
    g_node *nd = &g->nodes[idx];
    memset(nd, 0, sizeof *nd);
    nd->depth = (uint8_t)depth;
    nd->in_body = d->in_body;
    uint8_t b = rd(&d->r);
    unsigned kind = b % G_KIND_COUNT;
    unsigned need = 0;          /* children this node wants */
    uint8_t p1 = 0, p2 = 0, p3 = 0;
    int split_ref = -1;
    switch (kind) {
    case G_JUST: case G_JUST_ERROR: case G_JUST_STOPPED: break;
    case G_THEN: case G_UPON_ERROR: case G_UPON_STOPPED:
    case G_CONTINUES_ON: case G_STARTS_ON: case G_STOP_ENV:
        p1 = rd(&d->r);
        if (kind <= G_UPON_STOPPED) p2 = rd(&d->r);
        need = 1;
        break;
    case G_LET_VALUE: case G_LET_ERROR: case G_LET_STOPPED:
        p1 = rd(&d->r);
        p2 = rd(&d->r);
        need = let_fns[p1 % 8] == LF_BODY ? 2 : 1;
        break;
    case G_WHEN_ALL:
        p1 = rd(&d->r);
        need = 2 + p1 % 2;
        break;
    case G_BULK:
        p1 = rd(&d->r);
        p2 = rd(&d->r);
        p3 = rd(&d->r);
        need = 1;
        break;
    case G_SPLIT: {
        p1 = rd(&d->r);
        unsigned avail[G_MAX_SPLITS], navail = 0;
        for (unsigned s = 0; s < g->nsplits; s++)
            if (g->splits[s].scope == d->scope && g->splits[s].consumers < G_MAX_CONSUMERS) avail[navail++] = s;
        if ((p1 & 1) && navail) split_ref = (int)avail[(p1 >> 1) % navail];
        else if (g->nsplits + d->splits_reserved < G_MAX_SPLITS) need = 1;
        else if (navail) split_ref = (int)avail[(p1 >> 1) % navail];
        else kind = G_JUST;  /* no room for another split */
        break;
    }
    default: break;
    }
    if (need && (depth >= G_MAX_DEPTH || g->nnodes + d->reserved + need > G_MAX_NODES)) {
        /* Too deep or too big: a leaf instead. */
        kind = b % 3;
        need = 0;
        split_ref = -1;
    }
    nd->kind = (uint8_t)kind;
    switch (kind) {
    case G_JUST:
        nd->arity = (uint8_t)(rd(&d->r) % 4);
        for (unsigned i = 0; i < nd->arity; i++) nd->vals[i] = (int8_t)rd(&d->r);
        break;
    case G_JUST_ERROR: nd->code = G_EUSER + rd(&d->r) % 16; break;
    case G_JUST_STOPPED: break;
    case G_THEN: case G_UPON_ERROR: case G_UPON_STOPPED:
        nd->fn = then_fns[p1 % 8];
        nd->arity = (uint8_t)((p1 >> 3) % 4);
        nd->k = (int8_t)p2;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    case G_LET_VALUE: case G_LET_ERROR: case G_LET_STOPPED:
        nd->fn = let_fns[p1 % 8];
        nd->arity = (uint8_t)((p1 >> 3) % 4);
        nd->k = (int8_t)p2;
        d->reserved += need;
        nd->nchild = (uint8_t)need;
        nd->child[0] = dec_child(d, depth + 1);
        if (need == 2) {
            uint8_t saved_scope = d->scope;
            bool saved_body = d->in_body;
            d->scope = (uint8_t)idx;
            d->in_body = true;
            nd->child[1] = dec_child(d, depth + 1);
            d->scope = saved_scope;
            d->in_body = saved_body;
        }
        break;
    case G_WHEN_ALL:
        d->reserved += need;
        nd->nchild = (uint8_t)need;
        for (unsigned i = 0; i < need; i++) nd->child[i] = dec_child(d, depth + 1);
        break;
    case G_BULK:
        nd->shape = p1 % 8;
        nd->fail_at = p2 % 12;
        nd->grain = (p2 >> 4) % 4;
        nd->k = (int8_t)p3;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    case G_SPLIT:
        if (split_ref >= 0) {
            nd->split_id = (uint8_t)split_ref;
            g->splits[split_ref].consumers++;
        } else {
            d->reserved += 1;
            d->splits_reserved++;
            uint8_t c = dec_child(d, depth + 1);
            d->splits_reserved--;
            /* Defined once its child is complete: no split refers to itself,
             * and splits inside it get smaller ids. */
            unsigned id = g->nsplits++;
            g->splits[id].child = c;
            g->splits[id].consumers = 1;
            g->splits[id].scope = d->scope;
            nd->split_id = (uint8_t)id;
        }
        break;
    case G_CONTINUES_ON: case G_STARTS_ON:
        nd->sched = p1 % GS_COUNT;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    case G_STOP_ENV:
        nd->stop_env = p1 % SE_COUNT;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        break;
    default: break;
    }
    return idx;
}

void g_decode(g_graph *g, const uint8_t *data, size_t size) {
    memset(g, 0, sizeof *g);
    dstate d = { g, { data, size, 0 }, 0, 0, 0xff, false };
    uint8_t m0 = rd(&d.r), m1 = rd(&d.r), m2 = rd(&d.r);
    static const uint8_t stop_modes[4] = { GM_STOP_NONE, GM_STOP_BEFORE, GM_STOP_ASYNC, GM_STOP_NONE };
    g->mode.stop = stop_modes[m0 & 3];
    g->mode.use_sync_wait = (m0 >> 2) & 1;
    g->mode.loop_thread = ((m0 >> 3) & 1) || g->mode.use_sync_wait;
    unsigned f = (m0 >> 4) & 3;
    g->mode.fault = f == 2 ? GM_FAULT_DEFAULT : f == 3 ? GM_FAULT_ENV : GM_FAULT_NONE;
    g->mode.taps = !((m0 >> 6) & 1);
    static const uint8_t env_scheds[4] = { GS_COUNT, GS_LOOP, GS_POOL, GS_COUNT };
    g->mode.env_sched = env_scheds[m1 & 3];
    g->mode.stop_delay = (uint16_t)(m1 >> 2);
    g->mode.fault_param = m2;
    g->mode.fault_seed = 0x9E3779B97F4A7C15ull * (uint64_t)(m2 + 1);
    d.reserved = 1;
    g->root = (uint8_t)dec_node(&d, 0);
    for (unsigned i = 0; i < g->nnodes; i++) {
        const g_node *nd = &g->nodes[i];
        if (nd->kind >= G_THEN && nd->kind <= G_UPON_STOPPED && nd->fn == TF_STOPREQ) g->has_stopreq = true;
    }
}

/* ------------------------------------------------------------------ dump */

static const char *const kind_names[G_KIND_COUNT] = {
    "just", "just_error", "just_stopped", "then", "upon_error", "upon_stopped", "let_value", "let_error",
    "let_stopped", "when_all", "bulk", "split", "continues_on", "starts_on", "stop_env",
};
static const char *const then_names[TF_COUNT] = { "add", "mul", "err", "stopreq" };
static const char *const let_names[LF_COUNT] = { "just", "err", "stopped", "body", "null", "echo" };
static const char *const sched_names[GS_COUNT + 1] = { "inline", "loop", "pool", "none" };
static const char *const stop_env_names[SE_COUNT] = { "never", "fresh", "stopped" };

const char *g_kind_name(unsigned kind) { return kind < G_KIND_COUNT ? kind_names[kind] : "?"; }

static void dump_node(const g_graph *g, unsigned i, unsigned indent, const char *label) {
    const g_node *nd = &g->nodes[i];
    fprintf(stderr, "%*s%s#%u %s", (int)indent * 2, "", label, i, g_kind_name(nd->kind));
    switch (nd->kind) {
    case G_JUST:
        fprintf(stderr, "(");
        for (unsigned j = 0; j < nd->arity; j++) fprintf(stderr, "%s%lld", j ? "," : "", (long long)nd->vals[j]);
        fprintf(stderr, ")");
        break;
    case G_JUST_ERROR: fprintf(stderr, "(%d)", nd->code); break;
    case G_THEN: case G_UPON_ERROR: case G_UPON_STOPPED:
        fprintf(stderr, " fn=%s k=%lld arity=%u", then_names[nd->fn], (long long)nd->k, nd->arity);
        break;
    case G_LET_VALUE: case G_LET_ERROR: case G_LET_STOPPED:
        fprintf(stderr, " fn=%s k=%lld arity=%u", let_names[nd->fn], (long long)nd->k, nd->arity);
        break;
    case G_BULK:
        fprintf(stderr, " shape=%u fail_at=%u grain=%u code=%d", nd->shape, nd->fail_at, nd->grain,
                G_EUSER + (int)(nd->k & 15));
        break;
    case G_SPLIT: fprintf(stderr, " id=%u", nd->split_id); break;
    case G_CONTINUES_ON: case G_STARTS_ON: fprintf(stderr, " %s", sched_names[nd->sched]); break;
    case G_STOP_ENV: fprintf(stderr, " %s", stop_env_names[nd->stop_env]); break;
    default: break;
    }
    fprintf(stderr, "\n");
    if (nd->kind == G_SPLIT) {
        const g_split *s = &g->splits[nd->split_id];
        /* Print the shared child under its defining (first) consumer only. */
        unsigned first = G_MAX_NODES;
        for (unsigned j = 0; j < g->nnodes; j++)
            if (g->nodes[j].kind == G_SPLIT && g->nodes[j].split_id == nd->split_id) {
                first = j;
                break;
            }
        if (first == i) dump_node(g, s->child, indent + 1, "shared: ");
        return;
    }
    for (unsigned j = 0; j < nd->nchild; j++)
        dump_node(g, nd->child[j], indent + 1, (j == 1 && nd->kind >= G_LET_VALUE && nd->kind <= G_LET_STOPPED) ? "body: " : "");
}

void g_dump(const g_graph *g) {
    static const char *const stop_names[3] = { "none", "before", "async" };
    static const char *const fault_names[3] = { "none", "default", "env" };
    fprintf(stderr, "mode: stop=%s delay=%u runner=%s loop=%s fault=%s(param %u) taps=%d env_sched=%s stopreq=%d\n",
            stop_names[g->mode.stop], g->mode.stop_delay, g->mode.use_sync_wait ? "sync_wait" : "receiver",
            g->mode.loop_thread ? "thread" : "harness", fault_names[g->mode.fault], g->mode.fault_param,
            g->mode.taps, sched_names[g->mode.env_sched], g->has_stopreq);
    dump_node(g, g->root, 0, "");
}

#ifndef GRAPH_SEED_WRITER

/* ========================================================== harness state */

typedef struct node_rec {
    atomic_int started;
    atomic_int completions;
    uint8_t disp, n;
    bool bad;            /* a value that is not an int */
    int32_t code;
    int64_t v[G_MAX_VALUES];
} node_rec;

/* Counting allocator: the process default for the whole run. */
static atomic_long cnt_in_use, cnt_allocs;

static void *cnt_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    const ex_allocator *u = ex_libc_allocator();
    void *p = u->allocate(u->ctx, size, align);
    if (p) {
        atomic_fetch_add(&cnt_in_use, 1);
        atomic_fetch_add(&cnt_allocs, 1);
    }
    return p;
}

static void cnt_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx;
    const ex_allocator *u = ex_libc_allocator();
    u->deallocate(u->ctx, p, size, align);
    atomic_fetch_sub(&cnt_in_use, 1);
}

static const ex_allocator counting_alloc = { cnt_allocate, cnt_deallocate, NULL, "fuzz-counting", NULL };

static struct {
    ex_pool *pool;
    ex_run_loop loop;
    ex_stop_source top_src;
    ex_stop_source node_src[G_MAX_NODES];
    ex_fault_allocator fault;
    g_graph g;
    node_rec rec[G_MAX_NODES];
    atomic_int bulk_hits[G_MAX_NODES][8];
    atomic_int fn_bad;       /* a callback saw values that are not ints */
    bool verbose;
} G;

static r_result ref;   /* large */

static ex_scheduler sched_of(unsigned s) {
    switch (s) {
    case GS_LOOP: return ex_run_loop_scheduler(&G.loop);
    case GS_POOL: return ex_pool_scheduler(G.pool);
    default: return ex_inline_scheduler();
    }
}

static bool ints_of(const ex_value *v, size_t n, int64_t *out) {
    if (n > G_MAX_VALUES) return false;
    for (size_t i = 0; i < n; i++) {
        if (v[i].type != EX_T_INT) return false;
        out[i] = v[i].as.i;
    }
    return true;
}

/* ------------------------------------------------------------ tap sender */

/* A transparent pass-through sender: same signatures, status, attributes
 * and environment as its child; records what the child completed with. */
typedef struct tap_sender {
    ex_sender base;
    ex_sender *child;
    unsigned node;
} tap_sender;

typedef struct tap_op {
    ex_operation base;
    ex_receiver r;
    ex_operation *child;
    unsigned node;
} tap_op;

static void tap_record(unsigned node, uint8_t disp, const ex_value *v, size_t n, int code) {
    node_rec *rc = &G.rec[node];
    if (atomic_fetch_add(&rc->completions, 1) != 0) return;
    rc->disp = disp;
    rc->code = code;
    rc->n = (uint8_t)(n > G_MAX_VALUES ? G_MAX_VALUES : n);
    if (disp == R_VALUE && !ints_of(v, n, rc->v)) rc->bad = true;
}

static void tap_set_value(void *self, const ex_value *v, size_t n) {
    tap_op *o = self;
    tap_record(o->node, R_VALUE, v, n, 0);
    ex_set_value(o->r, v, n);
}

static void tap_set_error(void *self, ex_error e) {
    tap_op *o = self;
    tap_record(o->node, R_ERROR, NULL, 0, e.code);
    ex_set_error(o->r, e);
}

static void tap_set_stopped(void *self) {
    tap_op *o = self;
    tap_record(o->node, R_STOPPED, NULL, 0, 0);
    ex_set_stopped(o->r);
}

static ex_env tap_env(void *self) { return ex_receiver_env(((tap_op *)self)->r); }

static const ex_receiver_vtable tap_rcvr_vt = { tap_set_value, tap_set_error, tap_set_stopped, tap_env, NULL };

static void tap_start(ex_operation *op) {
    tap_op *o = (tap_op *)op;
    atomic_fetch_add(&G.rec[o->node].started, 1);
    ex_start(o->child);
}

static void tap_op_destroy(ex_operation *op) { ex_operation_destroy(((tap_op *)op)->child); }

static const ex_operation_vtable tap_op_vt = { tap_start, tap_op_destroy };

static size_t tap_child_off(const ex_sender *child) { return ex_align_up(sizeof(tap_op), child->op_align); }

static ex_error tap_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const tap_sender *ts = (const tap_sender *)s;
    tap_op *o = storage;
    o->base.vt = &tap_op_vt;
    o->r = r;
    o->node = ts->node;
    o->child = (ex_operation *)(void *)((char *)storage + tap_child_off(ts->child));
    ex_receiver cr = { &tap_rcvr_vt, o };
    return ex_connect_child(ts->child, cr, o->child);
}

static ex_env tap_attrs(const ex_sender *s) { return ex_sender_attrs(((const tap_sender *)s)->child); }

static void tap_destroy(ex_sender *s) { ex_sender_release(((tap_sender *)s)->child); }

static const ex_sender_vtable tap_vt = { "fuzz_tap", tap_connect, tap_attrs, tap_destroy };

static ex_sender *tap(ex_sender *child, unsigned node) {
    ex_sender *s = ex_sender_alloc(&tap_vt, sizeof(tap_sender));
    if (!s) {
        ex_sender_release(child);
        return ex_invalid_sender(EX_ENOMEM, "fuzz_tap: out of memory");
    }
    tap_sender *ts = (tap_sender *)s;
    ts->child = child;
    ts->node = node;
    s->sigs = child->sigs;
    s->status = child->status;
    s->op_size = tap_child_off(child) + child->op_size;
    s->op_align = child->op_align > _Alignof(tap_op) ? child->op_align : _Alignof(tap_op);
    return s;
}

/* ------------------------------------------------------------- functions */

static void fn_inputs_bad(void) { atomic_store(&G.fn_bad, 1); }

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
    if (!ints_of(in, n, v)) {
        fn_inputs_bad();
        return ex_err(EX_EUSER + 999, "fuzz: bad input");
    }
    return call_then(ctx, v, n, out);
}

static ex_error upon_error_fn(void *ctx, ex_error err, ex_value *out) {
    int64_t v[1] = { err.code };
    return call_then(ctx, v, 1, out);
}

static ex_error upon_stopped_fn(void *ctx, ex_value *out) { return call_then(ctx, NULL, 0, out); }

static ex_sender *build(unsigned i, ex_sender **memo);

static ex_sender *just_ints(const int64_t *v, size_t n) {
    ex_value vals[G_MAX_VALUES];
    for (size_t i = 0; i < n; i++) vals[i] = ex_int(v[i]);
    return ex_just_n(vals, n);
}

static ex_sender *build_tree(unsigned root) {
    ex_sender *memo[G_MAX_SPLITS] = { 0 };
    ex_sender *s = build(root, memo);
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
    case LF_BODY: return build_tree(nd->child[1]);
    case LF_NULL: return NULL;
    default: return just_ints(in, n);
    }
}

static ex_sender *let_value_fn(void *ctx, const ex_value *in, size_t n) {
    int64_t v[G_MAX_VALUES];
    if (!ints_of(in, n, v)) {
        fn_inputs_bad();
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
    if (!ints_of(v, n, tmp)) fn_inputs_bad();
    if (i >= nd->shape) {
        fn_inputs_bad();
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

static ex_sig int_sig(unsigned arity) {
    ex_sig s;
    memset(&s, 0, sizeof s);
    s.arity = (uint8_t)arity;
    for (unsigned i = 0; i < arity; i++) s.types[i] = EX_T_INT;
    return s;
}

static ex_sender *build(unsigned i, ex_sender **memo) {
    g_node *nd = &G.g.nodes[i];
    ex_sender *s = NULL;
    switch (nd->kind) {
    case G_JUST: s = just_ints(nd->vals, nd->arity); break;
    case G_JUST_ERROR: s = ex_just_error(ex_err(nd->code, "fuzz: just_error")); break;
    case G_JUST_STOPPED: s = ex_just_stopped(); break;
    case G_THEN: s = ex_then(build(nd->child[0], memo), then_fn, nd, EX_SIG_VARIADIC, int_sig(nd->arity)); break;
    case G_UPON_ERROR: s = ex_upon_error(build(nd->child[0], memo), upon_error_fn, nd, int_sig(nd->arity)); break;
    case G_UPON_STOPPED: s = ex_upon_stopped(build(nd->child[0], memo), upon_stopped_fn, nd, int_sig(nd->arity)); break;
    case G_LET_VALUE: s = ex_let_value(build(nd->child[0], memo), let_value_fn, nd, EX_SIG_VARIADIC); break;
    case G_LET_ERROR: s = ex_let_error(build(nd->child[0], memo), let_error_fn, nd); break;
    case G_LET_STOPPED: s = ex_let_stopped(build(nd->child[0], memo), let_stopped_fn, nd); break;
    case G_WHEN_ALL: {
        ex_sender *c[3];
        for (unsigned j = 0; j < nd->nchild; j++) c[j] = build(nd->child[j], memo);
        s = ex_when_all_n(c, nd->nchild);
        break;
    }
    case G_BULK: {
        ex_sender *c = build(nd->child[0], memo);
        if (nd->grain == 0) s = ex_bulk(c, nd->shape, bulk_fn, nd);
        else if (nd->grain < 3) s = ex_bulk_grain(c, nd->shape, nd->grain, bulk_fn, nd);
        else s = ex_bulk_chunked(c, nd->shape, 2, bulk_chunk_fn, nd);
        break;
    }
    case G_SPLIT: {
        ex_sender **m = &memo[nd->split_id];
        if (!*m) *m = ex_split(build(G.g.splits[nd->split_id].child, memo));
        s = ex_sender_retain(*m);
        break;
    }
    case G_CONTINUES_ON: s = ex_continues_on(build(nd->child[0], memo), sched_of(nd->sched)); break;
    case G_STARTS_ON: s = ex_starts_on(sched_of(nd->sched), build(nd->child[0], memo)); break;
    case G_STOP_ENV: {
        ex_stop_token t = nd->stop_env == SE_NEVER ? ex_never_stop_token() : ex_stop_source_token(&G.node_src[i]);
        s = ex_write_env(build(nd->child[0], memo), &ex_key_get_stop_token, ex_token_value(t));
        break;
    }
    default: s = ex_just_stopped(); break;
    }
    return G.g.mode.taps ? tap(s, i) : s;
}

/* ---------------------------------------------------------- top receiver */

typedef struct top_rcvr {
    ex_env_pair env;
    atomic_int completions;
    atomic_int done;
    r_out out;
    bool bad;
} top_rcvr;

static void top_record(top_rcvr *t, uint8_t disp, const ex_value *v, size_t n, int code) {
    if (atomic_fetch_add(&t->completions, 1) == 0) {
        t->out.disp = disp;
        t->out.code = code;
        t->out.n = (uint8_t)(n > G_MAX_VALUES ? G_MAX_VALUES : n);
        if (disp == R_VALUE && !ints_of(v, n, t->out.v)) t->bad = true;
    }
    atomic_store_explicit(&t->done, 1, memory_order_release);
}

static void top_set_value(void *self, const ex_value *v, size_t n) { top_record(self, R_VALUE, v, n, 0); }
static void top_set_error(void *self, ex_error e) { top_record(self, R_ERROR, NULL, 0, e.code); }
static void top_set_stopped(void *self) { top_record(self, R_STOPPED, NULL, 0, 0); }
static ex_env top_env(void *self) { return ex_env_of_pair(&((top_rcvr *)self)->env); }

static const ex_receiver_vtable top_vt = { top_set_value, top_set_error, top_set_stopped, top_env, NULL };

/* ----------------------------------------------------------------- threads */

static void *loop_main(void *arg) {
    (void)arg;
    (void)ex_run_loop_run(&G.loop);
    return NULL;
}

static void *stopper_main(void *arg) {
    unsigned delay = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < delay; i++) sched_yield();
    ex_stop_source_request_stop(&G.top_src);
    return NULL;
}

/* ------------------------------------------------------------- comparison */

static int failures_seen;

static void fail_report(const char *what, int node) {
    fprintf(stderr, "\n==== sender_graph: %s", what);
    if (node >= 0) fprintf(stderr, " (node #%d %s)", node, g_kind_name(G.g.nodes[node].kind));
    fprintf(stderr, "\n");
    g_dump(&G.g);
    if (node >= 0) {
        char buf[256];
        r_set_dump("  reference:", &ref.node[node]);
        node_rec *rc = &G.rec[node];
        r_out o = { rc->disp, rc->n, 0, rc->code, { 0 } };
        memcpy(o.v, rc->v, sizeof o.v);
        r_out_format(&o, buf, sizeof buf);
        fprintf(stderr, "  actual: %s (started %d, completions %d)\n", buf, atomic_load(&rc->started),
                atomic_load(&rc->completions));
    }
    failures_seen++;
    abort();
}

static r_out rec_out(const node_rec *rc) {
    r_out o;
    memset(&o, 0, sizeof o);
    o.disp = rc->disp;
    o.n = rc->n;
    o.code = rc->code;
    memcpy(o.v, rc->v, sizeof o.v);
    return o;
}

static void check_nodes(void) {
    const g_graph *g = &G.g;
    for (unsigned i = 0; i < g->nnodes; i++) {
        node_rec *rc = &G.rec[i];
        int started = atomic_load(&rc->started), comps = atomic_load(&rc->completions);
        if (started > 1) fail_report("a node was started twice", (int)i);
        if (!started && comps) fail_report("a node completed without being started", (int)i);
        if (!started) continue;
        if (comps != 1) fail_report(comps ? "a node completed more than once" : "a started node never completed", (int)i);
        if (rc->bad) fail_report("a node sent a value that is not an int", (int)i);
        if (!ref.reached[i]) fail_report("a node ran that the reference says cannot start", (int)i);
        r_out o = rec_out(rc);
        if (!r_set_contains(&ref.node[i], &o)) fail_report("a node completed with an outcome the reference does not allow", (int)i);
        if (g->nodes[i].kind == G_BULK && o.disp == R_VALUE) {
            for (unsigned j = 0; j < g->nodes[i].shape; j++)
                if (atomic_load(&G.bulk_hits[i][j]) != 1) fail_report("a bulk completed with values without running every index once", (int)i);
        }
    }
    /* Every consumer of a split sees the same result. */
    for (unsigned s = 0; s < g->nsplits; s++) {
        int first = -1;
        for (unsigned i = 0; i < g->nnodes; i++) {
            if (g->nodes[i].kind != G_SPLIT || g->nodes[i].split_id != s || !atomic_load(&G.rec[i].started)) continue;
            if (first < 0) {
                first = (int)i;
                continue;
            }
            r_out a = rec_out(&G.rec[first]), b = rec_out(&G.rec[i]);
            if (!r_set_contains(&(r_set){ .n = 1, .o = { a } }, &b))
                fail_report("two consumers of one split got different results", (int)i);
        }
    }
}

/* ------------------------------------------------------------------ setup */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    ex_set_default_allocator(&counting_alloc);
    ex_pool_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.threads = 2;
    cfg.name_prefix = "fuzz";
    ex_error e = ex_pool_create(&cfg, &G.pool);
    if (e.code) {
        fprintf(stderr, "sender_graph: ex_pool_create failed: %s\n", e.msg);
        abort();
    }
    const char *v = getenv("GRAPH_VERBOSE");
    G.verbose = v && *v && *v != '0';
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g_graph *g = &G.g;
    g_decode(g, data, size);
    if (G.verbose) g_dump(g);

    long baseline = atomic_load(&cnt_in_use);
    memset(G.rec, 0, sizeof G.rec);
    memset(G.bulk_hits, 0, sizeof G.bulk_hits);
    atomic_store(&G.fn_bad, 0);
    ex_stop_source_init(&G.top_src);
    for (unsigned i = 0; i < g->nnodes; i++) {
        ex_stop_source_init(&G.node_src[i]);
        if (g->nodes[i].kind == G_STOP_ENV && g->nodes[i].stop_env == SE_STOPPED) ex_stop_source_request_stop(&G.node_src[i]);
    }
    if (ex_run_loop_init(&G.loop).code) abort();
    pthread_t loop_thread;
    if (g->mode.loop_thread && pthread_create(&loop_thread, NULL, loop_main, NULL)) abort();

    /* Allocation failures. */
    ex_fault_allocator_init(&G.fault, &counting_alloc);
    if (g->mode.fault != GM_FAULT_NONE) {
        uint32_t p = g->mode.fault_param;
        if (g->mode.fault == GM_FAULT_ENV || (p & 1)) ex_fault_allocator_fail_nth(&G.fault, (p >> 1) % 48 + 1);
        else ex_fault_allocator_fail_randomly(&G.fault, g->mode.fault_seed, 20000u + (p >> 1) * 2000u);
    }
    if (g->mode.fault == GM_FAULT_DEFAULT) ex_set_default_allocator(ex_fault_allocator_get(&G.fault));

    ex_sender *s = build_tree(g->root);
    if (g->mode.fault == GM_FAULT_ENV)
        s = ex_write_env(s, &ex_key_get_allocator, ex_alloc_value(ex_fault_allocator_get(&G.fault)));
    if (g->mode.stop == GM_STOP_BEFORE) ex_stop_source_request_stop(&G.top_src);

    r_out actual;
    memset(&actual, 0, sizeof actual);
    bool actual_bad = false;
    if (g->mode.use_sync_wait) {
        s = ex_write_env(s, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&G.top_src)));
        pthread_t stopper;
        bool stopper_on = g->mode.stop == GM_STOP_ASYNC;
        if (stopper_on && pthread_create(&stopper, NULL, stopper_main, (void *)(uintptr_t)g->mode.stop_delay)) abort();
        ex_result r = ex_sync_wait(s);
        if (stopper_on) pthread_join(stopper, NULL);
        actual.disp = r.disposition == EX_DISP_VALUE ? R_VALUE : r.disposition == EX_DISP_ERROR ? R_ERROR : R_STOPPED;
        actual.code = r.error.code;
        actual.n = (uint8_t)(r.n > G_MAX_VALUES ? G_MAX_VALUES : r.n);
        if (actual.disp == R_VALUE && !ints_of(r.values, r.n, actual.v)) actual_bad = true;
        ex_result_destroy(&r);
    } else {
        static top_rcvr top;
        memset(&top, 0, sizeof top);
        ex_env_pair_init(&top.env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&G.top_src)), ex_env_empty());
        if (g->mode.env_sched != GS_COUNT) {
            top.env.key2 = &ex_key_get_scheduler;
            top.env.value2 = ex_sched_value(sched_of(g->mode.env_sched));
        }
        ex_receiver r = { &top_vt, &top };
        ex_operation *op = NULL;
        ex_error e = ex_connect_alloc(s, r, &op);
        if (e.code) {
            actual.disp = R_ERROR;
            actual.code = e.code;
        } else {
            ex_start(op);
            for (unsigned it = 0; !atomic_load_explicit(&top.done, memory_order_acquire); it++) {
                if (g->mode.stop == GM_STOP_ASYNC && it == g->mode.stop_delay) ex_stop_source_request_stop(&G.top_src);
                if (g->mode.loop_thread || !ex_run_loop_run_one(&G.loop)) sched_yield();
            }
            ex_operation_free(op);
            if (atomic_load(&top.completions) != 1) fail_report("the top-level receiver completed more than once", -1);
            actual = top.out;
            actual_bad = top.bad;
        }
        ex_sender_release(s);
    }

    ex_run_loop_finish(&G.loop);
    if (g->mode.loop_thread) pthread_join(loop_thread, NULL);
    else while (ex_run_loop_run_one(&G.loop)) {}
    if (ex_run_loop_destroy(&G.loop).code) fail_report("the run_loop still had work after the graph completed", -1);
    ex_set_default_allocator(&counting_alloc);

    ex_alloc_stats fst;
    ex_allocator_stats(ex_fault_allocator_get(&G.fault), &fst);
    r_params params = { fst.failures > 0 };
    ref_run(g, &params, &ref);
    if (G.verbose) {
        char buf[256];
        r_out_format(&actual, buf, sizeof buf);
        fprintf(stderr, "allocation failures: %llu\n", (unsigned long long)fst.failures);
        r_set_dump("reference (top):", &ref.top);
        fprintf(stderr, "actual (top): %s\n", buf);
        for (unsigned i = 0; i < g->nnodes; i++) {
            char label[64];
            snprintf(label, sizeof label, "  #%u %s%s:", i, g_kind_name(g->nodes[i].kind), ref.reached[i] ? "" : " (unreached)");
            r_set_dump(label, &ref.node[i]);
            if (atomic_load(&G.rec[i].started)) {
                r_out o = rec_out(&G.rec[i]);
                r_out_format(&o, buf, sizeof buf);
                fprintf(stderr, "      ran: %s\n", buf);
            }
        }
    }

    if (atomic_load(&G.fn_bad)) fail_report("a callback saw values that are not ints (or an index out of range)", -1);
    if (actual_bad) fail_report("the graph completed with a value that is not an int", -1);
    if (!r_set_contains(&ref.top, &actual)) {
        char buf[256];
        r_out_format(&actual, buf, sizeof buf);
        fprintf(stderr, "\nactual (top): %s\n", buf);
        r_set_dump("reference (top):", &ref.top);
        fail_report("the graph completed with an outcome the reference does not allow", -1);
    }
    if (g->mode.taps) check_nodes();
    if (G.top_src.head) fail_report("a stop callback is still registered on the top-level source", -1);
    for (unsigned i = 0; i < g->nnodes; i++)
        if (G.node_src[i].head) fail_report("a stop callback is still registered on a stop_env source", (int)i);
    /* An operation may still be returning on a worker after the completion
     * reached us (a split consumer's start keeps the shared state until it
     * returns): give memory a bounded moment to come back. */
    long in_use = atomic_load(&cnt_in_use);
    for (int waited = 0; in_use != baseline && waited < 2000; waited++) {
        struct timespec ms = { 0, 1000 * 1000 };
        nanosleep(&ms, NULL);
        in_use = atomic_load(&cnt_in_use);
    }
    if (in_use != baseline) {
        fprintf(stderr, "\nblocks in use: %ld, before the run: %ld\n", in_use, baseline);
        fail_report("memory allocated through cexec was not freed", -1);
    }
    return 0;
}

#else /* GRAPH_SEED_WRITER */

/* ============================================================ seed writer */

/* Byte grammar (see README.md): 3 mode bytes, then the root node in
 * prefix order.  Kinds: 0 just, 1 just_error, 2 just_stopped, 3 then,
 * 4 upon_error, 5 upon_stopped, 6 let_value, 7 let_error, 8 let_stopped,
 * 9 when_all, 10 bulk, 11 split, 12 continues_on, 13 starts_on, 14 stop_env. */
#define JUST1(v) 0, 1, (v)
#define JUST2(a, b) 0, 2, (a), (b)
#define JUST0 0, 0
#define JERR(c) 1, (c)
#define JSTOP 2
#define THEN(fb, k) 3, (fb), (k)       /* fb: fn index (0 add, 1 mul, 2 err, 7 stopreq) + 8 * arity */
#define UPON_E(fb, k) 4, (fb), (k)
#define UPON_S(fb, k) 5, (fb), (k)
#define LET_V(fb, k) 6, (fb), (k)      /* fb: 0 just, 1 err, 2 stopped, 3 body, 4 null, 5 echo + 8 * arity */
#define LET_E(fb, k) 7, (fb), (k)
#define LET_S(fb, k) 8, (fb), (k)
#define WHEN2 9, 0
#define WHEN3 9, 1
#define BULK(shape, fb, k) 10, (shape), (fb), (k)  /* fb: fail_at + 16 * grain */
#define SPLIT_NEW 11, 0
#define SPLIT_REF 11, 1
#define CONT(s) 12, (s)                 /* 0 inline, 1 loop, 2 pool */
#define STARTS(s) 13, (s)
#define STOPENV(v) 14, (v)              /* 0 never, 1 fresh, 2 stopped */
/* mode byte 0: stop (0 none, 1 before, 2 async) | 4 sync_wait | 8 loop thread
 * | 32 fault default / 48 fault env | 64 no taps; byte 1: env sched (0 none,
 * 1 loop, 2 pool) | 4 * stop delay; byte 2: fault parameter. */

typedef struct seed {
    const char *name;
    const uint8_t *bytes;
    size_t size;
} seed;

#define SEED(name, ...) { name, (const uint8_t[]){ __VA_ARGS__ }, sizeof((const uint8_t[]){ __VA_ARGS__ }) }

static const seed seeds[] = {
    SEED("just", 0, 0, 0, JUST2(3, 4)),
    SEED("just_error", 0, 0, 0, JERR(5)),
    SEED("just_stopped", 0, 0, 0, JSTOP),
    SEED("then_chain", 0, 0, 0, THEN(8 + 0, 5), THEN(16 + 1, 2), JUST2(1, 2)),
    SEED("upon_error", 0, 0, 0, UPON_E(8, 1), THEN(8 + 2, 3), JUST1(7)),
    SEED("upon_stopped", 0, 0, 0, UPON_S(16, 4), JSTOP),
    SEED("let_value_body", 0, 0, 0, LET_V(3, 0), JUST1(1), WHEN2, JUST1(2), THEN(8, 1), JUST1(3)),
    SEED("let_error_stopped", 0, 0, 0, LET_S(8, 9), LET_E(2, 0), JERR(1)),
    SEED("when_all_error", 0, 0, 0, WHEN3, JUST1(1), CONT(1), JUST1(2), JERR(3)),
    SEED("bulk_pool", 0, 2, 0, BULK(6, 0x0b, 0), CONT(2), JUST2(1, 2)),
    SEED("bulk_fail_seq", 0, 0, 0, BULK(5, 0x12, 3), JUST1(4)),
    SEED("split_twice", 0, 0, 0, WHEN2, SPLIT_NEW, CONT(2), JUST1(9), SPLIT_REF),
    SEED("split_three", 0, 0, 0, WHEN3, SPLIT_NEW, STARTS(1), JUST1(1), THEN(8, 1), SPLIT_REF, SPLIT_REF),
    SEED("starts_on_loop_stop_before", 1, 0, 0, STARTS(1), JUST1(1)),
    SEED("continues_on_async_stop", 2 | 8, 4, 0, CONT(1), CONT(2), CONT(1), JUST1(1)),
    SEED("stopreq_then_hop", 0, 0, 0, CONT(1), THEN(8 + 7, 0), JUST1(1)),
    SEED("stop_env_stopped", 0, 0, 0, UPON_S(8, 0), STOPENV(2), STARTS(2), JUST1(1)),
    SEED("stop_env_never", 1, 0, 0, STOPENV(0), CONT(1), JUST1(1)),
    SEED("sync_wait_pool", 4, 0, 0, LET_V(3, 0), CONT(2), JUST1(1), BULK(4, 0x0f, 0), JUST1(2)),
    SEED("fault_default", 32, 0, 3, LET_V(3, 0), JUST1(1), WHEN2, JUST1(2), SPLIT_NEW, JUST1(3)),
    SEED("fault_env", 48, 0, 2, LET_V(3, 0), JUST1(1), LET_E(0 + 8, 1), JERR(4)),
    SEED("no_taps", 64, 1, 0, WHEN2, STARTS(2), JUST1(1), LET_V(8, 1), CONT(1), JUST1(2)),
    SEED("let_null", 0, 0, 0, UPON_E(8, 0), LET_V(4, 0), JUST0),
    SEED("when_all_too_many", 0, 0, 0, UPON_E(8, 0), WHEN3, 0, 3, 1, 2, 3, 0, 3, 4, 5, 6, 0, 3, 7, 8, 9),
};

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "fuzz/corpus";
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, seeds[i].name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(seeds[i].bytes, 1, seeds[i].size, f) != seeds[i].size) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        fclose(f);
        g_graph g;
        g_decode(&g, seeds[i].bytes, seeds[i].size);
        fprintf(stderr, "== %s (%zu bytes)\n", seeds[i].name, seeds[i].size);
        g_dump(&g);
    }
    return 0;
}

#endif
