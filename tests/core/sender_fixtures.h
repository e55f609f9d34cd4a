/* SPDX-License-Identifier: MIT */
/* sender_fixtures.h - what the exec_sender files (sender*.c) share: a
 * counting then, and storage big enough for the operations they connect. */
#ifndef CEXEC_TEST_SENDER_FIXTURES_H
#define CEXEC_TEST_SENDER_FIXTURES_H

#include <stddef.h>

#include "common/helpers.h"

/* int -> int + c->add, counting calls. */
typedef struct counter {
    int calls;
    int64_t add;
} counter;

ex_error count_add(void *ctx, const ex_value *in, size_t n, ex_value *out);
/* then(s, count_add, c): int -> int. */
ex_sender *then_count(ex_sender *s, counter *c);

/* The sender most tests here connect, declared in one line: a recording
 * receiver rc, a counter c (add 1) and s = then_count(just(int 1), &c). */
#define COUNTED_JUST_ONE(rc, c, s) \
    rec rc;                        \
    rec_init(&rc);                 \
    counter c = { 0, 1 };          \
    ex_sender *s = then_count(ex_just(ex_int(1)), &c)

/* Asserts the counted function never ran, and releases s. */
void release_unstarted(ex_sender *s, const counter *c);

/* let_value: anything -> just(int 0). */
ex_sender *let_just(void *ctx, const ex_value *in, size_t n);

#define BUF_SIZE 1024
typedef struct big_buf {
    _Alignas(max_align_t) unsigned char b[BUF_SIZE + 64];
} big_buf;

#endif
