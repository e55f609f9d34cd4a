/* SPDX-License-Identifier: MIT */
/* algo_scan, stop and shutdown: stop requested before start or during a
 * scan, a pool shut down before or during one; the senders are
 * multi-shot (algo_scan suite, see scan_typed.c). */
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "algorithms/local_fixtures.h"

/* =================================================================== stop */

static void stop_requested_before_start_completes_stopped_on(algo_sched *a) {
    static const size_t sizes[] = { 0, 5, 3 * 16384 + 5 };
    for (size_t j = 0; j < 3; j++) {
        size_t n = sizes[j];
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
        double *dout = xmalloc(n * 8);
        m22 *gout = xmalloc(n * sizeof(m22));
        fill_i64(in, n, 3);
        ex_monoid m = { 8, &(uint64_t){ 0 }, sum_combine, NULL };
        sum_ctx c = { SUM_MAGIC, 0, 0 };
        m.ctx = &c;
        ex_sender *s[6] = { ex_inclusive_scan_i64(a->sch, in, out, n), ex_exclusive_scan_i64(a->sch, in, out, n, 1),
                            ex_inclusive_scan_f64(a->sch, (const double *)in, dout, n),
                            ex_exclusive_scan_f64(a->sch, (const double *)in, dout, n, 1),
                            ex_inclusive_scan(a->sch, &m, in, gout, n),
                            ex_exclusive_scan(a->sch, &m, in, gout, n, &(uint64_t){ 0 }) };
        for (int b = 0; b < 6; b++) {
            cr_assert_eq(ex_sender_status(s[b]).code, 0);
            memset(out, SENTINEL_BYTE, n * 8);
            memset(dout, SENTINEL_BYTE, n * 8);
            memset(gout, SENTINEL_BYTE, n * sizeof(m22));
            expect_stopped_before_start(a, s[b], b, n);
            for (size_t i = 0; i < n; i++) {
                unsigned char *p = b < 2 ? (unsigned char *)&out[i] : b < 4 ? (unsigned char *)&dout[i]
                                                                          : (unsigned char *)gout + i * 8;
                cr_assert_eq(p[0], SENTINEL_BYTE, "%s builder %d: element %zu written although stopped before start",
                             a->name, b, i);
            }
            ex_sender_release(s[b]);
        }
        cr_assert_eq(atomic_load(&c.calls), 0, "%s: combine ran although stopped before start", a->name);
        free(in), free(out), free(dout), free(gout);
    }
}

Test(algo_scan, stop_requested_before_start_completes_stopped) {
    for_each_kind(AS_INLINE, AS_POOL4, stop_requested_before_start_completes_stopped_on);
}

static void stop_during_generic_scan(as_kind kind, bool excl) {
    algo_sched a;
    as_init(&a, kind);
    bool external = a.pool != NULL;
    size_t n = 10 * ALGO_TILE + 3;  /* 8-byte elements: tiles of ALGO_TILE; more tiles than participants */
    uint64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = i;
    in[100] = ALGO_STOP_MARK;
    memset(out, SENTINEL_BYTE, n * 8);
    arec r;
    arec_init(&r, a.pool);
    arec_with_stop(&r);
    algo_stop_ctx c;
    algo_stop_ctx_init(&c, &r.stop, external);
    uint64_t zero = 0;
    ex_monoid m = { 8, &zero, algo_stop_combine, &c };
    ex_sender *s = gscan(a.sch, &m, excl, in, out, n, &zero);
    cr_assert_eq(ex_sender_status(s).code, 0);
    pthread_t th;
    if (external) cr_assert_eq(pthread_create(&th, NULL, algo_stopper_main, &c), 0);
    as_run(&a, s, &r);
    if (external) pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&c.timed_out), 0, "the stop request never came");
    cr_assert_eq(atomic_load(&r.stops), 1, "%s %s: a stop requested during the scan must complete set_stopped (values %d errors %d)",
                 a.name, kind_name(excl), atomic_load(&r.values), atomic_load(&r.errors));
    /* At most two tiles per participant (the current one and the one it
     * claimed ahead) were claimed before the stop: the last tile never ran,
     * and fewer combines ran than a full scan makes (one per element in
     * the tile sums but the last tile's, one per element in the scans). */
    unsigned char *last = (unsigned char *)&out[n - 1];
    cr_assert_eq(last[0], SENTINEL_BYTE, "%s: the last tile was written although stop was requested in tile 0", a.name);
    long full = (long)(2 * n - (n - 10 * ALGO_TILE));
    cr_assert_lt(atomic_load(&c.calls), full, "%s: every element was combined although stopped", a.name);
    ex_sender_release(s);
    free(in), free(out);
    as_fini(&a);
}

Test(algo_scan, stop_requested_inside_a_generic_scan_completes_stopped) {
    for (int k = AS_INLINE; k <= AS_STC; k++) {
        stop_during_generic_scan((as_kind)k, false);
        stop_during_generic_scan((as_kind)k, true);
    }
    expect_no_leaks();
}

Test(algo_scan, stop_from_another_thread_during_a_pool_scan_completes_stopped) {
    for (int k = AS_POOL1; k <= AS_POOL4; k++) {
        stop_during_generic_scan((as_kind)k, false);
        stop_during_generic_scan((as_kind)k, true);
    }
    expect_no_leaks();
}

/* A typed scan racing a stop request from another thread: it completes
 * once, stopped or with the exact result. */
typedef struct racer { ex_stop_source *src; long delay_us; } racer;

