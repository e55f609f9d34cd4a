/* SPDX-License-Identifier: MIT */
/* pool.c - the pool benchmarks ("pool" group, issue 19): what the pool costs
 * as a scheduler, against oneTBB (a task_arena of the same thread count with
 * task_group::run + wait, the baseline the issue names) and OpenMP where it
 * has a counterpart.
 *
 * schedule: T outside thread(s), T = 1, 2, 4  (ns/op)
 *   T threads that are not workers each run batches of K = 256 schedule
 *   operations: ex_sync_wait of a batch sender (below) whose start connects
 *   K ex_schedule(sched) operations into its own storage and starts them;
 *   each completion destroys its operation and counts down, the last one
 *   completes the batch.  TBB: each thread runs arena.execute(K x tg.run
 *   of an empty lambda + tg.wait) per batch (the thread joins the arena and
 *   its wait runs tasks too; cexec's sync_wait only blocks).  OpenMP has no
 *   counterpart: work reaches a team only from the thread that opens a
 *   parallel region, and every outside thread would get its own team.
 * schedule: from a worker  (ns/op)
 *   The same batches from an item running on a worker: ex_sync_wait of
 *   ex_then(ex_schedule(sched), f) where f sync_waits the batches (on a
 *   worker, sync_wait runs the pool's work while it waits).  TBB: one task
 *   run in the arena loops over the batches.  OpenMP: K tasks + taskwait,
 *   repeated, in one parallel region's single (libgomp runs a task at once
 *   instead of queuing it when 64 x threads are queued).
 * round trip (G idle) p50 / p99, G = 0, 100 us, 1 ms, 10 ms  (us)
 *   The main thread sleeps for the gap (clock_nanosleep), then times
 *   ex_sync_wait(ex_schedule(sched)): a hop to a worker and back, which
 *   after a long gap includes waking a parked worker.  TBB ("tbb", the
 *   issue's baseline): arena.execute(tg.run(empty) + tg.wait), in which
 *   the caller usually runs the task itself; "tbb-enqueue": arena.enqueue
 *   of the task, the caller blocked on a condition variable until a worker
 *   has run it (the same hop as cexec's).  "openmp": a parallel region whose
 *   single thread creates one empty task (the team's fork and join).
 *   Percentiles of many samples per gap, warm-up samples discarded.
 * idle CPU  (ms of CPU per second)
 *   After a burst of work on a runtime, 50 ms pause, then the CPU time its
 *   threads use over the next second (0.25 s with --quick), read from
 *   /proc/self/task/<tid>/schedstat per thread: cexec's workers by name
 *   ("cexec-<i>"), TBB's threads as a task_scheduler_observer saw them
 *   enter the arena, OpenMP's team as a parallel region recorded it; the
 *   main thread is left out of all three.  Per-thread figures attribute the
 *   CPU to the right runtime even though all three live in one process.
 * hand-off between two workers  (us per hand-off)
 *   Item i, running on a worker, ex_posts item i + 1 and spins until it has
 *   started, so another worker must take it (a steal, or a wake-up).  TBB:
 *   tg.run of the next task in the arena, same spin; OpenMP: a task created
 *   by the one before, same spin.  Skipped on a pool of one worker. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "baselines.h"
#include "bench.h"
#include "harness.h"

enum { BATCH_K = 256, MAX_OUTSIDE = 4, MAX_TIDS = 256 };

static double ns_per_op(double s, double ops) { return s * 1e9 / ops; }
static double us_per_op(double s, double ops) { return s * 1e6 / ops; }

/* ---------------------------------------------------------- batch sender */

/* A sender that starts k schedule operations of one scheduler and completes
 * with set_value() when all of them have completed (set_error if one did
 * not complete with a value). */
typedef struct batch_sender {
    ex_sender base;
    ex_sender *schedule;   /* connected k times */
    size_t k, slot_size;   /* slot: a batch_slot, then the schedule operation */
} batch_sender;

typedef struct batch_op batch_op;

typedef struct batch_slot {
    batch_op *batch;
    ex_operation *op;
} batch_slot;

