/* SPDX-License-Identifier: MIT */
/* timers.c - the timer benchmarks ("time" group, issue 21): cexec's timers
 * (cexec/timer.h) on a run loop and on a pool of 2 workers, against libuv's
 * (bench/baselines_uv.c) in the same run.
 *
 * arm+cancel (K others)  (ns per timer)
 *   cexec: ex_connect of an ex_schedule_after(sch, 1 s) sender into the same
 *   caller storage, ex_start, ex_stop_source_request_stop on the in-place
 *   stop source of the receiver's environment (the cancel: it completes
 *   set_stopped inline) and ex_operation_destroy, n times; the source is
 *   re-initialised before each connect.  On a run loop nobody runs (one
 *   thread, as libuv), and on a pool of 2 workers from the main thread (not
 *   a worker).  K = 0 and 10000 other timers are armed before each run,
 *   their timeouts spread over [0.5 s, 1.5 s] (the same spread for libuv),
 *   so the timer under test lands inside the heap.  libuv:
 *   uv_timer_start(&t, cb, 1000, 0) + uv_timer_stop(&t) on a loop with the
 *   same K timers armed.  Two more rows tell the costs apart:
 *   "cexec-loop-at" arms ex_schedule_at(loop, now + 1 h), which reads no
 *   clock, and "libuv-clock" calls uv_update_time before each start (libuv
 *   otherwise arms from the loop time it read at its last iteration, which
 *   cexec does not do: a timeout would count from a moment already past).
 * clock read, atomic rmw  (ns)
 *   ex_now() (CLOCK_MONOTONIC through the vDSO), n times; and one
 *   uncontended compare-and-swap on a line this thread owns, n times: the
 *   unit of a thread-safe arm and cancel (the resource's lock and unlock
 *   on each, the stop callback's registration, the stop request), which a
 *   single-threaded loop like libuv's does not pay.
 * 100000 timers in [1 10] ms  (total wall time; metric: million timers/s)
 *   100,000 timers with deadlines base + d[i], d[i] pseudo-random over
 *   [1 ms, 10 ms] (microsecond steps; libuv rounds them to its whole
 *   milliseconds), from the first arm to the last completion.  cexec: one
 *   ex_schedule_at(sch, base + d[i]) sender each (built, connected into an
 *   array, released, started), base = ex_now() before the first; on a run
 *   loop run by ex_run_loop_run on the calling thread after arming (the
 *   last completion finishes it), and on the pool (armed from the main
 *   thread, which then waits).  libuv: uv_timer_start of every timer, then
 *   uv_run.  The "arming" rows are the part until the last timer is armed.
 * lateness 1 ms p50 / p99  (us)
 *   Completion time minus requested deadline, on CLOCK_MONOTONIC, over 2000
 *   1 ms timers in a row (200 with --quick), 3 discarded first.  cexec: the
 *   main thread takes deadline = ex_now() + 1 ms, arms
 *   ex_schedule_at(sch, deadline) and waits on a semaphore; the receiver
 *   reads the clock where the timer completes.  cexec-pool-idle: a pool of
 *   2 workers that has nothing else to do (default, adaptive waiting);
 *   cexec-pool-passive: the same with EX_POOL_WAIT_PASSIVE, where the
 *   keeper's timed futex wait alone wakes it; cexec-pool-busy: both workers
 *   run 1 ms items without end (spawned into a counting scope, each spawns
 *   the next), the timer fires between items; cexec-loop: a thread in
 *   ex_run_loop_run.  libuv: a chain of uv_timer_start(1 ms), each started
 *   from the previous callback after uv_update_time; its timeouts are whole
 *   milliseconds of loop time (uv_now is in ms), so "libuv" measures
 *   against CLOCK_MONOTONIC at the start + 1 ms as for cexec, and
 *   "libuv-own-due" against libuv's own millisecond deadline.
 * idle CPU  (ms of CPU per second of wall time)
 *   getrusage(RUSAGE_SELF) over 2 s (0.5 s with --quick), 50 ms after the
 *   timer was armed: a pool of 2 workers with one timer 1 h ahead, then the
 *   same pool with a 1 ms periodic timer (each firing arms the next, 1 s;
 *   0.25 s with --quick); the same on the passive pool
 *   ("cexec-pool-passive", no linger).  libuv: a thread in uv_run with one
 *   timer 1 h ahead, then a repeating 1 ms timer.  The process's CPU:
 *   every other runtime of the benchmark is idle meanwhile.  The row's size
 *   is how often the timer fired. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <semaphore.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "baselines.h"
#include "bench.h"
#include "harness.h"

enum {
    POOL_WORKERS = 2,
    OTHERS = 10000,         /* the K of the deep heap */
    BURST = 100000,         /* concurrent timers */
    LATE_SAMPLES = 2000,
    LATE_WARMUP = 3,
    MAX_RUNS = 64
};

