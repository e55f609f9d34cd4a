/* SPDX-License-Identifier: MIT */
/* mpi_scan.c - a distributed inclusive scan of doubles
 * (build: make mpi-examples; run: mpiexec -n 4 build/mpi/examples/mpi_scan [N]).
 *
 * Each rank holds N doubles (argv[1], default 1000000) of one global
 * array, the ranks' arrays in rank order, and runs
 * ex_mpi_inclusive_scan_f64 on its own pool: the rank's total on the
 * pool, MPI_Iexscan of the totals, the local scan from the rank's offset
 * (cexec/mpi_algorithms.h).  Rank 0 then gathers every input and output
 * and checks them against a serial scan of the whole array: the inputs
 * are small integers, so every sum is exact and the two must agree bit
 * for bit.  Prints the global total, the time (the slowest rank's) and
 * the aggregate bandwidth. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cexec/cexec.h>
#include <cexec/mpi.h>
#include <cexec/mpi_algorithms.h>

/* Element i of rank r: an integer in 0..9 (exact sums). */
static double input_at(int r, size_t i) { return (double)((i * 7 + (size_t)r * 3) % 10); }

/* The scan of n doubles per rank on this rank's pool; *seconds gets its
 * time.  Returns the completion's value (the sum through this rank). */
static int run_scan(ex_mpi_progress *p, ex_scheduler sch, const double *in, double *out, size_t n, double *total,
                    double *seconds) {
    MPI_Barrier(MPI_COMM_WORLD);  /* everyone starts together */
    double t0 = MPI_Wtime();
    ex_result r = ex_sync_wait(ex_mpi_inclusive_scan_f64(p, sch, MPI_COMM_WORLD, in, out, n));
    *seconds = MPI_Wtime() - t0;
    int ok = r.disposition == EX_DISP_VALUE;
    if (ok) *total = r.values[0].as.d;
    else fprintf(stderr, "mpi_scan: %s\n", r.disposition == EX_DISP_ERROR ? r.error.msg : "stopped");
    ex_result_destroy(&r);
    return ok;
}

/* Rank 0: a serial scan of every rank's input, compared with every rank's
 * output.  Returns the number of elements that differ. */
static size_t check_on_root(const double *all_in, const double *all_out, size_t total_n) {
    double acc = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < total_n; i++) {
        acc += all_in[i];
        if (all_out[i] != acc) {
            if (!bad) fprintf(stderr, "mpi_scan: element %zu is %.17g, the serial scan gives %.17g\n", i, all_out[i], acc);
            bad++;
        }
    }
    return bad;
}

int main(int argc, char **argv) {
    ex_error e = ex_mpi_init(&argc, &argv);
    if (e.code) {
        fprintf(stderr, "mpi_scan: %s\n", e.msg);
        return 1;
    }
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    /* The check gathers everything on rank 0 in one MPI_Gather (int counts). */
    if (n * (size_t)nranks > (size_t)1 << 30) {
        if (rank == 0) fprintf(stderr, "mpi_scan: N x ranks is too large for the check (max 2^30)\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    ex_pool *pool = NULL;
    ex_mpi_progress *engine = NULL;
    ex_pool_config cfg = { 0 };
    cfg.threads = 1;  /* one worker a rank: ranks share the machine's cores */
    e = ex_pool_create(&cfg, &pool);
    if (!e.code) e = ex_mpi_progress_create(ex_pool_scheduler(pool), &engine);
    double *in = malloc(n * sizeof *in + 1), *out = malloc(n * sizeof *out + 1);
    if (e.code || !in || !out) {
        fprintf(stderr, "mpi_scan rank %d: setup: %s\n", rank, e.code ? e.msg : "out of memory");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < n; i++) in[i] = input_at(rank, i);
    memset(out, 0, n * sizeof *out);  /* page faults outside the timing */

    /* A first run warms the pool and MPI's connections; the second is timed. */
    double total = 0, seconds = 0, slowest = 0;
    int ok = run_scan(engine, ex_pool_scheduler(pool), in, out, n, &total, &seconds);
    memset(out, 0, n * sizeof *out);
    ok &= run_scan(engine, ex_pool_scheduler(pool), in, out, n, &total, &seconds);
    MPI_Reduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    size_t total_n = n * (size_t)nranks;
    double *all_in = NULL, *all_out = NULL;
    if (rank == 0) {
        all_in = malloc(total_n * sizeof *all_in + 1);
        all_out = malloc(total_n * sizeof *all_out + 1);
        if (!all_in || !all_out) MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Gather(in, (int)n, MPI_DOUBLE, all_in, (int)n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Gather(out, (int)n, MPI_DOUBLE, all_out, (int)n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == nranks - 1) printf("mpi_scan: global total %.17g (the last rank's completion value)\n", total);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        size_t bad = all_ok ? check_on_root(all_in, all_out, total_n) : total_n;
        all_ok = bad == 0;
        printf("mpi_scan: %zu doubles per rank x %d rank%s in %.2f ms (%.1f GB/s read + written): %s\n", n, nranks,
               nranks > 1 ? "s" : "", slowest * 1e3, slowest > 0 ? (double)total_n * 16 / slowest / 1e9 : 0.0,
               all_ok ? "matches the serial scan" : "WRONG");
        free(all_in), free(all_out);
    }
    MPI_Bcast(&all_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(in), free(out);
    (void)ex_mpi_progress_destroy(engine);
    (void)ex_pool_destroy(pool);
    (void)ex_mpi_finalize();
    return all_ok ? 0 : 1;
}
