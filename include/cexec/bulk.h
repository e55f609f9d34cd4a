/* SPDX-License-Identifier: MIT */
/* cexec/bulk.h - bulk, bulk_chunked and bulk_unchunked ([exec.bulk], with
 * P3481's execution policies).
 *
 * When the child completes with values v..., f runs for every index in
 * [0, shape) with the same values (borrowed), then the bulk sender completes
 * with those values.  The first error returned by f becomes the result and
 * stops the indices not yet started; later ones are released (an error f
 * returns is handed over, cexec/error.h).
 *
 * The policy (types.h: EX_SEQ, EX_PAR, EX_PAR_UNSEQ, EX_UNSEQ) comes first,
 * as in C++26, and says what f permits; it is not optional, because only
 * the caller knows whether f may run on two threads at once.  EX_PAR (or
 * EX_PAR_UNSEQ) for a body that is (each index writes its own element),
 * EX_SEQ for one that is not.  Another value gives an invalid sender
 * (EX_EINVAL, "ex_bulk(name): invalid execution policy").
 *
 * Where it runs: if the domain (cexec/domain.h) of the child's value
 * completion scheduler replaces bulk when the sender is built, or else the
 * domain of the receiver environment's scheduler does when it is connected
 * (an ex_pool's does, and ex_parallel_scheduler()'s on any backend), the
 * resource runs it as the policy allows (ex_bulk_run_on, below).  On a pool, EX_PAR and
 * EX_PAR_UNSEQ cut the index space into chunks that its agents take
 * dynamically, and the sender completes on the agent that finished last;
 * EX_SEQ and EX_UNSEQ run the same chunks one after another, in index
 * order, on the agent that started the bulk (where the child completed),
 * with no helper queued and no worker woken, and complete there.  Either
 * way a stop request seen between chunks skips the rest and completes with
 * set_stopped.  Without such a scheduler (inline, run_loop, a strand, ...)
 * the loop is the sequential one of the wording, on the agent where the
 * child completed, whatever the policy: every policy allows that.  A
 * resource's run stores the values in the operation (tuple contents with
 * the environment's allocator: EX_ENOMEM on failure).
 *
 * bulk_unchunked (P3481) calls f(i) once per index, each index an agent of
 * its own: no chunk of several indices is ever formed on the function's
 * behalf.  On a pool with EX_PAR each index is claimed on its own by
 * whichever thread is free (the pool still queues at most one helper item
 * per worker, not one per index: scheduling is batched, agents are not),
 * and a stop request is seen before each index; with EX_SEQ the indices
 * run in order on one thread, stop seen before each.  The agents have the
 * pool's forward progress, parallel: an index that has started runs to its
 * end on its thread, one not started may wait until a thread is free.  A
 * scheduler that promises concurrent forward progress but does not
 * customise bulk would run the indices one after another, breaking that
 * promise; the wording makes it ill-formed, and connect refuses it
 * (EX_EINVAL, "ex_bulk_unchunked(name): the scheduler promises concurrent
 * forward progress but does not customise bulk").
 *
 * Sizes: every shape and grain is valid, up to SIZE_MAX, on every
 * resource, and means what it says: f runs for each of the `shape`
 * indices, however long that takes (SIZE_MAX indices would take centuries),
 * and nothing is refused or cut short.  To bound such a loop, return an
 * error from f or request stop (the pool stops between chunks, the
 * sequential loop only on an error).  A grain larger than shape is one
 * chunk; ex_bulk_unchunked's grain is 1.  On the pool the chunk count is
 * ceil(shape / grain), the default grain ceil(shape / (8 * workers)), both
 * computed without overflow, and no chunk range wraps: the last one ends
 * at shape.
 *
 * Wake-ups on the pool, EX_PAR and EX_PAR_UNSEQ (the others wake nobody):
 * the agent that starts the bulk (a worker, or a thread waiting in
 * ex_sync_wait as a lent caller) runs chunks at once.
 * Its helper items go to its own deque, where awake workers take them;
 * with the default grain and fewer than 65536 indices, parked workers are
 * woken only once the chunks it has run show that the rest is worth a
 * wake-up (a few microseconds), as many as there are chunks left: a small
 * bulk costs no wake-up at all, but one whose first index is slow runs that
 * index alone while every worker is parked.  A bulk of at most one index
 * per worker started on an agent of the pool queues no helper at all until
 * its indices show that sharing pays (about a microsecond of work left).
 * An explicit grain (so every ex_bulk_unchunked), or a larger shape, wakes
 * parked workers (up to one per chunk beyond the caller's) at the start.
 *
 * Forward progress between indices is parallel at best, never concurrent,
 * for every builder here and every policy: indices may run one after
 * another on one thread, so an index must never wait for another index to
 * run (a barrier between indices may wait for ever).
 *
 * Names in messages: as for ex_then (then.h), every error these builders
 * make begins with the stage, e.g. "ex_bulk(scale_rows): NULL input
 * sender", "ex_bulk_chunked(fill): the function failed" (an error f
 * returned without a message) or "ex_bulk(scale_rows): out of memory
 * copying tuple values".  The _named forms take the name (static text, not
 * copied: it must outlive the sender and its operations; NULL: none; cut
 * at 48 characters); in C the plain names are macros that pass the fn
 * argument's spelling.  C++ has no macros: call the _named forms for
 * names.  f takes whatever values the child sends (its values are given
 * as they are), so no signature of the child can be refused. */
