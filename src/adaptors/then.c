/* SPDX-License-Identifier: MIT */
/* then.c - then, upon_error, upon_stopped ([exec.then]).
 *
 * Every message names the stage, "ex_then(name): ..." (then.h); the name
 * is one pointer in the sender and the operation, read only to make a
 * message. */
#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "adaptors/exi_stage_name.h"
#include "core/exi_domain.h"
#include "core/exi_error_text.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

typedef enum then_kind { THEN_VALUE, THEN_ERROR, THEN_STOPPED } then_kind;

typedef struct then_sender {
    ex_sender base;
    ex_sender *child;
    then_kind kind;
    union { ex_then_fn value; ex_upon_error_fn error; ex_upon_stopped_fn stopped; } fn;
    void *ctx;
    const char *name;  /* the stage's, for messages; NULL: none */
    ex_sig in, out;
} then_sender;

typedef struct then_op {
    ex_operation base;
    ex_receiver r;
    ex_operation *child;
    then_kind kind;
    bool check_in;  /* fn declared its input: check the values as they come */
    union { ex_then_fn value; ex_upon_error_fn error; ex_upon_stopped_fn stopped; } fn;
    void *ctx;
    ex_sig in, out;
    const char *name;  /* the stage's (messages only): last, after the fields every run reads */
} then_op;

/* A builder's fixed messages, each the fallback of its named or
 * formatted form (exi_error_text.h). */
typedef struct then_texts {
    const char *stage, *null_child, *null_fn, *out_arity, *in_sig, *in_values, *failed, *too_many, *results;
} then_texts;

#define THEN_TEXTS(stage)                                                                                   \
    { stage, stage ": NULL input sender", stage ": NULL function",                                         \
      stage ": the output signature must have at most EX_MAX_ARITY values",                                \
      stage ": the input sender's value signature does not match the function's input signature",          \
      stage ": the child's values do not match the function's input signature",                           \
      stage ": the function failed", stage ": the function wrote more results than its declared output signature has", \
      stage ": the function's results do not match its declared output signature" }

static const then_texts texts[] = { THEN_TEXTS("ex_then"), THEN_TEXTS("ex_upon_error"), THEN_TEXTS("ex_upon_stopped") };

/* The function's results against its declared output. */
static const char *results_mismatch(const then_op *o, const ex_value *v) {
    char a[EXI_SIG_TEXT_SIZE], b[EXI_SIG_TEXT_SIZE];
    exi_values_text(v, o->out.arity, a, sizeof a);
    exi_sig_text(&o->out, b, sizeof b);
    const then_texts *t = &texts[o->kind];
    return exi_stage_text(t->stage, o->name, t->results, "the function's results %s do not match its declared output %s", a, b);
}

static const char *too_many_results(const then_op *o) {
    char b[EXI_SIG_TEXT_SIZE];
    exi_sig_text(&o->out, b, sizeof b);
    const then_texts *t = &texts[o->kind];
    return exi_stage_text(t->stage, o->name, t->too_many, "the function wrote more results than its declared output %s has", b);
}

/* Not a type: marks the slot after the declared results, so a function
 * that writes one result too many is caught instead of being cut short. */
#define OUT_GUARD ((ex_type)0x7f)

/* Output slots start untyped and zeroed: a function that leaves a result
 * unset is caught by the output check instead of sending garbage. */
static void clear_out(ex_value *out, unsigned n) {
    for (unsigned i = 0; i < n; i++) {
        ex_value *v = &out[i];
        /* Opaque to the optimiser: stores per value, not a memset (which
         * becomes rep stos, slow to start for a value or two). */
        __asm__("" : "+r"(v));
        *v = (ex_value){ .type = EX_T_ANY };
    }
    if (n < EX_MAX_ARITY) out[n].type = OUT_GUARD;
}

/* Sends fn's results on, or its error.  By address: copying the error
 * fn just wrote, as an argument, stalls on store forwarding; only its
 * code is read on the way to the values. */
static void finish_call(then_op *o, const ex_error *fe, ex_value *out) {
    if (fe->code) {
        ex_error e = *fe;
        if (!e.msg) e.msg = exi_stage_fixed(texts[o->kind].failed, o->name);
        ex_set_error(o->r, e);
    } else if (o->out.arity < EX_MAX_ARITY && out[o->out.arity].type != OUT_GUARD) {
        ex_set_error(o->r, ex_err(EX_EINVAL, too_many_results(o)));
    } else if (!exi_sig_matches(&o->out, out, o->out.arity)) {
        ex_set_error(o->r, ex_err(EX_EINVAL, results_mismatch(o, out)));
    } else {
        ex_set_value(o->r, out, o->out.arity);
    }
}

