/* [stoptoken.inplace], [stopsource.inplace], [stopcallback.inplace],
 * [stoptoken.never] and the stoppable-token rules of [stoptoken.concepts]:
 * the in-place stop source, its tokens and callbacks, and the never-stop
 * token. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/helpers.h"

TEST_SUITE(stoptoken_inplace, 20);

/* ------------------------------------------------------------------ helpers */

static void st_nap(long usec) {
    struct timespec ts = { usec / 1000000, (usec % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

static void st_wait_flag(atomic_int *f) {
    while (!atomic_load(f)) sched_yield();
}

/* A callback that counts its invocations and remembers where it ran. */
typedef struct st_cb {
    ex_stop_callback cb;      /* first member: the callback node */
    atomic_int calls;
    pthread_t thread;         /* thread of the last invocation */
    ex_stop_source *src;      /* to observe stop_requested() from inside */
    bool saw_stop_requested;
    struct st_cb *other;      /* for callbacks that deregister another one */
} st_cb;

static st_cb *st_of(ex_stop_callback *cb) { return (st_cb *)(void *)((char *)cb - offsetof(st_cb, cb)); }

static void st_init(st_cb *c, ex_stop_source *src) {
    memset(c, 0, sizeof *c);
    atomic_init(&c->calls, 0);
    c->src = src;
}

static void st_count(ex_stop_callback *cb) {
    st_cb *c = st_of(cb);
    c->thread = pthread_self();
    if (c->src) c->saw_stop_requested = ex_stop_source_stop_requested(c->src);
    atomic_fetch_add(&c->calls, 1);
}

/* ------------------------------------------------------------ plain state */

Test(stoptoken_inplace, initial_state) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    ex_stop_token t = ex_stop_source_token(&s);
    cr_assert_not(ex_stop_source_stop_requested(&s));
    cr_assert_not(ex_stop_token_stop_requested(t));
    cr_assert(ex_stop_token_stop_possible(t), "a source's token can be stopped");

    ex_stop_source st = EX_STOP_SOURCE_INIT;
    cr_assert_not(ex_stop_source_stop_requested(&st), "static initialisation is not-requested too");
    cr_assert(ex_stop_token_stop_possible(ex_stop_source_token(&st)));
    expect_no_leaks();
}

Test(stoptoken_inplace, request_stop_returns_true_only_the_first_time) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    ex_stop_token t = ex_stop_source_token(&s);
    cr_assert(ex_stop_source_request_stop(&s), "the first request makes the stop request");
    cr_assert(ex_stop_source_stop_requested(&s));
    cr_assert(ex_stop_token_stop_requested(t));
    cr_assert(ex_stop_token_stop_possible(t), "stop_possible stays true after stop");
    cr_assert_not(ex_stop_source_request_stop(&s), "later requests return false");
    cr_assert_not(ex_stop_source_request_stop(&s));
    cr_assert(ex_stop_source_stop_requested(&s));
    expect_no_leaks();
}

Test(stoptoken_inplace, tokens_compare_by_source) {
    ex_stop_source a, b;
    ex_stop_source_init(&a);
    ex_stop_source_init(&b);
    cr_assert(ex_stop_token_equal(ex_stop_source_token(&a), ex_stop_source_token(&a)));
    cr_assert_not(ex_stop_token_equal(ex_stop_source_token(&a), ex_stop_source_token(&b)));
    cr_assert_not(ex_stop_token_equal(ex_stop_source_token(&a), ex_never_stop_token()));
    cr_assert(ex_stop_token_equal(ex_never_stop_token(), ex_never_stop_token()));
    /* stopping one source does not affect another */
    cr_assert(ex_stop_source_request_stop(&a));
    cr_assert_not(ex_stop_source_stop_requested(&b));
    cr_assert_not(ex_stop_token_stop_requested(ex_stop_source_token(&b)));
    expect_no_leaks();
}

Test(stoptoken_inplace, never_stop_token) {
    ex_stop_token t = ex_never_stop_token();
    cr_assert_not(ex_stop_token_stop_possible(t));
    cr_assert_not(ex_stop_token_stop_requested(t));
    st_cb c;
    st_init(&c, NULL);
    cr_assert_not(ex_stop_callback_register(&c.cb, t, st_count), "nothing runs on a never-stop token");
    cr_assert_eq(atomic_load(&c.calls), 0);
    ex_stop_callback_deregister(&c.cb);
    cr_assert_eq(atomic_load(&c.calls), 0);
    cr_assert_not(ex_stop_token_stop_requested(t));
    expect_no_leaks();
}

/* ------------------------------------------------------------- callbacks */

Test(stoptoken_inplace, callbacks_run_once_on_request_with_stop_visible) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_cb c[3];
    for (int i = 0; i < 3; i++) {
        st_init(&c[i], &s);
        cr_assert_not(ex_stop_callback_register(&c[i].cb, ex_stop_source_token(&s), st_count),
                      "before stop, registering does not run the callback");
    }
    for (int i = 0; i < 3; i++) cr_assert_eq(atomic_load(&c[i].calls), 0);
    cr_assert(ex_stop_source_request_stop(&s));
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(atomic_load(&c[i].calls), 1, "callback %d ran %d times", i, atomic_load(&c[i].calls));
        cr_assert(pthread_equal(c[i].thread, pthread_self()));
        cr_assert(c[i].saw_stop_requested, "stop_requested() is true inside the callback");
    }
    cr_assert_not(ex_stop_source_request_stop(&s));
    for (int i = 0; i < 3; i++) cr_assert_eq(atomic_load(&c[i].calls), 1, "a second request runs nothing");
    for (int i = 0; i < 3; i++) ex_stop_callback_deregister(&c[i].cb);
    for (int i = 0; i < 3; i++) cr_assert_eq(atomic_load(&c[i].calls), 1);
    expect_no_leaks();
}

