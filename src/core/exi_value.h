/* SPDX-License-Identifier: MIT */
/* exi_value.h - value storage and signatures for sender implementations.
 * Internal.
 *
 * Layer core/: values, environments, stop tokens, the sender and
 * scheduler interfaces.  It may include allocators/ and base/. */
#ifndef EXI_VALUE_H
#define EXI_VALUE_H

#include <stdint.h>
#include <string.h>

#include <cexec/cexec.h>

/* Value storage with deep-copied tuples: the inline array covers the
 * common case; tuple contents go to one block from `alloc`.  The count and
 * the block come first: a store that is set up and given a value or two
 * touches one cache line, not both ends of the array. */
typedef struct exi_store {
    size_t n;
    void *nested;
    size_t nested_size;
    const ex_allocator *alloc;
    ex_value v[EX_MAX_ARITY];
} exi_store;

static inline void exi_store_init(exi_store *st) { st->n = 0; st->nested = NULL; st->nested_size = 0; st->alloc = NULL; }

/* The out-of-line paths: tuples to deep-copy, or too many values. */
ex_error exi_values_copy_deep(ex_value *dst, const ex_value *src, size_t n, const ex_allocator *alloc,
                              void **nested, size_t *nested_size);
ex_error exi_store_set_deep(exi_store *st, const ex_value *v, size_t n, const ex_allocator *alloc);

/* *d = *s, a word at a time: values are mostly copied right after they
 * were written a field at a time (ex_int: a 4-byte type, an 8-byte
 * datum), and a 16-byte load over such stores stalls on store forwarding
 * (a copy the compiler makes of the struct does that load). */
static inline void exi_value_copy(ex_value *d, const ex_value *s) {
    uint64_t w[2];
    d->type = s->type;
    memcpy(&w[0], (const char *)&s->as, 8);
    memcpy(&w[1], (const char *)&s->as + 8, 8);
    __asm__("" : "+r"(w[0]), "+r"(w[1]));  /* keeps them two 8-byte loads */
    memcpy((char *)&d->as, &w[0], 8);
    memcpy((char *)&d->as + 8, &w[1], 8);
}

/* Whether (v, n) fits a value array and holds no tuple: then a copy is a
 * plain copy.  Inline with the copies below: every completion of a
 * fork-join step copies values a few times, almost always flat ones. */
static inline bool exi_values_flat(const ex_value *v, size_t n) {
    if (n > EX_MAX_ARITY) return false;
    bool tuples = false;
    for (size_t i = 0; i < n; i++) tuples |= v[i].type == EX_T_TUPLE;
    return !tuples;
}

/* Deep copy of n values into a caller array of EX_MAX_ARITY plus a nested
 * block (for ex_result and just).  *nested is NULL when no tuple is
 * present.  EX_EINVAL (nothing copied) when n > EX_MAX_ARITY. */
static inline ex_error exi_values_copy(ex_value *dst, const ex_value *src, size_t n, const ex_allocator *alloc,
                                       void **nested, size_t *nested_size) {
    if (!exi_values_flat(src, n)) return exi_values_copy_deep(dst, src, n, alloc, nested, nested_size);
    *nested = NULL;
    *nested_size = 0;
    for (size_t i = 0; i < n; i++) exi_value_copy(&dst[i], &src[i]);
    return ex_ok();
}

void exi_store_free_nested(exi_store *st);
/* Empties st, freeing its tuple storage. */
static inline void exi_store_clear(exi_store *st) {
    if (st->nested) exi_store_free_nested(st);
    st->n = 0;
}

/* Deep-copies (v, n) into st, replacing what it held.  EX_ENOMEM when
 * tuple storage cannot be allocated, EX_EINVAL when n > EX_MAX_ARITY (st
 * is then empty). */
static inline ex_error exi_store_set(exi_store *st, const ex_value *v, size_t n, const ex_allocator *alloc) {
    if (st->nested || !exi_values_flat(v, n)) return exi_store_set_deep(st, v, n, alloc);
    st->alloc = alloc;
    for (size_t i = 0; i < n; i++) exi_value_copy(&st->v[i], &v[i]);
    st->n = n;
    return ex_ok();
}

/* How many values a sender of signatures cs may send (all a dynamic one may). */
static inline uint8_t exi_value_cap(const ex_sigs *cs) {
    return (cs->flags & EX_SIGS_DYNAMIC) ? EX_MAX_ARITY : cs->nvalues ? cs->values[0].arity : 0;
}

/* The most values a sender of signatures cs may send in one completion,
 * over all its value signatures (EX_MAX_ARITY for a dynamic or variadic
 * one): the room an adaptor that keeps any one of them needs. */
static inline uint8_t exi_sigs_max_arity(const ex_sigs *cs) {
    if (cs->flags & EX_SIGS_DYNAMIC) return EX_MAX_ARITY;
    uint8_t max = 0;
    for (unsigned i = 0; i < cs->nvalues && i < EX_MAX_VALUE_SIGS; i++) {
        uint8_t a = cs->values[i].arity;
        if (a > EX_MAX_ARITY) a = EX_MAX_ARITY;  /* variadic (or malformed): checked as they come */
        if (a > max) max = a;
    }
    return max;
}

/* Whether keeping (copying) the values of a sender of signatures cs may
 * fail: a tuple (or a datum of any type, which may be one) takes an
 * allocation; a dynamic or variadic signature may send more than expected. */
static inline bool exi_sigs_keeping_may_fail(const ex_sigs *cs) {
    if (cs->flags & EX_SIGS_DYNAMIC) return true;
    for (unsigned i = 0; i < cs->nvalues && i < EX_MAX_VALUE_SIGS; i++) {
        const ex_sig *v = &cs->values[i];
        if (v->arity > EX_MAX_ARITY) return true;
        for (unsigned k = 0; k < v->arity; k++)
            if (v->types[k] == EX_T_TUPLE || v->types[k] == EX_T_ANY) return true;
    }
    return false;
}

/* Signatures with at most one value signature. */
static inline ex_sigs exi_sigs_of(const ex_sig *value, uint8_t flags) {
    ex_sigs s = ex_sigs_none();
    if (value) { s.values[0] = *value; s.nvalues = 1; }
    s.flags = flags;
    return s;
}
/* ex_sig_matches, inline for the completions that check values on the
 * way (let_value's and then's input, then's results).  A signature of
 * yours with an arity above EX_MAX_ARITY (not EX_SIG_VARIADIC's) matches
 * nothing. */
static inline bool exi_sig_matches(const ex_sig *sig, const ex_value *v, size_t n) {
    if (sig->arity == 0xff) return true;
    if (sig->arity != n || n > EX_MAX_ARITY) return false;
    for (size_t i = 0; i < n; i++) {
        /* A datum's own type is never "any": an unset or corrupt tag fails. */
        if (v[i].type == EX_T_ANY || (unsigned)v[i].type >= EX_T_COUNT_) return false;
        if (sig->types[i] != EX_T_ANY && sig->types[i] != v[i].type) return false;
    }
    return true;
}

/* Sig describing the types of (v, n). */
ex_sig exi_sig_of_values(const ex_value *v, size_t n);

#endif
