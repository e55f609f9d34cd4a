/* SPDX-License-Identifier: MIT */
/* stop_token.c - in-place stop source with the [stoptoken.inplace] rules.
 *
 * The state word holds STOP (stop requested), LOCK (the callback list is
 * being changed) and LAZY (a fork-join's source that follows its parent
 * on demand, core/exi_lazy_stop.h: its checks, registrations and requests
 * take that into account).  request_stop runs callbacks one at a time with the lock
 * released, so a callback may deregister itself or others, and it names the
 * one it runs in the source (`running`), never in the callback: once a
 * callback returned, request_stop does not touch it again (it may have been
 * freed).  A deregistration that finds its callback taken from the list
 * waits while the source still names it as running on another thread; on
 * the requesting thread (from inside the callback) it returns at once and
 * writes nothing to the callback, so the callback's own deregistration and
 * its owner's, on another thread, may overlap. */
#include <sched.h>

#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "base/exi_test_hooks.h"
#include "base/exi_thread.h"
#include "core/exi_lazy_stop.h"

enum { STOP = EXI_STOP_REQUESTED, LOCK = EXI_STOP_LOCKED, LAZY = EXI_STOP_LAZY };

void ex_stop_source_init(ex_stop_source *s) {
    if (!s) return;
    s->state = 0;
    s->head = NULL;
    s->stopping_thread = NULL;
    s->running = NULL;
}

/* Takes LOCK; returns the state seen (without LOCK). */
static uint32_t lock_list(ex_stop_source *s) {
    uint32_t old = exi_load_rlx_u32(&s->state);
    for (;;) {
        if (old & LOCK) {
            exi_pause();
            old = exi_load_rlx_u32(&s->state);
            continue;
        }
        if (exi_cas_u32(&s->state, &old, old | LOCK)) return old;
    }
}

/* Releases LOCK, leaving `state` (the bits without LOCK). */
static void unlock_list(ex_stop_source *s, uint32_t state) {
    exi_store_rel_u32(&s->state, state);
}

bool ex_stop_source_stop_requested(const ex_stop_source *s) {
    if (!s) return false;
    uint32_t st = exi_load_acq_u32(&s->state);
    if (st & STOP) return true;
    /* A lazy source also answers for the chain it follows unlinked. */
    return (st & LAZY) && exi_lazy_stop_above((exi_lazy_stop *)(uintptr_t)s);
}

bool ex_stop_token_stop_requested(ex_stop_token t) {
    return t.src && ex_stop_source_stop_requested(t.src);
}

void (*exi_stop_counted_hook)(void);
void (*exi_stop_begun_hook)(void);
void (*exi_stop_link_hook)(void);

bool ex_stop_source_request_stop(ex_stop_source *s) {
    if (!s) return false;
    uint32_t old = exi_load_rlx_u32(&s->state);
    /* A request on a lazy source is counted (exi_lazy_stop.h). */
    bool counted = (old & LAZY) != 0;
    if (counted) {
        exi_lazy_stop_begin();  /* before anyone can see the flag */
        void (*hook)(void) = exi_load_rlx_ptr((void *const *)&exi_stop_begun_hook);
        if (hook) hook();
    }
    for (;;) {
        if (old & STOP) {
            if (counted) exi_lazy_stop_done();  /* keeps begun - done the requests half way */
            return false;
        }
        if (old & LOCK) {
            exi_pause();
            old = exi_load_rlx_u32(&s->state);
            continue;
        }
        if (exi_cas_u32(&s->state, &old, old | STOP | LOCK)) break;
    }
    uint32_t stopped = (old & LAZY) | STOP;
    if (counted) {
        void (*hook)(void) = exi_load_rlx_ptr((void *const *)&exi_stop_counted_hook);
        if (hook) hook();
        exi_lazy_stop_done();  /* after the flag, before any callback */
    }
    s->stopping_thread = exi_thread_id();
    while (s->head) {
        ex_stop_callback *cb = s->head;
        s->head = cb->next;
        if (s->head) s->head->prev = NULL;
        cb->queued = 0;
        exi_store_rel_ptr(&s->running, cb);
        unlock_list(s, stopped);
        cb->fn(cb);  /* cb may be gone after this: not touched again */
        lock_list(s);
        /* Releases the deregistrations waiting for cb (they load acquire). */
        exi_store_rel_ptr(&s->running, NULL);
    }
    unlock_list(s, stopped);
    return true;
}

bool ex_stop_callback_register(ex_stop_callback *cb, ex_stop_token t, ex_stop_fn fn) {
    if (!cb) return false;
    cb->fn = fn;
    cb->next = cb->prev = NULL;
    cb->queued = 0;
    cb->src = NULL;  /* deregister of a callback never registered: nothing */
    ex_stop_source *s = t.src;
    if (!s || !fn) return false;
    /* A lazy source follows its parents from now on: every request above
     * reaches its flag, and through it cb. */
    if ((exi_load_rlx_u32(&s->state) & LAZY) && !exi_lazy_stop_is_linked((exi_lazy_stop *)(void *)s))
        exi_lazy_stop_link((exi_lazy_stop *)(void *)s);
    if (ex_stop_source_stop_requested(s)) {
        fn(cb);
        return true;
    }
    uint32_t st = lock_list(s);
    if (st & STOP) {
        unlock_list(s, st);
        fn(cb);
        return true;
    }
    cb->src = s;
    cb->next = s->head;
    if (s->head) s->head->prev = cb;
    s->head = cb;
    cb->queued = 1;
    unlock_list(s, st);
    return false;
}

