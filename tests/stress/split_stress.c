/* SPDX-License-Identifier: MIT */
/* split_stress.c - one split of a pool-scheduled child, K consumers
 * started from different threads: before the child completes, racing its
 * completion, and after it; one consumer's stop token is stopped at a
 * random moment.  The child runs exactly once per round (or never, when
 * the stop request came before the first consumer started it), and every
 * consumer completes exactly once, all with the same disposition and the
 * same value.  The shared state is freed with the last reference. */
#include <string.h>

#include "stress_util.h"

enum { ROUNDS = 12000, K = 5 };
enum { PLAN_NONE, PLAN_RACE, PLAN_BEFORE };

/* ----------------------------------------------------------------- child */

typedef struct child_ctx {
    bool fail;
    int64_t value;
    uint32_t value_runs;    /* the scheduled work ran (then's function) */
    uint32_t stopped_runs;  /* it completed stopped (let_stopped's function) */
} child_ctx;

static ex_error child_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    child_ctx *c = ctx;
    __atomic_fetch_add(&c->value_runs, 1, __ATOMIC_RELAXED);
    if (c->fail) return ex_error_format(EX_EUSER + 3, "split_stress: injected error %lld", (long long)c->value);
    out[0] = ex_int(c->value);
    return ex_ok();
}

static ex_sender *child_stopped_fn(void *ctx) {
    child_ctx *c = ctx;
    __atomic_fetch_add(&c->stopped_runs, 1, __ATOMIC_RELAXED);
    return ex_just_stopped();
}

/* --------------------------------------------------------------- actions */

static void start_consumer(void *arg) { ex_start(((srec *)arg)->op); }
static void stop_consumer(void *arg) { ex_stop_source_request_stop(&((srec *)arg)->stop); }

/* ----------------------------------------------------------------- main */

