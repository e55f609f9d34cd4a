/* SPDX-License-Identifier: MIT */
/* The strand over the inline scheduler, a run loop, another strand and
 * schedulers without post, and running work through a strand without
 * allocating (suite exec_strand, declared in strand_create.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resources/run_loop_fixtures.h"
#include "resources/strand_fixtures.h"

/* Threads that post their items to a strand, all starting together. */
typedef struct poster {
    ex_scheduler sch;
    item *its;
    int n;
    atomic_int *go;
} poster;

enum { MAX_POSTERS = 4 };

static void *poster_main(void *arg) {
    const poster *t = arg;
    while (!atomic_load(t->go)) sched_yield();
    for (int i = 0; i < t->n; i++) (void)ex_post(t->sch, &t->its[i].w);
    return NULL;
}

/* Thread k posts items its[k][0..n) to schs[k]; returns when every post
 * returned. */
static void post_from_threads(int threads, const ex_scheduler *schs, item *const *its, int n) {
    poster t[MAX_POSTERS];
    pthread_t th[MAX_POSTERS];
    atomic_int go = 0;
    cr_assert_leq(threads, MAX_POSTERS);
    for (int k = 0; k < threads; k++) {
        t[k] = (poster){ schs[k], its[k], n, &go };
        cr_assert_eq(pthread_create(&th[k], NULL, poster_main, &t[k]), 0);
    }
    atomic_store(&go, 1);
    for (int k = 0; k < threads; k++) pthread_join(th[k], NULL);
}

/* Each poster's items ran once, in its order (ran_seen: items run before). */
static void expect_each_poster_in_order(item *const *its, int threads, int n) {
    for (int k = 0; k < threads; k++)
        for (int i = 0; i < n; i++) {
            cr_assert_eq(atomic_load(&its[k][i].runs), 1, "poster %d item %d ran %d times", k, i,
                         atomic_load(&its[k][i].runs));
            if (i) cr_assert_gt(its[k][i].ran_seen, its[k][i - 1].ran_seen, "poster %d: item %d before %d", k, i, i - 1);
        }
}

/* =================================================== inline underneath */

static void post_arg_record_action(item *it) {
    item *inner = it->arg;
    it->call_err = ex_post(it->sch, &inner->w);
    it->ran_seen = atomic_load(&inner->runs);
}

Test(exec_strand, strand_over_inline_runs_inline_and_in_order) {
    rig r;
    rig_open_over(&r, ex_inline_scheduler(), 3, 0);
    item *a = &r.it[0];
    rig_post(&r, 0, 1);
    cr_assert_eq(atomic_load(&a->runs), 1, "over the inline scheduler the item runs inside post");
    cr_assert(pthread_equal(a->tid, pthread_self()));

    /* An item that posts to its strand: queued behind it, not nested in it,
     * and run before the outer post returns. */
    item *outer = &r.it[1], *inner = &r.it[2];
    outer->action = post_arg_record_action;
    outer->arg = inner;
    outer->sch = r.sch;
    rig_post(&r, 1, 2);
    cr_assert_eq(outer->call_err.code, 0);
    cr_assert_eq(outer->ran_seen, 0, "a post from inside ran the item nested in the poster");
    cr_assert_eq(atomic_load(&inner->runs), 1);
    expect_log_in_order(r.b, 3);
    cr_assert_eq(atomic_load(&r.b->violations), 0);

    sync_schedule_ok(r.sch); /* set_value inside start */
    cr_assert_eq(ex_strand_executed(r.s), 4);
    rig_close(&r, true);
}

Test(exec_strand, strand_over_inline_serialises_threads) {
    enum { T = 4, N = 2000 };
    rig r;
    rig_open_over(&r, ex_inline_scheduler(), T * N, 0);
    ex_scheduler schs[T];
    item *its[T];
    for (int k = 0; k < T; k++) {
        schs[k] = r.sch;
        its[k] = r.it + k * N;
    }
    for (int i = 0; i < T * N; i++) r.it[i].spin = 200;
    post_from_threads(T, schs, its, N);
    /* Every post returned; each item ran on some posting thread. */
    EXPECT_INT_REACHES(&r.b->ran, T * N);
    cr_assert_eq(atomic_load(&r.b->violations), 0, "%d item(s) overlapped", atomic_load(&r.b->violations));
    cr_assert_eq(r.b->plain, T * N);
    for (int i = 0; i < T * N; i++) cr_assert_eq(atomic_load(&r.it[i].runs), 1);
    cr_assert_eq(ex_strand_executed(r.s), (uint64_t)(T * N));
    rig_close(&r, false);
}

