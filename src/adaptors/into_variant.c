/* SPDX-License-Identifier: MIT */
/* into_variant.c - into_variant, stopped_as_optional, stopped_as_error
 * ([exec.into.variant], [exec.stopped.as.optional], [exec.stopped.as.error]).
 * Each is one small operation around its child; none allocates. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

typedef enum variant_kind { INTO_VARIANT, STOPPED_AS_OPTIONAL, STOPPED_AS_ERROR } variant_kind;

typedef struct variant_sender {
    ex_sender base;
    ex_sender *child;
    variant_kind kind;
    ex_error err;
} variant_sender;

typedef struct variant_op {
    ex_operation base;
    ex_receiver r;
    ex_operation *child;
    variant_kind kind;
    ex_error err;
    ex_sigs child_sigs;  /* into_variant: to find the tuple's index */
} variant_op;

static void v_set_value(void *self, const ex_value *v, size_t n) {
    variant_op *o = self;
    ex_tuple t = { 0, (uint32_t)n, v };
    ex_value tv = ex_tuple_value(&t);
    switch (o->kind) {
    case INTO_VARIANT: {
        int idx = ex_sigs_find(&o->child_sigs, v, n);
        t.index = idx < 0 ? 0u : (uint32_t)idx;
        ex_set_value(o->r, &tv, 1);
        return;
    }
    case STOPPED_AS_OPTIONAL:
        if (n == 0) {
            ex_set_error(o->r, ex_err(EX_EINVAL, "ex_stopped_as_optional: the child completed with no value"));
        } else if (n == 1) {
            ex_set_value(o->r, v, 1);
        } else {
            ex_set_value(o->r, &tv, 1);
        }
        return;
    case STOPPED_AS_ERROR:
        ex_set_value(o->r, v, n);
        return;
    }
}

static void v_set_error(void *self, ex_error e) { ex_set_error(((variant_op *)self)->r, e); }

static void v_set_stopped(void *self) {
    variant_op *o = self;
    if (o->kind == STOPPED_AS_OPTIONAL) {
        ex_value none = ex_none();
        ex_set_value(o->r, &none, 1);
    } else if (o->kind == STOPPED_AS_ERROR) {
        ex_error e = o->err;
        o->err = ex_ok();  /* the operation's reference goes to the receiver */
        ex_set_error(o->r, e);
    } else {
        ex_set_stopped(o->r);
    }
}

static ex_env v_env(void *self) { return ex_env_forward(ex_receiver_env(((variant_op *)self)->r)); }

static const ex_receiver_vtable v_rcvr_vt = { v_set_value, v_set_error, v_set_stopped, v_env, NULL };

static void v_start(ex_operation *op) { ex_start(((variant_op *)op)->child); }
static void v_op_destroy(ex_operation *op) {
    variant_op *o = (variant_op *)op;
    ex_operation_destroy(o->child);
    exi_error_drop(o->err);  /* stopped_as_error that did not complete stopped */
}
static const ex_operation_vtable v_op_vt = { v_start, v_op_destroy };

static ex_error v_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const variant_sender *vs = (const variant_sender *)s;
    variant_op *o = storage;
    o->base.vt = &v_op_vt;
    o->r = r;
    o->kind = vs->kind;
    o->err = exi_error_copy(vs->err);
    o->child_sigs = vs->child->sigs;
    o->child = (ex_operation *)(void *)((char *)storage + exi_child_offset(sizeof(variant_op), vs->child));
    ex_receiver cr = { &v_rcvr_vt, o };
    return ex_connect_child(vs->child, cr, o->child);
}

static ex_env v_attrs(const ex_sender *s) {
    const variant_sender *vs = (const variant_sender *)s;
    /* Only into_variant completes on the child's channels unchanged. */
    if (vs->kind != INTO_VARIANT) return ex_env_empty();
    return ex_env_forward(ex_sender_attrs(vs->child));
}

static void v_destroy(ex_sender *s) {
    ex_sender_release(((variant_sender *)s)->child);
    exi_error_drop(((variant_sender *)s)->err);
}

static const ex_sender_vtable v_vts[] = {
    { "ex_into_variant", v_connect, v_attrs, v_destroy, NULL },
    { "ex_stopped_as_optional", v_connect, v_attrs, v_destroy, NULL },
    { "ex_stopped_as_error", v_connect, v_attrs, v_destroy, NULL },
};

static ex_sender *make_variant(variant_kind kind, ex_sender *child, ex_error err, const char *null_msg) {
    ex_error e = ex_check_input(child, null_msg);
    if (e.code) return exi_reject1(e.code, e.msg, child);
    const ex_sigs *cs = &child->sigs;
    bool dynamic = (cs->flags & EX_SIGS_DYNAMIC) != 0;
    bool has_values = cs->nvalues > 0 || dynamic;
    static const ex_sig tuple_sig = { 1, { EX_T_TUPLE } };
    static const ex_sig any1 = { 1, { EX_T_ANY } };
    ex_sigs sigs = ex_sigs_none();
    switch (kind) {
    case INTO_VARIANT:
        sigs = exi_sigs_of(has_values ? &tuple_sig : NULL, (uint8_t)(cs->flags & (EX_SIGS_ERROR | EX_SIGS_STOPPED)));
        break;
    case STOPPED_AS_OPTIONAL:
        if (!dynamic && (cs->nvalues != 1 || cs->values[0].arity == 0))
            return exi_reject1(EX_EINVAL, "ex_stopped_as_optional: the input sender must have exactly one value signature with at least one value", child);
        sigs = exi_sigs_of(&any1, (uint8_t)((cs->flags & EX_SIGS_ERROR) | (dynamic ? EX_SIGS_ERROR : 0)));
        if (!dynamic && cs->values[0].arity == 1 && !(cs->flags & EX_SIGS_STOPPED)) sigs.values[0] = cs->values[0];
        break;
    case STOPPED_AS_ERROR:
        if (err.code == EX_OK) return exi_reject1(EX_EINVAL, "ex_stopped_as_error: error code is EX_OK", child);
        if (!err.msg) err.msg = "ex_stopped_as_error";
        sigs = *cs;
        if (sigs.flags & EX_SIGS_STOPPED) sigs.flags = (uint8_t)((sigs.flags & ~EX_SIGS_STOPPED) | EX_SIGS_ERROR);
        break;
    }
    ex_sender *s = ex_sender_alloc(&v_vts[kind], sizeof(variant_sender));
    if (!s) return exi_reject1(EX_ENOMEM, NULL, child);
    variant_sender *vs = (variant_sender *)s;
    vs->child = child;
    vs->kind = kind;
    vs->err = err;
    s->sigs = sigs;
    exi_layout_one_child(s, sizeof(variant_op), alignof(variant_op), child);
    return s;
}

ex_sender *ex_into_variant(ex_sender *child) {
    return make_variant(INTO_VARIANT, child, ex_ok(), "ex_into_variant: NULL input sender");
}

ex_sender *ex_stopped_as_optional(ex_sender *child) {
    return make_variant(STOPPED_AS_OPTIONAL, child, ex_ok(), "ex_stopped_as_optional: NULL input sender");
}

/* Takes err's reference (cexec/error.h), released with the sender, or at
 * once when the sender is refused. */
ex_sender *ex_stopped_as_error(ex_sender *child, ex_error err) {
    ex_sender *s = make_variant(STOPPED_AS_ERROR, child, err, "ex_stopped_as_error: NULL input sender");
    if (s->status.code) exi_error_drop(err);
    return s;
}
