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
    case G_TASK:
        p1 = rd(&d->r);
        p2 = rd(&d->r);
        need = 1;
        break;
    case G_SPAWN_FUTURE: need = 1; break;
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
        p1 = rd(&d->r);
        nd->arity = (uint8_t)(p1 % 4);
        /* Tuple boxing is decoded but off: the reference models a value
         * signature by its arity only, and a tuple signature next to an int
         * one of the same arity (upon_stopped over a boxed just) makes
         * when_all reject what the reference accepts.  Turn it on with a
         * type-aware signature model (fuzz/README.md, "not covered"). */
        nd->boxed = G_BOXING && ((p1 >> 2) & 1);
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
    case G_TASK:
        nd->task = p1 & 63;
        nd->sched = p2 % GS_COUNT;
        d->reserved += 1;
        nd->nchild = 1;
        nd->child[0] = dec_child(d, depth + 1);
        /* Only a leaf is awaited twice: its taps can count two runs. */
        if (g->nodes[nd->child[0]].kind > G_JUST_STOPPED) nd->task &= (uint8_t)~TK_TWICE;
        break;
    case G_SPAWN_FUTURE:
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
    g->mode.spawn = (m0 >> 7) & 1;
    g->mode.use_sync_wait = ((m0 >> 2) & 1) && !g->mode.spawn;
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
    "let_stopped", "when_all", "bulk", "split", "continues_on", "starts_on", "stop_env", "task", "spawn_future",
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
        fprintf(stderr, ")%s", nd->boxed ? " boxed" : "");
        break;
    case G_TASK:
        fprintf(stderr, "%s%s%s%s%s%s", nd->task & TK_TWICE ? " twice" : "", nd->task & TK_YIELD_BEFORE ? " yield-before" : "",
                nd->task & TK_YIELD_AFTER ? " yield-after" : "", nd->task & TK_INLINE ? " inline" : "",
                nd->task & TK_SIG ? " sig" : "", nd->task & TK_CHANGE ? " change:" : "");
        if (nd->task & TK_CHANGE) fprintf(stderr, "%s", sched_names[nd->sched]);
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
    fprintf(stderr, "mode: stop=%s delay=%u runner=%s%s loop=%s fault=%s(param %u) taps=%d env_sched=%s stopreq=%d\n",
            stop_names[g->mode.stop], g->mode.stop_delay, g->mode.use_sync_wait ? "sync_wait" : "receiver", g->mode.spawn ? "(spawn)" : "",
            g->mode.loop_thread ? "thread" : "harness", fault_names[g->mode.fault], g->mode.fault_param,
            g->mode.taps, sched_names[g->mode.env_sched], g->has_stopreq);
    dump_node(g, g->root, 0, "");
}

#ifndef GRAPH_SEED_WRITER

/* ========================================================== harness state */

/* What a node's tap saw.  Two completions are kept: the leaf child of a
 * TK_TWICE task runs twice. */
typedef struct node_rec {
    atomic_int started;
    atomic_int completions;
    r_out out[2];
    bool bad[2];         /* a value that is not an (encoded) int */
} node_rec;

/* rec[] slot of the root's completion in spawn mode (a tap around the root,
 * or ex_task_launch's handlers). */
#define TOP_REC G_MAX_NODES

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
    ex_counting_scope scope;      /* the run's: spawn_future nodes, spawn mode */
    ex_env_pair spawn_env;
    atomic_int top_done;          /* rec[TOP_REC] was written */
    bool root_spawned;            /* spawn mode: ex_spawn_env / ex_task_launch succeeded */
    _Atomic(ex_sender *) task_child[G_MAX_NODES];  /* a task's child, taken by its body */
    ex_sig task_sig[G_MAX_NODES];
    atomic_int twice_differ;      /* a TK_TWICE task's two awaits gave different values */
    g_graph g;
    node_rec rec[G_MAX_NODES + 1];
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

