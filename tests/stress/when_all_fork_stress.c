/* SPDX-License-Identifier: MIT */
/* when_all_fork_stress.c - the fork-join of when_all on a pool
 * (compose/when_all.c): fib(k) through when_all(starts_on(pool, L[k-1]),
 * L[k-2]) and let_value, as examples/fib.c builds it, on three workers
 * that steal from each other.  Each hop is taken back from its agent's
 * deque, held back, or stolen; some leaves wait on the pool with
 * ex_sync_wait (which queues the held hops of their agent), and another
 * thread requests stop at a random moment in some rounds.  Every round
 * completes exactly once: with fib(k), every leaf having run exactly once,
 * or stopped (only when stop was requested), no leaf having run twice;
 * every block the library allocated is freed by the end of the round. */
#include <string.h>

#include "stress_util.h"

enum { ROUNDS = 1500, KMIN = 4, KMAX = 15 };

static ex_scheduler pool_sch;
static uint32_t leaf_runs[2];    /* atomic: runs of F[0], F[1] */
static uint32_t stop_fired;

static void request_stop(void *src) {
    if (ex_stop_source_request_stop(src)) __atomic_store_n(&stop_fired, 1, __ATOMIC_RELAXED);
}

/* A leaf F[0] / F[1] (ctx: 0 or 1); one in eight waits on the pool first. */
static ex_error leaf(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    intptr_t k = (intptr_t)ctx;
    __atomic_fetch_add(&leaf_runs[k], 1, __ATOMIC_RELAXED);
    if (rnd(8) == 0) {
        ex_result r = ex_sync_wait(ex_schedule(pool_sch));
        ex_result_destroy(&r);
    }
    out[0] = ex_int(k);
    return ex_ok();
}

static ex_error add(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + in[1].as.i);
    return ex_ok();
}

static ex_sender *lend_f(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    return ctx;
}

static int64_t fib(int k) { return k < 2 ? k : fib(k - 1) + fib(k - 2); }

int main(void) {
    int checks = 0;
    ex_pool *pool = stress_pool_new(3, &checks);
    if (!pool) return stress_finish("when_all_fork_stress", checks);
    pool_sch = ex_pool_scheduler(pool);

    /* F[k] = then(when_all(starts_on(pool, L[k-1]), L[k-2]), +); L[k] lends F[k]. */
    ex_sender *f[KMAX + 1], *l[KMAX + 1];
    for (int k = 0; k <= KMAX; k++) {
        if (k < 2) f[k] = ex_then(ex_just(), leaf, (void *)(intptr_t)k, EX_SIG0, EX_SIG(EX_T_INT));
        else
            f[k] = ex_then(ex_when_all(ex_starts_on(pool_sch, ex_sender_retain(l[k - 1])), ex_sender_retain(l[k - 2])), add,
                           NULL, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
        l[k] = ex_let_value_borrowed(ex_just(), lend_f, f[k], EX_SIG0);
        CHECK(!ex_sender_status(f[k]).code && !ex_sender_status(l[k]).code, "k %d: invalid sender", k);
        checks++;
    }
    long baseline = stress_in_use();

    static agent stopper;
    agent_start(&stopper);
    static srec rec;
    unsigned outcome[4] = { 0 };
    double t0 = now_s();

    for (int round = 0; round < ROUNDS; round++) {
        int k = KMIN + (int)rnd(KMAX - KMIN + 1);
        __atomic_store_n(&leaf_runs[0], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&leaf_runs[1], 0, __ATOMIC_RELAXED);
        srec_init(&rec);
        ex_operation *op = srec_connect(&rec, ex_starts_on(pool_sch, ex_sender_retain(f[k])), round, &checks);
        if (!op) continue;
        bool race = rnd(4) == 0;
        if (race) {
            __atomic_store_n(&stop_fired, 0, __ATOMIC_RELAXED);
            agent_arm(&stopper, request_stop, &rec.stop, rnd(2000));
        }
        ex_start(op);
        if (!srec_wait(&rec, "fib", round, &checks)) break;  /* it may still run: do not free it */
        if (race && !agent_wait_checked(&stopper, "stopper", round, &checks)) break;
        srec_expect_once(&rec, "fib", round, &checks);
        bool stopped = race && __atomic_load_n(&stop_fired, __ATOMIC_RELAXED);
        /* Leaves: fib(k+1) in all, fib(k) of them F[1] (k >= 1). */
        uint32_t want0 = (uint32_t)fib(k - 1), want1 = (uint32_t)fib(k);
        uint32_t ran0 = __atomic_load_n(&leaf_runs[0], __ATOMIC_RELAXED), ran1 = __atomic_load_n(&leaf_runs[1], __ATOMIC_RELAXED);
        outcome[rec.disp]++;
        if (rec.disp == D_VALUE) {
            CHECK(srec_int(&rec) == fib(k), "round %d: fib(%d) = %lld, expected %lld", round, k, (long long)srec_int(&rec),
                  (long long)fib(k));
            CHECK(ran0 == want0 && ran1 == want1, "round %d: leaves ran %u + %u times, expected %u + %u", round, ran0, ran1,
                  want0, want1);
        } else {
            CHECK(rec.disp == D_STOPPED && stopped, "round %d: disposition %d without a stop request (%s)", round, rec.disp,
                  rec.disp == D_ERROR && rec.err.msg ? rec.err.msg : "");
            CHECK(ran0 <= want0 && ran1 <= want1, "round %d: leaves ran %u + %u times, at most %u + %u expected", round, ran0,
                  ran1, want0, want1);
        }
        checks += 2;
        ex_operation_free(op);
        expect_round_freed(&baseline, round, &checks);
    }

    agent_stop(&stopper);
    for (int k = 0; k <= KMAX; k++) {
        ex_sender_release(l[k]);
        ex_sender_release(f[k]);
    }
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    printf("when_all_fork_stress: %d rounds in %.2f s (value %u, stopped %u)\n", ROUNDS, now_s() - t0, outcome[D_VALUE],
           outcome[D_STOPPED]);
    return stress_finish("when_all_fork_stress", checks);
}
