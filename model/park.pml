/* SPDX-License-Identifier: MIT */
/* park.pml - Promela model of the pool's park/wake protocol
 * (src/resources/pool.c, park.c) with the two queues it publishes through,
 * the per-slot Chase-Lev deque (deque.c) and the per-slot inbox (inbox.c),
 * at the granularity of their atomic accesses, and (-DLEND) a lent caller:
 * a thread outside the pool that waits in ex_sync_wait and lends itself to
 * the pool (src/adaptors/sync_wait.c start_and_wait, pool.c's lent slots).
 * model/README.md has the mapping, the bounds, the figures and what is
 * left out.  "pool.c:283" below is line 283 of src/resources/pool.c,
 * "deque.c", "inbox.c" and the headers are in src/resources/ too,
 * "sync_wait.c" in src/adaptors/; every Promela step names its C lines.
 *
 * ---- Memory model ----------------------------------------------------
 * x86-TSO for the publication stores of the workers.  Each worker has a
 * one-entry store buffer; a plain store by a worker of
 *   - the deque's bottom in exi_deque_push (deque.c:74), and
 *   - the inbox link prev->next in exi_inbox_push (inbox.c:23)
 * goes to that buffer.  A flusher process per worker makes it visible at
 * any later moment; a locked instruction (xchg, cmpxchg, lock incl),
 * mfence, and thread exit drain the thread's own buffer first; the
 * worker's own loads forward from its buffer; a second buffered store
 * first makes the pending one visible (FIFO order kept).  These are the
 * stores a publisher makes before the light side of the barrier and its
 * load of the idle mask (pool.c:113-116): the store->load pattern the
 * asymmetric barrier must order.
 *   The sleeper's heavy side, membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED),
 * drains every worker's buffer in one step, at the moment of the call.
 * That is what the kernel guarantees: every other running thread of the
 * process executes a full barrier before the call returns, a store issued
 * before the call is visible after it, and the sleeper's own store (the
 * idle bit, a locked OR) is globally visible before the call, so any load
 * another thread makes after the call sees it.  The light side is a
 * compiler barrier: nothing at all in the model.
 *   Other plain stores are sequentially consistent in the model: the
 * deque's bottom restore in take (deque.c:90, 94: the deque is empty with
 * either value, so when it becomes visible changes no load's outcome), the
 * inbox head and lock (written under the consumer lock and read by others
 * only as "held" or "not the stub"; no store->load pattern involves them),
 * and everything the threads outside the pool store, the lent caller
 * included.  Their plain stores are: the lent push's bottom or link,
 * followed by the gate decrement (pool.c:171-172, locked) before any load;
 * the claiming push's store of `next` and then of held = HELD (clearing
 * PUSHING), which x86 makes visible in that order (shutdown reads held,
 * then `next`), followed by the take's xchg (locked) before any load that
 * matters; held = 0 at close, read by no one but destroy; and the
 * inbox link of an outside push (inbox.c:23), which notify's load of the
 * idle mask follows with no locked instruction between (pool.c:152, 156;
 * the gate decrement comes after, 157).  That last store->load pair is not
 * buffered in the model: the push's xchg of tail (inbox.c:21) is locked
 * and makes exi_inbox_nonempty true by itself (exi_inbox.h:36), so a
 * sleeper's re-check sees the item whether or not the link is visible yet.
 * -DSC makes the whole model sequentially consistent.
 *
 * Steps.  Each Promela step is one C atomic access.  A step may also do the
 * thread's local computation and accesses nobody else can interfere with:
 * reading the own deque's bottom or a slot only the owner writes, the
 * inbox head under the consumer lock (pool.c/deque.c/inbox.c lines say
 * which).  Two C accesses share one step only where the README argues that
 * no behaviour is lost: idle_set + the heavy barrier, take's restore of
 * bottom, push (top only feeds growth, not modelled here), steal's slot
 * load with its cas (no slot is overwritten here), and the lent slot's
 * claim (load + cas of held: the only claimant).
 *
 * ---- Scenario --------------------------------------------------------
 * NW workers (2; -DNW=3 for three).  main submits item PARENT from outside
 * the pool (inbox 0, pool.c:144-159).  A worker that runs PARENT submits
 * CHILD from inside (its deque, or its inbox when the deque cannot grow:
 * pool.c:208) and then stays busy until CHILD has completed or shutdown
 * has begun: if the other workers miss the wake-up, the pool is stuck.
 * Then it submits CHILD2 the same way and returns, so that it races the
 * others to take CHILD2 from its own deque (deque.c:86-91).
 * sub, a second external thread, submits RACER to inbox 1 % NW at any
 * time, racing shutdown.  main then either waits until its items and CHILD
 * are done (a sync_wait) or not, and shuts the pool down (pool.c:795-815,
 * stop_workers 591-601, drain 607-628): stopping, wake all, join, wait for
 * the gates, drain.
 *   -DLEND adds lent slot LS (= NW: the pool's slots are NW workers and one
 * lent slot, p->slots == NW + 1) and the lent caller, an outside thread in
 * ex_sync_wait (sync_wait.c:90-104): it opens the offer; its submission of
 * LROOT claims the slot (claim_lent_slot: cas of held from 0 to HELD |
 * PUSHING) and puts LROOT in the slot's `next` (push_next: the stopping
 * check, the store, then held = HELD; no wake-up): the claim's cas is the
 * push's gate, and shutdown waits for PUSHING as for the gates.  It then runs its slot's
 * items (exi_lend_run_one, pool.c:368-378) until its operation is done, or
 * gives up at any failed round (the spin budget, sync_wait.c:94); closes
 * (pool.c:388-406: every item left in its deque and inbox handed to a
 * worker inbox, submit_outside with notify, or cancelled once stopping;
 * held = 0, which destroy waits for); then blocks until done
 * (sync_wait.c:102-103).
 * LROOT, run by the lent caller, pushes LCHILD on the lent deque WITH
 * notify (pool.c:206) and stays busy until LCHILD is done or shutdown has
 * begun, so LCHILD must be stolen by a worker (steal and work_visible over
 * every slot, pool.c:226-249, 261-265); run by a worker (stolen), LROOT
 * pushes LCHILD on that worker's deque.  The operation is done when LROOT
 * has returned (or was cancelled or refused) and LCHILD, if created, is
 * done.  main shuts down at any moment, or after the operation is done.
 *
 * ---- Properties ------------------------------------------------------
 *  - Exactly once: an item completes (runs, is cancelled by the drain or a
 *    lent close, or is refused with EX_ESHUTDOWN) at most once: assert in
 *    complete().
 *  - Nothing lost, no lost wake-up, termination on shutdown: the system
 *    never stops moving before main (and the lent caller) have returned,
 *    and when it stops every item created has completed: the watchdog's
 *    assertions at timeout.  A state where the workers sleep while an item
 *    is queued and main waits for it is such a state; so is a worker that
 *    never exits, and a lent caller blocked for an operation never done.
 *    (Refused items complete on their submitter, possibly after shutdown
 *    returned.)
 *  - Shutdown empties the pool: once the drain is over (ghost `drained`),
 *    no item is pushed on any queue (assert in the pushes) and the lent
 *    holder takes none from its slot (assert at its take's xchg and its
 *    pop's head update): every item queued when shutdown returns was
 *    cancelled by it (pool.h, ex_pool_shutdown).
 *  - No livelock: pan -l -f (-DNP, weak fairness) finds no non-progress
 *    cycle; the model has no progress label because every fair execution
 *    of it must end.
 *
 * ---- Switches (mk/model.mk runs the combinations the README lists) ----
 *  -DNO_SUB        no sub.
 *  -DNO_PARENT     main submits nothing (with sub: the shutdown race).
 *  -DPLAIN_ITEM    main also submits PLAIN to inbox 0 after PARENT.
 *  -DNO_CHILD2     PARENT submits CHILD only.
 *  -DWAIT_ONLY / -DNO_WAIT   main always / never waits before shutdown.
 *  -DSPIN          one spin round (pool.c:348-351) before parking.
 *  -DLINGER=k      up to k more find_work rounds before parking, stopping
 *                  at any of them (linger, pool.c:326-339, 352: adaptive,
 *                  last awake, until the deadline; or active).
 *  -DLEND          the lent slot and the lent caller (above).
 *  -DLEND_NO_FALLBACK  the lent pushes always go to the lent deque (not
 *                  its inbox on a growth failure).
 *  -DSTART_PARKED  the workers start asleep in exi_event_wait with their
 *                  idle bits set (an idle pool), not starting up.
 *  -DCOARSE        deque take/steal/nonempty and inbox pop/nonempty are
 *                  single atomic steps (their linearizable specification;
 *                  the algorithms are checked fine-grained elsewhere).
 *                  Not with -DLEND.
 *  -DNO_FALLBACK   the child always goes to the deque.
 *  -DFENCES        no membarrier: both sides a full fence, as exi_park.h
 *                  falls back to (must pass).
 *  -DSPURIOUS      exi_event_wait may return early (safety only: a
 *                  wake-up that never ends is a cycle).
 *  -DSC            sequentially consistent memory.
 *
 * ---- Deliberately broken variants (each must be reported as an error) -
 *  -DBROKEN_NO_RECHECK    park() sleeps without looking for work after
 *                         setting its idle bit (drops pool.c:283's
 *                         work_visible).
 *  -DBROKEN_NO_MEMBARRIER the heavy side is only a fence (the light side
 *                         stays a compiler barrier): the publisher's
 *                         buffered store and its load of the idle mask
 *                         are no longer ordered.
 *  -DBROKEN_LATE_SEEN     the event count is read after the re-check, not
 *                         before the idle bit is set (pool.c:280).
 *  -DBROKEN_CLOSE_DROPS   the lent close gives the slot back without
 *                         handing over what is left in it (drops
 *                         pool.c:394-399).
 *  -DBROKEN_LEND_BLOCK_FIRST  the lent caller blocks for its operation
 *                         before it closes (sync_wait.c:101 after 103).
 *  -DBROKEN_LATE_LENT_GATE  shutdown waits for the workers' gates only,
 *                         drains, and only then waits for the lent slot's
 *                         gate and PUSHING (pool.c:599 over p->n, not
 *                         p->slots).
 *  -DBROKEN_PUSHING_IGNORED  shutdown waits for every gate but not for the
 *                         lent slot's PUSHING (wait_gates reading the
 *                         inboxes' gates only, as before PUSHING).
 *  -DBROKEN_LEND_NO_STOPPING  the lent push skips the stopping check
 *                         (pool.c:167-170).
 *  -DBROKEN_VISIBLE_WORKERS  work_visible looks at the workers' queues
 *                         only (pool.c:262 over p->n, not p->slots).
 *  -DLEND_NESTED   the lent caller's start waits for LROOT in a nested
 *                  ex_sync_wait before it returns (exi_lend_open notifies
 *                  for the held slot's `next`): a worker must take it.
 *  -DBROKEN_NEXT_NEVER_STOLEN  thieves always leave a lent slot's `next`
 *                         to its holder (take_stale_next without the
 *                         second pass): with LEND_NESTED the worker spins
 *                         for ever beside it (a non-progress cycle).
 *  -DBROKEN_NEXT_INVISIBLE  work_visible leaves out a lent slot's `next`:
 *                         a worker parks past the nested wait's notify
 *                         (its re-check does not see the item), and
 *                         nobody wakes it again. */

