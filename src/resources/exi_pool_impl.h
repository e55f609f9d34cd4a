/* SPDX-License-Identifier: MIT */
/* exi_pool_impl.h - the pool's own structures, shared by its files
 * (pool.c: workers, submission, scheduler, domain, life cycle;
 * pool_bulk.c: the bulk).  Internal to resources/; the rest of the library uses
 * exi_pool.h. */
#ifndef EXI_POOL_IMPL_H
#define EXI_POOL_IMPL_H

#include <pthread.h>

#include <cexec/cexec.h>
#include <cexec/poller.h>

#include "base/exi_trace.h"
#include "resources/exi_deque.h"
#include "resources/exi_inbox.h"
#include "resources/exi_park.h"
#include "resources/exi_timer_op.h"

#define EXI_POOL_NAME_MAX 16

/* A slot of the pool: one of its n workers, or one of its lent slots
 * (index n and up), which a thread outside the pool holds while it waits
 * for the pool's work in ex_sync_wait (docs/pool.md, "Lent callers").  A
 * lent slot has no thread of its own; whoever holds it owns its deque. */
typedef struct exi_worker {
    exi_deque deque;
    exi_inbox inbox;          /* a lent slot's: only its holder pushes (deque growth failed, yield) */
    _Alignas(64) exi_event event;
    ex_pool *pool;
    unsigned index;
    bool lent;                /* a lent slot, not a worker */
    uint32_t held;            /* lent: LENT_HELD (| LENT_PUSHING) while a thread holds it (claimed by CAS, released by a store); destroy waits for 0 */
    void *next;               /* lent: ex_work *, the claiming (quiet) item, which the holder runs
                                 next; taken by exchange (the holder, a thief, the drain, close) */
    uint64_t lease;           /* lent: names the current holding (set at the claim, before any
                                 push; never 0); a thief of its items copies it to its origin */
    uint64_t origin;          /* worker: the lease whose items its deque's work descends from, 0
                                 if none (docs/pool.md, "Isolation"); the owner's relaxed writes,
                                 read by lent holders looking for their own work */
    uint32_t claims;          /* lent: holdings so far (under `held`), for the next lease */
    uint64_t next_seen;       /* as a thief (a worker, or a lent holder helping in a nested wait):
                                 the lease of the last lent slot whose claiming item it found and
                                 left for its holder (pool.c, take_stale_next); the owner's own */
    pthread_t thread;
    bool started;
    uint32_t exited;          /* set (release) as worker_main returns: a bounded join polls it */
    uint64_t rng;
    ex_work *held_back;       /* items held back by the owner (exi_pool_hold_started), newest first */
    uint32_t unrun_helpers;   /* the owner's: helper items of its last eager bulk on this slot's
                                 pool that it took back unrun (pool_bulk.c) */
    bool timer_kick;          /* the owner armed a new earliest timer with nobody keeping time: it
                                 wakes a parked worker only if it goes on to more work (pool_timers.c) */
    uintptr_t stack_lo, stack_size;  /* the owner thread's stack (pool.c, room_to_nest); 0: unknown */
    ex_pool_worker_stats stats;  /* written by the owner (relaxed), read by anyone */
    uint64_t last_poll_ns;       /* when this slot last polled the pool's pollers (pool_poll.c) */
    uint64_t holds;              /* scheduler handles taken minus dropped on this worker: its
                                    own (relaxed) writes, summed by destroy after the join */
    exi_trace_buf trace;
    char name[EXI_POOL_NAME_MAX];
} exi_worker;

typedef enum exi_wait_policy { EXI_WAIT_ADAPTIVE, EXI_WAIT_PASSIVE, EXI_WAIT_ACTIVE } exi_wait_policy;

/* A poller (cexec/poller.h) is a slot of its pool: the handle stays
 * valid memory for the pool's life, and its wake-up timer with it, so a
 * timer that fires after a remove finds a free slot, never freed memory. */
