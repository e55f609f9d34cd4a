/* SPDX-License-Identifier: MIT */
/* cexec/just.h - the factories just, just_error, just_stopped ([exec.just])
 * and read_env ([exec.read.env]).  All complete inside start, on the thread
 * that starts them, and have no completion scheduler. */
#ifndef CEXEC_JUST_H
#define CEXEC_JUST_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Completes with set_value(v[0], ..., v[n-1]); n <= EX_MAX_ARITY, else an
 * invalid sender (EX_EINVAL).  Values are copied into the sender (tuples
 * deeply).  Signature: the types of v. */
ex_sender *ex_just_n(const ex_value *v, size_t n);

/* ex_just() and ex_just(a, b, ...) with ex_value arguments. */
#ifndef __cplusplus
#define ex_just(...) \
    ex_just_n((const ex_value[]){ ex_none(), __VA_ARGS__ } + 1, \
              sizeof((ex_value[]){ ex_none(), __VA_ARGS__ }) / sizeof(ex_value) - 1)
#else  /* no compound literals in C++: a list that lives until ex_just_n has copied it */
#define ex_just(...) exi_cxx_just({ __VA_ARGS__ })
#endif

/* Completes with set_error(e), once per run (the sender is multi-shot).
 * Takes e's reference (cexec/error.h): an owned error lives as long as the
 * sender and the operations that deliver it; each run's receiver is given
 * a reference of its own.  An error that owns nothing is copied as it is:
 * its static message and borrowed data must outlive the sender.  e.code
 * EX_OK gives an EX_EINVAL error instead. */
ex_sender *ex_just_error(ex_error e);

/* Completes with set_stopped(). */
ex_sender *ex_just_stopped(void);

/* Completes with set_value(v) where v answers `key` in the receiver's
 * environment, or set_error(EX_EINVAL) when the environment does not know
 * the key.  Stop tokens and allocators have defaults (never-stop token,
 * default allocator), as [exec.get.stop.token] and [exec.get.allocator]
 * specify, so those never fail.  Signature: one value of `type` (EX_T_ANY
 * for user keys). */
ex_sender *ex_read_env(const ex_key *key, ex_type type);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
#include <initializer_list>
static inline ex_sender *exi_cxx_just(std::initializer_list<ex_value> v) { return ex_just_n(v.begin(), v.size()); }
#endif
#endif
