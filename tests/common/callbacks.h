/* SPDX-License-Identifier: MIT */
/* callbacks.h - then callbacks many tests use. */
#ifndef CEXEC_TEST_CALLBACKS_H
#define CEXEC_TEST_CALLBACKS_H

#include <cexec/cexec.h>

/* ex_then callback: one int in, that int plus one out (ctx unused). */
ex_error add_one(void *ctx, const ex_value *in, size_t n, ex_value *out);

#endif
