/* SPDX-License-Identifier: MIT */
/* transfer_fixtures.c - see transfer_fixtures.h. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "adaptors/transfer_fixtures.h"

void mark_here(mark *m) {
    m->tid = pthread_self();
    m->calls++;
}

/* int -> int + m->add, recording the thread. */
ex_error mark_int(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    mark *m = ctx;
    (void)n;
    mark_here(m);
    out[0] = ex_int(in[0].as.i + m->add);
    return ex_ok();
}

/* () -> int m->add, recording the thread. */
ex_error mark_make_int(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    mark *m = ctx;
    (void)in, (void)n;
    mark_here(m);
    out[0] = ex_int(m->add);
    return ex_ok();
}

/* Any values -> int (their count), recording the thread. */
ex_error mark_count(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    mark *m = ctx;
    (void)in;
    mark_here(m);
    out[0] = ex_int((int64_t)n);
    return ex_ok();
}

/* error -> int code, recording the thread. */
ex_error mark_error(void *ctx, ex_error e, ex_value *out) {
    mark *m = ctx;
    mark_here(m);
    out[0] = ex_int(e.code);
    return ex_ok();
}

/* stopped -> int -1, recording the thread. */
ex_error mark_stopped(void *ctx, ex_value *out) {
    mark *m = ctx;
    mark_here(m);
    out[0] = ex_int(-1);
    return ex_ok();
}

ex_sender *then_mark(ex_sender *s, mark *m) {
    return ex_then(s, mark_int, m, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

void stc_pair_init(stc_pair *p) {
    p->sa = test_stc_init(&p->a);
    p->sb = test_stc_init(&p->b);
}

void stc_pair_destroy(stc_pair *p) {
    test_stc_destroy(&p->a);
    test_stc_destroy(&p->b);
}

void expect_child_env_scheduler_is_sch(ex_sender *(*adapt)(ex_scheduler sch, ex_sender *child)) {
    ex_single_thread_context c;
    ex_scheduler sch = test_stc_init(&c);
    expect_sync_sched(adapt(sch, ex_read_env(&ex_key_get_scheduler, EX_T_SCHED)), sch);
    test_stc_destroy(&c);
}

bool on_thread(pthread_t a, ex_single_thread_context *c) {
    return pthread_equal(a, ex_single_thread_context_thread_id(c)) != 0;
}

/* Connect into exactly-sized storage from the heap with ex_connect. */
ex_error connect_heap(const ex_sender *s, rec *r, ex_operation **op, void **mem) {
    size_t align = ex_sender_op_align(s);
    if (align < sizeof(void *)) align = sizeof(void *);
    size_t size = ex_sender_op_size(s);
    *mem = NULL;
    cr_assert_eq(posix_memalign(mem, align, size ? size : 1), 0);
    ex_error e = ex_connect(s, rec_receiver(r), *mem, size, op);
    if (e.code) {
        free(*mem);
        *mem = NULL;
    }
    return e;
}

/* Runs items of `loop` on this thread until r got its completion. */
void drive_until_complete(ex_run_loop *loop, rec *r) {
    while (rec_total(r) == 0)
        if (!ex_run_loop_run_one(loop)) sched_yield();
}

const ex_scheduler bad_sched = { NULL, NULL };
