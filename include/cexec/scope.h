/* SPDX-License-Identifier: MIT */
/* cexec/scope.h - counting scopes: structured launching of work whose
 * completion nobody awaits directly (the C++26 simple_counting_scope and
 * counting_scope, with associate, spawn and spawn_future: P3149,
 * [exec.scope], [exec.associate], [exec.spawn], [exec.spawn.future]).
 *
 * A scope counts the operations associated with it.  ex_spawn connects a
 * sender into storage from its environment's allocator, starts it, and
 * keeps the scope from being joined until it completes; ex_associate
 * makes a sender whose operations keep it from being joined until they
 * are destroyed.  The join sender completes once no association is left.
 * A counting scope can also request stop on everything spawned into it.
 *
 * C has no compile-time check that a spawned sender cannot fail, so an
 * error of spawned work is not lost: the scope keeps the first one and its
 * join completes with it (set_error) instead of set_value; later errors
 * are released (cexec/error.h).  The scope holds the first error until it
 * is destroyed, and each join's receiver is given a reference of its own.
 * Values of spawned work are discarded. */
#ifndef CEXEC_SCOPE_H
#define CEXEC_SCOPE_H

#include <pthread.h>
#include <cexec/stop_token.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_scope_impl {
    /* private */
    uint64_t state;          /* associations << 2 | JOINING | CLOSED */
    pthread_mutex_t mu;      /* join waiters */
    void *joiners;
    uint32_t failed;
    ex_error first_error;
    bool stoppable;
    ex_stop_source stop;
} ex_scope_impl;

typedef struct ex_simple_counting_scope { ex_scope_impl impl; } ex_simple_counting_scope;
typedef struct ex_counting_scope { ex_scope_impl impl; } ex_counting_scope;

/* A token: what spawn and associate need (C++'s scope_token:
 * try_associate, disassociate and wrap below).  Copy freely while the
 * scope lives. */
typedef struct ex_scope_token { ex_scope_impl *scope; } ex_scope_token;

/* Initialise an open scope with no association.  EX_EAGAIN if a mutex
 * cannot be created, EX_EINVAL for NULL.  (Every function below takes a
 * NULL scope too: a NULL token, an invalid join sender, EX_EINVAL from
 * destroy, nothing done by close and request_stop.) */
ex_error ex_simple_counting_scope_init(ex_simple_counting_scope *s);
ex_error ex_counting_scope_init(ex_counting_scope *s);

/* The token that spawns into s (valid while s is): ex_spawn,
 * ex_spawn_future, ex_task_launch take it. */
ex_scope_token ex_simple_counting_scope_token(ex_simple_counting_scope *s);
ex_scope_token ex_counting_scope_token(ex_counting_scope *s);

/* No new association from now on: ex_spawn fails with EX_ESHUTDOWN. */
void ex_simple_counting_scope_close(ex_simple_counting_scope *s);
void ex_counting_scope_close(ex_counting_scope *s);

/* Requests stop on every operation spawned into the scope (their stop
 * token is the scope's), now and later. */
void ex_counting_scope_request_stop(ex_counting_scope *s);

/* A sender that completes when the scope has no association left, with
 * set_value() or with the first error of spawned work.  Once a join
 * completed the scope is closed.  May be connected many times.
 *
 * Where it completes (C++26 [exec.scope.counting], P3149): connect
 * connects a schedule operation on the receiver environment's scheduler
 * (get_scheduler).  A join that finds no association completes inline in
 * start.  A join that has to wait completes, once the last association
 * ended, by starting that schedule operation: on an agent of the
 * receiver's scheduler, never inline on the thread that ended the last
 * association (unless that scheduler is ex_inline_scheduler(), which asks
 * for exactly that).  Under ex_sync_wait that is the waiting thread; in a
 * task, the task's scheduler.
 *
 * A receiver environment without a scheduler is refused: connect fails
 * with EX_EINVAL (C++ does not compile it); give one with ex_write_env and
 * ex_key_get_scheduler.  The schedule operation lives in the join's
 * operation state (EX_SCHEDULE_OP_INLINE bytes); a scheduler that needs
 * more gets a block from the environment's allocator at connect (EX_ENOMEM
 * there), so completing never allocates.  The scheduler's connect errors
 * are connect's.
 *
 * Signatures: set_value(), set_error (the first error of spawned work, or
 * the schedule operation's), set_stopped (the schedule operation's: it
 * sees the receiver's stop token, and a run loop's, for one, completes
 * stopped once stop was requested; the error the join held is then
 * released).  The wait itself is not cancellable: a stop request makes no
 * join complete before the last association ended. */
ex_sender *ex_simple_counting_scope_join(ex_simple_counting_scope *s);
ex_sender *ex_counting_scope_join(ex_counting_scope *s);

/* Destroys the scope.  EX_EBUSY (nothing done) while associations remain
 * or a join is waiting.  Must not run while another thread is still inside
 * ex_counting_scope_request_stop on this scope. */
ex_error ex_simple_counting_scope_destroy(ex_simple_counting_scope *s);
ex_error ex_counting_scope_destroy(ex_counting_scope *s);

/* Associates with the scope (false if it is closed) / ends an association.
 * For authors of operations that must keep a scope open. */
bool ex_scope_token_try_associate(ex_scope_token t);
void ex_scope_token_disassociate(ex_scope_token t);

/* token.wrap(s) ([exec.scope.concepts]): what associate, spawn and
 * spawn_future run in place of s.  For a counting scope s run with a stop
 * token that the scope's request_stop stops as well as its receiver's
 * (ex_link_stop_token(s, the scope's token): its signatures and
 * allocation are that adaptor's); for a simple scope s itself.  Takes s;
 * a NULL token gives an EX_EINVAL invalid sender. */
