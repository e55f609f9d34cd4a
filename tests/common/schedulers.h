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

/* Asserts s answers get_completion_scheduler<key> with want. */
void expect_completion_scheduler(const ex_sender *s, const ex_key *key, ex_scheduler want);

#endif
