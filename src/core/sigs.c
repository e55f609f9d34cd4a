/* SPDX-License-Identifier: MIT */
/* sigs.c - completion signatures: building, matching, subsets. */
#include <string.h>

#include <cexec/cexec.h>

#include "core/exi_value.h"

/* Counts of yours are bounded here: a signature whose arity is above
 * EX_MAX_ARITY (and not EX_SIG_VARIADIC's) has types past its array, so it
 * matches no values and is compatible with nothing; a set claiming more
 * than EX_MAX_VALUE_SIGS signatures is read up to that many. */
static bool sig_malformed(const ex_sig *s) { return s->arity > EX_MAX_ARITY && s->arity != 0xff; }
static unsigned sigs_count(const ex_sigs *s) { return s->nvalues < EX_MAX_VALUE_SIGS ? s->nvalues : EX_MAX_VALUE_SIGS; }

static bool sig_equal(const ex_sig *a, const ex_sig *b) {
    if (a->arity != b->arity) return false;
    if (a->arity == 0xff) return true;
    return memcmp(a->types, b->types, a->arity < EX_MAX_ARITY ? a->arity : EX_MAX_ARITY) == 0;
}

bool ex_sigs_add_value(ex_sigs *s, ex_sig sig) {
    for (unsigned i = 0; i < sigs_count(s); i++)
        if (sig_equal(&s->values[i], &sig)) return true;
    if (s->nvalues >= EX_MAX_VALUE_SIGS) return false;
    s->values[s->nvalues++] = sig;
    return true;
}

void ex_sigs_merge(ex_sigs *a, const ex_sigs *b) {
    a->flags = (uint8_t)(a->flags | b->flags);
    for (unsigned i = 0; i < sigs_count(b); i++)
        if (!ex_sigs_add_value(a, b->values[i])) a->flags |= EX_SIGS_DYNAMIC;
}

bool ex_sig_matches(const ex_sig *sig, const ex_value *v, size_t n) { return exi_sig_matches(sig, v, n); }

bool ex_sig_compatible(const ex_sig *want, const ex_sig *have) {
    if (want->arity == 0xff) return true;
    if (have->arity == 0xff) return false;
    if (want->arity != have->arity || sig_malformed(want)) return false;
    for (unsigned i = 0; i < want->arity; i++)
        if (want->types[i] != EX_T_ANY && have->types[i] != EX_T_ANY && want->types[i] != have->types[i])
            return false;
    return true;
}

int ex_sigs_find(const ex_sigs *s, const ex_value *v, size_t n) {
    for (unsigned i = 0; i < sigs_count(s); i++)
        if (ex_sig_matches(&s->values[i], v, n)) return (int)i;
    return -1;
}

bool ex_sigs_subset(const ex_sigs *sigs, const ex_sigs *accepts, const char **why) {
    if ((sigs->flags & EX_SIGS_ERROR) && !(accepts->flags & EX_SIGS_ERROR)) {
        *why = "the sender may complete with an error the receiver does not accept";
        return false;
    }
    if ((sigs->flags & EX_SIGS_STOPPED) && !(accepts->flags & EX_SIGS_STOPPED)) {
        *why = "the sender may complete stopped and the receiver does not accept set_stopped";
        return false;
    }
    if (accepts->flags & EX_SIGS_DYNAMIC) return true;
    for (unsigned i = 0; i < sigs_count(sigs); i++) {
        bool ok = false;
        for (unsigned j = 0; j < sigs_count(accepts) && !ok; j++)
            ok = ex_sig_compatible(&accepts->values[j], &sigs->values[i]);
        if (!ok) {
            *why = "the sender has a value signature the receiver does not accept";
            return false;
        }
    }
    return true;
}

ex_sig exi_sig_of_values(const ex_value *v, size_t n) {
    ex_sig s;
    memset(&s, 0, sizeof s);
    s.arity = (uint8_t)n;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) s.types[i] = (uint8_t)v[i].type;
    return s;
}

/* ------------------------------------------------------------- deep copy */
