/* ref_interp.c - the reference interpreter: the set of outcomes each node of
 * a decoded graph may complete with.
 *
 * It is written from the specification (P2300R10 [exec.*]) and cexec's
 * public headers, not from src/: the semantics it encodes are
 *
 *  - just / just_error / just_stopped, then / upon_*, let_*: deterministic;
 *  - stop is observed only by the schedule operations of the run_loop and
 *    the pool (starts_on before the child starts, continues_on after the
 *    child completed: set_stopped replaces whatever the child sent), by
 *    when_all at start, by a parallel bulk (pool) between chunks, and by
 *    split's first start; the inline scheduler never observes it;
 *  - when_all: any error wins (which one, if several, depends on timing),
 *    else any stopped, else the concatenated values (more than 8: EINVAL);
 *    an error or stopped child requests stop on its siblings; a child with
 *    more than one static value signature, or static arities adding up to
 *    more than 8, make the when_all an invalid sender (EINVAL);
 *  - split: every consumer gets the one shared result; a stop request on a
 *    consumer's token reaches the shared work; the shared work sees an
 *    environment with only the split's stop token (no scheduler);
 *  - bulk runs on the pool (in parallel, observing stop) when the child's
 *    value completion scheduler or the receiver environment's scheduler is
 *    the pool; otherwise it is the sequential, stop-blind loop;
 *  - a stop request from another thread, or from a function while other
 *    work runs, races: both outcomes are allowed ("RACE"); a request made
 *    before the observing operation starts is seen ("ALWAYS"), including
 *    one made by a function that completed before, in causal order, on a
 *    token linked to the top-level source;
 *  - when an allocation failed during the run, any node may complete with
 *    EX_ENOMEM (and a when_all may become invalid, since a failed builder's
 *    signatures differ).
 *
 * Stop contexts need the consumers of each split before the split's work
 * can be evaluated, so the interpreter makes two passes: the first one only
 * collects, for each split, the stop contexts its consumers see; the second
 * one computes the sets. */
#include "ref_interp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------- function table */

static uint64_t sum_plus(int64_t k, const int64_t *in, size_t n) {
    uint64_t s = (uint64_t)k;
    for (size_t i = 0; i < n; i++) s += (uint64_t)in[i];
    return s;
}

int g_then_apply(const g_node *nd, const int64_t *in, size_t n, int64_t *out) {
    uint64_t base;
    switch (nd->fn) {
    case TF_ERR: return G_EUSER + (int)(nd->k & 15);
    case TF_MUL:
        base = 1;
        for (size_t i = 0; i < n; i++) base *= (uint64_t)in[i];
        base *= (uint64_t)(nd->k + 1);
        break;
    default: base = sum_plus(nd->k, in, n); break;
    }
    for (unsigned i = 0; i < nd->arity; i++) out[i] = (int64_t)(base + i);
    return 0;
}

/* ------------------------------------------------------------------ sets */

static r_out out_value(const int64_t *v, size_t n, bool top_req) {
    r_out o;
    memset(&o, 0, sizeof o);
    o.disp = R_VALUE;
    o.n = (uint8_t)n;
    o.top_req = top_req;
    if (n) memcpy(o.v, v, n * sizeof *v);
    return o;
}

static r_out out_error(int code, bool top_req) {
    r_out o;
    memset(&o, 0, sizeof o);
    o.disp = R_ERROR;
    o.code = code;
    o.top_req = top_req;
    return o;
}

static r_out out_stopped(bool top_req) {
    r_out o;
    memset(&o, 0, sizeof o);
    o.disp = R_STOPPED;
    o.top_req = top_req;
    return o;
}

static bool same(const r_out *a, const r_out *b, bool with_flag) {
    if (a->disp != b->disp) return false;
    if (with_flag && a->top_req != b->top_req) return false;
    if (a->disp == R_ERROR) return a->code == b->code;
    if (a->disp == R_STOPPED) return true;
    return a->n == b->n && memcmp(a->v, b->v, a->n * sizeof a->v[0]) == 0;
}

bool r_set_contains(const r_set *s, const r_out *o) {
    if (s->any) return true;
    for (unsigned i = 0; i < s->n; i++)
        if (same(&s->o[i], o, false)) return true;
    return false;
}

static void set_clear(r_set *s) {
    s->n = 0;
    s->any = false;
    s->sync = false;
}

static void set_add(r_set *s, r_out o) {
    if (s->any) return;
    for (unsigned i = 0; i < s->n; i++)
        if (same(&s->o[i], &o, true)) return;
    if (s->n == R_SET_MAX) {
        s->any = true;
        return;
    }
    s->o[s->n++] = o;
}

static void set_union(r_set *s, const r_set *t) {
    if (t->any) s->any = true;
    for (unsigned i = 0; i < t->n; i++) set_add(s, t->o[i]);
}

void r_out_format(const r_out *o, char *buf, size_t size) {
    int len;
    switch (o->disp) {
    case R_VALUE:
        len = snprintf(buf, size, "value(");
        for (unsigned i = 0; i < o->n && len >= 0 && (size_t)len < size; i++)
            len += snprintf(buf + len, size - (size_t)len, "%s%lld", i ? "," : "", (long long)o->v[i]);
        if (len >= 0 && (size_t)len < size) snprintf(buf + len, size - (size_t)len, ")");
        break;
    case R_ERROR: snprintf(buf, size, "error(%d)", o->code); break;
    case R_STOPPED: snprintf(buf, size, "stopped"); break;
    default: snprintf(buf, size, "(none, disp %d)", o->disp); break;
    }
}

void r_set_dump(const char *label, const r_set *s) {
    fprintf(stderr, "%s {", label);
    if (s->any) fprintf(stderr, " ANY");
    for (unsigned i = 0; i < s->n; i++) {
        char buf[256];
        r_out_format(&s->o[i], buf, sizeof buf);
        fprintf(stderr, " %s%s", buf, s->o[i].top_req ? "[req]" : "");
    }
    fprintf(stderr, " }\n");
}

/* ------------------------------------------------- static signatures */

enum { CS_NONE = 0xff };

typedef struct ssig {
    uint16_t mask;            /* value arities, bit a = set_value with a ints */
    bool dyn, err, stop;
    bool invalid;             /* an invalid sender (EX_EINVAL at start) */
    uint8_t cs_value, cs_error, cs_stopped;  /* completion schedulers (CS_NONE or g_sched) */
} ssig;

