/* SPDX-License-Identifier: MIT */
/* schedulers.h - the pieces of a scheduler of your own (ex_scheduler_vtable)
 * that tests keep writing: a schedule operation that completes inline. */
#ifndef CEXEC_TEST_SCHEDULERS_H
#define CEXEC_TEST_SCHEDULERS_H

#include <cexec/cexec.h>

/* The schedule operation: its receiver, nothing else (a vtable may give a
 * larger schedule_op_size; only this header is written). */
typedef struct test_schedule_op {
    ex_operation base;
    ex_receiver r;
} test_schedule_op;

/* connect_schedule hooks: start completes with set_value() inline, or,
 * with _stop_aware, with set_stopped() when the receiver's stop token was
 * stopped. */
ex_error test_connect_schedule_inline(void *self, ex_receiver r, void *storage);
ex_error test_connect_schedule_stop_aware(void *self, ex_receiver r, void *storage);

/* A domain that runs bulk on a resource of the test's: its
 * transform_sender gives every bulk sender to run (ex_bulk_run_on) with
 * the scheduler's resource as self.  Name it in a vtable as
 * .domain = &d.domain, with d = TEST_BULK_DOMAIN("name", run). */
typedef struct test_bulk_domain {
    ex_domain domain;
    ex_bulk_run_fn run;
} test_bulk_domain;

ex_sender *test_bulk_transform(const ex_domain *d, ex_scheduler sch, ex_sender *s, const ex_env *env);
extern const ex_tag *const test_bulk_tags[];
#define TEST_BULK_DOMAIN(name, run_fn) { { (name), test_bulk_tags, test_bulk_transform, NULL, NULL }, (run_fn) }

/* Asserts s answers get_completion_scheduler<key> with want. */
void expect_completion_scheduler(const ex_sender *s, const ex_key *key, ex_scheduler want);

#endif
