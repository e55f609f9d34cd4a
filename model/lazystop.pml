/* SPDX-License-Identifier: MIT */
/* lazystop.pml - Promela model of the lazy stop sources fork-joins give
 * their children (src/core/exi_lazy_stop.h, src/core/stop_token.c:
 * exi_lazy_stop_follow, exi_lazy_stop_above, exi_lazy_stop_link and the
 * counted request in ex_stop_source_request_stop).
 *
 * Memory model: sequential consistency.  The counts are read-modify-writes;
 * the flags, link states and epochs are read and written with acquire
 * and release (exi_atomic.h), in the order modelled here.
 *
 * Scenario: a chain of three lazy sources.  S0 is a root (linked: it
 * follows nothing lazily), S1 follows S0 and S2 follows S1, both
 * unlinked at first.  Processes:
 *  - r0 and r1 each may request stop, on S0 and on S1 (counted: nbegun,
 *    flag, ndone; then the source's callbacks, here S1's link on S0 when
 *    it is registered);
 *  - linker links S1 (as a registration on S1's token does): it
 *    registers S1's link on S0 (which fires at once when S0 is stopped)
 *    and then publishes S1 linked;
 *  - refresher checks S1 (ex_stop_token_stop_requested on S1's token),
 *    which may store S1's epoch while S2 inherits it;
 *  - starter starts S2 (exi_lazy_stop_follow: inherit S1's epoch, read
 *    S1's flag, then the check above S2); if that finds no stop, a
 *    checker (a child polling its token) checks S2 twice, refreshing
 *    S2's epoch.
 *
 * Property (asserts): a request that returned (its flag set, its count
 * ndone, its callbacks run) before a check or a start began is seen by
 * it.  That is what makes a stop requested before a fork-join's start
 * start no child, and what a child polling its token relies on.
 *
 * Deliberately broken variants (each must be reported as an error):
 *  -DBROKEN_EPOCH_FROM_BEGUN  a walk that found nothing stores `nbegun`,
 *                          which counts a request whose flag is not set
 *                          yet, as the epoch;
 *  -DBROKEN_DONE_AFTER_WALK   the walk reads `ndone` after the flags it
 *                          vouches for;
 *  -DBROKEN_FLAG_BEFORE_EPOCH  the start reads the parent's flag before it
 *                          inherits the parent's epoch, which a check of
 *                          the parent may meanwhile have refreshed past a
 *                          request on the parent itself;
 *  -DBROKEN_WALK_STOPS_AT_LINKED  the walk stops at the first linked
 *                          source (and a linked source answers by its own
 *                          flag): a check that saw S0 stopped while S1's
 *                          link was being registered says "not stopped"
 *                          once S1 is published linked, until S0's
 *                          request reaches S1's link (a reviewer found it);
 *  -DBROKEN_NO_BEGUN       a single count, moved after the flag: a check
 *                          by a thread that saw the flag, made before the
 *                          count moved, trusts an epoch the request has
 *                          outdated (the bug a reviewer found in the task
 *                          fork's first version of this protocol). */

#define NONE 255

byte flag[3];      /* stop requested on S0, S1, S2 */
bool linked[3];    /* S0 linked from the start; S1 and S2 follow lazily */
byte epoch[3];
byte nbegun, ndone;
bool link_queued;  /* S1's link is in S0's callback list */
byte returned;     /* requests that returned */
bool s2_running;   /* S2 started and found no stop: its children check */

inline up_of(src, dst) {
    if
    :: src == 2 -> dst = 1
    :: src == 1 -> dst = 0
    :: else -> dst = NONE
    fi
}

/* A counted request on source i (not its callbacks). */
inline request_flag(i) {
#ifndef BROKEN_NO_BEGUN
    nbegun++;
#endif
    flag[i] = 1;
    ndone++
}

/* S1's link fired: S1's owner forwards the request to S1. */
inline fire_s1() {
    request_flag(1)
}

/* Whether stop was requested above source l (its own flag checked by the
 * caller): exi_lazy_stop_above, which reads the flag of every lazy source
 * above, linked or not, unless the epoch still holds.  (lk stays false
 * but in the broken variant.)  Each atomic block reads one shared
 * variable (or writes one) with the local steps after it: the same
 * interleavings, fewer states. */
