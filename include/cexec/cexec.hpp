// SPDX-License-Identifier: MIT
// cexec/cexec.hpp - optional C++17 handles over the C API: ownership by
// RAII, variadic helpers.  Header-only; the C API stays the interface
// (every handle gives its C pointer with get(), and release() hands
// ownership to a C call).
//
//   cexec::pool pool;                              // ex_pool_create, throws cexec::error
//   cexec::result r = cexec::sync_wait(cexec::when_all(
//       cexec::starts_on(pool.scheduler(), cexec::just(ex_int(40))), cexec::just(ex_int(2))));
//   int64_t sum = r.value(0).as.i + r.value(1).as.i;   // r frees its values
//
//   cexec::result late = cexec::sync_wait(cexec::timeout(work, pool.scheduler(), std::chrono::milliseconds(50)));
//   bool timed_out = late.disposition() == EX_DISP_ERROR && late.error_value().code == EX_ETIMEDOUT;
//
// Errors: constructors, sync_wait's value accessors and the calls that
// start work or end a resource when told to (spawn, spawn_future,
// parallel_scheduler_shutdown) throw cexec::error (code() is the ex_error
// code) when refused; nothing else throws: a builder given bad input (a
// duration too long for int64_t nanoseconds, a NULL scope token, say)
// returns an invalid sender, as the C builders do.  The handles are
// move-only except cexec::sender, whose copies share the sender (a
// reference each, ex_sender_retain); the scopes, the stop sources and
// cexec::env are neither copied nor moved (their tokens and environments
// point to them).
//
// Time: cexec::now() and every int64_t deadline are ex_now()'s clock
// (CLOCK_MONOTONIC, nanoseconds).  The timed builders also take any
// std::chrono::duration and std::chrono::time_point; see "Time" below.
#ifndef CEXEC_CEXEC_HPP
#define CEXEC_CEXEC_HPP

#include <cexec/cexec.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <ratio>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cexec {

// An ex_error as an exception: what() is its message, code() its code.
class error : public std::runtime_error {
public:
    explicit error(ex_error e) : std::runtime_error(e.msg ? e.msg : "cexec error"), code_(e.code) {}
    int code() const noexcept { return code_; }

private:
    int code_;
};

// Owns one reference to a sender.  Builders below take senders by value
// and consume them, as the C builders do.
class sender {
public:
    // Takes ownership of s (one reference); s may be NULL (an empty handle).
    explicit sender(ex_sender *s = nullptr) noexcept : s_(s) {}
    sender(const sender &o) noexcept : s_(ex_sender_retain(o.s_)) {}
    sender(sender &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
    sender &operator=(sender o) noexcept {
        std::swap(s_, o.s_);
        return *this;
    }
    ~sender() { ex_sender_release(s_); }

    ex_sender *get() const noexcept { return s_; }
    // Gives up ownership: for a C function that consumes the sender.
    ex_sender *release() noexcept { return std::exchange(s_, nullptr); }
    // EX_OK, or why a builder refused its input (ex_sender_status).
    ex_error status() const noexcept { return ex_sender_status(s_); }

private:
    ex_sender *s_;
};

// The result of sync_wait; owns the values' deep copies.
class result {
public:
    explicit result(ex_result r) noexcept : r_(r) {}
    result(result &&o) noexcept : r_(o.r_) { o.r_.nested = nullptr; o.r_.n = 0; o.r_.error = ex_ok(); }
    result(const result &) = delete;
    result &operator=(const result &) = delete;
    ~result() { ex_result_destroy(&r_); }