static unsigned popcount16(uint16_t m) { return (unsigned)__builtin_popcount(m); }

/* ex_sigs_add_value: at most 8 distinct signatures, else dynamic. */
static void sig_add(ssig *s, unsigned arity) {
    if (s->mask & (1u << arity)) return;
    if (popcount16(s->mask) >= 8) {
        s->dyn = true;
        return;
    }
    s->mask = (uint16_t)(s->mask | (1u << arity));
}

static ssig sig_none(void) {
    ssig s;
    memset(&s, 0, sizeof s);
    s.cs_value = s.cs_error = s.cs_stopped = CS_NONE;
    return s;
}

static uint8_t sched_flags_stop(unsigned sch) { return sch == GS_LOOP || sch == GS_POOL; }
static uint8_t sched_flags_err(unsigned sch) { return sch == GS_POOL; }

static ssig sig_invalid(void) {
    ssig s = sig_none();
    s.err = true;
    s.invalid = true;
    return s;
}

/* A builder given an invalid input returns an invalid sender with the
 * input's error (ex_check_input): invalidity climbs to the root of the
 * tree built together (a let body is built, and fails, on its own). */
static bool conn_fails(const g_graph *g, unsigned i, unsigned env);

/* into_variant / stopped_as_optional / stopped_as_error (into_variant.h)
 * of a child with signatures c, behind the harness's then that turns a
 * value completion into (n, hash): two ints. */
static ssig sig_variant(const g_node *nd, ssig c) {
    ssig v = sig_none();
    switch (nd->op) {
    case VK_INTO_VARIANT:
        if (c.mask || c.dyn) v.mask = 1u << 1;  /* one tuple */
        v.err = c.err;
        v.stop = c.stop;
        v.cs_value = c.cs_value, v.cs_error = c.cs_error, v.cs_stopped = c.cs_stopped;
        break;
    case VK_STOPPED_AS_OPTIONAL:
        /* exactly one value signature with at least one datum, else EX_EINVAL */
        if (!c.dyn && (popcount16(c.mask) != 1 || c.mask == 1u)) return sig_invalid();
        v.mask = 1u << 1;
        v.err = c.err || c.dyn;
        break;
    default:
        v.mask = c.mask;
        v.dyn = c.dyn;
        v.err = c.err || c.stop;
        break;
    }
    ssig s = sig_none();
    bool calls = v.mask || v.dyn;
    if (calls) s.mask = 1u << 2;
    s.err = v.err || calls;
    s.stop = v.stop;
    s.cs_value = v.cs_value, s.cs_error = v.cs_error, s.cs_stopped = v.cs_stopped;
    return s;
}

static ssig sig_of(const g_graph *g, unsigned i) {
    const g_node *nd = &g->nodes[i];
    ssig s = sig_none();
    ssig c = sig_none();
    bool calls;
    if (nd->kind == G_SPLIT) {
        /* ex_split connects the shared work when it is built, in an
         * environment without a scheduler: a task there that needs one
         * makes ex_split return an invalid sender. */
        c = sig_of(g, g->splits[nd->split_id].child);
        if (c.invalid || conn_fails(g, g->splits[nd->split_id].child, GS_COUNT)) return sig_invalid();
    } else if (nd->kind == G_TASK || nd->kind == G_SPAWN_FUTURE || nd->kind == G_SCOPE) {
        /* The children reach them at run time (an await, a spawn): an invalid
         * one is an EX_EINVAL completion, not an invalid builder input.  A
         * task returns its last child's values. */
        c = sig_of(g, nd->child[nd->kind == G_TASK ? nd->nchild - 1 : 0]);
    } else if (nd->kind != G_WHEN_ALL && nd->nchild) {
        c = sig_of(g, nd->child[0]);
        if (c.invalid) return sig_invalid();
    } else if (nd->kind == G_WHEN_ALL) {
        for (unsigned j = 0; j < nd->nchild; j++)
            if (sig_of(g, nd->child[j]).invalid) return sig_invalid();
    }
    switch (nd->kind) {
    case G_JUST: s.mask = (uint16_t)(1u << nd->arity); break;
    case G_JUST_ERROR: s.err = true; break;
    case G_JUST_STOPPED: s.stop = true; break;
    case G_THEN:
        c = sig_of(g, nd->child[0]);
        calls = c.mask || c.dyn;
        s.err = c.err || calls;
        s.stop = c.stop;
        if (calls) sig_add(&s, nd->arity);
        s.cs_value = c.cs_value, s.cs_error = c.cs_error, s.cs_stopped = c.cs_stopped;
        break;
    case G_UPON_ERROR:
        c = sig_of(g, nd->child[0]);
        s = c;
        s.invalid = false;
        calls = c.err;
        s.err = false;
        if (calls) {
            s.err = true;
            sig_add(&s, nd->arity);
        }
        break;
    case G_UPON_STOPPED:
        c = sig_of(g, nd->child[0]);
        s = c;
        s.invalid = false;
        calls = c.stop;
        s.stop = false;
        if (calls) {
            s.err = true;
            sig_add(&s, nd->arity);
        }
        break;
    case G_LET_VALUE:
        c = sig_of(g, nd->child[0]);
        calls = c.mask || c.dyn;
        s.err = c.err;
        s.stop = c.stop;
        if (calls) s.dyn = s.err = s.stop = true;
        break;
    case G_LET_ERROR:
        c = sig_of(g, nd->child[0]);
        s.mask = c.mask;
        s.dyn = c.dyn;
        s.stop = c.stop;
        if (c.err) s.dyn = s.err = s.stop = true;
        break;
    case G_LET_STOPPED:
        c = sig_of(g, nd->child[0]);
        s.mask = c.mask;
        s.dyn = c.dyn;
        s.err = c.err;
        if (c.stop) s.dyn = s.err = s.stop = true;
        break;
    case G_WHEN_ALL: {
        unsigned sum = 0;
        bool dynamic = false, can_value = true;
        s.stop = true;
        for (unsigned j = 0; j < nd->nchild; j++) {
            c = sig_of(g, nd->child[j]);
            if (popcount16(c.mask) > 1) goto invalid;
            s.err = s.err || c.err;
            if (c.dyn) {
                dynamic = true;
                s.err = true;
            } else if (c.mask) {
                unsigned a = (unsigned)__builtin_ctz(c.mask);
                if (sum + a > G_MAX_VALUES) goto invalid;
                sum += a;
            }
            if (!c.mask && !c.dyn) can_value = false;
        }
        if (can_value) {
            if (dynamic) s.dyn = true;
            else s.mask = (uint16_t)(1u << sum);
        }
        break;
    invalid:
        s = sig_invalid();
        break;
    }
    case G_BULK:
        c = sig_of(g, nd->child[0]);
        s = c;
        s.invalid = false;
        if (c.mask || c.dyn) s.err = s.stop = true;
        break;
    case G_SPLIT:
        c = sig_of(g, g->splits[nd->split_id].child);
        s.mask = c.mask;
        s.dyn = c.dyn;
        s.err = s.stop = true;
        break;
    case G_CONTINUES_ON:
        c = sig_of(g, nd->child[0]);
        s.mask = c.mask;
        s.dyn = c.dyn;
        s.err = c.err || sched_flags_err(nd->sched) || c.mask || c.dyn;
        s.stop = c.stop || sched_flags_stop(nd->sched);
        s.cs_value = s.cs_stopped = nd->sched;
        s.cs_error = c.cs_error;
        break;
    case G_STARTS_ON:
        c = sig_of(g, nd->child[0]);
        s = c;
        s.invalid = false;
        s.err = c.err || sched_flags_err(nd->sched);
        s.stop = c.stop || sched_flags_stop(nd->sched);
        break;
    case G_STOP_ENV:
        s = sig_of(g, nd->child[0]);
        s.invalid = false;
        break;
    case G_TASK:
        /* error and stopped always; the declared value signature, else dynamic */
        s.err = s.stop = true;
        if ((nd->task & TK_SIG) && popcount16(c.mask) == 1 && !c.dyn && !c.invalid) s.mask = c.mask;
        else s.dyn = true;
        break;
    case G_SPAWN_FUTURE:
        /* A child that cannot be started (invalid, or its connect fails in
         * the spawn's environment, which has no scheduler) makes
         * ex_spawn_future return an invalid sender; else the child's
         * signatures plus error and stopped. */
        if (c.invalid || conn_fails(g, nd->child[0], GS_COUNT)) return sig_invalid();
        s.err = s.stop = true;
        s.mask = c.mask;
        s.dyn = c.dyn;
        break;
    case G_ALGO:
        /* The algorithm (value, error, stopped) behind a then that turns its
         * result into one int; its attributes are hidden (see the harness). */
        if (g_algo_invalid(nd)) return sig_invalid();
        s.mask = 1u << 1;
        s.err = s.stop = true;
        break;
    case G_READ_ENV:
        /* read_env (no completion scheduler) behind a then: an int id */
        s.mask = 1u << 1;
        s.err = true;
        break;
    case G_WRITE_ENV:
        s = c;
        break;
    case G_VARIANT: s = sig_variant(nd, c); break;
    case G_SCOPE:
        /* the harness's scope sender: value(count) or the first error */
        s.mask = 1u << 1;
        s.err = true;
        break;
    default: break;
    }
    return s;
}

