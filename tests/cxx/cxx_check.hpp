// SPDX-License-Identifier: MIT
// cxx_check.hpp - what the C++ checks share: a pass/fail tally that the
// program prints at the end ("<name>: N passed, M failed"), and the
// callback that adds two ints.
#ifndef CEXEC_TESTS_CXX_CHECK_HPP
#define CEXEC_TESTS_CXX_CHECK_HPP

#include <cexec/cexec.h>

#include <cstdio>

namespace cxx_check {

inline int passed, failed;

inline void check(bool ok, const char *what) {
    if (ok) {
        passed++;
    } else {
        failed++;
        std::fprintf(stderr, "FAILED: %s\n", what);
    }
}

// Prints the tally; the program's exit status.
inline int finish(const char *name) {
    std::printf("%s: %d passed, %d failed\n", name, passed, failed);
    return failed ? 1 : 0;
}

inline ex_error add(void *, const ex_value *in, size_t, ex_value *out) {
    out[0] = ex_int(in[0].as.i + in[1].as.i);
    return ex_ok();
}

}  // namespace cxx_check

#endif
