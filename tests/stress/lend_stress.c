/* SPDX-License-Identifier: MIT */
/* lend_stress.c - lent callers (cexec/pool.h, docs/pool.md "Lent callers")
 * under contention: more threads wait in ex_sync_wait on one pool than it
 * has lent slots, so some lend themselves and some fall back to a worker's
 * inbox.  Each operation completes exactly once; its callbacks run once
 * with a value and never otherwise; every detached item posted from a lent
 * item runs (or, during shutdown, is cancelled) exactly once.
 *
 * Phase 1: plain schedules, then-chains posting detached items (from
 * items, or from the caller before any item ran), when_all of two
 * schedules, waits stopped from another thread mid-way, and nested
 * sync_waits from inside items; forks whose half on a worker queues items
 * on that worker's deque and lingers, so the caller, done with its half,
 * may take them back (docs/pool.md, "Taking its work back").
 * Phase 2: the same (but stop) while main shuts the pool down: value,
 * stopped or EX_ESHUTDOWN, exactly once.
 * Phase 3: destroy racing a lent caller: destroy must wait for its slot. */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include <cexec/cexec.h>
#include "base/exi_macros.h"
#include "stress_util.h"

enum {
    THREADS = 6,
    LEND_SLOTS = 2,
    OPS = 480,                 /* per thread, phase 1 */
    OPS2 = 400,                /* per thread at most, phase 2 */
    DETACHED = 3,              /* items a then-chain posts and leaves */
    KINDS = 7,
    DESTROY_ROUNDS = 150,
    PHASE2_ROUNDS = 6,
    MAX_OPS = THREADS * (OPS2 > OPS ? OPS2 : OPS),
};

/* K_STOP last: phase 2 leaves it out. */
enum { K_PLAIN, K_DETACH, K_WHEN_ALL, K_NESTED, K_INLINE_POST, K_FORK, K_STOP };

/* What each operation saw; written by the thread of the op (disp) and by
 * the callbacks (runs), read by main after the joins. */
typedef struct op_rec {
    uint32_t runs_a, runs_b;   /* callback runs (atomic) */
    int kind;
    int disp;                  /* EX_DISP_*, -1: sync_wait never returned */
    int err;
    int64_t value;
} op_rec;

typedef struct detached {
    ex_work work;
    uint32_t ran, cancelled;   /* atomic */
    uint32_t posted;           /* the post was accepted */
} detached;

static op_rec ops[MAX_OPS];
static detached items[MAX_OPS * DETACHED];
static ex_pool *pool;
static agent stoppers[THREADS];
static pthread_barrier_t go;        /* the callers and main start together */
static uint32_t finished;            /* operations whose sync_wait returned (atomic) */
static uint32_t on_lent, on_workers; /* where count_a ran (atomic) */

/* ------------------------------------------------------------ callbacks */

static uint32_t op_id(const op_rec *r) { return (uint32_t)(r - ops); }

static void detached_run(ex_work *w) { __atomic_fetch_add(&((detached *)w)->ran, 1, __ATOMIC_RELAXED); }
static void detached_cancel(ex_work *w) { __atomic_fetch_add(&((detached *)w)->cancelled, 1, __ATOMIC_RELAXED); }

static ex_error count_a(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    __atomic_fetch_add(&((op_rec *)ctx)->runs_a, 1, __ATOMIC_RELAXED);
    /* A little work, and at times the CPU given away while the slot is
     * held: other callers then find no free slot and fall back. */
    spin_delay(op_id(ctx) * 37 % 2048);
    if (op_id(ctx) % 3 == 0) sched_yield();
    __atomic_fetch_add(ex_pool_current_worker(pool) >= (int)ex_pool_size(pool) ? &on_lent : &on_workers, 1,
                       __ATOMIC_RELAXED);
    out[0] = ex_int(1);
    return ex_ok();
}

static ex_error count_b(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    __atomic_fetch_add(&((op_rec *)ctx)->runs_b, 1, __ATOMIC_RELAXED);
    out[0] = ex_int(2);
    return ex_ok();
}

/* Posts DETACHED items it does not wait for. */
static ex_error post_detached(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    op_rec *r = ctx;
    __atomic_fetch_add(&r->runs_a, 1, __ATOMIC_RELAXED);
    for (uint32_t k = 0; k < DETACHED; k++) {
        detached *d = &items[op_id(r) * DETACHED + k];
        d->work.execute = detached_run;
        d->work.cancel = detached_cancel;
        if (!ex_post(ex_pool_scheduler(pool), &d->work).code) __atomic_store_n(&d->posted, 1, __ATOMIC_RELAXED);
    }
    out[0] = ex_int(1);
    return ex_ok();
}