bool ref_single_value_sig(const g_graph *g, unsigned node) { return popcount16(sig_of(g, node).mask) <= 1; }

int ref_value_arity(const g_graph *g, unsigned node) {
    ssig s = sig_of(g, node);
    if (s.invalid || s.dyn || popcount16(s.mask) != 1) return -1;
    return __builtin_ctz(s.mask);
}

unsigned ref_launch_sched(const g_graph *g) { return g->mode.env_sched != GS_COUNT ? g->mode.env_sched : GS_LOOP; }

/* Whether connecting the node fails (EX_EINVAL) in an environment whose
 * scheduler is env (GS_COUNT: none): a task needs one unless it is
 * EX_TASK_INLINE (task.h).  Connect recurses into the children an adaptor
 * connects with itself; a let body, a task's child (awaited), a split's
 * shared work and a future's work are connected elsewhere. */
static bool conn_fails(const g_graph *g, unsigned i, unsigned env) {
    const g_node *nd = &g->nodes[i];
    if (sig_of(g, i).invalid) return false;  /* an invalid sender connects, and fails at start */
    switch (nd->kind) {
    case G_TASK: return env == GS_COUNT && !(nd->task & TK_INLINE);
    case G_SPLIT: case G_SPAWN_FUTURE: case G_SCOPE: return false;
    case G_WRITE_ENV: return conn_fails(g, nd->child[0], nd->op == WK_SCHED ? nd->sched : env);
    case G_STARTS_ON: return conn_fails(g, nd->child[0], nd->sched);
    case G_WHEN_ALL:
        for (unsigned j = 0; j < nd->nchild; j++)
            if (conn_fails(g, nd->child[j], env)) return true;
        return false;
    default: return nd->nchild && conn_fails(g, nd->child[0], env);
    }
}

/* ------------------------------------------------------------- evaluation */

#define ENV_OTHER 0xfe  /* a scheduler that is not one of the graph's (sync_wait's loop) */

typedef struct rctx {
    uint8_t stop;        /* r_stop */
    bool top_linked;     /* a request on the top source reaches this token at once */
    uint8_t env_sched;   /* get_scheduler of the environment: g_sched, GS_COUNT (none) or ENV_OTHER */
    uint8_t tok;         /* which token get_stop_token answers: TOK_* */
    uint8_t alloc;       /* the allocators get_allocator may answer (1 << A_*); 0: none written, resolved
                            when read (env.h: the scheduler's, else the process default) */
    bool late;           /* may run after the harness restored the process default allocator */
    int16_t user;        /* the user key's value; -1: not in the environment */
    uint8_t alloc_dev;   /* allocators get_allocator answers besides (1 << A_*): see alloc_shortcut */
} rctx;

/* The environment of work started on its own: a split's shared work, a
 * future's work: only a stop token of its own. */
static rctx ctx_detached(unsigned stop) {
    rctx c = { (uint8_t)stop, false, GS_COUNT, TOK_OTHER, 0, true, -1, 0 };
    return c;
}

typedef struct rstate {
    const g_graph *g;
    const r_params *p;
    r_result *res;
    int phase;                         /* 1: collect split contexts; 2: compute */
    bool record;
    uint8_t split_join[G_MAX_SPLITS];  /* 1 << r_stop of each consumer context */
    r_set split_set[G_MAX_SPLITS];
    bool last;                         /* the recording round */
    bool spawn_done[G_MAX_NODES];      /* spawn_set computed in this phase */
    uint8_t split_walked;              /* walk_spawns: shared children already walked */
    r_set spawn_set[G_MAX_NODES];      /* a spawn_future's work */
    bool algo_done[G_MAX_NODES];       /* algo_value computed */
    int64_t algo_value[G_MAX_NODES];   /* what an algorithm node's converter sends */
} rstate;

