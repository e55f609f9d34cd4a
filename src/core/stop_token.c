/* SPDX-License-Identifier: MIT */
/* stop_token.c - in-place stop source with the [stoptoken.inplace] rules.
 *
 * The state word holds STOP (stop requested) and LOCK (the callback list is
 * being changed).  request_stop runs callbacks one at a time with the lock
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
#include "base/exi_test_hooks.h"
#include "base/exi_thread.h"
#include "core/exi_stop.h"

enum { STOP = 1u, LOCK = 2u };

void ex_stop_source_init(ex_stop_source *s) {
    if (!s) return;
    s->state = 0;
    s->head = NULL;
    s->stopping_thread = NULL;
    s->running = NULL;
}

/* Takes LOCK; returns the state seen (with or without STOP). */
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

static void unlock_list(ex_stop_source *s, uint32_t stop_bit) {
    exi_store_rel_u32(&s->state, stop_bit);
}

bool ex_stop_source_stop_requested(const ex_stop_source *s) {
    return s && (exi_load_acq_u32(&s->state) & STOP) != 0;
}

bool ex_stop_token_stop_requested(ex_stop_token t) {
    return t.src && ex_stop_source_stop_requested(t.src);
}

bool ex_stop_source_request_stop(ex_stop_source *s) { return s && exi_stop_source_request_stop_counted(s, NULL, NULL); }

void (*exi_stop_counted_hook)(void);

bool exi_stop_source_request_stop_counted(ex_stop_source *s, uint64_t *begun, uint64_t *done) {
    if (begun) exi_faa_u64(begun, 1);  /* before anyone can see the flag */
    uint32_t old = exi_load_rlx_u32(&s->state);
    for (;;) {
        if (old & STOP) {
            if (done) exi_faa_u64(done, 1);  /* keeps begun - done the requests half way */
            return false;
        }
        if (old & LOCK) {
            exi_pause();
            old = exi_load_rlx_u32(&s->state);
            continue;
        }
        if (exi_cas_u32(&s->state, &old, STOP | LOCK)) break;
    }
    if (done) {
        void (*hook)(void) = exi_load_rlx_ptr((void *const *)&exi_stop_counted_hook);
        if (hook) hook();
        exi_faa_u64(done, 1);  /* after the flag, before any callback */
    }
    s->stopping_thread = exi_thread_id();
    while (s->head) {
        ex_stop_callback *cb = s->head;
        s->head = cb->next;
        if (s->head) s->head->prev = NULL;
        cb->queued = 0;
        exi_store_rel_ptr(&s->running, cb);
        unlock_list(s, STOP);
        cb->fn(cb);  /* cb may be gone after this: not touched again */
        lock_list(s);
        /* Releases the deregistrations waiting for cb (they load acquire). */
        exi_store_rel_ptr(&s->running, NULL);
    }
    unlock_list(s, STOP);
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
    if (ex_stop_source_stop_requested(s)) {
        fn(cb);
        return true;
    }
    uint32_t st = lock_list(s);
    if (st & STOP) {
        unlock_list(s, STOP);
        fn(cb);
        return true;
    }
    cb->src = s;
    cb->next = s->head;
    if (s->head) s->head->prev = cb;
    s->head = cb;
    cb->queued = 1;
    unlock_list(s, 0);
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
    unlock_list(s, st & STOP);
    /* From inside fn: its owner may be deregistering cb right now on another
     * thread (reading cb->src), so leave cb alone. */
    if (inside) return;
    if (running) wait_until_returned(s, cb);
    /* fn has returned or will never run, and any call from inside it
     * happened before: later calls need not touch the source. */
    cb->src = NULL;
}
