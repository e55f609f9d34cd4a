/* The work-stealing thread pool (cexec/pool.h): create/destroy, the pool
 * scheduler (schedule, post, dispatch), sync_wait on a worker, shutdown
 * (cancellation of queued work, EX_ESHUTDOWN), statistics and tracing.
 *
 * Nothing here asserts on timing except the generous idle-CPU resource
 * check; sleeps only give threads a chance to reach a point, and every wait
 * for asynchronous completions is bounded so a lost item fails the test with
 * a message instead of hanging. */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/helpers.h"

TEST_SUITE(exec_pool, 20);

/* ================================================================ fixtures */

/* Bound for every wait on asynchronous work: far above what any of it
 * needs, below the suite timeout, so a lost item shows up as a message. */
#define WAIT_LIMIT_S 10.0

/* Waits until *c >= target (bounded); returns the last value seen. */
static long wait_for(atomic_long *c, long target) {
    double end = test_now_s() + WAIT_LIMIT_S;
    long v;
    while ((v = atomic_load(c)) < target && test_now_s() < end) sched_yield();
    return v;
}

static void wait_for_int(atomic_int *c, int target) {
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(c) < target && test_now_s() < end) sched_yield();
    cr_assert_geq(atomic_load(c), target, "timed out waiting: %d of %d", atomic_load(c), target);
}

static ex_pool *pool_new_cfg(const ex_pool_config *cfg) {
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(cfg, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    cr_assert_not_null(p);
    return p;
}

static ex_pool *pool_new(unsigned threads, const char *prefix) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = threads;
    c.name_prefix = prefix;
    return pool_new_cfg(&c);
}

static void pool_free(ex_pool *p) {
    ex_error e = ex_pool_destroy(p);
    cr_assert_eq(e.code, 0, "ex_pool_destroy: %s", e.msg ? e.msg : "");
}

static ex_pool_worker_stats stats_sum(ex_pool *p) {
    ex_pool_worker_stats sum = { 0, 0, 0, 0 };
    for (unsigned i = 0; i < ex_pool_size(p); i++) {
        ex_pool_worker_stats s;
        ex_error e = ex_pool_worker_stats_get(p, i, &s);
        cr_assert_eq(e.code, 0, "ex_pool_worker_stats_get(%u): %s", i, e.msg ? e.msg : "");
        sum.executed += s.executed;
        sum.stolen += s.stolen;
        sum.parked += s.parked;
        sum.woken += s.woken;
    }
    return sum;
}

/* ---------------------------------------- where a then callback ran */

typedef struct where {
    ex_pool *pool;
    int calls;
    int worker;       /* ex_pool_current_worker(pool) inside the callback */
    pthread_t tid;
    char name[32];    /* thread name inside the callback */
} where;

static ex_error where_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    where *w = ctx;
    (void)in, (void)n;
    w->calls++;
    w->worker = ex_pool_current_worker(w->pool);
    w->tid = pthread_self();
    w->name[0] = '\0';
    pthread_getname_np(pthread_self(), w->name, sizeof w->name);
    out[0] = ex_int(w->worker);
    return ex_ok();
}

/* Runs one then(schedule(pool)) through sync_wait from the calling thread. */
static void run_where(ex_pool *p, where *w) {
    memset(w, 0, sizeof *w);
    w->pool = p;
    w->worker = -2;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), where_fn, w, EX_SIG0, EX_SIG(EX_T_INT)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition,
                 r.error.msg ? r.error.msg : "");
    cr_assert_eq(w->calls, 1);
    ex_result_destroy(&r);
}

/* --------------------------------------------- a thread-safe receiver slot */

static atomic_long g_completed;  /* completions of every slot */

#define SLOT_STORAGE 256

typedef struct slot {
    atomic_int hits, values, errors, stops;
    ex_pool *pool;         /* for the worker index */
    int worker;            /* ex_pool_current_worker(pool) at completion */
    pthread_t tid;
    size_t n;
    int64_t ival;          /* first value if it is an int */
    ex_error err;
    bool has_env;
    ex_stop_source stop;
    ex_env_pair pair;
    ex_operation *op;
    _Alignas(max_align_t) unsigned char storage[SLOT_STORAGE];
} slot;

static void slot_note(slot *s) {
    s->worker = ex_pool_current_worker(s->pool);
    s->tid = pthread_self();
}

static void slot_value(void *self, const ex_value *v, size_t n) {
    slot *s = self;
    slot_note(s);
    s->n = n;
    s->ival = n >= 1 && v[0].type == EX_T_INT ? v[0].as.i : INT64_MIN;
    atomic_fetch_add(&s->values, 1);
    atomic_fetch_add(&s->hits, 1);
    atomic_fetch_add(&g_completed, 1);
}

static void slot_error(void *self, ex_error e) {
    slot *s = self;
    slot_note(s);
    s->err = e;
    atomic_fetch_add(&s->errors, 1);
    atomic_fetch_add(&s->hits, 1);
    atomic_fetch_add(&g_completed, 1);
}

static void slot_stopped(void *self) {
    slot *s = self;
    slot_note(s);
    atomic_fetch_add(&s->stops, 1);
    atomic_fetch_add(&s->hits, 1);
    atomic_fetch_add(&g_completed, 1);
}

static ex_env slot_env(void *self) {
    slot *s = self;
    return s->has_env ? ex_env_of_pair(&s->pair) : ex_env_empty();
}

static const ex_receiver_vtable slot_vt = { slot_value, slot_error, slot_stopped, slot_env, NULL };

static void slot_init(slot *s, ex_pool *p) {
    memset(s, 0, sizeof *s);
    s->pool = p;
    s->worker = -2;
    ex_stop_source_init(&s->stop);
}

/* The receiver's environment answers get_stop_token with the slot's source. */
static void slot_with_stop(slot *s) {
    ex_env_pair_init(&s->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&s->stop)), ex_env_empty());
    s->has_env = true;
}

/* Connects snd into the slot's own storage; does not start. */
static ex_error slot_connect(slot *s, const ex_sender *snd) {
    ex_receiver r = { &slot_vt, s };
    return ex_connect(snd, r, s->storage, sizeof s->storage, &s->op);
}

/* Main-thread version: connect (asserting) and start. */
static void slot_start(slot *s, const ex_sender *snd) {
    ex_error e = slot_connect(s, snd);
    cr_assert_eq(e.code, 0, "ex_connect: %s", e.msg ? e.msg : "");
    ex_start(s->op);
}

/* Every slot completed exactly once; returns how many with a value. */
static int slots_expect_once(slot *s, int n) {
    int values = 0;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(atomic_load(&s[i].hits), 1, "slot %d completed %d times", i, atomic_load(&s[i].hits));
        values += atomic_load(&s[i].values);
    }
    return values;
}

static void slots_destroy(slot *s, int n) {
    for (int i = 0; i < n; i++)
        if (s[i].op) ex_operation_destroy(s[i].op);
}

/* ---------------------------------------------------- a "blocked worker" item */

/* An ex_work that holds its worker until `release` is set. */
typedef struct hold {
    ex_work w;
    atomic_int started, done, cancelled;
    atomic_int *release;
} hold;

static void hold_exec(ex_work *w) {
    hold *h = (hold *)w;
    atomic_store(&h->started, 1);
    double end = test_now_s() + WAIT_LIMIT_S;
    while (!atomic_load(h->release) && test_now_s() < end) sched_yield();
    atomic_store(&h->done, 1);
}

static void hold_cancel(ex_work *w) { atomic_store(&((hold *)w)->cancelled, 1); }

static void hold_init(hold *h, atomic_int *release) {
    memset(h, 0, sizeof *h);
    h->w.execute = hold_exec;
    h->w.cancel = hold_cancel;
    h->release = release;
}

/* Posts h and waits until it occupies a worker. */
static void hold_post(ex_pool *p, hold *h) {
    ex_error e = ex_post(ex_pool_scheduler(p), &h->w);
    cr_assert_eq(e.code, 0, "ex_post: %s", e.msg ? e.msg : "");
    wait_for_int(&h->started, 1);
}

/* ======================================================= create / destroy */

Test(exec_pool, default_thread_count_is_within_the_cpus) {
    unsigned n = ex_default_thread_count();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    cr_assert_geq(n, 1u);
    cr_assert_leq((long)n, online, "ex_default_thread_count() = %u > %ld online CPUs", n, online);
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof set, &set), 0);
    cr_assert_leq((int)n, CPU_COUNT(&set), "more threads (%u) than CPUs in the affinity mask (%d)", n,
                  CPU_COUNT(&set));
    cr_assert_eq(ex_default_thread_count(), n, "the answer is stable");
    expect_no_leaks();
}

Test(exec_pool, create_destroy_default_config) {
    ex_pool *p = pool_new_cfg(NULL);
    cr_assert_eq(ex_pool_size(p), ex_default_thread_count());
    where w;
    run_where(p, &w);
    cr_assert_geq(w.worker, 0);
    cr_assert_lt(w.worker, (int)ex_pool_size(p));
    pool_free(p);

    ex_pool_config zero;
    memset(&zero, 0, sizeof zero);
    p = pool_new_cfg(&zero);
    cr_assert_eq(ex_pool_size(p), ex_default_thread_count(), "threads = 0 means the default");
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, create_destroy_explicit_thread_counts) {
    static const unsigned counts[] = { 1, 2, 4 };
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        ex_pool_config c;
        memset(&c, 0, sizeof c);
        c.threads = counts[k];
        c.name_prefix = "explicit";
        c.spin_rounds = k == 0 ? 1 : 1000;
        ex_pool *p = pool_new_cfg(&c);
        cr_assert_eq(ex_pool_size(p), counts[k]);
        for (int i = 0; i < 20; i++) {
            where w;
            run_where(p, &w);
            cr_assert_geq(w.worker, 0);
            cr_assert_lt(w.worker, (int)counts[k], "worker index %d of a %u-thread pool", w.worker, counts[k]);
        }
        pool_free(p);
    }
    expect_no_leaks();
}

Test(exec_pool, create_destroy_repeatedly_without_work) {
    for (int i = 0; i < 25; i++) {
        ex_pool *p = pool_new((unsigned)(1 + i % 4), NULL);
        if (i % 2) test_sleep_ms(1); /* sometimes destroy parked workers, sometimes spinning ones */
        pool_free(p);
    }
    expect_no_leaks();
}

Test(exec_pool, too_many_threads_is_einval) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    ex_pool *p = (ex_pool *)&c; /* must be overwritten with NULL */
    c.threads = 4097;
    ex_error e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, EX_EINVAL, "threads = 4097: got %d", e.code);
    cr_assert_not_null(e.msg);
    cr_assert_null(p, "*out is NULL on failure");
    c.threads = 0xffffffffu;
    p = (ex_pool *)&c;
    e = ex_pool_create(&c, &p);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_null(p);
    expect_no_leaks();
}

