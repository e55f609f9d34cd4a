/* park.pml - Promela model of the pool's park/wake protocol (src/pool.c,
 * src/park.c) with the two queues it publishes through, the per-worker
 * Chase-Lev deque (src/deque.c) and the per-worker inbox (src/inbox.c), at
 * the granularity of their atomic accesses.  model/README.md has the
 * mapping, the bounds, the figures and what is left out.  "pool.c:223"
 * below is line 223 of src/pool.c; every Promela step names its C lines.
 *
 * ---- Memory model ----------------------------------------------------
 * x86-TSO for the publication stores of the workers.  Each worker has a
 * one-entry store buffer; a plain store by a worker of
 *   - the deque's bottom in exi_deque_push (deque.c:71), and
 *   - the inbox link prev->next in exi_inbox_push (inbox.c:179)
 * goes to that buffer.  A flusher process per worker makes it visible at
 * any later moment; a locked instruction (xchg, cmpxchg, lock incl),
 * mfence, and thread exit drain the thread's own buffer first; the
 * worker's own loads forward from its buffer; a second buffered store
 * first makes the pending one visible (FIFO order kept).  These are the
 * stores a publisher makes before the light side of the barrier and its
 * load of the idle mask (pool.c:126-129): the store->load pattern the
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
 * deque's bottom restore in take (deque.c:89, 92: the deque is empty with
 * either value, so when it becomes visible changes no load's outcome), the
 * inbox head and lock (written under the consumer lock and read by others
 * only as "held" or "not the stub"; no store->load pattern involves them),
 * and everything the external threads store (each of their plain stores is
 * followed by a locked instruction before their next load).  -DSC makes
 * the whole model sequentially consistent.
 *
 * Steps.  Each Promela step is one C atomic access.  A step may also do the
 * thread's local computation and accesses nobody else can interfere with:
 * reading the own deque's bottom or a slot only the owner writes, the
 * inbox head under the consumer lock (pool.c/deque.c/inbox.c lines say
 * which).  Two C accesses share one step only where the README argues that
 * no behaviour is lost: idle_set + the heavy barrier, take's restore of
 * bottom, push (top only feeds growth, not modelled here), steal's slot
 * load with its cas (no slot is overwritten here).
 *
 * ---- Scenario --------------------------------------------------------
 * NW workers (2; -DNW=3 for three).  main submits item PARENT from outside
 * the pool (inbox 0, pool.c:152-162).  A worker that runs PARENT submits
 * CHILD from inside (its deque, or its inbox when the deque cannot grow:
 * pool.c:148) and then stays busy until CHILD has completed or shutdown
 * has begun: if the other workers miss the wake-up, the pool is stuck.
 * Then it submits CHILD2 the same way and returns, so that it races the
 * others to take CHILD2 from its own deque (deque.c:85-90).
 * sub, a second external thread, submits RACER to inbox 1 % NW at any
 * time, racing shutdown.  main then either waits until its items and CHILD
 * are done (a sync_wait) or not, and shuts the pool down (pool.c:442-476):
 * stopping, wake all, join, wait for the gates, drain.
 *
 * ---- Properties ------------------------------------------------------
 *  - Exactly once: an item completes (runs, is cancelled by the drain, or
 *    is refused with EX_ESHUTDOWN) at most once: assert in complete().
 *  - Nothing lost, no lost wake-up, termination on shutdown: the system
 *    never stops moving before main has returned, and when it stops every
 *    item created has completed: the watchdog's assertions at timeout.  A
 *    state where the workers sleep while an item is queued and main waits
 *    for it is such a state; so is a worker that never exits.  (Refused
 *    items complete on their submitter, possibly after shutdown returned.)
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
 *  -DSPIN          one spin round (pool.c:261-264) before parking.
 *  -DSTART_PARKED  the workers start asleep in exi_event_wait with their
 *                  idle bits set (an idle pool), not starting up.
 *  -DCOARSE        deque take/steal/nonempty and inbox pop/nonempty are
 *                  single atomic steps (their linearizable specification;
 *                  the algorithms are checked fine-grained elsewhere).
 *  -DNO_FALLBACK   the child always goes to the deque.
 *  -DFENCES        no membarrier: both sides a full fence, as exi_park.h
 *                  falls back to (must pass).
 *  -DSPURIOUS      exi_event_wait may return early (safety only: a
 *                  wake-up that never ends is a cycle).
 *  -DSC            sequentially consistent memory.
 *
 * ---- Deliberately broken variants (each must be reported as an error) -
 *  -DBROKEN_NO_RECHECK    park() sleeps without looking for work after
 *                         setting its idle bit (drops pool.c:225's
 *                         work_visible).
 *  -DBROKEN_NO_MEMBARRIER the heavy side is only a fence (the light side
 *                         stays a compiler barrier): the publisher's
 *                         buffered store and its load of the idle mask
 *                         are no longer ordered.
 *  -DBROKEN_LATE_SEEN     the event count is read after the re-check, not
 *                         before the idle bit is set (pool.c:222). */

