/* SPDX-License-Identifier: MIT */
/* senders.h - test senders: test_sender_new (a sender of yours in one
 * call: its start is a function), and senders whose completion the test
 * controls: test_gate (a manual sender: completes when the test opens it,
 * on the test's thread), work_gate (work that holds its thread until the
 * test opens it) and until_stopped (completes only when stop is
 * requested). */
#ifndef CEXEC_TEST_SENDERS_H
#define CEXEC_TEST_SENDERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <cexec/cexec.h>

/* ---------------------------------------------------------- test_sender */

/* The operation of a test_sender_new sender. */
typedef struct test_op {
    ex_operation base;
    ex_receiver r;
    void *ctx;                        /* the ctx given to test_sender_new */
    void (*start)(struct test_op *op);
    ex_stop_callback cb;              /* free for start to use */
} test_op;

/* The sender test_sender_new makes; a static one (refs 0, never freed) is
 * TEST_SENDER_STATIC(start, ctx, sigs, op_size, op_align). */
typedef struct test_sender {
    ex_sender base;
    void (*start)(test_op *op);
    void *ctx;
} test_sender;

extern const ex_sender_vtable test_sender_vt;

#define TEST_SENDER_STATIC(start_fn, ctx_, sigs_, size, align)                                           \
    {                                                                                                    \
        .base = { .vt = &test_sender_vt, .refs = 0, .op_size = (size), .op_align = (align), .sigs = sigs_ }, \
        .start = (start_fn), .ctx = (ctx_)                                                               \
    }

/* A sender whose operation (a test_op) calls start(op) when started; its
 * completion signatures are *sigs (NULL: none).  Adjust op_size / op_align
 * / sigs of the result before use for odd layouts (keep op_size >=
 * sizeof(test_op) unless connect must never be reached).  Out of memory:
 * an invalid sender (EX_ENOMEM), as a builder gives. */
ex_sender *test_sender_new(void (*start)(test_op *op), void *ctx, const ex_sigs *sigs);

/* ------------------------------------------------------------ test_gate */

/* test_gate_sender(g) completes with set_value(int v) when
 * test_gate_open(g, v) is called, on the calling thread; its start only
 * publishes the operation.  One operation at a time per gate. */
typedef struct test_gate {
    _Atomic(void *) op;      /* the started operation, until opened */
    atomic_int started, opened;
} test_gate;

void test_gate_init(test_gate *g);
ex_sender *test_gate_sender(test_gate *g);
/* Waits (bounded) until an operation of g was started; false on timeout. */
bool test_gate_wait_started(test_gate *g);
/* Completes the started operation with set_value(int v). */
void test_gate_open(test_gate *g, int64_t v);

/* ------------------------------------------------------------ work_gate */

/* work_gate_fn, as an ex_then function, holds the thread it runs on until
 * work_gate_open (bounded: a wait that times out is counted), then
 * produces int `value`.  It notes the thread and, with a pool, the worker. */
typedef struct work_gate {
    atomic_int open, entered, finished, timed_out;
    int64_t value;
    ex_pool *pool;           /* for worker; may be NULL */
    int worker;              /* ex_pool_current_worker(pool), -2 before it ran */
    const void *thread;      /* test_thread_id() where it ran */
} work_gate;

void work_gate_init(work_gate *g, ex_pool *pool, int64_t value);
ex_error work_gate_fn(void *ctx, const ex_value *in, size_t n, ex_value *out);
/* then(schedule(sch), work_gate_fn, g) -> int. */
ex_sender *work_gated(work_gate *g, ex_scheduler sch);
void work_gate_open(work_gate *g);
/* Waits (bounded) until `count` runs entered the gate; asserts it. */
void work_gate_wait_entered(work_gate *g, int count);

/* -------------------------------------------------------- until_stopped */

/* A sender that completes with set_stopped from its stop callback only. */
ex_sender *until_stopped(void);

/* ----------------------------------------------------------- stop_probe */

/* Completes with set_value(int flags) for the stop token of its
 * environment: bit 0 (STOP_PROBE_POSSIBLE) stop possible, bit 1
 * (STOP_PROBE_REQUESTED) stop requested when it ran; *seen (if not NULL)
 * gets the token. */
enum { STOP_PROBE_POSSIBLE = 1, STOP_PROBE_REQUESTED = 2 };
ex_sender *stop_probe(ex_stop_token *seen);

/* --------------------------------------------------------- env_recorder */

/* What an env_recorder's work saw in its receiver's environment when it
 * ran (the last run; calls counts them). */
typedef struct seen_env {
    int calls;
    ex_scheduler sch;         /* get_scheduler; {NULL, NULL} without one */
    const ex_allocator *alloc;
    const ex_domain *domain;  /* ex_get_domain */
    bool stop_possible, stop_requested;
} seen_env;

/* set_value() inline, recording its environment into *s (cleared here). */
ex_sender *env_recorder(seen_env *s);

#endif
