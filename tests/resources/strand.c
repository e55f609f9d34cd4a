/* The strand (cexec/strand.h): a scheduler adaptor that serialises what is
 * scheduled through it, on any underlying scheduler.
 *
 * Covered: create/destroy (argument errors, OOM, EX_EBUSY while busy), the
 * scheduler's properties (equality, forward progress, completion scheduler,
 * allocator), mutual exclusion and FIFO under load, post (never inline),
 * dispatch (inline only inside the strand), stop tokens, the fairness turn
 * of 64 items, strands over a pool, a run loop, a single-thread context, the
 * inline scheduler, another strand and schedulers without post, a pool
 * destroyed with strand items queued, and allocation-free running.
 *
 * No assertion is about time: sleeps only give threads a chance to reach a
 * point, and every wait for asynchronous work is bounded so that a lost item
 * fails with a message instead of hanging. */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cexec/strand.h>
#include "common/helpers.h"

TEST_SUITE(exec_strand, 30);

/* ================================================================ fixtures */

#define WAIT_LIMIT_S 10.0

/* Waits (bounded) until *c >= target; returns the last value seen. */
static int wait_int(atomic_int *c, int target) {
    double end = test_now_s() + WAIT_LIMIT_S;
    int v;
    while ((v = atomic_load(c)) < target && test_now_s() < end) sched_yield();
    return v;
}

#define WAIT_INT(c, target)                                                                        \
    do {                                                                                           \
        int w_target_ = (target);                                                                  \
        int w_seen_ = wait_int((c), w_target_);                                                    \
        cr_assert_geq(w_seen_, w_target_, "timed out waiting for %s: %d of %d", #c, w_seen_, w_target_); \
    } while (0)

static ex_pool *pool_new_cfg(unsigned threads, const ex_allocator *alloc) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = threads;
    c.allocator = alloc;
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    return p;
}

static ex_pool *pool_new(unsigned threads) { return pool_new_cfg(threads, NULL); }

static void pool_free(ex_pool *p) {
    ex_error e = ex_pool_destroy(p);
    cr_assert_eq(e.code, 0, "ex_pool_destroy: %s", e.msg ? e.msg : "");
}

static ex_strand *strand_new(ex_scheduler under) {
    ex_strand *s = NULL;
    ex_error e = ex_strand_create(under, NULL, &s);
    cr_assert_eq(e.code, 0, "ex_strand_create: %s", e.msg ? e.msg : "");
    cr_assert_not_null(s);
    return s;
}

/* Destroys a strand whose items have all completed.  The strand's turn on
 * its underlying agent may still be finishing after the last completion
 * (EX_EBUSY is then correct: its drain is running), so EX_EBUSY is retried
 * for a bounded time; anything else fails. */
static void strand_free(ex_strand *s) {
    double end = test_now_s() + WAIT_LIMIT_S;
    ex_error e;
    while ((e = ex_strand_destroy(s)).code == EX_EBUSY && test_now_s() < end) sched_yield();
    cr_assert_eq(e.code, 0, "ex_strand_destroy of a strand with nothing queued: %d (%s)", e.code,
                 e.msg ? e.msg : "");
}

/* Destroy that must succeed at once (the underlying agents are known idle). */
static void strand_free_now(ex_strand *s) {
    ex_error e = ex_strand_destroy(s);
    cr_assert_eq(e.code, 0, "ex_strand_destroy of an idle strand: %d (%s)", e.code, e.msg ? e.msg : "");
}

/* Set on the calling thread around ex_post / ex_dispatch calls: an item that
 * sees it set on the thread running it ran inside the call. */
static _Thread_local bool tl_in_call;

/* ---------------------------------------------------------- shared state */

#define LOG_MAX 8192

/* The state the items of one test share.  `plain` and `log` are written
 * without synchronisation by items of one strand: the strand orders them. */
typedef struct box {
    atomic_int inside;       /* items inside their strand now */
    atomic_int violations;   /* an item found another one inside */
    atomic_int ran;          /* items (and receivers) that finished */
    long plain;
    int log[LOG_MAX];
    int nlog;
    ex_pool *pool;           /* for worker indexes */
} box;

static box *box_new(ex_pool *p) {
    box *b = calloc(1, sizeof *b);
    cr_assert_not_null(b);
    b->pool = p;
    return b;
}

static void box_enter(box *b) {
    if (atomic_fetch_add(&b->inside, 1) != 0) atomic_fetch_add(&b->violations, 1);
}

static void box_leave(box *b) { atomic_fetch_sub(&b->inside, 1); }

static void box_note(box *b, int id) {
    b->plain++;
    if (b->nlog < LOG_MAX) b->log[b->nlog++] = id;
}

static void expect_log_in_order(const box *b, int n) {
    cr_assert_eq(b->nlog, n, "%d entries logged, expected %d", b->nlog, n);
    for (int i = 0; i < n; i++) cr_assert_eq(b->log[i], i, "position %d ran item %d", i, b->log[i]);
}

/* ------------------------------------------------------------- work items */

typedef struct item item;
typedef void (*item_action)(item *it);

struct item {
    ex_work w;               /* first member */
    int id;
    box *b;
    bool nested;             /* runs inline inside another item: no enter/leave */
    atomic_int runs, cancels;
    int worker;
    pthread_t tid;
    const void *thread;
    bool saw_in_call;
    int ran_seen;            /* b->ran when the item ran */
    unsigned spin;
    item_action action;
    void *arg, *arg2;
    ex_scheduler sch;
    ex_error call_err;
    int flag;                /* free for actions */
};

static void item_exec(ex_work *w) {
    item *it = (item *)(void *)w;
    box *b = it->b;
    if (!it->nested) box_enter(b);
    it->tid = pthread_self();
    it->thread = test_thread_id();
    it->worker = b->pool ? ex_pool_current_worker(b->pool) : -1;
    it->saw_in_call = tl_in_call;
    it->ran_seen = atomic_load(&b->ran);
    box_note(b, it->id);
    for (volatile unsigned k = 0; k < it->spin; k++) {}
    if (it->action) it->action(it);
    if (!it->nested) box_leave(b);
    atomic_fetch_add(&it->runs, 1);
    atomic_fetch_add(&b->ran, 1);
}

static void item_cancel(ex_work *w) { atomic_fetch_add(&((item *)(void *)w)->cancels, 1); }

static void item_init(item *it, int id, box *b) {
    memset(it, 0, sizeof *it);
    it->w.execute = item_exec;
    it->w.cancel = item_cancel;
    it->id = id;
    it->b = b;
    it->worker = -2;
}

static item *items_new(int n, box *b) {
    item *it = calloc((size_t)n, sizeof *it);
    cr_assert_not_null(it);
    for (int i = 0; i < n; i++) item_init(&it[i], i, b);
    return it;
}

static void post_ok(ex_scheduler sch, item *it) {
    tl_in_call = true;
    ex_error e = ex_post(sch, &it->w);
    tl_in_call = false;
    cr_assert_eq(e.code, 0, "ex_post: %s", e.msg ? e.msg : "");
}

/* --------------------------------------------- schedule operations (sops) */

typedef struct sop {
    box *b;
    int id;
    atomic_int hits, values, errors, stops;
    int worker;
    pthread_t tid;
    bool saw_in_call;
    ex_error err;
    bool has_stop;
    ex_stop_source stop;
    ex_env_pair pair;
    ex_operation *op;
    _Alignas(max_align_t) unsigned char storage[256];
} sop;

static void sop_note(sop *o) {
    box *b = o->b;
    box_enter(b);
    o->worker = b->pool ? ex_pool_current_worker(b->pool) : -1;
    o->tid = pthread_self();
    o->saw_in_call = tl_in_call;
    box_note(b, o->id);
    box_leave(b);
}

static void sop_value(void *self, const ex_value *v, size_t n) {
    sop *o = self;
    (void)v, (void)n;
    sop_note(o);
    atomic_fetch_add(&o->values, 1);
    atomic_fetch_add(&o->hits, 1);
    atomic_fetch_add(&o->b->ran, 1);
}

static void sop_error(void *self, ex_error e) {
    sop *o = self;
    o->err = e;
    o->worker = o->b->pool ? ex_pool_current_worker(o->b->pool) : -1;
    o->tid = pthread_self();
    atomic_fetch_add(&o->errors, 1);
    atomic_fetch_add(&o->hits, 1);
    atomic_fetch_add(&o->b->ran, 1);
}

static void sop_stopped(void *self) {
    sop *o = self;
    sop_note(o);
    atomic_fetch_add(&o->stops, 1);
    atomic_fetch_add(&o->hits, 1);
    atomic_fetch_add(&o->b->ran, 1);
}

static ex_env sop_env(void *self) {
    sop *o = self;
    return o->has_stop ? ex_env_of_pair(&o->pair) : ex_env_empty();
}

