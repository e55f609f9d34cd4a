/* SPDX-License-Identifier: MIT */
/* pool_poll.c - pollers (cexec/poller.h): functions the pool's agents call
 * between items, instead of idling, and before parking, while they have
 * work pending.  docs/pool.md, "Pollers", has the model.
 *
 * No new wake-up protocol: that a poll happens at all rests on the pool's
 * timers.  An activation from outside the pool arms the poller's wake-up
 * timer (model/timer.pml checks that an armed timer always fires); one
 * from a worker arms it too, with the timers' own deferral (the worker
 * wakes a timekeeper only if it goes on to other work); one from a lent
 * caller arms it when the caller stops waiting.  Everything else (polls
 * between items, on spin rounds, by the waiting caller) only makes the
 * poll come sooner.
 *
 * The activation that cannot be lost: activate sets ACTIVE and AGAIN
 * together; a poll clears AGAIN before it calls fn, and its EX_POLL_IDLE
 * clears ACTIVE only by a CAS from exactly ACTIVE.  An activation during
 * the poll left AGAIN set, the CAS fails, and the poller stays active.
 *
 * One agent at a time: `busy` is taken by CAS around each poll, and by
 * add and remove around their writes of fn, so a remove that returns
 * knows fn is not running (tests/stress/poll_stress.c). */
#include <sched.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "core/exi_error.h"
#include "resources/exi_pool_impl.h"

/* Between items, a worker polls when its last poll is this old. */
#define POLL_GAP_NS 4000u
#define BACKOFF_MIN_NS (50u * 1000u)
#define BACKOFF_MAX_NS (1000u * 1000u)

/* The poller whose fn runs on this thread now (a remove from inside it
 * must not wait for itself). */
static EXI_TLS ex_pool_poller *tls_polling;

static bool take_busy(ex_pool_poller *q) {
    uint32_t free_ = 0;
    return exi_load_rlx_u32(&q->busy) == 0 && exi_cas_u32(&q->busy, &free_, 1);
}

static void wait_busy(ex_pool_poller *q) {
    while (!take_busy(q)) sched_yield();  /* a poll is running: polls are short */
}

/* ---------------------------------------------------------- the timer */

static void arm(ex_pool_poller *q, uint64_t delay_ns);

static void timer_fired(void *self, const ex_value *v, size_t n);

static void timer_error(void *self, ex_error e) {
    exi_error_drop(e);  /* refused: the pool shuts down, nobody polls any more */
    exi_store_rel_u32(&((ex_pool_poller *)self)->armed, 0);
}

static void timer_stopped(void *self) { exi_store_rel_u32(&((ex_pool_poller *)self)->armed, 0); }

static const ex_receiver_vtable timer_receiver_vt = { timer_fired, timer_error, timer_stopped, NULL, NULL };

/* Arms q's wake-up timer unless it is armed already.  The pool's timers
 * decide whom the arm wakes (pool_timers.c, kick_keeper). */
static void arm(ex_pool_poller *q, uint64_t delay_ns) {
    uint32_t unarmed = 0;
    if (exi_load_rlx_u32(&q->armed) || !exi_cas_u32(&q->armed, &unarmed, 1)) return;
    ex_timer_when when = { (int64_t)delay_ns, true };
    ex_receiver r = { &timer_receiver_vt, q };
    ex_error e = exi_pool_connect_at(q->pool, when, r, &q->timer);
    if (e.code) {
        exi_error_drop(e);
        exi_store_rel_u32(&q->armed, 0);
        return;
    }
    ex_start(&q->timer.base);
}

_Static_assert(EX_POOL_POLLERS_MAX <= 32, "polls_active is a 32-bit mask of the slots");

/* q's bit in its pool's polls_active mask. */
static uint32_t slot_bit(const ex_pool_poller *q) { return 1u << (unsigned)(q - q->pool->polls); }

