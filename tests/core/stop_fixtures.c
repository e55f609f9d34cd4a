/* SPDX-License-Identifier: MIT */
/* stop_fixtures.c - see stop_fixtures.h. */
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "core/stop_fixtures.h"

void st_wait_flag(atomic_int *f) {
    while (!atomic_load(f)) sched_yield();
}

st_cb *st_of(ex_stop_callback *cb) { return (st_cb *)(void *)((char *)cb - offsetof(st_cb, cb)); }

void st_init(st_cb *c, ex_stop_source *src) {
    memset(c, 0, sizeof *c);
    atomic_init(&c->calls, 0);
    c->src = src;
}

void st_count(ex_stop_callback *cb) {
    st_cb *c = st_of(cb);
    c->thread = pthread_self();
    if (c->src) c->saw_stop_requested = ex_stop_source_stop_requested(c->src);
    atomic_fetch_add(&c->calls, 1);
}

void *st_request_main(void *arg) {
    st_req_thread *t = arg;
    t->self = pthread_self();
    t->result = ex_stop_source_request_stop(t->src);
    return NULL;
}

void st_setup(ex_stop_source *s, ...) {
    ex_stop_source_init(s);
    va_list ap;
    va_start(ap, s);
    for (st_cb *c; (c = va_arg(ap, st_cb *)) != NULL;) st_init(c, s);
    va_end(ap);
}

bool st_register(st_cb *c, void (*fn)(ex_stop_callback *)) {
    return ex_stop_callback_register(&c->cb, ex_stop_source_token(c->src), fn);
}
