/* SPDX-License-Identifier: MIT */
/* How an operation finds its allocator (environment key, else the
 * environment scheduler's default, else the process default), and zero
 * allocations in the steady state of a statically built pipeline (suite
 * frame_allocators, declared in libc_default.c). */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocators/alloc_fixtures.h"

/* ========================================================== propagation */

static ex_sender *pipeline_on(ex_scheduler sch, int64_t v) {
    return ex_starts_on(sch, ex_let_value(ex_just(ex_int(v)), let_plus3, NULL, EX_SIG(EX_T_INT)));
}

Test(frame_allocators, get_allocator_answers_the_pool_allocator) {
    cnt_alloc x, y;
    cnt_alloc_init_over(&x, NULL, "X");
    cnt_alloc_init_over(&y, NULL, "Y");
    ex_pool *p = alloc_pool(2, false, &x.base);
    ex_pool *plain = alloc_pool(1, false, NULL);
    ex_env_pair sp;
    ex_env_pair_init(&sp, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(p)), ex_env_empty());
    cr_expect_eq(ex_get_allocator(ex_env_of_pair(&sp)), &x.base, "the scheduler's default allocator");
    cr_expect_eq(ex_get_allocator(ex_env_forward(ex_env_of_pair(&sp))), &x.base, "through FWD-ENV too");

    ex_env_pair ap;
    ex_env_pair_init(&ap, &ex_key_get_allocator, ex_alloc_value(&y.base), ex_env_of_pair(&sp));
    cr_expect_eq(ex_get_allocator(ex_env_of_pair(&ap)), &y.base, "an explicit allocator wins over the pool's");
    ex_env_pair sp2;
    ex_env_pair_init(&sp2, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(p)), ex_env_of_pair(&ap));
    cr_expect_eq(ex_get_allocator(ex_env_of_pair(&sp2)), &y.base, "also when the scheduler is nearer");

    ex_env_pair pp;
    ex_env_pair_init(&pp, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(plain)), ex_env_empty());
    cr_expect_eq(ex_get_allocator(ex_env_of_pair(&pp)), &test_allocator, "a pool without one: the process default");
    cr_expect_eq(ex_get_allocator(ex_env_empty()), &test_allocator);
    test_pool_free(plain);
    test_pool_free(p);
    cr_expect_eq(atomic_load(&x.allocs), 0, "creating a pool does not use its frame allocator");
    expect_no_leaks();
}

Test(frame_allocators, pool_work_allocates_from_the_pool_allocator) {
    cnt_alloc x;
    cnt_alloc_init_over(&x, NULL, "X");
    ex_pool *p = alloc_pool(2, false, &x.base);
    long before = test_alloc_count();
    ex_result r = ex_sync_wait(pipeline_on(ex_pool_scheduler(p), 10));
    expect_value_int(&r, 13);
    ex_result_destroy(&r);
    cr_expect_eq(atomic_load(&x.allocs), 1, "the inner operation of let_value came from the pool's allocator (%ld)",
                 atomic_load(&x.allocs));
    cr_expect_eq(atomic_load(&x.in_use), 0);
    /* the default allocator made only the senders (building them) */
    long made = test_alloc_count() - before;
    cr_expect_gt(made, 0);
    test_pool_free(p);
    expect_no_leaks();
}

Test(frame_allocators, write_env_allocator_wins_over_the_pool_allocator) {
    cnt_alloc x, y;
    cnt_alloc_init_over(&x, NULL, "X");
    cnt_alloc_init_over(&y, NULL, "Y");
    ex_pool *p = alloc_pool(2, false, &x.base);
    ex_scheduler sch = ex_pool_scheduler(p);
    /* Y written inside starts_on */
    ex_sender *inner = ex_write_env(ex_let_value(ex_just(ex_int(1)), let_plus3, NULL, EX_SIG(EX_T_INT)),
                                    &ex_key_get_allocator, ex_alloc_value(&y.base));
    ex_result r = ex_sync_wait(ex_starts_on(sch, inner));
    expect_value_int(&r, 4);
    ex_result_destroy(&r);
    cr_expect_eq(atomic_load(&y.allocs), 1, "inner write_env: from Y");
    cr_expect_eq(atomic_load(&x.allocs), 0, "inner write_env: nothing from the pool's allocator");
    /* Y written outside starts_on */
    r = ex_sync_wait(ex_write_env(pipeline_on(sch, 1), &ex_key_get_allocator, ex_alloc_value(&y.base)));
    expect_value_int(&r, 4);
    ex_result_destroy(&r);
    cr_expect_eq(atomic_load(&y.allocs), 2, "outer write_env: from Y");
    cr_expect_eq(atomic_load(&x.allocs), 0, "outer write_env: nothing from the pool's allocator");
    cr_expect_eq(atomic_load(&y.in_use), 0);
    test_pool_free(p);
    expect_no_leaks();
}


