/* SPDX-License-Identifier: MIT */
/* cexec/then.h - then, upon_error, upon_stopped ([exec.then]).
 *
 * The callback runs on the agent where the child completes, with the
 * child's datums borrowed for the call.  It writes `out.arity` results into
 * out[] and returns ex_ok(), or returns an error, which becomes set_error.
 * Results that do not match `out`, one left unset, or one written past
 * out.arity are set_error(EX_EINVAL).
 * Errors follow cexec/error.h: an error the callback returns is handed
 * over (return ex_error_format(...) leaks nothing); upon_error's callback
 * is given the child's error, and returns it (passing it on) or releases
 * it.
 * Other channels pass through unchanged; the completion schedulers are the
 * child's. */
#ifndef CEXEC_THEN_H
#define CEXEC_THEN_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef ex_error (*ex_then_fn)(void *ctx, const ex_value *in, size_t n, ex_value *out);
typedef ex_error (*ex_upon_error_fn)(void *ctx, ex_error err, ex_value *out);
typedef ex_error (*ex_upon_stopped_fn)(void *ctx, ex_value *out);

/* set_value(in...) -> set_value(fn(in...)).  `in` is the signature fn
 * accepts (EX_SIG_VARIADIC: any, fn checks), `out` the one it produces.
 * Every value signature of the child must match `in`, else an invalid
 * sender (EX_EINVAL).  A child whose signatures are only known at run time
 * is checked when its values arrive, failing with EX_EINVAL. */
ex_sender *ex_then(ex_sender *child, ex_then_fn fn, void *ctx, ex_sig in, ex_sig out);

/* set_error(e) -> set_value(fn(e)). */
ex_sender *ex_upon_error(ex_sender *child, ex_upon_error_fn fn, void *ctx, ex_sig out);

/* set_stopped() -> set_value(fn()). */
ex_sender *ex_upon_stopped(ex_sender *child, ex_upon_stopped_fn fn, void *ctx, ex_sig out);

#ifdef __cplusplus
}
#endif
#endif
