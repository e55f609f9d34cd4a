/* SPDX-License-Identifier: MIT */
/* mpi_algorithms.c - the distributed scans and reductions of
 * <cexec/mpi_algorithms.h>, run by every rank (make mpi-test: mpiexec -n
 * 1, 2, 3 and 4).  Not Criterion (MPI does not survive its fork).
 *
 * Every input is computed from its global index, so each rank knows the
 * whole global array and checks its own part against a serial loop over
 * it: integer-valued doubles and int64 exactly, 2x2 matrix products and
 * 1-byte affine maps (neither commutative) element by element, random
 * doubles within the documented bound and bit for bit from run to run
 * and pool to pool.  The layouts give ranks uneven sizes, none, one
 * element, several tiles.  Then: a rank whose local pass stops or cannot
 * allocate, and what the others complete with; bad arguments; two runs on
 * two communicators at once.  Prints "mpi_algorithms rank R: N passed, F
 * failed" and exits non-zero on a failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cexec/cexec.h>
#include <cexec/mpi.h>
#include <cexec/mpi_algorithms.h>

#include "common/compensated_sum.h"
#include "mpi_check.h"

static ex_scheduler sch;  /* the pool of mpi_check.c */

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "mpi_algorithms rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return p;
}

/* Runs s and returns its result; checks it completed with a value. */
static ex_result run_value(ex_sender *s, const char *what) {
    ex_result r = ex_sync_wait(s);
    CHECK(r.disposition == EX_DISP_VALUE, "%s: disposition %d (%s)", what, (int)r.disposition,
          r.disposition == EX_DISP_ERROR ? r.error.msg : "-");
    return r;
}

/* ---------------------------------------------------------------- layouts */

#define TILE ((size_t)16384)

/* How many elements rank r of p holds. */
typedef struct layout {
    const char *name;
    size_t (*n)(int r, int p);
} layout;

static size_t lay_same(int r, int p) { (void)r, (void)p; return 1000; }
static size_t lay_uneven(int r, int p) { (void)p; return TILE * (size_t)r + 37 * (size_t)r + 3; }
static size_t lay_odd_empty(int r, int p) { (void)p; return r % 2 ? 0 : 5000 + (size_t)r; }
static size_t lay_first_empty(int r, int p) { (void)p; return r == 0 ? 0 : 100; }
static size_t lay_last_empty(int r, int p) { return r == p - 1 ? 0 : 2000; }
static size_t lay_one(int r, int p) { (void)r, (void)p; return 1; }
static size_t lay_none(int r, int p) { (void)r, (void)p; return 0; }
static size_t lay_tiles(int r, int p) { (void)p; return 3 * TILE + 5 + TILE * (size_t)(r % 2); }

static const layout layouts[] = {
    { "1000 each", lay_same },        { "uneven", lay_uneven },       { "odd ranks empty", lay_odd_empty },
    { "rank 0 empty", lay_first_empty }, { "last rank empty", lay_last_empty }, { "one each", lay_one },
    { "none", lay_none },             { "several tiles", lay_tiles },
};
#define NLAYOUTS (sizeof layouts / sizeof layouts[0])

/* The global index of rank r's first element. */
static size_t start_of(const layout *l, int r) {
    size_t s = 0;
    for (int q = 0; q < r; q++) s += l->n(q, nranks);
    return s;
}

/* ----------------------------------------------------------------- inputs */

static uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double int_at(size_t g) { return (double)((int64_t)(mix(g) % 2001) - 1000); }
static int64_t i64_at(size_t g) { return (int64_t)mix(g ^ 0x5555); }

/* Signs mixed, magnitudes 2^-30 .. 2^30. */
static double mixed_at(size_t g) {
    uint64_t h = mix(g ^ 0xabcdef);
    double mant = 1.0 + (double)(h >> 12) / 4503599627370496.0;
    return ldexp(h & 1 ? -mant : mant, (int)((h >> 1) % 61) - 30);
}

