/* SPDX-License-Identifier: MIT */
/* fork_stress.c - recursions of forks (ex_await_all of tasks, or ex_await
 * of their when_all) with errors, stop waits and a stop request from
 * outside.
 *
 * A pool of 2 workers.  Each round builds a random tree (main thread,
 * from the round's seed): inner nodes are tasks that await 2 or 3 child
 * tasks, through ex_await_all or ex_await of their when_all (a fork:
 * src/task/task_await.c, "a when_all of tasks"; nested forks link their
 * stop source to the fork above only when asked for their
 * token), up to depth 6; leaves return a value, fail, or wait for a stop
 * (an until-stopped sender: completes only from its stop token's
 * callback).  Some inner nodes ask for their stop token before forking
 * (linking the chain early), some value leaves yield or hop first.  The
 * root task is started with a receiver whose environment gives the pool
 * and a stop token of main's; main requests stop at a random moment (at
 * once, after a random delay, or once some leaves wait), or not at all
 * when nothing needs it.
 *
 * The bodies write plain (non-atomic) per-node records on whatever worker
 * they run: only the library's hand-overs order those writes before
 * main's reads after the root's completion, which is what TSan checks.
 *
 * Checks, per round: the root completes exactly once, within 20 s; every
 * node's body ran at most once and returned exactly as often as it ran;
 * a fork runs all its children or none (none only when its await gave
 * stopped); every waiting leaf that ran saw exactly one stop; an inner
 * node's await gives VALUE only when its subtree has only value leaves,
 * with every child's value in order; ERROR exactly when an error leaf of
 * its subtree ran, with the code of such a leaf; STOPPED only when
 * no error leaf of its subtree ran and a stop came from outside or from an
 * error elsewhere; the root's completion matches the root's await (and is
 * the sum of all leaves when nothing failed or stopped); every allocation
 * made through the default allocator is returned.  Bounded: rounds run
 * for about 5 seconds. */
#include <sched.h>
#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include "stress_util.h"

enum { WORKERS = 2, MAX_NODES = 160, MAX_DEPTH = 6, MAX_ROUNDS = 20000 };
#define BUDGET_S 5.0

enum { N_INNER, N_VALUE, N_ERROR, N_WAIT };
enum { STOP_NONE, STOP_AT_ONCE, STOP_DELAYED, STOP_WHEN_WAITING };

static ex_pool *pool;
static ex_scheduler sched;

/* ------------------------------------------------------ until stopped */

typedef struct us_op {
    ex_operation base;
    ex_receiver r;
    ex_stop_callback cb;
} us_op;

static void us_fire(ex_stop_callback *cb) {
    us_op *o = (us_op *)(void *)((char *)cb - offsetof(us_op, cb));
    ex_stop_callback_deregister(&o->cb);  /* from inside the callback: returns at once */
    ex_set_stopped(o->r);
}

static void us_start(ex_operation *op) {
    us_op *o = (us_op *)op;
    ex_stop_callback_register(&o->cb, ex_get_stop_token(ex_receiver_env(o->r)), us_fire);
}

static const ex_operation_vtable us_op_vt = { us_start, NULL };

static ex_error us_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    us_op *o = storage;
    o->base.vt = &us_op_vt;
    o->r = r;
    return ex_ok();
}

static const ex_sender_vtable us_vt = { "fork_stress.until_stopped", us_connect, NULL, NULL, NULL };

static ex_sender *until_stopped(void) {
    ex_sender *s = ex_sender_alloc(&us_vt, sizeof(ex_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "until_stopped");
    s->sigs.flags = EX_SIGS_STOPPED;
    s->op_size = sizeof(us_op);
    s->op_align = alignof(us_op);
    return s;
}

/* --------------------------------------------------------------- the tree */

typedef struct node {
    /* the shape (main, before the round) */
    int kind, parent, nkids, kids[3];
    int first, last;            /* its subtree: nodes[first..last] (preorder) */
    int64_t value;              /* a value leaf's; an inner node's sum when its subtree has only values */
    bool clean;                 /* its subtree has only value leaves */
    int how;                    /* inner: ask for the token first; value leaf: 0 plain, 1 yield, 2 hop, 3 spin */
    bool wait_first;            /* inner: waits for a stop (as an error) before it forks: no kid may run */
    /* written by the body, wherever it runs */
    uint32_t runs, exits;
    int status;                 /* the await's (inner, waiting leaf) */
    int pre;                    /* a wait_first node's wait */
    int n;
    int64_t got[3];
    int err;
    uint32_t bad;
} node;

static node nodes[MAX_NODES];
static int n_nodes;
static uint32_t waiting;        /* waiting leaves (atomic) */

/* xorshift on a caller's state (main's, per round). */
static uint32_t rnd_s(uint64_t *s, uint32_t n) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s % n);
}

