/* local_fixtures.c - see local_fixtures.h. */
#include <string.h>

#include "algorithms/local_fixtures.h"

const char *kind_name(bool excl) { return excl ? "exclusive" : "inclusive"; }

ex_sender *scan_i64(ex_scheduler sch, bool excl, const int64_t *in, int64_t *out, size_t n, int64_t init) {
    return excl ? ex_exclusive_scan_i64(sch, in, out, n, init) : ex_inclusive_scan_i64(sch, in, out, n);
}

ex_sender *gscan(ex_scheduler sch, const ex_monoid *m, bool excl, const void *in, void *out, size_t n,
                 const void *init) {
    return excl ? ex_exclusive_scan(sch, m, in, out, n, init) : ex_inclusive_scan(sch, m, in, out, n);
}

void run_gscan(algo_sched *a, const ex_monoid *m, bool excl, const void *in, void *out, size_t n, const void *init) {
    ex_sender *s = gscan(a->sch, m, excl, in, out, n, init);
    cr_assert_eq(ex_sender_status(s).code, 0, "%s: %s", a->name, ex_sender_status(s).msg ? ex_sender_status(s).msg : "");
    arec r;
    as_run_plain(a, s, &r);
    ex_sender_release(s);
    algo_expect_value(&r, 0, a->name);
}

size_t first_diff_bytes(const void *x, const void *y, size_t n, size_t sz) {
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)x + i * sz, (const char *)y + i * sz, sz)) return i;
    return SIZE_MAX;
}

void sum_combine(void *ctx, void *acc, const void *x) {
    sum_ctx *c = ctx;
    if (c && c->magic != SUM_MAGIC) {
        atomic_store(&c->bad_ctx, 1);
        return;
    }
    if (c) atomic_fetch_add_explicit(&c->calls, 1, memory_order_relaxed);
    *(uint64_t *)acc += *(const uint64_t *)x;
}
