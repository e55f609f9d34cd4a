/* SPDX-License-Identifier: MIT */
/* algorithms.c - the parallel algorithms of <cexec/algorithms.h> on the
 * process's parallel scheduler (cexec/parallel_scheduler.h):
 * an inclusive scan and a reduction of doubles, an exclusive scan of
 * int64 (prefix offsets), a generic scan with a non-commutative operation
 * (composition of affine maps), for_each_index and transform, composed
 * with other senders.  Each result is checked; exit status 0 on success.
 *
 *   build/examples/algorithms [elements]     (default 1000000) */
#include <stdio.h>
#include <stdlib.h>

#include <cexec/cexec.h>

/* f(x) = a*x + b.  Composing maps is associative, not commutative:
 * (f then g)(x) = g(f(x)), so a scan gives the running composition. */
typedef struct affine { int64_t a, b; } affine;

static void compose(void *ctx, void *acc, const void *x) {
    (void)ctx;
    affine *f = acc;
    const affine *g = x;
    affine r = { (int64_t)((uint64_t)g->a * (uint64_t)f->a), (int64_t)((uint64_t)g->a * (uint64_t)f->b + (uint64_t)g->b) };
    *f = r;
}

static double square(void *ctx, double x) {
    (void)ctx;
    return x * x;
}

/* let_value's function: once the squares are written, reduce them. */
typedef struct squares_job { ex_scheduler sch; const double *y; size_t n; } squares_job;

static ex_sender *reduce_squares(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    const squares_job *j = ctx;
    return ex_reduce_f64(j->sch, j->y, j->n, 0.0);
}

/* Marks each index it visits; run over [0, n) in ranges. */
static ex_error visit(void *ctx, size_t begin, size_t end) {
    unsigned char *seen = ctx;
    for (size_t i = begin; i < end; i++) seen[i]++;
    return ex_ok();
}

static int fail(const char *what) {
    fprintf(stderr, "algorithms: %s\n", what);
    return 1;
}

static bool ran(ex_result *r, ex_value *v) {
    bool ok = r->disposition == EX_DISP_VALUE;
    if (!ok) fprintf(stderr, "algorithms: %s\n", r->disposition == EX_DISP_ERROR ? r->error.msg : "stopped");
    if (ok && v && r->n) *v = r->values[0];
    ex_result_destroy(r);
    return ok;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    if (n == 0) return fail("need at least one element");
    ex_scheduler sch = ex_parallel_scheduler();  /* its pool is created here, once per process */

    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    int64_t *len = malloc(n * sizeof *len), *off = malloc(n * sizeof *off);
    affine *maps = malloc(n * sizeof *maps), *runs = malloc(n * sizeof *runs);
    unsigned char *seen = calloc(n, 1);
    if (!x || !y || !len || !off || !maps || !runs || !seen) return fail("out of memory");
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)(i % 7);
        len[i] = (int64_t)(i % 5) + 1;
        maps[i] = (affine){ i % 3 == 0 ? 2 : 1, (int64_t)(i % 4) };
    }

    /* Running sums of x, and their total, in one pass over memory. */
    ex_value v;
    ex_result r = ex_sync_wait(ex_inclusive_scan_f64(sch, x, y, n));
    if (!ran(&r, &v) || v.as.d != y[n - 1]) return fail("inclusive scan");
    double serial = 0;
    for (size_t i = 0; i < n; i++)
        if (y[i] != (serial += x[i])) return fail("inclusive scan differs from the serial loop");

    /* Where each record starts when records of length len[i] are packed:
     * an exclusive scan; its total is the packed size.  Then the sum of the
     * squares, as a pipeline: transform in parallel, then reduce. */
    r = ex_sync_wait(ex_exclusive_scan_i64(sch, len, off, n, 0));
    if (!ran(&r, &v) || v.as.i != off[n - 1] + len[n - 1]) return fail("exclusive scan");
    printf("%zu records packed into %lld slots\n", n, (long long)v.as.i);

    squares_job job = { sch, y, n };
    r = ex_sync_wait(ex_let_value(ex_transform_f64(sch, x, y, n, square, NULL), reduce_squares, &job, EX_SIG0));
    double squares = 0;
    for (size_t i = 0; i < n; i++) squares += x[i] * x[i];
    if (!ran(&r, &v) || v.as.d != squares) return fail("transform + reduce");
    printf("sum of squares: %.0f\n", v.as.d);

    /* The running composition of n affine maps. */
    const affine id = { 1, 0 };
    ex_monoid m = { sizeof(affine), &id, compose, NULL };
    r = ex_sync_wait(ex_inclusive_scan(sch, &m, maps, runs, n));
    if (!ran(&r, NULL)) return fail("generic scan");
    affine acc = id;
    for (size_t i = 0; i < n; i++) {
        compose(NULL, &acc, &maps[i]);
        if (acc.a != runs[i].a || acc.b != runs[i].b) return fail("generic scan differs from the serial fold");
    }

    /* Every index exactly once. */
    r = ex_sync_wait(ex_for_each_index(sch, n, 0, visit, seen));
    if (!ran(&r, NULL)) return fail("for_each_index");
    for (size_t i = 0; i < n; i++)
        if (seen[i] != 1) return fail("for_each_index visited an index twice or never");

    printf("inclusive scan, exclusive scan, transform, reduce, generic scan, for_each_index: ok on %u workers\n",
           ex_pool_size(ex_parallel_scheduler_pool()));
    free(x), free(y), free(len), free(off), free(maps), free(runs), free(seen);
    return 0;  /* the parallel scheduler's pool is shut down at exit */
}
