/* SPDX-License-Identifier: MIT */
/* sigs.h - checking a sender's completion signatures. */
#ifndef CEXEC_TEST_SIGS_H
#define CEXEC_TEST_SIGS_H

#include <stdbool.h>
#include <stdint.h>
#include <cexec/cexec.h>

/* Same arity and the same types. */
bool sig_equal(ex_sig a, ex_sig b);
/* Whether sg lists want among its value signatures. */
bool sigs_have(const ex_sigs *sg, ex_sig want);
/* Asserts s declares exactly one value signature, want, and the flags
 * (EX_SIGS_*) `flags` among those in `mask`. */
void expect_sigs(const ex_sender *s, ex_sig want, uint8_t mask, uint8_t flags);
/* Asserts s declares no value signature and exactly these flags. */
void expect_no_value_sigs(const ex_sender *s, uint8_t flags);

#endif
