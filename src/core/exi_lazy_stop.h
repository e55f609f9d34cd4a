/* SPDX-License-Identifier: MIT */
/* exi_lazy_stop.h - a stop source that follows its parent token only when
 * someone needs it to.  Internal.
 *
 * A fork-join (ex_when_all, the task fork) hands its children a source of
 * its own and forwards its receiver's stop requests to it.  Registering
 * that forwarding callback on the parent's source at every start, and
 * taking it off at every completion, costs two locked operations on a
 * line the siblings share: in a recursion most of a small fork's cost.
 * A lazy source whose parent is itself lazy registers nothing at start:
 *
 *  - a registration on a lazy source links it first: its link callback is
 *    registered on the parent, the parent linked before it in the same
 *    way, so a linked source is reached by every request above it;
 *  - stop_requested on a lazy source also reads the flags of the lazy
 *    sources above it (linked or not: a linked one's flag may wait for a
 *    request running on its parent to reach its link, and an answer never
 *    goes back from "stopped" to "not stopped").
 *
 * Both are answered by the public functions (cexec/stop_token.h) for any
 * consumer of the token.  The walk is skipped while no request has begun
 * since the source last found its chain clear: every request on a lazy
 * source is counted twice, process-wide, `begun` before its flag can be
 * seen and `done` once the flag is set and before any callback runs.  A
 * source's epoch is a `done` read before a walk that found every flag
 * above it clear; reading the epoch, then `begun` equal to it, means that
 * every request begun by now was done before that walk, which saw its
 * flag: nothing above is stopped.  A fresh source inherits its parent's
 * epoch and reads the parent's own flag; a recursion without stop
 * requests pays one load of `begun` per start and per check.
 *
 * model/lazystop.pml checks this protocol, with broken variants.
 *
 * Lifetimes: the chain above a source is alive while the source is (a
 * parent completes only after its children), and only the source's own
 * subtree registers on its token, so linking, which happens inside that
 * subtree, is over before the source's owner completes. */
#ifndef EXI_LAZY_STOP_H
#define EXI_LAZY_STOP_H

#include <stdbool.h>
#include <stdint.h>

#include <cexec/stop_token.h>

#include "base/exi_atomic.h"

/* ex_stop_source.state's bits: stop requested, list locked, and a lazy
 * source (set at init, never changed). */
enum { EXI_STOP_REQUESTED = 1u, EXI_STOP_LOCKED = 2u, EXI_STOP_LAZY = 4u };

typedef struct exi_lazy_stop exi_lazy_stop;

struct exi_lazy_stop {
    ex_stop_source source;        /* first: the token points here */
    ex_stop_callback link;        /* on the parent's token, once linked */
    exi_lazy_stop *up;            /* the parent, when followed lazily; NULL: a plain parent or none */
    exi_lazy_stop *down;          /* while linking: the source below, linked after this one */
    uint32_t linked;              /* EXI_LAZY_UNLINKED, _LINKING or _LINKED */
    uint64_t epoch;               /* see above; written by any checking thread */
    void (*fire)(exi_lazy_stop *l);  /* a parent's request reached l; NULL: request stop on l */
};

enum { EXI_LAZY_UNLINKED, EXI_LAZY_LINKING, EXI_LAZY_LINKED };

/* Initialises l as a root: stop not requested, nothing followed (an owner
 * that forwards stop requests itself leaves it so, and never calls
 * exi_lazy_stop_unfollow).  lazy: sources below
 * may follow l lazily (requests on l are then counted); false: l behaves
 * as a plain source.  fire: what a parent's request does once
 * exi_lazy_stop_follow linked l (NULL: requests stop on l); the owner's
 * hook to hold itself alive across that request. */
static inline void exi_lazy_stop_init(exi_lazy_stop *l, bool lazy, void (*fire)(exi_lazy_stop *l)) {
    /* Only what a plain root needs and follow does not set: a fork's start
     * pays for every store.  (stopping_thread is read only while a request
     * runs a callback, which it names first; link, down and epoch are set
     * by exi_lazy_stop_follow or before they are read.) */
    l->source.state = lazy ? EXI_STOP_LAZY : 0;
    l->source.head = NULL;
    l->source.running = NULL;
    l->up = NULL;
    l->linked = EXI_LAZY_LINKED;
    l->fire = fire;
}

/* For stop_token.c and the inline functions here: the process-wide count
 * of requests begun on lazy sources. */
extern uint64_t exi_lazy_stops_begun;

/* Links l (and the unlinked sources above it) to the chain. */
void exi_lazy_stop_link(exi_lazy_stop *l);
/* exi_lazy_stop_follow of a parent that is not a lazy source. */
bool exi_lazy_stop_follow_plain(exi_lazy_stop *l, ex_stop_token parent);
/* Whether stop was requested above l (its own flag is the caller's to
 * check): the walk, unless l's epoch still holds. */
bool exi_lazy_stop_above(exi_lazy_stop *l);

/* At the owner's start, on the thread that connected it (its children
 * may hold l's token since connect, but their callbacks come at their
 * start): makes l follow `parent`.  A lazy parent is followed lazily
 * (nothing registered); any other is linked now.  Returns whether stop was
 * already requested on parent (then fire may have run, and the owner
 * starts nothing).  Inline: a recursion calls it once a fork. */
static inline bool exi_lazy_stop_follow(exi_lazy_stop *l, ex_stop_token parent) {
    ex_stop_source *p = parent.src;
    if (!p || !(exi_load_rlx_u32(&p->state) & EXI_STOP_LAZY)) return exi_lazy_stop_follow_plain(l, parent);
    exi_lazy_stop *up = (exi_lazy_stop *)(void *)p;
    /* The parent's epoch covers the chain above it; its own flag is read
     * after that epoch: together they make l's epoch valid. */
    uint64_t epoch = exi_load_acq_u64(&up->epoch);
    exi_store_rlx_u64(&l->epoch, epoch);
    l->up = up;
    exi_store_rlx_u32(&l->linked, EXI_LAZY_UNLINKED);
    /* A callback registered on l before its start (at a child's connect)
     * found it linked: link it now, so that the parent's requests reach it. */
    if (__builtin_expect(l->source.head != NULL, 0)) exi_lazy_stop_link(l);
    if (exi_load_acq_u32(&p->state) & EXI_STOP_REQUESTED) return true;
    return exi_load_acq_u64(&exi_lazy_stops_begun) != epoch && exi_lazy_stop_above(l);
}

/* Whether l may have a callback registered on its parent: its owner's
 * completion then calls exi_lazy_stop_unfollow.  Once no one below l can
 * link it (its children arrived), the answer is final. */
static inline bool exi_lazy_stop_is_linked(const exi_lazy_stop *l) {
    return exi_load_acq_u32(&l->linked) == EXI_LAZY_LINKED;
}

/* At the owner's completion: takes l's link off its parent, by the rule
 * of ex_stop_callback_deregister (waits for a request running it on
 * another thread). */
static inline void exi_lazy_stop_unfollow(exi_lazy_stop *l) {
    if (exi_lazy_stop_is_linked(l)) ex_stop_callback_deregister(&l->link);
}

/* The token of l. */
static inline ex_stop_token exi_lazy_stop_token(exi_lazy_stop *l) { return ex_stop_source_token(&l->source); }

/* For stop_token.c: the process-wide counts of requests on lazy sources
 * (begun before the flag, done after it). */
void exi_lazy_stop_begin(void);
void exi_lazy_stop_done(void);

#endif
