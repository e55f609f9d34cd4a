/* SPDX-License-Identifier: MIT */
/* cexec/when_all.h - when_all and when_all_with_variant ([exec.when.all]).
 *
 * Starts every child and completes when all have completed: with the
 * children's values concatenated in argument order, or with the first
 * error (which requests stop on the others), or stopped.  Children see a
 * stop token of the when_all's own in-place stop source, linked to the
 * receiver's.  If stop was requested before start, no child is started and
 * the result is set_stopped.  The parent completes on the agent of the last
 * child to complete.  Nothing allocates unless a child's values hold tuples
 * (copied with the environment's allocator, EX_ENOMEM on failure).  No
 * completion scheduler.
 *
 * Fork-join on a pool: started on an agent of a pool, a when_all runs a
 * child that hops onto that pool (ex_starts_on(pool, x)) on that agent
 * itself, within its start, once the other children are started, unless
 * another agent took it first (the item is the newest of the agent's
 * deque, which it would run next anyway).  While the agent's deque
 * already holds work for thieves, such a child is not even queued (held
 * back, as the task fork does); it is queued as soon as the agent waits
 * for something (an ex_sync_wait on it helps run the pool's items), since
 * a sibling may be waiting for it.  Code that follows the when_all's start
 * on that agent runs after such a child ran. */
#ifndef CEXEC_WHEN_ALL_H
#define CEXEC_WHEN_ALL_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Takes ownership of the n children (n >= 1).  Each child must have at most
 * one value signature, and the total number of values at most EX_MAX_ARITY;
 * otherwise (or with n == 0, a NULL child or a NULL array) an invalid sender
 * (EX_EINVAL).  Children whose signatures are only known at run time are
 * checked when they complete.  Messages name the child by its index in
 * the array, from 0, and what it sends: "ex_when_all: child 2 sends (int,
 * int) and (double); a when_all child may send at most one value
 * signature ...", "ex_when_all: the children send 10 values in all; at
 * most EX_MAX_ARITY (8) fit (child 2 takes the count from 6 to 9)". */
ex_sender *ex_when_all_n(ex_sender *const *children, size_t n);

/* ex_when_all(a, b, ...) */
#ifndef __cplusplus
#define ex_when_all(...) \
    ex_when_all_n((ex_sender *const[]){ __VA_ARGS__ }, sizeof((ex_sender *[]){ __VA_ARGS__ }) / sizeof(ex_sender *))
#else  /* no compound literals in C++ */
#define ex_when_all(...) exi_cxx_when_all({ __VA_ARGS__ })
#endif

/* when_all(into_variant(children)...): each child contributes one EX_T_TUPLE
 * value; children may have several value signatures. */
ex_sender *ex_when_all_with_variant_n(ex_sender *const *children, size_t n);

/* ex_when_all_with_variant(a, b, ...) */
#ifndef __cplusplus
#define ex_when_all_with_variant(...)                                   \
    ex_when_all_with_variant_n((ex_sender *const[]){ __VA_ARGS__ },     \
                               sizeof((ex_sender *[]){ __VA_ARGS__ }) / sizeof(ex_sender *))
#else
#define ex_when_all_with_variant(...) exi_cxx_when_all_with_variant({ __VA_ARGS__ })
#endif

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
#include <initializer_list>
static inline ex_sender *exi_cxx_when_all(std::initializer_list<ex_sender *> c) { return ex_when_all_n(c.begin(), c.size()); }
static inline ex_sender *exi_cxx_when_all_with_variant(std::initializer_list<ex_sender *> c) {
    return ex_when_all_with_variant_n(c.begin(), c.size());
}
#endif
#endif
