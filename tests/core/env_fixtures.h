/* SPDX-License-Identifier: MIT */
/* env_fixtures.h - what the exec_env files (env*.c) share: keys and
 * then functions. */
#ifndef CEXEC_TEST_ENV_FIXTURES_H
#define CEXEC_TEST_ENV_FIXTURES_H

#include "common/helpers.h"

extern const ex_key fwd_key;     /* forwarding */
extern const ex_key local_key;   /* non-forwarding */
extern const ex_key other_key;   /* forwarding */

/* int -> int + 1 */
ex_error plus1(void *ctx, const ex_value *in, size_t n, ex_value *out);
/* any -> the same datum; counts calls in *(int *)ctx when not NULL */
ex_error identity1(void *ctx, const ex_value *in, size_t n, ex_value *out);

#endif