/* A boxed int x travels as tuple(int x, tuple(int x ^ G_BOX_KEY)): nested,
 * so every deep copy on the way is exercised (and checked on arrival). */
#define G_BOX_KEY 0x5a5a

static bool unbox(const ex_value *v, int64_t *out) {
    if (v->type == EX_T_INT) {
        *out = v->as.i;
        return true;
    }
    if (v->type != EX_T_TUPLE) return false;
    const ex_tuple *t = v->as.tuple;
    if (t->n != 2 || t->v[0].type != EX_T_INT || t->v[1].type != EX_T_TUPLE) return false;
    const ex_tuple *in = t->v[1].as.tuple;
    if (in->n != 1 || in->v[0].type != EX_T_INT || in->v[0].as.i != (t->v[0].as.i ^ G_BOX_KEY)) return false;
    *out = t->v[0].as.i;
    return true;
}

static bool ints_of(const ex_value *v, size_t n, int64_t *out) {
    if (n > G_MAX_VALUES) return false;
    for (size_t i = 0; i < n; i++)
        if (!unbox(&v[i], &out[i])) return false;
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
    int k = atomic_fetch_add(&rc->completions, 1);
    if (k < 2) {
        r_out *o = &rc->out[k];
        o->disp = disp;
        o->code = code;
        o->n = (uint8_t)(n > G_MAX_VALUES ? G_MAX_VALUES : n);
        if (disp == R_VALUE && !ints_of(v, n, o->v)) rc->bad[k] = true;
    }
    if (node == TOP_REC) atomic_store_explicit(&G.top_done, 1, memory_order_release);
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

/* ------------------------------------------------------------------ tasks */

static ex_task_result task_result(const ex_await_result *r) {
    switch (r->status) {
    case EX_AWAIT_VALUE: return ex_task_values(r->n, r->v);
    case EX_AWAIT_ERROR: return ex_task_with_error(r->error);
    default: return ex_task_stopped();
    }
}

/* A failed yield: a stopped task completes stopped whatever it returns. */
static ex_task_result task_failed(ex_task *t, ex_error e) {
    return ex_task_is_stopped(t) ? ex_task_stopped() : ex_task_with_error(e);
}

/* Awaits the leaf (multi-shot) child twice; the second result wins, and two
 * value results must agree. */
static void await_twice(ex_task *t, ex_sender *c, ex_await_result *r) {
    ex_await_into(t, ex_sender_retain(c), r);
    if (r->status != EX_AWAIT_VALUE) {
        ex_sender_release(c);
        return;
    }
    int64_t first[G_MAX_VALUES], second[G_MAX_VALUES];
    size_t n = r->n;
    if (!ints_of(r->v, n, first)) fn_inputs_bad();
    ex_await_into(t, c, r);
    if (r->status == EX_AWAIT_VALUE &&
        (r->n != n || !ints_of(r->v, n, second) || memcmp(first, second, n * sizeof first[0]) != 0))
        atomic_store(&G.twice_differ, 1);
}

static void unbox_all(ex_await_result *r) {
    int64_t v[G_MAX_VALUES];
    if (!ints_of(r->v, r->n, v)) fn_inputs_bad();
    for (unsigned i = 0; i < r->n && i < G_MAX_VALUES; i++) r->v[i] = ex_int(v[i]);
}

/* The body of every task node: await the child (built with the graph, kept
 * in G.task_child) and return what it gave. */
static ex_task_result task_body(ex_task *t, void *arg) {
    const g_node *nd = arg;
    ex_sender *c = atomic_exchange(&G.task_child[nd - G.g.nodes], NULL);
    ex_error e;
    if ((nd->task & TK_YIELD_BEFORE) && (e = ex_task_yield(t)).code) {
        ex_sender_release(c);
        return task_failed(t, e);
    }
    ex_scheduler prev = ex_task_scheduler(t);
    if (nd->task & TK_CHANGE) prev = ex_change_coroutine_scheduler(t, sched_of(nd->sched));
    ex_await_result r;
    if (nd->task & TK_TWICE) await_twice(t, c, &r);
    else ex_await_into(t, c, &r);
    /* A scheduler change or a yield may await internally (a run loop's yield
     * is an await of ex_schedule) and free r's tuple copies: unbox first. */
    if ((nd->task & (TK_CHANGE | TK_YIELD_AFTER)) && r.status == EX_AWAIT_VALUE) unbox_all(&r);
    if (nd->task & TK_CHANGE) (void)ex_change_coroutine_scheduler(t, prev);
    if ((nd->task & TK_YIELD_AFTER) && (e = ex_task_yield(t)).code) return task_failed(t, e);
    return task_result(&r);
}

static ex_sender *build_task(unsigned i, ex_sender **memo) {
    const g_node *nd = &G.g.nodes[i];
    ex_task_options opt;
    memset(&opt, 0, sizeof opt);
    opt.affinity = (nd->task & TK_INLINE) ? EX_TASK_INLINE : EX_TASK_AFFINE;
    int a = (nd->task & TK_SIG) ? ref_value_arity(&G.g, nd->child[0]) : -1;
    if (a >= 0) {
        /* Ints, like every other signature here: the reference tells
         * signatures apart by arity only, and an (any, any) next to an
         * (int, int) from an upon_* function would be two signatures to
         * cexec.  With tuple boxing on this needs a typed reference. */
        memset(&G.task_sig[i], 0, sizeof G.task_sig[i]);
        G.task_sig[i].arity = (uint8_t)a;
        for (int k = 0; k < a; k++) G.task_sig[i].types[k] = G_BOXING ? EX_T_ANY : EX_T_INT;
        opt.value_sig = &G.task_sig[i];
    }
    ex_sender_release(atomic_exchange(&G.task_child[i], build(nd->child[0], memo)));
    return ex_task_create(task_body, (void *)nd, &opt);
}

static ex_sender *build(unsigned i, ex_sender **memo) {
    g_node *nd = &G.g.nodes[i];
    ex_sender *s = NULL;
    switch (nd->kind) {
    case G_JUST: s = nd->boxed ? just_boxed(nd->vals, nd->arity) : just_ints(nd->vals, nd->arity); break;
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
    case G_TASK: s = build_task(i, memo); break;
    case G_SPAWN_FUTURE: s = ex_spawn_future(build(nd->child[0], memo), ex_counting_scope_token(&G.scope)); break;
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
        int comps = atomic_load(&rc->completions);
        for (int k = 0; k < comps && k < 2; k++) {
            r_out_format(&rc->out[k], buf, sizeof buf);
            fprintf(stderr, "  actual: %s\n", buf);
        }
        fprintf(stderr, "  (started %d, completions %d)\n", atomic_load(&rc->started), comps);
    }
    failures_seen++;
    abort();
}

/* A TK_TWICE task's leaf child runs twice; every other node at most once. */
static int max_starts(unsigned i) {
    for (unsigned j = 0; j < G.g.nnodes; j++) {
        const g_node *nd = &G.g.nodes[j];
        if (nd->kind == G_TASK && (nd->task & TK_TWICE) && nd->child[0] == i) return 2;
    }
    return 1;
}

static void check_node(unsigned i) {
    const g_node *nd = &G.g.nodes[i];
    node_rec *rc = &G.rec[i];
    int started = atomic_load(&rc->started), comps = atomic_load(&rc->completions);
    if (started > max_starts(i)) fail_report("a node was started twice", (int)i);
    if (!started && comps) fail_report("a node completed without being started", (int)i);
    if (!started) return;
    if (comps != started) fail_report(comps > started ? "a node completed more than once" : "a started node never completed", (int)i);
    if (!ref.reached[i]) fail_report("a node ran that the reference says cannot start", (int)i);
    for (int k = 0; k < comps; k++) {
        if (rc->bad[k]) fail_report("a node sent a value that is not an int", (int)i);
        if (!r_set_contains(&ref.node[i], &rc->out[k])) fail_report("a node completed with an outcome the reference does not allow", (int)i);
    }
    if (nd->kind == G_BULK && rc->out[0].disp == R_VALUE) {
        for (unsigned j = 0; j < nd->shape; j++)
            if (atomic_load(&G.bulk_hits[i][j]) != 1) fail_report("a bulk completed with values without running every index once", (int)i);
    }
}

static void check_nodes(void) {
    const g_graph *g = &G.g;
    for (unsigned i = 0; i < g->nnodes; i++) check_node(i);
    /* Every consumer of a split sees the same result. */
    for (unsigned s = 0; s < g->nsplits; s++) {
        int first = -1;
        for (unsigned i = 0; i < g->nnodes; i++) {
            if (g->nodes[i].kind != G_SPLIT || g->nodes[i].split_id != s || !atomic_load(&G.rec[i].started)) continue;
            if (first < 0) {
                first = (int)i;
                continue;
            }
            if (!r_set_contains(&(r_set){ .n = 1, .o = { G.rec[first].out[0] } }, &G.rec[i].out[0]))
                fail_report("two consumers of one split got different results", (int)i);
        }
    }
}

/* ----------------------------------------------------------------- runners */

/* Where the top-level stop requests go: the scope in spawn mode (spawned
 * work sees the scope's token), else the top-level source. */
static void request_stop_now(void) {
    if (G.g.mode.spawn) ex_counting_scope_request_stop(&G.scope);
    else ex_stop_source_request_stop(&G.top_src);
}

/* Waits for *done, driving the run_loop unless its thread does; makes the
 * asynchronous stop request when asked to. */
static void drive_until(atomic_int *done, bool inject_stop) {
    for (unsigned it = 0; !atomic_load_explicit(done, memory_order_acquire); it++) {
        if (inject_stop && G.g.mode.stop == GM_STOP_ASYNC && it == G.g.mode.stop_delay) request_stop_now();
        if (G.g.mode.loop_thread || !ex_run_loop_run_one(&G.loop)) sched_yield();
    }
}

static void run_sync_wait(ex_sender *s, r_out *actual, bool *bad) {
    s = ex_write_env(s, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&G.top_src)));
    pthread_t stopper;
    bool stopper_on = G.g.mode.stop == GM_STOP_ASYNC;
    if (stopper_on && pthread_create(&stopper, NULL, stopper_main, (void *)(uintptr_t)G.g.mode.stop_delay)) abort();
    ex_result r = ex_sync_wait(s);
    if (stopper_on) pthread_join(stopper, NULL);
    actual->disp = r.disposition == EX_DISP_VALUE ? R_VALUE : r.disposition == EX_DISP_ERROR ? R_ERROR : R_STOPPED;
    actual->code = r.error.code;
    actual->n = (uint8_t)(r.n > G_MAX_VALUES ? G_MAX_VALUES : r.n);
    if (actual->disp == R_VALUE && !ints_of(r.values, r.n, actual->v)) *bad = true;
    ex_result_destroy(&r);
}