/* q went idle (its state CAS'd from ACTIVE to 0 by the poll holding busy):
 * its bit leaves the mask.  An activation may come between the CAS and
 * the clear: its state fetch_or came first and its own mask fetch_or may
 * have come before the clear, which would leave an active poller out of
 * the mask (nobody polls it, nobody arms its timer before parking).  So
 * the state is read again after the clear, and the bit put back for an
 * active poller; every step is a full barrier (poll.pml,
 * BROKEN_MASK_NO_RECHECK). */
static void leave_mask(ex_pool_poller *q) {
    (void)exi_fas_and_u32(&q->pool->polls_active, ~slot_bit(q));
    if (exi_load_acq_u32(&q->state) & EXI_POLL_ACTIVE) (void)exi_fas_or_u32(&q->pool->polls_active, slot_bit(q));
}

/* ----------------------------------------------------------- one poll */

typedef enum poll_outcome { NOT_POLLED, POLLED_IDLE, POLLED_PENDING, POLLED_PROGRESS } poll_outcome;

/* Polls q on the calling agent unless another agent is polling it or it is
 * inactive.  from_timer: its wake-up timer fired, so a poll that finds
 * nothing backs off further. */
static poll_outcome poll_one(ex_pool_poller *q, bool from_timer) {
    if (!(exi_load_rlx_u32(&q->state) & EXI_POLL_ACTIVE) || !take_busy(q)) return NOT_POLLED;
    ex_poll_fn fn = q->fn;
    /* AGAIN is cleared only when set (a locked instruction less on the
     * common poll); one set after this load stays, and keeps q active. */
    uint32_t was = exi_load_acq_u32(&q->state);
    if (was & EXI_POLL_AGAIN) was = exi_fas_and_u32(&q->state, ~EXI_POLL_AGAIN);
    if (!fn || !(was & EXI_POLL_ACTIVE)) {
        exi_store_rel_u32(&q->busy, 0);
        return NOT_POLLED;
    }
    ex_pool_poller *outer = tls_polling;
    tls_polling = q;
    ex_poll_result r = fn(q->ctx);
    tls_polling = outer;
    if (q->removed) {  /* removed by its own poll: the slot is free, touch nothing else */
        q->removed = false;
        exi_store_rel_u32(&q->busy, 0);
        return POLLED_PROGRESS;
    }
    poll_outcome out = r == EX_POLL_PROGRESS ? POLLED_PROGRESS : r == EX_POLL_IDLE ? POLLED_IDLE : POLLED_PENDING;
    if (r == EX_POLL_IDLE) {
        uint32_t active = EXI_POLL_ACTIVE;
        if (exi_cas_u32(&q->state, &active, 0)) leave_mask(q);
        else out = POLLED_PENDING;  /* activated meanwhile */
    }
    uint64_t b = exi_load_rlx_u64(&q->backoff_ns);
    if (r == EX_POLL_PROGRESS || (was & EXI_POLL_AGAIN)) b = BACKOFF_MIN_NS;
    else if (from_timer && r == EX_POLL_PENDING) b = b >= BACKOFF_MAX_NS / 2 ? BACKOFF_MAX_NS : 2 * b;
    exi_store_rlx_u64(&q->backoff_ns, b);
    exi_store_rel_u32(&q->busy, 0);
    return out;
}

/* The wake-up: on the worker that fired it.  If the poller stays active
 * the worker re-arms it before it parks (exi_pool_poll_before_park). */
static void timer_fired(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    ex_pool_poller *q = self;
    exi_store_rel_u32(&q->armed, 0);
    (void)poll_one(q, true);
}

/* --------------------------------------------------------- the agents */

bool exi_pool_poll_all(ex_pool *p, exi_worker *me) {
    bool moved = false;
    for (uint32_t m = exi_load_rlx_u32(&p->polls_active); m; m &= m - 1)
        moved |= poll_one(&p->polls[__builtin_ctz(m)], false) == POLLED_PROGRESS;
    /* The gap between items is a worker's; a lent caller polls on every
     * idle turn of its wait and needs no clock. */
    if (me && !me->lent) me->last_poll_ns = exi_now_ns();
    return moved;
}

