/* SPDX-License-Identifier: MIT */
/* ref_values.c - the reference's value model: the then / upon function
 * table (shared with the harness), outcomes and sets of outcomes. */
#include "ref_private.h"

#include <stdio.h>
#include <string.h>

/* -------------------------------------------------------- function table */

uint64_t r_sum_plus(int64_t k, const int64_t *in, size_t n) {
    uint64_t s = (uint64_t)k;
    for (size_t i = 0; i < n; i++) s += (uint64_t)in[i];
    return s;
}

int g_then_apply(const g_node *nd, const int64_t *in, size_t n, int64_t *out) {
    uint64_t base;
    switch (nd->fn) {
    case TF_ERR: return G_EUSER + (int)(nd->k & 15);
    case TF_MUL:
        base = 1;
        for (size_t i = 0; i < n; i++) base *= (uint64_t)in[i];
        base *= (uint64_t)(nd->k + 1);
        break;
    default: base = r_sum_plus(nd->k, in, n); break;
    }
    for (unsigned i = 0; i < nd->arity; i++) out[i] = (int64_t)(base + i);
    return 0;
}

/* ------------------------------------------------------------------ sets */

r_out r_out_value(const int64_t *v, size_t n, bool top_req) {
    r_out o;
    memset(&o, 0, sizeof o);
    o.disp = R_VALUE;
    o.n = (uint8_t)n;
    o.top_req = top_req;
    if (n) memcpy(o.v, v, n * sizeof *v);
    return o;
}

r_out r_out_error(int code, bool top_req) {
    r_out o;
    memset(&o, 0, sizeof o);
    o.disp = R_ERROR;
    o.code = code;
    o.top_req = top_req;
    return o;
}

r_out r_out_stopped(bool top_req) {
    r_out o;
    memset(&o, 0, sizeof o);
    o.disp = R_STOPPED;
    o.top_req = top_req;
    return o;
}

static bool same(const r_out *a, const r_out *b, bool with_flag) {
    if (a->disp != b->disp) return false;
    if (with_flag && a->top_req != b->top_req) return false;
    if (a->disp == R_ERROR) return a->code == b->code;
    if (a->disp == R_STOPPED) return true;
    return a->n == b->n && memcmp(a->v, b->v, a->n * sizeof a->v[0]) == 0;
}

bool r_set_contains(const r_set *s, const r_out *o) {
    if (s->any) return true;
    for (unsigned i = 0; i < s->n; i++)
        if (same(&s->o[i], o, false)) return true;
    return false;
}

void r_set_clear(r_set *s) {
    s->n = 0;
    s->any = false;
    s->sync = false;
}

void r_set_add(r_set *s, r_out o) {
    if (s->any) return;
    for (unsigned i = 0; i < s->n; i++)
        if (same(&s->o[i], &o, true)) return;
    if (s->n == R_SET_MAX) {
        s->any = true;
        return;
    }
    s->o[s->n++] = o;
}

void r_set_union(r_set *s, const r_set *t) {
    if (t->any) s->any = true;
    for (unsigned i = 0; i < t->n; i++) r_set_add(s, t->o[i]);
}

void r_out_format(const r_out *o, char *buf, size_t size) {
    int len;
    switch (o->disp) {
    case R_VALUE:
        len = snprintf(buf, size, "value(");
        for (unsigned i = 0; i < o->n && len >= 0 && (size_t)len < size; i++)
            len += snprintf(buf + len, size - (size_t)len, "%s%lld", i ? "," : "", (long long)o->v[i]);
        if (len >= 0 && (size_t)len < size) snprintf(buf + len, size - (size_t)len, ")");
        break;
    case R_ERROR: snprintf(buf, size, "error(%d)", o->code); break;
    case R_STOPPED: snprintf(buf, size, "stopped"); break;
    default: snprintf(buf, size, "(none, disp %d)", o->disp); break;
    }
}

void r_set_dump(const char *label, const r_set *s) {
    fprintf(stderr, "%s {", label);
    if (s->any) fprintf(stderr, " ANY");
    for (unsigned i = 0; i < s->n; i++) {
        char buf[256];
        r_out_format(&s->o[i], buf, sizeof buf);
        fprintf(stderr, " %s%s", buf, s->o[i].top_req ? "[req]" : "");
    }
    fprintf(stderr, " }\n");
}
