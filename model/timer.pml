/* SPDX-License-Identifier: MIT */
/* timer.pml - Promela model of the pool's timekeeping
 * (src/resources/pool_timers.c, pool.c park and worker_main): armed timers
 * are fired by workers between items, and of the workers that park, one,
 * the keeper, parks only until the earliest deadline.  model/README.md,
 * "timer.pml", has the mapping, the bounds and the figures.
 *
 * Property (a never claim, checked in every reachable state): while a timer
 * is armed, someone will look at it in time: an arm still on its way to
 * its wake-up, or a worker that is awake and not inside a long item, or
 * has a wake-up pending, or sleeps as keeper until no later than the
 * earliest deadline (unless every worker is inside a long item).  A worker
 * asleep until woken, or a keeper asleep past the earliest deadline, with
 * nobody else responsible, is a lost or late wake-up.  Also: every timer
 * fires exactly once (main waits for both, then shuts the pool down, and
 * an invalid end state is reported if they never fire).
 *
 * Memory model: sequentially consistent.  The C code makes every store
 * of the two store-then-load pairs a read-modify-write (idle bit: locked
 * or; keeper: cas; next_deadline: exchange), which is a full barrier on
 * x86 and, through exi_atomic.h's fences, on aarch64; the loads after
 * them are ordered.
 *
 * Switches: -DARM_ON_WORKER (worker 0 arms the two timers in an item, then
 * goes on to a long item or parks: the deferred wake-up), -DWAKER (a submission claims a parked worker for work at any
 * moment), -DONE_TIMER, -DNO_CLAIM (no never claim: then invalid end
 * states are checked, i.e. both timers fire and the pool shuts down).
 * Broken variants (each must fail):
 *   BROKEN_NO_IDLE_WAKE   an armer with no keeper wakes nobody
 *   BROKEN_KEEPER_STALE   a keeper sleeps until the deadline it read
 *                         before taking the role (no second read)
 *   BROKEN_NO_KICK        an armer wakes any parked worker instead of
 *                         the keeper, which sleeps on until a later
 *                         deadline
 *   BROKEN_UNTIL_NONZERO  an armer that finds the keeper's deadline not yet
 *                         published wakes nobody
 *   BROKEN_DEFER_NO_KICK  a worker that armed and goes on to a long item
 *                         wakes nobody (with -DARM_ON_WORKER)
 *   BROKEN_CLAIMING_HANDOFF  a keeper claimed for work hands its role on
 *                         by claiming the next one, which hands it on in
 *                         turn: with -DWAKER, wake-ups without end
 *                         (caught as more hand-offs than claims) */

#define NW 2      /* workers (the monitor and wake_one name them) */
#define INF 9     /* EXI_NO_DEADLINE */
#define TMAX 2    /* the clock runs 0..TMAX: the deadlines are 1 and 2 */

byte now;                 /* CLOCK_MONOTONIC, in ticks */
byte nd = INF;            /* next_deadline */
byte keeper;              /* 0, or 1 + the keeper's index */
byte kuntil;              /* the deadline the keeper sleeps until; 0: not published yet */
bit idle[NW];             /* the idle mask */
bit pend[NW];             /* the event count moved since the worker read it at
                             park (exi_event_value): a counter and the value read,
                             folded into one bit, which keeps the state space finite */
byte waiting[NW];         /* 0 awake, 1 asleep until woken, 2 asleep until wd or woken */
byte wd[NW];
bit stopping;
bit busy[NW];             /* in an item that runs long: looks at no timer meanwhile */
bit tkick[NW];            /* timer_kick: armed with nobody keeping time, wake-up deferred */

/* the heap: two timers */
byte dl[2] = INF;         /* deadline while armed, INF when not */
byte fired;
bit arming;               /* an arm between its insert and its wake-up */
bit mu;                   /* timers_mu, held by an arm from its insert through its wake-up */

inline min_armed(m) {
    m = (dl[0] < dl[1] -> dl[0] : dl[1])
}

/* exi_pool_wake(p, 1): claims one idle bit (any) and wakes its worker. */
inline wake_one() {
    atomic {
        if
        :: idle[0] -> idle[0] = 0; pend[0] = 1
        :: idle[1] -> idle[1] = 0; pend[1] = 1
        :: else -> skip
        fi
    }
}

