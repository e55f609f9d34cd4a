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
 * child's.
 *
 * Names in messages: every error these builders make (an invalid sender's
 * status, set_error(EX_EINVAL) at run time) begins with the stage, e.g.
 * "ex_then(parse_request): the input sender sends (int, str); the function
 * takes (int, int)", so that a pipeline of several thens says which one
 * failed.  The name comes from the _named forms' last argument, or, in C,
 * from the macros at the end of this header: ex_then(child, fn, ...) in C
 * is a macro that passes the spelling of its fn argument ("parse_request",
 * or the text of a cast or a macro given as fn).  A name is not copied: it
 * must live as long as the sender and every operation connected from it (a
 * string literal does); NULL is no name ("ex_then: ...").  Names longer
 * than 48 characters are cut ("..." after).  Naming costs nothing when
 * nothing fails: the text is made only for an error.  C++ has no macros
 * (a lambda with commas in its body would not survive one): ex_then there
 * is the function, which names no stage; call ex_then_named for names.
 * &ex_then and (ex_then)(...) reach the function in C too (unnamed).  As
 * macro arguments, the arguments must not hold a comma outside
 * parentheses: a compound literal such as (ex_sig){ 1, { EX_T_INT } }
 * needs parentheses of its own (EX_SIG has them). */
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
 * is checked when its values arrive, failing with EX_EINVAL.  In C this
 * name is a macro over ex_then_named that names the stage after fn's
 * spelling (see above). */
ex_sender *ex_then(ex_sender *child, ex_then_fn fn, void *ctx, ex_sig in, ex_sig out);

/* ex_then whose messages name the stage "ex_then(name)": name is static
 * text (a string literal) or NULL (see above). */
ex_sender *ex_then_named(ex_sender *child, ex_then_fn fn, void *ctx, ex_sig in, ex_sig out, const char *name);

/* set_error(e) -> set_value(fn(e)).  (C: a macro naming the stage.) */
ex_sender *ex_upon_error(ex_sender *child, ex_upon_error_fn fn, void *ctx, ex_sig out);

/* ex_upon_error whose messages name the stage "ex_upon_error(name)". */
ex_sender *ex_upon_error_named(ex_sender *child, ex_upon_error_fn fn, void *ctx, ex_sig out, const char *name);

/* set_stopped() -> set_value(fn()).  (C: a macro naming the stage.) */
ex_sender *ex_upon_stopped(ex_sender *child, ex_upon_stopped_fn fn, void *ctx, ex_sig out);

/* ex_upon_stopped whose messages name the stage "ex_upon_stopped(name)". */
ex_sender *ex_upon_stopped_named(ex_sender *child, ex_upon_stopped_fn fn, void *ctx, ex_sig out, const char *name);

#ifdef __cplusplus
}
#endif

/* In C, the plain names are macros over the _named forms that name the
 * stage after the fn argument's spelling (C++: none, see above). */
#ifndef __cplusplus
#define ex_then(child, fn, ctx, in, out) ex_then_named((child), (fn), (ctx), (in), (out), #fn)
#define ex_upon_error(child, fn, ctx, out) ex_upon_error_named((child), (fn), (ctx), (out), #fn)
#define ex_upon_stopped(child, fn, ctx, out) ex_upon_stopped_named((child), (fn), (ctx), (out), #fn)
#endif
#endif
