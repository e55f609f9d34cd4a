/* SPDX-License-Identifier: MIT */
/* inclusive_scan.c - P2300 §1.3.2, "Asynchronous inclusive scan", in C:
 *
 *   just(partials) | continues_on(sch)
 *     | bulk(tile_count, scan each tile, record its last value)
 *     | then(scan the tile totals)
 *     | bulk(tile_count, add the preceding tiles' total to each tile)
 *     | then(return the output)
 *
 * on the process's parallel scheduler (get_parallel_scheduler, P2079),
 * checked against a serial scan.  The inputs are
 * small integers held in doubles, so every partial sum is exact and the two
 * results must be equal bit for bit.
 *
 *   build/examples/inclusive_scan [elements] [tiles]     (default 10000000, 4 * workers) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cexec/cexec.h>

typedef struct scan_ctx {
    const double *input;
    double *output;
    size_t size, tile_size;
} scan_ctx;

/* 7-9: scan one tile, remember its last value in partials[i + 1]. */
static ex_error scan_tile(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)n;
    const scan_ctx *c = ctx;
    double *partials = v[0].as.p;
    size_t start = i * c->tile_size, end = start + c->tile_size;
    if (end > c->size) end = c->size;
    double acc = 0;
    for (size_t k = start; k < end; k++) c->output[k] = acc += c->input[k];
    partials[i + 1] = acc;
    return ex_ok();
}

/* 11-13: scan the partials; the sender's value (the buffer) goes on. */
static ex_error scan_partials(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    size_t tiles = *(const size_t *)ctx;
    double *partials = in[0].as.p;
    for (size_t k = 1; k <= tiles; k++) partials[k] += partials[k - 1];
    out[0] = in[0];
    return ex_ok();
}

/* 14: add the total of the preceding tiles to every element of tile i. */
static ex_error fix_tile(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)n;
    const scan_ctx *c = ctx;
    const double *partials = v[0].as.p;
    size_t start = i * c->tile_size, end = start + c->tile_size;
    if (end > c->size) end = c->size;
    double add = partials[i];
    for (size_t k = start; k < end; k++) c->output[k] += add;
    return ex_ok();
}

/* 15: the result is the output buffer. */
static ex_error return_output(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    out[0] = ex_ptr(((scan_ctx *)ctx)->output);
    return ex_ok();
}

/* ---- The same pipeline with reduce-then-scan bodies --------------------
 * The paper's bodies touch memory four times per element (read input,
 * write output, then read and write output again); for arrays larger than
 * the caches that makes the scan memory-bound at twice the traffic of a
 * serial scan.  Swapping the bodies and keeping the pipeline: the first
 * bulk only sums each tile (read), the second scans each tile starting from
 * the preceding tiles' total (read + write).  Three touches per element, as
 * tbb::parallel_scan makes. */

static ex_error sum_tile(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)n;
    const scan_ctx *c = ctx;
    double *partials = v[0].as.p;
    size_t start = i * c->tile_size, end = start + c->tile_size;
    if (end > c->size) end = c->size;
    /* Four independent accumulators break the add-latency chain; the tile
     * total is only a partial sum, so the reassociation is harmless for
     * exact (integer-valued) data and within rounding otherwise. */
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    size_t k = start;
    for (; k + 4 <= end; k += 4) {
        a0 += c->input[k];
        a1 += c->input[k + 1];
        a2 += c->input[k + 2];
        a3 += c->input[k + 3];
    }
    for (; k < end; k++) a0 += c->input[k];
    partials[i + 1] = (a0 + a1) + (a2 + a3);
    return ex_ok();
}

static ex_error scan_tile_from(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)n;
    const scan_ctx *c = ctx;
    const double *partials = v[0].as.p;
    size_t start = i * c->tile_size, end = start + c->tile_size;
    if (end > c->size) end = c->size;
    double acc = partials[i];
    for (size_t k = start; k < end; k++) c->output[k] = acc += c->input[k];
    return ex_ok();
}

ex_sender *async_inclusive_scan_rts(ex_scheduler sch, scan_ctx *ctx, double *partials, double init, size_t *tile_count);
ex_sender *async_inclusive_scan_rts(ex_scheduler sch, scan_ctx *ctx, double *partials, double init,
                                    size_t *tile_count) {
    ctx->tile_size = (ctx->size + *tile_count - 1) / *tile_count;
    partials[0] = init;
    ex_sender *s = ex_continues_on(ex_just(ex_ptr(partials)), sch);
    s = ex_bulk(s, EX_PAR, *tile_count, sum_tile, ctx);
    s = ex_then(s, scan_partials, tile_count, EX_SIG(EX_T_PTR), EX_SIG(EX_T_PTR));
    s = ex_bulk(s, EX_PAR, *tile_count, scan_tile_from, ctx);
    return ex_then(s, return_output, ctx, EX_SIG(EX_T_PTR), EX_SIG(EX_T_PTR));
}

