/* SPDX-License-Identifier: MIT */
/* owning.c - ex_owning_ctx: a sender that owns its callbacks' context.
 * Each operation holds a reference to the sender, so the context goes only
 * after the last operation and the last reference. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "core/exi_sender.h"

typedef struct owning_sender {
    ex_sender base;
    ex_sender *child;
    void *ctx;
    void (*destroy)(void *ctx);
} owning_sender;

typedef struct owning_op {
    ex_operation base;
    ex_sender *owner;  /* a reference, dropped with the operation */
    ex_operation *child;
} owning_op;

static void o_start(ex_operation *op) { ex_start(((owning_op *)op)->child); }

static void o_op_destroy(ex_operation *op) {
    owning_op *o = (owning_op *)op;
    ex_operation_destroy(o->child);
    ex_sender_release(o->owner);  /* may be the last hold: destroys ctx */
}

static const ex_operation_vtable o_op_vt = { o_start, o_op_destroy };

/* The child is connected to the receiver itself: nothing is added between
 * them. */
static ex_error o_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const owning_sender *os = (const owning_sender *)s;
    owning_op *o = storage;
    o->base.vt = &o_op_vt;
    o->child = (ex_operation *)(void *)((char *)storage + exi_child_offset(sizeof(owning_op), os->child));
    ex_error e = ex_connect_child(os->child, r, o->child);
    if (e.code) return e;
    o->owner = ex_sender_retain((ex_sender *)(uintptr_t)s);
    return e;
}

static ex_env o_attrs(const ex_sender *s) { return ex_sender_attrs(((const owning_sender *)s)->child); }

static void o_destroy(ex_sender *s) {
    owning_sender *os = (owning_sender *)s;
    ex_sender_release(os->child);
    os->destroy(os->ctx);
}

static const ex_sender_vtable owning_vt = { "ex_owning_ctx", o_connect, o_attrs, o_destroy, NULL };

ex_sender *ex_owning_ctx(ex_sender *s, void *ctx, void (*destroy)(void *ctx)) {
    if (!destroy) return exi_reject1(EX_EINVAL, "ex_owning_ctx: NULL destroy function", s);
    ex_error e = ex_check_input(s, "ex_owning_ctx: NULL sender");
    if (e.code) {
        destroy(ctx);
        return exi_reject1(e.code, e.msg, s);
    }
    ex_sender *o = ex_sender_alloc(&owning_vt, sizeof(owning_sender));
    if (!o) {
        destroy(ctx);
        return exi_reject1(EX_ENOMEM, NULL, s);
    }
    owning_sender *os = (owning_sender *)o;
    os->child = s;
    os->ctx = ctx;
    os->destroy = destroy;
    o->sigs = s->sigs;
    exi_layout_one_child(o, sizeof(owning_op), alignof(owning_op), s);
    return o;
}
