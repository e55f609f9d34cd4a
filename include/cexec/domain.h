/* SPDX-License-Identifier: MIT */
/* cexec/domain.h - domains ([exec.domain.default], transform_sender,
 * apply_sender): a scheduler or an environment replaces an algorithm's
 * sender with its own, keyed by the algorithm's tag.
 *
 * A domain is a table of two functions.  A scheduler names its domain in
 * its vtable (ex_scheduler_vtable.domain); an environment names one under
 * ex_key_get_domain.  cexec asks a domain at three points:
 *
 *  - early, when a customisable algorithm builds its sender: the domain of
 *    the input's value completion scheduler (for ex_when_all, the one
 *    domain its inputs complete in; for ex_starts_on and the parallel
 *    algorithms, their scheduler's), asked with env NULL, on the thread
 *    that builds;
 *  - late, when such a sender is connected: the domain the receiver's
 *    environment names (ex_get_domain), asked with that environment, on
 *    the thread that connects.  For ex_continues_on, the domain of the
 *    scheduler it moves to;
 *  - for ex_sync_wait (apply_sender): the domain of the sender's value
 *    completion scheduler.
 *
 * transform_sender gets the sender and returns another that replaces it,
 * or NULL to keep it.  ex_sender_tag says which algorithm built it.
 * Builders called while a domain transforms (or applies) skip their early
 * step, and while a late replacement connects, neither it nor the sender
 * it replaces is offered again (a domain may wrap the sender it was
 * given).  The replacement's other parts are offered as usual, as P2300
 * transforms a replacement's children: a domain must not put into its
 * replacement a new sender it would replace again, or the replacing does
 * not end.  An early replacement is an ordinary sender: connected, it is
 * offered late like any other.
 *
 * A domain's functions must be thread-safe (builds and connects happen on
 * any thread), must not throw (C++) or suspend a task, and the domain and
 * its tags list must not change while senders may ask it.  A transform
 * that fails returns an invalid sender (ex_invalid_sender: EX_ENOMEM, say),
 * never NULL for "failed".
 *
 * The pool and the parallel scheduler run bulk through their domains: they
 * replace a bulk sender by one that hands its job to their agents
 * (ex_bulk_run_on, bulk.h).  docs/design.md ("Domains") says why domains in C
 * look like this and where they differ from P2300's. */
#ifndef CEXEC_DOMAIN_H
#define CEXEC_DOMAIN_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An algorithm's identity: the tag its senders carry (the sender vtable's
 * tag field).  Compare tags by address.  An adaptor of the application's
 * may define its own tag; domains see it like cexec's. */
typedef struct ex_tag {
    const char *name;  /* "then", "bulk", ... */
} ex_tag;

/* cexec's customisable algorithms.  ex_bulk and ex_bulk_grain carry
 * ex_tag_bulk; ex_schedule_from and ex_affine_on carry ex_tag_continues_on;
 * ex_on carries no tag of its own (it is made of starts_on and
 * continues_on, which carry theirs). */
extern const ex_tag ex_tag_then, ex_tag_upon_error, ex_tag_upon_stopped;
extern const ex_tag ex_tag_let_value, ex_tag_let_error, ex_tag_let_stopped;
extern const ex_tag ex_tag_bulk, ex_tag_bulk_chunked, ex_tag_bulk_unchunked;
extern const ex_tag ex_tag_when_all, ex_tag_starts_on, ex_tag_continues_on;
extern const ex_tag ex_tag_inclusive_scan, ex_tag_exclusive_scan, ex_tag_reduce;
extern const ex_tag ex_tag_for_each_index, ex_tag_transform;
/* apply_sender's tag: ex_sync_wait (and ex_sync_wait_with_variant). */
extern const ex_tag ex_tag_sync_wait;

typedef struct ex_domain ex_domain;

