/* pool.c - see pool.h. */
#include <string.h>

#include "common/pool.h"

ex_pool_config test_pool_config(unsigned threads, const char *name_prefix) {
    ex_pool_config c;
    memset(&c, 0, sizeof c);
    c.threads = threads;
    c.name_prefix = name_prefix;
    return c;
}

ex_pool *test_pool_new_cfg(const ex_pool_config *cfg) {
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(cfg, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    cr_assert_not_null(p);
    return p;
}

ex_pool *test_pool_new(unsigned threads) {
    ex_pool_config c = test_pool_config(threads, NULL);
    return test_pool_new_cfg(&c);
}

void test_pool_free(ex_pool *p) {
    ex_error e = ex_pool_destroy(p);
    cr_assert_eq(e.code, 0, "ex_pool_destroy: %s", e.msg ? e.msg : "");
}