Test(frame_allocators, pool_bulk_helpers_come_from_the_pool_allocator) {
    cnt_alloc x;
    cnt_alloc_init_over(&x, NULL, "X");
    ex_pool *p = alloc_pool(5, false, &x.base); /* 4 helpers > EX_BULK_INLINE_HELPERS */
    enum { SHAPE = 1000 };
    static atomic_uint hits[SHAPE];
    for (int i = 0; i < SHAPE; i++) atomic_init(&hits[i], 0);
    ex_result r = ex_sync_wait(ex_starts_on(ex_pool_scheduler(p), ex_bulk(ex_just(ex_int(5)), EX_PAR, SHAPE, bulk_count, hits)));
    expect_value_int(&r, 5);
    ex_result_destroy(&r);
    for (int i = 0; i < SHAPE; i++) cr_assert_eq(atomic_load(&hits[i]), 1u, "index %d ran once", i);
    cr_expect_eq(atomic_load(&x.allocs), 1, "the extra helper items came from the pool's allocator (%ld)",
                 atomic_load(&x.allocs));
    cr_expect_eq(atomic_load(&x.in_use), 0);
    test_pool_free(p);
    expect_no_leaks();
}

/* ================================================ zero steady-state allocs */

/* ------------------------------------------------- a tracking allocator */

/* Counts allocations, optionally forwards to another allocator (else
 * posix_memalign), and, while armed, records the call stacks of the first
 * few allocations so an unexpected allocation can be located. */
#define TRK_TRACES 4
#define TRK_DEPTH 24

typedef struct trk_alloc {
    ex_allocator a;
    const ex_allocator *under;
    atomic_long allocs, frees, in_use;
    atomic_int armed;
    atomic_int traced;
    void *bt[TRK_TRACES][TRK_DEPTH];
    int depth[TRK_TRACES];
    size_t size[TRK_TRACES];
} trk_alloc;

static void *trk_allocate(void *ctx, size_t size, size_t align) {
    trk_alloc *t = ctx;
    void *p = NULL;
    if (t->under) p = t->under->allocate(t->under->ctx, size, align);
    else if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) p = NULL;
    if (!p) return NULL;
    atomic_fetch_add(&t->allocs, 1);
    atomic_fetch_add(&t->in_use, 1);
    if (atomic_load(&t->armed)) {
        int i = atomic_fetch_add(&t->traced, 1);
        if (i < TRK_TRACES) {
            t->size[i] = size;
            t->depth[i] = backtrace(t->bt[i], TRK_DEPTH);
        }
    }
    return p;
}

static void trk_deallocate(void *ctx, void *p, size_t size, size_t align) {
    trk_alloc *t = ctx;
    if (t->under) t->under->deallocate(t->under->ctx, p, size, align);
    else free(p);
    atomic_fetch_add(&t->frees, 1);
    atomic_fetch_sub(&t->in_use, 1);
}

static void trk_init(trk_alloc *t, const ex_allocator *under, const char *name) {
    memset(t, 0, sizeof *t);
    t->a.allocate = trk_allocate;
    t->a.deallocate = trk_deallocate;
    t->a.ctx = t;
    t->a.name = name;
    t->a.stats = NULL;
    t->under = under;
    atomic_init(&t->allocs, 0);
    atomic_init(&t->frees, 0);
    atomic_init(&t->in_use, 0);
    atomic_init(&t->armed, 0);
    atomic_init(&t->traced, 0);
}

/* Prints the recorded call stacks, resolved to function and line with
 * addr2line when it is installed (the test binary is not linked with
 * -rdynamic, so backtrace_symbols alone gives only offsets). */
static void trk_dump(trk_alloc *t, const char *label) {
    int n = atomic_load(&t->traced);
    if (n > TRK_TRACES) n = TRK_TRACES;
    Dl_info self;
    bool have_self = dladdr((void *)(uintptr_t)trk_dump, &self) != 0;
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "[frame_allocators] %s: unexpected allocation #%d of %zu bytes from:\n", label, i + 1, t->size[i]);
        backtrace_symbols_fd(t->bt[i], t->depth[i], 2);
        if (!have_self) continue;
        char cmd[64 + TRK_DEPTH * 24];
        int len = snprintf(cmd, sizeof cmd, "addr2line -f -i -C -s -p -e /proc/%ld/exe", (long)getpid());
        int frames = 0;
        for (int j = 0; j < t->depth[i] && len < (int)sizeof cmd - 24; j++) {
            Dl_info di;
            if (!dladdr(t->bt[i][j], &di) || di.dli_fbase != self.dli_fbase) continue;
            /* return addresses: step back into the call instruction */
            len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %#lx",
                            (unsigned long)((uintptr_t)t->bt[i][j] - (uintptr_t)di.dli_fbase - 1));
            frames++;
        }
        if (!frames) continue;
        fflush(stderr);
        FILE *pipe = popen(cmd, "r");
        if (!pipe) continue;
        char line[512];
        while (fgets(line, sizeof line, pipe)) fprintf(stderr, "    at %s", line);
        pclose(pipe);
    }
}

