/* SPDX-License-Identifier: MIT */
/* soak.c - the soak test's main: configuration, the allocators and
 * execution resources it owns, rounds, memory baselines, progress, the
 * watchdog and the final summary.  See soak.h and docs/RELIABILITY.md.
 *
 *   soak [--seconds S] [--seed X] [--workers N] [--drivers N] [--inflight N]
 *        [--churn N] [--round S] [--report S] [--watchdog S] [--warmup S]
 *        [--heap-tol-mb M] [--rss-tol-mb M] [--vm-tol-mb M] [--churn-move-race 0|1]
 *
 * The run is cut into rounds (5 s).  Each round draws its parameters
 * (stop and fault rates, mode weights, a scope stop) from the seed, runs
 * the drivers, then closes and joins the round's scopes, waits for every
 * slot to be reaped and every churn thread (churn.c: pools, strands,
 * contexts and run loops created and destroyed under running tasks) to end
 * its cycle, and checks that the soak's own allocators hold no block and
 * that the process heap, RSS and address space (VmSize) stayed within
 * their tolerance of the baseline taken after the warm-up.  Exit status 0 only when nothing
 * was violated. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "soak.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOAK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOAK_SANITIZED 1
#endif
#endif

#ifdef SOAK_SANITIZED
size_t __sanitizer_get_current_allocated_bytes(void);
static uint64_t heap_bytes(void) { return __sanitizer_get_current_allocated_bytes(); }
static const char *build_kind = "sanitizer build (heap: the sanitizer's allocated bytes; RSS and VmSize not checked)";
#else
#include <malloc.h>
static uint64_t heap_bytes(void) {
    struct mallinfo2 m = mallinfo2();
    return (uint64_t)m.uordblks + (uint64_t)m.hblkhd;
}
static const char *build_kind = "plain build (heap: mallinfo2 in-use bytes)";
#endif

soak_world W;

double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { MAX_REPORTED = 20 };

void violation(const slot *s, const char *fmt, ...) {
    uint64_t n = __atomic_add_fetch(&W.violations, 1, __ATOMIC_RELAXED);
    if (n > MAX_REPORTED) return;
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    static char where[4096];  /* under stderr's lock */
    flockfile(stderr);
    fprintf(stderr, "soak: VIOLATION: %s\n", msg);
    if (s) {
        slot_describe(s, where, sizeof where);
        fprintf(stderr, "  in %s\n", where);
    }
    if (n == MAX_REPORTED) fprintf(stderr, "soak: further violations are only counted\n");
    funlockfile(stderr);
}

void node_bad(node *nd, const char *what) {
    __atomic_fetch_add(&nd->bad, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&nd->owner->bad_what, what, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ memory */

/* Fields of /proc/self/status, in bytes: VmSize (address space), VmRSS,
 * VmHWM (the peak resident set). */
typedef struct vmstatus {
    uint64_t size, rss, hwm;
} vmstatus;

static vmstatus vm_status(void) {
    vmstatus v = { 0, 0, 0 };
    char line[256];
    unsigned long long kb;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1) v.size = (uint64_t)kb * 1024;
        else if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) v.rss = (uint64_t)kb * 1024;
        else if (sscanf(line, "VmHWM: %llu kB", &kb) == 1) v.hwm = (uint64_t)kb * 1024;
    }
    fclose(f);
    return v;
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

/* Heap and RSS are judged net of what the recycling allocators hold: their
 * per-thread caches and shared depot may grow, by design, to tens of MiB
 * (bounded: docs/allocators.md), which says nothing about a leak. */
typedef struct memsample {
    uint64_t heap, rss, cached, dflt, vm;
    uint64_t heap_net, rss_net;  /* minus what the recycling allocators hold */
} memsample;

typedef struct memstate {
    bool have_first, have_base;
    memsample first, base, max, last;  /* first: the first round's end; max: at round ends after the warm-up */
} memstate;

static memstate M;