Test(exec_pool, null_out_is_einval) {
    ex_error e = ex_pool_create(NULL, NULL);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = 2;
    e = ex_pool_create(&c, NULL);
    cr_assert_eq(e.code, EX_EINVAL);
    expect_no_leaks();
}

/* test_allocator, but fresh blocks are filled with garbage, so code that
 * reads memory it never initialised fails here and not only under ASan. */
static void *poison_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    void *p = test_allocator.allocate(test_allocator.ctx, size, align);
    if (p) memset(p, 0xa5, size);
    return p;
}

static void poison_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx;
    test_allocator.deallocate(test_allocator.ctx, p, size, align);
}

static ex_allocator poison_allocator = { poison_allocate, poison_deallocate, NULL, "poison", NULL };

/* A failure at any allocation of ex_pool_create gives EX_ENOMEM and
 * releases everything (a crash here means the error path touched memory it
 * never initialised). */
Test(exec_pool, create_out_of_memory_at_every_allocation) {
    ex_set_default_allocator(&poison_allocator);
    char path[] = "/tmp/cexec_pool_oom_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = 2;
    c.trace_path = path;
    c.trace_capacity = 16;
    bool created = false;
    for (long nth = 1; nth < 64 && !created; nth++) {
        ex_pool *p = (ex_pool *)&c;
        test_alloc_fail_at(nth);
        ex_error e = ex_pool_create(&c, &p);
        test_alloc_reset();
        if (e.code == 0) {
            created = true;
            cr_assert_not_null(p);
            pool_free(p);
        } else {
            cr_assert_eq(e.code, EX_ENOMEM, "allocation %ld failing: got %d (%s)", nth, e.code, e.msg ? e.msg : "");
            cr_assert_null(p);
            cr_assert_eq(test_stats.in_use, 0, "allocation %ld failing leaked %ld block(s)", nth, test_stats.in_use);
        }
    }
    cr_assert(created, "the pool was never created");
    ex_set_default_allocator(&test_allocator);
    unlink(path);
    expect_no_leaks();
}

/* ============================================================ where work runs */

Test(exec_pool, completion_runs_on_a_worker) {
    ex_pool *p = pool_new(2, NULL);
    ex_pool *q = pool_new(1, NULL);
    cr_assert_eq(ex_pool_current_worker(p), -1, "main is not a worker");
    where w;
    run_where(p, &w);
    cr_assert_geq(w.worker, 0);
    cr_assert_lt(w.worker, 2);
    cr_assert_not(pthread_equal(w.tid, pthread_self()), "completed on the main thread");

    /* A worker of p is not a worker of q. */
    where wq;
    memset(&wq, 0, sizeof wq);
    wq.pool = q;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), where_fn, &wq, EX_SIG0, EX_SIG(EX_T_INT)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(wq.worker, -1, "a worker of p claims to be worker %d of q", wq.worker);

    /* The value completion of schedule has no datums. */
    slot s;
    slot_init(&s, p);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    atomic_store(&g_completed, 0);
    slot_start(&s, snd);
    cr_assert_eq(wait_for(&g_completed, 1), 1);
    cr_assert_eq(atomic_load(&s.values), 1);
    cr_assert_eq(s.n, 0u);
    cr_assert_geq(s.worker, 0);
    slots_destroy(&s, 1);
    ex_sender_release(snd);
    pool_free(q);
    pool_free(p);
    expect_no_leaks();
}

/* Records thread names of the workers as they run items. */
typedef struct names_seen {
    ex_pool *pool;
    atomic_int calls;
    int bad_index;
    char names[8][32];
    atomic_int have[8];
} names_seen;

static ex_error names_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    names_seen *ns = ctx;
    (void)in, (void)n;
    int i = ex_pool_current_worker(ns->pool);
    if (i < 0 || i >= 8) {
        ns->bad_index = 1;
    } else {
        int expected = 0;
        if (atomic_compare_exchange_strong(&ns->have[i], &expected, 1)) {
            pthread_getname_np(pthread_self(), ns->names[i], sizeof ns->names[i]);
            atomic_store(&ns->have[i], 2);
        }
    }
    atomic_fetch_add(&ns->calls, 1);
    out[0] = ex_int(i);
    return ex_ok();
}

static void check_names(const char *prefix, unsigned threads) {
    ex_pool *p = pool_new(threads, prefix);
    names_seen *ns = calloc(1, sizeof *ns);
    cr_assert_not_null(ns);
    ns->pool = p;
    /* Run batches until every worker ran something (bounded). */
    ex_sender *snd = ex_then(ex_schedule(ex_pool_scheduler(p)), names_fn, ns, EX_SIG0, EX_SIG(EX_T_INT));
    enum { BATCH = 64 };
    slot *s = calloc(BATCH, sizeof *s);
    cr_assert_not_null(s);
    double end = test_now_s() + WAIT_LIMIT_S;
    unsigned seen = 0;
    while (seen < threads && test_now_s() < end) {
        atomic_store(&g_completed, 0);
        for (int i = 0; i < BATCH; i++) {
            slot_init(&s[i], p);
            slot_start(&s[i], snd);
        }
        cr_assert_eq(wait_for(&g_completed, BATCH), BATCH);
        slots_destroy(s, BATCH);
        seen = 0;
        for (unsigned i = 0; i < threads; i++) seen += atomic_load(&ns->have[i]) == 2;
    }
    cr_assert_not(ns->bad_index, "a callback ran outside the pool's workers");
    cr_assert_geq(seen, 1u);
    char full[64];
    for (unsigned i = 0; i < threads; i++) {
        if (atomic_load(&ns->have[i]) != 2) continue;
        snprintf(full, sizeof full, "%s-%u", prefix ? prefix : "cexec", i);
        if (strlen(full) <= 15) {
            cr_assert_str_eq(ns->names[i], full, "worker %u is named \"%s\"", i, ns->names[i]);
        } else {
            cr_assert_eq(strlen(ns->names[i]), 15u, "name \"%s\" is not cut to 15 characters", ns->names[i]);
            cr_assert_eq(strncmp(ns->names[i], full, 15), 0, "worker %u is named \"%s\", expected a cut \"%s\"", i,
                         ns->names[i], full);
        }
    }
    ex_sender_release(snd);
    free(s);
    free(ns);
    pool_free(p);
}

Test(exec_pool, workers_are_named_with_the_prefix) {
    check_names("tpool", 4);
    expect_no_leaks();
}

Test(exec_pool, workers_default_name_prefix) {
    check_names(NULL, 2);
    expect_no_leaks();
}

Test(exec_pool, long_prefix_is_cut_to_15_characters) {
    check_names("abcdefghijklmnopqrstuvwxyz", 2);
    expect_no_leaks();
}

/* Records the affinity of workers. */
typedef struct pin_seen {
    ex_pool *pool;
    int cpu[8];     /* the one CPU worker i may run on, -1: not pinned to one CPU */
    atomic_int have[8];
} pin_seen;

static ex_error pin_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    pin_seen *ps = ctx;
    (void)in, (void)n;
    int i = ex_pool_current_worker(ps->pool);
    if (i >= 0 && i < 8) {
        int expected = 0;
        if (atomic_compare_exchange_strong(&ps->have[i], &expected, 1)) {
            cpu_set_t set;
            ps->cpu[i] = -1;
            if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
                for (int c = 0; c < CPU_SETSIZE; c++)
                    if (CPU_ISSET((size_t)c, &set)) ps->cpu[i] = c;
            atomic_store(&ps->have[i], 2);
        }
    }
    out[0] = ex_int(i);
    return ex_ok();
}

Test(exec_pool, pinned_workers_run_on_one_cpu_each) {
    cpu_set_t mask;
    cr_assert_eq(sched_getaffinity(0, sizeof mask, &mask), 0);
    int ncpu = CPU_COUNT(&mask);
    int nth_cpu[CPU_SETSIZE];
    int k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET((size_t)c, &mask)) nth_cpu[k++] = c;

    ex_pool_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.threads = 4;
    cfg.pin_threads = true;
    ex_pool *p = pool_new_cfg(&cfg);
    pin_seen *ps = calloc(1, sizeof *ps);
    cr_assert_not_null(ps);
    ps->pool = p;
    ex_sender *snd = ex_then(ex_schedule(ex_pool_scheduler(p)), pin_fn, ps, EX_SIG0, EX_SIG(EX_T_INT));
    enum { BATCH = 64 };
    slot *s = calloc(BATCH, sizeof *s);
    cr_assert_not_null(s);
    for (int round = 0; round < 10; round++) {
        atomic_store(&g_completed, 0);
        for (int i = 0; i < BATCH; i++) {
            slot_init(&s[i], p);
            slot_start(&s[i], snd);
        }
        cr_assert_eq(wait_for(&g_completed, BATCH), BATCH);
        slots_destroy(s, BATCH);
    }
    int checked = 0;
    for (int i = 0; i < 4; i++) {
        if (atomic_load(&ps->have[i]) != 2) continue;
        checked++;
        cr_assert_eq(ps->cpu[i], nth_cpu[i % ncpu], "worker %d runs on CPU %d, expected CPU %d", i, ps->cpu[i],
                     nth_cpu[i % ncpu]);
    }
    cr_assert_geq(checked, 1);
    ex_sender_release(snd);
    free(s);
    free(ps);
    pool_free(p);
    expect_no_leaks();
}

/* ======================================================== many items */

static ex_error count_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    (*(int *)ctx)++;
    return ex_ok();
}

Test(exec_pool, ten_thousand_sync_waits_from_main) {
    enum { N = 10000 };
    ex_pool *p = pool_new(4, NULL);
    int *counts = calloc(N, sizeof *counts);
    cr_assert_not_null(counts);
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int i = 0; i < N; i++) {
        ex_result r = ex_sync_wait(ex_then(ex_schedule(sch), count_fn, &counts[i], EX_SIG0, EX_SIG0));
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "item %d: disposition %d", i, r.disposition);
        ex_result_destroy(&r);
    }
    for (int i = 0; i < N; i++) cr_assert_eq(counts[i], 1, "item %d ran %d times", i, counts[i]);
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_eq(sum.executed, (uint64_t)N, "executed %llu items, submitted %d", (unsigned long long)sum.executed, N);
    free(counts);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, batch_of_ten_thousand_from_main_each_exactly_once) {
    enum { N = 10000 };
    ex_pool *p = pool_new(4, NULL);
    slot *s = calloc(N, sizeof *s);
    cr_assert_not_null(s);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    atomic_store(&g_completed, 0);
    for (int i = 0; i < N; i++) {
        slot_init(&s[i], p);
        slot_start(&s[i], snd);
    }
    long got = wait_for(&g_completed, N);
    cr_assert_eq(got, N, "%ld of %d completions", got, N);
    cr_assert_eq(slots_expect_once(s, N), N, "every item completes with a value");
    for (int i = 0; i < N; i++) cr_assert_geq(s[i].worker, 0, "item %d completed off the workers", i);
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_eq(sum.executed, (uint64_t)N, "executed %llu, submitted %d", (unsigned long long)sum.executed, N);
    slots_destroy(s, N);
    ex_sender_release(snd);
    free(s);
    pool_free(p);
    cr_assert_eq(atomic_load(&g_completed), N, "destroy completed something twice");
    expect_no_leaks();
}