static int nruns;  /* --runs, at most MAX_RUNS */

static const char *const late_names[2] = { "lateness 1 ms p50", "lateness 1 ms p99" };
static const char *const idle_names[2] = { "idle CPU: 1 timer 1 h ahead", "idle CPU: 1 ms periodic timer" };

/* ---------------------------------------------------------------- shared */

/* Pseudo-random offsets in [lo_us, hi_us] microseconds, the same sequence
 * for every implementation (splitmix64, fixed seed). */
static uint64_t *spread_us(size_t n, uint64_t lo_us, uint64_t hi_us, uint64_t seed) {
    uint64_t *d = malloc(n * sizeof *d);
    must(d != NULL, "time: out of memory");
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t z = (x += UINT64_C(0x9e3779b97f4a7c15));
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        z ^= z >> 31;
        d[i] = lo_us + z % (hi_us - lo_us + 1);
    }
    return d;
}

/* libuv's whole milliseconds for offsets in microseconds (rounded). */
static uint64_t *as_ms(const uint64_t *us, size_t n) {
    uint64_t *ms = malloc((n ? n : 1) * sizeof *ms);
    must(ms != NULL, "time: out of memory");
    for (size_t i = 0; i < n; i++) ms[i] = (us[i] + 500) / 1000;
    return ms;
}

/* An in-place stop source and the environment that hands out its token. */
typedef struct stop_env {
    ex_stop_source src;
    ex_env_pair pair;
} stop_env;

static void stop_env_init(stop_env *e) {
    ex_stop_source_init(&e->src);
    ex_env_pair_init(&e->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&e->src)), ex_env_empty());
}

/* Storage for n operations of sender s, each slot aligned for it. */
typedef struct op_array {
    char *base;
    size_t slot, size;
} op_array;

static op_array op_array_new(const ex_sender *s, size_t n) {
    size_t align = ex_max_size(ex_sender_op_align(s), alignof(max_align_t));
    op_array a = { NULL, ex_align_up(ex_sender_op_size(s), align), ex_sender_op_size(s) };
    a.base = aligned_alloc(align, ex_align_up(a.slot * (n ? n : 1), align));
    must(a.base != NULL, "time: out of memory");
    return a;
}
static void *op_slot(const op_array *a, size_t i) { return a->base + i * a->slot; }

static ex_pool *pool_of(ex_pool_wait_policy policy) {
    ex_pool_config cfg = { .threads = POOL_WORKERS, .wait_policy = policy };
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(&cfg, &p);
    must(!e.code, e.msg);
    return p;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Records a row from per-run figures in seconds (median, min, max);
 * metric = median * scale. */
static bench_row *record_runs(const char *name, const char *impl, double size, double *t, int n, double scale,
                              const char *unit) {
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    double median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    return bench_record("time", name, impl, size, n, median, t[0], t[n - 1], median * scale, unit);
}

static void sleep_s(double s) {
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts)) { }
}

/* ------------------------------------------------------------ arm+cancel */

/* The K others: armed before a run, cancelled after it through one stop
 * source.  On the pool a run that lasted past 0.5 s would see some fire. */
typedef struct others {
    size_t k;
    ex_sender **after;        /* ex_schedule_after(sch, d[j]) */
    op_array ops;
    ex_operation **op;
    stop_env env;
    uint64_t fired, stopped;  /* completions, possibly on a worker */
} others;

static void other_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    exi_faa_u64(&((others *)self)->fired, 1);
}
static void other_error(void *self, ex_error e) {
    (void)self, (void)e;
    must(false, "time: a timer completed with an error");
}
static void other_stopped(void *self) { exi_faa_u64(&((others *)self)->stopped, 1); }
static ex_env other_env(void *self) { return ex_env_of_pair(&((others *)self)->env.pair); }
static const ex_receiver_vtable other_vt = { other_value, other_error, other_stopped, other_env, NULL };

