/* SPDX-License-Identifier: MIT */
/* [stopcallback.inplace]: deregistration from inside callbacks and blocking deregistration (suite stoptoken_inplace, declared in stop_token.c). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/stop_fixtures.h"

/* ----------------------------------------- deregistration from inside callbacks */

static void st_deregister_self(ex_stop_callback *cb) {
    st_count(cb);
    ex_stop_callback_deregister(cb); /* must return at once */
}

Test(stoptoken_inplace, callback_deregistering_itself_does_not_deadlock) {
    ex_stop_source s;
    st_cb a, b;
    st_setup(&s, &a, &b, NULL);
    cr_assert_not(st_register(&a, st_deregister_self));
    cr_assert_not(st_register(&b, st_count));
    cr_assert(ex_stop_source_request_stop(&s));
    cr_assert_eq(atomic_load(&a.calls), 1);
    cr_assert_eq(atomic_load(&b.calls), 1, "the other callbacks still run");
    ex_stop_callback_deregister(&a.cb); /* again, after the fact: no-op */
    ex_stop_callback_deregister(&b.cb);
    expect_no_leaks();
}

/* A heap callback that deregisters and frees itself: request_stop must not
 * touch it afterwards (ASan would see that). */
static atomic_int st_freed_calls;

static void st_deregister_and_free(ex_stop_callback *cb) {
    atomic_fetch_add(&st_freed_calls, 1);
    ex_stop_callback_deregister(cb);
    free(st_of(cb));
}

Test(stoptoken_inplace, callback_may_deregister_and_free_itself) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    atomic_store(&st_freed_calls, 0);
    enum { N = 4 };
    for (int i = 0; i < N; i++) {
        st_cb *c = malloc(sizeof *c);
        cr_assert_not_null(c);
        st_init(c, &s);
        cr_assert_not(ex_stop_callback_register(&c->cb, ex_stop_source_token(&s), st_deregister_and_free));
    }
    cr_assert(ex_stop_source_request_stop(&s));
    cr_assert_eq(atomic_load(&st_freed_calls), N);
    expect_no_leaks();
}

static void st_deregister_other(ex_stop_callback *cb) {
    st_cb *c = st_of(cb);
    st_count(cb);
    ex_stop_callback_deregister(&c->other->cb);
}

Test(stoptoken_inplace, callback_deregistering_another_callback) {
    /* a and b each deregister the other when they run.  The order is
     * unspecified, but whichever runs first removes the other, so exactly
     * one of them runs, and nothing deadlocks. */
    ex_stop_source s;
    st_cb a, b, c;
    st_setup(&s, &a, &b, &c, NULL);
    a.other = &b;
    b.other = &a;
    cr_assert_not(st_register(&a, st_deregister_other));
    cr_assert_not(st_register(&c, st_count));
    cr_assert_not(st_register(&b, st_deregister_other));
    cr_assert(ex_stop_source_request_stop(&s));
    int ra = atomic_load(&a.calls), rb = atomic_load(&b.calls);
    cr_assert_eq(ra + rb, 1, "exactly one of the mutually deregistering callbacks runs (a=%d b=%d)", ra, rb);
    cr_assert_eq(atomic_load(&c.calls), 1);
    ex_stop_callback_deregister(&a.cb);
    ex_stop_callback_deregister(&b.cb);
    ex_stop_callback_deregister(&c.cb);
    cr_assert_eq(atomic_load(&a.calls) + atomic_load(&b.calls), 1);
    expect_no_leaks();
}

/* A callback that deregisters a callback that has already run. */
static void st_deregister_other_after(ex_stop_callback *cb) {
    st_cb *c = st_of(cb);
    st_count(cb);
    if (atomic_load(&c->other->calls)) ex_stop_callback_deregister(&c->other->cb);
}

Test(stoptoken_inplace, callback_deregistering_a_finished_callback) {
    ex_stop_source s;
    st_cb a, b;
    st_setup(&s, &a, &b, NULL);
    a.other = &b;
    b.other = &a;
    cr_assert_not(st_register(&a, st_deregister_other_after));
    cr_assert_not(st_register(&b, st_deregister_other_after));
    cr_assert(ex_stop_source_request_stop(&s));
    cr_assert_eq(atomic_load(&a.calls), 1);
    cr_assert_eq(atomic_load(&b.calls), 1);
    ex_stop_callback_deregister(&a.cb);
    ex_stop_callback_deregister(&b.cb);
    expect_no_leaks();
}

/* Inside a callback: a nested request_stop returns false, and a new
 * registration runs at once. */
typedef struct st_nested {
    st_cb base;
    bool nested_request;
    bool nested_register_ran;
    st_cb inner;
} st_nested;

static void st_nested_fn(ex_stop_callback *cb) {
    st_nested *n = (st_nested *)(void *)st_of(cb);
    st_count(cb);
    n->nested_request = ex_stop_source_request_stop(n->base.src);
    n->nested_register_ran = ex_stop_callback_register(&n->inner.cb, ex_stop_source_token(n->base.src), st_count);
    ex_stop_callback_deregister(&n->inner.cb);
}

