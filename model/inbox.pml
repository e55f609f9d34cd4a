/* SPDX-License-Identifier: MIT */
/* inbox.pml - Promela model of cexec's inbox (src/inbox.c, src/exi_inbox.h):
 * Vyukov's intrusive multi-producer node queue with a stub node, consumers
 * serialised by a try-lock, and the exi_inbox_nonempty hint that the pool's
 * park re-check (pool.c:203-207) relies on.  "inbox.c:198" below is line
 * 198 of src/inbox.c.
 *
 * Memory model: x86-TSO with a one-entry store buffer per thread for the
 * plain stores (the link prev->next, 179; the head, 182; the lock release,
 * 213): a flusher process per thread makes the pending store visible at
 * any moment, a second plain store first makes the pending one visible
 * (FIFO kept), a locked instruction (the xchg on tail, 177; the cas on the
 * lock, 211) drains it first, and the thread's own loads forward from it.
 * The store to w->next (176) precedes the xchg and is drained by it.
 *
 * Scenario: NPROD producers push items (producer 0 items 1 and 2, producer
 * 1 item 3); NCONS consumers pop until every producer has finished and
 * exi_inbox_nonempty says empty.  A consumer re-inserting the stub while a
 * producer is half-way through its push (the "overtaken" case, 205) is
 * reachable: two producers race one consumer on one queue.
 *
 * Properties:
 *  - exactly once: pop never returns the stub, NULL aside, and returns each
 *    item at most once (assert in got());
 *  - the hint: when exi_inbox_nonempty returns false, every item whose
 *    push (its xchg, 177) happened before the call has been removed by a
 *    pop (assert in nonempty(), with ghost masks);
 *  - nothing lost: when everything has stopped, every item was popped
 *    (watchdog at timeout); -DNP with pan -l -f: no livelock.
 *
 * Deliberately broken variant (must be reported as an error):
 *  -DBROKEN_TAIL_ONLY  exi_inbox_nonempty looks at the tail only, which
 *                      exi_inbox.h:246-249 says is not enough. */

#define NPROD 2
#define NCONS 2
#define NT (NPROD + NCONS)
#define NI 3
#define STUB (NI + 1)

/* plain-store locations */
#define A_NEXT(n) (n)             /* ex_work.next of node n (0..STUB) */
#define A_HEAD (STUB + 1)
#define A_LOCK (STUB + 2)
#define NADDR (STUB + 3)

byte mem[NADDR];
byte tail;                        /* only ever exchanged */

bit sb_on[NT];
byte sb_a[NT];
byte sb_v[NT];

/* ghosts */
byte pushed_mask;                 /* items whose xchg has happened */
byte popped_mask;                 /* items a pop has unlinked (head moved past) */
byte got_by[NI + 1];
byte prods_done;
byte cons_done;

#define ST(th, a, v) \
    if :: sb_on[th] -> mem[sb_a[th]] = sb_v[th] :: else fi; \
    sb_a[th] = a; sb_v[th] = v; sb_on[th] = 1
#define LD(th, a) ((sb_on[th] && sb_a[th] == (a)) -> sb_v[th] : mem[a])
#define FLUSH(th) \
    if \
    :: sb_on[th] -> mem[sb_a[th]] = sb_v[th]; sb_on[th] = 0; sb_a[th] = 0; sb_v[th] = 0 \
    :: else \
    fi
#define BIT(n) ((n) <= NI -> (1 << (n)) : 0)

proctype flusher(byte th) {
end_fl:
    do
    :: atomic { sb_on[th] -> FLUSH(th) }
    od
}

/* inbox.c:175-180 */
inline push(th, n) {
    atomic {
        FLUSH(th);
        mem[A_NEXT(n)] = 0;               /* 176 (drained by the xchg) */
        prev = tail; tail = n;            /* 177 xchg */
        pushed_mask = pushed_mask | BIT(n)
    }
    atomic { ST(th, A_NEXT(prev), n); prev = 0 }   /* 179 store rel */
}