/* 2x2 matrices over Z/2^64 under multiplication. */
typedef struct m22 { uint64_t a, b, c, d; } m22;
static const m22 m22_one = { 1, 0, 0, 1 };

static void m22_combine(void *ctx, void *acc, const void *x) {
    (void)ctx;
    m22 p = *(const m22 *)acc, q = *(const m22 *)x;
    m22 r = { p.a * q.a + p.b * q.c, p.a * q.b + p.b * q.d, p.c * q.a + p.d * q.c, p.c * q.b + p.d * q.d };
    *(m22 *)acc = r;
}

static m22 m22_at(size_t g) {
    uint64_t h = mix(g ^ 0x22);
    m22 m = { h & 0xff, (h >> 8) & 0xff, (h >> 16) & 0xff, (h >> 24) & 0xff };
    return m;
}

/* One byte: x -> a*x + b over Z/16 (a odd in the high nibble, b low),
 * composed left to right: 17 bytes travel through MPI per element. */
static const uint8_t aff8_one = 0x10;

static void aff8_combine(void *ctx, void *acc, const void *x) {
    (void)ctx;
    unsigned p = *(uint8_t *)acc, q = *(const uint8_t *)x;
    unsigned a = ((q >> 4) * (p >> 4)) & 15, b = ((q >> 4) * (p & 15) + (q & 15)) & 15;
    *(uint8_t *)acc = (uint8_t)(a << 4 | b);
}

static uint8_t aff8_at(size_t g) {
    uint64_t h = mix(g ^ 0x88);
    return (uint8_t)((((h & 7) << 1 | 1) << 4) | ((h >> 3) & 15));
}

typedef struct gcase {
    const char *name;
    ex_monoid m;
    void (*at)(size_t g, void *out);
} gcase;

static void m22_put(size_t g, void *out) { m22 m = m22_at(g); memcpy(out, &m, sizeof m); }
static void aff8_put(size_t g, void *out) { uint8_t v = aff8_at(g); memcpy(out, &v, 1); }

static const gcase gcases[] = {
    { "m22", { sizeof(m22), &m22_one, m22_combine, NULL }, m22_put },
    { "aff8", { 1, &aff8_one, aff8_combine, NULL }, aff8_put },
};

/* ------------------------------------------------------------ typed scans */

static void check_scans_f64(const layout *l) {
    size_t n = l->n(rank, nranks), g0 = start_of(l, rank);
    double *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = int_at(g0 + i);
    for (int excl = 0; excl < 2; excl++) {
        const double init = 7.0;
        double acc = excl ? init : 0.0;
        for (size_t g = 0; g < g0; g++) acc += int_at(g);
        memset(out, 0xa5, n * 8);
        ex_sender *s = excl ? ex_mpi_exclusive_scan_f64(engine, sch, MPI_COMM_WORLD, in, out, n, init)
                            : ex_mpi_inclusive_scan_f64(engine, sch, MPI_COMM_WORLD, in, out, n);
        ex_result r = run_value(s, l->name);
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            if (!excl) acc += in[i];
            if (out[i] != acc && bad == SIZE_MAX) bad = i;
            if (excl) acc += in[i];
        }
        CHECK(bad == SIZE_MAX, "f64 %s scan, %s: out[%zu] = %.17g", excl ? "exclusive" : "inclusive", l->name, bad,
              bad == SIZE_MAX ? 0.0 : out[bad]);
        if (r.disposition == EX_DISP_VALUE)
            CHECK(r.n == 1 && r.values[0].type == EX_T_DOUBLE && r.values[0].as.d == acc,
                  "f64 %s scan, %s: total %.17g, want %.17g", excl ? "exclusive" : "inclusive", l->name,
                  r.values[0].as.d, acc);
        ex_result_destroy(&r);
    }
    free(in), free(out);
}

