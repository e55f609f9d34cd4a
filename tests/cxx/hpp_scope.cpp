// SPDX-License-Identifier: MIT
// hpp_scope.cpp - cexec/cexec.hpp's scope and parallel scheduler handles:
// associate, wrap, spawn and spawn_future with an environment override
// (cexec::env), on both scopes and on a bare token, and
// parallel_scheduler / parallel_scheduler_shutdown.  Each check fails if
// the wrapper drops, misroutes or leaks what it is given (run under the
// ASan build too).  Built and run by scripts/check-headers.sh with g++ and
// clang++, C++17 and C++20; prints "hpp_scope: N passed, 0 failed".
#include <cexec/cexec.hpp>

#include <atomic>
#include <cstdio>
#include <type_traits>

#include "cxx_check.hpp"

using cxx_check::check;

// An env hands out its environment only while it lives where it was made:
// not from a temporary (gone before the spawned work reads it), no copies.
static_assert(std::is_convertible_v<const cexec::env &, ex_env>, "an env lvalue is an ex_env");
static_assert(!std::is_convertible_v<cexec::env, ex_env>, "a temporary env gives no ex_env");
static_assert(!std::is_copy_constructible_v<cexec::env> && !std::is_move_constructible_v<cexec::env>,
              "an env stays in place");
static_assert(!std::is_move_constructible_v<cexec::simple_counting_scope>, "a scope stays in place");

namespace {

// ------------------------------------------------------------ fixtures

// An allocator that counts its blocks, over libc's.
struct counting_allocator {
    ex_allocator a;
    std::atomic<int> allocated{ 0 }, freed{ 0 };

    counting_allocator() noexcept : a() {
        a.allocate = allocate;
        a.deallocate = deallocate;
        a.ctx = this;
        a.name = "hpp_scope counting";
    }
    int live() const noexcept { return allocated.load() - freed.load(); }

    static void *allocate(void *ctx, size_t size, size_t align) {
        static_cast<counting_allocator *>(ctx)->allocated++;
        return ex_libc_allocator()->allocate(ex_libc_allocator()->ctx, size, align);
    }
    static void deallocate(void *ctx, void *p, size_t size, size_t align) {
        static_cast<counting_allocator *>(ctx)->freed++;
        ex_libc_allocator()->deallocate(ex_libc_allocator()->ctx, p, size, align);
    }
};

// What the last spawned reader saw (spawned work's values are discarded).
std::atomic<int> saw_stop{ -1 };
std::atomic<const ex_allocator *> saw_allocator{ nullptr };
std::atomic<int> joined_flag{ 0 };
std::atomic<int> saw_scheduler_is_pool{ 0 };

// in[0]: a stop token; sends 1 if stop was requested on it, else 0.
ex_error stop_requested(void *, const ex_value *in, size_t, ex_value *out) {
    int stopped = ex_stop_token_stop_requested(in[0].as.token) ? 1 : 0;
    saw_stop = stopped;
    out[0] = ex_int(stopped);
    return ex_ok();
}

ex_error record_allocator(void *, const ex_value *in, size_t, ex_value *) {
    saw_allocator = in[0].as.alloc;
    return ex_ok();
}

// ctx: the expected scheduler; in[0]: the environment's.
ex_error record_scheduler(void *ctx, const ex_value *in, size_t, ex_value *) {
    saw_scheduler_is_pool = ex_scheduler_equal(in[0].as.sched, *static_cast<const ex_scheduler *>(ctx)) ? 1 : 0;
    return ex_ok();
}

ex_error set_joined(void *, const ex_value *, size_t, ex_value *) {
    joined_flag = 1;
    return ex_ok();
}

// A sender of 1 when its stop token has stop requested, else 0.
cexec::sender reads_stop() {
    return cexec::then(cexec::sender(ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN)), stop_requested, nullptr,
                       EX_SIG(EX_T_TOKEN), EX_SIG(EX_T_INT));
}

// Records the allocator its environment answers; sends nothing.
cexec::sender reads_allocator() {
    return cexec::then(cexec::sender(ex_read_env(&ex_key_get_allocator, EX_T_ALLOC)), record_allocator, nullptr,
                       EX_SIG(EX_T_ALLOC), EX_SIG0);
}

// Records whether its environment's scheduler is expected (kept alive by
// the caller); sends nothing.
cexec::sender reads_scheduler(const ex_scheduler &expected) {
    return cexec::then(cexec::sender(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED)), record_scheduler,
                       const_cast<ex_scheduler *>(&expected), EX_SIG(EX_T_SCHED), EX_SIG0);
}

int64_t int_of(cexec::sender s) {
    cexec::result r = cexec::sync_wait(std::move(s));
    return r.has_value() && r.size() == 1 ? r.value(0).as.i : -1;
}

// The code of the cexec::error f throws, 0 if none.
template <typename F>
int thrown_code(F f) {
    try {
        f();
    } catch (const cexec::error &x) {
        return x.code();
    }
    return 0;
}

bool joins(cexec::sender join) { return cexec::sync_wait(std::move(join)).has_value(); }

// -------------------------------------------------------------- associate