static void others_init(others *o, ex_scheduler sch, const uint64_t *d_us, size_t k) {
    memset(o, 0, sizeof *o);
    o->k = k;
    if (!k) return;
    o->after = malloc(k * sizeof *o->after);
    o->op = malloc(k * sizeof *o->op);
    must(o->after && o->op, "time: out of memory");
    for (size_t j = 0; j < k; j++) o->after[j] = ex_schedule_after(sch, (int64_t)d_us[j] * EX_NS_PER_US);
    must(!ex_sender_status(o->after[0]).code, "time: ex_schedule_after failed");
    o->ops = op_array_new(o->after[0], k);
}

static void others_arm(others *o) {
    stop_env_init(&o->env);
    o->fired = o->stopped = 0;
    ex_receiver r = { &other_vt, o };
    for (size_t j = 0; j < o->k; j++) {
        must(!ex_connect(o->after[j], r, op_slot(&o->ops, j), o->ops.size, &o->op[j]).code, "time: connect failed");
        ex_start(o->op[j]);
    }
}

/* Cancels what is still armed; returns how many had fired. */
static uint64_t others_cancel(others *o) {
    ex_stop_source_request_stop(&o->env.src);
    for (size_t j = 0; j < o->k; j++) ex_operation_destroy(o->op[j]);
    uint64_t fired = exi_load_acq_u64(&o->fired);
    must(fired + exi_load_acq_u64(&o->stopped) == o->k, "time: an armed timer did not complete");
    return fired;
}

static void others_fini(others *o) {
    for (size_t j = 0; j < o->k; j++) ex_sender_release(o->after[j]);
    free(o->after);
    free(o->op);
    free(o->ops.base);
}

/* The timer under test. */
typedef struct probe {
    stop_env env;
    uint64_t stopped, fired;
} probe;

static void probe_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    exi_faa_u64(&((probe *)self)->fired, 1);
}
static void probe_stopped(void *self) { ((probe *)self)->stopped++; }  /* the cancel: on this thread */
static ex_env probe_env(void *self) { return ex_env_of_pair(&((probe *)self)->env.pair); }
static const ex_receiver_vtable probe_vt = { probe_value, other_error, probe_stopped, probe_env, NULL };

/* n connect + start + request_stop + destroy; seconds. */
static double cexec_arm_cancel_run(ex_sender *after_1s, void *storage, size_t size, size_t n) {
    probe p = { .stopped = 0, .fired = 0 };
    stop_env_init(&p.env);
    ex_receiver r = { &probe_vt, &p };
    double t0 = bench_now();
    for (size_t i = 0; i < n; i++) {
        ex_stop_source_init(&p.env.src);
        ex_operation *op;
        if (ex_connect(after_1s, r, storage, size, &op).code) must(false, "time: connect failed");
        ex_start(op);
        ex_stop_source_request_stop(&p.env.src);
        ex_operation_destroy(op);
    }
    double s = bench_now() - t0;
    must(p.stopped + exi_load_acq_u64(&p.fired) == n && !exi_load_acq_u64(&p.fired),
         "time: a cancelled timer did not complete stopped");
    return s;
}

static void cexec_arm_cancel(const char *name, const char *impl, ex_scheduler sch, const uint64_t *d_us, size_t k,
                             size_t n, bool at_deadline) {
    ex_sender *after = at_deadline ? ex_schedule_at(sch, ex_now() + 3600 * EX_NS_PER_S) : ex_schedule_after(sch, EX_NS_PER_S);
    must(!ex_sender_status(after).code, "time: ex_schedule_after failed");
    op_array storage = op_array_new(after, 1);
    others o;
    others_init(&o, sch, d_us, k);
    double t[MAX_RUNS];
    uint64_t fired = 0;
    for (int i = -1; i < nruns; i++) {
        bench_progress("time / %s / %s: run %d/%d", name, impl, i + 1, nruns);
        others_arm(&o);
        double s = cexec_arm_cancel_run(after, storage.base, storage.size, n);
        fired += others_cancel(&o);
        if (i >= 0) t[i] = s;
    }
    bench_progress("");
    if (fired) printf("time: %s / %s: %llu of the other timers fired (a run took over 0.5 s)\n", name, impl,
                      (unsigned long long)fired);
    record_runs(name, impl, (double)n, t, nruns, 1e9 / (double)n, "ns/timer");
    others_fini(&o);
    free(storage.base);
    ex_sender_release(after);
}

