// SPDX-License-Identifier: MIT
// hpp_time.cpp - cexec/cexec.hpp's time and race wrappers: the std::chrono
// conversions (rounding, overflow, clocks), timers and timeouts on a pool,
// when_any/when_all over a vector or an array, the stop sources and
// link_stop_token.  Ownership is checked by running it under the ASan build
// too (make test-asan).  No upper bound on any time: a timer is only
// checked not to be early.  Built and run by scripts/check-headers.sh like
// hpp.cpp; prints "hpp_time: N passed, 0 failed".
#include <cexec/cexec.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "cxx_check.hpp"

using cxx_check::check;
using namespace std::chrono_literals;
using std::chrono::steady_clock;
using std::chrono::system_clock;

static ex_error tag(void *ctx, const ex_value *, size_t, ex_value *out) {
    out[0] = ex_int(static_cast<int64_t>(reinterpret_cast<intptr_t>(ctx)));
    return ex_ok();
}

// s, completing with the value n instead of its own (none).
static cexec::sender tagged(cexec::sender s, int64_t n) {
    return cexec::then(std::move(s), tag, reinterpret_cast<void *>(static_cast<intptr_t>(n)), EX_SIG0,
                       EX_SIG(EX_T_INT));
}

static ex_error stop_it(void *ctx, const ex_value *, size_t, ex_value *) {
    static_cast<cexec::stop_source *>(ctx)->request_stop();
    return ex_ok();
}

template <typename D>
static bool ns_is(D d, int64_t want) {
    int64_t ns = 0;
    return cexec::detail::to_ns(d, ns) && ns == want;
}

template <typename D>
static bool ns_overflows(D d, int64_t saturated) {
    int64_t ns = 0;
    return !cexec::detail::to_ns(d, ns) && ns == saturated;
}

static bool invalid(const cexec::sender &s, const char *msg_start) {
    ex_error e = s.status();
    return e.code == EX_EINVAL && e.msg && std::strncmp(e.msg, msg_start, std::strlen(msg_start)) == 0;
}

static int64_t value_of(cexec::sender s) {
    cexec::result r = cexec::sync_wait(std::move(s));
    return r.has_value() && r.size() == 1 ? r.value(0).as.i : -1;
}

static void durations() {
    constexpr int64_t max = std::numeric_limits<int64_t>::max(), min = std::numeric_limits<int64_t>::min();
    check(ns_is(5ns, 5) && ns_is(3us, 3000) && ns_is(2s, 2 * EX_NS_PER_S), "whole units convert exactly");
    check(ns_is(std::chrono::nanoseconds::max(), max) && ns_is(std::chrono::nanoseconds::min(), min),
          "the ends of nanoseconds fit");
    check(ns_is(std::chrono::microseconds(max / 1000), max / 1000 * 1000) &&
              ns_overflows(std::chrono::microseconds(max / 1000 + 1), max) &&
              ns_overflows(std::chrono::microseconds(min / 1000 - 1), min),
          "microseconds overflow at the first value past int64_t nanoseconds");
    check(ns_overflows(std::chrono::hours::max(), max) && ns_overflows(std::chrono::hours::min(), min),
          "hours::max() and min() do not fit");
    using picoseconds = std::chrono::duration<int64_t, std::pico>;
    check(ns_is(picoseconds(1500), 2) && ns_is(picoseconds(1000), 1) && ns_is(picoseconds(1), 1) &&
              ns_is(picoseconds(-1500), -1),
          "sub-nanosecond periods round up");
    using frames = std::chrono::duration<int64_t, std::ratio<1, 60>>;
    check(ns_is(frames(1), 16666667) && ns_is(frames(60), EX_NS_PER_S) && ns_is(frames(-1), -16666666),
          "a period of 1/60 s converts exactly, rounded up");
    check(ns_overflows(std::chrono::duration<uint64_t, std::nano>(std::numeric_limits<uint64_t>::max()), max) &&
              ns_is(std::chrono::duration<uint32_t>(std::numeric_limits<uint32_t>::max()),
                    int64_t{ std::numeric_limits<uint32_t>::max() } * EX_NS_PER_S),
          "unsigned reps");
    using dseconds = std::chrono::duration<double>;
    check(ns_is(dseconds(1.5e-9), 2) && ns_is(std::chrono::duration<double, std::milli>(2.5), 2500000) &&
              ns_is(dseconds(-0.5), -500000000),
          "floating-point reps round up");
    check(ns_overflows(dseconds(1e10), max) && ns_overflows(dseconds(-1e10), min) &&
              ns_overflows(dseconds(HUGE_VAL), max) && ns_overflows(dseconds(std::nan("")), max),
          "a double too large, infinite or NaN does not fit");
}

