/* SPDX-License-Identifier: MIT */
/* cexec/algorithms.h - parallel algorithms as senders: inclusive and
 * exclusive scan, reduce, for_each_index, transform.
 *
 * Each builder returns a sender that, when started, runs the algorithm on
 * `sch`: on an ex_pool every worker takes part (through the pool's bulk
 * customisation), and so on the process's ex_parallel_scheduler(), whatever
 * its backend; on a scheduler without a parallel bulk (inline, run_loop,
 * single_thread_context) one agent of sch runs it all.  The work starts
 * with a schedule onto sch, so the sender may be started from any thread.
 *
 * Work is cut into tiles of a fixed number of elements (128 KiB of data for
 * the scans and reductions, so a tile read once from memory is still in the
 * core's L2 cache when it is read again) that the agents claim in order
 * from a shared counter: a worker that is slowed down simply claims fewer
 * tiles.  The scans and reductions make one pass over memory: each tile is
 * reduced, its prefix is chained from the previous tile's, and it is
 * scanned from cache (docs/algorithms.md).  Outputs larger than the
 * last-level cache are written with non-temporal stores.  Inputs of one
 * tile run on one agent: small inputs do not pay for waking the pool.
 *
 * Results.  int64 scans and reductions are exact; overflow wraps (two's
 * complement), never undefined.  double results follow a fixed order of
 * operations that depends only on n (not on the scheduler, the number of
 * workers or timing), so the same input always gives bit-identical
 * results.  They differ from a left-to-right serial loop by rounding only,
 * with a smaller worst case: each sum carries an error of at most
 * (3080 + k) * u * sum(|x|) to first order (u = 2^-53, k = the tile index
 * of the element), against i * u * sum(|x|) for the serial loop at element
 * i (docs/algorithms.md derives it).  Sums of integers below 2^53 in
 * magnitude are exact either way.
 *
 * Completion.  Values: see each builder.  Errors: EX_ENOMEM when the
 * operation cannot allocate (only the generic forms allocate: scratch of a
 * few elements per worker), errors of the scheduler's schedule (e.g.
 * EX_ESHUTDOWN for a pool being shut down), the first error returned by an
 * ex_for_each_index function.  set_stopped when a stop request from the
 * receiver's environment is seen between tiles and some tile did not run
 * (the output is then partially written; a request that comes after every
 * tile has run does not discard the result).  Completion runs on an agent
 * of sch (the one that finished last).
 *
 * Arguments.  Builders never return NULL: a bad argument (invalid
 * scheduler, NULL array with n > 0, NULL function, element size 0) gives an
 * invalid sender carrying EX_EINVAL.  Arrays are borrowed: they must stay
 * valid, and must not be written by anyone else, until the operation
 * completes.  `in` and `out` may be the same array (in place; for
 * ex_transform only when in_size == out_size) but must not otherwise
 * overlap (EX_EINVAL).  The senders are multi-shot; concurrent runs of one
 * sender write the same output. */
#ifndef CEXEC_ALGORITHMS_H
#define CEXEC_ALGORITHMS_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An associative operation with its identity, on elements of `size` bytes.
 * combine(ctx, acc, x) sets *acc = *acc (+) *x; it may run concurrently on
 * several threads (on different acc) and must not fail.  (+) need not be
 * commutative: the algorithms only re-associate.  The builders copy the
 * struct and the identity bytes. */
typedef struct ex_monoid {
    size_t size;              /* element size in bytes, 1 .. EX_MONOID_MAX_SIZE */
    const void *identity;     /* size bytes: e (+) x == x (+) e == x */
    void (*combine)(void *ctx, void *acc, const void *x);
    void *ctx;
} ex_monoid;

#define EX_MONOID_MAX_SIZE 4096

/* ------------------------------------------------------------------ scans */

/* out[i] = in[0] + ... + in[i].  Completes with set_value(double total): the
 * sum of all elements, equal to out[n-1] (0.0 when n == 0). */
ex_sender *ex_inclusive_scan_f64(ex_scheduler sch, const double *in, double *out, size_t n);

