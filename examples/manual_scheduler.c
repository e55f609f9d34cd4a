/* SPDX-License-Identifier: MIT */
/* manual_scheduler.c - stepping a pipeline by hand (cexec/manual_scheduler.h).
 *
 * Work scheduled on a manual scheduler runs only when the program runs it,
 * on the thread that asks: a test can look at the state of a pipeline
 * between any two steps.  Here two continuations run one step at a time, a
 * timer is stopped before it is due, and a third continuation is left
 * queued for the destroy, which completes it with set_stopped. */
#include <stdalign.h>
#include <stdio.h>

#include <cexec/cexec.h>

/* A receiver that counts how its operation completed. */
typedef struct outcome {
    int values, errors, stops;
    ex_stop_source stop;   /* its environment's stop token */
    ex_env_pair env;
    ex_operation *op;      /* in storage, destroyed once it completed */
    alignas(max_align_t) unsigned char storage[256];  /* the operation state */
} outcome;

static void on_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    ((outcome *)self)->values++;
}
static void on_error(void *self, ex_error e) {
    ex_error_release(e);
    ((outcome *)self)->errors++;
}
static void on_stopped(void *self) { ((outcome *)self)->stops++; }
static ex_env on_env(void *self) { return ex_env_of_pair(&((outcome *)self)->env); }

static const ex_receiver_vtable outcome_vt = { on_value, on_error, on_stopped, on_env, NULL };

/* Connects s into o's storage and starts it; s is released. */
static void start(ex_sender *s, outcome *o) {
    ex_stop_source_init(&o->stop);
    ex_env_pair_init(&o->env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&o->stop)), ex_env_empty());
    o->op = NULL;
    ex_error e = ex_connect(s, (ex_receiver){ &outcome_vt, o }, o->storage, sizeof o->storage, &o->op);
    ex_sender_release(s);
    if (e.code) {
        fprintf(stderr, "manual_scheduler: connect: %s\n", e.msg);
        ex_error_release(e);
        o->errors++;
        return;
    }
    ex_start(o->op);
}

static int failures;

static void check(bool ok, const char *what) {
    printf("manual_scheduler: %-44s %s\n", what, ok ? "ok" : "FAILED");
    if (!ok) failures++;
}

static ex_error count_step(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    ++*(int *)ctx;
    return ex_ok();
}

int main(void) {
    int steps = 0;
    outcome op[4] = { 0 };

    ex_manual_scheduler m;
    if (ex_manual_scheduler_init(&m).code) return 1;
    ex_scheduler sch = ex_manual_scheduler_get(&m);

    ex_sender *first = ex_then(ex_schedule(sch), count_step, &steps, EX_SIG0, EX_SIG0);
    ex_sender *second = ex_then(ex_schedule(sch), count_step, &steps, EX_SIG0, EX_SIG0);
    start(first, &op[0]);
    start(second, &op[1]);
    check(steps == 0, "nothing runs until the test runs it");
    check(ex_manual_pending(&m) == 2, "two items wait");

    check(ex_manual_run_one(&m), "one item ran");
    check(steps == 1 && op[0].values == 1 && op[1].values == 0, "the first one, in FIFO order");
    check(ex_manual_run_until_idle(&m) == 1, "the second one");

    /* A timer an hour away: armed, not runnable; a stop removes it at once. */
    start(ex_schedule_after(sch, 3600 * EX_NS_PER_S), &op[2]);
    check(ex_manual_timers_armed(&m) == 1 && ex_manual_pending(&m) == 0, "the timer is armed, not pending");
    (void)ex_stop_source_request_stop(&op[2].stop);
    check(op[2].stops == 1 && ex_manual_timers_armed(&m) == 0, "a stop completes it at once");

    /* Work left queued completes with set_stopped when the scheduler goes. */
    start(ex_then(ex_schedule(sch), count_step, &steps, EX_SIG0, EX_SIG0), &op[3]);
    check(ex_manual_scheduler_destroy(&m).code == 0, "destroyed");
    check(op[3].stops == 1 && steps == 2, "the queued item was stopped, not run");

    for (int i = 0; i < 4; i++)
        if (op[i].op) ex_operation_destroy(op[i].op);
    printf("manual_scheduler: %s\n", failures ? "FAILED" : "all checks passed");
    return failures != 0;
}
