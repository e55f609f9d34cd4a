/* SPDX-License-Identifier: MIT */
/* algo_scan, agents: a scan completes on an agent of its scheduler, one
 * tile runs on one agent, several workers reduce tiles at once, and a
 * resource's own bulk hook runs the participants (algo_scan suite, see
 * scan_typed.c). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/exi_tiled.h"  /* EXI_TILES_PER_PART, EXI_REDUCE_TILES_PER_PART */
#include "algorithms/local_fixtures.h"

/* ===================================================== completion thread */

static void completes_on_an_agent_of_the_scheduler_on(algo_sched *a) {
    static const size_t sizes[] = { 0, 1, 3 * 16384 + 5 };
    for (size_t j = 0; j < 3; j++) {
        size_t n = sizes[j];
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
        fill_i64(in, n, 11);
        ex_monoid m = { sizeof(int64_t), &(uint64_t){ 0 }, sum_combine, NULL };
        sum_ctx c = { SUM_MAGIC, 0, 0 };
        m.ctx = &c;
        ex_sender *s[3] = { ex_inclusive_scan_i64(a->sch, in, out, n),
                            ex_exclusive_scan_f64(a->sch, (const double *)in, (double *)out, n, 0),
                            ex_exclusive_scan(a->sch, &m, in, out, n, &(uint64_t){ 0 }) };
        for (int b = 0; b < 3; b++) {
            arec r;
            as_run_plain(a, s[b], &r);
            cr_assert_eq(atomic_load(&r.values), 1);
            if (a->pool)
                cr_assert_geq(r.worker, 0, "%s builder %d n=%zu: did not complete on a pool worker", a->name, b, n);
            else if (a->kind == AS_STC)
                cr_assert_neq(r.thread, test_thread_id(), "%s: completes on the context's thread", a->name);
            else
                cr_assert_eq(r.thread, test_thread_id(), "%s: completes on the thread that runs the loop", a->name);
            ex_sender_release(s[b]);
        }
        free(in), free(out);
    }
}

Test(algo_scan, completes_on_an_agent_of_the_scheduler) {
    for_each_kind(AS_INLINE, AS_POOL4, completes_on_an_agent_of_the_scheduler_on);
}

/* ============================================================ agents */

/* combine notes the threads it runs on; in tile 0 it can wait until
 * another thread combined something (tile 1's reduction runs before the
 * chain hand-over, so it can overlap tile 0). */
#define MAX_THREADS 16

typedef struct agent_ctx {
    atomic_uintptr_t threads[MAX_THREADS];
    atomic_int nthreads, overflow;
    const uint64_t *base;
    size_t wait_index;          /* the element whose combine waits (SIZE_MAX: none) */
    atomic_int waited, timed_out;
} agent_ctx;

static int agent_note(agent_ctx *c) {
    uintptr_t me = (uintptr_t)test_thread_id();
    int n = atomic_load(&c->nthreads);
    for (int i = 0; i < n && i < MAX_THREADS; i++)
        if (atomic_load(&c->threads[i]) == me) return n;
    int slot = atomic_fetch_add(&c->nthreads, 1);
    if (slot < MAX_THREADS) atomic_store(&c->threads[slot], me);
    else atomic_store(&c->overflow, 1);
    return slot + 1;
}

static bool other_thread_seen(agent_ctx *c) {
    uintptr_t me = (uintptr_t)test_thread_id();
    int n = atomic_load(&c->nthreads);
    for (int i = 0; i < n && i < MAX_THREADS; i++) {
        uintptr_t t = atomic_load(&c->threads[i]);
        if (t && t != me) return true;
    }
    return false;
}

static void agent_combine(void *ctx, void *acc, const void *x) {
    agent_ctx *c = ctx;
    agent_note(c);
    if ((const uint64_t *)x - c->base == (ptrdiff_t)c->wait_index && !atomic_exchange(&c->waited, 1)) {
        double end = test_now_s() + 10;
        while (!other_thread_seen(c) && test_now_s() < end) sched_yield();
        if (!other_thread_seen(c)) atomic_store(&c->timed_out, 1);
    }
    *(uint64_t *)acc += *(const uint64_t *)x;
}

