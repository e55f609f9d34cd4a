// SPDX-License-Identifier: MIT
// names.cpp - stage names from C++: the _named builders name their stage
// in messages; the plain names are the functions (no macro in C++, so a
// lambda with commas in its body passes), which name none.  Built and run
// by scripts/check-headers.sh like macros.cpp; prints
// "names: N passed, 0 failed".
#include <cexec/cexec.h>

#include <cstring>

#include "cxx_check.hpp"

#if defined(ex_then) || defined(ex_upon_error) || defined(ex_upon_stopped) || defined(ex_let_value) ||   \
    defined(ex_let_value_borrowed) || defined(ex_let_error) || defined(ex_let_stopped) || defined(ex_bulk) || \
    defined(ex_bulk_grain) || defined(ex_bulk_chunked) || defined(ex_bulk_unchunked)
#error "the stage-naming macros are for C only"
#endif

using cxx_check::add;
using cxx_check::check;

static bool status_is(ex_sender *s, const char *msg) {
    ex_error e = ex_sender_status(s);
    bool ok = e.code == EX_EINVAL && e.msg && std::strcmp(e.msg, msg) == 0;
    if (!ok) std::fprintf(stderr, "got: %s\n", e.msg ? e.msg : "(none)");
    ex_sender_release(s);
    return ok;
}

static ex_sender *just_str(void *, const ex_value *, size_t) { return ex_just(ex_str("x")); }

static ex_error fails_quietly(void *, size_t, const ex_value *, size_t) {
    ex_error e = ex_ok();
    e.code = EX_EUSER;
    return e;
}

int main() {
    check(status_is(ex_then_named(ex_just(ex_int(1), ex_str("x")), add, nullptr, EX_SIG(EX_T_INT, EX_T_INT),
                                  EX_SIG(EX_T_INT), "sum"),
                    "ex_then(sum): the input sender sends (int, str); the function takes (int, int)"),
          "ex_then_named names the stage");
    check(status_is(ex_then(ex_just(ex_int(1), ex_str("x")), add, nullptr, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT)),
                    "ex_then: the input sender sends (int, str); the function takes (int, int)"),
          "ex_then is the function in C++: no name");
    check(status_is(ex_let_value_named(ex_just(ex_double(1.0)), just_str, nullptr, EX_SIG(EX_T_INT), "parse"),
                    "ex_let_value(parse): the input sender sends (double); the function takes (int)"),
          "ex_let_value_named names the stage");

    // A lambda with commas in its body: fine without a macro.
    ex_result r = ex_sync_wait(ex_then(
        ex_just(ex_int(40)),
        [](void *, const ex_value *in, size_t, ex_value *out) {
            int64_t a = in[0].as.i, b = 2;
            out[0] = ex_int(a + b);
            return ex_ok();
        },
        nullptr, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    check(r.disposition == EX_DISP_VALUE && r.values[0].as.i == 42, "ex_then with a lambda");
    ex_result_destroy(&r);

    r = ex_sync_wait(ex_bulk_named(ex_just(), EX_PAR, 4, fails_quietly, nullptr, "fill"));
    check(r.disposition == EX_DISP_ERROR && std::strcmp(r.error.msg, "ex_bulk(fill): the function failed") == 0,
          "ex_bulk_named names the stage at run time");
    ex_result_destroy(&r);
    return cxx_check::finish("names");
}
