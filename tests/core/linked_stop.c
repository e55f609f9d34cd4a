/* SPDX-License-Identifier: MIT */
/* Linked stop sources (ex_linked_stop_source): stop follows any of 1..4
 * parents, never-stop parents are skipped, a parent stopped already stops
 * the source at once, destroy unlinks (also from inside a callback, and
 * waits for a parent's request running the link on another thread).
 *
 * Nothing asserts on timing: a sleep only gives a thread the chance to do
 * something it must not do; every wait is bounded. */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "core/stop_fixtures.h"

TEST_SUITE(stoptoken_linked, 20);

/* l's source, for the st_cb fixtures (they observe stop_requested()). */
static ex_stop_source *src_of(ex_linked_stop_source *l) { return ex_linked_stop_source_token(l).src; }

static void init_ok(ex_linked_stop_source *l, const ex_stop_token *parents, size_t n) {
    ex_error e = ex_linked_stop_source_init(l, parents, n);
    cr_assert_eq(e.code, EX_OK, "init: %s", e.msg ? e.msg : "");
}

/* n parent sources, initialised, and their tokens. */
static void parents_init(ex_stop_source *p, ex_stop_token *tokens, int n) {
    for (int i = 0; i < n; i++) {
        ex_stop_source_init(&p[i]);
        tokens[i] = ex_stop_source_token(&p[i]);
    }
}

/* --------------------------------------------------------- following parents */

Test(stoptoken_linked, any_of_one_to_four_parents_stops_the_source) {
    for (size_t n = 1; n <= EX_STOP_LINK_MAX; n++) {
        for (size_t which = 0; which < n; which++) {
            ex_stop_source parent[EX_STOP_LINK_MAX];
            ex_stop_token tokens[EX_STOP_LINK_MAX];
            for (size_t i = 0; i < n; i++) {
                ex_stop_source_init(&parent[i]);
                tokens[i] = ex_stop_source_token(&parent[i]);
            }
            ex_linked_stop_source l;
            init_ok(&l, tokens, n);
            ex_stop_token t = ex_linked_stop_source_token(&l);
            cr_assert(ex_stop_token_stop_possible(t));
            st_cb c;
            st_init(&c, src_of(&l));
            cr_assert_not(ex_stop_callback_register(&c.cb, t, st_count));
            cr_assert_not(ex_stop_token_stop_requested(t));

            cr_assert(ex_stop_source_request_stop(&parent[which]));
            cr_assert(ex_stop_token_stop_requested(t), "n=%zu: parent %zu's stop did not reach the source", n, which);
            cr_assert_eq(atomic_load(&c.calls), 1, "n=%zu, parent %zu", n, which);
            cr_assert(pthread_equal(c.thread, pthread_self()), "the callback runs on the parent's requesting thread");
            cr_assert(c.saw_stop_requested);
            /* The other parents stopping later changes nothing. */
            for (size_t i = 0; i < n; i++) (void)ex_stop_source_request_stop(&parent[i]);
            cr_assert_eq(atomic_load(&c.calls), 1);
            for (size_t i = 0; i < n; i++)
                cr_assert_eq(ex_stop_source_stop_requested(&parent[i]), true);
            ex_stop_callback_deregister(&c.cb);
            ex_linked_stop_source_destroy(&l);
        }
    }
    expect_no_leaks();
}

Test(stoptoken_linked, its_own_request_stops_it_and_not_its_parents) {
    ex_stop_source p;
    ex_stop_source_init(&p);
    ex_stop_token pt = ex_stop_source_token(&p);
    ex_linked_stop_source l;
    init_ok(&l, &pt, 1);
    st_cb c;
    st_init(&c, src_of(&l));
    cr_assert_not(ex_stop_callback_register(&c.cb, ex_linked_stop_source_token(&l), st_count));
    cr_assert(ex_linked_stop_source_request_stop(&l));
    cr_assert_not(ex_linked_stop_source_request_stop(&l), "only the first request counts");
    cr_assert(ex_linked_stop_source_stop_requested(&l));
    cr_assert_eq(atomic_load(&c.calls), 1);
    cr_assert_not(ex_stop_source_stop_requested(&p), "stop does not flow up to the parent");
    cr_assert(ex_stop_source_request_stop(&p));
    cr_assert_eq(atomic_load(&c.calls), 1);
    ex_linked_stop_source_destroy(&l);
    expect_no_leaks();
}

