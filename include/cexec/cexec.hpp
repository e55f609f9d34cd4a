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
// Errors: constructors and sync_wait's value accessors throw cexec::error
// (code() is the ex_error code); nothing else throws.  The handles are
// move-only except cexec::sender, whose copies share the sender (a
// reference each, ex_sender_retain).
#ifndef CEXEC_CEXEC_HPP
#define CEXEC_CEXEC_HPP

#include <cexec/cexec.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

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

// A counting scope; its destructor requires it to be joined (EX_EBUSY
// otherwise aborts, as for pool).
class counting_scope {
public:
    counting_scope() {
        ex_error e = ex_counting_scope_init(&s_);
        if (e.code) throw error(e);
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
    // Starts s as work of the scope; throws cexec::error when refused.
    void spawn(sender s) {
        ex_error e = ex_spawn(s.release(), token());
        if (e.code) throw error(e);
    }
    sender join() noexcept { return sender(ex_counting_scope_join(&s_)); }
    void request_stop() noexcept { ex_counting_scope_request_stop(&s_); }
    ex_counting_scope *get() noexcept { return &s_; }

private:
    ex_counting_scope s_;
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

}  // namespace cexec

#endif
