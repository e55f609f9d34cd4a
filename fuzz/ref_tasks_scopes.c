/* SPDX-License-Identifier: MIT */
/* ref_tasks_scopes.c - the reference's tasks, scope nodes and
 * spawn_future work (started when built, evaluated whether or not the
 * future runs). */
#include "ref_private.h"

#include <errno.h>
#include <string.h>

/* Schedulers whose schedule operation observes stop (ENV_OTHER: sync_wait's
 * run_loop). */
static bool sched_observes(unsigned sch) { return sch == GS_LOOP || sch == GS_POOL || sch == ENV_OTHER; }

/* One awaited child of a task, in the child context cc; home is the task's
 * own scheduler (a failed scheduler change leaves the child there). */
static void eval_task_child(rstate *st, const g_node *nd, unsigned child, rctx cc, unsigned home, r_set *c) {
    if (!ref_single_value_sig(st->g, child)) {
        /* ex_await refuses a sender with several value signatures before
         * connecting it (P3552R3 §4.4); one whose builder failed for want
         * of memory is an invalid sender, whose EX_ENOMEM comes first. */
        r_set_clear(c);
        r_set_add(c, r_out_error(EINVAL, false));
        if (st->p->oom) {
            r_set_add(c, r_out_error(ENOMEM, false));
            if (st->phase == 2 && st->record) {  /* as r_eval_conn: the invalid sender completes */
                r_set_add(&st->res->node[child], r_out_error(ENOMEM, false));
                st->res->reached[child] = true;
            }
        }
        return;
    }
    r_eval_conn(st, child, cc, c);
    if ((nd->task & TK_CHANGE) && st->p->oom && cc.env_sched != home) {
        /* The change may have failed for want of memory (its schedule
         * sender): the task then awaits its child where it was. */
        rctx cf = cc;
        cf.env_sched = (uint8_t)home;
        r_set c2;
        r_eval_conn(st, child, cf, &c2);
        r_set_union(c, &c2);
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
void r_eval_task(rstate *st, unsigned i, const g_node *nd, rctx cx, r_set *out) {
    unsigned home = (nd->task & TK_INLINE) ? GS_INLINE : cx.env_sched;
    bool change = (nd->task & TK_CHANGE) != 0;
    bool hops = sched_observes(home) || (change && sched_observes(nd->sched));
    rctx cc = cx;
    cc.env_sched = (uint8_t)(change ? nd->sched : home);
    cc.alloc = (nd->topt & TO_ALLOC) ? (uint8_t)(1u << A_ALT) : (uint8_t)(r_alloc_ids(st, cx) | cx.alloc_dev);
    cc.alloc_dev = 0;
    if (nd->topt & TO_ENV) cc.user = (int16_t)(100 + i);
    r_set c;
    eval_task_child(st, nd, nd->child[0], cc, home, &c);
    if (nd->nchild == 2) {
        /* The second child is awaited after a value of the first; a stop
         * request that value's path made on the top source is seen. */
        r_set first = c, second[2];
        bool done[2] = { false, false };
        r_set_clear(&c);
        c.any = first.any;
        for (unsigned j = 0; j < first.n; j++) {
            const r_out *o = &first.o[j];
            if (o->disp != R_VALUE) {
                r_set_add(&c, *o);
                continue;
            }
            unsigned v = o->top_req ? 1 : 0;
            if (!done[v]) {
                rctx c2 = cc;
                c2.stop = (uint8_t)r_observe(st, cc, o->top_req);
                eval_task_child(st, nd, nd->child[1], c2, home, &second[v]);
                done[v] = true;
            }
            if (second[v].any) c.any = true;
            for (unsigned b = 0; b < second[v].n; b++) {
                r_out r = second[v].o[b];
                r.top_req = r.top_req || o->top_req;
                r_set_add(&c, r);
            }
        }
        if (!done[0] && !done[1] && (first.any || st->phase == 1)) {
            /* Phase 1 walks the second child whenever it might run (the
             * first one's set may be a placeholder there). */
            eval_task_child(st, nd, nd->child[1], cc, home, &second[0]);
            if (first.any) r_set_union(&c, &second[0]);
        }
    }
    out->any = c.any;
    out->sync = false;
    if (hops && cx.stop != RS_NEVER) r_set_add(out, r_out_stopped(false));
    for (unsigned j = 0; j < c.n; j++) {
        const r_out *o = &c.o[j];
        r_set_add(out, *o);
        if (hops && o->top_req && cx.top_linked) r_set_add(out, r_out_stopped(true));
    }
}

/* The harness's scope node: its children spawned in order into a scope of
 * its own (scope.h), then the scope's join.  The join completes with the
 * first error of spawned work (any of those that may fail: which one is
 * first is timing), else the node reports the first spawn that failed,
 * else value(number of children).  Spawned work sees the spawn
 * environment (the node's receiver's with SC_ENV, else none); a counting
 * scope's work sees the scope's stop token, or, when the environment has
 * a token, a token of the spawn's linked to both (ex_spawn_env).  Only
 * the spawned work observes the node's own stop token (with SC_ENV). */
void r_eval_scope(rstate *st, const g_node *nd, rctx cx, r_set *out) {
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
        r_stop scope_stop = stop_mode == SC_STOP_BEFORE ? RS_ALWAYS : stop_mode == SC_STOP_AFTER ? RS_RACE : RS_NEVER;
        if (sc.tok != TOK_NEVER) {
            /* Linked to env's token (a top request reaches it at once, as
             * it reaches env's) and to the scope's. */
            r_stop outer = (r_stop)sc.stop;
            sc.stop = outer == RS_ALWAYS || scope_stop == RS_ALWAYS ? RS_ALWAYS
                      : outer == RS_RACE || scope_stop == RS_RACE   ? RS_RACE
                                                                     : RS_NEVER;
        } else {
            sc.top_linked = false;
            sc.stop = scope_stop;
        }
        sc.tok = TOK_OTHER;
    }
    r_set c[3];
    bool spawned[3];
    int refused[3];  /* the spawn's error, when it is refused */
    out->sync = false;
    for (unsigned j = 0; j < nd->nchild; j++) {
        unsigned ch = nd->child[j];
        int e = 0;
        if (r_sig_of(st->g, ch).invalid) e = EINVAL;  /* ex_check_input comes first */
        else if ((nd->op & SC_CLOSE) && j == nd->nchild - 1u) e = ESHUTDOWN;
        else if (r_conn_fails(st->g, ch, sc.env_sched)) e = EINVAL;
        refused[j] = e;
        spawned[j] = !e;
        if (!e) {
            r_eval(st, ch, sc, &c[j]);
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
            r_set_add(out, r_out_error(c[j].o[idx[j]].code, false));
            err = true;
        }
        if (!err && spawn_error) r_set_add(out, r_out_error(spawn_error, false));
        if (!err && !spawn_error) {
            int64_t v = nd->nchild;
            r_set_add(out, r_out_value(&v, 1, false));
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
const r_set *r_spawn_work(rstate *st, unsigned i) {
    r_set *w = &st->spawn_set[i];
    if (st->spawn_done[i]) return w;
    st->spawn_done[i] = true;
    bool saved = st->record;
    st->record = st->last;
    unsigned c = st->g->nodes[i].child[0];
    rctx sc = r_ctx_detached(RS_RACE);
    r_set_clear(w);
    if (r_sig_of(st->g, c).invalid) r_set_add(w, r_out_error(EINVAL, false));
    else r_eval_conn(st, c, sc, w);
    if (st->p->oom) r_set_add(w, r_out_error(ENOMEM, false));
    st->record = saved;
    return w;
}

/* The work of every spawn_future built with node i's tree runs whether or
 * not the future is ever started: evaluate it (a split's shared child is
 * built with its first consumer; a let body later, when it is called). */
void r_walk_spawns(rstate *st, unsigned i) {
    const g_node *nd = &st->g->nodes[i];
    if (nd->kind == G_SPLIT) {
        if (st->split_walked & (1u << nd->split_id)) return;
        st->split_walked = (uint8_t)(st->split_walked | (1u << nd->split_id));
        r_walk_spawns(st, st->g->splits[nd->split_id].child);
        return;
    }
    unsigned n = (nd->kind >= G_LET_VALUE && nd->kind <= G_LET_STOPPED) ? 1 : nd->nchild;
    for (unsigned j = 0; j < n; j++) r_walk_spawns(st, nd->child[j]);
    if (nd->kind == G_SPAWN_FUTURE) (void)r_spawn_work(st, i);
}
