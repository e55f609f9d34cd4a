/* SPDX-License-Identifier: MIT */
/* contexts.h - run loops and single-thread contexts in a test: each call
 * asserts it worked. */
#ifndef CEXEC_TEST_CONTEXTS_H
#define CEXEC_TEST_CONTEXTS_H

#include <criterion/criterion.h>
#include <cexec/cexec.h>

/* Initialises loop; returns its scheduler. */
ex_scheduler test_loop_init(ex_run_loop *loop);
/* ex_run_loop_finish, then runs the loop on this thread until it is
 * empty. */
void test_loop_drain(ex_run_loop *loop);
/* Destroys loop (asserts nothing was still using it). */
void test_loop_destroy(ex_run_loop *loop);

/* Starts the context's thread; returns its scheduler. */
ex_scheduler test_stc_init(ex_single_thread_context *c);
/* Drains and joins it. */
void test_stc_destroy(ex_single_thread_context *c);

#endif
