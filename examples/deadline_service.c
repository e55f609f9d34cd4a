/* SPDX-License-Identifier: MIT */
/* deadline_service.c - a batch of requests, each with a deadline, and a
 * shutdown of the whole service: every request ends with exactly one of
 * value, error, timeout or stopped, and the program says which.
 *
 * Request i arrives i ms after the start (ex_schedule_after on the pool),
 * then waits for its "backend" (another timer: 1 ms for most, 5 s for
 * every 7th, and every 11th backend fails with an owned, formatted error)
 * under ex_timeout's deadline of 200 ms from its arrival
 * (deadline/request.c).  The service
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

#include "deadline/request.h"  /* the pipeline of one request, tested in examples/testing/ */

int main(void) {
    ex_scheduler pool = ex_parallel_scheduler();  /* the process's pool, with its timers */
    ex_counting_scope scope;
    ex_error e;
    if ((e = ex_counting_scope_init(&scope)).code) {
        fprintf(stderr, "deadline_service: %s\n", e.msg);
        return 1;
    }
    static request reqs[REQUESTS];
    for (int i = 0; i < REQUESTS; i++) {
        reqs[i] = (request){ .id = i, .sch = pool };
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

    int count[5] = { 0 }, bad = !joined;
    for (int i = 0; i < REQUESTS; i++) {
        const request *q = &reqs[i];
        count[q->what]++;
        bool ok = q->outcomes == 1 && q->what == expected_outcome(i) && (q->what != VALUE || q->value == i * 10);
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
