/* SPDX-License-Identifier: MIT */
/* env.c - standard keys, queries and the one/two-key environment node. */
#include <cexec/cexec.h>

#include "base/exi_macros.h"
#include "base/exi_thread.h"
#include "core/exi_env.h"

const ex_key ex_key_get_scheduler = { "get_scheduler", true };
const ex_key ex_key_get_delegation_scheduler = { "get_delegation_scheduler", true };
const ex_key ex_key_get_stop_token = { "get_stop_token", true };
const ex_key ex_key_get_allocator = { "get_allocator", true };
const ex_key ex_key_completion_scheduler_value = { "get_completion_scheduler<set_value>", true };
const ex_key ex_key_completion_scheduler_error = { "get_completion_scheduler<set_error>", true };
const ex_key ex_key_completion_scheduler_stopped = { "get_completion_scheduler<set_stopped>", true };
const ex_key ex_key_get_domain = { "get_domain", true };  /* cexec/domain.h */

static bool pair_query(const ex_env_node *n, const ex_key *key, ex_value *out);

/* ex_env_query, inline here: most queries the library makes (allocator,
 * stop token at every connect and start) are answered by a pair, often
 * the first one, and a call per layer cost more than the answer. */
static inline __attribute__((always_inline)) bool env_query(ex_env e, const ex_key *key, ex_value *out) {
    if (!e.node || !key) return false;
    if ((e.flags & EX_ENV_FORWARD_ONLY) && !key->forwarding) return false;
    if (e.node->query == pair_query) return pair_query(e.node, key, out);
    return e.node->query(e.node, key, out);
}

bool ex_env_query(ex_env e, const ex_key *key, ex_value *out) { return env_query(e, key, out); }

static inline bool query_typed(ex_env e, const ex_key *key, ex_type type, ex_value *out) {
    return env_query(e, key, out) && out->type == type;
}

bool ex_get_scheduler(ex_env e, ex_scheduler *out) {
    ex_value v;
    if (!query_typed(e, &ex_key_get_scheduler, EX_T_SCHED, &v)) return false;
    *out = v.as.sched;
    return true;
}

bool ex_get_delegation_scheduler(ex_env e, ex_scheduler *out) {
    ex_value v;
    if (!query_typed(e, &ex_key_get_delegation_scheduler, EX_T_SCHED, &v)) return false;
    *out = v.as.sched;
    return true;
}

static const ex_env_pair *as_pair(const ex_env_node *n);
static inline __attribute__((always_inline)) uint64_t key_bit(const ex_key *key);

/* The value a pair holds for key itself (not above it), or NULL. */
static inline const ex_value *pair_own(const ex_env_pair *p, const ex_key *key) {
    return !p ? NULL : p->key == key ? &p->value : p->key2 == key ? &p->value2 : NULL;
}

ex_stop_token ex_get_stop_token(ex_env e) {
    /* Read in place when the first node holds the key (a when_all's
     * children: their schedule operations ask at every completion); the
     * key is a forwarding one, which a FWD-ENV filter does not hide. */
    const ex_env_pair *p = as_pair(e.node);
    const ex_value *own = pair_own(p, &ex_key_get_stop_token);
    if (own) return own->type == EX_T_TOKEN ? own->as.token : ex_never_stop_token();
    /* Nothing above it answers and nothing is under it (sync_wait's
     * node): no token, without the walk. */
    if (p && !(p->above & key_bit(&ex_key_get_stop_token)) && !p->base.node) return ex_never_stop_token();
    ex_value v;
    if (!query_typed(e, &ex_key_get_stop_token, EX_T_TOKEN, &v)) return ex_never_stop_token();
    return v.as.token;
}

/* The allocator when the environment does not answer with a usable one:
 * sch's (NULL: the environment's scheduler's), else the process default.
 * ask: query the environment first. */
static __attribute__((noinline)) const ex_allocator *allocator_slow(ex_env e, const ex_scheduler *sch, bool ask) {
    ex_value v;
    if (ask && query_typed(e, &ex_key_get_allocator, EX_T_ALLOC, &v) && v.as.alloc) return v.as.alloc;
    ex_scheduler own;
    if (!sch && ex_get_scheduler(e, &own)) sch = &own;
    if (sch && sch->vt && sch->vt->allocator) {
        const ex_allocator *a = sch->vt->allocator(sch->self);
        if (a) return a;
    }
    return ex_default_allocator();
}

/* Reads the answer straight from the first node when it is a pair holding
 * the allocator key (when_all, starts_on and let_value nodes cache the
 * allocator there for their children: nearly every connect's lookup),
 * else queries.  (The key is a forwarding one: a FWD-ENV filter does not
 * hide it.) */
