/* SPDX-License-Identifier: MIT */
/* algo_stress.c - the parallel algorithms (cexec/algorithms.h) on one
 * 4-worker pool, submitted concurrently from 3 external threads: int64
 * inclusive / exclusive scans, reductions and for_each_index of random
 * sizes (0 .. 200000, often at a tile boundary), a few generic scans, with
 * stop requests before start or racing the run, and errors injected into
 * for_each bodies.  Every operation completes exactly once, on a pool
 * worker; runs that complete with a value are exact; a stopped scan has
 * written exactly a whole-tile prefix of its output; for_each visits every
 * index exactly once (at most once when stopped or failed); every block the
 * library allocated is returned. */
#include <stdint.h>
#include <string.h>

#include "stress_util.h"

enum { SUBMITTERS = 3, MAX_ROUNDS = 1500, MAX_N = 200000, TILE = 16384 };
#define TIME_BUDGET_S 15.0
#define SENTINEL 0x5a5a5a5a5a5a5a5all

enum { K_INCL, K_EXCL, K_REDUCE, K_FOR_EACH, K_GENERIC, K_COUNT };
enum { S_NONE, S_BEFORE, S_RACE };

static ex_pool *pool;
static double deadline;      /* set before the submitters start */
static uint32_t abort_all;   /* a run hung: every submitter stops */

/* ------------------------------------------------------------ for_each */

typedef struct fe_ctx {
    uint8_t *hits;
    size_t n, fail_at;
    uint32_t bad_range;
} fe_ctx;

static ex_error fe_fn(void *ctx, size_t begin, size_t end) {
    fe_ctx *c = ctx;
    if (begin >= end || end > c->n) {
        __atomic_store_n(&c->bad_range, 1, __ATOMIC_RELAXED);
        return ex_ok();
    }
    for (size_t i = begin; i < end; i++) __atomic_fetch_add(&c->hits[i], 1, __ATOMIC_RELAXED);
    if (c->fail_at >= begin && c->fail_at < end) return ex_err(EX_EUSER + 3, "algo_stress: injected");
    return ex_ok();
}

static void sum_combine(void *ctx, void *acc, const void *x) {
    (void)ctx;
    *(uint64_t *)acc += *(const uint64_t *)x;
}

/* ------------------------------------------------------------ submitter */

typedef struct worker_state {
    int id;
    int checks, fails, rounds;
    unsigned outcome[4], cut_short;
    int64_t in[MAX_N], out[MAX_N], ref[MAX_N];
    uint8_t hits[MAX_N];
} worker_state;