ex_sender *ex_scope_token_wrap(ex_scope_token t, ex_sender *s);

/* associate(s, t) ([exec.associate], P3149): s, run as work of the scope.
 * Takes s.  The association is taken here, when the sender is built:
 *   - The scope is open: the sender owns an association, so the scope's
 *     join waits until the sender is released or an operation took the
 *     association over.  The first ex_connect takes it over (C++ connects
 *     an associate sender by moving it); each later connect (a sender is
 *     multi-shot: C++ connects a copy) tries a new association, and
 *     without one (the scope is closed by then) its operation completes
 *     set_stopped in start, s never connected.  An operation that holds an
 *     association ends it when it is destroyed (ex_operation_destroy,
 *     after s's operation): completing is not enough, and an operation
 *     destroyed without being started ends it too.  A failed connect
 *     leaves the sender as it was.
 *   - The scope is closed (or joined): s is released at once, and every
 *     operation completes set_stopped in start.
 * What runs is ex_scope_token_wrap(t, s) (a counting scope's
 * request_stop stops it), connected straight to the receiver: its
 * completions and the receiver's environment pass unchanged, on the
 * thread where they happen.  Signatures: the wrapped sender's plus
 * set_stopped, whether or not the association was made.  Errors go to the
 * receiver (the scope does not keep them, unlike spawned work's).
 *
 * Releasing the sender or destroying an operation may end the last
 * association and complete a waiting join (on its receiver's scheduler).
 * So a join cannot complete while an associate operation is alive: a join
 * run in the same when_all as an associate sender, or awaited by the
 * operation's owner before destroying it, waits for ever (as in C++).
 *
 * Errors (invalid senders, nothing associated): EX_EINVAL for a NULL s or
 * token, s's own error for an invalid s, EX_ETOODEEP, EX_ENOMEM. */
ex_sender *ex_associate(ex_sender *s, ex_scope_token t);

/* Starts s (taking ownership) as work of the scope ([exec.spawn]):
 * ex_spawn(s, t) is ex_spawn_env(s, t, ex_env_empty()).
 *
 * The environment given overrides the sender's:
 *   - Allocator: one block holds the spawn's state and s's operation (and,
 *     when the stop tokens must be linked, the linked source), and comes
 *     from the allocator env answers get_allocator with; else from the one
 *     s's attributes answer it with (ex_sender_attrs), which the work's
 *     environment then answers too; else ex_get_allocator(env) (env's
 *     scheduler's default, else the process default).  The block goes
 *     back to that allocator when s completes, before the association
 *     ends.  Nothing else is allocated (what s allocates while it runs
 *     comes from the allocator its environment answers).
 *   - Stop token: a simple scope's work sees env's token.  A counting
 *     scope's sees the scope's token when env has none (or the same); else
 *     a token of its own, linked to both (as C++'s stop_when under
 *     write_env): stop requested on env's token or by the scope's
 *     request_stop reaches the work, on the requesting thread.
 *   - The rest of env is the work's environment as it is.  env's nodes,
 *     the allocator and the source of env's stop token must stay valid
 *     until the work completed (the scope's join completing tells); env
 *     is not copied.
 *
 * An error of the work goes to the scope (its join).  Errors (s is not
 * started, nothing is left associated or allocated): EX_ESHUTDOWN when the
 * scope is closed, EX_ENOMEM, EX_EINVAL (NULL s, NULL token), an invalid
 * s's own error (ex_sender_status), connect's error. */
ex_error ex_spawn(ex_sender *s, ex_scope_token t);
ex_error ex_spawn_env(ex_sender *s, ex_scope_token t, ex_env env);

/* Starts s (taking ownership) now, as work of the scope, and returns a
 * sender of its result ([exec.spawn.future]): connecting and starting that
 * sender waits for the result (or completes at once with it).  The future
 * may be connected once; it completes on the agent where s completed, or
 * inline.  A stop request on the future's receiver, releasing the future
 * without ever connecting it, or destroying its connected operation
 * without starting it, requests stop on s (nobody will read the result).
 * If s cannot be started, the returned sender is an invalid sender
 * carrying the error (EX_ESHUTDOWN, EX_ENOMEM, EX_EINVAL, an invalid s's
 * own error; see ex_sender_status): run on its own it completes with that error, and
 * adaptors built on it are invalid too.  ex_spawn_future(s, t) is
 * ex_spawn_future_env(s, t, ex_env_empty()).
 *
 * The environment given overrides the sender's, as for ex_spawn_env:
 *   - Allocator (chosen the same way): one block holds the shared state
 *     and s's operation; the result's values that need storage (tuples)
 *     are copied into blocks of it too.  The block goes back to it when the
 *     later of s's completion and the future's end (its release, or its
 *     operation's destroy) happens: the allocator must outlive both.  The
 *     future sender itself comes from the default allocator, as every
 *     sender does.
 *   - Stop token: s sees the future's own token, stopped by the future's
 *     consumer as said above, by a stop request on env's token, and (a
 *     counting scope) by the scope's request_stop.
 *   - env's nodes and the source of its stop token must stay valid until
 *     s completed. */
ex_sender *ex_spawn_future(ex_sender *s, ex_scope_token t);
ex_sender *ex_spawn_future_env(ex_sender *s, ex_scope_token t, ex_env env);

#ifdef __cplusplus
}
#endif
#endif
