/* SPDX-License-Identifier: MIT */
/* value.c - values and their deep-copy storage (signatures: sigs.c). */
#include <stdio.h>

#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "core/exi_value.h"

static const char *const type_names[EX_T_COUNT_] = {
    [EX_T_ANY] = "any",     [EX_T_NONE] = "none",     [EX_T_BOOL] = "bool",
    [EX_T_INT] = "int",     [EX_T_UINT] = "uint",     [EX_T_DOUBLE] = "double",
    [EX_T_PTR] = "ptr",     [EX_T_STR] = "str",       [EX_T_SCHED] = "scheduler",
    [EX_T_TOKEN] = "stop_token", [EX_T_ALLOC] = "allocator", [EX_T_TUPLE] = "tuple",
};

const char *ex_type_name(ex_type t) {
    if ((unsigned)t >= EX_T_COUNT_) return "invalid";
    return type_names[t];
}

/* Appends to a bounded buffer, tracking the length wanted. */
typedef struct fmt_buf { char *p; size_t size, len; } fmt_buf;

static void fmt_put(fmt_buf *b, const char *s) {
    size_t n = strlen(s);
    if (b->len < b->size) {
        size_t room = b->size - b->len - 1;
        size_t k = n < room ? n : room;
        memcpy(b->p + b->len, s, k);
        b->p[b->len + k] = '\0';
    }
    b->len += n;
}

static void fmt_value(fmt_buf *b, const ex_value *v) {
    char tmp[64];
    switch (v->type) {
    case EX_T_BOOL: fmt_put(b, v->as.b ? "bool true" : "bool false"); return;
    case EX_T_INT: snprintf(tmp, sizeof tmp, "int %lld", (long long)v->as.i); break;
    case EX_T_UINT: snprintf(tmp, sizeof tmp, "uint %llu", (unsigned long long)v->as.u); break;
    case EX_T_DOUBLE: snprintf(tmp, sizeof tmp, "double %g", v->as.d); break;
    case EX_T_PTR: snprintf(tmp, sizeof tmp, "ptr %p", v->as.p); break;
    case EX_T_STR:
        fmt_put(b, "str \"");
        fmt_put(b, v->as.s ? v->as.s : "(null)");
        fmt_put(b, "\"");
        return;
    case EX_T_SCHED: snprintf(tmp, sizeof tmp, "scheduler %p", v->as.sched.self); break;
    case EX_T_TOKEN: snprintf(tmp, sizeof tmp, "stop_token %p", (void *)v->as.token.src); break;
    case EX_T_ALLOC: snprintf(tmp, sizeof tmp, "allocator %p", (const void *)v->as.alloc); break;
    case EX_T_TUPLE: {
        const ex_tuple *t = v->as.tuple;
        snprintf(tmp, sizeof tmp, "tuple#%u(", t ? t->index : 0u);
        fmt_put(b, tmp);
        for (uint32_t i = 0; t && i < t->n; i++) {
            if (i) fmt_put(b, ", ");
            fmt_value(b, &t->v[i]);
        }
        fmt_put(b, ")");
        return;
    }
    default: fmt_put(b, ex_type_name(v->type)); return;
    }
    fmt_put(b, tmp);
}

size_t ex_value_format(const ex_value *v, char *buf, size_t size) {
    fmt_buf b = { buf, size, 0 };
    if (size) buf[0] = '\0';
    fmt_value(&b, v);
    return b.len;
}

bool ex_value_equal(const ex_value *a, const ex_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case EX_T_NONE: return true;
    case EX_T_BOOL: return a->as.b == b->as.b;
    case EX_T_INT: return a->as.i == b->as.i;
    case EX_T_UINT: return a->as.u == b->as.u;
    case EX_T_DOUBLE: return a->as.d == b->as.d;
    case EX_T_PTR: return a->as.p == b->as.p;
    case EX_T_STR: return a->as.s == b->as.s;
    case EX_T_SCHED: return ex_scheduler_equal(a->as.sched, b->as.sched);
    case EX_T_TOKEN: return a->as.token.src == b->as.token.src;
    case EX_T_ALLOC: return a->as.alloc == b->as.alloc;
    case EX_T_TUPLE: {
        const ex_tuple *x = a->as.tuple, *y = b->as.tuple;
        if (x == y) return true;
        if (!x || !y || x->index != y->index || x->n != y->n) return false;
        for (uint32_t i = 0; i < x->n; i++)
            if (!ex_value_equal(&x->v[i], &y->v[i])) return false;
        return true;
    }
    default: return false;
    }
}

/* ------------------------------------------------------------- signatures */

static size_t nested_bytes(const ex_value *v, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].type != EX_T_TUPLE || !v[i].as.tuple) continue;
        const ex_tuple *t = v[i].as.tuple;
        /* Saturating: tuples shared many times over could add up past SIZE_MAX; the allocator refuses that. */
        total = ex_size_add(total, ex_size_add(sizeof(ex_tuple) + t->n * sizeof(ex_value), nested_bytes(t->v, t->n)));
    }
    return total;
}

/* Copies n values to dst; tuple contents are placed at *cursor. */
static void copy_into(ex_value *dst, const ex_value *src, size_t n, char **cursor) {
    for (size_t i = 0; i < n; i++) {
        dst[i] = src[i];
        if (src[i].type != EX_T_TUPLE || !src[i].as.tuple) continue;
        const ex_tuple *t = src[i].as.tuple;
        ex_tuple *nt = (ex_tuple *)(void *)*cursor;
        *cursor += sizeof(ex_tuple);
        ex_value *nv = (ex_value *)(void *)*cursor;
        *cursor += t->n * sizeof(ex_value);
        nt->index = t->index;
        nt->n = t->n;
        nt->v = nv;
        copy_into(nv, t->v, t->n, cursor);
        dst[i].as.tuple = nt;
    }
}

ex_error exi_values_copy_deep(ex_value *dst, const ex_value *src, size_t n, const ex_allocator *alloc,
                              void **nested, size_t *nested_size) {
    bool tuples = false;
    *nested = NULL;
    *nested_size = 0;
    /* Every dst holds EX_MAX_ARITY values; a sender of yours that sends
     * more breaks the model, and must not write past them. */
    if (n > EX_MAX_ARITY) return ex_err(EX_EINVAL, "cexec: a sender completed with more than EX_MAX_ARITY values");
    for (size_t i = 0; i < n; i++) tuples |= src[i].type == EX_T_TUPLE;
    if (!tuples) {  /* the common case: a flat copy */
        if (n) memcpy(dst, src, n * sizeof *src);
        return ex_ok();
    }
    size_t bytes = nested_bytes(src, n);
    char *block = NULL;
    if (bytes) {
        block = ex_allocate(alloc, bytes, alignof(ex_value));
        if (!block) return ex_err(EX_ENOMEM, "cexec: out of memory copying tuple values");
        *nested = block;
        *nested_size = bytes;
    }
    char *cursor = block;
    copy_into(dst, src, n, &cursor);
    return ex_ok();
}

void exi_store_free_nested(exi_store *st) {
    ex_deallocate(st->alloc, st->nested, st->nested_size, alignof(ex_value));
    st->nested = NULL;
    st->nested_size = 0;
}

ex_error exi_store_set_deep(exi_store *st, const ex_value *v, size_t n, const ex_allocator *alloc) {
    if (st->nested) exi_store_clear(st);
    st->alloc = alloc;
    ex_error e = exi_values_copy_deep(st->v, v, n, alloc, &st->nested, &st->nested_size);
    if (e.code) return e;
    st->n = n;
    return e;
}
