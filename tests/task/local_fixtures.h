/* SPDX-License-Identifier: MIT */
/* local_fixtures.h - what the test files of tests/task/ share: the exec_task
 * suite (task_*.c), exec_task_fork (fork_*.c) and exec_task_nesting; cexec/task.h.
 *
 * Task bodies may run on pool workers, on a single_thread_context or on a
 * fiber of the main thread: they never assert (a Criterion assertion
 * long-jumps, which cannot leave a fiber or another thread).  They note
 * what they see in a `probe` (TCHECK) and the test asserts on it once the
 * task completed (EXPECT_PROBE).  Thread identity after an await is read
 * through out-of-line calls (test_thread_id, pthread_self,
 * ex_pool_current_worker): never a TLS address kept across ex_await. */
#ifndef CEXEC_TEST_TASK_LOCAL_FIXTURES_H
#define CEXEC_TEST_TASK_LOCAL_FIXTURES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/callbacks.h"
#include "common/helpers.h"
#include "common/task_fixtures.h"

/* The signature of one int value. */
extern const ex_sig sig_int;

/* ex_sync_wait(s). */
ex_result run(ex_sender *s);

/* Asserts r's disposition (naming the error when there is one). */
void expect_disp(ex_result *r, ex_disposition d);

/* A then function: int -> int + 1. */

/* Task bodies: no value; *(int64_t *)arg; counts its runs in
 * *(atomic_int *)arg and returns 5. */
ex_task_result body_void(ex_task *t, void *arg);
ex_task_result body_i64(ex_task *t, void *arg);
ex_task_result body_mark(ex_task *t, void *arg);

/* The end of a task test: destroys pool and stc when not NULL (asserting
 * it worked), then checks the probe and that nothing leaked. */
void task_test_end(ex_pool *pool, ex_single_thread_context *stc);

/* A recording receiver that can be completed on any thread, with a
 * scheduler and (with_stop) a stop source in its environment. */
void trec_setup(trec *tr, ex_scheduler sch, bool with_stop);

/* Connects s (consumed) to tr with storage from the environment's
 * allocator and starts it. */
ex_operation *start_with(ex_sender *s, trec *tr);

/* ------------------------------------------------ the exec_task_fork suite */

/* One fork test's shared state (each test runs in its own process). */
typedef struct fork_state {
    ex_pool *pool;             /* NULL: the root runs on sync_wait's run loop */
    const void *home;          /* the test's thread, for tasks on sync_wait's loop */
    atomic_int runs[16];       /* per child index */
    atomic_int stops[16];      /* stopped awaits seen, per child index */
    atomic_int waiting;        /* children waiting for a stop */
    atomic_int outer_runs, outer_stops;
    atomic_int worker[16];     /* ex_pool_current_worker in child i */
    atomic_int started0;       /* child 0 has started */
    atomic_int status;         /* an await's status, as the body saw it */
    atomic_int code;           /* an await's error code */
} fork_state;

extern fork_state FS;

/* Clears FS but for the pool; the home thread is the caller's. */
void reset_state(void);
/* Whether a task runs where it belongs: a worker of FS.pool, else the
 * thread of sync_wait's run loop. */
bool on_home(void);
/* A pool of `workers` threads (no lent slots) in FS.pool, or none (0: the root runs on
 * sync_wait's loop); drop_pool destroys it. */
void use_pool(unsigned workers);
void drop_pool(void);
/* For workers = lo .. hi: use_pool(workers), fn(workers), drop_pool;
 * then task_test_end. */
void for_pools(unsigned lo, unsigned hi, void (*fn)(unsigned workers));
/* task on the pool (its scheduler, no stop token), or on sync_wait's own
 * run loop when there is no pool. */
ex_result run_on_pool(ex_sender *task);
/* One round: reset_state, then run_on_pool(a task of root(arg)). */
ex_result run_round(ex_task_fn root, void *arg);
/* What an await gave, as the task's own result. */
ex_task_result pass_on(ex_await_result r);
/* A task of child_value((void *)i) connected (ex_connect_alloc) to rr,
 * whose environment gives FS.pool's scheduler, and never started; its
 * operation goes to *op, for drop_connected.  The sender stays the
 * caller's. */
ex_sender *connected_task(intptr_t i, rec *rr, ex_operation **op);
/* Frees op and asserts that rr received no completion. */
void drop_connected(ex_operation *op, rec *rr);
/* Child (intptr_t)arg = i: counts its run in FS.runs[i & 15], returns
 * 10 i + 1. */
ex_task_result child_value(ex_task *t, void *arg);

#endif
