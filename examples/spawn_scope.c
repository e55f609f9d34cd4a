/* SPDX-License-Identifier: MIT */
/* spawn_scope.c - structured "fire and forget": a service loop spawns one
 * operation per incoming request into a counting scope, never waits for any
 * of them individually, and joins the scope at shutdown.  A spawn_future
 * fetches one result on the side; a second batch is cancelled with the
 * scope's request_stop.
 *
 *   build/examples/spawn_scope [requests]      (default 1000) */
#include <stdio.h>
#include <stdlib.h>

#include <cexec/cexec.h>

typedef struct service {
    unsigned long long handled, cancelled;
    unsigned long long checksum;
} service;

/* One request: some work, counted.  Runs on the parallel scheduler. */
static ex_error handle(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)out;
    service *svc = ctx;
    uint64_t id = n ? in[0].as.u : 0, h = id;
    for (int k = 0; k < 1000; k++) h = h * 6364136223846793005ull + 1442695040888963407ull;
    __atomic_fetch_add(&svc->checksum, h & 0xffff, __ATOMIC_RELAXED);
    __atomic_fetch_add(&svc->handled, 1, __ATOMIC_RELAXED);
    return ex_ok();
}

/* A request cancelled before it ran completes stopped: count it. */
static ex_error on_cancelled(void *ctx, ex_value *out) {
    (void)out;
    __atomic_fetch_add(&((service *)ctx)->cancelled, 1, __ATOMIC_RELAXED);
    return ex_ok();
}

static ex_error answer(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(42);
    return ex_ok();
}

int main(int argc, char **argv) {
    unsigned requests = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 1000;
    ex_scheduler sch = ex_parallel_scheduler();
    service svc = { 0, 0, 0 };
    ex_counting_scope scope;
    ex_error e;
    if ((e = ex_counting_scope_init(&scope)).code) {
        fprintf(stderr, "spawn_scope: %s\n", e.msg);
        return 1;
    }
    ex_scope_token token = ex_counting_scope_token(&scope);

    /* The service loop: one spawned operation per request. */
    for (unsigned i = 0; i < requests; i++) {
        ex_sender *req = ex_then(ex_continues_on(ex_just(ex_uint(i)), sch), handle, &svc, EX_SIG(EX_T_UINT), EX_SIG0);
        if ((e = ex_spawn(req, token)).code) fprintf(stderr, "spawn_scope: spawn: %s\n", e.msg);
    }

    /* One result wanted on the side. */
    ex_sender *fut = ex_spawn_future(ex_then(ex_schedule(sch), answer, NULL, EX_SIG0, EX_SIG(EX_T_INT)), token);
    ex_result r = ex_sync_wait(fut);
    long long side = r.disposition == EX_DISP_VALUE ? (long long)r.values[0].as.i : -1;

    /* A batch that is cancelled before it runs: stop the scope first. */
    ex_counting_scope_request_stop(&scope);
    for (unsigned i = 0; i < 100; i++) {
        /* The schedule sees the scope's stop token already stopped
         * and completes set_stopped without running handle. */
        ex_sender *req = ex_upon_stopped(ex_then(ex_schedule(sch), handle, &svc, EX_SIG0, EX_SIG0), on_cancelled, &svc,
                                         EX_SIG0);
        if ((e = ex_spawn(req, token)).code) fprintf(stderr, "spawn_scope: spawn: %s\n", e.msg);
    }

    /* Shutdown: no new work, wait for everything spawned. */
    ex_counting_scope_close(&scope);
    e = ex_spawn(ex_just(), token);
    printf("spawn_scope: spawn after close: %s\n", e.msg);
    r = ex_sync_wait(ex_counting_scope_join(&scope));
    int status = r.disposition == EX_DISP_VALUE ? 0 : 1;
    printf("spawn_scope: joined; %llu requests handled (of %u), %llu cancelled, side result %lld, checksum %llu\n",
           svc.handled, requests, svc.cancelled, side, svc.checksum);
    if (svc.handled != requests || svc.cancelled != 100 || side != 42) status = 1;
    if (ex_counting_scope_destroy(&scope).code) status = 1;
    return status;
}
