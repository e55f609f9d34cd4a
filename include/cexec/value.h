/* SPDX-License-Identifier: MIT */
/* cexec/value.h - building and inspecting values, errors and signatures. */
#ifndef CEXEC_VALUE_H
#define CEXEC_VALUE_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Value constructors.  All are pure and cannot fail. */
static inline ex_value ex_none(void) { ex_value v; v.type = EX_T_NONE; v.as.u = 0; return v; }
static inline ex_value ex_bool(bool b) { ex_value v; v.type = EX_T_BOOL; v.as.u = 0; v.as.b = b; return v; }
static inline ex_value ex_int(int64_t i) { ex_value v; v.type = EX_T_INT; v.as.i = i; return v; }
static inline ex_value ex_uint(uint64_t u) { ex_value v; v.type = EX_T_UINT; v.as.u = u; return v; }
static inline ex_value ex_double(double d) { ex_value v; v.type = EX_T_DOUBLE; v.as.d = d; return v; }
static inline ex_value ex_ptr(void *p) { ex_value v; v.type = EX_T_PTR; v.as.p = p; return v; }
static inline ex_value ex_str(const char *s) { ex_value v; v.type = EX_T_STR; v.as.s = s; return v; }
static inline ex_value ex_sched_value(ex_scheduler s) { ex_value v; v.type = EX_T_SCHED; v.as.sched = s; return v; }
static inline ex_value ex_token_value(ex_stop_token t) { ex_value v; v.type = EX_T_TOKEN; v.as.sched.vt = 0; v.as.token = t; return v; }
static inline ex_value ex_alloc_value(const struct ex_allocator *a) { ex_value v; v.type = EX_T_ALLOC; v.as.sched.vt = 0; v.as.alloc = a; return v; }
static inline ex_value ex_tuple_value(const ex_tuple *t) { ex_value v; v.type = EX_T_TUPLE; v.as.sched.vt = 0; v.as.tuple = t; return v; }

/* Error constructors. */
/* ex_err: an error with a static message (a string literal: it must
 * outlive every copy of the error).  ex_err_data: the same with a payload
 * borrowed from the caller, which must outlive the error's consumers.
 * Neither owns anything; for an owned message or payload see
 * ex_error_format and ex_error_with_payload (cexec/error.h). */
static inline ex_error ex_ok(void) { ex_error e = { EX_OK, 0, 0, 0 }; return e; }
static inline ex_error ex_err(int code, const char *msg) { ex_error e = { code, msg, 0, 0 }; return e; }
static inline ex_error ex_err_data(int code, const char *msg, const void *data) { ex_error e = { code, msg, data, 0 }; return e; }
static inline bool ex_is_ok(ex_error e) { return e.code == EX_OK; }

/* Name of a type ("int", "double", ...), for messages. */
const char *ex_type_name(ex_type t);

/* Writes a readable form of v ("int 42", "tuple#1(int 1, str \"a\")") into
 * buf (always NUL-terminated when size > 0).  Returns the length it wanted. */
size_t ex_value_format(const ex_value *v, char *buf, size_t size);

/* True when two values have the same type and the same contents (tuples are
 * compared element-wise; pointers and strings by address). */
bool ex_value_equal(const ex_value *a, const ex_value *b);

/* ------------------------------------------------------------- signatures */

/* EX_SIG(EX_T_INT, EX_T_DOUBLE) is the signature set_value(int, double);
 * EX_SIG0 is set_value().  EX_SIG_ANY1 is one datum of any type. */
#ifndef __cplusplus
#define EX_SIG0 ((ex_sig){ 0, { 0 } })
#define EX_SIG(...) \
    ((ex_sig){ (uint8_t)(sizeof((uint8_t[]){ __VA_ARGS__ }) / sizeof(uint8_t)), { __VA_ARGS__ } })
#else  /* C++ has no compound literals: the same values, built by exi_cxx_sig below */
#define EX_SIG0 (ex_sig{ 0, { 0 } })
#define EX_SIG(...) exi_cxx_sig(__VA_ARGS__)
#endif
#define EX_SIG_ANY1 EX_SIG(EX_T_ANY)

/* An input signature that accepts any arity (the callback checks itself). */
#ifndef __cplusplus
#define EX_SIG_VARIADIC ((ex_sig){ 0xff, { 0 } })
#else
#define EX_SIG_VARIADIC (ex_sig{ 0xff, { 0 } })
#endif

/* A signature whose arity is above EX_MAX_ARITY (other than
 * EX_SIG_VARIADIC's) matches no values and is compatible with no other
 * signature; the functions below read at most EX_MAX_VALUE_SIGS entries of
 * a set whatever its nvalues says. */

/* Sigs with nothing: a sender that never completes.  Add to it with the
 * helpers below. */
static inline ex_sigs ex_sigs_none(void) { ex_sigs s; s.nvalues = 0; s.flags = 0; return s; }

/* Adds a value signature unless an equal one is present.  Returns false when
 * more than EX_MAX_VALUE_SIGS distinct signatures would be needed (the caller
 * then marks the set EX_SIGS_DYNAMIC). */
bool ex_sigs_add_value(ex_sigs *s, ex_sig sig);

/* Union of b into a (values deduplicated, flags or-ed). */
void ex_sigs_merge(ex_sigs *a, const ex_sigs *b);

/* Does the value list (v, n) match sig?  EX_T_ANY matches every type. */
bool ex_sig_matches(const ex_sig *sig, const ex_value *v, size_t n);

/* Is every datum of `have` acceptable where `want` is expected? */
bool ex_sig_compatible(const ex_sig *want, const ex_sig *have);

/* Index of the first value signature of s that (v, n) matches, or -1. */
int ex_sigs_find(const ex_sigs *s, const ex_value *v, size_t n);

/* Can a receiver that accepts `accepts` take every completion of `sigs`?
 * On false, *why names the first problem (static string). */
bool ex_sigs_subset(const ex_sigs *sigs, const ex_sigs *accepts, const char **why);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
/* EX_SIG in C++: a constant expression; more than EX_MAX_ARITY types do
 * not compile, as in C. */
template <typename... T>
constexpr ex_sig exi_cxx_sig(T... types) {
    static_assert(sizeof...(T) <= EX_MAX_ARITY, "EX_SIG: more than EX_MAX_ARITY types");
    ex_sig s{ static_cast<uint8_t>(sizeof...(T)), { static_cast<uint8_t>(types)... } };
    return s;
}
#endif
#endif
