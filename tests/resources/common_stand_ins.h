/* common_stand_ins.h - stand-ins, under the same names, for fixtures that
 * tests/common/ is getting (pool.h, wait.h on branch h18-common): a pool
 * made with assertions and bounded waits.  Removed once those land. */
#ifndef CEXEC_TEST_RES_STAND_INS_H
#define CEXEC_TEST_RES_STAND_INS_H

#include <stdatomic.h>
#include "common/helpers.h"

/* Far above what any wait needs on a loaded machine, below the suites'
 * timeouts: a lost item fails with a message instead of hanging. */
#define TEST_WAIT_LIMIT_S 10.0

/* Waits (bounded) until *c >= target; returns the last value seen. */
int wait_int_reaches(atomic_int *c, int target);
long wait_long_reaches(atomic_long *c, long target);

#define EXPECT_INT_REACHES(c, target)                                                                \
    do {                                                                                             \
        int er_target_ = (target);                                                                   \
        int er_seen_ = wait_int_reaches((c), er_target_);                                            \
        cr_assert_geq(er_seen_, er_target_, "timed out waiting for %s: %d of %d", #c, er_seen_, er_target_); \
    } while (0)

/* A zeroed configuration with `threads` workers and the name prefix. */
ex_pool_config test_pool_config(unsigned threads, const char *name_prefix);
ex_pool *test_pool_new(unsigned threads);
ex_pool *test_pool_new_cfg(const ex_pool_config *cfg);
void test_pool_free(ex_pool *p);

#endif
