/* baselines.h - the same benchmarks written with oneTBB (C++), OpenMP and
 * plain serial C, measured in the same run as cexec. */
#ifndef CEXEC_BENCH_BASELINES_H
#define CEXEC_BENCH_BASELINES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An empty body the compiler cannot remove: called through this pointer by
 * every implementation of the bulk benchmark, as cexec calls its bulk
 * function through a pointer. */
extern void (*volatile bench_empty_body)(size_t i);

int64_t serial_fib(int64_t n);

/* oneTBB: task_group fork-join, parallel_for, parallel_scan.  tbb_init
 * fixes the thread count (a global_control kept until tbb_fini). */
void tbb_init(int threads);
void tbb_fini(void);
int64_t tbb_fib(int64_t n, int64_t cutoff);
void tbb_bulk(size_t n);
void tbb_inclusive_scan(const double *in, double *out, size_t n);
double tbb_reduce(const double *in, size_t n);

/* OpenMP: tasks, parallel for, the inscan reduction. */
void omp_init(int threads);
int64_t omp_fib(int64_t n, int64_t cutoff);
void omp_bulk(size_t n);
void omp_inclusive_scan(const double *in, double *out, size_t n);
double omp_reduce(const double *in, size_t n);

/* Boost (C++): boost::context::fiber switched into and back n times;
 * two Boost.Fiber fibers yielding to each other n times each. */
void boost_context_switch_pairs(size_t n);
void boost_fiber_yield_pairs(size_t n);

void serial_inclusive_scan(const double *in, double *out, size_t n);
double serial_reduce(const double *in, size_t n);

#ifdef __cplusplus
}
#endif
#endif