struct ex_domain {
    const char *name;
    /* The algorithms this domain replaces, ending with NULL; NULL: every
     * tagged sender is offered.  Naming them spares every other sender's
     * connect the lookup of the environment. */
    const ex_tag *const *tags;
    /* Returns a sender that replaces s, or NULL to keep s.  s is lent:
     * keep it past the call with ex_sender_retain (to wrap it, say); a
     * domain that returns s itself hands back a reference it took (retain
     * it first), and s is kept.
     * sch is the scheduler the domain was found through (its handle is
     * invalid, vt NULL, when an environment named the domain itself);
     * late, that may be an enclosing scheduler (one without a domain
     * leaves the enclosing domain in force): a domain whose replacement
     * runs on its resource checks env's get_scheduler, as
     * ex_bulk_domain (bulk.h) does.
     * env is NULL when s is being built; at connect it is the receiver's
     * environment.  The replacement must send what s declared it sends
     * (a receiver refuses anything else at connect, EX_EINVAL); an invalid
     * sender (ex_invalid_sender) makes the builder's result, or the
     * connect, fail with its error.  NULL: the domain replaces nothing. */
    ex_sender *(*transform_sender)(const ex_domain *d, ex_scheduler sch, ex_sender *s, const ex_env *env);
    /* Runs s as the algorithm tag would and returns true, or returns false
     * to leave it to cexec.  For ex_tag_sync_wait, result is the
     * ex_result * the caller gets (fill it as ex_sync_wait does: deep
     * copies it owns).  s stays the caller's.  NULL: none. */
    bool (*apply_sender)(const ex_domain *d, ex_scheduler sch, const ex_tag *tag, ex_sender *s, void *result);
    void *ctx;  /* the domain's own data */
};

/* Names a domain in an environment: it wins over the scheduler of an
 * enclosing environment.  The value is an EX_T_PTR to a const ex_domain. */
extern const ex_key ex_key_get_domain;

/* The value for ex_key_get_domain: ex_write_env(s, &ex_key_get_domain,
 * ex_domain_value(&d)) runs s with d as its late domain. */
static inline ex_value ex_domain_value(const ex_domain *d) {
    ex_value v;
    v.type = EX_T_PTR;
    v.as.p = (void *)(uintptr_t)d;
    return v;
}

/* The algorithm that built s (NULL for a sender without a tag, or NULL s). */
const ex_tag *ex_sender_tag(const ex_sender *s);

/* A scheduler's domain (NULL: the default domain, which replaces nothing). */
const ex_domain *ex_scheduler_domain(ex_scheduler sch);

/* The domain e names (get_domain): the nearest one named, under
 * ex_key_get_domain or by a get_scheduler whose scheduler has one (as
 * P2300's SCHED-ENV does); NULL for none.  *sch (optional) gets that
 * scheduler, or the invalid handle when the key named it. */
const ex_domain *ex_get_domain(ex_env e, ex_scheduler *sch);

/* The domain s completes in: its value completion scheduler's (NULL for
 * none); *sch (optional) gets that scheduler. */
const ex_domain *ex_sender_domain(const ex_sender *s, ex_scheduler *sch);

/* For algorithms of the application's that carry a tag of their own: the
 * builder's last step, ex_transform_early(s, input), offers the fresh
 * sender s (owned) to the domain its input completes in and returns s or
 * the replacement (s then released); the connect's first step,
 * ex_transform_late(s, r, storage, &e), offers s to the late domain and
 * returns true when a replacement was connected in its place (e is then
 * the connect's result).  cexec's own algorithms do both. */
ex_sender *ex_transform_early(ex_sender *s, const ex_sender *input);
bool ex_transform_late(const ex_sender *s, ex_receiver r, void *storage, ex_error *e);

/* For adaptors of the application's that change their child's scheduler
 * or domain (an environment with another get_scheduler or get_domain):
 * connects child like ex_connect_child, reading the late domain from r's
 * environment.  ex_connect_child keeps the parent's, which is right for
 * every adaptor that leaves those two alone. */
ex_error ex_connect_child_in_env(const ex_sender *child, ex_receiver r, void *storage);

#ifdef __cplusplus
}
#endif
#endif
