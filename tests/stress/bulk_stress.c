/* bulk_stress.c - parallel bulk on a pool (child = ex_schedule of the pool):
 * with success every index runs exactly once; with an error injected at a
 * random index no index runs twice and the result is that error; with a
 * stop request racing from another thread the bulk completes exactly once
 * (stopped or value) and no index runs twice.  Alternates a 2-worker pool
 * (inline helper items) and a 5-worker pool (helper items allocated), and
 * ex_bulk_grain with ex_bulk_chunked. */
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include <cexec/cexec.h>
#include "stress.h"

enum { ROUNDS = 8000, SHAPE = 300 };
enum { D_NONE, D_VALUE, D_ERROR, D_STOPPED };
enum { K_OK, K_ERROR, K_STOP, K_ERROR_STOP, K_STOP_BEFORE, K_COUNT };

#include "stress_util.h"

/* Requests stop on a source; `stop_fired` says it did (first request). */
static uint32_t stop_fired;
static void request_stop(void *src) {
    if (ex_stop_source_request_stop(src)) __atomic_store_n(&stop_fired, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ receiver */

typedef struct brec {
    ex_stop_source stop;
    ex_env_pair pair;
    uint32_t calls;
    uint32_t done;
    int disp;
    size_t n;
    ex_error err;
} brec;

static void finish(brec *r, int disp) {
    r->disp = disp;
    __atomic_fetch_add(&r->calls, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
}

static void r_value(void *self, const ex_value *v, size_t n) {
    (void)v;
    brec *r = self;
    r->n = n;
    finish(r, D_VALUE);
}
static void r_error(void *self, ex_error e) {
    brec *r = self;
    r->err = e;
    finish(r, D_ERROR);
}
static void r_stopped(void *self) { finish(self, D_STOPPED); }
static ex_env r_env(void *self) { return ex_env_of_pair(&((brec *)self)->pair); }

static const ex_receiver_vtable brec_vt = { r_value, r_error, r_stopped, r_env, NULL };

static void brec_init(brec *r) {
    memset(r, 0, sizeof *r);
    ex_stop_source_init(&r->stop);
    ex_env_pair_init(&r->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&r->stop)), ex_env_empty());
}

/* ------------------------------------------------------------ bulk body */

static uint32_t counts[SHAPE];
static size_t err_index;  /* SHAPE: no error */

static ex_error one(size_t i) {
    __atomic_fetch_add(&counts[i], 1, __ATOMIC_RELAXED);
    for (volatile int k = 0; k < 20; k++) { }
    if (i == err_index) return ex_err(EX_EUSER + 7, "bulk_stress: injected error");
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
    ex_set_default_allocator(&counting_alloc);
    ex_pool *pools[2];
    unsigned sizes[2] = { 2, 5 };
    for (int i = 0; i < 2; i++) {
        ex_pool_config cfg = { .threads = sizes[i] };
        ex_error e = ex_pool_create(&cfg, &pools[i]);
        CHECK(e.code == 0, "create: %s", e.msg ? e.msg : "");
        checks++;
        if (e.code) return stress_finish("bulk_stress", checks);
    }
    long baseline = __atomic_load_n(&alloc_in_use, __ATOMIC_RELAXED);

    static agent stopper;
    agent_start(&stopper);

    static brec rec;
    static const size_t grains[] = { 0, 1, 3, 7, 16, 64, SHAPE };
    unsigned outcome[4] = { 0 }, partial = 0;
    double t0 = now_s();

    for (int round = 0; round < ROUNDS; round++) {
        int kind = (int)rnd(K_COUNT);
        ex_pool *pool = pools[round & 1];
        bool chunked = rnd(3) == 0;
        size_t grain = grains[rnd(sizeof grains / sizeof grains[0])];
        memset(counts, 0, sizeof counts);
        err_index = (kind == K_ERROR || kind == K_ERROR_STOP) ? rnd(SHAPE) : SHAPE;
        brec_init(&rec);

        ex_sender *child = ex_schedule(ex_pool_scheduler(pool));
        ex_sender *b = chunked ? ex_bulk_chunked(child, SHAPE, grain ? grain : 5, chunk_fn, NULL)
                               : ex_bulk_grain(child, SHAPE, grain, bulk_fn, NULL);
        ex_operation *op = NULL;
        ex_receiver r = { &brec_vt, &rec };
        ex_error e = ex_connect_alloc(b, r, &op);
        ex_sender_release(b);
        CHECK(e.code == 0, "round %d: connect: %s", round, e.msg ? e.msg : "");
        checks++;
        if (e.code) continue;

        bool racing = kind == K_STOP || kind == K_ERROR_STOP;
        if (kind == K_STOP_BEFORE) ex_stop_source_request_stop(&rec.stop);
        if (racing) {
            __atomic_store_n(&stop_fired, 0, __ATOMIC_RELAXED);
            agent_arm(&stopper, request_stop, &rec.stop, rnd(4) == 0 ? 0 : rnd(6000));
        }
        ex_start(op);

        bool completed = wait_flag(&rec.done);
        CHECK(completed, "round %d: bulk did not complete within 20 s", round);
        checks++;
        if (!completed) break;
        if (racing) {
            bool acked = agent_wait(&stopper);
            CHECK(acked, "round %d: stopper hung", round);
            checks++;
            if (!acked) break;
        }
        sched_yield();
        uint32_t calls = __atomic_load_n(&rec.calls, __ATOMIC_ACQUIRE);
        CHECK(calls == 1, "round %d: bulk completed %u times", round, calls);
        checks++;

        uint32_t twice = 0, ran = 0;
        for (size_t i = 0; i < SHAPE; i++) {
            uint32_t c = __atomic_load_n(&counts[i], __ATOMIC_RELAXED);
            if (c > 1) twice++;
            if (c) ran++;
        }
        CHECK(twice == 0, "round %d (kind %d, grain %zu, %s): %u indices ran more than once", round, kind, grain,
              chunked ? "chunked" : "per index", twice);
        checks++;
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
        long in_use = __atomic_load_n(&alloc_in_use, __ATOMIC_RELAXED);
        CHECK(in_use == baseline, "round %d: %ld block(s) not freed", round, in_use - baseline);
        checks++;
        if (in_use != baseline) baseline = in_use;
    }

    agent_stop(&stopper);
    for (int i = 0; i < 2; i++) {
        ex_error e = ex_pool_destroy(pools[i]);
        CHECK(e.code == 0, "destroy");
        checks++;
    }
    ex_set_default_allocator(NULL);
    printf("bulk_stress: %d rounds in %.2f s (value %u, error %u, stopped %u; %u cut short)\n", ROUNDS,
           now_s() - t0, outcome[D_VALUE], outcome[D_ERROR], outcome[D_STOPPED], partial);
    return stress_finish("bulk_stress", checks);
}
