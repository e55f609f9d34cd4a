/* SPDX-License-Identifier: MIT */
/* pool.c - the work-stealing thread pool.
 *
 * Each worker owns a Chase-Lev deque (exi_deque.h) and an inbox
 * (exi_inbox.h).  Work submitted on a worker goes to its deque; work from
 * other threads goes to an inbox chosen per submitting thread.  An idle
 * worker looks in its deque, its inbox, then steals from random victims'
 * deques and inboxes, spins a bounded number of rounds, then parks on its
 * event count after setting its bit in the idle mask.  A publisher that
 * sees an idle bit claims it and wakes that one worker (wake-one).
 *
 * No lost wake-up: the sleeper sets its idle bit, passes an asymmetric
 * barrier, and looks for work again before sleeping; a publisher stores
 * its item, passes the light side of the barrier, then reads the idle
 * mask.  One of the two sees the other. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "allocators/exi_jemalloc.h"
#include "base/exi_atomic.h"
#include "base/exi_fork.h"
#include "base/exi_macros.h"
#include "base/exi_thread.h"
#include "base/exi_trace.h"
#include "base/exi_worker.h"
#include "core/exi_scheduler.h"
#include "resources/exi_deque.h"
#include "resources/exi_inbox.h"
#include "resources/exi_park.h"
#include "resources/exi_pool.h"
#include "resources/exi_pool_impl.h"
#include <cexec/pool.h>

#define DEFAULT_SPIN_ROUNDS 256
#define DEFAULT_LINGER_US 1000
#define MAX_LINGER_US 10000000u
#define DEQUE_INITIAL 256
/* The slot the calling thread runs as: its worker, or the lent slot it holds. */
static EXI_TLS exi_worker *tls_worker;

/* The calling thread's lending offer (exi_lend_open): open, and the lent
 * slot it took, if any. */
static EXI_TLS exi_lend_state tls_lend;

static bool help_one(void);

/* The calling thread's stack, read once per thread ({0, 1}: unknown). */
static EXI_TLS struct { uintptr_t lo, size; } tls_stack;

static void read_stack_bounds(void) {
    if (tls_stack.size) return;
    pthread_attr_t attr;
    void *lo = NULL;
    size_t size = 0;
    if (!pthread_getattr_np(pthread_self(), &attr)) {
        if (pthread_attr_getstack(&attr, &lo, &size)) size = 0;
        pthread_attr_destroy(&attr);
    }
    tls_stack.lo = (uintptr_t)lo;
    tls_stack.size = size ? size : 1;
}

/* Inbox choice of a submitting thread that is not a worker, for the pool
 * with this id (an address can be reused by a later pool). */
static EXI_TLS struct { uint64_t pool_id; unsigned home; } tls_home;
static uint64_t next_pool_id = 1;


static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* ------------------------------------------------------------- idle mask */

static void idle_set(ex_pool *p, unsigned i) {
    (void)exi_fas_or_u64(&p->idle[i / 64], 1ull << (i % 64));
}

/* Clears bit i; returns whether it was still set (false: a waker claimed it). */
static bool idle_clear(ex_pool *p, unsigned i) {
    uint64_t bit = 1ull << (i % 64);
    uint64_t *word = &p->idle[i / 64];
    uint64_t m = exi_load_rlx_u64(word);
    while (m & bit)
        if (exi_cas_u64(word, &m, m & ~bit)) return true;
    return false;
}

static bool any_idle(ex_pool *p) {
    for (unsigned k = 0; k < p->idle_words; k++)
        if (exi_load_rlx_u64(&p->idle[k])) return true;
    return false;
}

/* Workers parked or about to park (their idle bits).  A snapshot. */
static unsigned parked_count(ex_pool *p) {
    unsigned parked = 0;
    for (unsigned k = 0; k < p->idle_words; k++) parked += (unsigned)__builtin_popcountll(exi_load_rlx_u64(&p->idle[k]));
    return parked;
}

/* Claims one idle worker and wakes it.  Returns whether one was woken. */
static bool wake_one(ex_pool *p) {
    for (unsigned k = 0; k < p->idle_words; k++) {
        uint64_t m = exi_load_rlx_u64(&p->idle[k]);
        while (m) {
            unsigned bit = (unsigned)__builtin_ctzll(m);
            if (exi_cas_u64(&p->idle[k], &m, m & ~(1ull << bit))) {
                exi_event_inc(&p->workers[k * 64 + bit].event);
                return true;
            }
        }
    }
    return false;
}

/* After publishing an item: make sure a sleeping worker will see it. */
static void notify(ex_pool *p) {
    exi_barrier_light();
    if (any_idle(p)) wake_one(p);
}

/* ------------------------------------------------------------ submission */

static bool stopping(ex_pool *p) { return exi_load_acq_u32(&p->stopping) != 0; }

/* A queued item the pool will not run as work: its cancel, or (an item
 * without one) run now. */
static void cancel_item(ex_work *w) {
    if (w->cancel) w->cancel(w);
    else w->execute(w);
}

/* In a fork() child, a pool of the parent has no workers: it refuses work
 * (EX_ESHUTDOWN), shutdown and destroy (EX_EINVAL; they would join threads
 * that are not there and cancel the parent's operations).  The child may
 * create pools of its own. */
static bool forked(const ex_pool *p) { return p->fork_gen != exi_fork_generation(); }

/* Why p refuses work (it is stopping, or of the parent process). */
static ex_error refused(ex_pool *p) {
    if (forked(p))
        return ex_err(EX_ESHUTDOWN, "ex_pool: the pool was created before fork(); it has no workers in this process");
    return ex_err(EX_ESHUTDOWN, "ex_pool: the pool is shutting down");
}

static unsigned home_inbox(ex_pool *p) {
    if (tls_home.pool_id != p->id) {
        tls_home.pool_id = p->id;
        tls_home.home = exi_faa_u32(&p->next_home, 1) % p->n;
    }
    return tls_home.home;
}

/* From a thread outside the pool: to the inbox of one of its workers. */
static ex_error submit_outside(ex_pool *p, ex_work *w) {
    exi_inbox *q = &p->workers[home_inbox(p)].inbox;
    /* The gate keeps destroy from draining while this push is under way. */
    exi_faa_u32(&q->gate, 1);
    if (stopping(p)) {
        exi_faa_u32(&q->gate, (uint32_t)-1);
        return refused(p);
    }
    exi_inbox_push(q, w);
    /* Still under the gate: once w is queued it may run and complete, and
     * whoever waited for it may destroy the pool; destroy waits for the
     * gate, so the wake-up below never touches a freed pool. */
    notify(p);
    exi_faa_u32(&q->gate, (uint32_t)-1);
    return ex_ok();
}

/* From the owner of slot me (its worker, or the holder of a lent slot): to
 * its deque (`behind`: the back of its inbox, which it reads after the
 * deque, for a yield), waking a parked worker if `wake`.  A lent slot's pushes pass
 * its gate, as an inbox's do: shutdown drains the lent deques while their
 * holders run, after waiting for the gates, so an item either is refused or
 * is there to be drained (the slot keeps the pool alive: notify may come
 * after).  A worker's deque is drained only after the workers are joined. */