/* The default allocator holds senders and shared states (all released
 * between rounds) and the pool's retired deque arrays (bounded by the
 * operations in flight). */
#define DFLT_TOL_MB 1.0

static uint64_t in_use(const ex_allocator *a) {
    ex_alloc_stats st;
    ex_allocator_stats(a, &st);
    return st.bytes_in_use;
}

static uint64_t net(uint64_t total, uint64_t cached) { return total > cached ? total - cached : 0; }

static memsample sample(void) {
    memsample m;
    vmstatus v = vm_status();
    m.heap = heap_bytes();
    m.rss = v.rss;
    m.vm = v.size;
    m.cached = in_use(ex_budget_allocator_get(&W.rec_under));
    m.dflt = in_use(ex_budget_allocator_get(&W.dflt));
    m.heap_net = net(m.heap, m.cached);
    m.rss_net = net(m.rss, m.cached);
    return m;
}

static uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static void sample_max(memsample *mx, const memsample *m) {
    mx->heap_net = max64(mx->heap_net, m->heap_net);
    mx->rss_net = max64(mx->rss_net, m->rss_net);
    mx->dflt = max64(mx->dflt, m->dflt);
    mx->vm = max64(mx->vm, m->vm);
}

/* An allocator the soak owns must hold no block between rounds. */
static void check_empty(const char *what, const ex_allocator *a) {
    ex_alloc_stats st;
    ex_allocator_stats(a, &st);
    if (st.bytes_in_use || st.allocations != st.frees)
        violation(NULL, "%s allocator: %llu bytes in use, %llu allocations vs %llu frees at the end of round %u", what,
                  (unsigned long long)st.bytes_in_use, (unsigned long long)st.allocations,
                  (unsigned long long)st.frees, W.round);
}

/* Every allocator the soak owns or drives, empty between rounds. */
static void check_owned(void) {
    check_empty("recycling", ex_recycling_allocator_get(W.rec));
    check_empty("jemalloc", ex_jemalloc_allocator_get(W.je));
    check_empty("budget", ex_budget_allocator_get(&W.budget));
    if (W.pool_frames) check_empty("pool's frame", W.pool_frames);
}

static void check_growth(const char *what, uint64_t base, uint64_t now, double tol_mb) {
    if (now > base + (uint64_t)(tol_mb * 1024 * 1024))
        violation(NULL, "%s grew from %.2f to %.2f MiB (tolerance %.1f MiB) by the end of round %u", what, mib(base),
                  mib(now), tol_mb, W.round);
}

static void check_memory(double elapsed) {
    check_owned();
    memsample m = sample();
    M.last = m;
    if (!M.have_first) {
        M.have_first = true;
        M.first = m;
    }
    printf("soak: round %u ended at %.1f s (stops %u%%, faults %u%% up to %u ppm, scope stop at %.1f s): heap %.2f MiB "
           "(%.2f in recycling caches, net %.2f), RSS %.2f MiB (net %.2f), VmSize %.1f MiB, default allocator %.1f KiB\n",
           W.round, elapsed, W.rp.stop_pct, W.rp.fault_pct, W.rp.fault_ppm_max, W.rp.scope_stop_at, mib(m.heap),
           mib(m.cached), mib(m.heap_net), mib(m.rss), mib(m.rss_net), mib(m.vm), (double)m.dflt / 1024.0);
    if (!M.have_base) {
        if (elapsed < W.cfg.warmup_s) return;
        M.have_base = true;
        M.base = M.max = m;
        printf("soak: baseline after %.1f s of warm-up: net heap %.2f MiB, net RSS %.2f MiB, VmSize %.1f MiB\n", elapsed,
               mib(m.heap_net), mib(m.rss_net), mib(m.vm));
        return;
    }
    sample_max(&M.max, &m);
    check_growth("the heap (net of the recycling caches)", M.base.heap_net, m.heap_net, W.cfg.heap_tol_mb);
    check_growth("the default allocator's bytes in use", M.base.dflt, m.dflt, DFLT_TOL_MB);
    /* Plain builds only: ASan's quarantine and stack depot and TSan's shadow
     * grow both with the run (ASan, 60 s without the churn: VmSize +110 MiB). */
#ifndef SOAK_SANITIZED
    check_growth("RSS (net of the recycling caches)", M.base.rss_net, m.rss_net, W.cfg.rss_tol_mb);
    check_growth("the address space (VmSize)", M.base.vm, m.vm, W.cfg.vm_tol_mb);
#endif
}