/* exi_pool_nudge_idle: the keeper claimed for work hands its role on by
 * waking another parked worker without claiming it (its idle bit stays
 * set, so it is not "claimed" and hands nothing on in turn). */
byte handoffs;
inline nudge_idle(me) {
    atomic {
        handoffs++;
        /* each hand-off follows a claim by an armer (2) or the waker (1):
         * more means hand-offs cause hand-offs */
        assert(handoffs <= 3);
        if
#ifdef BROKEN_CLAIMING_HANDOFF
        :: me != 0 && idle[0] -> idle[0] = 0; pend[0] = 1
        :: me != 1 && idle[1] -> idle[1] = 0; pend[1] = 1
#else
        :: me != 0 && idle[0] -> pend[0] = 1
        :: me != 1 && idle[1] -> pend[1] = 1
#endif
        :: else -> skip
        fi
    }
}

/* A kick for timekeeping: wakes one parked worker without claiming it
 * (exi_pool_nudge_idle with no exception). */
inline nudge_any() {
    atomic {
        if
        :: idle[0] -> pend[0] = 1
        :: idle[1] -> pend[1] = 1
        :: else -> skip
        fi
    }
}

/* pool_arm: under timers_mu, insert; a new earliest is published
 * (exchange) and then the keeper, or a parked worker, is woken, still
 * under the lock: once it is released the timer may fire and complete,
 * and whoever saw that may destroy the pool, so the arm touches nothing
 * after the unlock.  fire_due waits for the lock meanwhile. */
inline arm(i, d, by) {
    atomic {
        !mu;
        mu = 1;
        min_armed(m);
        dl[i] = d;
        earliest = d < m;
        if
        :: earliest -> nd = d; arming = 1
        :: else -> skip
        fi
    }
    if
    :: earliest ->
        k = keeper;                           /* kick_keeper: load */
        u = kuntil;
        if
#ifdef BROKEN_NO_KICK
        :: true -> wake_one()
#else
#ifdef BROKEN_UNTIL_NONZERO
        :: k != 0 && u != 0 && d < u -> pend[k - 1] = 1
        :: k != 0 && !(u != 0 && d < u) -> skip
#else
        :: k != 0 && (u == 0 || d < u) -> pend[k - 1] = 1   /* it sleeps until later, or has not said */
        :: k != 0 && u != 0 && d >= u -> skip                /* it wakes by u <= d anyway */
#endif
#ifdef BROKEN_NO_IDLE_WAKE
        :: k == 0 -> skip
#else
        :: k == 0 && by < NW -> tkick[by] = 1     /* a worker arms: it wakes someone only if it works on */
        :: k == 0 && by == NW -> nudge_any()
#endif
#endif
        fi;
        arming = 0
    :: else -> skip
    fi;
    mu = 0                                    /* the unlock: the arm's last step */
}

/* exi_pool_fire_due, when exi_pool_timer_due: under the lock (it waits
 * while an arm holds it), every due timer out of the heap (fired, in the
 * model, at once), next_deadline republished. */
inline fire_due() {
    atomic {
        if
        :: nd <= now && !mu ->
            if :: dl[0] <= now -> dl[0] = INF; fired++ :: else -> skip fi;
            if :: dl[1] <= now -> dl[1] = INF; fired++ :: else -> skip fi;
            min_armed(nd)
        :: nd > now -> skip
        fi
    }
}

/* exi_pool_keeper_leave: the deadline unpublished first, then the role. */
inline LEAVE_ROLE(me) {
    if
    :: keeper == me + 1 -> kuntil = 0; keeper = 0
    :: else -> skip
    fi
}

