/* SPDX-License-Identifier: MIT */
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
 * one computes the sets.
 *
 * The parts: ref_private.h. */
#include "ref_private.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ contexts */

/* The environment of work started on its own: a split's shared work, a
 * future's work: only a stop token of its own. */
rctx r_ctx_detached(unsigned stop) {
    rctx c = { (uint8_t)stop, false, GS_COUNT, TOK_OTHER, 0, true, -1, 0 };
    return c;
}

/* What get_allocator answers in cx (env.h): the environment's allocator,
 * else the scheduler's default (the harness's pool has its own arenas),
 * else the process default: the fault allocator while the run lasts in
 * GM_FAULT_DEFAULT mode (work that may outlive the run may see either). */
uint8_t r_alloc_ids(const rstate *st, rctx cx) {
    if (cx.alloc) return cx.alloc;
    if (cx.env_sched == GS_POOL) return 1u << A_POOL;
    if (st->g->mode.fault != GM_FAULT_DEFAULT) return 1u << A_COUNT;
    return (uint8_t)((1u << A_FAULT) | (cx.late ? 1u << A_COUNT : 0));
}

/* A known deviation from env.h, tolerated so that the rest stays checked
 * (fuzz/README.md, "findings"): starts_on and when_all answer get_allocator
 * in their children's environment with the allocator resolved where they
 * are connected ("a shortcut for deep nesting"), so a child that runs
 * under another scheduler (a nested starts_on, a task, a let body) sees
 * the outer scheduler's allocator instead of its own scheduler's, and one
 * under a starts_on(pool) inside a when_all sees the when_all's instead of
 * the pool's.  Only when no allocator was written: a written one is the
 * same either way. */
void r_alloc_shortcut(const rstate *st, rctx *cc) {
    if (!cc->alloc) cc->alloc_dev = (uint8_t)(cc->alloc_dev | r_alloc_ids(st, *cc));
}

/* r_eval behind a connect: EX_EINVAL when connecting the subtree fails. */
void r_eval_conn(rstate *st, unsigned i, rctx cx, r_set *out) {
    if (!r_conn_fails(st->g, i, cx.env_sched)) {
        r_eval(st, i, cx, out);
        return;
    }
    r_set_clear(out);
    r_set_add(out, r_out_error(EINVAL, false));
    if (st->p->oom) {
        r_set_add(out, r_out_error(ENOMEM, false));
        /* Its builder may have failed instead: then it is an invalid
         * sender, which connects, starts and completes with EX_ENOMEM. */
        if (st->phase == 2 && st->record) {
            r_set_add(&st->res->node[i], r_out_error(ENOMEM, false));
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
unsigned r_observe(const rstate *st, rctx cx, bool req) {
    if (st->phase == 2 && req && cx.top_linked) return RS_ALWAYS;
    return cx.stop;
}

/* --------------------------------------------- leaves: algorithms, read_env */

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
    if (nd->op == AO_FOR_EACH && nd->fail_idx < nd->n) normal = r_out_error(g_algo_fail_code(nd), false);
    else {
        int64_t v = algo_value(st, i);
        normal = r_out_value(&v, 1, false);
    }
    if (cx.stop != RS_ALWAYS) r_set_add(out, normal);
    if (cx.stop != RS_NEVER) r_set_add(out, r_out_stopped(false));
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
            r_set_add(out, r_out_error(EINVAL, false));
        } else {
            v = cx.env_sched == ENV_OTHER ? ID_SCHED_OTHER : cx.env_sched;
            r_set_add(out, r_out_value(&v, 1, false));
        }
        break;
    case RK_TOKEN:
        v = cx.tok;
        r_set_add(out, r_out_value(&v, 1, false));
        break;
    case RK_ALLOC: {
        uint8_t ids = (uint8_t)(r_alloc_ids(st, cx) | cx.alloc_dev);
        for (v = 0; v < A_IDS; v++)
            if (ids & (1u << v)) r_set_add(out, r_out_value(&v, 1, false));
        break;
    }
    default:
        if (cx.user < 0) {
            r_set_add(out, r_out_error(EINVAL, false));
        } else {
            v = cx.user;
            r_set_add(out, r_out_value(&v, 1, false));
        }
        break;
    }
    out->sync = true;
}

/* ------------------------------------------------------------- evaluation */

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