static void check_scans_i64(const layout *l) {
    size_t n = l->n(rank, nranks), g0 = start_of(l, rank);
    int64_t *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = i64_at(g0 + i);
    for (int excl = 0; excl < 2; excl++) {
        const int64_t init = INT64_MAX - 3;
        uint64_t acc = excl ? (uint64_t)init : 0;
        for (size_t g = 0; g < g0; g++) acc += (uint64_t)i64_at(g);
        ex_sender *s = excl ? ex_mpi_exclusive_scan_i64(engine, sch, MPI_COMM_WORLD, in, out, n, init)
                            : ex_mpi_inclusive_scan_i64(engine, sch, MPI_COMM_WORLD, in, out, n);
        ex_result r = run_value(s, l->name);
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            if (!excl) acc += (uint64_t)in[i];
            if ((uint64_t)out[i] != acc && bad == SIZE_MAX) bad = i;
            if (excl) acc += (uint64_t)in[i];
        }
        CHECK(bad == SIZE_MAX, "i64 %s scan, %s: element %zu differs", excl ? "exclusive" : "inclusive", l->name, bad);
        if (r.disposition == EX_DISP_VALUE)
            CHECK(r.n == 1 && r.values[0].type == EX_T_INT && (uint64_t)r.values[0].as.i == acc, "i64 total, %s",
                  l->name);
        ex_result_destroy(&r);
    }
    free(in), free(out);
}

/* ---------------------------------------------------------- generic scans */

static void check_scans_generic(const layout *l, const gcase *c) {
    size_t n = l->n(rank, nranks), g0 = start_of(l, rank), sz = c->m.size;
    unsigned char *in = xmalloc(n * sz), *out = xmalloc(n * sz), *want = xmalloc(sz);
    unsigned char init[sizeof(m22)], acc[sizeof(m22)], x[sizeof(m22)];
    for (size_t i = 0; i < n; i++) c->at(g0 + i, in + i * sz);
    c->at(999999, init);
    for (int excl = 0; excl < 2; excl++) {
        memcpy(acc, excl ? init : c->m.identity, sz);
        for (size_t g = 0; g < g0; g++) {
            c->at(g, x);
            c->m.combine(NULL, acc, x);
        }
        memset(out, 0xa5, n * sz);
        ex_sender *s = excl ? ex_mpi_exclusive_scan(engine, sch, MPI_COMM_WORLD, &c->m, in, out, n, init)
                            : ex_mpi_inclusive_scan(engine, sch, MPI_COMM_WORLD, &c->m, in, out, n);
        ex_result r = run_value(s, l->name);
        CHECK(r.disposition != EX_DISP_VALUE || r.n == 0, "generic scans complete with no value");
        size_t bad = SIZE_MAX;
        for (size_t i = 0; i < n; i++) {
            if (!excl) c->m.combine(NULL, acc, in + i * sz);
            if (memcmp(out + i * sz, acc, sz) && bad == SIZE_MAX) bad = i;
            if (excl) c->m.combine(NULL, acc, in + i * sz);
        }
        CHECK(bad == SIZE_MAX, "%s %s scan, %s: element %zu differs from the serial fold", c->name,
              excl ? "exclusive" : "inclusive", l->name, bad);
        ex_result_destroy(&r);
    }
    free(in), free(out), free(want);
}

/* ------------------------------------------------------------- reductions */