#ifndef CEXEC_BULK_H
#define CEXEC_BULK_H

#include <cexec/types.h>
#include <cexec/domain.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One index.  Return ex_ok(), or an error to fail the bulk. */
typedef ex_error (*ex_bulk_fn)(void *ctx, size_t i, const ex_value *v, size_t n);

/* A chunk [begin, end): one call per chunk, for bodies that want to keep
 * their inner loop tight (vectorised, no call per index). */
typedef ex_error (*ex_bulk_chunk_fn)(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n);

/* bulk(child, policy, shape, fn): fn(ctx, i, values...) for every i in
 * [0, shape) once child sent its values, then those values (see above for
 * where and how it runs).  Takes child; NULL child or fn, or an invalid
 * policy: an invalid sender. */
ex_sender *ex_bulk(ex_sender *child, ex_execution_policy policy, size_t shape, ex_bulk_fn fn, void *ctx);

/* ex_bulk whose messages name the stage "ex_bulk(name)". */
ex_sender *ex_bulk_named(ex_sender *child, ex_execution_policy policy, size_t shape, ex_bulk_fn fn, void *ctx,
                         const char *name);

/* With a chunk size (grain, >= 1) for a resource's run; 0 lets the
 * resource choose (about 8 chunks per worker on a pool). */
ex_sender *ex_bulk_grain(ex_sender *child, ex_execution_policy policy, size_t shape, size_t grain, ex_bulk_fn fn,
                         void *ctx);

/* ex_bulk_grain whose messages name the stage "ex_bulk_grain(name)". */
ex_sender *ex_bulk_grain_named(ex_sender *child, ex_execution_policy policy, size_t shape, size_t grain,
                               ex_bulk_fn fn, void *ctx, const char *name);

/* bulk_chunked: fn(ctx, begin, end, values...) over chunks that cover
 * [0, shape) once, grain as for ex_bulk_grain (0: the resource's choice;
 * the sequential loop makes one chunk).  With EX_SEQ or EX_UNSEQ the
 * chunks come in order, one at a time. */
ex_sender *ex_bulk_chunked(ex_sender *child, ex_execution_policy policy, size_t shape, size_t grain,
                           ex_bulk_chunk_fn fn, void *ctx);

/* ex_bulk_chunked whose messages name the stage "ex_bulk_chunked(name)". */
ex_sender *ex_bulk_chunked_named(ex_sender *child, ex_execution_policy policy, size_t shape, size_t grain,
                                 ex_bulk_chunk_fn fn, void *ctx, const char *name);

/* bulk_unchunked (P3481): fn(ctx, i, values...) for every i in [0, shape),
 * each index its own agent (see above): never batched into a chunk.  The
 * rest as ex_bulk. */
ex_sender *ex_bulk_unchunked(ex_sender *child, ex_execution_policy policy, size_t shape, ex_bulk_fn fn, void *ctx);

