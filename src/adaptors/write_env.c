/* SPDX-License-Identifier: MIT */
/* write_env.c - write_env (JOIN-ENV(MAKE-ENV(key, value), env)), also used
 * by ex_on to capture and re-publish its original scheduler. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "adaptors/exi_write_env.h"
#include "core/exi_domain.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

typedef struct write_env_sender {
    ex_sender base;
    ex_sender *child;
    const ex_key *key;
    ex_value value;
    const ex_key *from_key;  /* value comes from the receiver's env at connect */
    const char *missing_msg;
    void *nested;            /* deep copy of a tuple value */
    size_t nested_size;
} write_env_sender;

typedef struct write_env_op {
    ex_operation base;
    ex_receiver r;
    ex_operation *child;
    ex_env_pair env;
    ex_sender *keep;  /* retained when the value points into the sender */
} write_env_op;

static void w_set_value(void *self, const ex_value *v, size_t n) { ex_set_value(((write_env_op *)self)->r, v, n); }
static void w_set_error(void *self, ex_error e) { ex_set_error(((write_env_op *)self)->r, e); }
static void w_set_stopped(void *self) { ex_set_stopped(((write_env_op *)self)->r); }
static ex_env w_env(void *self) { return ex_env_of_pair(&((write_env_op *)self)->env); }
static const ex_receiver_vtable w_rcvr_vt = { w_set_value, w_set_error, w_set_stopped, w_env, NULL };

static void w_start(ex_operation *op) { ex_start(((write_env_op *)op)->child); }
static void w_op_destroy(ex_operation *op) {
    write_env_op *o = (write_env_op *)op;
    ex_operation_destroy(o->child);
    ex_sender_release(o->keep);
}
static const ex_operation_vtable w_op_vt = { w_start, w_op_destroy };

static ex_error w_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const write_env_sender *ws = (const write_env_sender *)s;
    write_env_op *o = storage;
    ex_env env = ex_receiver_env(r);
    ex_value v = ws->value;
    if (ws->from_key && !ex_env_query(env, ws->from_key, &v)) return ex_err(EX_EINVAL, ws->missing_msg);
    o->base.vt = &w_op_vt;
    o->r = r;
    o->keep = ws->nested ? ex_sender_retain((ex_sender *)(uintptr_t)s) : NULL;
    ex_env_pair_init(&o->env, ws->key, v, env);
    o->child = (ex_operation *)(void *)((char *)storage + exi_child_offset(sizeof(write_env_op), ws->child));
    ex_receiver cr = { &w_rcvr_vt, o };
    /* A written scheduler or domain decides the child's late domain. */
    ex_error e;
    if (ws->key == &ex_key_get_scheduler && v.type == EX_T_SCHED && v.as.sched.vt) {
        e = exi_connect_child_under(ws->child, cr, o->child, v.as.sched);
    } else if (ws->key == &ex_key_get_domain && v.type == EX_T_PTR && v.as.p) {
        exi_late region;
        ex_scheduler none = { 0, 0 };
        exi_late_enter_known(&region, v.as.p, none);
        e = ex_connect_child(ws->child, cr, o->child);
        exi_late_leave(&region);
    } else {
        e = ws->key == &ex_key_get_scheduler || ws->key == &ex_key_get_domain
                ? exi_connect_child_in_env(ws->child, cr, o->child)
                : ex_connect_child(ws->child, cr, o->child);
    }
    if (e.code) ex_sender_release(o->keep);
    return e;
}

static ex_env w_attrs(const ex_sender *s) { return ex_env_forward(ex_sender_attrs(((const write_env_sender *)s)->child)); }

static void w_destroy(ex_sender *s) {
    write_env_sender *ws = (write_env_sender *)s;
    ex_sender_release(ws->child);
    ex_deallocate(s->alloc, ws->nested, ws->nested_size, alignof(ex_value));
}

static const ex_sender_vtable write_env_vt = { "ex_write_env", w_connect, w_attrs, w_destroy, NULL };

ex_sender *exi_write_env(ex_sender *child, const ex_key *key, ex_value value, const ex_key *from_key,
                         const char *missing_msg) {
    ex_error e = ex_check_input(child, "ex_write_env: NULL input sender");
    if (e.code) return exi_reject1(e.code, e.msg, child);
    if (!key) return exi_reject1(EX_EINVAL, "ex_write_env: NULL key", child);
    ex_sender *s = ex_sender_alloc(&write_env_vt, sizeof(write_env_sender));
    if (!s) return exi_reject1(EX_ENOMEM, NULL, child);
    write_env_sender *ws = (write_env_sender *)s;
    if (exi_values_copy(&ws->value, &value, 1, s->alloc, &ws->nested, &ws->nested_size).code) {
        ex_sender_release(s);
        return exi_reject1(EX_ENOMEM, NULL, child);
    }
    ws->child = child;
    ws->key = key;
    ws->from_key = from_key;
    ws->missing_msg = missing_msg;
    s->sigs = child->sigs;
    exi_layout_one_child(s, sizeof(write_env_op), alignof(write_env_op), child);
    return s;
}

ex_sender *ex_write_env(ex_sender *child, const ex_key *key, ex_value value) {
    return exi_write_env(child, key, value, NULL, NULL);
}