#ifndef NW
#define NW 2                      /* workers 0..NW-1 */
#endif
#ifdef LEND
#define NS (NW + 1)               /* slots: the workers, then lent slot LS */
#define LS NW
#define LT NW                     /* the lent caller's thread id (= its slot) */
#define LHOME (NW - 1)            /* its home inbox for submit_outside */
#else
#define NS NW
#endif
#define MAIN (NW + 1)             /* thread ids of the external threads */
#define SUB (NW + 2)
#define NT (NW + 3)

#ifdef LEND
#define NI 7                      /* items 1..NI; 0 is NULL */
#else
#define NI 5
#endif
#define PARENT 1
#define CHILD 2
#define RACER 3
#define PLAIN 4
#define CHILD2 5
#define LROOT 6
#define LCHILD 7
#define STUB(q) (NI + 1 + (q))    /* inbox q's stub node (exi_inbox.h:19) */
#define NNODES (NI + NS + 1)
#define CAP 4                     /* a deque here never holds more than one item */

/* Locations a worker may store to with a buffered (plain) store. */
#define A_BOT(w) (w)              /* exi_deque.h:20 bottom of slot w's deque */
#define A_NEXT(n) (NS + (n))      /* ex_work.next of node n */
#define NADDR (NS + NNODES)

short mem[NADDR];                 /* bottoms and next links */
byte top[NS];                     /* exi_deque.h:19 */
byte slot[NS * CAP];              /* the deque arrays */
byte tail[NS];                    /* exi_inbox.h:15 */
byte head[NS];                    /* exi_inbox.h:17 */
bit lock[NS];                     /* exi_inbox.h:18 */
byte gate[NS];                    /* exi_inbox.h:16 */
byte idle;                        /* exi_pool_impl.h:47, one word (NW <= 64) */
byte ev[NW];                      /* the workers' ck_ec32 values (park.c) */
bit stopping;                     /* exi_pool_impl.h:49 */
#ifdef LEND
byte held;                        /* exi_pool_impl.h `held` of the lent slot: HELD | PUSHING */
#define HELD 1
#define PUSHING 2
byte nxt;                         /* exi_pool_impl.h `next`, the lent slot's claiming item */
bit seen_next[NW];                /* exi_pool_impl.h `next_seen` of each worker: it found the
                                     holding's claiming item and left it (one holding here) */
