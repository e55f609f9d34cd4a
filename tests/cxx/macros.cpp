// SPDX-License-Identifier: MIT
// macros.cpp - cexec from C++: every public header included, the
// function-like macros (ex_just, ex_when_all, ex_when_all_with_variant, ex_when_any, ex_await_all,
// EX_SIG, EX_SIG0, EX_SIG_VARIADIC) used and run.  Built with g++ and
// clang++ in C++17 and C++20 with -Wall -Wextra -pedantic -Werror by
// scripts/check-headers.sh; prints "cxx: N passed, 0 failed".
#include <cexec/cexec.h>

#include <cstdio>

#include "cxx_check.hpp"
#include <cstdlib>

using cxx_check::add;
using cxx_check::check;

static ex_error count(void *, const ex_value *, size_t n, ex_value *out) {
    out[0] = ex_int(static_cast<int64_t>(n));
    return ex_ok();
}

static ex_task_result twice(ex_task *t, void *) {
    ex_await_result r = ex_await(t, ex_just(ex_int(21)));
    if (r.status != EX_AWAIT_VALUE) return ex_task_stopped();
    return ex_task_i64(2 * r.v[0].as.i);
}

// ex_await_all of a task and a just (their when_all), then of two tasks (a
// fork): 42 when every value arrived in order.
static ex_task_result forked(ex_task *t, void *) {
    ex_await_result r = ex_await_all(t, ex_task_create(twice, nullptr, nullptr), ex_just(ex_int(1)));
    if (r.status != EX_AWAIT_VALUE || r.n != 2) return ex_task_stopped();
    ex_await_result s = ex_await_all(t, ex_task_create(twice, nullptr, nullptr), ex_task_create(twice, nullptr, nullptr));
    if (s.status != EX_AWAIT_VALUE || s.n != 2 || s.v[0].as.i != 42 || s.v[1].as.i != 42) return ex_task_stopped();
    return ex_task_i64(r.v[0].as.i + r.v[1].as.i - 1);
}

// EX_SIG is a constant expression in C++ as it is in C.
static constexpr ex_sig two_ints = EX_SIG(EX_T_INT, EX_T_INT);
static_assert(two_ints.arity == 2 && two_ints.types[1] == EX_T_INT, "EX_SIG");
static_assert(EX_SIG().arity == 0 && EX_SIG0.arity == 0, "EX_SIG0");
static_assert(EX_SIG_VARIADIC.arity == 0xff, "EX_SIG_VARIADIC");

int main() {
    ex_result r = ex_sync_wait(ex_just());
    check(r.disposition == EX_DISP_VALUE && r.n == 0, "ex_just()");
    ex_result_destroy(&r);

    r = ex_sync_wait(ex_just(ex_int(1), ex_double(2.5)));
    check(r.disposition == EX_DISP_VALUE && r.n == 2 && r.values[0].as.i == 1 && r.values[1].as.d == 2.5,
          "ex_just(a, b)");
    ex_result_destroy(&r);

    ex_pool *pool = nullptr;
    ex_pool_config cfg = {};
    cfg.threads = 2;
    if (ex_pool_create(&cfg, &pool).code) {
        std::fprintf(stderr, "cxx: ex_pool_create failed\n");
        return 1;
    }
    ex_scheduler sch = ex_pool_scheduler(pool);
    ex_sender *sum = ex_then(ex_when_all(ex_starts_on(sch, ex_just(ex_int(40))), ex_just(ex_int(2))), add, nullptr,
                             two_ints, EX_SIG(EX_T_INT));
    r = ex_sync_wait(sum);
    check(r.disposition == EX_DISP_VALUE && r.values[0].as.i == 42, "ex_when_all + ex_then on the pool");
    ex_result_destroy(&r);

    r = ex_sync_wait(ex_then(ex_when_all_with_variant(ex_just(ex_int(1)), ex_just()), count, nullptr,
                             EX_SIG_VARIADIC, EX_SIG(EX_T_INT)));
    check(r.disposition == EX_DISP_VALUE && r.values[0].as.i == 2, "ex_when_all_with_variant");
    ex_result_destroy(&r);

    r = ex_sync_wait(ex_when_any(ex_just_stopped(), ex_starts_on(sch, ex_just(ex_int(3)))));
    check(r.disposition == EX_DISP_STOPPED, "ex_when_any: the first completion wins");
    ex_result_destroy(&r);

    r = ex_sync_wait(ex_starts_on(sch, ex_task_create(twice, nullptr, nullptr)));
    check(r.disposition == EX_DISP_VALUE && r.values[0].as.i == 42, "a task awaiting ex_just");
    ex_result_destroy(&r);

    r = ex_sync_wait(ex_starts_on(sch, ex_task_create(forked, nullptr, nullptr)));
    check(r.disposition == EX_DISP_VALUE && r.values[0].as.i == 42, "a task awaiting ex_await_all");
    ex_result_destroy(&r);

    double in[1000], out[1000];
    for (int i = 0; i < 1000; i++) in[i] = 1.0;
    r = ex_sync_wait(ex_inclusive_scan_f64(sch, in, out, 1000));
    check(r.disposition == EX_DISP_VALUE && out[999] == 1000.0, "ex_inclusive_scan_f64");
    ex_result_destroy(&r);

    check(ex_pool_destroy(pool).code == 0, "ex_pool_destroy");
    check(ex_version_number() == CEXEC_VERSION_NUMBER, "ex_version_number");
    return cxx_check::finish("cxx");
}