#define TCHECK(ws, cond, ...)                                                             \
    do {                                                                                  \
        (ws)->checks++;                                                                   \
        if (!(cond)) {                                                                    \
            (ws)->fails++;                                                                \
            fprintf(stderr, "%s:%d: thread %d: check failed: %s: ", __FILE__, __LINE__,   \
                    (ws)->id, #cond);                                                     \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
        }                                                                                 \
    } while (0)

static size_t pick_size(void) {
    switch (rnd(4)) {
    case 0: {
        size_t k = rnd(MAX_N / TILE + 1);
        size_t n = k * TILE + rnd(3);
        n = n ? n - 1 : 0;
        return n > MAX_N ? MAX_N : n;
    }
    case 1:
        return rnd(40);
    default:
        return rnd(MAX_N + 1);
    }
}

static void one_round(worker_state *ws, int round) {
    int kind = (int)rnd(K_COUNT);
    size_t n = pick_size();
    int smode = rnd(10) < 5 ? S_NONE : rnd(3) == 0 ? S_BEFORE : S_RACE;
    int64_t init = (int64_t)(((uint64_t)rnd(UINT32_MAX) << 32) | rnd(UINT32_MAX));
    static const size_t grains[] = { 0, 1, 7, 64, 5000, MAX_N + 1 };
    size_t grain = grains[rnd(sizeof grains / sizeof grains[0])];
    for (size_t i = 0; i < n; i++) ws->in[i] = (int64_t)(((uint64_t)rnd(UINT32_MAX) << 32) ^ rnd(UINT32_MAX));
    for (size_t i = 0; i < n; i++) ws->out[i] = (int64_t)SENTINEL;
    memset(ws->hits, 0, n);

    /* the serial reference */
    uint64_t acc = kind == K_EXCL || kind == K_REDUCE ? (uint64_t)init : 0;
    for (size_t i = 0; i < n; i++) {
        if (kind == K_EXCL) ws->ref[i] = (int64_t)acc;
        acc += (uint64_t)ws->in[i];
        if (kind != K_EXCL) ws->ref[i] = (int64_t)acc;
    }
    int64_t total = (int64_t)acc;

    fe_ctx fc = { ws->hits, n, SIZE_MAX, 0 };
    if (kind == K_FOR_EACH && n && rnd(4) == 0) fc.fail_at = rnd((uint32_t)n);
    uint64_t zero = 0;
    ex_monoid m = { 8, &zero, sum_combine, NULL };
    ex_scheduler sch = ex_pool_scheduler(pool);
    ex_sender *s = NULL;
    switch (kind) {
    case K_INCL: s = ex_inclusive_scan_i64(sch, ws->in, ws->out, n); break;
    case K_EXCL: s = ex_exclusive_scan_i64(sch, ws->in, ws->out, n, init); break;
    case K_REDUCE: s = ex_reduce_i64(sch, ws->in, n, init); break;
    case K_FOR_EACH: s = ex_for_each_index(sch, n, grain, fe_fn, &fc); break;
    case K_GENERIC: s = ex_inclusive_scan(sch, &m, ws->in, ws->out, n); break;
    }
    TCHECK(ws, ex_sender_status(s).code == 0, "round %d: build: %s", round,
           ex_sender_status(s).msg ? ex_sender_status(s).msg : "");

    srec r;
    srec_init(&r);
    r.pool = pool;
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, srec_receiver(&r), &op);
    ex_sender_release(s);
    TCHECK(ws, e.code == 0, "round %d: connect: %s", round, e.msg ? e.msg : "");
    if (e.code) return;
    if (smode == S_BEFORE) ex_stop_source_request_stop(&r.stop);
    ex_start(op);
    if (smode == S_RACE) {
        spin_delay(rnd(4) == 0 ? 0 : rnd(200000));
        ex_stop_source_request_stop(&r.stop);
    }
    bool completed = wait_flag(&r.done);
    TCHECK(ws, completed, "round %d: kind %d n=%zu did not complete within 20 s", round, kind, n);
    if (!completed) {
        __atomic_store_n(&abort_all, 1, __ATOMIC_RELAXED);  /* stop every submitter; leak the op */
        return;
    }
    sched_yield();
    uint32_t calls = __atomic_load_n(&r.calls, __ATOMIC_ACQUIRE);
    TCHECK(ws, calls == 1, "round %d: completed %u times", round, calls);
    TCHECK(ws, r.worker >= 0, "round %d: completed outside the pool's workers", round);
    ws->outcome[r.disp]++;

    bool may_stop = smode != S_NONE;
    bool fails = fc.fail_at != SIZE_MAX;
    if (r.disp == D_STOPPED) {
        TCHECK(ws, may_stop, "round %d: kind %d stopped without a stop request", round, kind);
    } else if (r.disp == D_ERROR) {
        TCHECK(ws, fails && r.err.code == EX_EUSER + 3, "round %d: kind %d error %d (%s)", round, kind, r.err.code,
               r.err.msg ? r.err.msg : "");
    } else {
        TCHECK(ws, smode != S_BEFORE, "round %d: kind %d n=%zu completed with a value although stopped before start",
               round, kind, n);
        TCHECK(ws, !fails, "round %d: for_each completed with a value although index %zu failed", round, fc.fail_at);
    }

    if (kind == K_FOR_EACH) {
        TCHECK(ws, __atomic_load_n(&fc.bad_range, __ATOMIC_RELAXED) == 0, "round %d: a bad range", round);
        size_t twice = 0, missed = 0;
        for (size_t i = 0; i < n; i++) {
            uint8_t h = __atomic_load_n(&ws->hits[i], __ATOMIC_RELAXED);
            if (h > 1) twice++;
            if (!h) missed++;
        }
        TCHECK(ws, twice == 0, "round %d: for_each n=%zu grain %zu: %zu indices visited twice", round, n, grain, twice);
        if (r.disp == D_VALUE)
            TCHECK(ws, missed == 0, "round %d: for_each n=%zu grain %zu: %zu indices never visited", round, n, grain,
                   missed);
        if (r.disp == D_ERROR)
            TCHECK(ws, ws->hits[fc.fail_at] == 1, "round %d: the failing index did not run", round);
        if (smode == S_BEFORE) TCHECK(ws, missed == n, "round %d: ranges ran although stopped before start", round);
        if (r.disp != D_VALUE && missed && missed < n) ws->cut_short++;
    } else if (kind == K_REDUCE) {
        if (r.disp == D_VALUE)
            TCHECK(ws, r.n == 1 && r.v[0].type == EX_T_INT && r.v[0].as.i == total, "round %d: reduce n=%zu: %lld, want %lld",
                   round, n, (long long)r.v[0].as.i, (long long)total);
    } else {
        /* scans: a value means the exact output; stopped means a whole-tile
         * prefix is exact and the rest untouched */
        size_t written = 0;
        while (written < n && ws->out[written] == ws->ref[written]) written++;
        size_t untouched = n;
        while (untouched > 0 && ws->out[untouched - 1] == (int64_t)SENTINEL) untouched--;
        if (r.disp == D_VALUE) {
            TCHECK(ws, written == n, "round %d: kind %d n=%zu: out[%zu] = %lld, want %lld", round, kind, n, written,
                   written < n ? (long long)ws->out[written] : 0LL, written < n ? (long long)ws->ref[written] : 0LL);
            if (kind != K_GENERIC)
                TCHECK(ws, r.n == 1 && r.v[0].type == EX_T_INT && r.v[0].as.i == total,
                       "round %d: kind %d n=%zu: total %lld, want %lld", round, kind, n, (long long)r.v[0].as.i,
                       (long long)total);
        } else if (r.disp == D_STOPPED) {
            bool prefix = written >= untouched && (untouched % TILE == 0 || untouched == n);
            TCHECK(ws, prefix, "round %d: kind %d n=%zu stopped: exact up to %zu, untouched from %zu", round, kind, n,
                   written, untouched);
            if (smode == S_BEFORE) TCHECK(ws, untouched == 0, "round %d: output written although stopped before start", round);
            if (untouched && untouched < n) ws->cut_short++;
        }
    }
    ex_operation_free(op);
}

