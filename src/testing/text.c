/* SPDX-License-Identifier: MIT */
/* text.c - the text of the testing helpers' messages (exi_test_text.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testing/exi_test_text.h"

/* The characters of a string datum and of an error's message a message
 * shows; a longer one is cut ("..." after): the message must keep room
 * for what was expected. */
#define SHOWN_STRING_MAX 160
#define SHOWN_ERROR_MAX 400
/* Tuples nested deeper are shown as "tuple(...)". */
#define SHOWN_DEPTH_MAX 8

void exi_text_init(exi_text *t, char *buf, size_t size) {
    t->p = buf;
    t->size = size;
    t->len = 0;
    if (size) buf[0] = '\0';
}

void exi_text_add(exi_text *t, const char *fmt, ...) {
    size_t room = t->len < t->size ? t->size - t->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(room ? t->p + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n;
}

size_t exi_text_end(exi_text *t) {
    if (t->len >= t->size && t->size >= 4) memcpy(t->p + t->size - 4, "...", 4);
    return t->len;
}

void exi_text_double(exi_text *t, double d) {
    char tmp[40];
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(tmp, sizeof tmp, "%.*g", digits, d);
        if (strtod(tmp, NULL) == d || d != d) break;
    }
    exi_text_add(t, "%s", tmp);
}

void exi_text_string(exi_text *t, const char *s, size_t max) {
    if (!s) {
        exi_text_add(t, "(null)");
        return;
    }
    exi_text_add(t, "\"");
    size_t i = 0;
    for (; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') exi_text_add(t, "\\%c", c);
        else if (c == '\n') exi_text_add(t, "\\n");
        else if (c == '\t') exi_text_add(t, "\\t");
        else if (c < 0x20 || c == 0x7f) exi_text_add(t, "\\x%02x", c);
        else exi_text_add(t, "%c", c);
    }
    exi_text_add(t, s[i] ? "\"..." : "\"");
}

static void add_value(exi_text *t, const ex_value *v, unsigned depth) {
    switch (v->type) {
    case EX_T_NONE: exi_text_add(t, "none"); return;
    case EX_T_BOOL: exi_text_add(t, "bool %s", v->as.b ? "true" : "false"); return;
    case EX_T_INT: exi_text_add(t, "int %lld", (long long)v->as.i); return;
    case EX_T_UINT: exi_text_add(t, "uint %llu", (unsigned long long)v->as.u); return;
    case EX_T_DOUBLE: exi_text_add(t, "double "); exi_text_double(t, v->as.d); return;
    case EX_T_PTR: exi_text_add(t, "ptr %p", v->as.p); return;
    case EX_T_STR: exi_text_add(t, "str "); exi_text_string(t, v->as.s, SHOWN_STRING_MAX); return;
    case EX_T_SCHED: exi_text_add(t, "scheduler %p", v->as.sched.self); return;
    case EX_T_TOKEN: exi_text_add(t, "stop_token %p", (void *)v->as.token.src); return;
    case EX_T_ALLOC:
        exi_text_add(t, "allocator %s", v->as.alloc && v->as.alloc->name ? v->as.alloc->name : "(unnamed)");
        return;
    case EX_T_TUPLE: {
        const ex_tuple *tu = v->as.tuple;
        if (!tu) { exi_text_add(t, "tuple (null)"); return; }
        if (depth >= SHOWN_DEPTH_MAX) { exi_text_add(t, "tuple#%u(...)", tu->index); return; }
        exi_text_add(t, "tuple#%u(", tu->index);
        for (uint32_t i = 0; i < tu->n; i++) {
            if (i) exi_text_add(t, ", ");
            add_value(t, &tu->v[i], depth + 1);
        }
        exi_text_add(t, ")");
        return;
    }
    default: exi_text_add(t, "%s", ex_type_name(v->type)); return;
    }
}

void exi_text_value(exi_text *t, const ex_value *v) { add_value(t, v, 0); }

void exi_text_values(exi_text *t, const ex_value *v, size_t n) {
    if (n == 1) {
        exi_text_add(t, "value ");
        exi_text_value(t, v);
        return;
    }
    exi_text_add(t, n ? "values (" : "value (");
    for (size_t i = 0; i < n; i++) {
        if (i) exi_text_add(t, ", ");
        exi_text_value(t, &v[i]);
    }
    exi_text_add(t, ")");
}

void exi_text_code(exi_text *t, int code) {
    static const struct { int code; const char *name; } names[] = {
        { EX_OK, "EX_OK" },         { EX_ENOMEM, "EX_ENOMEM" },     { EX_EINVAL, "EX_EINVAL" },
        { EX_ESHUTDOWN, "EX_ESHUTDOWN" }, { EX_EBUSY, "EX_EBUSY" }, { EX_EAGAIN, "EX_EAGAIN" },
        { EX_ECANCELED, "EX_ECANCELED" }, { EX_ETOODEEP, "EX_ETOODEEP" }, { EX_EDEADLK, "EX_EDEADLK" },
        { EX_ENOTSUP, "EX_ENOTSUP" }, { EX_ETIMEDOUT, "EX_ETIMEDOUT" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].code == code) { exi_text_add(t, "%s", names[i].name); return; }
    if (code == EX_EUSER) exi_text_add(t, "EX_EUSER");
    else if (code > EX_EUSER) exi_text_add(t, "EX_EUSER + %d", code - EX_EUSER);
    else exi_text_add(t, "code %d", code);
}

void exi_text_error(exi_text *t, ex_error e) {
    exi_text_add(t, "error ");
    exi_text_code(t, e.code);
    exi_text_add(t, " ");
    exi_text_string(t, e.msg, SHOWN_ERROR_MAX);
}