void r_eval(rstate *st, unsigned i, rctx cx, r_set *out) {
    const g_graph *g = st->g;
    const g_node *nd = &g->nodes[i];
    r_set_clear(out);
    if (r_sig_of(g, i).invalid) {
        /* Built as an invalid sender: completes with EX_EINVAL at start
         * (EX_ENOMEM instead when a failed builder below was seen first);
         * nothing below it runs. */
        r_set_add(out, r_out_error(EINVAL, false));
        out->sync = true;
    } else switch (nd->kind) {
    case G_JUST: r_set_add(out, r_out_value(nd->vals, nd->arity, false)); out->sync = true; break;
    case G_JUST_ERROR: r_set_add(out, r_out_error(nd->code, false)); out->sync = true; break;
    case G_JUST_STOPPED: r_set_add(out, r_out_stopped(false)); out->sync = true; break;
    case G_THEN: case G_UPON_ERROR: case G_UPON_STOPPED: r_eval_then(st, nd, cx, out); break;
    case G_LET_VALUE: case G_LET_ERROR: case G_LET_STOPPED: r_eval_let(st, nd, cx, out); break;
    case G_WHEN_ALL: r_eval_when_all_valid(st, nd, cx, out); break;
    case G_BULK: r_eval_bulk(st, nd, cx, out); break;
    case G_SPLIT:
        if (st->phase == 1) st->split_join[nd->split_id] = (uint8_t)(st->split_join[nd->split_id] | (1u << cx.stop));
        *out = st->split_set[nd->split_id];
        out->sync = false;
        break;
    case G_CONTINUES_ON: {
        r_set c;
        r_eval(st, nd->child[0], cx, &c);
        out->any = c.any;
        out->sync = c.sync && nd->sched == GS_INLINE;
        for (unsigned j = 0; j < c.n; j++) {
            const r_out *o = &c.o[j];
            unsigned s = nd->sched == GS_INLINE ? RS_NEVER : r_observe(st, cx, o->top_req);
            if (s != RS_ALWAYS) r_set_add(out, *o);
            if (s != RS_NEVER) r_set_add(out, r_out_stopped(o->top_req));
        }
        break;
    }
    case G_STARTS_ON: {
        unsigned s = nd->sched == GS_INLINE ? RS_NEVER : cx.stop;
        if (s != RS_NEVER) r_set_add(out, r_out_stopped(false));
        if (s != RS_ALWAYS) {
            rctx cc = cx;
            cc.env_sched = nd->sched;
            r_alloc_shortcut(st, &cc);
            r_set c;
            r_eval(st, nd->child[0], cc, &c);
            r_set_union(out, &c);
            out->sync = c.sync && nd->sched == GS_INLINE;
        }
        break;
    }
    case G_STOP_ENV: {
        rctx cc = cx;
        cc.stop = nd->stop_env == SE_STOPPED ? RS_ALWAYS : RS_NEVER;
        cc.top_linked = false;
        cc.tok = (uint8_t)(nd->stop_env == SE_NEVER ? TOK_NEVER : TOK_NODE0 + i);
        r_eval(st, nd->child[0], cc, out);
        break;
    }
    case G_TASK: r_eval_task(st, i, nd, cx, out); break;
    case G_ALGO: eval_algo(st, i, nd, cx, out); break;
    case G_READ_ENV: eval_read_env(st, nd, cx, out); break;
    case G_VARIANT: r_eval_variant(st, nd, cx, out); break;
    case G_SCOPE: r_eval_scope(st, nd, cx, out); break;
    case G_WRITE_ENV: {
        rctx cc = cx;
        if (nd->op == WK_USER) cc.user = (int16_t)nd->k;
        else if (nd->op == WK_SCHED) cc.env_sched = nd->sched;
        else cc.alloc = 1u << A_ALT, cc.alloc_dev = 0;
        r_eval(st, nd->child[0], cc, out);
        break;
    }
    case G_SPAWN_FUTURE:
        /* the work's result; stopped too when the consumer may be stopped
         * (the request reaches the work, which may complete either way) */
        *out = *r_spawn_work(st, i);
        out->sync = false;
        if (cx.stop != RS_NEVER) r_set_add(out, r_out_stopped(false));
        break;
    default: break;
    }
    if (st->p->oom) r_set_add(out, r_out_error(ENOMEM, false));
    if (st->p->oom && builds_when_all(g, i)) r_set_add(out, r_out_error(EINVAL, false));
    if (st->phase == 2 && st->record) {
        r_set_union(&st->res->node[i], out);
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
        r_eval_conn(&st, g->root, top, &tmp);
        r_walk_spawns(&st, g->root);
        for (int id = g->nsplits - 1; id >= 0; id--) {
            uint8_t join = st.split_join[id];
            if (!join || join == (1u << RS_ALWAYS)) continue;
            rctx sc = r_ctx_detached(join == (1u << RS_NEVER) ? RS_NEVER : RS_RACE);
            r_eval_conn(&st, g->splits[id].child, sc, &tmp);
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
            r_set_clear(s);
            uint8_t join = st.split_join[id];
            if (!join) continue;
            if (join == (1u << RS_ALWAYS)) {
                r_set_add(s, r_out_stopped(false));
            } else {
                rctx sc = r_ctx_detached(join == (1u << RS_NEVER) ? RS_NEVER : RS_RACE);
                r_eval_conn(&st, g->splits[id].child, sc, s);
                if (join != (1u << RS_NEVER)) r_set_add(s, r_out_stopped(false));
            }
            if (p->oom) r_set_add(s, r_out_error(ENOMEM, false));
        }
        if (last) break;
    }
    r_eval_conn(&st, g->root, top, &res->top);
    r_walk_spawns(&st, g->root);
    if (g->mode.use_sync_wait && !ref_single_value_sig(g, g->root)) {
        /* ex_sync_wait rejects a sender with several value signatures. */
        if (!p->oom) r_set_clear(&res->top);
        r_set_add(&res->top, r_out_error(EINVAL, false));
    }
    if (p->oom) r_set_add(&res->top, r_out_error(ENOMEM, false));
}
