/* exi_value.h - value storage and signatures for sender implementations.
 * Internal.
 *
 * Layer core/: values, environments, stop tokens, the sender and
 * scheduler interfaces.  It may include allocators/ and base/. */
#ifndef EXI_VALUE_H
#define EXI_VALUE_H

#include <cexec/cexec.h>

/* Value storage with deep-copied tuples: the inline array covers the
 * common case; tuple contents go to one block from `alloc`. */
typedef struct exi_store {
    size_t n;
    ex_value v[EX_MAX_ARITY];
    void *nested;
    size_t nested_size;
    const ex_allocator *alloc;
} exi_store;

static inline void exi_store_init(exi_store *st) { st->n = 0; st->nested = NULL; st->nested_size = 0; st->alloc = NULL; }
/* Deep-copies (v, n) into st, replacing what it held.  EX_ENOMEM when
 * tuple storage cannot be allocated, EX_EINVAL when n > EX_MAX_ARITY (st
 * is then empty). */
ex_error exi_store_set(exi_store *st, const ex_value *v, size_t n, const ex_allocator *alloc);
void exi_store_clear(exi_store *st);

/* Deep copy of n values into a caller array of EX_MAX_ARITY plus a nested
 * block (for ex_result and just).  *nested is NULL when no tuple is
 * present.  EX_EINVAL (nothing copied) when n > EX_MAX_ARITY. */
ex_error exi_values_copy(ex_value *dst, const ex_value *src, size_t n, const ex_allocator *alloc,
                         void **nested, size_t *nested_size);

/* How many values a sender of signatures cs may send (all a dynamic one may). */
static inline uint8_t exi_value_cap(const ex_sigs *cs) {
    return (cs->flags & EX_SIGS_DYNAMIC) ? EX_MAX_ARITY : cs->nvalues ? cs->values[0].arity : 0;
}

/* Signatures with at most one value signature. */
static inline ex_sigs exi_sigs_of(const ex_sig *value, uint8_t flags) {
    ex_sigs s = ex_sigs_none();
    if (value) { s.values[0] = *value; s.nvalues = 1; }
    s.flags = flags;
    return s;
}
/* Sig describing the types of (v, n). */
ex_sig exi_sig_of_values(const ex_value *v, size_t n);

#endif