static void check_reductions_typed(const layout *l) {
    size_t n = l->n(rank, nranks), g0 = start_of(l, rank), gn = start_of(l, nranks);
    double *fin = xmalloc(n * 8);
    int64_t *iin = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) fin[i] = int_at(g0 + i), iin[i] = i64_at(g0 + i);
    double fall = 0.5, fmine = rank == 0 ? 0.5 : 0.0;
    uint64_t iall = 11, imine = rank == 0 ? 11 : 0;
    for (size_t g = 0; g < gn; g++) fall += int_at(g), iall += (uint64_t)i64_at(g);
    for (size_t i = 0; i < n; i++) fmine += fin[i], imine += (uint64_t)iin[i];
    int roots[2] = { 0, nranks - 1 };
    for (int k = 0; k < 2; k++) {
        int root = roots[k];
        ex_result r = run_value(ex_mpi_reduce_f64(engine, sch, MPI_COMM_WORLD, fin, n, 0.5, root), "reduce_f64");
        double want = rank == root ? fall : fmine;
        if (r.disposition == EX_DISP_VALUE)
            CHECK(r.values[0].as.d == want, "reduce_f64 root %d, %s: %.17g, want %.17g", root, l->name,
                  r.values[0].as.d, want);
        ex_result_destroy(&r);
        r = run_value(ex_mpi_reduce_i64(engine, sch, MPI_COMM_WORLD, iin, n, 11, root), "reduce_i64");
        uint64_t iwant = rank == root ? iall : imine;
        if (r.disposition == EX_DISP_VALUE)
            CHECK((uint64_t)r.values[0].as.i == iwant, "reduce_i64 root %d, %s", root, l->name);
        ex_result_destroy(&r);
    }
    ex_result r = run_value(ex_mpi_allreduce_f64(engine, sch, MPI_COMM_WORLD, fin, n, 0.5), "allreduce_f64");
    if (r.disposition == EX_DISP_VALUE) CHECK(r.values[0].as.d == fall, "allreduce_f64, %s", l->name);
    ex_result_destroy(&r);
    r = run_value(ex_mpi_allreduce_i64(engine, sch, MPI_COMM_WORLD, iin, n, 11), "allreduce_i64");
    if (r.disposition == EX_DISP_VALUE) CHECK((uint64_t)r.values[0].as.i == iall, "allreduce_i64, %s", l->name);
    ex_result_destroy(&r);
    free(fin), free(iin);
}

static void check_reductions_generic(const layout *l, const gcase *c) {
    size_t n = l->n(rank, nranks), g0 = start_of(l, rank), gn = start_of(l, nranks), sz = c->m.size;
    unsigned char *in = xmalloc(n * sz);
    unsigned char all[sizeof(m22)], mine[sizeof(m22)], x[sizeof(m22)], result[sizeof(m22)];
    for (size_t i = 0; i < n; i++) c->at(g0 + i, in + i * sz);
    memcpy(all, c->m.identity, sz);
    memcpy(mine, c->m.identity, sz);
    for (size_t g = 0; g < gn; g++) {
        c->at(g, x);
        c->m.combine(NULL, all, x);
        if (g >= g0 && g < g0 + n) c->m.combine(NULL, mine, x);
    }
    int roots[2] = { nranks - 1, 0 };
    for (int k = 0; k < 2; k++) {
        memset(result, 0xa5, sizeof result);
        ex_result r = run_value(ex_mpi_reduce(engine, sch, MPI_COMM_WORLD, &c->m, in, n, result, roots[k]),
                                "generic reduce");
        if (r.disposition == EX_DISP_VALUE)
            CHECK(r.values[0].as.p == result && !memcmp(result, rank == roots[k] ? all : mine, sz),
                  "%s reduce root %d, %s", c->name, roots[k], l->name);
        ex_result_destroy(&r);
    }
    memset(result, 0xa5, sizeof result);
    ex_result r = run_value(ex_mpi_allreduce(engine, sch, MPI_COMM_WORLD, &c->m, in, n, result), "generic allreduce");
    if (r.disposition == EX_DISP_VALUE) CHECK(!memcmp(result, all, sz), "%s allreduce, %s", c->name, l->name);
    ex_result_destroy(&r);
    free(in);
}

/* ------------------------------------------- rounding and determinism */

