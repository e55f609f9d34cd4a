/* SPDX-License-Identifier: MIT */
/* task_fixtures.h - what the task test files share: the probe task bodies
 * report into (bodies never assert: a Criterion assertion long-jumps,
 * which cannot leave a fiber or another thread), and the older names of
 * common fixtures (wait_int). */
#ifndef CEXEC_TEST_TASK_FIXTURES_H
#define CEXEC_TEST_TASK_FIXTURES_H

#include <stdatomic.h>
#include <stdbool.h>

#include "common/helpers.h"

typedef struct probe {
    atomic_int bad;
    atomic_int first_line;
    const char *first_what;
} probe;

extern probe P;  /* one per test (each test runs in its own process) */

void probe_check(bool ok, int line, const char *what);

#define TCHECK(cond) probe_check((cond), __LINE__, #cond)
#define EXPECT_PROBE()                                                                              \
    cr_assert_eq(atomic_load(&P.bad), 0, "%d check(s) failed inside task bodies; first at line %d: %s", \
                 atomic_load(&P.bad), atomic_load(&P.first_line), P.first_what ? P.first_what : "")

/* Waits (bounded, TEST_WAIT_LIMIT_S) for *flag != 0. */
bool wait_int(atomic_int *flag);

#endif
