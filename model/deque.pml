/* SPDX-License-Identifier: MIT */
/* deque.pml - Promela model of cexec's Chase-Lev work-stealing deque
 * (src/deque.c, src/exi_deque.h): one owner that pushes and takes at the
 * bottom, NTHIEF thieves that steal at the top, array growth with retired
 * arrays, on x86-TSO.  "deque.c:80" below is line 80 of src/deque.c.
 *
 * Memory model.  The owner has a FIFO store buffer of depth SB: every plain
 * store it makes (slots, the array pointer, bottom: exi_store_rlx/rel are
 * plain movs on x86) is appended to it; a flusher process writes the oldest
 * entry to memory at any moment; the owner's loads forward from its own
 * buffer (youngest entry first); its locked instructions (the xchg on
 * bottom, the cas on top) drain the buffer first.  Appending to the own
 * buffer is invisible to other threads, so an owner step may append
 * several stores; the steps that others can observe are the flushes and
 * the owner's locked instructions and loads of top.  A full buffer
 * makes its oldest entry visible first (SB = 6 holds a whole push with a
 * growth: two copied slots, the array pointer, the slot, bottom).
 * Thieves only load and cas (exi_fence_full in steal orders nothing more on
 * TSO: loads are not reordered with loads); each of their loads is a step.
 *
 * Scenario: the owner pushes items 1..NITEMS and takes, in any order
 * (nondeterministic; at most NTAKES takes before the last push), then takes
 * until the deque is empty.  The array starts with 2 slots (the smallest
 * exi_deque_init accepts), so the third item makes it grow to 4.  NTHIEF
 * thieves steal until the owner is done and they find the deque empty.
 *
 * Properties: every item is obtained at most once (assert in got()); a
 * stolen or taken slot never holds NULL or a stale item (same assert:
 * item != 0, not seen before); when everything has stopped, every pushed
 * item was obtained (watchdog at timeout); and the owner's take never
 * returns an item while a thief got it (same exactly-once assert).
 *
 * Deliberately broken variants (each must be reported as an error):
 *  -DBROKEN_TAKE_STORE  take publishes bottom with a plain store instead of
 *                       the xchg (deque.c:80): on TSO the load of top can
 *                       pass it, and owner and thief both get the last item.
 *  -DBROKEN_GROW_ORDER  grow publishes the new array before copying the
 *                       slots (deque.c:54-55 swapped): a thief can read an
 *                       empty slot. */

#ifndef NTHIEF
#define NTHIEF 2
#endif
#ifndef NITEMS
#define NITEMS 3
#endif
#ifndef NTAKES
#define NTAKES 2
#endif
#define SB 6

/* memory: bottom, array (0: 2 slots, 1: 4 slots, 2: 8 slots), the slots */
#define A_BOTTOM 0
#define A_ARRAY 1
#define OFF(k) ((k) == 0 -> 0 : ((k) == 1 -> 2 : 6))
#define MASK(k) ((2 << (k)) - 1)
#define A_SLOT(k, i) (2 + OFF(k) + ((i) & MASK(k)))
#define NADDR (2 + 2 + 4 + 8)

short mem[NADDR];
byte top;                         /* deque.h:127, only ever cas'ed */

byte sb_a[SB];                    /* the owner's store buffer, oldest first */
short sb_v[SB];
byte sb_n;

byte got_by[NITEMS + 1];          /* 0 nobody, 1 owner, 2.. thief */
byte pushed;
bit owner_done;
byte thieves_done;

inline flush_one() {
    mem[sb_a[0]] = sb_v[0];
    fk = 0;
    do
    :: fk + 1 < sb_n -> sb_a[fk] = sb_a[fk + 1]; sb_v[fk] = sb_v[fk + 1]; fk++
    :: else -> break
    od;
    sb_n--;
    sb_a[sb_n] = 0; sb_v[sb_n] = 0;
    fk = 0
}

inline drain() {
    do
    :: sb_n > 0 -> flush_one()
    :: else -> break
    od
}

/* an owner store: appended to the buffer */
inline ST(addr_, val_) {
    if :: sb_n == SB -> flush_one() :: else fi;
    sb_a[sb_n] = addr_; sb_v[sb_n] = val_; sb_n++
}

/* an owner load: the youngest buffered store to a, else memory */
inline LD(addr_, res_) {
    res_ = mem[addr_];
    fk = 0;
    do
    :: fk < sb_n -> if :: sb_a[fk] == addr_ -> res_ = sb_v[fk] :: else fi; fk++
    :: else -> fk = 0; break
    od
}

