/* SPDX-License-Identifier: MIT */
/* deadline_service.c - a batch of requests, each with a deadline, and a
 * shutdown of the whole service: every request ends with exactly one of
 * value, error, timeout or stopped, and the program says which.
 *
 * Request i arrives i ms after the start (ex_schedule_after on the pool),
 * then waits for its "backend" (another timer: 1 ms for most, 5 s for
 * every 7th, and every 11th backend fails with an owned, formatted error)
 * under ex_timeout's deadline of 200 ms from its arrival.  The service
 * shuts down (ex_counting_scope_request_stop) 1 s after the start; the
 * last requests would only arrive after that, and are stopped.  A timeout
 * is an error with code EX_ETIMEDOUT: it is never mistaken for the
 * shutdown.  The margins are wide so that a loaded machine, or valgrind,
 * gives the same outcomes.
 *
 *   build/examples/deadline_service */
#include <stdio.h>
#include <string.h>

#include <cexec/cexec.h>

enum { REQUESTS = 48, LATE_FROM = 40 };  /* requests LATE_FROM.. would arrive after the shutdown */
#define DEADLINE_NS (200 * EX_NS_PER_MS)
#define SHUTDOWN_NS (1000 * EX_NS_PER_MS)
#define EX_EBACKEND (EX_EUSER + 1)

typedef enum outcome { PENDING, VALUE, ERROR, TIMEOUT, STOPPED } outcome;
static const char *const outcome_names[] = { "pending", "value", "error", "timeout", "stopped" };

typedef struct request {
    int id;
    ex_scheduler pool;
    int outcomes;          /* completions seen: exactly one expected */
    outcome what;
    int64_t value;
    char why[96];          /* an error's message, copied before it is released */
} request;

static bool slow(int id) { return id % 7 == 3; }
static bool failing(int id) { return id % 11 == 5; }
static int64_t arrival_ns(int id) { return id < LATE_FROM ? id * EX_NS_PER_MS : 3000 * EX_NS_PER_MS; }

/* What the request should end with. */
static outcome expected(int id) {
    if (id >= LATE_FROM) return STOPPED;
    if (slow(id)) return TIMEOUT;
    return failing(id) ? ERROR : VALUE;
}

/* The backend answered: the request's value, or a failure that says which. */
static ex_error backend_answer(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    const request *r = ctx;
    if (failing(r->id)) return ex_error_format(EX_EBACKEND, "request %d: the backend refused it", r->id);
    out[0] = ex_int(r->id * 10);
    return ex_ok();
}

/* Arrived: the backend, under the request's deadline. */
static ex_sender *call_backend(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    request *r = ctx;
    int64_t backend_ns = (slow(r->id) ? 5000 : 1) * EX_NS_PER_MS;
    ex_sender *backend = ex_then(ex_schedule_after(r->pool, backend_ns), backend_answer, r, EX_SIG0, EX_SIG(EX_T_INT));
    return ex_timeout(backend, r->pool, DEADLINE_NS);
}

/* The request's one outcome, noted where it completes. */
static void note(request *r, outcome what) {
    __atomic_fetch_add(&r->outcomes, 1, __ATOMIC_RELAXED);
    r->what = what;
}

static ex_error on_value(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n, (void)out;
    request *r = ctx;
    r->value = in[0].as.i;
    note(r, VALUE);
    return ex_ok();
}

/* Given the error: its message kept, the error released (cexec/error.h). */
static ex_error on_error(void *ctx, ex_error e, ex_value *out) {
    (void)out;
    request *r = ctx;
    snprintf(r->why, sizeof r->why, "%s", e.msg);
    note(r, e.code == EX_ETIMEDOUT ? TIMEOUT : ERROR);
    ex_error_release(e);
    return ex_ok();
}

static ex_error on_stopped(void *ctx, ex_value *out) {
    (void)out;
    note(ctx, STOPPED);
    return ex_ok();
}

/* Arrival, the backend under its deadline, the outcome noted. */
static ex_sender *request_sender(request *r) {
    ex_sender *s = ex_let_value(ex_schedule_after(r->pool, arrival_ns(r->id)), call_backend, r, EX_SIG0);
    s = ex_then(s, on_value, r, EX_SIG(EX_T_INT), EX_SIG0);
    s = ex_upon_error(s, on_error, r, EX_SIG0);
    return ex_upon_stopped(s, on_stopped, r, EX_SIG0);
}

int main(void) {
    ex_pool *p;
    ex_error e = ex_pool_create(NULL, &p);
    if (e.code) {
        fprintf(stderr, "deadline_service: %s\n", e.msg);
        return 1;
    }
    ex_scheduler pool = ex_pool_scheduler(p);
    ex_counting_scope scope;
    if ((e = ex_counting_scope_init(&scope)).code) {
        fprintf(stderr, "deadline_service: %s\n", e.msg);
        return 1;
    }
    static request reqs[REQUESTS];
    for (int i = 0; i < REQUESTS; i++) {
        reqs[i] = (request){ .id = i, .pool = pool };
        if ((e = ex_spawn(request_sender(&reqs[i]), ex_counting_scope_token(&scope))).code) {
            fprintf(stderr, "deadline_service: spawn: %s\n", e.msg);
            return 1;
        }
    }

    /* The service runs for a second, then shuts down: a stop to every
     * request still in flight or yet to arrive; the join waits for all. */
    ex_result r = ex_sync_wait(ex_schedule_after(pool, SHUTDOWN_NS));
    ex_result_destroy(&r);
    ex_counting_scope_request_stop(&scope);
    r = ex_sync_wait(ex_counting_scope_join(&scope));
    int joined = r.disposition == EX_DISP_VALUE;
    ex_result_destroy(&r);
    (void)ex_counting_scope_destroy(&scope);
    (void)ex_pool_destroy(p);

    int count[5] = { 0 }, bad = !joined;
    for (int i = 0; i < REQUESTS; i++) {
        const request *q = &reqs[i];
        count[q->what]++;
        bool ok = q->outcomes == 1 && q->what == expected(i) && (q->what != VALUE || q->value == i * 10);
        if (!ok || i % 8 == 3 || q->what == ERROR)
            printf("request %2d: %-7s %s%s\n", i, outcome_names[q->what], q->what == VALUE ? "" : q->why,
                   ok ? "" : "   <- unexpected");
        bad |= !ok;
    }
    printf("deadline_service: %d requests: %d values, %d errors, %d timeouts, %d stopped by the shutdown\n", REQUESTS,
           count[VALUE], count[ERROR], count[TIMEOUT], count[STOPPED]);
    if (bad) fprintf(stderr, "deadline_service: an outcome was not the expected one (or the join failed)\n");
    return bad;
}
