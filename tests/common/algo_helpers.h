/* SPDX-License-Identifier: MIT */
/* algo_helpers.h - what the algorithm suites (algo_scan, algo_reduce,
 * algo_loops) share: the schedulers every algorithm runs on, running a
 * sender to completion on one of them, seeded random inputs, serial
 * references, and the documented double error bound. */
#ifndef CEXEC_TEST_ALGO_HELPERS_H
#define CEXEC_TEST_ALGO_HELPERS_H

#include <stdint.h>

#include "common/helpers.h"

/* Elements per tile of the typed scans and reductions (128 KiB). */
#define ALGO_TILE ((size_t)16384)
/* Elements per tile of a generic form on elem_size-byte elements. */
#define ALGO_GTILE(elem_size) ((size_t)131072 / (elem_size) ? (size_t)131072 / (elem_size) : 1)
/* The large size: 256 tiles plus 3 elements. */
#define ALGO_HUGE (((size_t)1 << 22) + 3)

/* The sizes every algorithm is run at (ALGO_HUGE separately). */
extern const size_t algo_sizes[];
extern const size_t algo_nsizes;

/* -------------------------------------------------------------- schedulers */

typedef enum as_kind { AS_INLINE, AS_RUN_LOOP, AS_STC, AS_POOL1, AS_POOL2, AS_POOL4, AS_COUNT } as_kind;

/* One scheduler and what it needs.  Must not be copied after as_init. */
typedef struct algo_sched {
    as_kind kind;
    const char *name;
    ex_scheduler sch;
    ex_pool *pool;               /* AS_POOL* */
    ex_run_loop loop;            /* AS_RUN_LOOP: driven by the waiting thread */
    ex_single_thread_context stc;
} algo_sched;

void as_init(algo_sched *a, as_kind k);
void as_fini(algo_sched *a);
ex_pool *algo_pool_new(unsigned threads);

/* Connects s to r (arec_init'ed by the caller, arec_with_stop if wanted)
 * in allocated storage, starts it, waits (bounded; drives the run_loop)
 * until r completed, checks it completed exactly once, frees the
 * operation.  Does not release s. */
void as_run(algo_sched *a, const ex_sender *s, arec *r);
/* The same, with a fresh receiver; returns its result in *r. */
void as_run_plain(algo_sched *a, const ex_sender *s, arec *r);
/* Waits (bounded) until r completed; drives loop when not NULL. */
bool algo_wait(arec *r, ex_run_loop *loop, double limit_s);

/* Asserts r completed once with set_value and nv values. */
void algo_expect_value(const arec *r, size_t nv, const char *what);
/* Asserts status EX_EINVAL whose message starts with "<builder>:"; runs
 * the sender through ex_sync_wait (EX_EINVAL again) and releases it. */
void algo_expect_einval(ex_sender *s, const char *builder, const char *what);

/* ------------------------------------------------------------------ inputs */

uint64_t algo_rand(uint64_t *state);
void fill_i64(int64_t *a, size_t n, uint64_t seed);            /* every 64-bit pattern */
void fill_f64_int(double *a, size_t n, uint64_t seed);         /* integers in [-1000, 1000] */
void fill_f64_mixed(double *a, size_t n, uint64_t seed);       /* signs mixed, magnitudes 2^-30 .. 2^30 */

/* Checked malloc (not the test allocator: the arrays are the test's). */
void *xmalloc(size_t bytes);

/* -------------------------------------------------------------- references */

/* Serial scans in wrapping arithmetic; return the total (init + sum). */
int64_t ref_scan_i64(const int64_t *in, int64_t *out, size_t n, bool exclusive, int64_t init);
int64_t ref_sum_i64(const int64_t *in, size_t n, int64_t init);
/* Serial left-to-right double loops (exact on integer inputs). */
double ref_scan_f64(const double *in, double *out, size_t n, bool exclusive, double init);
double ref_sum_f64(const double *in, size_t n, double init);

/* The documented first-order error bounds (algorithms.h, docs/algorithms.md):
 * a scan output in tile k is within (ALGO_SCAN_BOUND + k) u sum|x|, a
 * reduction over t tiles within (ALGO_REDUCE_BOUND + t) u sum|x|, u = 2^-53,
 * the sums of |x| taken over the terms of that output. */
#define ALGO_SCAN_BOUND ((size_t)3080)
#define ALGO_REDUCE_BOUND ((size_t)1029)

/* Checks a double scan against the bound with a compensated long double
 * reference, every element and the total (at the last tile's k).  Returns
 * the first failing index (n for the total), or SIZE_MAX; *err_ratio gets
 * the largest error / bound seen. */
size_t check_f64_scan_bound(const double *in, const double *out, size_t n, bool exclusive, double init, double total,
                            double *err_ratio);
/* The same for a reduction init + in[0..n). */
bool check_f64_sum_bound(const double *in, size_t n, double init, double got, double *err_ratio);

/* Index of the first differing element, or SIZE_MAX. */
size_t first_diff_i64(const int64_t *a, const int64_t *b, size_t n);
size_t first_diff_f64(const double *a, const double *b, size_t n);   /* bitwise */

/* ---------------------------------------------------------------- monoids */

/* 2x2 matrices over Z/2^64 under multiplication (non-commutative). */
typedef struct m22 { uint64_t a, b, c, d; } m22;
extern const m22 m22_identity;
void m22_combine(void *ctx, void *acc, const void *x);
void fill_m22(m22 *a, size_t n, uint64_t seed);

/* 200 bytes: 12 affine maps over Z/2^64 composed lane by lane, and a sum. */
typedef struct aff200 {
    struct { uint64_t a, b; } f[12];
    uint64_t sum;
} aff200;
extern const aff200 aff200_identity;
void aff200_combine(void *ctx, void *acc, const void *x);
void fill_aff200(aff200 *a, size_t n, uint64_t seed);

/* 1 byte: an affine map over Z/16 (high nibble a, odd; low nibble b). */
extern const uint8_t aff8_identity;
void aff8_combine(void *ctx, void *acc, const void *x);
void fill_aff8(uint8_t *a, size_t n, uint64_t seed);

/* EX_MONOID_MAX_SIZE bytes: a matrix and 508 summed words. */
typedef struct big4k { m22 m; uint64_t v[508]; } big4k;
extern const big4k big4k_identity;
void big4k_combine(void *ctx, void *acc, const void *x);
void fill_big4k(big4k *a, size_t n, uint64_t seed);

/* The serial fold: out[i] = in[0] (+) .. (+) in[i] (inclusive), or
 * init (+) in[0] (+) .. (+) in[i-1] (exclusive); out may be NULL; the
 * total goes to *total when not NULL. */
void ref_fold(const ex_monoid *m, const void *in, void *out, size_t n, bool exclusive, const void *init, void *total);

/* -------------------------------------------------- stop during a run */

/* A uint64 sum whose combine, on meeting ALGO_STOP_MARK (place it in tile
 * 0), requests stop itself (external == false: a single agent) or waits
 * until algo_stopper_main on another thread did (pools). */
#define ALGO_STOP_MARK 0x7fff000000000001ull

typedef struct algo_stop_ctx {
    ex_stop_source *src;
    bool external;
    atomic_int reached, requested, timed_out;  /* timed_out: the request never came */
    atomic_long calls;                          /* combine calls */
} algo_stop_ctx;

void algo_stop_ctx_init(algo_stop_ctx *c, ex_stop_source *src, bool external);
void algo_stop_combine(void *ctx, void *acc, const void *x);
/* pthread entry: waits for the mark, then requests stop (bounded wait). */
void *algo_stopper_main(void *ctx);

#endif