/* Many small batches from one thread: each batch's last submission races
 * with workers taking the earlier ones, and nothing submitted afterwards
 * would rescue an item a worker failed to see. */
static void small_batches(unsigned threads, int rounds, int batch) {
    ex_pool *p = pool_new(threads, NULL);
    slot s[16];
    cr_assert_leq(batch, 16);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    for (int round = 0; round < rounds; round++) {
        atomic_store(&g_completed, 0);
        for (int i = 0; i < batch; i++) {
            slot_init(&s[i], p);
            slot_start(&s[i], snd);
        }
        long got = wait_for(&g_completed, batch);
        cr_assert_eq(got, batch,
                     "%u thread(s), round %d: only %ld of %d items ran; the rest stayed queued with idle workers",
                     threads, round, got, batch);
        cr_assert_eq(slots_expect_once(s, batch), batch);
        slots_destroy(s, batch);
    }
    ex_sender_release(snd);
    pool_free(p);
}

Test(exec_pool, small_batches_from_main_are_never_stranded) {
    small_batches(1, 3000, 4);
    small_batches(2, 2000, 8);
    expect_no_leaks();
}

/* ------------------------------------------------- external submitters */

enum { SUBMITTERS = 8, PER_SUBMITTER = 2000 };

typedef struct submitter {
    pthread_t thread;
    ex_pool *pool;
    const ex_sender *snd;
    slot *slots;
    int connect_failures;
} submitter;

static void *submitter_main(void *arg) {
    submitter *sb = arg;
    for (int i = 0; i < PER_SUBMITTER; i++) {
        slot_init(&sb->slots[i], sb->pool);
        if (slot_connect(&sb->slots[i], sb->snd).code) {
            sb->connect_failures++;
            continue;
        }
        ex_start(sb->slots[i].op);
        if (i % 256 == 0) sched_yield();
    }
    return NULL;
}

Test(exec_pool, many_external_submitters_each_completion_exactly_once) {
    ex_pool *p = pool_new(4, NULL);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    submitter sb[SUBMITTERS];
    atomic_store(&g_completed, 0);
    for (int t = 0; t < SUBMITTERS; t++) {
        sb[t].pool = p;
        sb[t].snd = snd;
        sb[t].connect_failures = 0;
        sb[t].slots = calloc(PER_SUBMITTER, sizeof(slot));
        cr_assert_not_null(sb[t].slots);
    }
    for (int t = 0; t < SUBMITTERS; t++)
        cr_assert_eq(pthread_create(&sb[t].thread, NULL, submitter_main, &sb[t]), 0);
    for (int t = 0; t < SUBMITTERS; t++) pthread_join(sb[t].thread, NULL);
    for (int t = 0; t < SUBMITTERS; t++) cr_assert_eq(sb[t].connect_failures, 0);
    long total = (long)SUBMITTERS * PER_SUBMITTER;
    long got = wait_for(&g_completed, total);
    cr_assert_eq(got, total, "%ld of %ld completions", got, total);
    for (int t = 0; t < SUBMITTERS; t++) {
        cr_assert_eq(slots_expect_once(sb[t].slots, PER_SUBMITTER), PER_SUBMITTER);
        for (int i = 0; i < PER_SUBMITTER; i++) cr_assert_geq(sb[t].slots[i].worker, 0);
    }
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_eq(sum.executed, (uint64_t)total);
    for (int t = 0; t < SUBMITTERS; t++) {
        slots_destroy(sb[t].slots, PER_SUBMITTER);
        free(sb[t].slots);
    }
    ex_sender_release(snd);
    pool_free(p);
    expect_no_leaks();
}

/* -------------------------------------------------- nested submission */

#define TREE_DEPTH 12                        /* 2^12 leaves */
#define TREE_NODES ((1 << (TREE_DEPTH + 1)) - 1)

static struct {
    ex_pool *pool;
    ex_sender *snd;
    atomic_int counts[TREE_NODES + 1];  /* heap numbering: root 1, children 2i, 2i+1 */
    atomic_long done;
    atomic_int failures, off_worker, not_value;
} T;

static long subtree_size(int id) {
    int depth = 0;
    for (int x = id; x > 1; x >>= 1) depth++;
    return (1L << (TREE_DEPTH - depth + 1)) - 1;
}

typedef struct tnode {
    int id;
    ex_operation *op;
} tnode;

static void tree_spawn(int id);

static void tnode_complete(tnode *nd, bool value) {
    int id = nd->id;
    atomic_fetch_add(&T.counts[id], 1);
    if (ex_pool_current_worker(T.pool) < 0) atomic_fetch_add(&T.off_worker, 1);
    if (!value) atomic_fetch_add(&T.not_value, 1);
    if (value && id < (1 << TREE_DEPTH)) {
        tree_spawn(2 * id);
        tree_spawn(2 * id + 1);
    } else if (!value && id < (1 << TREE_DEPTH)) {
        atomic_fetch_add(&T.done, subtree_size(id) - 1); /* the children never come */
    }
    ex_operation_free(nd->op); /* allowed inside the completion */
    ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(tnode));
    atomic_fetch_add(&T.done, 1);
}

static void tnode_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    tnode_complete(self, true);
}
static void tnode_error(void *self, ex_error e) {
    (void)e;
    tnode_complete(self, false);
}
static void tnode_stopped(void *self) { tnode_complete(self, false); }

static const ex_receiver_vtable tnode_vt = { tnode_value, tnode_error, tnode_stopped, NULL, NULL };

static void tree_spawn(int id) {
    tnode *nd = ex_allocate(ex_default_allocator(), sizeof *nd, alignof(tnode));
    if (!nd) {
        atomic_fetch_add(&T.failures, 1);
        atomic_fetch_add(&T.done, subtree_size(id));
        return;
    }
    nd->id = id;
    ex_receiver r = { &tnode_vt, nd };
    if (ex_connect_alloc(T.snd, r, &nd->op).code) {
        ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(tnode));
        atomic_fetch_add(&T.failures, 1);
        atomic_fetch_add(&T.done, subtree_size(id));
        return;
    }
    ex_start(nd->op);
}

static void check_tree_counts(void) {
    for (int id = 1; id <= TREE_NODES; id++)
        cr_assert_eq(atomic_load(&T.counts[id]), 1, "node %d ran %d times", id, atomic_load(&T.counts[id]));
}

Test(exec_pool, nested_schedule_tree_from_workers_each_exactly_once) {
    memset(&T, 0, sizeof T);
    T.pool = pool_new(4, NULL);
    T.snd = ex_schedule(ex_pool_scheduler(T.pool));
    tree_spawn(1);
    long got = wait_for(&T.done, TREE_NODES);
    cr_assert_eq(got, TREE_NODES, "%ld of %d nodes", got, TREE_NODES);
    cr_assert_eq(atomic_load(&T.failures), 0);
    cr_assert_eq(atomic_load(&T.not_value), 0, "a node completed with error or stopped");
    cr_assert_eq(atomic_load(&T.off_worker), 0, "a node completed off the workers");
    check_tree_counts();
    ex_pool_worker_stats sum = stats_sum(T.pool);
    cr_assert_eq(sum.executed, (uint64_t)TREE_NODES, "executed %llu of %d", (unsigned long long)sum.executed,
                 TREE_NODES);
    ex_sender_release(T.snd);
    pool_free(T.pool);
    cr_assert_eq(atomic_load(&T.done), TREE_NODES);
    expect_no_leaks();
}

/* The same tree with ex_post of work items the test allocates. */
typedef struct pnode {
    ex_work w;
    int id;
} pnode;

static atomic_int P_cancelled;

static void ptree_post(int id);

static void pnode_exec(ex_work *w) {
    pnode *nd = (pnode *)w;
    int id = nd->id;
    ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(pnode));
    atomic_fetch_add(&T.counts[id], 1);
    if (ex_pool_current_worker(T.pool) < 0) atomic_fetch_add(&T.off_worker, 1);
    if (id < (1 << TREE_DEPTH)) {
        ptree_post(2 * id);
        ptree_post(2 * id + 1);
    }
    atomic_fetch_add(&T.done, 1);
}

static void pnode_cancel(ex_work *w) {
    pnode *nd = (pnode *)w;
    atomic_fetch_add(&P_cancelled, 1);
    atomic_fetch_add(&T.done, subtree_size(nd->id));
    ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(pnode));
}

static void ptree_post(int id) {
    pnode *nd = ex_allocate(ex_default_allocator(), sizeof *nd, alignof(pnode));
    if (!nd) {
        atomic_fetch_add(&T.failures, 1);
        atomic_fetch_add(&T.done, subtree_size(id));
        return;
    }
    nd->w.next = NULL;
    nd->w.execute = pnode_exec;
    nd->w.cancel = pnode_cancel;
    nd->id = id;
    if (ex_post(ex_pool_scheduler(T.pool), &nd->w).code) {
        ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(pnode));
        atomic_fetch_add(&T.failures, 1);
        atomic_fetch_add(&T.done, subtree_size(id));
    }
}

Test(exec_pool, nested_post_tree_from_workers_each_exactly_once) {
    memset(&T, 0, sizeof T);
    atomic_store(&P_cancelled, 0);
    T.pool = pool_new(4, NULL);
    ptree_post(1);
    long got = wait_for(&T.done, TREE_NODES);
    cr_assert_eq(got, TREE_NODES, "%ld of %d nodes", got, TREE_NODES);
    cr_assert_eq(atomic_load(&T.failures), 0);
    cr_assert_eq(atomic_load(&P_cancelled), 0);
    cr_assert_eq(atomic_load(&T.off_worker), 0);
    check_tree_counts();
    ex_pool_worker_stats sum = stats_sum(T.pool);
    cr_assert_eq(sum.executed, (uint64_t)TREE_NODES);
    pool_free(T.pool);
    expect_no_leaks();
}

