/* SPDX-License-Identifier: MIT */
/* env pairs and deep chains of them (suite exec_env, declared in env.c). */
#include <pthread.h>
#include <stdlib.h>

#include "core/env_fixtures.h"

/* ------------------------------------------------------------ env pairs */

Test(exec_env, env_pair_key2_and_parent_chain) {
    ex_env_pair parent, p;
    ex_env_pair_init(&parent, &other_key, ex_int(30), ex_env_empty());
    ex_env_pair_init(&p, &fwd_key, ex_int(10), ex_env_of_pair(&parent));
    cr_assert_null(p.key2, "init leaves the second key unset");
    ex_value v;
    cr_assert_not(ex_env_query(ex_env_of_pair(&p), &local_key, &v));
    p.key2 = &local_key;
    p.value2 = ex_int(20);
    ex_env e = ex_env_of_pair(&p);
    cr_assert(ex_env_query(e, &fwd_key, &v));
    cr_assert_eq(v.as.i, 10);
    cr_assert(ex_env_query(e, &local_key, &v));
    cr_assert_eq(v.as.i, 20);
    cr_assert(ex_env_query(e, &other_key, &v), "unknown keys go to the parent");
    cr_assert_eq(v.as.i, 30);
    cr_assert_not(ex_env_query(e, &ex_key_get_scheduler, &v));
    /* key2 obeys forwarding like the first key */
    cr_assert_not(ex_env_query(ex_env_forward(e), &local_key, &v));
    expect_no_leaks();
}

Test(exec_env, env_pair_shadows_parent) {
    ex_env_pair parent, p;
    ex_env_pair_init(&parent, &fwd_key, ex_int(1), ex_env_empty());
    parent.key2 = &other_key;
    parent.value2 = ex_int(2);
    ex_env_pair_init(&p, &other_key, ex_int(3), ex_env_of_pair(&parent));
    ex_value v;
    cr_assert(ex_env_query(ex_env_of_pair(&p), &other_key, &v));
    cr_assert_eq(v.as.i, 3);
    cr_assert(ex_env_query(ex_env_of_pair(&p), &fwd_key, &v));
    cr_assert_eq(v.as.i, 1);
    expect_no_leaks();
}

Test(exec_env, receiver_without_env_fn_has_empty_env) {
    ex_receiver_vtable vt = { 0 };
    ex_receiver r = { &vt, NULL };
    ex_env e = ex_receiver_env(r);
    cr_assert_null(e.node);
    ex_value v;
    cr_assert_not(ex_env_query(e, &ex_key_get_scheduler, &v));
    expect_no_leaks();
}

/* ------------------------------------------------- deep chains of pairs */

/* Chains as recursions build them: each level adds a node below a FWD-ENV
 * of the level above, {get_scheduler, get_allocator} (let_value on a
 * scheduler) or, in turn with it, {get_stop_token, get_allocator}
 * (when_all).  The root answers a user key and the delegation scheduler.
 * Walking the chain from each node would take about 2e10 steps (and a
 * recursion as deep as the chain): the suite's timeout fails it.  (One
 * assertion at the end: Criterion reports every assertion it runs.) */
#define DEEP_PAIRS 200000

static ex_env_pair *deep_chain(bool alternate) {
    ex_env_pair *p = malloc(DEEP_PAIRS * sizeof *p);
    cr_assert_not_null(p);
    ex_env_pair_init2(&p[0], &fwd_key, ex_int(7), &ex_key_get_delegation_scheduler, ex_int(8), ex_env_empty());
    for (size_t i = 1; i < DEEP_PAIRS; i++) {
        ex_env up = ex_env_forward(ex_env_of_pair(&p[i - 1]));
        if (i % 2 || !alternate)
            ex_env_pair_init2(&p[i], &ex_key_get_scheduler, ex_int((int64_t)i), &ex_key_get_allocator, ex_int(-1), up);
        else
            ex_env_pair_init2(&p[i], &ex_key_get_stop_token, ex_int((int64_t)i), &ex_key_get_allocator, ex_int(-2), up);
    }
    return p;
}