Test(stoptoken_linked, never_stop_parents_are_skipped) {
    ex_stop_source p;
    ex_stop_source_init(&p);
    ex_stop_token tokens[EX_STOP_LINK_MAX] = { ex_never_stop_token(), ex_never_stop_token(), ex_stop_source_token(&p),
                                               ex_never_stop_token() };
    ex_linked_stop_source l;
    init_ok(&l, tokens, EX_STOP_LINK_MAX);
    cr_assert(ex_stop_token_stop_possible(ex_linked_stop_source_token(&l)));
    cr_assert(ex_stop_source_request_stop(&p));
    cr_assert(ex_linked_stop_source_stop_requested(&l));
    ex_linked_stop_source_destroy(&l);

    /* Only never-stop parents, or none at all: the source's own request
     * is the only one. */
    for (size_t n = 0; n <= 2; n++) {
        init_ok(&l, n ? tokens : NULL, n);
        cr_assert_not(ex_linked_stop_source_stop_requested(&l));
        cr_assert(ex_linked_stop_source_request_stop(&l));
        cr_assert(ex_linked_stop_source_stop_requested(&l));
        ex_linked_stop_source_destroy(&l);
    }
    expect_no_leaks();
}

Test(stoptoken_linked, a_parent_stopped_already_stops_it_at_once) {
    ex_stop_source p[3];
    ex_stop_token tokens[3];
    parents_init(p, tokens, 3);
    cr_assert(ex_stop_source_request_stop(&p[1]));
    ex_linked_stop_source l;
    init_ok(&l, tokens, 3);
    cr_assert(ex_linked_stop_source_stop_requested(&l), "stopped during init");
    /* A callback registered now runs at once, as on any stopped source. */
    st_cb c;
    st_init(&c, src_of(&l));
    cr_assert(ex_stop_callback_register(&c.cb, ex_linked_stop_source_token(&l), st_count));
    cr_assert_eq(atomic_load(&c.calls), 1);
    cr_assert(ex_stop_source_request_stop(&p[0]));
    cr_assert(ex_stop_source_request_stop(&p[2]));
    cr_assert_eq(atomic_load(&c.calls), 1);
    ex_linked_stop_source_destroy(&l);
    expect_no_leaks();
}

Test(stoptoken_linked, a_linked_source_may_be_a_parent) {
    ex_stop_source root;
    ex_stop_source_init(&root);
    ex_stop_token rt = ex_stop_source_token(&root);
    ex_linked_stop_source mid, leaf;
    init_ok(&mid, &rt, 1);
    ex_stop_token parents[2] = { ex_linked_stop_source_token(&mid), rt };  /* the root twice, one way or another */
    init_ok(&leaf, parents, 2);
    st_cb c;
    st_init(&c, src_of(&leaf));
    cr_assert_not(ex_stop_callback_register(&c.cb, ex_linked_stop_source_token(&leaf), st_count));
    cr_assert(ex_stop_source_request_stop(&root));
    cr_assert(ex_linked_stop_source_stop_requested(&mid));
    cr_assert(ex_linked_stop_source_stop_requested(&leaf));
    cr_assert_eq(atomic_load(&c.calls), 1, "reached twice, run once");
    ex_linked_stop_source_destroy(&leaf);
    ex_linked_stop_source_destroy(&mid);
    expect_no_leaks();
}

/* ------------------------------------------------------------------ errors */

Test(stoptoken_linked, bad_arguments_are_einval) {
    ex_stop_source p;
    ex_stop_source_init(&p);
    ex_stop_token tokens[EX_STOP_LINK_MAX + 1];
    for (size_t i = 0; i <= EX_STOP_LINK_MAX; i++) tokens[i] = ex_stop_source_token(&p);
    ex_linked_stop_source l;
    expect_err(ex_linked_stop_source_init(&l, tokens, EX_STOP_LINK_MAX + 1), EX_EINVAL);
    /* l is a valid, unlinked source all the same. */
    cr_assert(ex_stop_source_request_stop(&p));
    cr_assert_not(ex_linked_stop_source_stop_requested(&l), "refused: not linked");
    ex_linked_stop_source_destroy(&l);
    expect_err(ex_linked_stop_source_init(&l, NULL, 1), EX_EINVAL);
    ex_linked_stop_source_destroy(&l);
    expect_err(ex_linked_stop_source_init(NULL, tokens, 1), EX_EINVAL);
    ex_linked_stop_source_destroy(NULL);
    cr_assert_not(ex_linked_stop_source_request_stop(NULL));
    cr_assert_not(ex_linked_stop_source_stop_requested(NULL));
    cr_assert_not(ex_stop_token_stop_possible(ex_linked_stop_source_token(NULL)));
    expect_no_leaks();
}

