/* SPDX-License-Identifier: MIT */
/* lazy_stop_stress.c - stop requests through trees of nested fork-joins
 * (ex_when_all, and task forks through ex_await_all) whose sources follow
 * the one above lazily (src/core/exi_lazy_stop.h): registered on nothing
 * until someone registers on their token, answering stop_requested by a
 * walk up the chain, skipped while no request has begun since.
 *
 * Each round builds a random tree on the pool.  Its leaves send a value,
 * fail, complete stopped, wait on a 30 s timer for a stop request (its
 * callback links the chain above it, often from two threads at once), or
 * poll their token.  Another thread may request stop on the root's token,
 * before the start or at a random moment; in some rounds the windows
 * between a request's counts and its flag, and between a link's
 * registration and its publication, are widened.  Every round checks:
 *  - the root completes exactly once, with a disposition that follows
 *    from what the leaves did (an error wins; stopped only when a leaf
 *    stopped or stop was requested; else the sum of every leaf);
 *  - no timer leaf waits for its 30 s: every stop reaches it (a lost
 *    request would hang the round, which the 20 s wait reports);
 *  - no poll leaf reads "not stopped" after the outside request returned;
 *  - stop before the start runs no leaf; no leaf runs twice; every block
 *    allocated in the round is freed. */
#include <string.h>

#include "base/exi_test_hooks.h"
#include "stress_util.h"

enum { ROUNDS = 1500, MAX_NODES = 128, MAX_KIDS = 3, MAX_DEPTH = 4 };
enum { L_VALUE, L_ERROR, L_STOPPED, L_WAIT, L_POLL, L_INLINE, N_JOIN, N_FORK, N_LATE };
enum { PLAN_NONE, PLAN_BEFORE_START, PLAN_RACE };

typedef struct node {
    int kind;
    int nkids;
    struct node *kids[MAX_KIDS];
    bool hop;                /* started through starts_on(pool) */
    int64_t value;           /* a leaf's */
    uint32_t runs;           /* a leaf's function ran (atomic) */
    uint32_t sent_at_start;  /* N_LATE: the outside request had returned before its when_all started */
} node;

static node nodes[MAX_NODES];
static int nnodes;
static ex_scheduler sch;

/* The outside request returned (release); poll leaves then must see it. */
static uint32_t stop_sent;
static uint32_t poll_misses;
static uint32_t poll_flips;  /* a poll that said stopped, then not stopped */
static uint32_t stop_fired;

static void request_stop(void *src) {
    if (ex_stop_source_request_stop(src)) __atomic_store_n(&stop_fired, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&stop_sent, 1, __ATOMIC_RELEASE);
}

static void widen(void) { spin_delay(rnd(20000)); }

/* ---------------------------------------------------------------- leaves */

static ex_error leaf_value(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    node *nd = ctx;
    __atomic_fetch_add(&nd->runs, 1, __ATOMIC_RELAXED);
    out[0] = ex_int(nd->value);
    return ex_ok();
}

static ex_error leaf_error(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    node *nd = ctx;
    __atomic_fetch_add(&nd->runs, 1, __ATOMIC_RELAXED);
    return ex_err(EX_EUSER, "lazy_stop_stress: injected error");
}

static ex_sender *leaf_stopped(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    node *nd = ctx;
    __atomic_fetch_add(&nd->runs, 1, __ATOMIC_RELAXED);
    return ex_just_stopped();
}

/* Polls its token for a while: once the outside request has returned, the
 * token must say stopped, whichever sources above it are unlinked. */
static ex_error leaf_poll(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    node *nd = ctx;
    __atomic_fetch_add(&nd->runs, 1, __ATOMIC_RELAXED);
    ex_stop_token tok = in[0].as.token;
    bool was_seen = false;
    for (int i = 0, after = 0; i < 256 && after < 96; i++) {
        bool sent = __atomic_load_n(&stop_sent, __ATOMIC_ACQUIRE);
        bool seen = ex_stop_token_stop_requested(tok);
        if (sent && !seen) __atomic_fetch_add(&poll_misses, 1, __ATOMIC_RELAXED);
        if (was_seen && !seen) __atomic_fetch_add(&poll_flips, 1, __ATOMIC_RELAXED);
        was_seen |= seen;
        after += was_seen;  /* a few more looks once stopped: the answer must stay */
        spin_delay(200);
    }
    out[0] = ex_int(nd->value);
    return ex_ok();
}