const ex_allocator *exi_allocator_under(ex_env e, const ex_scheduler *sch) {
    const ex_env_pair *p = as_pair(e.node);
    const ex_value *v = pair_own(p, &ex_key_get_allocator);
    if (!v && p && !(p->above & key_bit(&ex_key_get_allocator)) && !p->base.node) {
        /* No pair up the chain names one and nothing is under it
         * (sync_wait's node): no query for it, and the scheduler read in
         * place when the first pair names it. */
        const ex_value *own = sch ? NULL : pair_own(p, &ex_key_get_scheduler);
        return allocator_slow(e, own && own->type == EX_T_SCHED ? &own->as.sched : sch, false);
    }
    if (!v) return allocator_slow(e, sch, true);
    if (v->type == EX_T_ALLOC && v->as.alloc) return v->as.alloc;
    return allocator_slow(e, sch, false);  /* answered, but not with an allocator */
}

const ex_allocator *ex_get_allocator(ex_env e) { return exi_allocator_under(e, NULL); }

/* ------------------------------------------------------------- env pairs */

/* A key's bit in a pair's `above` mask.  The keys the library asks for
 * have a bit each, so that no other key makes them look answered; others
 * share the remaining 59 bits by address (bits 4 to 11, which do not move
 * with address-space randomisation and differ for keys defined next to
 * each other, also when a sanitizer spaces globals out).  Keys sharing a
 * bit only cost lookups. */
static inline __attribute__((always_inline)) uint64_t key_bit(const ex_key *key) {
    if (key == &ex_key_get_stop_token) return 1;
    if (key == &ex_key_get_allocator) return 2;
    if (key == &ex_key_get_scheduler) return 4;
    if (key == &ex_key_get_delegation_scheduler) return 8;
    if (key == &ex_key_get_domain) return 16;  /* asked where a connect's late domain is decided */
    uintptr_t a = (uintptr_t)key >> 4;
    unsigned b = (unsigned)((a ^ a >> 2) & 63);
    return (uint64_t)1 << (b < 5 ? b + 32 : b);
}

static const ex_env_pair *as_pair(const ex_env_node *n) {
    return n && n->query == pair_query ? (const ex_env_pair *)(const void *)n : NULL;
}

/* Answers key at p, else goes up, or straight to p's base when no pair
 * up to it answers key; a node of another kind answers for itself.  A
 * loop, not a recursion: no stack per node. */
static bool pair_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
    const ex_env_pair *p = (const ex_env_pair *)(const void *)n;
    if (key == p->key) { *out = p->value; return true; }
    if (p->key2 && key == p->key2) { *out = p->value2; return true; }
    const uint64_t bit = key_bit(key);
    for (;;) {
        ex_env next = p->above & bit ? p->up : p->base;
        if ((next.flags & EX_ENV_FORWARD_ONLY) && !key->forwarding) return false;
        p = as_pair(next.node);
        if (!p) return next.node && next.node->query(next.node, key, out);
        if (key == p->key) { *out = p->value; return true; }
        if (p->key2 && key == p->key2) { *out = p->value2; return true; }
    }
}

/* get_domain as P2300 answers it: the nearest node that names a domain,
 * a pair naming it under ex_key_get_domain, or a pair naming a scheduler
 * that has one (SCHED-ENV answers get_domain with its scheduler's); a
 * node of another kind answers for the chain above it. */
const ex_domain *exi_env_domain(ex_env e, ex_scheduler *sch) {
    const uint64_t bits = key_bit(&ex_key_get_domain) | key_bit(&ex_key_get_scheduler);
    for (;;) {
        const ex_env_pair *p = as_pair(e.node);
        if (!p) {
            ex_value v;
            if (!e.node) return NULL;
            if (env_query(e, &ex_key_get_domain, &v) && v.type == EX_T_PTR && v.as.p) return v.as.p;
            if (!env_query(e, &ex_key_get_scheduler, &v) || v.type != EX_T_SCHED || !v.as.sched.vt) return NULL;
            if (v.as.sched.vt->domain) *sch = v.as.sched;
            return v.as.sched.vt->domain;
        }
        const ex_value *d = pair_own(p, &ex_key_get_domain);
        if (d && d->type == EX_T_PTR && d->as.p) return d->as.p;
        const ex_value *s = pair_own(p, &ex_key_get_scheduler);
        if (s && s->type == EX_T_SCHED && s->as.sched.vt && s->as.sched.vt->domain) {
            *sch = s->as.sched;
            return s->as.sched.vt->domain;
        }
        e = p->above & bits ? p->up : p->base;  /* both keys forward: the flags do not matter */
    }
}

/* Does a node with keys (own1, own2), reaching m through `flags`, answer
 * every key m answers, or not see it (FWD-ENV)?  Then it can skip m. */
static bool shadowed(const ex_env_pair *m, unsigned flags, const ex_key *own1, const ex_key *own2) {
    const bool fwd = (flags & EX_ENV_FORWARD_ONLY) != 0;
    const ex_key *k = m->key, *k2 = m->key2;
    return (!k || k == own1 || k == own2 || (fwd && !k->forwarding)) &&
           (!k2 || k2 == own1 || k2 == own2 || (fwd && !k2->forwarding));
}

