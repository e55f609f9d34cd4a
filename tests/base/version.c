/* SPDX-License-Identifier: MIT */
/* The library's version: the running library agrees with the headers it
 * was built from, and the string and number say the same version. */
#include <stdio.h>
#include <string.h>

#include "common/helpers.h"

TEST_SUITE(cexec_version, 10);

Test(cexec_version, the_library_reports_the_version_of_its_headers) {
    cr_assert_str_eq(ex_version(), CEXEC_VERSION_STRING);
    cr_assert_eq(ex_version_number(), (unsigned)CEXEC_VERSION_NUMBER);
    char text[32];
    snprintf(text, sizeof text, "%d.%d.%d", CEXEC_VERSION_MAJOR, CEXEC_VERSION_MINOR, CEXEC_VERSION_PATCH);
    cr_assert_str_eq(text, CEXEC_VERSION_STRING);
    cr_assert_eq(CEXEC_VERSION_NUMBER, CEXEC_VERSION_MAJOR * 10000 + CEXEC_VERSION_MINOR * 100 + CEXEC_VERSION_PATCH);
}