static void libuv_arm_cancel_rows(const char *name, const uint64_t *d_us, size_t k, size_t n, bool update_time) {
    const char *impl = update_time ? "libuv-clock" : "libuv";
    uint64_t *ms = as_ms(d_us, k);
    double t[MAX_RUNS];
    for (int i = -1; i < nruns; i++) {
        bench_progress("time / %s / %s: run %d/%d", name, impl, i + 1, nruns);
        double s = libuv_arm_cancel(n, ms, k, update_time);
        if (i >= 0) t[i] = s;
    }
    bench_progress("");
    record_runs(name, impl, (double)n, t, nruns, 1e9 / (double)n, "ns/timer");
    free(ms);
}

static void bench_clock_read(size_t n) {
    double t[MAX_RUNS];
    for (int i = -1; i < nruns; i++) {
        int64_t sum = 0;
        double t0 = bench_now();
        for (size_t j = 0; j < n; j++) sum += ex_now();
        double s = bench_now() - t0;
        must(sum != 0, "time: the clock reads 0");
        if (i >= 0) t[i] = s;
    }
    record_runs("clock read", "ex_now", (double)n, t, nruns, 1e9 / (double)n, "ns/read");
    for (int i = -1; i < nruns; i++) {
        static uint64_t word;
        double t0 = bench_now();
        for (size_t j = 0; j < n; j++) {
            uint64_t seen = j;
            (void)exi_cas_u64(&word, &seen, j + 1);
        }
        double s = bench_now() - t0;
        must(exi_load_rlx_u64(&word) == n, "time: the compare-and-swap chain broke");
        word = 0;
        if (i >= 0) t[i] = s;
    }
    record_runs("atomic rmw", "cas", (double)n, t, nruns, 1e9 / (double)n, "ns/cas");
}

static void bench_arm_cancel(ex_pool *p, bool quick) {
    size_t n = quick ? 20000 : 200000;
    uint64_t *d_us = spread_us(OTHERS, 500000, 1500000, 21);
    const size_t ks[2] = { 0, OTHERS };
    for (int c = 0; c < 2; c++) {
        char name[48];
        snprintf(name, sizeof name, "arm+cancel (%zu others)", ks[c]);
        ex_run_loop loop;
        must(!ex_run_loop_init(&loop).code, "time: run loop");
        cexec_arm_cancel(name, "cexec-loop", ex_run_loop_scheduler(&loop), d_us, ks[c], n, false);
        cexec_arm_cancel(name, "cexec-loop-at", ex_run_loop_scheduler(&loop), d_us, ks[c], n, true);
        must(!ex_run_loop_destroy(&loop).code, "time: run loop destroy");
        cexec_arm_cancel(name, "cexec-pool", ex_pool_scheduler(p), d_us, ks[c], n, false);
        libuv_arm_cancel_rows(name, d_us, ks[c], n, false);
        libuv_arm_cancel_rows(name, d_us, ks[c], n, true);
    }
    free(d_us);
    bench_clock_read(n);
}

/* ------------------------------------------------------------ throughput */

typedef struct burst {
    ex_run_loop *loop;        /* the loop variant: finished by the last completion */
    uint64_t left;
    int64_t last_ns;          /* the last completion's clock */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} burst;

static void burst_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    burst *b = self;
    if (exi_faa_u64(&b->left, (uint64_t)-1) != 1) return;
    b->last_ns = ex_now();
    if (b->loop) {
        ex_run_loop_finish(b->loop);
        return;
    }
    pthread_mutex_lock(&b->mu);
    b->done = true;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}
static void burst_stopped(void *self) {
    (void)self;
    must(false, "time: a timer of the burst completed stopped");
}
static const ex_receiver_vtable burst_vt = { burst_value, other_error, burst_stopped, NULL, NULL };

/* Arms the n timers; returns base (ns) and sets *armed_ns when the last is
 * armed. */
static int64_t burst_arm(burst *b, ex_scheduler sch, const uint64_t *d_us, size_t n, op_array *ops,
                         ex_operation **op, int64_t *armed_ns) {
    ex_receiver r = { &burst_vt, b };
    int64_t base = ex_now();
    for (size_t i = 0; i < n; i++) {
        ex_sender *s = ex_schedule_at(sch, base + (int64_t)d_us[i] * EX_NS_PER_US);
        if (ex_connect(s, r, op_slot(ops, i), ops->size, &op[i]).code) must(false, "time: connect failed");
        ex_sender_release(s);
        ex_start(op[i]);
    }
    *armed_ns = ex_now();
    return base;
}

