/* SPDX-License-Identifier: MIT */
// baselines_tbb.cpp - oneTBB versions of the benchmarks (C++ only here).
#include "baselines.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <sys/syscall.h>
#include <unistd.h>

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/parallel_reduce.h>
#include <oneapi/tbb/parallel_scan.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/task_scheduler_observer.h>

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

// ------------------------------------------------------------ pool group

namespace {

// Records the kernel thread id of every thread that enters the arena, so
// the idle-CPU benchmark can read those threads' CPU time.
class tid_observer : public tbb::task_scheduler_observer {
public:
    explicit tid_observer(tbb::task_arena &a) : tbb::task_scheduler_observer(a) { observe(true); }
    ~tid_observer() override { observe(false); }
    void on_scheduler_entry(bool) override {
        std::lock_guard<std::mutex> lock(mutex_);
        tids_.insert((int)syscall(SYS_gettid));
    }
    std::vector<int> tids() {
        std::lock_guard<std::mutex> lock(mutex_);
        return std::vector<int>(tids_.begin(), tids_.end());
    }

private:
    std::mutex mutex_;
    std::set<int> tids_;
};

std::unique_ptr<tbb::task_arena> arena;
std::unique_ptr<tid_observer> observer;

void empty_task() {}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void run_batch(size_t k) {
    tbb::task_group g;
    for (size_t i = 0; i < k; i++) g.run(empty_task);
    g.wait();
}

}  // namespace

extern "C" void tbb_pool_init(int threads) {
    arena = std::make_unique<tbb::task_arena>(threads);
    arena->initialize();
    observer = std::make_unique<tid_observer>(*arena);
}

extern "C" void tbb_pool_fini(void) {
    observer.reset();
    arena.reset();
}

extern "C" void tbb_pool_batches(int outside, size_t batches, size_t k) {
    std::vector<std::thread> threads;
    for (int t = 0; t < outside; t++)
        threads.emplace_back([=] {
            for (size_t b = 0; b < batches; b++) arena->execute([=] { run_batch(k); });
        });
    for (auto &t : threads) t.join();
}

extern "C" void tbb_pool_nested_batches(size_t batches, size_t k) {
    arena->execute([=] {
        tbb::task_group root;
        root.run([=] {
            for (size_t b = 0; b < batches; b++) run_batch(k);
        });
        root.wait();
    });
}

extern "C" void tbb_pool_round_trip(void) {
    arena->execute([] {
        tbb::task_group g;
        g.run(empty_task);
        g.wait();
    });
}

extern "C" void tbb_pool_round_trip_enqueue(void) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    arena->enqueue([&] {
        std::lock_guard<std::mutex> lock(m);
        done = true;
        cv.notify_one();
    });
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return done; });
}

namespace {

struct ping_pong {
    tbb::task_group g;
    std::atomic<size_t> started{ 0 };
    size_t last = 0;

    // Hop i runs hop i + 1 and keeps its thread until that one has started.
    void hop(size_t i) {
        started.store(i, std::memory_order_release);
        if (i == last) return;
        g.run([this, i] { hop(i + 1); });
        while (started.load(std::memory_order_acquire) == i) cpu_relax();
    }
};

}  // namespace

extern "C" void tbb_pool_ping_pong(size_t handoffs) {
    ping_pong p;
    p.last = handoffs;
    arena->execute([&] {
        p.g.run([&] { p.hop(0); });
        p.g.wait();
    });
}

extern "C" size_t tbb_pool_thread_ids(int *out, size_t max) {
    std::vector<int> tids = observer->tids();
    size_t n = tids.size() < max ? tids.size() : max;
    for (size_t i = 0; i < n; i++) out[i] = tids[i];
    return n;
}
