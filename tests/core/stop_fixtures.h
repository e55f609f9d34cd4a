/* SPDX-License-Identifier: MIT */
/* stop_fixtures.h - what the stoptoken_inplace files (stop_token*.c)
 * share: a callback that counts its invocations and notes where it ran. */
#ifndef CEXEC_TEST_STOP_FIXTURES_H
#define CEXEC_TEST_STOP_FIXTURES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/helpers.h"

/* Spins until *f != 0 (inside callbacks, where a test cannot assert; the
 * test's own bounded waits catch a hang). */
void st_wait_flag(atomic_int *f);

/* A callback that counts its invocations and remembers where it ran. */
typedef struct st_cb {
    ex_stop_callback cb;      /* first member: the callback node */
    atomic_int calls;
    pthread_t thread;         /* thread of the last invocation */
    ex_stop_source *src;      /* to observe stop_requested() from inside */
    bool saw_stop_requested;
    struct st_cb *other;      /* for callbacks that deregister another one */
} st_cb;

st_cb *st_of(ex_stop_callback *cb);
void st_init(st_cb *c, ex_stop_source *src);
/* The callback: counts, notes the thread and stop_requested(). */
void st_count(ex_stop_callback *cb);
/* Initialises the source and the NULL-terminated list of callbacks. */
void st_setup(ex_stop_source *s, ...);
/* Registers c's node with fn on a token of c->src; returns whether fn ran
 * inline (the stop was already requested). */
bool st_register(st_cb *c, void (*fn)(ex_stop_callback *));

/* A thread that requests stop on src (pthread entry: st_request_main). */
typedef struct st_req_thread {
    ex_stop_source *src;
    bool result;
    pthread_t self;
} st_req_thread;

void *st_request_main(void *arg);

#endif