/* One run: seconds from the first arm to the last completion, and to the
 * last arm in *arming. */
static double burst_run(ex_pool *p, const uint64_t *d_us, size_t n, op_array *ops, ex_operation **op,
                        double *arming) {
    burst b = { .loop = NULL, .left = n, .last_ns = 0, .done = false };
    ex_run_loop loop;
    int64_t base, armed;
    if (!p) {
        must(!ex_run_loop_init(&loop).code, "time: run loop");
        b.loop = &loop;
        base = burst_arm(&b, ex_run_loop_scheduler(&loop), d_us, n, ops, op, &armed);
        must(!ex_run_loop_run(&loop).code, "time: run loop run");
        must(!ex_run_loop_destroy(&loop).code, "time: run loop destroy");
    } else {
        pthread_mutex_init(&b.mu, NULL);
        pthread_cond_init(&b.cv, NULL);
        base = burst_arm(&b, ex_pool_scheduler(p), d_us, n, ops, op, &armed);
        pthread_mutex_lock(&b.mu);
        while (!b.done) pthread_cond_wait(&b.cv, &b.mu);
        pthread_mutex_unlock(&b.mu);
        pthread_cond_destroy(&b.cv);
        pthread_mutex_destroy(&b.mu);
    }
    for (size_t i = 0; i < n; i++) ex_operation_destroy(op[i]);
    *arming = (double)(armed - base) * 1e-9;
    return (double)(b.last_ns - base) * 1e-9;
}

static void burst_rows(const char *name, const char *arm_name, const char *impl, ex_pool *p, const uint64_t *d_us,
                       size_t n) {
    ex_run_loop scratch;  /* a loop's operation size, for the loop variant */
    must(!ex_run_loop_init(&scratch).code, "time: run loop");
    ex_sender *probe_s = ex_schedule_at(p ? ex_pool_scheduler(p) : ex_run_loop_scheduler(&scratch), 0);
    must(!ex_sender_status(probe_s).code, "time: ex_schedule_at failed");
    op_array ops = op_array_new(probe_s, n);
    ex_sender_release(probe_s);
    must(!ex_run_loop_destroy(&scratch).code, "time: run loop destroy");
    ex_operation **op = malloc(n * sizeof *op);
    must(op != NULL, "time: out of memory");
    double t[MAX_RUNS], a[MAX_RUNS];
    for (int i = -1; i < nruns; i++) {
        bench_progress("time / %s / %s: run %d/%d", name, impl, i + 1, nruns);
        double arming, s = burst_run(p, d_us, n, &ops, op, &arming);
        if (i >= 0) t[i] = s, a[i] = arming;
    }
    bench_progress("");
    bench_row *row = record_runs(name, impl, (double)n, t, nruns, 0, "M/s");
    row->metric = (double)n / row->median_s * 1e-6;  /* million timers per second */
    record_runs(arm_name, impl, (double)n, a, nruns, 1e9 / (double)n, "ns/timer");
    free(op);
    free(ops.base);
}

static void libuv_burst_rows(const char *name, const char *arm_name, const uint64_t *d_us, size_t n) {
    uint64_t *ms = as_ms(d_us, n);
    double t[MAX_RUNS], a[MAX_RUNS];
    for (int i = -1; i < nruns; i++) {
        bench_progress("time / %s / libuv: run %d/%d", name, i + 1, nruns);
        double arming, s = libuv_throughput(ms, n, &arming);
        if (i >= 0) t[i] = s, a[i] = arming;
    }
    bench_progress("");
    bench_row *row = record_runs(name, "libuv", (double)n, t, nruns, 0, "M/s");
    row->metric = (double)n / row->median_s * 1e-6;
    record_runs(arm_name, "libuv", (double)n, a, nruns, 1e9 / (double)n, "ns/timer");
    free(ms);
}

static void bench_burst(ex_pool *p, bool quick) {
    size_t n = quick ? BURST / 10 : BURST;
    uint64_t *d_us = spread_us(n, 1000, 10000, 2026);
    char name[48], arm_name[48];
    snprintf(name, sizeof name, "%zu timers in [1 10] ms", n);
    snprintf(arm_name, sizeof arm_name, "%zu timers: arming", n);
    burst_rows(name, arm_name, "cexec-loop", NULL, d_us, n);
    burst_rows(name, arm_name, "cexec-pool", p, d_us, n);
    libuv_burst_rows(name, arm_name, d_us, n);
    free(d_us);
}