static void one_tile_runs_on_one_agent_of_a_pool_on(algo_sched *a) {
    static const size_t sizes[] = { 1, 100, 16384 };
    for (size_t j = 0; j < 3; j++) {
        size_t n = sizes[j];
        uint64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
        for (size_t i = 0; i < n; i++) in[i] = i;
        for (int excl = 0; excl < 2; excl++) {
            agent_ctx c = { .base = in, .wait_index = SIZE_MAX };
            uint64_t zero = 0;
            ex_monoid m = { 8, &zero, agent_combine, &c };
            run_gscan(a, &m, excl, in, out, n, &zero);
            cr_assert_eq(atomic_load(&c.nthreads), 1, "n=%zu (one tile): combine ran on %d threads", n,
                         atomic_load(&c.nthreads));
            cr_assert_eq(out[n - 1], excl ? (n - 1) * (n - 2) / 2 : n * (n - 1) / 2);
        }
        free(in), free(out);
    }
}

Test(algo_scan, one_tile_runs_on_one_agent_of_a_pool) {
    with_scheduler(AS_POOL4, one_tile_runs_on_one_agent_of_a_pool_on);
}

static void tiles_are_reduced_by_several_workers_at_once_on(algo_sched *a) {
    size_t n = 8 * ALGO_TILE + 1;
    uint64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = i * 3;
    agent_ctx c = { .base = in };
    c.wait_index = 0;  /* tile 0's first element waits for another worker */
    uint64_t zero = 0;
    ex_monoid m = { 8, &zero, agent_combine, &c };
    run_gscan(a, &m, false, in, out, n, NULL);
    cr_assert_eq(atomic_load(&c.timed_out), 0, "%s: no other worker combined while tile 0 was being reduced", a->name);
    cr_assert_geq(atomic_load(&c.nthreads), 2, "%s", a->name);
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) {
        s += in[i];
        cr_assert_eq(out[i], s, "%s: out[%zu]", a->name, i);
    }
    free(in), free(out);
}

Test(algo_scan, tiles_are_reduced_by_several_workers_at_once) {
    for_each_kind(AS_POOL2, AS_POOL4, tiles_are_reduced_by_several_workers_at_once_on);
}

/* ========================================== a resource's own bulk hook */

/* An inline resource (schedule completes inside start) whose bulk hook
 * either runs the indices one after another from the last to the first,
 * or gives every index its own thread. */
typedef struct own_res {
    bool threads;
    atomic_int bulk_calls;
    size_t last_shape;
} own_res;

typedef struct own_index { ex_bulk_job *job; size_t i; } own_index;

static void *own_index_main(void *p) {
    own_index *x = p;
    (void)ex_bulk_job_run(x->job, x->i, x->i + 1);
    return NULL;
}

static void own_bulk(void *self, ex_bulk_job *job) {
    own_res *res = self;
    atomic_fetch_add(&res->bulk_calls, 1);
    res->last_shape = job->shape;
    if (res->threads) {
        pthread_t th[64];
        own_index idx[64];
        size_t n = job->shape < 64 ? job->shape : 64;
        for (size_t i = 0; i < n; i++) {
            idx[i].job = job;
            idx[i].i = i;
            if (pthread_create(&th[i], NULL, own_index_main, &idx[i])) own_index_main(&idx[i]), th[i] = 0;
        }
        for (size_t i = 0; i < n; i++)
            if (th[i]) pthread_join(th[i], NULL);
        if (job->shape > n) (void)ex_bulk_job_run(job, n, job->shape);
    } else {
        for (size_t i = job->shape; i-- > 0;)
            if (!ex_bulk_job_run(job, i, i + 1)) break;
    }
    ex_bulk_job_done(job);
}

/* The inline scheduler's schedule, with a domain that runs bulk through
 * own_bulk, parallel forward progress and the default thread count. */
static unsigned own_concurrency(void *self) {
    (void)self;
    return ex_default_thread_count();
}

static ex_scheduler own_scheduler(own_res *res) {
    static ex_scheduler_vtable vt;
    vt = *ex_inline_scheduler().vt;
    vt.name = "own_bulk";
    vt.progress = EX_PROGRESS_PARALLEL;
    static const ex_bulk_domain domain = EX_BULK_DOMAIN("own_bulk", NULL, own_bulk);
    vt.domain = &domain.domain;
    vt.concurrency = own_concurrency;
    ex_scheduler sch = { &vt, res };
    return sch;
}