static const ex_receiver_vtable sop_vt = { sop_value, sop_error, sop_stopped, sop_env, NULL };

static void sop_init(sop *o, int id, box *b) {
    memset(o, 0, sizeof *o);
    o->b = b;
    o->id = id;
    o->worker = -2;
    ex_stop_source_init(&o->stop);
}

static sop *sops_new(int n, box *b, int first_id) {
    sop *o = calloc((size_t)n, sizeof *o);
    cr_assert_not_null(o);
    for (int i = 0; i < n; i++) sop_init(&o[i], first_id + i, b);
    return o;
}

static void sop_with_stop(sop *o) {
    ex_env_pair_init(&o->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&o->stop)), ex_env_empty());
    o->has_stop = true;
}

/* Connects snd into the sop's storage and starts it. */
static void sop_start(sop *o, const ex_sender *snd) {
    ex_receiver r = { &sop_vt, o };
    ex_error e = ex_connect(snd, r, o->storage, sizeof o->storage, &o->op);
    cr_assert_eq(e.code, 0, "ex_connect: %s", e.msg ? e.msg : "");
    tl_in_call = true;
    ex_start(o->op);
    tl_in_call = false;
}

static void sops_destroy(sop *o, int n) {
    for (int i = 0; i < n; i++)
        if (o[i].op) ex_operation_destroy(o[i].op);
}

/* ---------------------------------------------------------------- blockers */

/* An item posted straight to a pool that holds its worker until released. */
typedef struct hold {
    ex_work w;
    atomic_int started, done, cancelled;
    atomic_int *release;
} hold;

static void hold_exec(ex_work *w) {
    hold *h = (hold *)(void *)w;
    atomic_store(&h->started, 1);
    double end = test_now_s() + WAIT_LIMIT_S;
    while (!atomic_load(h->release) && test_now_s() < end) sched_yield();
    atomic_store(&h->done, 1);
}

static void hold_cancel(ex_work *w) { atomic_store(&((hold *)(void *)w)->cancelled, 1); }

static void hold_init(hold *h, atomic_int *release) {
    memset(h, 0, sizeof *h);
    h->w.execute = hold_exec;
    h->w.cancel = hold_cancel;
    h->release = release;
}

/* Posts h to the pool and waits until it occupies a worker. */
static void hold_post(ex_pool *p, hold *h) {
    ex_error e = ex_post(ex_pool_scheduler(p), &h->w);
    cr_assert_eq(e.code, 0, "ex_post: %s", e.msg ? e.msg : "");
    WAIT_INT(&h->started, 1);
}

/* An item that keeps its worker until the pool refuses new work (destroy
 * began); the probes it managed to post are queued and later cancelled. */
#define PROBES 4096
typedef struct refuser {
    ex_work w;
    ex_pool *pool;
    atomic_int started, done;
    int accepted;
    int refusal;              /* the code that ended the wait */
    ex_work probes[PROBES];
    atomic_int probe_runs, probe_cancels;
} refuser;

static refuser *g_refuser;  /* probes find their counters here */

static void probe_exec(ex_work *w) { (void)w; atomic_fetch_add(&g_refuser->probe_runs, 1); }
static void probe_cancel(ex_work *w) { (void)w; atomic_fetch_add(&g_refuser->probe_cancels, 1); }

static void refuser_exec(ex_work *w) {
    refuser *r = (refuser *)(void *)w;
    atomic_store(&r->started, 1);
    r->refusal = -1;
    double end = test_now_s() + WAIT_LIMIT_S;
    for (int k = 0; k < PROBES && test_now_s() < end; k++) {
        ex_work *pr = &r->probes[k];
        pr->next = NULL;
        pr->execute = probe_exec;
        pr->cancel = probe_cancel;
        ex_error e = ex_post(ex_pool_scheduler(r->pool), pr);
        if (e.code) {
            r->refusal = e.code;
            break;
        }
        r->accepted++;
        test_sleep_ms(1);
    }
    atomic_store(&r->done, 1);
}

static refuser *refuser_new(ex_pool *p) {
    refuser *r = calloc(1, sizeof *r);
    cr_assert_not_null(r);
    r->w.execute = refuser_exec;
    r->pool = p;
    g_refuser = r;
    return r;
}

static void refuser_check(refuser *r) {
    cr_assert_eq(atomic_load(&r->done), 1, "the blocker never returned");
    cr_assert_eq(r->refusal, EX_ESHUTDOWN, "the blocker ended with %d, not the pool's refusal", r->refusal);
    cr_assert_eq(atomic_load(&r->probe_runs) + atomic_load(&r->probe_cancels), r->accepted,
                 "probes: %d accepted, %d ran, %d cancelled", r->accepted, atomic_load(&r->probe_runs),
                 atomic_load(&r->probe_cancels));
}

/* ======================================================= create / destroy */

static const ex_scheduler_vtable no_connect_vt = { .name = "no-connect" };

Test(exec_strand, create_rejects_an_invalid_scheduler_and_a_null_out) {
    ex_strand *s = (ex_strand *)(uintptr_t)0x1;
    ex_scheduler invalid = { NULL, NULL };
    ex_error e = ex_strand_create(invalid, NULL, &s);
    cr_assert_eq(e.code, EX_EINVAL, "invalid scheduler: got %d", e.code);
    cr_assert_not_null(e.msg);
    cr_assert_null(s, "out is set to NULL on failure");

    s = (ex_strand *)(uintptr_t)0x1;
    ex_scheduler no_connect = { &no_connect_vt, NULL };
    e = ex_strand_create(no_connect, NULL, &s);
    cr_assert_eq(e.code, EX_EINVAL, "scheduler without connect_schedule: got %d", e.code);
    cr_assert_null(s);

    e = ex_strand_create(ex_inline_scheduler(), NULL, NULL);
    cr_assert_eq(e.code, EX_EINVAL, "NULL out: got %d", e.code);
    cr_assert_not_null(e.msg);

    cr_assert_eq(test_stats.in_use, 0, "a failed create left %ld block(s)", test_stats.in_use);
    expect_no_leaks();
}

/* An allocator that counts and can fail, in front of the test allocator. */
typedef struct counting {
    ex_allocator a;
    atomic_long allocs, frees, in_use;
    atomic_long fail_next;     /* fail this many allocations */
} counting;

static void *counting_allocate(void *ctx, size_t size, size_t align) {
    counting *c = ctx;
    if (atomic_load(&c->fail_next) > 0) {
        atomic_fetch_sub(&c->fail_next, 1);
        return NULL;
    }
    void *p = test_allocator.allocate(test_allocator.ctx, size, align);
    if (p) {
        atomic_fetch_add(&c->allocs, 1);
        atomic_fetch_add(&c->in_use, 1);
    }
    return p;
}

static void counting_deallocate(void *ctx, void *p, size_t size, size_t align) {
    counting *c = ctx;
    atomic_fetch_add(&c->frees, 1);
    atomic_fetch_sub(&c->in_use, 1);
    test_allocator.deallocate(test_allocator.ctx, p, size, align);
}

static void counting_init(counting *c) {
    memset(c, 0, sizeof *c);
    c->a.allocate = counting_allocate;
    c->a.deallocate = counting_deallocate;
    c->a.ctx = c;
    c->a.name = "counting";
}

Test(exec_strand, create_out_of_memory_is_enomem_and_leaks_nothing) {
    /* The process default (the test allocator) fails. */
    ex_strand *s = (ex_strand *)(uintptr_t)0x1;
    test_alloc_fail_at(1);
    ex_error e = ex_strand_create(ex_inline_scheduler(), NULL, &s);
    cr_assert_eq(e.code, EX_ENOMEM, "default allocator failing: got %d (%s)", e.code, e.msg ? e.msg : "");
    cr_assert_not_null(e.msg);
    cr_assert_null(s);
    cr_assert_geq(test_stats.failed, 1, "the create did not allocate from the default allocator");
    cr_assert_eq(test_stats.in_use, 0);
    test_alloc_reset();

    /* An explicit allocator fails, over a pool and over the inline scheduler. */
    ex_pool *p = pool_new(1);
    counting c;
    counting_init(&c);
    ex_scheduler unders[2] = { ex_pool_scheduler(p), ex_inline_scheduler() };
    for (int k = 0; k < 2; k++) {
        atomic_store(&c.fail_next, 1);
        s = (ex_strand *)(uintptr_t)0x1;
        long before = test_alloc_count();
        e = ex_strand_create(unders[k], &c.a, &s);
        cr_assert_eq(e.code, EX_ENOMEM, "under %d: got %d", k, e.code);
        cr_assert_null(s);
        cr_assert_eq(atomic_load(&c.in_use), 0);
        cr_assert_eq(test_alloc_count(), before, "a failing explicit allocator fell back to the default one");
    }
    /* The same call works once memory is back. */
    e = ex_strand_create(ex_pool_scheduler(p), &c.a, &s);
    cr_assert_eq(e.code, 0);
    strand_free_now(s);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_strand, create_allocates_from_the_given_allocator_only) {
    counting c;
    counting_init(&c);
    long before = test_alloc_count();
    ex_strand *s = NULL;
    cr_assert_eq(ex_strand_create(ex_inline_scheduler(), &c.a, &s).code, 0);
    cr_assert_geq(atomic_load(&c.allocs), 1, "nothing allocated from the given allocator");
    cr_assert_eq(test_alloc_count() - before, atomic_load(&c.allocs),
                 "the strand allocated from the process default as well");
    strand_free_now(s);
    cr_assert_eq(atomic_load(&c.in_use), 0, "destroy did not give the memory back to the given allocator");
    cr_assert_eq(atomic_load(&c.frees), atomic_load(&c.allocs));

    /* NULL: the process default. */
    before = test_alloc_count();
    s = strand_new(ex_inline_scheduler());
    cr_assert_geq(test_alloc_count() - before, 1);
    strand_free_now(s);
    expect_no_leaks();
}