/* The header's bound: (4108 + k + K + r) u sum|x|. */
static void check_rounding(const layout *l) {
    size_t n = l->n(rank, nranks), g0 = start_of(l, rank), big = 0;
    for (int q = 0; q < rank; q++) {
        size_t t = (l->n(q, nranks) + TILE - 1) / TILE;
        if (t > big) big = t;
    }
    double *in = xmalloc(n * 8), *out = xmalloc(n * 8), *again = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = mixed_at(g0 + i);
    ksum k = { 0, 0, 0 };
    for (size_t g = 0; g < g0; g++) ksum_add(&k, mixed_at(g));
    ex_sender *s = ex_mpi_inclusive_scan_f64(engine, sch, MPI_COMM_WORLD, in, out, n);
    ex_result r = run_value(ex_sender_retain(s), "mixed scan");
    ex_result_destroy(&r);
    size_t bad = SIZE_MAX;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        ksum_add(&k, in[i]);
        long double exact = k.s + k.c, err = fabsl((long double)out[i] - exact);
        long double bound = (long double)(4108 + i / TILE + big + (size_t)rank) * 0x1p-53L * k.abs;
        if (bound > 0 && (double)(err / bound) > worst) worst = (double)(err / bound);
        if (err > bound && bad == SIZE_MAX) bad = i;
    }
    CHECK(bad == SIZE_MAX, "mixed scan, %s: element %zu outside the bound (worst error/bound %.3g)", l->name, bad,
          worst);
    /* The same sender again, and the same scan on a pool of 2 workers:
     * the same bits. */
    r = run_value(ex_sender_retain(s), "mixed scan again");
    ex_result_destroy(&r);
    memcpy(again, out, n * 8);
    ex_pool *two = NULL;
    ex_pool_config cfg = { 0 };
    cfg.threads = 2;
    CHECK(ex_pool_create(&cfg, &two).code == EX_OK, "pool of 2");
    ex_sender_release(s);
    if (two) {
        memset(out, 0, n * 8);
        r = run_value(ex_mpi_inclusive_scan_f64(engine, ex_pool_scheduler(two), MPI_COMM_WORLD, in, out, n), "2 workers");
        ex_result_destroy(&r);
        CHECK(!memcmp(out, again, n * 8), "mixed scan, %s: a pool of 2 workers changed the bits", l->name);
        (void)ex_pool_destroy(two);
    }
    /* allreduce: the same bits on every rank */
    r = run_value(ex_mpi_allreduce_f64(engine, sch, MPI_COMM_WORLD, in, n, 0.0), "mixed allreduce");
    double v = r.disposition == EX_DISP_VALUE ? r.values[0].as.d : 0, *all = xmalloc((size_t)nranks * 8);
    ex_result_destroy(&r);
    MPI_Allgather(&v, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD);
    int same = 1;
    for (int q = 0; q < nranks; q++) same &= !memcmp(&all[q], &v, 8);
    CHECK(same, "mixed allreduce, %s: ranks disagree", l->name);
    free(in), free(out), free(again), free(all);
}

/* ------------------------------------------- a rank whose pass fails */

/* What rank `bad` failing with `code` (or stopped: code 0) leaves each
 * rank with: a scan's later ranks and every rank of an allreduce EX_EIO. */
static void expect_outcome(const ex_result *r, int bad, int code, bool dependent, const char *what) {
    if (rank == bad) {
        if (code) CHECK(r->disposition == EX_DISP_ERROR && r->error.code == code, "%s: failing rank: %d", what,
                        (int)r->disposition);
        else CHECK(r->disposition == EX_DISP_STOPPED, "%s: stopped rank: %d", what, (int)r->disposition);
    } else if (dependent) {
        CHECK(r->disposition == EX_DISP_ERROR && r->error.code == EX_EIO, "%s: dependent rank: %d", what,
              (int)r->disposition);
        if (r->disposition == EX_DISP_ERROR && rank == nranks - 1) printf("mpi_algorithms: %s: %s\n", what, r->error.msg);
    } else {
        CHECK(r->disposition == EX_DISP_VALUE, "%s: independent rank: %d", what, (int)r->disposition);
    }
}