/* ------------------------------------------------------------ rounds */

static void draw_round_params(uint32_t round) {
    uint64_t rng = mix64(W.cfg.seed ^ mix64(0x80000000ull + round)) | 1;
    static const uint32_t stops[] = { 0, 5, 20, 50 }, faults[] = { 0, 10, 30, 60 };
    static const uint32_t base_weights[M_COUNT] = { 30, 10, 20, 15, 15, 10 };
    round_params *p = &W.rp;
    p->stop_pct = stops[rng_below(&rng, 4)];
    p->prestop_pct = rng_below(&rng, 3) == 0 ? 5 : 0;
    p->fault_pct = faults[rng_below(&rng, 4)];
    p->fault_ppm_max = rng_below(&rng, 2) ? 20000 : 200000;
    for (int m = 0; m < M_COUNT; m++) p->mode_weights[m] = base_weights[m] * (1 + rng_below(&rng, 3));
    bool scope_stop = rng_below(&rng, 10) < 4 || round == 1;  /* round 1: every run has one */
    double at = W.cfg.round_s * (0.2 + 0.6 * (double)rng_below(&rng, 1000) / 1000.0);
    p->scope_stop_at = scope_stop ? at : 0;
}

static void phase_wait(const uint32_t *counter, uint32_t want) {
    pthread_mutex_lock(&W.ph_mu);
    while (*counter < want) pthread_cond_wait(&W.ph_cv, &W.ph_mu);
    pthread_mutex_unlock(&W.ph_mu);
}

static void begin_round(uint32_t round) {
    pthread_mutex_lock(&W.round_mu);
    __atomic_store_n(&W.round, round, __ATOMIC_RELAXED);  /* the watchdog reads it */
    draw_round_params(round);
    ex_error e1 = ex_counting_scope_init(&W.cscope), e2 = ex_simple_counting_scope_init(&W.sscope);
    if (e1.code || e2.code) {
        fprintf(stderr, "soak: cannot create the round's scopes\n");
        exit(2);
    }
    W.scopes_live = true;
    __atomic_store_n(&W.scope_stop, 0, __ATOMIC_RELAXED);
    W.round_t0 = now_s();
    pthread_mutex_unlock(&W.round_mu);
    pthread_mutex_lock(&W.ph_mu);
    W.drained = W.finished = 0;
    __atomic_store_n(&W.closing, 0, __ATOMIC_RELEASE);
    W.ph_round++;
    pthread_cond_broadcast(&W.ph_cv);
    pthread_mutex_unlock(&W.ph_mu);
}

static void join_scope(ex_sender *join, const char *what) {
    ex_result r = ex_sync_wait(join);
    if (r.disposition != EX_DISP_VALUE)
        violation(NULL, "the %s scope's join completed with %s (%s) in round %u", what,
                  r.disposition == EX_DISP_ERROR ? "an error" : "stopped", r.error.msg ? r.error.msg : "", W.round);
    ex_result_destroy(&r);
}

/* Closes the round: no new operation, every slot reaped, the scopes
 * joined and destroyed, memory checked. */
