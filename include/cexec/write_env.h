/* SPDX-License-Identifier: MIT */
/* cexec/write_env.h - write_env: run a sender with an extra key in its
 * receiver's environment (JOIN-ENV(MAKE-ENV(key, value), env)).  This is
 * how a whole chain gets its own allocator (ex_key_get_allocator), stop
 * token or scheduler.  The value is copied into the sender (tuples deeply).
 *
 * link_stop_token: run a sender with a stop token that follows both its
 * receiver's token and another one (a request's deadline under its
 * scope's shutdown), where write_env of get_stop_token would hide the
 * receiver's. */
#ifndef CEXEC_WRITE_ENV_H
#define CEXEC_WRITE_ENV_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* child, run with key answering value in its receiver's environment.
 * Takes child; NULL child or key: an invalid sender. */
ex_sender *ex_write_env(ex_sender *child, const ex_key *key, ex_value value);

/* child, run with a stop token that is stopped when the receiver's token
 * is or when `extra` is; the rest of the receiver's environment stays
 * visible.  At start the operation links a stop source of its own (an
 * ex_linked_stop_source in its state: nothing allocates) to both tokens,
 * and unlinks it before it completes; if either is stopped already, the
 * child starts with its token stopped.  When one of the two can never
 * stop (or both are the same), the child sees the other one itself, and
 * with `extra` never-stop the adaptor changes nothing.  Completes with the
 * child's completion, passed on as it comes, except when the child
 * completes inside a stop request that one of the tokens is passing on to
 * it: then the operation keeps the result (values copied, tuples with the
 * environment's allocator) and completes on the requesting thread once
 * that request is through.  So its signatures are the child's, plus
 * set_error when keeping values may fail (tuples, or a child whose
 * signatures are dynamic or variadic: EX_ENOMEM, EX_EINVAL).  extra's
 * source must outlive every operation of the sender.  Takes child; NULL
 * child: an invalid sender (EX_EINVAL). */
ex_sender *ex_link_stop_token(ex_sender *child, ex_stop_token extra);

#ifdef __cplusplus
}
#endif
#endif
