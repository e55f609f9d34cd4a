/* SPDX-License-Identifier: MIT */
/* associate.c - ex_associate (C++26 [exec.associate], P3149): a sender
 * that keeps a scope from being joined while it, or an operation made from
 * it, exists.
 *
 * The builder wraps the input with the token (ex_scope_token_wrap) and
 * tries to associate: on success the sender owns that association, on
 * failure it drops the input and completes stopped when run.  The first
 * connect takes the sender's association over (C++'s rvalue connect); a
 * later one takes a new association of its own (C++ connects a copy,
 * whose association is taken anew), which fails once the scope is closed.
 * An operation without an association completes stopped in start; one with
 * it is the wrapped input's operation connected straight to the receiver,
 * and ends its association when destroyed, after the input's operation:
 * whether or not it was started. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "core/exi_sender.h"

typedef struct assoc_sender {
    ex_sender base;
    ex_sender *child;      /* token.wrap(input); NULL: the association failed */
    ex_scope_token token;
    uint32_t held;         /* 1 while the sender owns the association it was built with */
    size_t child_off;      /* the child's operation in ours */
} assoc_sender;

typedef struct assoc_op {
    ex_operation base;
    ex_receiver r;          /* completed stopped when not associated */
    ex_scope_token token;   /* .scope NULL: no association */
    ex_operation *child;
} assoc_op;

static void a_start(ex_operation *op) {
    assoc_op *o = (assoc_op *)op;
    if (o->token.scope) ex_start(o->child);
    else ex_set_stopped(o->r);
}

static void a_op_destroy(ex_operation *op) {
    assoc_op *o = (assoc_op *)op;
    if (!o->token.scope) return;
    ex_operation_destroy(o->child);
    ex_scope_token_disassociate(o->token);  /* last: it may let the scope be joined and destroyed */
}

static const ex_operation_vtable assoc_op_vt = { a_start, a_op_destroy };

/* The association an operation is to own: the sender's, if no connect
 * took it yet (*taken), else a new one.  False: none. */
static bool take_association(assoc_sender *as, bool *taken) {
    uint32_t held = 1;
    *taken = exi_cas_u32(&as->held, &held, 0);
    return *taken || ex_scope_token_try_associate(as->token);
}

static ex_error a_connect(const ex_sender *s, ex_receiver r, void *storage) {
    /* held is the one field connect changes (atomically): the sender is
     * allocated, never const itself. */
    assoc_sender *as = (assoc_sender *)(uintptr_t)s;
    assoc_op *o = storage;
    o->base.vt = &assoc_op_vt;
    o->r = r;
    o->token.scope = NULL;
    o->child = (ex_operation *)(void *)((char *)storage + as->child_off);
    bool taken;
    if (!as->child || !take_association(as, &taken)) return ex_ok();
    ex_error e = ex_connect_child(as->child, r, o->child);
    if (e.code) {
        /* A failed connect leaves the sender as it was. */
        if (taken) exi_store_rel_u32(&as->held, 1);
        else ex_scope_token_disassociate(as->token);
        return e;
    }
    o->token = as->token;
    return ex_ok();
}

static void a_destroy(ex_sender *s) {
    assoc_sender *as = (assoc_sender *)s;
    if (!as->child) return;
    ex_sender_release(as->child);
    if (exi_load_acq_u32(&as->held)) ex_scope_token_disassociate(as->token);  /* never taken over */
}

static const ex_sender_vtable assoc_vt = { "ex_associate", a_connect, NULL, a_destroy, NULL };

ex_sender *ex_associate(ex_sender *s, ex_scope_token t) {
    ex_error e = ex_check_input(s, "ex_associate: NULL sender");
    if (e.code) return exi_reject1(e.code, e.msg, s);
    if (!t.scope) return exi_reject1(EX_EINVAL, "ex_associate: NULL scope token", s);
    ex_sender *w = ex_scope_token_wrap(t, s);
    e = ex_check_input(w, "ex_associate: NULL sender");
    if (e.code) return exi_reject1(e.code, e.msg, w);
    ex_sender *a = ex_sender_alloc(&assoc_vt, sizeof(assoc_sender));
    if (!a) return exi_reject1(EX_ENOMEM, NULL, w);
    assoc_sender *as = (assoc_sender *)a;
    as->token = t;
    as->child_off = exi_child_offset(sizeof(assoc_op), w);
    exi_layout_one_child(a, sizeof(assoc_op), alignof(assoc_op), w);
    /* The same signatures whether or not the association is made (so is
     * C++'s type), with set_stopped for the case it is not. */
    a->sigs = w->sigs;
    a->sigs.flags |= EX_SIGS_STOPPED;
    if (ex_scope_token_try_associate(t)) {
        as->child = w;
        as->held = 1;
    } else {
        ex_sender_release(w);  /* never run: C++ destroys it at once */
        as->child = NULL;
        as->held = 0;
    }
    return a;
}