static void end_round(double elapsed) {
    __atomic_store_n(&W.closing, 1, __ATOMIC_RELEASE);
    phase_wait(&W.drained, W.cfg.drivers + W.cfg.churn);
    pthread_mutex_lock(&W.round_mu);
    W.scopes_live = false;  /* the stopper leaves the scopes alone from now on */
    pthread_mutex_unlock(&W.round_mu);
    ex_counting_scope_close(&W.cscope);
    ex_simple_counting_scope_close(&W.sscope);
    join_scope(ex_counting_scope_join(&W.cscope), "counting");
    join_scope(ex_simple_counting_scope_join(&W.sscope), "simple counting");
    pthread_mutex_lock(&W.ph_mu);
    W.joined = W.ph_round;
    pthread_cond_broadcast(&W.ph_cv);
    pthread_mutex_unlock(&W.ph_mu);
    phase_wait(&W.finished, W.cfg.drivers + W.cfg.churn);
    ex_error e1 = ex_counting_scope_destroy(&W.cscope), e2 = ex_simple_counting_scope_destroy(&W.sscope);
    if (e1.code || e2.code) violation(NULL, "destroying the round's scopes failed: %d / %d", e1.code, e2.code);
    bump(&W.progress, 1);
    check_memory(elapsed);
}

/* ------------------------------------------------------------ reports, watchdog */

static uint64_t kind_total(int m, int k) { return rd(&W.kstat[m][k]); }

static uint64_t stops_total(void) { return rd(&W.stops_slot) + rd(&W.stops_prestart) + rd(&W.stops_scope) + rd(&W.stops_drop); }

static double start_t;

static void report(uint64_t *last, double *last_t) {
    double t = now_s(), dt = t - *last_t;
    char rates[512];
    size_t len = 0;
    uint64_t all = 0;
    for (int m = 0; m < M_COUNT; m++) {
        uint64_t done = kind_total(m, K_COMPLETED) + kind_total(m, K_REFUSED);
        all += done - last[m];
        int n = snprintf(rates + len, sizeof rates - len, " %s %.0f", mode_name(m), dt > 0 ? (double)(done - last[m]) / dt : 0.0);
        if (n > 0 && (size_t)n < sizeof rates - len) len += (size_t)n;
        last[m] = done;
    }
    vmstatus v = vm_status();
    printf("soak: [%6.1f s] round %u | ops/s%s | all %.0f/s | churn %" PRIu64 " cycles, %" PRIu64 "/%" PRIu64
           " tasks | allocation failures %" PRIu64 " | stops %" PRIu64 " | violations %" PRIu64
           " | heap %.1f MiB, RSS %.1f MiB, VmSize %.1f MiB\n",
           t - start_t, __atomic_load_n(&W.round, __ATOMIC_RELAXED), rates, dt > 0 ? (double)all / dt : 0.0,
           rd(&W.churn[C_CYCLES]), rd(&W.churn[C_LAUNCHED]), rd(&W.churn[C_COMPLETED]), rd(&W.faults), stops_total(),
           rd(&W.violations), mib(heap_bytes()), mib(v.rss), mib(v.size));
    fflush(stdout);
    *last_t = t;
}

static void watchdog_fire(double idle) {
    fprintf(stderr, "soak: WATCHDOG: no progress for %.0f s (round %u, closing %u, drivers drained %u, finished %u); "
            "operations not yet reaped:\n",
            idle, __atomic_load_n(&W.round, __ATOMIC_RELAXED), __atomic_load_n(&W.closing, __ATOMIC_RELAXED),
            __atomic_load_n(&W.drained, __ATOMIC_RELAXED), __atomic_load_n(&W.finished, __ATOMIC_RELAXED));
    dump_slots();
    dump_churn();
    for (unsigned i = 0; W.pool && i < ex_pool_size(W.pool); i++) {
        ex_pool_worker_stats st;
        if (ex_pool_worker_stats_get(W.pool, i, &st).code == 0)
            fprintf(stderr, "  pool worker %u: executed %llu, stolen %llu, parked %llu, woken %llu\n", i,
                    (unsigned long long)st.executed, (unsigned long long)st.stolen, (unsigned long long)st.parked,
                    (unsigned long long)st.woken);
    }
    fprintf(stderr, "soak: FAIL: hang (seed 0x%016" PRIx64 ")\n", W.cfg.seed);
    abort();
}

