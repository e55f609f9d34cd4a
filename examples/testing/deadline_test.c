/* SPDX-License-Identifier: MIT */
/* deadline_test.c - testing the deadline service's request pipeline
 * (examples/deadline/request.c) in virtual time, with <cexec/testing.h>.
 *
 * The requests run on a manual scheduler whose timers are on a virtual
 * clock: nothing happens until the test advances the clock and runs what
 * fell due, so a 200 ms deadline is checked to the nanosecond in
 * microseconds of wall time, the same way every run, and a stop can be
 * put exactly before or after the backend's answer.
 *
 *   make check-example-tests     (part of make test)
 *   build/examples/testing/deadline_test --verbose */
#include <criterion/criterion.h>
#include <time.h>

#include <cexec/cexec.h>
#include <cexec/testing.h>

#include "../deadline/request.h"

TestSuite(deadline_request, .timeout = 30);

/* The service under test: a manual scheduler on a virtual clock. */
typedef struct service {
    ex_clock *clock;
    ex_manual_scheduler manual;
} service;

static void service_init(service *s) {
    cr_assert_eq(ex_virtual_clock_create(0, &s->clock).code, EX_OK);
    cr_assert_eq(ex_manual_scheduler_init_clock(&s->manual, s->clock).code, EX_OK);
}

static void service_fini(service *s) {
    cr_assert_eq(ex_manual_pending(&s->manual), 0u, "work was left queued");
    cr_assert_eq(ex_manual_scheduler_destroy(&s->manual).code, EX_OK);
    cr_assert_eq(ex_virtual_clock_destroy(s->clock).code, EX_OK);
}

/* Moves time on by ns without running anything: what fell due is queued. */
static void advance_only(service *s, int64_t ns) {
    cr_assert_eq(ex_virtual_clock_advance(s->clock, ns, NULL).code, EX_OK);
}

/* Moves time on by ns and runs everything that became runnable. */
static void advance(service *s, int64_t ns) {
    advance_only(s, ns);
    ex_manual_run_until_idle(&s->manual);
}

/* Starts request id's call on the service; its outcome goes to o.
 * Whether it started (a failed connect is o's error completion). */
static bool try_request(service *s, request *r, int id, ex_test_outcome *o) {
    *r = (request){ .id = id, .sch = ex_manual_scheduler_get(&s->manual) };
    ex_test_outcome_init(o);
    ex_test_outcome_set_name(o, "request_call");
    return ex_test_start(o, request_call(r));
}

