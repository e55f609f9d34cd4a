/* SPDX-License-Identifier: MIT */
/* ref.c - the reference: the set of outcomes a graph may complete with.
 *
 * Written from the public headers.  Without a stop request and without an
 * injected allocation failure the set is what the functions compute (a
 * single outcome, except where a when_all may pick one of several errors).
 * The soak does not model which node observes a stop or which allocation
 * fails (the fuzzer does): where a stop was requested any node may complete
 * stopped, and where the operation's fault allocator failed an allocation
 * any node may complete with EX_ENOMEM; the parents then transform those
 * outcomes like any other (upon_stopped makes a value of a stop, ...). */
#include <stdio.h>
#include <string.h>

#include "soak.h"

static outcome V(int64_t v) { return (outcome){ O_VALUE, v }; }
static outcome E(int64_t c) { return (outcome){ O_ERROR, c }; }
static outcome S(void) { return (outcome){ O_STOPPED, 0 }; }

bool oset_has(const oset *s, outcome o) {
    if (s->any) return true;
    for (int j = 0; j < s->n; j++)
        if (s->o[j].kind == o.kind && s->o[j].v == o.v) return true;
    return false;
}

static void add(oset *s, outcome o) {
    if (s->any || oset_has(s, o)) return;
    if (s->n == OSET_MAX) {
        s->any = true;  /* too many to keep: this operation is not checked */
        return;
    }
    s->o[s->n++] = o;
}

static void clear(oset *s) {
    s->n = 0;
    s->any = false;
}

static bool has_kind(const oset *s, int kind) {
    for (int j = 0; j < s->n; j++)
        if (s->o[j].kind == kind) return true;
    return s->any;
}

/* when_all's rules: any child's error, else stopped, else the sum of one
 * value of each child.  A child that may fail may stop its siblings. */
static void eval_when_all(const graph *g, const int8_t *kids, int n, rctx c, oset *out) {
    oset k[MAX_KIDS];
    bool may_fail = false;
    for (int j = 0; j < n; j++) {
        ref_eval(g, kids[j], c, &k[j]);
        may_fail |= has_kind(&k[j], O_ERROR);
    }
    if (may_fail && !c.stop) {
        rctx c2 = { true, c.fault };
        for (int j = 0; j < n; j++) ref_eval(g, kids[j], c2, &k[j]);
    }
    oset sums;
    clear(&sums);
    add(&sums, V(0));
    for (int j = 0; j < n; j++) {
        if (k[j].any) {
            out->any = true;
            return;
        }
        oset next;
        clear(&next);
        for (int b = 0; b < k[j].n; b++) {
            if (k[j].o[b].kind != O_VALUE) {
                add(out, k[j].o[b]);  /* every child runs, whatever the others did */
                continue;
            }
            for (int a = 0; a < sums.n; a++) add(&next, V(vmask(sums.o[a].v + k[j].o[b].v)));
        }
        if (next.any) {
            out->any = true;
            return;
        }
        sums = next;
    }
    for (int a = 0; a < sums.n; a++) add(out, sums.o[a]);
}

/* let_*: the function's base b becomes just(b) or when_all(just(b), body). */
static void eval_let_result(const graph *g, const node *nd, int64_t base, rctx c, oset *out) {
    int64_t b = vmask(base + nd->k);
    if (nd->kids[1] < 0) {
        add(out, V(b));
        return;
    }
    oset body;
    ref_eval(g, nd->kids[1], c, &body);
    if (body.any) out->any = true;
    for (int j = 0; j < body.n; j++)
        add(out, body.o[j].kind == O_VALUE ? V(vmask(b + body.o[j].v)) : body.o[j]);
}

/* A task awaits its children in turn: values are added, errors end it
 * (or are added, with T_CATCH), a stopped await stops it. */
static void eval_task(const graph *g, const node *nd, rctx c, oset *out) {
    oset acc;
    clear(&acc);
    add(&acc, V(nd->k));
    for (int j = 0; j < nd->nkids; j++) {
        oset k;
        ref_eval(g, nd->kids[j], c, &k);
        oset next;
        clear(&next);
        if (k.any) {
            out->any = true;
            return;
        }
        for (int a = 0; a < acc.n; a++)
            for (int b = 0; b < k.n; b++) {
                outcome o = k.o[b];
                if (o.kind == O_VALUE) add(&next, V(vmask(acc.o[a].v + o.v)));
                else if (o.kind == O_ERROR && (nd->flags & T_CATCH)) add(&next, V(vmask(acc.o[a].v + o.v * 100)));
                else add(out, o);
            }
        if (next.any) {
            out->any = true;
            return;
        }
        acc = next;
    }
    for (int a = 0; a < acc.n; a++) add(out, (nd->flags & T_WITH_ERROR) ? E(EX_EUSER + ERR_TASK) : acc.o[a]);
}

