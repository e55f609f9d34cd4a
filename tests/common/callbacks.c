/* SPDX-License-Identifier: MIT */
/* callbacks.c - then callbacks many tests use (callbacks.h). */
#include "common/callbacks.h"

ex_error add_one(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}