struct ex_pool_poller {
    ex_pool *pool;
    uint32_t busy;            /* 1 while one agent polls, or add/remove writes fn */
    uint32_t state;           /* EXI_POLL_ACTIVE | EXI_POLL_AGAIN */
    ex_poll_fn fn;            /* under busy; NULL: the slot is free */
    void *ctx;
    bool removed;             /* a remove from inside the poll: the poll leaves state alone */
    uint32_t armed;           /* the wake-up timer is armed (its op below is in use) */
    uint64_t backoff_ns;      /* the next wake-up's delay (relaxed: a hint outside busy) */
    exi_timer_op timer;
};

#define EXI_POLL_ACTIVE 1u
#define EXI_POLL_AGAIN 2u

struct ex_pool {
    unsigned n;               /* workers: slots [0, n) */
    unsigned slots;           /* n + lent slots: slots [n, slots) are lent */
    exi_worker *workers;      /* all the slots */
    uint64_t *idle;           /* bit i: worker i is parked or about to park */
    unsigned idle_words;
    uint32_t stopping;
    pthread_mutex_t shutdown_mu;  /* serialises shutdown; `shut` under it */
    bool shut;
    const void *shutting_thread;  /* exi_thread_id() of the thread inside shutdown, else NULL */
    uint64_t fork_gen;        /* the process's fork generation at create (exi_fork.h) */
    uint32_t next_home;       /* round-robin inbox choice for new submitting threads */
    uint32_t holders;         /* handles taken minus dropped off the workers (int32); a futex word */
    uint32_t closing;         /* destroy is waiting for the handles */
    uint64_t id;              /* unique per pool, even at a recycled address */
    const ex_allocator *frame_alloc;  /* config.allocator, or the arenas below */
    ex_jemalloc_allocator *arenas;    /* owned, with EX_POOL_FRAMES_ARENAS */
    unsigned spin_rounds;
    exi_wait_policy wait_policy;
    uint64_t linger_ns;       /* adaptive: how long the last awake worker keeps looking */
    bool pin;
    char *trace_path;
    uint64_t trace_origin;
    const ex_allocator *alloc;
    /* Timers (pool_timers.c).  next_deadline and keeper are read by every
     * worker between items and before it parks: a line of their own. */
    pthread_mutex_t timers_mu;
    exi_timer_heap timers;    /* under timers_mu */
    ex_clock *clock;          /* a virtual clock, or NULL: CLOCK_MONOTONIC */
    _Alignas(64) uint64_t next_deadline;  /* the earliest armed deadline (int64 ns), EXI_NO_DEADLINE if none */
    uint32_t keeper;          /* 1 + index of the worker parked until next_deadline, or 0 */
    uint64_t keeper_until;    /* the deadline the keeper sleeps until; 0: not published yet */
    uint32_t polls_active;    /* bit i: polls[i] is active; read by every worker after each item, beside next_deadline */
    ex_pool_poller polls[EX_POOL_POLLERS_MAX];  /* pool_poll.c */
};

#define EXI_NO_DEADLINE ((uint64_t)INT64_MAX)

/* ------------------------------------------------ timers (pool_timers.c) */

/* Whether a timer is due: one load while none is armed. */
static inline bool exi_pool_timer_due(ex_pool *p) {
    uint64_t nd = exi_load_rlx_u64(&p->next_deadline);
    return nd != EXI_NO_DEADLINE && (int64_t)nd <= ex_now();
}

/* Fires due timers on the calling worker. */
void exi_pool_fire_due(ex_pool *p);

/* For a worker about to park (idle bit set): the deadline to wait until
 * as the pool's timekeeper (EXI_NO_DEADLINE: wait until woken; some other
 * worker keeps time, or nothing is armed), or a deadline already past
 * (do not wait: fire).  Takes the keeper's role when it returns a
 * deadline; exi_pool_keeper_leave gives it back after the wait. */
uint64_t exi_pool_keeper_deadline(exi_worker *me);
void exi_pool_keeper_leave(exi_worker *me, bool claimed_for_work);

/* A worker that deferred its wake-up (timer_kick) and is about to run more
 * work: wakes a parked worker to keep time if nobody does yet. */
void exi_pool_kick_unkept(ex_pool *p);