proctype worker(byte me) {
    byte until, d;
    bool claimed;
    bit one = 0;
#ifdef ARM_ON_WORKER
    byte m, k, u;
    bool earliest;
    bit armed_here = 0;
#endif
loop:
    /* locals dead from here on: reset, so that they do not multiply states */
    atomic { until = 0; d = 0; claimed = 0; one = 0 }
    if
    :: stopping -> goto done
    :: else -> skip
    fi;
    fire_due();
#ifdef ARM_ON_WORKER
    /* worker 0's one item arms both timers (on the worker: the deferred
     * wake-up), then it finds more work, or none */
    if
    :: me == 0 && !armed_here ->
        armed_here = 1;
        arm(0, 2, me);
        arm(1, 1, me);
        if
        :: true ->                            /* more work: worker_main's kick, then a long item */
#ifndef BROKEN_DEFER_NO_KICK
            if
            :: tkick[me] ->
                tkick[me] = 0;
                atomic { if :: keeper == 0 && nd != INF -> nudge_any() :: else -> skip fi }
            :: else -> skip
            fi;
#endif
            busy[me] = 1;
            busy[me] = 0;
            goto loop
        :: true -> tkick[me] = 0              /* no more work: it parks and keeps time itself */
        fi
    :: else -> skip
    fi;
#endif
    /* no work in this model: find_work, the spin and the linger find none */
    pend[me] = 0;                             /* park: seen = exi_event_value */
    idle[me] = 1;                             /* idle_set + the heavy barrier */
    if
    :: stopping -> idle[me] = 0; goto loop    /* park's re-check */
    :: else -> skip
    fi;
    /* exi_pool_keeper_deadline */
    until = INF;
    d = nd;
    if
    :: d != INF ->
        atomic {
            if
            :: keeper == 0 -> keeper = me + 1; one = 1
            :: else -> one = 0
            fi
        }
        if
        :: one ->
#ifndef BROKEN_KEEPER_STALE
            d = nd;                           /* the second read, after taking the role */
#endif
            kuntil = d;                       /* published (exchange): an armer compares with it */
            if
            :: d == INF -> LEAVE_ROLE(me)
            :: else -> until = d
            fi
        :: else -> skip
        fi
    :: else -> skip
    fi;
    if
    :: until != INF && until <= now ->        /* due: leave the role, fire at the top */
        LEAVE_ROLE(me);
        idle[me] = 0;
        goto loop
    :: else -> skip
    fi;
    /* the futex wait: sleeps only if the value is still `seen` */
    atomic {
        if
        :: !pend[me] -> waiting[me] = (until == INF -> 1 : 2); wd[me] = until
        :: else -> skip
        fi
    }
    atomic {
        (waiting[me] == 0 || pend[me] || (waiting[me] == 2 && now >= wd[me])) -> waiting[me] = 0; wd[me] = 0
    }
    /* idle_clear: a cleared bit means a waker claimed this worker */
    atomic { claimed = !idle[me]; idle[me] = 0 }
    if
    :: until != INF ->                        /* exi_pool_keeper_leave */
        LEAVE_ROLE(me);
        if
        :: claimed && nd != INF -> nudge_idle(me)
        :: else -> skip
        fi
    :: else -> skip
    fi;
    goto loop;
done:
    skip
}

proctype armer() {
    byte m, k, u;
    bool earliest;
#ifdef ONE_TIMER
    arm(0, 2, NW)
#else
    arm(0, 2, NW);                            /* a later timer first ... */
    arm(1, 1, NW)                             /* ... then an earlier one */
#endif
}

proctype clock() {
    do
    :: now < TMAX -> now++
    :: now == TMAX -> break
    od
}

/* A submission that claims a parked worker for work (notify). */
proctype waker() {
    wake_one()
}

/* While a timer is armed, someone is responsible for it: checked in
 * every reachable state by a never claim (a monitor process's assert is
 * not, under partial order reduction). */
#define RESP(w) ((waiting[w] == 0 && !busy[w]) || pend[w] || (waiting[w] == 2 && wd[w] <= nd))
#define RESPONSIBLE (nd == INF || arming || RESP(0) || RESP(1) || (busy[0] && busy[1]))
#ifndef NO_CLAIM
never {
    do
    :: !RESPONSIBLE -> break
    :: else
    od
}
#endif

init {
    byte i;
    atomic {
        for (i : 0 .. NW - 1) { run worker(i) }
#ifndef ARM_ON_WORKER
        run armer();
#endif
        run clock();
#ifdef WAKER
        run waker()
#endif
    }
#ifdef ONE_TIMER
    (fired == 1);
#else
    (fired == 2);
#endif
    atomic {
        stopping = 1;
        for (i : 0 .. NW - 1) { pend[i] = 1 }
    }
    assert(dl[0] == INF && dl[1] == INF)
}
