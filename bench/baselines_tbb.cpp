// baselines_tbb.cpp - oneTBB versions of the benchmarks (C++ only here).
#include "baselines.h"

#include <memory>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/parallel_scan.h>
#include <oneapi/tbb/task_group.h>

static std::unique_ptr<tbb::global_control> control;

extern "C" void tbb_init(int threads) {
    control = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism, (size_t)threads);
}

extern "C" void tbb_fini(void) { control.reset(); }

static int64_t fib_tg(int64_t n, int64_t cutoff) {
    if (n < 2) return n;
    if (n < cutoff) return serial_fib(n);
    int64_t a = 0, b = 0;
    tbb::task_group g;
    g.run([&] { a = fib_tg(n - 1, cutoff); });
    b = fib_tg(n - 2, cutoff);
    g.wait();
    return a + b;
}

extern "C" int64_t tbb_fib(int64_t n, int64_t cutoff) { return fib_tg(n, cutoff); }

extern "C" void tbb_bulk(size_t n) {
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n), [](const tbb::blocked_range<size_t> &r) {
        for (size_t i = r.begin(); i != r.end(); ++i) bench_empty_body(i);
    });
}

extern "C" void tbb_inclusive_scan(const double *in, double *out, size_t n) {
    tbb::parallel_scan(
        tbb::blocked_range<size_t>(0, n), 0.0,
        [=](const tbb::blocked_range<size_t> &r, double sum, bool is_final) {
            for (size_t i = r.begin(); i != r.end(); ++i) {
                sum += in[i];
                if (is_final) out[i] = sum;
            }
            return sum;
        },
        [](double a, double b) { return a + b; });
}

// The body as oneTBB's documentation writes it.
extern "C" double tbb_reduce(const double *in, size_t n) {
    return tbb::parallel_reduce(
        tbb::blocked_range<size_t>(0, n), 0.0,
        [=](const tbb::blocked_range<size_t> &r, double sum) {
            for (size_t i = r.begin(); i != r.end(); ++i) sum += in[i];
            return sum;
        },
        [](double a, double b) { return a + b; });
}
