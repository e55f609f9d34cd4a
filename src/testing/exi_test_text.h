/* SPDX-License-Identifier: MIT */
/* exi_test_text.h - the text of the testing helpers' messages: values,
 * errors and error codes as a test reads them.  Internal. */
#ifndef EXI_TEST_TEXT_H
#define EXI_TEST_TEXT_H

#include <stddef.h>

#include <cexec/cexec.h>

/* A bounded text being appended to: len counts what was wanted, so a cut
 * is known (and marked by exi_text_end). */
typedef struct exi_text {
    char *p;
    size_t size, len;
} exi_text;

/* An empty text over buf (size bytes, may be 0). */
void exi_text_init(exi_text *t, char *buf, size_t size);
/* Appends printf-style. */
__attribute__((format(printf, 2, 3))) void exi_text_add(exi_text *t, const char *fmt, ...);
/* Ends "..." when it was cut; returns the length wanted. */
size_t exi_text_end(exi_text *t);

/* A double with the fewest digits (up to 17) that read back as it: 0.1
 * stays "0.1", and two doubles that differ never print alike. */
void exi_text_double(exi_text *t, double d);
/* A string between quotes, its controls, quotes and backslashes escaped,
 * at most max characters of it ("..." after the quote when cut); NULL is
 * "(null)". */
void exi_text_string(exi_text *t, const char *s, size_t max);
/* One datum, "int 42", "double 0.30000000000000004", "str \"a\\n\"",
 * "tuple#0(int 1, str \"x\")": doubles with as many digits as tell them
 * apart, strings quoted with their controls escaped. */
void exi_text_value(exi_text *t, const ex_value *v);
/* "value ()", "value int 42", "values (int 1, str \"a\")". */
void exi_text_values(exi_text *t, const ex_value *v, size_t n);
/* "EX_EINVAL", "EX_EUSER + 2", "code 5". */
void exi_text_code(exi_text *t, int code);
/* "error EX_EINVAL \"bad input\"". */
void exi_text_error(exi_text *t, ex_error e);

#endif
