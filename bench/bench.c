/* SPDX-License-Identifier: MIT */
/* bench.c - cexec benchmarks against serial C, oneTBB, OpenMP and libuv, measured
 * in the same run.  Results: a table on stdout and CSV files in bench/results.
 *
 *   build/bench/bench [--quick] [--only GROUP] [--runs N] [--max-size N]
 *   build/bench/bench --demo [--max-size N]     (make demo: the scan table)
 *
 * fib   fork-join fib(n) through the public sender API (examples/fib.c),
 *       with no cutoff and with a cutoff, against task_group and omp tasks.
 * bulk  an empty body over 1e6 and 1e8 indices (ns per index), and the
 *       launch latency of a bulk of shape = workers (us per launch).
 *       "cexec" is ex_bulk (one call per index), "cexec-ch" ex_bulk_chunked
 *       (one call per chunk, the way TBB and OpenMP call their bodies).
 * scan  ex_inclusive_scan_f64 from 1e3 to 1e8 doubles against a serial
 *       scan, tbb::parallel_scan and OpenMP's scan (and, at the largest
 *       size, the P2300 §1.3.2 pipeline of examples/inclusive_scan.c),
 *       with the machine's memory-copy bandwidth (algos.c).
 * reduce ex_reduce_f64 against a serial loop, tbb::parallel_reduce and an
 *       OpenMP simd reduction.
 * when_all  sync_wait of a when_all of two let_value children on the pool,
 *       with the pool's frames from its default (per-worker jemalloc
 *       arenas), the recycling allocator and malloc.
 * alloc an allocation and its free (256 bytes) through each frame
 *       allocator and raw malloc, on one thread and freed on another.
 * task  context switch (cexec, boost::context, Boost.Fiber), await costs,
 *       task create+run+destroy, fib via tasks against task_group.
 * pool  the pool as a scheduler (pool.c): schedule throughput from 1, 2, 4
 *       outside threads and from a worker (ns/op), round-trip latency
 *       after 0 / 100 us / 1 ms / 10 ms idle (p50, p99), CPU of an idle
 *       pool (ms/s), hand-off between two workers; against a oneTBB
 *       task_arena + task_group and OpenMP where it has a counterpart.
 * time  timers (timers.c): arm+cancel with 0 and 10000 other timers armed,
 *       100,000 concurrent 1-10 ms timeouts, lateness of 1 ms timers (p50,
 *       p99) on an idle and a busy pool and a run loop, idle CPU with a
 *       timer armed; against libuv's timers. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cexec/cexec.h>

#include "baselines.h"
#include "bench.h"
#include "harness.h"

/* From examples/fib.c (built without main). */
#define FIB_MAX 64
typedef struct fib_senders { ex_sender *f[FIB_MAX], *l[FIB_MAX]; } fib_senders;
bool fib_build(fib_senders *t, ex_scheduler pool, int64_t n, int64_t cutoff);
void fib_release(fib_senders *t, int64_t n);

ex_pool *pool;
ex_scheduler sched;
unsigned workers;
int runs = 5;

void must(bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "bench: %s\n", what);
        exit(1);
    }
}

static int64_t expect_value(ex_result r) {
    must(r.disposition == EX_DISP_VALUE, r.disposition == EX_DISP_ERROR ? r.error.msg : "stopped");
    int64_t v = r.n ? r.values[0].as.i : 0;
    ex_result_destroy(&r);
    return v;
}

static double as_ms(double s, double size) { (void)size; return s * 1e3; }
static double ns_per_index(double s, double size) { return s * 1e9 / size; }

/* ------------------------------------------------------------------- fib */

typedef struct fib_arg { int64_t n, cutoff, expect; fib_senders t; ex_scheduler sch; } fib_arg;

/* The senders are built once (they are multi-shot recipes); each run
 * connects and runs them. */
static void fib_cexec(void *p) {
    fib_arg *a = p;
    ex_sender *s = ex_starts_on(a->sch, ex_sender_retain(a->t.f[a->n]));
    must(expect_value(ex_sync_wait(s)) == a->expect, "cexec fib: wrong result");
}
static void fib_tbb(void *p) { fib_arg *a = p; must(tbb_fib(a->n, a->cutoff) == a->expect, "tbb fib: wrong result"); }
static void fib_omp(void *p) { fib_arg *a = p; must(omp_fib(a->n, a->cutoff) == a->expect, "omp fib: wrong result"); }
static void fib_ser(void *p) { fib_arg *a = p; must(serial_fib(a->n) == a->expect, "serial fib: wrong result"); }