static void run_receiver(ex_sender *s, r_out *actual, bool *bad) {
    static top_rcvr top;
    memset(&top, 0, sizeof top);
    ex_env_pair_init(&top.env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&G.top_src)), ex_env_empty());
    if (G.g.mode.env_sched != GS_COUNT) {
        top.env.key2 = &ex_key_get_scheduler;
        top.env.value2 = ex_sched_value(sched_of(G.g.mode.env_sched));
    }
    ex_receiver r = { &top_vt, &top };
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, r, &op);
    if (e.code) {
        actual->disp = R_ERROR;
        actual->code = e.code;
    } else {
        ex_start(op);
        drive_until(&top.done, true);
        ex_operation_free(op);
        if (atomic_load(&top.completions) != 1) fail_report("the top-level receiver completed more than once", -1);
        *actual = top.out;
        *bad = top.bad;
    }
    ex_sender_release(s);
}

static void launch_value(void *ctx, const ex_value *v, size_t n) { (void)ctx, tap_record(TOP_REC, R_VALUE, v, n, 0); }
static void launch_error(void *ctx, ex_error e) { (void)ctx, tap_record(TOP_REC, R_ERROR, NULL, 0, e.code); }
static void launch_stopped(void *ctx) { (void)ctx, tap_record(TOP_REC, R_STOPPED, NULL, 0, 0); }