Test(exec_strand, destroy_null_is_a_no_op) {
    ex_error e = ex_strand_destroy(NULL);
    cr_assert_eq(e.code, 0);
    expect_no_leaks();
}

Test(exec_strand, post_and_dispatch_reject_bad_work_items) {
    ex_strand *s = strand_new(ex_inline_scheduler());
    ex_scheduler sch = ex_strand_scheduler(s);
    cr_assert_eq(ex_post(sch, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_dispatch(sch, NULL).code, EX_EINVAL);
    ex_work w = { NULL, NULL, NULL };
    cr_assert_eq(ex_post(sch, &w).code, EX_EINVAL);
    cr_assert_eq(ex_dispatch(sch, &w).code, EX_EINVAL);
    cr_assert_eq(ex_strand_executed(s), 0);
    strand_free_now(s);
    expect_no_leaks();
}

Test(exec_strand, destroy_while_items_are_queued_is_ebusy_and_destroys_nothing) {
    ex_pool *p = pool_new(1);
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);
    item *it = items_new(3, b);
    post_ok(ex_strand_scheduler(s), &it[0]);
    sop *o = sops_new(1, b, 1);
    ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
    sop_start(&o[0], snd);

    for (int k = 0; k < 3; k++) {
        ex_error e = ex_strand_destroy(s);
        cr_assert_eq(e.code, EX_EBUSY, "destroy with queued items: got %d", e.code);
        cr_assert_not_null(e.msg);
    }
    /* Nothing was destroyed: the queue and the strand still work. */
    post_ok(ex_strand_scheduler(s), &it[2]);
    atomic_store(&release, 1);
    WAIT_INT(&b->ran, 3);
    expect_log_in_order(b, 3);
    cr_assert_eq(atomic_load(&it[0].runs), 1);
    cr_assert_eq(atomic_load(&o[0].values), 1);
    cr_assert_eq(atomic_load(&it[2].runs), 1);
    cr_assert_eq(ex_strand_executed(s), 3);
    strand_free(s);
    sops_destroy(o, 1);
    ex_sender_release(snd);
    pool_free(p);
    free(o);
    free(it);
    free(b);
    expect_no_leaks();
}

/* The item holds the strand until main tried to destroy it. */
static void wait_flag_action(item *it) {
    atomic_int *go = it->arg;
    atomic_store((atomic_int *)it->arg2, 1);
    double end = test_now_s() + WAIT_LIMIT_S;
    while (!atomic_load(go) && test_now_s() < end) sched_yield();
}

Test(exec_strand, destroy_while_an_item_runs_is_ebusy) {
    ex_pool *p = pool_new(2);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);
    item *it = items_new(2, b);
    atomic_int go = 0, entered = 0;
    it[0].action = wait_flag_action;
    it[0].arg = &go;
    it[0].arg2 = &entered;
    post_ok(ex_strand_scheduler(s), &it[0]);
    WAIT_INT(&entered, 1);
    ex_error e = ex_strand_destroy(s);
    cr_assert_eq(e.code, EX_EBUSY, "destroy while an item runs: got %d", e.code);
    cr_assert_not_null(e.msg);
    atomic_store(&go, 1);
    WAIT_INT(&it[0].runs, 1);
    post_ok(ex_strand_scheduler(s), &it[1]);
    WAIT_INT(&b->ran, 2);
    expect_log_in_order(b, 2);
    strand_free(s);
    pool_free(p);
    free(it);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, destroy_while_an_owning_handle_holds_it_is_ebusy) {
    ex_pool *p = pool_new(1);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    ex_scheduler h1 = ex_scheduler_retain(ex_strand_scheduler(s));
    cr_assert(ex_scheduler_equal(h1, ex_strand_scheduler(s)), "retain returns the handle");
    ex_scheduler h2 = ex_scheduler_retain(ex_strand_scheduler(s));
    ex_error e = ex_strand_destroy(s);
    cr_assert_eq(e.code, EX_EBUSY, "two holders: got %d", e.code);
    cr_assert_not_null(e.msg);
    /* Still usable while held. */
    ex_result r = ex_sync_wait(ex_schedule(h1));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    ex_scheduler_release(h1);
    e = ex_strand_destroy(s);
    cr_assert_eq(e.code, EX_EBUSY, "one holder left: got %d", e.code);
    ex_scheduler_release(h2);
    strand_free(s);
    pool_free(p);
    expect_no_leaks();
}

/* An item posted straight to a pool that notes how many strand items had
 * run when it ran. */
typedef struct direct {
    ex_work w;
    box *b;
    atomic_int runs;
    int ran_seen;
} direct;

static void direct_exec(ex_work *w) {
    direct *d = (direct *)(void *)w;
    d->ran_seen = atomic_load(&d->b->ran);
    atomic_fetch_add(&d->runs, 1);
}

static void direct_init(direct *d, box *b) {
    memset(d, 0, sizeof *d);
    d->w.execute = direct_exec;
    d->b = b;
}

