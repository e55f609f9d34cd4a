/* SPDX-License-Identifier: MIT */
/* pool_timers.c - the pool's timers (cexec/timer.h), folded into the
 * workers' parking.  docs/time.md explains the design; model/timer.pml
 * checks the protocol.
 *
 * One heap per pool under timers_mu; next_deadline mirrors its earliest
 * deadline for readers without the lock.  No thread of its own: workers
 * fire due timers between items, and of the workers that park, one (the
 * keeper) parks only until next_deadline; the others park until woken.
 *
 * No lost wake-up, by two store-then-load pairs:
 *   - a parker sets its idle bit, then reads next_deadline; an armer
 *     stores next_deadline, then reads the idle mask: one of them sees
 *     the other's store, so a parker that read no deadline is woken
 *     (nudged: its idle bit stays, so it is not taken for claimed for
 *     work, and it parks again at once as keeper);
 *   - a keeper takes the role (cas on keeper), then reads next_deadline
 *     again; an armer stores next_deadline, then reads keeper: a keeper
 *     that read an older, later deadline is woken to read it again.
 * Stores are read-modify-writes (full barriers on every target) on both
 * sides.
 *
 * On a virtual clock (core/exi_clock.h) next_deadline stays unset: no
 * worker keeps time or fires a timer by itself; the clock's advance takes
 * due timers and posts their completions to the pool as items. */
#include <stdalign.h>

#include "base/exi_atomic.h"
#include "base/exi_fork.h"
#include "base/exi_test_hooks.h"
#include "core/exi_error.h"
#include "resources/exi_pool_impl.h"

/* Caller holds timers_mu: next_deadline follows the heap.  An earlier
 * deadline is stored with a full barrier (the armer's side of the two
 * pairs above); a later one needs none: nobody must wake for it. */
static void publish_earliest(ex_pool *p) {
    if (p->clock) return;  /* nobody waits for a virtual deadline */
    exi_timer *t = exi_timer_heap_min(&p->timers);
    uint64_t nd = t ? (uint64_t)t->deadline : EXI_NO_DEADLINE;
    (void)exi_fas_u64(&p->next_deadline, nd);
}

/* ----------------------------------------------------------------- firing */

enum { FIRE_BATCH = 32 };

void exi_pool_fire_due(ex_pool *p) {
    exi_timer *due[FIRE_BATCH];
    size_t n = 0;
    int64_t now = ex_now();
    pthread_mutex_lock(&p->timers_mu);
    for (exi_timer *t; n < FIRE_BATCH && (t = exi_timer_heap_min(&p->timers)) && t->deadline <= now;) {
        exi_timer_heap_remove(&p->timers, t);
        due[n++] = t;
    }
    if (n) publish_earliest(p);
    pthread_mutex_unlock(&p->timers_mu);
    /* More than a batch due: the next turn of the worker's loop fires them. */
    for (size_t i = 0; i < n; i++) exi_timer_fire(due[i]);
}

void exi_pool_drop_timers(ex_pool *p) {
    for (;;) {
        pthread_mutex_lock(&p->timers_mu);
        exi_timer *t = exi_timer_heap_min(&p->timers);
        if (t) {
            exi_timer_heap_remove(&p->timers, t);
            publish_earliest(p);
        }
        pthread_mutex_unlock(&p->timers_mu);
        if (!t) return;
        exi_timer_drop(t);
    }
}

/* ---------------------------------------------------------------- keeping */

uint64_t exi_pool_keeper_deadline(exi_worker *me) {
    ex_pool *p = me->pool;
    /* Read after the idle bit was set (park): an armer that stores after
     * this read sees the bit and wakes a parked worker. */
    if (exi_load_acq_u64(&p->next_deadline) == EXI_NO_DEADLINE) return EXI_NO_DEADLINE;
    uint32_t free_role = 0;
    if (!exi_cas_u32(&p->keeper, &free_role, me->index + 1)) return EXI_NO_DEADLINE;  /* another keeps time */
    /* Read again after taking the role: an armer that stores after this
     * read sees the role and wakes the keeper, unless the keeper said it
     * sleeps until no later than the new deadline anyway. */
    uint64_t nd = exi_load_acq_u64(&p->next_deadline);
    (void)exi_fas_u64(&p->keeper_until, nd);
    if (nd == EXI_NO_DEADLINE) exi_pool_keeper_leave(me, false);
    return nd;
}

void exi_pool_keeper_leave(exi_worker *me, bool claimed_for_work) {
    ex_pool *p = me->pool;
    uint32_t mine = me->index + 1;
    if (exi_load_rlx_u32(&p->keeper) == mine) {
        (void)exi_fas_u64(&p->keeper_until, 0);  /* unpublished before the role goes */
        (void)exi_cas_u32(&p->keeper, &mine, 0);
    }
    /* Claimed for work while timers are armed: hand the role to a parked
     * worker, so that a long item does not make the timers late.  Nudged,
     * not claimed: a claimed keeper would hand it on in turn, and so on
     * (model/timer.pml, BROKEN_CLAIMING_HANDOFF). */
    if (claimed_for_work && exi_load_rlx_u64(&p->next_deadline) != EXI_NO_DEADLINE) exi_pool_nudge_idle(p, me);
}

/* A new earliest deadline: the keeper waits for a later one, or nobody
 * keeps time: wake the keeper to read it again, else a parked worker to
 * take the role.  Awake workers read it before they park: a worker of
 * the pool that armed it defers the wake-up to when it goes on to more
 * work (a timer re-armed from its own completion then costs no wake-up:
 * the worker parks next and keeps time itself). */
