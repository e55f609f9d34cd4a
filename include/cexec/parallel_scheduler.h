/* SPDX-License-Identifier: MIT */
/* cexec/parallel_scheduler.h - the process's parallel scheduler (P2079,
 * C++26 [exec.par.scheduler] get_parallel_scheduler, and the replaceable
 * backend of [exec.sysctxrepl]).
 *
 * One parallel scheduler per process, for code that needs parallel agents
 * and has no reason to own a pool: ex_parallel_scheduler() gives its
 * handle.  By default it runs on a pool that the first call creates, with
 * ex_default_thread_count() workers named "cexec-par-<i>" (at most 4096;
 * the wait policy and linger of the CEXEC_WAIT_POLICY and CEXEC_LINGER_US
 * environment variables, and everything else as ex_pool_create's
 * defaults).  An application may install its own backend instead, before
 * the first call (ex_parallel_scheduler_set_backend).
 *
 * The scheduler ([exec.par.scheduler]):
 * - forward progress: parallel (EX_PROGRESS_PARALLEL), whatever the
 *   backend;
 * - equality: every handle ex_parallel_scheduler returns compares equal
 *   to every other (same backend; one exception below, the handles of a
 *   failed creation);
 * - schedule completes with set_value() on an agent of the backend, with
 *   set_stopped() when the receiver's stop token has stop requested when
 *   the item runs or when the backend drops the item, and with
 *   set_error(EX_ESHUTDOWN) once shut down (or the backend's error);
 * - bulk, bulk_grain, bulk_chunked and bulk_unchunked (bulk.h) on it run
 *   as their policy allows: EX_PAR and EX_PAR_UNSEQ in parallel through
 *   the backend (the scheduler's domain, cexec/domain.h, takes the bulk
 *   as the pool's does and hands its job to the backend's bulk, or
 *   shares it out through its schedule); EX_SEQ and EX_UNSEQ in
 *   index order on the agent that started the bulk, never handed to the
 *   backend's bulk;
 * - ex_post queues a work item on a backend agent; ex_dispatch runs it
 *   inline on a worker of the default pool, else queues it.
 *
 * With the default backend the handle is the pool's own
 * (ex_pool_scheduler of the pool ex_parallel_scheduler_pool returns), so
 * everything pool.h says of a pool's scheduler holds: lent callers (a
 * thread waiting in ex_sync_wait runs the work it waits for), its timers
 * (timer.h), its frame allocator.  A custom backend has no clock:
 * ex_schedule_at / ex_schedule_after on its handle give invalid senders
 * (EX_ENOTSUP).
 *
 * Lifetime.  The parallel scheduler lives as long as the process: its
 * memory is never freed, so a handle stays safe to use after
 * ex_parallel_scheduler_shutdown, at exit or on any thread; its work is
 * refused from then on (EX_ESHUTDOWN).
 *
 * At exit.  The first call registers an atexit handler (which also runs
 * when a shared library that contains cexec is unloaded with dlclose).  If
 * the default pool runs and was not shut down, the handler shuts it down
 * as ex_pool_shutdown does (work refused from then on, queued work
 * completed with set_stopped, trace written, workers joined), but it waits
 * at most 100 ms for workers to finish the item they are running: an item
 * may never return (a loop that waits for a request), and exit must not
 * hang on it.  When a worker is still busy then, the pool stays as it is,
 * refusing work, and the process ends with that thread.  The handler does
 * nothing when called on one of the pool's agents (exit() from work the
 * pool runs) or in a fork() child.  A custom backend is the application's
 * to stop; the handler leaves it alone.  Memory is never freed at exit
 * (it stays reachable: leak checkers report nothing), so threads still
 * running during exit can use their handles safely.  (A library unloaded
 * by dlclose therefore leaves the pool's memory behind: about 20 KiB per
 * worker.)
 *
 * fork().  In a child process, the parallel scheduler of the parent is a
 * pool of the parent's: it has no workers and refuses work with
 * EX_ESHUTDOWN (pool.h).  A child that never saw it used creates its own at
 * its first call.
 *
 * Errors.  When the default pool cannot be created, ex_parallel_scheduler
 * returns a handle on which every operation fails with the reason
 * (EX_ENOMEM; EX_EAGAIN, a thread could not be created; EX_EINVAL, a bad
 * CEXEC_WAIT_POLICY or CEXEC_LINGER_US): schedule completes with
 * set_error, ex_post returns it, bulk runs its sequential loop.  Nothing is
 * kept of the attempt: the next call tries again.  A handle rather than an
 * invalid one, because a handle composes without a check and the cause
 * then arrives where the result is awaited, as with any scheduling
 * failure; an invalid handle would report EX_EINVAL and lose it.  Such a
 * handle compares equal only to handles that failed for the same reason. */
