/* The strand over the inline scheduler, a run loop, another strand and
 * schedulers without post, and running work through a strand without
 * allocating (suite exec_strand, declared in strand_create.c). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resources/strand_fixtures.h"

/* =================================================== inline underneath */

static void post_arg_record_action(item *it) {
    item *inner = it->arg;
    it->call_err = ex_post(it->sch, &inner->w);
    it->ran_seen = atomic_load(&inner->runs);
}

Test(exec_strand, strand_over_inline_runs_inline_and_in_order) {
    ex_strand *s = strand_new(ex_inline_scheduler());
    box *b = box_new(NULL);
    item a;
    item_init(&a, 0, b);
    tl_in_call = true;
    cr_assert_eq(ex_post(ex_strand_scheduler(s), &a.w).code, 0);
    tl_in_call = false;
    cr_assert_eq(atomic_load(&a.runs), 1, "over the inline scheduler the item runs inside post");
    cr_assert(pthread_equal(a.tid, pthread_self()));

    /* An item that posts to its strand: queued behind it, not nested in it,
     * and run before the outer post returns. */
    item outer, inner;
    item_init(&outer, 1, b);
    item_init(&inner, 2, b);
    outer.action = post_arg_record_action;
    outer.arg = &inner;
    outer.sch = ex_strand_scheduler(s);
    cr_assert_eq(ex_post(ex_strand_scheduler(s), &outer.w).code, 0);
    cr_assert_eq(outer.call_err.code, 0);
    cr_assert_eq(outer.ran_seen, 0, "a post from inside ran the item nested in the poster");
    cr_assert_eq(atomic_load(&inner.runs), 1);
    expect_log_in_order(b, 3);
    cr_assert_eq(atomic_load(&b->violations), 0);

    /* schedule: set_value inside start. */
    ex_result r = ex_sync_wait(ex_schedule(ex_strand_scheduler(s)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(ex_strand_executed(s), 4);
    strand_free_now(s);
    free(b);
    expect_no_leaks();
}

typedef struct inl_thread {
    ex_strand *s;
    item *its;
    int n;
    atomic_int *go;
} inl_thread;

static void *inl_poster(void *arg) {
    inl_thread *t = arg;
    while (!atomic_load(t->go)) sched_yield();
    for (int i = 0; i < t->n; i++) (void)ex_post(ex_strand_scheduler(t->s), &t->its[i].w);
    return NULL;
}

Test(exec_strand, strand_over_inline_serialises_threads) {
    ex_strand *s = strand_new(ex_inline_scheduler());
    box *b = box_new(NULL);
    enum { T = 4, N = 2000 };
    item *its[T];
    inl_thread t[T];
    pthread_t th[T];
    atomic_int go = 0;
    for (int k = 0; k < T; k++) {
        its[k] = items_new(N, b);
        for (int i = 0; i < N; i++) its[k][i].spin = 200;
        t[k] = (inl_thread){ s, its[k], N, &go };
        cr_assert_eq(pthread_create(&th[k], NULL, inl_poster, &t[k]), 0);
    }
    atomic_store(&go, 1);
    for (int k = 0; k < T; k++) pthread_join(th[k], NULL);
    /* Every post returned; each item ran on some posting thread. */
    EXPECT_INT_REACHES(&b->ran, T * N);
    cr_assert_eq(atomic_load(&b->violations), 0, "%d item(s) overlapped", atomic_load(&b->violations));
    cr_assert_eq(b->plain, T * N);
    for (int k = 0; k < T; k++)
        for (int i = 0; i < N; i++) cr_assert_eq(atomic_load(&its[k][i].runs), 1);
    cr_assert_eq(ex_strand_executed(s), (uint64_t)(T * N));
    strand_free(s);
    for (int k = 0; k < T; k++) free(its[k]);
    free(b);
    expect_no_leaks();
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

typedef struct loop_runner {
    ex_run_loop *loop;
    pthread_t tid;
    atomic_int started;
} loop_runner;

static void *loop_runner_main(void *arg) {
    loop_runner *r = arg;
    r->tid = pthread_self();
    atomic_store(&r->started, 1);
    (void)ex_run_loop_run(r->loop);
    return NULL;
}

Test(exec_strand, strand_over_a_run_loop_runs_items_when_the_loop_runs) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_strand *s = strand_new(ex_run_loop_scheduler(&loop));
    enum { N = 200, M = 40 };
    box *b = box_new(NULL);
    item *it = items_new(N, b);
    sop *o = sops_new(M, b, N);
    ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
    for (int i = 0; i < N; i++) post_ok(ex_strand_scheduler(s), &it[i]);
    for (int i = 0; i < M; i++) sop_start(&o[i], snd);
    test_sleep_ms(5);
    cr_assert_eq(atomic_load(&b->ran), 0, "items ran although the loop does not run");
    cr_assert_eq(ex_strand_destroy(s).code, EX_EBUSY);

    loop_runner r;
    memset(&r, 0, sizeof r);
    r.loop = &loop;
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, loop_runner_main, &r), 0);
    EXPECT_INT_REACHES(&b->ran, N + M);
    EXPECT_INT_REACHES(&r.started, 1);
    ex_run_loop_finish(&loop);
    pthread_join(th, NULL);
    for (int i = 0; i < N; i++) cr_assert(pthread_equal(it[i].tid, r.tid), "item %d ran off the loop's thread", i);
    for (int i = 0; i < M; i++) {
        cr_assert_eq(atomic_load(&o[i].values), 1);
        cr_assert(pthread_equal(o[i].tid, r.tid), "op %d completed off the loop's thread", i);
    }
    expect_log_in_order(b, N + M);
    strand_free_now(s); /* the loop's thread returned: the strand is idle */
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    sops_destroy(o, M);
    ex_sender_release(snd);
    free(o);
    free(it);
    free(b);
    expect_no_leaks();
}