void exi_pool_poll_between(exi_worker *me) {
    uint64_t now = exi_now_ns();
    if (now - me->last_poll_ns < POLL_GAP_NS) return;
    (void)exi_pool_poll_all(me->pool, me);
}

static void arm_active(ex_pool *p, bool backoff) {
    for (uint32_t m = exi_load_acq_u32(&p->polls_active); m; m &= m - 1) {
        ex_pool_poller *q = &p->polls[__builtin_ctz(m)];
        arm(q, backoff ? exi_load_rlx_u64(&q->backoff_ns) : BACKOFF_MIN_NS);
    }
}

bool exi_pool_poll_before_park(exi_worker *me) {
    if (exi_pool_poll_all(me->pool, me)) return true;
    arm_active(me->pool, true);
    return false;
}

void exi_pool_polls_hand_over(ex_pool *p) {
    if (exi_pool_polling(p)) arm_active(p, false);
}

/* ------------------------------------------------------------ the API */

/* A slot is claimed by whoever finds it free holding its busy flag: a
 * slot whose poll is still leaving (a remove from inside) is skipped. */
ex_error ex_pool_poller_add(ex_pool *p, ex_poll_fn fn, void *ctx, ex_pool_poller **out) {
    if (!out) return ex_err(EX_EINVAL, "ex_pool_poller_add: NULL out");
    *out = NULL;
    if (!p || !fn) return ex_err(EX_EINVAL, "ex_pool_poller_add: NULL pool or function");
    if (exi_load_acq_u32(&p->stopping)) return ex_err(EX_ESHUTDOWN, "ex_pool_poller_add: the pool is shutting down");
    for (unsigned i = 0; i < EX_POOL_POLLERS_MAX; i++) {
        ex_pool_poller *q = &p->polls[i];
        if (!take_busy(q)) continue;
        bool free_slot = q->fn == NULL;
        if (free_slot) {
            q->ctx = ctx;
            q->fn = fn;
            exi_store_rlx_u64(&q->backoff_ns, BACKOFF_MIN_NS);
        }
        exi_store_rel_u32(&q->busy, 0);
        if (free_slot) {
            *out = q;
            return ex_ok();
        }
    }
    return ex_err(EX_EBUSY, "ex_pool_poller_add: the pool holds EX_POOL_POLLERS_MAX pollers");
}

void ex_pool_poller_activate(ex_pool_poller *q) {
    if (!q) return;
    uint32_t was = exi_fas_or_u32(&q->state, EXI_POLL_ACTIVE | EXI_POLL_AGAIN);
    if (was & EXI_POLL_ACTIVE) return;  /* its polls go on; AGAIN resets their backoff */
    ex_pool *p = q->pool;
    (void)exi_fas_or_u32(&p->polls_active, slot_bit(q));
    /* A thread waiting in ex_sync_wait polls while it waits, and arms the
     * timer when it stops (exi_lend_close). */
    exi_worker *me = exi_pool_current();
    if ((!me || me->pool != p) && exi_pool_lend_to(p)) return;
    arm(q, me && me->pool == p ? BACKOFF_MIN_NS : 0);
}

ex_error ex_pool_poller_remove(ex_pool_poller *q) {
    if (!q) return ex_err(EX_EINVAL, "ex_pool_poller_remove: NULL poller");
    ex_pool *p = q->pool;
    bool inside = tls_polling == q;
    if (!inside) wait_busy(q);
    q->fn = NULL;
    q->ctx = NULL;
    if (exi_fas_u32(&q->state, 0) & EXI_POLL_ACTIVE) (void)exi_fas_and_u32(&p->polls_active, ~slot_bit(q));
    if (inside) q->removed = true;  /* the poll running it releases busy */
    else exi_store_rel_u32(&q->busy, 0);
    return ex_ok();
}

void exi_pool_polls_init(ex_pool *p) {
    for (unsigned i = 0; i < EX_POOL_POLLERS_MAX; i++) p->polls[i].pool = p;
}
