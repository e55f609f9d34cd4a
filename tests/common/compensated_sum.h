/* SPDX-License-Identifier: MIT */
/* compensated_sum.h - a running sum far more exact than the algorithms it
 * checks (Neumaier's compensated summation in long double), with the sum
 * of |x| the rounding bounds scale with.  Header-only and free of
 * Criterion: the MPI test programs use it too. */
#ifndef CEXEC_TEST_COMPENSATED_SUM_H
#define CEXEC_TEST_COMPENSATED_SUM_H

#include <math.h>

typedef struct ksum { long double s, c, abs; } ksum;

static inline void ksum_add(ksum *k, double x) {
    long double t = k->s + (long double)x;
    if (fabsl(k->s) >= fabsl((long double)x)) k->c += (k->s - t) + (long double)x;
    else k->c += ((long double)x - t) + k->s;
    k->s = t;
    k->abs += fabsl((long double)x);
}

#endif