Test(exec_strand, strand_is_idle_once_its_only_worker_moved_on) {
    /* On a one-worker pool, work posted after the strand's last item ran
     * runs after the strand's turn ended: the strand must be idle then. */
    ex_pool *p = pool_new(1);
    box *b = box_new(p);
    for (int round = 0; round < 50; round++) {
        ex_strand *s = strand_new(ex_pool_scheduler(p));
        ex_result r = ex_sync_wait(ex_schedule(ex_strand_scheduler(s)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        ex_result_destroy(&r);
        direct d;
        direct_init(&d, b);
        cr_assert_eq(ex_post(ex_pool_scheduler(p), &d.w).code, 0);
        WAIT_INT(&d.runs, 1);
        strand_free_now(s);
    }
    pool_free(p);
    free(b);
    expect_no_leaks();
}

/* ======================================================= scheduler properties */

Test(exec_strand, schedulers_compare_by_strand) {
    ex_pool *p = pool_new(1);
    ex_strand *a = strand_new(ex_pool_scheduler(p));
    ex_strand *b = strand_new(ex_pool_scheduler(p));
    cr_assert(ex_scheduler_equal(ex_strand_scheduler(a), ex_strand_scheduler(a)));
    cr_assert(ex_scheduler_equal(ex_strand_scheduler(b), ex_strand_scheduler(b)));
    cr_assert_not(ex_scheduler_equal(ex_strand_scheduler(a), ex_strand_scheduler(b)));
    cr_assert_not(ex_scheduler_equal(ex_strand_scheduler(b), ex_strand_scheduler(a)));
    cr_assert_not(ex_scheduler_equal(ex_strand_scheduler(a), ex_pool_scheduler(p)),
                 "a strand is not its underlying scheduler");
    cr_assert_not(ex_scheduler_equal(ex_pool_scheduler(p), ex_strand_scheduler(a)));
    /* Equal through a value copy as well. */
    ex_value v = ex_sched_value(ex_strand_scheduler(a));
    cr_assert(ex_scheduler_equal(v.as.sched, ex_strand_scheduler(a)));
    strand_free_now(a);
    strand_free_now(b);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_strand, forward_progress_and_completion_scheduler) {
    ex_pool *p = pool_new(1);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    ex_scheduler sch = ex_strand_scheduler(s);
    cr_assert_eq(ex_get_forward_progress_guarantee(sch), EX_PROGRESS_WEAKLY_PARALLEL,
                 "one agent at a time: weakly parallel at most");
    ex_strand *si = strand_new(ex_inline_scheduler());
    cr_assert_eq(ex_get_forward_progress_guarantee(ex_strand_scheduler(si)), EX_PROGRESS_WEAKLY_PARALLEL);
    ex_sender *snd = ex_schedule(sch);
    cr_assert_eq(ex_sender_status(snd).code, 0);
    ex_scheduler got;
    cr_assert(ex_get_completion_scheduler(snd, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sch), "the value completion scheduler is the strand");
    ex_sender_release(snd);
    strand_free_now(si);
    strand_free_now(s);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_strand, executed_counts_items_run_through_the_strand) {
    ex_pool *p = pool_new(2);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    cr_assert_eq(ex_strand_executed(s), 0);
    box *b = box_new(p);
    item *it = items_new(10, b);
    for (int i = 0; i < 10; i++) post_ok(ex_strand_scheduler(s), &it[i]);
    WAIT_INT(&b->ran, 10);
    cr_assert_eq(ex_strand_executed(s), 10);
    for (int i = 0; i < 5; i++) {
        ex_result r = ex_sync_wait(ex_schedule(ex_strand_scheduler(s)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        ex_result_destroy(&r);
    }
    cr_assert_eq(ex_strand_executed(s), 15);
    /* dispatch from outside the strand queues the item: it counts too. */
    item extra;
    item_init(&extra, 10, b);
    tl_in_call = true;
    cr_assert_eq(ex_dispatch(ex_strand_scheduler(s), &extra.w).code, 0);
    tl_in_call = false;
    WAIT_INT(&extra.runs, 1);
    cr_assert_eq(ex_strand_executed(s), 16);
    /* Another strand counts its own. */
    ex_strand *s2 = strand_new(ex_pool_scheduler(p));
    cr_assert_eq(ex_strand_executed(s2), 0);
    strand_free(s2);
    strand_free(s);
    pool_free(p);
    free(it);
    free(b);
    expect_no_leaks();
}

/* ======================================================= mutual exclusion */

enum { ME_POSTERS = 3, ME_PER_POSTER = 2000, ME_WAITERS = 2, ME_PER_WAITER = 100, ME_SPAWNS = 1000 };

typedef struct me_state {
    ex_strand *s;
    box *b;
    atomic_int go;
    item *items[ME_POSTERS];
    int post_errors;
    int wait_bad;
    ex_counting_scope scope;
    int spawn_errors;
} me_state;

static me_state ME;

static ex_error me_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    box *b = ctx;
    box_enter(b);
    b->plain++;
    for (volatile int k = 0; k < 50; k++) {}
    box_leave(b);
    atomic_fetch_add(&b->ran, 1);
    return ex_ok();
}

static ex_sender *me_sender(void) {
    return ex_then(ex_schedule(ex_strand_scheduler(ME.s)), me_fn, ME.b, EX_SIG0, EX_SIG0);
}

static void me_wait_go(void) {
    while (!atomic_load(&ME.go)) sched_yield();
}

static void *me_poster(void *arg) {
    item *its = arg;
    me_wait_go();
    for (int i = 0; i < ME_PER_POSTER; i++) {
        ex_error e = ex_post(ex_strand_scheduler(ME.s), &its[i].w);
        if (e.code) __atomic_fetch_add(&ME.post_errors, 1, __ATOMIC_RELAXED);
        if (i % 256 == 0) sched_yield();
    }
    return NULL;
}

static void *me_waiter(void *arg) {
    (void)arg;
    me_wait_go();
    for (int i = 0; i < ME_PER_WAITER; i++) {
        ex_result r = ex_sync_wait(me_sender());
        if (r.disposition != EX_DISP_VALUE) __atomic_fetch_add(&ME.wait_bad, 1, __ATOMIC_RELAXED);
        ex_result_destroy(&r);
    }
    return NULL;
}

static void *me_spawner(void *arg) {
    (void)arg;
    me_wait_go();
    for (int i = 0; i < ME_SPAWNS; i++) {
        ex_error e = ex_spawn(me_sender(), ex_counting_scope_token(&ME.scope));
        if (e.code) __atomic_fetch_add(&ME.spawn_errors, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

Test(exec_strand, mutual_exclusion_under_load_post_sync_wait_and_spawn) {
    ex_pool *p = pool_new(4);
    memset(&ME, 0, sizeof ME);
    ME.s = strand_new(ex_pool_scheduler(p));
    ME.b = box_new(p);
    cr_assert_eq(ex_counting_scope_init(&ME.scope).code, 0);
    for (int t = 0; t < ME_POSTERS; t++) {
        ME.items[t] = items_new(ME_PER_POSTER, ME.b);
        for (int i = 0; i < ME_PER_POSTER; i++) ME.items[t][i].spin = 50;
    }
    pthread_t th[ME_POSTERS + ME_WAITERS + 1];
    int n = 0;
    for (int t = 0; t < ME_POSTERS; t++) cr_assert_eq(pthread_create(&th[n++], NULL, me_poster, ME.items[t]), 0);
    for (int t = 0; t < ME_WAITERS; t++) cr_assert_eq(pthread_create(&th[n++], NULL, me_waiter, NULL), 0);
    cr_assert_eq(pthread_create(&th[n++], NULL, me_spawner, NULL), 0);
    atomic_store(&ME.go, 1);
    for (int t = 0; t < n; t++) pthread_join(th[t], NULL);
    ex_result jr = ex_sync_wait(ex_counting_scope_join(&ME.scope));
    cr_assert_eq(jr.disposition, EX_DISP_VALUE);
    ex_result_destroy(&jr);

    const int total = ME_POSTERS * ME_PER_POSTER + ME_WAITERS * ME_PER_WAITER + ME_SPAWNS;
    WAIT_INT(&ME.b->ran, total);
    cr_assert_eq(ME.post_errors, 0);
    cr_assert_eq(ME.wait_bad, 0);
    cr_assert_eq(ME.spawn_errors, 0);
    cr_assert_eq(atomic_load(&ME.b->violations), 0, "%d item(s) ran while another was inside the strand",
                 atomic_load(&ME.b->violations));
    cr_assert_eq(ME.b->plain, total, "the unsynchronised counter is %ld, expected %d", ME.b->plain, total);
    for (int t = 0; t < ME_POSTERS; t++)
        for (int i = 0; i < ME_PER_POSTER; i++) {
            cr_assert_eq(atomic_load(&ME.items[t][i].runs), 1, "item %d/%d ran %d times", t, i,
                         atomic_load(&ME.items[t][i].runs));
            cr_assert_geq(ME.items[t][i].worker, 0, "item %d/%d ran off the pool", t, i);
        }
    cr_assert_eq(ex_strand_executed(ME.s), (uint64_t)total);
    cr_assert_eq(ex_counting_scope_destroy(&ME.scope).code, 0);
    strand_free(ME.s);
    pool_free(p);
    for (int t = 0; t < ME_POSTERS; t++) free(ME.items[t]);
    free(ME.b);
    expect_no_leaks();
}

/* Items of one strand see what the previous one wrote, whichever worker ran
 * it: a chain of non-atomic increments, on four workers. */
Test(exec_strand, each_item_sees_the_writes_of_the_previous_one) {
    ex_pool *p = pool_new(4);
    enum { N = 3000, STRANDS = 3 };
    ex_strand *s[STRANDS];
    box *b[STRANDS];
    item *it[STRANDS];
    for (int k = 0; k < STRANDS; k++) {
        s[k] = strand_new(ex_pool_scheduler(p));
        b[k] = box_new(p);
        it[k] = items_new(N, b[k]);
    }
    for (int i = 0; i < N; i++)
        for (int k = 0; k < STRANDS; k++) post_ok(ex_strand_scheduler(s[k]), &it[k][i]);
    for (int k = 0; k < STRANDS; k++) {
        WAIT_INT(&b[k]->ran, N);
        cr_assert_eq(atomic_load(&b[k]->violations), 0);
        cr_assert_eq(b[k]->plain, N);
        expect_log_in_order(b[k], N);
    }
    for (int k = 0; k < STRANDS; k++) {
        strand_free(s[k]);
        free(it[k]);
        free(b[k]);
    }
    pool_free(p);
    expect_no_leaks();
}

/* ================================================================ FIFO */

Test(exec_strand, fifo_for_posts_and_schedules_from_one_thread) {
    ex_pool *p = pool_new(4);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    enum { N = 3000 };
    box *b = box_new(p);
    item *it = items_new(N, b);
    sop *o = sops_new(N, b, 0);
    ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
    bool is_sop[N];
    for (int i = 0; i < N; i++) {
        is_sop[i] = i % 3 == 2;
        if (is_sop[i]) {
            sop_start(&o[i], snd);
        } else if (i % 3 == 1) {
            tl_in_call = true;
            cr_assert_eq(ex_dispatch(ex_strand_scheduler(s), &it[i].w).code, 0); /* from outside: queued */
            tl_in_call = false;
        } else {
            post_ok(ex_strand_scheduler(s), &it[i]);
        }
    }
    WAIT_INT(&b->ran, N);
    expect_log_in_order(b, N);
    cr_assert_eq(atomic_load(&b->violations), 0);
    for (int i = 0; i < N; i++) {
        if (is_sop[i]) {
            cr_assert_eq(atomic_load(&o[i].values), 1);
            cr_assert_eq(atomic_load(&o[i].hits), 1);
        } else {
            cr_assert_eq(atomic_load(&it[i].runs), 1);
            cr_assert_not(it[i].saw_in_call, "item %d ran inside the posting call", i);
        }
    }
    strand_free(s);
    sops_destroy(o, N);
    ex_sender_release(snd);
    pool_free(p);
    free(o);
    free(it);
    free(b);
    expect_no_leaks();
}

/* Item 0 posts item N from inside: it goes behind everything already queued. */
static void post_arg_action(item *it) {
    it->call_err = ex_post(it->sch, &((item *)it->arg)->w);
}

Test(exec_strand, items_posted_from_inside_go_to_the_back) {
    ex_pool *p = pool_new(1);
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h); /* everything is queued before item 0 runs */
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    enum { N = 150 };
    box *b = box_new(p);
    item *it = items_new(N + 1, b);
    it[0].action = post_arg_action;
    it[0].arg = &it[N];
    it[0].sch = ex_strand_scheduler(s);
    for (int i = 0; i < N; i++) post_ok(ex_strand_scheduler(s), &it[i]);
    atomic_store(&release, 1);
    WAIT_INT(&b->ran, N + 1);
    cr_assert_eq(it[0].call_err.code, 0);
    expect_log_in_order(b, N + 1);
    strand_free(s);
    pool_free(p);
    free(it);
    free(b);
    expect_no_leaks();
}

/* ===================================================== post never inline */

/* A pool item (not a strand item) that posts/dispatches `arg` to a strand
 * and notes whether it had run by the time the call returned. */
typedef struct caller {
    ex_work w;
    ex_scheduler target;
    item *inner;
    bool use_dispatch;
    ex_error err;
    int runs_at_return;
    atomic_int done;
    pthread_t tid;
} caller;

static void caller_exec(ex_work *w) {
    caller *c = (caller *)(void *)w;
    c->tid = pthread_self();
    tl_in_call = true;
    c->err = c->use_dispatch ? ex_dispatch(c->target, &c->inner->w) : ex_post(c->target, &c->inner->w);
    tl_in_call = false;
    c->runs_at_return = atomic_load(&c->inner->runs);
    atomic_store(&c->done, 1);
}

static void caller_init(caller *c, ex_scheduler target, item *inner, bool use_dispatch) {
    memset(c, 0, sizeof *c);
    c->w.execute = caller_exec;
    c->target = target;
    c->inner = inner;
    c->use_dispatch = use_dispatch;
}

/* From a worker of pool p: posts (or dispatches) a fresh item to strand s,
 * waits until both the caller and the item have run. */
static void call_from_worker(ex_pool *p, ex_strand *s, box *b, bool use_dispatch, caller *c, item *in) {
    item_init(in, 0, b);
    caller_init(c, ex_strand_scheduler(s), in, use_dispatch);
    cr_assert_eq(ex_post(ex_pool_scheduler(p), &c->w).code, 0);
    WAIT_INT(&c->done, 1);
    WAIT_INT(&in->runs, 1);
    cr_assert_eq(c->err.code, 0);
}

/* Inside a strand item: posts/dispatches it->arg (an item) to it->sch. */
static void call_action(item *it) {
    item *inner = it->arg;
    tl_in_call = true;
    it->call_err = it->flag ? ex_dispatch(it->sch, &inner->w) : ex_post(it->sch, &inner->w);
    tl_in_call = false;
    it->ran_seen = atomic_load(&inner->runs); /* (reused: inner runs at return) */
}

Test(exec_strand, post_never_runs_inline_on_a_pool) {
    ex_pool *p = pool_new(1);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);

    /* From main while the only worker is busy. */
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    item a;
    item_init(&a, 0, b);
    post_ok(ex_strand_scheduler(s), &a);
    cr_assert_eq(atomic_load(&a.runs), 0, "the only worker is busy: the item cannot have run");
    atomic_store(&release, 1);
    WAIT_INT(&a.runs, 1);
    cr_assert_not(a.saw_in_call);
    cr_assert_eq(a.worker, 0);

    /* From a worker of the pool, to an idle strand. */
    for (int k = 0; k < 20; k++) {
        item in;
        caller c;
        call_from_worker(p, s, b, false, &c, &in);
        cr_assert_eq(c.runs_at_return, 0, "round %d: the posted item ran inside ex_post on the worker", k);
        cr_assert_not(in.saw_in_call);
        cr_assert(pthread_equal(in.tid, c.tid), "one worker: the item runs on it, after the poster returned");
    }

    /* From inside a strand item to the same strand. */
    item outer, inner;
    item_init(&outer, 0, b);
    item_init(&inner, 1, b);
    outer.action = call_action;
    outer.arg = &inner;
    outer.sch = ex_strand_scheduler(s);
    post_ok(ex_strand_scheduler(s), &outer);
    WAIT_INT(&inner.runs, 1);
    cr_assert_eq(outer.call_err.code, 0);
    cr_assert_eq(outer.ran_seen, 0, "a post from inside the strand ran the item inline");
    cr_assert_not(inner.saw_in_call);
    cr_assert_eq(atomic_load(&b->violations), 0);
    strand_free(s);
    pool_free(p);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, post_never_runs_inline_on_four_workers) {
    ex_pool *p = pool_new(4);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);
    for (int k = 0; k < 200; k++) {
        item in;
        caller c;
        call_from_worker(p, s, b, false, &c, &in);
        cr_assert_not(in.saw_in_call, "round %d: the item ran inside ex_post", k);
        if (pthread_equal(in.tid, c.tid))
            cr_assert_eq(c.runs_at_return, 0, "round %d: ran on the poster's thread before post returned", k);
        cr_assert_geq(in.worker, 0);
    }
    strand_free(s);
    pool_free(p);
    free(b);
    expect_no_leaks();
}

/* A run-loop item that posts to a strand over the same loop. */
Test(exec_strand, post_never_runs_inline_on_a_run_loop) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_strand *s = strand_new(ex_run_loop_scheduler(&loop));
    box *b = box_new(NULL);
    item a;
    item_init(&a, 0, b);
    post_ok(ex_strand_scheduler(s), &a);
    cr_assert_eq(atomic_load(&a.runs), 0, "nothing runs before the loop runs");

    /* A loop item (on the loop's thread, outside the strand) posts. */
    item in;
    item_init(&in, 1, b);
    caller c;
    caller_init(&c, ex_strand_scheduler(s), &in, false);
    ex_run_loop_push(&loop, &c.w);
    cr_assert_eq(atomic_load(&in.runs), 0);
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(&b->ran) < 2 && test_now_s() < end) ex_run_loop_run_one(&loop);
    cr_assert_eq(atomic_load(&a.runs), 1);
    cr_assert_eq(atomic_load(&in.runs), 1);
    cr_assert_eq(c.err.code, 0);
    cr_assert_eq(c.runs_at_return, 0, "the posted item ran inside ex_post on the loop's thread");
    cr_assert_not(in.saw_in_call);
    cr_assert(pthread_equal(in.tid, pthread_self()));
    expect_log_in_order(b, 2);
    strand_free_now(s);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, post_never_runs_inline_on_a_single_thread_context) {
    ex_single_thread_context ctx;
    cr_assert_eq(ex_single_thread_context_init(&ctx).code, 0);
    ex_scheduler under = ex_single_thread_context_scheduler(&ctx);
    ex_strand *s = strand_new(under);
    box *b = box_new(NULL);
    enum { N = 20 };
    item in[N];
    caller c[N];
    for (int k = 0; k < N; k++) {
        item_init(&in[k], k, b);
        caller_init(&c[k], ex_strand_scheduler(s), &in[k], false);
        cr_assert_eq(ex_post(under, &c[k].w).code, 0);
    }
    WAIT_INT(&b->ran, N);
    pthread_t ctx_thread = ex_single_thread_context_thread_id(&ctx);
    for (int k = 0; k < N; k++) {
        WAIT_INT(&c[k].done, 1);
        cr_assert_eq(c[k].err.code, 0);
        cr_assert_eq(c[k].runs_at_return, 0, "item %d ran inside ex_post on the context's thread", k);
        cr_assert_not(in[k].saw_in_call);
        cr_assert(pthread_equal(in[k].tid, ctx_thread), "item %d ran off the context's thread", k);
    }
    expect_log_in_order(b, N);
    /* From main as well: runs on the context's thread. */
    item m;
    item_init(&m, N, b);
    post_ok(ex_strand_scheduler(s), &m);
    WAIT_INT(&m.runs, 1);
    cr_assert(pthread_equal(m.tid, ctx_thread));
    cr_assert_eq(ex_single_thread_context_destroy(&ctx).code, 0);
    strand_free_now(s); /* the context ran its queue and joined: the strand is idle */
    free(b);
    expect_no_leaks();
}

/* ============================================================== dispatch */

Test(exec_strand, dispatch_inside_an_item_runs_inline_ahead_of_the_queue) {
    ex_pool *p = pool_new(2);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);
    for (int round = 0; round < 50; round++) {
        b->nlog = 0;
        atomic_store(&b->ran, 0);
        /* log: outer (0), inner (1), then the item queued behind outer (2) */
        item outer, inner, behind;
        item_init(&outer, 0, b);
        item_init(&inner, 1, b);
        item_init(&behind, 2, b);
        inner.nested = true;
        outer.action = call_action;
        outer.arg = &inner;
        outer.flag = 1; /* dispatch */
        outer.sch = ex_strand_scheduler(s);
        post_ok(ex_strand_scheduler(s), &outer);
        post_ok(ex_strand_scheduler(s), &behind);
        WAIT_INT(&b->ran, 3);
        cr_assert_eq(outer.call_err.code, 0);
        cr_assert_eq(outer.ran_seen, 1, "round %d: the dispatched item had not run when ex_dispatch returned", round);
        cr_assert(inner.saw_in_call, "round %d: the dispatched item did not run inside the call", round);
        cr_assert(pthread_equal(inner.tid, outer.tid));
        cr_assert_geq(inner.worker, 0);
        cr_assert_eq(atomic_load(&inner.runs), 1);
        expect_log_in_order(b, 3);
    }
    cr_assert_eq(atomic_load(&b->violations), 0);
    strand_free(s);
    pool_free(p);
    free(b);
    expect_no_leaks();
}