#endif

bit sb_on[NT];                    /* one-entry store buffers (workers only) */
byte sb_a[NT];
short sb_v[NT];

/* bookkeeping, not program state */
byte done[NI + 1];                /* 1 ran, 2 cancelled (drain, lent close), 3 refused */
bit created[NI + 1];
bit exited[NW];
bit drained;                      /* shutdown's drain is over */
bit main_done;
#ifdef LEND
bit lroot_ret;                    /* LROOT's run has returned */
bit lent_done;                    /* the lent caller's sync_wait has returned */
#endif

#ifdef LEND
/* Shutdown empties the pool: no push after the drain; the lent holder
 * takes nothing out of its slot after it (the xchg of its take, the head
 * update of its pop are their linearisation points). */
#define LATE_TAKE late_ = drained
#define LATE_POP(th) assert(!(drained && (th) == LT))
#define LATE_PUSH(n) assert((n) > NI || !drained)
#else
#define LATE_TAKE skip
#define LATE_POP(th) skip
#define LATE_PUSH(n) skip
#endif

/* ---------------------------------------------------------- store buffer */

#ifdef SC
#define ST(th, a, v) mem[a] = v
#define LD(th, a) mem[a]
#define FLUSH(th) skip
#else
/* a buffered store by thread th (direct for the external threads) */
#define ST(th, a, v) \
    if \
    :: th < NW -> \
        if :: sb_on[th] -> mem[sb_a[th]] = sb_v[th] :: else fi; \
        sb_a[th] = a; sb_v[th] = v; sb_on[th] = 1 \
    :: else -> mem[a] = v \
    fi
#define LD(th, a) ((sb_on[th] && sb_a[th] == (a)) -> sb_v[th] : mem[a])
#define FLUSH(th) \
    if \
    :: sb_on[th] -> mem[sb_a[th]] = sb_v[th]; sb_on[th] = 0; sb_a[th] = 0; sb_v[th] = 0 \
    :: else \
    fi
#endif

/* membarrier(): every worker's pending store becomes visible */
inline flush_all() {
    fi_ = 0;
    do
    :: fi_ < NW -> FLUSH(fi_); fi_++
    :: else -> fi_ = 0; break
    od
}

proctype flusher(byte th) {
end_fl:
    do
    :: atomic { sb_on[th] -> FLUSH(th) }
    od
}

inline complete(item, how) {
    assert(created[item]);
    assert(done[item] == 0);              /* exactly once */
    done[item] = how
}

/* -------------------------------------------------- deque (src/deque.c) */

/* deque.c:64-75, by the owner me.  The load of top (66) only feeds the
 * growth decision (68-71), and growth is modelled in deque.pml: left out.
 * The slot store (72) precedes the bottom store in TSO order and nobody
 * reads slot b before seeing bottom > b: one step. */
inline deque_push(item) {
    atomic {
        b = LD(me, A_BOT(me));            /* 65: own location */
        LATE_PUSH(item);
        slot[me * CAP + b % CAP] = item;  /* 72 */
        ST(me, A_BOT(me), b + 1);         /* 74 store rel: a plain mov, buffered */
        b = 0
    }
}