static ex_error push_own(ex_pool *p, exi_worker *me, ex_work *w, bool wake, bool behind) {
    if (me->lent) exi_faa_u32(&me->inbox.gate, 1);
    bool refuse = stopping(p);
    /* A failed deque growth goes to the inbox too: never lose work. */
    if (!refuse && (behind || !exi_deque_push(&me->deque, w))) exi_inbox_push(&me->inbox, w);
    if (me->lent) exi_faa_u32(&me->inbox.gate, (uint32_t)-1);
    if (refuse) return refused(p);
    if (wake) notify(p);
    return ex_ok();
}

/* A lent slot's `held` word: HELD while a thread holds it; PUSHING while
 * its claimer, not yet past the `stopping` check, puts its first item in
 * `next` (the claim's compare-and-swap is then that push's gate: shutdown
 * waits for PUSHING to clear as for the gates).  0: free. */
enum { LENT_HELD = 1, LENT_PUSHING = 2 };

/* The claiming item of a lent slot: it waits in the slot's `next`, not in
 * its deque (a store instead of a deque push and take: the commonest lent
 * item, a short wait's only one).  The slot was just claimed with
 * LENT_PUSHING, a locked instruction: the check of `stopping` after it is
 * ordered as a gate increment's would be, and the release store that
 * clears PUSHING publishes the item as the gate's decrement would.  Two
 * locked instructions a request fewer than the gate.  `next` is empty (close
 * and the drain empty it). */
static ex_error push_next(ex_pool *p, exi_worker *me, ex_work *w) {
    bool refuse = stopping(p);
    if (!refuse) exi_store_rel_ptr(&me->next, w);
    exi_store_rel_u32(&me->held, LENT_HELD);
    return refuse ? refused(p) : ex_ok();
}

/* Takes lent slot s's claiming item, if it is still there: the holder
 * (first), a thief, the drain or close; the exchange gives it to one. */
static ex_work *take_next(exi_worker *s) {
    if (!exi_load_rlx_ptr(&s->next)) return NULL;
    return exi_fas_ptr(&s->next, NULL);
}

static void set_slot(exi_worker *me) {
    tls_worker = me;
    exi_this_worker = me ? (exi_worker_slot){.index = (int)me->index, .help_one = help_one}
                         : (exi_worker_slot){.index = -1, .help_one = NULL};
}

/* Takes a free lent slot of p for the calling thread (an open offer, no
 * slot yet), or NULL; `how` is LENT_HELD, or with LENT_PUSHING for a
 * claimer that puts its first item in `next` (push_next).  The CAS that
 * takes the slot acquires what its last holder did with the deque.  The
 * holding keeps the pool's memory: destroy waits for every lent slot's
 * `held` to be 0, so the single CAS is both the claim and the hold (no
 * count of holders to bump and drop).  The holder is an
 * agent of the pool only while it runs the slot's items
 * (exi_lend_run_one): between them it runs its own loop's work, which is
 * not the pool's. */
static exi_worker *claim_lent_slot(ex_pool *p, uint32_t how) {
    for (unsigned k = p->n; k < p->slots; k++) {
        exi_worker *s = &p->workers[k];
        uint32_t free_ = 0;
        if (exi_load_rlx_u32(&s->held) || !exi_cas_u32(&s->held, &free_, how)) continue;
        /* Before any push of this holding: a thief acquires the item, and
         * with it the lease it copies to its origin. */
        s->claims++;
        exi_store_rlx_u64(&s->lease, (uint64_t)s->claims << 32 | (k + 1));
        read_stack_bounds();
        s->stack_lo = tls_stack.lo;  /* (its holder's, for room_to_nest) */
        s->stack_size = tls_stack.size;
        tls_lend.slot = s;
        return s;
    }
    return NULL;
}

/* Queues w on p.  EX_ESHUTDOWN once destroy has begun.  quiet_ok: w is a
 * schedule operation's item, which a thread that lends itself for its wait
 * runs as soon as the operation's start returns, so taking a lent slot for
 * it need wake nobody.  Anything else (ex_post of an item the caller may
 * well block on, a task's or a strand's hop) wakes a worker even then. */
static ex_error submit(ex_pool *p, ex_work *w, bool quiet_ok) {
    exi_worker *me = tls_worker;
    if (me && me->pool == p) return push_own(p, me, w, true, false);
    if (__builtin_expect(forked(p), 0)) return refused(p);
    if (!me && tls_lend.open) {
        exi_worker *held = tls_lend.slot;
        if (held && held->pool == p) return push_own(p, held, w, true, false);
        /* The first item of a lending wakes nobody: its holder runs it next. */
        if (!held && quiet_ok && (held = claim_lent_slot(p, LENT_HELD | LENT_PUSHING))) return push_next(p, held, w);
        if (!held && !quiet_ok && (held = claim_lent_slot(p, LENT_HELD))) return push_own(p, held, w, true, false);
    }
    return submit_outside(p, w);
}

ex_error exi_pool_submit(ex_pool *p, ex_work *w) { return submit(p, w, false); }

bool exi_pool_push_quiet(ex_pool *p, ex_work *w) {
    exi_worker *me = tls_worker;
    return me && me->pool == p && !push_own(p, me, w, false, false).code;
}

unsigned exi_pool_awake_others(ex_pool *p) {
    unsigned awake = p->n - parked_count(p);
    exi_worker *me = tls_worker;
    return awake - (awake && me && me->pool == p && !me->lent);
}

exi_worker *exi_pool_current(void) { return tls_worker; }

void exi_pool_nudge_idle(ex_pool *p, const exi_worker *except) {
    for (unsigned k = 0; k < p->idle_words; k++) {
        uint64_t m = exi_load_rlx_u64(&p->idle[k]);
        if (except && except->index / 64 == k) m &= ~(1ull << (except->index % 64));
        if (m) {
            exi_event_inc(&p->workers[k * 64 + (unsigned)__builtin_ctzll(m)].event);
            return;
        }
    }
}

void exi_pool_wake(ex_pool *p, unsigned k) {
    exi_barrier_light();  /* as notify: the items pushed before, then the idle mask */
    while (k-- && any_idle(p) && wake_one(p)) {}
}

/* ----------------------------------------------------------- finding work */

/* Records whose work me took into its empty deque: a lent holding's (its
 * lease, copied from the lent slot or from the worker it was stolen from),
 * or nobody's (0: an outside submission).  Everything me then pushes
 * descends from it, until its deque is empty again and it takes other work;
 * that holder may take it back (steal_descendant).  A hint: a holder that
 * reads it late steals at worst one unrelated item. */
static inline void set_origin(exi_worker *me, uint64_t origin) {
    if (exi_load_rlx_u64(&me->origin) != origin) exi_store_rlx_u64(&me->origin, origin);
}

static inline uint64_t origin_of(const exi_worker *v) {
    return exi_load_rlx_u64(v->lent ? &v->lease : &v->origin);
}

/* Steals from v's deque (retrying a lost race), counting it for me. */
static ex_work *steal_deque(exi_worker *me, exi_worker *v) {
    ex_work *w;
    exi_steal_result r;
    while ((r = exi_deque_steal(&v->deque, &w)) == EXI_STEAL_ABORT) exi_pause();
    if (r != EXI_STEAL_OK) return NULL;
    exi_owner_add_u64(&me->stats.stolen, 1);
    return w;
}

