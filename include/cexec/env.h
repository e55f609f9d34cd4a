/* SPDX-License-Identifier: MIT */
/* cexec/env.h - environments and queries ([exec.queries], [exec.fwd.env]).
 *
 * An environment answers queries by key.  Receivers expose their
 * environment through env(); senders expose attributes (completion
 * schedulers) the same way.  Environments are chains of nodes embedded in
 * operation states and senders: building one never allocates. */
#ifndef CEXEC_ENV_H
#define CEXEC_ENV_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Standard keys.  All of them forward except the completion-scheduler keys,
 * which are sender attributes and forward from a single child's attributes
 * (P2300 marks them forwarding). */
extern const ex_key ex_key_get_scheduler;             /* EX_T_SCHED */
extern const ex_key ex_key_get_delegation_scheduler;  /* EX_T_SCHED */
extern const ex_key ex_key_get_stop_token;            /* EX_T_TOKEN */
extern const ex_key ex_key_get_allocator;             /* EX_T_ALLOC */
extern const ex_key ex_key_completion_scheduler_value;    /* EX_T_SCHED */
extern const ex_key ex_key_completion_scheduler_error;    /* EX_T_SCHED */
extern const ex_key ex_key_completion_scheduler_stopped;  /* EX_T_SCHED */

/* The empty environment. */
static inline ex_env ex_env_empty(void) { ex_env e = { 0, 0 }; return e; }

/* FWD-ENV(e): the same chain, answering forwarding keys only. */
static inline ex_env ex_env_forward(ex_env e) { e.flags |= EX_ENV_FORWARD_ONLY; return e; }

/* Asks e for key.  Returns true and sets *out when answered. */
bool ex_env_query(ex_env e, const ex_key *key, ex_value *out);

/* Typed helpers with the defaults P2300 gives. */
bool ex_get_scheduler(ex_env e, ex_scheduler *out);
bool ex_get_delegation_scheduler(ex_env e, ex_scheduler *out);
ex_stop_token ex_get_stop_token(ex_env e);                   /* never-stop if absent */
/* The environment's allocator; else the default allocator of the
 * environment's scheduler (an ex_pool's configured one); else the process
 * default (ex_default_allocator).
 * One shortcut: starts_on, when_all and a let body run on its child's
 * completion scheduler resolve the allocator once, when connected, and
 * answer that to everything below them; so work under a further change of
 * scheduler, with no allocator written, allocates from the outer one
 * (e.g. the pool's arenas under starts_on(inline) inside pool work).  Write
 * the allocator (ex_write_env) where that matters. */
const struct ex_allocator *ex_get_allocator(ex_env e);

/* Environment of a receiver (empty when its vtable has no env). */
static inline ex_env ex_receiver_env(ex_receiver r) {
    if (r.vt->env) return r.vt->env(r.self);
    return ex_env_empty();
}

/* A one- or two-key node chained to a parent:
 * JOIN-ENV(MAKE-ENV(key, value), parent).  Embed it where it must live (an
 * operation state), init it, and hand out ex_env_of_pair(node); the parent
 * chain must outlive it.  A second key (e.g. get_scheduler with
 * get_delegation_scheduler) comes with ex_env_pair_init2, or by setting key2
 * and value2 after ex_env_pair_init and before the environment is handed
 * out.  key and value are not changed after init.
 *
 * Lookups do not walk the whole chain: init skips the pairs above whose
 * keys the new node answers itself (it shadows them) or a FWD-ENV filter
 * hides, and records which keys the pairs above answer (a 64-bit mask: a
 * bit for each standard key, the other keys share the rest by address)
 * and the first node above that is not a pair.  A query for a key no pair
 * above answers goes there in one step, and a recursion that adds the
 * same node at every level (let_value's scheduler node, starts_on,
 * when_all) keeps a chain as short as one level's.  What still takes a
 * step per level: a key answered only far up, asked below levels that
 * each add pairs with different keys (when_all and let_value nodes in
 * turn), or a user key sharing a mask bit with a key of the levels.
 * Nodes of other kinds answer in turn (a task's).  Building a pair takes
 * a few steps and never allocates. */
typedef struct ex_env_pair {
    ex_env_node node;
    const ex_key *key;
    ex_value value;
    const ex_key *key2;
    ex_value value2;
    /* private, set by init: the parent past the pairs this one shadows,
     * the keys of the pairs from there to base, and the first node above
     * that is not a pair (flags: FWD-ENV filters on the way) */
    ex_env up;
    uint64_t above;
    ex_env base;
} ex_env_pair;

/* Initialises p to answer key with value, and everything else as parent
 * does (value is stored as given: a tuple is not copied). */
void ex_env_pair_init(ex_env_pair *p, const ex_key *key, ex_value value, ex_env parent);
/* The same with two keys. */
void ex_env_pair_init2(ex_env_pair *p, const ex_key *key, ex_value value, const ex_key *key2, ex_value value2,
                       ex_env parent);
/* The environment p answers (valid while p and its parent chain are). */
static inline ex_env ex_env_of_pair(const ex_env_pair *p) { ex_env e = { &p->node, 0 }; return e; }

#ifdef __cplusplus
}
#endif
#endif