static uint32_t watch_quit;

/* Prints progress every report_s and aborts when nothing progressed for
 * watchdog_s (a hang is a failure). */
static void *watchdog_main(void *arg) {
    (void)arg;
    uint64_t last_rates[M_COUNT] = { 0 }, last_p = rd(&W.progress);
    double last_report = now_s(), last_change = last_report;
    while (!__atomic_load_n(&watch_quit, __ATOMIC_ACQUIRE)) {
        struct timespec ts = { 0, 200000000 };
        nanosleep(&ts, NULL);
        double t = now_s();
        uint64_t p = rd(&W.progress);
        if (p != last_p) {
            last_p = p;
            last_change = t;
        } else if (t - last_change > W.cfg.watchdog_s) {
            watchdog_fire(t - last_change);
        }
        if (t - last_report >= W.cfg.report_s) report(last_rates, &last_report);
    }
    return NULL;
}

/* ------------------------------------------------------------ setup */

static void usage(void) {
    fprintf(stderr, "usage: soak [--seconds S] [--seed X] [--workers N] [--drivers N] [--inflight N] [--churn N]\n"
                    "            [--round S] [--report S] [--watchdog S] [--warmup S] [--heap-tol-mb M]\n"
                    "            [--rss-tol-mb M] [--vm-tol-mb M] [--churn-move-race 0|1]\n");
    exit(2);
}

static void parse_args(int argc, char **argv) {
    soak_cfg *c = &W.cfg;
    c->seconds = 60;
    c->round_s = 5;
    c->report_s = 10;
    /* Sanitizer builds run slower, and route the jemalloc allocator to
     * malloc: its per-thread caches (at most ~2.5 MiB per thread) then count
     * in the heap. */
#ifdef SOAK_SANITIZED
    c->watchdog_s = 120;
    c->heap_tol_mb = 24;
#else
    c->watchdog_s = 60;
    c->heap_tol_mb = 4;
#endif
    c->warmup_s = -1;
    c->drivers = 2;
    c->inflight = 48;
    c->rss_tol_mb = 32;
    c->vm_tol_mb = 256;
    c->churn = 1;
    c->churn_move_race = true;  /* moves race a closing pool (0: only once it refuses) */
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) usage();
        const char *k = argv[i], *v = argv[++i];
        if (!strcmp(k, "--seconds")) c->seconds = atof(v);
        else if (!strcmp(k, "--seed")) c->seed = strtoull(v, NULL, 0);
        else if (!strcmp(k, "--workers")) c->workers = (unsigned)atoi(v);
        else if (!strcmp(k, "--drivers")) c->drivers = (unsigned)atoi(v);
        else if (!strcmp(k, "--inflight")) c->inflight = (unsigned)atoi(v);
        else if (!strcmp(k, "--round")) c->round_s = atof(v);
        else if (!strcmp(k, "--report")) c->report_s = atof(v);
        else if (!strcmp(k, "--watchdog")) c->watchdog_s = atof(v);
        else if (!strcmp(k, "--warmup")) c->warmup_s = atof(v);
        else if (!strcmp(k, "--heap-tol-mb")) c->heap_tol_mb = atof(v);
        else if (!strcmp(k, "--rss-tol-mb")) c->rss_tol_mb = atof(v);
        else if (!strcmp(k, "--vm-tol-mb")) c->vm_tol_mb = atof(v);
        else if (!strcmp(k, "--churn")) c->churn = (unsigned)atoi(v);
        else if (!strcmp(k, "--churn-move-race")) c->churn_move_race = atoi(v) != 0;
        else usage();
    }
    if (!c->seed) c->seed = mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));
    if (!c->workers) c->workers = ex_default_thread_count();
    if (!c->drivers) c->drivers = 1;
    if (c->inflight < c->drivers) c->inflight = c->drivers;
    if (c->round_s <= 0) c->round_s = 5;
    if (c->warmup_s < 0) c->warmup_s = c->seconds / 5 < 10 ? c->seconds / 5 : 10;
}