/* Completes every armed timer stopped (shutdown, after the workers left). */
void exi_pool_drop_timers(ex_pool *p);

/* On a virtual clock: advances walk the pool from create (attach,
 * EX_ENOMEM) to shutdown (detach); the pool reads the clock until its
 * memory goes (release, in destroy: a retained handle may still arm a
 * timer, which reads the clock before it is refused). */
ex_error exi_pool_clock_attach(ex_pool *p);
void exi_pool_clock_detach(ex_pool *p);
void exi_pool_clock_release(ex_pool *p);

/* The pool's connect_schedule_at. */
ex_error exi_pool_connect_at(void *self, ex_timer_when when, ex_receiver r, void *storage);

/* Whether w records steal and park events.  A lent slot records only its
 * items' runs, under its gate (pool.c, trace_lent): its holder may run
 * items while shutdown writes the trace. */
static inline bool tracing(const exi_worker *w) { return w->trace.events != NULL && !w->lent; }

/* Queues w on p as ex_post does (its deque on one of p's workers, else an
 * inbox), waking a parked worker; EX_ESHUTDOWN once p is shutting down. */
ex_error exi_pool_submit(ex_pool *p, ex_work *w);

/* On an agent of p (a worker, or a lent caller running p's items): queues
 * w on its own deque like exi_pool_submit but wakes nobody, and returns
 * true; an awake worker may still steal it.  False, with nothing done,
 * elsewhere or once p is stopping.  For work the caller may well run
 * itself: exi_pool_wake once it turns out to be worth a wake-up. */
bool exi_pool_push_quiet(ex_pool *p, ex_work *w);

/* How many of p's workers, other than the caller, are not parked (busy,
 * or still looking for work and about to steal what is queued).  A hint. */
unsigned exi_pool_awake_others(ex_pool *p);

/* Wakes up to k parked workers of p (fewer if fewer are parked), after
 * quiet pushes: the same barrier as a submission's notify, so none of
 * them parks without seeing the items pushed before. */
void exi_pool_wake(ex_pool *p, unsigned k);

/* The calling thread's slot of a pool (a worker, or a lent slot while its
 * holder runs the pool's items), or NULL. */
exi_worker *exi_pool_current(void);

/* Wakes one parked worker (other than `except`, which may be NULL)
 * without claiming it (its idle bit stays set): it looks around and
 * parks again, without spinning or lingering for work.  For timekeeping
 * (pool_timers.c): a claim would make a keeper claimed for work hand its
 * role on in turn, and a worker woken only to keep time linger as if work
 * were coming. */
void exi_pool_nudge_idle(ex_pool *p, const exi_worker *except);

/* ---------------------------------------------- pollers (pool_poll.c) */

/* Whether a poller is active: one load while none is. */
static inline bool exi_pool_polling(ex_pool *p) { return exi_load_rlx_u32(&p->polls_active) != 0; }

/* Polls every active poller that no other agent is polling, on the
 * calling agent of p; returns whether one of them made progress. */
bool exi_pool_poll_all(ex_pool *p, exi_worker *me);

/* After an item, while a poller is active: polls if me's last poll is a
 * few microseconds old. */
void exi_pool_poll_between(exi_worker *me);

/* A worker found no work and is about to park while a poller is active:
 * polls once more; true if that made progress (look for work again),
 * else arms the wake-up timers of the pollers still active and returns
 * false (park: the timekeeper wakes for them). */
bool exi_pool_poll_before_park(exi_worker *me);

/* A lent caller stops waiting: the pollers still active get their wake-up
 * timers, since nobody else may be polling them. */
void exi_pool_polls_hand_over(ex_pool *p);

/* Whether the calling thread lends itself to p (it holds a lent slot of p,
 * or just claimed one in its open offer): it polls p's pollers while it
 * waits (pool.c). */
bool exi_pool_lend_to(ex_pool *p);

/* Create: ties each poller slot to p. */
void exi_pool_polls_init(ex_pool *p);

/* The pool's bulk run function, given to ex_bulk_run_on by its domain
 * (pool_bulk.c). */
void exi_pool_bulk(void *self, ex_bulk_job *job);

#endif
