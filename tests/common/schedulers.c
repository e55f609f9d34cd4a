/* SPDX-License-Identifier: MIT */
/* schedulers.c - see schedulers.h. */
#include <criterion/criterion.h>

#include "common/schedulers.h"

static void value_start(ex_operation *op) { ex_set_value(((test_schedule_op *)op)->r, NULL, 0); }

static void stop_aware_start(ex_operation *op) {
    test_schedule_op *o = (test_schedule_op *)op;
    if (ex_stop_token_stop_requested(ex_get_stop_token(ex_receiver_env(o->r)))) ex_set_stopped(o->r);
    else ex_set_value(o->r, NULL, 0);
}

static const ex_operation_vtable value_vt = { value_start, NULL };
static const ex_operation_vtable stop_aware_vt = { stop_aware_start, NULL };

static ex_error connect_with(const ex_operation_vtable *vt, ex_receiver r, void *storage) {
    test_schedule_op *o = storage;
    o->base.vt = vt;
    o->r = r;
    return ex_ok();
}

ex_error test_connect_schedule_inline(void *self, ex_receiver r, void *storage) {
    (void)self;
    return connect_with(&value_vt, r, storage);
}

ex_error test_connect_schedule_stop_aware(void *self, ex_receiver r, void *storage) {
    (void)self;
    return connect_with(&stop_aware_vt, r, storage);
}

void expect_completion_scheduler(const ex_sender *s, const ex_key *key, ex_scheduler want) {
    ex_scheduler got = { NULL, NULL };
    cr_assert(ex_get_completion_scheduler(s, key, &got), "no completion scheduler for %s", key->name);
    cr_assert(ex_scheduler_equal(got, want), "the completion scheduler for %s is another one", key->name);
}

