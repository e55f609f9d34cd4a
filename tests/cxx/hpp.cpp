// SPDX-License-Identifier: MIT
// hpp.cpp - cexec/cexec.hpp, the optional C++ handles: ownership (no leak,
// no double release: run under the ASan build too), values, errors as
// exceptions, a pool and a scope.  Built and run by scripts/check-headers.sh
// with g++ and clang++, C++17 and C++20; prints "hpp: N passed, 0 failed".
#include <cexec/cexec.hpp>

#include <cstdio>

#include "cxx_check.hpp"

using cxx_check::add;
using cxx_check::check;

static ex_error fail(void *, const ex_value *, size_t, ex_value *) { return ex_err(EX_EUSER + 5, "hpp: failed on purpose"); }

static int counted;
static ex_error count(void *, const ex_value *, size_t, ex_value *) {
    __atomic_fetch_add(&counted, 1, __ATOMIC_RELAXED);
    return ex_ok();
}

int main() {
    {
        cexec::pool pool;
        check(pool.size() >= 1, "pool created");
        cexec::sender forty = cexec::starts_on(pool.scheduler(), cexec::just(ex_int(40)));
        cexec::sender copy = forty;  // a second reference: both may be consumed
        cexec::result r = cexec::sync_wait(cexec::then(cexec::when_all(std::move(copy), cexec::just(ex_int(2))), add,
                                                       nullptr, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT)));
        check(r.has_value() && r.value(0).as.i == 42, "when_all + then on the pool");
        cexec::result again = cexec::sync_wait(forty);  // the original still runs
        check(again.has_value() && again.value(0).as.i == 40, "a copied sender runs twice");

        cexec::result e = cexec::sync_wait(cexec::then(cexec::just(), fail, nullptr, EX_SIG0, EX_SIG0));
        bool threw = false;
        try {
            (void)e.value(0);
        } catch (const cexec::error &x) {
            threw = x.code() == EX_EUSER + 5;
        }
        check(threw, "an error result throws cexec::error with its code");

        cexec::result first = cexec::sync_wait(cexec::stop_when(
            cexec::when_any(cexec::just(ex_int(7)), cexec::starts_on(pool.scheduler(), cexec::just(ex_int(8)))),
            cexec::just()));
        check(first.has_value() && first.value(0).as.i == 7, "when_any + stop_when");

        cexec::result none = cexec::sync_wait(cexec::just());
        check(none.has_value() && none.size() == 0, "just()");

        cexec::counting_scope scope;
        for (int i = 0; i < 50; i++)
            scope.spawn(cexec::starts_on(pool.scheduler(), cexec::then(cexec::just(), count, nullptr, EX_SIG0, EX_SIG0)));
        cexec::result joined = cexec::sync_wait(scope.join());
        check(joined.has_value() && __atomic_load_n(&counted, __ATOMIC_RELAXED) == 50, "spawn 50 and join");

        bool refused = false;
        try {
            cexec::pool bad_pool([] {
                static ex_pool_config c = {};
                c.threads = 100000;
                return &c;
            }());
        } catch (const cexec::error &x) {
            refused = x.code() == EX_EINVAL;
        }
        check(refused, "a bad pool config throws EX_EINVAL");
    }  // scope joined, pool destroyed here
    return cxx_check::finish("hpp");
}
