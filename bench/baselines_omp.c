/* SPDX-License-Identifier: MIT */
/* baselines_omp.c - OpenMP and serial versions of the benchmarks. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/exi_atomic.h"
#include "baselines.h"

/* clang reports an `omp simd` loop it does not vectorise as a warning
 * (an error under -Werror); the pragma is a hint here, not a demand. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

static void empty(size_t i) { (void)i; }
void (*volatile bench_empty_body)(size_t i) = empty;

int64_t serial_fib(int64_t n) { return n < 2 ? n : serial_fib(n - 1) + serial_fib(n - 2); }

void omp_init(int threads) { omp_set_num_threads(threads); }

static int64_t fib_task(int64_t n, int64_t cutoff) {
    if (n < 2) return n;
    if (n < cutoff) return serial_fib(n);
    int64_t a, b;
#pragma omp task shared(a)
    a = fib_task(n - 1, cutoff);
    b = fib_task(n - 2, cutoff);
#pragma omp taskwait
    return a + b;
}

int64_t omp_fib(int64_t n, int64_t cutoff) {
    int64_t r = 0;
#pragma omp parallel
#pragma omp single
    r = fib_task(n, cutoff);
    return r;
}

void omp_bulk(size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) bench_empty_body(i);
}

/* GCC 12 warns about a temporary in its own inscan lowering (clang has no
 * such warning, and -Werror rejects the unknown name). */
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
void omp_inclusive_scan(const double *in, double *out, size_t n) {
    double acc = 0;
#pragma omp parallel for simd reduction(inscan, + : acc)
    for (size_t i = 0; i < n; i++) {
        acc += in[i];
#pragma omp scan inclusive(acc)
        out[i] = acc;
    }
}
#pragma GCC diagnostic pop

void serial_inclusive_scan(const double *in, double *out, size_t n) {
    double acc = 0;
    for (size_t i = 0; i < n; i++) out[i] = acc += in[i];
}

/* simd: lets the compiler vectorise the reduction (reassociation allowed). */
double omp_reduce(const double *in, size_t n) {
    double acc = 0;
#pragma omp parallel for simd reduction(+ : acc)
    for (size_t i = 0; i < n; i++) acc += in[i];
    return acc;
}

double serial_reduce(const double *in, size_t n) {
    double acc = 0;
    for (size_t i = 0; i < n; i++) acc += in[i];
    return acc;
}

/* ------------------------------------------------------------ pool group */

static void empty_task(void) { bench_empty_body(0); }

void omp_pool_nested_batches(size_t batches, size_t k) {
#pragma omp parallel
#pragma omp single
    for (size_t b = 0; b < batches; b++) {
        for (size_t i = 0; i < k; i++) {
#pragma omp task
            empty_task();
        }
#pragma omp taskwait
    }
}

void omp_pool_round_trip(void) {
#pragma omp parallel
#pragma omp single
    {
#pragma omp task
        empty_task();
    }
}

/* Hop i creates hop i + 1 and keeps its thread until that one has started:
 * the team's other threads take it at the single's barrier. */
static void hop(uint64_t *started, uint64_t i, uint64_t last) {
    exi_store_rel_u64(started, i);
    if (i == last) return;
#pragma omp task firstprivate(i)
    hop(started, i + 1, last);
    while (exi_load_acq_u64(started) == i) exi_pause();
}

void omp_pool_ping_pong(size_t handoffs) {
    uint64_t started = 0;
#pragma omp parallel
#pragma omp single
    hop(&started, 0, handoffs);
}

size_t omp_pool_thread_ids(int *out, size_t max) {
    size_t n = 0;
#pragma omp parallel
    {
        int tid = (int)syscall(SYS_gettid);
#pragma omp critical
        if (n < max) out[n++] = tid;
    }
    return n;
}
