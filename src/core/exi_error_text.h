/* SPDX-License-Identifier: MIT */
/* exi_error_text.h - error messages that name types and stages, with the
 * static lifetime an ex_error's msg must have.  Internal. */
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

/* Room for exi_sig_text / exi_values_text of up to EX_MAX_ARITY types. */
#define EXI_SIG_TEXT_SIZE 128

/* "(int, double)": the types of sig, or "any values" for a variadic
 * signature, into buf (size bytes, always terminated). */
void exi_sig_text(const ex_sig *sig, char *buf, size_t size);
/* The same for the types of n values. */
void exi_values_text(const ex_value *v, size_t n, char *buf, size_t size);
/* "(int, int) and (double)": every value signature of sigs, "(any values)"
 * for one known only at run time, "no values" for none. */
void exi_sigs_text(const ex_sigs *sigs, char *buf, size_t size);

/* ------------------------------------------------------------------ stages
 * A stage is a builder that calls a user function (ex_then, ex_let_value,
 * ex_bulk, ...); its name, given by the caller (the _named builders, the
 * C macros' #fn), is static text or NULL.  Its messages begin with
 * "stage(name): " or, without a name, "stage: ".  Formatting happens only
 * on error paths. */

/* The characters of a name a message shows; a longer one is cut, "..."
 * after. */
#define EXI_STAGE_NAME_MAX 48

/* "stage(name)" or "stage" into buf (size bytes, always terminated). */
void exi_stage_label(char *buf, size_t size, const char *stage, const char *name);

/* "stage(name): " followed by fmt's text, kept by exi_error_text; `fixed`
 * (a static text) if it cannot be kept. */
__attribute__((format(printf, 4, 5)))
const char *exi_stage_text(const char *stage, const char *name, const char *fixed, const char *fmt, ...);

/* A stage's fixed message "stage: rest": itself when name is NULL, else
 * "stage(name): rest" (itself if that cannot be kept). */
const char *exi_stage_fixed(const char *fixed, const char *name);

/* e with its message prefixed by the stage, "stage(name): " (a leading
 * "cexec: " replaced): an error cexec made on the stage's behalf (out of
 * memory storing values).  e itself if the text cannot be kept. */
ex_error exi_stage_error(const char *stage, const char *name, ex_error e);

/* "stage(name): the input sender sends (int, str); the function takes
 * (int)": a value signature of the child that the function's input
 * signature refuses (checked when the sender is built). */
const char *exi_stage_sig_mismatch(const char *stage, const char *name, const char *fixed, const ex_sig *sends,
                                   const ex_sig *takes);
/* "stage(name): the child sent (int); the function takes (int, int)":
 * the same for values that arrived (a child known only at run time). */
const char *exi_stage_values_mismatch(const char *stage, const char *name, const char *fixed, const ex_value *v,
                                      size_t n, const ex_sig *takes);

#endif
