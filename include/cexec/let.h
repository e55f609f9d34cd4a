/* SPDX-License-Identifier: MIT */
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
 * fn returns a new sender reference (ownership passes to cexec; with
 * ex_let_value_borrowed it lends one); NULL completes with EX_EINVAL.  The result's value signatures are known only
 * at run time (EX_SIGS_DYNAMIC) and are checked when the new sender is
 * connected.
 *
 * let_error's fn is given the child's error (cexec/error.h): it passes it
 * on (`return ex_just_error(err)`) or releases it.
 *
 * Recursion: fn may return a sender holding the next let_value, to any
 * depth.  A level costs the same however deep it is: the let reads its
 * receiver's environment once, at connect, and environment lookups skip
 * the levels' nodes.  Each level's operation lives until the levels below
 * it complete; then the completions go up one level after the other, in
 * a loop when fn returns the let itself, else through the adaptors around
 * it (calls that optimised builds mostly turn into jumps; -O0 and ASan
 * builds nest them).  Levels that all complete inline (just, the inline
 * scheduler) start each level inside the previous one's start: like a
 * recursive function, the recursion then uses stack per level (about
 * 0.2 KiB optimised, 0.8 KiB under ASan).  A schedule on a run loop or a
 * pool in each level keeps the start flat (sender.h, "Depth of sender
 * chains").
 *
 * Names in messages: as for ex_then (then.h), every error these builders
 * make begins with the stage, e.g. "ex_let_value(make_reply): the input
 * sender sends (str); the function takes (int)" or "ex_let_error(retry):
 * the function returned NULL".  The _named forms take the name (static
 * text, not copied: it must outlive the sender and its operations; NULL:
 * none; cut at 48 characters); in C the plain names are macros that pass
 * the fn argument's spelling.  C++ has no macros: call the _named forms
 * for names. */
#ifndef CEXEC_LET_H
#define CEXEC_LET_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef ex_sender *(*ex_let_value_fn)(void *ctx, const ex_value *in, size_t n);
typedef ex_sender *(*ex_let_error_fn)(void *ctx, ex_error err);
typedef ex_sender *(*ex_let_stopped_fn)(void *ctx);

/* `in` as for ex_then: the signature fn accepts (EX_SIG_VARIADIC: any).
 * (C: a macro naming the stage, see above.) */
ex_sender *ex_let_value(ex_sender *child, ex_let_value_fn fn, void *ctx, ex_sig in);

/* ex_let_value whose messages name the stage "ex_let_value(name)". */
ex_sender *ex_let_value_named(ex_sender *child, ex_let_value_fn fn, void *ctx, ex_sig in, const char *name);

/* ex_let_value whose fn lends the sender it returns instead of handing
 * over a new reference: cexec connects it and neither retains nor
 * releases it.  The sender must stay valid until it is connected, which
 * is before fn's caller returns; keeping it for as long as the let may
 * run is the simple way (a table of senders built once, examples/fib.c).
 * A lent ex_just without tuples is not even connected: its values are
 * the result, with no operation allocated (a recursion's leaves).
 * Everything else is as for ex_let_value.  What it saves: the two
 * reference-count updates of every run, which contend across threads
 * when many operations running at once return the same sender (a
 * recursion's senders: without them fib(30) on two workers ran twice as
 * fast). */
ex_sender *ex_let_value_borrowed(ex_sender *child, ex_let_value_fn fn, void *ctx, ex_sig in);

/* ex_let_value_borrowed whose messages name the stage
 * "ex_let_value_borrowed(name)". */
ex_sender *ex_let_value_borrowed_named(ex_sender *child, ex_let_value_fn fn, void *ctx, ex_sig in, const char *name);

/* let_error and let_stopped: fn(err) / fn() when the child completes on
 * that channel.  (C: macros naming the stage, see above.) */
ex_sender *ex_let_error(ex_sender *child, ex_let_error_fn fn, void *ctx);
ex_sender *ex_let_stopped(ex_sender *child, ex_let_stopped_fn fn, void *ctx);

/* The same, with messages that name the stage "ex_let_error(name)" /
 * "ex_let_stopped(name)". */
ex_sender *ex_let_error_named(ex_sender *child, ex_let_error_fn fn, void *ctx, const char *name);
ex_sender *ex_let_stopped_named(ex_sender *child, ex_let_stopped_fn fn, void *ctx, const char *name);

#ifdef __cplusplus
}
#endif

/* In C, the plain names are macros over the _named forms that name the
 * stage after the fn argument's spelling (C++: none, see above). */
#ifndef __cplusplus
#define ex_let_value(child, fn, ctx, in) ex_let_value_named((child), (fn), (ctx), (in), #fn)
#define ex_let_value_borrowed(child, fn, ctx, in) ex_let_value_borrowed_named((child), (fn), (ctx), (in), #fn)
#define ex_let_error(child, fn, ctx) ex_let_error_named((child), (fn), (ctx), #fn)
#define ex_let_stopped(child, fn, ctx) ex_let_stopped_named((child), (fn), (ctx), #fn)
#endif
#endif