/* Lent slot v's claiming item, for thief me, once it has stayed there
 * across one of me's passes (the same holding: its lease names it).  Its
 * holder takes it within a few hundred nanoseconds of the push (it runs
 * it as soon as the start that queued it returns); a thief that took it
 * first ran it on another core and handed the completion back across,
 * which made a bulk launch 175 ns instead of 100 and kept the thief from
 * parking.  An item its holder does not come for (it runs something long
 * first) is taken one pass later. */
static ex_work *take_stale_next(exi_worker *me, exi_worker *v) {
    if (!exi_load_rlx_ptr(&v->next)) return NULL;
    uint64_t lease = exi_load_rlx_u64(&v->lease);
    if (me->next_seen != lease) {
        me->next_seen = lease;
        return NULL;
    }
    return take_next(v);
}

/* One pass over the other workers, from a random one; records the origin
 * of what it took. */
static ex_work *steal(exi_worker *me) {
    ex_pool *p = me->pool;
    unsigned n = p->slots;
    if (n == 1) {
        ex_work *w = exi_inbox_pop(&me->inbox);
        if (w) set_origin(me, 0);
        return w;
    }
    unsigned start = (unsigned)(xorshift(&me->rng) % n);
    for (unsigned k = 0; k < n; k++) {
        exi_worker *v = &p->workers[(start + k) % n];
        if (v == me) continue;
        ex_work *w = v->lent ? take_stale_next(me, v) : NULL;
        if (w) {
            exi_owner_add_u64(&me->stats.stolen, 1);
            set_origin(me, origin_of(v));
            return w;
        }
        if ((w = steal_deque(me, v))) {
            set_origin(me, origin_of(v));
            /* More where that came from: let another sleeper help. */
            if (exi_deque_nonempty(&v->deque) && any_idle(p)) wake_one(p);
            return w;
        }
        if ((w = exi_inbox_pop(&v->inbox))) {
            set_origin(me, 0);
            if (exi_inbox_nonempty(&v->inbox) && any_idle(p)) wake_one(p);
            return w;
        }
    }
    return NULL;
}

/* For the holder of lent slot me, whose slot is empty while its wait goes
 * on: an item from the deque of a worker whose work descends from this
 * holding's items (a thief's, or a thief's thief's), or NULL.  The holder
 * thus helps with its own request, as a oneTBB thread in an isolated region
 * takes back tasks of its own region, and never with unrelated work. */
static ex_work *steal_descendant(exi_worker *me) {
    ex_pool *p = me->pool;
    uint64_t lease = exi_load_rlx_u64(&me->lease);
    for (unsigned k = 0; k < p->n; k++) {
        exi_worker *v = &p->workers[k];
        ex_work *w;
        if (exi_load_rlx_u64(&v->origin) == lease && exi_deque_nonempty(&v->deque) && (w = steal_deque(me, v))) return w;
    }
    return NULL;
}

static ex_work *find_work(exi_worker *me) {
    ex_work *w = exi_deque_take(&me->deque);
    if (w) return w;
    if ((w = exi_inbox_pop(&me->inbox))) {
        set_origin(me, 0);
        return w;
    }
    uint64_t t0 = tracing(me) ? exi_now_ns() : 0;
    w = steal(me);
    if (w && tracing(me)) exi_trace_add(&me->trace, EXI_TRACE_STEAL, t0, exi_now_ns());
    return w;
}

static bool work_visible(ex_pool *p) {
    for (unsigned i = 0; i < p->slots; i++) {
        exi_worker *w = &p->workers[i];
        if (exi_deque_nonempty(&w->deque) || exi_inbox_nonempty(&w->inbox)) return true;
        if (w->lent && exi_load_rlx_ptr(&w->next)) return true;
    }
    return false;
}

static void trace_lent(exi_worker *me, uint64_t t0, uint64_t t1);
static void queue_held(exi_worker *me);

static void run_item(exi_worker *me, ex_work *w) {
    exi_owner_add_u64(&me->stats.executed, 1);
    if (!me->trace.events) {
        w->execute(w);
    } else {
        uint64_t t0 = exi_now_ns();
        w->execute(w);
        if (me->lent) trace_lent(me, t0, exi_now_ns());
        else exi_trace_add(&me->trace, EXI_TRACE_RUN, t0, exi_now_ns());
    }
    /* A hold is undone before the start that made it returns; one left
     * here was made on a stack that switched away (a task's) and may go
     * on elsewhere: queue it rather than leave it where nobody looks. */
    if (me->held_back) queue_held(me);
}

/* Parks me until woken; returns whether a waker claimed it for work
 * (false: it found work or a due timer at once, a timer's deadline came,
 * or it was only nudged to keep time). */
static bool park(exi_worker *me) {
    ex_pool *p = me->pool;
    uint32_t seen = exi_event_value(&me->event);
    idle_set(p, me->index);
    exi_barrier_heavy();
    if (stopping(p) || work_visible(p)) {
        idle_clear(p, me->index);
        return true;
    }
    /* With timers armed, one parked worker keeps time: it parks only
     * until the earliest deadline (pool_timers.c). */
    uint64_t until = exi_pool_keeper_deadline(me);
    if (until != EXI_NO_DEADLINE && (int64_t)until <= ex_now()) {
        exi_pool_keeper_leave(me, false);
        idle_clear(p, me->index);
        return false;  /* due: fired at the top of the loop */
    }
    exi_owner_add_u64(&me->stats.parked, 1);
    uint64_t t0 = tracing(me) ? exi_now_ns() : 0;
    if (until == EXI_NO_DEADLINE) exi_event_wait(&me->event, seen);
    else exi_event_wait_until(&me->event, seen, (int64_t)until);
    if (tracing(me)) exi_trace_add(&me->trace, EXI_TRACE_PARK, t0, exi_now_ns());
    /* Bit already cleared: a publisher claimed this worker for its item. */
    bool claimed = !idle_clear(p, me->index);
    if (claimed) exi_owner_add_u64(&me->stats.woken, 1);
    if (until != EXI_NO_DEADLINE) exi_pool_keeper_leave(me, claimed);
    return claimed;
}

static void name_and_pin(exi_worker *me) {
    pthread_setname_np(pthread_self(), me->name);
    /* The keeper's timed wait wakes at its deadline, not up to the
     * default 50 us of slack later (timers' lateness, docs/time.md). */
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
    if (!me->pool->pin) return;
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed)) return;
    unsigned seen = 0;
    for (size_t c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed)) continue;
        if (seen++ == me->index % (unsigned)CPU_COUNT(&allowed)) {
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            pthread_setaffinity_np(pthread_self(), sizeof one, &one);
            return;
        }
    }
}

/* Whether every other worker is parked (or about to park): me is the last
 * one awake.  A hint; two workers may both decide they are not. */
static bool last_awake(exi_worker *me) { return parked_count(me->pool) + 1 >= me->pool->n; }

/* After the spin rounds found nothing: keeps looking, giving the CPU to
 * other threads between looks, while the wait policy says this worker
 * should stay awake (active: for as long as the pool runs; adaptive: the
 * last worker awake, until linger_ns have passed).  Returns the work found,
 * or NULL: park. */