#define STEADY_RUNS 100000
#define STEADY_WARMUP 10

/* Under valgrind (one thread at a time) 100,000 runs on a pool take 12-15 s
 * of the suite's 30 s, and timed out on a slow host: memcheck runs a fifth
 * of them (the plain and sanitizer suites run them all). */
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
static long steady_runs(void) { return RUNNING_ON_VALGRIND ? STEADY_RUNS / 5 : STEADY_RUNS; }
#else
static long steady_runs(void) { return STEADY_RUNS; }
#endif

typedef struct steady_rcv {
    ex_receiver_vtable vt;
    ex_env_pair pair;
    ex_env env;
    atomic_int done;
    int values, errors, stops;
    int64_t a, b;
    size_t n;
    pthread_mutex_t mu; /* the test thread sleeps on cv while a pool runs the work */
    pthread_cond_t cv;
} steady_rcv;

/* The completion's last access to the receiver is under mu. */
static void st_done(steady_rcv *r) {
    pthread_mutex_lock(&r->mu);
    atomic_store_explicit(&r->done, 1, memory_order_release);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static bool st_wait(steady_rcv *r) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)ALLOC_WAIT_LIMIT_S;
    bool ok = true;
    pthread_mutex_lock(&r->mu);
    while (ok && !atomic_load_explicit(&r->done, memory_order_acquire))
        ok = pthread_cond_timedwait(&r->cv, &r->mu, &dl) == 0 || atomic_load(&r->done);
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static void st_value(void *self, const ex_value *v, size_t n) {
    steady_rcv *r = self;
    r->values++;
    r->n = n;
    if (n == 2) r->a = v[0].as.i, r->b = v[1].as.i;
    st_done(r);
}
static void st_error(void *self, ex_error e) {
    (void)e;
    steady_rcv *r = self;
    r->errors++;
    st_done(r);
}
static void st_stopped(void *self) {
    steady_rcv *r = self;
    r->stops++;
    st_done(r);
}
static ex_env st_env(void *self) { return ((steady_rcv *)self)->env; }

static ex_error ret2(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(2);
    return ex_ok();
}

typedef struct steady_result {
    long bad_runs;
    long run_at_first_bad;
    long default_allocs, env_allocs;
} steady_result;

/* Connects s into caller storage, starts it, waits for it (driving loop if
 * given), destroys the operation; steady_runs() times.  Counts allocations
 * (default: the tracker installed as default; env: the environment's) after
 * the warm-up. */
static steady_result run_steady(const ex_sender *s, steady_rcv *rc, ex_run_loop *loop, trk_alloc *dflt, trk_alloc *enva) {
    steady_result res = { 0, -1, 0, 0 };
    size_t size = ex_sender_op_size(s), align = ex_sender_op_align(s);
    if (align < sizeof(void *)) align = sizeof(void *);
    void *storage = NULL;
    cr_assert_eq(posix_memalign(&storage, align, size), 0);
    ex_receiver r = { &rc->vt, rc };
    long d0 = 0, e0 = 0, t0 = 0;
    long runs = steady_runs();
    for (long run = 0; run < runs; run++) {
        if (run == STEADY_WARMUP) {
            d0 = atomic_load(&dflt->allocs);
            e0 = atomic_load(&enva->allocs);
            t0 = test_alloc_count();
            atomic_store(&dflt->armed, 1);
            atomic_store(&enva->armed, 1);
        }
        atomic_store_explicit(&rc->done, 0, memory_order_relaxed);
        rc->values = rc->errors = rc->stops = 0;
        rc->a = rc->b = 0;
        ex_operation *op = NULL;
        ex_error e = ex_connect(s, r, storage, size, &op);
        cr_assert_eq(e.code, 0, "run %ld: connect: %s", run, e.msg ? e.msg : "");
        ex_start(op);
        if (loop) {
            double deadline = test_now_s() + ALLOC_WAIT_LIMIT_S;
            unsigned idle = 0;
            while (!atomic_load_explicit(&rc->done, memory_order_acquire)) {
                if (ex_run_loop_run_one(loop)) continue;
                if (++idle % 1024 == 0) cr_assert_lt(test_now_s(), deadline, "run %ld: the pipeline did not complete", run);
            }
        } else {
            cr_assert(st_wait(rc), "run %ld: the pipeline did not complete", run);
        }
        ex_operation_destroy(op);
        if (rc->values != 1 || rc->n != 2 || rc->a != 1 || rc->b != 2) {
            if (!res.bad_runs) res.run_at_first_bad = run;
            res.bad_runs++;
        }
    }
    atomic_store(&dflt->armed, 0);
    atomic_store(&enva->armed, 0);
    res.default_allocs = atomic_load(&dflt->allocs) - d0;
    res.env_allocs = atomic_load(&enva->allocs) - e0;
    long test_allocs = test_alloc_count() - t0;
    cr_expect_eq(test_allocs, res.default_allocs, "every default allocation went through the tracker");
    free(storage);
    return res;
}

