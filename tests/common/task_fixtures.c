/* task_fixtures.c - see task_fixtures.h. */
#include <sched.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/task_fixtures.h"

probe P;

void probe_check(bool ok, int line, const char *what) {
    if (ok) return;
    int zero = 0;
    if (atomic_compare_exchange_strong(&P.first_line, &zero, line)) P.first_what = what;
    atomic_fetch_add(&P.bad, 1);
}

ex_pool *make_pool(unsigned threads) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = threads;
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    return p;
}

bool wait_int(atomic_int *flag) {
    double deadline = test_now_s() + 20.0;
    while (!atomic_load(flag)) {
        if (test_now_s() > deadline) return false;
        sched_yield();
    }
    return true;
}

static void *ca_allocate(void *ctx, size_t size, size_t align) {
    cnt_alloc *a = ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    atomic_fetch_add(&a->allocs, 1);
    atomic_fetch_add(&a->in_use, 1);
    a->last_p = p;
    a->last_size = size;
    a->last_align = align;
    return p;
}

static void ca_deallocate(void *ctx, void *p, size_t size, size_t align) {
    cnt_alloc *a = ctx;
    a->freed_p = p;
    a->freed_size = size;
    a->freed_align = align;
    if (a->scribble) memset(p, 0xA5, size);
    free(p);
    atomic_fetch_add(&a->frees, 1);
    atomic_fetch_sub(&a->in_use, 1);
}

void cnt_alloc_init(cnt_alloc *a) {
    memset(a, 0, sizeof *a);
    a->base.allocate = ca_allocate;
    a->base.deallocate = ca_deallocate;
    a->base.ctx = a;
    a->base.name = "test.counting";
}

typedef struct until_stop_op {
    ex_operation base;
    ex_receiver r;
    ex_stop_callback cb;
} until_stop_op;

static void until_stop_fire(ex_stop_callback *cb) {
    until_stop_op *o = (until_stop_op *)(void *)((char *)cb - offsetof(until_stop_op, cb));
    ex_stop_callback_deregister(&o->cb);  /* from inside the callback: returns at once */
    ex_set_stopped(o->r);
}

static void until_stop_start(ex_operation *op) {
    until_stop_op *o = (until_stop_op *)op;
    ex_stop_callback_register(&o->cb, ex_get_stop_token(ex_receiver_env(o->r)), until_stop_fire);
}

static const ex_operation_vtable until_stop_op_vt = { until_stop_start, NULL };

static ex_error until_stop_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    until_stop_op *o = storage;
    o->base.vt = &until_stop_op_vt;
    o->r = r;
    return ex_ok();
}

static const ex_sender_vtable until_stop_vt = { "test.until_stopped", until_stop_connect, NULL, NULL };

ex_sender *until_stopped(void) {
    ex_sender *s = ex_sender_alloc(&until_stop_vt, sizeof(ex_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "until_stopped");
    s->sigs.flags = EX_SIGS_STOPPED;
    s->op_size = sizeof(until_stop_op);
    s->op_align = alignof(until_stop_op);
    return s;
}