Test(stoptoken_inplace, request_and_register_from_inside_a_callback) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_nested n;
    memset(&n, 0, sizeof n);
    st_init(&n.base, &s);
    st_init(&n.inner, &s);
    n.nested_request = true;
    cr_assert_not(ex_stop_callback_register(&n.base.cb, ex_stop_source_token(&s), st_nested_fn));
    cr_assert(ex_stop_source_request_stop(&s));
    cr_assert_eq(atomic_load(&n.base.calls), 1);
    cr_assert_not(n.nested_request, "a request made while stopping returns false");
    cr_assert(n.nested_register_ran, "registering while stopping runs the callback at once");
    cr_assert_eq(atomic_load(&n.inner.calls), 1);
    ex_stop_callback_deregister(&n.base.cb);
    expect_no_leaks();
}

/* ------------------------------------------------ blocking deregistration */

typedef struct st_block {
    st_cb base;
    atomic_int entered;   /* the callback has started */
    atomic_int release;   /* the callback may return */
    atomic_int finished;  /* the callback is about to return */
} st_block;

static void st_block_fn(ex_stop_callback *cb) {
    st_block *b = (st_block *)(void *)st_of(cb);
    st_count(cb);
    atomic_store(&b->entered, 1);
    st_wait_flag(&b->release);
    atomic_store(&b->finished, 1);
}

static void st_block_init(st_block *b, ex_stop_source *s) {
    memset(b, 0, sizeof *b);
    st_init(&b->base, s);
    atomic_init(&b->entered, 0);
    atomic_init(&b->release, 0);
    atomic_init(&b->finished, 0);
}

typedef struct st_dereg_thread {
    ex_stop_callback *cb;
    atomic_int *watch;          /* flag to sample when deregistration returns */
    atomic_int started, returned;
    int watch_at_return;
} st_dereg_thread;

static void *st_dereg_main(void *arg) {
    st_dereg_thread *d = arg;
    atomic_store(&d->started, 1);
    ex_stop_callback_deregister(d->cb);
    d->watch_at_return = d->watch ? atomic_load(d->watch) : -1;
    atomic_store(&d->returned, 1);
    return NULL;
}

Test(stoptoken_inplace, deregistration_from_another_thread_waits_for_running_callback) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_block b;
    st_block_init(&b, &s);
    cr_assert_not(ex_stop_callback_register(&b.base.cb, ex_stop_source_token(&s), st_block_fn));

    st_req_thread rt = { &s, false, pthread_self() };
    pthread_t requester;
    cr_assert_eq(pthread_create(&requester, NULL, st_request_main, &rt), 0);
    st_wait_flag(&b.entered); /* the callback now runs on `requester` and blocks */

    st_dereg_thread d;
    memset(&d, 0, sizeof d);
    d.cb = &b.base.cb;
    d.watch = &b.finished;
    atomic_init(&d.started, 0);
    atomic_init(&d.returned, 0);
    pthread_t deregistrar;
    cr_assert_eq(pthread_create(&deregistrar, NULL, st_dereg_main, &d), 0);
    st_wait_flag(&d.started);
    test_nap_us(20000); /* let the deregistering thread reach the wait */
    /* The callback cannot return before `release` is set, so a correct
     * deregistration is still blocked here, however long we napped. */
    int returned_early = atomic_load(&d.returned);
    atomic_store(&b.release, 1);
    pthread_join(deregistrar, NULL);
    pthread_join(requester, NULL);

    cr_assert_eq(returned_early, 0, "deregistration returned while the callback was still running");
    cr_assert_eq(d.watch_at_return, 1, "deregistration must not return before the callback returned");
    cr_assert(rt.result);
    cr_assert_eq(atomic_load(&b.base.calls), 1);
    cr_assert(pthread_equal(b.base.thread, rt.self));
    expect_no_leaks();
}

/* Issue 17 item 11: the callback deregisters itself (on the requesting
 * thread: returns at once) while its owner deregisters it from another
 * thread (waits until the callback returned).  Either may come first.  The
 * owner's deregistration used to wait for ever for a "done" mark that the
 * callback's own deregistration had switched off. */
typedef struct st_selfdrop {
    st_block blk;
    bool owner_first;           /* the owner starts deregistering before the callback does */
    st_dereg_thread *owner;
    atomic_int self_dropped;    /* the callback's own deregistration returned */
} st_selfdrop;

static void st_selfdrop_fn(ex_stop_callback *cb) {
    st_selfdrop *x = (st_selfdrop *)(void *)st_of(cb);
    st_count(cb);
    atomic_store(&x->blk.entered, 1);
    if (x->owner_first) {
        st_wait_flag(&x->owner->started);
        test_nap_us(10000); /* let the owner reach its wait */
    }
    ex_stop_callback_deregister(cb); /* on the running thread: must not wait */
    atomic_store(&x->self_dropped, 1);
    st_wait_flag(&x->blk.release);
    atomic_store(&x->blk.finished, 1);
}