static void eval(rstate *st, unsigned i, rctx cx, r_set *out);
static void walk_spawns(rstate *st, unsigned i);
static uint8_t alloc_ids(const rstate *st, rctx cx);

/* A known deviation from env.h, tolerated so that the rest stays checked
 * (fuzz/README.md, "findings"): starts_on and when_all answer get_allocator
 * in their children's environment with the allocator resolved where they
 * are connected ("a shortcut for deep nesting"), so a child that runs
 * under another scheduler (a nested starts_on, a task, a let body) sees
 * the outer scheduler's allocator instead of its own scheduler's, and one
 * under a starts_on(pool) inside a when_all sees the when_all's instead of
 * the pool's.  Only when no allocator was written: a written one is the
 * same either way. */
static void alloc_shortcut(const rstate *st, rctx *cc) {
    if (!cc->alloc) cc->alloc_dev = (uint8_t)(cc->alloc_dev | alloc_ids(st, *cc));
}

/* eval behind a connect: EX_EINVAL when connecting the subtree fails. */
static void eval_conn(rstate *st, unsigned i, rctx cx, r_set *out) {
    if (!conn_fails(st->g, i, cx.env_sched)) {
        eval(st, i, cx, out);
        return;
    }
    set_clear(out);
    set_add(out, out_error(EINVAL, false));
    if (st->p->oom) {
        set_add(out, out_error(ENOMEM, false));
        /* Its builder may have failed instead: then it is an invalid
         * sender, which connects, starts and completes with EX_ENOMEM. */
        if (st->phase == 2 && st->record) {
            set_add(&st->res->node[i], out_error(ENOMEM, false));
            st->res->reached[i] = true;
        }
    }
}

/* Clears the spawn sets at the start of a phase. */
static void spawns_reset(rstate *st) {
    memset(st->spawn_done, 0, sizeof st->spawn_done);
    st->split_walked = 0;
}

/* Stop state at an observation point that runs after a completion that
 * carried `req` (a definite request on the top source before it). */
static unsigned observe(const rstate *st, rctx cx, bool req) {
    if (st->phase == 2 && req && cx.top_linked) return RS_ALWAYS;
    return cx.stop;
}

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

static void eval_then(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    r_set c;
    eval(st, nd->child[0], cx, &c);
    out->any = c.any;
    out->sync = c.sync;
    uint8_t ch = channel_of(nd->kind);
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        if (o->disp != ch) {
            set_add(out, *o);
            continue;
        }
        int64_t in[G_MAX_VALUES], res[G_MAX_VALUES];
        size_t n;
        input_of(o, in, &n);
        int code = g_then_apply(nd, in, n, res);
        if (code) set_add(out, out_error(code, o->top_req));
        else set_add(out, out_value(res, nd->arity, o->top_req || nd->fn == TF_STOPREQ));
    }
}

static void eval_let(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    r_set c;
    eval(st, nd->child[0], cx, &c);
    out->any = c.any;
    uint8_t ch = channel_of(nd->kind);
    ssig cs = sig_of(st->g, nd->child[0]);
    uint8_t body_sched = ch == R_VALUE ? cs.cs_value : ch == R_ERROR ? cs.cs_error : cs.cs_stopped;
    bool body_done[2] = { false, false };
    r_set body[2];
    bool called = c.any;
    out->sync = c.sync;
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        if (o->disp != ch) {
            set_add(out, *o);
            continue;
        }
        called = true;
        int64_t in[G_MAX_VALUES], vals[G_MAX_VALUES];
        size_t n;
        input_of(o, in, &n);
        switch (nd->fn) {
        case LF_JUST: {
            uint64_t base = sum_plus(nd->k, in, n);
            for (unsigned a = 0; a < nd->arity; a++) vals[a] = (int64_t)(base + a);
            set_add(out, out_value(vals, nd->arity, o->top_req));
            break;
        }
        case LF_ERR: set_add(out, out_error(G_EUSER + (int)(nd->k & 15), o->top_req)); break;
        case LF_STOPPED: set_add(out, out_stopped(o->top_req)); break;
        case LF_NULL: set_add(out, out_error(EINVAL, o->top_req)); break;
        case LF_ECHO: set_add(out, out_value(in, n, o->top_req)); break;
        case LF_BODY: {
            unsigned v = o->top_req ? 1 : 0;
            if (!body_done[v]) {
                rctx bc = cx;
                if (body_sched != CS_NONE) bc.env_sched = body_sched;
                bc.stop = (uint8_t)observe(st, cx, o->top_req);
                eval_conn(st, nd->child[1], bc, &body[v]);
                walk_spawns(st, nd->child[1]);
                body_done[v] = true;
                out->sync = out->sync && body[v].sync;
            }
            if (body[v].any) out->any = true;
            for (unsigned b = 0; b < body[v].n; b++) {
                r_out r = body[v].o[b];
                r.top_req = r.top_req || o->top_req;
                set_add(out, r);
            }
            break;
        }
        default: break;
        }
    }
    /* Phase 1 walks the body whenever it might run (the child's set may
     * be a placeholder there). */
    if (nd->fn == LF_BODY && called && !body_done[0] && !body_done[1] && st->phase == 1) {
        rctx bc = cx;
        if (body_sched != CS_NONE) bc.env_sched = body_sched;
        r_set tmp;
        eval_conn(st, nd->child[1], bc, &tmp);
        walk_spawns(st, nd->child[1]);
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

static void eval_when_all_valid(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    out->sync = true;
    if (cx.stop == RS_ALWAYS) {
        set_add(out, out_stopped(false));
        return;
    }
    if (cx.stop == RS_RACE) set_add(out, out_stopped(false));
    /* Children see the when_all's own source: stopped by the parent's
     * token, and by a sibling that fails or stops. */
    rctx cc = cx;
    cc.tok = TOK_OTHER;
    alloc_shortcut(st, &cc);
    if (cc.stop == RS_NEVER) {
        /* The children's source is only requested by a child that fails
         * or stops on its own: if none can while it is not requested (an
         * evaluation with the parent's NEVER context), it never is. */
        bool saved = st->record;
        st->record = false;
        bool influence = false;
        for (unsigned j = 0; j < nd->nchild && !influence; j++) {
            r_set d;
            eval(st, nd->child[j], cx, &d);
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
        eval(st, nd->child[j], cj, &c[j]);
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
                if (o[j]->disp == R_ERROR) set_add(out, out_error(o[j]->code, req));
        } else if (any_stop) {
            set_add(out, out_stopped(req));
        } else {
            int64_t all[3 * G_MAX_VALUES];
            unsigned k = 0;
            for (unsigned j = 0; j < nc; j++) {
                memcpy(&all[k], o[j]->v, o[j]->n * sizeof all[0]);
                k += o[j]->n;
            }
            if (k > G_MAX_VALUES) set_add(out, out_error(EINVAL, req));
            else set_add(out, out_value(all, k, req));
        }
        if (out->any) return;
        unsigned j = 0;
        while (j < nc && ++idx[j] == c[j].n) idx[j++] = 0;
        if (j == nc) break;
    }
}

static void eval_bulk(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    r_set c;
    eval(st, nd->child[0], cx, &c);
    out->any = c.any;
    ssig cs = sig_of(st->g, nd->child[0]);
    bool par = cs.cs_value == GS_POOL || cx.env_sched == GS_POOL;
    out->sync = c.sync && (!par || nd->shape == 0);
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        if (o->disp != R_VALUE) {
            set_add(out, *o);
            continue;
        }
        r_out normal = nd->fail_at < nd->shape ? out_error(G_EUSER + (int)(nd->k & 15), o->top_req) : *o;
        if (!par || nd->shape == 0) {
            set_add(out, normal);
            continue;
        }
        unsigned s = observe(st, cx, o->top_req);
        if (s != RS_ALWAYS) set_add(out, normal);
        if (s != RS_NEVER) set_add(out, out_stopped(o->top_req));
    }
}

