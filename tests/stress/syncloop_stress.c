/* SPDX-License-Identifier: MIT */
/* syncloop_stress.c - sync_wait's own run loop (src/adaptors/sync_wait.c):
 * a lock-free stack of posted items that only the waiter takes from, and
 * a futex word it sleeps on.  Pool workers post to the loop (continues_on
 * the loop's scheduler) while the waiter spins, runs items, or goes to
 * sleep; the operation completes on the waiter (its last hop) or on a
 * worker (a delayed pool item last).  Each posted hop runs exactly once,
 * on the waiting thread, before sync_wait returns; every wait returns a
 * value (a lost wake-up would hang it: an alarm ends the program then).
 * Two waiting threads at once, on a pool without lent slots (the waiter
 * only waits: its loop's items come from the workers) or one with them
 * (it runs pool items too). */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <cexec/cexec.h>
#include "stress.h"
#include "stress_util.h"

enum { WAITERS = 2, ROUNDS = 1000, MAX_HOPS = 6 };

typedef struct round_ctx {
    ex_pool *pools[2];             /* [0] lends no slot: the waiter only waits */
    ex_pool *pool;                 /* this round's */
    pthread_t waiter;
    uint32_t hops;                 /* how many hop onto the loop */
    uint32_t delay[MAX_HOPS + 1];  /* spin on the worker before each (the last: the pool-only one) */
    uint32_t sleep_us[MAX_HOPS + 1];  /* then sleep that long (0: not at all) */
    uint32_t ran[MAX_HOPS];        /* times each hop's loop part ran (atomic) */
    uint32_t off_thread;           /* hop parts that ran on another thread (atomic) */
    uint32_t slow;                 /* the pool-only element comes last, after a long delay */
} round_ctx;

typedef struct hop_arg {
    round_ctx *rc;
    uint32_t i;
} hop_arg;

/* Per waiter, per hop: the ctx of the two functions of hop i. */
typedef struct waiter_ctx {
    round_ctx rc;
    hop_arg args[MAX_HOPS + 1];
    int bad;
    uint32_t slow_rounds;
} waiter_ctx;

static ex_error on_worker(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    hop_arg *a = ctx;
    spin_delay(a->rc->delay[a->i]);
    if (a->rc->sleep_us[a->i]) usleep(a->rc->sleep_us[a->i]);
    return ex_ok();
}

static ex_error on_loop(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    hop_arg *a = ctx;
    __atomic_fetch_add(&a->rc->ran[a->i], 1, __ATOMIC_RELAXED);
    if (!pthread_equal(pthread_self(), a->rc->waiter)) __atomic_fetch_add(&a->rc->off_thread, 1, __ATOMIC_RELAXED);
    return ex_ok();
}

/* let_value's function: the round's graph, given the loop's scheduler. */
static ex_sender *build(void *ctx, const ex_value *in, size_t n) {
    waiter_ctx *w = ctx;
    round_ctx *rc = &w->rc;
    if (n != 1 || in[0].type != EX_T_SCHED) return ex_just_error(ex_err(EX_EUSER, "syncloop_stress: no scheduler"));
    ex_scheduler loop = in[0].as.sched, pool = ex_pool_scheduler(rc->pool);
    ex_sender *parts[MAX_HOPS + 1];
    size_t k = 0;
    for (uint32_t i = 0; i < rc->hops; i++) {
        ex_sender *s = ex_then(ex_schedule(pool), on_worker, &w->args[i], EX_SIG0, EX_SIG0);
        parts[k++] = ex_then(ex_continues_on(s, loop), on_loop, &w->args[i], EX_SIG0, EX_SIG0);
    }
    /* Completes on a worker: when last, the completion races the waiter's sleep. */
    parts[k++] = ex_then(ex_schedule(pool), on_worker, &w->args[MAX_HOPS], EX_SIG0, EX_SIG0);
    return ex_when_all_n(parts, k);
}

static void *waiter_main(void *arg) {
    waiter_ctx *w = arg;
    round_ctx *rc = &w->rc;
    rng_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)w;
    for (uint32_t round = 0; round < ROUNDS; round++) {
        rc->waiter = pthread_self();
        rc->pool = rc->pools[rnd(2)];
        rc->hops = rnd(MAX_HOPS + 1);
        rc->off_thread = 0;
        /* Mostly short delays (the waiter spins and runs the hops as
         * they come); in some rounds sleeps of up to 20 ms, about as long
         * as the waiter spins (yielding) before it sleeps on a loaded
         * machine: the posts race its way to sleep. */
        bool sleepy = rnd(10) == 0;
        for (uint32_t i = 0; i <= MAX_HOPS; i++) {
            rc->delay[i] = rnd(2000);
            rc->sleep_us[i] = sleepy && rnd(2) ? rnd(20000) : 0;
            if (i < MAX_HOPS) rc->ran[i] = 0;
            w->args[i] = (hop_arg){ rc, i };
        }
        /* The pool-only element last: the completion comes from a worker. */
        rc->slow = sleepy && rnd(2);
        if (rc->slow) {
            rc->sleep_us[MAX_HOPS] = 20000 + rnd(10000);
            w->slow_rounds++;
        }
        ex_result r = ex_sync_wait(ex_let_value(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), build, w, EX_SIG(EX_T_SCHED)));
        int bad = 0;
        if (r.disposition != EX_DISP_VALUE) bad++;
        for (uint32_t i = 0; i < rc->hops; i++)
            if (__atomic_load_n(&rc->ran[i], __ATOMIC_RELAXED) != 1) bad++;
        if (__atomic_load_n(&rc->off_thread, __ATOMIC_RELAXED)) bad++;
        if (bad) fprintf(stderr, "round %u (%u hops): %d failed checks (disposition %d)\n", round, rc->hops, bad, r.disposition);
        w->bad += bad;
        ex_result_destroy(&r);
    }
    return NULL;
}

int main(void) {
    int checks = 0;
    alarm(60);  /* a lost wake-up: killed, not hung */
    ex_pool *lending = stress_pool_new(2, &checks), *plain = NULL;
    ex_pool_config cfg = { .threads = 2, .lend_slots = -1 };
    ex_error e = ex_pool_create(&cfg, &plain);
    checks++;
    CHECK(e.code == 0, "create: %s", e.msg ? e.msg : "");
    if (!lending || !plain) return stress_finish("syncloop_stress", checks);
    waiter_ctx *w = calloc(WAITERS, sizeof *w);
    pthread_t th[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        w[i].rc.pools[0] = plain;
        w[i].rc.pools[1] = lending;
        pthread_create(&th[i], NULL, waiter_main, &w[i]);
    }
    int bad = 0;
    uint32_t slow = 0;
    for (int i = 0; i < WAITERS; i++) {
        pthread_join(th[i], NULL);
        bad += w[i].bad;
        slow += w[i].slow_rounds;
    }
    checks++;
    CHECK(bad == 0, "%d failed checks over %d waits", bad, WAITERS * ROUNDS);
    printf("syncloop_stress: %d waits (%u completing on a worker after a long delay), every hop once on its waiter\n",
           WAITERS * ROUNDS, slow);
    free(w);
    stress_pool_free(plain, &checks);
    stress_pool_free(lending, &checks);
    return stress_finish("syncloop_stress", checks);
}
