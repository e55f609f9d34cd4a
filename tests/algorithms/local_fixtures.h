/* SPDX-License-Identifier: MIT */
/* local_fixtures.h - what the test files of tests/algorithms/ (algo_scan,
 * algo_reduce, algo_loops) share beyond common/algo_helpers.h: running a
 * check on one or several kinds of scheduler (TEST_EVERY_SCHEDULER,
 * with_scheduler, for_each_kind, for_kinds), running senders and checking
 * how they complete (no allocation per run, concurrent runs, stop before
 * start, shut-down pools, out-of-memory sweeps), the scan builders by
 * kind, the generic monoid cases and a summing monoid that checks its ctx. */
#ifndef CEXEC_TEST_ALGORITHMS_LOCAL_FIXTURES_H
#define CEXEC_TEST_ALGORITHMS_LOCAL_FIXTURES_H

#include <stdatomic.h>
#include <stdint.h>

#include "common/algo_helpers.h"

/* What outputs are filled with before a run, to see what it wrote. */
#define SENTINEL_BYTE 0xa5

/* "exclusive" or "inclusive". */
const char *kind_name(bool excl);

/* The int64 scan of the kind asked for (init only for the exclusive one). */
ex_sender *scan_i64(ex_scheduler sch, bool excl, const int64_t *in, int64_t *out, size_t n, int64_t init);

/* The generic scan of the kind asked for. */
ex_sender *gscan(ex_scheduler sch, const ex_monoid *m, bool excl, const void *in, void *out, size_t n,
                 const void *init);

/* Runs a generic scan on a to completion with set_value(). */
void run_gscan(algo_sched *a, const ex_monoid *m, bool excl, const void *in, void *out, size_t n, const void *init);

/* Index of the first of n sz-byte elements that differ, or SIZE_MAX. */
size_t first_diff_bytes(const void *x, const void *y, size_t n, size_t sz);

/* Whether x and y are the same bits. */
bool same_bits(double x, double y);

/* A monoid of the test inputs with its filler and a name for messages. */
typedef struct gcase {
    ex_monoid m;
    void (*fill)(void *a, size_t n, uint64_t seed);
    const char *name;
} gcase;

gcase gcase_m22(void);      /* 2x2 matrix product */
gcase gcase_aff200(void);   /* 200-byte affine maps */
gcase gcase_aff8(void);     /* 1-byte affine maps */
gcase gcase_big4k(void);    /* 4096-byte elements */

/* A uint64 sum whose combine, given a ctx, checks it is the monoid's
 * (magic SUM_MAGIC; else it sets bad_ctx and adds nothing) and counts its
 * calls; a NULL ctx just sums. */
#define SUM_MAGIC 0x5ca1ab1eu
typedef struct sum_ctx {
    uint32_t magic;
    atomic_long calls;
    atomic_int bad_ctx;
} sum_ctx;

void sum_combine(void *ctx, void *acc, const void *x);

/* Inits a[0..n) with kinds[0..n), or with every kind in order when kinds
 * is NULL (n == AS_COUNT); as_fini_each takes them down. */
void as_init_each(algo_sched *a, size_t n, const as_kind *kinds);
void as_fini_each(algo_sched *a, size_t n);

/* Asserts that s, started with stop already requested on its receiver's
 * token, completes with set_stopped (builder and n for the message). */
void expect_stopped_before_start(algo_sched *a, const ex_sender *s, int builder, size_t n);

/* Runs s (not released) on pool p, which was shut down: asserts it
 * completes (bounded wait) once, with EX_ESHUTDOWN or stopped. */
void expect_run_after_shutdown(ex_pool *p, const ex_sender *s, const char *what);

/* Starts s (not released) on pool p into r, shuts p down and waits
 * (bounded): asserts one completion, EX_ESHUTDOWN if it is an error.  The
 * caller checks a value and frees the returned operation. */
ex_operation *start_then_shut_down(ex_pool *p, const ex_sender *s, arec *r, const char *what);

/* Asserts r completed once, with EX_ESHUTDOWN or stopped. */
void expect_shutdown_result(const arec *r, const char *what);

/* Runs fn(a) on a fresh scheduler of kind k, then checks nothing leaked. */
void with_scheduler(as_kind k, void (*fn)(algo_sched *a));

/* Runs fn(a) on a fresh scheduler of each kind from first to last
 * (as_kind order), one after the other, then checks nothing leaked. */
void for_each_kind(as_kind first, as_kind last, void (*fn)(algo_sched *a));

/* Runs fn(a) on a fresh scheduler of each of kinds[0..n), one after the
 * other, then checks nothing leaked. */
void for_kinds(size_t n, const as_kind *kinds, void (*fn)(algo_sched *a));

/* One test per scheduler kind, NAME_inline, NAME_run_loop,
 * NAME_single_thread_context, NAME_pool1, NAME_pool2 and NAME_pool4, each
 * running fn(algo_sched *) through with_scheduler. */
#define TEST_EVERY_SCHEDULER(suite, name, fn)                                 \
    Test(suite, name##_inline) { with_scheduler(AS_INLINE, fn); }             \
    Test(suite, name##_run_loop) { with_scheduler(AS_RUN_LOOP, fn); }         \
    Test(suite, name##_single_thread_context) { with_scheduler(AS_STC, fn); } \
    Test(suite, name##_pool1) { with_scheduler(AS_POOL1, fn); }               \
    Test(suite, name##_pool2) { with_scheduler(AS_POOL2, fn); }               \
    Test(suite, name##_pool4) { with_scheduler(AS_POOL4, fn); }

/* Runs s (released) on a: asserts it was built fine and completed with
 * one value of type `type`, which it returns. */
ex_value run_one_value(algo_sched *a, ex_sender *s, ex_type type, const char *what);

/* Storage for an operation of s (free() it); *size gets its size. */
void *op_storage_new(const ex_sender *s, size_t *size);

/* Connects s to r (arec_init'ed by the caller) in storage, starts it,
 * waits (bounded; drives a's run_loop) and destroys the operation. */
void run_in_storage(algo_sched *a, const ex_sender *s, void *storage, size_t size, arec *r);

/* Runs s three times in caller storage: asserts no run allocates and each
 * completes with nvalues values; check(r, ctx), when not NULL, checks
 * each run's results. */
void expect_runs_allocate_nothing(algo_sched *a, const ex_sender *s, size_t nvalues,
                                  void (*check)(const arec *r, void *ctx), void *ctx);

/* Starts `runs` (up to 8) operations of s at once: each must complete
 * with one int value, want. */
void expect_concurrent_runs_int(algo_sched *a, const ex_sender *s, int runs, int64_t want);

/* Connects s (released) to r (arec_init'ed by the caller) in allocated
 * storage, starts it, waits (bounded) and frees the operation.  Returns 0
 * when it completed with a value, else the error code of connect or of
 * set_error. */
int run_connected(algo_sched *a, ex_sender *s, arec *r);

/* An out-of-memory sweep: for k = 1, 2, ... fails allocation k from now
 * (test_alloc_fail_at) during run(ctx, k), which returns 0 when the run
 * completed with a value (having checked it), else the error it completed
 * with.  Every error must be EX_ENOMEM from an injected failure, no run
 * may leak, and within max_k runs one must pass without an injected
 * failure (the sweep ends there).  Returns how many runs gave EX_ENOMEM. */
int algo_oom_sweep(int (*run)(void *ctx, long k), void *ctx, long max_k, const char *what);

#endif