struct batch_op {
    ex_operation base;
    ex_receiver out;
    ex_sender *schedule;   /* retained */
    size_t k, slot_size;
    uint32_t pending;      /* k + 1 while starting: the last one completes */
    uint32_t failed;
};

static size_t slots_offset(void) { return ex_align_up(sizeof(batch_op), alignof(max_align_t)); }
static batch_slot *slot_at(batch_op *b, size_t i) {
    return (batch_slot *)(void *)((char *)b + slots_offset() + i * b->slot_size);
}
static size_t slot_op_offset(const ex_sender *schedule) {
    return ex_align_up(sizeof(batch_slot), ex_sender_op_align(schedule));
}

static void batch_count_down(batch_op *b) {
    if (exi_faa_u32(&b->pending, (uint32_t)-1) != 1) return;
    if (exi_load_acq_u32(&b->failed)) ex_set_error(b->out, ex_err(EX_EINVAL, "pool bench: a schedule failed"));
    else ex_set_value(b->out, NULL, 0);
}

static void slot_done(void *self, bool ok) {
    batch_slot *sl = self;
    batch_op *b = sl->batch;
    ex_operation_destroy(sl->op);
    if (!ok) exi_store_rel_u32(&b->failed, 1);
    batch_count_down(b);
}

static void slot_value(void *self, const ex_value *v, size_t n) { (void)v, (void)n; slot_done(self, true); }
static void slot_error(void *self, ex_error e) {
    ex_error_release(e);
    slot_done(self, false);
}
static void slot_stopped(void *self) { slot_done(self, false); }
static ex_env slot_env(void *self) { return ex_receiver_env(((batch_slot *)self)->batch->out); }

static const ex_receiver_vtable slot_receiver_vt = { slot_value, slot_error, slot_stopped, slot_env, NULL };

/* Connects each schedule operation just before starting it: the per-op
 * cost measured is connect + start + completion + destroy. */
static void batch_start(ex_operation *op) {
    batch_op *b = (batch_op *)op;
    const ex_sender *sch = b->schedule;
    size_t op_off = slot_op_offset(sch), op_size = ex_sender_op_size(sch);
    for (size_t i = 0; i < b->k; i++) {
        batch_slot *sl = slot_at(b, i);
        sl->batch = b;
        ex_receiver r = { &slot_receiver_vt, sl };
        ex_error e = ex_connect(sch, r, (char *)sl + op_off, op_size, &sl->op);
        if (e.code) {
            exi_store_rel_u32(&b->failed, 1);
            batch_count_down(b);
            continue;
        }
        ex_start(sl->op);
    }
    batch_count_down(b);  /* the start's own count */
}

static void batch_op_destroy(ex_operation *op) { ex_sender_release(((batch_op *)op)->schedule); }

static const ex_operation_vtable batch_op_vt = { batch_start, batch_op_destroy };

static ex_error batch_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const batch_sender *bs = (const batch_sender *)s;
    batch_op *b = storage;
    b->base.vt = &batch_op_vt;
    b->out = r;
    b->schedule = ex_sender_retain(bs->schedule);
    b->k = bs->k;
    b->slot_size = bs->slot_size;
    b->pending = (uint32_t)b->k + 1;
    b->failed = 0;
    return ex_ok();
}

static void batch_destroy(ex_sender *s) { ex_sender_release(((batch_sender *)s)->schedule); }

static const ex_sender_vtable batch_vt = { "pool bench batch", batch_connect, NULL, batch_destroy, NULL };

static ex_sender *batch_sender_new(ex_scheduler sch, size_t k) {
    ex_sender *s = ex_sender_alloc(&batch_vt, sizeof(batch_sender));
    must(s != NULL, "pool: out of memory");
    batch_sender *bs = (batch_sender *)s;
    bs->schedule = ex_schedule(sch);
    bs->k = k;
    size_t align = ex_max_size(alignof(max_align_t), ex_sender_op_align(bs->schedule));
    bs->slot_size = ex_align_up(slot_op_offset(bs->schedule) + ex_sender_op_size(bs->schedule), align);
    ex_sigs_add_value(&s->sigs, EX_SIG0);
    s->sigs.flags |= EX_SIGS_ERROR;
    s->op_size = slots_offset() + k * bs->slot_size;
    s->op_align = align;
    s->depth = ex_sender_depth(bs->schedule) + 1;
    return s;
}