// A clock whose now() is always its zero: a time point's distance from it
// is its time since the epoch.
struct zero_clock {
    using rep = int64_t;
    using period = std::nano;
    using duration = std::chrono::nanoseconds;
    using time_point = std::chrono::time_point<zero_clock>;
    static constexpr bool is_steady = false;
    static time_point now() noexcept { return time_point(); }
};

static void time_points() {
    int64_t before = cexec::now(), at = -1;
    bool ok = cexec::detail::deadline_ns(zero_clock::time_point(1h), at);
    int64_t after = cexec::now();
    check(ok && at >= before + 3600 * EX_NS_PER_S && at <= after + 3600 * EX_NS_PER_S,
          "another clock's time point goes by its distance from that clock's now()");
    check(!cexec::detail::deadline_ns(zero_clock::time_point::max(), at),
          "a distance that overflows ex_now()'s clock is beyond");
    check(cexec::detail::deadline_ns(zero_clock::time_point::min(), at) && at == 0,
          "a distance that underflows it is the past");

    int64_t ns = -1;
    if (cexec::detail::steady_clock_is_now_clock) {
        int64_t before = cexec::now();
        int64_t steady = steady_clock::now().time_since_epoch().count();
        int64_t after = cexec::now();
        check(before <= steady && steady <= after, "steady_clock reads ex_now()'s clock");
        check(cexec::detail::deadline_ns(steady_clock::time_point(12345ns), ns) && ns == 12345,
              "a steady_clock time point is taken as it is");
    }
    check(cexec::detail::deadline_ns(steady_clock::time_point::min(), ns) && ns == 0,
          "steady_clock's min() is the past");
    check(!cexec::detail::deadline_ns(std::chrono::time_point<steady_clock, std::chrono::hours>::max(), ns),
          "a steady time point in hours::max() is beyond int64_t");
    check(cexec::detail::deadline_ns(system_clock::time_point::min(), ns) && ns == 0,
          "system_clock's min() is the past");
    check(cexec::detail::deadline_ns(system_clock::time_point::max(), ns) && ns > cexec::now(),
          "system_clock's max() is far, but within int64_t of ex_now()'s clock");
    check(!cexec::detail::deadline_ns(std::chrono::time_point<system_clock, std::chrono::hours>::max(), ns),
          "a system_clock time point in hours::max() is beyond int64_t");
    check(cexec::detail::deadline_ns(system_clock::now() - 1h, ns) && ns >= 0 && ns <= cexec::now(),
          "a system_clock time point an hour ago is in the past");
    check(cexec::detail::deadline_ns(system_clock::now() + 1h, ns) && ns > cexec::now(),
          "a system_clock time point in an hour is in the future");
}