/* ======================================================== strand over strand */

typedef struct sos_thread {
    ex_scheduler sch;
    item *its;
    int n;
    atomic_int *go;
} sos_thread;

static void *sos_poster(void *arg) {
    sos_thread *t = arg;
    while (!atomic_load(t->go)) sched_yield();
    for (int i = 0; i < t->n; i++) (void)ex_post(t->sch, &t->its[i].w);
    return NULL;
}

Test(exec_strand, strand_over_a_strand_is_serialised_with_it) {
    ex_pool *p = test_pool_new(4);
    ex_strand *a = strand_new(ex_pool_scheduler(p));
    ex_strand *bs = strand_new(ex_strand_scheduler(a));
    /* One box for both: an item of B runs inside an item of A. */
    box *b = box_new(p);
    enum { N = 1500 };
    item *ia = items_new(N, b), *ib = items_new(N, b);
    for (int i = 0; i < N; i++) ia[i].spin = ib[i].spin = 100;
    atomic_int go = 0;
    sos_thread ta = { ex_strand_scheduler(a), ia, N, &go }, tb = { ex_strand_scheduler(bs), ib, N, &go };
    pthread_t th[2];
    cr_assert_eq(pthread_create(&th[0], NULL, sos_poster, &ta), 0);
    cr_assert_eq(pthread_create(&th[1], NULL, sos_poster, &tb), 0);
    atomic_store(&go, 1);
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    EXPECT_INT_REACHES(&b->ran, 2 * N);
    cr_assert_eq(atomic_load(&b->violations), 0, "items of A and of B (over A) overlapped");
    cr_assert_eq(b->plain, 2 * N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&ia[i].runs), 1);
        cr_assert_eq(atomic_load(&ib[i].runs), 1);
        cr_assert_geq(ib[i].worker, 0, "an item of B ran off the pool");
    }
    /* Per strand, the order of its one poster (ran_seen: items run before). */
    for (int i = 1; i < N; i++) {
        cr_assert_gt(ia[i].ran_seen, ia[i - 1].ran_seen, "A ran item %d before item %d", i, i - 1);
        cr_assert_gt(ib[i].ran_seen, ib[i - 1].ran_seen, "B ran item %d before item %d", i, i - 1);
    }
    cr_assert_eq(ex_strand_executed(bs), (uint64_t)N);
    cr_assert_geq(ex_strand_executed(a), (uint64_t)N + 1, "A runs its own items and B's turns");
    strand_free(bs);
    strand_free(a);
    test_pool_free(p);
    free(ia);
    free(ib);
    free(b);
    expect_no_leaks();
}

