/* SPDX-License-Identifier: MIT */
/* exi_env.h - environment queries for nodes that change scheduler.
 * Internal. */
#ifndef EXI_ENV_H
#define EXI_ENV_H

#include <cexec/cexec.h>

/* The allocator an environment gives work that runs on `sch` (NULL: the
 * environment's own scheduler): its allocator key, else sch's default, else
 * the process default.  For nodes that cache the answer for a child whose
 * scheduler they change. */
const ex_allocator *exi_allocator_under(ex_env e, const ex_scheduler *sch);

/* ex_env_pair_init2(p, get_scheduler, sched(sch), get_allocator,
 * alloc(alloc), parent) and the same with get_stop_token(token): the
 * nodes starts_on and when_all give their children.  The values are
 * written field by field from registers: an ex_value built on the
 * caller's stack (a 4-byte type next to 8-byte words) and read back
 * whole to pass it stalls on store forwarding, at every connect. */
/* get_domain of e (cexec/domain.h, ex_get_domain): the nearest domain
 * named, by ex_key_get_domain or by a scheduler that has one; NULL for
 * none.  *sch gets that scheduler (left alone when named by key). */
const struct ex_domain *exi_env_domain(ex_env e, ex_scheduler *sch);

void exi_env_pair_init_sched_alloc(ex_env_pair *p, ex_scheduler sch, const ex_allocator *alloc, ex_env parent);

/* Whether e's first pair gives the allocator and e, through pairs alone,
 * answers get_scheduler with sch itself and get_domain with sch's domain
 * (no pair names one by key before it).  Then FWD-ENV(e) answers every key
 * as JOIN-ENV(SCHED-ENV(sch), FWD-ENV(e)) with e's allocator would:
 * starts_on gives its child e, forwarded, instead of a pair of its own (a
 * fork-join's starts_on(pool, x) inside work already on that pool). */
bool exi_env_is_sched_env(ex_env e, ex_scheduler sch);
void exi_env_pair_init_token_alloc(ex_env_pair *p, ex_stop_token token, const ex_allocator *alloc, ex_env parent);

/* ex_env_pair_init2(p, get_scheduler, sched(sch), get_delegation_scheduler,
 * sched(sch), ex_env_empty()), written field by field: sync_wait's node,
 * built at every wait. */
void exi_env_pair_init_root_scheds(ex_env_pair *p, ex_scheduler sch);

#endif