static void steady_rcv_init(steady_rcv *rc) {
    memset(rc, 0, sizeof *rc);
    rc->vt = (ex_receiver_vtable){ st_value, st_error, st_stopped, st_env, NULL };
    atomic_init(&rc->done, 0);
    pthread_mutex_init(&rc->mu, NULL);
    pthread_cond_init(&rc->cv, NULL);
}

static void steady_rcv_destroy(steady_rcv *rc) {
    pthread_cond_destroy(&rc->cv);
    pthread_mutex_destroy(&rc->mu);
}

static ex_sender *steady_pipeline(ex_scheduler sch) {
    return ex_when_all(ex_then(ex_schedule(sch), then_ret1, NULL, EX_SIG0, EX_SIG(EX_T_INT)),
                       ex_then(ex_schedule(sch), ret2, NULL, EX_SIG0, EX_SIG(EX_T_INT)));
}

static void steady_report(const steady_result *res, trk_alloc *dflt, trk_alloc *enva, const char *what) {
    cr_expect_eq(res->bad_runs, 0, "%s: %ld run(s) did not complete with (1, 2), first at run %ld", what, res->bad_runs,
                 res->run_at_first_bad);
    if (res->default_allocs) trk_dump(dflt, "default allocator");
    if (res->env_allocs) trk_dump(enva, "environment allocator");
    cr_expect_eq(res->default_allocs, 0, "%s: %ld allocation(s) from the default allocator in %ld steady runs (stacks on stderr)",
                 what, res->default_allocs, steady_runs() - STEADY_WARMUP);
    cr_expect_eq(res->env_allocs, 0, "%s: %ld allocation(s) from the environment's allocator in %ld steady runs (stacks on stderr)",
                 what, res->env_allocs, steady_runs() - STEADY_WARMUP);
}

Test(frame_allocators, zero_allocations_in_steady_state_on_a_run_loop) {
    trk_alloc dflt, y;
    trk_init(&dflt, &test_allocator, "default-tracker");
    trk_init(&y, NULL, "env-tracker");
    ex_set_default_allocator(&dflt.a);
    ex_run_loop loop;
    test_loop_init(&loop);
    ex_sender *s = steady_pipeline(ex_run_loop_scheduler(&loop));
    cr_assert_eq(ex_sender_status(s).code, 0);
    steady_rcv rc;
    steady_rcv_init(&rc);
    /* The environment names an allocator: the operations would allocate from it. */
    ex_env_pair_init(&rc.pair, &ex_key_get_allocator, ex_alloc_value(&y.a), ex_env_empty());
    rc.env = ex_env_of_pair(&rc.pair);
    steady_result res = run_steady(s, &rc, &loop, &dflt, &y);
    steady_report(&res, &dflt, &y, "run_loop");
    steady_rcv_destroy(&rc);
    ex_sender_release(s);
    test_loop_destroy(&loop);
    ex_set_default_allocator(&test_allocator);
    cr_expect_eq(atomic_load(&dflt.in_use), 0);
    expect_no_leaks();
}

Test(frame_allocators, zero_allocations_in_steady_state_on_a_pool) {
    trk_alloc dflt, x;
    trk_init(&dflt, &test_allocator, "default-tracker");
    trk_init(&x, NULL, "pool-tracker");
    ex_set_default_allocator(&dflt.a);
    ex_pool *p = alloc_pool(2, false, &x.a);
    ex_scheduler sch = ex_pool_scheduler(p);
    ex_sender *s = steady_pipeline(sch);
    cr_assert_eq(ex_sender_status(s).code, 0);
    steady_rcv rc;
    steady_rcv_init(&rc);
    /* The environment's scheduler is the pool: its allocator is X. */
    ex_env_pair_init(&rc.pair, &ex_key_get_scheduler, ex_sched_value(sch), ex_env_empty());
    rc.env = ex_env_of_pair(&rc.pair);
    cr_assert_eq(ex_get_allocator(rc.env), &x.a);
    steady_result res = run_steady(s, &rc, NULL, &dflt, &x);
    steady_report(&res, &dflt, &x, "pool");
    steady_rcv_destroy(&rc);
    ex_sender_release(s);
    test_pool_free(p);
    ex_set_default_allocator(&test_allocator);
    cr_expect_eq(atomic_load(&dflt.in_use), 0);
    expect_no_leaks();
}