/* ============================================ schedulers without post */

/* A scheduler without post: schedule operations queue on a list that the
 * test runs by hand (or complete at once with stopped / error, or connect
 * fails), and every connect and destroy is counted. */
enum { MS_QUEUE, MS_STOPPED, MS_ERROR, MS_CONNECT_FAILS };

typedef struct manual {
    pthread_mutex_t mu;
    ex_work *head, *tail;
    int mode;
    atomic_int connects, destroys, starts, live;
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
    ex_receiver r = manual_op_of(w)->r;
    ex_set_value(r, NULL, 0); /* the receiver may destroy and reuse the op: not touched after */
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
    pthread_mutex_lock(&m->mu);
    if (m->tail) m->tail->next = &o->work;
    else m->head = &o->work;
    m->tail = &o->work;
    pthread_mutex_unlock(&m->mu);
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

static void manual_init(manual *m, int mode) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->mode = mode;
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
    manual m;
    manual_init(&m, MS_QUEUE);
    atomic_store(&manual_overlaps, 0);
    ex_strand *s = strand_new(manual_scheduler(&m));
    enum { N = 200, M = 20 };
    box *b = box_new(NULL);
    item *it = items_new(N, b);
    sop *o = sops_new(M, b, N);
    ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
    for (int i = 0; i < N; i++) post_ok(ex_strand_scheduler(s), &it[i]);
    for (int i = 0; i < M; i++) sop_start(&o[i], snd);
    cr_assert_eq(atomic_load(&b->ran), 0, "nothing runs before the scheduler runs its operations");
    cr_assert_eq(atomic_load(&m.connects), 1, "one turn queued for the whole queue");
    cr_assert_eq(ex_strand_destroy(s).code, EX_EBUSY);
    int turns = manual_run_all(&m);
    cr_assert_eq(atomic_load(&b->ran), N + M);
    cr_assert_geq(turns, (N + M + 63) / 64, "at most 64 items per turn");
    expect_log_in_order(b, N + M);
    for (int i = 0; i < N; i++) {
        cr_assert_not(it[i].saw_in_call);
        cr_assert(pthread_equal(it[i].tid, pthread_self()));
    }
    for (int i = 0; i < M; i++) cr_assert_eq(atomic_load(&o[i].values), 1);
    /* Idle, then busy again: a new turn. */
    item more;
    item_init(&more, N + M, b);
    post_ok(ex_strand_scheduler(s), &more);
    cr_assert_eq(atomic_load(&more.runs), 0);
    cr_assert_eq(manual_run_all(&m), 1);
    cr_assert_eq(atomic_load(&more.runs), 1);
    cr_assert_eq(atomic_load(&manual_overlaps), 0, "a turn's operation was connected over a live one");
    cr_assert_eq(ex_strand_executed(s), (uint64_t)(N + M + 1));
    strand_free_now(s);
    cr_assert_eq(atomic_load(&m.live), 0, "connects %d, destroys %d: the strand leaked an operation",
                 atomic_load(&m.connects), atomic_load(&m.destroys));
    sops_destroy(o, M);
    ex_sender_release(snd);
    pthread_mutex_destroy(&m.mu);
    free(o);
    free(it);
    free(b);
    expect_no_leaks();
}

typedef struct driver {
    manual *m;
    atomic_int stop;
    pthread_t tid;
} driver;

static void *driver_main(void *arg) {
    driver *d = arg;
    d->tid = pthread_self();
    while (!atomic_load(&d->stop))
        if (!manual_run_all(d->m)) sched_yield();
    manual_run_all(d->m);
    return NULL;
}