/* ------------------------------------------------------- tasks, scopes */

/* Schedulers whose schedule operation observes stop (ENV_OTHER: sync_wait's
 * run_loop). */
static bool sched_observes(unsigned sch) { return sch == GS_LOOP || sch == GS_POOL || sch == ENV_OTHER; }

/* A task: its child's outcomes (the await hands them back unchanged, and the
 * body returns them); stopped too when a stop request can reach the task
 * and one of its hops (start, yield, scheduler change, resumption after the
 * await) goes through a scheduler that observes it: whether a hop is made
 * at all (dispatch runs inline on the scheduler's own agent) is timing, so
 * stopped is allowed, never required.  The child sees the task's scheduler
 * (the inline one for EX_TASK_INLINE, the change's target around the
 * await) and the task's stop token, linked to the receiver's. */
/* What get_allocator answers in cx (env.h): the environment's allocator,
 * else the scheduler's default (the harness's pool has its own arenas),
 * else the process default: the fault allocator while the run lasts in
 * GM_FAULT_DEFAULT mode (work that may outlive the run may see either). */
static uint8_t alloc_ids(const rstate *st, rctx cx) {
    if (cx.alloc) return cx.alloc;
    if (cx.env_sched == GS_POOL) return 1u << A_POOL;
    if (st->g->mode.fault != GM_FAULT_DEFAULT) return 1u << A_COUNT;
    return (uint8_t)((1u << A_FAULT) | (cx.late ? 1u << A_COUNT : 0));
}

/* One awaited child of a task, in the child context cc; home is the task's
 * own scheduler (a failed scheduler change leaves the child there). */
static void eval_task_child(rstate *st, const g_node *nd, unsigned child, rctx cc, unsigned home, r_set *c) {
    eval_conn(st, child, cc, c);
    if ((nd->task & TK_CHANGE) && st->p->oom && cc.env_sched != home) {
        /* The change may have failed for want of memory (its schedule
         * sender): the task then awaits its child where it was. */
        rctx cf = cc;
        cf.env_sched = (uint8_t)home;
        r_set c2;
        eval_conn(st, child, cf, &c2);
        set_union(c, &c2);
    }
}

/* A task: its child's outcomes (the await hands them back unchanged, and the
 * body returns them; with two children, the first one's when it is not a
 * value, else the second one's, awaited after it); stopped too when a stop
 * request can reach the task and one of its hops (start, yield, scheduler
 * change, resumption after an await) goes through a scheduler that observes
 * it: whether a hop is made at all (dispatch runs inline on the scheduler's
 * own agent) is timing, so stopped is allowed, never required.  The
 * children see the task's environment (task.h): its scheduler (the inline
 * one for EX_TASK_INLINE, the change's target around the awaits), its stop
 * token (the receiver's), its allocator (the option's, else the receiver
 * environment's, resolved at connect) and the user environment's keys (the
 * option's, else the receiver's). */
static void eval_task(rstate *st, unsigned i, const g_node *nd, rctx cx, r_set *out) {
    unsigned home = (nd->task & TK_INLINE) ? GS_INLINE : cx.env_sched;
    bool change = (nd->task & TK_CHANGE) != 0;
    bool hops = sched_observes(home) || (change && sched_observes(nd->sched));
    rctx cc = cx;
    cc.env_sched = (uint8_t)(change ? nd->sched : home);
    cc.alloc = (nd->topt & TO_ALLOC) ? (uint8_t)(1u << A_ALT) : (uint8_t)(alloc_ids(st, cx) | cx.alloc_dev);
    cc.alloc_dev = 0;
    if (nd->topt & TO_ENV) cc.user = (int16_t)(100 + i);
    r_set c;
    eval_task_child(st, nd, nd->child[0], cc, home, &c);
    if (nd->nchild == 2) {
        /* The second child is awaited after a value of the first; a stop
         * request that value's path made on the top source is seen. */
        r_set first = c, second[2];
        bool done[2] = { false, false };
        set_clear(&c);
        c.any = first.any;
        for (unsigned j = 0; j < first.n; j++) {
            const r_out *o = &first.o[j];
            if (o->disp != R_VALUE) {
                set_add(&c, *o);
                continue;
            }
            unsigned v = o->top_req ? 1 : 0;
            if (!done[v]) {
                rctx c2 = cc;
                c2.stop = (uint8_t)observe(st, cc, o->top_req);
                eval_task_child(st, nd, nd->child[1], c2, home, &second[v]);
                done[v] = true;
            }
            if (second[v].any) c.any = true;
            for (unsigned b = 0; b < second[v].n; b++) {
                r_out r = second[v].o[b];
                r.top_req = r.top_req || o->top_req;
                set_add(&c, r);
            }
        }
        if (!done[0] && !done[1] && (first.any || st->phase == 1)) {
            /* Phase 1 walks the second child whenever it might run (the
             * first one's set may be a placeholder there). */
            eval_task_child(st, nd, nd->child[1], cc, home, &second[0]);
            if (first.any) set_union(&c, &second[0]);
        }
    }
    out->any = c.any;
    out->sync = false;
    if (hops && cx.stop != RS_NEVER) set_add(out, out_stopped(false));
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        set_add(out, *o);
        if (hops && o->top_req && cx.top_linked) set_add(out, out_stopped(true));
    }
}