Test(exec_env, a_chain_of_the_same_pairs_answers_root_and_missing_keys_at_every_depth) {
    ex_env_pair *p = deep_chain(false);
    size_t wrong = 0, first_wrong = 0;
    for (size_t i = 1; i < DEEP_PAIRS; i++) {
        ex_env e = ex_env_of_pair(&p[i]);
        ex_value v;
        bool ok = ex_env_query(e, &fwd_key, &v) && v.as.i == 7;
        ok = ok && ex_env_query(e, &ex_key_get_delegation_scheduler, &v) && v.as.i == 8;
        ok = ok && !ex_env_query(e, &other_key, &v) && !ex_env_query(e, &local_key, &v);
        ok = ok && !ex_env_query(e, &ex_key_get_stop_token, &v);
        ok = ok && ex_env_query(e, &ex_key_get_scheduler, &v) && v.as.i == (int64_t)i;
        if (!ok && !wrong++) first_wrong = i;
    }
    cr_assert_eq(wrong, 0, "%zu nodes answered wrongly, the first at depth %zu", wrong, first_wrong);
    free(p);
    expect_no_leaks();
}

Test(exec_env, a_chain_of_alternating_pairs_answers_missing_and_near_keys_at_every_depth) {
    ex_env_pair *p = deep_chain(true);
    size_t wrong = 0, first_wrong = 0;
    for (size_t i = 1; i < DEEP_PAIRS; i++) {
        ex_env e = ex_env_of_pair(&p[i]);
        ex_value v, w;
        int64_t sched = (int64_t)(i % 2 ? i : i - 1), stop = (int64_t)(i % 2 ? i - 1 : i);
        bool ok = !ex_env_query(e, &other_key, &v) && !ex_env_query(e, &local_key, &v);
        ok = ok && ex_env_query(e, &ex_key_get_scheduler, &v) && v.as.i == sched;
        ok = ok && ex_env_query(e, &ex_key_get_allocator, &v) && v.as.i == (i % 2 ? -1 : -2);
        ok = ok && (i == 1 ? !ex_env_query(e, &ex_key_get_stop_token, &w)
                           : ex_env_query(e, &ex_key_get_stop_token, &w) && w.as.i == stop);
        if (!ok && !wrong++) first_wrong = i;
    }
    cr_assert_eq(wrong, 0, "%zu nodes answered wrongly, the first at depth %zu", wrong, first_wrong);
    /* A key only the root answers is found (one step per level here). */
    ex_value v;
    cr_assert(ex_env_query(ex_env_of_pair(&p[DEEP_PAIRS - 1]), &fwd_key, &v) && v.as.i == 7);
    free(p);
    expect_no_leaks();
}

Test(exec_env, a_shortcut_past_shadowed_pairs_keeps_the_fwd_env_filter) {
    /* root answers a non-forwarding key; a is below a FWD-ENV of it; b
     * shadows a entirely, so b's lookups skip a, but not a's filter. */
    ex_env_pair root, a, b, c;
    ex_env_pair_init2(&root, &local_key, ex_int(1), &other_key, ex_int(2), ex_env_empty());
    ex_env_pair_init(&a, &fwd_key, ex_int(3), ex_env_forward(ex_env_of_pair(&root)));
    ex_env_pair_init(&b, &fwd_key, ex_int(4), ex_env_of_pair(&a));
    ex_env_pair_init(&c, &fwd_key, ex_int(5), ex_env_of_pair(&root));
    ex_value v;
    cr_assert_not(ex_env_query(ex_env_of_pair(&b), &local_key, &v), "FWD-ENV above a hides the non-forwarding key");
    cr_assert(ex_env_query(ex_env_of_pair(&b), &other_key, &v) && v.as.i == 2);
    cr_assert(ex_env_query(ex_env_of_pair(&b), &fwd_key, &v) && v.as.i == 4);
    cr_assert(ex_env_query(ex_env_of_pair(&c), &local_key, &v) && v.as.i == 1, "no filter on c's path");
    expect_no_leaks();
}

/* Differential test of the shortcuts: random forests of pairs (one or two
 * keys, the second sometimes set after init, FWD-ENV edges) and of nodes
 * of another kind, over standard and user keys (several share a bucket,
 * some do not forward), against a
 * plain walk of the parent links. */
