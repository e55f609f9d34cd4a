/* SPDX-License-Identifier: MIT */
/* poll.pml - Promela model of a pool poller's activation rule
 * (src/resources/pool_poll.c: ex_pool_poller_activate, poll_one, arm,
 * exi_pool_poll_before_park, exi_pool_polls_hand_over) driving the MPI
 * engine's rounds (src/mpi/progress.c: exi_mpi_start, engine_poll,
 * round_test).
 *
 * Memory model: sequential consistency.  Every access the rule relies on
 * is a read-modify-write (fetch_or, fetch_and, CAS, exchange, fetch_add:
 * full barriers on x86 and through exi_atomic.h elsewhere) or is made
 * under the poller's busy flag, which a CAS takes and a release store
 * gives back.
 *
 * The pool's mask of active pollers (polls_active) is modelled: workers
 * poll only the pollers whose bit is set, and a worker about to park arms
 * the timers of those alone.
 *
 * What is abstracted: the pool's timers.  model/timer.pml shows that an
 * armed timer fires on some worker; here `armed` is that promise, and the
 * process `timer` fires it (polls), as the worker that fires it does,
 * and re-arms it when the poller is still active, as that worker does
 * before it parks.  A worker's other polls (between items, on spin
 * rounds) are the process `worker`, which may stop at any moment and then
 * parks, polling and arming first as exi_pool_poll_before_park does.
 *
 * Scenario: NSTART starters each start one operation (pending + 1, push
 * onto incoming, activate).  Starter 0 is a caller lent to the pool in
 * ex_sync_wait: its activation arms nothing, it polls while it waits (as
 * often as it likes, maybe never) and hands over when it stops waiting.
 * The others are threads outside the pool (their activation arms the
 * timer due at once).  A round takes incoming whole, completes what it
 * took (an immediate completion: the worst case for going idle early)
 * and says idle when nothing is pending.
 *
 * Properties:
 *  - one agent at a time: no two rounds overlap (assert in round);
 *  - no stranded operation: once every starter is done, the timer is
 *    unarmed and the worker has stopped, nothing is pending (assert at
 *    the end of `timer`): an operation is never left pending with nobody
 *    to poll for it.
 *
 * Deliberately broken variants (each must be reported as an error):
 *  -DBROKEN_PLAIN_IDLE     an idle poll clears ACTIVE with a plain store,
 *                          not a CAS from exactly ACTIVE: an activation
 *                          during the poll is lost;
 *  -DBROKEN_NO_HAND_OVER   the lent caller stops waiting without arming
 *                          the timer for a poller still active;
 *  -DBROKEN_MASK_NO_RECHECK  an idle poll clears the poller's bit in the
 *                          pool's mask without reading the state again:
 *                          an activation between the CAS and the clear
 *                          leaves an active poller out of the mask, which
 *                          workers poll and arm from (found by
 *                          tests/stress/poll_stress.c in CI). */

#define NSTART 3
#define ACTIVE 1
#define AGAIN 2

byte state;      /* ACTIVE | AGAIN */
bit busy;
byte pending;    /* started, not completed */
byte incoming;   /* pushed, not taken by a round */
bit armed;       /* the wake-up timer is armed: it will fire (timer.pml) */
bit mask;        /* the poller's bit in the pool's polls_active: workers poll, and arm
                    before parking, only the pollers whose bit is set */
byte started;    /* starters done */
bit worker_done;
byte inside;     /* rounds running */

inline round() {
    byte took, left;
    inside++;
    assert(inside == 1);
    atomic { took = incoming; incoming = 0 }
    atomic { pending = pending - took; left = pending }
    inside--;
}

/* poll_one: returns through `moved`-less effects only; `polled` says if
 * this agent got the poller. */
inline poll_one() {
    bit got, idled;
    byte was;
    idled = 0;
    atomic {
        if
        :: busy == 0 && (state & ACTIVE) -> busy = 1; got = 1
        :: else -> got = 0
        fi
    }
    if
    :: got ->
        was = state;   /* AGAIN is cleared only when this load saw it */
        if
        :: (was & AGAIN) -> atomic { was = state; state = state & ~AGAIN }
        :: else -> skip
        fi;
        if
        :: (was & ACTIVE) ->
            round();
            if
            :: pending == 0 ->   /* engine_poll: EX_POLL_IDLE */
#ifdef BROKEN_PLAIN_IDLE
                state = 0; idled = 1
#else
                atomic { if :: state == ACTIVE -> state = 0; idled = 1 :: else -> skip fi }
#endif
            :: else -> skip
            fi;
            if
            :: idled ->   /* leave_mask */
                mask = 0;
#ifndef BROKEN_MASK_NO_RECHECK
                if
                :: (state & ACTIVE) -> mask = 1
                :: else -> skip
                fi
#endif
            :: else -> skip
            fi
        :: else -> skip
        fi;
        busy = 0
    :: else -> skip
    fi
}

/* ex_pool_poller_activate; lent: the caller lends itself and arms nothing. */
inline activate(lent) {
    byte old;
    atomic { old = state; state = state | ACTIVE | AGAIN }
    if
    :: (old & ACTIVE) == 0 ->
        mask = 1;
        if
        :: !lent -> armed = 1   /* arm(): a timer already armed stays as it is */
        :: else -> skip
        fi
    :: else -> skip
    fi
}

inline start(lent) {
    atomic { pending++ }
    atomic { incoming++ }
    activate(lent)
}

proctype starter(bit lent) {
    start(lent);
    if
    :: lent ->
        /* polls while it waits, then gives its slot back */
        do
        :: poll_one()
        :: break
        od;
#ifndef BROKEN_NO_HAND_OVER
        if
        :: mask -> armed = 1   /* exi_pool_polls_hand_over: the mask's pollers */
        :: else -> skip
        fi
#endif
    :: else -> skip
    fi;
    atomic { started++ }
}

/* A worker's opportunistic polls (between items, on spin rounds); it may
 * stop at any moment, and then parks. */
proctype worker() {
    do
    :: mask -> poll_one()
    :: break
    od;
    /* It parks: exi_pool_poll_before_park polls the mask's pollers once
     * more and arms the timers of those still in the mask. */
    if
    :: mask ->
        poll_one();
        if
        :: mask -> armed = 1
        :: else -> skip
        fi
    :: else -> skip
    fi;
    worker_done = 1
}

/* The armed wake-up timer fires on some worker, which polls, and arms it
 * again before it parks if the poller is still active. */
proctype timer() {
    do
    :: armed ->
        armed = 0;
        poll_one();
        if
        :: mask -> armed = 1   /* the firing worker parks: exi_pool_poll_before_park, the mask's pollers */
        :: else -> skip
        fi
    :: atomic { started == NSTART && worker_done && !armed && busy == 0 } -> break
    od;
    assert(pending == 0)
}

init {
    atomic {
        run starter(1);
        run starter(0);
        run starter(0);
        run worker();
        run timer()
    }
}