static bool launched(void) { return G.g.mode.spawn && G.g.nodes[G.g.root].kind == G_TASK; }

/* Spawn mode: the root goes into the run's scope, its completion is seen by
 * a tap around it (ex_spawn_env) or by the launch handlers (task roots). */
static void run_spawn(ex_sender *s, r_out *actual, bool *bad) {
    ex_scope_token tok = ex_counting_scope_token(&G.scope);
    ex_error e;
    if (launched()) {
        static const ex_task_handlers h = { launch_value, launch_error, launch_stopped, NULL };
        atomic_store(&G.rec[TOP_REC].started, 1);
        e = ex_task_launch(tok, sched_of(ref_launch_sched(&G.g)), s, &h);
    } else {
        ex_env env = ex_env_empty();
        if (G.g.mode.env_sched != GS_COUNT) {
            ex_env_pair_init(&G.spawn_env, &ex_key_get_scheduler, ex_sched_value(sched_of(G.g.mode.env_sched)), ex_env_empty());
            env = ex_env_of_pair(&G.spawn_env);
        }
        e = ex_spawn_env(tap(s, TOP_REC), tok, env);
    }
    G.root_spawned = !e.code;
    if (e.code) {
        atomic_store(&G.rec[TOP_REC].started, 0);
        actual->disp = R_ERROR;
        actual->code = e.code;
        return;
    }
    drive_until(&G.top_done, true);
    node_rec *rc = &G.rec[TOP_REC];
    if (atomic_load(&rc->completions) != 1) fail_report("the spawned root completed more than once", -1);
    *actual = rc->out[0];
    *bad = rc->bad[0];
}

