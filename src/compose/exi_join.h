/* SPDX-License-Identifier: MIT */
/* exi_join.h - the completion rule ex_when_all and the task fork
 * (task/task_await.c) share: children arrive on a count; the first error, or
 * stopped, wins and asks the others to stop through the join's own
 * source; a stop request forwarded from outside holds an arrival of its
 * own across the request, so the last child completing inside it cannot
 * complete (and let someone free) the join while request_stop still walks
 * its source. */
#ifndef EXI_JOIN_H
#define EXI_JOIN_H

#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "core/exi_error.h"
#include "core/exi_lazy_stop.h"

enum { EXI_JOIN_VALUE, EXI_JOIN_ERROR, EXI_JOIN_STOPPED };

typedef struct exi_join {
    uint32_t count;        /* children not yet arrived (plus a held arrival) */
    uint32_t disposition;  /* EXI_JOIN_* */
    ex_error err;          /* written by the first error only */
    exi_lazy_stop stop;    /* the children's token */
} exi_join;

static inline void exi_join_fill(exi_join *j, uint32_t children, bool lazy, void (*fire)(exi_lazy_stop *l)) {
    j->count = children;
    j->disposition = EXI_JOIN_VALUE;
    j->err = ex_ok();
    exi_lazy_stop_init(&j->stop, lazy, fire);
}

/* A join whose owner registers its own forwarding callback: its source
 * is a plain one. */
static inline void exi_join_init(exi_join *j, uint32_t children) { exi_join_fill(j, children, false, NULL); }

/* A join whose source follows the owner's receiver's token lazily
 * (exi_lazy_stop_follow at start); fire: what a request on that token
 * does once the source is linked. */
static inline void exi_join_init_lazy(exi_join *j, uint32_t children, void (*fire)(exi_lazy_stop *l)) {
    exi_join_fill(j, children, true, fire);
}

/* The children's token. */
static inline ex_stop_token exi_join_token(exi_join *j) { return exi_lazy_stop_token(&j->stop); }

/* Requests stop on the children's source. */
static inline void exi_join_request_stop(exi_join *j) { (void)ex_stop_source_request_stop(&j->stop.source); }

/* A child's error: the first one is the result (the join takes the
 * child's reference, cexec/error.h) and stops the others; a later one is
 * released. */
static inline void exi_join_fail(exi_join *j, ex_error e) {
    if (exi_fas_u32(&j->disposition, EXI_JOIN_ERROR) != EXI_JOIN_ERROR) {
        j->err = e;
        exi_join_request_stop(j);
    } else {
        exi_error_drop(e);
    }
}

/* A child's stopped: the result unless an error came first. */
static inline void exi_join_stopped(exi_join *j) {
    uint32_t expected = EXI_JOIN_VALUE;
    if (exi_cas_u32(&j->disposition, &expected, EXI_JOIN_STOPPED)) exi_join_request_stop(j);
}

/* For the callback forwarding an outside stop request: takes an arrival of
 * its own, unless every child has arrived (the join is completing on
 * another thread, which waits for the callback in its deregistration):
 * then false, and the callback does nothing. */
static inline bool exi_join_hold(exi_join *j) {
    uint32_t c = exi_load_acq_u32(&j->count);
    do {
        if (c == 0) return false;
    } while (!exi_cas_u32(&j->count, &c, c + 1));
    return true;
}

/* The body of the callback forwarding an outside stop request to the
 * children: holds an arrival across the request; true when the caller
 * must then give that arrival back (its arrive, which may complete the
 * join), false when it must do nothing. */
static inline bool exi_join_forward_stop(exi_join *j) {
    if (!exi_join_hold(j)) return false;
    exi_join_request_stop(j);
    return true;
}

/* One arrival; true for the last, which completes the join.  Only the
 * children and the forwarding callback change the count, and the callback
 * exists only once the source is linked: unlinked, a child that reads 1
 * is the last, every other arrival is behind it, and it needs no
 * read-modify-write.  The count is read first: the other children's
 * arrivals publish any link made below them. */
static inline bool exi_join_arrive(exi_join *j) {
    if (exi_load_acq_u32(&j->count) == 1 && !exi_lazy_stop_is_linked(&j->stop)) {
        exi_store_rlx_u32(&j->count, 0);
        return true;
    }
    return exi_faa_u32(&j->count, (uint32_t)-1) == 1;
}

#endif