Test(exec_strand, strand_over_a_scheduler_without_post_driven_by_a_thread) {
    manual m;
    manual_init(&m, MS_QUEUE);
    atomic_store(&manual_overlaps, 0);
    ex_strand *s = strand_new(manual_scheduler(&m));
    driver d;
    memset(&d, 0, sizeof d);
    d.m = &m;
    pthread_t dt;
    cr_assert_eq(pthread_create(&dt, NULL, driver_main, &d), 0);
    box *b = box_new(NULL);
    enum { T = 3, N = 2000 };
    item *its[T];
    sos_thread t[T];
    pthread_t th[T];
    atomic_int go = 0;
    for (int k = 0; k < T; k++) {
        its[k] = items_new(N, b);
        t[k] = (sos_thread){ ex_strand_scheduler(s), its[k], N, &go };
        cr_assert_eq(pthread_create(&th[k], NULL, sos_poster, &t[k]), 0);
    }
    atomic_store(&go, 1);
    for (int k = 0; k < T; k++) pthread_join(th[k], NULL);
    EXPECT_INT_REACHES(&b->ran, T * N);
    atomic_store(&d.stop, 1);
    pthread_join(dt, NULL);
    cr_assert_eq(atomic_load(&b->violations), 0);
    cr_assert_eq(b->plain, T * N);
    for (int k = 0; k < T; k++)
        for (int i = 0; i < N; i++) {
            cr_assert_eq(atomic_load(&its[k][i].runs), 1);
            cr_assert(pthread_equal(its[k][i].tid, d.tid), "poster %d item %d ran off the driver thread", k, i);
            if (i) cr_assert_gt(its[k][i].ran_seen, its[k][i - 1].ran_seen, "poster %d: item %d before %d", k, i, i - 1);
        }
    cr_assert_eq(atomic_load(&manual_overlaps), 0, "a turn's operation was connected over a live one");
    strand_free_now(s);
    cr_assert_eq(atomic_load(&m.live), 0, "connects %d, destroys %d", atomic_load(&m.connects),
                 atomic_load(&m.destroys));
    pthread_mutex_destroy(&m.mu);
    for (int k = 0; k < T; k++) free(its[k]);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, strand_over_a_scheduler_that_refuses_drops_the_queue) {
    const int modes[3] = { MS_STOPPED, MS_ERROR, MS_CONNECT_FAILS };
    for (int k = 0; k < 3; k++) {
        manual m;
        manual_init(&m, modes[k]);
        atomic_store(&manual_overlaps, 0);
        ex_strand *s = strand_new(manual_scheduler(&m));
        box *b = box_new(NULL);
        item a, c;
        item_init(&a, 0, b);
        item_init(&c, 1, b);
        c.w.cancel = NULL;
        sop o;
        sop_init(&o, 2, b);
        ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
        post_ok(ex_strand_scheduler(s), &a);
        cr_assert_eq(atomic_load(&a.cancels), 1, "mode %d: a dropped item with cancel is cancelled", k);
        cr_assert_eq(atomic_load(&a.runs), 0);
        post_ok(ex_strand_scheduler(s), &c);
        cr_assert_eq(atomic_load(&c.runs), 1, "mode %d: a dropped item without cancel runs execute", k);
        sop_start(&o, snd);
        cr_assert_eq(atomic_load(&o.hits), 1, "mode %d", k);
        cr_assert_eq(atomic_load(&o.stops), 1, "mode %d: a dropped schedule op completes stopped", k);
        cr_assert_eq(ex_strand_executed(s), 0);
        strand_free_now(s);
        cr_assert_eq(atomic_load(&m.live), 0, "mode %d: connects %d destroys %d", k, atomic_load(&m.connects),
                     atomic_load(&m.destroys));
        cr_assert_eq(atomic_load(&manual_overlaps), 0);
        if (o.op) ex_operation_destroy(o.op);
        ex_sender_release(snd);
        pthread_mutex_destroy(&m.mu);
        free(b);
    }
    expect_no_leaks();
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
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
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
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    pthread_mutex_destroy(&m.mu);
    test_pool_free(p);
    free(o);
    free(it);
    free(b);
    expect_no_leaks();
}
