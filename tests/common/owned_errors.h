/* SPDX-License-Identifier: MIT */
/* owned_errors.h - errors that own a payload (cexec/error.h) whose
 * destruction is counted, to check that cexec releases each exactly once. */
#ifndef CEXEC_TEST_OWNED_ERRORS_H
#define CEXEC_TEST_OWNED_ERRORS_H

#include <stdatomic.h>
#include <cexec/cexec.h>

/* The payload: which error it is, and the thread that destroyed it. */
typedef struct owned_payload {
    int id;
} owned_payload;

/* Payloads made and destroyed since owned_errors_reset. */
extern atomic_int owned_made, owned_destroyed;
/* The thread (test_thread_id) of the last destroy. */
extern _Atomic(const void *) owned_destroyed_on;

void owned_errors_reset(void);

/* A payload {id} from test_allocator, counted in owned_made. */
owned_payload *owned_payload_new(int id);
/* Its destroy function: counts, notes the thread, frees. */
void owned_payload_destroy(void *data);

/* An error with code EX_EUSER + 1, message "owned error <id>" and a payload
 * {id} from test_allocator, destroyed through the counter. */
ex_error owned_error(int id);

/* The id of e's payload (asserts e owns one). */
int owned_error_id(ex_error e);

/* Asserts that every payload made was destroyed exactly once, that made is
 * `made`, and that nothing else from test_allocator is left. */
void expect_owned_all_released(int made);

#endif