static void test_stopped_rank(void) {
    size_t n = 3000;
    double *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = 1.0;
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    /* Rank 0 stops; the collectives still match on every rank. */
    ex_sender *s = ex_mpi_inclusive_scan_f64(engine, sch, MPI_COMM_WORLD, in, out, n);
    if (rank == 0) s = ex_link_stop_token(s, ex_stop_source_token(&src));
    ex_result r = ex_sync_wait(s);
    expect_outcome(&r, 0, 0, rank > 0, "scan, rank 0 stopped");
    ex_result_destroy(&r);
    s = ex_mpi_allreduce_f64(engine, sch, MPI_COMM_WORLD, in, n, 0.0);
    if (rank == 0) s = ex_link_stop_token(s, ex_stop_source_token(&src));
    r = ex_sync_wait(s);
    expect_outcome(&r, 0, 0, true, "allreduce, rank 0 stopped");
    ex_result_destroy(&r);
    s = ex_mpi_reduce_f64(engine, sch, MPI_COMM_WORLD, in, n, 0.0, nranks - 1);
    if (rank == 0) s = ex_link_stop_token(s, ex_stop_source_token(&src));
    r = ex_sync_wait(s);
    expect_outcome(&r, 0, 0, rank == nranks - 1, "reduce to the last rank, rank 0 stopped");
    ex_result_destroy(&r);
    /* After all that, a plain run is right again. */
    r = run_value(ex_mpi_allreduce_f64(engine, sch, MPI_COMM_WORLD, in, n, 0.0), "allreduce after");
    if (r.disposition == EX_DISP_VALUE) CHECK(r.values[0].as.d == (double)(n * (size_t)nranks), "sum after");
    ex_result_destroy(&r);
    free(in), free(out);
}

/* The sender s, its steps' operations from f (through the environment). */
static ex_sender *with_allocator(ex_sender *s, ex_fault_allocator *f) {
    return ex_write_env(s, &ex_key_get_allocator, ex_alloc_value(ex_fault_allocator_get(f)));
}

/* Allocations through the environment: the collective's operation at
 * connect, then each local step's.  Rank `bad` fails the local total's
 * (EX_ENOMEM there, EX_EIO where it is needed), then the scan step's
 * (only that rank fails).  Connect-time failures are not tried: a rank
 * that never joins the collective leaves the others waiting (the header
 * says so). */
static void test_allocation_failures(void) {
    size_t n = 3000;
    double *in = xmalloc(n * 8), *out = xmalloc(n * 8);
    for (size_t i = 0; i < n; i++) in[i] = 1.0;
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, NULL);
    ex_result r = run_value(with_allocator(ex_mpi_allreduce_f64(engine, sch, MPI_COMM_WORLD, in, n, 0.0), &f),
                            "counting allocations");
    ex_result_destroy(&r);
    uint64_t per_run = ex_fault_allocator_count(&f);
    CHECK(per_run == (nranks > 1 ? 2u : 1u), "allreduce allocated %llu times through the environment",
          (unsigned long long)per_run);
    int bad = nranks > 1 ? 1 : 0;
    if (rank == bad) ex_fault_allocator_fail_nth(&f, per_run);  /* the last: the local total's */
    r = ex_sync_wait(with_allocator(ex_mpi_allreduce_f64(engine, sch, MPI_COMM_WORLD, in, n, 0.0), &f));
    expect_outcome(&r, bad, EX_ENOMEM, true, "allreduce, no memory for a local total");
    ex_result_destroy(&r);

    /* A scan on a rank that sums its total (not the last): collective,
     * total, scan. */
    if (nranks > 1) {
        ex_fault_allocator_init(&f, NULL);
        r = run_value(with_allocator(ex_mpi_inclusive_scan_f64(engine, sch, MPI_COMM_WORLD, in, out, n), &f),
                      "counting");
        ex_result_destroy(&r);
        per_run = ex_fault_allocator_count(&f);
        CHECK(per_run == (rank == nranks - 1 ? 2u : 3u), "scan allocated %llu times", (unsigned long long)per_run);
        if (rank == 0) ex_fault_allocator_fail_nth(&f, 2);
        r = ex_sync_wait(with_allocator(ex_mpi_inclusive_scan_f64(engine, sch, MPI_COMM_WORLD, in, out, n), &f));
        expect_outcome(&r, 0, EX_ENOMEM, true, "scan, no memory for rank 0's total");
        ex_result_destroy(&r);
    }
    ex_fault_allocator_init(&f, NULL);
    if (rank == nranks - 1) ex_fault_allocator_fail_nth(&f, nranks > 1 ? 2 : 1);  /* the scan step */
    r = ex_sync_wait(with_allocator(ex_mpi_inclusive_scan_f64(engine, sch, MPI_COMM_WORLD, in, out, n), &f));
    expect_outcome(&r, nranks - 1, EX_ENOMEM, false, "scan, no memory for the last rank's scan");
    ex_result_destroy(&r);
    free(in), free(out);
}