static void must(ex_error e, const char *what) {
    if (!e.code) return;
    fprintf(stderr, "soak: %s failed: %s (%d)\n", what, e.msg ? e.msg : "", e.code);
    exit(2);
}

/* What work on the pool allocates from when its environment names no
 * allocator (NULL when that is the process default, counted elsewhere). */
static const ex_allocator *pool_frame_allocator(void) {
    ex_env_pair p;
    ex_env_pair_init(&p, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(W.pool)), ex_env_empty());
    const ex_allocator *a = ex_get_allocator(ex_env_of_pair(&p));
    return a == ex_default_allocator() ? NULL : a;
}

static void setup(void) {
    ex_budget_allocator_init(&W.dflt, ex_libc_allocator(), (size_t)1 << 30);
    ex_set_default_allocator(ex_budget_allocator_get(&W.dflt));
    ex_budget_allocator_init(&W.budget, ex_libc_allocator(), (size_t)4 << 20);
    ex_budget_allocator_init(&W.rec_under, ex_libc_allocator(), (size_t)1 << 40);
    must(ex_recycling_allocator_create(ex_budget_allocator_get(&W.rec_under), &W.rec), "recycling allocator");
    must(ex_jemalloc_allocator_create(W.cfg.workers + W.cfg.drivers + 3, &W.je), "jemalloc allocator");
    W.unders[U_LIBC] = ex_libc_allocator();
    W.unders[U_RECYCLE] = ex_recycling_allocator_get(W.rec);
    W.unders[U_JEMALLOC] = ex_jemalloc_allocator_get(W.je);
    W.unders[U_BUDGET] = ex_budget_allocator_get(&W.budget);
    ex_pool_config cfg = { .threads = W.cfg.workers, .name_prefix = "soak" };  /* frames: the library's default */
    must(ex_pool_create(&cfg, &W.pool), "ex_pool_create");
    W.pool_frames = pool_frame_allocator();
    must(ex_single_thread_context_init(&W.stc), "ex_single_thread_context_init");
    W.stc_tid = ex_single_thread_context_thread_id(&W.stc);
    W.sch[SCH_INLINE] = ex_inline_scheduler();
    W.sch[SCH_POOL] = ex_pool_scheduler(W.pool);
    W.sch[SCH_LOOP] = ex_single_thread_context_scheduler(&W.stc);
    pthread_mutex_init(&W.round_mu, NULL);
    pthread_mutex_init(&W.ph_mu, NULL);
    pthread_cond_init(&W.ph_cv, NULL);
    slots_init();
}

/* Everything down, in order, then the process default must be empty. */
static void teardown(pthread_t stopper) {
    pthread_mutex_lock(&W.ph_mu);
    __atomic_store_n(&W.quit, 1, __ATOMIC_RELEASE);  /* the stopper reads it without the lock */
    pthread_cond_broadcast(&W.ph_cv);
    pthread_mutex_unlock(&W.ph_mu);
    for (unsigned i = 0; i < W.cfg.drivers; i++) pthread_join(W.drivers[i].th, NULL);
    churn_stop();
    pthread_join(stopper, NULL);
    bump(&W.progress, 1);
    ex_error e = ex_single_thread_context_destroy(&W.stc);
    if (e.code) violation(NULL, "destroying the single-thread context: %d", e.code);
    check_owned();  /* the pool's frame allocator goes with the pool */
    bump(&W.progress, 1);
    e = ex_pool_destroy(W.pool);
    if (e.code) violation(NULL, "destroying the pool: %d", e.code);
    W.pool = NULL;
    W.pool_frames = NULL;
    bump(&W.progress, 1);
    slots_destroy();
    ex_recycling_allocator_destroy(W.rec);
    check_empty("recycling's underlying", ex_budget_allocator_get(&W.rec_under));
    ex_jemalloc_allocator_destroy(W.je);
    ex_set_default_allocator(NULL);
    check_empty("process default", ex_budget_allocator_get(&W.dflt));
    pthread_cond_destroy(&W.ph_cv);
    pthread_mutex_destroy(&W.ph_mu);
    pthread_mutex_destroy(&W.round_mu);
}