static int promised;             /* nodes promised to inner nodes, not built yet */

/* Builds a node and its subtree in preorder; never more than MAX_NODES
 * (an inner node promises its kids' slots before any is built). */
static int build(uint64_t *seed, int parent, int depth, uint32_t p_error, uint32_t p_wait) {
    if (parent >= 0) promised--;
    int id = n_nodes++;
    node *nd = &nodes[id];
    memset(nd, 0, sizeof *nd);
    nd->parent = parent;
    nd->first = id;
    nd->status = -1;
    nd->pre = -1;
    int nkids = 2 + (int)rnd_s(seed, 2);
    bool inner = depth == 0 ||
                 (depth < MAX_DEPTH && n_nodes + promised + nkids <= MAX_NODES && rnd_s(seed, 100) < (depth < 3 ? 80u : 45u));
    if (inner) {
        nd->kind = N_INNER;
        nd->nkids = nkids;
        promised += nkids;
        nd->how = rnd_s(seed, 4) == 0;
        nd->wait_first = depth > 0 && p_wait && rnd_s(seed, 100) < p_wait / 3;
        nd->clean = !nd->wait_first;
        for (int j = 0; j < nd->nkids; j++) {
            int k = build(seed, id, depth + 1, p_error, p_wait);
            nd = &nodes[id];
            nd->kids[j] = k;
            nd->clean &= nodes[k].clean;
            nd->value += nodes[k].value;
        }
    } else {
        uint32_t x = rnd_s(seed, 100);
        nd->kind = x < p_error ? N_ERROR : x < p_error + p_wait ? N_WAIT : N_VALUE;
        nd->clean = nd->kind == N_VALUE;
        nd->value = nd->kind == N_VALUE ? (int64_t)id * 1000 + 7 : 0;
        nd->how = (int)rnd_s(seed, 4);
    }
    nodes[id].last = n_nodes - 1;
    return id;
}

/* ------------------------------------------------------------ the bodies */

