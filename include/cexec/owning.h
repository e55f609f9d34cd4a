/* SPDX-License-Identifier: MIT */
/* cexec/owning.h - a sender that owns the context of its callbacks.
 *
 * The callbacks of ex_then, ex_let_value, ex_bulk, ex_task_create, ...
 * take a `void *ctx` that stays yours.  When the context is made for the
 * sender alone (a heap block, a closure), wrap the sender with
 * ex_owning_ctx so that the context is destroyed exactly when nothing can
 * call the callbacks any more; here the request's shard arguments, from
 * malloc (examples/service.c):
 *
 *     r = ex_sync_wait(ex_owning_ctx(request(sch, owned), owned, free));
 *
 * Threads: destroy runs on the thread that drops the last hold (a release
 * of the sender, or the destroy of the last operation connected from
 * it). */
#ifndef CEXEC_OWNING_H
#define CEXEC_OWNING_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Returns a sender that behaves exactly as s (values, errors, stop,
 * completion schedulers) and owns ctx: destroy(ctx) runs once, after the
 * returned sender's last reference is released and every operation
 * connected from it has been destroyed.  Takes s.  If s is NULL or
 * invalid, or memory runs out, destroy(ctx) runs at once and the result
 * is an invalid sender with the error (EX_EINVAL, s's own, EX_ENOMEM): ctx
 * never leaks.  destroy NULL: EX_EINVAL (and nothing is destroyed). */
ex_sender *ex_owning_ctx(ex_sender *s, void *ctx, void (*destroy)(void *ctx));

#ifdef __cplusplus
}
#endif

#endif