/* A chain of items, each posting the next from inside, over the inline
 * scheduler: one strand turn after another on the same thread.  The stack
 * must not grow with the length of the chain. */
typedef struct chain {
    ex_work w;
    ex_scheduler sch;
    long left, runs;
    uintptr_t lo, hi;
} chain;

static void chain_exec(ex_work *w) {
    chain *c = (chain *)(void *)w;
    volatile char probe = 0;
    uintptr_t at = (uintptr_t)&probe;
    if (!c->lo || at < c->lo) c->lo = at;
    if (at > c->hi) c->hi = at;
    c->runs++;
    if (--c->left > 0) (void)ex_post(c->sch, &c->w);
}

Test(exec_strand, strand_over_inline_stack_does_not_grow_with_the_queue) {
    ex_strand *s = strand_new(ex_inline_scheduler());
    chain c;
    memset(&c, 0, sizeof c);
    c.w.execute = chain_exec;
    c.sch = ex_strand_scheduler(s);
    enum { N = 64 * 1000 };
    c.left = N;
    cr_assert_eq(ex_post(c.sch, &c.w).code, 0);
    cr_assert_eq(c.runs, N);
    uintptr_t depth = c.hi - c.lo;
    cr_assert_lt(depth, 64u * 1024u,
                 "the stack grew by %lu bytes over %d items run in one post call (about %lu bytes per "
                 "64-item turn): each turn nests in the previous one",
                 (unsigned long)depth, N, (unsigned long)(depth / (N / 64)));
    strand_free_now(s);
    expect_no_leaks();
}

/* ====================================================== run loop underneath */

Test(exec_strand, strand_over_a_run_loop_runs_items_when_the_loop_runs) {
    enum { N = 200, M = 40 };
    ex_run_loop loop;
    test_loop_init(&loop);
    rig r;
    rig_open_over(&r, ex_run_loop_scheduler(&loop), N, M);
    rig_post(&r, 0, N);
    rig_start(&r, 0, M);
    test_sleep_ms(5);
    cr_assert_eq(atomic_load(&r.b->ran), 0, "items ran although the loop does not run");
    cr_assert_eq(ex_strand_destroy(r.s).code, EX_EBUSY);

    rl_runner rn;
    pthread_t th;
    rl_runner_start(&rn, &loop, &th);
    EXPECT_INT_REACHES(&r.b->ran, N + M);
    ex_run_loop_finish(&loop);
    pthread_join(th, NULL);
    for (int i = 0; i < N; i++) cr_assert(pthread_equal(r.it[i].tid, th), "item %d ran off the loop's thread", i);
    for (int i = 0; i < M; i++) {
        cr_assert_eq(atomic_load(&r.o[i].values), 1);
        cr_assert(pthread_equal(r.o[i].tid, th), "op %d completed off the loop's thread", i);
    }
    expect_log_in_order(r.b, N + M);
    rig_close(&r, true); /* the loop's thread returned: the strand is idle */
    test_loop_destroy(&loop);
}

/* ======================================================== strand over strand */

Test(exec_strand, strand_over_a_strand_is_serialised_with_it) {
    enum { N = 1500 };
    rig a;  /* strand A; its box serves B as well: an item of B runs inside an item of A */
    rig_open(&a, 4, 2 * N, 0);
    ex_strand *bs = strand_new(a.sch);
    for (int i = 0; i < 2 * N; i++) a.it[i].spin = 100;
    ex_scheduler schs[2] = { a.sch, ex_strand_scheduler(bs) };
    item *its[2] = { a.it, a.it + N };
    post_from_threads(2, schs, its, N);
    EXPECT_INT_REACHES(&a.b->ran, 2 * N);
    cr_assert_eq(atomic_load(&a.b->violations), 0, "items of A and of B (over A) overlapped");
    cr_assert_eq(a.b->plain, 2 * N);
    for (int i = 0; i < N; i++) cr_assert_geq(its[1][i].worker, 0, "an item of B ran off the pool");
    expect_each_poster_in_order(its, 2, N); /* per strand, the order of its one poster */
    cr_assert_eq(ex_strand_executed(bs), (uint64_t)N);
    cr_assert_geq(ex_strand_executed(a.s), (uint64_t)N + 1, "A runs its own items and B's turns");
    strand_free(bs);
    rig_close(&a, false);
}

/* ============================================ schedulers without post */

/* A scheduler without post: schedule operations queue on a list that the
 * test runs by hand (or complete at once with stopped / error, or connect
 * fails), and every connect and destroy is counted. */