/* ex_bulk_unchunked whose messages name the stage
 * "ex_bulk_unchunked(name)". */
ex_sender *ex_bulk_unchunked_named(ex_sender *child, ex_execution_policy policy, size_t shape, ex_bulk_fn fn,
                                   void *ctx, const char *name);

/* What runs a bulk job on a resource (the contract of ex_bulk_job,
 * scheduler.h): self is the resource. */
struct ex_bulk_job;
typedef void (*ex_bulk_run_fn)(void *self, struct ex_bulk_job *job);

/* For a domain's transform_sender (cexec/domain.h), given a sender of
 * ex_bulk, ex_bulk_grain, ex_bulk_chunked or ex_bulk_unchunked (tags
 * ex_tag_bulk, ex_tag_bulk_chunked, ex_tag_bulk_unchunked): a copy of it
 * (holding its own reference to the child) that, when the child's values
 * arrive, hands its job to run(self, job) in place of the sequential loop.
 * run gets every policy; EX_SEQ and EX_UNSEQ jobs must run on the calling
 * agent (ex_bulk_job says how each binds it).  This is how the pool and
 * the parallel scheduler run bulk.  Errors, as an invalid sender: EX_EINVAL
 * (NULL s or run, or s not of that family), EX_ENOMEM. */
ex_sender *ex_bulk_run_on(const ex_sender *s, ex_bulk_run_fn run, void *self);

/* A ready-made domain for a resource that runs bulk itself (the pool's and
 * the parallel scheduler's are two), named in the resource's vtable as
 * .domain = &wrapping_domain.domain after
 *
 *   static const ex_bulk_domain wrapping_domain = EX_BULK_DOMAIN("wrapping_bulk", NULL, wrapping_bulk);
 *
 * It replaces every sender of the bulk family with ex_bulk_run_on(s, run,
 * sch.self) when sch's vtable is vt (NULL vt: any scheduler), where sch is
 * the scheduler the bulk will run on: its input's completion scheduler
 * when built, its environment's get_scheduler when connected (so a bulk
 * under starts_on(inline) inside pool work runs inline, not on the pool).
 * Otherwise it replaces nothing. */
typedef struct ex_bulk_domain {
    ex_domain domain;
    const struct ex_scheduler_vtable *vt;
    ex_bulk_run_fn run;
} ex_bulk_domain;

/* ex_bulk_domain's tags, for EX_BULK_DOMAIN: ex_tag_bulk,
 * ex_tag_bulk_chunked, ex_tag_bulk_unchunked. */
extern const ex_tag *const ex_bulk_domain_tags[];

/* ex_bulk_domain's transform_sender, for EX_BULK_DOMAIN: d is the domain
 * member of an ex_bulk_domain; returns ex_bulk_run_on(s, run, self) for
 * the resource of the scheduler the bulk runs on (sch when built, env's
 * get_scheduler when connected), or NULL when that scheduler is invalid
 * or not of the domain's vt. */
ex_sender *ex_bulk_domain_transform(const ex_domain *d, ex_scheduler sch, ex_sender *s, const ex_env *env);
#define EX_BULK_DOMAIN(name, vt, run) { { (name), ex_bulk_domain_tags, ex_bulk_domain_transform, NULL, NULL }, (vt), (run) }

#ifdef __cplusplus
}
#endif

/* In C, the plain names are macros over the _named forms that name the
 * stage after the fn argument's spelling (C++: none, see above). */
#ifndef __cplusplus
#define ex_bulk(child, policy, shape, fn, ctx) ex_bulk_named((child), (policy), (shape), (fn), (ctx), #fn)
#define ex_bulk_grain(child, policy, shape, grain, fn, ctx) \
    ex_bulk_grain_named((child), (policy), (shape), (grain), (fn), (ctx), #fn)
#define ex_bulk_chunked(child, policy, shape, grain, fn, ctx) \
    ex_bulk_chunked_named((child), (policy), (shape), (grain), (fn), (ctx), #fn)
#define ex_bulk_unchunked(child, policy, shape, fn, ctx) \
    ex_bulk_unchunked_named((child), (policy), (shape), (fn), (ctx), #fn)
#endif
#endif