/* ------------------------------------------- algorithms, environments, scopes */

/* What an algorithm node's converter sends on success (algo_model.c),
 * computed once per run. */
static int64_t algo_value(rstate *st, unsigned i) {
    const g_node *nd = &st->g->nodes[i];
    if (!st->algo_done[i]) {
        size_t bytes = (size_t)nd->n * g_algo_in_size(nd);
        void *in = malloc(bytes ? bytes : 1);
        if (!in) abort();
        g_algo_inputs(nd, in);
        g_algo_expect(nd, in, NULL, &st->algo_value[i]);
        free(in);
        st->algo_done[i] = true;
    }
    return st->algo_value[i];
}

/* A parallel algorithm: its result (for_each: its function's error when an
 * index fails); a stop request from the environment is checked before
 * every tile is claimed (and by the schedule onto a run_loop or the pool),
 * so a request made before start always stops it, even with no tile
 * (algorithms.h: set_stopped when a request is seen and some tile did not
 * run), and one that may come while it runs races. */
static void eval_algo(rstate *st, unsigned i, const g_node *nd, rctx cx, r_set *out) {
    r_out normal;
    if (nd->op == AO_FOR_EACH && nd->fail_idx < nd->n) normal = out_error(g_algo_fail_code(nd), false);
    else {
        int64_t v = algo_value(st, i);
        normal = out_value(&v, 1, false);
    }
    if (cx.stop != RS_ALWAYS) set_add(out, normal);
    if (cx.stop != RS_NEVER) set_add(out, out_stopped(false));
    out->sync = nd->sched == GS_INLINE;
}

/* read_env: the ids the harness's converter sends (graph.h), or EX_EINVAL
 * for a key the environment does not answer (just.h; stop token and
 * allocator have defaults). */
static void eval_read_env(const rstate *st, const g_node *nd, rctx cx, r_set *out) {
    int64_t v;
    switch (nd->op) {
    case RK_SCHED:
        if (cx.env_sched == GS_COUNT) {
            set_add(out, out_error(EINVAL, false));
        } else {
            v = cx.env_sched == ENV_OTHER ? ID_SCHED_OTHER : cx.env_sched;
            set_add(out, out_value(&v, 1, false));
        }
        break;
    case RK_TOKEN:
        v = cx.tok;
        set_add(out, out_value(&v, 1, false));
        break;
    case RK_ALLOC: {
        uint8_t ids = (uint8_t)(alloc_ids(st, cx) | cx.alloc_dev);
        for (v = 0; v < A_IDS; v++)
            if (ids & (1u << v)) set_add(out, out_value(&v, 1, false));
        break;
    }
    default:
        if (cx.user < 0) {
            set_add(out, out_error(EINVAL, false));
        } else {
            v = cx.user;
            set_add(out, out_value(&v, 1, false));
        }
        break;
    }
    out->sync = true;
}

/* into_variant and friends, then the converter's (n, hash). */
static void eval_variant(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    r_set c;
    eval(st, nd->child[0], cx, &c);
    out->any = c.any;
    out->sync = c.sync;
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        int64_t pair[2];
        if (o->disp == R_VALUE) {
            if (nd->op == VK_STOPPED_AS_OPTIONAL && o->n == 0) {
                set_add(out, out_error(EINVAL, o->top_req));
                continue;
            }
            pair[0] = o->n;
            pair[1] = g_hash(o->v, o->n);
            set_add(out, out_value(pair, 2, o->top_req));
        } else if (o->disp == R_STOPPED && nd->op == VK_STOPPED_AS_OPTIONAL) {
            pair[0] = -1;
            pair[1] = 0;
            set_add(out, out_value(pair, 2, o->top_req));
        } else if (o->disp == R_STOPPED && nd->op == VK_STOPPED_AS_ERROR) {
            set_add(out, out_error(G_EUSER + (int)(nd->k & 15), o->top_req));
        } else {
            set_add(out, *o);
        }
    }
}

/* The harness's scope node: its children spawned in order into a scope of
 * its own (scope.h), then the scope's join.  The join completes with the
 * first error of spawned work (any of those that may fail: which one is
 * first is timing), else the node reports the first spawn that failed,
 * else value(number of children).  Spawned work sees the spawn
 * environment (the node's receiver's with SC_ENV, else none) plus, for a
 * counting scope, the scope's stop token; nothing observes the node's own
 * stop token. */
