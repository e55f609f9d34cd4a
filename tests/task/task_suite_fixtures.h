/* task_suite_fixtures.h - what the task_*.c files of the exec_task suite
 * share (cexec/task.h, P3552 in C).
 *
 * Task bodies may run on pool workers, on a single_thread_context or on a
 * fiber of the main thread: they never assert (a Criterion assertion
 * long-jumps, which cannot leave a fiber or another thread).  They note
 * what they see in a `probe` (TCHECK) and the test asserts on it once the
 * task completed (EXPECT_PROBE).  Thread identity after an await is read
 * through out-of-line calls (test_thread_id, pthread_self,
 * ex_pool_current_worker): never a TLS address kept across ex_await. */
#ifndef CEXEC_TEST_TASK_SUITE_FIXTURES_H
#define CEXEC_TEST_TASK_SUITE_FIXTURES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/helpers.h"
#include "common/task_fixtures.h"

/* The signature of one int value. */
extern const ex_sig sig_int;

/* ex_sync_wait(s). */
ex_result run(ex_sender *s);

/* Asserts r's disposition (naming the error when there is one). */
void expect_disp(ex_result *r, ex_disposition d);

/* A then function: int -> int + 1. */
ex_error add_one(void *ctx, const ex_value *in, size_t n, ex_value *out);

/* Task bodies: no value; *(int64_t *)arg; counts its runs in
 * *(atomic_int *)arg and returns 5. */
ex_task_result body_void(ex_task *t, void *arg);
ex_task_result body_i64(ex_task *t, void *arg);
ex_task_result body_mark(ex_task *t, void *arg);

/* A gate: a manual sender that completes with set_value(int) when
 * gate_open is called, on the thread that calls it.  Start publishes the
 * operation.  Zero-initialise (or gate_init) before use. */
typedef struct gate {
    _Atomic(void *) op;
    atomic_int opened;
} gate;

void gate_init(gate *g);
ex_sender *gate_sender_new(gate *g);
/* Waits (bounded) until an operation of g was started; false on timeout. */
bool gate_wait(gate *g);
void gate_open(gate *g, int64_t v);

/* A recording receiver that can be completed on any thread, with a
 * scheduler and (with_stop) a stop source in its environment. */
void trec_setup(trec *tr, ex_scheduler sch, bool with_stop);

/* Connects s (consumed) to tr with storage from the environment's
 * allocator and starts it. */
ex_operation *start_with(ex_sender *s, trec *tr);

#endif