    ex_disposition disposition() const noexcept { return r_.disposition; }
    bool has_value() const noexcept { return r_.disposition == EX_DISP_VALUE; }
    bool stopped() const noexcept { return r_.disposition == EX_DISP_STOPPED; }
    const ex_error &error_value() const noexcept { return r_.error; }
    size_t size() const noexcept { return r_.n; }
    // Value i; throws cexec::error with the result's error (or EX_ECANCELED
    // when stopped, EX_EINVAL for an index out of range).
    const ex_value &value(size_t i) const {
        if (r_.disposition == EX_DISP_ERROR) throw error(r_.error);
        if (r_.disposition == EX_DISP_STOPPED) throw error(ex_err(EX_ECANCELED, "cexec::result: the work was stopped"));
        if (i >= r_.n) throw error(ex_err(EX_EINVAL, "cexec::result: no such value"));
        return r_.values[i];
    }
    const ex_result &get() const noexcept { return r_; }

private:
    ex_result r_;
};

// A work-stealing pool; destroyed (shut down and joined) with the handle.
class pool {
public:
    // cfg NULL: the defaults.  Throws cexec::error (ex_pool_create's errors).
    explicit pool(const ex_pool_config *cfg = nullptr) {
        ex_error e = ex_pool_create(cfg, &p_);
        if (e.code) throw error(e);
    }
    pool(pool &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
    pool(const pool &) = delete;
    pool &operator=(const pool &) = delete;
    // ex_pool_destroy; its only error (EX_EBUSY: destroyed from inside the
    // pool's own work) is a bug that cannot be reported from a destructor.
    ~pool() {
        if (!p_) return;
        ex_error e = ex_pool_destroy(p_);
        if (e.code) {
            std::fprintf(stderr, "cexec::pool: %s\n", e.msg);
            std::abort();
        }
    }

    ex_scheduler scheduler() const noexcept { return ex_pool_scheduler(p_); }
    unsigned size() const noexcept { return ex_pool_size(p_); }
    ex_pool *get() const noexcept { return p_; }

private:
    ex_pool *p_ = nullptr;
};

namespace detail {

// Throws e as cexec::error and releases the reference to it the C call
// handed over (an owned error's message is copied first).
[[noreturn]] inline void throw_given(ex_error e) {
    error x(e);
    ex_error_release(e);
    throw x;
}

}  // namespace detail

// The process's parallel scheduler (ex_parallel_scheduler, C++26
// get_parallel_scheduler): the first call creates its pool (or starts
// using the backend installed before); every call returns an equal
// handle, which stays usable for the life of the process (nothing to
// release).  Never throws: when the pool cannot be created, a handle
// whose work fails with the reason (the next call tries again).
inline ex_scheduler parallel_scheduler() noexcept { return ex_parallel_scheduler(); }

// ex_parallel_scheduler_shutdown: ends the parallel scheduler for good
// (queued work completes set_stopped, running items are waited for, the
// workers joined); from then on every handle refuses work with
// EX_ESHUTDOWN.  For programs that end it themselves (before a leak check,
// to write the pool's trace); idempotent.  Throws cexec::error (EX_EINVAL,
// nothing done) when called on one of its workers, which would wait for
// itself, or in a fork() child on the parent's pool.
inline void parallel_scheduler_shutdown() {
    ex_error e = ex_parallel_scheduler_shutdown();
    if (e.code) detail::throw_given(e);
}

// An environment of one or two keys over a parent environment
// (ex_env_pair): what spawn and spawn_future take to override the work's
// allocator and stop token, among others.  Its ex_env points into it, so
// it stays where it was made: neither copied nor moved, and get() (or the
// conversion to ex_env) is refused on a temporary, which would be gone
// before the work that reads it.  It, the parent's nodes and what the
// values point to (the allocator, the stop token's source) must outlive
// every use: for spawned work, until the work completed (the scope's join
// tells).  Nothing to destroy; nothing throws.
class env {
public:
    env(const ex_key *key, ex_value value, ex_env parent = ex_env_empty()) noexcept {
        ex_env_pair_init(&p_, key, value, parent);
    }
    env(const ex_key *key, ex_value value, const ex_key *key2, ex_value value2,
        ex_env parent = ex_env_empty()) noexcept {
        ex_env_pair_init2(&p_, key, value, key2, value2, parent);
    }
    // get_allocator answers a (not NULL).
    explicit env(const ex_allocator *a, ex_env parent = ex_env_empty()) noexcept
        : env(&ex_key_get_allocator, ex_alloc_value(a), parent) {}
    // get_stop_token answers t.
    explicit env(ex_stop_token t, ex_env parent = ex_env_empty()) noexcept
        : env(&ex_key_get_stop_token, ex_token_value(t), parent) {}
    // Both.
    env(const ex_allocator *a, ex_stop_token t, ex_env parent = ex_env_empty()) noexcept
        : env(&ex_key_get_allocator, ex_alloc_value(a), &ex_key_get_stop_token, ex_token_value(t), parent) {}
    env(const env &) = delete;
    env &operator=(const env &) = delete;