#ifndef CEXEC_PARALLEL_SCHEDULER_H
#define CEXEC_PARALLEL_SCHEDULER_H

#include <cexec/types.h>
#include <cexec/pool.h>
#include <cexec/scheduler.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A backend ([exec.sysctxrepl.psb]'s parallel_scheduler_backend): what
 * the parallel scheduler runs on when the application installs it.  Every
 * function may be called from any thread, concurrently, including from
 * the backend's own agents.  The backend must stay usable for the rest of
 * the process (until its shutdown hook has run, then it only refuses). */
typedef struct ex_parallel_backend {
    /* Required.  Queues w to run on one of the backend's agents, never
     * inline in this call.  EX_OK: the backend owns w until it calls
     * w->execute(w) exactly once, on one of its agents, or w->cancel(w)
     * when it drops the item (at its shutdown); w->next is the backend's
     * to use meanwhile (an intrusive queue needs no allocation).  An error
     * (EX_ESHUTDOWN once it no longer runs work): w is left as it was; a
     * schedule operation completes with set_error(that error), ex_post
     * returns it. */
    ex_error (*schedule)(void *self, ex_work *w);
    /* Optional.  Runs a bulk job (the contract of ex_bulk_job in
     * scheduler.h: ex_bulk_job_run over disjoint ranges that cover
     * [0, job->shape), in parallel, stopping once a call returns false,
     * then ex_bulk_job_done once, after the last run returned).  It gets
     * only jobs whose policy allows parallel runs (EX_PAR, EX_PAR_UNSEQ);
     * job->unchunked asks for one index per range.  It must
     * complete the job even when it cannot run it in parallel (then it
     * runs the ranges on the calling thread).  NULL: the parallel
     * scheduler shares the job out itself, through schedule: the caller
     * and up to concurrency - 1 items queued on the backend claim chunks
     * (job->grain indices, or about 8 chunks per agent) until none is
     * left. */
    void (*bulk)(void *self, ex_bulk_job *job);
    /* Optional.  Called once, by ex_parallel_scheduler_shutdown: the
     * backend stops (its queued items cancelled, each through w->cancel)
     * and refuses later schedule calls.  Never called at exit. */
    void (*shutdown)(void *self);
    /* Agents the backend runs at once, for the shared-out bulk; 0:
     * ex_default_thread_count(). */
    unsigned concurrency;
    /* The first argument of every function. */
    void *self;
} ex_parallel_backend;

/* The process's parallel scheduler (get_parallel_scheduler): the first
 * call creates the default pool, or starts using the backend installed
 * before it; later calls return the same handle (one acquire load).  Safe
 * to call from any number of threads at once: exactly one pool is
 * created.  Never an invalid handle: when the pool cannot be created, a
 * handle whose work fails with the reason (see Errors above), and the next
 * call tries again. */
ex_scheduler ex_parallel_scheduler(void);

/* Installs the backend the parallel scheduler will run on (the struct is
 * copied; b->self must outlive the process's use of it), replacing one
 * installed before; NULL: the default pool again.  Only before the first
 * call of ex_parallel_scheduler, the one that decides what it runs on.
 * Errors: EX_EINVAL (b->schedule is NULL; nothing changed), EX_EBUSY
 * (ex_parallel_scheduler has been called, or the parallel scheduler has
 * been shut down: nothing changed). */
ex_error ex_parallel_scheduler_set_backend(const ex_parallel_backend *b);

/* Shuts the parallel scheduler down, for programs that end it themselves
 * (before they check for leaks, or to write the pool's trace).  Default
 * backend: ex_pool_shutdown of its pool (queued work completes with
 * set_stopped, the workers finish their items and are joined; other
 * threads calling meanwhile wait for it to end); a custom backend: its
 * shutdown hook, once (a call while another is under way returns at
 * once).  Not used yet: nothing to stop (an installed backend's hook
 * runs).  From then on every handle, old or new, refuses work:
 * EX_ESHUTDOWN (a bulk runs its sequential loop on the calling thread),
 * and ex_parallel_scheduler_set_backend is EX_EBUSY.  Idempotent.  Unlike
 * the exit handler, it waits for running items, however long they take.
 * Errors: EX_EINVAL, nothing done, when called on a worker of the pool
 * (it would wait for itself) or in a fork() child on the parent's pool. */
ex_error ex_parallel_scheduler_shutdown(void);

/* The default backend's pool, for its statistics (ex_pool_worker_stats_get)
 * and ex_pool_current_worker; NULL before the first ex_parallel_scheduler
 * call, with a custom backend, and after a failed creation.  It belongs to
 * the parallel scheduler: never shut it down or destroy it yourself
 * (ex_parallel_scheduler_shutdown shuts it down; nothing destroys it). */
ex_pool *ex_parallel_scheduler_pool(void);

#ifdef __cplusplus
}
#endif
#endif
