/* SPDX-License-Identifier: MIT */
/* exi_domain.h - the early and late steps of domains (cexec/domain.h) for
 * the builders and connects of customisable algorithms.  Internal.
 *
 * The late domain is a property of the environment a sender is connected
 * in.  Asking the receiver for its environment at every connect would cost
 * a chain of forwarding env() calls per adaptor, so the domain travels
 * with the connect instead: a thread-local points to the region of the
 * connect in progress on this thread, which says which receiver's
 * environment decides it, or what it decided.  Roots (ex_connect,
 * ex_connect_alloc) and adaptors that give their child another scheduler
 * (starts_on, a let body, write_env of get_scheduler or get_domain, a
 * task, a spawn) open a region on their stack for their child's connect
 * (lazy: the environment is read only when a customisable sender asks;
 * known: when the adaptor knows the domain already) and close it after;
 * adaptors that leave scheduler and domain alone connect their child with
 * ex_connect_child inside their parent's region.  Outside any connect
 * there is none, and a connect reads its own receiver's environment. */
#ifndef EXI_DOMAIN_H
#define EXI_DOMAIN_H

#include <cexec/cexec.h>
#include <cexec/domain.h>

#include "base/exi_macros.h"

typedef enum exi_late_state {
    EXI_LATE_NONE,   /* the root: no region open, each connect asks its own receiver */
    EXI_LATE_LAZY,   /* r's environment decides; not read yet */
    EXI_LATE_KNOWN,  /* domain (and sch) decided */
} exi_late_state;

/* A region: on the stack of the adaptor that opened it, for its child's
 * connect. */
typedef struct exi_late {
    uint8_t state;
    const ex_domain *domain;
    uint64_t offers;  /* KNOWN: exi_tag_bit of every tag domain offers (a superset); else all */
    ex_scheduler sch;
    ex_receiver r;    /* LAZY: whose environment decides */
    struct exi_late *up;
} exi_late;

/* The innermost region open on this thread; the root (state NONE) when
 * none is. */
extern EXI_TLS exi_late *exi_late_now;
/* Above 0 while a domain transforms or applies on this thread: what it
 * builds or runs is not offered to a domain again. */
extern EXI_TLS unsigned exi_in_domain;

/* Whether d asks to see senders tagged tag (its tags list, NULL: all). */
static inline bool exi_domain_offers(const ex_domain *d, const ex_tag *tag) {
    if (!tag || !d->transform_sender) return false;
    if (!d->tags) return true;
    for (const ex_tag *const *t = d->tags; *t; t++)
        if (*t == tag) return true;
    return false;
}

/* A tag's bit in exi_late.offers: tags are small globals, 8 bytes
 * apart, so address bits 3 to 8 tell cexec's apart.  A shared bit only
 * sends a connect down the exact check. */
static inline uint64_t exi_tag_bit(const ex_tag *tag) { return (uint64_t)1 << (((uintptr_t)tag >> 3) & 63); }

/* The bits of every tag d offers (all for a domain offered everything). */
static inline uint64_t exi_domain_offer_bits(const ex_domain *d) {
    if (!d || !d->transform_sender) return 0;
    if (!d->tags) return ~(uint64_t)0;
    uint64_t m = 0;
    for (const ex_tag *const *t = d->tags; *t; t++) m |= exi_tag_bit(*t);
    return m;
}

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

/* Opens region l for a child connected under receiver r, whose
 * environment may name another scheduler or domain than the parent's. */
static inline void exi_late_enter(exi_late *l, ex_receiver r) {
    l->state = EXI_LATE_LAZY;
    l->offers = ~(uint64_t)0;  /* every tagged connect takes the slow side until read */
    l->r = r;
    l->up = exi_late_now;
    exi_late_now = l;
}

/* Closes the region l opened (the innermost). */
static inline void exi_late_leave(exi_late *l) { exi_late_now = l->up; }

/* The offer bits of d, remembered for the last domain asked on this
 * thread: regions open and close at every step of a recursion, nearly
 * always under the same domain. */
typedef struct exi_late_bits_cache {
    const ex_domain *domain;
    const ex_tag *const *tags;  /* (a domain on the stack may come back at the same address) */
    bool transforms;
    uint64_t bits;
} exi_late_bits_cache;
extern EXI_TLS exi_late_bits_cache exi_late_bits;
static inline uint64_t exi_domain_offer_bits_cached(const ex_domain *d) {
    exi_late_bits_cache *c = &exi_late_bits;
    if (d != c->domain || d->tags != c->tags || (d->transform_sender != NULL) != c->transforms) {
        c->bits = exi_domain_offer_bits(d);
        c->domain = d;
        c->tags = d->tags;
        c->transforms = d->transform_sender != NULL;
    }
    return c->bits;
}