/* -------------------------------------------------------------- arguments */

static void expect_einval(ex_sender *s, const char *name) {
    ex_error st = ex_sender_status(s);
    CHECK(st.code == EX_EINVAL && st.msg && !strncmp(st.msg, name, strlen(name)), "%s: status %d (%s)", name,
          st.code, st.msg ? st.msg : "-");
    ex_result r = ex_sync_wait(s);
    CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EINVAL, "%s: run", name);
    ex_result_destroy(&r);
}

static void test_invalid(void) {
    static double d[8];
    static int64_t i[8];
    ex_scheduler none = { NULL, NULL };
    const ex_monoid *m = &gcases[0].m;
    ex_monoid no_combine = *m;
    no_combine.combine = NULL;
    m22 res;
    expect_einval(ex_mpi_inclusive_scan_f64(NULL, sch, MPI_COMM_WORLD, d, d, 4), "ex_mpi_inclusive_scan_f64");
    expect_einval(ex_mpi_inclusive_scan_f64(engine, none, MPI_COMM_WORLD, d, d, 4), "ex_mpi_inclusive_scan_f64");
    expect_einval(ex_mpi_inclusive_scan_f64(engine, sch, MPI_COMM_NULL, d, d, 4), "ex_mpi_inclusive_scan_f64");
    expect_einval(ex_mpi_exclusive_scan_f64(engine, sch, MPI_COMM_WORLD, NULL, d, 4, 0), "ex_mpi_exclusive_scan_f64");
    expect_einval(ex_mpi_inclusive_scan_i64(engine, sch, MPI_COMM_WORLD, i, i + 1, 4), "ex_mpi_inclusive_scan_i64");
    expect_einval(ex_mpi_exclusive_scan_i64(engine, sch, MPI_COMM_WORLD, i, NULL, 4, 0), "ex_mpi_exclusive_scan_i64");
    expect_einval(ex_mpi_inclusive_scan(engine, sch, MPI_COMM_WORLD, &no_combine, i, i, 1), "ex_mpi_inclusive_scan");
    expect_einval(ex_mpi_exclusive_scan(engine, sch, MPI_COMM_WORLD, m, i, i, 1, NULL), "ex_mpi_exclusive_scan");
    expect_einval(ex_mpi_reduce_f64(engine, sch, MPI_COMM_WORLD, d, 4, 0, -1), "ex_mpi_reduce_f64");
    expect_einval(ex_mpi_reduce_i64(engine, sch, MPI_COMM_WORLD, NULL, 4, 0, 0), "ex_mpi_reduce_i64");
    expect_einval(ex_mpi_reduce(engine, sch, MPI_COMM_WORLD, m, i, 1, NULL, 0), "ex_mpi_reduce");
    expect_einval(ex_mpi_allreduce_f64(engine, sch, MPI_COMM_WORLD, NULL, 1, 0), "ex_mpi_allreduce_f64");
    expect_einval(ex_mpi_allreduce_i64(NULL, sch, MPI_COMM_WORLD, i, 1, 0), "ex_mpi_allreduce_i64");
    expect_einval(ex_mpi_allreduce(engine, sch, MPI_COMM_WORLD, NULL, i, 1, &res), "ex_mpi_allreduce");
    /* A root beyond the communicator: refused at connect, on every rank
     * alike, so no collective starts. */
    ex_result r = ex_sync_wait(ex_mpi_reduce_f64(engine, sch, MPI_COMM_WORLD, d, 4, 0, nranks));
    CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EINVAL, "root %d: %d", nranks, (int)r.disposition);
    ex_result_destroy(&r);
    /* NULL arrays with n == 0 are fine. */
    r = run_value(ex_mpi_inclusive_scan_f64(engine, sch, MPI_COMM_WORLD, NULL, NULL, 0), "empty");
    if (r.disposition == EX_DISP_VALUE) CHECK(r.values[0].as.d == 0.0, "empty scan total %g", r.values[0].as.d);
    ex_result_destroy(&r);
}

