/* SPDX-License-Identifier: MIT */
/* when_all_stress.c - when_all of pool-scheduled children, some of which
 * fail or complete stopped, while another thread requests stop on the
 * receiver's stop token at a random moment.  Every when_all completes
 * exactly once, with a disposition consistent with what its children did
 * and with whether stop was requested; every block the library allocated
 * for a round is freed by the end of the round. */
#include <string.h>

#include "stress_util.h"

enum { ROUNDS = 6000, MAX_CHILDREN = 5 };
enum { M_VALUE, M_ERROR, M_STOPPED };
enum { PLAN_NONE, PLAN_BEFORE_START, PLAN_RACE };

/* Requests stop on a source; `stop_fired` says it did (first request). */
static uint32_t stop_fired;
static void request_stop(void *src) {
    if (ex_stop_source_request_stop(src)) __atomic_store_n(&stop_fired, 1, __ATOMIC_RELAXED);
}

/* -------------------------------------------------------------- children */

typedef struct child_ctx {
    int mode;
    int64_t value;
    int code;
    uint32_t runs;
} child_ctx;

static ex_error val_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    child_ctx *c = ctx;
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    out[0] = ex_int(c->value);
    return ex_ok();
}

static ex_error err_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    child_ctx *c = ctx;
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    return ex_error_format(c->code, "when_all_stress: injected error %d", c->code);
}

static ex_sender *stopped_fn(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    child_ctx *c = ctx;
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    return ex_just_stopped();
}

static ex_sender *make_child(ex_scheduler sch, child_ctx *c) {
    switch (c->mode) {
    case M_VALUE: return ex_then(ex_schedule(sch), val_fn, c, EX_SIG0, EX_SIG(EX_T_INT));
    case M_ERROR: return ex_then(ex_schedule(sch), err_fn, c, EX_SIG0, EX_SIG(EX_T_INT));
    default: return ex_let_value(ex_schedule(sch), stopped_fn, c, EX_SIG0);
    }
}

/* ----------------------------------------------------------------- main */