static void then_set_value(void *self, const ex_value *v, size_t n) {
    then_op *o = self;
    if (o->kind != THEN_VALUE) { ex_set_value(o->r, v, n); return; }
    if (o->check_in && !exi_sig_matches(&o->in, v, n)) {
        ex_set_error(o->r, ex_err(EX_EINVAL, exi_stage_values_mismatch("ex_then", o->name, texts[THEN_VALUE].in_values,
                                                                       v, n, &o->in)));
        return;
    }
    ex_value out[EX_MAX_ARITY];
    clear_out(out, o->out.arity);
    ex_error e = o->fn.value(o->ctx, v, n, out);
    finish_call(o, &e, out);
}

static void then_set_error(void *self, ex_error err) {
    then_op *o = self;
    if (o->kind != THEN_ERROR) { ex_set_error(o->r, err); return; }
    ex_value out[EX_MAX_ARITY];
    clear_out(out, o->out.arity);
    ex_error e = o->fn.error(o->ctx, err, out);
    finish_call(o, &e, out);
}

static void then_set_stopped(void *self) {
    then_op *o = self;
    if (o->kind != THEN_STOPPED) { ex_set_stopped(o->r); return; }
    ex_value out[EX_MAX_ARITY];
    clear_out(out, o->out.arity);
    ex_error e = o->fn.stopped(o->ctx, out);
    finish_call(o, &e, out);
}

static ex_env then_env(void *self) { return ex_env_forward(ex_receiver_env(((then_op *)self)->r)); }

static const ex_receiver_vtable then_rcvr_vt = { then_set_value, then_set_error, then_set_stopped, then_env, NULL };

static void then_start(ex_operation *op) { ex_start(((then_op *)op)->child); }
static void then_op_destroy(ex_operation *op) { ex_operation_destroy(((then_op *)op)->child); }
static const ex_operation_vtable then_op_vt = { then_start, then_op_destroy };

static inline __attribute__((always_inline)) ex_error then_connect_now(const ex_sender *s,
                                                                       ex_receiver r, void *storage) {
    const then_sender *ts = (const then_sender *)s;
    then_op *o = storage;
    o->base.vt = &then_op_vt;
    o->r = r;
    o->kind = ts->kind;
    memcpy(&o->fn, &ts->fn, sizeof o->fn);
    o->ctx = ts->ctx;
    o->name = ts->name;
    o->in = ts->in;
    o->out = ts->out;
    o->check_in = ts->in.arity != 0xff;
    o->child = (ex_operation *)(void *)((char *)storage + exi_child_offset(sizeof(then_op), ts->child));
    ex_receiver cr = { &then_rcvr_vt, o };
    return ex_connect_child(ts->child, cr, o->child);
}

static ex_error then_connect(const ex_sender *s, ex_receiver r, void *storage) {
    if (exi_late_wants(s)) return exi_connect_late(s, r, storage, then_connect_now);
    return then_connect_now(s, r, storage);
}

static ex_env then_attrs(const ex_sender *s) {
    return ex_env_forward(ex_sender_attrs(((const then_sender *)s)->child));
}

static void then_destroy(ex_sender *s) { ex_sender_release(((then_sender *)s)->child); }

static const ex_sender_vtable then_vts[] = {
    { "ex_then", then_connect, then_attrs, then_destroy, &ex_tag_then },
    { "ex_upon_error", then_connect, then_attrs, then_destroy, &ex_tag_upon_error },
    { "ex_upon_stopped", then_connect, then_attrs, then_destroy, &ex_tag_upon_stopped },
};

/* The invalid sender for a bad argument: the fixed text, named. */
static ex_sender *reject(const char *fixed, const char *name, ex_sender *child) {
    return exi_reject1(EX_EINVAL, exi_stage_fixed(fixed, name), child);
}