inline above(l, res, e, d, x, u, lk) {
    res = false;
    if
#ifdef BROKEN_WALK_STOPS_AT_LINKED
    :: atomic { linked[l] -> res = (flag[l] != 0) }  /* (the flag read again after LINKED) */
    :: atomic { !linked[l] -> e = epoch[l] };
#else
    :: atomic { true -> e = epoch[l] };
#endif
#ifdef BROKEN_NO_BEGUN
        if
        :: atomic { ndone == e -> e = 0 }
#else
        if
        :: atomic { nbegun == e -> e = 0 }
#endif
        :: else ->
#ifdef BROKEN_EPOCH_FROM_BEGUN
            d = nbegun;
#else
#ifndef BROKEN_DONE_AFTER_WALK
            d = ndone;
#endif
#endif
            up_of(l, x);
            do
            :: x == NONE -> break
            :: else ->
#ifdef BROKEN_WALK_STOPS_AT_LINKED
                lk = linked[x];
#endif
                if
                :: atomic { flag[x] -> res = true }; break
                :: atomic { else -> if :: lk -> x = NONE :: else -> up_of(x, u); x = u fi }
                fi
            od;
#ifdef BROKEN_DONE_AFTER_WALK
            d = ndone;
#endif
            atomic {
                if
                :: !res -> epoch[l] = d
                :: else -> skip
                fi;
                e = 0; d = 0; x = 0; u = 0; lk = false
            }
        fi
    fi
}

/* ex_stop_token_stop_requested on source l's token. */
inline check(l, res, e, d, x, u, lk) {
    if
    :: flag[l] -> res = true
    :: else -> above(l, res, e, d, x, u, lk)
    fi
}

proctype r0() {
    bool snap;
    if
    :: true ->
#ifndef BROKEN_NO_BEGUN
        nbegun++;
#endif
        atomic { flag[0] = 1; snap = link_queued };  /* the flag with the list lock */
        ndone++;
        if
        :: snap -> fire_s1()  /* S0's callbacks: S1's link */
        :: else -> skip
        fi;
        returned++
    :: true -> skip
    fi
}

proctype r1() {
    if
    :: true -> request_flag(1); returned++
    :: true -> skip
    fi
}

proctype linker() {
    bool fire_now;
    if
    :: true ->
        /* registration on S0 under its lock: queued, or fired at once */
        atomic {
            if
            :: flag[0] -> fire_now = true
            :: else -> link_queued = true
            fi
        };
        if
        :: fire_now -> fire_s1()
        :: else -> skip
        fi;
        linked[1] = true
    :: true -> skip
    fi
}

proctype refresher() {
    bool res, lk;
    byte e, d, x, u;
    check(1, res, e, d, x, u, lk);
    res = false
}

proctype checker() {
    bool res, lk, seen;
    byte before, e, d, x, u;
end_idle:
    (s2_running);  /* (never, when the start found a stop) */
    before = returned;
    check(2, res, e, d, x, u, lk);
    assert(before == 0 || res);
    /* Having seen S2's parent stopped (S2's own token looks at it first),
     * or S2 itself stopped, a check of S2 must say stopped. */
    seen = flag[1] || res;
    before = returned;
    check(2, res, e, d, x, u, lk);
    assert((before == 0 && !seen) || res)
}

/* exi_lazy_stop_follow(S2, S1's token). */
proctype starter() {
    bool res, lk;
    byte before, e, d, x, u;
    before = returned;
#ifdef BROKEN_FLAG_BEFORE_EPOCH
    res = flag[1];
    epoch[2] = epoch[1];
    if
    :: res -> skip
    :: else -> above(2, res, e, d, x, u, lk)
    fi;
#else
    epoch[2] = epoch[1];
    if
    :: flag[1] -> res = true
    :: else -> above(2, res, e, d, x, u, lk)
    fi;
#endif
    assert(before == 0 || res);
    if
    :: !res -> s2_running = true
    :: else -> skip
    fi
}

init {
    linked[0] = true;
    atomic {
        run r0();
        run r1();
        run linker();
        run refresher();
        run starter();
        run checker()
    }
}