static ex_task_result node_body(ex_task *t, void *arg) {
    node *nd = arg;
    int id = (int)(nd - nodes);
    nd->runs++;
    switch (nd->kind) {
    case N_VALUE:
        if (nd->how == 1) {
            ex_error e = ex_task_yield(t);
            if (e.code) nd->bad++;
        } else if (nd->how == 2) {
            ex_await_result r = ex_await(t, ex_schedule(sched));
            if (r.status == EX_AWAIT_STOPPED) {  /* possible: the hop sees the stop token */
                nd->exits++;
                return ex_task_stopped();
            }
            if (r.status != EX_AWAIT_VALUE) nd->bad++;
        } else if (nd->how == 3) {
            spin_delay(2000);
        }
        nd->exits++;
        return ex_task_i64(nd->value);
    case N_ERROR:
        nd->exits++;
        return ex_task_with_error(ex_error_format(EX_EUSER + id, "leaf error %d", id));
    case N_WAIT: {
        __atomic_fetch_add(&waiting, 1, __ATOMIC_RELAXED);
        ex_await_result r = ex_await(t, until_stopped());
        nd->status = (int)r.status;
        if (!ex_stop_token_stop_requested(ex_task_stop_token(t))) nd->bad++;
        nd->exits++;
        return ex_task_void();
    }
    default: {
        if (nd->how) (void)ex_stop_token_stop_requested(ex_task_stop_token(t));  /* links the chain early */
        if (nd->wait_first) {
            /* Resumed by the stop request on its token (maybe inside it, on
             * the requesting worker): the fork below must start no kid. */
            __atomic_fetch_add(&waiting, 1, __ATOMIC_RELAXED);
            ex_await_result w =
                ex_await(t, ex_stopped_as_error(until_stopped(), ex_error_format(EX_EUSER - 1, "stopped %d", id)));
            nd->pre = (int)w.status;
            if (w.status == EX_AWAIT_ERROR) ex_error_release(w.error);  /* the body's: noted, dropped */
            if (!ex_stop_token_stop_requested(ex_task_stop_token(t))) nd->bad++;
        }
        ex_sender *kids[3];
        ex_task_options o;
        memset(&o, 0, sizeof o);
        for (int j = 0; j < nd->nkids; j++) kids[j] = ex_task_create(node_body, &nodes[nd->kids[j]], &o);
        /* Odd nodes fork through ex_await_all, even ones through a when_all. */
        ex_await_result r = (id & 1) ? ex_await_all_n(t, kids, (size_t)nd->nkids)
                                     : ex_await(t, ex_when_all_n(kids, (size_t)nd->nkids));
        if (ex_pool_current_worker(pool) < 0) nd->bad++;
        nd->status = (int)r.status;
        nd->n = r.status == EX_AWAIT_VALUE ? r.n : 0;
        for (int j = 0; j < nd->n && j < 3; j++) nd->got[j] = r.v[j].type == EX_T_INT ? r.v[j].as.i : -1;
        nd->err = r.status == EX_AWAIT_ERROR ? r.error.code : 0;
        nd->exits++;
        if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
        if (r.status == EX_AWAIT_STOPPED) return ex_task_void();  /* completes stopped anyway */
        int64_t sum = 0;
        for (int j = 0; j < nd->n && j < 3; j++) sum += nd->got[j];
        return ex_task_i64(sum);
    }
    }
}

/* ------------------------------------------------------------- checking */

/* Whether an error leaf of nodes[a..b] ran. */
static bool error_ran_in(int a, int b) {
    for (int i = a; i <= b; i++)
        if (nodes[i].kind == N_ERROR && nodes[i].runs) return true;
    return false;
}

static int checks;