    ex_env get() const & noexcept { return ex_env_of_pair(&p_); }
    ex_env get() const && = delete;
    operator ex_env() const & noexcept { return get(); }
    operator ex_env() const && = delete;

private:
    ex_env_pair p_;
};

// ------------------------------------------------------------------ scopes
//
// The forms over a token (ex_scope_token: any scope's, valid while its
// scope is), for code given a token rather than a scope; the scope
// handles below have them as methods.  All of them consume s (a refused
// s is released, never started).

// ex_associate ([exec.associate]): s, run as work of t's scope.  While the
// sender, or an operation connected from it, holds the association, the
// scope's join waits: release the handle (and destroy its operations) to
// let it complete.  A closed scope: its operations complete set_stopped.
// Bad input (a NULL token, an invalid s): an invalid sender (EX_EINVAL,
// s's own error), as in C; never throws.
inline sender associate(sender s, ex_scope_token t) { return sender(ex_associate(s.release(), t)); }

// ex_scope_token_wrap (token.wrap(s)): what associate and spawn run in
// place of s.  A counting scope's: s run with a stop token that the
// scope's request_stop stops as well as the receiver's; a simple scope's:
// s itself.  A NULL token: an invalid sender (EX_EINVAL); never throws.
inline sender wrap(ex_scope_token t, sender s) { return sender(ex_scope_token_wrap(t, s.release())); }

// ex_spawn_env ([exec.spawn]): starts s now as work of t's scope; its
// values are discarded, its error goes to the scope's join.  e overrides
// the environment the work sees: its allocator holds the spawn's block,
// its stop token reaches the work (for a counting scope linked with the
// scope's request_stop); scope.h says how.  e's nodes, allocator and
// stop source must stay valid until the work completed (a cexec::env
// kept alive till the join).  Throws cexec::error when refused
// (EX_ESHUTDOWN: the scope is closed; EX_ENOMEM; EX_EINVAL: a NULL token,
// a connect failure; an invalid s: its own error).
inline void spawn(sender s, ex_scope_token t, ex_env e = ex_env_empty()) {
    ex_error err = ex_spawn_env(s.release(), t, e);
    if (err.code) detail::throw_given(err);
}

// ex_spawn_future_env ([exec.spawn.future]): starts s now as work of t's
// scope and returns a sender of its result (connect it once; releasing it
// unconnected requests stop on s).  e as for spawn; its allocator must
// also outlive the returned sender.  Throws cexec::error when s cannot be
// started (the errors of spawn), as spawn does, where C returns an
// invalid sender carrying the error.
inline sender spawn_future(sender s, ex_scope_token t, ex_env e = ex_env_empty()) {
    sender future(ex_spawn_future_env(s.release(), t, e));
    ex_error err = future.status();  // borrowed from the invalid sender
    if (err.code) throw error(err);
    return future;
}

namespace detail {

// What both scope handles do through their token (Scope::token()).
template <typename Scope>
class scope_ops {
public:
    // Starts s as work of the scope (cexec::spawn); e: no override by
    // default.  Throws cexec::error when refused.
    void spawn(sender s, ex_env e = ex_env_empty()) { cexec::spawn(std::move(s), my_token(), e); }
    // A sender of s's result, s started now (cexec::spawn_future).  Throws
    // cexec::error when s cannot be started.
    sender spawn_future(sender s, ex_env e = ex_env_empty()) {
        return cexec::spawn_future(std::move(s), my_token(), e);
    }
    // s as work of the scope (cexec::associate); never throws.
    sender associate(sender s) { return cexec::associate(std::move(s), my_token()); }
    // token.wrap(s) (cexec::wrap); never throws.
    sender wrap(sender s) { return cexec::wrap(my_token(), std::move(s)); }

private:
    ex_scope_token my_token() noexcept { return static_cast<Scope *>(this)->token(); }
};

}  // namespace detail

// A counting scope ([exec.scope.counting]): its destructor requires it to
// be joined, or never used (EX_EBUSY otherwise aborts, as for pool).
// spawn, spawn_future, associate and wrap: see detail::scope_ops.
class counting_scope : public detail::scope_ops<counting_scope> {
public:
    // Throws cexec::error (ex_counting_scope_init's EX_EAGAIN).
    counting_scope() {
        ex_error e = ex_counting_scope_init(&s_);
        if (e.code) detail::throw_given(e);
    }
    counting_scope(const counting_scope &) = delete;
    counting_scope &operator=(const counting_scope &) = delete;
    ~counting_scope() {
        ex_error e = ex_counting_scope_destroy(&s_);
        if (e.code) {
            std::fprintf(stderr, "cexec::counting_scope: %s\n", e.msg);
            std::abort();
        }
    }

