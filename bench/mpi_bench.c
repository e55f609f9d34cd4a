/* SPDX-License-Identifier: MIT */
/* mpi_bench.c - `make bench-mpi`: the distributed scan and the sender
 * round trip of <cexec/mpi.h>, against MPI written the usual way.
 *
 * One `mpiexec -n 4` run (MPI_BENCH_NP) measures every configuration:
 * each uses the first k ranks of MPI_COMM_WORLD (k = 1, 2, 4, a
 * communicator of their own) while the others wait, polling a
 * nonblocking barrier every millisecond, so they cost no CPU.  Every rank
 * has a pool of one worker.
 *
 *  scan   inclusive scan of doubles, weak scaling (a fixed number of
 *         elements per rank) and strong scaling (a fixed total):
 *           cexec-mpi      ex_mpi_inclusive_scan_f64 (cexec/mpi_algorithms.h)
 *           mpi-baseline   a serial loop, blocking MPI_Exscan of the totals,
 *                          a loop adding the offset (the usual way)
 *           cexec-1proc    ex_inclusive_scan_f64 in one process on a pool
 *                          of 2 workers over the same total (rank 0 alone)
 *           step1-alone    the distributed scan's first step by itself:
 *                          ex_reduce_f64 of rank 0's part on its one
 *                          worker (GB/s read), what the last rank waits
 *                          for before it can write (docs/mpi.md)
 *         One run of each in turn, `runs` times after a warm-up; a run
 *         starts after a barrier and its time is the slowest rank's.  The
 *         arrays are made once per rank and shared by every
 *         configuration.  Aggregate GB/s counts 16 bytes per element
 *         (read + written).  Each one's warm-up output is checked (inputs
 *         are small integers: exact).
 *  rt     round trip of a 0-byte message between ranks 0 and 1: each
 *         iteration every rank posts a receive from and a send to the
 *         other and waits for both, through senders (ex_sync_wait on
 *         ex_when_all of ex_mpi_irecv and ex_mpi_isend) or raw
 *         (MPI_Irecv, MPI_Isend, MPI_Waitall); rank 0's time per
 *         iteration, median of all iterations.  A third row,
 *         "composition", times the same ex_sync_wait(ex_when_all(...))
 *         of two ex_just() on rank 0, with no MPI in it: what the
 *         sender round trip pays whatever its children do.
 *
 * Knobs (environment): CEXEC_MPI_BENCH_RUNS (7), CEXEC_MPI_BENCH_WEAK
 * (elements per rank, 5e7), CEXEC_MPI_BENCH_STRONG (total, 1e8),
 * CEXEC_MPI_BENCH_RANKS ("1 2 4", each at most the world's size),
 * CEXEC_MPI_BENCH_RT_ITERS (20000), CEXEC_MPI_BENCH_ONLY ("scan" or "rt").
 * Prints a table with ratios (x = the other's median time / this one's)
 * and writes bench/results/mpi-bench-<time>.csv. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <cexec/cexec.h>
#include <cexec/mpi.h>
#include <cexec/mpi_algorithms.h>

static int wrank, wsize, runs;
static ex_pool *pool;
static ex_mpi_progress *engine;

static void must(int ok, const char *what) {
    if (ok) return;
    fprintf(stderr, "mpi_bench rank %d: %s\n", wrank, what);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static double env_num(const char *name, double dflt) {
    const char *v = getenv(name);
    return v && *v ? strtod(v, NULL) : dflt;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ------------------------------------------------------------------ rows */

typedef struct row {
    char group[8], name[48], impl[16];
    int ranks, runs;
    double size, median_s, min_s, max_s, metric;
    const char *unit;
} row;

static row rows[64];
static int nrows;