#ifndef COARSE
/* deque.c:77-96, by the owner me; the item (or 0) in w */
inline deque_take() {
    atomic {
        b = LD(me, A_BOT(me)) - 1;        /* 78: own location */
        FLUSH(me); mem[A_BOT(me)] = b;    /* 82 xchg: full barrier */
        LATE_TAKE
    }
    atomic {
        t = top[me];                      /* 83 */
        if
        :: t < b -> w = slot[me * CAP + b % CAP]; t = 0; b = 0   /* 85, more than one item */
        :: t == b -> w = slot[me * CAP + b % CAP]; r = 3          /* 85, the last item */
        :: t > b -> mem[A_BOT(me)] = b + 1; t = 0; b = 0          /* 94 restore: empty */
        fi
    }
    if
    :: r == 3 ->                          /* t == b: 86-91 last item, race the thieves */
        atomic {
            r = 0;
            FLUSH(me);
            if :: top[me] == t -> top[me] = t + 1 :: else -> w = 0 fi;   /* 89 cas */
            mem[A_BOT(me)] = b + 1;       /* 90 restore: empty either way */
            t = 0; b = 0
        }
    :: else
    fi
}

/* deque.c:98-109, thread th steals from deque d: r 0 EMPTY, 1 ABORT, 2 OK */
inline deque_steal(th, d) {
    t = top[(d)];                           /* 99 load acq */
    atomic {
        FLUSH(th); b = LD(th, A_BOT((d)));  /* 100 fence, 101 load acq */
        if :: t >= b -> r = 0; t = 0 :: else -> r = 1 fi;   /* 102 */
        b = 0
    }
    if
    :: r == 1 ->
        atomic {
            w = slot[(d) * CAP + t % CAP];  /* 103-104: slot t is never overwritten here */
            FLUSH(th);
            if :: top[(d)] == t -> top[(d)] = t + 1; r = 2 :: else -> w = 0 fi;   /* 106 cas */
            t = 0
        }
    :: else
    fi
}

/* exi_deque.h:44-48: vis = bottom > top */
inline deque_nonempty(th, d) {
    t = top[(d)];                           /* 45 */
    atomic { vis = (LD(th, A_BOT((d))) > t); t = 0 }   /* 46 */
}

#else
/* -DCOARSE: take, steal and nonempty are single atomic steps (the
 * deque's linearizable specification; the algorithm itself is checked by
 * the fine-grained runs and by deque.pml). */
inline deque_take() {
    atomic {
        b = LD(me, A_BOT(me)) - 1;
        FLUSH(me);
        t = top[me];
        if
        :: t < b -> w = slot[me * CAP + b % CAP]; mem[A_BOT(me)] = b
        :: t == b -> w = slot[me * CAP + b % CAP]; top[me] = t + 1
        :: t > b
        fi;
        t = 0; b = 0
    }
}

inline deque_steal(th, d) {
    atomic {
        FLUSH(th);
        t = top[(d)];
        if
        :: LD(th, A_BOT((d))) > t -> w = slot[(d) * CAP + t % CAP]; top[(d)] = t + 1; r = 2
        :: else -> r = 0
        fi;
        t = 0
    }
}

inline deque_nonempty(th, d) {
    atomic { vis = (LD(th, A_BOT((d))) > top[(d)]) }
}

#endif

/* -------------------------------------------------- inbox (src/inbox.c) */

/* inbox.c:19-24, thread th pushes node n on inbox q */
inline inbox_push(th, q, n) {
    atomic {
        FLUSH(th);
        LATE_PUSH(n);
        mem[A_NEXT(n)] = 0;               /* 20 (n is not reachable yet) */
        prev = tail[(q)]; tail[(q)] = n       /* 21 xchg */
    }
    atomic { ST(th, A_NEXT(prev), n); prev = 0 }   /* 23 store rel: buffered */
}

#ifndef COARSE
/* exi_inbox.h:35-37 */
inline inbox_nonempty(th, q) {
    atomic {
        vis = (tail[(q)] != STUB((q)));       /* tail load acq */
    }
    if
    :: !vis -> vis = (head[(q)] != STUB((q))) /* head load acq */
    :: else
    fi
}

/* inbox.c:52-59 with pop_locked (29-50); the node (or 0) in w.
 * ok: the consumer lock is held and pop_locked has not returned. */
inline inbox_pop(th, q) {
    w = 0;
    inbox_nonempty(th, q);                /* 53 */
    if
    :: vis ->
        atomic {
            vis = 0;
            FLUSH(th);                    /* 55 try-lock cas */
            if :: lock[(q)] == 0 -> lock[(q)] = 1; ok = 1; hd = head[(q)] :: else fi   /* + 30 (under the lock) */
        }
        if
        :: ok ->
            nx = LD(th, A_NEXT(hd));      /* 31 */
            if
            :: hd == STUB((q)) ->
                if
                :: nx == 0 -> ok = 0      /* 33 */
                :: else ->
                    head[(q)] = nx;         /* 34 set_head */
                    atomic { hd = nx; nx = LD(th, A_NEXT(hd)) }   /* 35-36 */
                fi
            :: else
            fi;
            if
            :: ok && nx != 0 -> atomic { head[(q)] = nx; w = hd; ok = 0; LATE_POP(th) }   /* 38-41 */
            :: else
            fi;
            if
            :: ok -> atomic { if :: tail[(q)] != hd -> ok = 0 :: else fi }  /* 42: push in progress */
            :: else
            fi;
            if
            :: ok ->
                inbox_push(th, q, STUB((q)));   /* 43 */
                nx = LD(th, A_NEXT(hd));  /* 44 */
                if
                :: nx != 0 -> atomic { head[(q)] = nx; w = hd; LATE_POP(th) }   /* 45-47 */
                :: else                   /* 49: a push overtook the stub's */
                fi;
                ok = 0
            :: else
            fi;
            atomic { lock[(q)] = 0; hd = 0; nx = 0 }   /* 57 store rel */
        :: else                           /* 55: another consumer holds it */
        fi
    :: else
    fi
}