static void eval_scope(rstate *st, const g_node *nd, rctx cx, r_set *out) {
    bool counting = nd->op & SC_COUNTING, env = nd->op & SC_ENV;
    unsigned stop_mode = counting ? (nd->op >> SC_STOP_SHIFT) & 3 : 0;
    rctx sc = cx;
    if (!env) {
        sc.env_sched = GS_COUNT;
        sc.alloc = sc.alloc_dev = 0;
        sc.user = -1;
        sc.tok = TOK_NEVER;
        sc.stop = RS_NEVER;
        sc.top_linked = false;
    }
    if (counting) {
        sc.tok = TOK_OTHER;
        sc.top_linked = false;
        sc.stop = stop_mode == SC_STOP_BEFORE ? RS_ALWAYS : stop_mode == SC_STOP_AFTER ? RS_RACE : RS_NEVER;
    }
    r_set c[3];
    bool spawned[3];
    int refused[3];  /* the spawn's error, when it is refused */
    out->sync = false;
    for (unsigned j = 0; j < nd->nchild; j++) {
        unsigned ch = nd->child[j];
        int e = 0;
        if (sig_of(st->g, ch).invalid) e = EINVAL;  /* ex_check_input comes first */
        else if ((nd->op & SC_CLOSE) && j == nd->nchild - 1u) e = ESHUTDOWN;
        else if (conn_fails(st->g, ch, sc.env_sched)) e = EINVAL;
        refused[j] = e;
        spawned[j] = !e;
        if (!e) {
            eval(st, ch, sc, &c[j]);
            if (c[j].any) out->any = true;
            if (!c[j].n && !c[j].any) return;  /* a child that cannot complete: no join */
            /* Under allocation failures the spawn itself may fail (its
             * operation, a connect): an outcome of no completion, written
             * as disp 0. */
            if (st->p->oom && c[j].n < R_SET_MAX) c[j].o[c[j].n++] = (r_out){ .disp = 0 };
        }
    }
    if (out->any) return;
    unsigned idx[3] = { 0, 0, 0 };
    for (;;) {
        bool err = false;
        int spawn_error = 0;
        for (unsigned j = 0; j < nd->nchild; j++) {
            int e = spawned[j] ? (c[j].o[idx[j]].disp == 0 ? ENOMEM : 0) : refused[j];
            if (e && !spawn_error) spawn_error = e;
            if (!spawned[j] || c[j].o[idx[j]].disp != R_ERROR) continue;
            set_add(out, out_error(c[j].o[idx[j]].code, false));
            err = true;
        }
        if (!err && spawn_error) set_add(out, out_error(spawn_error, false));
        if (!err && !spawn_error) {
            int64_t v = nd->nchild;
            set_add(out, out_value(&v, 1, false));
        }
        unsigned j = 0;
        while (j < nd->nchild && (!spawned[j] || ++idx[j] == c[j].n)) idx[j++] = 0;
        if (j == nd->nchild) break;
    }
}

/* A spawn_future's work: started when the node is built, with the scope's
 * stop token and no scheduler (so a task in it fails to connect: the
 * future completes with EX_EINVAL, as for an invalid child).  Its stop
 * token is requested when the future's consumer is stopped or the future
 * is dropped: RACE.  Computed once per phase, recorded in the recording
 * round whoever asks first. */
static const r_set *spawn_work(rstate *st, unsigned i) {
    r_set *w = &st->spawn_set[i];
    if (st->spawn_done[i]) return w;
    st->spawn_done[i] = true;
    bool saved = st->record;
    st->record = st->last;
    unsigned c = st->g->nodes[i].child[0];
    rctx sc = ctx_detached(RS_RACE);
    set_clear(w);
    if (sig_of(st->g, c).invalid) set_add(w, out_error(EINVAL, false));
    else eval_conn(st, c, sc, w);
    if (st->p->oom) set_add(w, out_error(ENOMEM, false));
    st->record = saved;
    return w;
}

/* The work of every spawn_future built with node i's tree runs whether or
 * not the future is ever started: evaluate it (a split's shared child is
 * built with its first consumer; a let body later, when it is called). */
static void walk_spawns(rstate *st, unsigned i) {
    const g_node *nd = &st->g->nodes[i];
    if (nd->kind == G_SPLIT) {
        if (st->split_walked & (1u << nd->split_id)) return;
        st->split_walked = (uint8_t)(st->split_walked | (1u << nd->split_id));
        walk_spawns(st, st->g->splits[nd->split_id].child);
        return;
    }
    unsigned n = (nd->kind >= G_LET_VALUE && nd->kind <= G_LET_STOPPED) ? 1 : nd->nchild;
    for (unsigned j = 0; j < n; j++) walk_spawns(st, nd->child[j]);
    if (nd->kind == G_SPAWN_FUTURE) (void)spawn_work(st, i);
}

/* Whether a when_all is built with node i: under allocation failures a
 * failed builder below it (error-only signatures) can make it reject its
 * children (EX_EINVAL), and the rejection climbs like any invalid input. */
static bool builds_when_all(const g_graph *g, unsigned i) {
    const g_node *nd = &g->nodes[i];
    if (nd->kind == G_WHEN_ALL) return true;
    if (nd->kind == G_SPLIT) return builds_when_all(g, g->splits[nd->split_id].child);
    for (unsigned j = 0; j < nd->nchild; j++)
        if (builds_when_all(g, nd->child[j])) return true;
    return false;
}

static void eval(rstate *st, unsigned i, rctx cx, r_set *out) {
    const g_graph *g = st->g;
    const g_node *nd = &g->nodes[i];
    set_clear(out);
    if (sig_of(g, i).invalid) {
        /* Built as an invalid sender: completes with EX_EINVAL at start
         * (EX_ENOMEM instead when a failed builder below was seen first);
         * nothing below it runs. */
        set_add(out, out_error(EINVAL, false));
        out->sync = true;
    } else switch (nd->kind) {
    case G_JUST: set_add(out, out_value(nd->vals, nd->arity, false)); out->sync = true; break;
    case G_JUST_ERROR: set_add(out, out_error(nd->code, false)); out->sync = true; break;
    case G_JUST_STOPPED: set_add(out, out_stopped(false)); out->sync = true; break;
    case G_THEN: case G_UPON_ERROR: case G_UPON_STOPPED: eval_then(st, nd, cx, out); break;
    case G_LET_VALUE: case G_LET_ERROR: case G_LET_STOPPED: eval_let(st, nd, cx, out); break;
    case G_WHEN_ALL: eval_when_all_valid(st, nd, cx, out); break;
    case G_BULK: eval_bulk(st, nd, cx, out); break;
    case G_SPLIT:
        if (st->phase == 1) st->split_join[nd->split_id] = (uint8_t)(st->split_join[nd->split_id] | (1u << cx.stop));
        *out = st->split_set[nd->split_id];
        out->sync = false;
        break;
    case G_CONTINUES_ON: {
        r_set c;
        eval(st, nd->child[0], cx, &c);
        out->any = c.any;
        out->sync = c.sync && nd->sched == GS_INLINE;
        for (unsigned j = 0; j < c.n; j++) {
            const r_out *o = &c.o[j];
            unsigned s = nd->sched == GS_INLINE ? RS_NEVER : observe(st, cx, o->top_req);
            if (s != RS_ALWAYS) set_add(out, *o);
            if (s != RS_NEVER) set_add(out, out_stopped(o->top_req));
        }
        break;
    }
    case G_STARTS_ON: {
        unsigned s = nd->sched == GS_INLINE ? RS_NEVER : cx.stop;
        if (s != RS_NEVER) set_add(out, out_stopped(false));
        if (s != RS_ALWAYS) {
            rctx cc = cx;
            cc.env_sched = nd->sched;
            alloc_shortcut(st, &cc);
            r_set c;
            eval(st, nd->child[0], cc, &c);
            set_union(out, &c);
            out->sync = c.sync && nd->sched == GS_INLINE;
        }
        break;
    }
    case G_STOP_ENV: {
        rctx cc = cx;
        cc.stop = nd->stop_env == SE_STOPPED ? RS_ALWAYS : RS_NEVER;
        cc.top_linked = false;
        cc.tok = (uint8_t)(nd->stop_env == SE_NEVER ? TOK_NEVER : TOK_NODE0 + i);
        eval(st, nd->child[0], cc, out);
        break;
    }
    case G_TASK: eval_task(st, i, nd, cx, out); break;
    case G_ALGO: eval_algo(st, i, nd, cx, out); break;
    case G_READ_ENV: eval_read_env(st, nd, cx, out); break;
    case G_VARIANT: eval_variant(st, nd, cx, out); break;
    case G_SCOPE: eval_scope(st, nd, cx, out); break;
    case G_WRITE_ENV: {
        rctx cc = cx;
        if (nd->op == WK_USER) cc.user = (int16_t)nd->k;
        else if (nd->op == WK_SCHED) cc.env_sched = nd->sched;
        else cc.alloc = 1u << A_ALT, cc.alloc_dev = 0;
        eval(st, nd->child[0], cc, out);
        break;
    }
    case G_SPAWN_FUTURE:
        /* the work's result; stopped too when the consumer may be stopped
         * (the request reaches the work, which may complete either way) */
        *out = *spawn_work(st, i);
        out->sync = false;
        if (cx.stop != RS_NEVER) set_add(out, out_stopped(false));
        break;
    default: break;
    }
    if (st->p->oom) set_add(out, out_error(ENOMEM, false));
    if (st->p->oom && builds_when_all(g, i)) set_add(out, out_error(EINVAL, false));
    if (st->phase == 2 && st->record) {
        set_union(&st->res->node[i], out);
        st->res->reached[i] = true;
    }
}