/* -------------------------------------------------------------- lateness */

typedef struct late {
    int64_t done_ns;   /* the clock where the timer completed */
    sem_t sem;
} late;

static void late_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    late *l = self;
    l->done_ns = ex_now();
    sem_post(&l->sem);
}
static void late_stopped(void *self) {
    (void)self;
    must(false, "time: a 1 ms timer completed stopped");
}
static const ex_receiver_vtable late_vt = { late_value, other_error, late_stopped, NULL, NULL };

/* Records the p50 and p99 rows of n lateness samples (seconds). */
static void late_rows(const char *impl, double *t, size_t n) {
    const double ps[2] = { 0.50, 0.99 };
    for (int k = 0; k < 2; k++) {
        double v = bench_percentile(t, n, ps[k]);  /* sorted from here on */
        bench_record("time", late_names[k], impl, 1e3, (int)n, v, t[0], t[n - 1], v * 1e6, "us");
    }
}

/* n 1 ms timers in a row on sch, armed from this thread.  With
 * random_phase each is armed after a pause of 0-1 ms (the same pauses in
 * every run): the next arm would otherwise follow the last completion at
 * once, in step with the busy pool's item boundaries (the completion runs
 * between two items, and 1 ms later the next item ends just in time). */
static void cexec_lateness(const char *impl, ex_scheduler sch, size_t n, bool random_phase) {
    uint64_t *pause_us = random_phase ? spread_us(n + LATE_WARMUP, 0, 1000, 7) : NULL;
    double *t = malloc(n * sizeof *t);
    ex_sender *probe_s = ex_schedule_at(sch, 0);
    must(t && !ex_sender_status(probe_s).code, "time: lateness setup");
    op_array storage = op_array_new(probe_s, 1);
    ex_sender_release(probe_s);
    late l;
    must(!sem_init(&l.sem, 0, 0), "time: sem_init");
    ex_receiver r = { &late_vt, &l };
    for (int i = -LATE_WARMUP; i < (int)n; i++) {
        bench_progress("time / lateness / %s: %d/%zu", impl, i + 1, n);
        if (pause_us) sleep_s((double)pause_us[i + LATE_WARMUP] * 1e-6);
        int64_t deadline = ex_now() + EX_NS_PER_MS;
        ex_sender *s = ex_schedule_at(sch, deadline);
        ex_operation *op;
        if (ex_connect(s, r, storage.base, storage.size, &op).code) must(false, "time: connect failed");
        ex_sender_release(s);
        ex_start(op);
        while (sem_wait(&l.sem)) { }
        ex_operation_destroy(op);
        if (i >= 0) t[i] = (double)(l.done_ns - deadline) * 1e-9;
    }
    bench_progress("");
    sem_destroy(&l.sem);
    late_rows(impl, t, n);
    free(storage.base);
    free(t);
    free(pause_us);
}

/* The busy pool: chains of 1 ms items, each spawning the next into a
 * counting scope until `stop`. */
typedef struct busy {
    ex_scheduler sch;
    ex_counting_scope scope;
    uint32_t stop;
} busy;

static ex_error busy_item(void *ctx, const ex_value *in, size_t n, ex_value *out);

static void busy_spawn(busy *b) {
    ex_sender *s = ex_then(ex_schedule(b->sch), busy_item, b, EX_SIG0, EX_SIG0);
    must(!ex_spawn(s, ex_counting_scope_token(&b->scope)).code, "time: ex_spawn failed");
}

static ex_error busy_item(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    busy *b = ctx;
    int64_t end = ex_now() + EX_NS_PER_MS;
    while (ex_now() < end) exi_pause();
    if (!exi_load_acq_u32(&b->stop)) busy_spawn(b);
    return ex_ok();
}

static void busy_lateness(ex_pool *p, size_t n) {
    busy b = { .sch = ex_pool_scheduler(p), .stop = 0 };
    must(!ex_counting_scope_init(&b.scope).code, "time: scope");
    for (unsigned w = 0; w < POOL_WORKERS; w++) busy_spawn(&b);
    sleep_s(0.02);  /* both workers at it */
    cexec_lateness("cexec-pool-busy", ex_pool_scheduler(p), n, true);
    exi_store_rel_u32(&b.stop, 1);
    ex_result r = ex_sync_wait(ex_counting_scope_join(&b.scope));
    must(r.disposition == EX_DISP_VALUE, "time: the busy chains failed");
    must(!ex_counting_scope_destroy(&b.scope).code, "time: scope destroy");
}