/* ------------------------------------------------------------------ destroy */

Test(stoptoken_linked, destroyed_it_no_longer_follows_its_parents) {
    ex_stop_source p[2];
    ex_stop_token tokens[2];
    parents_init(p, tokens, 2);
    ex_linked_stop_source l;
    init_ok(&l, tokens, 2);
    ex_linked_stop_source_destroy(&l);
    ex_linked_stop_source_destroy(&l);  /* idempotent */
    memset(&l, 0x5a, sizeof l);         /* what a reuse of the memory would do */
    cr_assert(ex_stop_source_request_stop(&p[0]));
    cr_assert(ex_stop_source_request_stop(&p[1]));
    expect_no_leaks();
}

/* A callback on the linked source that destroys it: reached through a
 * parent's request, so the link that runs it is running on this thread. */
typedef struct destroyer {
    st_cb c;
    ex_linked_stop_source *l;
} destroyer;

static void destroy_from_inside(ex_stop_callback *cb) {
    destroyer *d = (destroyer *)(void *)st_of(cb);
    st_count(cb);
    ex_linked_stop_source_destroy(d->l);  /* must return at once */
}

Test(stoptoken_linked, destroy_from_inside_its_callback_returns_at_once) {
    ex_stop_source p[2];
    ex_stop_token tokens[2];
    parents_init(p, tokens, 2);
    ex_linked_stop_source l;
    init_ok(&l, tokens, 2);
    destroyer d;
    st_init(&d.c, src_of(&l));
    d.l = &l;
    st_cb after;
    st_init(&after, src_of(&l));
    cr_assert_not(ex_stop_callback_register(&after.cb, ex_linked_stop_source_token(&l), st_count));
    cr_assert_not(ex_stop_callback_register(&d.c.cb, ex_linked_stop_source_token(&l), destroy_from_inside));
    cr_assert(ex_stop_source_request_stop(&p[1]));
    cr_assert_eq(atomic_load(&d.c.calls), 1);
    cr_assert_eq(atomic_load(&after.calls), 1, "the source's other callbacks still run");
    /* The other parent was unlinked inside the callback. */
    memset(&l, 0x5a, sizeof l);
    cr_assert(ex_stop_source_request_stop(&p[0]));
    expect_no_leaks();
}

/* A callback on a parent (not through the link) that destroys the linked
 * source while the parent's request is running: the link, still queued on
 * the parent, is removed and never runs. */
static ex_linked_stop_source *unlink_target;
static void destroy_linked_from_parent(ex_stop_callback *cb) {
    st_count(cb);
    ex_linked_stop_source_destroy(unlink_target);
}

Test(stoptoken_linked, destroy_from_a_parents_callback_unlinks_before_the_link_runs) {
    ex_stop_source p;
    ex_stop_source_init(&p);
    ex_stop_token pt = ex_stop_source_token(&p);
    ex_linked_stop_source l;
    /* Registered on p after the link, so p runs it first (its list is
     * LIFO, an implementation detail this test relies on). */
    init_ok(&l, &pt, 1);
    st_cb on_parent;
    st_init(&on_parent, &p);
    unlink_target = &l;
    cr_assert_not(ex_stop_callback_register(&on_parent.cb, pt, destroy_linked_from_parent));
    cr_assert(ex_stop_source_request_stop(&p));
    cr_assert_eq(atomic_load(&on_parent.calls), 1);
    cr_assert_not(ex_linked_stop_source_stop_requested(&l), "the link ran although it was unlinked before");
    expect_no_leaks();
}

