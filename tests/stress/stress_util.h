/* SPDX-License-Identifier: MIT */
/* stress_util.h - what the stress programs share: a counting allocator
 * (library allocations must return to where they started), a per-thread
 * xorshift, short busy waits, bounded flag waits, "agents" (threads that
 * run an armed action after a delay), a receiver that completes on any
 * thread, and the checks every round makes.  Definitions in
 * stress_util.c, which every stress program links. */
#ifndef CEXEC_STRESS_UTIL_H
#define CEXEC_STRESS_UTIL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <cexec/cexec.h>

#include "stress.h"

/* ------------------------------------------------ counting allocator */

/* Blocks counting_alloc handed out and not yet freed (atomic). */
extern long alloc_in_use;
extern ex_allocator counting_alloc;

/* alloc_in_use now. */
long stress_in_use(void);

/* ------------------------------------------------------------ helpers */

/* The calling thread's xorshift state (seed it per thread if needed). */
extern _Thread_local uint64_t rng_state;
/* A pseudo-random number in [0, n). */
uint32_t rnd(uint32_t n);

/* A short busy wait (no yield: on a loaded machine a yield can cost a
 * whole time slice, which would turn "a few microseconds" into "never"). */
void spin_delay(uint32_t n);

/* Monotonic clock in seconds. */
double now_s(void);

/* Waits for *flag != 0; gives up (returns false) after 20 s. */
bool wait_flag(const uint32_t *flag);

/* --------------------------------------------------------------- agents */

/* A thread that, each time it is armed, waits `delay` and runs fn(arg).
 * Idle agents sleep on a condition variable (they must not eat the CPU the
 * pool needs); the hand-over is the ordinary one a program would use. */
typedef struct agent {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t seq, ack, quit;  /* guarded by mu */
    void (*fn)(void *arg);
    void *arg;
    uint32_t delay;
} agent;

void agent_start(agent *a);
void agent_arm(agent *a, void (*fn)(void *), void *arg, uint32_t delay);
/* Waits until the last armed action ran; false after 20 s. */
bool agent_wait(agent *a);
void agent_stop(agent *a);

/* ---------------------------------------------------- the stress receiver */

/* How an operation completed. */
enum { D_NONE, D_VALUE, D_ERROR, D_STOPPED };

/* A receiver that may complete on any thread: it records the completion
 * (values copied, as they are lent only for the call), counts it, then
 * publishes `done` (release).  With srec_init its environment answers
 * get_stop_token with its own stop source; with srec_init_plain it is
 * empty.  `pool`: note the worker that completed it. */
typedef struct srec {
    ex_stop_source stop;
    ex_env_pair pair;
    bool has_env;
    ex_operation *op;        /* for the program's use */
    ex_pool *pool;
    void (*on_complete)(struct srec *r, int disp);  /* runs first, if set */
    uint32_t calls;          /* atomic */
    uint32_t done;           /* atomic, release */
    int disp;                /* D_* */
    int worker;              /* ex_pool_current_worker(pool) at completion */
    size_t n;
    ex_value v[EX_MAX_ARITY];
    ex_error err;            /* an owned error's text copied to err_text, the error released */
    char err_text[96];
} srec;

void srec_init(srec *r);
void srec_init_plain(srec *r);
ex_receiver srec_receiver(srec *r);
/* Connects s to r (heap storage; s is released) as a check; NULL if it
 * failed. */
ex_operation *srec_connect(srec *r, ex_sender *s, int round, int *checks);
/* Completes r as its receiver would with disp (the fields set first). */
void srec_complete(srec *r, int disp);
/* Records e in r->err as a receiver that is given it must (cexec/error.h):
 * an owned error's text is copied into r->err_text and the error released,
 * so the round's allocation check sees it freed. */
void srec_keep_error(srec *r, ex_error e);
/* v[0] as an int, -2 unless the completion was set_value(int). */
int64_t srec_int(const srec *r);

/* ------------------------------------------------- checks of a round */

/* Installs counting_alloc as the default and creates a pool of `threads`
 * workers (a check); NULL if that failed. */
ex_pool *stress_pool_new(unsigned threads, int *checks);
/* Destroys the pool (a check). */
void stress_pool_free(ex_pool *p, int *checks);

/* Waits (20 s) for r's completion (a check); false if it did not come
 * (the operation may still run: do not free it). */
bool srec_wait(srec *r, const char *what, int round, int *checks);
/* After a yield (a second completion would land about now), checks r
 * completed exactly once. */
void srec_expect_once(srec *r, const char *what, int round, int *checks);
/* agent_wait as a check. */
bool agent_wait_checked(agent *a, const char *what, int round, int *checks);
/* Checks that the allocations of the round were freed (back to
 * *baseline); a leak is reported once (the baseline follows it). */
void expect_round_freed(long *baseline, int round, int *checks);

#endif