static void *loop_main(void *arg) {
    must(!ex_run_loop_run(arg).code, "time: run loop run");
    return NULL;
}

static void loop_lateness(size_t n) {
    ex_run_loop loop;
    must(!ex_run_loop_init(&loop).code, "time: run loop");
    pthread_t t;
    must(!pthread_create(&t, NULL, loop_main, &loop), "time: pthread_create");
    cexec_lateness("cexec-loop", ex_run_loop_scheduler(&loop), n, false);
    ex_run_loop_finish(&loop);
    pthread_join(t, NULL);
    must(!ex_run_loop_destroy(&loop).code, "time: run loop destroy");
}

static void bench_lateness(ex_pool *p, ex_pool *passive, bool quick) {
    size_t n = quick ? LATE_SAMPLES / 10 : LATE_SAMPLES;
    cexec_lateness("cexec-pool-idle", ex_pool_scheduler(p), n, false);
    cexec_lateness("cexec-pool-passive", ex_pool_scheduler(passive), n, false);
    busy_lateness(p, n);
    loop_lateness(n);
    double *t = malloc(n * sizeof *t), *own = malloc(n * sizeof *own);
    must(t && own, "time: out of memory");
    bench_progress("time / lateness / libuv");
    libuv_lateness(n, t, own);
    bench_progress("");
    late_rows("libuv", t, n);
    late_rows("libuv-own-due", own, n);
    free(t);
    free(own);
}

/* -------------------------------------------------------------- idle CPU */

static double process_cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

/* CPU seconds per second over a window. */
static double cpu_per_s(double window) {
    double c0 = process_cpu_s(), t0 = bench_now();
    sleep_s(window);
    return (process_cpu_s() - c0) / (bench_now() - t0);
}

/* A periodic timer: each firing arms the next (two operation states in
 * turn), until the stop source of their environment is requested. */
typedef struct ticker {
    ex_sender *every;          /* ex_schedule_after(sch, period) */
    op_array ops;              /* two slots */
    unsigned next_slot;
    stop_env env;
    uint64_t ticks;
    sem_t ended;               /* posted by the stopped completion */
} ticker;

static void tick_arm(ticker *k);

static void tick_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    ticker *k = self;
    k->ticks++;   /* one firing at a time: each arms the next */
    tick_arm(k);
}
static void tick_stopped(void *self) { sem_post(&((ticker *)self)->ended); }
static ex_env tick_env(void *self) { return ex_env_of_pair(&((ticker *)self)->env.pair); }
static const ex_receiver_vtable tick_vt = { tick_value, other_error, tick_stopped, tick_env, NULL };

static void tick_arm(ticker *k) {
    ex_receiver r = { &tick_vt, k };
    ex_operation *op;
    void *slot = op_slot(&k->ops, k->next_slot);
    k->next_slot ^= 1u;
    if (ex_connect(k->every, r, slot, k->ops.size, &op).code) must(false, "time: connect failed");
    ex_start(op);
}

/* Runs a timer of `period_ns` on sch for the window after settling;
 * returns CPU seconds per second and sets *ticks. */
static double ticker_cpu(ex_scheduler sch, int64_t period_ns, double window, uint64_t *ticks) {
    ticker k = { .every = ex_schedule_after(sch, period_ns), .next_slot = 0, .ticks = 0 };
    must(!ex_sender_status(k.every).code, "time: ex_schedule_after failed");
    k.ops = op_array_new(k.every, 2);
    stop_env_init(&k.env);
    must(!sem_init(&k.ended, 0, 0), "time: sem_init");
    tick_arm(&k);
    sleep_s(0.05);
    double per_s = cpu_per_s(window);
    ex_stop_source_request_stop(&k.env.src);
    while (sem_wait(&k.ended)) { }
    sem_destroy(&k.ended);
    *ticks = k.ticks;
    free(k.ops.base);
    ex_sender_release(k.every);
    return per_s;
}

static void idle_row(const char *name, const char *impl, double per_s, uint64_t ticks) {
    /* median_s: CPU seconds per second, so the ms column reads ms/s; size:
     * how often the timer fired in the window and around it. */
    bench_record("time", name, impl, (double)ticks, 1, per_s, per_s, per_s, per_s * 1e3, "ms/s");
}