static ex_work *linger(exi_worker *me) {
    ex_pool *p = me->pool;
    if (p->wait_policy == EXI_WAIT_PASSIVE) return NULL;
    bool forever = p->wait_policy == EXI_WAIT_ACTIVE;
    if (!forever && (p->linger_ns == 0 || !last_awake(me))) return NULL;
    uint64_t deadline = exi_now_ns() + p->linger_ns;
    for (unsigned r = 1; !stopping(p); r++) {
        sched_yield();
        if (exi_pool_polling(p)) (void)exi_pool_poll_all(p, me);
        ex_work *w = find_work(me);
        if (w) return w;
        if (exi_pool_timer_due(p)) return NULL;  /* park returns at once; the loop fires it */
        if (!forever && (r % 8) == 0 && exi_now_ns() >= deadline) return NULL;
    }
    return NULL;
}

static void *worker_main(void *arg) {
    exi_worker *me = arg;
    ex_pool *p = me->pool;
    set_slot(me);
    name_and_pin(me);
    read_stack_bounds();
    me->stack_lo = tls_stack.lo;
    me->stack_size = tls_stack.size;
    bool timers_only = false;  /* it only ran timers, or woke only to keep time: no work to wait for */
    while (!stopping(p)) {
        if (exi_pool_timer_due(p)) {
            exi_pool_fire_due(p);
            timers_only = true;
        }
        ex_work *w = find_work(me);
        /* Spin and linger for work that follows work (a timer's completion
         * queues its follow-up here, found above): a periodic timer would
         * otherwise keep a core busy between its firings. */
        for (unsigned r = 0; !w && !timers_only && r < p->spin_rounds && !stopping(p) && !exi_pool_timer_due(p); r++) {
            /* Instead of idling, poll: a completion may queue work here. */
            if (exi_pool_polling(p) && exi_pool_poll_all(p, me)) {
                w = find_work(me);
                continue;
            }
            /* A round is 16 pauses with a look after every 4: a helper the
             * starter of a bulk queued waits a quarter as long for this
             * worker (a look per 16 pauses, about 400 ns here, was a tenth
             * of a reduction of 1e5 doubles on two). */
            for (int look = 0; look < 4 && !w; look++) {
                for (int k = 0; k < 4; k++) exi_pause();
                w = find_work(me);
            }
        }
        if (!w && !timers_only) w = linger(me);
        timers_only = false;
        if (w) {
            if (me->timer_kick) {  /* it armed a timer and goes on working: someone else keeps time */
                me->timer_kick = false;
                exi_pool_kick_unkept(p);
            }
            run_item(me, w);
            if (exi_pool_polling(p)) exi_pool_poll_between(me);
        } else if (exi_pool_polling(p) && exi_pool_poll_before_park(me)) {
            continue;  /* a poll made progress: look for the work it made */
        } else {
            me->timer_kick = false;  /* it parks: it keeps time itself (park reads next_deadline) */
            timers_only = !park(me);
        }
    }
    set_slot(NULL);
    exi_store_rel_u32(&me->exited, 1);
    return NULL;
}

/* ---------------------------------------------------------- lent callers */

/* A lent slot's trace event.  Shutdown writes the trace while a holder may
 * still run its slot's items; under the slot's gate, an event is either
 * recorded before shutdown passes the gate (with `stopping` set) or
 * dropped. */
static void trace_lent(exi_worker *me, uint64_t t0, uint64_t t1) {
    exi_faa_u32(&me->inbox.gate, 1);
    if (!stopping(me->pool)) exi_trace_add(&me->trace, EXI_TRACE_RUN, t0, t1);
    exi_faa_u32(&me->inbox.gate, (uint32_t)-1);
}

void exi_lend_open(exi_lend_state *outer) {
    *outer = tls_lend;
    /* A wait nested in the holder's own loop work may block this thread for
     * long: the quiet first item of its slot must not wait for it. */
    exi_worker *held = outer->slot;
    if (held && (exi_load_rlx_ptr(&held->next) || exi_deque_nonempty(&held->deque) || exi_inbox_nonempty(&held->inbox)))
        notify(held->pool);
    tls_lend = (exi_lend_state){.open = true, .slot = NULL, .outer = outer};
}

/* Whether the calling thread holds one of p's lent slots, in this offer or
 * an outer one it is nested in. */
static bool holds_lent_slot_of(const ex_pool *p) {
    for (const exi_lend_state *st = &tls_lend; st; st = st->outer)
        if (st->slot && st->slot->pool == p) return true;
    return false;
}

bool exi_lend_run_one(void) {
    exi_worker *me = tls_lend.slot;
    if (!me) return false;
    ex_work *w = take_next(me);
    if (!w) w = exi_deque_take(&me->deque);
    if (!w) w = exi_inbox_pop(&me->inbox);
    if (!w) w = steal_descendant(me);
    if (!w && !exi_pool_polling(me->pool)) return false;
    set_slot(me);
    /* Nothing to run: the waiting caller polls instead (pool_poll.c). */
    bool ran = true;
    if (w) run_item(me, w);
    else ran = exi_pool_poll_all(me->pool, me);
    set_slot(NULL);
    return ran;
}

bool exi_pool_lend_to(ex_pool *p) {
    if (tls_worker || !tls_lend.open || forked(p)) return false;
    if (tls_lend.slot) return tls_lend.slot->pool == p;
    return claim_lent_slot(p, LENT_HELD) != NULL;
}

/* An item left in a lent slot when its holder stops waiting: to a worker,
 * or cancelled here once the pool is stopping (its drain may be over). */
static void hand_over(ex_pool *p, ex_work *w) {
    if (!stopping(p) && !submit_outside(p, w).code) return;
    cancel_item(w);
}