static void bench_fib(bool quick) {
    int64_t n = quick ? 25 : 30;
    fib_arg nocut = { .n = n, .cutoff = 0, .expect = serial_fib(n), .sch = sched };
    fib_arg cut = { .n = n, .cutoff = n - 10, .expect = nocut.expect, .sch = sched };
    must(fib_build(&nocut.t, sched, n, nocut.cutoff) && fib_build(&cut.t, sched, n, cut.cutoff), "fib: cannot build");
    char name[48];
    snprintf(name, sizeof name, "fib(%lld) no cutoff", (long long)n);
    bench_measure("fib", name, "serial", (double)n, 1, runs, fib_ser, &nocut, as_ms, "ms");
    bench_measure("fib", name, "cexec", (double)n, 1, runs, fib_cexec, &nocut, as_ms, "ms");
    bench_measure("fib", name, "tbb", (double)n, 1, runs, fib_tbb, &nocut, as_ms, "ms");
    bench_measure("fib", name, "openmp", (double)n, 1, runs, fib_omp, &nocut, as_ms, "ms");
    /* The same recursion on pools whose frames come from the recycling
     * allocator and from the process default set to malloc (the pool's default,
     * measured as "cexec", is per-worker jemalloc arenas; the frame
     * allocator issue asks for the effect of each). */
    ex_recycling_allocator *rec;
    must(!ex_recycling_allocator_create(NULL, &rec).code, "fib: recycling allocator");
    ex_pool_config rcfg = { .threads = workers, .allocator = ex_recycling_allocator_get(rec) };
    ex_pool_config jcfg = { .threads = workers, .frames = EX_POOL_FRAMES_PROCESS };
    ex_pool *rpool = NULL, *jpool = NULL;  /* clang: read if the first create fails */
    must(!ex_pool_create(&rcfg, &rpool).code && !ex_pool_create(&jcfg, &jpool).code, "fib: pools");
    fib_arg on_rec = nocut, on_je = nocut;
    on_rec.sch = ex_pool_scheduler(rpool);
    on_je.sch = ex_pool_scheduler(jpool);
    must(fib_build(&on_rec.t, on_rec.sch, n, 0) && fib_build(&on_je.t, on_je.sch, n, 0), "fib: cannot build");
    bench_measure("fib", name, "cexec-recycle", (double)n, 1, runs, fib_cexec, &on_rec, as_ms, "ms");
    ex_set_default_allocator(ex_libc_allocator());  /* the process default is malloc itself for this row */
    bench_measure("fib", name, "cexec-malloc", (double)n, 1, runs, fib_cexec, &on_je, as_ms, "ms");
    ex_set_default_allocator(NULL);
    fib_release(&on_rec.t, n);
    fib_release(&on_je.t, n);
    must(!ex_pool_destroy(rpool).code && !ex_pool_destroy(jpool).code, "fib: pool destroy");
    ex_recycling_allocator_destroy(rec);
    snprintf(name, sizeof name, "fib(%lld) cutoff %lld", (long long)n, (long long)cut.cutoff);
    bench_measure("fib", name, "serial", (double)n, 1, runs, fib_ser, &cut, as_ms, "ms");
    bench_measure("fib", name, "cexec", (double)n, 1, runs, fib_cexec, &cut, as_ms, "ms");
    bench_measure("fib", name, "tbb", (double)n, 1, runs, fib_tbb, &cut, as_ms, "ms");
    bench_measure("fib", name, "openmp", (double)n, 1, runs, fib_omp, &cut, as_ms, "ms");
    fib_release(&nocut.t, n);
    fib_release(&cut.t, n);
}

/* ------------------------------------------------------------------ bulk */

static ex_error empty_index(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    bench_empty_body(i);
    return ex_ok();
}

/* The same per-index work, one call per chunk (how TBB and OpenMP call
 * their bodies). */
static ex_error empty_chunk(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    for (size_t i = begin; i < end; i++) bench_empty_body(i);
    return ex_ok();
}