/* Pairs skipped at init: plenty for a recursion of repeated adaptors
 * (their nodes already skip what they shadow), and a bound on the cost of
 * an init in any chain. */
enum { SKIP_MAX = 4 };

bool exi_env_is_sched_env(ex_env e, ex_scheduler sch) {
    const ex_env_pair *p = as_pair(e.node);
    const ex_value *a = pair_own(p, &ex_key_get_allocator);
    if (!a || a->type != EX_T_ALLOC || !a->as.alloc) return false;
    const uint64_t bits = key_bit(&ex_key_get_domain) | key_bit(&ex_key_get_scheduler);
    /* Both keys forward, so FWD-ENV on the way hides neither; the walk
     * is bounded (a long chain only loses the shortcut). */
    for (int i = 0; p && i < SKIP_MAX; i++) {
        if (pair_own(p, &ex_key_get_domain)) return false;
        const ex_value *s = pair_own(p, &ex_key_get_scheduler);
        if (s) return s->type == EX_T_SCHED && s->as.sched.vt == sch.vt && s->as.sched.self == sch.self;
        if (!(p->above & bits)) return false;  /* named by no pair above: a node of another kind may */
        p = as_pair(p->up.node);
    }
    return false;
}

/* The domain a pair names itself (cexec/domain.h, SCHED-ENV): under
 * ex_key_get_domain, or through a get_scheduler whose scheduler has one. */
static inline bool names_domain(const ex_env_pair *p) {
    const ex_value *s = pair_own(p, &ex_key_get_scheduler);
    if (s && s->type == EX_T_SCHED && s->as.sched.vt && s->as.sched.vt->domain) return true;
    const ex_value *d = pair_own(p, &ex_key_get_domain);
    return d && d->type == EX_T_PTR && d->as.p;
}

static void pair_link(ex_env_pair *p, ex_env parent) {
    ex_env up = parent;
    const ex_env_pair *m = as_pair(up.node);
    /* A pair whose domain p would hide without naming one of its own
     * (starts_on(rl) inside starts_on(pool)) stays reachable: get_domain
     * goes past p to it. */
    int p_names = -1;  /* not asked yet: only when m names one */
    for (int i = 0; m && i < SKIP_MAX && shadowed(m, up.flags, p->key, p->key2); i++) {
        if (names_domain(m)) {
            if (p_names < 0) p_names = names_domain(p);
            if (!p_names) break;
        }
        unsigned flags = up.flags;
        up = m->up;
        up.flags |= flags;
        m = as_pair(up.node);
    }
    p->up = up;
    if (m) {
        p->above = m->above | key_bit(m->key) | (m->key2 ? key_bit(m->key2) : 0);
        ex_env base = m->base;  /* (flags in a register: a read back of the copy stalls) */
        base.flags |= up.flags;
        p->base = base;
    } else {
        p->above = 0;
        p->base = up;
    }
}

void ex_env_pair_init2(ex_env_pair *p, const ex_key *key, ex_value value, const ex_key *key2, ex_value value2,
                       ex_env parent) {
    p->node.query = pair_query;
    p->key = key;
    p->value = value;
    p->key2 = key2;
    p->value2 = value2;
    pair_link(p, parent);
}

/* The allocator half of exi_env_pair_init_*_alloc, and the link. */
static inline void pair_init_alloc(ex_env_pair *p, const ex_key *key, const ex_allocator *alloc, ex_env parent) {
    p->node.query = pair_query;
    p->key = key;
    p->key2 = &ex_key_get_allocator;
    p->value2.type = EX_T_ALLOC;
    p->value2.as.alloc = alloc;
    pair_link(p, parent);
}

void exi_env_pair_init_sched_alloc(ex_env_pair *p, ex_scheduler sch, const ex_allocator *alloc, ex_env parent) {
    p->value.type = EX_T_SCHED;
    p->value.as.sched = sch;
    pair_init_alloc(p, &ex_key_get_scheduler, alloc, parent);
}

void exi_env_pair_init_token_alloc(ex_env_pair *p, ex_stop_token token, const ex_allocator *alloc, ex_env parent) {
    p->value.type = EX_T_TOKEN;
    p->value.as.token = token;
    pair_init_alloc(p, &ex_key_get_stop_token, alloc, parent);
}

void exi_env_pair_init_root_scheds(ex_env_pair *p, ex_scheduler sch) {
    p->node.query = pair_query;
    p->key = &ex_key_get_scheduler;
    p->value.type = EX_T_SCHED;
    p->value.as.sched = sch;
    p->key2 = &ex_key_get_delegation_scheduler;
    p->value2.type = EX_T_SCHED;
    p->value2.as.sched = sch;
    /* pair_link with no parent */
    p->up = ex_env_empty();
    p->above = 0;
    p->base = ex_env_empty();
}

void ex_env_pair_init(ex_env_pair *p, const ex_key *key, ex_value value, ex_env parent) {
    ex_env_pair_init2(p, key, value, NULL, ex_none(), parent);
}


