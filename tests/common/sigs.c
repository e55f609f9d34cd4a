/* SPDX-License-Identifier: MIT */
/* sigs.c - see sigs.h. */
#include <criterion/criterion.h>

#include "common/sigs.h"

bool sig_equal(ex_sig a, ex_sig b) {
    if (a.arity != b.arity) return false;
    for (unsigned i = 0; i < a.arity && i < EX_MAX_ARITY; i++)
        if (a.types[i] != b.types[i]) return false;
    return true;
}

bool sigs_have(const ex_sigs *sg, ex_sig want) {
    for (unsigned i = 0; i < sg->nvalues; i++)
        if (sig_equal(sg->values[i], want)) return true;
    return false;
}

void expect_sigs(const ex_sender *s, ex_sig want, uint8_t mask, uint8_t flags) {
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 1, "%u value signatures, expected 1", (unsigned)sg->nvalues);
    cr_assert_eq(sg->values[0].arity, want.arity, "arity %u, expected %u", (unsigned)sg->values[0].arity,
                 (unsigned)want.arity);
    cr_assert(sig_equal(sg->values[0], want), "the value signature's types differ");
    cr_assert_eq(sg->flags & mask, flags, "flags 0x%x under mask 0x%x, expected 0x%x", (unsigned)sg->flags,
                 (unsigned)mask, (unsigned)flags);
}

void expect_no_value_sigs(const ex_sender *s, uint8_t flags) {
    const ex_sigs *sg = ex_sender_sigs(s);
    cr_assert_eq(sg->nvalues, 0, "%u value signatures, expected none", (unsigned)sg->nvalues);
    cr_assert_eq(sg->flags, flags, "flags 0x%x, expected 0x%x", (unsigned)sg->flags, (unsigned)flags);
}