/* The scope's join, started like a graph: it waits for every spawned
 * future's work (and the spawned root). */
typedef struct join_rcvr {
    atomic_int done;
    r_out out;
} join_rcvr;

static void join_set_value(void *self, const ex_value *v, size_t n) {
    join_rcvr *j = self;
    (void)v;
    j->out.disp = R_VALUE;
    j->out.n = (uint8_t)n;
    atomic_store_explicit(&j->done, 1, memory_order_release);
}

static void join_set_error(void *self, ex_error e) {
    join_rcvr *j = self;
    j->out.disp = R_ERROR;
    j->out.code = e.code;
    atomic_store_explicit(&j->done, 1, memory_order_release);
}

static void join_set_stopped(void *self) {
    join_rcvr *j = self;
    j->out.disp = R_STOPPED;
    atomic_store_explicit(&j->done, 1, memory_order_release);
}

static ex_env join_env(void *self) { return (void)self, ex_env_empty(); }

static const ex_receiver_vtable join_vt = { join_set_value, join_set_error, join_set_stopped, join_env, NULL };

/* What the join must report: set_value, or the spawned root's error (the
 * scope keeps the first error of work spawned with ex_spawn). */
static r_out join_expected(const r_out *actual, bool spawned) {
    r_out o;
    memset(&o, 0, sizeof o);
    o.disp = R_VALUE;
    if (spawned && !launched() && actual->disp == R_ERROR) {
        o.disp = R_ERROR;
        o.code = actual->code;
    }
    return o;
}