static void *submitter(void *arg) {
    worker_state *ws = arg;
    rng_state = UINT64_C(0x243f6a8885a308d3) * (uint64_t)(ws->id + 1);
    for (int round = 0; round < MAX_ROUNDS; round++) {
        if (now_s() > deadline || __atomic_load_n(&abort_all, __ATOMIC_RELAXED)) break;
        one_round(ws, round);
        ws->rounds++;
    }
    return NULL;
}

int main(void) {
    int checks = 0, rounds = 0;
    pool = stress_pool_new(4, &checks);
    if (!pool) return stress_finish("algo_stress", checks);
    long baseline = stress_in_use();
    double t0 = now_s();
    deadline = t0 + TIME_BUDGET_S;

    static worker_state ws[SUBMITTERS];
    pthread_t th[SUBMITTERS];
    for (int i = 0; i < SUBMITTERS; i++) {
        ws[i].id = i;
        pthread_create(&th[i], NULL, submitter, &ws[i]);
    }
    unsigned outcome[4] = { 0 }, cut = 0;
    for (int i = 0; i < SUBMITTERS; i++) {
        pthread_join(th[i], NULL);
        checks += ws[i].checks;
        stress_failures += ws[i].fails;
        rounds += ws[i].rounds;
        cut += ws[i].cut_short;
        for (int d = 0; d < 4; d++) outcome[d] += ws[i].outcome[d];
    }
    CHECK(rounds >= 3 * 20, "only %d rounds ran", rounds);
    checks++;
    expect_round_freed(&baseline, rounds, &checks);
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    printf("algo_stress: %d rounds from %d threads in %.2f s (value %u, error %u, stopped %u; %u cut short)\n", rounds,
           SUBMITTERS, now_s() - t0, outcome[D_VALUE], outcome[D_ERROR], outcome[D_STOPPED], cut);
    return stress_finish("algo_stress", checks);
}
