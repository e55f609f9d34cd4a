/* SPDX-License-Identifier: MIT */
/* request.h - the request pipeline of the deadline service
 * (examples/deadline_service.c), on its own so that a test can run it on
 * schedulers of its choosing, in virtual time
 * (examples/testing/deadline_test.c).
 *
 * Request i arrives arrival_ns(i) after it starts (ex_schedule_after on
 * the request's scheduler), then waits for its "backend" (another timer:
 * 1 ms for most, 5 s for the slow ones, and the failing ones end with an
 * owned, formatted error) under ex_timeout's deadline of DEADLINE_NS from
 * its arrival.  Every request ends with exactly one outcome, noted in the
 * request: a value, an error, a timeout (an error with code EX_ETIMEDOUT,
 * never mistaken for a stop) or stopped. */
#ifndef DEADLINE_REQUEST_H
#define DEADLINE_REQUEST_H

#include <cexec/cexec.h>

enum { REQUESTS = 48, LATE_FROM = 40 };  /* requests LATE_FROM.. would arrive after the shutdown */
#define DEADLINE_NS (200 * EX_NS_PER_MS)
#define SHUTDOWN_NS (1000 * EX_NS_PER_MS)
#define EX_EBACKEND (EX_EUSER + 1)

typedef enum outcome { PENDING, VALUE, ERROR, TIMEOUT, STOPPED } outcome;
extern const char *const outcome_names[];

typedef struct request {
    int id;
    ex_scheduler sch;      /* where it arrives, calls its backend and keeps its deadline */
    int outcomes;          /* completions seen: exactly one expected */
    outcome what;
    int64_t value;
    char why[96];          /* an error's message, copied before it is released */
} request;

bool request_is_slow(int id);     /* its backend takes 5 s: it times out */
bool request_fails(int id);       /* its backend refuses it: EX_EBACKEND */
int64_t arrival_ns(int id);
int64_t backend_ns(int id);

/* What request id should end with when the service shuts down after
 * SHUTDOWN_NS. */
outcome expected_outcome(int id);

/* Arrival, then the backend under its deadline: completes with the
 * answer (set_value(int) id * 10), the backend's error, EX_ETIMEDOUT, or
 * stopped.  r must outlive the operation. */
ex_sender *request_call(request *r);

/* request_call with its outcome noted in r: completes with set_value()
 * whatever happened. */
ex_sender *request_sender(request *r);

#endif