/* Records n samples (sorted here) as a row: median, min, max. */
static row *record(const char *group, const char *name, const char *impl, int ranks, double size, double *t, int n,
                   double metric_per_s, const char *unit) {
    must(nrows < 64, "too many rows");
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    row *r = &rows[nrows++];
    snprintf(r->group, sizeof r->group, "%s", group);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->impl, sizeof r->impl, "%s", impl);
    r->ranks = ranks, r->runs = n, r->size = size, r->unit = unit;
    r->median_s = t[n / 2], r->min_s = t[0], r->max_s = t[n - 1];
    r->metric = metric_per_s > 0 ? metric_per_s / r->median_s : r->median_s * 1e9;
    return r;
}

/* The row of name by impl; ranks 0: any number of ranks. */
static const row *find(const char *name, const char *impl, int ranks) {
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].name, name) && !strcmp(rows[i].impl, impl) && (!ranks || rows[i].ranks == ranks))
            return &rows[i];
    return NULL;
}

/* ------------------------------------------------------- waiting politely */

/* Waits for req, sleeping `ns` between tests: a blocking MPI call spins,
 * and on an oversubscribed machine a rank that spins takes the core of
 * a rank still being measured. */
static void wait_politely(MPI_Request *req, long ns) {
    for (int done = 0;;) {
        MPI_Test(req, &done, MPI_STATUS_IGNORE);
        if (done) return;
        struct timespec ts = { 0, ns };
        nanosleep(&ts, NULL);
    }
}

/* Every world rank meets here (the ranks not measured wait here). */
static void meet(void) {
    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    wait_politely(&req, 1000000);
}

/* The first k ranks' communicator (MPI_COMM_NULL elsewhere). */
static MPI_Comm first_ranks(int k) {
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, wrank < k ? 0 : MPI_UNDEFINED, wrank, &c);
    return c;
}

/* ------------------------------------------------------------------ scans */

/* Element g of the global array, and the inclusive scan at g, exactly. */
static double input_at(size_t g) { return (double)(g % 10); }
static double prefix_at(size_t g) {
    size_t m = g + 1, r = m % 10;
    return (double)(45 * (m / 10) + r * (r - 1) / 2);
}

typedef struct scan_job {
    MPI_Comm comm;
    ex_scheduler sch;
    double *in, *out;
    size_t n, first;  /* this rank's elements and its first global index */
} scan_job;

static void run_cexec(scan_job *j) {
    ex_result r = ex_sync_wait(ex_mpi_inclusive_scan_f64(engine, j->sch, j->comm, j->in, j->out, j->n));
    must(r.disposition == EX_DISP_VALUE, r.disposition == EX_DISP_ERROR ? r.error.msg : "scan stopped");
    ex_result_destroy(&r);
}

/* The serial loop, on its own: an accumulator whose address is taken
 * (by MPI_Exscan below) may alias the stores to out, and gcc then keeps
 * it in memory: 4 times slower. */
static double __attribute__((noinline)) serial_scan(const double *in, double *out, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) {
        acc += in[i];
        out[i] = acc;
    }
    return acc;
}

/* The usual way: serial scan, blocking MPI_Exscan, offset loop. */
static void run_baseline(scan_job *j) {
    double total = serial_scan(j->in, j->out, j->n), offset = 0.0;
    int me;
    MPI_Comm_rank(j->comm, &me);
    MPI_Exscan(&total, &offset, 1, MPI_DOUBLE, MPI_SUM, j->comm);
    if (me == 0) offset = 0.0;
    for (size_t i = 0; i < j->n; i++) j->out[i] += offset;
}

/* Step 1 of the distributed scan alone: rank 0's total on its worker. */
static void run_total(scan_job *j) {
    ex_result r = ex_sync_wait(ex_reduce_f64(j->sch, j->in, j->n, 0.0));
    must(r.disposition == EX_DISP_VALUE, "reduce failed");
    ex_result_destroy(&r);
}

static void run_single(scan_job *j) {
    ex_result r = ex_sync_wait(ex_inclusive_scan_f64(j->sch, j->in, j->out, j->n));
    must(r.disposition == EX_DISP_VALUE, "single-process scan failed");
    ex_result_destroy(&r);
}