/* The sender of the scan.  partials has tile_count + 1 slots; ctx and
 * tile_count must outlive the operation.  (Not static: bench/ measures this
 * very pipeline, compiling this file with -DCEXEC_EXAMPLE_NO_MAIN.) */
ex_sender *async_inclusive_scan(ex_scheduler sch, scan_ctx *ctx, double *partials, double init, size_t *tile_count);
ex_sender *async_inclusive_scan(ex_scheduler sch, scan_ctx *ctx, double *partials, double init,
                                       size_t *tile_count) {
    ctx->tile_size = (ctx->size + *tile_count - 1) / *tile_count;
    partials[0] = init;
    ex_sender *s = ex_continues_on(ex_just(ex_ptr(partials)), sch);
    s = ex_bulk(s, EX_PAR, *tile_count, scan_tile, ctx);
    s = ex_then(s, scan_partials, tile_count, EX_SIG(EX_T_PTR), EX_SIG(EX_T_PTR));
    s = ex_bulk(s, EX_PAR, *tile_count, fix_tile, ctx);
    return ex_then(s, return_output, ctx, EX_SIG(EX_T_PTR), EX_SIG(EX_T_PTR));
}

#ifndef CEXEC_EXAMPLE_NO_MAIN
static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t size = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
    ex_scheduler sch = ex_parallel_scheduler();
    unsigned workers = ex_default_thread_count();  /* the parallel scheduler's pool size */
    size_t tiles = argc > 2 ? strtoull(argv[2], NULL, 10) : 4 * workers;
    if (tiles == 0) tiles = 1;
    double *input = malloc(size * sizeof *input), *output = malloc(size * sizeof *output);
    double *expected = malloc(size * sizeof *expected), *partials = malloc((tiles + 1) * sizeof *partials);
    if ((size && (!input || !output || !expected)) || !partials) {
        fprintf(stderr, "inclusive_scan: out of memory\n");
        return 1;
    }
    unsigned seed = 12345;
    for (size_t i = 0; i < size; i++) {
        seed = seed * 1103515245u + 12345u;
        input[i] = (double)((seed >> 16) % 10);
    }
    double init = 1.0;

    double t0 = seconds();
    double acc = init;
    for (size_t i = 0; i < size; i++) expected[i] = acc += input[i];
    double serial = seconds() - t0;

    scan_ctx ctx = { input, output, size, 0 };
    t0 = seconds();
    ex_result r = ex_sync_wait(async_inclusive_scan(sch, &ctx, partials, init, &tiles));
    double parallel = seconds() - t0;

    bool p2300_ok = r.disposition == EX_DISP_VALUE && r.values[0].as.p == output;
    for (size_t i = 0; p2300_ok && i < size; i++) p2300_ok = output[i] == expected[i];

    /* The reduce-then-scan variant on the same data. */
    for (size_t i = 0; i < size; i++) output[i] = -1;
    t0 = seconds();
    ex_result r2 = ex_sync_wait(async_inclusive_scan_rts(sch, &ctx, partials, init, &tiles));
    double rts = seconds() - t0;
    bool rts_ok = r2.disposition == EX_DISP_VALUE;
    for (size_t i = 0; rts_ok && i < size; i++) rts_ok = output[i] == expected[i];
    ex_result_destroy(&r2);

    int status = rts_ok ? 0 : 1;
    if (!rts_ok) fprintf(stderr, "inclusive_scan: the reduce-then-scan variant differs from the serial scan\n");
    if (!p2300_ok) {
        fprintf(stderr, "inclusive_scan: the P2300 scan failed (%s) or differs from the serial scan\n",
                r.disposition == EX_DISP_ERROR ? r.error.msg : r.disposition == EX_DISP_STOPPED ? "stopped" : "value");
        status = 1;
    }
    if (!status)
        printf("inclusive_scan: %zu doubles, %zu tiles, %u workers: serial %.2f ms, P2300 sender scan %.2f ms, "
               "same pipeline with reduce-then-scan bodies %.2f ms (single runs; see make bench) - results equal\n",
               size, tiles, workers, serial * 1e3, parallel * 1e3, rts * 1e3);
    ex_result_destroy(&r);
    free(input), free(output), free(expected), free(partials);
    return status;
}
#endif