static void run_batches(ex_sender *batch, size_t batches) {
    for (size_t b = 0; b < batches; b++) {
        ex_result r = ex_sync_wait(ex_sender_retain(batch));
        must(r.disposition == EX_DISP_VALUE, "pool: a batch failed");
    }
}

/* ----------------------------------------------- schedule from outside */

typedef struct outside_arg { ex_sender *batch; int threads; size_t batches; } outside_arg;

static void *outside_main(void *p) {
    outside_arg *a = p;
    run_batches(a->batch, a->batches);
    return NULL;
}

static void outside_cexec(void *p) {
    outside_arg *a = p;
    pthread_t t[MAX_OUTSIDE];
    for (int i = 0; i < a->threads; i++) must(!pthread_create(&t[i], NULL, outside_main, a), "pool: pthread_create");
    for (int i = 0; i < a->threads; i++) pthread_join(t[i], NULL);
}

static void outside_tbb(void *p) {
    outside_arg *a = p;
    tbb_pool_batches(a->threads, a->batches, BATCH_K);
}

static void bench_outside(ex_sender *batch, size_t total_batches) {
    for (int threads = 1; threads <= MAX_OUTSIDE; threads *= 2) {
        /* The same number of operations per run whatever the thread count. */
        outside_arg a = { batch, threads, total_batches / (size_t)threads };
        double ops = (double)(a.batches * (size_t)threads * BATCH_K);
        char name[48];
        snprintf(name, sizeof name, "schedule: %d outside thread%s", threads, threads > 1 ? "s" : "");
        bench_measure("pool", name, "cexec", ops, 1, runs, outside_cexec, &a, ns_per_op, "ns/op");
        bench_measure("pool", name, "tbb", ops, 1, runs, outside_tbb, &a, ns_per_op, "ns/op");
    }
}

/* ------------------------------------------------ schedule from a worker */

typedef struct nested_arg { ex_sender *batch; size_t batches; } nested_arg;

static ex_error nested_body(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    nested_arg *a = ctx;
    must(ex_pool_current_worker(pool) >= 0, "pool: nested batches not on a worker");
    run_batches(a->batch, a->batches);
    return ex_ok();
}

static void nested_cexec(void *p) {
    ex_result r = ex_sync_wait(ex_then(ex_schedule(sched), nested_body, p, EX_SIG0, EX_SIG0));
    must(r.disposition == EX_DISP_VALUE, "pool: nested batches failed");
}
static void nested_tbb(void *p) { tbb_pool_nested_batches(((nested_arg *)p)->batches, BATCH_K); }
static void nested_omp(void *p) { omp_pool_nested_batches(((nested_arg *)p)->batches, BATCH_K); }

static void bench_nested(ex_sender *batch, size_t batches) {
    nested_arg a = { batch, batches };
    double ops = (double)(batches * BATCH_K);
    const char *name = "schedule: from a worker";
    bench_measure("pool", name, "cexec", ops, 1, runs, nested_cexec, &a, ns_per_op, "ns/op");
    bench_measure("pool", name, "tbb", ops, 1, runs, nested_tbb, &a, ns_per_op, "ns/op");
    bench_measure("pool", name, "openmp", ops, 1, runs, nested_omp, &a, ns_per_op, "ns/op");
}

/* ------------------------------------------------------------ round trip */

static ex_sender *hop_sender;

static void round_trip_cexec(void) {
    ex_result r = ex_sync_wait(ex_sender_retain(hop_sender));
    must(r.disposition == EX_DISP_VALUE, "pool: round trip failed");
}

static void sleep_s(double s) {
    if (s <= 0) return;
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts)) { }
}

typedef struct gap { double s; const char *label; int samples, quick_samples; } gap;

static const gap gaps[] = {
    { 0, "0", 2000, 200 }, { 100e-6, "100us", 1000, 100 }, { 1e-3, "1ms", 500, 50 }, { 10e-3, "10ms", 100, 20 }
};
enum { WARMUP_SAMPLES = 3 };

/* Samples round_trip after the gap and records its p50 and p99 rows; the
 * row's size is the gap in microseconds (scripts/plot.sh reads it, and the
 * names, which carry no comma so plot.sh's plain field split holds). */