/* A schedule completion runs inside the strand: a then() callback on it can
 * dispatch to the strand inline. */
typedef struct inside_probe {
    ex_scheduler sch;
    item *inner;
    int runs_at_return;
    ex_error err;
} inside_probe;

static ex_error inside_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    inside_probe *x = ctx;
    tl_in_call = true;
    x->err = ex_dispatch(x->sch, &x->inner->w);
    tl_in_call = false;
    x->runs_at_return = atomic_load(&x->inner->runs);
    return ex_ok();
}

Test(exec_strand, schedule_completion_runs_inside_the_strand) {
    ex_pool *p = pool_new(2);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);
    for (int k = 0; k < 20; k++) {
        item inner;
        item_init(&inner, 0, b);
        inner.nested = true;
        inside_probe x = { ex_strand_scheduler(s), &inner, -1, ex_ok() };
        ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_strand_scheduler(s)), inside_fn, &x, EX_SIG0, EX_SIG0));
        cr_assert_eq(r.disposition, EX_DISP_VALUE);
        ex_result_destroy(&r);
        cr_assert_eq(x.err.code, 0);
        cr_assert_eq(x.runs_at_return, 1, "round %d: dispatch from a schedule completion of the strand did not run "
                     "inline", k);
        cr_assert(inner.saw_in_call);
        cr_assert_geq(inner.worker, 0);
    }
    strand_free(s);
    pool_free(p);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, dispatch_from_outside_the_strand_queues_the_item) {
    ex_pool *p = pool_new(1);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);

    /* From main while the only worker is busy. */
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    item a;
    item_init(&a, 0, b);
    tl_in_call = true;
    cr_assert_eq(ex_dispatch(ex_strand_scheduler(s), &a.w).code, 0);
    tl_in_call = false;
    cr_assert_eq(atomic_load(&a.runs), 0, "dispatch from main ran the item");
    atomic_store(&release, 1);
    WAIT_INT(&a.runs, 1);
    cr_assert_not(a.saw_in_call);
    cr_assert_eq(a.worker, 0);

    /* From a worker of the underlying pool that is not inside the strand. */
    for (int k = 0; k < 20; k++) {
        item in;
        caller c;
        call_from_worker(p, s, b, true, &c, &in);
        cr_assert_eq(c.runs_at_return, 0, "round %d: dispatch on a pool worker outside the strand ran inline", k);
        cr_assert_not(in.saw_in_call);
    }
    strand_free(s);
    pool_free(p);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, dispatch_from_inside_a_different_strand_queues_the_item) {
    ex_pool *p = pool_new(1);
    ex_strand *s1 = strand_new(ex_pool_scheduler(p));
    ex_strand *s2 = strand_new(ex_pool_scheduler(p));
    box *b1 = box_new(p), *b2 = box_new(p);
    for (int k = 0; k < 20; k++) {
        item outer, inner;
        item_init(&outer, 0, b1);
        item_init(&inner, 0, b2);
        outer.action = call_action;
        outer.arg = &inner;
        outer.flag = 1;
        outer.sch = ex_strand_scheduler(s2);
        post_ok(ex_strand_scheduler(s1), &outer);
        WAIT_INT(&inner.runs, 1);
        cr_assert_eq(outer.call_err.code, 0);
        cr_assert_eq(outer.ran_seen, 0, "round %d: dispatch to another (idle) strand ran inline", k);
        cr_assert_not(inner.saw_in_call);
    }
    strand_free(s1);
    strand_free(s2);
    pool_free(p);
    free(b1);
    free(b2);
    expect_no_leaks();
}