#else
/* -DCOARSE: nonempty and pop are single atomic steps (pop runs
 * pop_locked whole, so the consumer lock is never seen held); a push keeps
 * its two steps, since the half-linked queue is what pop must cope with. */
inline inbox_nonempty(th, q) {
    atomic { vis = (tail[(q)] != STUB((q)) || head[(q)] != STUB((q))) }
}

inline inbox_pop(th, q) {
    atomic {
        w = 0;
        if
        :: tail[(q)] != STUB((q)) || head[(q)] != STUB((q)) ->
            FLUSH(th);
            ok = 1;
            hd = head[(q)];
            nx = LD(th, A_NEXT(hd));
            if
            :: hd == STUB((q)) ->
                if
                :: nx == 0 -> ok = 0
                :: else -> head[(q)] = nx; hd = nx; nx = LD(th, A_NEXT(hd))
                fi
            :: else
            fi;
            if :: ok && nx != 0 -> head[(q)] = nx; w = hd; ok = 0 :: else fi;
            if :: ok && tail[(q)] != hd -> ok = 0 :: else fi;
            if
            :: ok ->
                mem[A_NEXT(STUB((q)))] = 0;
                prev = tail[(q)]; tail[(q)] = STUB((q));
                mem[A_NEXT(prev)] = STUB((q));
                nx = LD(th, A_NEXT(hd));
                if :: nx != 0 -> head[(q)] = nx; w = hd :: else fi;
                ok = 0; prev = 0
            :: else
            fi;
            hd = 0; nx = 0
        :: else
        fi
    }
}

#endif

/* ---------------------------------------------------- idle mask (pool.c) */

/* pool.c:98-110 wake_one: claim the lowest set bit (ctz), wake that one */
inline wake_one(th) {
    m = idle;                             /* 100 load rlx */
    do
    :: m == 0 -> break
    :: else ->
        atomic {
            bit_ = ((m & 1) -> 0 : ((m & 2) -> 1 : 2));   /* 102 (NW <= 3) */
            FLUSH(th);                    /* 103 cas */
            if
            :: idle == m -> idle = m & ~(1 << bit_); ok = 1
            :: else -> m = idle           /* a failed cas reloads m */
            fi
        }
        if
        :: ok -> atomic { FLUSH(th); ev[bit_]++; ok = 0; m = 0; bit_ = 0 }   /* 104 exi_event_inc */
                 break
        :: else
        fi
    od
}

/* pool.c:113-116 notify, after an item was published */
inline notify(th) {
#ifdef FENCES
    atomic { FLUSH(th) }                  /* 114 light side without membarrier: a full fence */
#endif
    if                                    /* 115 any_idle: load rlx */
    :: idle != 0 -> wake_one(th)
    :: else
    fi
}

/* pool.c:82-89 idle_clear(me) */
inline idle_clear() {
    m = idle;                             /* 85 */
    do
    :: (m & (1 << me)) == 0 -> m = 0; break   /* 86: a waker claimed it */
    :: else ->
        atomic {
            FLUSH(me);                    /* 87 cas */
            if
            :: idle == m -> idle = m & ~(1 << me); m = 0
            :: else -> m = idle
            fi
        }
        if :: m == 0 -> break :: else fi
    od
}

/* ---------------------------------------------------------------- worker */

#ifdef BROKEN_VISIBLE_WORKERS
#define NVIS NW
#else
#define NVIS NS
#endif

/* pool.c:261-265 work_visible: every slot, the lent ones included */
inline work_visible() {
    i = 0;
    vis = 0;
    do
    :: i < NVIS && !vis ->
        deque_nonempty(me, i);
        if :: !vis -> inbox_nonempty(me, i) :: else fi;
#ifdef LEND
#ifndef BROKEN_NEXT_INVISIBLE
        if :: !vis && i == LS -> vis = (nxt != 0) :: else fi;   /* pool.c work_visible: w->next */
#endif
#endif
        i++
    :: else -> i = 0; break
    od
}

/* pool.c:232-246, one victim v; a lent victim's `next` first (take_next:
 * a load, then the xchg when it is set: one step, the load adds no
 * outcome) */
inline steal_from(v) {
#ifdef LEND
    if
#ifndef BROKEN_NEXT_NEVER_STOLEN
    /* take_stale_next: found for the first time, it is left to its holder
     * for this pass (a load and a store of the thief's own field) */
    :: v == LS && nxt != 0 && !seen_next[me] -> seen_next[me] = 1
    :: v == LS && !(nxt != 0 && !seen_next[me]) -> atomic { FLUSH(me); w = nxt; nxt = 0 }
#else
    :: v == LS -> skip                    /* a thief that always leaves it */
#endif
    :: else
    fi;
    if
    :: w != 0 -> skip                     /* stolen: run it */
    :: else ->
#endif
    do                                    /* 236 retry while ABORT */
    :: deque_steal(me, v);
       if :: r != 1 -> break :: else fi
    od;
    if
    :: r == 2 ->                          /* 237-242 */
        r = 0;
        deque_nonempty(me, v);
        if :: vis && idle != 0 -> wake_one(me) :: else fi;   /* 240 */
        vis = 0
    :: else ->
        inbox_pop(me, v);                 /* 243-246 */
        if
        :: w != 0 ->
            inbox_nonempty(me, v);
            if :: vis && idle != 0 -> wake_one(me) :: else fi;   /* 244 */
            vis = 0
        :: else
        fi
    fi
#ifdef LEND
    fi
#endif
}

/* pool.c:226-249 steal over every slot but its own (p->slots: the lent
 * slots too); the item (or 0) in w */