enum { MS_QUEUE, MS_STOPPED, MS_ERROR, MS_CONNECT_FAILS, MS_HANDOFF };

typedef struct manual {
    pthread_mutex_t mu;
    ex_work *head, *tail;
    int mode;
    atomic_int connects, destroys, starts, live;
    atomic_int stop_driver;  /* tells driver_main to return */
    atomic_int completions;  /* completions that have returned */
    pthread_t driver;        /* MS_HANDOFF: the thread that runs the queue */
} manual;

typedef struct manual_op {
    ex_operation base;
    ex_work work;
    manual *m;
    ex_receiver r;
    bool alive;
} manual_op;


static manual_op *manual_op_of(ex_work *w) {
    return (manual_op *)(void *)((char *)w - offsetof(manual_op, work));
}

static atomic_int manual_overlaps;  /* a connect while the previous op was not destroyed */

static void manual_run_op(ex_work *w) {
    manual *m = manual_op_of(w)->m;
    ex_receiver r = manual_op_of(w)->r;
    ex_set_value(r, NULL, 0); /* the receiver may destroy and reuse the op: not touched after */
    atomic_fetch_add(&m->completions, 1);
}

static void manual_start(ex_operation *op) {
    manual_op *o = (manual_op *)op;
    manual *m = o->m;
    atomic_fetch_add(&m->starts, 1);
    if (m->mode == MS_STOPPED) {
        ex_set_stopped(o->r);
        return;
    }
    if (m->mode == MS_ERROR) {
        ex_set_error(o->r, ex_err(EX_EUSER + 1, "manual: refused"));
        return;
    }
    o->work.next = NULL;
    o->work.execute = manual_run_op;
    o->work.cancel = NULL;
    int before = atomic_load(&m->completions);
    pthread_mutex_lock(&m->mu);
    if (m->tail) m->tail->next = &o->work;
    else m->head = &o->work;
    m->tail = &o->work;
    pthread_mutex_unlock(&m->mu);
    /* MS_HANDOFF, started off the driver: returns only after the driver
     * completed the operation (a completion elsewhere before start returns). */
    if (m->mode == MS_HANDOFF && !pthread_equal(pthread_self(), m->driver))
        (void)wait_int_reaches(&m->completions, before + 1);
}

static void manual_destroy(ex_operation *op) {
    manual_op *o = (manual_op *)op;
    atomic_fetch_add(&o->m->destroys, 1);
    atomic_fetch_sub(&o->m->live, 1);
}

static const ex_operation_vtable manual_op_vt = { manual_start, manual_destroy };

static ex_error manual_connect(void *self, ex_receiver r, void *storage) {
    manual *m = self;
    if (m->mode == MS_CONNECT_FAILS) return ex_err(EX_ENOMEM, "manual: connect fails");
    if (atomic_fetch_add(&m->live, 1) != 0) atomic_fetch_add(&manual_overlaps, 1);
    atomic_fetch_add(&m->connects, 1);
    manual_op *o = storage;
    o->base.vt = &manual_op_vt;
    o->m = m;
    o->r = r;
    return ex_ok();
}

static const ex_scheduler_vtable manual_vt = {
    .name = "manual",
    .schedule_op_size = sizeof(manual_op),
    .schedule_op_align = alignof(manual_op),
    .schedule_flags = EX_SIGS_STOPPED | EX_SIGS_ERROR,
    .connect_schedule = manual_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
};

/* Also clears manual_overlaps (one manual scheduler per test at a time). */
static void manual_init(manual *m, int mode) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->mode = mode;
    atomic_store(&manual_overlaps, 0);
}

static ex_scheduler manual_scheduler(manual *m) {
    ex_scheduler s = { &manual_vt, m };
    return s;
}

/* Runs queued operations (and what they queue) until none is left. */
static int manual_run_all(manual *m) {
    int n = 0;
    for (;;) {
        pthread_mutex_lock(&m->mu);
        ex_work *w = m->head;
        if (w) {
            m->head = w->next;
            if (!m->head) m->tail = NULL;
        }
        pthread_mutex_unlock(&m->mu);
        if (!w) return n;
        w->execute(w);
        n++;
    }
}

