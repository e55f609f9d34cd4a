/* SPDX-License-Identifier: MIT */
/* outcome_stress.c - ex_test_outcome (cexec/testing.h) completed on other
 * threads while the test thread looks at it: a pool worker completes it
 * while the test polls its checks and destroys it the moment it sees the
 * completion (the receiver must not touch it after publishing); a stop
 * request from another thread races the worker's completion; two threads
 * complete one receiver at the same moment (both counted, one kept
 * whole); the leak check sees every block the workers free.  Every
 * outcome is recorded once, whole, and read without a race (TSan). */
#include <string.h>

#include <cexec/testing.h>

#include "stress_util.h"

enum { ROUNDS = 6000, RACES = 4000 };
/* Stop a part early on a slow (sanitized, loaded) machine. */
#define PART_SECONDS 1.5

static char msg[EX_TEST_MESSAGE_MAX];

/* The test thread polls while a worker completes: every look is
 * consistent (not completed, or completed once with the value), and the
 * outcome is destroyed as soon as it is seen complete. */
static int poll_while_a_worker_completes(ex_scheduler sch) {
    int checks = 0;
    double end = now_s() + PART_SECONDS;
    for (int i = 0; i < ROUNDS && now_s() < end; i++) {
        ex_test_outcome o;
        ex_test_outcome_init(&o);
        ex_test_start(&o, ex_starts_on(sch, ex_just(ex_int(i), ex_str("done"))));
        double limit = now_s() + 20;
        while (ex_test_outcome_disposition(&o) == 0) {
            /* Completed, then not completed, is never seen (the other
             * order is the completion coming between the two looks). */
            bool done = ex_test_check_completed_once(msg, sizeof msg, &o);
            bool waiting = ex_test_check_not_completed(msg, sizeof msg, &o);
            CHECK(!(done && waiting), "round %d: completed, then not: %s", i, msg);
            if (now_s() > limit) break;
        }
        ex_value want[] = { ex_int(i), ex_str("done") };
        CHECK(ex_test_check_values(msg, sizeof msg, &o, want, 2), "round %d: %s", i, msg);
        CHECK(ex_test_outcome_thread(&o) != ex_test_thread_id(), "round %d: completed on the test thread", i);
        CHECK(ex_test_outcome_destroy(&o).code == EX_OK, "round %d: destroy refused", i);
        checks += 3;
    }
    return checks;
}

typedef struct stop_race {
    ex_test_outcome o;
} stop_race;

static void stop_it(void *arg) { ex_test_outcome_request_stop(&((stop_race *)arg)->o); }

/* A stop request from another thread races the worker: the outcome is a
 * value or stopped, exactly once. */
static int stop_racing_the_worker(ex_scheduler sch, agent *stopper) {
    int checks = 0, values = 0, stops = 0;
    static stop_race r;
    double end = now_s() + PART_SECONDS;
    for (int i = 0; i < ROUNDS && now_s() < end; i++) {
        ex_test_outcome_init(&r.o);
        ex_test_start(&r.o, ex_starts_on(sch, ex_just(ex_int(i))));
        agent_arm(stopper, stop_it, &r, rnd(400));
        bool done = ex_test_outcome_wait(&r.o, 20);
        CHECK(agent_wait(stopper), "round %d: the stopper hung", i);
        CHECK(done, "round %d: no completion", i);
        if (ex_test_outcome_disposition(&r.o) == EX_DISP_STOPPED) {
            stops++;
            CHECK(ex_test_check_stopped(msg, sizeof msg, &r.o), "round %d: %s", i, msg);
        } else {
            values++;
            CHECK(ex_test_check_value(msg, sizeof msg, &r.o, ex_int(i)), "round %d: %s", i, msg);
        }
        CHECK(ex_test_outcome_destroy(&r.o).code == EX_OK, "round %d: destroy refused", i);
        checks += 4;
    }
    printf("outcome_stress: stop race: %d values, %d stopped\n", values, stops);
    return checks;
}

typedef struct completer {
    ex_test_outcome *o;
    int kind;
} completer;

static void complete(void *arg) {
    completer *c = arg;
    ex_receiver r = ex_test_outcome_receiver(c->o);
    if (c->kind == 0) {
        ex_value v[] = { ex_int(7), ex_str("seven") };
        ex_set_value(r, v, 2);
    } else if (c->kind == 1) {
        ex_set_error(r, ex_error_format(EX_EUSER + 1, "error of round %d", 7));
    } else {
        ex_set_stopped(r);
    }
}

