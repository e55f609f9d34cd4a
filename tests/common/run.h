/* SPDX-License-Identifier: MIT */
/* run.h - running a sender into a recording receiver, waiting for it, and
 * checking how it completed. */
#ifndef CEXEC_TEST_RUN_H
#define CEXEC_TEST_RUN_H

#include <criterion/criterion.h>
#include <cexec/cexec.h>

#include "common/receivers.h"

/* Connect s into heap storage, start, and return the operation (destroyed
 * by run_destroy).  Asserts connect succeeded.  Does not release s. */
ex_operation *run_start(ex_sender *s, rec *r);
ex_operation *trec_run_start(const ex_sender *s, trec *r);
ex_operation *arec_run_start(const ex_sender *s, arec *r);
/* run_start, but s is released before the start: the operation must
 * outlive its sender. */
ex_operation *run_start_released(ex_sender *s, rec *r);
void run_destroy(ex_operation *op);
/* run_destroy(op), then releases s. */
void run_destroy_release(ex_operation *op, ex_sender *s);
/* Connects s into stack storage, starts it, asserts it completed exactly
 * once (inline: what completes during start), destroys the operation and
 * releases s. */
void run_in_place(ex_sender *s, rec *r);
/* Connects s (in stack storage), starts it with the next test_allocator
 * allocation failing, asserts that allocation was hit and that s
 * completed once with EX_ENOMEM; destroys the operation, releases s. */
void run_with_failing_allocation(ex_sender *s);
/* The same, and the error's message is exactly msg. */
void run_with_failing_allocation_msg(ex_sender *s, const char *msg);

/* Wait (bounded) for the receiver's completion; assert it came, once. */
void trec_wait_done(trec *r);
void arec_wait_done(arec *r);

/* ex_result checks (sync_wait). */
void expect_value_int(ex_result *r, int64_t v);
void expect_error(ex_result *r, int code);
void expect_value_arity(ex_result *r, size_t n);   /* set_value with n datums */
/* set_value whose datums, formatted with ex_value_format and joined by
 * "; ", read `want` (e.g. "int 6; double 2.5; str \"tag\""). */
void expect_values_text(ex_result *r, const char *want);
/* ex_sync_wait(s) (consuming s) gives int v / the error code / n datums. */
void expect_sync_values(ex_sender *s, size_t n);
void expect_sync_text(ex_sender *s, const char *want);    /* as expect_values_text */
void expect_sync_sched(ex_sender *s, ex_scheduler want);   /* one scheduler, equal to want */
void expect_sync_int(ex_sender *s, int64_t v);
void expect_sync_error(ex_sender *s, int code);
/* ex_sync_wait(s) (consuming s) completes with this error code and
 * exactly this message. */
void expect_sync_error_msg(ex_sender *s, int code, const char *msg);
void expect_stopped(ex_result *r);

/* An ex_error with this code and a message. */
void expect_err(ex_error e, int code);
/* A connect that failed with EX_EINVAL and set *op to NULL. */
void expect_connect_refused(ex_error e, const ex_operation *op);
/* s's status is code (a builder refused its input); then: sync_wait
 * completes with that error / s is released.  Both consume s. */
void expect_invalid(ex_sender *s, int code);
void expect_invalid_status(ex_sender *s, int code);
/* expect_invalid, and both the status and the error sync_wait gives carry
 * exactly this message. */
void expect_invalid_msg(ex_sender *s, int code, const char *msg);
/* Out of memory while building: test_alloc_fail_next() makes the next
 * test_allocator allocation fail; expect_built_enomem(s) asserts it was
 * hit and s is an EX_ENOMEM invalid sender (consumes s). */
void test_alloc_fail_next(void);
void expect_built_enomem(ex_sender *s);
/* Asserts the injected failure was hit, and injects no more. */
void expect_injected_failure_hit(void);

/* rec checks: exactly one completion, of this kind. */
void rec_expect_value_int(const rec *r, int64_t v);
void rec_expect_values(const rec *r, size_t n);   /* set_value with n datums */
void rec_expect_error(const rec *r, int code);
void rec_expect_stopped(const rec *r);
void rec_expect_sched(const rec *r, ex_scheduler want);   /* set_value(scheduler equal to want) */

#endif
