/* SPDX-License-Identifier: MIT */
/* env_fixtures.c - see env_fixtures.h. */
#include "core/env_fixtures.h"

const ex_key fwd_key = { "test.env.forwarding", true };
const ex_key local_key = { "test.env.non_forwarding", false };
const ex_key other_key = { "test.env.other", true };

/* int -> int + 1 */
ex_error plus1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

/* any -> the same datum */
ex_error identity1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    int *calls = ctx;
    (void)n;
    if (calls) ++*calls;
    out[0] = in[0];
    return ex_ok();
}
