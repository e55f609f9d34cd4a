/* SPDX-License-Identifier: MIT */
/* task_fixtures.c - see task_fixtures.h. */
#include "common/task_fixtures.h"

probe P;

void probe_check(bool ok, int line, const char *what) {
    if (ok) return;
    int zero = 0;
    if (atomic_compare_exchange_strong(&P.first_line, &zero, line)) P.first_what = what;
    atomic_fetch_add(&P.bad, 1);
}

static bool flag_set(void *flag) { return atomic_load((atomic_int *)flag) != 0; }

bool wait_int(atomic_int *flag) { return test_wait_until(flag_set, flag, NULL, TEST_WAIT_LIMIT_S); }