void exi_lend_close(const exi_lend_state *outer) {
    exi_worker *me = tls_lend.slot;
    tls_lend = *outer;
    if (!me) return;
    ex_pool *p = me->pool;
    exi_pool_polls_hand_over(p);  /* it polled while it waited: a worker takes over */
    ex_work *w = take_next(me);
    if (w) hand_over(p, w);
    /* Only the holder adds to its deque: seen empty, it is (thieves only
     * take), and the take's fence is not needed. */
    while (exi_deque_nonempty(&me->deque) && (w = exi_deque_take(&me->deque))) hand_over(p, w);
    /* Only the holder pushes here; a thief holding the consumer lock makes
     * pop fail for a moment, and takes the item itself. */
    while (exi_inbox_nonempty(&me->inbox))
        if ((w = exi_inbox_pop(&me->inbox))) hand_over(p, w);
        else sched_yield();
    /* The release is the holding's last access to p (destroy may free it
     * right after), so `closing` is read before it, as pool_release reads
     * it before its drop; a wake that reaches freed memory wakes nobody. */
    bool closing = exi_load_acq_u32(&p->closing);
    exi_store_rel_u32(&me->held, 0);
    if (closing) syscall(SYS_futex, &me->held, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* ------------------------------------------------------ sync_wait helping */

/* Queues the items me holds back (exi_pool_hold_started), oldest first,
 * before it waits: whoever waits for one of them can then run it (this
 * agent while helping, or a thief).  A pool shutting down cancels them. */
static void queue_held(exi_worker *me) {
    ex_work *newest = me->held_back, *oldest_first = NULL;
    me->held_back = NULL;
    while (newest) {
        ex_work *next = newest->next;
        newest->next = oldest_first;
        oldest_first = newest;
        newest = next;
    }
    while (oldest_first) {
        ex_work *w = oldest_first;
        oldest_first = w->next;
        w->next = NULL;
        if (push_own(me->pool, me, w, true, false).code) cancel_item(w);
    }
}

/* The worker slot's help_one (base/exi_worker.h): sync_wait on a worker
 * runs its pool's work instead of blocking. */
static bool help_one(void) {
    exi_worker *me = tls_worker;
    if (!me) return false;
    if (me->timer_kick) {  /* it waits here instead of parking: someone else keeps time */
        me->timer_kick = false;
        exi_pool_kick_unkept(me->pool);
    }
    if (!me->lent && exi_pool_timer_due(me->pool)) {
        exi_pool_fire_due(me->pool);
        return true;
    }
    if (me->held_back) queue_held(me);
    ex_work *w = find_work(me);
    if (!w) return false;
    run_item(me, w);
    return true;
}

ex_work *exi_pool_take_own_if(bool (*accept)(ex_work *w, void *ctx), void *ctx) {
    exi_worker *me = tls_worker;
    if (!me) return NULL;
    ex_work *w = exi_deque_take(&me->deque);
    if (!w) return NULL;
    if (accept(w, ctx)) {
        exi_owner_add_u64(&me->stats.executed, 1);
        return w;
    }
    /* Back where it was (the slot just freed: no growth).  A worker that
     * looked in this window may have gone to sleep: notify, which wakes one
     * only if some worker is idle (rare while this deque holds work: the
     * first push woke it, and a thief steals before it parks). */
    if (!exi_deque_push(&me->deque, w)) exi_inbox_push(&me->inbox, w);
    notify(me->pool);
    return NULL;
}

/* Whether slot me's owner, calling, may run an item nested here: it runs
 * on its thread's own stack (not a task's, whose room is not known here)
 * and at least half of it is left.  Nested runs (take-back, held-back
 * hops) go as deep as the recursion that makes them; the worker loop ran
 * each of them on a shallow stack.  Past half, the item is queued and the
 * loop runs it. */
static inline bool room_to_nest(const exi_worker *me) {
    char here;
    uintptr_t room = (uintptr_t)&here - me->stack_lo;  /* the stack grows down */
    return room < me->stack_size && room >= me->stack_size / 2;
}

ex_work *exi_pool_take_own_within(uintptr_t lo, uintptr_t hi) {
    exi_worker *me = tls_worker;
    if (!me || !room_to_nest(me)) return NULL;
    uintptr_t a = (uintptr_t)exi_deque_peek(&me->deque);
    if (a < lo || a >= hi) return NULL;
    ex_work *w = exi_deque_take(&me->deque);  /* that item, or NULL: a thief took it */
    if (w) exi_owner_add_u64(&me->stats.executed, 1);
    return w;
}

/* -------------------------------------------------------------- scheduler */

static void pool_start(ex_operation *op) {
    exi_queued_op *o = (exi_queued_op *)op;
    ex_error e = submit(o->resource, &o->work, true);
    if (e.code) ex_set_error(o->r, e);
}

static const ex_operation_vtable pool_op_vt = { pool_start, NULL };

static ex_error pool_connect(void *self, ex_receiver r, void *storage) {
    exi_queued_op_init(storage, &pool_op_vt, self, r);
    return ex_ok();
}

ex_work *exi_pool_hold_started(ex_operation *op) {
    exi_worker *me = tls_worker;
    if (!me || op->vt != &pool_op_vt) return NULL;
    exi_queued_op *o = (exi_queued_op *)op;
    if (o->resource != me->pool || stopping(me->pool)) return NULL;  /* (shutting down: start refuses) */
    int64_t backlog = (int64_t)exi_load_rlx_u64(&me->deque.bottom) - (int64_t)exi_load_rlx_u64(&me->deque.top);
    if (backlog < EXI_POOL_HOLD_BACKLOG || !room_to_nest(me)) return NULL;
    o->work.next = me->held_back;
    me->held_back = &o->work;
    return &o->work;
}

bool exi_pool_unhold(ex_work *w) {
    exi_worker *me = tls_worker;
    if (!me || me->held_back != w) return false;
    me->held_back = w->next;
    w->next = NULL;
    exi_owner_add_u64(&me->stats.executed, 1);
    return true;
}

static ex_error pool_post(void *self, ex_work *w) { return submit(self, w, false); }

/* From a worker: to the back of its own inbox, which it reads after its
 * deque, in order; elsewhere like post. */
static ex_error pool_yield(void *self, ex_work *w) {
    ex_pool *p = self;
    exi_worker *me = tls_worker;
    if (!me || me->pool != p) return submit(p, w, false);
    return push_own(p, me, w, true, true);
}

static ex_error pool_dispatch(void *self, ex_work *w) {
    exi_worker *me = tls_worker;
    if (me && me->pool == self) {
        w->execute(w);
        return ex_ok();
    }
    return submit(self, w, false);
}

static const ex_allocator *pool_allocator(void *self) { return ((ex_pool *)self)->frame_alloc; }

/* Owning handles (a task holds its scheduler) are counted per worker: a
 * shared counter, bumped by every task on every worker, was a tenth of a
 * task benchmark.  A handle may be dropped on another thread than the one
 * that took it, so single counters go negative; only the sum means
 * anything, and destroy reads it once the workers are joined and their
 * counters can no longer move. */
static void pool_retain(void *self) {
    ex_pool *p = self;
    exi_worker *w = tls_worker;
    if (w && w->pool == p && !w->lent) exi_owner_add_u64(&w->holds, 1);
    else exi_faa_u32(&p->holders, 1);  /* a lent slot changes hands: its counts must be shared */
}

/* A drop off the workers while destroy waits wakes it.  `closing` is read
 * before the drop, while the handle still keeps the pool's memory; a wake
 * missed that way costs destroy one poll interval.  The wake may reach
 * memory destroy has just freed: a futex wake on a stale address wakes
 * nobody who is not ready for a spurious wake-up, so that is safe. */
static void pool_release(void *self) {
    ex_pool *p = self;
    exi_worker *w = tls_worker;
    if (w && w->pool == p && !w->lent) {
        exi_owner_add_u64(&w->holds, (uint64_t)-1);
        return;
    }
    bool closing = exi_load_acq_u32(&p->closing);
    exi_faa_u32(&p->holders, (uint32_t)-1);
    if (closing) syscall(SYS_futex, &p->holders, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static const ex_scheduler_vtable pool_vt;

/* The pool's domain: bulk runs on the pool's agents (pool_bulk.c).  The
 * scheduler it was found through names the pool; one named by an
 * environment's get_domain alone names none, and bulk stays sequential. */
static const ex_bulk_domain pool_domain = EX_BULK_DOMAIN("pool", &pool_vt, exi_pool_bulk);

static unsigned pool_concurrency(void *self) { return ex_pool_size(self); }

static const ex_scheduler_vtable pool_vt = {
    .name = "pool",
    .schedule_op_size = sizeof(exi_queued_op),
    .schedule_op_align = alignof(exi_queued_op),
    .schedule_flags = EX_SIGS_STOPPED | EX_SIGS_ERROR,
    .connect_schedule = pool_connect,
    .progress = EX_PROGRESS_PARALLEL,
    .equal = NULL,
    .post = pool_post,
    .dispatch = pool_dispatch,
    .yield = pool_yield,
    .domain = &pool_domain.domain,
    .concurrency = pool_concurrency,
    .allocator = pool_allocator,
    .retain = pool_retain,
    .release = pool_release,
    .timer_op_size = sizeof(exi_timer_op),
    .timer_op_align = alignof(exi_timer_op),
    .connect_schedule_at = exi_pool_connect_at,
};

ex_scheduler ex_pool_scheduler(ex_pool *p) {
    ex_scheduler s = { p ? &pool_vt : NULL, p };  /* NULL: the invalid handle */
    return s;
}

ex_pool *ex_pool_of_scheduler(ex_scheduler sch) { return sch.vt == &pool_vt ? sch.self : NULL; }

/* ------------------------------------------------------- create / destroy */

unsigned ex_pool_size(const ex_pool *p) { return p ? p->n : 0; }

bool exi_pool_post_here(ex_scheduler sch, ex_work *w) {
    exi_worker *me = tls_worker;
    if (sch.vt != &pool_vt || !me || me->pool != sch.self) return false;
    return submit(me->pool, w, false).code == EX_OK;
}

ex_error exi_pool_post_started(ex_scheduler sch, ex_work *w) {
    if (sch.vt != &pool_vt) return ex_post(sch, w);
    return submit(sch.self, w, true);
}

uint64_t exi_pool_backlog_here(ex_scheduler sch) {
    exi_worker *me = tls_worker;
    if (sch.vt != &pool_vt || !me || me->pool != sch.self) return 0;
    int64_t n = (int64_t)exi_load_rlx_u64(&me->deque.bottom) - (int64_t)exi_load_rlx_u64(&me->deque.top);
    return n > 0 ? (uint64_t)n : 0;
}

int ex_pool_current_worker(const ex_pool *p) {
    exi_worker *me = tls_worker;
    return me && me->pool == p ? (int)me->index : -1;
}

unsigned ex_pool_lend_slots(const ex_pool *p) { return p ? p->slots - p->n : 0; }

ex_error ex_pool_worker_stats_get(const ex_pool *p, unsigned i, ex_pool_worker_stats *out) {
    if (!p || !out || i >= p->slots) return ex_err(EX_EINVAL, "ex_pool_worker_stats_get: bad pool or worker index");
    const ex_pool_worker_stats *s = &p->workers[i].stats;
    out->executed = exi_load_rlx_u64(&s->executed);
    out->stolen = exi_load_rlx_u64(&s->stolen);
    out->parked = exi_load_rlx_u64(&s->parked);
    out->woken = exi_load_rlx_u64(&s->woken);
    return ex_ok();
}

static void free_pool(ex_pool *p) {
    const ex_allocator *a = p->alloc;
    if (p->workers) {
        for (unsigned i = 0; i < p->slots; i++) {
            exi_worker *w = &p->workers[i];
            if (w->deque.array) exi_deque_destroy(&w->deque);
            if (w->trace.events)
                ex_deallocate(a, w->trace.events, w->trace.capacity * sizeof(exi_trace_event), alignof(exi_trace_event));
        }
        ex_deallocate(a, p->workers, p->slots * sizeof(exi_worker), alignof(exi_worker));
    }
    if (p->idle) ex_deallocate(a, p->idle, p->idle_words * sizeof(uint64_t), alignof(uint64_t));
    if (p->trace_path) ex_deallocate(a, p->trace_path, strlen(p->trace_path) + 1, 1);
    pthread_mutex_destroy(&p->shutdown_mu);
    pthread_mutex_destroy(&p->timers_mu);
    exi_jemalloc_park(p->arenas);
    ex_deallocate(a, p, sizeof *p, alignof(ex_pool));
}

/* Tells the workers to stop and wakes them: each finishes the item it
 * runs, if any, and exits. */
static void signal_stop(ex_pool *p) {
    (void)exi_fas_u32(&p->stopping, 1);
    for (unsigned i = 0; i < p->n; i++) exi_event_inc(&p->workers[i].event);
}

/* Whether w returned from worker_main by the CLOCK_MONOTONIC deadline (a
 * step of the wall clock must not stretch the wait; a plain
 * pthread_join follows, which thread checkers understand, unlike
 * pthread_clockjoin_np).  Polls: it runs once, at exit. */
static bool exited_by(exi_worker *w, const struct timespec *deadline) {
    for (;;) {
        if (exi_load_acq_u32(&w->exited)) return true;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > deadline->tv_sec || (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec))
            return false;
        struct timespec nap = { 0, 500 * 1000 };
        nanosleep(&nap, NULL);
    }
}

/* Joins the workers not joined yet.  With a deadline (CLOCK_MONOTONIC),
 * leaves a worker that has not exited by then (one still inside an item) and returns false once the others are
 * joined; a later call joins the rest. */
static bool join_workers(ex_pool *p, const struct timespec *deadline) {
    bool all = true;
    for (unsigned i = 0; i < p->n; i++) {
        exi_worker *w = &p->workers[i];
        if (!w->started) continue;
        if (deadline && !exited_by(w, deadline)) {
            all = false;
            continue;
        }
        pthread_join(w->thread, NULL);
        w->started = false;
    }
    return all;
}

/* External submitters and lent callers that passed a gate before
 * `stopping` finish their push; later ones see `stopping` and are
 * refused. */
static void wait_gates(ex_pool *p) {
    for (unsigned i = 0; i < p->slots; i++) {
        exi_worker *w = &p->workers[i];
        while (exi_load_acq_u32(&w->inbox.gate) || (w->lent && (exi_load_acq_u32(&w->held) & LENT_PUSHING)))
            sched_yield();
    }
}

/* Stops and joins the started workers (then drain cancels what is
 * queued). */
static void stop_workers(ex_pool *p) {
    signal_stop(p);
    (void)join_workers(p, NULL);
    wait_gates(p);
}

/* Cancels every queued item; a cancellation may queue nothing new (the pool
 * refuses), so one sweep until all queues are empty suffices.  A lent
 * slot's holder may still be taking items from its own deque meanwhile
 * (exactly once either way: the deque's protocol). */
static void drain(ex_pool *p) {
    for (bool any = true; any;) {
        any = false;
        for (unsigned i = 0; i < p->slots; i++) {
            exi_worker *w = &p->workers[i];
            ex_work *item;
            if (w->lent && (item = take_next(w))) {
                any = true;
                cancel_item(item);
            }
            exi_steal_result r;
            while ((r = exi_deque_steal(&w->deque, &item)) != EXI_STEAL_EMPTY) {
                if (r != EXI_STEAL_OK) continue;
                any = true;
                cancel_item(item);
            }
            while (exi_inbox_nonempty(&w->inbox)) {
                if (!(item = exi_inbox_pop(&w->inbox))) { sched_yield(); continue; }
                any = true;
                cancel_item(item);
            }
        }
    }
}

static void write_trace(ex_pool *p) {
    if (!p->trace_path) return;
    exi_trace_buf bufs_stack[64];
    const char *names_stack[64];
    exi_trace_buf *bufs = bufs_stack;
    const char **names = names_stack;
    bool heap = p->slots > 64;
    if (heap) {
        bufs = ex_allocate(p->alloc, p->slots * sizeof *bufs, alignof(exi_trace_buf));
        names = ex_allocate(p->alloc, p->slots * sizeof *names, alignof(const char *));
        if (!bufs || !names) {
            if (bufs) ex_deallocate(p->alloc, bufs, p->slots * sizeof *bufs, alignof(exi_trace_buf));
            if (names) ex_deallocate(p->alloc, (void *)names, p->slots * sizeof *names, alignof(const char *));
            fprintf(stderr, "cexec: out of memory writing the trace %s\n", p->trace_path);
            return;
        }
    }
    for (unsigned i = 0; i < p->slots; i++) {
        bufs[i] = p->workers[i].trace;
        names[i] = p->workers[i].name;
    }
    if (exi_trace_write(p->trace_path, bufs, names, p->slots, p->trace_origin))
        fprintf(stderr, "cexec: could not write the trace %s\n", p->trace_path);
    if (heap) {
        ex_deallocate(p->alloc, bufs, p->slots * sizeof *bufs, alignof(exi_trace_buf));
        ex_deallocate(p->alloc, (void *)names, p->slots * sizeof *names, alignof(const char *));
    }
}

/* The wait policy and linger of c, from the environment where c leaves
 * them to it.  EX_EINVAL for a value out of range or not understood. */
static ex_error resolve_wait(const ex_pool_config *c, exi_wait_policy *policy, uint64_t *linger_ns) {
    ex_pool_wait_policy w = c->wait_policy;
    if (w == EX_POOL_WAIT_DEFAULT) {
        const char *env = getenv("CEXEC_WAIT_POLICY");
        if (!env || !env[0] || !strcmp(env, "adaptive")) w = EX_POOL_WAIT_ADAPTIVE;
        else if (!strcmp(env, "passive")) w = EX_POOL_WAIT_PASSIVE;
        else if (!strcmp(env, "active")) w = EX_POOL_WAIT_ACTIVE;
        else return ex_err(EX_EINVAL, "ex_pool_create: CEXEC_WAIT_POLICY must be adaptive, passive or active");
    }
    switch (w) {
    case EX_POOL_WAIT_ADAPTIVE: *policy = EXI_WAIT_ADAPTIVE; break;
    case EX_POOL_WAIT_PASSIVE: *policy = EXI_WAIT_PASSIVE; break;
    case EX_POOL_WAIT_ACTIVE: *policy = EXI_WAIT_ACTIVE; break;
    default: return ex_err(EX_EINVAL, "ex_pool_create: unknown wait_policy");
    }
    unsigned long us = c->linger_us;
    if (us == 0) {
        const char *env = getenv("CEXEC_LINGER_US");
        us = DEFAULT_LINGER_US;
        if (env && env[0]) {
            char *end;
            us = strtoul(env, &end, 10);
            if (*end || env[0] == '-' || us > MAX_LINGER_US)
                return ex_err(EX_EINVAL, "ex_pool_create: CEXEC_LINGER_US must be a number of microseconds up to 10000000");
        }
    }
    if (us > MAX_LINGER_US) return ex_err(EX_EINVAL, "ex_pool_create: linger_us beyond 10000000");
    *linger_ns = (uint64_t)us * 1000u;
    return ex_ok();
}

ex_error ex_pool_create(const ex_pool_config *cfg, ex_pool **out) {
    if (!out) return ex_err(EX_EINVAL, "ex_pool_create: out is NULL");
    *out = NULL;
    ex_pool_config c = { 0 };
    if (cfg) c = *cfg;
    unsigned n = c.threads ? c.threads : ex_default_thread_count();
    if (n > 4096) return ex_err(EX_EINVAL, "ex_pool_create: more than 4096 threads");
    if (c.lend_slots > 4096) return ex_err(EX_EINVAL, "ex_pool_create: more than 4096 lent slots");
    unsigned lend = c.lend_slots < 0 ? 0 : c.lend_slots > 0 ? (unsigned)c.lend_slots : n;
    exi_wait_policy policy;
    uint64_t linger_ns;
    ex_error werr = resolve_wait(&c, &policy, &linger_ns);
    if (werr.code) return werr;
    const char *prefix = c.name_prefix ? c.name_prefix : "cexec";
    const char *trace_path = c.trace_path ? c.trace_path : getenv("CEXEC_TRACE");
    if (trace_path && !trace_path[0]) trace_path = NULL;
    unsigned trace_cap = c.trace_capacity ? c.trace_capacity : 1u << 16;

    exi_barrier_init();
    const ex_allocator *a = ex_default_allocator();
    ex_pool *p = ex_allocate(a, sizeof *p, alignof(ex_pool));
    if (!p) return ex_err(EX_ENOMEM, "ex_pool_create: out of memory");
    memset(p, 0, sizeof *p);
    if (pthread_mutex_init(&p->shutdown_mu, NULL)) {
        ex_deallocate(a, p, sizeof *p, alignof(ex_pool));
        return ex_err(EX_EAGAIN, "ex_pool_create: pthread_mutex_init failed");
    }
    if (pthread_mutex_init(&p->timers_mu, NULL)) {
        pthread_mutex_destroy(&p->shutdown_mu);
        ex_deallocate(a, p, sizeof *p, alignof(ex_pool));
        return ex_err(EX_EAGAIN, "ex_pool_create: pthread_mutex_init failed");
    }
    exi_timer_heap_init(&p->timers);
    p->next_deadline = EXI_NO_DEADLINE;
    exi_pool_polls_init(p);
    p->alloc = a;
    p->frame_alloc = c.allocator;
    if (!c.allocator && c.frames == EX_POOL_FRAMES_ARENAS) {
        /* Workers beyond the allocator's 1024 arenas share them (index modulo). */
        ex_error e = exi_jemalloc_acquire(n < 1024 ? n : 1024, &p->arenas);
        if (e.code) {
            pthread_mutex_destroy(&p->shutdown_mu);
            pthread_mutex_destroy(&p->timers_mu);
            ex_deallocate(a, p, sizeof *p, alignof(ex_pool));
            return e;
        }
        p->frame_alloc = ex_jemalloc_allocator_get(p->arenas);
    }
    p->id = exi_faa_u64(&next_pool_id, 1);
    p->fork_gen = exi_fork_watch();
    p->n = n;
    p->slots = n + lend;
    p->spin_rounds = c.spin_rounds ? c.spin_rounds : DEFAULT_SPIN_ROUNDS;
    p->wait_policy = policy;
    p->linger_ns = linger_ns;
    p->pin = c.pin_threads;
    p->idle_words = (n + 63) / 64;
    p->idle = ex_allocate(a, p->idle_words * sizeof(uint64_t), alignof(uint64_t));
    p->workers = ex_allocate(a, p->slots * sizeof(exi_worker), alignof(exi_worker));
    /* Zeroed before any error path: free_pool reads what was set up. */
    if (p->idle) memset(p->idle, 0, p->idle_words * sizeof(uint64_t));
    if (p->workers) memset(p->workers, 0, p->slots * sizeof(exi_worker));
    else p->n = p->slots = 0;
    if (trace_path) {
        size_t len = strlen(trace_path) + 1;
        if ((p->trace_path = ex_allocate(a, len, 1))) memcpy(p->trace_path, trace_path, len);
    }
    if (!p->idle || !p->workers || (trace_path && !p->trace_path)) {
        free_pool(p);
        return ex_err(EX_ENOMEM, "ex_pool_create: out of memory");
    }
    for (unsigned i = 0; i < p->slots; i++) {
        exi_worker *w = &p->workers[i];
        w->pool = p;
        w->index = i;
        w->lent = i >= n;
        w->rng = 0x9e3779b97f4a7c15ull * (i + 1);
        snprintf(w->name, sizeof w->name, w->lent ? "%s-lent%u" : "%s-%u", prefix, w->lent ? i - n : i);
        exi_inbox_init(&w->inbox);
        exi_event_init(&w->event);
        ex_error e = exi_deque_init(&w->deque, DEQUE_INITIAL, a);
        if (!e.code && p->trace_path) {
            w->trace.events = ex_allocate(a, trace_cap * sizeof(exi_trace_event), alignof(exi_trace_event));
            w->trace.capacity = trace_cap;
            if (!w->trace.events) e = ex_err(EX_ENOMEM, "ex_pool_create: out of memory for the trace");
        }
        if (e.code) {
            free_pool(p);
            return e;
        }
    }
    p->trace_origin = exi_now_ns();
    p->clock = c.clock;
    if (exi_pool_clock_attach(p).code) {
        free_pool(p);
        return ex_err(EX_ENOMEM, "ex_pool_create: out of memory to attach the pool to its clock");
    }
    for (unsigned i = 0; i < n; i++) {
        exi_worker *w = &p->workers[i];
        if (pthread_create(&w->thread, NULL, worker_main, w)) {
            stop_workers(p);
            exi_pool_clock_detach(p);
            exi_pool_clock_release(p);
            free_pool(p);
            return ex_err(EX_EAGAIN, "ex_pool_create: pthread_create failed");
        }
        w->started = true;
    }
    *out = p;
    return ex_ok();
}

/* EX_EINVAL when p may not be shut down or destroyed from here. */
static ex_error check_owner_call(ex_pool *p, const char *forked_msg, const char *worker_msg) {
    if (forked(p)) return ex_err(EX_EINVAL, forked_msg);
    if (tls_worker && tls_worker->pool == p) return ex_err(EX_EINVAL, worker_msg);
    return ex_ok();
}

/* ex_pool_shutdown; with a deadline, EX_ETIMEDOUT when a worker still
 * runs an item then (see exi_pool_shutdown_by). */
static ex_error shutdown_by(ex_pool *p, const struct timespec *deadline) {
    ex_error e = check_owner_call(p, "ex_pool_shutdown: the pool was created before fork(), in another process",
                                  "ex_pool_shutdown: called on one of the pool's own workers");
    if (e.code) return e;
    /* A cancellation this shutdown runs, calling it again: it is under way
     * here, and ends when the outer call returns (the lock is not
     * recursive; waiting for it here would wait for ever). */
    if (exi_load_rlx_ptr((void *const *)&p->shutting_thread) == exi_thread_id()) return ex_ok();
    pthread_mutex_lock(&p->shutdown_mu);
    if (!p->shut) {
        exi_store_rlx_ptr((void **)&p->shutting_thread, (void *)(uintptr_t)exi_thread_id());
        exi_pool_clock_detach(p);  /* no advance posts to the pool from here on */
        signal_stop(p);
        if (join_workers(p, deadline)) {
            wait_gates(p);
            drain(p);
            exi_pool_drop_timers(p);
            write_trace(p);
            p->shut = true;
        } else {
            e = ex_err(EX_ETIMEDOUT, "ex_pool_shutdown: a worker was still running an item at the deadline");
        }
        exi_store_rlx_ptr((void **)&p->shutting_thread, NULL);
    }
    pthread_mutex_unlock(&p->shutdown_mu);
    return e;
}

ex_error ex_pool_shutdown(ex_pool *p) {
    if (!p) return ex_err(EX_EINVAL, "ex_pool_shutdown: NULL pool");
    return shutdown_by(p, NULL);
}

ex_error exi_pool_shutdown_by(ex_pool *p, int64_t wait_ns) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    int64_t ns = (int64_t)deadline.tv_nsec + wait_ns % 1000000000;
    deadline.tv_sec += (time_t)(wait_ns / 1000000000 + ns / 1000000000);
    deadline.tv_nsec = (long)(ns % 1000000000);
    return shutdown_by(p, &deadline);
}

ex_error ex_pool_destroy(ex_pool *p) {
    if (!p) return ex_err(EX_EINVAL, "ex_pool_destroy: NULL pool");
    ex_error e = check_owner_call(p, "ex_pool_destroy: the pool was created before fork(), in another process",
                                  "ex_pool_destroy: called on one of the pool's own workers");
    if (e.code) return e;
    if (exi_load_rlx_ptr((void *const *)&p->shutting_thread) == exi_thread_id())
        return ex_err(EX_EBUSY, "ex_pool_destroy: called from a cancellation the pool's own shutdown runs");
    if (holds_lent_slot_of(p))
        return ex_err(EX_EBUSY, "ex_pool_destroy: called while this thread holds one of the pool's lent slots (inside "
                                "an ex_sync_wait of the pool's work); destroy would wait for it");
    e = ex_pool_shutdown(p);
    if (e.code) return e;
    /* Owning handles keep the memory: wait for the last one.  The workers
     * are joined, so their counts are final; only outside drops move. */
    exi_store_rel_u32(&p->closing, 1);
    int64_t on_workers = 0;
    for (unsigned i = 0; i < p->n; i++) on_workers += (int64_t)exi_load_rlx_u64(&p->workers[i].holds);
    for (;;) {
        uint32_t h = exi_load_acq_u32(&p->holders);
        if ((int64_t)(int32_t)h + on_workers == 0) break;
        struct timespec poll = { 0, 10 * 1000 * 1000 };  /* a drop that read `closing` too early */
        syscall(SYS_futex, &p->holders, FUTEX_WAIT_PRIVATE, h, &poll, NULL, 0);
    }
    /* Then the lent slots' holdings (claim_lent_slot).  A claim that
     * begins after this scan would be a submission racing with the free
     * itself, which no holding could make safe (the caller's contract: a
     * pool is not used once its destroy may have returned). */
    for (unsigned k = p->n; k < p->slots; k++) {
        uint32_t *held = &p->workers[k].held;
        for (uint32_t h; (h = exi_load_acq_u32(held)) != 0;) {
            struct timespec poll = { 0, 10 * 1000 * 1000 };  /* a release that read `closing` too early */
            syscall(SYS_futex, held, FUTEX_WAIT_PRIVATE, h, &poll, NULL, 0);
        }
    }
    exi_pool_clock_release(p);
    free_pool(p);
    return ex_ok();
}