/* Opens region l for a child connected where its late domain is known
 * already: under a scheduler that has a domain (SCHED-ENV answers
 * get_domain with it), or in the environment a parent's connect decided. */
static inline void exi_late_enter_known_bits(exi_late *l, const ex_domain *d, uint64_t offers, ex_scheduler sch) {
    l->state = EXI_LATE_KNOWN;
    l->domain = d;
    l->offers = offers;
    l->sch = sch;
    l->up = exi_late_now;
    exi_late_now = l;
}
static inline void exi_late_enter_known(exi_late *l, const ex_domain *d, ex_scheduler sch) {
    exi_late_enter_known_bits(l, d, d ? exi_domain_offer_bits_cached(d) : 0, sch);
}

/* The slow side of exi_late_wants (exi_connect_late, ex_transform_late); d: the domain to ask when the
 * caller knows it (continues_on: its scheduler's), else NULL. */
bool exi_late_offer(const ex_sender *s, ex_receiver r, void *storage, ex_error *e, const ex_domain *d, ex_scheduler sch);

/* Whether the region's domain may want s (or is not read yet): then the
 * connect takes exi_connect_late.  The common case, a connect whose late
 * domain is the default or one that does not want this algorithm, costs
 * a thread-local load and a bit test. */
static inline bool exi_late_wants(const ex_sender *s) {
    return __builtin_expect((exi_late_now->offers & exi_tag_bit(s->vt->tag)) != 0, 0);
}

/* A customisable sender's connect, when exi_late_wants: offers s to the
 * late domain, and connects the replacement or, if there is none, s by
 * its own connect `now`.  Out of line, so that the common connect keeps
 * its small frame:
 *   if (exi_late_wants(s)) return exi_connect_late(s, r, storage, x_connect_now);
 *   return x_connect_now(s, r, storage); */
ex_error exi_connect_late(const ex_sender *s, ex_receiver r, void *storage,
                          ex_error (*now)(const ex_sender *s, ex_receiver r, void *storage));

/* ex_connect_child for a child whose environment (r's) may name another
 * scheduler or domain than the parent's. */
static inline ex_error exi_connect_child_in_env(const ex_sender *child, ex_receiver r, void *storage) {
    exi_late region;
    exi_late_enter(&region, r);
    ex_error e = ex_connect_child(child, r, storage);
    exi_late_leave(&region);
    return e;
}

/* ex_bulk_run_on is declared with bulk (compose/) and called by resources
 * below it: compose registers its implementation here when it builds a
 * bulk sender, before any domain can be given one. */
typedef struct exi_bulk_ops {
    ex_sender *(*run_on)(const ex_sender *s, ex_bulk_run_fn run, void *self);
} exi_bulk_ops;
void exi_bulk_ops_register(const exi_bulk_ops *ops);

/* ex_connect_child for a child whose environment (r's) names sch as its
 * scheduler (starts_on).  Its late domain is sch's when that has one, as
 * SCHED-ENV answers get_domain; else what the environment names above,
 * which the open region has decided, or will.  When the region decided
 * the same, as in a recursion that hops onto the pool it runs on, no
 * region is opened. */
static inline ex_error exi_connect_child_under(const ex_sender *child, ex_receiver r, void *storage, ex_scheduler sch) {
    const ex_domain *d = sch.vt->domain;
    const exi_late *cur = exi_late_now;
    /* (Outside every region, a child without a tag does not ask: those
     * below it that do ask their own receivers, which is right, and a
     * task awaiting another task or a just opens nothing.) */
    if (!d ? cur->state != EXI_LATE_NONE || !child->vt->tag
           : cur->state == EXI_LATE_KNOWN && cur->domain == d && cur->sch.vt == sch.vt && cur->sch.self == sch.self)
        return ex_connect_child(child, r, storage);
    exi_late region;
    if (d) exi_late_enter_known(&region, d, sch);
    else exi_late_enter(&region, r);
    ex_error e = ex_connect_child(child, r, storage);
    exi_late_leave(&region);
    return e;
}

/* apply_sender for ex_sync_wait: true when s's domain ran it (*out set). */
bool exi_apply_sync_wait(ex_sender *s, ex_result *out);

#endif