/* Maps each outcome of the only child through the node's rule. */
static void eval_unary(const graph *g, const node *nd, rctx c, oset *out) {
    oset k;
    ref_eval(g, nd->kids[0], c, &k);
    if (k.any) out->any = true;
    for (int j = 0; j < k.n; j++) {
        outcome o = k.o[j];
        switch ((nkind)nd->kind) {
        case N_THEN:
            if (o.kind != O_VALUE) add(out, o);
            else if (nd->fn == F_ADD) add(out, V(vmask(o.v + nd->k)));
            else if (nd->fn == F_MUL) add(out, V(vmask(o.v * 3 + nd->k)));
            else add(out, E(EX_EUSER + ERR_THEN + nd->k % 8));
            break;
        case N_UPON_ERROR: add(out, o.kind == O_ERROR ? V(vmask(o.v * 100 + nd->k)) : o); break;
        case N_UPON_STOPPED: add(out, o.kind == O_STOPPED ? V(nd->k) : o); break;
        case N_LET_VALUE:
            if (o.kind == O_VALUE) eval_let_result(g, nd, o.v, c, out);
            else add(out, o);
            break;
        case N_LET_ERROR:
            if (o.kind == O_ERROR) eval_let_result(g, nd, o.v, c, out);
            else add(out, o);
            break;
        case N_LET_STOPPED:
            if (o.kind == O_STOPPED) eval_let_result(g, nd, 0, c, out);
            else add(out, o);
            break;
        case N_BULK: add(out, o.kind == O_VALUE && nd->fail_at != NO_FAIL ? E(EX_EUSER + ERR_BULK) : o); break;
        default: add(out, o); break;  /* continues_on, starts_on */
        }
    }
}

/* Every consumer gets the one shared result; the shared work sees a stop
 * when any consumer may be stopped (a failing sibling stops it). */
static void eval_split(const graph *g, const node *nd, rctx c, oset *out) {
    rctx shared_c = { c.stop || c.fault, c.fault };
    oset k;
    ref_eval(g, nd->kids[0], shared_c, &k);
    if (k.any) out->any = true;
    for (int j = 0; j < k.n; j++)
        add(out, k.o[j].kind == O_VALUE ? V(vmask(k.o[j].v * nd->ncons)) : k.o[j]);
}

void ref_eval(const graph *g, int i, rctx c, oset *out) {
    const node *nd = &g->n[i];
    clear(out);
    switch ((nkind)nd->kind) {
    case N_JUST: add(out, V(nd->k)); break;
    case N_JUST_ERROR: add(out, E(EX_EUSER + ERR_JUST + nd->k)); break;
    case N_JUST_STOPPED: add(out, S()); break;
    case N_WHEN_ALL: eval_when_all(g, nd->kids, nd->nkids, c, out); break;
    case N_SPLIT: eval_split(g, nd, c, out); break;
    case N_TASK: eval_task(g, nd, c, out); break;
    default: eval_unary(g, nd, c, out); break;
    }
    if (c.fault) add(out, E(EX_ENOMEM));
    if (c.stop) add(out, S());
}

/* ------------------------------------------------------------ printing */

void outcome_format(outcome o, char *buf, size_t size) {
    switch (o.kind) {
    case O_VALUE: snprintf(buf, size, "value %lld", (long long)o.v); break;
    case O_ERROR: snprintf(buf, size, "error %lld", (long long)o.v); break;
    case O_STOPPED: snprintf(buf, size, "stopped"); break;
    default: snprintf(buf, size, "nothing"); break;
    }
}

void oset_format(const oset *s, char *buf, size_t size) {
    size_t len = 0;
    if (!size) return;
    buf[0] = 0;
    if (s->any) {
        snprintf(buf, size, "{anything}");
        return;
    }
    for (int j = 0; j < s->n && len + 1 < size; j++) {
        char one[48];
        outcome_format(s->o[j], one, sizeof one);
        int n = snprintf(buf + len, size - len, "%s%s", j ? ", " : "{", one);
        if (n < 0) break;
        len += (size_t)n;
    }
    if (len + 1 < size) snprintf(buf + len, size - len, s->n ? "}" : "{}");
}