/* One item fans out many schedule operations from its worker: the worker's
 * deque grows past its initial size while other workers steal from it. */
typedef struct fanout {
    ex_pool *pool;
    const ex_sender *snd;
    slot *slots;
    int n;
    int connect_failures;
    int owner;  /* the worker that fanned out */
    atomic_int fanned;
} fanout;

typedef struct fanout_item {
    ex_work w;
    fanout f;
} fanout_item;

static void fanout_exec(ex_work *w) {
    fanout *f = &((fanout_item *)w)->f;
    f->owner = ex_pool_current_worker(f->pool);
    for (int i = 0; i < f->n; i++) {
        slot_init(&f->slots[i], f->pool);
        if (slot_connect(&f->slots[i], f->snd).code) {
            f->connect_failures++;
            continue;
        }
        ex_start(f->slots[i].op);
    }
    atomic_store(&f->fanned, 1);
}

static void fanout_run(unsigned threads, int n, bool destroy_at_once) {
    fanout_item *fi = calloc(1, sizeof *fi);
    cr_assert_not_null(fi);
    fi->w.execute = fanout_exec;
    fi->f.pool = pool_new(threads, NULL);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(fi->f.pool));
    fi->f.snd = snd;
    fi->f.n = n;
    fi->f.slots = calloc((size_t)n, sizeof(slot));
    cr_assert_not_null(fi->f.slots);
    atomic_store(&g_completed, 0);
    cr_assert_eq(ex_post(ex_pool_scheduler(fi->f.pool), &fi->w).code, 0);
    wait_for_int(&fi->f.fanned, 1);
    cr_assert_eq(fi->f.connect_failures, 0);
    if (destroy_at_once) {
        pool_free(fi->f.pool); /* races the workers for what is queued */
        cr_assert_eq(atomic_load(&g_completed), n, "%ld of %d completed by the time destroy returned",
                     atomic_load(&g_completed), n);
        int values = slots_expect_once(fi->f.slots, n);
        int stops = 0;
        for (int i = 0; i < n; i++) {
            cr_assert_eq(atomic_load(&fi->f.slots[i].errors), 0);
            stops += atomic_load(&fi->f.slots[i].stops);
        }
        cr_assert_eq(values + stops, n);
    } else {
        long got = wait_for(&g_completed, n);
        cr_assert_eq(got, n, "%ld of %d completions", got, n);
        cr_assert_eq(slots_expect_once(fi->f.slots, n), n);
        for (int i = 0; i < n; i++) cr_assert_geq(fi->f.slots[i].worker, 0);
        ex_pool_worker_stats sum = stats_sum(fi->f.pool);
        cr_assert_eq(sum.executed, (uint64_t)n + 1);
        /* Every item sat in the owner's deque: whatever another worker ran,
         * it stole; the owner stole nothing. */
        cr_assert_geq(fi->f.owner, 0);
        for (unsigned i = 0; i < threads; i++) {
            ex_pool_worker_stats st;
            cr_assert_eq(ex_pool_worker_stats_get(fi->f.pool, i, &st).code, 0);
            if ((int)i == fi->f.owner)
                cr_assert_eq(st.stolen, 0u, "the owner stole %llu items", (unsigned long long)st.stolen);
            else
                cr_assert_eq(st.stolen, st.executed, "worker %u ran %llu items but stole %llu", i,
                             (unsigned long long)st.executed, (unsigned long long)st.stolen);
        }
        pool_free(fi->f.pool);
    }
    slots_destroy(fi->f.slots, n);
    free(fi->f.slots);
    ex_sender_release(snd);
    free(fi);
}

Test(exec_pool, fan_out_from_one_worker_grows_its_deque) {
    fanout_run(1, 5000, false);
    fanout_run(4, 5000, false);
    expect_no_leaks();
}

Test(exec_pool, destroy_races_workers_for_a_grown_deque) {
    for (int round = 0; round < 5; round++) fanout_run(round % 2 ? 4 : 2, 3000, true);
    expect_no_leaks();
}

/* A thread's submissions to a pool created at the address of a destroyed
 * one (allocators reuse blocks) must go to the new pool's queues.  The
 * recycling allocator below makes the reuse certain, in every build. */
static struct {
    pthread_mutex_t mu;
    struct { void *p; size_t size, align; } cache[8];
} recycler = { PTHREAD_MUTEX_INITIALIZER, { { NULL, 0, 0 } } };

static void *recycle_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    pthread_mutex_lock(&recycler.mu);
    for (int i = 0; i < 8; i++) {
        if (recycler.cache[i].p && recycler.cache[i].size == size && recycler.cache[i].align == align) {
            void *p = recycler.cache[i].p;
            recycler.cache[i].p = NULL;
            pthread_mutex_unlock(&recycler.mu);
            return p;
        }
    }
    pthread_mutex_unlock(&recycler.mu);
    return test_allocator.allocate(test_allocator.ctx, size, align);
}

static void recycle_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx;
    pthread_mutex_lock(&recycler.mu);
    for (int i = 0; i < 8; i++) {
        if (!recycler.cache[i].p) {
            recycler.cache[i].p = p;
            recycler.cache[i].size = size;
            recycler.cache[i].align = align;
            pthread_mutex_unlock(&recycler.mu);
            return;
        }
    }
    pthread_mutex_unlock(&recycler.mu);
    test_allocator.deallocate(test_allocator.ctx, p, size, align);
}

static void recycle_flush(void) {
    for (int i = 0; i < 8; i++) {
        if (recycler.cache[i].p)
            test_allocator.deallocate(test_allocator.ctx, recycler.cache[i].p, recycler.cache[i].size,
                                      recycler.cache[i].align);
        recycler.cache[i].p = NULL;
    }
}

static ex_allocator recycle_allocator = { recycle_allocate, recycle_deallocate, NULL, "recycle", NULL };

static void *submit_one_main(void *arg) {
    ex_pool *p = arg;
    where w;
    memset(&w, 0, sizeof w);
    w.pool = p;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), where_fn, &w, EX_SIG0, EX_SIG(EX_T_INT)));
    ex_result_destroy(&r);
    return NULL;
}

Test(exec_pool, new_pool_at_a_recycled_address_gets_its_work) {
    for (int attempt = 0; attempt < 3; attempt++) {
        /* Three other threads submit first, so main's submissions to the
         * 4-thread pool come from a later "home" than 0. */
        ex_set_default_allocator(&recycle_allocator);
        ex_pool *a = pool_new(4, NULL);
        ex_set_default_allocator(&test_allocator);
        for (int t = 0; t < 3; t++) {
            pthread_t th;
            cr_assert_eq(pthread_create(&th, NULL, submit_one_main, a), 0);
            pthread_join(th, NULL);
        }
        where w;
        run_where(a, &w);
        pool_free(a);
        ex_set_default_allocator(&recycle_allocator);
        ex_pool *b = pool_new(1, NULL);
        ex_set_default_allocator(&test_allocator);
        cr_assert_eq(b, a, "test setup: the recycling allocator did not give the old pool's address");
        slot s[10];
        ex_sender *snd = ex_schedule(ex_pool_scheduler(b));
        atomic_store(&g_completed, 0);
        for (int i = 0; i < 10; i++) {
            slot_init(&s[i], b);
            slot_start(&s[i], snd);
        }
        long got = wait_for(&g_completed, 10);
        cr_assert_eq(got, 10, "attempt %d: the pool at the reused address ran %ld of 10 items from main", attempt,
                     got);
        cr_assert_eq(slots_expect_once(s, 10), 10);
        for (int i = 0; i < 10; i++) cr_assert_eq(s[i].worker, 0);
        slots_destroy(s, 10);
        ex_sender_release(snd);
        ex_pool_worker_stats st;
        cr_assert_eq(ex_pool_worker_stats_get(b, 0, &st).code, 0);
        cr_assert_eq(st.executed, 10u, "the new pool ran %llu of 10 items", (unsigned long long)st.executed);
        pool_free(b);
        recycle_flush();
    }
    expect_no_leaks();
}

/* sync_wait on a worker of one pool for work on another pool, and back. */
typedef struct cross {
    ex_pool *p, *q;
    int inner_worker_q;
    int depth;
} cross;

static ex_error cross_inner(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    cross *c = ctx;
    (void)in, (void)n;
    c->inner_worker_q = ex_pool_current_worker(c->q);
    /* and from q's worker back to p, whose worker is waiting on us */
    ex_result r = ex_sync_wait(ex_schedule(ex_pool_scheduler(c->p)));
    ex_result_destroy(&r);
    out[0] = ex_int(r.disposition == EX_DISP_VALUE ? 1 : -100);
    return ex_ok();
}

static ex_error cross_outer(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    cross *c = ctx;
    (void)in, (void)n;
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(c->q)), cross_inner, c, EX_SIG0, EX_SIG(EX_T_INT)));
    int64_t v = r.disposition == EX_DISP_VALUE ? r.values[0].as.i : -1000;
    ex_result_destroy(&r);
    out[0] = ex_int(v + 1);
    return ex_ok();
}

Test(exec_pool, sync_wait_across_two_one_thread_pools) {
    cross c;
    memset(&c, 0, sizeof c);
    c.p = pool_new(1, "p");
    c.q = pool_new(1, "q");
    c.inner_worker_q = -2;
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(c.p)), cross_outer, &c, EX_SIG0, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 2);
    cr_assert_eq(c.inner_worker_q, 0);
    ex_result_destroy(&r);
    pool_free(c.q);
    pool_free(c.p);
    expect_no_leaks();
}

/* =========================================================== stop tokens */

