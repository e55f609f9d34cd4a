/* SPDX-License-Identifier: MIT */
/* exi_domain.h - the early and late steps of domains (cexec/domain.h) for
 * the builders and connects of customisable algorithms.  Internal.
 *
 * The late domain is a property of the environment a sender is connected
 * in.  Asking the receiver for its environment at every connect would cost
 * a chain of forwarding env() calls per adaptor, so the domain travels
 * with the connect instead: a thread-local says, for the connect in
 * progress on this thread, which receiver's environment decides it.  Roots
 * (ex_connect, ex_connect_alloc) and adaptors that give their child another
 * scheduler (starts_on, a let body, write_env of get_scheduler or
 * get_domain, a task, a spawn) set it to their child's receiver (lazy: read
 * only when a customisable sender asks) and restore it after; adaptors that
 * leave scheduler and domain alone connect their child with
 * ex_connect_child and leave it as it is.  Outside any connect it is
 * unset, and a connect reads its own receiver's environment. */
#ifndef EXI_DOMAIN_H
#define EXI_DOMAIN_H

#include <cexec/cexec.h>
#include <cexec/domain.h>

#include "base/exi_macros.h"

typedef enum exi_late_state {
    EXI_LATE_UNSET,  /* no connect in progress: ask the connect's own receiver */
    EXI_LATE_LAZY,   /* r's environment decides; not read yet */
    EXI_LATE_KNOWN,  /* domain (and sch) decided */
} exi_late_state;

typedef struct exi_late {
    uint8_t state;
    const ex_domain *domain;
    ex_scheduler sch;
    ex_receiver r;
} exi_late;

extern EXI_TLS exi_late exi_late_now;
/* Above 0 while a domain transforms or applies on this thread: what it
 * builds or runs is not offered to a domain again. */
extern EXI_TLS unsigned exi_in_domain;

/* ------------------------------------------------------------ early step */

/* Offers s, just built by a customisable builder (which owns it), to d:
 * returns s or the replacement (s then released). */
ex_sender *exi_transform_early(ex_sender *s, const ex_domain *d, ex_scheduler sch);

/* The early step of a one-input adaptor: the domain its input completes
 * in.  An input without attributes has none (no query). */
static inline ex_sender *exi_early_from_child(ex_sender *s, const ex_sender *child) {
    if (!child->vt->attrs || exi_in_domain) return s;
    ex_scheduler sch;
    const ex_domain *d = ex_sender_domain(child, &sch);
    return d ? exi_transform_early(s, d, sch) : s;
}

/* The early step of an adaptor of n inputs (when_all): the domain its
 * inputs complete in, when those that name one agree; inputs without
 * attributes cost nothing. */
ex_sender *exi_early_from_children_slow(ex_sender *s, ex_sender *const *children, size_t n);
static inline ex_sender *exi_early_from_children(ex_sender *s, ex_sender *const *children, size_t n) {
    if (exi_in_domain) return s;
    for (size_t i = 0; i < n; i++)
        if (children[i]->vt->attrs) return exi_early_from_children_slow(s, children, n);
    return s;
}

/* ------------------------------------------------------------- late step */

/* Sets the late domain for a child connected under receiver r (whose
 * environment may name another scheduler or domain); returns what to
 * restore afterwards. */
static inline exi_late exi_late_enter(ex_receiver r) {
    exi_late prev = exi_late_now;
    exi_late_now.state = EXI_LATE_LAZY;
    exi_late_now.r = r;
    return prev;
}
static inline void exi_late_leave(exi_late prev) { exi_late_now = prev; }

/* The slow side of exi_late_replaced; d: the domain to ask when the
 * caller knows it (continues_on: its scheduler's), else NULL. */
bool exi_late_offer(const ex_sender *s, ex_receiver r, void *storage, ex_error *e, const ex_domain *d, ex_scheduler sch);

/* First thing in a customisable sender's connect: true when the late
 * domain replaced s, which is then connected in its place (*e: the
 * result).  The common case, a connect whose domain is known to be the
 * default, costs one thread-local load. */
static inline bool exi_late_replaced(const ex_sender *s, ex_receiver r, void *storage, ex_error *e) {
    if (__builtin_expect(exi_late_now.state == EXI_LATE_KNOWN && !exi_late_now.domain, 1)) return false;
    ex_scheduler none = { 0, 0 };
    return exi_late_offer(s, r, storage, e, NULL, none);
}

/* ex_connect_child for a child whose environment (r's) may name another
 * scheduler or domain than the parent's. */
static inline ex_error exi_connect_child_in_env(const ex_sender *child, ex_receiver r, void *storage) {
    exi_late prev = exi_late_enter(r);
    ex_error e = ex_connect_child(child, r, storage);
    exi_late_leave(prev);
    return e;
}

/* ex_bulk_run_on is declared with bulk (compose/) and called by resources
 * below it: compose registers its implementation here when it builds a
 * bulk sender, before any domain can be given one. */
typedef struct exi_bulk_ops {
    ex_sender *(*run_on)(const ex_sender *s, ex_bulk_run_fn run, void *self);
} exi_bulk_ops;
void exi_bulk_ops_register(const exi_bulk_ops *ops);

/* apply_sender for ex_sync_wait: true when s's domain ran it (*out set). */
bool exi_apply_sync_wait(ex_sender *s, ex_result *out);

#endif