void ref_run(const g_graph *g, const r_params *p, r_result *res) {
    static rstate st;  /* large; the fuzzer runs one input at a time */
    memset(&st, 0, sizeof st);
    memset(res, 0, sizeof *res);
    st.g = g;
    st.p = p;
    st.res = res;

    rctx top;
    top.top_linked = true;
    top.tok = TOK_TOP;
    top.alloc = g->mode.fault == GM_FAULT_ENV ? (uint8_t)(1u << A_FAULT) : 0;
    top.late = false;
    top.user = -1;
    top.alloc_dev = 0;
    top.env_sched = g->mode.use_sync_wait ? ENV_OTHER : g->mode.env_sched;
    if (g->mode.stop == GM_STOP_BEFORE) top.stop = RS_ALWAYS;
    else if (g->mode.stop == GM_STOP_ASYNC || g->has_stopreq) top.stop = RS_RACE;
    else top.stop = RS_NEVER;
    if (g->mode.spawn) {
        /* Spawned work sees the scope's token (the harness's stop requests
         * go there; stopreq functions' do not) and the spawn env's or the
         * launch's scheduler. */
        top.top_linked = false;
        top.tok = TOK_OTHER;  /* the scope's */
        top.stop = g->mode.stop == GM_STOP_BEFORE ? RS_ALWAYS : g->mode.stop == GM_STOP_ASYNC ? RS_RACE : RS_NEVER;
        if (g->nodes[g->root].kind == G_TASK) top.env_sched = (uint8_t)ref_launch_sched(g);
    }

    /* The stop context of a split's work depends on its consumers'
     * contexts, which depend (through when_all siblings) on the split's
     * results: iterate from "no split ever runs" upwards until the
     * consumers' contexts no longer change.  Each round walks the root,
     * then the splits' children from the last split down (a split's
     * consumers lie outside its child and in children of splits defined
     * after it), collecting contexts; then recomputes the split sets in
     * definition order (inner splits first).  The fixpoint reached from
     * below is consistent: the first stop request the model missed would
     * have come from an outcome the model allows in a context it got right. */
    r_set tmp;
    uint8_t prev[G_MAX_SPLITS];
    for (unsigned round = 0;; round++) {
        memcpy(prev, st.split_join, sizeof prev);
        memset(st.split_join, 0, sizeof st.split_join);
        st.phase = 1;
        st.record = st.last = false;
        spawns_reset(&st);
        eval_conn(&st, g->root, top, &tmp);
        walk_spawns(&st, g->root);
        for (int id = g->nsplits - 1; id >= 0; id--) {
            uint8_t join = st.split_join[id];
            if (!join || join == (1u << RS_ALWAYS)) continue;
            rctx sc = ctx_detached(join == (1u << RS_NEVER) ? RS_NEVER : RS_RACE);
            eval_conn(&st, g->splits[id].child, sc, &tmp);
        }
        bool last = round > 0 && memcmp(prev, st.split_join, sizeof prev) == 0;
        if (!last && round >= 12) {
            /* No fixpoint in time: assume the worst for every used split. */
            for (unsigned id = 0; id < g->nsplits; id++)
                if (st.split_join[id]) st.split_join[id] = (uint8_t)(st.split_join[id] | (1u << RS_RACE));
            last = true;
        }
        st.phase = 2;
        st.record = st.last = last;
        spawns_reset(&st);
        for (unsigned id = 0; id < g->nsplits; id++) {
            r_set *s = &st.split_set[id];
            set_clear(s);
            uint8_t join = st.split_join[id];
            if (!join) continue;
            if (join == (1u << RS_ALWAYS)) {
                set_add(s, out_stopped(false));
            } else {
                rctx sc = ctx_detached(join == (1u << RS_NEVER) ? RS_NEVER : RS_RACE);
                eval_conn(&st, g->splits[id].child, sc, s);
                if (join != (1u << RS_NEVER)) set_add(s, out_stopped(false));
            }
            if (p->oom) set_add(s, out_error(ENOMEM, false));
        }
        if (last) break;
    }
    eval_conn(&st, g->root, top, &res->top);
    walk_spawns(&st, g->root);
    if (g->mode.use_sync_wait && !ref_single_value_sig(g, g->root)) {
        /* ex_sync_wait rejects a sender with several value signatures. */
        if (!p->oom) set_clear(&res->top);
        set_add(&res->top, out_error(EINVAL, false));
    }
    if (p->oom) set_add(&res->top, out_error(ENOMEM, false));
}
