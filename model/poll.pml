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
 * What is abstracted: the pool's timers.  model/timer.pml shows that an
 * armed timer fires on some worker; here `armed` is that promise, and the
 * process `timer` fires it (polls), as the worker that fires it does,
 * and re-arms it when the poller is still active, as that worker does
 * before it parks.  A worker's other polls (between items, on spin
 * rounds, before parking) are the process `worker`, which may stop at any
 * moment (it went on to a long item, or parked).
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
 *                          the timer for a poller still active. */

#define NSTART 3
#define ACTIVE 1
#define AGAIN 2

byte state;      /* ACTIVE | AGAIN */
bit busy;
byte pending;    /* started, not completed */
byte incoming;   /* pushed, not taken by a round */
bit armed;       /* the wake-up timer is armed: it will fire (timer.pml) */
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
    bit got;
    byte was;
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
                state = 0
#else
                atomic { if :: state == ACTIVE -> state = 0 :: else -> skip fi }
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
    :: (old & ACTIVE) == 0 && !lent -> armed = 1
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
        :: (state & ACTIVE) -> armed = 1   /* exi_pool_polls_hand_over */
        :: else -> skip
        fi
#endif
    :: else -> skip
    fi;
    atomic { started++ }
}

/* A worker's opportunistic polls; it may stop at any moment. */
proctype worker() {
    do
    :: poll_one()
    :: break
    od;
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
        :: (state & ACTIVE) -> armed = 1
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
