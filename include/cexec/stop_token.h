/* SPDX-License-Identifier: MIT */
/* cexec/stop_token.h - in-place stop source, token and callback
 * ([stoptoken.inplace], [stopsource.inplace], [stopcallback.inplace]) and
 * the never-stop token ([stoptoken.never]).
 *
 * Nothing here allocates.  A source lives in caller storage; tokens are
 * pointers to it; callbacks are intrusive nodes the caller embeds.  Tokens
 * and callbacks must not outlive their source. */
#ifndef CEXEC_STOP_TOKEN_H
#define CEXEC_STOP_TOKEN_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ex_stop_callback;

typedef struct ex_stop_source {
    /* private */
    uint32_t state;                  /* bit 0: stop requested, bit 1: list locked, bit 2: internal */
    struct ex_stop_callback *head;   /* registered, not yet invoked callbacks */
    const void *stopping_thread;     /* thread that ran request_stop */
    void *running;                   /* the callback request_stop is running */
} ex_stop_source;

typedef void (*ex_stop_fn)(struct ex_stop_callback *cb);

typedef struct ex_stop_callback {
    /* private */
    struct ex_stop_callback *next, *prev;
    ex_stop_fn fn;
    ex_stop_source *src;
    uint32_t queued;            /* in src's list */
} ex_stop_callback;

#define EX_STOP_SOURCE_INIT { 0, 0, 0, 0 }

/* Initialises a source with stop not requested.  (Every function here
 * takes NULL: a NULL source is never stopped and request_stop on it
 * returns false; a NULL callback or function is neither registered nor run.) */
void ex_stop_source_init(ex_stop_source *s);

/* The token of s.  stop_possible() is true for it. */
static inline ex_stop_token ex_stop_source_token(ex_stop_source *s) { ex_stop_token t = { s }; return t; }

/* The never-stop token: stop_possible() and stop_requested() are false. */
static inline ex_stop_token ex_never_stop_token(void) { ex_stop_token t = { 0 }; return t; }

/* Requests stop.  The first request runs every registered callback on the
 * calling thread, in unspecified order, and returns true; later requests do
 * nothing and return false.  Callbacks must not throw (C: must return). */
bool ex_stop_source_request_stop(ex_stop_source *s);
bool ex_stop_source_stop_requested(const ex_stop_source *s);

/* Whether stop was requested on t's source (false for the never-stop
 * token). */
bool ex_stop_token_stop_requested(ex_stop_token t);
/* Whether t can ever be stopped (false only for the never-stop token). */
static inline bool ex_stop_token_stop_possible(ex_stop_token t) { return t.src != 0; }
/* Whether a and b are tokens of the same source. */
static inline bool ex_stop_token_equal(ex_stop_token a, ex_stop_token b) { return a.src == b.src; }

/* Registers cb on t.  If stop was already requested, fn(cb) runs now on the
 * calling thread and the callback is not registered.  With the never-stop
 * token nothing happens.  Returns true when fn ran during registration.
 * cb must stay at its address until ex_stop_callback_deregister returns.
 * On the token a when_all or a task fork gives its children, the first
 * registration also links that source (and those of the fork-joins above
 * it not linked yet) to its parent: one more registration per such level,
 * and a short wait if another thread is linking the same sources. */
bool ex_stop_callback_register(ex_stop_callback *cb, ex_stop_token t, ex_stop_fn fn);

/* Deregisters cb, by the rule of [stopcallback.inplace] (P2300R10
 * [stoptoken.concepts], stoppable callback deregistration):
 *   - cb still registered: removed; fn will not run.
 *   - fn running on another thread (the one in request_stop): waits until
 *     fn returned; fn's return happens before this returns.
 *   - fn running on this thread (called from inside fn, or from something
 *     fn calls): returns at once, without waiting.
 *   - otherwise (fn ran, or ran at registration, or cb was deregistered or
 *     never registered): nothing.
 * Never waits for other callbacks.  Deregistration may be repeated and may
 * overlap: fn deregistering cb while its owner deregisters cb on another
 * thread is safe in either order (fn's call returns at once, the owner's
 * waits for fn to return).  request_stop never touches cb after fn
 * returned, so fn may deregister and free cb when it is the only one that
 * deregisters it.  Only registration must not overlap anything on cb. */
void ex_stop_callback_deregister(ex_stop_callback *cb);

/* ------------------------------------------------------ linked stop sources */

/* How many parent tokens a linked stop source follows at most: the link
 * callbacks live in the struct, so linking allocates nothing. */
#define EX_STOP_LINK_MAX 4

struct ex_linked_stop_source;

typedef struct ex_stop_link {
    /* private */
    ex_stop_callback cb;                 /* on a parent's token */
    struct ex_linked_stop_source *owner;
} ex_stop_link;

/* A stop source whose stop is requested when any of its parents' is (and
 * by its own request_stop): a request's own source linked to its scope's
 * and its deadline's.  Its token is an ordinary ex_stop_token, with every
 * rule above (callbacks, deregistration). */
typedef struct ex_linked_stop_source {
    /* private */
    ex_stop_source source;
    ex_stop_link links[EX_STOP_LINK_MAX];
    uint32_t nlinks;                     /* links[0, nlinks) were registered */
    void (*fire)(struct ex_linked_stop_source *l);  /* internal; NULL: request_stop */
} ex_linked_stop_source;

/* Initialises l with stop not requested and links it to parents[0, n):
 * each parent's token gets a callback (one of l's links) that requests
 * stop on l.  Never-stop parents are skipped.  If a parent's stop was
 * already requested, l is stopped at once (its request runs here, on the
 * calling thread) and the parents after it are not linked.  Parents may
 * repeat or be linked sources themselves; a parent's source must outlive
 * ex_linked_stop_source_destroy(l).  A parent's request that reaches l
 * runs l's callbacks on the requesting thread, inside that request.
 * Errors (l is then still a valid, unlinked source): EX_EINVAL for a NULL
 * l, n > EX_STOP_LINK_MAX, or parents NULL with n > 0. */
ex_error ex_linked_stop_source_init(ex_linked_stop_source *l, const ex_stop_token *parents, size_t n);

/* Unlinks l from its parents: each link is deregistered by the rule of
 * ex_stop_callback_deregister, so it waits for a parent's request that is
 * running l's link (and with it l's own callbacks) on another thread, and
 * returns at once when called from inside that request on this thread.
 * After it returns no parent's request touches l.  Callbacks registered on
 * l's token must have been deregistered, as for any source.  Destroying l
 * from inside one of its own callbacks is allowed; freeing it there is not
 * (the request that runs the callback still walks l's list when the
 * callback returns, as with an ex_stop_source).  NULL-safe, idempotent. */
void ex_linked_stop_source_destroy(ex_linked_stop_source *l);

/* The token of l (an ordinary in-place token; stop_possible() is true). */
static inline ex_stop_token ex_linked_stop_source_token(ex_linked_stop_source *l) {
    ex_stop_token t = { l ? &l->source : 0 };
    return t;
}

/* Requests stop on l itself (its parents are not affected): as
 * ex_stop_source_request_stop.  NULL: false. */
bool ex_linked_stop_source_request_stop(ex_linked_stop_source *l);

/* Whether stop was requested on l (by a parent or by its own request).
 * A parent's request reaches l when the parent runs l's link, so l may
 * report false for a moment after a parent reports true. */
bool ex_linked_stop_source_stop_requested(const ex_linked_stop_source *l);

#ifdef __cplusplus
}
#endif
#endif
