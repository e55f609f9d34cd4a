/* SPDX-License-Identifier: MIT */
/* exi_kernels.h - the inner loops of the parallel algorithms. Internal.
 *
 * Every kernel computes one fixed sequence of IEEE operations that depends
 * only on the element indices (never on alignment, ISA or thread count), so
 * the algorithms give bit-identical results on every scheduler.  The
 * sequence (docs/algorithms.md):
 *
 *   sum:  16 lane accumulators; element i goes to lane i % 16; a partial
 *         block is padded with the identity; the lanes are then combined as
 *         t[l] = (acc[l] + acc[l+4]) + (acc[l+8] + acc[l+12]) and
 *         result = (t0 + t2) + (t1 + t3).
 *   scan: blocks of 8 elements a0..a7 get an in-block prefix by a fixed
 *         two-step tree per half, the second half is offset by the first
 *         half's total, and out = carry + prefix; carry += block total.
 *         A partial block at the end runs the serial recurrence.
 *
 * The identity is -0.0 for doubles (x + -0.0 == x for every x, signed zeros
 * included) and 0 for integers.  Integer kernels work on uint64_t, so
 * overflow wraps (two's complement) instead of being undefined.
 *
 * x86-64 builds have an AVX2 copy of each kernel chosen at run time; the
 * baseline copy uses SSE2.  `stream` asks for non-temporal stores (the
 * output bypasses the caches: for outputs much larger than the last-level
 * cache); it is ignored unless out is 16-byte aligned. */
#ifndef EXI_KERNELS_H
#define EXI_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Sums n elements.  `prefetch` fetches each line 1 KiB ahead of the loads
 * into L1: for an input expected to come from the last-level cache (more
 * than a core's L2 holds), which otherwise arrives only as fast as the
 * hardware prefetchers bring it.  For an input already in L2 it costs
 * time (docs/algorithms.md, "Inner loops"). */
double exi_sum_f64(const double *in, size_t n, bool prefetch);
uint64_t exi_sum_u64(const uint64_t *in, size_t n, bool prefetch);

/* Inclusive (out[i] = carry + in[0..i]) or exclusive (out[i] = carry +
 * in[0..i-1]) scan of n elements starting from carry; returns carry plus
 * the whole block (the next block's carry).  in == out is allowed.  While
 * it computes, it prefetches the next tile [next, next + next_n) into L2
 * (its memory reads overlap this tile's arithmetic; next may be NULL) and,
 * if next_sum is not NULL, sums it into *next_sum, the same bits as
 * exi_sum_* gives (its adds use ports the scan's shuffles leave idle).
 * The next tile must not overlap [in, in + n) or [out, out + n). */
double exi_scan_f64(const double *in, double *out, size_t n, double carry, bool exclusive, bool stream,
                    const double *next, size_t next_n, double *next_sum);
uint64_t exi_scan_u64(const uint64_t *in, uint64_t *out, size_t n, uint64_t carry, bool exclusive, bool stream,
                      const uint64_t *next, size_t next_n, uint64_t *next_sum);

/* Orders the non-temporal stores of this thread before what follows (a
 * release store publishing the output).  No-op where stores are ordered. */
void exi_stream_fence(void);

/* Bytes above which an output is written with non-temporal stores: the
 * last-level cache size (sysconf), or 8 MiB when unknown.  Cached. */
size_t exi_stream_threshold(void);

/* A core's own cache: the L2 size (sysconf), or 1 MiB when unknown.
 * Cached. */
size_t exi_core_cache_bytes(void);

#endif
