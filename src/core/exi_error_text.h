/* SPDX-License-Identifier: MIT */
/* exi_error_text.h - error messages that name types, with the static
 * lifetime an ex_error's msg must have.  Internal. */
#ifndef EXI_ERROR_TEXT_H
#define EXI_ERROR_TEXT_H

#include <stddef.h>

#include <cexec/cexec.h>

/* The formatted message, kept for the life of the process: identical
 * texts are kept once, at most EXI_ERROR_TEXTS of them (error paths build
 * a handful of distinct ones).  NULL when the table is full or memory
 * runs out: then use a fixed message. */
#define EXI_ERROR_TEXTS 1024
__attribute__((format(printf, 1, 2))) const char *exi_error_text(const char *fmt, ...);

/* "(int, double)": the types of sig, or "any values" for a variadic
 * signature, into buf (size bytes, always terminated). */
void exi_sig_text(const ex_sig *sig, char *buf, size_t size);
/* The same for the types of n values. */
void exi_values_text(const ex_value *v, size_t n, char *buf, size_t size);

#endif