/* exi_inbox.h:250-252; vis */
inline nonempty(th) {
    atomic { before = pushed_mask; vis = (tail != STUB) }   /* tail load acq */
#ifndef BROKEN_TAIL_ONLY
    if
    :: !vis -> atomic { vis = (LD(th, A_HEAD) != STUB) }   /* head load acq */
    :: else
    fi;
#endif
    atomic {
        /* false: everything pushed before the call has been taken */
        assert(vis || (before & ~popped_mask) == 0);
        before = 0
    }
}

/* set_head (182), unlinking hd */
inline set_head(th, nxt) {
    atomic { ST(th, A_HEAD, nxt); popped_mask = popped_mask | BIT(hd) }
}

/* inbox.c:208-215 with pop_locked (185-206); w: the node or 0.
 * ok: the lock is held and pop_locked has not returned. */
inline pop(th) {
    w = 0;
    nonempty(th);                         /* 209 */
    if
    :: vis ->
        atomic {                          /* 211 try-lock */
            vis = 0;
            FLUSH(th);
            if :: mem[A_LOCK] == 0 -> mem[A_LOCK] = 1; ok = 1 :: else fi
        }
        if
        :: ok ->
            hd = LD(th, A_HEAD);          /* 186 */
            nx = LD(th, A_NEXT(hd));      /* 187 */
            if
            :: hd == STUB ->
                if
                :: nx == 0 -> ok = 0      /* 189 */
                :: else ->
                    atomic { ST(th, A_HEAD, nx); hd = nx }   /* 190-191: unlinks the stub */
                    nx = LD(th, A_NEXT(hd))  /* 192 */
                fi
            :: else
            fi;
            if
            :: ok && nx != 0 -> set_head(th, nx); w = hd; ok = 0   /* 194-196 */
            :: else
            fi;
            if
            :: ok -> if :: tail != hd -> ok = 0 :: else fi   /* 198 */
            :: else
            fi;
            if
            :: ok ->
                push(th, STUB);           /* 199 */
                nx = LD(th, A_NEXT(hd));  /* 200 */
                if
                :: nx != 0 -> set_head(th, nx); w = hd   /* 201-203 */
                :: else                   /* 205 overtaken */
                fi;
                ok = 0
            :: else
            fi;
            atomic { ST(th, A_LOCK, 0); hd = 0; nx = 0 }   /* 213 store rel */
        :: else
        fi
    :: else
    fi
}

inline got(item, who) {
    assert(item != STUB && item >= 1 && item <= NI);
    assert(got_by[item] == 0);
    got_by[item] = who
}

proctype producer(byte th) {
    byte prev;
    if
    :: th == 0 -> push(th, 1); push(th, 2)
    :: else -> push(th, 3)
    fi;
    atomic { FLUSH(th); prods_done++ }
}

proctype consumer(byte th) {
    byte w, ok, vis, hd, nx, prev, before;
    do
    :: pop(th);
       if
       :: w != 0 -> atomic { got(w, th); w = 0 }
       :: else ->
           if
           :: prods_done == NPROD ->
               nonempty(th);
               if :: !vis -> break :: else -> vis = 0 fi
           :: else
           fi
       fi
    od;
    atomic { FLUSH(th); cons_done++ }
}

active proctype watchdog() {
    byte n;
end_wd:
    timeout ->
    assert(prods_done == NPROD && cons_done == NCONS);
    n = 1;
    do
    :: n <= NI -> assert(got_by[n] != 0); n++
    :: else -> break
    od
}

init {
    byte k;
    atomic {
        tail = STUB;
        mem[A_HEAD] = STUB;
        do
        :: k < NPROD -> run producer(k); run flusher(k); k++
        :: k >= NPROD && k < NT -> run consumer(k); run flusher(k); k++
        :: else -> break
        od
    }
}
