/* SPDX-License-Identifier: MIT */
/* syncloop.pml - Promela model of ex_sync_wait's own run loop
 * (src/adaptors/sync_wait.c: loop_post, run_loop_to_end): posters push
 * work on a lock-free stack and wake the waiter, which sleeps on a futex
 * word.  model/README.md, "syncloop.pml", has the mapping.
 *
 * The futex word holds DONE (1), SLEEPING (2), POSTED (4) and the number
 * of posters inside loop_post (PIN, from 8 up).  A futex wait sleeps only
 * if the word still holds the value the waiter compares, atomically; a
 * wake ends a sleep that has begun, and does nothing otherwise.
 *
 * Checked (invalid end states): the waiter runs every posted item and
 * returns; no wake-up is lost.  Two posters, two items; the second item
 * the waiter runs completes the operation (the completion sets DONE).
 * Sequentially consistent: every access to the word is a read-modify-write
 * in C, the pushes a cas, the waiter's take an exchange.
 *
 * Broken variant BROKEN_PIN_ABA: the code before the fix, without
 * POSTED: a poster's pin comes and goes, so a whole post between the
 * waiter's read of the word and its sleep leaves the word as it was, and
 * the waiter sleeps with an item posted, for good.
 *
 * With TIMER, a third thread arms a timer on the loop (sloop_arm): it pins,
 * publishes the earliest deadline and unpins with POSTED like a post.  The
 * waiter, finding no item, looks at the earliest deadline: with one it
 * sleeps until then (modelled as: the sleep ends on its own and the timer
 * fires), without one it sleeps until woken.  The operation completes
 * once both items ran and the timer fired.  Broken variants:
 * BROKEN_ARM_NO_POSTED (the arm unpins without POSTED) and
 * BROKEN_EARLIEST_BEFORE_CLEAR (the waiter reads the earliest deadline
 * before it clears POSTED): either way a waiter can sleep without a
 * deadline while the timer is armed, for good. */

#define DONE 1
#define SLEEPING 2
#define POSTED 4
#define PIN 8

byte flags;
byte posted;      /* items on the stack */
byte ran;         /* items the waiter ran */
bit asleep;       /* the waiter is inside a futex wait */
bit armed;        /* a timer in the heap: the earliest deadline is published */
bit fired;        /* the waiter fired it */

inline futex_wake() {
    atomic { asleep = 0 }
}

proctype poster() {
    byte old;
    atomic { flags = flags + PIN }              /* the pin: faa */
    atomic { posted++ }                         /* the push: cas */
#ifdef BROKEN_PIN_ABA
    atomic { old = flags; flags = flags - PIN } /* the unpin: faa */
#else
    atomic { old = flags; flags = (flags | POSTED) - PIN }  /* the unpin with POSTED: cas loop */
#endif
    if
    :: old & SLEEPING -> futex_wake()
    :: else -> skip
    fi
}

#ifdef TIMER
proctype armer() {
    byte old;
    atomic { flags = flags + PIN }              /* the pin */
    armed = 1                                   /* insert, store earliest (under the heap's lock) */
#ifdef BROKEN_ARM_NO_POSTED
    atomic { old = flags; flags = flags - PIN }
#else
    atomic { old = flags; flags = (flags | POSTED) - PIN }
#endif
    if
    :: old & SLEEPING -> futex_wake()
    :: else -> skip
    fi
}
#endif

inline maybe_done() {
#ifdef TIMER
    if
    :: ran >= 2 && fired -> atomic { flags = flags | DONE }
    :: else -> skip
    fi
#else
    if
    :: ran >= 2 -> atomic { flags = flags | DONE }           /* the second completes the operation */
    :: else -> skip
    fi
#endif
}

proctype waiter() {
    bit e;
    byte f;
    f = flags;
    if
    :: !(f & DONE) -> atomic { flags = flags | SLEEPING; f = flags }
    :: else -> skip
    fi;
    do
    :: f & DONE -> break
    :: else ->
#ifdef BROKEN_EARLIEST_BEFORE_CLEAR
        e = armed;
#endif
#ifndef BROKEN_PIN_ABA
        atomic { flags = flags & (255 - POSTED); f = flags }   /* fas_and */
        if
        :: f & DONE -> break
        :: else -> skip
        fi;
#endif
#if defined(TIMER) && !defined(BROKEN_EARLIEST_BEFORE_CLEAR)
        e = armed;
#endif
        if
        :: atomic { posted > 0 -> ran = ran + posted; posted = 0 }   /* refill and run them */
            maybe_done()
        :: posted == 0 && e && !fired ->                             /* a deadline: the sleep ends then */
            fired = 1;
            maybe_done()
        :: posted == 0 && !(e && !fired) ->                          /* refill found nothing */
            atomic { if :: flags == f -> asleep = 1 :: else -> skip fi }   /* futex_wait */
            asleep == 0
        fi;
        f = flags
    od;
    assert(ran == 2)
}

init {
    atomic {
        run waiter();
        run poster();
        run poster();
#ifdef TIMER
        run armer()
#endif
    }
}
