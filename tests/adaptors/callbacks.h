/* SPDX-License-Identifier: MIT */
/* callbacks.h - the functions the adaptor tests hand to then / upon_* /
 * let_*: each notes what it was given in a `seen` and returns something
 * the test can recognise. */
#ifndef CEXEC_TEST_ADAPTOR_CALLBACKS_H
#define CEXEC_TEST_ADAPTOR_CALLBACKS_H

#include "common/helpers.h"

/* What a callback saw, so tests can check the datums it was given. */
typedef struct seen {
    int calls;
    size_t n;
    ex_value in[EX_MAX_ARITY];
    const ex_value *in_ptr;  /* the array fn was given */
    ex_error err;
    const void *thread;      /* test_thread_id() of the last call */
    ex_sender *ret;          /* what lv_ret / le_ret / ls_ret return (a new reference), lv_lend lends */
} seen;


/* Asserts fn was called once, with n datums. */
void expect_called_once_with(const seen *sn, size_t n);

/* Asserts that building and connecting s into rc call nothing, and that
 * start calls fn once and completes rc once; then destroys the operation
 * and releases s. */
void expect_called_only_at_start(ex_sender *s, seen *sn, rec *rc);

/* The adaptor under test over `child`, with fn / ctx sn. */
typedef ex_sender *(*adapt_fn)(ex_sender *child, seen *sn);
/* adapt(child) lets child's completion through unchanged without calling
 * fn: an error (code, message and data), stopped, or values (int 3,
 * str "x").  Each runs in place; consumes what it builds. */
void expect_error_passes(adapt_fn adapt);
void expect_stopped_passes(adapt_fn adapt);
void expect_values_pass(adapt_fn adapt);

extern const char fail_msg[];   /* the message of fn_fail / ue_fail / us_fail */
extern int fail_payload;        /* fn_fail's error data */

/* then */
ex_error fn_add(void *ctx, const ex_value *in, size_t n, ex_value *out);        /* (int a, int b) -> int a + b */
ex_error fn_twice(void *ctx, const ex_value *in, size_t n, ex_value *out);      /* (int x) -> int 2x */
ex_error fn_count(void *ctx, const ex_value *in, size_t n, ex_value *out);      /* anything -> int n */
ex_error fn_void(void *ctx, const ex_value *in, size_t n, ex_value *out);       /* anything -> nothing */
ex_error fn_three(void *ctx, const ex_value *in, size_t n, ex_value *out);      /* (int x) -> (int x+1, double x/2, str "tag") */
ex_error fn_fail(void *ctx, const ex_value *in, size_t n, ex_value *out);       /* EX_EUSER + 2, fail_msg, &fail_payload */
ex_error fn_fail_nomsg(void *ctx, const ex_value *in, size_t n, ex_value *out); /* EX_EUSER + 3, no message */
ex_error fn_wrong_type(void *ctx, const ex_value *in, size_t n, ex_value *out); /* declares int, writes a double */
ex_error fn_writes_two(void *ctx, const ex_value *in, size_t n, ex_value *out); /* anything -> (int 1, int 2); ctx unused */

/* upon_error */
ex_error ue_code(void *ctx, ex_error err, ex_value *out);        /* -> int code */
ex_error ue_void(void *ctx, ex_error err, ex_value *out);        /* -> nothing */
ex_error ue_two(void *ctx, ex_error err, ex_value *out);         /* -> (str msg, int code) */
ex_error ue_fail(void *ctx, ex_error err, ex_value *out);        /* EX_EUSER + 4 */
ex_error ue_wrong_type(void *ctx, ex_error err, ex_value *out);  /* writes a str */

/* upon_stopped */
ex_error us_42(void *ctx, ex_value *out);          /* -> int 42 */
ex_error us_void(void *ctx, ex_value *out);        /* -> nothing */
ex_error us_two(void *ctx, ex_value *out);         /* -> (bool true, uint 7) */
ex_error us_fail(void *ctx, ex_value *out);        /* EX_EUSER + 5 */
ex_error us_wrong_type(void *ctx, ex_value *out);  /* writes an int */

/* let_value (ctx may be NULL for let_pair / let_same / let_str) */
ex_sender *let_pair(void *ctx, const ex_value *in, size_t n);       /* just(in[0], int 2) */
ex_sender *let_same(void *ctx, const ex_value *in, size_t n);       /* just(in[0]) */
ex_sender *let_str(void *ctx, const ex_value *in, size_t n);        /* just(str) */
ex_sender *lv_times10(void *ctx, const ex_value *in, size_t n);     /* just(int 10 in[0]) */
ex_sender *lv_count(void *ctx, const ex_value *in, size_t n);       /* just(int n) */
ex_sender *lv_ret(void *ctx, const ex_value *in, size_t n);         /* seen.ret */
ex_sender *lv_lend(void *ctx, const ex_value *in, size_t n);        /* seen.ret, lent (ex_let_value_borrowed) */
ex_sender *lv_null(void *ctx, const ex_value *in, size_t n);        /* NULL */
ex_sender *lv_read_sched(void *ctx, const ex_value *in, size_t n);  /* read_env(get_scheduler) */
ex_sender *lv_read_token(void *ctx, const ex_value *in, size_t n);  /* read_env(get_stop_token) */

/* let_error */
ex_sender *le_ret(void *ctx, ex_error err);
ex_sender *le_null(void *ctx, ex_error err);
ex_sender *le_code(void *ctx, ex_error err);        /* just(int code, str msg) */
ex_sender *le_read_sched(void *ctx, ex_error err);

/* let_stopped */
ex_sender *ls_ret(void *ctx);
ex_sender *ls_null(void *ctx);
ex_sender *ls_seven(void *ctx);                     /* just(int 7) */
ex_sender *ls_read_sched(void *ctx);

#endif