typedef struct st_req_thread {
    ex_stop_source *src;
    bool result;
    pthread_t self;
} st_req_thread;

static void *st_request_main(void *arg) {
    st_req_thread *t = arg;
    t->self = pthread_self();
    t->result = ex_stop_source_request_stop(t->src);
    return NULL;
}

Test(stoptoken_inplace, callbacks_run_on_the_requesting_thread) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    enum { N = 5 };
    st_cb c[N];
    for (int i = 0; i < N; i++) {
        st_init(&c[i], &s);
        cr_assert_not(ex_stop_callback_register(&c[i].cb, ex_stop_source_token(&s), st_count));
    }
    st_req_thread rt = { &s, false, pthread_self() };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, st_request_main, &rt), 0);
    pthread_join(th, NULL);
    cr_assert(rt.result);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&c[i].calls), 1);
        cr_assert(pthread_equal(c[i].thread, rt.self), "callback %d did not run on the requesting thread", i);
        cr_assert_not(pthread_equal(c[i].thread, pthread_self()));
    }
    for (int i = 0; i < N; i++) ex_stop_callback_deregister(&c[i].cb);
    cr_assert(ex_stop_source_stop_requested(&s));
    expect_no_leaks();
}

Test(stoptoken_inplace, register_after_stop_runs_immediately_on_registering_thread) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    cr_assert(ex_stop_source_request_stop(&s));
    st_cb c;
    st_init(&c, &s);
    cr_assert(ex_stop_callback_register(&c.cb, ex_stop_source_token(&s), st_count),
              "registration after stop returns true");
    cr_assert_eq(atomic_load(&c.calls), 1, "and the callback ran before register returned");
    cr_assert(pthread_equal(c.thread, pthread_self()));
    cr_assert(c.saw_stop_requested);
    ex_stop_callback_deregister(&c.cb); /* no-op */
    cr_assert_eq(atomic_load(&c.calls), 1);
    cr_assert_not(ex_stop_source_request_stop(&s));
    cr_assert_eq(atomic_load(&c.calls), 1, "it was never added to the list");
    ex_stop_callback_deregister(&c.cb); /* still a no-op */
    cr_assert_eq(atomic_load(&c.calls), 1);
    expect_no_leaks();
}

typedef struct st_reg_thread {
    ex_stop_source *src;
    st_cb *c;
    bool ran;
    pthread_t self;
} st_reg_thread;

static void *st_register_main(void *arg) {
    st_reg_thread *t = arg;
    t->self = pthread_self();
    t->ran = ex_stop_callback_register(&t->c->cb, ex_stop_source_token(t->src), st_count);
    ex_stop_callback_deregister(&t->c->cb);
    return NULL;
}

Test(stoptoken_inplace, register_after_stop_on_another_thread_runs_there) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    cr_assert(ex_stop_source_request_stop(&s));
    st_cb c;
    st_init(&c, &s);
    st_reg_thread rt = { &s, &c, false, pthread_self() };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, st_register_main, &rt), 0);
    pthread_join(th, NULL);
    cr_assert(rt.ran);
    cr_assert_eq(atomic_load(&c.calls), 1);
    cr_assert(pthread_equal(c.thread, rt.self), "the callback runs on the registering thread");
    expect_no_leaks();
}