void associate_checks(cexec::pool &pool) {
    cexec::counting_scope scope;
    check(int_of(scope.associate(cexec::starts_on(pool.scheduler(), cexec::just(ex_int(7))))) == 7,
          "associate: the sender's value passes");

    // The association lives with the sender: a join spawned into another
    // scope (inline scheduler: it completes on the thread that ends the
    // last association) waits until the handle is released.
    cexec::sender held = scope.associate(cexec::just());
    cexec::counting_scope watcher;
    cexec::env inline_sched(&ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler()));
    watcher.spawn(cexec::then(scope.join(), set_joined, nullptr, EX_SIG0, EX_SIG0), inline_sched);
    check(joined_flag == 0, "associate: the join waits while the associate sender lives");
    held = cexec::sender();
    check(joined_flag == 1, "associate: releasing the sender ends the association");
    check(joins(watcher.join()), "associate: the watcher joins");

    // The scope is closed (joined) now: operations complete stopped.
    cexec::result late = cexec::sync_wait(scope.associate(cexec::just(ex_int(1))));
    check(late.stopped(), "associate on a closed scope completes stopped");

    cexec::sender bad = cexec::associate(cexec::just(ex_int(1)), ex_scope_token{ nullptr });
    check(bad.status().code == EX_EINVAL, "associate with a NULL token: an invalid sender (EX_EINVAL)");
}

// ------------------------------------------------------------------- wrap

void wrap_checks() {
    cexec::counting_scope stopping;
    stopping.request_stop();
    check(int_of(stopping.wrap(reads_stop())) == 1, "wrap: a counting scope's request_stop reaches the sender");
    check(int_of(reads_stop()) == 0, "unwrapped, the same sender sees no stop");
    check(int_of(cexec::wrap(stopping.token(), reads_stop())) == 1, "wrap over a bare token");
    check(joins(stopping.join()), "wrap: nothing associated");

    cexec::simple_counting_scope simple;
    check(int_of(simple.wrap(cexec::just(ex_int(3)))) == 3, "wrap: a simple scope's is the sender itself");
    check(joins(simple.join()), "simple scope joins");

    check(cexec::wrap(ex_scope_token{ nullptr }, cexec::just()).status().code == EX_EINVAL,
          "wrap with a NULL token: an invalid sender (EX_EINVAL)");
}

// ------------------------------------------------------------------ spawn

void spawn_checks(cexec::pool &pool) {
    counting_allocator counted;
    cexec::stop_source stopped;
    stopped.request_stop();
    {
        cexec::counting_scope scope;
        cexec::env with_alloc(&counted.a);
        scope.spawn(reads_allocator(), with_alloc);
        check(saw_allocator == &counted.a, "spawn: the work sees the environment's allocator");
        check(counted.allocated >= 1, "spawn: the spawn's block comes from the environment's allocator");

        cexec::env with_token(stopped.token());
        scope.spawn(reads_stop(), with_token);
        check(saw_stop == 1, "spawn: the environment's stop token reaches the work");
        scope.spawn(reads_stop());
        check(saw_stop == 0, "spawn without an environment: the scope's token, not stopped");

        // Both, over a parent environment that names the pool's scheduler.
        ex_scheduler pool_sched = pool.scheduler();
        cexec::env on_pool(&ex_key_get_scheduler, ex_sched_value(pool_sched));
        cexec::env both(&counted.a, stopped.token(), on_pool);
        int before = counted.allocated;
        saw_stop = -1;
        saw_allocator = nullptr;
        saw_scheduler_is_pool = 0;
        // (Three works: when_all would complete stopped at once.)
        scope.spawn(reads_stop(), both);
        scope.spawn(reads_allocator(), both);
        scope.spawn(reads_scheduler(pool_sched), both);
        check(joins(scope.join()), "spawn: the scope joins");
        check(saw_stop == 1 && saw_allocator == &counted.a && counted.allocated > before,
              "spawn: allocator and stop token together");
        check(saw_scheduler_is_pool == 1, "spawn: the rest of the environment is the parent's");
        check(counted.live() == 0, "spawn: every block went back to the allocator");

        // Closed by the join: refused, and the sender is released (ASan).
        check(thrown_code([&] { scope.spawn(cexec::just(ex_int(1))); }) == EX_ESHUTDOWN,
              "spawn into a closed scope throws EX_ESHUTDOWN");
        check(thrown_code([&] { scope.spawn(cexec::just(), with_alloc); }) == EX_ESHUTDOWN,
              "spawn with an environment into a closed scope throws EX_ESHUTDOWN");
    }
    check(thrown_code([] { cexec::spawn(cexec::just(), ex_scope_token{ nullptr }); }) == EX_EINVAL,
          "spawn with a NULL token throws EX_EINVAL");
    check(thrown_code([] {
              cexec::counting_scope scope;
              cexec::spawn(cexec::sender(ex_invalid_sender(EX_EUSER + 1, "hpp_scope: invalid")), scope.token());
          }) == EX_EUSER + 1,
          "spawn of an invalid sender throws its error");
}

// ------------------------------------------------------------ spawn_future

