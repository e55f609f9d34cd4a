/* SPDX-License-Identifier: MIT */
/* algo_scan, arguments: bad arguments give EX_EINVAL naming the builder;
 * the completion signatures (algo_scan suite, see scan_typed.c). */
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

/* ======================================================= argument errors */

static int64_t ga[256], gb[256];

Test(algo_scan, bad_arguments_give_einval_naming_the_builder) {
    ex_scheduler bad = { NULL, NULL };
    ex_scheduler sch = ex_inline_scheduler();
    int64_t *i = ga, *o = gb;
    double *di = (double *)ga, *dout = (double *)gb;
    size_t huge_n = SIZE_MAX / 8 + 1;

    algo_expect_einval(ex_inclusive_scan_f64(bad, di, dout, 4), "ex_inclusive_scan_f64", "invalid scheduler");
    algo_expect_einval(ex_inclusive_scan_f64(sch, NULL, dout, 4), "ex_inclusive_scan_f64", "NULL in");
    algo_expect_einval(ex_inclusive_scan_f64(sch, di, NULL, 4), "ex_inclusive_scan_f64", "NULL out");
    algo_expect_einval(ex_inclusive_scan_f64(sch, di, di + 1, 4), "ex_inclusive_scan_f64", "out overlaps in");
    algo_expect_einval(ex_inclusive_scan_f64(sch, di + 3, di, 4), "ex_inclusive_scan_f64", "in overlaps out");
    algo_expect_einval(ex_inclusive_scan_f64(sch, di, dout, huge_n), "ex_inclusive_scan_f64", "n * 8 overflows");
    algo_expect_einval(ex_exclusive_scan_f64(bad, di, dout, 4, 0), "ex_exclusive_scan_f64", "invalid scheduler");
    algo_expect_einval(ex_exclusive_scan_f64(sch, NULL, dout, 1, 0), "ex_exclusive_scan_f64", "NULL in");
    algo_expect_einval(ex_exclusive_scan_f64(sch, di, NULL, 1, 0), "ex_exclusive_scan_f64", "NULL out");
    algo_expect_einval(ex_exclusive_scan_f64(sch, di + 1, di, 2, 0), "ex_exclusive_scan_f64", "overlap");
    algo_expect_einval(ex_inclusive_scan_i64(bad, i, o, 4), "ex_inclusive_scan_i64", "invalid scheduler");
    algo_expect_einval(ex_inclusive_scan_i64(sch, NULL, o, 4), "ex_inclusive_scan_i64", "NULL in");
    algo_expect_einval(ex_inclusive_scan_i64(sch, i, NULL, 4), "ex_inclusive_scan_i64", "NULL out");
    algo_expect_einval(ex_inclusive_scan_i64(sch, i, i + 2, 4), "ex_inclusive_scan_i64", "overlap");
    algo_expect_einval(ex_exclusive_scan_i64(bad, i, o, 4, 0), "ex_exclusive_scan_i64", "invalid scheduler");
    algo_expect_einval(ex_exclusive_scan_i64(sch, NULL, o, 4, 0), "ex_exclusive_scan_i64", "NULL in");
    algo_expect_einval(ex_exclusive_scan_i64(sch, i, NULL, 4, 0), "ex_exclusive_scan_i64", "NULL out");
    algo_expect_einval(ex_exclusive_scan_i64(sch, i + 63, i, 64, 0), "ex_exclusive_scan_i64", "overlap by one");

    uint64_t zero = 0;
    ex_monoid good = { 8, &zero, sum_combine, NULL };
    ex_monoid no_combine = { 8, &zero, NULL, NULL };
    ex_monoid no_identity = { 8, NULL, sum_combine, NULL };
    ex_monoid size0 = { 0, &zero, sum_combine, NULL };
    static unsigned char big_id[EX_MONOID_MAX_SIZE + 1];
    ex_monoid too_big = { EX_MONOID_MAX_SIZE + 1, big_id, sum_combine, NULL };
    const char *names[2] = { "ex_inclusive_scan", "ex_exclusive_scan" };
    for (int excl = 0; excl < 2; excl++) {
        const char *nm = names[excl];
        algo_expect_einval(gscan(bad, &good, excl, i, o, 4, &zero), nm, "invalid scheduler");
        algo_expect_einval(gscan(sch, NULL, excl, i, o, 4, &zero), nm, "NULL monoid");
        algo_expect_einval(gscan(sch, &no_combine, excl, i, o, 4, &zero), nm, "NULL combine");
        algo_expect_einval(gscan(sch, &no_identity, excl, i, o, 4, &zero), nm, "NULL identity");
        algo_expect_einval(gscan(sch, &size0, excl, i, o, 4, &zero), nm, "size 0");
        algo_expect_einval(gscan(sch, &too_big, excl, i, o, 4, &zero), nm, "size above EX_MONOID_MAX_SIZE");
        algo_expect_einval(gscan(sch, &good, excl, NULL, o, 4, &zero), nm, "NULL in");
        algo_expect_einval(gscan(sch, &good, excl, i, NULL, 4, &zero), nm, "NULL out");
        algo_expect_einval(gscan(sch, &good, excl, i, i + 1, 4, &zero), nm, "overlap");
        algo_expect_einval(gscan(sch, &good, excl, i, o, huge_n, &zero), nm, "n * size overflows");
    }
    algo_expect_einval(ex_exclusive_scan(sch, &good, i, o, 4, NULL), "ex_exclusive_scan", "NULL init");
    /* Size 1 and EX_MONOID_MAX_SIZE are fine. */
    static unsigned char max_id[EX_MONOID_MAX_SIZE];
    ex_monoid max_ok = { EX_MONOID_MAX_SIZE, max_id, sum_combine, NULL };
    ex_monoid one_ok = { 1, &aff8_identity, aff8_combine, NULL };
    ex_sender *s = ex_inclusive_scan(sch, &max_ok, NULL, NULL, 0);
    cr_assert_eq(ex_sender_status(s).code, 0, "EX_MONOID_MAX_SIZE is allowed");
    ex_sender_release(s);
    s = ex_exclusive_scan(sch, &one_ok, NULL, NULL, 0, &aff8_identity);
    cr_assert_eq(ex_sender_status(s).code, 0, "size 1 is allowed");
    ex_sender_release(s);
    /* Adjacent arrays do not overlap. */
    s = ex_inclusive_scan_i64(sch, i, i + 4, 4);
    cr_assert_eq(ex_sender_status(s).code, 0, "adjacent arrays are fine");
    ex_sender_release(s);
    s = ex_inclusive_scan_i64(sch, i + 4, i, 4);
    cr_assert_eq(ex_sender_status(s).code, 0, "adjacent arrays are fine");
    ex_sender_release(s);
    expect_no_leaks();
}