/* A callback on the linked source that blocks (bounded) until released:
 * the parent's request running it on another thread, destroy must wait. */
typedef struct blocker {
    st_cb c;
    atomic_int entered, release, finished;
} blocker;

static void block_until_released(ex_stop_callback *cb) {
    blocker *b = (blocker *)(void *)st_of(cb);
    st_count(cb);
    atomic_store(&b->entered, 1);
    st_wait_flag(&b->release);
    atomic_store(&b->finished, 1);
}

typedef struct destroy_thread {
    ex_linked_stop_source *l;
    blocker *b;
    atomic_int returned;
    int finished_at_return;
} destroy_thread;

static void *destroy_main(void *arg) {
    destroy_thread *t = arg;
    ex_linked_stop_source_destroy(t->l);
    t->finished_at_return = atomic_load(&t->b->finished);
    atomic_store(&t->returned, 1);
    return NULL;
}

Test(stoptoken_linked, destroy_waits_for_a_parents_request_running_the_link_elsewhere) {
    ex_stop_source p;
    ex_stop_source_init(&p);
    ex_stop_token pt = ex_stop_source_token(&p);
    ex_linked_stop_source l;
    init_ok(&l, &pt, 1);
    blocker b;
    memset(&b, 0, sizeof b);
    st_init(&b.c, src_of(&l));
    cr_assert_not(ex_stop_callback_register(&b.c.cb, ex_linked_stop_source_token(&l), block_until_released));
    st_req_thread req = { &p, false, pthread_self() };
    pthread_t rt, dt;
    cr_assert_eq(pthread_create(&rt, NULL, st_request_main, &req), 0);
    st_wait_flag(&b.entered);
    destroy_thread d = { &l, &b, 0, 0 };
    cr_assert_eq(pthread_create(&dt, NULL, destroy_main, &d), 0);
    test_sleep_ms(50);
    cr_assert_eq(atomic_load(&d.returned), 0, "destroy returned while the parent's request ran the link");
    atomic_store(&b.release, 1);
    cr_assert_eq(pthread_join(dt, NULL), 0);
    cr_assert_eq(pthread_join(rt, NULL), 0);
    cr_assert(req.result);
    cr_assert_eq(d.finished_at_return, 1, "destroy returned before the callback did");
    ex_stop_callback_deregister(&b.c.cb);
    expect_no_leaks();
}

/* Two parents stopped at once from two threads: the source's callbacks
 * run once, every request returns, destroy afterwards is clean. */
typedef struct racer {
    ex_stop_source *src;
    atomic_int *go;
    bool result;
} racer;

static void *race_main(void *arg) {
    racer *r = arg;
    while (!atomic_load(r->go)) { }
    r->result = ex_stop_source_request_stop(r->src);
    return NULL;
}

Test(stoptoken_linked, two_parents_stopping_at_once_run_its_callbacks_once) {
    for (int round = 0; round < 200; round++) {
        ex_stop_source p[2];
        ex_stop_token tokens[2];
        parents_init(p, tokens, 2);
        ex_linked_stop_source l;
        init_ok(&l, tokens, 2);
        st_cb c[3];
        for (int i = 0; i < 3; i++) {
            st_init(&c[i], src_of(&l));
            cr_assert_not(ex_stop_callback_register(&c[i].cb, ex_linked_stop_source_token(&l), st_count));
        }
        atomic_int go = 0;
        racer r[2] = { { &p[0], &go, false }, { &p[1], &go, false } };
        pthread_t t[2];
        for (int i = 0; i < 2; i++) cr_assert_eq(pthread_create(&t[i], NULL, race_main, &r[i]), 0);
        atomic_store(&go, 1);
        for (int i = 0; i < 2; i++) cr_assert_eq(pthread_join(t[i], NULL), 0);
        cr_assert(r[0].result && r[1].result, "each parent's own request is its first");
        cr_assert(ex_linked_stop_source_stop_requested(&l));
        for (int i = 0; i < 3; i++) {
            cr_assert_eq(atomic_load(&c[i].calls), 1, "round %d: callback %d ran %d times", round, i,
                         atomic_load(&c[i].calls));
            ex_stop_callback_deregister(&c[i].cb);
        }
        ex_linked_stop_source_destroy(&l);
    }
    expect_no_leaks();
}