Test(stoptoken_inplace, deregistration_before_stop_prevents_the_call) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_cb a, b, c;
    st_init(&a, &s);
    st_init(&b, &s);
    st_init(&c, &s);
    ex_stop_token t = ex_stop_source_token(&s);
    cr_assert_not(ex_stop_callback_register(&a.cb, t, st_count));
    cr_assert_not(ex_stop_callback_register(&b.cb, t, st_count));
    cr_assert_not(ex_stop_callback_register(&c.cb, t, st_count));
    ex_stop_callback_deregister(&b.cb); /* the middle of the list */
    ex_stop_callback_deregister(&c.cb); /* the most recent */
    cr_assert(ex_stop_source_request_stop(&s));
    cr_assert_eq(atomic_load(&a.calls), 1);
    cr_assert_eq(atomic_load(&b.calls), 0, "a deregistered callback must not run");
    cr_assert_eq(atomic_load(&c.calls), 0, "a deregistered callback must not run");
    ex_stop_callback_deregister(&a.cb);
    expect_no_leaks();
}

Test(stoptoken_inplace, callback_storage_can_be_reused_after_deregistration) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_cb c;
    st_init(&c, &s);
    for (int i = 0; i < 100; i++) {
        cr_assert_not(ex_stop_callback_register(&c.cb, ex_stop_source_token(&s), st_count));
        ex_stop_callback_deregister(&c.cb);
    }
    cr_assert_not(ex_stop_callback_register(&c.cb, ex_stop_source_token(&s), st_count));
    cr_assert(ex_stop_source_request_stop(&s));
    cr_assert_eq(atomic_load(&c.calls), 1, "only the last registration was live");
    ex_stop_callback_deregister(&c.cb);
    expect_no_leaks();
}

/* ----------------------------------------- deregistration from inside callbacks */

static void st_deregister_self(ex_stop_callback *cb) {
    st_count(cb);
    ex_stop_callback_deregister(cb); /* must return at once */
}

Test(stoptoken_inplace, callback_deregistering_itself_does_not_deadlock) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_cb a, b;
    st_init(&a, &s);
    st_init(&b, &s);
    cr_assert_not(ex_stop_callback_register(&a.cb, ex_stop_source_token(&s), st_deregister_self));
    cr_assert_not(ex_stop_callback_register(&b.cb, ex_stop_source_token(&s), st_count));
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
    ex_stop_source_init(&s);
    st_cb a, b, c;
    st_init(&a, &s);
    st_init(&b, &s);
    st_init(&c, &s);
    a.other = &b;
    b.other = &a;
    cr_assert_not(ex_stop_callback_register(&a.cb, ex_stop_source_token(&s), st_deregister_other));
    cr_assert_not(ex_stop_callback_register(&c.cb, ex_stop_source_token(&s), st_count));
    cr_assert_not(ex_stop_callback_register(&b.cb, ex_stop_source_token(&s), st_deregister_other));
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
    ex_stop_source_init(&s);
    st_cb a, b;
    st_init(&a, &s);
    st_init(&b, &s);
    a.other = &b;
    b.other = &a;
    cr_assert_not(ex_stop_callback_register(&a.cb, ex_stop_source_token(&s), st_deregister_other_after));
    cr_assert_not(ex_stop_callback_register(&b.cb, ex_stop_source_token(&s), st_deregister_other_after));
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
    st_nap(20000); /* let the deregistering thread reach the wait */
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
        st_nap(10000); /* let the owner reach its wait */
    }
    ex_stop_callback_deregister(cb); /* on the running thread: must not wait */
    atomic_store(&x->self_dropped, 1);
    st_wait_flag(&x->blk.release);
    atomic_store(&x->blk.finished, 1);
}

/* Waits for *f with a generous deadline: a liveness check (a hang fails the
 * test instead of blocking the suite), not a timing assertion. */
static bool st_wait_flag_bounded(atomic_int *f) {
    double deadline = test_now_s() + 10.0;
    while (!atomic_load(f)) {
        if (test_now_s() > deadline) return false;
        st_nap(200);
    }
    return true;
}

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
    st_nap(10000); /* let the owner reach its wait */
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
    ex_stop_source_init(&s);
    st_cb c;
    st_init(&c, &s);
    cr_assert_not(ex_stop_callback_register(&c.cb, ex_stop_source_token(&s), st_count));
    st_req_thread rt = { &s, false, pthread_self() };
    pthread_t requester;
    cr_assert_eq(pthread_create(&requester, NULL, st_request_main, &rt), 0);
    pthread_join(requester, NULL);
    ex_stop_callback_deregister(&c.cb); /* finished: must not block */
    cr_assert_eq(atomic_load(&c.calls), 1);
    expect_no_leaks();
}