Test(exec_pool, stop_requested_before_start_completes_stopped) {
    ex_pool *p = pool_new(2, NULL);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    cr_assert(ex_sender_sigs(snd)->flags & EX_SIGS_STOPPED, "schedule declares set_stopped");
    slot s[2];
    slot_init(&s[0], p);
    slot_with_stop(&s[0]);
    ex_stop_source_request_stop(&s[0].stop);
    slot_init(&s[1], p); /* a stop token that is never stopped: a value */
    slot_with_stop(&s[1]);
    atomic_store(&g_completed, 0);
    slot_start(&s[0], snd);
    slot_start(&s[1], snd);
    cr_assert_eq(wait_for(&g_completed, 2), 2);
    slots_expect_once(s, 2);
    cr_assert_eq(atomic_load(&s[0].stops), 1, "stopped token: values %d errors %d", atomic_load(&s[0].values),
                 atomic_load(&s[0].errors));
    cr_assert_geq(s[0].worker, 0, "set_stopped runs on a worker when the item runs");
    cr_assert_eq(atomic_load(&s[1].values), 1);
    slots_destroy(s, 2);
    ex_sender_release(snd);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, stop_requested_while_queued_completes_stopped) {
    ex_pool *p = pool_new(1, NULL);
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    slot s;
    slot_init(&s, p);
    slot_with_stop(&s);
    atomic_store(&g_completed, 0);
    slot_start(&s, snd);
    cr_assert_eq(atomic_load(&s.hits), 0, "the only worker is busy: nothing ran yet");
    ex_stop_source_request_stop(&s.stop);
    atomic_store(&release, 1);
    cr_assert_eq(wait_for(&g_completed, 1), 1);
    cr_assert_eq(atomic_load(&s.stops), 1, "stop requested before the item ran: values %d errors %d",
                 atomic_load(&s.values), atomic_load(&s.errors));
    cr_assert_geq(s.worker, 0);
    slots_destroy(&s, 1);
    ex_sender_release(snd);
    pool_free(p);
    cr_assert_eq(atomic_load(&h.done), 1);
    expect_no_leaks();
}

Test(exec_pool, sync_wait_with_stopped_token_in_env_is_stopped) {
    ex_pool *p = pool_new(2, NULL);
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    ex_result r = ex_sync_wait(ex_write_env(ex_schedule(ex_pool_scheduler(p)), &ex_key_get_stop_token,
                                            ex_token_value(ex_stop_source_token(&src))));
    cr_assert_eq(r.disposition, EX_DISP_STOPPED, "disposition %d", r.disposition);
    ex_result_destroy(&r);
    pool_free(p);
    expect_no_leaks();
}

/* ====================================================== scheduler queries */

Test(exec_pool, forward_progress_is_parallel) {
    ex_pool *p = pool_new(1, NULL);
    cr_assert_eq(ex_get_forward_progress_guarantee(ex_pool_scheduler(p)), EX_PROGRESS_PARALLEL);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, schedulers_compare_by_pool) {
    ex_pool *p = pool_new(1, NULL);
    ex_pool *q = pool_new(1, NULL);
    cr_assert(ex_scheduler_valid(ex_pool_scheduler(p)));
    cr_assert(ex_scheduler_equal(ex_pool_scheduler(p), ex_pool_scheduler(p)));
    cr_assert_not(ex_scheduler_equal(ex_pool_scheduler(p), ex_pool_scheduler(q)));
    cr_assert_not(ex_scheduler_equal(ex_pool_scheduler(q), ex_pool_scheduler(p)));
    cr_assert_not(ex_scheduler_equal(ex_pool_scheduler(p), ex_inline_scheduler()));
    pool_free(q);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, schedule_sender_attributes_name_the_pool) {
    ex_pool *p = pool_new(1, NULL);
    ex_pool *q = pool_new(1, NULL);
    ex_scheduler sch = ex_pool_scheduler(p);
    ex_sender *s = ex_schedule(sch);
    cr_assert_eq(ex_sender_status(s).code, 0);
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1);
    cr_assert_eq(sg->values[0].arity, 0);
    cr_assert(sg->flags & EX_SIGS_STOPPED);
    cr_assert(sg->flags & EX_SIGS_ERROR, "schedule may fail with EX_ESHUTDOWN");
    ex_scheduler got = { 0, 0 };
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &got));
    cr_assert(ex_scheduler_equal(got, sch));
    cr_assert_not(ex_scheduler_equal(got, ex_pool_scheduler(q)));
    ex_scheduler got2 = { 0, 0 };
    cr_assert(ex_get_completion_scheduler(s, &ex_key_completion_scheduler_stopped, &got2));
    cr_assert(ex_scheduler_equal(got2, sch));
    ex_sender_release(s);
    pool_free(q);
    pool_free(p);
    expect_no_leaks();
}

/* ========================================================= post / dispatch */

static _Thread_local bool tl_inside_call; /* this thread is inside ex_post/ex_dispatch of the test */


/* outer runs on a worker and posts/dispatches inner to `target`. */
typedef struct pd {
    ex_work outer;
    ex_work inner;
    ex_scheduler target;
    bool use_dispatch;
    ex_pool *pool;                  /* the pool inner should run on */
    atomic_int outer_done, inner_runs;
    ex_error call_err;
    pthread_t outer_tid, inner_tid;
    int inner_runs_after_call;      /* inner_runs read by outer right after the call returned */
    bool inner_saw_inside_call;     /* inner ran while its own thread was inside the call */
    int inner_saw_outer_done;
    int inner_worker;
} pd;

static void pd_outer(ex_work *w) {
    pd *x = (pd *)((char *)w - offsetof(pd, outer));
    x->outer_tid = pthread_self();
    tl_inside_call = true;
    x->call_err = x->use_dispatch ? ex_dispatch(x->target, &x->inner) : ex_post(x->target, &x->inner);
    tl_inside_call = false;
    x->inner_runs_after_call = atomic_load(&x->inner_runs);
    atomic_store(&x->outer_done, 1);
}

static void pd_inner(ex_work *w) {
    pd *x = (pd *)((char *)w - offsetof(pd, inner));
    x->inner_tid = pthread_self();
    x->inner_saw_inside_call = tl_inside_call;
    x->inner_saw_outer_done = atomic_load(&x->outer_done);
    x->inner_worker = ex_pool_current_worker(x->pool);
    atomic_fetch_add(&x->inner_runs, 1);
}

static void pd_init(pd *x, ex_pool *target, bool use_dispatch) {
    memset(x, 0, sizeof *x);
    x->outer.execute = pd_outer;
    x->inner.execute = pd_inner;
    x->target = ex_pool_scheduler(target);
    x->pool = target;
    x->use_dispatch = use_dispatch;
    x->inner_worker = -2;
}

/* Posts x->outer to `on` and waits for outer and inner to finish. */
static void pd_run(pd *x, ex_pool *on) {
    ex_error e = ex_post(ex_pool_scheduler(on), &x->outer);
    cr_assert_eq(e.code, 0, "ex_post: %s", e.msg ? e.msg : "");
    wait_for_int(&x->outer_done, 1);
    cr_assert_eq(x->call_err.code, 0, "post/dispatch from the worker: %s", x->call_err.msg ? x->call_err.msg : "");
    wait_for_int(&x->inner_runs, 1);
}

Test(exec_pool, post_from_a_worker_never_runs_inline_one_thread) {
    ex_pool *p = pool_new(1, NULL);
    pd x;
    pd_init(&x, p, false);
    pd_run(&x, p);
    cr_assert_not(x.inner_saw_inside_call, "posted item ran inside ex_post");
    cr_assert_eq(x.inner_runs_after_call, 0, "posted item ran before ex_post returned");
    cr_assert_eq(x.inner_saw_outer_done, 1, "on a 1-thread pool the posted item runs after the poster returned");
    cr_assert(pthread_equal(x.inner_tid, x.outer_tid));
    cr_assert_eq(x.inner_worker, 0);
    pool_free(p);
    cr_assert_eq(atomic_load(&x.inner_runs), 1, "posted item ran more than once");
    expect_no_leaks();
}

Test(exec_pool, post_from_a_worker_never_runs_inline_four_threads) {
    ex_pool *p = pool_new(4, NULL);
    for (int i = 0; i < 200; i++) {
        pd x;
        pd_init(&x, p, false);
        pd_run(&x, p);
        cr_assert_not(x.inner_saw_inside_call, "iteration %d: posted item ran inside ex_post", i);
        if (pthread_equal(x.inner_tid, x.outer_tid))
            cr_assert_eq(x.inner_saw_outer_done, 1, "iteration %d: ran on the poster's thread before it returned", i);
        cr_assert_geq(x.inner_worker, 0);
        cr_assert_eq(atomic_load(&x.inner_runs), 1);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, post_from_main_is_queued_and_runs_once_on_a_worker) {
    ex_pool *p = pool_new(1, NULL);
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    pd x;
    pd_init(&x, p, false);
    atomic_store(&x.outer_done, 1); /* inner only */
    tl_inside_call = true;
    ex_error e = ex_post(ex_pool_scheduler(p), &x.inner);
    tl_inside_call = false;
    cr_assert_eq(e.code, 0);
    cr_assert_eq(atomic_load(&x.inner_runs), 0, "the only worker is busy: the item cannot have run");
    atomic_store(&release, 1);
    wait_for_int(&x.inner_runs, 1);
    cr_assert_not(pthread_equal(x.inner_tid, pthread_self()));
    cr_assert_eq(x.inner_worker, 0);
    pool_free(p);
    cr_assert_eq(atomic_load(&x.inner_runs), 1);
    cr_assert_eq(atomic_load(&h.cancelled), 0);
    expect_no_leaks();
}

Test(exec_pool, dispatch_on_a_worker_runs_inline) {
    ex_pool *p = pool_new(2, NULL);
    for (int i = 0; i < 50; i++) {
        pd x;
        pd_init(&x, p, true);
        pd_run(&x, p);
        cr_assert(x.inner_saw_inside_call, "dispatch on a worker of the pool must run the item inline");
        cr_assert_eq(x.inner_runs_after_call, 1, "the item had not run when ex_dispatch returned");
        cr_assert_eq(x.inner_saw_outer_done, 0);
        cr_assert(pthread_equal(x.inner_tid, x.outer_tid));
        cr_assert_geq(x.inner_worker, 0);
    }
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, dispatch_from_main_is_queued) {
    ex_pool *p = pool_new(1, NULL);
    atomic_int release = 0;
    hold h;
    hold_init(&h, &release);
    hold_post(p, &h);
    pd x;
    pd_init(&x, p, true);
    tl_inside_call = true;
    ex_error e = ex_dispatch(ex_pool_scheduler(p), &x.inner);
    tl_inside_call = false;
    cr_assert_eq(e.code, 0, "ex_dispatch: %s", e.msg ? e.msg : "");
    cr_assert_eq(atomic_load(&x.inner_runs), 0, "dispatch from a non-worker ran the item inline");
    atomic_store(&release, 1);
    wait_for_int(&x.inner_runs, 1);
    cr_assert_not(x.inner_saw_inside_call);
    cr_assert_not(pthread_equal(x.inner_tid, pthread_self()));
    cr_assert_eq(x.inner_worker, 0);
    pool_free(p);
    cr_assert_eq(atomic_load(&x.inner_runs), 1);
    expect_no_leaks();
}

Test(exec_pool, dispatch_from_a_worker_of_another_pool_is_queued) {
    ex_pool *p = pool_new(1, NULL);
    ex_pool *q = pool_new(1, NULL);
    pd x;
    pd_init(&x, p, true); /* outer runs on q, dispatches to p */
    pd_run(&x, q);
    cr_assert_not(x.inner_saw_inside_call, "dispatch to p from q's worker ran inline");
    cr_assert_eq(x.inner_worker, 0, "the item must run on p's worker");
    cr_assert_not(pthread_equal(x.inner_tid, x.outer_tid));
    pool_free(q);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, post_and_dispatch_reject_bad_work_items) {
    ex_pool *p = pool_new(1, NULL);
    ex_scheduler sch = ex_pool_scheduler(p);
    ex_work w;
    memset(&w, 0, sizeof w);
    cr_assert_eq(ex_post(sch, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_post(sch, &w).code, EX_EINVAL, "execute NULL");
    cr_assert_eq(ex_dispatch(sch, NULL).code, EX_EINVAL);
    cr_assert_eq(ex_dispatch(sch, &w).code, EX_EINVAL);
    pool_free(p);
    expect_no_leaks();
}

/* ================================================= sync_wait on a worker */

typedef struct chain chain;
typedef struct lvl {
    chain *c;
    int d;
} lvl;
struct chain {
    ex_pool *pool;
    int max;
    int workers[16];
    lvl lv[16];
};

static ex_error level_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    lvl *l = ctx;
    chain *c = l->c;
    (void)in, (void)n;
    c->workers[l->d] = ex_pool_current_worker(c->pool);
    if (l->d + 1 >= c->max) {
        out[0] = ex_int(1);
        return ex_ok();
    }
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(c->pool)), level_fn, &c->lv[l->d + 1], EX_SIG0, EX_SIG(EX_T_INT)));
    if (r.disposition != EX_DISP_VALUE || r.n != 1) {
        ex_result_destroy(&r);
        return ex_err(EX_EUSER + 1, "level_fn: nested sync_wait failed");
    }
    int64_t v = r.values[0].as.i;
    ex_result_destroy(&r);
    out[0] = ex_int(v + 1);
    return ex_ok();
}