/* out[i] = init + in[0] + ... + in[i]: an inclusive scan that starts from
 * init (std::inclusive_scan's form with an initial value; a distributed
 * scan passes its rank's offset here, cexec/mpi_algorithms.h).  init is
 * tile 0's carry, so the cost and the order of operations are those of
 * ex_inclusive_scan_f64 (whose carry is -0.0).  Completes with
 * set_value(double total): init plus the sum of all elements (init when
 * n == 0). */
ex_sender *ex_inclusive_scan_init_f64(ex_scheduler sch, const double *in, double *out, size_t n, double init);

/* out[i] = init + in[0] + ... + in[i-1] (out[0] = init).  Completes with
 * set_value(double total): init plus the sum of all elements. */
ex_sender *ex_exclusive_scan_f64(ex_scheduler sch, const double *in, double *out, size_t n, double init);

/* The same on int64_t (exact, wrapping).  Values: EX_T_INT. */
ex_sender *ex_inclusive_scan_i64(ex_scheduler sch, const int64_t *in, int64_t *out, size_t n);
ex_sender *ex_inclusive_scan_init_i64(ex_scheduler sch, const int64_t *in, int64_t *out, size_t n, int64_t init);
ex_sender *ex_exclusive_scan_i64(ex_scheduler sch, const int64_t *in, int64_t *out, size_t n, int64_t init);

/* Generic forms on m's elements: out[i] = in[0] (+) ... (+) in[i];
 * out[i] = init (+) in[0] (+) ... (+) in[i] (ex_inclusive_scan_init); and
 * out[i] = init (+) in[0] (+) ... (+) in[i-1] (init: m->size bytes, copied).
 * Complete with set_value() (no values). */
ex_sender *ex_inclusive_scan(ex_scheduler sch, const ex_monoid *m, const void *in, void *out, size_t n);
ex_sender *ex_inclusive_scan_init(ex_scheduler sch, const ex_monoid *m, const void *in, void *out, size_t n,
                                  const void *init);
ex_sender *ex_exclusive_scan(ex_scheduler sch, const ex_monoid *m, const void *in, void *out, size_t n,
                             const void *init);

/* ------------------------------------------------------------- reductions */

/* init + in[0] + ... + in[n-1].  Completes with set_value(double). */
ex_sender *ex_reduce_f64(ex_scheduler sch, const double *in, size_t n, double init);

/* Exact, wrapping.  Completes with set_value(int64). */
ex_sender *ex_reduce_i64(ex_scheduler sch, const int64_t *in, size_t n, int64_t init);

/* Writes in[0] (+) ... (+) in[n-1] (the identity when n == 0) to `result`
 * (m->size bytes, borrowed like the arrays) and completes with
 * set_value(ptr result). */
ex_sender *ex_reduce(ex_scheduler sch, const ex_monoid *m, const void *in, size_t n, void *result);

/* ----------------------------------------------------- loops over indices */

/* Called with disjoint ranges [begin, end) that together cover [0, n), from
 * several threads at once.  Return ex_ok(), or an error (handed over,
 * cexec/error.h): the first error becomes the result and no further range
 * starts; later ones are released. */
typedef ex_error (*ex_index_range_fn)(void *ctx, size_t begin, size_t end);

/* Runs fn over [0, n) in ranges of `grain` indices (0: about 16 ranges per
 * worker, at least 1 index each).  Completes with set_value(). */
ex_sender *ex_for_each_index(ex_scheduler sch, size_t n, size_t grain, ex_index_range_fn fn, void *ctx);

/* y = f(x) for one element (in_size and out_size bytes).  Must not fail. */
typedef void (*ex_transform_fn)(void *ctx, const void *x, void *y);

/* out[i] = fn(in[i]) for every i < n.  Completes with set_value(). */
ex_sender *ex_transform(ex_scheduler sch, const void *in, size_t in_size, void *out, size_t out_size, size_t n,
                        ex_transform_fn fn, void *ctx);

/* The double form: out[i] = fn(ctx, in[i]).  Completes with set_value(). */
ex_sender *ex_transform_f64(ex_scheduler sch, const double *in, double *out, size_t n,
                            double (*fn)(void *ctx, double x), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