    ex_scope_token token() noexcept { return ex_counting_scope_token(&s_); }
    // Completes once no association is left (set_value, or the first error
    // of spawned work); closes the scope.
    sender join() noexcept { return sender(ex_counting_scope_join(&s_)); }
    // No new association from now on: spawn throws EX_ESHUTDOWN.
    void close() noexcept { ex_counting_scope_close(&s_); }
    // Requests stop on the scope's work, now and later.
    void request_stop() noexcept { ex_counting_scope_request_stop(&s_); }
    ex_counting_scope *get() noexcept { return &s_; }

private:
    ex_counting_scope s_;
};

// A simple counting scope ([exec.scope.simple.counting]): a counting scope
// without request_stop (its work sees the stop token its environment
// gives, spawn's e).  Joined before it is destroyed, as counting_scope.
class simple_counting_scope : public detail::scope_ops<simple_counting_scope> {
public:
    // Throws cexec::error (ex_simple_counting_scope_init's EX_EAGAIN).
    simple_counting_scope() {
        ex_error e = ex_simple_counting_scope_init(&s_);
        if (e.code) detail::throw_given(e);
    }
    simple_counting_scope(const simple_counting_scope &) = delete;
    simple_counting_scope &operator=(const simple_counting_scope &) = delete;
    ~simple_counting_scope() {
        ex_error e = ex_simple_counting_scope_destroy(&s_);
        if (e.code) {
            std::fprintf(stderr, "cexec::simple_counting_scope: %s\n", e.msg);
            std::abort();
        }
    }

    ex_scope_token token() noexcept { return ex_simple_counting_scope_token(&s_); }
    sender join() noexcept { return sender(ex_simple_counting_scope_join(&s_)); }
    void close() noexcept { ex_simple_counting_scope_close(&s_); }
    ex_simple_counting_scope *get() noexcept { return &s_; }

private:
    ex_simple_counting_scope s_;
};

// An in-place stop source (ex_stop_source).  Its tokens point to it, so it
// stays where it was made: neither copied nor moved; they must not outlive
// it.  Nothing to destroy.
class stop_source {
public:
    stop_source() noexcept { ex_stop_source_init(&s_); }
    stop_source(const stop_source &) = delete;
    stop_source &operator=(const stop_source &) = delete;

    ex_stop_token token() noexcept { return ex_stop_source_token(&s_); }
    // Runs the registered callbacks on this thread; true for the first request.
    bool request_stop() noexcept { return ex_stop_source_request_stop(&s_); }
    bool stop_requested() const noexcept { return ex_stop_source_stop_requested(&s_); }
    ex_stop_source *get() noexcept { return &s_; }

private:
    ex_stop_source s_;
};

// A stop source stopped when any of its parent tokens is, or by its own
// request_stop (ex_linked_stop_source: a request's own source under its
// scope's and its deadline's).  At most EX_STOP_LINK_MAX parents, linked
// without allocating; a parent already stopped stops it at once.  The
// parents' sources must outlive it.  The destructor unlinks it
// (ex_linked_stop_source_destroy: it waits for a parent's request that is
// running its callbacks on another thread).  Fixed in place like
// stop_source.  Throws cexec::error (EX_EINVAL) for too many parents.
class linked_stop_source {
public:
    explicit linked_stop_source(std::initializer_list<ex_stop_token> parents) {
        ex_error e = ex_linked_stop_source_init(&l_, parents.begin(), parents.size());
        if (e.code) throw error(e);  // l_ is then unlinked: nothing to undo
    }
    linked_stop_source(const linked_stop_source &) = delete;
    linked_stop_source &operator=(const linked_stop_source &) = delete;
    ~linked_stop_source() { ex_linked_stop_source_destroy(&l_); }