/* ------------------------------------------------------------ summary */

static uint64_t ch(int c) { return rd(&W.churn[c]); }

/* The churn's figures; every launched task completed exactly once. */
static void churn_summary(void) {
    if (!W.cfg.churn) return;
    if (ch(C_LAUNCHED) != ch(C_COMPLETED) || ch(C_COMPLETED) != ch(C_VALUE) + ch(C_ERROR) + ch(C_STOPPED))
        violation(NULL, "churn: %" PRIu64 " tasks launched, %" PRIu64 " completed (%" PRIu64 " values, %" PRIu64
                  " errors, %" PRIu64 " stopped)", ch(C_LAUNCHED), ch(C_COMPLETED), ch(C_VALUE), ch(C_ERROR), ch(C_STOPPED));
    printf("soak: churn: %u threads, %" PRIu64 " cycles (each a pool, a strand, a single-thread context and a run loop "
           "destroyed under running tasks); tasks %" PRIu64 " launched, %" PRIu64 " completed: %" PRIu64 " values, %" PRIu64
           " errors, %" PRIu64 " stopped (%" PRIu64 " never ran their body); steps: %" PRIu64 " moves (%" PRIu64
           " refused), %" PRIu64 " schedules (%" PRIu64 " refused or dropped), %" PRIu64 " yields, %" PRIu64
           " tuples, %" PRIu64 " skipped (resource closing); %" PRIu64 " pool destroys began with %" PRIu64
           " tasks away from the pool; ex_strand_destroy EX_EBUSY %" PRIu64 " times, in %" PRIu64
           " destroys while a task that left the strand held it\n",
           W.cfg.churn, ch(C_CYCLES), ch(C_LAUNCHED), ch(C_COMPLETED), ch(C_VALUE), ch(C_ERROR), ch(C_STOPPED),
           ch(C_UNRUN), ch(C_MOVES), ch(C_MOVES_REFUSED), ch(C_SCHEDS), ch(C_SCHED_REFUSED), ch(C_YIELDS), ch(C_TUPLES),
           ch(C_SKIPPED), ch(C_POOL_AWAY), ch(C_AWAY_TASKS), ch(C_STRAND_EBUSY), ch(C_STRAND_HELD));
}