static void latency_rows(const gap *g, int samples, const char *impl, void (*round_trip)(void)) {
    double *t = malloc((size_t)samples * sizeof *t);
    must(t != NULL, "pool: out of memory");
    for (int i = -WARMUP_SAMPLES; i < samples; i++) {
        bench_progress("pool / round trip (%s idle) / %s: %d/%d", g->label, impl, i + 1, samples);
        sleep_s(g->s);
        double t0 = bench_now();
        round_trip();
        if (i >= 0) t[i] = bench_now() - t0;
    }
    bench_progress("");
    const double ps[] = { 0.50, 0.99 };
    const char *pn[] = { "p50", "p99" };
    for (int k = 0; k < 2; k++) {
        double v = bench_percentile(t, (size_t)samples, ps[k]);  /* sorted from here on */
        char name[48];
        snprintf(name, sizeof name, "round trip (%s idle) %s", g->label, pn[k]);
        bench_record("pool", name, impl, g->s * 1e6, samples, v, t[0], t[samples - 1], v * 1e6, "us");
    }
    free(t);
}

static void bench_round_trip(bool quick) {
    hop_sender = ex_schedule(sched);
    for (size_t i = 0; i < sizeof gaps / sizeof gaps[0]; i++) {
        int n = quick ? gaps[i].quick_samples : gaps[i].samples;
        latency_rows(&gaps[i], n, "cexec", round_trip_cexec);
        latency_rows(&gaps[i], n, "tbb", tbb_pool_round_trip);
        latency_rows(&gaps[i], n, "tbb-enqueue", tbb_pool_round_trip_enqueue);
        latency_rows(&gaps[i], n, "openmp", omp_pool_round_trip);
    }
    ex_sender_release(hop_sender);
}

/* -------------------------------------------------------------- idle CPU */

/* CPU time a thread has run, in seconds (schedstat's first field, ns); 0
 * for a thread that has gone. */
static double thread_cpu_s(int tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    unsigned long long ns = 0;
    if (fscanf(f, "%llu", &ns) != 1) ns = 0;
    fclose(f);
    return (double)ns * 1e-9;
}

static double threads_cpu_s(const int *tids, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += thread_cpu_s(tids[i]);
    return s;
}

/* The process's threads whose name starts with "cexec-" (the pool's
 * workers: pthread_setname_np with the default prefix). */
static size_t cexec_thread_ids(int *out, size_t max) {
    DIR *d = opendir("/proc/self/task");
    must(d != NULL, "pool: cannot list /proc/self/task");
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < max) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
        fclose(f);
        if (!strncmp(comm, "cexec-", 6)) out[n++] = atoi(e->d_name);
    }
    closedir(d);
    return n;
}

/* Drops the calling (main) thread from a list of thread ids. */
static size_t without_self(int *tids, size_t n) {
    int self = gettid();
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (tids[i] != self) tids[m++] = tids[i];
    return m;
}

static ex_sender *burst_batch;
static void burst_cexec(void) { run_batches(burst_batch, 64); }
static void burst_tbb(void) { tbb_pool_batches(1, 64, BATCH_K); }
static void burst_omp(void) { omp_pool_nested_batches(64, BATCH_K); }

static void idle_row(const char *impl, void (*burst)(void), size_t (*thread_ids)(int *, size_t), double window) {
    int tids[MAX_TIDS];
    bench_progress("pool / idle CPU / %s", impl);
    burst();
    size_t n = without_self(tids, thread_ids(tids, MAX_TIDS));
    sleep_s(0.05);
    double c0 = threads_cpu_s(tids, n), t0 = bench_now();
    sleep_s(window);
    double cpu = threads_cpu_s(tids, n) - c0, per_s = cpu / (bench_now() - t0);
    bench_progress("");
    /* median_s: CPU seconds per second, so the ms column reads ms/s. */
    bench_record("pool", "idle CPU after a burst", impl, (double)n, 1, per_s, per_s, per_s, per_s * 1e3, "ms/s");
}