typedef struct bulk_arg { size_t n; int repeat; ex_sender *s; } bulk_arg;

static void bulk_cexec(void *p) {
    bulk_arg *a = p;
    for (int k = 0; k < a->repeat; k++) expect_value(ex_sync_wait(ex_sender_retain(a->s)));
}
static void bulk_tbb(void *p) { bulk_arg *a = p; for (int k = 0; k < a->repeat; k++) tbb_bulk(a->n); }
static void bulk_omp(void *p) { bulk_arg *a = p; for (int k = 0; k < a->repeat; k++) omp_bulk(a->n); }
static void bulk_ser(void *p) {
    bulk_arg *a = p;
    for (int k = 0; k < a->repeat; k++)
        for (size_t i = 0; i < a->n; i++) bench_empty_body(i);
}

static double us_per_launch(double s, double launches) { return s * 1e6 / launches; }

static void bench_bulk(bool quick) {
    size_t sizes[] = { 1000000, quick ? 10000000 : 100000000 };
    for (int k = 0; k < 2; k++) {
        bulk_arg a = { sizes[k], 1, ex_bulk(ex_schedule(sched), EX_PAR, sizes[k], empty_index, NULL) };
        char name[48];
        snprintf(name, sizeof name, "empty body %.0e indices", (double)sizes[k]);
        bench_measure("bulk", name, "serial", (double)a.n, 1, runs, bulk_ser, &a, ns_per_index, "ns/index");
        bench_measure("bulk", name, "cexec", (double)a.n, 1, runs, bulk_cexec, &a, ns_per_index, "ns/index");
        bulk_arg c = { sizes[k], 1, ex_bulk_chunked(ex_schedule(sched), EX_PAR, sizes[k], 0, empty_chunk, NULL) };
        bench_measure("bulk", name, "cexec-ch", (double)c.n, 1, runs, bulk_cexec, &c, ns_per_index, "ns/index");
        ex_sender_release(c.s);
        bench_measure("bulk", name, "tbb", (double)a.n, 1, runs, bulk_tbb, &a, ns_per_index, "ns/index");
        bench_measure("bulk", name, "openmp", (double)a.n, 1, runs, bulk_omp, &a, ns_per_index, "ns/index");
        ex_sender_release(a.s);
    }
    /* Launch latency: shape = workers, repeated; the metric is per launch. */
    int repeat = quick ? 200 : 2000;
    bulk_arg l = { workers, repeat, ex_bulk(ex_schedule(sched), EX_PAR, workers, empty_index, NULL) };
    const char *name = "launch (shape = workers)";
    bench_measure("bulk", name, "cexec", repeat, 1, runs, bulk_cexec, &l, us_per_launch, "us/launch");
    bench_measure("bulk", name, "tbb", repeat, 1, runs, bulk_tbb, &l, us_per_launch, "us/launch");
    bench_measure("bulk", name, "openmp", repeat, 1, runs, bulk_omp, &l, us_per_launch, "us/launch");
    ex_sender_release(l.s);
}

/* -------------------------------------------------------------- when_all */

/* when_all of two pool children, each a let_value whose function returns a
 * then: every run allocates two inner operations, through the allocator of
 * the pool it runs on. */