static void chain_init(chain *c, ex_pool *p, int levels) {
    memset(c, 0, sizeof *c);
    c->pool = p;
    c->max = levels;
    for (int d = 0; d < 16; d++) {
        c->lv[d].c = c;
        c->lv[d].d = d;
        c->workers[d] = -2;
    }
}

static ex_sender *chain_sender(chain *c) {
    return ex_then(ex_schedule(ex_pool_scheduler(c->pool)), level_fn, &c->lv[0], EX_SIG0, EX_SIG(EX_T_INT));
}

static void chain_check_workers(const chain *c) {
    for (int d = 0; d < c->max; d++)
        cr_assert_geq(c->workers[d], 0, "level %d ran off the workers (%d)", d, c->workers[d]);
}

static void nested_from_main(unsigned threads, int levels) {
    ex_pool *p = pool_new(threads, NULL);
    chain c;
    chain_init(&c, p, levels);
    ex_result r = ex_sync_wait(chain_sender(&c));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition, r.error.msg ? r.error.msg : "");
    expect_value_int(&r, levels);
    chain_check_workers(&c);
    ex_result_destroy(&r);
    pool_free(p);
}

Test(exec_pool, sync_wait_on_the_only_worker_helps_instead_of_deadlocking) {
    nested_from_main(1, 2); /* one nested sync_wait */
    expect_no_leaks();
}

Test(exec_pool, sync_wait_nested_three_levels_on_one_thread) {
    nested_from_main(1, 4); /* the item and three nested sync_waits */
    nested_from_main(1, 12);
    expect_no_leaks();
}

Test(exec_pool, sync_wait_nested_three_levels_on_two_threads) {
    nested_from_main(2, 4);
    expect_no_leaks();
}

Test(exec_pool, concurrent_nested_sync_waits_on_two_threads) {
    enum { CHAINS = 8, LEVELS = 4 };
    ex_pool *p = pool_new(2, NULL);
    chain *c = calloc(CHAINS, sizeof *c);
    slot *s = calloc(CHAINS, sizeof *s);
    cr_assert_not_null(c);
    cr_assert_not_null(s);
    atomic_store(&g_completed, 0);
    for (int i = 0; i < CHAINS; i++) {
        chain_init(&c[i], p, LEVELS);
        slot_init(&s[i], p);
        ex_sender *snd = chain_sender(&c[i]);
        slot_start(&s[i], snd);
        ex_sender_release(snd);
    }
    long got = wait_for(&g_completed, CHAINS);
    cr_assert_eq(got, CHAINS, "%ld of %d chains finished (deadlock?)", got, CHAINS);
    cr_assert_eq(slots_expect_once(s, CHAINS), CHAINS);
    for (int i = 0; i < CHAINS; i++) {
        cr_assert_eq(s[i].ival, LEVELS, "chain %d: %lld", i, (long long)s[i].ival);
        chain_check_workers(&c[i]);
    }
    slots_destroy(s, CHAINS);
    free(s);
    free(c);
    pool_free(p);
    expect_no_leaks();
}

/* ================================================================ destroy */

static struct {
    ex_pool *pool;
    int nblockers;
    bool check_refusals;
    pthread_t main_tid;
    ex_work blockers[4];
    atomic_int started, finished, blockers_cancelled;
    atomic_int probes_ok, probes_exec, probes_cancel, probes_cancel_off_main;
    atomic_int shutdown_seen, other_errors;
    ex_error post_err;
    /* refusals seen by blocker 0 once shutdown began */
    slot worker_sched;
    int worker_sched_sync;
    ex_result worker_sync;
    ex_work ext_work;
    atomic_int ext_work_runs;
    ex_error ext_post_err, ext_dispatch_err;
    slot ext_sched;
    int ext_sched_sync, ext_connect_err;
} D;

typedef struct probe {
    ex_work w;
} probe;

static void probe_exec(ex_work *w) {
    atomic_fetch_add(&D.probes_exec, 1);
    ex_deallocate(ex_default_allocator(), w, sizeof(probe), alignof(probe));
}

static void probe_cancel(ex_work *w) {
    atomic_fetch_add(&D.probes_cancel, 1);
    if (!pthread_equal(pthread_self(), D.main_tid)) atomic_fetch_add(&D.probes_cancel_off_main, 1);
    ex_deallocate(ex_default_allocator(), w, sizeof(probe), alignof(probe));
}

static void ext_work_fn(ex_work *w) {
    (void)w;
    atomic_fetch_add(&D.ext_work_runs, 1);
}

/* An outside thread submitting while destroy waits for the workers. */
static void *ext_main(void *arg) {
    (void)arg;
    ex_scheduler sch = ex_pool_scheduler(D.pool);
    D.ext_post_err = ex_post(sch, &D.ext_work);
    D.ext_dispatch_err = ex_dispatch(sch, &D.ext_work);
    ex_sender *snd = ex_schedule(sch);
    slot_init(&D.ext_sched, D.pool);
    D.ext_connect_err = slot_connect(&D.ext_sched, snd).code;
    if (!D.ext_connect_err) {
        ex_start(D.ext_sched.op);
        D.ext_sched_sync = atomic_load(&D.ext_sched.hits);
    }
    ex_sender_release(snd);
    return NULL;
}

static void blocker_refusals(void) {
    ex_scheduler sch = ex_pool_scheduler(D.pool);
    /* schedule from the worker: set_error(EX_ESHUTDOWN) inside start */
    ex_sender *snd = ex_schedule(sch);
    slot_init(&D.worker_sched, D.pool);
    if (!slot_connect(&D.worker_sched, snd).code) {
        ex_start(D.worker_sched.op);
        D.worker_sched_sync = atomic_load(&D.worker_sched.hits);
    }
    ex_sender_release(snd);
    D.worker_sync = ex_sync_wait(ex_schedule(sch));
    pthread_t t;
    if (pthread_create(&t, NULL, ext_main, NULL) == 0) pthread_join(t, NULL);
}

/* Holds its worker until ex_post reports the shutdown. */
static void blocker_exec(ex_work *w) {
    atomic_fetch_add(&D.started, 1);
    double end = test_now_s() + WAIT_LIMIT_S;
    while (atomic_load(&D.started) < D.nblockers && test_now_s() < end) sched_yield();
    while (test_now_s() < end) {
        probe *pr = ex_allocate(ex_default_allocator(), sizeof *pr, alignof(probe));
        if (!pr) {
            atomic_fetch_add(&D.other_errors, 1);
            break;
        }
        pr->w.next = NULL;
        pr->w.execute = probe_exec;
        pr->w.cancel = probe_cancel;
        ex_error e = ex_post(ex_pool_scheduler(D.pool), &pr->w);
        if (e.code == 0) {
            atomic_fetch_add(&D.probes_ok, 1);
            test_sleep_ms(1);
            continue;
        }
        ex_deallocate(ex_default_allocator(), pr, sizeof *pr, alignof(probe));
        if (e.code != EX_ESHUTDOWN) {
            atomic_fetch_add(&D.other_errors, 1);
            break;
        }
        if (w == &D.blockers[0]) {
            D.post_err = e;
            if (D.check_refusals) blocker_refusals();
        }
        atomic_fetch_add(&D.shutdown_seen, 1);
        break;
    }
    atomic_fetch_add(&D.finished, 1);
}

static void blocker_cancel(ex_work *w) {
    (void)w;
    atomic_fetch_add(&D.blockers_cancelled, 1);
}

/* Occupies every worker, queues k schedule operations from main, destroys
 * the pool, and checks that each one completed exactly once with
 * set_stopped, on the destroying thread. */
