// SPDX-License-Identifier: MIT
// domain.cpp - cexec/domain.h used from C++: a domain built in C++ (a
// struct ex_domain whose transform_sender is a static function), named by
// a scheduler's vtable and by an environment (ex_domain_value), replaces a
// then sender late, under starts_on and write_env, and early, when the
// then is built on the scheduler's schedule.  Built and run by
// scripts/check-headers.sh with g++ and clang++, C++17 and C++20; prints
// "domain: N passed, 0 failed".
#include <cexec/cexec.hpp>

#include "cxx_check.hpp"

using cxx_check::check;

namespace {

int early_offers, late_offers;

ex_error zero(void *, const ex_value *, size_t, ex_value *out) {
    out[0] = ex_int(0);
    return ex_ok();
}

ex_error add_one(void *, const ex_value *in, size_t, ex_value *out) {
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

// Replaces a then by a just of 200 at connect (late), 100 when it is
// built (early; env NULL then).
ex_sender *replace_then(const ex_domain *, ex_scheduler, ex_sender *s, const ex_env *env) {
    if (ex_sender_tag(s) != &ex_tag_then) return nullptr;
    (env ? late_offers : early_offers)++;
    return ex_just(ex_int(env ? 200 : 100));
}

const ex_tag *const thens[] = { &ex_tag_then, nullptr };
const ex_domain then_domain = { "cxx_then", thens, replace_then, nullptr, nullptr };

// The inline scheduler, but in then_domain.
ex_scheduler_vtable domain_vt;
ex_scheduler in_domain() {
    ex_scheduler sch = ex_inline_scheduler();
    domain_vt = *sch.vt;
    domain_vt.name = "cxx_domain_scheduler";
    domain_vt.domain = &then_domain;
    sch.vt = &domain_vt;
    return sch;
}

cexec::sender plus_one(cexec::sender s) {
    return cexec::then(std::move(s), add_one, nullptr, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

int64_t int_of(cexec::sender s) {
    cexec::result r = cexec::sync_wait(std::move(s));
    return r.has_value() && r.size() == 1 ? r.value(0).as.i : -1;
}

void checks() {
    ex_scheduler sch = in_domain();
    check(ex_scheduler_domain(sch) == &then_domain, "the scheduler names the domain");
    check(ex_scheduler_domain(ex_inline_scheduler()) == nullptr, "the inline scheduler has none");

    cexec::sender t = plus_one(cexec::just(ex_int(1)));
    check(ex_sender_tag(t.get()) == &ex_tag_then && early_offers == 0, "a then on just is not offered when built");
    check(int_of(cexec::starts_on(ex_inline_scheduler(), t)) == 2, "starts_on the inline scheduler runs the then");
    check(int_of(cexec::starts_on(sch, t)) == 200, "starts_on the domain's scheduler replaces the then late");
    check(late_offers == 1 && early_offers == 0, "offered once, at connect");

    // Named by an environment: ex_domain_value from C++.
    ex_value named = ex_domain_value(&then_domain);
    check(named.type == EX_T_PTR && named.as.p == &then_domain, "ex_domain_value holds the domain");
    check(int_of(cexec::sender(ex_write_env(t.release(), &ex_key_get_domain, named))) == 200,
          "a domain named by get_domain replaces the then late");
    check(late_offers == 2, "offered at connect again");

    // Early: the then's input completes on the domain's scheduler.
    cexec::sender early = cexec::then(cexec::schedule(sch), zero, nullptr, EX_SIG0, EX_SIG(EX_T_INT));
    check(early_offers == 1 && ex_sender_tag(early.get()) == nullptr,
          "a then on the scheduler's schedule is replaced when built");
    check(int_of(std::move(early)) == 100, "... by the early replacement");
}

}  // namespace

int main() {
    ex_set_default_allocator(ex_libc_allocator());  // counted: the replacements must be released too
    checks();
    ex_alloc_stats st;
    check(ex_allocator_stats(ex_libc_allocator(), &st).code == EX_OK && st.allocations > 0 &&
              st.allocations == st.frees,
          "every sender was released");
    return cxx_check::finish("domain");
}
