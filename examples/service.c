/* SPDX-License-Identifier: MIT */
/* service.c - the patterns of a compute service, each checked: a request
 * fans out to shards on the pool and collects their answers; a failing
 * shard stops its siblings and the request falls back; a request whose
 * caller gave up is cancelled through a stop token; audit records go to a
 * counting scope that is joined at shutdown; the same request written as a
 * task; and a request that owns its context.  docs/guide.md walks through
 * it.
 *
 *   build/examples/service */
#include <stdio.h>
#include <stdlib.h>

#include <cexec/cexec.h>

enum { SHARDS = 4 };

/* Shard `shard` of request `id`: its part of the answer.  Shard 3 of
 * request 13 fails. */
typedef struct shard_arg {
    int64_t id, shard;
} shard_arg;

static ex_error lookup(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    const shard_arg *a = ctx;
    if (a->id == 13 && a->shard == 3)
        return ex_error_format(EX_EUSER + 1, "request %lld: shard %lld is down", (long long)a->id, (long long)a->shard);
    out[0] = ex_int(a->id * 100 + a->shard);
    return ex_ok();
}

/* The shards' answers, in shard order: their sum. */
static ex_error combine(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx;
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += in[i].as.i;
    out[0] = ex_int(sum);
    return ex_ok();
}

/* A failed request answers -1, a cancelled one -2. */
static ex_error fallback(void *ctx, ex_error e, ex_value *out) {
    (void)ctx;
    ex_error_release(e);  /* given to us: answered, so released */
    out[0] = ex_int(-1);
    return ex_ok();
}

static ex_error cancelled(void *ctx, ex_value *out) {
    (void)ctx;
    out[0] = ex_int(-2);
    return ex_ok();
}

/* Fan-out: one sender per shard, each starting on the pool, collected by
 * when_all; then the combination, and the fallbacks. */
static ex_sender *request(ex_scheduler pool, shard_arg args[SHARDS]) {
    ex_sender *shards[SHARDS];
    for (int s = 0; s < SHARDS; s++)
        shards[s] = ex_starts_on(pool, ex_then(ex_just(), lookup, &args[s], EX_SIG0, EX_SIG(EX_T_INT)));
    ex_sender *all = ex_when_all_n(shards, SHARDS);
    ex_sender *sum = ex_then(all, combine, NULL, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
    return ex_upon_stopped(ex_upon_error(sum, fallback, NULL, EX_SIG(EX_T_INT)), cancelled, NULL, EX_SIG(EX_T_INT));
}

static void fill(shard_arg args[SHARDS], int64_t id) {
    for (int s = 0; s < SHARDS; s++) args[s] = (shard_arg){ id, s };
}

static int64_t expected(int64_t id) { return id * 100 * SHARDS + SHARDS * (SHARDS - 1) / 2; }

/* Audit: one record per answer, written on the side; never waited for
 * one by one. */
static int64_t audited;

static ex_error audit(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    __atomic_fetch_add(&audited, 1, __ATOMIC_RELAXED);
    return ex_ok();
}

/* The request as a task: straight-line code around the same fan-out. */
static ex_task_result request_task(ex_task *t, void *arg) {
    shard_arg *args = arg;
    ex_await_result r = ex_await(t, request(ex_task_scheduler(t), args));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_i64(r.v[0].as.i + 1);  /* the task adds its own step */
}

static int check(const char *what, ex_result *r, int64_t want) {
    int ok = r->disposition == EX_DISP_VALUE && r->values[0].as.i == want;
    printf("%-34s %s\n", what, ok ? "ok" : "WRONG");
    ex_result_destroy(r);
    return ok ? 0 : 1;
}

int main(void) {
    /* The process's parallel scheduler: its pool is created at this first
     * call and shut down when the process exits. */
    ex_scheduler sch = ex_parallel_scheduler();
    ex_counting_scope scope;
    ex_error e;
    if ((e = ex_counting_scope_init(&scope)).code) {
        fprintf(stderr, "service: %s\n", e.msg);
        return 1;
    }
    int bad = 0;
    shard_arg args[SHARDS];

    /* 1. Fan out and collect. */
    fill(args, 7);
    ex_result r = ex_sync_wait(request(sch, args));
    bad |= check("fan-out to 4 shards, collected", &r, expected(7));

    /* 2. A shard fails: its siblings are stopped, the request falls back. */
    fill(args, 13);
    r = ex_sync_wait(request(sch, args));
    bad |= check("a failing shard, the fallback", &r, -1);

    /* 3. The caller gave up: a stop request reaches every shard. */
    ex_stop_source gave_up;
    ex_stop_source_init(&gave_up);
    ex_stop_source_request_stop(&gave_up);
    fill(args, 21);
    r = ex_sync_wait(ex_write_env(request(sch, args), &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&gave_up))));
    bad |= check("a cancelled request", &r, -2);

    /* 4. Audit records on the side, joined at shutdown. */
    for (int64_t id = 0; id < 100; id++) {
        e = ex_spawn(ex_starts_on(sch, ex_then(ex_just(ex_int(id)), audit, NULL, EX_SIG(EX_T_INT), EX_SIG0)),
                     ex_counting_scope_token(&scope));
        if (e.code) bad = 1;
    }

    /* 5. The same request as a task on the pool. */
    fill(args, 5);
    r = ex_sync_wait(ex_starts_on(sch, ex_task_create(request_task, args, NULL)));
    bad |= check("the request as a task", &r, expected(5) + 1);

    /* 6. A request that owns its context: the shard arguments are freed
     * when the sender and its operation are gone. */
    shard_arg *owned = malloc(SHARDS * sizeof *owned);
    if (!owned) return 1;
    fill(owned, 9);
    r = ex_sync_wait(ex_owning_ctx(request(sch, owned), owned, free));
    bad |= check("a request that owns its context", &r, expected(9));

    ex_result joined = ex_sync_wait(ex_counting_scope_join(&scope));
    bad |= joined.disposition != EX_DISP_VALUE || __atomic_load_n(&audited, __ATOMIC_RELAXED) != 100;
    printf("%-34s %s\n", "100 audit records, scope joined", bad ? "WRONG" : "ok");
    ex_result_destroy(&joined);
    bad |= ex_counting_scope_destroy(&scope).code != 0;
    return bad;
}