static void bench_idle(bool quick) {
    double window = quick ? 0.25 : 1.0;
    burst_batch = batch_sender_new(sched, BATCH_K);
    idle_row("cexec", burst_cexec, cexec_thread_ids, window);
    idle_row("tbb", burst_tbb, tbb_pool_thread_ids, window);
    idle_row("openmp", burst_omp, omp_pool_thread_ids, window);
    ex_sender_release(burst_batch);
}

/* -------------------------------------------------------------- ping-pong */

typedef struct hop_item hop_item;

typedef struct ping_pong {
    hop_item *items;
    size_t last;
    uint64_t started;   /* index of the item that started last */
    uint64_t exited;    /* items that have finished with pp */
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    bool done;
} ping_pong;

struct hop_item {
    ex_work work;       /* first: the item is its work node */
    ping_pong *pp;
    size_t index;
};

/* Every item counts itself out when it no longer reads pp; the last one
 * wakes the caller, which then frees pp (so no item reads it freed). */
static void hop_exit(ping_pong *pp) {
    uint64_t last = pp->last;
    if (exi_faa_u64(&pp->exited, 1) != last) return;
    pthread_mutex_lock(&pp->mutex);
    pp->done = true;
    pthread_cond_signal(&pp->cond);
    pthread_mutex_unlock(&pp->mutex);
}

/* Posts the next item and keeps this worker until it has started. */
static void hop_execute(ex_work *w) {
    hop_item *it = (hop_item *)w;
    ping_pong *pp = it->pp;
    uint64_t i = it->index;
    exi_store_rel_u64(&pp->started, i);
    if (i < pp->last) {
        must(!ex_post(sched, &pp->items[i + 1].work).code, "pool: ex_post failed");
        while (exi_load_acq_u64(&pp->started) == i) exi_pause();
    }
    hop_exit(pp);
}

static void ping_pong_cexec(void *p) {
    size_t handoffs = *(size_t *)p;
    ping_pong pp = { .last = handoffs, .done = false };
    pp.items = calloc(handoffs + 1, sizeof *pp.items);
    must(pp.items != NULL, "pool: out of memory");
    for (size_t i = 0; i <= handoffs; i++) pp.items[i] = (hop_item){ { NULL, hop_execute, NULL }, &pp, i };
    pthread_mutex_init(&pp.mutex, NULL);
    pthread_cond_init(&pp.cond, NULL);
    must(!ex_post(sched, &pp.items[0].work).code, "pool: ex_post failed");
    pthread_mutex_lock(&pp.mutex);
    while (!pp.done) pthread_cond_wait(&pp.cond, &pp.mutex);
    pthread_mutex_unlock(&pp.mutex);
    pthread_mutex_destroy(&pp.mutex);
    pthread_cond_destroy(&pp.cond);
    free(pp.items);
}

static void ping_pong_tbb(void *p) { tbb_pool_ping_pong(*(size_t *)p); }
static void ping_pong_omp(void *p) { omp_pool_ping_pong(*(size_t *)p); }

static void bench_ping_pong(bool quick) {
    if (workers < 2) {
        printf("pool: hand-off between two workers skipped (the pool has 1 worker)\n");
        return;
    }
    size_t handoffs = quick ? 2000 : 20000;
    const char *name = "hand-off between two workers";
    bench_measure("pool", name, "cexec", (double)handoffs, 1, runs, ping_pong_cexec, &handoffs, us_per_op, "us/hand-off");
    bench_measure("pool", name, "tbb", (double)handoffs, 1, runs, ping_pong_tbb, &handoffs, us_per_op, "us/hand-off");
    bench_measure("pool", name, "openmp", (double)handoffs, 1, runs, ping_pong_omp, &handoffs, us_per_op,
                  "us/hand-off");
}

/* ------------------------------------------------------------------ group */

void bench_pool_group(bool quick) {
    tbb_pool_init((int)workers);
    ex_sender *batch = batch_sender_new(sched, BATCH_K);
    size_t batches = quick ? 32 : 256;   /* x 256 operations per run */
    bench_outside(batch, batches);
    bench_nested(batch, batches);
    ex_sender_release(batch);
    bench_ping_pong(quick);
    bench_round_trip(quick);
    bench_idle(quick);
    tbb_pool_fini();
}