/* ------------------------------------------------------------ many callbacks */

Test(stoptoken_inplace, many_callbacks) {
    enum { N = 1000 };
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_cb *c = calloc(N, sizeof *c);
    cr_assert_not_null(c);
    for (int i = 0; i < N; i++) {
        st_init(&c[i], &s);
        cr_assert_not(ex_stop_callback_register(&c[i].cb, ex_stop_source_token(&s), st_count));
    }
    for (int i = 0; i < N; i += 3) ex_stop_callback_deregister(&c[i].cb);
    cr_assert(ex_stop_source_request_stop(&s));
    int bad = -1;
    for (int i = 0; i < N && bad < 0; i++)
        if (atomic_load(&c[i].calls) != (i % 3 == 0 ? 0 : 1)) bad = i;
    for (int i = 0; i < N; i++) ex_stop_callback_deregister(&c[i].cb);
    int calls = bad >= 0 ? atomic_load(&c[bad].calls) : 0;
    free(c);
    cr_assert_eq(bad, -1, "callback %d ran %d times", bad, calls);
    expect_no_leaks();
}

Test(stoptoken_inplace, concurrent_requests_exactly_one_wins) {
    enum { T = 4, N = 50 };
    ex_stop_source s;
    ex_stop_source_init(&s);
    st_cb c[N];
    for (int i = 0; i < N; i++) {
        st_init(&c[i], &s);
        cr_assert_not(ex_stop_callback_register(&c[i].cb, ex_stop_source_token(&s), st_count));
    }
    st_req_thread rt[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        rt[i].src = &s;
        rt[i].result = false;
        cr_assert_eq(pthread_create(&th[i], NULL, st_request_main, &rt[i]), 0);
    }
    for (int i = 0; i < T; i++) pthread_join(th[i], NULL);
    int winners = 0, winner = -1;
    for (int i = 0; i < T; i++)
        if (rt[i].result) winners++, winner = i;
    cr_assert_eq(winners, 1, "exactly one request_stop returns true (got %d)", winners);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&c[i].calls), 1);
        cr_assert(pthread_equal(c[i].thread, rt[winner].self), "callbacks run on the thread that made the request");
    }
    for (int i = 0; i < N; i++) ex_stop_callback_deregister(&c[i].cb);
    expect_no_leaks();
}

/* ------------------------------------------------------------------ stress */

enum { ST_WORKERS = 4, ST_CAP = 20000, ST_EXTRA = 200, ST_ROUNDS = 20, ST_HEAD_START = 1000 };

typedef struct st_slot {
    ex_stop_callback cb;
    atomic_int calls;
    atomic_int dereg_returned;   /* set once deregistration returned */
    atomic_int late;             /* the callback ran (or was still running) after deregistration returned */
    pthread_t runner;
    bool stop_seen_before;       /* stop_requested() was true before registering */
    bool ran_inline;             /* register returned true */
    bool deregistered;
    int calls_at_dereg;
} st_slot;

static void st_slot_fn(ex_stop_callback *cb) {
    st_slot *sl = (st_slot *)(void *)cb;
    if (atomic_load(&sl->dereg_returned)) atomic_store(&sl->late, 1);
    sl->runner = pthread_self();
    atomic_fetch_add(&sl->calls, 1);
    if (atomic_load(&sl->dereg_returned)) atomic_store(&sl->late, 1);
}

typedef struct st_worker {
    ex_stop_source *src;
    st_slot *slots;
    int used;
    pthread_t self;
    atomic_int progress;
} st_worker;

static void st_worker_step(st_worker *w, int i) {
    st_slot *sl = &w->slots[i];
    sl->stop_seen_before = ex_stop_source_stop_requested(w->src);
    sl->ran_inline = ex_stop_callback_register(&sl->cb, ex_stop_source_token(w->src), st_slot_fn);
    if (i % 2 == 0) { /* even slots: deregister at once, racing the request */
        ex_stop_callback_deregister(&sl->cb);
        sl->calls_at_dereg = atomic_load(&sl->calls);
        atomic_store(&sl->dereg_returned, 1);
        sl->deregistered = true;
    }
    w->used = i + 1;
}

static void *st_worker_main(void *arg) {
    st_worker *w = arg;
    w->self = pthread_self();
    int i = 0;
    for (; i < ST_CAP && !ex_stop_source_stop_requested(w->src); i++) {
        st_worker_step(w, i);
        atomic_store(&w->progress, i + 1);
    }
    atomic_store(&w->progress, ST_CAP); /* done with the racing phase */
    while (!ex_stop_source_stop_requested(w->src)) sched_yield();
    for (int k = 0; k < ST_EXTRA; k++, i++) st_worker_step(w, i);
    return NULL;
}