proctype flusher() {
    byte fk;
end_fl:
    do
    :: atomic { sb_n > 0 -> flush_one() }
    od
}

inline got(item, who) {
    assert(item != 0 && item <= NITEMS);  /* never a NULL or garbage slot */
    assert(got_by[item] == 0);            /* exactly once */
    got_by[item] = who
}

/* deque.c:61-73 (with grow, 49-59).  The load of top is the one step
 * others can observe; the rest are the owner's own locations (read through
 * its buffer) and buffered stores. */
inline push(item) {
    atomic {
        LD(A_BOTTOM, b);                  /* 62 */
        t = top;                          /* 63 load acq */
        LD(A_ARRAY, a);                   /* 64 */
        if
        :: b - t > MASK(a) ->             /* 65-68 grow */
#ifdef BROKEN_GROW_ORDER
            ST(A_ARRAY, a + 1);
#endif
            i = t;
            do                            /* 54 copy [t, b) */
            :: i < b -> LD(A_SLOT(a, i), v); ST(A_SLOT(a + 1, i), v); i++
            :: else -> break
            od;
#ifndef BROKEN_GROW_ORDER
            ST(A_ARRAY, a + 1);           /* 55 store rel */
#endif
            a = a + 1;                    /* 56-57 the old array is retired, not freed */
            i = 0; v = 0
        :: else
        fi;
        ST(A_SLOT(a, b), item);           /* 69 */
        ST(A_BOTTOM, b + 1);              /* 71 store rel */
        b = 0; t = 0; a = 0
    }
}

/* deque.c:75-95; the item (or 0) in w */
inline take() {
    atomic {
        LD(A_BOTTOM, b); b = b - 1;       /* 76 */
        LD(A_ARRAY, a);                   /* 77 */
#ifdef BROKEN_TAKE_STORE
        ST(A_BOTTOM, b)                   /* a plain store: buffered */
#else
        drain(); mem[A_BOTTOM] = b        /* 80 xchg: full barrier */
#endif
    }
    atomic {
        t = top;                          /* 81 */
        w = 0;
        if
        :: t <= b -> LD(A_SLOT(a, b), w)  /* 84 */
        :: else
        fi
    }
    if
    :: t == b ->                          /* 85-90 the last item: race the thieves */
        atomic {
            drain();                      /* 88 cas */
            if :: top == t -> top = t + 1 :: else -> w = 0 fi
        }
        atomic { ST(A_BOTTOM, b + 1) }    /* 89 */
    :: t > b ->
        atomic { ST(A_BOTTOM, b + 1) }    /* 92 */
    :: else
    fi;
    atomic { b = 0; t = 0; a = 0 }
}

proctype owner() {
    byte w, a, fk, ntakes;
    short b, t, v, i;
    do
    :: pushed < NITEMS -> pushed++; push(pushed)
    :: pushed < NITEMS && ntakes < NTAKES ->
        ntakes++;
        take();
        if :: w != 0 -> atomic { got(w, 1); w = 0 } :: else fi
    :: pushed == NITEMS -> break
    od;
    do                                    /* take until empty */
    :: take();
       if
       :: w != 0 -> atomic { got(w, 1); w = 0 }
       :: else -> break
       fi
    od;
    atomic { drain(); owner_done = 1 }
}

/* deque.c:97-108 */
proctype thief(byte id) {
    byte w, a;
    short t, b;
    do
    :: t = top;                           /* 98 load acq */
       b = mem[A_BOTTOM];                 /* 99 fence (nothing on TSO for loads), 100 load acq */
       if
       :: t >= b ->                       /* 101 EMPTY */
           atomic {
               t = 0; b = 0;
               if :: owner_done -> break :: else fi
           }
       :: else ->
           a = mem[A_ARRAY];              /* 102 load acq */
           w = mem[A_SLOT(a, t)];         /* 103 */
           atomic {
               if                         /* 105 cas */
               :: top == t -> top = t + 1; got(w, 2 + id)
               :: else                    /* ABORT */
               fi;
               w = 0; a = 0; t = 0; b = 0
           }
       fi
    od;
    thieves_done++
}

/* When nothing can move any more, every pushed item was obtained once. */
active proctype watchdog() {
    byte n;
end_wd:
    timeout ->
    assert(owner_done && thieves_done == NTHIEF && pushed == NITEMS);
    n = 1;
    do
    :: n <= NITEMS -> assert(got_by[n] != 0); n++
    :: else -> break
    od
}

init {
    byte k;
    atomic {
        run owner();
        run flusher();
        do
        :: k < NTHIEF -> run thief(k); k++
        :: else -> break
        od
    }
}