static ex_sender *make_then(then_kind kind, ex_sender *child, void *fn, void *ctx, ex_sig in, ex_sig out,
                            const char *name) {
    const then_texts *t = &texts[kind];
    ex_error e = ex_check_input(child, t->null_child);
    if (e.code) {
        if (!child) return reject(t->null_child, name, child);
        return exi_reject1(e.code, e.msg, child);  /* the child's own error */
    }
    if (!fn) return reject(t->null_fn, name, child);
    if (out.arity > EX_MAX_ARITY)
        return exi_reject1(EX_EINVAL, exi_stage_text(t->stage, name, t->out_arity,
                                                     "the output signature has %u values; at most EX_MAX_ARITY (%d) fit",
                                                     (unsigned)out.arity, EX_MAX_ARITY), child);

    const ex_sigs *cs = &child->sigs;
    ex_sigs sigs = ex_sigs_none();
    bool calls = false;  /* can fn be called at all? */
    if (kind == THEN_VALUE) {
        for (unsigned i = 0; i < cs->nvalues; i++)
            if (!ex_sig_compatible(&in, &cs->values[i]))
                return exi_reject1(EX_EINVAL, exi_stage_sig_mismatch(t->stage, name, t->in_sig, &cs->values[i], &in), child);
        calls = cs->nvalues > 0 || (cs->flags & EX_SIGS_DYNAMIC);
        sigs.flags = (uint8_t)(cs->flags & (EX_SIGS_ERROR | EX_SIGS_STOPPED));
    } else {
        sigs = *cs;
        if (kind == THEN_ERROR) {
            calls = (cs->flags & EX_SIGS_ERROR) != 0;
            sigs.flags &= (uint8_t)~EX_SIGS_ERROR;
        } else {
            calls = (cs->flags & EX_SIGS_STOPPED) != 0;
            sigs.flags &= (uint8_t)~EX_SIGS_STOPPED;
        }
    }
    if (calls) {
        sigs.flags |= EX_SIGS_ERROR;  /* fn may fail */
        if (!ex_sigs_add_value(&sigs, out)) sigs.flags |= EX_SIGS_DYNAMIC;
    }

    ex_sender *s = ex_sender_alloc(&then_vts[kind], sizeof(then_sender));
    if (!s) return exi_reject1(EX_ENOMEM, NULL, child);
    then_sender *ts = (then_sender *)s;
    ts->child = child;
    ts->kind = kind;
    memcpy(&ts->fn, &fn, sizeof(void *));
    ts->ctx = ctx;
    ts->name = name;
    ts->in = in;
    ts->out = out;
    s->sigs = sigs;
    exi_layout_one_child(s, sizeof(then_op), alignof(then_op), child);
    return exi_early_from_child(s, child);
}

/* (The plain names are macros in C, then.h: parenthesised, they name the
 * functions.) */
ex_sender *ex_then_named(ex_sender *child, ex_then_fn fn, void *ctx, ex_sig in, ex_sig out, const char *name) {
    void *f;
    memcpy(&f, &fn, sizeof f);
    return make_then(THEN_VALUE, child, f, ctx, in, out, name);
}

ex_sender *(ex_then)(ex_sender *child, ex_then_fn fn, void *ctx, ex_sig in, ex_sig out) {
    return ex_then_named(child, fn, ctx, in, out, NULL);
}

ex_sender *ex_upon_error_named(ex_sender *child, ex_upon_error_fn fn, void *ctx, ex_sig out, const char *name) {
    void *f;
    memcpy(&f, &fn, sizeof f);
    return make_then(THEN_ERROR, child, f, ctx, EX_SIG_VARIADIC, out, name);
}

ex_sender *(ex_upon_error)(ex_sender *child, ex_upon_error_fn fn, void *ctx, ex_sig out) {
    return ex_upon_error_named(child, fn, ctx, out, NULL);
}

ex_sender *ex_upon_stopped_named(ex_sender *child, ex_upon_stopped_fn fn, void *ctx, ex_sig out, const char *name) {
    void *f;
    memcpy(&f, &fn, sizeof f);
    return make_then(THEN_STOPPED, child, f, ctx, EX_SIG_VARIADIC, out, name);
}

ex_sender *(ex_upon_stopped)(ex_sender *child, ex_upon_stopped_fn fn, void *ctx, ex_sig out) {
    return ex_upon_stopped_named(child, fn, ctx, out, NULL);
}

const char *exi_then_stage_name(const ex_sender *s) {
    for (size_t i = 0; i < sizeof then_vts / sizeof then_vts[0]; i++)
        if (s->vt == &then_vts[i]) return ((const then_sender *)s)->name;
    return NULL;
}
