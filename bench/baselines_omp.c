/* baselines_omp.c - OpenMP and serial versions of the benchmarks. */
#include <omp.h>

#include "baselines.h"

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

/* GCC 12 warns about a temporary in its own inscan lowering. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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