/* post_detached, then a while before it returns: its items wait in the
 * deque of the agent that runs it, where the other half's caller may take
 * them back. */
static ex_error post_and_linger(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    ex_error e = post_detached(ctx, in, n, out);
    spin_delay(4096);
    return e;
}

/* Waits, from inside an item, for another item of the pool. */
static ex_error nested_wait(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    op_rec *r = ctx;
    __atomic_fetch_add(&r->runs_a, 1, __ATOMIC_RELAXED);
    ex_result inner = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(pool)), count_b, r, EX_SIG0, EX_SIG(EX_T_INT)));
    /* value: b ran; else (shutdown) it did not: the outer op carries it */
    out[0] = ex_int(inner.disposition == EX_DISP_VALUE ? inner.values[0].as.i + 10 : -(int64_t)inner.disposition);
    ex_result_destroy(&inner);
    return ex_ok();
}

static void request_stop(void *arg) { ex_stop_source_request_stop(arg); }

/* ---------------------------------------------------------- operations */

static ex_sender *on_pool(ex_then_fn fn, void *ctx) {
    return ex_then(ex_schedule(ex_pool_scheduler(pool)), fn, ctx, EX_SIG0, EX_SIG(EX_T_INT));
}

static void record(op_rec *r, ex_result *res) {
    r->disp = (int)res->disposition;
    r->err = res->disposition == EX_DISP_ERROR ? res->error.code : 0;
    if (res->disposition == EX_DISP_VALUE) {
        r->value = 0;
        for (size_t i = 0; i < res->n; i++) r->value = r->value * 100 + res->values[i].as.i;
    }
    ex_result_destroy(res);
    __atomic_fetch_add(&finished, 1, __ATOMIC_RELEASE);
}

static void run_op(op_rec *r, int kind, agent *stopper) {
    r->kind = kind;
    ex_result res;
    switch (kind) {
    case K_PLAIN: res = ex_sync_wait(on_pool(count_a, r)); break;
    case K_DETACH: res = ex_sync_wait(on_pool(post_detached, r)); break;
    case K_WHEN_ALL: res = ex_sync_wait(ex_when_all(on_pool(count_a, r), on_pool(count_b, r))); break;
    case K_FORK: res = ex_sync_wait(ex_when_all(on_pool(post_and_linger, r), on_pool(count_b, r))); break;
    case K_NESTED: res = ex_sync_wait(on_pool(nested_wait, r)); break;
    case K_INLINE_POST:
        /* Posts from the caller inside start, before any item ran: the
         * first takes a lent slot without a wake-up and the wait ends at
         * once; close must hand them to a worker. */
        res = ex_sync_wait(ex_then(ex_just(), post_detached, r, EX_SIG0, EX_SIG(EX_T_INT)));
        break;
    default: {
        ex_stop_source src;
        ex_stop_source_init(&src);
        agent_arm(stopper, request_stop, &src, rnd(4000));
        res = ex_sync_wait(ex_write_env(on_pool(count_a, r), &ex_key_get_stop_token,
                                        ex_token_value(ex_stop_source_token(&src))));
        if (!agent_wait(stopper)) r->err = -1000;  /* src must outlive the request */
        break;
    }
    }
    record(r, &res);
}

typedef struct caller { uint32_t t; int phase; } caller;

static void *caller_main(void *arg) {
    caller *c = arg;
    rng_state = (uint64_t)0x9e3779b97f4a7c15u * (c->t + 1u) + (unsigned)c->phase;
    int n = c->phase == 1 ? OPS : OPS2;
    int kinds = c->phase == 1 ? KINDS : KINDS - 1;  /* phase 2: no stop source */
    int refused = 0;
    pthread_barrier_wait(&go);
    for (int i = 0; i < n; i++) {
        op_rec *r = &ops[c->t * (uint32_t)n + (uint32_t)i];
        run_op(r, (int)((uint32_t)i + c->t) % kinds, &stoppers[c->t]);
        if (r->disp == EX_DISP_ERROR && r->err == EX_ESHUTDOWN && ++refused == 8) break;  /* the pool is gone */
    }
    return NULL;
}

/* ------------------------------------------------------------- checks */

/* The op completed once, as its kind says; after shutdown (lax) it may
 * also be stopped or refused, with no callback run that did not finish. */