static void check_scan(const scan_job *j, const char *impl) {
    for (size_t i = 0; i < j->n; i++)
        if (j->out[i] != prefix_at(j->first + i)) {
            fprintf(stderr, "mpi_bench rank %d: %s: element %zu is %.17g, want %.17g\n", wrank, impl, j->first + i,
                    j->out[i], prefix_at(j->first + i));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    memset(j->out, 0, j->n * sizeof *j->out);
}

/* One run of fn on j's communicator, started after a barrier; returns
 * the slowest rank's time on its rank 0. */
static double timed_run(scan_job *j, void (*fn)(scan_job *)) {
    /* Pool workers linger (spinning on sched_yield) for 1 ms after their
     * last item (docs/pool.md): let them park, or they would run against
     * whatever is measured next on 2 cores. */
    struct timespec settle = { 0, 3000000 };
    nanosleep(&settle, NULL);
    MPI_Request req;
    MPI_Ibarrier(j->comm, &req);
    wait_politely(&req, 20000);  /* the ranks start within ~0.1 ms of each other */
    double t0 = MPI_Wtime();
    fn(j);
    double dt = MPI_Wtime() - t0, slowest = 0;
    MPI_Ireduce(&dt, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, j->comm, &req);
    wait_politely(&req, 100000);
    return slowest;
}

/* Each rank's arrays, made and touched once and used by every
 * configuration: how fast memory streams differs from one allocation to
 * the next (up to 30 % here), which would otherwise pass for a
 * difference between configurations. */
static double *buf_in, *buf_out;
static size_t buf_cap;

static void make_buffers(size_t cap) {
    buf_cap = cap;
    buf_in = malloc(cap * sizeof *buf_in + 8);
    buf_out = malloc(cap * sizeof *buf_out + 8);
    must(buf_in && buf_out, "out of memory for the arrays");
    for (size_t i = 0; i < cap; i++) buf_in[i] = input_at(i);  /* rank 0's, for every configuration */
    memset(buf_out, 0, cap * sizeof *buf_out);
}

/* j over n elements of the arrays, from global index first. */
static void scan_view(scan_job *j, size_t n, size_t first) {
    must(n <= buf_cap, "arrays too small");
    j->in = buf_in, j->out = buf_out, j->n = n, j->first = first;
    if (first)
        for (size_t i = 0; i < n; i++) j->in[i] = input_at(first + i);
}

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The elements this rank's arrays need for the configurations of k
 * ranks: its part, weak or strong, and on rank 0 the single process's
 * totals. */
static size_t elements_needed(int k, size_t weak, size_t strong) {
    size_t need = wrank < k ? max_size(weak, strong / (size_t)k) : 0;
    if (wrank == 0) need = max_size(need, max_size(weak * (size_t)k, strong / (size_t)k * (size_t)k));
    return need;
}

/* The single-process scan on rank 0's 2-worker pool (NULL elsewhere). */
static ex_pool *two_workers;

/* k ranks with per_rank elements each: cexec-mpi and mpi-baseline on the
 * first k ranks, then cexec-1proc over the same total on rank 0 alone,
 * one run of each in turn (a slow spell of the machine hits all three).
 * Each one's warm-up output is checked. */
static void scan_config(const char *scaling, int k, size_t per_rank) {
    char name[48];
    size_t total = per_rank * (size_t)k;
    snprintf(name, sizeof name, "scan %s %.0e", scaling, (double)total);
    if (wrank == 0) printf("mpi_bench: %s, %d rank%s x %zu doubles\n", name, k, k > 1 ? "s" : "", per_rank);
    MPI_Comm c = first_ranks(k);
    scan_job j = { c, ex_pool_scheduler(pool), NULL, NULL, 0, 0 };
    scan_job one = { MPI_COMM_SELF, wrank == 0 ? ex_pool_scheduler(two_workers) : j.sch, NULL, NULL, 0, 0 };
    if (c != MPI_COMM_NULL) scan_view(&j, per_rank, per_rank * (size_t)wrank);
    if (wrank == 0) scan_view(&one, total, 0);
    scan_job total_only = { MPI_COMM_SELF, j.sch, buf_in, buf_out, per_rank, 0 };
    double t[4][64];
    for (int run = -1; run < runs; run++) {
        if (c != MPI_COMM_NULL) {
            double a = timed_run(&j, run_cexec);
            if (run < 0) check_scan(&j, "cexec-mpi");
            double b = timed_run(&j, run_baseline);
            if (run < 0) check_scan(&j, "mpi-baseline");
            if (run >= 0) t[0][run] = a, t[1][run] = b;
        }
        meet();
        if (wrank == 0) {
            double x = timed_run(&one, run_single);
            if (run < 0) check_scan(&one, "cexec-1proc");
            double y = k > 1 ? timed_run(&total_only, run_total) : 0;
            if (run >= 0) t[2][run] = x, t[3][run] = y;
        }
        meet();
    }
    if (wrank == 0) {
        record("scan", name, "cexec-mpi", k, (double)total, t[0], runs, (double)total * 16 / 1e9, "GB/s");
        record("scan", name, "mpi-baseline", k, (double)total, t[1], runs, (double)total * 16 / 1e9, "GB/s");
        record("scan", name, "cexec-1proc", k, (double)total, t[2], runs, (double)total * 16 / 1e9, "GB/s");
        if (k > 1) record("scan", name, "step1-alone", k, (double)per_rank, t[3], runs, (double)per_rank * 8 / 1e9, "GB/s");
    }
    if (c != MPI_COMM_NULL) MPI_Comm_free(&c);
}

/* ------------------------------------------------------------ round trip */

static void rt_senders(int peer, int iters, double *t) {
    for (int k = -1000; k < iters; k++) {
        double t0 = MPI_Wtime();
        ex_sender *pair[2] = { ex_mpi_irecv(engine, NULL, 0, MPI_BYTE, peer, 1, MPI_COMM_WORLD),
                               ex_mpi_isend(engine, NULL, 0, MPI_BYTE, peer, 1, MPI_COMM_WORLD) };
        ex_result r = ex_sync_wait(ex_when_all_n(pair, 2));
        must(r.disposition == EX_DISP_VALUE, "round trip through senders failed");
        ex_result_destroy(&r);
        if (k >= 0) t[k] = MPI_Wtime() - t0;
    }
}

/* The senders' composition alone: no message, nothing to wait for. */
static void rt_composition(int iters, double *t) {
    for (int k = -1000; k < iters; k++) {
        double t0 = MPI_Wtime();
        ex_sender *pair[2] = { ex_just(), ex_just() };
        ex_result r = ex_sync_wait(ex_when_all_n(pair, 2));
        must(r.disposition == EX_DISP_VALUE, "the composition alone failed");
        ex_result_destroy(&r);
        if (k >= 0) t[k] = MPI_Wtime() - t0;
    }
}

static void rt_raw(int peer, int iters, double *t) {
    for (int k = -1000; k < iters; k++) {
        double t0 = MPI_Wtime();
        MPI_Request req[2];
        MPI_Irecv(NULL, 0, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(NULL, 0, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &req[1]);
        MPI_Status st[2];  /* (not MPI_STATUSES_IGNORE: gcc -O3 warns on MPICH's constant) */
        MPI_Waitall(2, req, st);
        if (k >= 0) t[k] = MPI_Wtime() - t0;
    }
}

static char rt_note[160];  /* the engine's counters during the senders' round trips */

static void round_trip(int iters) {
    int k = wsize < 2 ? 1 : 2, peer = k == 1 ? 0 : 1 - wrank;
    double *t = malloc((size_t)iters * sizeof *t);
    must(t != NULL, "out of memory");
    char name[48];
    snprintf(name, sizeof name, "round trip 0 bytes, %d rank%s", k, k > 1 ? "s" : "");
    if (wrank < k) {
        if (wrank == 0) printf("mpi_bench: %s, %d iterations\n", name, iters);
        rt_raw(peer, iters, t);
        if (wrank == 0) record("rt", name, "mpi-raw", k, 0, t, iters, 0, "ns");
        ex_mpi_progress_stats before = ex_mpi_progress_get_stats(engine);
        rt_senders(peer, iters, t);
        ex_mpi_progress_stats after = ex_mpi_progress_get_stats(engine);
        if (wrank == 0) {
            record("rt", name, "cexec-mpi", k, 0, t, iters, 0, "ns");
            double per = (double)(iters + 1000);
            snprintf(rt_note, sizeof rt_note,
                     "engine per iteration (rank 0): %.1f progress rounds, %.1f MPI_Testsome, %.2f timed waits",
                     (double)(after.rounds - before.rounds) / per, (double)(after.testsome - before.testsome) / per,
                     (double)(after.backoffs - before.backoffs) / per);
            rt_composition(iters, t);
            record("rt", name, "composition", k, 0, t, iters, 0, "ns");
        }
    }
    free(t);
    meet();
}

/* ----------------------------------------------------------------- report */

/* /proc/loadavg's first three fields (other work on the machine makes
 * memory-bound figures vary by several times: look at it). */
static void load_average(char *out, size_t size) {
    snprintf(out, size, "?");
    FILE *f = fopen("/proc/loadavg", "r");
    double a, b, c;
    if (f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3) snprintf(out, size, "%.2f %.2f %.2f", a, b, c);
    if (f) fclose(f);
}

static char load_before[48];

static void machine(FILE *f, const char *prefix) {
    char load_after[48];
    load_average(load_after, sizeof load_after);
    fprintf(f, "%sload average: %s before, %s after\n", prefix, load_before, load_after);
    struct utsname u;
    if (!uname(&u)) fprintf(f, "%skernel: %s %s %s\n", prefix, u.sysname, u.release, u.machine);
    fprintf(f, "%sonline cpus: %ld, MPI ranks: %d (more ranks than cpus: oversubscribed)\n", prefix,
            sysconf(_SC_NPROCESSORS_ONLN), wsize);
    FILE *c = fopen("/proc/cpuinfo", "r");
    char line[256];
    while (c && fgets(line, sizeof line, c))
        if (!strncmp(line, "model name", 10)) {
            fprintf(f, "%scpu:%s", prefix, strchr(line, ':') ? strchr(line, ':') + 1 : line);
            break;
        }
    if (c) fclose(c);
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = 0;
    fprintf(f, "%smpi: %s\n", prefix, lib);
}

/* The ratio against the row of the same benchmark and rank count by
 * another impl. */
static double ratio(const row *r, const char *impl) {
    if (!strcmp(r->impl, "step1-alone")) return 0;  /* a part, not a whole scan */
    const row *b = find(r->name, impl, r->ranks);
    return b && r->median_s > 0 && b != r ? b->median_s / r->median_s : 0;
}

/* Times in ms, or in us for the round trips. */
static double shown(const row *r, double s) { return strcmp(r->unit, "ns") ? s * 1e3 : s * 1e6; }

static void report(void) {
    printf("\n%-6s %-30s %-13s %5s %10s %10s %10s %9s %-5s %10s %10s %10s\n", "group", "benchmark", "impl", "ranks",
           "median", "min", "max", "metric", "", "xbaseline", "x1proc", "xraw");
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        const char *tu = strcmp(r->unit, "ns") ? "ms" : "us";
        printf("%-6s %-30s %-13s %5d %8.3f%s %8.3f%s %8.3f%s %9.2f %-5s", r->group, r->name, r->impl, r->ranks,
               shown(r, r->median_s), tu, shown(r, r->min_s), tu, shown(r, r->max_s), tu, r->metric, r->unit);
        const char *bases[3] = { "mpi-baseline", "cexec-1proc", "mpi-raw" };
        for (int b = 0; b < 3; b++) {
            double x = ratio(r, bases[b]);
            if (x > 0) printf(" %9.2fx", x);
            else printf(" %10s", "-");
        }
        printf("\n");
    }
    printf("xB = B's median time / this median time (above 1: faster than B).  1proc: one process, 2 workers.\n");
    if (*rt_note) printf("round trip: %s\n", rt_note);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char stamp[32], path[128];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    /* The part run goes into the name: make bench-mpi runs the scan and the
     * round trip as two jobs, which may end within the same second. */
    const char *part = getenv("CEXEC_MPI_BENCH_ONLY");
    bool one_part = part && (!strcmp(part, "scan") || !strcmp(part, "rt"));
    snprintf(path, sizeof path, "bench/results/mpi-bench-%s%s%s.csv", stamp, one_part ? "-" : "",
             one_part ? part : "");
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "mpi_bench: cannot write %s\n", path);
        return;
    }
    machine(f, "# ");
    fprintf(f, "group,benchmark,impl,ranks,size,runs,median_s,min_s,max_s,metric,unit,vs_baseline,vs_1proc,vs_raw\n");
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        fprintf(f, "%s,\"%s\",%s,%d,%.0f,%d,%.9f,%.9f,%.9f,%.6f,%s", r->group, r->name, r->impl, r->ranks, r->size,
                r->runs, r->median_s, r->min_s, r->max_s, r->metric, r->unit);
        const char *bases[3] = { "mpi-baseline", "cexec-1proc", "mpi-raw" };
        for (int b = 0; b < 3; b++) {
            double x = ratio(r, bases[b]);
            if (x > 0) fprintf(f, ",%.4f", x);
            else fprintf(f, ",");
        }
        fprintf(f, "\n");
    }
    fclose(f);
    printf("results: %s\n", path);
    machine(stdout, "machine ");
}