Test(exec_strand, strand_over_a_scheduler_without_post) {
    enum { N = 200, M = 20 };
    manual m;
    manual_init(&m, MS_QUEUE);
    rig r;
    rig_open_over(&r, manual_scheduler(&m), N + 1, M);
    for (int i = 0; i < M; i++) r.o[i].id = N + i;
    item *more = &r.it[N];
    more->id = N + M;
    rig_post(&r, 0, N);
    rig_start(&r, 0, M);
    cr_assert_eq(atomic_load(&r.b->ran), 0, "nothing runs before the scheduler runs its operations");
    cr_assert_eq(atomic_load(&m.connects), 1, "one turn queued for the whole queue");
    cr_assert_eq(ex_strand_destroy(r.s).code, EX_EBUSY);
    int turns = manual_run_all(&m);
    cr_assert_eq(atomic_load(&r.b->ran), N + M);
    cr_assert_geq(turns, (N + M + 63) / 64, "at most 64 items per turn");
    expect_log_in_order(r.b, N + M);
    for (int i = 0; i < N; i++) {
        cr_assert_not(r.it[i].saw_in_call);
        cr_assert(pthread_equal(r.it[i].tid, pthread_self()));
    }
    for (int i = 0; i < M; i++) cr_assert_eq(atomic_load(&r.o[i].values), 1);
    /* Idle, then busy again: a new turn. */
    rig_post(&r, N, N + 1);
    cr_assert_eq(atomic_load(&more->runs), 0);
    cr_assert_eq(manual_run_all(&m), 1);
    cr_assert_eq(atomic_load(&more->runs), 1);
    cr_assert_eq(atomic_load(&manual_overlaps), 0, "a turn's operation was connected over a live one");
    cr_assert_eq(ex_strand_executed(r.s), (uint64_t)(N + M + 1));
    rig_close(&r, true);
    cr_assert_eq(atomic_load(&m.live), 0, "connects %d, destroys %d: the strand leaked an operation",
                 atomic_load(&m.connects), atomic_load(&m.destroys));
    pthread_mutex_destroy(&m.mu);
}

/* A thread that runs m's operations until stop_driver is set. */
static void *driver_main(void *arg) {
    manual *m = arg;
    while (!atomic_load(&m->stop_driver))
        if (!manual_run_all(m)) sched_yield();
    manual_run_all(m);
    return NULL;
}

Test(exec_strand, strand_over_a_scheduler_without_post_driven_by_a_thread) {
    enum { T = 3, N = 2000 };
    manual m;
    manual_init(&m, MS_QUEUE);
    rig r;
    rig_open_over(&r, manual_scheduler(&m), T * N, 0);
    pthread_t dt;
    cr_assert_eq(pthread_create(&dt, NULL, driver_main, &m), 0);
    ex_scheduler schs[T];
    item *its[T];
    for (int k = 0; k < T; k++) {
        schs[k] = r.sch;
        its[k] = r.it + k * N;
    }
    post_from_threads(T, schs, its, N);
    EXPECT_INT_REACHES(&r.b->ran, T * N);
    atomic_store(&m.stop_driver, 1);
    pthread_join(dt, NULL);
    cr_assert_eq(atomic_load(&r.b->violations), 0);
    cr_assert_eq(r.b->plain, T * N);
    expect_each_poster_in_order(its, T, N);
    for (int i = 0; i < T * N; i++) cr_assert(pthread_equal(r.it[i].tid, dt), "item %d ran off the driver thread", i);
    cr_assert_eq(atomic_load(&manual_overlaps), 0, "a turn's operation was connected over a live one");
    rig_close(&r, true);
    cr_assert_eq(atomic_load(&m.live), 0, "connects %d, destroys %d", atomic_load(&m.connects),
                 atomic_load(&m.destroys));
    pthread_mutex_destroy(&m.mu);
}

/* A schedule operation completed on another thread before its start
 * returned is not an inline completion: the strand drains there, on the
 * underlying scheduler's agent, never on the poster's thread. */
Test(exec_strand, strand_drains_where_a_schedule_completes_before_its_start_returns) {
    enum { N = 20 };
    manual m;
    manual_init(&m, MS_HANDOFF);
    rig r;
    rig_open_over(&r, manual_scheduler(&m), N, 0);
    cr_assert_eq(pthread_create(&m.driver, NULL, driver_main, &m), 0);
    rig_post(&r, 0, N);  /* each post finds the strand idle and kicks it */
    EXPECT_INT_REACHES(&r.b->ran, N);
    atomic_store(&m.stop_driver, 1);
    pthread_join(m.driver, NULL);
    expect_log_in_order(r.b, N);
    for (int i = 0; i < N; i++) cr_assert(pthread_equal(r.it[i].tid, m.driver), "item %d ran off the driver thread", i);
    rig_close(&r, true);
    cr_assert_eq(atomic_load(&m.live), 0);
    pthread_mutex_destroy(&m.mu);
}