/* Waits for *f with a generous deadline: a liveness check (a hang fails the
 * test instead of blocking the suite), not a timing assertion. */
static bool st_wait_flag_bounded(atomic_int *f) { return wait_int_reaches(f, 1) >= 1; }

static void st_selfdrop_round(bool owner_first) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_selfdrop x;
    memset(&x, 0, sizeof x);
    st_block_init(&x.blk, &s);
    atomic_init(&x.self_dropped, 0);
    st_dereg_thread d;
    memset(&d, 0, sizeof d);
    d.cb = &x.blk.base.cb;
    d.watch = &x.blk.finished;
    atomic_init(&d.started, 0);
    atomic_init(&d.returned, 0);
    x.owner_first = owner_first;
    x.owner = &d;
    cr_assert_not(ex_stop_callback_register(&x.blk.base.cb, ex_stop_source_token(&s), st_selfdrop_fn));

    st_req_thread rt = { &s, false, pthread_self() };
    pthread_t requester, owner;
    cr_assert_eq(pthread_create(&requester, NULL, st_request_main, &rt), 0);
    cr_assert(st_wait_flag_bounded(owner_first ? &x.blk.entered : &x.self_dropped));
    cr_assert_eq(pthread_create(&owner, NULL, st_dereg_main, &d), 0);
    cr_assert(st_wait_flag_bounded(&x.self_dropped), "the callback's own deregistration must not wait");
    test_nap_us(10000); /* let the owner reach its wait */
    int returned_early = atomic_load(&d.returned);
    atomic_store(&x.blk.release, 1);
    cr_assert(st_wait_flag_bounded(&d.returned), "the owner's deregistration hangs (owner_first=%d)", owner_first);
    pthread_join(owner, NULL);
    pthread_join(requester, NULL);

    cr_assert_eq(returned_early, 0, "the owner's deregistration returned while the callback still ran");
    cr_assert_eq(d.watch_at_return, 1, "the owner's deregistration returned before the callback did");
    cr_assert(rt.result);
    cr_assert_eq(atomic_load(&x.blk.base.calls), 1);
    ex_stop_callback_deregister(&x.blk.base.cb); /* once more, afterwards: nothing */
    cr_assert_eq(atomic_load(&x.blk.base.calls), 1);
}

Test(stoptoken_inplace, callback_deregistering_itself_while_its_owner_deregisters_it) {
    st_selfdrop_round(false); /* the callback first */
    st_selfdrop_round(true);  /* the owner first */
    expect_no_leaks();
}

Test(stoptoken_inplace, deregistration_does_not_wait_for_other_callbacks) {
    /* Two blocking callbacks; whichever runs first blocks the requester.
     * Deregistering the other one (still queued) must return at once and
     * prevent its call. */
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_block a, b;
    st_block_init(&a, &s);
    st_block_init(&b, &s);
    cr_assert_not(ex_stop_callback_register(&a.base.cb, ex_stop_source_token(&s), st_block_fn));
    cr_assert_not(ex_stop_callback_register(&b.base.cb, ex_stop_source_token(&s), st_block_fn));

    st_req_thread rt = { &s, false, pthread_self() };
    pthread_t requester;
    cr_assert_eq(pthread_create(&requester, NULL, st_request_main, &rt), 0);
    while (!atomic_load(&a.entered) && !atomic_load(&b.entered)) sched_yield();
    st_block *running = atomic_load(&a.entered) ? &a : &b;
    st_block *waiting = running == &a ? &b : &a;

    /* On this thread: if this waited for `running`, the test would hang
     * (and time out), because only this thread sets `release`. */
    ex_stop_callback_deregister(&waiting->base.cb);
    int running_finished = atomic_load(&running->finished);
    atomic_store(&running->release, 1);
    atomic_store(&waiting->release, 1);
    pthread_join(requester, NULL);

    cr_assert_eq(running_finished, 0);
    cr_assert_eq(atomic_load(&running->base.calls), 1);
    cr_assert_eq(atomic_load(&waiting->base.calls), 0, "the deregistered callback must not run");
    ex_stop_callback_deregister(&running->base.cb);
    expect_no_leaks();
}

Test(stoptoken_inplace, deregistration_after_callback_finished_on_other_thread_returns) {
    ex_stop_source s;
    st_cb c;
    st_setup(&s, &c, NULL);
    cr_assert_not(st_register(&c, st_count));
    st_req_thread rt = { &s, false, pthread_self() };
    pthread_t requester;
    cr_assert_eq(pthread_create(&requester, NULL, st_request_main, &rt), 0);
    pthread_join(requester, NULL);
    ex_stop_callback_deregister(&c.cb); /* finished: must not block */
    cr_assert_eq(atomic_load(&c.calls), 1);
    expect_no_leaks();
}
