/* SPDX-License-Identifier: MIT */
/* sender_fixtures.c - see sender_fixtures.h. */
#include "core/sender_fixtures.h"

ex_error count_add(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    counter *c = ctx;
    (void)n;
    c->calls++;
    out[0] = ex_int(in[0].as.i + c->add);
    return ex_ok();
}

ex_sender *then_count(ex_sender *s, counter *c) { return ex_then(s, count_add, c, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)); }

ex_sender *let_just(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)in, (void)n;
    return ex_just(ex_int(0));
}

void release_unstarted(ex_sender *s, const counter *c) {
    cr_assert_eq(c->calls, 0, "nothing may run before start");
    ex_sender_release(s);
}