static void *racer_main(void *p) {
    racer *rc = p;
    if (rc->delay_us) {
        struct timespec d = { 0, rc->delay_us * 1000 };
        nanosleep(&d, NULL);
    }
    ex_stop_source_request_stop(rc->src);
    return NULL;
}

static void typed_scan_racing_a_stop_request_completes_once_on(algo_sched *a) {
    size_t n = ALGO_HUGE;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 8);
    int64_t tw = ref_scan_i64(in, want, n, false, 0);
    int stopped = 0, valued = 0;
    for (int rep = 0; rep < 8; rep++) {
        ex_sender *s = ex_inclusive_scan_i64(a->sch, in, out, n);
        arec r;
        arec_init(&r, a->pool);
        arec_with_stop(&r);
        racer rc = { &r.stop, rep * 300 };
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, racer_main, &rc), 0);
        as_run(a, s, &r);
        pthread_join(th, NULL);
        if (atomic_load(&r.stops)) {
            stopped++;
        } else {
            algo_expect_value(&r, 1, "racing stop");
            cr_assert_eq(r.v[0].as.i, tw);
            cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX);
            valued++;
        }
        cr_assert_geq(r.worker, 0, "completes on a worker");
        ex_sender_release(s);
    }
    cr_assert_eq(stopped + valued, 8);
    free(in), free(out), free(want);
}

Test(algo_scan, typed_scan_racing_a_stop_request_completes_once) {
    with_scheduler(AS_POOL2, typed_scan_racing_a_stop_request_completes_once_on);
}

/* ==================================================== multi-shot, shutdown */

static void sender_is_multi_shot_and_concurrent_runs_write_the_same_output_on(algo_sched *a) {
    size_t n = 7 * ALGO_TILE + 3;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 12);
    int64_t tw = ref_scan_i64(in, want, n, true, 3);
    ex_sender *s = ex_exclusive_scan_i64(a->sch, in, out, n, 3);
    for (int rep = 0; rep < 3; rep++) {
        memset(out, 0, n * 8);
        arec r;
        as_run_plain(a, s, &r);
        algo_expect_value(&r, 1, "sequential reuse");
        cr_assert_eq(r.v[0].as.i, tw);
        cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX, "run %d", rep);
    }
    /* Concurrent runs: each gets its own operation; the output is the same. */
    memset(out, 0, n * 8);
    expect_concurrent_runs_int(a, s, 3, tw);
    cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX);
    ex_sender_release(s);
    free(in), free(out), free(want);
}

Test(algo_scan, sender_is_multi_shot_and_concurrent_runs_write_the_same_output) {
    with_scheduler(AS_POOL4, sender_is_multi_shot_and_concurrent_runs_write_the_same_output_on);
}

Test(algo_scan, pool_shut_down_before_start_completes_with_eshutdown_or_stopped) {
    for (unsigned threads = 1; threads <= 4; threads *= 2) {
        ex_pool *p = algo_pool_new(threads);
        ex_scheduler sch = ex_pool_scheduler(p);
        size_t n = 3 * ALGO_TILE + 5;
        int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
        fill_i64(in, n, 13);
        uint64_t zero = 0;
        sum_ctx c = { SUM_MAGIC, 0, 0 };
        ex_monoid m = { 8, &zero, sum_combine, &c };
        ex_sender *s[4] = { ex_inclusive_scan_i64(sch, in, out, 5), ex_inclusive_scan_i64(sch, in, out, n),
                            ex_exclusive_scan_f64(sch, (double *)in, (double *)out, n, 0),
                            ex_inclusive_scan(sch, &m, in, out, n) };
        cr_assert_eq(ex_pool_shutdown(p).code, 0);
        for (int b = 0; b < 4; b++) {
            expect_run_after_shutdown(p, s[b], "after shutdown");
            ex_sender_release(s[b]);
        }
        cr_assert_eq(atomic_load(&c.calls), 0);
        free(in), free(out);
        test_pool_free(p);
    }
    expect_no_leaks();
}

Test(algo_scan, pool_shut_down_during_a_scan_never_hangs) {
    size_t n = ALGO_HUGE;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 14);
    int64_t tw = ref_scan_i64(in, want, n, false, 0);
    for (int rep = 0; rep < 6; rep++) {
        ex_pool *p = algo_pool_new(rep % 2 ? 4 : 2);
        enum { OPS = 3 };
        arec r[OPS];
        ex_operation *op[OPS];
        ex_sender *s = ex_inclusive_scan_i64(ex_pool_scheduler(p), in, out, n);
        for (int k = 0; k < OPS; k++) {
            arec_init(&r[k], p);
            op[k] = arec_run_start(s, &r[k]);
        }
        if (rep >= 2) {
            struct timespec d = { 0, (long)rep * 200000 };
            nanosleep(&d, NULL);
        }
        cr_assert_eq(ex_pool_shutdown(p).code, 0);
        for (int k = 0; k < OPS; k++) {
            cr_assert(algo_wait(&r[k], NULL, 20.0), "rep %d op %d: no completion after shutdown", rep, k);
            sched_yield();
            cr_assert_eq(atomic_load(&r[k].total), 1);
            if (atomic_load(&r[k].values)) cr_assert_eq(r[k].v[0].as.i, tw, "a run that finished has the right total");
            else expect_shutdown_result(&r[k], "during shutdown");
            ex_operation_free(op[k]);
        }
        ex_sender_release(s);
        test_pool_free(p);
    }
    free(in), free(out), free(want);
    expect_no_leaks();
}