#ifndef NW
#define NW 2                      /* workers 0..NW-1 */
#endif
#define MAIN NW                   /* thread ids of the external threads */
#define SUB (NW + 1)
#define NT (NW + 2)

#define NI 5                      /* items 1..NI; 0 is NULL */
#define PARENT 1
#define CHILD 2
#define RACER 3
#define PLAIN 4
#define CHILD2 5
#define STUB(q) (NI + 1 + (q))    /* inbox q's stub node (inbox.h:234) */
#define NNODES (NI + NW + 1)
#define CAP 4                     /* a deque here never holds more than one item */

/* Locations a worker may store to with a buffered (plain) store. */
#define A_BOT(w) (w)              /* deque.h:128 bottom of worker w's deque */
#define A_NEXT(n) (NW + (n))      /* ex_work.next of node n */
#define NADDR (NW + NNODES)

short mem[NADDR];                 /* bottoms and next links */
byte top[NW];                     /* deque.h:127 */
byte slot[NW * CAP];              /* the deque arrays */
byte tail[NW];                    /* inbox.h:230 */
byte head[NW];                    /* inbox.h:232 */
bit lock[NW];                     /* inbox.h:233 */
byte gate[NW];                    /* inbox.h:231 */
byte idle;                        /* pool.c:53, one word (NW <= 64) */
byte ev[NW];                      /* the workers' ck_ec32 values (park.c) */
bit stopping;                     /* pool.c:55 */

bit sb_on[NT];                    /* one-entry store buffers (workers only) */
byte sb_a[NT];
short sb_v[NT];

/* bookkeeping, not program state */
byte done[NI + 1];                /* 1 ran, 2 cancelled by the drain, 3 refused */
bit created[NI + 1];
bit exited[NW];
bit main_done;

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

/* deque.c:61-73, by the owner me.  The load of top (63) only feeds the
 * growth decision (65-68), and growth is modelled in deque.pml: left out.
 * The slot store (69) precedes the bottom store in TSO order and nobody
 * reads slot b before seeing bottom > b: one step. */
inline deque_push(item) {
    atomic {
        b = LD(me, A_BOT(me));            /* 62: own location */
        slot[me * CAP + b % CAP] = item;  /* 69 */
        ST(me, A_BOT(me), b + 1);         /* 71 store rel: a plain mov, buffered */
        b = 0
    }
}

#ifndef COARSE
/* deque.c:75-95, by the owner me; the item (or 0) in w */
inline deque_take() {
    atomic {
        b = LD(me, A_BOT(me)) - 1;        /* 76: own location */
        FLUSH(me); mem[A_BOT(me)] = b     /* 80 xchg: full barrier */
    }
    atomic {
        t = top[me];                      /* 81 */
        if
        :: t < b -> w = slot[me * CAP + b % CAP]; t = 0; b = 0   /* 84, more than one item */
        :: t == b -> w = slot[me * CAP + b % CAP]; r = 3          /* 84, the last item */
        :: t > b -> mem[A_BOT(me)] = b + 1; t = 0; b = 0          /* 92 restore: empty */
        fi
    }
    if
    :: r == 3 ->                          /* t == b: 85-90 last item, race the thieves */
        atomic {
            r = 0;
            FLUSH(me);
            if :: top[me] == t -> top[me] = t + 1 :: else -> w = 0 fi;   /* 88 cas */
            mem[A_BOT(me)] = b + 1;       /* 89 restore: empty either way */
            t = 0; b = 0
        }
    :: else
    fi
}