static void destroy_with_pending(unsigned threads, int k, bool check_refusals) {
    memset(&D, 0, sizeof D);
    D.main_tid = pthread_self();
    D.nblockers = (int)threads;
    D.check_refusals = check_refusals;
    D.ext_work.execute = ext_work_fn;
    D.ext_work.cancel = ext_work_fn;
    D.pool = pool_new(threads, NULL);
    for (unsigned i = 0; i < threads; i++) {
        D.blockers[i].execute = blocker_exec;
        D.blockers[i].cancel = blocker_cancel;
        cr_assert_eq(ex_post(ex_pool_scheduler(D.pool), &D.blockers[i]).code, 0);
    }
    wait_for_int(&D.started, (int)threads);

    ex_sender *snd = ex_schedule(ex_pool_scheduler(D.pool));
    slot *s = calloc((size_t)k, sizeof *s);
    cr_assert_not_null(s);
    atomic_store(&g_completed, 0);
    for (int i = 0; i < k; i++) {
        slot_init(&s[i], D.pool);
        slot_start(&s[i], snd);
    }
    for (int i = 0; i < k; i++)
        cr_assert_eq(atomic_load(&s[i].hits), 0, "every worker is busy: op %d cannot have completed", i);

    pool_free(D.pool); /* the blockers see EX_ESHUTDOWN and return */

    cr_assert_eq(atomic_load(&D.other_errors), 0);
    cr_assert_eq(atomic_load(&D.finished), (int)threads);
    cr_assert_eq(atomic_load(&D.shutdown_seen), (int)threads, "every blocker saw EX_ESHUTDOWN");
    cr_assert_eq(atomic_load(&D.blockers_cancelled), 0, "running items are finished, not cancelled");
    cr_assert_eq(D.post_err.code, EX_ESHUTDOWN);
    cr_assert_not_null(D.post_err.msg, "EX_ESHUTDOWN comes with a message");
    cr_assert_gt(strlen(D.post_err.msg), 0u);

    for (int i = 0; i < k; i++) {
        cr_assert_eq(atomic_load(&s[i].hits), 1, "op %d completed %d times", i, atomic_load(&s[i].hits));
        cr_assert_eq(atomic_load(&s[i].stops), 1, "op %d: values %d errors %d, expected set_stopped", i,
                     atomic_load(&s[i].values), atomic_load(&s[i].errors));
        cr_assert(pthread_equal(s[i].tid, pthread_self()), "op %d was cancelled off the destroying thread", i);
        cr_assert_eq(s[i].worker, -1);
    }
    cr_assert_eq(atomic_load(&D.probes_exec), 0, "a queued item ran after destroy began");
    cr_assert_eq(atomic_load(&D.probes_cancel), atomic_load(&D.probes_ok),
                 "items posted from workers: %d accepted, %d cancelled", atomic_load(&D.probes_ok),
                 atomic_load(&D.probes_cancel));
    cr_assert_eq(atomic_load(&D.probes_cancel_off_main), 0);

    if (check_refusals) {
        cr_assert_eq(atomic_load(&D.worker_sched.hits), 1);
        cr_assert_eq(atomic_load(&D.worker_sched.errors), 1, "schedule on a worker after shutdown began");
        cr_assert_eq(D.worker_sched.err.code, EX_ESHUTDOWN);
        cr_assert_not_null(D.worker_sched.err.msg);
        cr_assert_eq(D.worker_sched_sync, 1, "the refusal completes inside start");
        cr_assert_eq(D.worker_sync.disposition, EX_DISP_ERROR);
        cr_assert_eq(D.worker_sync.error.code, EX_ESHUTDOWN);
        ex_result_destroy(&D.worker_sync);

        cr_assert_eq(D.ext_post_err.code, EX_ESHUTDOWN, "ex_post from outside during destroy: %d",
                     D.ext_post_err.code);
        cr_assert_not_null(D.ext_post_err.msg);
        cr_assert_eq(D.ext_dispatch_err.code, EX_ESHUTDOWN, "ex_dispatch from outside during destroy: %d",
                     D.ext_dispatch_err.code);
        cr_assert_not_null(D.ext_dispatch_err.msg);
        cr_assert_eq(atomic_load(&D.ext_work_runs), 0, "a refused item must not run");
        cr_assert_eq(D.ext_connect_err, 0);
        cr_assert_eq(atomic_load(&D.ext_sched.errors), 1, "schedule from outside during destroy");
        cr_assert_eq(atomic_load(&D.ext_sched.hits), 1);
        cr_assert_eq(D.ext_sched.err.code, EX_ESHUTDOWN);
        cr_assert_not_null(D.ext_sched.err.msg);
        cr_assert_eq(D.ext_sched_sync, 1);
        cr_assert_eq(atomic_load(&g_completed), k + 2);
    } else {
        cr_assert_eq(atomic_load(&g_completed), k);
    }
    slots_destroy(s, k);
    free(s);
    ex_sender_release(snd);
}

Test(exec_pool, destroy_cancels_queued_ops_one_thread) {
    destroy_with_pending(1, 64, false);
    expect_no_leaks();
}

Test(exec_pool, destroy_cancels_queued_ops_all_four_workers_busy) {
    destroy_with_pending(4, 256, false);
    expect_no_leaks();
}

Test(exec_pool, new_work_is_refused_with_eshutdown_once_destroy_began) {
    destroy_with_pending(1, 8, true);
    expect_no_leaks();
}

Test(exec_pool, destroy_right_after_submission_loses_nothing) {
    enum { K = 2000 };
    slot *s = calloc(K, sizeof *s);
    cr_assert_not_null(s);
    for (int round = 0; round < 10; round++) {
        ex_pool *p = pool_new(round % 2 ? 4 : 2, NULL);
        ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
        atomic_store(&g_completed, 0);
        for (int i = 0; i < K; i++) {
            slot_init(&s[i], p);
            slot_start(&s[i], snd);
        }
        pool_free(p);
        cr_assert_eq(atomic_load(&g_completed), K, "round %d: %ld of %d completed by the time destroy returned",
                     round, atomic_load(&g_completed), K);
        int values = slots_expect_once(s, K);
        int stops = 0;
        for (int i = 0; i < K; i++) {
            cr_assert_eq(atomic_load(&s[i].errors), 0);
            stops += atomic_load(&s[i].stops);
        }
        cr_assert_eq(values + stops, K);
        slots_destroy(s, K);
        ex_sender_release(snd);
    }
    free(s);
    expect_no_leaks();
}

static ex_error destroy_self_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    ex_pool *p = ctx;
    (void)in, (void)n;
    ex_error e = ex_pool_destroy(p);
    out[0] = ex_int(e.code);
    out[1] = ex_str(e.msg);
    return ex_ok();
}

Test(exec_pool, destroy_on_a_worker_is_einval) {
    ex_pool *p = pool_new(2, NULL);
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(p)), destroy_self_fn, p, EX_SIG0, EX_SIG(EX_T_INT, EX_T_STR)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    cr_assert_eq(r.values[0].as.i, EX_EINVAL, "ex_pool_destroy on a worker: %lld", (long long)r.values[0].as.i);
    cr_assert_not_null(r.values[1].as.s);
    ex_result_destroy(&r);
    /* nothing was done: the pool still works */
    where w;
    run_where(p, &w);
    cr_assert_geq(w.worker, 0);
    pool_free(p);
    expect_no_leaks();
}

static ex_error destroy_other_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    out[0] = ex_int(ex_pool_destroy(ctx).code);
    return ex_ok();
}

Test(exec_pool, destroy_from_a_worker_of_another_pool_is_allowed) {
    ex_pool *p = pool_new(2, NULL);
    ex_pool *q = pool_new(1, NULL);
    where w;
    run_where(p, &w);
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(q)), destroy_other_fn, p, EX_SIG0, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 0);
    ex_result_destroy(&r);
    pool_free(q);
    expect_no_leaks();
}

/* ================================================================== stats */

Test(exec_pool, stats_bad_index_is_einval) {
    ex_pool *p = pool_new(2, NULL);
    ex_pool_worker_stats st;
    ex_error e = ex_pool_worker_stats_get(p, 2, &st);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_eq(ex_pool_worker_stats_get(p, 0xffffffffu, &st).code, EX_EINVAL);
    cr_assert_eq(ex_pool_worker_stats_get(p, 1, &st).code, 0);
    cr_assert_eq(ex_pool_worker_stats_get(p, 0, &st).code, 0);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, stats_executed_sums_to_items_run) {
    enum { N = 3000 };
    ex_pool *p = pool_new(4, NULL);
    ex_pool_worker_stats before = stats_sum(p);
    cr_assert_eq(before.executed, 0u, "a fresh pool ran nothing");
    slot *s = calloc(N, sizeof *s);
    cr_assert_not_null(s);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    atomic_store(&g_completed, 0);
    for (int i = 0; i < N; i++) {
        slot_init(&s[i], p);
        slot_start(&s[i], snd);
    }
    cr_assert_eq(wait_for(&g_completed, N), N);
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_eq(sum.executed, (uint64_t)N, "executed %llu of %d", (unsigned long long)sum.executed, N);
    /* per-worker counts add up and none exceeds the total */
    uint64_t per = 0;
    for (unsigned i = 0; i < ex_pool_size(p); i++) {
        ex_pool_worker_stats st;
        cr_assert_eq(ex_pool_worker_stats_get(p, i, &st).code, 0);
        cr_assert_leq(st.executed, (uint64_t)N);
        cr_assert_leq(st.stolen, st.executed, "worker %u stole more than it ran", i);
        per += st.executed;
    }
    cr_assert_eq(per, (uint64_t)N);
    slots_destroy(s, N);
    ex_sender_release(snd);
    free(s);
    pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, idle_workers_park_and_are_woken_for_new_work) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = 2;
    c.spin_rounds = 1;
    ex_pool *p = pool_new_cfg(&c);
    /* Every worker parks once it finds nothing (bounded wait). */
    double end = test_now_s() + WAIT_LIMIT_S;
    bool all_parked = false;
    while (!all_parked && test_now_s() < end) {
        test_sleep_ms(5);
        all_parked = true;
        for (unsigned i = 0; i < 2; i++) {
            ex_pool_worker_stats st;
            cr_assert_eq(ex_pool_worker_stats_get(p, i, &st).code, 0);
            if (st.parked == 0) all_parked = false;
        }
    }
    cr_assert(all_parked, "an idle worker never parked");
    /* Work for a parked pool wakes a worker. */
    uint64_t woken0 = stats_sum(p).woken;
    int items = 0;
    end = test_now_s() + WAIT_LIMIT_S;
    while (stats_sum(p).woken == woken0 && test_now_s() < end) {
        test_sleep_ms(20);
        where w;
        run_where(p, &w);
        items++;
        cr_assert_geq(w.worker, 0);
    }
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_gt(sum.woken, woken0, "no worker was counted as woken for work");
    cr_assert_eq(sum.executed, (uint64_t)items);
    pool_free(p);
    expect_no_leaks();
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(exec_pool, idle_pool_uses_almost_no_cpu) {
    ex_pool *p = pool_new(2, NULL);
    for (int i = 0; i < 100; i++) {
        where w;
        run_where(p, &w);
    }
    test_sleep_ms(20); /* let the workers finish spinning */
    double c0 = cpu_s();
    test_sleep_ms(200);
    double used = cpu_s() - c0;
    /* Resource check, generous: spinning workers would use ~400 ms here. */
    cr_assert_lt(used, 0.050, "an idle 2-thread pool used %.1f ms of CPU in 200 ms", used * 1000);
    pool_free(p);
    expect_no_leaks();
}

/* ================================================================== trace */

/* A strict little JSON checker (RFC 8259 syntax). */
typedef struct jp {
    const char *s;
    int depth;
} jp;

