/* SPDX-License-Identifier: MIT */
/* compose_fixtures.h - what the tests of the compose layer share (scope,
 * split, when_all, bulk) beyond tests/common: tests that get a fresh pool
 * or scope, running and checking helpers, and each component's test
 * senders and bodies.  Definitions in compose_fixtures.c (generic, split,
 * when_all), scope_fixtures.c and bulk_fixtures.c. */
#ifndef CEXEC_TEST_COMPOSE_FIXTURES_H
#define CEXEC_TEST_COMPOSE_FIXTURES_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>

#include "common/callbacks.h"
#include "common/helpers.h"

/* ------------------------------------------------------------- generic */

/* Runs body with a pool of `threads` workers, destroys the pool (asserting
 * EX_OK) and ends with the leak check. */
void run_with_pool(void (*body)(ex_pool *p), unsigned threads);

/* Test(suite, name) whose body (what follows) gets such a pool p. */
#define POOL_TEST(suite, name, threads)                                   \
    static void suite##_##name##_body(ex_pool *p);                        \
    Test(suite, name) { run_with_pool(suite##_##name##_body, threads); }  \
    static void suite##_##name##_body(ex_pool *p)

/* arec_init and arec_with_stop; with stop_now, stop is requested already. */
void arec_init_stoppable(arec *r, ex_pool *p, bool stop_now);
/* Connects s to r (heap storage), starts it, waits for its one completion,
 * frees the operation and releases s. */
void arec_run_to_end(ex_sender *s, arec *r);

/* Asserts r is a value completion with exactly want[0..n): the same types
 * and contents (strings compared as strings). */
void expect_result_values(const ex_result *r, const ex_value *want, size_t n);

/* An invalid sender: just of EX_MAX_ARITY + 1 values (EX_EINVAL). */
ex_sender *too_many_values(void);

/* Storage for an operation connected on this thread (ex_connect). */
typedef struct inline_run {
    _Alignas(max_align_t) unsigned char buf[1024];
    ex_operation *op;
} inline_run;

/* Connects s to r in ir's storage (asserting it fits and connect worked);
 * returns the operation (also ir->op), not started. */
ex_operation *connect_inline(inline_run *ir, const ex_sender *s, rec *r);
/* connect_inline, asserts connect started nothing, and starts it. */
void run_inline(inline_run *ir, ex_sender *s, rec *r);

/* ------------------------------------------------ scope: either kind */

typedef struct any_scope {
    bool counting;
    ex_simple_counting_scope simple;
    ex_counting_scope full;
} any_scope;

const char *scope_kind_name(const any_scope *s);
void sc_init(any_scope *s, bool counting);
ex_scope_token sc_token(any_scope *s);
void sc_close(any_scope *s);
ex_sender *sc_join(any_scope *s);
ex_error sc_destroy(any_scope *s);
void sc_destroy_ok(any_scope *s);
/* Joins through sync_wait and expects set_value(). */
void sc_join_ok(any_scope *s);

/* A scope test body: s is a fresh scope, p a pool (NULL without one). */
typedef void scope_body(any_scope *s, ex_pool *p);
/* Runs body on a fresh scope of one kind (with a pool of pool_threads
 * workers, none for 0), destroys the scope asserting EX_OK, frees the pool
 * and ends with the leak check. */
void one_scope_kind(scope_body *body, bool counting, unsigned pool_threads);
/* The same on each kind in turn: simple_counting_scope, counting_scope. */
void each_scope_kind(scope_body *body, unsigned pool_threads);

/* Test(exec_scope, name) running the body that follows on each kind of
 * scope, on the counting_scope or on the simple_counting_scope. */
#define SCOPE_TEST(name, pool_threads) SCOPE_TEST_OF_(name, each_scope_kind(name, pool_threads))
#define COUNTING_SCOPE_TEST(name, pool_threads) SCOPE_TEST_OF_(name, one_scope_kind(name, true, pool_threads))
#define SIMPLE_SCOPE_TEST(name, pool_threads) SCOPE_TEST_OF_(name, one_scope_kind(name, false, pool_threads))
#define SCOPE_TEST_OF_(name, run)                                                      \
    static void name(any_scope *s, ex_pool *p);                                        \
    Test(exec_scope, name) { run; }                                                    \
    static void name(any_scope *s __attribute__((unused)), ex_pool *p __attribute__((unused)))

/* A join connected to a rec (heap storage) and started on this thread.  The
 * rec's scheduler is the inline one: a join that waits completes where the
 * last association ends. */
typedef struct join_run {
    ex_sender *join;
    ex_operation *op;
} join_run;

join_run join_start_rec(any_scope *s, rec *rc);
void join_run_free(join_run *j);
/* Asserts that a join started now completes inside start with set_value():
 * `what` (the step just done) left no work associated with s. */
void expect_nothing_associated(any_scope *s, const char *what);

/* ------------------------------------------------ scope: work to spawn */

/* ex_then function: ++*(atomic_int *)ctx. */
ex_error inc_fn(void *ctx, const ex_value *in, size_t n, ex_value *out);
/* then(schedule(pool), ++*counter) */
ex_sender *pool_inc(ex_pool *p, atomic_int *counter);
/* then(just(), ++*counter): runs inside start, if it is ever started. */
ex_sender *inline_inc(atomic_int *counter);

/* Work that waits (bounded) for a stop request on the stop token of its
 * environment; produces bool(stop was observed). */
typedef struct stopper {
    ex_pool *pool;
    atomic_int started, observed, no_token, finished;
} stopper;

void stopper_init(stopper *s, ex_pool *p);
/* ex_then function over a token: the polling itself. */
ex_error poll_stop_fn(void *ctx, const ex_value *in, size_t n, ex_value *out);
/* starts_on(pool, then(read_env(get_stop_token), poll)) */
ex_sender *stop_waiter(stopper *s);

/* --------------------------------------------------- split and when_all */

/* test_wait_until predicate: has stop been requested on *(ex_stop_token *)token? */
bool stop_requested_at(void *token);

/* ex_then functions that count their calls and note the thread of the
 * last: count_pass passes its input through, count_seven produces int 7. */
typedef struct call_counter {
    atomic_int calls;
    const void *tid;
} call_counter;

ex_error count_pass(void *ctx, const ex_value *in, size_t n, ex_value *out);
ex_error count_seven(void *ctx, const ex_value *in, size_t n, ex_value *out);
/* then(just(int v), count_pass, c) and then(schedule(sch), count_seven, c),
 * with c zeroed. */
ex_sender *counted_int(call_counter *c, int64_t v);
ex_sender *counted_seven_on(call_counter *c, ex_scheduler sch);
/* Initialises a[0..n) and connects s to each (heap storage) into op[]. */
void connect_consumers(const ex_sender *s, trec *a, ex_operation **op, int n);
/* ex_then function: int in -> int in + 1. */

/* A child that runs on sch and waits (bounded) until the stop token of its
 * environment (split's or when_all's own) reports stop, then completes
 * stopped, or with EX_EUSER + 2 if late_error; a timeout completes with
 * EX_EUSER + 99. */
typedef struct spin_ctx {
    atomic_int entered;      /* spinners that began spinning */
    atomic_int saw_stop;     /* spinners that saw the stop request */
    atomic_int timed_out;    /* spinners that gave up waiting */
    atomic_int not_possible; /* spinners whose token could never be stopped */
    bool late_error;
} spin_ctx;

void spin_init(spin_ctx *sc);
ex_sender *spinner(ex_scheduler sch, spin_ctx *sc);

/* ------------------------------------------------------------------ bulk */

/* Expects a value completion (any values). */
void expect_value_result(ex_result *r);

/* A sequential body that records each call (the first SEQ_MAX of them). */
#define SEQ_MAX 64

typedef struct seq_ctx {
    size_t calls;
    size_t order[SEQ_MAX];
    const void *thread[SEQ_MAX];
    size_t n[SEQ_MAX];
    ex_value v0[SEQ_MAX];
    ex_value v1[SEQ_MAX];
    size_t fail_at;          /* SIZE_MAX: never */
    ex_error fail_err;
} seq_ctx;

typedef struct par_ctx {
    ex_pool *pool;
    size_t shape;
    atomic_int *hits;              /* per index */
    atomic_long calls;
    atomic_int out_of_range;
    atomic_int bad_values;
    atomic_int off_pool;           /* calls not on a worker of pool */
    atomic_uint workers;           /* bit per worker index that ran an index */
    atomic_long per_worker[32];
    size_t expect_n;
    ex_value expect[EX_MAX_ARITY];
    size_t fail_at;                /* SIZE_MAX: never */
    ex_error fail_err;
    size_t stop_at;                /* SIZE_MAX: never */
    ex_stop_source *stop;
    int body;                      /* BODY_* */
    size_t block_index;            /* BODY_BLOCK_FIRST: the index that waits ... */
    long block_until;              /* ... until this many indices ran */
    atomic_int block_timed_out;
} par_ctx;

enum { BODY_NONE, BODY_GROWING, BODY_BLOCK_FIRST, BODY_WAIT_OTHER_WORKER };

typedef struct chunk_ctx {
    size_t shape, grain;
    atomic_int *hits;
    atomic_long chunks;
    atomic_int bad_chunk;      /* begin >= end, end > shape, or longer than grain */
    atomic_int off_thread;     /* calls not on `expect_thread` (if set) */
    const void *expect_thread;
    atomic_size_t first_begin, first_end;
} chunk_ctx;

void seq_init(seq_ctx *c);
ex_error seq_fn(void *ctx, size_t i, const ex_value *v, size_t n);

/* The parallel body (par_fn): counts each index, notes the worker, checks
 * the values, and runs the chosen BODY_* behaviour. */
void par_init(par_ctx *c, ex_pool *p, size_t shape);
void par_fini(par_ctx *c);
void par_expect_values(par_ctx *c, const ex_value *v, size_t n);
/* Every index in [0, shape) ran exactly once, nothing else ran. */
void par_expect_each_once(par_ctx *c);
ex_error par_fn(void *ctx, size_t i, const ex_value *v, size_t n);

/* The chunked body (chunk_fn): counts each index of each chunk. */
void chunk_init(chunk_ctx *c, size_t shape, size_t grain);
ex_error chunk_fn(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n);
/* Every index covered once, no chunk empty, past shape or over the grain. */
void chunk_expect_cover(chunk_ctx *c);

#endif