/* deque.c:97-108, thread th steals from deque d: r 0 EMPTY, 1 ABORT, 2 OK */
inline deque_steal(th, d) {
    t = top[(d)];                           /* 98 load acq */
    atomic {
        FLUSH(th); b = LD(th, A_BOT((d)));  /* 99 fence, 100 load acq */
        if :: t >= b -> r = 0; t = 0 :: else -> r = 1 fi;   /* 101 */
        b = 0
    }
    if
    :: r == 1 ->
        atomic {
            w = slot[(d) * CAP + t % CAP];  /* 102-103: slot t is never overwritten here */
            FLUSH(th);
            if :: top[(d)] == t -> top[(d)] = t + 1; r = 2 :: else -> w = 0 fi;   /* 105 cas */
            t = 0
        }
    :: else
    fi
}

/* deque.h:152-156: vis = bottom > top */
inline deque_nonempty(th, d) {
    t = top[(d)];                           /* 153 */
    atomic { vis = (LD(th, A_BOT((d))) > t); t = 0 }   /* 154 */
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

/* inbox.c:175-180, thread th pushes node n on inbox q */
inline inbox_push(th, q, n) {
    atomic {
        FLUSH(th);
        mem[A_NEXT(n)] = 0;               /* 176 (n is not reachable yet) */
        prev = tail[(q)]; tail[(q)] = n       /* 177 xchg */
    }
    atomic { ST(th, A_NEXT(prev), n); prev = 0 }   /* 179 store rel: buffered */
}

#ifndef COARSE
/* inbox.h:250-252 */
inline inbox_nonempty(th, q) {
    atomic {
        vis = (tail[(q)] != STUB((q)));       /* tail load acq */
    }
    if
    :: !vis -> vis = (head[(q)] != STUB((q))) /* head load acq */
    :: else
    fi
}

/* inbox.c:208-215 with pop_locked (185-206); the node (or 0) in w.
 * ok: the consumer lock is held and pop_locked has not returned. */
inline inbox_pop(th, q) {
    w = 0;
    inbox_nonempty(th, q);                /* 209 */
    if
    :: vis ->
        atomic {
            vis = 0;
            FLUSH(th);                    /* 211 try-lock cas */
            if :: lock[(q)] == 0 -> lock[(q)] = 1; ok = 1; hd = head[(q)] :: else fi   /* + 186 (under the lock) */
        }
        if
        :: ok ->
            nx = LD(th, A_NEXT(hd));      /* 187 */
            if
            :: hd == STUB((q)) ->
                if
                :: nx == 0 -> ok = 0      /* 189 */
                :: else ->
                    head[(q)] = nx;         /* 190 set_head */
                    atomic { hd = nx; nx = LD(th, A_NEXT(hd)) }   /* 191-192 */
                fi
            :: else
            fi;
            if
            :: ok && nx != 0 -> atomic { head[(q)] = nx; w = hd; ok = 0 }   /* 194-196 */
            :: else
            fi;
            if
            :: ok -> atomic { if :: tail[(q)] != hd -> ok = 0 :: else fi }  /* 198: push in progress */
            :: else
            fi;
            if
            :: ok ->
                inbox_push(th, q, STUB((q)));   /* 199 */
                nx = LD(th, A_NEXT(hd));  /* 200 */
                if
                :: nx != 0 -> atomic { head[(q)] = nx; w = hd }   /* 201-203 */
                :: else                   /* 205: a push overtook the stub's */
                fi;
                ok = 0
            :: else
            fi;
            atomic { lock[(q)] = 0; hd = 0; nx = 0 }   /* 213 store rel */
        :: else                           /* 211: another consumer holds it */
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

/* pool.c:111-123 wake_one: claim the lowest set bit (ctz), wake that one */
inline wake_one(th) {
    m = idle;                             /* 113 load rlx */
    do
    :: m == 0 -> break
    :: else ->
        atomic {
            bit_ = ((m & 1) -> 0 : ((m & 2) -> 1 : 2));   /* 115 (NW <= 3) */
            FLUSH(th);                    /* 116 cas */
            if
            :: idle == m -> idle = m & ~(1 << bit_); ok = 1
            :: else -> m = idle           /* a failed cas reloads m */
            fi
        }
        if
        :: ok -> atomic { FLUSH(th); ev[bit_]++; ok = 0; m = 0; bit_ = 0 }   /* 117 exi_event_inc */
                 break
        :: else
        fi
    od
}

/* pool.c:126-129 notify, after an item was published */
inline notify(th) {
#ifdef FENCES
    atomic { FLUSH(th) }                  /* light side without membarrier: a full fence */
#endif
    if                                    /* 128 any_idle: load rlx */
    :: idle != 0 -> wake_one(th)
    :: else
    fi
}

/* pool.c:95-102 idle_clear(me) */
inline idle_clear() {
    m = idle;                             /* 98 */
    do
    :: (m & (1 << me)) == 0 -> m = 0; break   /* 99: a waker claimed it */
    :: else ->
        atomic {
            FLUSH(me);                    /* 100 cas */
            if
            :: idle == m -> idle = m & ~(1 << me); m = 0
            :: else -> m = idle
            fi
        }
        if :: m == 0 -> break :: else fi
    od
}

/* ---------------------------------------------------------------- worker */

/* pool.c:203-207 work_visible */
inline work_visible() {
    i = 0;
    vis = 0;
    do
    :: i < NW && !vis ->
        deque_nonempty(me, i);
        if :: !vis -> inbox_nonempty(me, i) :: else fi;
        i++
    :: else -> i = 0; break
    od
}

/* pool.c:176-188, one victim v */
inline steal_from(v) {
    do                                    /* 178 retry while ABORT */
    :: deque_steal(me, v);
       if :: r != 1 -> break :: else fi
    od;
    if
    :: r == 2 ->                          /* 179-184 */
        r = 0;
        deque_nonempty(me, v);
        if :: vis && idle != 0 -> wake_one(me) :: else fi;
        vis = 0
    :: else ->
        inbox_pop(me, v);                 /* 185-188 */
        if
        :: w != 0 ->
            inbox_nonempty(me, v);
            if :: vis && idle != 0 -> wake_one(me) :: else fi;
            vis = 0
        :: else
        fi
    fi
}

/* pool.c:168-191 steal; the item (or 0) in w */
inline steal() {
#if NW == 2
    v = 1 - me;                           /* one victim: the start does not matter */
    steal_from(v);
    v = 0
#else
    select(k : 0 .. NW - 1);              /* 172 random start */
    j = 0;
    do
    :: j < NW && w == 0 ->
        v = (k + j) % NW;
        if :: v != me -> steal_from(v) :: else fi;
        j++
    :: else -> j = 0; k = 0; v = 0; break
    od
#endif
}

/* pool.c:193-201 find_work */
inline find_work() {
    deque_take();                         /* 194 */
    if :: w == 0 -> inbox_pop(me, me) :: else fi;   /* 196 */
    if :: w == 0 -> steal() :: else fi    /* 198 */
}

/* pool.c:144-150, submission from worker me */
inline submit_internal(item) {
    if
    :: stopping -> atomic { complete(item, 3) }   /* 147 EX_ESHUTDOWN */
    :: else ->
#ifdef NO_FALLBACK
        deque_push(item);                 /* 148 */
#else
        if                                /* (true ->: an option must not start with
                                             an if holding an else, which spin would
                                             take as this if's else) */
        :: true -> deque_push(item)       /* 148 */
        :: true -> inbox_push(me, me, item)   /* 148: the deque could not grow */
        fi;
#endif
        notify(me)                        /* 149 */
    fi
}

/* pool.c:209-218 run_item: what the items do */
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
    :: else -> w = 0
    fi
}

/* pool.c:220-235 park */
inline park() {
#ifndef BROKEN_LATE_SEEN
    seen = ev[me];                        /* 222 exi_event_value */
#endif
    atomic {
        FLUSH(me); idle = idle | (1 << me);   /* 223 idle_set: lock cmpxchg */
#if defined(FENCES) || defined(BROKEN_NO_MEMBARRIER)
        FLUSH(me)                         /* 224 exi_barrier_heavy: mfence only */
#else
        flush_all()                       /* 224 exi_barrier_heavy: mfence + membarrier */
#endif
    }
    if
    :: stopping -> vis = 1                /* 225 */
    :: else ->
#ifdef BROKEN_NO_RECHECK
        vis = 0
#else
        work_visible()                    /* 225 */
#endif
    fi;
#ifdef BROKEN_LATE_SEEN
    seen = ev[me];
#endif
    if
    :: vis -> vis = 0; seen = 0; idle_clear()   /* 226-227 */
    :: else ->
#ifdef SPURIOUS
        if                                /* 231 exi_event_wait (may return early) */
        :: atomic { ev[me] != seen -> seen = 0 }
        :: seen = 0
        fi;
#else
        atomic { ev[me] != seen -> seen = 0 }   /* 231 exi_event_wait: blocks while ev == seen */
#endif
        idle_clear()                      /* 234 */
    fi
}

/* pool.c:254-270 worker_main (no spin rounds unless -DSPIN: see the README) */
proctype worker(byte me) {
    byte w, r, m, bit_, ok, vis, hd, nx, prev, seen, i, j, k, v, fi_;
    short t, b;
#ifdef START_PARKED
    /* The pool has been idle: this worker waits in exi_event_wait
     * (pool.c:231) with seen == 0 and its idle bit set (by init). */
    atomic { ev[me] != 0 };
    idle_clear();                         /* 234 */
#endif
    do
    :: stopping -> break                  /* 259 */
    :: else ->
        find_work();                      /* 260 */
#ifdef SPIN
        if                                /* 261-264: one spin round */
        :: w == 0 && !stopping -> find_work()
        :: else
        fi;
#endif
        if
        :: w != 0 -> run_item()           /* 265 */
        :: else -> park()                 /* 266 */
        fi
    od;
    atomic { FLUSH(me); exited[me] = 1 }  /* thread exit; pthread_join synchronises */
}

/* -------------------------------------------------- external submission */

/* pool.c:152-162, thread th with home inbox q */
inline submit_external(th, q, item) {
    atomic { created[item] = 1; gate[(q)]++ }   /* 154 faa */
    if
    :: stopping -> atomic { gate[(q)]--; complete(item, 3) }   /* 155-157 */
    :: else ->
        inbox_push(th, q, item);          /* 159 */
        gate[(q)]--;                        /* 160 faa */
        notify(th)                        /* 161 */
    fi
}

proctype sub() {
    byte w, m, bit_, ok, prev, vis;
    submit_external(SUB, 1 % NW, RACER)
}

/* pool.c:455-476 drain, on the main thread once the workers are joined */
inline drain() {
    any = 1;
    do
    :: any ->
        any = 0;
        i = 0;
        do
        :: i < NW ->
            do                            /* 462-467 */
            :: deque_steal(MAIN, i);
               if
               :: r == 0 -> break
               :: r == 2 -> atomic { any = 1; complete(w, 2); w = 0; r = 0 }
               :: r == 1                  /* 463 */
               fi
            od;
            do                            /* 468-473 */
            :: inbox_nonempty(MAIN, i);
               if
               :: vis ->
                   inbox_pop(MAIN, i);
                   if
                   :: w != 0 -> atomic { any = 1; complete(w, 2); w = 0 }
                   :: else                /* sched_yield, continue */
                   fi
               :: else -> break
               fi
            od;
            i++
        :: else -> i = 0; break
        od
    :: else -> break
    od
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
    :: true -> (PARENT_DONE && PLAIN_DONE)   /* a sync_wait on its items */
#ifndef WAIT_ONLY
    :: true                               /* or shut down at once */
#endif
    fi;
#endif
    stopping = 1;                         /* 443 xchg */
    do                                    /* 444 exi_event_inc each */
    :: i < NW -> atomic { ev[i]++; i++ }
    :: else -> i = 0; break
    od;
    do                                    /* 445-446 join */
    :: i < NW -> atomic { exited[i]; i++ }
    :: else -> i = 0; break
    od;
    do                                    /* 449-450 wait for the gates */
    :: i < NW -> atomic { gate[i] == 0; i++ }
    :: else -> i = 0; break
    od;
    drain();                              /* 598 */
    /* queued items were cancelled; refused ones complete on their submitter */
    assert(idle == 0);
    main_done = 1
}

/* timeout is executable only when no other process can move: then main
 * must have returned (no lost wake-up; every worker exited), and every
 * item created must have completed (nothing lost). */
active proctype watchdog() {
    byte n;
end_wd:
    timeout -> assert(main_done);
    n = 1;
    do
    :: n <= NI -> assert(!created[n] || done[n] != 0); n++
    :: else -> break
    od
}

init {
    byte q;
    atomic {
        do                                /* exi_inbox_init */
        :: q < NW -> tail[(q)] = STUB((q)); head[(q)] = STUB((q)); q++
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
#ifndef NO_SUB
        run sub()
#endif
    }
}
