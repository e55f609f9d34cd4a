/* pool.h - making and destroying thread pools in a test: each call
 * asserts it worked, so a test body can use the pool at once. */
#ifndef CEXEC_TEST_POOL_H
#define CEXEC_TEST_POOL_H

#include <criterion/criterion.h>
#include <cexec/cexec.h>

/* A zeroed configuration with `threads` workers and the thread-name
 * prefix (NULL: the library's); set allocator, frames, ... on it. */
ex_pool_config test_pool_config(unsigned threads, const char *name_prefix);
/* A pool of `threads` workers with the default configuration. */
ex_pool *test_pool_new(unsigned threads);
/* A pool made from cfg. */
ex_pool *test_pool_new_cfg(const ex_pool_config *cfg);
/* Destroys p, asserting EX_OK (no work left behind). */
void test_pool_free(ex_pool *p);

#endif
