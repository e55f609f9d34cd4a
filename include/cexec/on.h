/* SPDX-License-Identifier: MIT */
/* cexec/on.h - moving work between execution resources:
 * starts_on ([exec.starts.on]), continues_on ([exec.continues.on]),
 * schedule_from ([exec.schedule.from]) and both forms of on ([exec.on]).
 *
 * None of these allocate while running, except to copy the tuples of a
 * result carried across the hop, and ex_on when the scheduler it returns
 * to needs more than EX_SCHEDULE_OP_INLINE bytes for its schedule
 * operation (both from the environment's allocator, EX_ENOMEM on failure).
 * A failed scheduling completes with its error on an unspecified agent.
 *
 * Completion signatures of continues_on, schedule_from and affine_on
 * ([exec.schedule.from]): the child's, plus the scheduler's schedule_flags,
 * plus set_error only when keeping the child's values can fail: a value
 * signature holding a tuple or a datum of any type (EX_T_ANY; copying a
 * tuple allocates), a variadic one or a dynamic child.  So
 * ex_continues_on(ex_just(ex_int(1)), ex_inline_scheduler()) completes
 * only with set_value(int).  ex_on, whose scheduler to return to is known
 * only at connect, adds set_error and set_stopped. */
#ifndef CEXEC_ON_H
#define CEXEC_ON_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts child on sch.  The child's environment answers get_scheduler with
 * sch.  Its attributes are the child's (it completes where the child does). */
ex_sender *ex_starts_on(ex_scheduler sch, ex_sender *child);

/* Runs child where it is started, then completes on sch with the child's
 * result (stored in the operation state).  Value and stopped completion
 * scheduler: sch. */
ex_sender *ex_continues_on(ex_sender *child, ex_scheduler sch);

/* [exec.affine.on]: like continues_on, but the hop is skipped when the
 * child completes on a thread that already runs on sch (through sch's
 * dispatch: a pool worker of that pool, the thread inside a run loop, a
 * strand's current item); schedulers without dispatch always hop.  The
 * result is stored in the operation state either way.  Used by tasks to
 * come back to their scheduler after each await.  A dropped hop (a pool
 * being destroyed) completes with set_stopped. */
ex_sender *ex_affine_on(ex_sender *child, ex_scheduler sch);

/* The destination-side form of continues_on (P2300 §5.7); same behaviour. */
ex_sender *ex_schedule_from(ex_scheduler sch, ex_sender *child);

/* Form 1: run child on sch, then return to the scheduler of the receiver's
 * environment.  Connecting to a receiver whose environment has no
 * get_scheduler fails with EX_EINVAL. */
ex_sender *ex_on(ex_scheduler sch, ex_sender *child);

/* A sender adaptor closure: takes ownership of `s`, returns a new sender. */
typedef ex_sender *(*ex_closure_fn)(void *ctx, ex_sender *s);

/* Form 2: child runs where it is started; its result is moved to sch where
 * closure(ctx, ...) is applied, then the result returns to the original
 * scheduler: child's value completion scheduler if it has one, else the
 * receiver environment's scheduler (EX_EINVAL when neither exists).  The
 * closure is applied once, when this sender is built. */
ex_sender *ex_on_closure(ex_sender *child, ex_scheduler sch, ex_closure_fn closure, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