/* ----------------------------------------------------------------- inner */

static ex_error sum_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx;
    int64_t s = 0;
    for (size_t i = 0; i < n; i++) s += in[i].as.i;
    out[0] = ex_int(s);
    return ex_ok();
}

static ex_sender *build(node *nd);

/* A fork's child: awaits its subtree. */
static ex_task_result fork_child(ex_task *t, void *arg) {
    ex_await_result r = ex_await(t, build(arg));
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    if (r.status == EX_AWAIT_STOPPED) return ex_task_stopped();
    return ex_task_i64(r.v[0].as.i);
}

/* A task that forks one child task per subtree. */
static ex_task_result fork_body(ex_task *t, void *arg) {
    node *nd = arg;
    ex_sender *kids[MAX_KIDS];
    for (int i = 0; i < nd->nkids; i++) kids[i] = ex_task_create(fork_child, nd->kids[i], NULL);
    ex_await_result r = ex_await_all_n(t, kids, (size_t)nd->nkids);
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    if (r.status == EX_AWAIT_STOPPED) return ex_task_stopped();
    int64_t s = 0;
    for (size_t i = 0; i < r.n; i++) s += r.v[i].as.i;
    return ex_task_i64(s);
}

static ex_sender *join_of(node *nd);

/* N_LATE: a pause on its thread (the stopper may act meanwhile), then a
 * when_all of inline leaves built and started at once: its start check is
 * all that stands between an outside request and its children. */
static ex_error late_pause(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    spin_delay(rnd(20000));
    return ex_ok();
}

static ex_sender *late_body(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    node *nd = ctx;
    nd->sent_at_start = __atomic_load_n(&stop_sent, __ATOMIC_ACQUIRE);
    return join_of(nd);
}

static ex_sig ints(int n) {
    ex_sig s = { (uint8_t)n, { 0 } };
    for (int i = 0; i < n; i++) s.types[i] = EX_T_INT;
    return s;
}

static ex_sender *join_of(node *nd) {
    ex_sender *kids[MAX_KIDS];
    for (int i = 0; i < nd->nkids; i++) kids[i] = build(nd->kids[i]);
    return ex_then(ex_when_all_n(kids, (size_t)nd->nkids), sum_fn, NULL, ints(nd->nkids), EX_SIG(EX_T_INT));
}

static ex_sender *build(node *nd) {
    ex_sender *s;
    switch (nd->kind) {
    case L_VALUE: s = ex_then(ex_schedule(sch), leaf_value, nd, EX_SIG0, EX_SIG(EX_T_INT)); break;
    case L_ERROR: s = ex_then(ex_schedule(sch), leaf_error, nd, EX_SIG0, EX_SIG(EX_T_INT)); break;
    case L_STOPPED: s = ex_let_value(ex_schedule(sch), leaf_stopped, nd, EX_SIG0); break;
    case L_WAIT:
        s = ex_then(ex_schedule_after(sch, 30 * (int64_t)1000000000), leaf_value, nd, EX_SIG0, EX_SIG(EX_T_INT));
        break;
    case L_POLL:
        s = ex_then(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), leaf_poll, nd, EX_SIG(EX_T_TOKEN),
                    EX_SIG(EX_T_INT));
        break;
    case L_INLINE:  /* runs when its when_all starts: no schedule operation, no stop check of its own */
        s = ex_then(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN), leaf_value, nd, EX_SIG(EX_T_TOKEN),
                    EX_SIG(EX_T_INT));
        break;
    case N_FORK: s = ex_task_create(fork_body, nd, NULL); break;
    case N_LATE:
        s = ex_let_value(ex_then(ex_just(), late_pause, nd, EX_SIG0, EX_SIG0), late_body, nd, EX_SIG0);
        break;
    default: s = join_of(nd);
    }
    /* A task needs a scheduler to fork on: always started on the pool. */
    return nd->hop || nd->kind == N_FORK ? ex_starts_on(sch, s) : s;
}