Test(algo_scan, signatures) {
    ex_scheduler sch = ex_inline_scheduler();
    ex_sender *s[3] = { ex_inclusive_scan_f64(sch, NULL, NULL, 0), ex_exclusive_scan_i64(sch, NULL, NULL, 0, 0), NULL };
    ex_monoid m = { 1, &aff8_identity, aff8_combine, NULL };
    s[2] = ex_inclusive_scan(sch, &m, NULL, NULL, 0);
    const ex_sigs *g = ex_sender_sigs(s[0]);
    cr_assert_eq(g->nvalues, 1);
    cr_assert_eq(g->values[0].arity, 1);
    cr_assert_eq(g->values[0].types[0], EX_T_DOUBLE);
    g = ex_sender_sigs(s[1]);
    cr_assert_eq(g->nvalues, 1);
    cr_assert_eq(g->values[0].arity, 1);
    cr_assert_eq(g->values[0].types[0], EX_T_INT);
    g = ex_sender_sigs(s[2]);
    cr_assert_eq(g->nvalues, 1);
    cr_assert_eq(g->values[0].arity, 0);
    for (int b = 0; b < 3; b++) {
        cr_assert(ex_sender_sigs(s[b])->flags & EX_SIGS_ERROR);
        cr_assert(ex_sender_sigs(s[b])->flags & EX_SIGS_STOPPED);
        ex_sender_release(s[b]);
    }
    expect_no_leaks();
}
