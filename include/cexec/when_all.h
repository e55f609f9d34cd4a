/* SPDX-License-Identifier: MIT */
/* cexec/when_all.h - when_all and when_all_with_variant ([exec.when.all]),
 * and ex_when_all_collect_n, a fan-out over a run-time number of children.
 *
 * Starts every child and completes when all have completed: with the
 * children's values concatenated in argument order, or with the first
 * error (which requests stop on the others), or stopped.  Children see a
 * stop token of the when_all's own in-place stop source, linked to the
 * receiver's (below another when_all or task fork, linked only once
 * something registers a callback on the children's token; meanwhile
 * ex_stop_token_stop_requested reads the chain above: a request that has
 * returned is seen, and once it says stopped it keeps saying so).  If stop
 * was requested before start, no child is started and
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
 * most EX_MAX_ARITY (8) fit (child 2 takes the count from 6 to 9;
 * ex_when_all_collect_n takes any number)". */
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

/* A fan-out over a run-time number of children (a cexec extension:
 * stdexec's when_all is fixed-arity at compile time, and ex_when_all_n
 * stops at EX_MAX_ARITY values in all).  Takes ownership of the n
 * children.  Runs them as ex_when_all does: the same stop token for the
 * children, the first error wins and requests stop on the others, stopped
 * when a child completed stopped and none failed (or when stop was
 * requested before start: then no child starts), completion on the agent
 * of the last child to complete, the same fork-join on a pool.
 *
 * Completes with ONE value, an EX_T_TUPLE of n elements in the array's
 * order; element i is an EX_T_TUPLE of child i's own values (0 to
 * EX_MAX_ARITY of them), whose index is the value signature they matched
 * when the child has several (as ex_into_variant tells it), else 0.  So
 * children may differ in arity, send no value, send tuples themselves or
 * have several value signatures, and there is no limit on the total.
 * Summing the answers of n requests (examples/fanout.c):
 *
 *     ex_result r = ex_sync_wait(ex_when_all_collect_n(requests, n));
 *     if (r.disposition == EX_DISP_VALUE) {
 *         const ex_tuple *all = r.values[0].as.tuple;
 *         for (size_t i = 0; i < n; i++) *sum += all->v[i].as.tuple->v[0].as.i;
 *     }
 *
 * The tuples live in the operation state and are lent for the call, as
 * every value is: a receiver that keeps them deep-copies them (ex_result
 * does).  Values a child sends that hold tuples are deep-copied when it
 * completes, with the environment's allocator (EX_ENOMEM on failure,
 * which then counts as the child's error); nothing else allocates while
 * it runs.  The operation state grows with n, laid out when the sender is
 * built (about 90 bytes a child, plus 24 for each value it may send, plus
 * its own operation): ex_sync_wait and ex_connect_alloc allocate it.
 *
 * Signatures: set_value(tuple), unless a child never sends a value;
 * set_error when a child may fail, may send a tuple or has signatures known
 * only at run time; set_stopped.  n == 0 is a fan-out over nothing: the
 * value is an empty tuple (children may then be NULL).  A NULL array with
 * n > 0, a NULL or invalid child, or n >= UINT32_MAX give an invalid sender
 * (EX_EINVAL, or the child's error), every child released; a message names
 * the child by its index: "ex_when_all_collect: child 3 is a NULL input
 * sender". */
ex_sender *ex_when_all_collect_n(ex_sender *const *children, size_t n);

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
