/* SPDX-License-Identifier: MIT */
/* algo_scan, generic scans: ex_inclusive_scan / ex_exclusive_scan over
 * monoids of 1 to 4096 bytes, at every size around their tile boundaries
 * (128 KiB / element size), on every kind of scheduler, in place, with
 * the builders copying what they are given (algo_scan suite, see
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

#include "algorithms/local_fixtures.h"

/* ========================================================= generic scans */

/* A generic scan of n random elements against the serial fold; in place
 * when asked. */
static void check_generic(algo_sched *a, const gcase *g, size_t n, bool excl, bool in_place, uint64_t seed) {
    size_t sz = g->m.size;
    unsigned char *in = xmalloc(n * sz), *out = xmalloc(n * sz), *want = xmalloc(n * sz);
    unsigned char init[EX_MONOID_MAX_SIZE];
    g->fill(in, n, seed);
    g->fill(init, 1, seed ^ 0xfeed);
    memset(out, SENTINEL_BYTE, n * sz);
    ref_fold(&g->m, in, want, n, excl, init, NULL);
    if (in_place) memcpy(out, in, n * sz);
    run_gscan(a, &g->m, excl, in_place ? out : in, out, n, init);
    size_t d = first_diff_bytes(out, want, n, sz);
    cr_assert_eq(d, SIZE_MAX, "%s %s %s n=%zu%s: element %zu differs from the serial fold", a->name, kind_name(excl),
                 g->name, n, in_place ? " in place" : "", d);
    free(in), free(out), free(want);
}

static void generic_every_size(algo_sched *a) {
    gcase g = gcase_m22();
    size_t gt = ALGO_GTILE(sizeof(m22));
    const size_t sizes[] = { 0, 1, 7, 8, 9, 15, 16, 17, gt - 1, gt, gt + 1, 3 * gt + 5, 20 * gt + 3 };
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) {
        check_generic(a, &g, sizes[j], false, false, 100 + j);
        check_generic(a, &g, sizes[j], true, false, 200 + j);
    }
    g = gcase_aff200();
    gt = ALGO_GTILE(sizeof(aff200));
    const size_t s200[] = { 1, 2, gt - 1, gt, gt + 1, 3 * gt + 5 };
    for (size_t j = 0; j < sizeof s200 / sizeof s200[0]; j++) {
        check_generic(a, &g, s200[j], false, false, 300 + j);
        check_generic(a, &g, s200[j], true, false, 400 + j);
    }
    g = gcase_aff8();
    gt = ALGO_GTILE(1);
    const size_t s1[] = { 1, 17, gt - 1, gt, gt + 1, 3 * gt + 5 };
    for (size_t j = 0; j < sizeof s1 / sizeof s1[0]; j++) {
        check_generic(a, &g, s1[j], false, false, 500 + j);
        check_generic(a, &g, s1[j], true, false, 600 + j);
    }
    g = gcase_big4k();
    gt = ALGO_GTILE(sizeof(big4k));
    const size_t s4k[] = { 1, gt - 1, gt, gt + 1, 3 * gt + 5 };
    for (size_t j = 0; j < sizeof s4k / sizeof s4k[0]; j++) {
        check_generic(a, &g, s4k[j], false, false, 700 + j);
        check_generic(a, &g, s4k[j], true, false, 800 + j);
    }
}

TEST_EVERY_SCHEDULER(algo_scan, generic_every_size, generic_every_size)

Test(algo_scan, generic_in_place) {
    algo_sched a[3];
    as_init_each(a, 3, (const as_kind[]){ AS_INLINE, AS_POOL2, AS_POOL4 });
    gcase gs[3] = { gcase_m22(), gcase_aff200(), gcase_aff8() };
    for (int s = 0; s < 3; s++) {
        for (int gi = 0; gi < 3; gi++) {
            size_t gt = ALGO_GTILE(gs[gi].m.size);
            const size_t sizes[] = { 1, 13, gt + 1, 4 * gt + 9 };
            for (size_t j = 0; j < 4; j++) {
                check_generic(&a[s], &gs[gi], sizes[j], false, true, 900 + j);
                check_generic(&a[s], &gs[gi], sizes[j], true, true, 950 + j);
            }
        }
    }
    as_fini_each(a, 3);
    expect_no_leaks();
}

/* The builders copy the monoid and the identity and init bytes. */
static void generic_builders_copy_the_monoid_identity_and_init_on(algo_sched *a) {
    size_t n = 3 * ALGO_GTILE(sizeof(m22)) + 7;
    m22 *in = xmalloc(n * sizeof(m22)), *out = xmalloc(n * sizeof(m22)), *want = xmalloc(n * sizeof(m22));
    fill_m22(in, n, 31);
    m22 id = m22_identity, init = { 2, 1, 1, 1 };
    ex_monoid m = { sizeof(m22), &id, m22_combine, NULL };
    ex_monoid mref = { sizeof(m22), &m22_identity, m22_combine, NULL };
    for (int excl = 0; excl < 2; excl++) {
        ex_monoid mm = m;
        m22 ii = init;
        ex_sender *s = gscan(a->sch, &mm, excl, in, out, n, &ii);
        cr_assert_eq(ex_sender_status(s).code, 0);
        memset(&mm, 0, sizeof mm);      /* the struct ... */
        memset(&id, 0x77, sizeof id);   /* ... the identity ... */
        memset(&ii, 0x55, sizeof ii);   /* ... and init may go away */
        arec r;
        as_run_plain(a, s, &r);
        algo_expect_value(&r, 0, "copied monoid");
        ex_sender_release(s);
        ref_fold(&mref, in, want, n, excl, &init, NULL);
        cr_assert_eq(first_diff_bytes(out, want, n, sizeof(m22)), SIZE_MAX, "%s: the builder kept a pointer",
                     kind_name(excl));
        id = m22_identity;
    }
    free(in), free(out), free(want);
}

Test(algo_scan, generic_builders_copy_the_monoid_identity_and_init) {
    with_scheduler(AS_POOL2, generic_builders_copy_the_monoid_identity_and_init_on);
}

/* combine gets the monoid's ctx. */
static void generic_combine_gets_the_ctx_on(algo_sched *a) {
    sum_ctx c = { SUM_MAGIC, 0, 0 };
    uint64_t zero = 0;
    ex_monoid m = { 8, &zero, sum_combine, &c };
    size_t n = 5 * ALGO_TILE + 3;
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8), *want = xmalloc(n * 8);
    fill_i64(in, n, 77);
    ref_scan_i64(in, want, n, false, 0);
    run_gscan(a, &m, false, in, out, n, NULL);
    cr_assert_eq(atomic_load(&c.bad_ctx), 0, "combine got another ctx");
    cr_assert_geq(atomic_load(&c.calls), (long)n, "combine ran %ld times for %zu elements", atomic_load(&c.calls), n);
    cr_assert_eq(first_diff_i64(out, want, n), SIZE_MAX);
    free(in), free(out), free(want);
}

Test(algo_scan, generic_combine_gets_the_ctx) { with_scheduler(AS_POOL4, generic_combine_gets_the_ctx_on); }
