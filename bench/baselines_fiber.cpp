/* SPDX-License-Identifier: MIT */
// baselines_fiber.cpp - Boost's stackful coroutines, for the task
// benchmarks' switch cost: boost::context::fiber (the raw context switch,
// what cexec's fibers are) and Boost.Fiber (fibers with a scheduler: a
// yield between two fibers on one thread).
#include <boost/context/fiber.hpp>
#include <boost/fiber/all.hpp>

#include "baselines.h"

namespace ctx = boost::context;

// Switches into a fiber and back, n times: 2n switches.
extern "C" void boost_context_switch_pairs(size_t n) {
    ctx::fiber f{[n](ctx::fiber &&main) {
        for (size_t i = 0; i < n; ++i) main = std::move(main).resume();
        return std::move(main);
    }};
    for (size_t i = 0; i <= n; ++i) f = std::move(f).resume();
}

// Two Boost.Fiber fibers yielding to each other n times each: 2n yields.
extern "C" void boost_fiber_yield_pairs(size_t n) {
    auto body = [n] {
        for (size_t i = 0; i < n; ++i) boost::this_fiber::yield();
    };
    boost::fibers::fiber a(body), b(body);
    a.join();
    b.join();
}
