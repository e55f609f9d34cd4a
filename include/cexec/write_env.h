/* SPDX-License-Identifier: MIT */
/* cexec/write_env.h - write_env: run a sender with an extra key in its
 * receiver's environment (JOIN-ENV(MAKE-ENV(key, value), env)).  This is
 * how a whole chain gets its own allocator (ex_key_get_allocator), stop
 * token or scheduler.  The value is copied into the sender (tuples deeply). */
#ifndef CEXEC_WRITE_ENV_H
#define CEXEC_WRITE_ENV_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* child, run with key answering value in its receiver's environment.
 * Takes child; NULL child or key: an invalid sender. */
ex_sender *ex_write_env(ex_sender *child, const ex_key *key, ex_value value);

#ifdef __cplusplus
}
#endif
#endif