/* Strand B over strand A: an item of B runs inside an item of A (B's turn),
 * so the thread is running an item of A: dispatch to A runs inline there.
 * From an item of A that is not B's turn, dispatch to B queues. */
Test(exec_strand, dispatch_to_the_outer_strand_from_an_inner_strand_item_runs_inline) {
    ex_pool *p = pool_new(1);
    ex_strand *a = strand_new(ex_pool_scheduler(p));
    ex_strand *bs = strand_new(ex_strand_scheduler(a));
    box *b1 = box_new(p), *b2 = box_new(p);

    item outer, inner;
    item_init(&outer, 0, b1);
    item_init(&inner, 0, b2);
    inner.nested = true;
    outer.action = call_action;
    outer.arg = &inner;
    outer.flag = 1;
    outer.sch = ex_strand_scheduler(a);
    post_ok(ex_strand_scheduler(bs), &outer);
    WAIT_INT(&inner.runs, 1);
    WAIT_INT(&outer.runs, 1);

    item outer2, inner2;
    item_init(&outer2, 1, b1);
    item_init(&inner2, 1, b2);
    outer2.action = call_action;
    outer2.arg = &inner2;
    outer2.flag = 1;
    outer2.sch = ex_strand_scheduler(bs);
    post_ok(ex_strand_scheduler(a), &outer2);
    WAIT_INT(&inner2.runs, 1);
    cr_assert_eq(outer2.call_err.code, 0);
    cr_assert_eq(outer2.ran_seen, 0, "dispatch to the inner strand from an outer item (not its turn) ran inline");

    cr_assert_eq(outer.call_err.code, 0);
    cr_assert_eq(outer.ran_seen, 1,
                 "dispatch to strand A from an item of strand B (B over A: the thread runs A's item) "
                 "was queued instead of running inline");
    strand_free(bs);
    strand_free(a);
    pool_free(p);
    free(b1);
    free(b2);
    expect_no_leaks();
}

/* ===================================================== completion agents */

Test(exec_strand, completions_run_on_workers_of_the_underlying_pool) {
    ex_pool *p = pool_new(3);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    enum { N = 300 };
    box *b = box_new(p);
    item *it = items_new(N, b);
    sop *o = sops_new(N, b, N);
    ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
    for (int i = 0; i < N; i++) {
        post_ok(ex_strand_scheduler(s), &it[i]);
        sop_start(&o[i], snd);
    }
    WAIT_INT(&b->ran, 2 * N);
    for (int i = 0; i < N; i++) {
        cr_assert_geq(it[i].worker, 0, "item %d ran off the pool's workers", i);
        cr_assert_lt(it[i].worker, 3);
        cr_assert_eq(atomic_load(&o[i].values), 1);
        cr_assert_geq(o[i].worker, 0, "schedule op %d completed off the pool's workers", i);
        cr_assert_not(pthread_equal(o[i].tid, pthread_self()));
    }
    cr_assert_eq(atomic_load(&b->violations), 0);
    strand_free(s);
    sops_destroy(o, N);
    ex_sender_release(snd);
    pool_free(p);
    free(o);
    free(it);
    free(b);
    expect_no_leaks();
}

/* ================================================================== stop */

Test(exec_strand, stop_requested_before_the_items_turn_completes_stopped) {
    ex_pool *p = pool_new(1);
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    enum { N = 12 };
    box *b = box_new(p);
    sop *o = sops_new(N, b, 0);
    ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
    for (int i = 0; i < N; i++) {
        sop_with_stop(&o[i]);
        if (i % 3 == 0) ex_stop_source_request_stop(&o[i].stop); /* before start */
        sop_start(&o[i], snd);
        if (i % 3 == 1) ex_stop_source_request_stop(&o[i].stop); /* started, queued */
    }
    for (int i = 0; i < N; i++) cr_assert_eq(atomic_load(&o[i].hits), 0, "op %d completed before its turn", i);
    atomic_store(&release, 1);
    WAIT_INT(&b->ran, N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&o[i].hits), 1);
        cr_assert_eq(atomic_load(&o[i].errors), 0);
        if (i % 3 == 2) cr_assert_eq(atomic_load(&o[i].values), 1, "op %d (no stop) did not complete with a value", i);
        else cr_assert_eq(atomic_load(&o[i].stops), 1, "op %d (stop requested) did not complete stopped", i);
        cr_assert_eq(o[i].worker, 0);
    }
    expect_log_in_order(b, N); /* stopped completions take their turn too */
    strand_free(s);
    sops_destroy(o, N);
    ex_sender_release(snd);
    pool_free(p);
    free(o);
    free(b);
    expect_no_leaks();
}