// Each timer waits at least its time.
static void timers(ex_scheduler sch) {
    int64_t t0 = cexec::now();
    cexec::result r = cexec::sync_wait(cexec::schedule_after(sch, 20ms));
    check(r.has_value() && r.size() == 0 && cexec::now() - t0 >= 20 * EX_NS_PER_MS,
          "schedule_after(20ms) completes with no value after 20 ms or more");

    t0 = cexec::now();
    cexec::result r2 = cexec::sync_wait(cexec::schedule_after(sch, 5 * EX_NS_PER_MS));
    check(r2.has_value() && cexec::now() - t0 >= 5 * EX_NS_PER_MS, "schedule_after(int64_t ns)");

    int64_t deadline = cexec::now() + 10 * EX_NS_PER_MS;
    check(cexec::sync_wait(cexec::schedule_at(sch, deadline)).has_value() && cexec::now() >= deadline,
          "schedule_at(int64_t ns)");

    if (cexec::detail::steady_clock_is_now_clock) {
        steady_clock::time_point at = steady_clock::now() + 10ms;
        check(cexec::sync_wait(cexec::schedule_at(sch, at)).has_value() && steady_clock::now() >= at,
              "schedule_at(a steady_clock time point)");
    }
    check(cexec::sync_wait(cexec::schedule_at(sch, system_clock::now() + 1ms)).has_value(),
          "schedule_at(a system_clock time point)");

    // A deadline in the past beats an hour's timer: it completed at once.
    auto first = [sch](cexec::sender past) {
        return value_of(cexec::when_any(tagged(std::move(past), 1), tagged(cexec::schedule_after(sch, 1h), 2)));
    };
    check(first(cexec::schedule_at(sch, steady_clock::now() - 1h)) == 1, "a steady time point in the past");
    check(first(cexec::schedule_at(sch, steady_clock::time_point::min())) == 1, "steady_clock's min()");
    check(first(cexec::schedule_at(sch, system_clock::time_point::min())) == 1, "system_clock's min()");
    check(first(cexec::schedule_at(sch, int64_t{ 0 })) == 1, "deadline 0");
    check(first(cexec::schedule_after(sch, 0ns)) == 1, "schedule_after(0ns)");
}

static void bad_times(ex_scheduler sch) {
    check(invalid(cexec::schedule_after(sch, std::chrono::hours::max()), "cexec::schedule_after:"),
          "schedule_after(hours::max()): EX_EINVAL naming the wrapper");
    check(invalid(cexec::schedule_after(sch, std::chrono::duration<double>(std::nan(""))), "cexec::schedule_after:"),
          "schedule_after(NaN seconds): EX_EINVAL");
    check(invalid(cexec::schedule_at(sch, std::chrono::time_point<steady_clock, std::chrono::hours>::max()),
                  "cexec::schedule_at:"),
          "schedule_at beyond int64_t: EX_EINVAL naming the wrapper");
    check(invalid(cexec::schedule_after(sch, -1ms), "ex_schedule_after"), "a negative duration: C's EX_EINVAL");
    check(invalid(cexec::schedule_at(sch, int64_t{ -1 }), "ex_schedule_at"), "a negative deadline: C's EX_EINVAL");
    cexec::result r = cexec::sync_wait(cexec::schedule_after(sch, std::chrono::hours::max()));
    check(r.disposition() == EX_DISP_ERROR && r.error_value().code == EX_EINVAL, "an invalid timer fails when run");
}

static void timeouts(ex_scheduler sch) {
    cexec::result late = cexec::sync_wait(cexec::timeout(cexec::schedule_after(sch, 1h), sch, 10ms));
    check(late.disposition() == EX_DISP_ERROR && late.error_value().code == EX_ETIMEDOUT,
          "a timeout of an hour's timer: EX_ETIMEDOUT");
    bool threw = false;
    try {
        (void)late.value(0);
    } catch (const cexec::error &e) {
        threw = e.code() == EX_ETIMEDOUT;
    }
    check(threw, "the timeout's value() throws cexec::error EX_ETIMEDOUT");

    cexec::result int_late = cexec::sync_wait(cexec::timeout(cexec::schedule_after(sch, 1h), sch, EX_NS_PER_MS));
    check(int_late.error_value().code == EX_ETIMEDOUT, "timeout(int64_t ns)");

    check(value_of(cexec::timeout(cexec::just(ex_int(7)), sch, 1h)) == 7, "the sender wins: its value");
    check(value_of(cexec::timeout(cexec::starts_on(sch, cexec::just(ex_int(9))), sch, 3600 * EX_NS_PER_S)) == 9,
          "the sender wins on the pool");

    cexec::sender work = cexec::starts_on(sch, cexec::just(ex_int(5)));
    check(value_of(cexec::timeout(work, sch, 1h)) == 5 && value_of(cexec::timeout(work, sch, 1h)) == 5,
          "a copy passed leaves the original usable");
    cexec::sender bad = cexec::timeout(std::move(work), sch, std::chrono::hours::max());
    check(!work.get() && invalid(bad, "cexec::timeout:"), "an overflowing limit: EX_EINVAL, the sender consumed");
    check(invalid(cexec::timeout(cexec::sender(), sch, 1ms), "ex_timeout"), "an empty sender: C's EX_EINVAL");
}