/* Waits until request_stop, on another thread, has returned from cb. */
static void wait_until_returned(ex_stop_source *s, ex_stop_callback *cb) {
    for (unsigned spins = 0; exi_load_acq_ptr(&s->running) == cb; spins++) {
        if (spins < 64) exi_pause();
        else sched_yield();
    }
}

void ex_stop_callback_deregister(ex_stop_callback *cb) {
    if (!cb) return;
    ex_stop_source *s = cb->src;
    if (!s) return;  /* never in a list, or deregistered for good already */
    uint32_t st = lock_list(s);
    if (cb->queued) {
        if (cb->prev) cb->prev->next = cb->next;
        else s->head = cb->next;
        if (cb->next) cb->next->prev = cb->prev;
        cb->queued = 0;
    }
    /* Not queued and not running means returned: no callback runs twice. */
    bool running = exi_load_rlx_ptr(&s->running) == cb;
    bool inside = running && s->stopping_thread == exi_thread_id();
    unlock_list(s, st);
    /* From inside fn: its owner may be deregistering cb right now on another
     * thread (reading cb->src), so leave cb alone. */
    if (inside) return;
    if (running) wait_until_returned(s, cb);
    /* fn has returned or will never run, and any call from inside it
     * happened before: later calls need not touch the source. */
    cb->src = NULL;
}

/* ------------------------------------------------------ lazy sources
 * (core/exi_lazy_stop.h has the protocol) */

/* Requests on lazy sources: begun before the flag can be seen, done once
 * it is set and before any callback runs. */
uint64_t exi_lazy_stops_begun;
static uint64_t stops_done;

void exi_lazy_stop_begin(void) { (void)exi_faa_u64(&exi_lazy_stops_begun, 1); }
void exi_lazy_stop_done(void) { (void)exi_faa_u64(&stops_done, 1); }

/* A parent's request reached l. */
static void link_fired(ex_stop_callback *cb) {
    exi_lazy_stop *l = EXI_CONTAINER_OF(cb, exi_lazy_stop, link);
    if (l->fire) l->fire(l);
    else (void)ex_stop_source_request_stop(&l->source);
}

bool exi_lazy_stop_follow_plain(exi_lazy_stop *l, ex_stop_token parent) {
    /* l's chain (the lazy sources above it) is empty: up stays NULL.  Its
     * epoch is what the sources below inherit (they read l's flag after
     * it): a `done` read now. */
    exi_store_rlx_u64(&l->epoch, exi_load_acq_u64(&stops_done));
    if (!parent.src) {  /* never stopped: a root */
        l->link.src = NULL;  /* (its unfollow finds nothing to deregister) */
        return false;
    }
    /* A plain source: linked now; its requests reach l by the link alone. */
    return ex_stop_callback_register(&l->link, parent, link_fired);
}

bool exi_lazy_stop_above(exi_lazy_stop *l) {
    if (!l->up) return false;  /* followed nothing lazily: its own flag is all */
    uint64_t epoch = exi_load_acq_u64(&l->epoch);
    if (exi_load_acq_u64(&exi_lazy_stops_begun) == epoch) return false;
    uint64_t done = exi_load_acq_u64(&stops_done);  /* before the flags it vouches for */
    /* Every lazy source above, linked or not: a linked one's flag may wait
     * for a request running on its parent to reach its link, and an
     * answer must not go back to "not stopped" once a check gave "stopped"
     * (flags stay set; the sources above stay the same). */
    for (const exi_lazy_stop *x = l->up; x; x = x->up)
        if (exi_load_acq_u32(&x->source.state) & EXI_STOP_REQUESTED) return true;
    /* Any thread may store: every value stored is a valid epoch. */
    exi_store_rel_u64(&l->epoch, done);
    return false;
}

/* Waits until another thread finished linking x. */
static void wait_linked(const exi_lazy_stop *x) {
    for (unsigned spins = 0; exi_load_acq_u32(&x->linked) != EXI_LAZY_LINKED; spins++) {
        if (spins < 64) exi_pause();
        else sched_yield();  /* the linking thread was preempted */
    }
}

void exi_lazy_stop_link(exi_lazy_stop *l) {
    /* Claims the unlinked sources from l up (iteratively: a recursion may
     * be deep), each remembering the one below, to the first that is
     * linked or being linked by another thread (which claims only above
     * it: no cycle of waits). */
    exi_lazy_stop *top = NULL;
    for (exi_lazy_stop *x = l;;) {
        uint32_t st = EXI_LAZY_UNLINKED;
        if (!exi_cas_u32(&x->linked, &st, EXI_LAZY_LINKING)) {
            if (st == EXI_LAZY_LINKING) wait_linked(x);
            break;
        }
        x->down = top;
        top = x;
        x = x->up;  /* an unlinked source has a parent */
    }
    /* Then links them top down: each registers on a linked parent (a
     * parent already stopped fires the link here). */
    while (top) {
        exi_lazy_stop *below = top->down;
        (void)ex_stop_callback_register(&top->link, exi_lazy_stop_token(top->up), link_fired);
        void (*hook)(void) = exi_load_rlx_ptr((void *const *)&exi_stop_link_hook);
        if (hook) hook();
        exi_store_rel_u32(&top->linked, EXI_LAZY_LINKED);
        top = below;
    }
}