static void check_round(int round, bool stop_requested, srec *rr) {
    bool any_error = error_ran_in(0, n_nodes - 1);
    CHECK(n_nodes <= MAX_NODES && promised == 0, "round %d: the tree builder overran (%d nodes)", round, n_nodes);
    for (int i = 0; i < n_nodes; i++) {
        node *nd = &nodes[i];
        CHECK(nd->runs <= 1, "round %d node %d: ran %u times", round, i, nd->runs);
        CHECK(nd->exits == nd->runs, "round %d node %d: ran %u times, returned %u times", round, i, nd->runs, nd->exits);
        CHECK(nd->bad == 0, "round %d node %d (kind %d): %u faults seen by the body", round, i, nd->kind, nd->bad);
        checks += 3;
        if (i == 0) {
            CHECK(nd->runs == 1, "round %d: the root never ran", round);
            checks++;
        }
        if (!nd->runs) {
            /* Not run: its parent's fork started none of its children (or
             * the parent did not run either). */
            CHECK(i != 0, "round %d: the root did not run", round);
            const node *p = &nodes[i != 0 ? nd->parent : 0];
            if (i != 0 && p->runs) {
                CHECK(p->status == EX_AWAIT_STOPPED, "round %d node %d not run, its parent %d's await gave %d", round, i, nd->parent,
                      p->status);
                for (int j = 0; j < p->nkids; j++)
                    CHECK(nodes[p->kids[j]].runs == 0, "round %d node %d: a fork ran some children only (%d ran, %d did not)", round,
                          nd->parent, p->kids[j], i);
                checks += 1 + p->nkids;
            }
            CHECK(stop_requested || any_error, "round %d node %d skipped without any stop", round, i);
            checks += 2;
            continue;
        }
        if (nd->kind == N_WAIT) {
            CHECK(nd->status == EX_AWAIT_STOPPED, "round %d waiting leaf %d: await gave %d", round, i, nd->status);
            CHECK(stop_requested || any_error, "round %d waiting leaf %d stopped without any stop", round, i);
            checks += 2;
        }
        if (nd->kind != N_INNER) continue;
        if (nd->wait_first) {
            CHECK(nd->pre == EX_AWAIT_ERROR, "round %d node %d: its wait gave %d", round, i, nd->pre);
            CHECK(nd->status == EX_AWAIT_STOPPED, "round %d node %d: a fork started after its token was stopped gave %d", round, i,
                  nd->status);
            for (int j = 0; j < nd->nkids; j++)
                CHECK(nodes[nd->kids[j]].runs == 0, "round %d node %d: kid %d of a fork started after its token was stopped ran", round,
                      i, nd->kids[j]);
            checks += 2 + nd->nkids;
        }
        bool err_inside = error_ran_in(nd->first, nd->last);
        bool err_outside = error_ran_in(0, nd->first - 1) || error_ran_in(nd->last + 1, n_nodes - 1);
        switch (nd->status) {
        case EX_AWAIT_VALUE:
            CHECK(nd->clean, "round %d node %d: VALUE from a subtree with errors or waits", round, i);
            CHECK(nd->n == nd->nkids, "round %d node %d: %d values of %d children", round, i, nd->n, nd->nkids);
            for (int j = 0; j < nd->n && j < nd->nkids; j++)
                CHECK(nd->got[j] == nodes[nd->kids[j]].value, "round %d node %d: value %d is %lld, expected %lld", round, i, j,
                      (long long)nd->got[j], (long long)nodes[nd->kids[j]].value);
            checks += 2 + nd->nkids;
            break;
        case EX_AWAIT_ERROR: {
            int leaf = nd->err - EX_EUSER;
            CHECK(err_inside, "round %d node %d: ERROR but no error leaf of its subtree ran", round, i);
            CHECK(leaf >= nd->first && leaf <= nd->last && nodes[leaf].kind == N_ERROR && nodes[leaf].runs == 1,
                  "round %d node %d: error %d is not from an error leaf of its subtree that ran", round, i, nd->err);
            checks += 2;
            break;
        }
        case EX_AWAIT_STOPPED:
            CHECK(!err_inside, "round %d node %d: STOPPED though an error leaf of its subtree ran", round, i);
            CHECK(stop_requested || err_outside, "round %d node %d: STOPPED without a stop from outside or an error elsewhere", round, i);
            checks += 2;
            break;
        default:
            CHECK(false, "round %d node %d: status %d", round, i, nd->status);
            checks++;
        }
    }
    /* The root's completion is its await's. */
    const node *root = &nodes[0];
    switch (root->status) {
    case EX_AWAIT_VALUE:
        CHECK(rr->disp == D_VALUE && rr->n == 1 && srec_int(rr) == root->value, "round %d: root gave %d (value %lld), expected %lld",
              round, rr->disp, (long long)srec_int(rr), (long long)root->value);
        break;
    case EX_AWAIT_ERROR:
        CHECK(rr->disp == D_ERROR && rr->err.code == root->err, "round %d: root gave %d (error %d), its await error %d", round,
              rr->disp, rr->err.code, root->err);
        break;
    default:
        CHECK(rr->disp == D_STOPPED, "round %d: root gave %d, its await stopped", round, rr->disp);
    }
    checks++;
    if (!stop_requested && !any_error) {
        CHECK(rr->disp == D_VALUE && srec_int(rr) == root->value, "round %d: nothing failed or stopped, root gave %d", round, rr->disp);
        checks++;
    }
}

/* -------------------------------------------------------------------- main */