/* ------------------------------------------------------------ the tree */

typedef struct plan_leaves {
    bool failing;  /* error and stopped leaves allowed */
    bool waits;    /* timer leaves allowed (a stop will come) */
} plan_leaves;

static node *grow(int depth, const plan_leaves *pl) {
    node *nd = &nodes[nnodes++];
    memset(nd, 0, sizeof *nd);
    nd->hop = rnd(2) == 0;
    bool inner = depth == 0 || (depth < MAX_DEPTH && nnodes + MAX_KIDS * 4 < MAX_NODES && rnd(3) != 0);
    if (inner) {
        uint32_t k = rnd(8);
        nd->kind = depth == 0 ? N_JOIN : k < 2 ? N_FORK : k < 4 ? N_LATE : N_JOIN;
        nd->nkids = 2 + (int)rnd(MAX_KIDS - 1);
        for (int i = 0; i < nd->nkids; i++) {
            if (nd->kind == N_LATE) {  /* inline leaves only */
                node *leaf = &nodes[nnodes++];
                memset(leaf, 0, sizeof *leaf);
                leaf->kind = L_INLINE;
                leaf->value = (int64_t)rnd(1000);
                nd->kids[i] = leaf;
            } else {
                nd->kids[i] = grow(depth + 1, pl);
            }
        }
        return nd;
    }
    uint32_t r = rnd(16);
    nd->kind = r < 9 ? L_VALUE : r < 12 ? L_POLL : r == 12 && pl->failing ? L_ERROR
             : r == 13 && pl->failing ? L_STOPPED : r >= 14 && pl->waits ? L_WAIT : L_VALUE;
    nd->value = (int64_t)rnd(1000);
    return nd;
}

typedef struct tally {
    int leaves, waits;
    int late_started, late_runs;  /* N_LATE when_alls started after the request returned; leaves they ran */
    bool error_ran, stopped_ran, none_twice, none_ran, all_once;
    int64_t sum;
} tally;

static void count(const node *nd, tally *t) {
    if (nd->kind == N_JOIN || nd->kind == N_FORK || nd->kind == N_LATE) {
        for (int i = 0; i < nd->nkids; i++) {
            count(nd->kids[i], t);
            if (nd->kind == N_LATE && nd->sent_at_start && nd->kids[i]->runs) t->late_runs++;
        }
        t->late_started += nd->kind == N_LATE && nd->sent_at_start;
        return;
    }
    uint32_t runs = __atomic_load_n(&nd->runs, __ATOMIC_RELAXED);
    t->leaves++;
    t->waits += nd->kind == L_WAIT;
    t->sum += nd->value;
    if (runs > 1) t->none_twice = false;
    if (runs) t->none_ran = false;
    if (runs != 1 && nd->kind != L_WAIT) t->all_once = false;
    if (runs && nd->kind == L_ERROR) t->error_ran = true;
    if (runs && nd->kind == L_STOPPED) t->stopped_ran = true;
}

/* ----------------------------------------------------------------- main */