int main(void) {
    int checks = 0;
    ex_pool *pool = stress_pool_new(3, &checks);
    if (!pool) return stress_finish("when_all_stress", checks);
    ex_scheduler sch = ex_pool_scheduler(pool);
    long baseline = stress_in_use();

    static agent stopper;
    agent_start(&stopper);

    static srec rec;
    static child_ctx ctx[MAX_CHILDREN];
    unsigned outcome[4] = { 0 };
    double t0 = now_s();

    for (int round = 0; round < ROUNDS; round++) {
        size_t n = 2 + rnd(MAX_CHILDREN - 1);
        bool any_error = false, any_stopped = false;
        uint32_t shape = rnd(8);  /* 0..3: all values, 4..5: one may fail, 6: may stop, 7: mixed */
        for (size_t i = 0; i < n; i++) {
            child_ctx *c = &ctx[i];
            c->mode = M_VALUE;
            if (shape == 4 || shape == 5 || shape == 7) c->mode = rnd(3) == 0 ? M_ERROR : c->mode;
            if (shape == 6 || shape == 7) c->mode = rnd(4) == 0 ? M_STOPPED : c->mode;
            c->value = (int64_t)round * 16 + (int64_t)i;
            c->code = EX_EUSER + (int)i;
            c->runs = 0;
            any_error |= c->mode == M_ERROR;
            any_stopped |= c->mode == M_STOPPED;
        }
        srec_init(&rec);
        ex_sender *children[MAX_CHILDREN];
        for (size_t i = 0; i < n; i++) children[i] = make_child(sch, &ctx[i]);
        ex_sender *wa = ex_when_all_n(children, n);
        ex_operation *op = srec_connect(&rec, wa, round, &checks);
        if (!op) continue;

        uint32_t plan = rnd(20);
        plan = plan < 9 ? PLAN_NONE : plan == 9 ? PLAN_BEFORE_START : PLAN_RACE;
        if (plan == PLAN_BEFORE_START) ex_stop_source_request_stop(&rec.stop);
        if (plan == PLAN_RACE) {
            __atomic_store_n(&stop_fired, 0, __ATOMIC_RELAXED);
            agent_arm(&stopper, request_stop, &rec.stop, rnd(4) == 0 ? 0 : rnd(4000));
        }
        ex_start(op);

        if (!srec_wait(&rec, "when_all", round, &checks)) break;  /* it may still run: do not free it */
        if (plan == PLAN_RACE && !agent_wait_checked(&stopper, "stopper", round, &checks)) break;
        bool stop_requested =
            plan == PLAN_BEFORE_START || (plan == PLAN_RACE && __atomic_load_n(&stop_fired, __ATOMIC_RELAXED));
        srec_expect_once(&rec, "when_all", round, &checks);

        uint32_t runs[MAX_CHILDREN];
        bool error_ran = false, stopped_ran = false, all_ran_once = true, none_ran = true, none_twice = true;
        for (size_t i = 0; i < n; i++) {
            runs[i] = __atomic_load_n(&ctx[i].runs, __ATOMIC_RELAXED);
            if (runs[i] > 1) none_twice = false;
            if (runs[i] != 1) all_ran_once = false;
            if (runs[i]) none_ran = false;
            if (runs[i] && ctx[i].mode == M_ERROR) error_ran = true;
            if (runs[i] && ctx[i].mode == M_STOPPED) stopped_ran = true;
        }
        CHECK(none_twice, "round %d: a child ran more than once", round);
        checks++;
        outcome[rec.disp]++;
        switch (rec.disp) {
        case D_VALUE: {
            CHECK(!any_error && !any_stopped, "round %d: value completion though a child was made to fail/stop", round);
            CHECK(!stop_requested || plan == PLAN_RACE, "round %d: value after stop before start", round);
            CHECK(all_ran_once, "round %d: value completion but not every child ran exactly once", round);
            bool values_ok = rec.n == n;
            for (size_t i = 0; values_ok && i < n; i++)
                values_ok = rec.v[i].type == EX_T_INT && rec.v[i].as.i == ctx[i].value;
            CHECK(values_ok, "round %d: wrong values (n=%zu, expected %zu)", round, rec.n, n);
            checks += 4;
            break;
        }
        case D_ERROR: {
            bool code_ok = false;
            for (size_t i = 0; i < n; i++)
                if (ctx[i].mode == M_ERROR && runs[i] == 1 && rec.err.code == ctx[i].code) code_ok = true;
            CHECK(code_ok, "round %d: error %d (%s) is not one a failed child sent", round, rec.err.code,
                  rec.err.msg ? rec.err.msg : "(null)");
            CHECK(rec.err.msg != NULL, "round %d: error without message", round);
            checks += 2;
            break;
        }
        case D_STOPPED:
            CHECK(!error_ran, "round %d: stopped although a child failed (error must win)", round);
            CHECK(stop_requested || stopped_ran, "round %d: stopped with no stop request and no stopped child", round);
            checks += 2;
            break;
        default:
            CHECK(0, "round %d: no disposition recorded", round);
            checks++;
        }
        if (plan == PLAN_BEFORE_START) {
            CHECK(rec.disp == D_STOPPED && none_ran, "round %d: stop before start must give stopped with no child run (disp %d)",
                  round, rec.disp);
            checks++;
        }
        if (plan == PLAN_NONE && !any_error && !any_stopped) {
            CHECK(rec.disp == D_VALUE, "round %d: no failure, no stop, yet disposition %d", round, rec.disp);
            checks++;
        }
        ex_operation_free(op);
        expect_round_freed(&baseline, round, &checks);
    }

    agent_stop(&stopper);
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    printf("when_all_stress: %d rounds in %.2f s (value %u, error %u, stopped %u)\n", ROUNDS, now_s() - t0,
           outcome[D_VALUE], outcome[D_ERROR], outcome[D_STOPPED]);
    return stress_finish("when_all_stress", checks);
}
