/* SPDX-License-Identifier: MIT */
/* alloc_fixtures.h - what the allocator tests share: statistics read with
 * an assertion, alignment and a small deterministic generator, errors
 * recorded on other threads and asserted after joining, sender pieces
 * (plus one, let_value bodies, a bulk counter), create calls checked once,
 * one out-of-memory sweep and a pool with or without per-worker arenas. */
#ifndef CEXEC_TEST_ALLOC_FIXTURES_H
#define CEXEC_TEST_ALLOC_FIXTURES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <cexec/allocators.h>
#include "common/helpers.h"

/* Bounded waits (not timing assertions: the bound only turns a hang into a
 * failure with a message). */
#define ALLOC_WAIT_LIMIT_S 20.0

/* The allocator's statistics (asserts it keeps them). */
ex_alloc_stats stats_of(const ex_allocator *a);
bool aligned_to(const void *p, size_t align);
/* A small deterministic generator for sizes (per thread). */
uint32_t lcg(uint32_t *s);

/* ------------------------------------------------- errors on other threads */

typedef struct thread_errors {
    atomic_int count;
    char first[256];
    pthread_mutex_t mu;
} thread_errors;

void terr_init(thread_errors *t);
void terr_record(thread_errors *t, const char *what, long a, long b);
/* Expects no error was recorded (test names the threads); destroys t. */
void terr_check(thread_errors *t, const char *test);

/* Starts n threads fn(args + i * arg_size); joins them. */
void start_threads(pthread_t *th, int n, void *(*fn)(void *), void *args, size_t arg_size);
void join_threads(pthread_t *th, int n);

/* ------------------------------------------------- common sender pieces */

/* then: in[0] + 1. */
ex_error then_plus1(void *ctx, const ex_value *in, size_t n, ex_value *out);
/* then: the value 1. */
ex_error then_ret1(void *ctx, const ex_value *in, size_t n, ex_value *out);
/* let_value: just(in[0] + 1). */
ex_sender *let_plus1(void *ctx, const ex_value *in, size_t n);
/* let_value with a larger inner operation: just -> then -> then, in[0] + 3. */
ex_sender *let_plus3(void *ctx, const ex_value *in, size_t n);
/* bulk: counts index i in ((atomic_uint *)ctx)[i]. */
ex_error bulk_count(void *ctx, size_t i, const ex_value *v, size_t n);

/* Asserts a create call (what) returned EX_OK and made its object. */
void expect_made(ex_error e, const void *made, const char *what);
/* A recycling allocator over under (asserting it was created). */
ex_recycling_allocator *make_recycling(const ex_allocator *under);

/* ------------------------------------------------------------ OOM sweeps */

typedef enum sweep_mode {
    SWEEP_TEST_ALLOCATOR,  /* fail allocation k of the suite's test allocator (the default) */
    SWEEP_FAULT_DEFAULT,   /* a fault allocator over it, installed as the default */
    SWEEP_FAULT_CHAIN,     /* a fault allocator over it, as the chain's allocator (write_env) */
} sweep_mode;

typedef ex_sender *(*sweep_build)(void *ctx);
/* Checks a result that is not EX_ENOMEM.  failed: an allocation failed. */
typedef void (*sweep_check)(const ex_result *r, void *ctx, long k, bool failed);

/* For k = 1, 2, ...: fail allocation k (as mode says) of a run of the
 * sender build(ctx) makes; the run ends with EX_ENOMEM (an allocation
 * failed) or what check accepts, and leaks nothing.  Stops at the first k
 * where no allocation failed; returns how many runs hit a failure (at
 * least one). */
long oom_sweep(const char *name, sweep_mode mode, sweep_build build, sweep_check check, void *ctx);

/* A pool whose work allocates from frame_alloc if given, else from
 * per-worker arenas (arenas) or the process default. */
ex_pool *alloc_pool(unsigned threads, bool arenas, const ex_allocator *frame_alloc);

#endif