static void request_stop_action(item *it) { ex_stop_source_request_stop(it->arg); }

Test(exec_strand, stop_requested_by_an_earlier_item_completes_stopped) {
    ex_pool *p = pool_new(2);
    atomic_int release = 0;
    hold h[2];
    hold_init(&h[0], &release);
    hold_init(&h[1], &release);
    hold_post(p, &h[0]);
    hold_post(p, &h[1]);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    box *b = box_new(p);
    item first;
    item_init(&first, 0, b);
    sop *o = sops_new(2, b, 1);
    sop_with_stop(&o[0]);
    sop_with_stop(&o[1]);
    first.action = request_stop_action;
    first.arg = &o[0].stop;
    ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
    post_ok(ex_strand_scheduler(s), &first);
    sop_start(&o[0], snd);
    sop_start(&o[1], snd);
    atomic_store(&release, 1);
    WAIT_INT(&b->ran, 3);
    cr_assert_eq(atomic_load(&o[0].stops), 1, "stop was requested before its turn");
    cr_assert_eq(atomic_load(&o[1].values), 1);
    expect_log_in_order(b, 3);
    strand_free(s);
    sops_destroy(o, 2);
    ex_sender_release(snd);
    pool_free(p);
    free(o);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, sync_wait_on_a_strand_schedule) {
    ex_pool *p = pool_new(2);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    for (int i = 0; i < 100; i++) {
        ex_result r = ex_sync_wait(ex_schedule(ex_strand_scheduler(s)));
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d", r.disposition);
        cr_assert_eq(r.n, 0);
        ex_result_destroy(&r);
    }
    strand_free(s);
    pool_free(p);
    expect_no_leaks();
}

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
    WAIT_INT(&b->ran, T * N);
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
    WAIT_INT(&b->ran, N + M);
    WAIT_INT(&r.started, 1);
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
    ex_pool *p = pool_new(4);
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
    WAIT_INT(&b->ran, 2 * N);
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
    pool_free(p);
    free(ia);
    free(ib);
    free(b);
    expect_no_leaks();
}

/* =============================================================== fairness */

Test(exec_strand, fairness_a_busy_strand_lets_other_pool_work_run) {
    /* One worker; the strand gets 200 items, then an item goes straight to
     * the pool.  The strand runs at most 64 items per turn and then queues
     * itself again, so the direct item runs before the 200th strand item. */
    ex_pool *p = pool_new(1);
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    enum { N = 200 };
    box *b = box_new(p);
    item *it = items_new(N, b);
    for (int i = 0; i < N; i++) post_ok(ex_strand_scheduler(s), &it[i]);
    direct d;
    direct_init(&d, b);
    cr_assert_eq(ex_post(ex_pool_scheduler(p), &d.w).code, 0);
    atomic_store(&release, 1);
    WAIT_INT(&b->ran, N);
    WAIT_INT(&d.runs, 1);
    expect_log_in_order(b, N);
    cr_expect_lt(d.ran_seen, N,
                 "the item posted to the pool ran only after all %d strand items (it saw %d): the strand's "
                 "re-queued turn was preferred to older pool work",
                 N, d.ran_seen);
    strand_free(s);
    pool_free(p);
    free(it);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, fairness_the_same_from_a_strand_item_on_the_worker) {
    /* As above, with the direct item posted by the first strand item from
     * the worker itself. */
    ex_pool *p = pool_new(1);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    enum { N = 200 };
    box *b = box_new(p);
    item *it = items_new(N, b);
    direct d;
    direct_init(&d, b);
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    it[0].action = post_arg_action;  /* posts it->arg (the direct item) to it->sch (the pool) */
    it[0].arg = &d;
    it[0].sch = ex_pool_scheduler(p);
    for (int i = 0; i < N; i++) post_ok(ex_strand_scheduler(s), &it[i]);
    atomic_store(&release, 1);
    WAIT_INT(&b->ran, N);
    WAIT_INT(&d.runs, 1);
    cr_assert_eq(it[0].call_err.code, 0);
    cr_expect_lt(d.ran_seen, N, "the pool item posted from the strand's turn ran only after all %d strand items",
                 N);
    strand_free(s);
    pool_free(p);
    free(it);
    free(b);
    expect_no_leaks();
}

Test(exec_strand, fairness_on_a_run_loop_the_turn_ends_after_64_items) {
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_strand *s = strand_new(ex_run_loop_scheduler(&loop));
    enum { N = 200 };
    box *b = box_new(NULL);
    item *it = items_new(N, b);
    for (int i = 0; i < N; i++) post_ok(ex_strand_scheduler(s), &it[i]);
    direct d;
    direct_init(&d, b);
    ex_run_loop_push(&loop, &d.w);
    ex_run_loop_finish(&loop);
    cr_assert_eq(ex_run_loop_run(&loop).code, 0);
    cr_assert_eq(atomic_load(&b->ran), N);
    cr_assert_eq(atomic_load(&d.runs), 1);
    cr_assert_leq(d.ran_seen, 64, "a turn ran %d items before the loop's other item", d.ran_seen);
    cr_assert_gt(d.ran_seen, 0);
    expect_log_in_order(b, N);
    strand_free_now(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    free(it);
    free(b);
    expect_no_leaks();
}

/* ============================================================== allocator */

typedef struct spawn_env {
    ex_env_pair pair;
} spawn_env;

static ex_error count_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_fetch_add((atomic_int *)ctx, 1);
    return ex_ok();
}

Test(exec_strand, allocator_is_the_underlying_schedulers) {
    counting c;
    counting_init(&c);
    ex_pool *p = pool_new_cfg(2, &c.a);
    ex_pool_config pc;
    memset(&pc, 0, sizeof pc);
    pc.threads = 1;
    pc.frames = EX_POOL_FRAMES_PROCESS;  /* a pool without a frame allocator */
    ex_pool *plain = NULL;
    cr_assert_eq(ex_pool_create(&pc, &plain).code, 0);
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    ex_strand *ss = strand_new(ex_strand_scheduler(s));
    ex_strand *sp = strand_new(ex_pool_scheduler(plain));
    ex_strand *sl = strand_new(ex_run_loop_scheduler(&loop));

    ex_env_pair e;
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(s)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&e)), &c.a, "a strand over the pool answers the pool's allocator");
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(ss)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&e)), &c.a, "a strand over that strand: the same");
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(sp)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&e)), ex_default_allocator(), "a pool without one: the default");
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(sl)), ex_env_empty());
    cr_assert_eq(ex_get_allocator(ex_env_of_pair(&e)), ex_default_allocator());

    /* Used for real: spawned work whose environment names the strand gets
     * its operation from the pool's allocator. */
    ex_counting_scope scope;
    cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
    atomic_int ran = 0;
    long before = atomic_load(&c.allocs);
    ex_env_pair_init(&e, &ex_key_get_scheduler, ex_sched_value(ex_strand_scheduler(s)), ex_env_empty());
    for (int i = 0; i < 10; i++) {
        ex_sender *w = ex_then(ex_schedule(ex_strand_scheduler(s)), count_fn, &ran, EX_SIG0, EX_SIG0);
        cr_assert_eq(ex_spawn_env(w, ex_counting_scope_token(&scope), ex_env_of_pair(&e)).code, 0);
    }
    ex_result jr = ex_sync_wait(ex_counting_scope_join(&scope));
    cr_assert_eq(jr.disposition, EX_DISP_VALUE);
    ex_result_destroy(&jr);
    cr_assert_eq(atomic_load(&ran), 10);
    cr_assert_geq(atomic_load(&c.allocs) - before, 10, "spawned operations did not come from the pool's allocator");
    cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0);

    strand_free(ss);
    strand_free(s);
    strand_free_now(sp);
    strand_free_now(sl);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    pool_free(plain);
    pool_free(p);
    cr_assert_eq(atomic_load(&c.in_use), 0);
    expect_no_leaks();
}

/* ========================================= the underlying pool is destroyed */

enum { PD_STRANDS = 3, PD_SOPS = 100, PD_WORKS = 50 };

typedef struct pd_set {
    ex_strand *s[PD_STRANDS];
    box *b[PD_STRANDS];
    sop *o[PD_STRANDS];
    item *with_cancel[PD_STRANDS];
    item *without_cancel[PD_STRANDS];
    ex_sender *snd[PD_STRANDS];
} pd_set;