Test(exec_strand, strand_over_a_scheduler_that_refuses_drops_the_queue) {
    const int modes[3] = { MS_STOPPED, MS_ERROR, MS_CONNECT_FAILS };
    for (int k = 0; k < 3; k++) {
        manual m;
        manual_init(&m, modes[k]);
        rig r;
        rig_open_over(&r, manual_scheduler(&m), 2, 1);
        item *a = &r.it[0], *c = &r.it[1];
        sop *o = &r.o[0];
        c->w.cancel = NULL;
        rig_post(&r, 0, 1);
        cr_assert_eq(atomic_load(&a->cancels), 1, "mode %d: a dropped item with cancel is cancelled", k);
        cr_assert_eq(atomic_load(&a->runs), 0);
        rig_post(&r, 1, 2);
        cr_assert_eq(atomic_load(&c->runs), 1, "mode %d: a dropped item without cancel runs execute", k);
        rig_start(&r, 0, 1);
        cr_assert_eq(atomic_load(&o->hits), 1, "mode %d", k);
        cr_assert_eq(atomic_load(&o->stops), 1, "mode %d: a dropped schedule op completes stopped", k);
        cr_assert_eq(ex_strand_executed(r.s), 0);
        rig_close(&r, true);
        cr_assert_eq(atomic_load(&m.live), 0, "mode %d: connects %d destroys %d", k, atomic_load(&m.connects),
                     atomic_load(&m.destroys));
        cr_assert_eq(atomic_load(&manual_overlaps), 0);
        pthread_mutex_destroy(&m.mu);
    }
}

/* ====================================================== no allocation */

/* Runs n items and m schedule ops through s; waits for all. */
static void run_batch(ex_scheduler sch, ex_sender *snd, box *b, item *it, int n, sop *o, int m, void (*drive)(void *),
                      void *drive_arg) {
    atomic_store(&b->ran, 0);
    b->nlog = 0;
    for (int i = 0; i < n; i++) {
        item_init(&it[i], i, b);
        post_ok(sch, &it[i]);
    }
    for (int i = 0; i < m; i++) {
        if (o[i].op) ex_operation_destroy(o[i].op);
        sop_init(&o[i], n + i, b);
        sop_start(&o[i], snd);
    }
    if (drive) drive(drive_arg);
    EXPECT_INT_REACHES(&b->ran, n + m);
}

static void drive_loop(void *arg) {
    ex_run_loop *loop = arg;
    while (ex_run_loop_run_one(loop)) {}
}

static void drive_manual(void *arg) { manual_run_all(arg); }

Test(exec_strand, running_work_through_a_strand_allocates_nothing) {
    enum { N = 4000, M = 1000 };
    ex_pool *p = test_pool_new(4);
    ex_run_loop loop;
    test_loop_init(&loop);
    manual m;
    manual_init(&m, MS_QUEUE);
    ex_scheduler unders[4] = { ex_pool_scheduler(p), ex_run_loop_scheduler(&loop), ex_inline_scheduler(),
                               manual_scheduler(&m) };
    void (*drives[4])(void *) = { NULL, drive_loop, NULL, drive_manual };
    void *drive_args[4] = { NULL, &loop, NULL, &m };
    const char *names[4] = { "pool", "run_loop", "inline", "no post" };
    box *b = box_new(p);
    item *it = items_new(N, b);
    sop *o = sops_new(M, b, N);
    for (int k = 0; k < 4; k++) {
        ex_strand *s = strand_new(unders[k]);
        ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
        run_batch(ex_strand_scheduler(s), snd, b, it, 300, o, 100, drives[k], drive_args[k]); /* warm-up */
        long before = test_alloc_count();
        run_batch(ex_strand_scheduler(s), snd, b, it, N, o, M, drives[k], drive_args[k]);
        long allocated = test_alloc_count() - before;
        cr_assert_eq(allocated, 0, "strand over %s: %ld allocation(s) while running %d items", names[k], allocated,
                     N + M);
        expect_log_in_order(b, N + M);
        cr_assert_eq(atomic_load(&b->violations), 0);
        strand_free(s);
        sops_destroy(o, M);
        memset(o, 0, (size_t)M * sizeof *o);
        ex_sender_release(snd);
    }
    test_loop_destroy(&loop);
    pthread_mutex_destroy(&m.mu);
    test_pool_free(p);
    free(o);
    free(it);
    free(b);
    expect_no_leaks();
}
