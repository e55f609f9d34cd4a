/* SPDX-License-Identifier: MIT */
/* link_stop.c - ex_link_stop_token: the child sees a stop token that
 * follows both its receiver's token and an extra one.
 *
 * The operation owns a linked stop source (core/) whose parents are the
 * two tokens, linked at start and unlinked before the operation
 * completes; the child's environment is the receiver's with get_stop_token
 * answering the linked source's token.  When one of the tokens can never
 * stop, no source is needed: the child sees the other token itself.
 *
 * The hazard: a parent's request runs the linked source's callbacks, and
 * a child may complete inside one (a stop callback that completes its
 * operation).  Completing the receiver there would let its owner free the
 * operation while that request still walks the source's list.  So a
 * parent's request holds the operation across it (a count of the child
 * plus the requests in flight, as when_all's join); a child that
 * completes while a request holds it keeps its result in the operation,
 * and the last of them to leave completes.  Otherwise (the common case)
 * the child's completion is passed on as it comes, values uncopied. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_stop.h"
#include "core/exi_value.h"

enum { LINK_NONE, LINK_VALUE, LINK_ERROR, LINK_STOPPED };

typedef struct link_sender {
    ex_sender base;
    ex_sender *child;
    ex_stop_token extra;
    uint8_t cap;            /* values the child may send */
    size_t values_off;      /* in the operation: room for them */
    size_t child_off;       /* then the child's operation */
} link_sender;

typedef struct link_op {
    ex_operation base;
    ex_receiver r;
    ex_operation *child;
    bool linked;               /* the child sees the linked source's token */
    ex_stop_token parents[2];  /* the receiver's token, the extra one */
    uint32_t count;            /* 1 until the child completes, + the parents' requests in flight */
    ex_linked_stop_source link;
    ex_env_pair env;
    const ex_allocator *alloc; /* for tuples kept */
    /* A result kept for the last to leave (written by the child's
     * completion, read after the count says it arrived). */
    uint8_t disp;              /* LINK_* */
    uint8_t cap, n;
    ex_value *v;               /* cap values, in the block */
    void *nested;
    size_t nested_size;
    ex_error err;
} link_op;

/* ---------------------------------------------------------- completing */


static void unlink_parents(link_op *o) {
    if (o->linked) ex_linked_stop_source_destroy(&o->link);
}

/* The result the child left in the operation, passed on by the last to
 * leave. */
static void complete_kept(link_op *o) {
    unlink_parents(o);
    switch (o->disp) {
    case LINK_VALUE: ex_set_value(o->r, o->v, o->n); break;
    case LINK_ERROR: {
        ex_error e = o->err;
        o->err = ex_ok();  /* the receiver's now: the destroy below must not release it */
        ex_set_error(o->r, e);
        break;
    }
    default: ex_set_stopped(o->r); break;
    }
}

static void leave(link_op *o) {
    if (exi_faa_u32(&o->count, (uint32_t)-1) == 1) complete_kept(o);
}

/* The child completes: true when no parent's request holds the operation
 * and none can from now on (the count was the child's alone), so the
 * completion is passed on at once. */
static bool completes_now(link_op *o) {
    uint32_t alone = 1;
    return exi_cas_u32(&o->count, &alone, 0);
}

/* A parent's request reached the linked source (its link's callback). */
static void parent_stopped(ex_linked_stop_source *l) {
    link_op *o = EXI_CONTAINER_OF(l, link_op, link);
    /* Held, unless the child completed already: its completion is
     * unlinking the parents and waits for this callback to return. */
    uint32_t c = exi_load_acq_u32(&o->count);
    do {
        if (c == 0) return;
    } while (!exi_cas_u32(&o->count, &c, c + 1));
    (void)ex_stop_source_request_stop(&l->source);
    leave(o);
}

static void l_set_value(void *self, const ex_value *v, size_t n) {
    link_op *o = self;
    if (completes_now(o)) {
        unlink_parents(o);
        ex_set_value(o->r, v, n);
        return;
    }
    ex_error e = n > o->cap ? ex_err(EX_EINVAL, "ex_link_stop_token: the child sent more values than its signature allows")
                            : exi_values_copy(o->v, v, n, o->alloc, &o->nested, &o->nested_size);
    if (e.code) {
        o->disp = LINK_ERROR;
        o->err = e;
    } else {
        o->disp = LINK_VALUE;
        o->n = (uint8_t)n;
    }
    leave(o);
}

static void l_set_error(void *self, ex_error e) {
    link_op *o = self;
    if (completes_now(o)) {
        unlink_parents(o);
        ex_set_error(o->r, e);
        return;
    }
    o->disp = LINK_ERROR;
    o->err = e;  /* the child's reference (cexec/error.h), passed on by complete_kept */
    leave(o);
}