void spawn_future_checks(cexec::pool &pool) {
    counting_allocator counted;
    cexec::stop_source stopped;
    stopped.request_stop();
    cexec::counting_scope scope;
    check(int_of(scope.spawn_future(cexec::starts_on(pool.scheduler(), cexec::just(ex_int(5))))) == 5,
          "spawn_future: the future sends the work's value");
    {
        cexec::env with_alloc(&counted.a);
        cexec::sender future = scope.spawn_future(cexec::just(ex_int(6)), with_alloc);
        check(counted.allocated >= 1, "spawn_future: the shared state comes from the environment's allocator");
        check(int_of(std::move(future)) == 6, "spawn_future with an environment: the value");
        check(counted.live() == 0, "spawn_future: the state went back once the future ended");
    }
    cexec::env with_token(stopped.token());
    check(int_of(scope.spawn_future(reads_stop(), with_token)) == 1,
          "spawn_future: the environment's stop token reaches the work");
    check(int_of(cexec::spawn_future(reads_stop(), scope.token())) == 0, "spawn_future over a bare token");

    // Released without being connected: stop requested on the work.
    cexec::sender dropped = scope.spawn_future(cexec::starts_on(pool.scheduler(), cexec::just()));
    dropped = cexec::sender();
    check(joins(scope.join()), "spawn_future: the scope joins");

    check(thrown_code([&] { (void)scope.spawn_future(cexec::just(ex_int(1))); }) == EX_ESHUTDOWN,
          "spawn_future into a closed scope throws EX_ESHUTDOWN");
    check(thrown_code([] { (void)cexec::spawn_future(cexec::just(), ex_scope_token{ nullptr }); }) == EX_EINVAL,
          "spawn_future with a NULL token throws EX_EINVAL");
}

// ------------------------------------------------- simple_counting_scope

void simple_scope_checks(cexec::pool &pool) {
    cexec::stop_source stopped;
    stopped.request_stop();
    cexec::simple_counting_scope scope;
    cexec::env with_token(stopped.token());
    saw_stop = -1;
    scope.spawn(reads_stop(), with_token);
    check(saw_stop == 1, "simple scope: spawn's environment gives the stop token");
    check(int_of(scope.spawn_future(cexec::starts_on(pool.scheduler(), cexec::just(ex_int(8))))) == 8,
          "simple scope: spawn_future");
    check(int_of(scope.associate(cexec::just(ex_int(9)))) == 9, "simple scope: associate");
    scope.close();
    check(thrown_code([&] { scope.spawn(cexec::just()); }) == EX_ESHUTDOWN, "simple scope: closed, spawn throws");
    check(joins(scope.join()), "simple scope joins");
}

// ---------------------------------------------------- parallel scheduler

ex_error shutdown_from_worker(void *, const ex_value *, size_t, ex_value *out) {
    // Caught here: an exception must not cross the C frames of the pool.
    out[0] = ex_int(thrown_code([] { cexec::parallel_scheduler_shutdown(); }));
    return ex_ok();
}

void parallel_scheduler_checks() {
    ex_scheduler par = cexec::parallel_scheduler();
    check(ex_scheduler_equal(par, ex_parallel_scheduler()), "parallel_scheduler is ex_parallel_scheduler's");
    check(ex_get_forward_progress_guarantee(par) == EX_PROGRESS_PARALLEL, "parallel_scheduler: parallel progress");
    check(int_of(cexec::starts_on(par, cexec::just(ex_int(11)))) == 11, "parallel_scheduler runs work");
    check(int_of(cexec::then(cexec::schedule(par), shutdown_from_worker, nullptr, EX_SIG0, EX_SIG(EX_T_INT))) ==
              EX_EINVAL,
          "parallel_scheduler_shutdown on its worker throws EX_EINVAL");
    check(int_of(cexec::starts_on(par, cexec::just(ex_int(12)))) == 12, "... and did nothing");

    check(thrown_code([] { cexec::parallel_scheduler_shutdown(); }) == 0, "parallel_scheduler_shutdown");
    cexec::result refused = cexec::sync_wait(cexec::schedule(cexec::parallel_scheduler()));
    check(refused.disposition() == EX_DISP_ERROR && refused.error_value().code == EX_ESHUTDOWN,
          "after shutdown the parallel scheduler refuses work (EX_ESHUTDOWN)");
    check(thrown_code([] { cexec::parallel_scheduler_shutdown(); }) == 0, "parallel_scheduler_shutdown again");
}

}  // namespace

// Every sender, scope state and spawn block that names no allocator of
// its own: a wrapper that keeps a reference too many leaves one live.
counting_allocator defaults;

int main() {
    ex_set_default_allocator(&defaults.a);
    {
        cexec::pool pool;
        associate_checks(pool);
        wrap_checks();
        spawn_checks(pool);
        spawn_future_checks(pool);
        simple_scope_checks(pool);
    }
    check(defaults.allocated > 0 && defaults.live() == 0, "nothing left of the default allocator's blocks");
    parallel_scheduler_checks();  // last: it shuts the parallel scheduler down
    return cxx_check::finish("hpp_scope");
}