static void join_scope(const r_out *actual, bool spawned) {
    static join_rcvr j;
    memset(&j, 0, sizeof j);
    ex_sender *s = ex_counting_scope_join(&G.scope);
    ex_operation *op = NULL;
    if (ex_connect_alloc(s, (ex_receiver){ &join_vt, &j }, &op).code) fail_report("the scope's join could not be connected", -1);
    ex_start(op);
    drive_until(&j.done, false);
    ex_operation_free(op);
    ex_sender_release(s);
    r_out want = join_expected(actual, spawned);
    if (!r_set_contains(&(r_set){ .n = 1, .o = { want } }, &j.out)) {
        char a[128], b[128];
        r_out_format(&j.out, a, sizeof a);
        r_out_format(&want, b, sizeof b);
        fprintf(stderr, "\njoin: %s, expected %s\n", a, b);
        fail_report("the scope's join completed with the wrong result", -1);
    }
    if (ex_counting_scope_destroy(&G.scope).code) fail_report("the scope could not be destroyed after its join", -1);
}

/* Children of tasks whose body never ran are still ours. */
static void release_task_children(void) {
    for (unsigned i = 0; i < G_MAX_NODES; i++) ex_sender_release(atomic_exchange(&G.task_child[i], NULL));
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
    atomic_store(&G.top_done, 0);
    G.root_spawned = false;
    atomic_store(&G.twice_differ, 0);
    ex_stop_source_init(&G.top_src);
    for (unsigned i = 0; i < g->nnodes; i++) {
        ex_stop_source_init(&G.node_src[i]);
        if (g->nodes[i].kind == G_STOP_ENV && g->nodes[i].stop_env == SE_STOPPED) ex_stop_source_request_stop(&G.node_src[i]);
    }
    if (ex_run_loop_init(&G.loop).code) abort();
    if (ex_counting_scope_init(&G.scope).code) abort();
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

    /* spawn_future nodes start their work here, while the graph is built. */
    ex_sender *s = build_tree(g->root);
    if (g->mode.fault == GM_FAULT_ENV)
        s = ex_write_env(s, &ex_key_get_allocator, ex_alloc_value(ex_fault_allocator_get(&G.fault)));
    if (g->mode.stop == GM_STOP_BEFORE) request_stop_now();

    r_out actual;
    memset(&actual, 0, sizeof actual);
    bool actual_bad = false;
    if (g->mode.spawn) run_spawn(s, &actual, &actual_bad);
    else if (g->mode.use_sync_wait) run_sync_wait(s, &actual, &actual_bad);
    else run_receiver(s, &actual, &actual_bad);

    /* The join needs no failing allocator; spawned work may still run. */
    ex_set_default_allocator(&counting_alloc);
    join_scope(&actual, G.root_spawned);
    release_task_children();

    ex_run_loop_finish(&G.loop);
    if (g->mode.loop_thread) pthread_join(loop_thread, NULL);
    else while (ex_run_loop_run_one(&G.loop)) {}
    if (ex_run_loop_destroy(&G.loop).code) fail_report("the run_loop still had work after the graph completed", -1);

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
            for (int k = 0; k < atomic_load(&G.rec[i].completions) && k < 2; k++) {
                r_out_format(&G.rec[i].out[k], buf, sizeof buf);
                fprintf(stderr, "      ran: %s\n", buf);
            }
        }
    }

    if (atomic_load(&G.fn_bad)) fail_report("a callback saw values that are not ints (or an index out of range)", -1);
    if (atomic_load(&G.twice_differ)) fail_report("a task awaiting a just twice got two different values", -1);
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
 * 9 when_all, 10 bulk, 11 split, 12 continues_on, 13 starts_on, 14 stop_env,
 * 15 task, 16 spawn_future. */
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
#define TASK(f, s) 15, (f), (s)         /* f: TK_* flags (1 twice, 2/4 yield before/after, 8 change to s,
                                           16 inline, 32 sig) */