static void kick_keeper(ex_pool *p, uint64_t deadline) {
    uint32_t k = exi_load_acq_u32(&p->keeper);
    if (k) {
        /* A keeper that sleeps until no later than deadline wakes for it
         * anyway: an arm-and-cancel costs no system call then. */
        uint64_t until = exi_load_acq_u64(&p->keeper_until);
        if (until == 0 || deadline < until) exi_event_inc(&p->workers[k - 1].event);
        return;
    }
    exi_worker *me = exi_pool_current();
    if (me && me->pool == p && !me->lent) me->timer_kick = true;
    else exi_pool_nudge_idle(p, NULL);
}

void exi_pool_kick_unkept(ex_pool *p) {
    if (!exi_load_acq_u32(&p->keeper) && exi_load_rlx_u64(&p->next_deadline) != EXI_NO_DEADLINE)
        exi_pool_nudge_idle(p, exi_pool_current());
}

/* ------------------------------------------------------------ arm, cancel */

void (*exi_pool_timer_armed_hook)(void);

static enum exi_timer_arm pool_arm(void *self, exi_timer_op *op) {
    ex_pool *p = self;
    enum exi_timer_arm a = EXI_TIMER_ARMED;
    bool due_now = false;
    pthread_mutex_lock(&p->timers_mu);
    if (op->cancel_requested) {
        a = EXI_TIMER_REFUSED_STOPPED;
    } else if (exi_load_acq_u32(&p->stopping) || p->fork_gen != exi_fork_generation()) {
        a = EXI_TIMER_REFUSED_SHUTDOWN;  /* shutdown drops timers after `stopping`, under this lock */
    } else if (p->clock && op->node.deadline <= exi_clock_now(p->clock)) {
        /* Due on a virtual clock, which no worker watches: it fires now,
         * as a run loop or a manual scheduler would fire it, not at the
         * next advance. */
        due_now = true;
    } else {
        exi_timer_heap_insert(&p->timers, &op->node);
        if (exi_timer_heap_min(&p->timers) == &op->node && !p->clock) {
            publish_earliest(p);
            /* Still under the lock: once it is released the timer may fire
             * and complete, its operation go away and, for a thread that
             * saw the completion, the pool too (destroy's drop of the
             * timers takes this lock first). */
            kick_keeper(p, (uint64_t)op->node.deadline);
        }
    }
    pthread_mutex_unlock(&p->timers_mu);
    if (due_now) {
        /* Not in the heap: a cancel only marks it, and fired() sees the
         * stop.  The post is the last touch of op and p. */
        ex_error e = ex_post(ex_pool_scheduler(p), &op->work);
        if (e.code) exi_error_drop(e);
        return e.code ? EXI_TIMER_REFUSED_SHUTDOWN : EXI_TIMER_ARMED;
    }
    if (a == EXI_TIMER_ARMED) {
        void (*hook)(void) = exi_load_rlx_ptr((void *const *)&exi_pool_timer_armed_hook);
        if (hook) hook();
    }
    return a;
}

static bool pool_cancel(void *self, exi_timer_op *op) {
    ex_pool *p = self;
    pthread_mutex_lock(&p->timers_mu);
    bool armed = op->node.in_heap;
    if (armed) {
        bool was_earliest = exi_timer_heap_min(&p->timers) == &op->node;
        exi_timer_heap_remove(&p->timers, &op->node);
        if (was_earliest) publish_earliest(p);  /* a later deadline: the keeper wakes early, once */
    } else {
        op->cancel_requested = true;
    }
    pthread_mutex_unlock(&p->timers_mu);
    return armed;
}

static const exi_timer_service_vtable pool_timers = { pool_arm, pool_cancel };

ex_error exi_pool_connect_at(void *self, ex_timer_when when, ex_receiver r, void *storage) {
    exi_timer_op_init(storage, &pool_timers, self, ((ex_pool *)self)->clock, when, r);
    return ex_ok();
}

/* ------------------------------------------------------ a virtual clock */

static int64_t clock_earliest(void *self) {
    ex_pool *p = self;
    pthread_mutex_lock(&p->timers_mu);
    exi_timer *t = exi_timer_heap_min(&p->timers);
    int64_t d = t ? t->deadline : INT64_MAX;
    pthread_mutex_unlock(&p->timers_mu);
    return d;
}

/* The due timer's completion goes to a worker as an item (its work: fired
 * when run, dropped if the pool drops it). */
static bool clock_fire_due(void *self, int64_t now) {
    ex_pool *p = self;
    pthread_mutex_lock(&p->timers_mu);
    exi_timer *t = exi_timer_heap_min(&p->timers);
    if (t && t->deadline <= now) exi_timer_heap_remove(&p->timers, t);
    else t = NULL;
    pthread_mutex_unlock(&p->timers_mu);
    if (!t) return false;
    ex_error e = ex_post(ex_pool_scheduler(p), &exi_timer_op_of(t)->work);
    if (e.code) {  /* refused (a pool inherited across fork): dropped once the advance let go of the clock */
        exi_error_drop(e);
        exi_clock_refused(p->clock, &exi_timer_op_of(t)->work);
    }
    return true;
}

static size_t clock_armed(void *self) {
    ex_pool *p = self;
    pthread_mutex_lock(&p->timers_mu);
    size_t n = p->timers.count;
    pthread_mutex_unlock(&p->timers_mu);
    return n;
}

static const exi_clock_client_vt pool_clock_client = { clock_earliest, clock_fire_due, clock_armed };

ex_error exi_pool_clock_attach(ex_pool *p) {
    return p->clock ? exi_clock_attach(p->clock, p, &pool_clock_client) : ex_ok();
}

void exi_pool_clock_detach(ex_pool *p) {
    if (p->clock) exi_clock_detach(p->clock, p);
}

void exi_pool_clock_release(ex_pool *p) {
    if (p->clock) exi_clock_release(p->clock);
}