static void check_op(const op_rec *r, uint32_t id, bool lax, int *checks, int *values) {
    uint32_t a = __atomic_load_n(&r->runs_a, __ATOMIC_RELAXED), b = __atomic_load_n(&r->runs_b, __ATOMIC_RELAXED);
    (*checks)++;
    CHECK(r->err != -1000, "op %u: the stopper did not finish", id);
    CHECK(a <= 1 && b <= 1, "op %u (kind %d): callbacks ran %u and %u times", id, r->kind, a, b);
    if (r->disp == EX_DISP_VALUE) {
        ++*values;
        bool pair = r->kind == K_WHEN_ALL || r->kind == K_FORK;
        int64_t want = pair ? 102 : r->kind == K_NESTED ? (lax ? r->value : 12) : 1;
        CHECK(r->value == want, "op %u (kind %d): value %lld, not %lld", id, r->kind, (long long)r->value, (long long)want);
        bool both = pair || (r->kind == K_NESTED && r->value == 12);
        CHECK(a == 1 && b == (both ? 1u : 0u), "op %u (kind %d): value but callbacks ran %u, %u", id, r->kind, a, b);
    } else if (r->disp == EX_DISP_STOPPED) {
        CHECK(lax || r->kind == K_STOP, "op %u (kind %d): stopped", id, r->kind);
        if (r->kind != K_WHEN_ALL && r->kind != K_FORK) CHECK(a == 0, "op %u (kind %d): stopped, yet its callback ran", id, r->kind);
    } else {
        CHECK(lax && r->disp == EX_DISP_ERROR && r->err == EX_ESHUTDOWN, "op %u (kind %d): disposition %d, error %d",
              id, r->kind, r->disp, r->err);
        if (r->kind != K_WHEN_ALL && r->kind != K_FORK) CHECK(a == 0, "op %u (kind %d): refused, yet its callback ran", id, r->kind);
    }
}

static void check_ops(int n_per_thread, bool lax, int *checks, const char *phase) {
    int values = 0, stopped = 0, refused = 0;
    for (uint32_t id = 0; id < (uint32_t)(THREADS * n_per_thread); id++) {
        const op_rec *r = &ops[id];
        if (r->disp == -1) continue;  /* phase 2: never started (its thread saw the pool gone) */
        check_op(r, id, lax, checks, &values);
        stopped += r->disp == EX_DISP_STOPPED;
        refused += r->disp == EX_DISP_ERROR;
    }
    printf("%s: %d values, %d stopped, %d refused; callbacks on lent slots %u, on workers %u\n", phase, values, stopped,
           refused, __atomic_load_n(&on_lent, __ATOMIC_RELAXED), __atomic_load_n(&on_workers, __ATOMIC_RELAXED));
    __atomic_store_n(&on_lent, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&on_workers, 0, __ATOMIC_RELAXED);
}

/* Every accepted detached item settled once; refused ones never. */
static void check_detached(int n_ops, bool cancel_ok, int *checks) {
    int posted = 0;
    for (int i = 0; i < n_ops * DETACHED; i++) {
        detached *d = &items[i];
        uint32_t ran = __atomic_load_n(&d->ran, __ATOMIC_RELAXED), can = __atomic_load_n(&d->cancelled, __ATOMIC_RELAXED);
        (*checks)++;
        if (d->posted) {
            posted++;
            CHECK(ran + can == 1 && (cancel_ok || can == 0), "detached %d: ran %u, cancelled %u", i, ran, can);
        } else {
            CHECK(ran + can == 0, "refused detached %d: ran %u, cancelled %u", i, ran, can);
        }
    }
    printf("  %d detached items posted\n", posted);
}

/* Waits (20 s) until every posted detached item ran. */
static bool detached_all_ran(int n_ops) {
    double end = now_s() + 20.0;
    for (int i = 0; i < n_ops * DETACHED; i++)
        while (items[i].posted && !__atomic_load_n(&items[i].ran, __ATOMIC_RELAXED))
            if (now_s() > end) return false;
            else sched_yield();
    return true;
}

static void reset(void) {
    memset(ops, 0, sizeof ops);
    memset(items, 0, sizeof items);
    __atomic_store_n(&finished, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < MAX_OPS; i++) ops[i].disp = -1;
}

static ex_pool *lend_pool(int *checks) {
    ex_pool *p = NULL;
    ex_pool_config cfg = { .threads = 2, .lend_slots = LEND_SLOTS };
    ex_error e = ex_pool_create(&cfg, &p);
    (*checks)++;
    CHECK(e.code == 0, "create: %s", e.msg ? e.msg : "");
    return p;
}

static void start_callers(pthread_t *t, caller *c, int phase) {
    for (uint32_t i = 0; i < THREADS; i++) {
        c[i] = (caller){ i, phase };
        pthread_create(&t[i], NULL, caller_main, &c[i]);
    }
    pthread_barrier_wait(&go);
}