static void j_ws(jp *j) {
    while (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r') j->s++;
}

static bool j_value(jp *j);

static bool j_string(jp *j) {
    if (*j->s != '"') return false;
    j->s++;
    for (;;) {
        unsigned char ch = (unsigned char)*j->s;
        if (ch == '\0' || ch < 0x20) return false;
        j->s++;
        if (ch == '"') return true;
        if (ch == '\\') {
            char e = *j->s++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++, j->s++) {
                    char h = *j->s;
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return false;
                }
            } else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
                return false;
            }
        }
    }
}

static bool j_number(jp *j) {
    const char *p = j->s;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return false;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    j->s = p;
    return true;
}

static bool j_value(jp *j) {
    j_ws(j);
    if (++j->depth > 64) return false;
    bool ok = false;
    if (*j->s == '{') {
        j->s++;
        j_ws(j);
        if (*j->s == '}') {
            j->s++;
            ok = true;
        } else {
            for (;;) {
                j_ws(j);
                if (!j_string(j)) break;
                j_ws(j);
                if (*j->s++ != ':') break;
                if (!j_value(j)) break;
                j_ws(j);
                if (*j->s == ',') { j->s++; continue; }
                if (*j->s == '}') { j->s++; ok = true; }
                break;
            }
        }
    } else if (*j->s == '[') {
        j->s++;
        j_ws(j);
        if (*j->s == ']') {
            j->s++;
            ok = true;
        } else {
            for (;;) {
                if (!j_value(j)) break;
                j_ws(j);
                if (*j->s == ',') { j->s++; continue; }
                if (*j->s == ']') { j->s++; ok = true; }
                break;
            }
        }
    } else if (*j->s == '"') {
        ok = j_string(j);
    } else if (!strncmp(j->s, "true", 4) || !strncmp(j->s, "null", 4)) {
        j->s += 4;
        ok = true;
    } else if (!strncmp(j->s, "false", 5)) {
        j->s += 5;
        ok = true;
    } else {
        ok = j_number(j);
    }
    j->depth--;
    return ok;
}

static bool json_valid(const char *text) {
    jp j = { text, 0 };
    if (!j_value(&j)) return false;
    j_ws(&j);
    return *j.s == '\0';
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

static int count_substr(const char *hay, const char *needle) {
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += len) n++;
    return n;
}

static void temp_path(char *buf) {
    int fd = mkstemp(buf);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(buf); /* the pool creates it */
}

/* Runs `items` items on p and destroys it. */
static void run_items_and_destroy(ex_pool *p, int items) {
    for (int i = 0; i < items; i++) {
        where w;
        run_where(p, &w);
    }
    pool_free(p);
}

static void check_trace(const char *path, const char *prefix, unsigned threads, int min_runs) {
    char *text = read_all(path);
    cr_assert_not_null(text, "no trace written to %s", path);
    cr_assert(json_valid(text), "the trace is not valid JSON:\n%.2000s", text);
    cr_assert_not_null(strstr(text, "\"traceEvents\""));
    cr_assert_eq(count_substr(text, "\"thread_name\""), (int)threads, "one thread_name per worker");
    char name[64];
    for (unsigned i = 0; i < threads; i++) {
        snprintf(name, sizeof name, "\"name\":\"%s-%u\"", prefix, i);
        cr_assert_not_null(strstr(text, name), "no thread_name for worker %u (%s)", i, name);
    }
    int runs = count_substr(text, "\"name\":\"run\"");
    cr_assert_geq(runs, min_runs, "%d run events, expected at least %d", runs, min_runs);
    free(text);
}

Test(exec_pool, trace_path_gets_chrome_trace_json) {
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    temp_path(path);
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = 2;
    c.name_prefix = "trc";
    c.trace_path = path;
    ex_pool *p = pool_new_cfg(&c);
    run_items_and_destroy(p, 100);
    check_trace(path, "trc", 2, 100);
    unlink(path);
    expect_no_leaks();
}

Test(exec_pool, trace_capacity_drops_later_events_and_stays_valid) {
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    temp_path(path);
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = 1;
    c.name_prefix = "cap";
    c.trace_path = path;
    c.trace_capacity = 4;
    ex_pool *p = pool_new_cfg(&c);
    run_items_and_destroy(p, 50);
    check_trace(path, "cap", 1, 1);
    char *text = read_all(path);
    cr_assert_not_null(text);
    cr_assert_leq(count_substr(text, "\"ph\":\"X\""), 4, "more events than the capacity");
    cr_assert_not_null(strstr(text, "dropped"), "dropped events are reported");
    free(text);
    unlink(path);
    expect_no_leaks();
}

Test(exec_pool, trace_from_cexec_trace_env_var) {
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    temp_path(path);
    cr_assert_eq(setenv("CEXEC_TRACE", path, 1), 0);
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = 2;
    ex_pool *p = pool_new_cfg(&c);
    unsetenv("CEXEC_TRACE");
    run_items_and_destroy(p, 20);
    check_trace(path, "cexec", 2, 20);
    unlink(path);
    expect_no_leaks();
}

Test(exec_pool, trace_path_in_config_wins_over_env_var) {
    char env_path[] = "/tmp/cexec_pool_trace_env_XXXXXX";
    char cfg_path[] = "/tmp/cexec_pool_trace_cfg_XXXXXX";
    temp_path(env_path);
    temp_path(cfg_path);
    cr_assert_eq(setenv("CEXEC_TRACE", env_path, 1), 0);
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = 1;
    c.trace_path = cfg_path;
    ex_pool *p = pool_new_cfg(&c);
    unsetenv("CEXEC_TRACE");
    run_items_and_destroy(p, 5);
    check_trace(cfg_path, "cexec", 1, 5);
    cr_assert_neq(access(env_path, F_OK), 0, "the env var's path was written although the config named one");
    unlink(cfg_path);
    unlink(env_path);
    expect_no_leaks();
}

Test(exec_pool, trace_is_valid_json_with_quotes_in_the_prefix) {
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    temp_path(path);
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = 1;
    c.name_prefix = "a\"b\\c";
    c.trace_path = path;
    ex_pool *p = pool_new_cfg(&c);
    run_items_and_destroy(p, 3);
    char *text = read_all(path);
    cr_assert_not_null(text);
    cr_assert(json_valid(text), "a prefix with a quote and a backslash breaks the trace JSON:\n%.600s", text);
    free(text);
    unlink(path);
    expect_no_leaks();
}

/* More than 64 workers: several words of the idle mask, and the trace
 * writer's path for many workers. */
Test(exec_pool, pool_with_more_than_64_workers) {
    enum { THREADS = 130, N = 4000 };
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    temp_path(path);
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = THREADS;
    c.name_prefix = "big";
    c.trace_path = path;
    c.trace_capacity = 64;
    ex_pool *p = pool_new_cfg(&c);
    cr_assert_eq(ex_pool_size(p), (unsigned)THREADS);
    slot *s = calloc(N, sizeof *s);
    cr_assert_not_null(s);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    for (int round = 0; round < 2; round++) {
        atomic_store(&g_completed, 0);
        for (int i = 0; i < N; i++) {
            slot_init(&s[i], p);
            slot_start(&s[i], snd);
        }
        long got = wait_for(&g_completed, N);
        cr_assert_eq(got, N, "round %d: %ld of %d", round, got, N);
        cr_assert_eq(slots_expect_once(s, N), N);
        for (int i = 0; i < N; i++) cr_assert(s[i].worker >= 0 && s[i].worker < THREADS);
        slots_destroy(s, N);
        test_sleep_ms(20); /* let workers park between rounds: wake-ups across idle-mask words */
    }
    cr_assert_eq(stats_sum(p).executed, 2u * N);
    ex_pool_worker_stats st;
    cr_assert_eq(ex_pool_worker_stats_get(p, THREADS - 1, &st).code, 0);
    cr_assert_eq(ex_pool_worker_stats_get(p, THREADS, &st).code, EX_EINVAL);
    ex_sender_release(snd);
    free(s);
    pool_free(p);
    check_trace(path, "big", THREADS, 1);
    unlink(path);
    expect_no_leaks();
}

/* ======================================== owning handles and destroy */

/* ex_scheduler_retain on a pool keeps its memory: destroy waits for the
 * last handle.  The pool counts handles per worker (a worker's count can
 * go negative when its handles are dropped elsewhere) and sums them once
 * the workers are joined. */
typedef struct hold_ctx {
    ex_pool *pool;
    ex_scheduler held[4];
    atomic_int taken;
    atomic_int released;  /* set just before each outside release */
} hold_ctx;

static ex_error take_handles(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    hold_ctx *h = ctx;
    for (int i = 0; i < 4; i++) h->held[i] = ex_scheduler_retain(ex_pool_scheduler(h->pool));  /* on a worker */
    atomic_store(&h->taken, 1);
    return ex_ok();
}

static void *drop_handles_later(void *arg) {
    hold_ctx *h = arg;
    test_sleep_ms(50);
    for (int i = 0; i < 4; i++) {
        atomic_fetch_add(&h->released, 1);
        ex_scheduler_release(h->held[i]);  /* outside the pool */
    }
    return NULL;
}

Test(exec_pool, destroy_waits_for_handles_taken_on_a_worker_and_dropped_outside) {
    ex_pool *p = pool_new(2, "hold");
    hold_ctx h;
    memset(&h, 0, sizeof h);
    h.pool = p;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), take_handles, &h, EX_SIG0, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&h.taken), 1);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, drop_handles_later, &h), 0);
    cr_assert_eq(ex_pool_destroy(p).code, 0);  /* returns only after the last release */
    cr_assert_eq(atomic_load(&h.released), 4, "destroy returned with %d of 4 handles dropped",
                 atomic_load(&h.released));
    pthread_join(th, NULL);
    expect_no_leaks();
}

static ex_error drop_handles_here(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    hold_ctx *h = ctx;
    for (int i = 0; i < 4; i++) ex_scheduler_release(h->held[i]);  /* on a worker */
    return ex_ok();
}

/* Taken outside, dropped on a worker: the counts cancel across counters
 * and destroy does not wait. */
Test(exec_pool, handles_taken_outside_and_dropped_on_a_worker_balance) {
    ex_pool *p = pool_new(2, "hold");
    hold_ctx h;
    memset(&h, 0, sizeof h);
    h.pool = p;
    for (int i = 0; i < 4; i++) h.held[i] = ex_scheduler_retain(ex_pool_scheduler(p));
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), drop_handles_here, &h, EX_SIG0, EX_SIG0));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(ex_pool_destroy(p).code, 0);  /* would hang if the counts did not cancel */
    expect_no_leaks();
}