int main(void) {
    int checks = 0;
    ex_pool *pool = stress_pool_new(3, &checks);
    if (!pool) return stress_finish("lazy_stop_stress", checks);
    sch = ex_pool_scheduler(pool);
    long baseline = stress_in_use();

    static agent stopper;
    agent_start(&stopper);
    static srec rec;
    unsigned outcome[4] = { 0 }, widened = 0, lates = 0;
    double t0 = now_s();

    for (int round = 0; round < ROUNDS; round++) {
        uint32_t p = rnd(10);
        int plan = p < 4 ? PLAN_NONE : p == 4 ? PLAN_BEFORE_START : PLAN_RACE;
        plan_leaves pl = { rnd(2) == 0, plan != PLAN_NONE };
        nnodes = 0;
        node *root = grow(0, &pl);
        root->hop = true;

        __atomic_store_n(&stop_sent, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&stop_fired, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&poll_misses, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&poll_flips, 0, __ATOMIC_RELAXED);
        bool widen_round = rnd(4) == 0;
        exi_stop_counted_hook = widen_round ? widen : NULL;
        exi_stop_begun_hook = widen_round ? widen : NULL;
        exi_stop_link_hook = widen_round ? widen : NULL;
        widened += widen_round;

        srec_init(&rec);
        ex_operation *op = srec_connect(&rec, build(root), round, &checks);
        if (!op) continue;
        if (plan == PLAN_BEFORE_START) request_stop(&rec.stop);
        if (plan == PLAN_RACE) agent_arm(&stopper, request_stop, &rec.stop, rnd(4) == 0 ? 0 : rnd(3000));
        ex_start(op);

        if (!srec_wait(&rec, "fork-join tree", round, &checks)) break;  /* it may still run: do not free it */
        if (plan == PLAN_RACE && !agent_wait_checked(&stopper, "stopper", round, &checks)) break;
        srec_expect_once(&rec, "fork-join tree", round, &checks);
        bool stopped_outside = __atomic_load_n(&stop_fired, __ATOMIC_RELAXED);

        tally t = { 0, 0, 0, 0, false, false, true, true, true, 0 };
        count(root, &t);
        CHECK(t.none_twice, "round %d: a leaf ran twice", round);
        CHECK(__atomic_load_n(&poll_misses, __ATOMIC_RELAXED) == 0,
              "round %d: %u polls found no stop after the request returned", round, poll_misses);
        CHECK(__atomic_load_n(&poll_flips, __ATOMIC_RELAXED) == 0,
              "round %d: %u polls found no stop after one that found it", round, poll_flips);
        CHECK(t.late_runs == 0, "round %d: %d leaves ran under a when_all started after the request returned", round,
              t.late_runs);
        checks += 4;
        lates += (unsigned)t.late_started;
        outcome[rec.disp]++;
        switch (rec.disp) {
        case D_VALUE:
            CHECK(!t.error_ran && !t.stopped_ran && t.waits == 0, "round %d: a value, though a leaf failed, stopped or waits",
                  round);
            CHECK(t.all_once, "round %d: a value, but not every leaf ran once", round);
            CHECK(srec_int(&rec) == t.sum, "round %d: sum %lld, expected %lld", round, (long long)srec_int(&rec),
                  (long long)t.sum);
            checks += 3;
            break;
        case D_ERROR:
            CHECK(t.error_ran && rec.err.code == EX_EUSER, "round %d: error %d though no leaf failed", round, rec.err.code);
            checks++;
            break;
        case D_STOPPED:
            CHECK(!t.error_ran, "round %d: stopped although a leaf failed (an error wins)", round);
            CHECK(stopped_outside || t.stopped_ran, "round %d: stopped with no stop request and no stopped leaf", round);
            checks += 2;
            break;
        default:
            CHECK(0, "round %d: no disposition recorded", round);
            checks++;
        }
        if (plan == PLAN_BEFORE_START) {
            CHECK(rec.disp == D_STOPPED && t.none_ran, "round %d: stop before the start ran a leaf (disp %d)", round,
                  rec.disp);
            checks++;
        }
        exi_stop_counted_hook = NULL;
        exi_stop_begun_hook = NULL;
        exi_stop_link_hook = NULL;
        ex_operation_free(op);
        expect_round_freed(&baseline, round, &checks);
    }

    agent_stop(&stopper);
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    printf("lazy_stop_stress: %d rounds in %.2f s (value %u, error %u, stopped %u; %u widened; %u when_alls started "
           "after the request returned)\n",
           ROUNDS, now_s() - t0, outcome[D_VALUE], outcome[D_ERROR], outcome[D_STOPPED], widened, lates);
    return stress_finish("lazy_stop_stress", checks);
}