static ex_error plus_one(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

static ex_sender *inner_step(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_then(ex_just(ex_int(1)), plus_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

typedef struct wa_arg { ex_sender *s; int repeat; } wa_arg;

static void when_all_runs(void *p) {
    wa_arg *a = p;
    for (int k = 0; k < a->repeat; k++) {
        ex_result r = ex_sync_wait(ex_sender_retain(a->s));
        must(r.disposition == EX_DISP_VALUE && r.n == 2 && r.values[1].as.i == 2, "when_all: wrong result");
    }
}

static ex_sender *when_all_pipeline(ex_scheduler sch) {
    return ex_when_all(ex_let_value(ex_schedule(sch), inner_step, NULL, EX_SIG0),
                       ex_let_value(ex_schedule(sch), inner_step, NULL, EX_SIG0));
}

static void bench_when_all(bool quick) {
    int repeat = quick ? 2000 : 20000;
    ex_recycling_allocator *rec;
    must(!ex_recycling_allocator_create(NULL, &rec).code, "when_all: recycling allocator");
    ex_pool_config rcfg = { .threads = workers, .allocator = ex_recycling_allocator_get(rec) };
    ex_pool_config jcfg = { .threads = workers, .frames = EX_POOL_FRAMES_PROCESS };
    ex_pool *rpool = NULL, *jpool = NULL;  /* clang: read if the first create fails */
    must(!ex_pool_create(&rcfg, &rpool).code && !ex_pool_create(&jcfg, &jpool).code, "when_all: pools");
    wa_arg def = { when_all_pipeline(sched), repeat };
    wa_arg re = { when_all_pipeline(ex_pool_scheduler(rpool)), repeat };
    wa_arg je = { when_all_pipeline(ex_pool_scheduler(jpool)), repeat };
    const char *name = "2 let_value children";
    bench_measure("when_all", name, "cexec", repeat, 1, runs, when_all_runs, &def, us_per_launch, "us/run");
    bench_measure("when_all", name, "cexec-recycle", repeat, 1, runs, when_all_runs, &re, us_per_launch, "us/run");
    ex_set_default_allocator(ex_libc_allocator());  /* frames from malloc itself */
    bench_measure("when_all", name, "cexec-malloc", repeat, 1, runs, when_all_runs, &je, us_per_launch, "us/run");
    ex_set_default_allocator(NULL);
    ex_sender_release(def.s);
    ex_sender_release(re.s);
    ex_sender_release(je.s);
    must(!ex_pool_destroy(rpool).code && !ex_pool_destroy(jpool).code, "when_all: pool destroy");
    ex_recycling_allocator_destroy(rec);
}

/* ----------------------------------------------------------------- alloc */

enum { ALLOC_PAIRS = 2000000, BATCH = 512, ALLOC_SIZE = 256 };

static void *volatile alloc_sink;

/* a == NULL: raw malloc/free, or with rec the recycling allocator's inline
 * entry points (ex_recycling_allocate). */
typedef struct alloc_arg { const ex_allocator *a; ex_recycling_allocator *rec; } alloc_arg;

static void *bench_alloc(const alloc_arg *x) {
    if (x->a) return ex_allocate(x->a, ALLOC_SIZE, 16);
    return x->rec ? ex_recycling_allocate(x->rec, ALLOC_SIZE, 16) : malloc(ALLOC_SIZE);
}
static void bench_free(const alloc_arg *x, void *p) {
    if (x->a) ex_deallocate(x->a, p, ALLOC_SIZE, 16);
    else if (x->rec) ex_recycling_deallocate(x->rec, p, ALLOC_SIZE, 16);
    else free(p);
}

static void alloc_same_thread(void *arg) {
    const alloc_arg x = *(alloc_arg *)arg;
    for (int i = 0; i < ALLOC_PAIRS; i++) {
        void *p = bench_alloc(&x);
        alloc_sink = p;
        bench_free(&x, p);
    }
}

/* The floor of the ex_allocator interface: an allocator that hands out one
 * block and does nothing else costs the two indirect calls of a pair. */
static unsigned char null_block[ALLOC_SIZE] __attribute__((aligned(64)));
static void *null_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx, (void)size, (void)align;
    return null_block;
}
static void null_deallocate(void *ctx, void *p, size_t size, size_t align) { (void)ctx, (void)p, (void)size, (void)align; }
static const ex_allocator null_allocator = { null_allocate, null_deallocate, NULL, "null", NULL };

/* Cross-thread: the caller allocates batches, a second thread frees them. */
typedef struct xfer {
    alloc_arg a;
    void *blocks[BATCH];
    uint32_t full;   /* 1: batch ready for the freer; 0: freed */
    uint32_t stop;
} xfer;

static void *freer_main(void *arg) {
    xfer *x = arg;
    for (;;) {
        while (!__atomic_load_n(&x->full, __ATOMIC_ACQUIRE))
            if (__atomic_load_n(&x->stop, __ATOMIC_ACQUIRE)) return NULL;
        for (int i = 0; i < BATCH; i++) bench_free(&x->a, x->blocks[i]);
        __atomic_store_n(&x->full, 0, __ATOMIC_RELEASE);
    }
}

static void alloc_cross_thread(void *arg) {
    xfer x = { .a = *(alloc_arg *)arg };
    pthread_t t;
    must(!pthread_create(&t, NULL, freer_main, &x), "alloc: cannot start a thread");
    for (int r = 0; r < ALLOC_PAIRS / BATCH; r++) {
        while (__atomic_load_n(&x.full, __ATOMIC_ACQUIRE)) { }
        for (int i = 0; i < BATCH; i++) x.blocks[i] = bench_alloc(&x.a);
        __atomic_store_n(&x.full, 1, __ATOMIC_RELEASE);
    }
    while (__atomic_load_n(&x.full, __ATOMIC_ACQUIRE)) { }
    __atomic_store_n(&x.stop, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
}

static void bench_alloc_group(bool quick) {
    (void)quick;
    ex_recycling_allocator *rec;
    ex_jemalloc_allocator *je;
    must(!ex_recycling_allocator_create(NULL, &rec).code, "alloc: recycling allocator");
    must(!ex_jemalloc_allocator_create(workers, &je).code, "alloc: jemalloc allocator");
    alloc_arg args[] = { { NULL, NULL },
                         { ex_libc_allocator(), NULL },
                         { ex_recycling_allocator_get(rec), NULL },
                         { NULL, rec },
                         { ex_jemalloc_allocator_get(je), NULL },
                         { &null_allocator, NULL } };
    const char *names[] = { "malloc", "cexec-libc", "cexec-recycling", "cexec-recycling-inline", "cexec-jemalloc",
                            "interface-floor" };
    enum { NALLOC = sizeof args / sizeof args[0] };
    for (int k = 0; k < NALLOC; k++)
        bench_measure("alloc", "pair, same thread", names[k], ALLOC_PAIRS, 1, runs, alloc_same_thread, &args[k],
                      ns_per_index, "ns/pair");
    /* Across threads the floor also pays the hand-over of the addresses
     * (64 cache lines per batch), which is all of it when cores are far. */
    for (int k = 0; k < NALLOC; k++)
        bench_measure("alloc", "pair, freed on another thread", names[k], ALLOC_PAIRS, 1, runs, alloc_cross_thread,
                      &args[k], ns_per_index, "ns/pair");
    ex_jemalloc_allocator_destroy(je);
    ex_recycling_allocator_destroy(rec);
}

static void usage(void) {
    fprintf(stderr, "usage: bench [--quick] [--only fib|bulk|scan|reduce|copy|when_all|alloc|task|pool|time] [--runs N] [--max-size N]\n"
                    "       bench --demo [--runs N] [--max-size N]\n");
    exit(2);
}

int main(int argc, char **argv) {
    bool quick = false, demo = false;
    const char *only = NULL;
    double max_size = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--demo")) demo = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--max-size") && i + 1 < argc) max_size = atof(argv[++i]);
        else usage();
    }
    if (runs < 1) runs = 1;
    if (max_size < 1e3) max_size = quick ? 1e7 : 1e8;
    ex_error e = ex_pool_create(NULL, &pool);
    must(!e.code, e.msg);
    sched = ex_pool_scheduler(pool);
    workers = ex_pool_size(pool);
    tbb_init((int)workers);
    omp_init((int)workers);
    if (demo) {
        bench_demo(max_size);
    } else {
        printf("cexec bench: %u workers (same for oneTBB and OpenMP), %d runs after a warm-up%s\n", workers, runs,
               quick ? ", quick sizes" : "");
        if (!only || !strcmp(only, "fib")) bench_fib(quick);
        if (!only || !strcmp(only, "bulk")) bench_bulk(quick);
        if (only && !strcmp(only, "copy")) bench_copy_bandwidth();  /* else in the scan group, before its largest scan */
        if (!only || !strcmp(only, "scan")) bench_scan(max_size);
        if (!only || !strcmp(only, "reduce")) bench_reduce(max_size);
        if (!only || !strcmp(only, "when_all")) bench_when_all(quick);
        if (!only || !strcmp(only, "alloc")) bench_alloc_group(quick);
        if (!only || !strcmp(only, "task")) bench_task_group(quick);
        if (!only || !strcmp(only, "pool")) bench_pool_group(quick);
        if (!only || !strcmp(only, "time")) bench_time_group(quick);
    }
    bench_report("bench/results", !demo);
    if (!demo && (!only || !strcmp(only, "time"))) bench_time_targets();
    tbb_fini();
    return ex_pool_destroy(pool).code ? 1 : 0;
}
