/* SPDX-License-Identifier: MIT */
/* bulk_stress.c - bulk on a pool (child = ex_schedule of the pool): with
 * success every index runs exactly once; with an error injected at a
 * random index no index runs twice and the result is that error; with a
 * stop request racing from another thread the bulk completes exactly once
 * (stopped or value) and no index runs twice.  Alternates a 2-worker pool
 * (inline helper items) and a 5-worker pool (helper items allocated);
 * ex_bulk_grain, ex_bulk_chunked and ex_bulk_unchunked; and the four
 * execution policies (EX_SEQ and EX_UNSEQ must never run two calls at
 * once, and run the indices in order).  Some successful rounds run through
 * ex_sync_wait, where the waiting thread is a lent caller that queues the
 * helpers on its own deque and takes back those nobody stole. */
#include <string.h>

#include "stress_util.h"

enum { ROUNDS = 5000, SHAPE = 300 };
enum { K_OK, K_ERROR, K_STOP, K_ERROR_STOP, K_STOP_BEFORE, K_COUNT };

/* Requests stop on a source; `stop_fired` says it did (first request). */
static uint32_t stop_fired;
static void request_stop(void *src) {
    if (ex_stop_source_request_stop(src)) __atomic_store_n(&stop_fired, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ bulk body */

static uint32_t counts[SHAPE];
static size_t err_index;  /* SHAPE: no error */
/* Sequenced rounds: calls running now, calls that overlapped another, and
 * calls that came out of index order. */
static uint32_t inside, overlaps, out_of_order;
static size_t next_index;
static bool sequenced;

static ex_error one(size_t i) {
    if (sequenced) {
        if (__atomic_fetch_add(&inside, 1, __ATOMIC_RELAXED)) __atomic_fetch_add(&overlaps, 1, __ATOMIC_RELAXED);
        /* Only one call runs at a time if the policy is honoured: then
         * next_index is touched by one thread at a time, ordered by the
         * pool's hand-offs (TSan reports it otherwise). */
        if (i != next_index) __atomic_fetch_add(&out_of_order, 1, __ATOMIC_RELAXED);
        next_index = i + 1;
    }
    __atomic_fetch_add(&counts[i], 1, __ATOMIC_RELAXED);
    for (volatile int k = 0; k < 20; k++) { }
    if (sequenced) __atomic_fetch_sub(&inside, 1, __ATOMIC_RELAXED);
    if (i == err_index) return ex_error_format(EX_EUSER + 7, "bulk_stress: injected error at %zu", i);
    return ex_ok();
}

static ex_error bulk_fn(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    if (i >= SHAPE) return ex_err(EX_EUSER + 99, "bulk_stress: index out of range");
    return one(i);
}

static ex_error chunk_fn(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    (void)ctx, (void)v, (void)n;
    if (begin >= end || end > SHAPE) return ex_err(EX_EUSER + 98, "bulk_stress: bad chunk");
    for (size_t i = begin; i < end; i++) {
        ex_error e = one(i);
        if (e.code) return e;
    }
    return ex_ok();
}

/* ----------------------------------------------------------------- main */

int main(void) {
    int checks = 0;
    ex_pool *pools[2];
    unsigned sizes[2] = { 2, 5 };
    for (int i = 0; i < 2; i++) {
        pools[i] = stress_pool_new(sizes[i], &checks);
        if (!pools[i]) return stress_finish("bulk_stress", checks);
    }
    long baseline = stress_in_use();

    static agent stopper;
    agent_start(&stopper);

    static srec rec;
    static const size_t grains[] = { 0, 1, 3, 7, 16, 64, SHAPE };
    static const ex_execution_policy policies[] = { EX_PAR, EX_PAR_UNSEQ, EX_SEQ, EX_UNSEQ };
    static const char *const forms[] = { "per index", "chunked", "unchunked" };
    unsigned outcome[4] = { 0 }, partial = 0;
    double t0 = now_s();

    for (int round = 0; round < ROUNDS; round++) {
        int kind = (int)rnd(K_COUNT);
        ex_pool *pool = pools[round & 1];
        int form = (int)rnd(3);  /* forms[] */
        ex_execution_policy policy = policies[rnd(4)];
        size_t grain = grains[rnd(sizeof grains / sizeof grains[0])];
        memset(counts, 0, sizeof counts);
        sequenced = policy == EX_SEQ || policy == EX_UNSEQ;
        overlaps = out_of_order = inside = 0;
        next_index = 0;
        err_index = (kind == K_ERROR || kind == K_ERROR_STOP) ? rnd(SHAPE) : SHAPE;
        srec_init(&rec);

        ex_sender *child = ex_schedule(ex_pool_scheduler(pool));
        ex_sender *b = form == 1   ? ex_bulk_chunked(child, policy, SHAPE, grain ? grain : 5, chunk_fn, NULL)
                       : form == 2 ? ex_bulk_unchunked(child, policy, SHAPE, bulk_fn, NULL)
                                   : ex_bulk_grain(child, policy, SHAPE, grain, bulk_fn, NULL);
        if (kind == K_OK && round % 4 == 2) {
            /* From ex_sync_wait: this thread is a lent caller, the helpers
             * go to its deque quietly, and it takes back those nobody took. */
            ex_result r = ex_sync_wait(b);
            uint32_t once = 0;
            for (size_t i = 0; i < SHAPE; i++) once += __atomic_load_n(&counts[i], __ATOMIC_RELAXED) == 1;
            CHECK(r.disposition == EX_DISP_VALUE && once == SHAPE,
                  "round %d (lent caller, grain %zu): disposition %d, %u/%u indices ran once", round, grain,
                  r.disposition, once, SHAPE);
            CHECK(!sequenced || (overlaps == 0 && out_of_order == 0),
                  "round %d (lent caller, %s, policy %d): %u calls overlapped, %u out of index order", round,
                  forms[form], (int)policy, overlaps, out_of_order);
            checks += 2;
            ex_result_destroy(&r);
            outcome[D_VALUE]++;
            expect_round_freed(&baseline, round, &checks);
            continue;
        }
        ex_operation *op = srec_connect(&rec, b, round, &checks);
        if (!op) continue;

        bool racing = kind == K_STOP || kind == K_ERROR_STOP;
        if (kind == K_STOP_BEFORE) ex_stop_source_request_stop(&rec.stop);
        if (racing) {
            __atomic_store_n(&stop_fired, 0, __ATOMIC_RELAXED);
            agent_arm(&stopper, request_stop, &rec.stop, rnd(4) == 0 ? 0 : rnd(6000));
        }
        ex_start(op);

        if (!srec_wait(&rec, "bulk", round, &checks)) break;
        if (racing && !agent_wait_checked(&stopper, "stopper", round, &checks)) break;
        srec_expect_once(&rec, "bulk", round, &checks);

        uint32_t twice = 0, ran = 0;
        for (size_t i = 0; i < SHAPE; i++) {
            uint32_t c = __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
            if (c > 1) twice++;
            if (c) ran++;
        }
        CHECK(twice == 0, "round %d (kind %d, grain %zu, %s, policy %d): %u indices ran more than once", round, kind,
              grain, forms[form], (int)policy, twice);
        checks++;
        if (sequenced) {
            CHECK(overlaps == 0 && out_of_order == 0,
                  "round %d (%s, policy %d): %u calls overlapped another, %u out of index order", round, forms[form],
                  (int)policy, overlaps, out_of_order);
            checks++;
        }
        uint32_t err_ran = err_index < SHAPE ? __atomic_load_n(&counts[err_index], __ATOMIC_RELAXED) : 0;
        outcome[rec.disp]++;
        if (rec.disp != D_VALUE && ran > 0 && ran < SHAPE) partial++;
        switch (kind) {
        case K_OK:
            CHECK(rec.disp == D_VALUE && rec.n == 0 && ran == SHAPE,
                  "round %d: success expected, got disposition %d with %u/%u indices run", round, rec.disp, ran, SHAPE);
            checks++;
            break;
        case K_ERROR:
            CHECK(rec.disp == D_ERROR && rec.err.code == EX_EUSER + 7 && err_ran == 1,
                  "round %d: injected error at %zu expected, got disposition %d code %d (%s)", round, err_index,
                  rec.disp, rec.err.code, rec.err.msg ? rec.err.msg : "");
            checks++;
            break;
        case K_STOP:
            CHECK(rec.disp == D_VALUE || rec.disp == D_STOPPED, "round %d: stop race gave disposition %d", round,
                  rec.disp);
            CHECK(rec.disp != D_VALUE || ran == SHAPE, "round %d: value but only %u/%u indices ran", round, ran, SHAPE);
            checks += 2;
            break;
        case K_ERROR_STOP:
            CHECK((rec.disp == D_ERROR && rec.err.code == EX_EUSER + 7 && err_ran == 1) ||
                      (rec.disp == D_STOPPED && err_ran == 0),
                  "round %d: error+stop gave disposition %d code %d, failing index ran %u times", round, rec.disp,
                  rec.err.code, err_ran);
            checks++;
            break;
        case K_STOP_BEFORE:
            CHECK(rec.disp == D_STOPPED && ran == 0, "round %d: stop before start gave disposition %d, %u indices ran",
                  round, rec.disp, ran);
            checks++;
            break;
        }
        ex_operation_free(op);
        expect_round_freed(&baseline, round, &checks);
    }

    agent_stop(&stopper);
    for (int i = 0; i < 2; i++) stress_pool_free(pools[i], &checks);
    ex_set_default_allocator(NULL);
    printf("bulk_stress: %d rounds in %.2f s (value %u, error %u, stopped %u; %u cut short)\n", ROUNDS,
           now_s() - t0, outcome[D_VALUE], outcome[D_ERROR], outcome[D_STOPPED], partial);
    return stress_finish("bulk_stress", checks);
}