static void races(ex_scheduler sch) {
    std::vector<cexec::sender> v;
    v.push_back(tagged(cexec::schedule_after(sch, 1h), 1));
    v.push_back(tagged(cexec::schedule_after(sch, 1ms), 2));
    v.push_back(tagged(cexec::schedule_after(sch, 2h), 3));
    check(value_of(cexec::when_any(v)) == 2 && v.size() == 3 && v[0].get(), "when_any over a copied vector");
    check(value_of(cexec::when_any(std::move(v))) == 2, "when_any over a moved vector");
    check(invalid(cexec::when_any(std::vector<cexec::sender>{}), "ex_when_any"), "when_any of none: EX_EINVAL");

    std::vector<cexec::sender> parts;
    for (int64_t i = 1; i <= 3; i++) parts.push_back(cexec::starts_on(sch, cexec::just(ex_int(i))));
    cexec::result all = cexec::sync_wait(cexec::when_all(std::move(parts)));
    check(all.has_value() && all.size() == 3 && all.value(0).as.i + all.value(1).as.i + all.value(2).as.i == 6,
          "when_all over a vector");
    check(invalid(cexec::when_all(std::vector<cexec::sender>{}), "ex_when_all"), "when_all of none: EX_EINVAL");

    std::array<cexec::sender, 2> pair = { tagged(cexec::schedule_after(sch, 1h), 1), tagged(cexec::just(), 2) };
    check(value_of(cexec::when_any(std::move(pair))) == 2, "when_any over an array");
    cexec::result both = cexec::sync_wait(
        cexec::when_all(std::array<cexec::sender, 2>{ cexec::just(ex_int(1)), cexec::just(ex_int(2)) }));
    check(both.has_value() && both.size() == 2 && both.value(1).as.i == 2, "when_all over an array");
}

static void stop_sources(ex_scheduler sch) {
    cexec::stop_source scope, deadline;
    {
        cexec::linked_stop_source request{ scope.token(), deadline.token() };
        check(!request.stop_requested(), "a linked source starts unstopped");
        check(request.request_stop() && request.stop_requested() && !scope.stop_requested(),
              "its own stop leaves the parents alone");
    }
    {
        cexec::linked_stop_source request{ scope.token(), ex_never_stop_token() };
        // The source stops the 1 ms timer's way: an hour's timer linked to it ends stopped.
        cexec::result r = cexec::sync_wait(
            cexec::when_all(cexec::link_stop_token(cexec::schedule_after(sch, 1h), request.token()),
                            cexec::then(cexec::schedule_after(sch, 1ms), stop_it, &scope, EX_SIG0, EX_SIG0)));
        check(r.stopped() && scope.stop_requested() && request.stop_requested(),
              "a parent's stop reaches a timer through link_stop_token");
    }
    cexec::linked_stop_source late{ deadline.token(), scope.token() };
    check(late.stop_requested(), "a parent already stopped stops it at once");
    check(cexec::sync_wait(cexec::link_stop_token(cexec::schedule_after(sch, 1h), late.token())).stopped(),
          "a timer linked to a stopped token ends stopped");

    bool refused = false;
    try {
        ex_stop_token t = deadline.token();
        cexec::linked_stop_source too_many{ t, t, t, t, t };
    } catch (const cexec::error &e) {
        refused = e.code() == EX_EINVAL;
    }
    check(refused, "more than EX_STOP_LINK_MAX parents throws EX_EINVAL");
}

int main() {
    durations();
    time_points();
    {
        cexec::pool pool;
        timers(pool.scheduler());
        bad_times(pool.scheduler());
        timeouts(pool.scheduler());
        races(pool.scheduler());
        stop_sources(pool.scheduler());
    }
    return cxx_check::finish("hpp_time");
}