static void summary(double elapsed) {
    uint64_t st = 0, done = 0, refused = 0, out[K_COUNT] = { 0 };
    for (int m = 0; m < M_COUNT; m++) {
        if (kind_total(m, K_STARTED) != kind_total(m, K_COMPLETED))
            violation(NULL, "%s: %" PRIu64 " operations started, %" PRIu64 " completed", mode_name(m),
                      kind_total(m, K_STARTED), kind_total(m, K_COMPLETED));
        st += kind_total(m, K_STARTED);
        done += kind_total(m, K_COMPLETED);
        refused += kind_total(m, K_REFUSED);
        for (int k = K_VALUE; k < K_COUNT; k++) out[k] += kind_total(m, k);
    }
    printf("soak: per kind (started/completed, not started for want of memory):");
    for (int m = 0; m < M_COUNT; m++)
        printf(" %s %" PRIu64 "/%" PRIu64 "+%" PRIu64, mode_name(m), kind_total(m, K_STARTED), kind_total(m, K_COMPLETED),
               kind_total(m, K_REFUSED));
    printf("\nsoak: outcomes: %" PRIu64 " values, %" PRIu64 " errors, %" PRIu64 " EX_ENOMEM, %" PRIu64
           " stopped; %" PRIu64 " not checked (outcome set too large)\n",
           out[K_VALUE], out[K_ERROR], out[K_ENOMEM], out[K_STOPPED], rd(&W.unchecked));
    printf("soak: work: %" PRIu64 " task bodies, %" PRIu64 " scheduler changes, %" PRIu64 " bulk indices, %" PRIu64
           " split consumers\n",
           rd(&W.task_bodies), rd(&W.moves), rd(&W.bulk_indices), rd(&W.split_consumers));
    churn_summary();
    uint64_t v = rd(&W.violations);
    printf("soak: %s: %.1f s, seed 0x%016" PRIx64 ", %u workers, %u drivers, %u in flight, %u rounds; operations "
           "%" PRIu64 " started, %" PRIu64 " completed, %" PRIu64 " not started (EX_ENOMEM); allocation failures "
           "injected %" PRIu64 "; stops requested %" PRIu64 " (%" PRIu64 " in flight, %" PRIu64 " before start, %" PRIu64
           " scope, %" PRIu64 " dropped futures); net heap baseline %.1f MiB, max %.1f, final %.1f; net RSS baseline "
           "%.1f MiB, max %.1f, final %.1f; RSS first %.1f MiB, final %.1f; VmSize first %.1f MiB, baseline %.1f, max %.1f, "
           "final %.1f; peak RSS %.1f MiB; recycling caches at the end %.1f MiB; violations %" PRIu64 "\n",
           v ? "FAIL" : "PASS", elapsed, W.cfg.seed, W.cfg.workers, W.cfg.drivers, W.cfg.inflight, W.round + 1, st, done,
           refused, rd(&W.faults), stops_total(), rd(&W.stops_slot), rd(&W.stops_prestart), rd(&W.stops_scope),
           rd(&W.stops_drop), mib(M.base.heap_net), mib(M.max.heap_net), mib(M.last.heap_net), mib(M.base.rss_net),
           mib(M.max.rss_net), mib(M.last.rss_net), mib(M.first.rss), mib(M.last.rss), mib(M.first.vm), mib(M.base.vm),
           mib(M.max.vm), mib(M.last.vm), mib(vm_status().hwm), mib(M.last.cached), v);
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    printf("soak: seed 0x%016" PRIx64 " (replay the same graphs with SOAK_SEED=0x%016" PRIx64 "), %.0f s, %u pool workers, "
           "%u drivers, %u operations in flight, rounds of %.1f s, warm-up %.1f s; %s\n",
           W.cfg.seed, W.cfg.seed, W.cfg.seconds, W.cfg.workers, W.cfg.drivers, W.cfg.inflight, W.cfg.round_s,
           W.cfg.warmup_s, build_kind);
    fflush(stdout);
    setup();
    pthread_t stopper, watchdog;
    for (unsigned i = 0; i < W.cfg.drivers; i++) pthread_create(&W.drivers[i].th, NULL, driver_main, &W.drivers[i]);
    pthread_create(&stopper, NULL, stopper_main, NULL);
    churn_start();
    start_t = now_s();
    pthread_create(&watchdog, NULL, watchdog_main, NULL);
    for (uint32_t r = 0;; r++) {
        double left = start_t + W.cfg.seconds - now_s();
        if (left <= 0 || rd(&W.violations)) break;
        begin_round(r);
        double until = now_s() + (left < W.cfg.round_s ? left : W.cfg.round_s);
        while (now_s() < until && !rd(&W.violations)) {
            struct timespec ts = { 0, 20000000 };
            nanosleep(&ts, NULL);
        }
        end_round(now_s() - start_t);
    }
    double elapsed = now_s() - start_t;
    teardown(stopper);
    __atomic_store_n(&watch_quit, 1, __ATOMIC_RELEASE);
    pthread_join(watchdog, NULL);
    summary(elapsed);
    if (rd(&W.violations)) {
        fprintf(stderr, "soak: FAIL: %" PRIu64 " violation(s); seed 0x%016" PRIx64 "\n", rd(&W.violations), W.cfg.seed);
        return 1;
    }
    return 0;
}
