/* local_fixtures.h - what the test files of tests/algorithms/ share beyond
 * common/algo_helpers.h: the scan builders by kind, running a generic scan,
 * a summing monoid that checks its ctx, and byte-wise comparison. */
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

#endif