int main(int argc, char **argv) {
    must(!ex_mpi_init(&argc, &argv).code, "ex_mpi_init failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &wrank);
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    runs = (int)env_num("CEXEC_MPI_BENCH_RUNS", 7);
    if (runs < 1) runs = 1;
    if (runs > 64) runs = 64;
    size_t weak = (size_t)env_num("CEXEC_MPI_BENCH_WEAK", 5e7), strong = (size_t)env_num("CEXEC_MPI_BENCH_STRONG", 1e8);
    int iters = (int)env_num("CEXEC_MPI_BENCH_RT_ITERS", 20000);
    const char *only = getenv("CEXEC_MPI_BENCH_ONLY");
    const char *ranks = getenv("CEXEC_MPI_BENCH_RANKS");
    if (!ranks || !*ranks) ranks = "1 2 4";

    load_average(load_before, sizeof load_before);
    ex_pool_config cfg = { 0 };
    cfg.threads = 1;  /* one worker a rank */
    must(!ex_pool_create(&cfg, &pool).code, "cannot make the pool");
    must(!ex_mpi_progress_create(ex_pool_scheduler(pool), &engine).code, "cannot make the engine");

    if (!only || !strcmp(only, "scan")) {
        size_t cap = 0;
        for (const char *p = ranks; *p;) {
            char *end;
            long k = strtol(p, &end, 10);
            if (end == p) break;
            p = end;
            if (k >= 1 && k <= wsize) cap = max_size(cap, elements_needed((int)k, weak, strong));
        }
        make_buffers(cap);
        if (wrank == 0) {
            ex_pool_config two = { 0 };
            two.threads = 2;
            must(!ex_pool_create(&two, &two_workers).code, "cannot make a pool of 2");
        }
        for (const char *p = ranks; *p;) {
            char *end;
            long k = strtol(p, &end, 10);
            if (end == p) break;
            p = end;
            if (k < 1 || k > wsize) continue;
            scan_config("weak", (int)k, weak);
            scan_config("strong", (int)k, strong / (size_t)k);
        }
    }
    if (two_workers) (void)ex_pool_destroy(two_workers);
    free(buf_in), free(buf_out);
    if ((!only || !strcmp(only, "rt")) && iters > 0) round_trip(iters);
    if (wrank == 0) report();
    must(!ex_mpi_progress_destroy(engine).code, "engine busy at the end");
    (void)ex_pool_destroy(pool);
    (void)ex_mpi_finalize();
    return 0;
}