/* ------------------------------------------------ two communicators at once */

/* Two generic scans with different monoids, one per communicator, in
 * flight together: each finds its own monoid inside MPI. */
static void test_two_at_once(void) {
    MPI_Comm a, b;
    MPI_Comm_dup(MPI_COMM_WORLD, &a);
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    const layout *l = &layouts[1];
    size_t n = l->n(rank, nranks), g0 = start_of(l, rank);
    m22 *in1 = xmalloc(n * sizeof(m22)), *out1 = xmalloc(n * sizeof(m22)), acc1 = m22_one;
    uint8_t *in2 = xmalloc(n), *out2 = xmalloc(n), acc2 = aff8_one;
    for (size_t i = 0; i < n; i++) in1[i] = m22_at(g0 + i), in2[i] = aff8_at(g0 + i);
    for (int round = 0; round < 3; round++) {
        ex_sender *both[2] = { ex_mpi_inclusive_scan(engine, sch, a, &gcases[0].m, in1, out1, n),
                               ex_mpi_inclusive_scan(engine, sch, b, &gcases[1].m, in2, out2, n) };
        ex_result r = run_value(ex_when_all_n(both, 2), "two at once");
        ex_result_destroy(&r);
    }
    for (size_t g = 0; g < g0; g++) {
        m22 x = m22_at(g);
        uint8_t y = aff8_at(g);
        m22_combine(NULL, &acc1, &x);
        aff8_combine(NULL, &acc2, &y);
    }
    size_t bad = SIZE_MAX;
    for (size_t i = 0; i < n; i++) {
        m22_combine(NULL, &acc1, &in1[i]);
        aff8_combine(NULL, &acc2, &in2[i]);
        if ((memcmp(&out1[i], &acc1, sizeof acc1) || out2[i] != acc2) && bad == SIZE_MAX) bad = i;
    }
    CHECK(bad == SIZE_MAX, "two at once: element %zu", bad);
    MPI_Comm_free(&a);
    MPI_Comm_free(&b);
    free(in1), free(out1), free(in2), free(out2);
}

int main(int argc, char **argv) {
    check_setup(&argc, &argv, "mpi_algorithms");
    sch = ex_pool_scheduler(pool);
    test_invalid();
    for (size_t k = 0; k < NLAYOUTS; k++) {
        const layout *l = &layouts[k];
        check_scans_f64(l);
        check_scans_i64(l);
        check_reductions_typed(l);
        for (size_t c = 0; c < sizeof gcases / sizeof gcases[0]; c++) {
            check_scans_generic(l, &gcases[c]);
            check_reductions_generic(l, &gcases[c]);
        }
    }
    check_rounding(&layouts[1]);
    check_rounding(&layouts[7]);
    test_stopped_rank();
    test_allocation_failures();
    test_two_at_once();
    return check_finish();
}
