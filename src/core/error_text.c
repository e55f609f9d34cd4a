/* SPDX-License-Identifier: MIT */
/* error_text.c - error messages that name types and stages
 * (exi_error_text.h).  An
 * ex_error's message must outlive every copy of the error, which travels
 * by value through any number of completions; a formatted one is therefore
 * kept for the life of the process, once per distinct text, in a bounded
 * table. */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/exi_error_text.h"

/* A message: a stage's label (up to EXI_STAGE_NAME_MAX of its name) and
 * two signatures fit. */
#define TEXT_MAX 512

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

void exi_sigs_text(const ex_sigs *sigs, char *buf, size_t size) {
    if (!size) return;
    /* (a signature known only at run time shows as one more, last) */
    size_t n = sigs->nvalues, total = n + ((sigs->flags & EX_SIGS_DYNAMIC) ? 1 : 0), len = 0;
    buf[0] = '\0';
    if (!total) {
        snprintf(buf, size, "no values");
        return;
    }
    for (size_t i = 0; i < total && len < size; i++) {
        char one[EXI_SIG_TEXT_SIZE];
        if (i < n) exi_sig_text(&sigs->values[i], one, sizeof one);
        else snprintf(one, sizeof one, "(any values)");
        const char *sep = i == 0 ? "" : i + 1 < total ? ", " : " and ";
        len += (size_t)snprintf(buf + len, size - len, "%s%s", sep, one);
    }
}

/* ------------------------------------------------------------------ stages */

/* How long the shown part of a name is: at most EXI_STAGE_NAME_MAX bytes,
 * not ending inside a UTF-8 sequence. */
static size_t shown_length(const char *name, bool *cut) {
    size_t len = strnlen(name, EXI_STAGE_NAME_MAX + 1);
    *cut = len > EXI_STAGE_NAME_MAX;
    if (!*cut) return len;
    len = EXI_STAGE_NAME_MAX;
    while (len && ((unsigned char)name[len] & 0xc0) == 0x80) len--;
    return len;
}

void exi_stage_label(char *buf, size_t size, const char *stage, const char *name) {
    if (!name) {
        snprintf(buf, size, "%s", stage);
        return;
    }
    bool cut;
    size_t len = shown_length(name, &cut);
    snprintf(buf, size, "%s(%.*s%s)", stage, (int)len, name, cut ? "..." : "");
}

/* Room for a label: the longest builder name and a cut name. */
#define LABEL_MAX 96

const char *exi_stage_text(const char *stage, const char *name, const char *fixed, const char *fmt, ...) {
    char label[LABEL_MAX], rest[TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rest, sizeof rest, fmt, ap);
    va_end(ap);
    exi_stage_label(label, sizeof label, stage, name);
    const char *t = exi_error_text("%s: %s", label, rest);
    return t ? t : fixed;
}

const char *exi_stage_fixed(const char *fixed, const char *name) {
    const char *colon = strstr(fixed, ": ");
    if (!name || !colon) return fixed;
    char stage[LABEL_MAX];
    size_t n = (size_t)(colon - fixed);
    snprintf(stage, sizeof stage, "%.*s", (int)(n < sizeof stage ? n : sizeof stage - 1), fixed);
    return exi_stage_text(stage, name, fixed, "%s", colon + 2);
}

ex_error exi_stage_error(const char *stage, const char *name, ex_error e) {
    static const char cexec[] = "cexec: ";
    const char *rest = e.msg ? e.msg : "failed";
    if (!strncmp(rest, cexec, sizeof cexec - 1)) rest += sizeof cexec - 1;
    e.msg = exi_stage_text(stage, name, e.msg ? e.msg : stage, "%s", rest);
    return e;
}

const char *exi_stage_sig_mismatch(const char *stage, const char *name, const char *fixed, const ex_sig *sends,
                                   const ex_sig *takes) {
    char a[EXI_SIG_TEXT_SIZE], b[EXI_SIG_TEXT_SIZE];
    exi_sig_text(sends, a, sizeof a);
    exi_sig_text(takes, b, sizeof b);
    return exi_stage_text(stage, name, fixed, "the input sender sends %s; the function takes %s", a, b);
}

const char *exi_stage_values_mismatch(const char *stage, const char *name, const char *fixed, const ex_value *v,
                                      size_t n, const ex_sig *takes) {
    char a[EXI_SIG_TEXT_SIZE], b[EXI_SIG_TEXT_SIZE];
    exi_values_text(v, n, a, sizeof a);
    exi_sig_text(takes, b, sizeof b);
    return exi_stage_text(stage, name, fixed, "the child sent %s; the function takes %s", a, b);
}
