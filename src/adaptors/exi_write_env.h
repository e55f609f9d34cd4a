/* SPDX-License-Identifier: MIT */
/* exi_write_env.h - write_env with a value read at connect.  Internal.
 *
 * Layer adaptors/: one-child adaptors (then, let, into_variant,
 * write_env, on/continues_on/starts_on) and the sources and sinks (just,
 * sync_wait).  It may include core/, allocators/ and base/. */
#ifndef EXI_WRITE_ENV_H
#define EXI_WRITE_ENV_H

#include <cexec/cexec.h>

/* write_env whose value is read, at connect, from `from_key` in the
 * receiver's environment (from_key == NULL: `value` as given).  Connect
 * fails with EX_EINVAL and `missing_msg` when the key is absent. */
ex_sender *exi_write_env(ex_sender *child, const ex_key *key, ex_value value, const ex_key *from_key,
                         const char *missing_msg);

#endif