/* Two threads complete one receiver at the same moment: both counted,
 * the first kept whole, the second's error released. */
static int two_completions_at_once(agent *a, agent *b) {
    int checks = 0;
    static ex_test_outcome o;
    static completer ca, cb;
    double end = now_s() + PART_SECONDS;
    for (int i = 0; i < RACES && now_s() < end; i++) {
        ex_test_outcome_init(&o);
        ca = (completer){ &o, (int)rnd(3) };
        cb = (completer){ &o, (int)rnd(3) };
        agent_arm(a, complete, &ca, rnd(50));
        agent_arm(b, complete, &cb, rnd(50));
        CHECK(agent_wait(a) && agent_wait(b), "round %d: a completer hung", i);
        ex_test_counts c = ex_test_outcome_counts(&o);
        CHECK(ex_test_outcome_completions(&o) == 2 && c.values + c.errors + c.stopped == 2, "round %d: counted %u",
              i, ex_test_outcome_completions(&o));
        CHECK(!ex_test_check_completed_once(msg, sizeof msg, &o) && strstr(msg, "completed 2 times (") != NULL,
              "round %d: %s", i, msg);
        ex_disposition d = ex_test_outcome_disposition(&o);
        if (d == EX_DISP_VALUE) {
            size_t n;
            const ex_value *v = ex_test_outcome_values(&o, &n);
            CHECK(n == 2 && v[0].as.i == 7 && strcmp(v[1].as.s, "seven") == 0, "round %d: values torn", i);
        } else if (d == EX_DISP_ERROR) {
            CHECK(strcmp(ex_test_outcome_error(&o).msg, "error of round 7") == 0, "round %d: error torn", i);
        } else {
            CHECK(d == EX_DISP_STOPPED, "round %d: disposition %d", i, (int)d);
        }
        ex_test_outcome_destroy(&o);
        checks += 4;
    }
    return checks;
}

static ex_error same(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = in[0];
    return ex_ok();
}

/* Blocks the workers free after the completions come back before the
 * leak check gives up. */
static int the_leak_check_sees_the_workers_frees(ex_scheduler sch) {
    int checks = 0;
    double end = now_s() + PART_SECONDS;
    for (int i = 0; i < ROUNDS / 10 && now_s() < end; i++) {
        ex_test_allocations c;
        ex_test_allocations_begin(&c);
        c.settle_ms = 20000;
        ex_test_outcome o[4];
        for (int k = 0; k < 4; k++) {
            ex_test_outcome_init(&o[k]);
            ex_test_start(&o[k], ex_then(ex_starts_on(sch, ex_just(ex_str("x"))), same, NULL, EX_SIG(EX_T_STR),
                                         EX_SIG(EX_T_STR)));
        }
        for (int k = 0; k < 4; k++) {
            CHECK(ex_test_outcome_wait(&o[k], 20), "round %d: no completion", i);
            ex_test_outcome_destroy(&o[k]);
        }
        CHECK(ex_test_check_no_leaks(msg, sizeof msg, &c), "round %d: %s", i, msg);
        checks += 5;
    }
    return checks;
}

int main(void) {
    int checks = 0;
    /* The built-in default allocator: it keeps the statistics the leak
     * check reads (stress_pool_new would install one that does not). */
    ex_pool *pool = NULL;
    ex_pool_config cfg = { .threads = 2 };
    ex_error e = ex_pool_create(&cfg, &pool);
    CHECK(e.code == EX_OK, "pool create: %s", e.msg ? e.msg : "");
    if (e.code) return stress_finish("outcome_stress", 1);
    ex_scheduler sch = ex_pool_scheduler(pool);
    static agent a, b;
    agent_start(&a);
    agent_start(&b);

    checks += poll_while_a_worker_completes(sch);
    checks += stop_racing_the_worker(sch, &a);
    checks += two_completions_at_once(&a, &b);
    checks += the_leak_check_sees_the_workers_frees(sch);

    agent_stop(&a);
    agent_stop(&b);
    CHECK(ex_pool_destroy(pool).code == EX_OK, "pool destroy");
    return stress_finish("outcome_stress", checks + 1);
}