static void phase1(int *checks) {
    reset();
    pool = lend_pool(checks);
    pthread_t t[THREADS];
    caller c[THREADS];
    start_callers(t, c, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    (*checks)++;
    CHECK(detached_all_ran(THREADS * OPS), "phase 1: a detached item never ran");
    /* A lent slot steals only to take its work back (and in nested waits). */
    uint64_t taken_back = 0;
    for (unsigned i = 0; i < LEND_SLOTS; i++) {
        ex_pool_worker_stats st;
        if (!ex_pool_worker_stats_get(pool, ex_pool_size(pool) + i, &st).code) taken_back += st.stolen;
    }
    printf("phase 1: lent slots stole %llu items\n", (unsigned long long)taken_back);
    stress_pool_free(pool, checks);
    check_ops(OPS, false, checks, "phase 1");
    check_detached(THREADS * OPS, false, checks);
}

static void phase2(int round, int *checks) {
    reset();
    pool = lend_pool(checks);
    pthread_t t[THREADS];
    caller c[THREADS];
    start_callers(t, c, 2);
    /* Shut down part-way: after 1/8 of the operations, 2/8, ... */
    uint32_t target = (uint32_t)(THREADS * OPS2 * (round + 1) / (PHASE2_ROUNDS + 2));
    double end = now_s() + 20.0;
    while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) < target && now_s() < end) sched_yield();
    ex_error e = ex_pool_shutdown(pool);
    (*checks)++;
    CHECK(e.code == 0, "shutdown: %d", e.code);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    stress_pool_free(pool, checks);
    check_ops(OPS2, true, checks, "phase 2");
    check_detached(THREADS * OPS2, true, checks);
}

/* ----------------------------------------------- phase 3: destroy racing */

typedef struct race {
    uint32_t destroyed;      /* atomic */
    uint32_t early;          /* the item saw destroy end while it held its slot */
    uint32_t lent;           /* the item ran on a lent slot */
    int code;
} race;

static void destroy_pool(void *arg) {
    race *r = arg;
    r->code = ex_pool_destroy(pool).code;
    __atomic_store_n(&r->destroyed, 1, __ATOMIC_RELEASE);
}

static ex_error item_racing_destroy(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    race *r = ctx;
    int w = ex_pool_current_worker(pool);
    out[0] = ex_int(w);
    /* On a worker destroy would wait for this item: race only when lent. */
    if (w < (int)ex_pool_size(pool)) return ex_ok();
    r->lent = 1;
    agent_arm(&stoppers[0], destroy_pool, r, rnd(2000));
    spin_delay(rnd(20000));
    r->early = __atomic_load_n(&r->destroyed, __ATOMIC_ACQUIRE);
    return ex_ok();
}

static void phase3(int *checks) {
    int lent = 0;
    for (int round = 0; round < DESTROY_ROUNDS; round++) {
        pool = lend_pool(checks);
        race r = { 0, 0, 0, -1 };
        ex_result res = ex_sync_wait(on_pool(item_racing_destroy, &r));
        (*checks)++;
        CHECK(res.disposition == EX_DISP_VALUE, "round %d: disposition %d", round, res.disposition);
        ex_result_destroy(&res);
        if (r.lent) {
            lent++;
            (*checks) += 3;
            CHECK(agent_wait(&stoppers[0]), "round %d: destroy never returned", round);
            CHECK(!r.early, "round %d: destroy ended while the lent caller held its slot", round);
            CHECK(r.code == 0, "round %d: destroy: %d", round, r.code);
        } else {
            stress_pool_free(pool, checks);
        }
    }
    printf("phase 3: %d of %d rounds raced destroy with a lent caller\n", lent, DESTROY_ROUNDS);
}

int main(void) {
    int checks = 0;
    ex_set_default_allocator(&counting_alloc);
    long base = stress_in_use();
    for (int i = 0; i < THREADS; i++) agent_start(&stoppers[i]);
    pthread_barrier_init(&go, NULL, THREADS + 1);
    double t0 = now_s();
    phase1(&checks);
    for (int round = 0; round < PHASE2_ROUNDS; round++) phase2(round, &checks);
    phase3(&checks);
    for (int i = 0; i < THREADS; i++) agent_stop(&stoppers[i]);
    pthread_barrier_destroy(&go);
    checks++;
    CHECK(stress_in_use() == base, "%ld blocks of the default allocator not freed", stress_in_use() - base);
    printf("lend_stress: %.2f s\n", now_s() - t0);
    return stress_finish("lend_stress", checks);
}