    ex_stop_token token() noexcept { return ex_linked_stop_source_token(&l_); }
    // Stops this source only (not its parents); true for the first request.
    bool request_stop() noexcept { return ex_linked_stop_source_request_stop(&l_); }
    bool stop_requested() const noexcept { return ex_linked_stop_source_stop_requested(&l_); }
    ex_linked_stop_source *get() noexcept { return &l_; }

private:
    ex_linked_stop_source l_;
};

// ---------------------------------------------------------------- builders

inline sender just(std::initializer_list<ex_value> v = {}) { return sender(ex_just_n(v.begin(), v.size())); }
template <typename... V>
sender just(ex_value first, V... rest) {
    return just({ first, rest... });
}
inline sender schedule(ex_scheduler sch) { return sender(ex_schedule(sch)); }
inline sender starts_on(ex_scheduler sch, sender s) { return sender(ex_starts_on(sch, s.release())); }
inline sender continues_on(sender s, ex_scheduler sch) { return sender(ex_continues_on(s.release(), sch)); }
inline sender then(sender s, ex_then_fn fn, void *ctx, ex_sig in, ex_sig out) {
    return sender(ex_then(s.release(), fn, ctx, in, out));
}
template <typename... S>
sender when_all(S... s) {
    static_assert(sizeof...(S) > 0, "cexec::when_all: at least one sender");
    ex_sender *children[] = { s.release()... };
    return sender(ex_when_all_n(children, sizeof...(S)));
}
template <typename... S>
sender when_any(S... s) {
    static_assert(sizeof...(S) > 0, "cexec::when_any: at least one sender");
    ex_sender *children[] = { s.release()... };
    return sender(ex_when_any_n(children, sizeof...(S)));
}
inline sender stop_when(sender s, sender trigger) { return sender(ex_stop_when(s.release(), trigger.release())); }
// Runs s to completion on this thread (ex_sync_wait).
inline result sync_wait(sender s) { return result(ex_sync_wait(s.release())); }

namespace detail {

// Hands the senders to an n-ary C builder (ex_when_all_n, ex_when_any_n).
// The handles give up their references only once the array exists: without
// memory for it they release them themselves and the result is EX_ENOMEM.
template <typename Build>
sender from_vector(std::vector<sender> &children, Build build, const char *no_memory) {
    size_t n = children.size();
    std::unique_ptr<ex_sender *[]> raw(new (std::nothrow) ex_sender *[n ? n : 1]);
    if (!raw) return sender(ex_invalid_sender(EX_ENOMEM, no_memory));
    for (size_t i = 0; i < n; i++) raw[i] = children[i].release();
    return sender(build(raw.get(), n));
}

}  // namespace detail

// when_all and when_any over a number of senders known at run time; the
// vector's senders are consumed (pass std::move(v), or a copy of v to keep
// it: copies share the senders).  An empty vector: an invalid sender
// (EX_EINVAL), as from the C builders; no memory for the array: EX_ENOMEM.
inline sender when_all(std::vector<sender> children) {
    return detail::from_vector(children, ex_when_all_n, "cexec::when_all: no memory for the senders");
}
inline sender when_any(std::vector<sender> children) {
    return detail::from_vector(children, ex_when_any_n, "cexec::when_any: no memory for the senders");
}
// ... and over a std::array (nothing allocated).
template <size_t N>
sender when_all(std::array<sender, N> children) {
    static_assert(N > 0, "cexec::when_all: at least one sender");
    ex_sender *raw[N];
    for (size_t i = 0; i < N; i++) raw[i] = children[i].release();
    return sender(ex_when_all_n(raw, N));
}
template <size_t N>
sender when_any(std::array<sender, N> children) {
    static_assert(N > 0, "cexec::when_any: at least one sender");
    ex_sender *raw[N];
    for (size_t i = 0; i < N; i++) raw[i] = children[i].release();
    return sender(ex_when_any_n(raw, N));
}

// s, run with a stop token that is stopped when its receiver's is or when
// extra is (ex_link_stop_token).  extra's source must outlive every
// operation of the sender.
inline sender link_stop_token(sender s, ex_stop_token extra) { return sender(ex_link_stop_token(s.release(), extra)); }

// -------------------------------------------------------------------- time
//
// The int64_t forms are the C calls.  The std::chrono forms convert:
//   - a duration to nanoseconds rounded up (a timer is never early: 1.5 ns
//     waits 2 ns), exactly for any integer Rep and period, and for a
//     floating-point Rep;
//   - a duration that does not fit in int64_t nanoseconds (about 292
//     years: hours::max(), an infinite or NaN double) is an error, not
//     clamped: the builder returns an invalid sender with EX_EINVAL naming
//     it.  The C builders refuse a duration that overflows the clock the
//     same way, and a clamp would turn a garbage or sentinel duration into
//     a timer that silently never fires.  A negative one goes on to C,
//     which refuses it too (EX_EINVAL);
//   - a time point of std::chrono::steady_clock is taken as it is where
//     steady_clock is ex_now()'s clock, CLOCK_MONOTONIC (the standard does
//     not promise it; see detail::steady_clock_is_now_clock, which
//     tests/cxx/hpp_time.cpp checks against ex_now()); a time point
//     of another clock (system_clock, ...), or of steady_clock elsewhere, by
//     its distance from that clock's now(), measured when the sender is
//     built: a later change of the wall clock does not move the deadline;
//   - a time point in the past, however far (time_point::min()), completes
//     at once; one beyond int64_t nanoseconds of the clock is an error
//     (EX_EINVAL) as above.

// CLOCK_MONOTONIC now, in nanoseconds (ex_now).
inline int64_t now() noexcept { return ex_now(); }

namespace detail {

// Whether std::chrono::steady_clock reads CLOCK_MONOTONIC, as ex_now()
// does.  On Linux: libstdc++'s steady_clock::now() calls
// clock_gettime(CLOCK_MONOTONIC) when it was configured with
// _GLIBCXX_USE_CLOCK_MONOTONIC (c++config.h; otherwise it falls back to
// system_clock), and libc++'s calls clock_gettime(CLOCK_MONOTONIC) on
// every POSIX-timers platform but Apple's (CLOCK_MONOTONIC_RAW there);
// both count from the clock's own zero in nanoseconds.  Elsewhere the
// conversion goes by offset from now().
#if defined(__linux__) && (defined(_GLIBCXX_USE_CLOCK_MONOTONIC) || defined(_LIBCPP_VERSION))
inline constexpr bool steady_clock_is_now_clock = true;
#else
inline constexpr bool steady_clock_is_now_clock = false;
#endif

constexpr int64_t ns_min = std::numeric_limits<int64_t>::min();
constexpr int64_t ns_max = std::numeric_limits<int64_t>::max();

// a + b; false (sum saturated) when it overflows.
inline bool add_ns(int64_t a, int64_t b, int64_t &sum) noexcept {
    if (b > 0 ? a > ns_max - b : a < ns_min - b) {
        sum = b > 0 ? ns_max : ns_min;
        return false;
    }
    sum = a + b;
    return true;
}

// a - b; false (difference saturated) when it overflows.
inline bool sub_ns(int64_t a, int64_t b, int64_t &diff) noexcept {
    if (b < 0 ? a > ns_max + b : a < ns_min + b) {
        diff = b < 0 ? ns_max : ns_min;
        return false;
    }
    diff = a - b;
    return true;
}

// d in nanoseconds, rounded up; false (ns saturated to INT64_MIN or
// INT64_MAX by d's sign, INT64_MAX for NaN) when it does not fit.
template <typename Rep, typename Period>
bool to_ns(std::chrono::duration<Rep, Period> d, int64_t &ns) noexcept {
    using per_tick = std::ratio_divide<Period, std::nano>;  // nanoseconds in a tick
    constexpr intmax_t num = per_tick::num, den = per_tick::den;
    if constexpr (std::is_floating_point_v<Rep>) {
        long double x = std::ceil(static_cast<long double>(d.count()) * num / den);
        bool fits = x >= -0x1p63L && x < 0x1p63L;  // false for NaN
        ns = fits ? static_cast<int64_t>(x) : x < 0 ? ns_min : ns_max;
        return fits;
    } else {
        static_assert(std::is_integral_v<Rep> && sizeof(Rep) <= sizeof(intmax_t),
                      "cexec: a duration's Rep must be a standard integer or floating-point type");
        static_assert(num <= INTMAX_MAX / den, "cexec: a duration's period has too large terms to convert");
        if constexpr (std::is_unsigned_v<Rep>) {
            if (d.count() > static_cast<uintmax_t>(INTMAX_MAX)) {
                ns = ns_max;
                return false;
            }
        }
        intmax_t count = static_cast<intmax_t>(d.count());
        // count * num / den as whole ticks of den plus the rest, rounded up.
        intmax_t q = count / den, rest = count % den;
        if (q > ns_max / num || q < ns_min / num) {
            ns = q > 0 ? ns_max : ns_min;
            return false;
        }
        intmax_t part = rest * num / den + (rest > 0 && rest * num % den != 0);
        return add_ns(static_cast<int64_t>(q * num), static_cast<int64_t>(part), ns);
    }
}

// For a value that saturated on its way to a deadline: a time point in
// the past (deadline 0: at once) or beyond int64_t nanoseconds (false).
inline bool past_or_beyond(int64_t saturated, int64_t &ns) noexcept {
    if (saturated > 0) return false;
    ns = 0;
    return true;
}

// tp as a deadline on ex_now()'s clock: 0 for a time point in the past
// (however far); false when it lies beyond int64_t nanoseconds.  Not
// noexcept: a user's Clock::now() may throw (the standard clocks' do not).
template <typename Clock, typename Duration>
bool deadline_ns(std::chrono::time_point<Clock, Duration> tp, int64_t &ns) {
    int64_t at;
    if (!to_ns(tp.time_since_epoch(), at)) return past_or_beyond(at, ns);
    if constexpr (!(steady_clock_is_now_clock && std::is_same_v<Clock, std::chrono::steady_clock>)) {
        int64_t clock_now, left;
        if (!to_ns(Clock::now().time_since_epoch(), clock_now)) return false;  // a clock too far from its zero
        if (!sub_ns(at, clock_now, left)) return past_or_beyond(left, ns);
        if (!add_ns(ex_now(), left, at)) return past_or_beyond(at, ns);
    }
    ns = at < 0 ? 0 : at;
    return true;
}

}  // namespace detail

// ex_schedule_at: completes with no value on sch's resource once now()
// reaches deadline_ns (at once for one already past); set_stopped on a
// stop request before then.  A negative deadline, or a scheduler without a
// clock: an invalid sender (EX_EINVAL, EX_ENOTSUP).
inline sender schedule_at(ex_scheduler sch, int64_t deadline_ns) { return sender(ex_schedule_at(sch, deadline_ns)); }
// ... at a std::chrono time point (converted as "Time" says).
template <typename Clock, typename Duration>
sender schedule_at(ex_scheduler sch, std::chrono::time_point<Clock, Duration> deadline) {
    int64_t ns;
    if (!detail::deadline_ns(deadline, ns))
        return sender(ex_invalid_sender(EX_EINVAL, "cexec::schedule_at: the deadline is beyond int64_t nanoseconds"));
    return schedule_at(sch, ns);
}

// ex_schedule_after: as schedule_at, duration_ns after each operation
// starts.  Negative, or overflowing the clock: EX_EINVAL.
inline sender schedule_after(ex_scheduler sch, int64_t duration_ns) {
    return sender(ex_schedule_after(sch, duration_ns));
}
// ... after a std::chrono duration (converted as "Time" says).
template <typename Rep, typename Period>
sender schedule_after(ex_scheduler sch, std::chrono::duration<Rep, Period> duration) {
    int64_t ns;
    if (!detail::to_ns(duration, ns))
        return sender(ex_invalid_sender(EX_EINVAL, "cexec::schedule_after: the duration does not fit in int64_t nanoseconds"));
    return schedule_after(sch, ns);
}

// ex_timeout: s with a deadline duration_ns after the operation starts,
// timed on sch.  s's completion if it comes first; else stop is requested
// on s, and unless s still completes with a value the result is an error
// with code EX_ETIMEDOUT (result::value throws it as cexec::error).
// set_stopped only ever comes from s.  Consumes s (released with the
// invalid sender on bad input: EX_EINVAL, EX_ENOTSUP, as in C).
inline sender timeout(sender s, ex_scheduler sch, int64_t duration_ns) {
    return sender(ex_timeout(s.release(), sch, duration_ns));
}
// ... with a std::chrono duration (converted as "Time" says).
template <typename Rep, typename Period>
sender timeout(sender s, ex_scheduler sch, std::chrono::duration<Rep, Period> limit) {
    int64_t ns;
    if (!detail::to_ns(limit, ns))  // s is released with its handle
        return sender(ex_invalid_sender(EX_EINVAL, "cexec::timeout: the duration does not fit in int64_t nanoseconds"));
    return timeout(std::move(s), sch, ns);
}

}  // namespace cexec

#endif
