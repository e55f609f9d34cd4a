/* SPDX-License-Identifier: MIT */
/* cexec/mpi_algorithms.h - distributed scans and reductions over the ranks
 * of an MPI communicator, as senders (part of libcexec_mpi: `make mpi`;
 * docs/mpi.md, "Distributed algorithms").
 *
 * The global array is the concatenation, in rank order, of every rank's
 * local array (`in`, n elements; n may differ between ranks, be 0, and
 * exceed INT_MAX: only one element per rank goes through MPI).  Each rank
 * starts the same builder's sender on its own array; each rank's sender
 * writes that rank's part of the result.  The shapes are those of
 * cexec/algorithms.h, with the engine, the scheduler and the communicator
 * in front.
 *
 * A run is three steps:
 *  1. the rank's total, ex_reduce_* over its array on sch (one read);
 *  2. one collective on the totals, through p (ex_mpi_iexscan for the
 *     scans, ex_mpi_ireduce, ex_mpi_iallreduce);
 *  3. for the scans, the local scan on sch starting from the rank's
 *     offset, the totals of the ranks before it
 *     (ex_inclusive_scan_init_*, ex_exclusive_scan_*: one read, one write).
 * So a scan reads its input twice and writes its output once (its last
 * rank, whose total nobody needs, skips step 1; on one rank there is no
 * step 1 and no MPI call); a reduction reads it once.  The local steps
 * run on sch as the local algorithms do (every worker of a pool); the
 * collective's completion runs on p's scheduler (cexec/mpi.h).
 *
 * Results.  int64 results are exact (wrapping).  double results follow a
 * fixed order of operations: each rank's total and its local scan as in
 * cexec/algorithms.h (which depends only on that rank's n), the totals
 * combined by MPI in rank order (the reduction operation is created with
 * commute = 0), associated as the MPI implementation's algorithm does
 * for the communicator's size.  So for a given MPI, number of ranks and
 * elements per rank, the result is bit-identical on every run, scheduler
 * and worker count.  Rounding: an output of rank r in its local tile k is
 * within (4108 + k + K + r) * u * sum(|x|) of the exact prefix, to first
 * order (u = 2^-53, K the largest tile count of the ranks before r, the
 * sum over every element of the prefix; docs/mpi.md derives it), against
 * i * u * sum(|x|) for a serial loop at global index i.  The generic forms
 * apply m in rank order and only re-associate, so m need not be
 * commutative.
 *
 * Every rank joins the collective once per run, whatever its step 1 did:
 * a rank whose local pass failed or stopped sends a mark instead of its
 * total and then completes with that error or set_stopped, and a rank
 * whose result needs that total (a scan's later ranks, a reduction's
 * root, every rank of an allreduce) completes with EX_EIO instead of a
 * wrong result.  A rank that cannot build or connect its sender never
 * joins: as with any MPI collective, the other ranks then wait for it.
 *
 * Rules (as for MPI collectives): every rank of comm runs the same
 * builder with the same root, and the runs on one communicator must start
 * their collectives in the same order on every rank: do not run two of
 * these concurrently on one communicator (sequence them, or give each its
 * own communicator, MPI_Comm_dup).  comm must be MPI_ERRORS_RETURN for
 * MPI errors to become set_error (cexec/mpi.h, "Errors").
 *
 * Completion.  Values: see each builder.  Errors: those of the local
 * algorithms (EX_ENOMEM, EX_ESHUTDOWN, ...), EX_EIO for an MPI error or a
 * missing total (above), EX_ENOMEM when a step's operation cannot be
 * allocated (through the receiver environment's allocator).  set_stopped
 * when a local step stopped (a stop request from the receiver's
 * environment; the collective ignores stop requests).  Completion runs on
 * an agent of sch (scans) or of p's scheduler (reductions).
 *
 * Arguments.  Builders never return NULL: an invalid sender carrying
 * EX_EINVAL for a NULL p, an invalid sch, MPI_COMM_NULL, a NULL array
 * with n > 0, overlapping in and out (they may be the same array), a bad
 * monoid, a NULL init or result, a negative root; EX_ENOMEM if the sender
 * cannot be allocated.  A root that is not a rank of comm fails at
 * connect (EX_EINVAL).  Arrays, result and the monoid's ctx are borrowed
 * until the operation completes; the builders copy the monoid, its
 * identity and init.  The senders are multi-shot (one run at a time per
 * communicator, above). */