inline steal() {
#if NS == 2
    v = 1 - me;                           /* one victim: the start does not matter */
    steal_from(v);
    v = 0
#else
    select(k : 0 .. NS - 1);              /* 230 random start */
    j = 0;
    do                                    /* 231-247 */
    :: j < NS && w == 0 ->
        v = (k + j) % NS;
        if :: v != me -> steal_from(v) :: else fi;   /* 233 */
        j++
    :: else -> j = 0; k = 0; v = 0; break
    od
#endif
}

/* pool.c:251-259 find_work */
inline find_work() {
    deque_take();                         /* 252 */
    if :: w == 0 -> inbox_pop(me, me) :: else fi;   /* 254 */
    if :: w == 0 -> steal() :: else fi    /* 256 */
}

/* pool.c:205-210 submit from worker me (not a lent slot) */
inline submit_internal(item) {
    if
    :: stopping -> atomic { complete(item, 3) }   /* 207 EX_ESHUTDOWN */
    :: else ->
#ifdef NO_FALLBACK
        deque_push(item);                 /* 208 */
#else
        if                                /* (true ->: an option must not start with
                                             an if holding an else, which spin would
                                             take as this if's else) */
        :: true -> deque_push(item)       /* 208 */
        :: true -> inbox_push(me, me, item)   /* 208: the deque could not grow */
        fi;
#endif
        notify(me)                        /* 209 */
    fi
}

/* pool.c:267-276 run_item on worker me: what the items do */
inline run_item() {
    atomic { complete(w, 1) }
    if
    :: w == PARENT ->
        atomic { w = 0; created[CHILD] = 1 }
        submit_internal(CHILD);
        (done[CHILD] != 0 || stopping);  /* busy until the child is done */
#ifndef NO_CHILD2
        atomic { created[CHILD2] = 1 };  /* then one more, which this worker */
        submit_internal(CHILD2)           /* races the others to take */
#endif
#ifdef LEND
    :: w == LROOT ->                      /* stolen from the lent slot */
        atomic { w = 0; created[LCHILD] = 1 }
        submit_internal(LCHILD);          /* pool.c:205-210: to this worker's deque */
#if NW > 1
        (done[LCHILD] != 0 || stopping);  /* (one worker: it runs LCHILD next) */
#endif
        lroot_ret = 1
#endif
    :: else -> w = 0
    fi
}

/* pool.c:278-293 park */
inline park() {
#ifndef BROKEN_LATE_SEEN
    seen = ev[me];                        /* 280 exi_event_value */
#endif
    atomic {
        FLUSH(me); idle = idle | (1 << me);   /* 281 idle_set: lock cmpxchg */
#if defined(FENCES) || defined(BROKEN_NO_MEMBARRIER)
        FLUSH(me)                         /* 282 exi_barrier_heavy: mfence only */
#else
        flush_all()                       /* 282 exi_barrier_heavy: mfence + membarrier */
#endif
    }
    if
    :: stopping -> vis = 1                /* 283 */
    :: else ->
#ifdef BROKEN_NO_RECHECK
        vis = 0
#else
        work_visible()                    /* 283 */
#endif
    fi;
#ifdef BROKEN_LATE_SEEN
    seen = ev[me];
#endif
    if
    :: vis -> vis = 0; seen = 0; idle_clear()   /* 284-285 */
    :: else ->
#ifdef SPURIOUS
        if                                /* 289 exi_event_wait (may return early) */
        :: atomic { ev[me] != seen -> seen = 0 }
        :: seen = 0
        fi;
#else
        atomic { ev[me] != seen -> seen = 0 }   /* 289 exi_event_wait: blocks while ev == seen */
#endif
        idle_clear()                      /* 292 */
    fi
}

/* pool.c:341-358 worker_main (no spin rounds unless -DSPIN, no linger
 * unless -DLINGER: see the README) */
proctype worker(byte me) {
    byte w, r, m, bit_, ok, vis, hd, nx, prev, seen, i, j, k, v, fi_, late_, lr_;
    short t, b;
#ifdef START_PARKED
    /* The pool has been idle: this worker waits in exi_event_wait
     * (pool.c:289) with seen == 0 and its idle bit set (by init). */
    atomic { ev[me] != 0 };
    idle_clear();                         /* 292 */
#endif
    do
    :: stopping -> break                  /* 346 */
    :: else ->
        find_work();                      /* 347 */
#ifdef SPIN
        if                                /* 348-351: one spin round */
        :: w == 0 && !stopping -> find_work()
        :: else
        fi;
#endif
#ifdef LINGER
        do                                /* 352 linger, 326-339 */
        :: w == 0 && lr_ < LINGER && !stopping ->   /* 332 */
            lr_++; find_work()            /* 333-335 (sched_yield: nothing) */
        :: true -> break                  /* 328, 330: not lingering (passive; not
                                             the last awake: a hint); 336: the deadline */
        od;
        lr_ = 0;
#endif
        if
        :: w != 0 -> run_item()           /* 353 */
        :: else -> park()                 /* 354 */
        fi
    od;
    atomic { FLUSH(me); exited[me] = 1 }  /* thread exit; pthread_join synchronises */
}

/* -------------------------------------------------- external submission */

/* pool.c:144-159 submit_outside by thread th with home inbox q; ok = 1 if
 * queued, 0 if refused (the caller completes the item) */
inline outside_push(th, q, item) {
    gate[(q)]++;                          /* 147 faa */
    if
    :: stopping -> gate[(q)]--; ok = 0    /* 148-151 */
    :: else ->
        inbox_push(th, q, item);          /* 152 */
        notify(th);                       /* 156 (under the gate) */
        gate[(q)]--;                      /* 157 faa */
        ok = 1
    fi
}