static void start_request(service *s, request *r, int id, ex_test_outcome *o) {
    cr_assert(try_request(s, r, id, o), "request_call did not start");
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

Test(deadline_request, an_answer_comes_once_the_backend_has_answered) {
    service s;
    service_init(&s);
    request r;
    ex_test_outcome o;
    start_request(&s, &r, 1, &o);
    EX_ASSERT_NOT_COMPLETED(&o);
    advance(&s, EX_NS_PER_MS);  /* request 1 arrives after 1 ms */
    EX_ASSERT_NOT_COMPLETED(&o);
    cr_assert_eq(ex_virtual_clock_armed(s.clock), 2u, "the backend's timer and the deadline's");
    advance(&s, EX_NS_PER_MS);  /* its backend answers 1 ms later */
    EX_ASSERT_VALUE_INT(&o, 10);
    EX_ASSERT_COMPLETED_ONCE(&o);
    cr_assert_eq(ex_virtual_clock_armed(s.clock), 0u, "the deadline's timer was left armed");
    ex_test_outcome_destroy(&o);
    service_fini(&s);
}

Test(deadline_request, a_slow_backend_times_out_exactly_at_the_deadline) {
    double t0 = now_us();
    service s;
    service_init(&s);
    request r;
    ex_test_outcome o;
    start_request(&s, &r, 3, &o);  /* arrives after 3 ms; its backend would take 5 s */
    advance(&s, 3 * EX_NS_PER_MS);
    advance(&s, DEADLINE_NS - 1);
    EX_ASSERT_NOT_COMPLETED(&o);
    advance(&s, 1);
    EX_ASSERT_ERROR(&o, EX_ETIMEDOUT);
    EX_ASSERT_COMPLETED_ONCE(&o);
    cr_assert_eq(ex_virtual_clock_armed(s.clock), 0u, "the backend's 5 s timer was not stopped");
    ex_test_outcome_destroy(&o);
    service_fini(&s);
    cr_log_info("deadline_request: a 200 ms deadline checked to the nanosecond in %.0f us of wall time",
                now_us() - t0);
}

Test(deadline_request, a_failing_backend_says_which_request_it_refused) {
    service s;
    service_init(&s);
    request r;
    ex_test_outcome o;
    start_request(&s, &r, 5, &o);
    advance(&s, 5 * EX_NS_PER_MS);
    advance(&s, EX_NS_PER_MS);
    EX_ASSERT_ERROR_MESSAGE(&o, EX_EBACKEND, "request 5: the backend refused it");
    ex_test_outcome_destroy(&o);
    service_fini(&s);
}

/* The race of a stop and the backend's answer, both ways round: the
 * answer is due and queued, and the stop comes before it runs, or after. */
Test(deadline_request, a_stop_before_the_answer_runs_ends_the_request_stopped) {
    service s;
    service_init(&s);
    request r;
    ex_test_outcome o;
    start_request(&s, &r, 1, &o);
    advance(&s, EX_NS_PER_MS);
    advance_only(&s, EX_NS_PER_MS);
    cr_assert_eq(ex_manual_pending(&s.manual), 1u, "the answer waits to run");
    ex_test_outcome_request_stop(&o);
    EX_ASSERT_STOPPED(&o);
    cr_assert_eq(ex_manual_pending(&s.manual), 0u, "the stop took the answer out of the queue");
    cr_assert_eq(ex_manual_run_until_idle(&s.manual), 0u);
    EX_ASSERT_COMPLETED_ONCE(&o);
    ex_test_outcome_destroy(&o);
    service_fini(&s);
}

Test(deadline_request, a_stop_after_the_answer_ran_changes_nothing) {
    service s;
    service_init(&s);
    request r;
    ex_test_outcome o;
    start_request(&s, &r, 1, &o);
    advance(&s, EX_NS_PER_MS);
    advance(&s, EX_NS_PER_MS);
    ex_test_outcome_request_stop(&o);
    EX_ASSERT_VALUE_INT(&o, 10);
    EX_ASSERT_COMPLETED_ONCE(&o);
    ex_test_outcome_destroy(&o);
    service_fini(&s);
}

/* Every allocation the request makes, made to fail in turn: each run ends
 * exactly once, with the answer or EX_ENOMEM, and gives back everything. */
Test(deadline_request, an_allocation_failure_anywhere_ends_the_request_once_and_leaks_nothing) {
    const ex_allocator *was = ex_default_allocator();
    unsigned failures = 0;
    for (uint64_t nth = 1;; nth++) {
        service s;
        service_init(&s);  /* the test's own fixture: not the request's allocations */
        ex_fault_allocator fault;
        ex_fault_allocator_init(&fault, was);
        ex_fault_allocator_fail_nth(&fault, nth);
        ex_set_default_allocator(ex_fault_allocator_get(&fault));
        EX_CHECK_ALLOCATIONS({
            request r;
            ex_test_outcome o;
            (void)try_request(&s, &r, 1, &o);  /* its connect may be what fails */
            advance(&s, EX_NS_PER_MS);
            advance(&s, EX_NS_PER_MS);
            EX_ASSERT_COMPLETED_ONCE(&o);
            if (ex_test_outcome_disposition(&o) == EX_DISP_VALUE) EX_ASSERT_VALUE_INT(&o, 10);
            else EX_ASSERT_ERROR(&o, EX_ENOMEM);
            ex_test_outcome_destroy(&o);
        });
        ex_set_default_allocator(was);
        service_fini(&s);
        if (ex_fault_allocator_count(&fault) < nth) break;  /* the run made fewer allocations: all were failed */
        failures++;
    }
    cr_log_info("deadline_request: %u allocations failed in turn", failures);
    cr_assert_geq(failures, 3u, "the request allocates: its senders at least");
}