#ifndef CEXEC_MPI_ALGORITHMS_H
#define CEXEC_MPI_ALGORITHMS_H

#include <cexec/algorithms.h>
#include <cexec/mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ scans */

/* The inclusive scan of the global array: out[i] = every element of the
 * ranks before this one + in[0] + ... + in[i].  Completes with
 * set_value(double): the sum of the elements of ranks 0..this one (equal
 * to out[n-1] when n > 0). */
ex_sender *ex_mpi_inclusive_scan_f64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const double *in,
                                     double *out, size_t n);

/* The exclusive scan of the global array from init: rank 0's out[0] is
 * init, and out[i] = init + every element of the ranks before this one +
 * in[0] + ... + in[i-1].  Completes with set_value(double): init plus the
 * sum of the elements of ranks 0..this one. */
ex_sender *ex_mpi_exclusive_scan_f64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const double *in,
                                     double *out, size_t n, double init);

/* The same on int64_t (exact, wrapping).  Values: EX_T_INT. */
ex_sender *ex_mpi_inclusive_scan_i64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const int64_t *in,
                                     int64_t *out, size_t n);
ex_sender *ex_mpi_exclusive_scan_i64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const int64_t *in,
                                     int64_t *out, size_t n, int64_t init);

/* Generic forms on m's elements (m->size bytes; init copied), in rank
 * order: out[i] = (the ranks before) (+) in[0] (+) ... (+) in[i], and
 * out[i] = init (+) (the ranks before) (+) in[0] (+) ... (+) in[i-1].  The
 * elements travel between ranks as bytes (no representation conversion
 * between unlike machines).  m->combine also runs inside MPI, on whatever
 * thread MPI calls the reduction operation from, and must not call MPI.
 * Complete with set_value() (no values). */
ex_sender *ex_mpi_inclusive_scan(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const ex_monoid *m,
                                 const void *in, void *out, size_t n);
ex_sender *ex_mpi_exclusive_scan(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const ex_monoid *m,
                                 const void *in, void *out, size_t n, const void *init);

/* ------------------------------------------------------------- reductions */

/* init + every element of every rank (init added once, on rank 0), at
 * root.  Completes with set_value(double): on root the global sum, on the
 * other ranks what this rank contributed (its own elements' sum, plus
 * init on rank 0). */
ex_sender *ex_mpi_reduce_f64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const double *in, size_t n,
                             double init, int root);

/* The same on int64_t (exact, wrapping).  Values: EX_T_INT. */
ex_sender *ex_mpi_reduce_i64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const int64_t *in, size_t n,
                             int64_t init, int root);

/* Writes the reduction of every rank's elements in rank order (the
 * identity when there are none) to result on root, and this rank's own
 * reduction on the other ranks (result: m->size bytes, borrowed), then
 * completes with set_value(ptr result). */
ex_sender *ex_mpi_reduce(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const ex_monoid *m, const void *in,
                         size_t n, void *result, int root);

/* init + every element of every rank (init added once, on rank 0), on
 * every rank.  Completes with set_value(double), the same bits on every
 * rank where the MPI's allreduce gives every rank the same association
 * (MPICH does). */
ex_sender *ex_mpi_allreduce_f64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const double *in, size_t n,
                                double init);

/* The same on int64_t (exact, wrapping).  Values: EX_T_INT. */
ex_sender *ex_mpi_allreduce_i64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const int64_t *in, size_t n,
                                int64_t init);

/* The reduction of every rank's elements in rank order, written to result
 * (m->size bytes, borrowed) on every rank; completes with
 * set_value(ptr result). */
ex_sender *ex_mpi_allreduce(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const ex_monoid *m, const void *in,
                            size_t n, void *result);

#ifdef __cplusplus
}
#endif
#endif
