/* SPDX-License-Identifier: MIT */
/* error_text.c - error messages that name types (exi_error_text.h).  An
 * ex_error's message must outlive every copy of the error, which travels
 * by value through any number of completions; a formatted one is therefore
 * kept for the life of the process, once per distinct text, in a bounded
 * table. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exi_error_text.h"

#define TEXT_MAX 256

static pthread_mutex_t texts_mu = PTHREAD_MUTEX_INITIALIZER;
static char *texts[EXI_ERROR_TEXTS];
static size_t ntexts;

const char *exi_error_text(const char *fmt, ...) {
    char buf[TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    const char *found = NULL;
    pthread_mutex_lock(&texts_mu);
    for (size_t i = 0; i < ntexts && !found; i++)
        if (!strcmp(texts[i], buf)) found = texts[i];
    if (!found && ntexts < EXI_ERROR_TEXTS) {
        size_t len = strlen(buf) + 1;
        char *copy = malloc(len);
        if (copy) {
            memcpy(copy, buf, len);
            texts[ntexts++] = copy;
            found = copy;
        }
    }
    pthread_mutex_unlock(&texts_mu);
    return found;
}

/* Appends "a, b, c" for n type names given by name(i), in parentheses. */
static void list_text(char *buf, size_t size, size_t n, const char *(*name)(const void *, size_t), const void *ctx) {
    if (!size) return;
    size_t len = 0;
    len += (size_t)snprintf(buf + len, size - len, "(");
    for (size_t i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "", name(ctx, i));
    if (len < size) snprintf(buf + len, size - len, ")");
}

static const char *sig_type(const void *ctx, size_t i) { return ex_type_name((ex_type)((const ex_sig *)ctx)->types[i]); }
static const char *value_type(const void *ctx, size_t i) { return ex_type_name(((const ex_value *)ctx)[i].type); }

void exi_sig_text(const ex_sig *sig, char *buf, size_t size) {
    if (sig->arity > EX_MAX_ARITY) {
        snprintf(buf, size, "(any values)");
        return;
    }
    list_text(buf, size, sig->arity, sig_type, sig);
}

void exi_values_text(const ex_value *v, size_t n, char *buf, size_t size) { list_text(buf, size, n, value_type, v); }
