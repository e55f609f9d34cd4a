/* stop_token.c - in-place stop source with the [stoptoken.inplace] rules.
 *
 * The state word holds STOP (stop requested) and LOCK (the callback list is
 * being changed).  request_stop runs callbacks one at a time with the lock
 * released, so a callback may deregister itself or others.  A deregistration
 * that finds its callback already taken from the list either waits for it
 * to finish (it runs on another thread) or, when it runs on this thread,
 * tells request_stop not to touch the callback again. */
#include <sched.h>

#include "exi_atomic.h"
#include "exi_core.h"

enum { STOP = 1u, LOCK = 2u };

void ex_stop_source_init(ex_stop_source *s) {
    s->state = 0;
    s->head = NULL;
    s->stopping_thread = NULL;
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
    return (exi_load_acq_u32(&s->state) & STOP) != 0;
}

bool ex_stop_token_stop_requested(ex_stop_token t) {
    return t.src && ex_stop_source_stop_requested(t.src);
}

bool ex_stop_source_request_stop(ex_stop_source *s) { return exi_stop_source_request_stop_counted(s, NULL, NULL); }

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
        bool removed = false;
        cb->removed_during_run = &removed;
        unlock_list(s, STOP);
        cb->fn(cb);
        if (!removed) {
            cb->removed_during_run = NULL;
            exi_store_rel_u32(&cb->done, 1);
        }
        lock_list(s);
    }
    unlock_list(s, STOP);
    return true;
}

bool ex_stop_callback_register(ex_stop_callback *cb, ex_stop_token t, ex_stop_fn fn) {
    cb->fn = fn;
    cb->next = cb->prev = NULL;
    cb->removed_during_run = NULL;
    cb->done = 0;
    cb->queued = 0;
    cb->src = NULL;
    ex_stop_source *s = t.src;
    if (!s) return false;
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

void ex_stop_callback_deregister(ex_stop_callback *cb) {
    ex_stop_source *s = cb->src;
    if (!s) return;
    uint32_t st = lock_list(s);
    if (cb->queued) {
        if (cb->prev) cb->prev->next = cb->next;
        else s->head = cb->next;
        if (cb->next) cb->next->prev = cb->prev;
        cb->queued = 0;
        unlock_list(s, st & STOP);
        cb->src = NULL;
        return;
    }
    /* Taken by request_stop: running now or finished. */
    bool same_thread = s->stopping_thread == exi_thread_id();
    unlock_list(s, st & STOP);
    if (same_thread) {
        if (cb->removed_during_run) *cb->removed_during_run = true;
    } else {
        for (unsigned spins = 0; !exi_load_acq_u32(&cb->done); spins++) {
            if (spins < 64) exi_pause();
            else sched_yield();
        }
    }
    cb->src = NULL;
}