/* pool.c:203-219 submit from a thread outside the pool, no offer open:
 * 218 submit_outside (144-159) with home inbox q */
inline submit_external(th, q, item) {
    atomic { created[item] = 1; gate[(q)]++ }   /* 147 faa */
    if
    :: stopping -> atomic { gate[(q)]--; complete(item, 3) }   /* 148-151 EX_ESHUTDOWN */
    :: else ->
        inbox_push(th, q, item);          /* 152 */
        notify(th);                       /* 156 (under the gate) */
        gate[(q)]--                       /* 157 faa */
    fi
}

proctype sub() {
    byte w, m, bit_, ok, prev, vis;
    submit_external(SUB, 1 % NW, RACER)
}

/* ------------------------------------------------------------ lent caller */

#ifdef LEND
/* pool.c push_own on a lent slot, by the holder of LS (me == LS) */
inline submit_lent(item, wake) {
    gate[LS]++;                           /* 166 faa */
    if
#ifndef BROKEN_LEND_NO_STOPPING
    :: stopping -> atomic { gate[LS]--; complete(item, 3) }   /* 167-170 EX_ESHUTDOWN */
    :: else ->
#else
    :: true ->
#endif
#ifdef LEND_NO_FALLBACK
        deque_push(item);                 /* 171 */
#else
        if
        :: true -> deque_push(item)       /* 171 */
        :: true -> inbox_push(LT, LS, item)   /* 171: the deque could not grow */
        fi;
#endif
        gate[LS]--;                       /* 172 faa */
        if :: wake -> notify(LT) :: else fi   /* 174 */
    fi
}

/* pool.c push_next: the claiming (quiet) item goes to the slot's `next`
 * with the stopping check, under the claim's PUSHING (the cas that set it
 * is the gate's increment), and wakes nobody */
inline submit_next(item) {
    if
#ifndef BROKEN_LEND_NO_STOPPING
    :: stopping -> atomic { held = HELD; complete(item, 3) }   /* EX_ESHUTDOWN; store rel */
    :: else ->
#else
    :: true ->
#endif
        atomic { LATE_PUSH(item); nxt = item };   /* store rel (SC: an outside thread) */
        held = HELD                       /* store rel: PUSHING cleared */
    fi
}

/* pool.c:374-376: LROOT, run on the lent slot, submits LCHILD there
 * (submit 205-206: tls_worker is the lent slot), with notify, and waits */
inline lent_run_item() {
    atomic { complete(w, 1) }
    if
    :: w == LROOT ->
        atomic { w = 0; created[LCHILD] = 1 }
        submit_lent(LCHILD, 1);           /* pool.c:206 */
        (done[LCHILD] != 0 || stopping);  /* busy until the child is done */
        lroot_ret = 1
    :: else -> w = 0
    fi
}

/* pool.c:368-378 exi_lend_run_one; ok = 1 if it ran an item */
inline lend_run_one() {
    atomic { w = nxt; nxt = 0; if :: w != 0 -> assert(!drained) :: else fi }   /* take_next */
    if :: w == 0 -> deque_take() :: else fi;   /* 371 */
    if :: w != 0 -> assert(!late_) :: else fi;
    late_ = 0;
    if :: w == 0 -> inbox_pop(LT, LS) :: else fi;   /* 372 */
    if
    :: w != 0 -> lent_run_item(); ok = 1  /* 374-376 */
    :: else -> ok = 0                     /* 373 */
    fi
}

/* pool.c:382-386 hand_over of the item in w */
inline hand_over() {
    if
    :: stopping -> atomic { complete(w, 2); w = 0 }   /* 383-384 cancel */
    :: else ->
        outside_push(LT, LHOME, w);       /* 383 submit_outside */
        if
        :: ok -> ok = 0; w = 0
        :: else -> atomic { complete(w, 2); w = 0 }   /* 384: refused, cancel */
        fi
    fi
}

/* pool.c:388-406 exi_lend_close */
inline lend_close() {
#ifndef BROKEN_CLOSE_DROPS
    atomic { w = nxt; nxt = 0; if :: w != 0 -> assert(!drained) :: else fi };   /* take_next */
    if :: w != 0 -> hand_over() :: else fi;
    do                                    /* 394 */
    :: true ->
        deque_take();
        if :: w != 0 -> assert(!late_) :: else fi;
        late_ = 0;
        if :: w != 0 -> hand_over() :: else -> break fi
    od;
    do                                    /* 397-399 */
    :: true ->
        inbox_nonempty(LT, LS);
        if
        :: vis ->
            inbox_pop(LT, LS);
            if :: w != 0 -> hand_over() :: else fi   /* else sched_yield */
        :: else -> break
        fi
    od;
#endif
    held = 0                              /* store rel: destroy (not modelled) waits for it */
}

#define LENT_DONE ((lroot_ret || done[LROOT] > 1) && (!created[LCHILD] || done[LCHILD] != 0))

/* sync_wait.c:90-104 start_and_wait on a thread outside every pool */
proctype lent() {
    byte me, w, r, m, bit_, ok, vis, hd, nx, prev, late_;
    short t, b;
    me = LS;                              /* deque_push/take: the slot's owner */
    /* 92 exi_lend_open (thread-local); 93 ex_start: submit (pool.c:213-216):
     * no worker, offer open, no slot yet: claim_lent_slot */
    atomic {                              /* claim_lent_slot: load + cas (the only claimant) */
        created[LROOT] = 1; held == 0 -> held = HELD | PUSHING
    }
    submit_next(LROOT);                   /* 216: to `next`, no wake-up */
#ifdef LEND_NESTED
    /* The start that queued LROOT waits for it in a nested ex_sync_wait
     * before it returns: exi_lend_open sees the held slot's `next` and
     * notifies; a worker must take the item (a second pass: it leaves it
     * on the first, take_stale_next).  The operation is then done before
     * the outer wait begins. */
    if :: nxt != 0 -> notify(LT) :: else fi;
    LENT_DONE;
#endif
    do                                    /* 94-98 */
    :: LENT_DONE -> break                 /* 94 st->done load acq */
    :: !LENT_DONE -> lend_run_one(); ok = 0   /* 95-97 */
    :: !LENT_DONE -> break                   /* 94: the spin budget ran out (at any
                                             round: a superset, which also covers
                                             a pop failing for a moment, 397) */
    od;
#ifdef BROKEN_LEND_BLOCK_FIRST
    LENT_DONE;
#endif
    lend_close();                         /* 101 */
    LENT_DONE;                            /* 102-103 */
    lent_done = 1
}
#endif