static void cexec_idle_rows(const char *impl, ex_pool *p, double window, double periodic) {
    uint64_t ticks = 0;
    bench_progress("time / idle CPU, 1 timer 1 h ahead / %s", impl);
    double per_s = ticker_cpu(ex_pool_scheduler(p), 3600 * EX_NS_PER_S, window, &ticks);
    idle_row(idle_names[0], impl, per_s, ticks);
    bench_progress("time / idle CPU, 1 ms periodic timer / %s", impl);
    per_s = ticker_cpu(ex_pool_scheduler(p), EX_NS_PER_MS, periodic, &ticks);
    idle_row(idle_names[1], impl, per_s, ticks);
}

static void bench_idle_cpu(ex_pool *p, ex_pool *passive, bool quick) {
    double window = quick ? 0.5 : 2.0, periodic = quick ? 0.25 : 1.0;
    const char *hour = idle_names[0], *every = idle_names[1];
    cexec_idle_rows("cexec-pool", p, window, periodic);
    cexec_idle_rows("cexec-pool-passive", passive, window, periodic);
    bench_progress("time / %s / libuv", hour);
    libuv_idle *u = libuv_idle_start(0);
    sleep_s(0.05);
    double per_s = cpu_per_s(window);
    idle_row(hour, "libuv", per_s, libuv_idle_stop(u));
    bench_progress("time / %s / libuv", every);
    u = libuv_idle_start(1);
    sleep_s(0.05);
    per_s = cpu_per_s(periodic);
    idle_row(every, "libuv", per_s, libuv_idle_stop(u));
    bench_progress("");
}

/* --------------------------------------------------------------- targets */

/* A row's metric (ns/timer, us, ms/s), or -1 when it was not measured. */
static double metric_of(const char *name, const char *impl) {
    const bench_row *r = bench_find("time", name, impl);
    return r ? r->metric : -1;
}

static void target(const char *what, double cexec, double limit, const char *unit) {
    bool met = cexec >= 0 && limit > 0 && cexec <= limit;
    printf("  %-46s %10.3f %-5s limit %10.3f  cexec/limit %5.2f  %s\n", what, cexec, unit, limit,
           limit > 0 ? cexec / limit : 0, met ? "met" : "MISSED");
}

void bench_time_targets(void) {
    if (!bench_find("time", late_names[1], "libuv")) return;
    printf("\ntime: the targets of issue 21 (limits: libuv in this run, or the issue's figure; libuv's timeouts\n"
           "are whole milliseconds of its loop time, its lateness is measured against CLOCK_MONOTONIC)\n");
    for (size_t k = 0; k <= OTHERS; k += OTHERS) {
        char name[48], what[96];
        snprintf(name, sizeof name, "arm+cancel (%zu others)", k);
        double uv = metric_of(name, "libuv");
        snprintf(what, sizeof what, "%s loop <= libuv", name);
        target(what, metric_of(name, "cexec-loop"), uv, "ns");
        snprintf(what, sizeof what, "%s pool <= libuv", name);
        target(what, metric_of(name, "cexec-pool"), uv, "ns");
    }
    const char *p99 = late_names[1];
    double uv = metric_of(p99, "libuv");
    target("lateness p99, idle pool <= libuv", metric_of(p99, "cexec-pool-idle"), uv, "us");
    target("lateness p99, idle passive pool <= libuv", metric_of(p99, "cexec-pool-passive"), uv, "us");
    target("lateness p99, busy pool <= 2 ms", metric_of(p99, "cexec-pool-busy"), 2000, "us");
    target("idle pool, 1 timer 1 h ahead <= 10 ms CPU/s", metric_of(idle_names[0], "cexec-pool"), 10, "ms/s");
}

/* ------------------------------------------------------------------ group */

void bench_time_group(bool quick) {
    nruns = runs < MAX_RUNS ? runs : MAX_RUNS;
    ex_pool *p = pool_of(EX_POOL_WAIT_DEFAULT), *passive = pool_of(EX_POOL_WAIT_PASSIVE);
    bench_arm_cancel(p, quick);
    bench_burst(p, quick);
    bench_lateness(p, passive, quick);
    bench_idle_cpu(p, passive, quick);
    must(!ex_pool_destroy(passive).code && !ex_pool_destroy(p).code, "time: pool destroy");
}