int main(void) {
    ex_set_default_allocator(&counting_alloc);
    long baseline = stress_in_use();  /* the pool's blocks count: it is destroyed before the check */
    pool = stress_pool_new(WORKERS, &checks);
    if (!pool) return stress_finish("fork_stress", checks);
    sched = ex_pool_scheduler(pool);

    static srec rr;
    unsigned long disp_count[4] = { 0 }, n_nodes_total = 0, n_skipped = 0, n_waits = 0, n_wait_forks = 0, plans[4] = { 0 };
    uint64_t seed = 0x13198a2e03707344ull;
    int rounds = 0;
    double t0 = now_s();
    for (; rounds < MAX_ROUNDS && now_s() - t0 < BUDGET_S; rounds++) {
        uint32_t p_error = rnd_s(&seed, 3) == 0 ? 0 : rnd_s(&seed, 12);
        uint32_t p_wait = rnd_s(&seed, 3) == 0 ? 0 : rnd_s(&seed, 30);
        n_nodes = 0;
        promised = 0;
        build(&seed, -1, 0, p_error, p_wait);
        bool has_wait = false, has_error = false;
        int n_wait = 0;
        for (int i = 0; i < n_nodes; i++) {
            /* nothing under a wait_first node runs */
            bool can_run = true;
            for (int a = nodes[i].parent; can_run && a >= 0; a = nodes[a].parent) can_run = !nodes[a].wait_first;
            bool w = can_run && (nodes[i].kind == N_WAIT || nodes[i].wait_first);
            has_wait |= w;
            n_wait += w;
            has_error |= can_run && nodes[i].kind == N_ERROR;
        }
        /* A wait needs a stop: from an error that can run, or from main. */
        int plan = (int)rnd_s(&seed, 4);
        if (plan == STOP_NONE && has_wait && !has_error) plan = STOP_DELAYED;
        if (plan == STOP_WHEN_WAITING && !has_wait) plan = STOP_DELAYED;
        plans[plan]++;
        __atomic_store_n(&waiting, 0, __ATOMIC_RELAXED);

        srec_init(&rr);  /* its environment: the stop token and the pool as scheduler */
        rr.pair.key2 = &ex_key_get_scheduler;
        rr.pair.value2 = ex_sched_value(sched);
        ex_sender *s = ex_task_create(node_body, &nodes[0], NULL);
        ex_operation *op = srec_connect(&rr, s, rounds, &checks);
        if (!op) break;
        ex_start(op);
        bool requested = false;
        if (plan == STOP_AT_ONCE) {
            requested = true;
        } else if (plan == STOP_DELAYED) {
            spin_delay(rnd_s(&seed, 200000));
            requested = true;
        } else if (plan == STOP_WHEN_WAITING) {
            /* once some leaves wait (or the tree finished anyway) */
            uint32_t want = 1 + rnd_s(&seed, (uint32_t)n_wait);
            double deadline = now_s() + 20.0;
            while (__atomic_load_n(&waiting, __ATOMIC_RELAXED) < want && !__atomic_load_n(&rr.done, __ATOMIC_ACQUIRE) &&
                   now_s() < deadline)
                sched_yield();
            requested = true;
        }
        if (requested) ex_stop_source_request_stop(&rr.stop);
        if (!srec_wait(&rr, "the root task", rounds, &checks))
            return stress_finish("fork_stress", checks);  /* its memory may still be in use */
        srec_expect_once(&rr, "the root task", rounds, &checks);
        check_round(rounds, requested, &rr);
        ex_operation_free(op);
        disp_count[rr.disp]++;
        n_nodes_total += (unsigned long)n_nodes;
        for (int i = 0; i < n_nodes; i++) {
            n_skipped += nodes[i].runs == 0;
            n_waits += (nodes[i].kind == N_WAIT || nodes[i].wait_first) && nodes[i].runs;
            n_wait_forks += nodes[i].wait_first && nodes[i].runs;
        }
        if (stress_failures > 20) break;
    }
    stress_pool_free(pool, &checks);
    long leaked = stress_in_use() - baseline;
    CHECK(leaked == 0, "%ld allocation(s) not returned", leaked);
    CHECK(disp_count[D_VALUE] > 0 && disp_count[D_ERROR] > 0 && disp_count[D_STOPPED] > 0, "some outcome never happened");
    CHECK(n_skipped > 0 && n_wait_forks > 0, "no fork was ever skipped by a stop, or none started after a wait");
    checks += 3;
    ex_set_default_allocator(NULL);
    printf("fork_stress: %d rounds in %.1f s, %lu nodes (%lu not run, %lu waits stopped, %lu forks after a wait); roots: %lu values, "
           "%lu errors, %lu stopped; stop plans none/at once/delayed/when waiting: %lu/%lu/%lu/%lu\n",
           rounds, now_s() - t0, n_nodes_total, n_skipped, n_waits, n_wait_forks, disp_count[D_VALUE], disp_count[D_ERROR],
           disp_count[D_STOPPED], plans[0], plans[1], plans[2], plans[3]);
    return stress_finish("fork_stress", checks);
}