static void pd_queue(pd_set *x, ex_pool *p) {
    for (int k = 0; k < PD_STRANDS; k++) {
        x->s[k] = strand_new(ex_pool_scheduler(p));
        x->b[k] = box_new(p);
        x->o[k] = sops_new(PD_SOPS, x->b[k], 0);
        x->with_cancel[k] = items_new(PD_WORKS, x->b[k]);
        x->without_cancel[k] = items_new(PD_WORKS, x->b[k]);
        x->snd[k] = ex_schedule(ex_strand_scheduler(x->s[k]));
    }
    for (int i = 0; i < PD_SOPS; i++)
        for (int k = 0; k < PD_STRANDS; k++) {
            sop_start(&x->o[k][i], x->snd[k]);
            if (i < PD_WORKS) {
                post_ok(ex_strand_scheduler(x->s[k]), &x->with_cancel[k][i]);
                x->without_cancel[k][i].w.cancel = NULL;
                post_ok(ex_strand_scheduler(x->s[k]), &x->without_cancel[k][i]);
            }
        }
}

/* Every operation completed exactly once; returns how many with a value. */
static int pd_check(pd_set *x, bool all_stopped) {
    int values = 0;
    for (int k = 0; k < PD_STRANDS; k++) {
        for (int i = 0; i < PD_SOPS; i++) {
            sop *o = &x->o[k][i];
            cr_assert_eq(atomic_load(&o->hits), 1, "strand %d op %d completed %d times", k, i, atomic_load(&o->hits));
            cr_assert_eq(atomic_load(&o->errors), 0, "strand %d op %d completed with an error", k, i);
            if (all_stopped) cr_assert_eq(atomic_load(&o->stops), 1, "strand %d op %d ran although dropped", k, i);
            values += atomic_load(&o->values);
        }
        for (int i = 0; i < PD_WORKS; i++) {
            item *a = &x->with_cancel[k][i], *c = &x->without_cancel[k][i];
            cr_assert_eq(atomic_load(&a->runs) + atomic_load(&a->cancels), 1,
                         "strand %d work %d: %d runs, %d cancels", k, i, atomic_load(&a->runs),
                         atomic_load(&a->cancels));
            if (all_stopped) cr_assert_eq(atomic_load(&a->cancels), 1, "a dropped item with a cancel must be cancelled");
            cr_assert_eq(atomic_load(&c->runs), 1, "strand %d work %d without cancel: %d runs (a dropped item "
                         "without cancel runs its execute)", k, i, atomic_load(&c->runs));
            cr_assert_eq(atomic_load(&c->cancels), 0);
        }
        cr_assert_eq(atomic_load(&x->b[k]->violations), 0);
    }
    return values;
}

static void pd_free(pd_set *x) {
    for (int k = 0; k < PD_STRANDS; k++) {
        strand_free_now(x->s[k]); /* the pool is gone: nothing can run any more */
        sops_destroy(x->o[k], PD_SOPS);
        ex_sender_release(x->snd[k]);
        free(x->o[k]);
        free(x->with_cancel[k]);
        free(x->without_cancel[k]);
        free(x->b[k]);
    }
}

Test(exec_strand, pool_destroyed_with_strand_items_queued_drops_each_once) {
    ex_pool *p = pool_new(1);
    refuser *r = refuser_new(p);
    cr_assert_eq(ex_post(ex_pool_scheduler(p), &r->w).code, 0);
    WAIT_INT(&r->started, 1);
    pd_set x;
    pd_queue(&x, p);
    pool_free(p);
    refuser_check(r);
    int values = pd_check(&x, true);
    cr_assert_eq(values, 0);
    for (int k = 0; k < PD_STRANDS; k++) cr_assert_eq(ex_strand_executed(x.s[k]), 0);
    pd_free(&x);
    free(r);
    expect_no_leaks();
}

Test(exec_strand, pool_destroyed_during_a_strand_turn_completes_each_once) {
    ex_pool *p = pool_new(1);
    refuser *r = refuser_new(p);
    pd_set x;
    /* The blocker is the first item of strand 0: its turn is under way when
     * destroy begins, with many items behind it. */
    ex_strand *s0 = strand_new(ex_pool_scheduler(p));
    cr_assert_eq(ex_post(ex_strand_scheduler(s0), &r->w).code, 0);
    WAIT_INT(&r->started, 1);
    pd_queue(&x, p);
    pool_free(p);
    refuser_check(r);
    (void)pd_check(&x, false);
    strand_free_now(s0);
    pd_free(&x);
    free(r);
    expect_no_leaks();
}

/* The blocker shares strand 0 with the queued items. */
Test(exec_strand, pool_destroyed_during_a_turn_of_the_same_strand) {
    ex_pool *p = pool_new(1);
    refuser *r = refuser_new(p);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    enum { N = 300 };
    box *b = box_new(p);
    sop *o = sops_new(N, b, 0);
    item *w = items_new(N, b);
    ex_sender *snd = ex_schedule(ex_strand_scheduler(s));
    cr_assert_eq(ex_post(ex_strand_scheduler(s), &r->w).code, 0);
    WAIT_INT(&r->started, 1);
    for (int i = 0; i < N; i++) {
        sop_start(&o[i], snd);
        post_ok(ex_strand_scheduler(s), &w[i]);
    }
    pool_free(p);
    refuser_check(r);
    int values = 0, stops = 0;
    for (int i = 0; i < N; i++) {
        cr_assert_eq(atomic_load(&o[i].hits), 1, "op %d completed %d times", i, atomic_load(&o[i].hits));
        cr_assert_eq(atomic_load(&o[i].errors), 0);
        values += atomic_load(&o[i].values);
        stops += atomic_load(&o[i].stops);
        cr_assert_eq(atomic_load(&w[i].runs) + atomic_load(&w[i].cancels), 1, "work %d: %d runs %d cancels", i,
                     atomic_load(&w[i].runs), atomic_load(&w[i].cancels));
    }
    cr_assert_eq(values + stops, N);
    cr_assert_gt(stops, 0, "a pool being destroyed cannot run all %d items of the turn", 2 * N);
    /* What ran, ran in order, before anything was dropped. */
    for (int i = 1; i < N; i++)
        if (atomic_load(&o[i].values)) cr_assert_eq(atomic_load(&o[i - 1].values), 1, "op %d ran, op %d did not", i, i - 1);
    cr_assert_eq(atomic_load(&b->violations), 0);
    strand_free_now(s);
    sops_destroy(o, N);
    ex_sender_release(snd);
    free(o);
    free(w);
    free(b);
    free(r);
    expect_no_leaks();
}

Test(exec_strand, pool_destroyed_right_after_submission_loses_nothing) {
    for (int round = 0; round < 10; round++) {
        ex_pool *p = pool_new(round % 2 ? 4 : 2);
        pd_set x;
        pd_queue(&x, p);
        pool_free(p);
        (void)pd_check(&x, false);
        pd_free(&x);
    }
    expect_no_leaks();
}

Test(exec_strand, after_the_pool_shut_down_new_work_is_dropped_at_once) {
    ex_pool *p = pool_new(1);
    ex_strand *s = strand_new(ex_pool_scheduler(p));
    cr_assert_eq(ex_pool_shutdown(p).code, 0);
    ex_result r = ex_sync_wait(ex_schedule(ex_strand_scheduler(s)));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "schedule on a strand whose pool refuses: disposition %d",
                 r.disposition);
    ex_result_destroy(&r);
    box *b = box_new(p);
    item a, c;
    item_init(&a, 0, b);
    item_init(&c, 1, b);
    c.w.cancel = NULL;
    post_ok(ex_strand_scheduler(s), &a);
    cr_assert_eq(atomic_load(&a.cancels), 1, "the refused item's cancel runs");
    cr_assert_eq(atomic_load(&a.runs), 0);
    tl_in_call = true;
    cr_assert_eq(ex_dispatch(ex_strand_scheduler(s), &c.w).code, 0);
    tl_in_call = false;
    cr_assert_eq(atomic_load(&c.runs), 1, "a refused item without cancel runs its execute");
    cr_assert_eq(ex_strand_executed(s), 0);
    strand_free_now(s);
    pool_free(p);
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
    WAIT_INT(&b->ran, T * N);
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
    WAIT_INT(&b->ran, n + m);
}

static void drive_loop(void *arg) {
    ex_run_loop *loop = arg;
    while (ex_run_loop_run_one(loop)) {}
}

static void drive_manual(void *arg) { manual_run_all(arg); }

Test(exec_strand, running_work_through_a_strand_allocates_nothing) {
    enum { N = 4000, M = 1000 };
    ex_pool *p = pool_new(4);
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
    pool_free(p);
    free(o);
    free(it);
    free(b);
    expect_no_leaks();
}
