/* SPDX-License-Identifier: MIT */
/* cexec/pool.h - the work-stealing thread pool.
 *
 * N worker threads, each with a Chase-Lev deque (owner LIFO, thieves
 * FIFO), per-worker inboxes for submissions from outside the pool, random
 * victim selection, bounded spinning, then parking (wake-one).  Work
 * published while workers sleep always gets a worker; an idle pool uses no
 * CPU.  Scheduling allocates nothing: work items live in the operations.
 *
 * The waiting caller works: a thread outside the pool that blocks in
 * ex_sync_wait on work it submits to the pool lends itself to the pool for
 * the wait.  It takes one of the pool's lent slots (ex_pool_config's
 * lend_slots), its items go to that slot with no wake-up, and it
 * runs them itself while workers may steal them.  While lent it is an
 * agent of the pool: ex_pool_current_worker gives its slot index (from
 * ex_pool_size(p) on).  docs/pool.md, "Lent callers", has the model.
 *
 * Threads: completions of ex_schedule(ex_pool_scheduler(p)) run on an agent
 * of the pool: a worker, or a lent caller.
 * Errors: EX_ESHUTDOWN once ex_pool_shutdown (or _destroy) has begun. */
#ifndef CEXEC_POOL_H
#define CEXEC_POOL_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_pool ex_pool;

/* Frame allocation of a pool's work when its config names no allocator. */
typedef enum ex_pool_frames {
    /* The default: the pool creates (and destroys) an ex_jemalloc_allocator
     * with one arena per worker; a frame is allocated from the arena of
     * the worker that allocates it, from per-thread caches, and goes back
     * to that arena wherever it is freed (docs/allocators.md). */
    EX_POOL_FRAMES_ARENAS = 0,
    /* No pool allocator: the process default (ex_default_allocator) applies. */
    EX_POOL_FRAMES_PROCESS = 1
} ex_pool_frames;

/* How workers with nothing to do wait (docs/pool.md, "Waiting").  Every
 * policy first spins spin_rounds rounds. */
typedef enum ex_pool_wait_policy {
    /* The CEXEC_WAIT_POLICY environment variable ("adaptive", "passive" or
     * "active"; another value makes ex_pool_create fail with EX_EINVAL),
     * else adaptive. */
    EX_POOL_WAIT_DEFAULT = 0,
    /* The last worker still awake keeps looking (yielding the CPU between
     * looks) for linger_us before it parks, so that work arriving after a
     * short pause finds it awake; the others park after spinning.  An idle
     * pool uses no CPU once linger_us has passed. */
    EX_POOL_WAIT_ADAPTIVE = 1,
    /* Park as soon as the spin rounds find nothing (OMP_WAIT_POLICY=passive):
     * least CPU, and a wake-up on the path of the next request. */
    EX_POOL_WAIT_PASSIVE = 2,
    /* Never park while the pool runs: keep looking, yielding the CPU between
     * looks (OMP_WAIT_POLICY=active).  Lowest latency; the workers use CPU
     * for as long as the pool lives. */
    EX_POOL_WAIT_ACTIVE = 3
} ex_pool_wait_policy;

typedef struct ex_pool_config {
    /* Worker threads, at most 4096 (EX_EINVAL beyond); 0:
     * ex_default_thread_count(). */
    unsigned threads;
    /* Thread name prefix (workers are named "<prefix>-<i>", cut to 15
     * characters); NULL: "cexec". */
    const char *name_prefix;
    /* Pin worker i to the i-th CPU of the process affinity mask. */
    bool pin_threads;
    /* Rounds of looking for work (each 16 CPU pauses, with a look after
     * every 4) before parking; 0: the default, 256 (about 100
     * microseconds on the test machine). */
    unsigned spin_rounds;
    /* Chrome/Perfetto trace-event JSON written to this path when the pool is
     * destroyed; NULL: the CEXEC_TRACE environment variable, if set. */
    const char *trace_path;
    /* Events kept per worker when tracing (0: 1 << 16); later events are
     * counted and dropped. */
    unsigned trace_capacity;
    /* Default frame allocator of work running on the pool: environments
     * whose scheduler is this pool and that name no allocator use it
     * (ex_get_allocator).  NULL: as `frames` says.  Must outlive the pool. */
    const struct ex_allocator *allocator;
    /* With allocator NULL: where the pool's work allocates its frames. */
    ex_pool_frames frames;
    /* How idle workers wait; EX_POOL_WAIT_DEFAULT reads CEXEC_WAIT_POLICY. */
    ex_pool_wait_policy wait_policy;
    /* Adaptive policy: microseconds the last awake worker keeps looking for
     * work before it parks, at most 10,000,000 (EX_EINVAL beyond); 0: the
     * CEXEC_LINGER_US environment variable, else 1000. */
    unsigned linger_us;
    /* Lent slots: how many threads outside the pool may lend themselves to
     * it at once while they wait for its work in ex_sync_wait (a thread
     * that finds none free waits as a plain outside thread: its work goes to
     * a worker's inbox and it sleeps until done).  0: as many as workers;
     * negative: none (lending off); at most 4096 (EX_EINVAL beyond).
     * The first item a lent caller queues for a schedule operation wakes no
     * worker: the caller runs it as soon as the operation's start returns
     * (an ex_post from that thread takes the slot too, but wakes a
     * worker).  Work that runs inline
     * in that start (ex_then on ex_just inside a when_all, say) therefore
     * runs before it, unless a worker happens to be awake; work there that
     * blocks until the item has run (a spin, a condition variable) waits
     * for ever.  Such code needs lending off.  (A nested ex_sync_wait there
     * is safe: it wakes a worker for the item first.) */
    int lend_slots;
    /* The clock of the pool's timers (cexec/virtual_clock.h): a virtual
     * clock that a test advances; NULL: CLOCK_MONOTONIC.  On a virtual
     * clock no worker waits for a deadline: an advance posts each due
     * timer's completion to the pool.  Must outlive the pool. */
    struct ex_clock *clock;
} ex_pool_config;