enum { RK_KEYS = 10, RK_NODES = 400 };
static const ex_key rk_user[6] = {
    { "rk0", true }, { "rk1", false }, { "rk2", true }, { "rk3", false }, { "rk4", true }, { "rk5", false },
};
static const ex_key *const rk_keys[RK_KEYS] = {
    &ex_key_get_scheduler, &ex_key_get_stop_token, &ex_key_get_allocator, &ex_key_get_delegation_scheduler,
    &rk_user[0], &rk_user[1], &rk_user[2], &rk_user[3], &rk_user[4], &rk_user[5],
};

typedef struct rk_node {
    ex_env_pair pair;    /* when !custom */
    ex_env_node node;    /* when custom: answers k1, else asks parent */
    bool custom;
    int parent;          /* -1: empty */
    bool fwd;            /* the edge to the parent is a FWD-ENV */
    int k1, k2;          /* key indices, -1: none */
    int64_t v1, v2;
    ex_env up;
} rk_node;

static rk_node rk[RK_NODES];

static bool rk_custom_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
    const rk_node *r = (const rk_node *)(const void *)((const char *)n - offsetof(rk_node, node));
    if (key == rk_keys[r->k1]) { *out = ex_int(r->v1); return true; }
    return ex_env_query(r->up, key, out);
}

static ex_env rk_env(int i) {
    if (i < 0) return ex_env_empty();
    ex_env e = { rk[i].custom ? &rk[i].node : &rk[i].pair.node, 0 };
    return e;
}

/* The answer by walking parent links one node at a time. */
static bool rk_reference(int i, int key, int64_t *out) {
    bool filtered = false;
    for (; i >= 0; i = rk[i].parent) {
        if (filtered && !rk_keys[key]->forwarding) return false;
        if (rk[i].k1 == key) { *out = rk[i].v1; return true; }
        if (rk[i].k2 == key) { *out = rk[i].v2; return true; }
        filtered = filtered || rk[i].fwd;
    }
    return false;
}

Test(exec_env, pair_shortcuts_answer_as_a_walk_of_the_chain_does) {
    srand(12345);
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < RK_NODES; i++) {
            rk_node *r = &rk[i];
            /* mostly chains, sometimes a branch or a new root */
            r->parent = i == 0 || rand() % 16 == 0 ? -1 : rand() % 4 ? i - 1 : rand() % i;
            r->fwd = rand() % 3 == 0;
            r->custom = rand() % 10 == 0;
            r->k1 = rand() % RK_KEYS;
            r->k2 = r->custom || rand() % 3 == 0 ? -1 : rand() % RK_KEYS;
            if (r->k2 == r->k1) r->k2 = -1;
            r->v1 = i * 2;
            r->v2 = i * 2 + 1;
            ex_env up = rk_env(r->parent);
            if (r->fwd) up = ex_env_forward(up);
            r->up = up;
            if (r->custom) {
                r->node.query = rk_custom_query;
            } else if (r->k2 >= 0 && rand() % 2) {
                ex_env_pair_init2(&r->pair, rk_keys[r->k1], ex_int(r->v1), rk_keys[r->k2], ex_int(r->v2), up);
            } else {
                ex_env_pair_init(&r->pair, rk_keys[r->k1], ex_int(r->v1), up);
                if (r->k2 >= 0) {  /* set after init, as the header allows */
                    r->pair.key2 = rk_keys[r->k2];
                    r->pair.value2 = ex_int(r->v2);
                }
            }
        }
        for (int i = 0; i < RK_NODES; i++)
            for (int k = 0; k < RK_KEYS; k++) {
                int64_t want = -1;
                ex_value got = ex_int(-1);
                bool ref = rk_reference(i, k, &want);
                bool res = ex_env_query(rk_env(i), rk_keys[k], &got);
                cr_assert_eq(res, ref, "round %d node %d key %d: answered %d, the walk %d", round, i, k, res, ref);
                if (ref) cr_assert_eq(got.as.i, want, "round %d node %d key %d", round, i, k);
            }
    }
    expect_no_leaks();
}