Test(algo_scan, a_resources_own_bulk_hook_runs_the_participants) {
    for (int threads = 0; threads < 2; threads++) {
        own_res res = { .threads = threads };
        ex_scheduler sch = own_scheduler(&res);
        size_t n = 9 * ALGO_TILE + 5;
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
        fill_i64(in, n, 15);
        for (int excl = 0; excl < 2; excl++) {
            int64_t tw = ref_scan_i64(in, want, n, excl, 4);
            ex_result r = ex_sync_wait(scan_i64(sch, excl, in, out, n, 4));
            cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s: disposition %d (%s)", threads ? "threads" : "reverse",
                         r.disposition, r.error.msg ? r.error.msg : "");
            cr_assert_eq(r.values[0].as.i, tw);
            cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX, "%s %s", threads ? "threads" : "reverse",
                         kind_name(excl));
            m22 *gin = xmalloc(n * sizeof(m22)), *gout = xmalloc(n * sizeof(m22)), *gwant = xmalloc(n * sizeof(m22));
            size_t gn = 5 * ALGO_GTILE(sizeof(m22)) + 3;
            fill_m22(gin, gn, 16);
            ex_monoid m = { sizeof(m22), &m22_identity, m22_combine, NULL };
            ref_fold(&m, gin, gwant, gn, excl, &m22_identity, NULL);
            r = ex_sync_wait(gscan(sch, &m, excl, gin, gout, gn, &m22_identity));
            cr_assert_eq(r.disposition, EX_DISP_VALUE);
            cr_assert_eq(first_diff_bytes(gout, gwant, gn, sizeof(m22)), SIZE_MAX, "generic on %s",
                         threads ? "threads" : "reverse");
            free(gin), free(gout), free(gwant);
        }
        cr_assert_gt(atomic_load(&res.bulk_calls), 0, "the resource's bulk hook was not used");
        cr_assert_geq(res.last_shape, 1);
        free(in), free(out), free(want);
    }
    expect_no_leaks();
}

/* ======================================= participant-count boundaries */

/* Around the sizes where a run goes from one participant (every tile in
 * the schedule's completion, no bulk) to two, and from two to four: the
 * same bits as the inline scheduler, output and value, for the scan and
 * the reduction. */
static void boundaries_give_the_inline_results_on(algo_sched *a) {
    enum { TPP = EXI_TILES_PER_PART, RTPP = EXI_REDUCE_TILES_PER_PART };
    const size_t edges[] = { 2 * RTPP * ALGO_TILE - ALGO_TILE, 2 * RTPP * ALGO_TILE, 4 * RTPP * ALGO_TILE,
                             2 * TPP * ALGO_TILE - ALGO_TILE, 2 * TPP * ALGO_TILE, 4 * TPP * ALGO_TILE };
    algo_sched ref;
    as_init(&ref, AS_INLINE);
    for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
        const size_t sizes[] = { 1, edges[e] - 1, edges[e], edges[e] + 1 };
        for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
            size_t n = sizes[j];
            double *in = xmalloc(n * 8), *want = xmalloc(n * 8), *got = xmalloc(n * 8);
            fill_f64_mixed(in, n, 900 + n);
            double tw = run_one_value(&ref, ex_inclusive_scan_f64(ref.sch, in, want, n), EX_T_DOUBLE, "scan").as.d;
            double tg = run_one_value(a, ex_inclusive_scan_f64(a->sch, in, got, n), EX_T_DOUBLE, "scan").as.d;
            cr_assert(same_bits(tg, tw), "%s n=%zu: scan total %a, inline %a", a->name, n, tg, tw);
            cr_assert_eq(memcmp(got, want, n * 8), 0, "%s n=%zu: the scan output differs from inline", a->name, n);
            double rw = run_one_value(&ref, ex_reduce_f64(ref.sch, in, n, 0.5), EX_T_DOUBLE, "reduce").as.d;
            double rg = run_one_value(a, ex_reduce_f64(a->sch, in, n, 0.5), EX_T_DOUBLE, "reduce").as.d;
            cr_assert(same_bits(rg, rw), "%s n=%zu: reduce %a, inline %a", a->name, n, rg, rw);
            free(in), free(want), free(got);
        }
    }
    as_fini(&ref);
}

Test(algo_scan, participant_count_boundaries_give_the_inline_results) {
    for_each_kind(AS_POOL1, AS_POOL4, boundaries_give_the_inline_results_on);
}