#define SPAWNF 16
#define BOXED1(v) 0, 4 + 1, (v)         /* just of tuple-boxed values */
#define BOXED2(a, b) 0, 4 + 2, (a), (b)
/* mode byte 0: stop (0 none, 1 before, 2 async) | 4 sync_wait | 8 loop thread
 * | 32 fault default / 48 fault env | 64 no taps | 128 spawn the root; byte 1: env sched (0 none,
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
    SEED("task_no_sched", 0, 0, 0, THEN(8, 1), TASK(0, 0), JUST1(1)),
    SEED("task_inline_no_sched", 0, 0, 0, TASK(16, 0), JUST1(1)),
    SEED("task_sync_wait", 4, 0, 0, TASK(0, 0), JUST1(5)),
    SEED("task_twice", 4, 0, 0, TASK(1 | 32, 0), JUST2(3, 4)),
    SEED("task_yield_change", 0, 2, 0, TASK(2 | 4 | 8, 1), THEN(8, 1), JUST1(2)),
    SEED("task_nested", 4, 0, 0, TASK(0, 0), TASK(8, 2), JUST2(1, 2)),
    SEED("task_error", 0, 1, 0, UPON_E(8, 0), TASK(4, 0), JERR(3)),
    SEED("task_stopped", 0, 2, 0, TASK(1, 0), JSTOP),
    SEED("task_stop_async", 2 | 8, 1 | 4 * 3, 0, TASK(2, 1), STARTS(1), JUST1(1)),
    SEED("task_stop_before", 1, 1, 0, TASK(0, 0), CONT(0), JUST1(1)),
    SEED("when_all_tasks", 4, 0, 0, WHEN2, TASK(0, 0), CONT(2), JUST1(1), TASK(32, 0), JUST1(2)),
    SEED("task_in_split", 4, 0, 0, WHEN2, SPLIT_NEW, TASK(0, 0), JUST1(1), SPLIT_REF),
    SEED("task_in_let_body", 0, 2, 0, LET_V(3, 0), CONT(1), JUST1(1), TASK(8, 0), JUST1(2)),
    SEED("task_fault", 32, 1, 5, TASK(2 | 4 | 8, 2), CONT(2), BOXED2(1, 2)),
    SEED("spawn_future", 0, 0, 0, SPAWNF, CONT(2), JUST1(4)),
    SEED("spawn_future_task", 4, 0, 0, SPAWNF, TASK(0, 0), JUST1(1)),
    SEED("spawn_future_task_inline", 4, 0, 0, WHEN2, SPAWNF, TASK(16, 0), JUST1(1), SPAWNF, JERR(2)),
    SEED("spawn_future_dropped", 0, 1, 0, LET_V(1, 0), JUST0, SPAWNF, STARTS(1), JUST1(1)),
    SEED("spawn_root", 128, 0, 0, THEN(8, 1), JUST1(1)),
    SEED("spawn_root_error", 128, 1, 0, CONT(1), JERR(2)),
    SEED("spawn_root_stop_before", 128 | 1, 1, 0, STARTS(1), JUST1(1)),
    SEED("launch_task", 128, 2, 0, TASK(4, 1), JUST1(1)),
    SEED("launch_task_error", 128 | 8, 1, 0, TASK(0, 0), CONT(2), JERR(4)),
    SEED("tuple_just", 4, 0, 0, BOXED2(5, 6)),
    SEED("tuple_when_all", 4, 0, 0, WHEN2, CONT(2), BOXED1(7), TASK(0, 0), BOXED2(1, 2)),
    SEED("tuple_split", 0, 2, 0, WHEN2, SPLIT_NEW, CONT(2), BOXED1(9), SPLIT_REF),
    SEED("tuple_let_echo", 0, 0, 0, LET_V(5, 0), CONT(0), BOXED2(1, 2)),
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
