/* cexec/let.h - let_value, let_error, let_stopped ([exec.let]).
 *
 * When the child completes on the matching channel, its datums are copied
 * into storage that lives until the sender returned by fn completes (so fn
 * may hand pointers to them to that sender), fn is called, and the returned
 * sender is connected and started in its place.  That storage and the new
 * operation come from the environment's allocator (EX_ENOMEM on failure).
 * The new sender's receiver environment answers get_scheduler with the
 * child's completion scheduler for that channel, when it has one.
 *
 * fn returns a new sender reference (ownership passes to cexec); NULL
 * completes with EX_EINVAL.  The result's value signatures are known only
 * at run time (EX_SIGS_DYNAMIC) and are checked when the new sender is
 * connected. */
#ifndef CEXEC_LET_H
#define CEXEC_LET_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef ex_sender *(*ex_let_value_fn)(void *ctx, const ex_value *in, size_t n);
typedef ex_sender *(*ex_let_error_fn)(void *ctx, ex_error err);
typedef ex_sender *(*ex_let_stopped_fn)(void *ctx);

/* `in` as for ex_then: the signature fn accepts (EX_SIG_VARIADIC: any). */
ex_sender *ex_let_value(ex_sender *child, ex_let_value_fn fn, void *ctx, ex_sig in);
ex_sender *ex_let_error(ex_sender *child, ex_let_error_fn fn, void *ctx);
ex_sender *ex_let_stopped(ex_sender *child, ex_let_stopped_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif
#endif