/* One round: workers churn registrations on a fresh source while this
 * thread requests stop.  Returns "" or what went wrong. */
static void st_stress_round(st_worker *w, char *why, size_t why_size, long *inline_runs, long *requester_runs) {
    ex_stop_source s;
    ex_stop_source_init(&s);
    pthread_t th[ST_WORKERS];
    for (int t = 0; t < ST_WORKERS; t++) {
        w[t].src = &s;
        w[t].used = 0;
        atomic_store(&w[t].progress, 0);
        memset(w[t].slots, 0, (ST_CAP + ST_EXTRA) * sizeof(st_slot));
        for (int i = 0; i < ST_CAP + ST_EXTRA; i++) {
            atomic_init(&w[t].slots[i].calls, 0);
            atomic_init(&w[t].slots[i].dereg_returned, 0);
            atomic_init(&w[t].slots[i].late, 0);
        }
    }
    for (int t = 0; t < ST_WORKERS; t++)
        if (pthread_create(&th[t], NULL, st_worker_main, &w[t])) abort();
    /* Let every worker get going, then request stop while they churn. */
    for (int t = 0; t < ST_WORKERS; t++)
        while (atomic_load(&w[t].progress) < ST_HEAD_START) sched_yield();
    bool first = ex_stop_source_request_stop(&s);
    pthread_t me = pthread_self();
    for (int t = 0; t < ST_WORKERS; t++) pthread_join(th[t], NULL);

    if (!first) snprintf(why, why_size, "the only request_stop returned false");
    for (int t = 0; t < ST_WORKERS && !why[0]; t++) {
        for (int i = 0; i < w[t].used && !why[0]; i++) {
            st_slot *sl = &w[t].slots[i];
            int calls = atomic_load(&sl->calls);
            if (calls > 1) snprintf(why, why_size, "worker %d slot %d ran %d times", t, i, calls);
            else if (atomic_load(&sl->late))
                snprintf(why, why_size, "worker %d slot %d ran after its deregistration returned", t, i);
            else if (sl->stop_seen_before && !sl->ran_inline)
                snprintf(why, why_size, "worker %d slot %d: register after stop returned false", t, i);
            else if (sl->ran_inline && calls != 1)
                snprintf(why, why_size, "worker %d slot %d: register returned true but calls=%d", t, i, calls);
            else if (sl->ran_inline && !pthread_equal(sl->runner, w[t].self))
                snprintf(why, why_size, "worker %d slot %d: inline call not on the registering thread", t, i);
            else if (!sl->ran_inline && !sl->deregistered && calls != 1)
                snprintf(why, why_size,
                         "worker %d slot %d: registered before the request, never deregistered, calls=%d", t, i, calls);
            else if (!sl->ran_inline && calls == 1 && !pthread_equal(sl->runner, me))
                snprintf(why, why_size, "worker %d slot %d: registered callback not run by the requester", t, i);
            else if (sl->deregistered && calls != sl->calls_at_dereg)
                snprintf(why, why_size, "worker %d slot %d: ran after deregistration (%d -> %d)", t, i,
                         sl->calls_at_dereg, calls);
            if (sl->ran_inline) (*inline_runs)++;
            else if (calls == 1) (*requester_runs)++;
        }
    }
    for (int t = 0; t < ST_WORKERS; t++)
        for (int i = 0; i < w[t].used; i++) ex_stop_callback_deregister(&w[t].slots[i].cb);
}

Test(stoptoken_inplace, stress_register_deregister_race_request_stop) {
    st_worker w[ST_WORKERS];
    for (int t = 0; t < ST_WORKERS; t++) {
        w[t].slots = malloc((ST_CAP + ST_EXTRA) * sizeof(st_slot));
        cr_assert_not_null(w[t].slots);
        atomic_init(&w[t].progress, 0);
    }
    char why[256] = "";
    long inline_runs = 0, requester_runs = 0;
    int round = 0;
    for (; round < ST_ROUNDS && !why[0]; round++) st_stress_round(w, why, sizeof why, &inline_runs, &requester_runs);
    for (int t = 0; t < ST_WORKERS; t++) free(w[t].slots);
    cr_assert_str_empty(why, "round %d: %s", round, why);
    cr_assert_geq(inline_runs, (long)ST_ROUNDS * ST_WORKERS * ST_EXTRA,
                  "every registration after stop was seen ran inline");
    cr_assert_gt(requester_runs, 0, "held callbacks registered before the request ran on the requester");
    expect_no_leaks();
}