/* ------------------------------------------------------------- shutdown */

/* pool.c:607-628 drain, on the main thread once the workers are joined:
 * every slot (p->slots), a lent holder possibly taking from its own */
inline drain() {
    any = 1;
    do
    :: any ->
        any = 0;
        i = 0;
        do
        :: i < NS ->
#if defined(LEND) && !defined(BROKEN_NEXT_UNDRAINED)
            if                            /* a lent slot's `next` (take_next) */
            :: i == LS -> atomic { w = nxt; nxt = 0; if :: w != 0 -> any = 1; complete(w, 2); w = 0 :: else fi }
            :: else
            fi;
#endif
            do                            /* 614-619 */
            :: deque_steal(MAIN, i);
               if
               :: r == 0 -> break
               :: r == 2 -> atomic { any = 1; complete(w, 2); w = 0; r = 0 }
               :: r == 1                  /* 615 */
               fi
            od;
            do                            /* 620-625 */
            :: inbox_nonempty(MAIN, i);
               if
               :: vis ->
                   inbox_pop(MAIN, i);
                   if
                   :: w != 0 -> atomic { any = 1; complete(w, 2); w = 0 }
                   :: else                /* 621 sched_yield, continue */
                   fi
               :: else -> break
               fi
            od;
            i++
        :: else -> i = 0; break
        od
    :: else -> break
    od;
    drained = 1
}

#ifdef NO_PARENT
#define PARENT_DONE 1
#else
#ifdef NO_CHILD2
#define PARENT_DONE (done[PARENT] != 0 && done[CHILD] != 0)
#else
#define PARENT_DONE (done[PARENT] != 0 && done[CHILD] != 0 && done[CHILD2] != 0)
#endif
#endif
#ifdef PLAIN_ITEM
#define PLAIN_DONE (done[PLAIN] != 0)
#else
#define PLAIN_DONE 1
#endif
#ifdef LEND
#define MAIN_WAITS (PARENT_DONE && PLAIN_DONE && LENT_DONE)
#else
#define MAIN_WAITS (PARENT_DONE && PLAIN_DONE)
#endif
#ifdef BROKEN_LATE_LENT_GATE
#define NGATES NW
#else
#define NGATES NS
#endif

proctype main() {
    byte w, r, m, bit_, ok, vis, hd, nx, prev, i, any;
    short t, b;
#ifndef NO_PARENT
    submit_external(MAIN, 0, PARENT);
#endif
#ifdef PLAIN_ITEM
    submit_external(MAIN, 0, PLAIN);
#endif
#ifndef NO_WAIT
    if
    :: true -> MAIN_WAITS                 /* a sync_wait on its items */
#ifndef WAIT_ONLY
    :: true                               /* or shut down at once */
#endif
    fi;
#endif
    /* pool.c:807 stop_workers (591-601), 808 drain */
    stopping = 1;                         /* 592 xchg */
    do                                    /* 593 exi_event_inc each */
    :: i < NW -> atomic { ev[i]++; i++ }
    :: else -> i = 0; break
    od;
    do                                    /* 594-595 join */
    :: i < NW -> atomic { exited[i]; i++ }
    :: else -> i = 0; break
    od;
    do                                    /* 599-600 wait for every slot's gate */
    :: i < NGATES -> atomic { gate[i] == 0; i++ }
    :: else -> i = 0; break
    od;
#if defined(LEND) && !defined(BROKEN_LATE_LENT_GATE) && !defined(BROKEN_PUSHING_IGNORED)
    (held & PUSHING) == 0;                /* wait_gates: the lent slot's claim-and-push */
#endif
    drain();                              /* 808 */
#ifdef BROKEN_LATE_LENT_GATE
    gate[LS] == 0;                        /* the lent gate only after the drain */
    (held & PUSHING) == 0;
#endif
    /* queued items were cancelled; refused ones complete on their submitter */
    assert(idle == 0);
    main_done = 1
}

/* timeout is executable only when no other process can move: then main
 * (and the lent caller) must have returned (no lost wake-up; every worker
 * exited), and every item created must have completed (nothing lost). */
active proctype watchdog() {
    byte n;
end_wd:
    timeout -> assert(main_done);
#ifdef LEND
    assert(lent_done && held == 0);
#endif
    n = 1;
    do
    :: n <= NI -> assert(!created[n] || done[n] != 0); n++
    :: else -> break
    od
}

init {
    byte q;
    atomic {
        do                                /* exi_inbox_init (inbox.c:9-17) */
        :: q < NS -> tail[(q)] = STUB((q)); head[(q)] = STUB((q)); q++
        :: else -> q = 0; break
        od;
#ifdef START_PARKED
        idle = (1 << NW) - 1;
#endif
        do
        :: q < NW ->
            run worker(q);
#ifndef SC
            run flusher(q);
#endif
            q++
        :: else -> break
        od;
        run main();
#ifdef LEND
        run lent();
#endif
#ifndef NO_SUB
        run sub()
#endif
    }
}
