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
void run_destroy(ex_operation *op);

/* Wait (bounded) for the receiver's completion; assert it came, once. */
void trec_wait_done(trec *r);
void arec_wait_done(arec *r);

/* ex_result checks (sync_wait). */
void expect_value_int(ex_result *r, int64_t v);
void expect_error(ex_result *r, int code);

/* rec checks: exactly one completion, of this kind. */
void rec_expect_value_int(const rec *r, int64_t v);
void rec_expect_values(const rec *r, size_t n);   /* set_value with n datums */
void rec_expect_error(const rec *r, int code);
void rec_expect_stopped(const rec *r);

#endif
