/* SPDX-License-Identifier: MIT */
/* [stoptoken.inplace], [stopsource.inplace], [stopcallback.inplace],
 * [stoptoken.never] and the stoppable-token rules of [stoptoken.concepts]:
 * the in-place stop source, its tokens and callbacks, and the never-stop
 * token. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/stop_fixtures.h"

TEST_SUITE(stoptoken_inplace, 20);

/* Also: stop_token_deregister.c (deregistration from inside callbacks and
 * while they run), stop_token_stress.c. */

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
    st_cb c;
    st_setup(&s, &c, NULL);
    cr_assert(ex_stop_source_request_stop(&s));
    cr_assert(st_register(&c, st_count), "registration after stop returns true");
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
    t->ran = st_register(t->c, st_count); /* c->src is t->src */
    ex_stop_callback_deregister(&t->c->cb);
    return NULL;
}

Test(stoptoken_inplace, register_after_stop_on_another_thread_runs_there) {
    ex_stop_source s;
    st_cb c;
    st_setup(&s, &c, NULL);
    cr_assert(ex_stop_source_request_stop(&s));
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
    st_cb a, b, c;
    st_setup(&s, &a, &b, &c, NULL);
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
    st_cb c;
    st_setup(&s, &c, NULL);
    for (int i = 0; i < 100; i++) {
        cr_assert_not(st_register(&c, st_count));
        ex_stop_callback_deregister(&c.cb);
    }
    cr_assert_not(st_register(&c, st_count));
    cr_assert(ex_stop_source_request_stop(&s));
    cr_assert_eq(atomic_load(&c.calls), 1, "only the last registration was live");
    ex_stop_callback_deregister(&c.cb);
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

/* NULL is never a crash: a NULL source is never stopped, and a NULL
 * callback or function is neither registered nor run. */
Test(stoptoken_inplace, null_sources_and_callbacks_are_refused_quietly) {
    ex_stop_source_init(NULL);
    cr_assert_not(ex_stop_source_request_stop(NULL));
    cr_assert_not(ex_stop_source_stop_requested(NULL));
    ex_stop_source src;
    ex_stop_source_init(&src);
    cr_assert_not(ex_stop_callback_register(NULL, ex_stop_source_token(&src), NULL));
    ex_stop_callback cb;
    cr_assert_not(ex_stop_callback_register(&cb, ex_stop_source_token(&src), NULL));
    cr_assert(ex_stop_source_request_stop(&src), "the NULL function was registered and run");
    ex_stop_callback_deregister(&cb);
    ex_stop_callback_deregister(NULL);
}