/* Per-worker counters; read while the pool runs, they are a snapshot. */
typedef struct ex_pool_worker_stats {
    uint64_t executed;  /* work items run */
    uint64_t stolen;    /* items taken from another worker's deque */
    uint64_t parked;    /* times the worker went to sleep */
    uint64_t woken;     /* times it was woken to work */
} ex_pool_worker_stats;

/* Threads the process may use: the size of its CPU affinity mask, capped by
 * the cgroup CPU quota (v2 cpu.max or v1 cfs quota/period, rounded up);
 * at least 1. */
unsigned ex_default_thread_count(void);

/* Creates a pool (cfg may be NULL for defaults).  Errors: EX_EINVAL (bad
 * config), EX_ENOMEM, EX_EAGAIN (a thread could not be created; the threads
 * already started are stopped again). */
ex_error ex_pool_create(const ex_pool_config *cfg, ex_pool **out);

/* The pool's scheduler: schedule() completes with set_value() on a worker,
 * or set_stopped() when the receiver's stop token is stopped at the moment
 * the item runs, or set_error(EX_ESHUTDOWN) when started after shutdown
 * began.  Forward progress: parallel.  post never runs the item inline;
 * dispatch runs it inline when called on a worker of this pool.  NULL p:
 * the invalid handle (vt NULL: ex_schedule gives an invalid sender,
 * ex_post and ex_dispatch EX_EINVAL). */
ex_scheduler ex_pool_scheduler(ex_pool *p);

/* The number of worker threads (lent slots not counted). */
unsigned ex_pool_size(const ex_pool *p);

/* The number of lent slots (ex_pool_config.lend_slots as resolved). */
unsigned ex_pool_lend_slots(const ex_pool *p);

/* Counters of slot i: a worker (i < ex_pool_size) or a lent slot (i from
 * ex_pool_size up to ex_pool_size + ex_pool_lend_slots; its counters add
 * up what every thread that held it did there).  EX_EINVAL for a bad
 * index. */
ex_error ex_pool_worker_stats_get(const ex_pool *p, unsigned i, ex_pool_worker_stats *out);

/* Index of the calling thread among p's agents: its worker index
 * (< ex_pool_size(p)), the index of the lent slot it holds while it waits
 * in ex_sync_wait (ex_pool_size(p) and up), or -1 when it is neither. */
int ex_pool_current_worker(const ex_pool *p);

/* Stops the pool: from now on new work is refused with EX_ESHUTDOWN (other
 * threads may keep submitting, safely, and are refused), workers finish the
 * item they run and exit, and every item still queued is cancelled
 * (schedule operations complete with set_stopped) on the calling thread
 * before this returns.  Writes the trace if tracing.  Idempotent.  Must not
 * be called on one of the pool's workers (EX_EINVAL, nothing done).
 * An item still running when shutdown begins may be blocked in ex_sync_wait;
 * that wait keeps running queued items of the pool (it may be waiting for
 * one of them), so items can still run, rather than be cancelled, until the
 * last worker has finished its current item.  Likewise a lent caller (a
 * thread outside the pool waiting in ex_sync_wait) keeps running the items
 * of its own lent slot that shutdown has not drained yet; items it finds
 * there when it stops waiting are cancelled on its thread, and its own
 * further submissions are refused.  Called again from inside a
 * cancellation this shutdown runs (on the same thread), it returns EX_OK at
 * once: the shutdown is under way and ends when the outer call returns.
 * Other threads calling it meanwhile wait for it to end.
 *
 * fork(): in a child process, a pool created before the fork has no
 * workers.  Its work is refused with EX_ESHUTDOWN (ex_post, schedule
 * operations: set_error), and ex_pool_shutdown / ex_pool_destroy return
 * EX_EINVAL and do nothing (the parent's queued work is neither run nor
 * cancelled in the child; the child's copy of the pool is not freed).  The
 * child may create and use pools of its own. */
ex_error ex_pool_shutdown(ex_pool *p);

/* ex_pool_shutdown, then waits until no owning scheduler handle holds the
 * pool (ex_scheduler_retain: a task holds every scheduler it ran on until
 * its completion has been delivered, even while it is away on another
 * resource) and no lent caller holds one of its lent slots (it gives the
 * slot back when its ex_sync_wait ends or goes to sleep), then frees p.  No other thread may use p once this returns.
 * The pool's default frame allocator (EX_POOL_FRAMES_ARENAS) is not freed
 * but kept for the next pool: blocks allocated from it (operation states
 * from ex_connect_alloc, say) may still be freed after this returns.
 * Errors: EX_EINVAL (NULL; called on one of the pool's workers; a pool of
 * the parent process after fork), EX_EBUSY (called from a cancellation the
 * pool's own shutdown runs, or by a thread that holds one of the pool's
 * lent slots, i.e. from work running inside its ex_sync_wait of the
 * pool's work: destroy would wait for that thread; nothing done). */
ex_error ex_pool_destroy(ex_pool *p);

#ifdef __cplusplus
}
#endif
#endif