static void l_set_stopped(void *self) {
    link_op *o = self;
    if (completes_now(o)) {
        unlink_parents(o);
        ex_set_stopped(o->r);
        return;
    }
    o->disp = LINK_STOPPED;
    leave(o);
}

static ex_env l_env(void *self) { return ex_env_of_pair(&((link_op *)self)->env); }

static const ex_receiver_vtable l_rcvr_vt = { l_set_value, l_set_error, l_set_stopped, l_env, NULL };

/* ------------------------------------------------------------ operation */

static void l_start(ex_operation *op) {
    link_op *o = (link_op *)op;
    if (o->linked) {
        /* Cannot fail: two parents, storage of our own.  A parent stopped
         * already stops the source here, before the child starts. */
        (void)exi_linked_stop_source_init_fire(&o->link, o->parents, 2, parent_stopped);
    }
    ex_start(o->child);  /* the operation may be gone after this */
}

static void l_op_destroy(ex_operation *op) {
    link_op *o = (link_op *)op;
    ex_operation_destroy(o->child);
    if (o->nested) ex_deallocate(o->alloc, o->nested, o->nested_size, alignof(ex_value));
    o->nested = NULL;
    if (o->disp == LINK_ERROR) exi_error_drop(o->err);  /* a kept error never passed on */
    o->disp = LINK_NONE;
}

static const ex_operation_vtable l_op_vt = { l_start, l_op_destroy };

/* The token the child sees, or false when it needs the linked source. */
static bool single_token(ex_stop_token outer, ex_stop_token extra, ex_stop_token *only) {
    if (!ex_stop_token_stop_possible(extra) || ex_stop_token_equal(outer, extra)) *only = outer;
    else if (!ex_stop_token_stop_possible(outer)) *only = extra;
    else return false;
    return true;
}

static ex_error l_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const link_sender *ls = (const link_sender *)s;
    link_op *o = storage;
    ex_env env = ex_receiver_env(r);
    ex_stop_token outer = ex_get_stop_token(env), only;
    o->base.vt = &l_op_vt;
    o->r = r;
    o->child = (ex_operation *)(void *)((char *)storage + ls->child_off);
    o->count = 1;
    o->alloc = ex_get_allocator(env);
    o->disp = LINK_NONE;
    o->cap = ls->cap;
    o->n = 0;
    o->v = (ex_value *)(void *)((char *)storage + ls->values_off);
    o->nested = NULL;
    o->nested_size = 0;
    o->linked = !single_token(outer, ls->extra, &only);
    if (o->linked) {
        o->parents[0] = outer;
        o->parents[1] = ls->extra;
        only = ex_linked_stop_source_token(&o->link);
    }
    ex_value tv;
    tv.type = EX_T_TOKEN;
    tv.as.token = only;
    ex_env_pair_init(&o->env, &ex_key_get_stop_token, tv, env);
    ex_receiver cr = { &l_rcvr_vt, o };
    return ex_connect_child(ls->child, cr, o->child);
}

static ex_env l_attrs(const ex_sender *s) { return ex_env_forward(ex_sender_attrs(((const link_sender *)s)->child)); }

static void l_destroy(ex_sender *s) { ex_sender_release(((link_sender *)s)->child); }

static const ex_sender_vtable link_vt = { "ex_link_stop_token", l_connect, l_attrs, l_destroy, NULL };

ex_sender *ex_link_stop_token(ex_sender *child, ex_stop_token extra) {
    ex_error e = ex_check_input(child, "ex_link_stop_token: NULL input sender");
    if (e.code) return exi_reject1(e.code, e.msg, child);
    ex_sender *s = ex_sender_alloc(&link_vt, sizeof(link_sender));
    if (!s) return exi_reject1(EX_ENOMEM, NULL, child);
    link_sender *ls = (link_sender *)s;
    ls->child = child;
    ls->extra = extra;
    ls->cap = exi_sigs_max_arity(&child->sigs);
    s->sigs = child->sigs;
    /* A result kept across a parent's request is copied: tuples take an
     * allocation, a dynamic child may send too many. */
    if (exi_sigs_keeping_may_fail(&child->sigs)) s->sigs.flags |= EX_SIGS_ERROR;
    ls->values_off = ex_align_up(sizeof(link_op), alignof(ex_value));
    size_t own = ex_size_add(ls->values_off, (size_t)ls->cap * sizeof(ex_value));
    ls->child_off = exi_child_offset(own, child);
    exi_layout_one_child(s, own, alignof(link_op), child);
    return s;
}