int main(void) {
    int checks = 0;
    ex_pool *pool = stress_pool_new(2, &checks);
    if (!pool) return stress_finish("split_stress", checks);
    ex_scheduler sch = ex_pool_scheduler(pool);
    long baseline = stress_in_use();

    static agent starter[2], stopper;
    agent_start(&starter[0]);
    agent_start(&starter[1]);
    agent_start(&stopper);

    static srec recs[K];
    static child_ctx ctx;
    unsigned outcome[4] = { 0 }, never_started = 0;
    double t0 = now_s();

    for (int round = 0; round < ROUNDS; round++) {
        ctx.fail = rnd(4) == 0;
        ctx.value = round;
        ctx.value_runs = ctx.stopped_runs = 0;
        ex_sender *child = ex_then(ex_schedule(sch), child_fn, &ctx, EX_SIG0, EX_SIG(EX_T_INT));
        child = ex_let_stopped(child, child_stopped_fn, &ctx);
        ex_sender *sp = ex_split(child);
        bool connected = true;
        for (int k = 0; k < K; k++) {
            srec_init(&recs[k]);
            ex_error e = ex_connect_alloc(sp, srec_receiver(&recs[k]), &recs[k].op);
            CHECK(e.code == 0, "round %d: connect %d: %s", round, k, e.msg ? e.msg : "");
            checks++;
            if (e.code) connected = false;
        }
        if (!connected) break;
        bool released_early = rnd(2) == 0;
        if (released_early) ex_sender_release(sp);  /* the consumers keep the shared state */

        uint32_t plan = rnd(20);
        plan = plan < 9 ? PLAN_NONE : plan == 9 ? PLAN_BEFORE : PLAN_RACE;
        srec *victim = &recs[rnd(K)];
        if (plan == PLAN_BEFORE) ex_stop_source_request_stop(&victim->stop);
        if (plan == PLAN_RACE) agent_arm(&stopper, stop_consumer, victim, rnd(4) == 0 ? 0 : rnd(1500));

        /* Consumers 1 and 2 from the starter threads, 0 and 4 from here
         * (0 maybe late, 4 racing), 3 once consumer 0 has completed. */
        agent_arm(&starter[0], start_consumer, &recs[1], rnd(3000));
        agent_arm(&starter[1], start_consumer, &recs[2], rnd(3000));
        if (rnd(2)) spin_delay(rnd(3000));
        ex_start(recs[0].op);
        spin_delay(rnd(2000));
        ex_start(recs[4].op);
        bool ok = wait_flag(&recs[0].done);
        if (ok) ex_start(recs[3].op);
        for (int k = 1; ok && k < K; k++) ok = wait_flag(&recs[k].done);
        CHECK(ok, "round %d: a consumer did not complete within 20 s", round);
        checks++;
        if (!ok) break;
        ok = agent_wait(&starter[0]) && agent_wait(&starter[1]) && (plan != PLAN_RACE || agent_wait(&stopper));
        CHECK(ok, "round %d: a helper thread hung", round);
        checks++;
        if (!ok) break;
        sched_yield();

        bool stop_requested = plan != PLAN_NONE;
        uint32_t vr = __atomic_load_n(&ctx.value_runs, __ATOMIC_RELAXED);
        uint32_t sr = __atomic_load_n(&ctx.stopped_runs, __ATOMIC_RELAXED);
        int disp = recs[0].disp;
        bool same = true, once = true;
        for (int k = 0; k < K; k++) {
            uint32_t c = __atomic_load_n(&recs[k].calls, __ATOMIC_ACQUIRE);
            if (c != 1) once = false;
            if (recs[k].disp != disp) same = false;
        }
        CHECK(once, "round %d: a consumer did not complete exactly once", round);
        CHECK(same, "round %d: consumers completed with different dispositions", round);
        CHECK(vr + sr == 1 || (vr + sr == 0 && disp == D_STOPPED && stop_requested),
              "round %d: child ran %u times and completed stopped %u times (disposition %d)", round, vr, sr, disp);
        checks += 3;
        if (vr + sr == 0) never_started++;
        outcome[disp]++;
        switch (disp) {
        case D_VALUE: {
            bool values_ok = !ctx.fail && vr == 1;
            for (int k = 0; k < K; k++)
                if (recs[k].n != 1 || recs[k].v[0].type != EX_T_INT || recs[k].v[0].as.i != ctx.value) values_ok = false;
            CHECK(values_ok, "round %d: wrong value completion (fail=%d, runs=%u)", round, ctx.fail, vr);
            checks++;
            break;
        }
        case D_ERROR: {
            bool err_ok = ctx.fail && vr == 1;
            for (int k = 0; k < K; k++)
                if (recs[k].err.code != EX_EUSER + 3 || !recs[k].err.msg) err_ok = false;
            CHECK(err_ok, "round %d: wrong error completion (fail=%d, runs=%u, code=%d)", round, ctx.fail, vr,
                  recs[0].err.code);
            checks++;
            break;
        }
        case D_STOPPED:
            CHECK(stop_requested && vr == 0, "round %d: stopped without a stop request, or after the work ran", round);
            checks++;
            break;
        default:
            CHECK(0, "round %d: no disposition", round);
            checks++;
        }
        if (plan == PLAN_NONE) {
            CHECK(disp == (ctx.fail ? D_ERROR : D_VALUE), "round %d: no stop request, yet disposition %d", round, disp);
            checks++;
        }

        for (int k = 0; k < K; k++) ex_operation_free(recs[k].op);
        if (!released_early) ex_sender_release(sp);
        expect_round_freed(&baseline, round, &checks);
    }

    agent_stop(&starter[0]);
    agent_stop(&starter[1]);
    agent_stop(&stopper);
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    printf("split_stress: %d rounds in %.2f s (value %u, error %u, stopped %u; child never started %u)\n", ROUNDS,
           now_s() - t0, outcome[D_VALUE], outcome[D_ERROR], outcome[D_STOPPED], never_started);
    return stress_finish("split_stress", checks);
}
