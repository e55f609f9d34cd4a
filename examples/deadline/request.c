/* SPDX-License-Identifier: MIT */
/* request.c - the deadline service's request pipeline (request.h). */
#include <stdio.h>

#include "request.h"

const char *const outcome_names[] = { "pending", "value", "error", "timeout", "stopped" };

bool request_is_slow(int id) { return id % 7 == 3; }
bool request_fails(int id) { return id % 11 == 5; }
int64_t arrival_ns(int id) { return id < LATE_FROM ? id * EX_NS_PER_MS : 3000 * EX_NS_PER_MS; }
int64_t backend_ns(int id) { return (request_is_slow(id) ? 5000 : 1) * EX_NS_PER_MS; }

outcome expected_outcome(int id) {
    if (id >= LATE_FROM) return STOPPED;
    if (request_is_slow(id)) return TIMEOUT;
    return request_fails(id) ? ERROR : VALUE;
}

/* The backend answered: the request's value, or a failure that says which. */
static ex_error backend_answer(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    const request *r = ctx;
    if (request_fails(r->id)) return ex_error_format(EX_EBACKEND, "request %d: the backend refused it", r->id);
    out[0] = ex_int(r->id * 10);
    return ex_ok();
}

/* Arrived: the backend, under the request's deadline. */
static ex_sender *call_backend(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    request *r = ctx;
    ex_sender *backend =
        ex_then(ex_schedule_after(r->sch, backend_ns(r->id)), backend_answer, r, EX_SIG0, EX_SIG(EX_T_INT));
    return ex_timeout(backend, r->sch, DEADLINE_NS);
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

ex_sender *request_call(request *r) {
    return ex_let_value(ex_schedule_after(r->sch, arrival_ns(r->id)), call_backend, r, EX_SIG0);
}

ex_sender *request_sender(request *r) {
    ex_sender *s = ex_then(request_call(r), on_value, r, EX_SIG(EX_T_INT), EX_SIG0);
    s = ex_upon_error(s, on_error, r, EX_SIG0);
    return ex_upon_stopped(s, on_stopped, r, EX_SIG0);
}
