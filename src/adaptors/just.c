/* SPDX-License-Identifier: MIT */
/* just.c - just, just_error, just_stopped and read_env ([exec.just], [exec.read.env]). */
#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "adaptors/exi_just.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

/* ------------------------------------------------------------------- just */

typedef struct just_sender {
    ex_sender base;
    size_t n;
    ex_value v[EX_MAX_ARITY];
    void *nested;  /* tuple contents, from the default allocator */
    size_t nested_size;
} just_sender;

typedef struct just_op {
    ex_operation base;
    ex_receiver r;
    ex_sender *keep;   /* retained when values point into the sender */
    size_t n;
    ex_value v[];
} just_op;

static void just_start(ex_operation *op) {
    just_op *o = (just_op *)op;
    ex_set_value(o->r, o->v, o->n);
}

static void just_op_destroy(ex_operation *op) { ex_sender_release(((just_op *)op)->keep); }

static const ex_operation_vtable just_op_vt = { just_start, just_op_destroy };
/* Values without tuples keep nothing: nothing to destroy (no call). */
static const ex_operation_vtable just_flat_op_vt = { just_start, NULL };

static ex_error just_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const just_sender *js = (const just_sender *)s;
    just_op *o = storage;
    o->r = r;
    o->n = js->n;
    for (size_t i = 0; i < js->n; i++) o->v[i] = js->v[i];  /* no memcpy call: n is small */
    o->base.vt = js->nested ? &just_op_vt : &just_flat_op_vt;
    o->keep = js->nested ? ex_sender_retain((ex_sender *)(uintptr_t)s) : NULL;
    return ex_ok();
}

static void just_destroy(ex_sender *s) {
    just_sender *js = (just_sender *)s;
    ex_deallocate(s->alloc, js->nested, js->nested_size, alignof(ex_value));
}

const ex_sender_vtable exi_just_vt = { "ex_just", just_connect, NULL, just_destroy, NULL };

/* (s is a just: exi_just_flat_values checked) */
bool exi_just_flat_values_of(const ex_sender *s, const ex_value **v, size_t *n) {
    const just_sender *js = (const just_sender *)(const void *)s;
    if (js->nested) return false;
    *v = js->v;
    *n = js->n;
    return true;
}

ex_sender *ex_just_n(const ex_value *v, size_t n) {
    if (n > EX_MAX_ARITY) return ex_invalid_sender(EX_EINVAL, "ex_just: more than EX_MAX_ARITY values");
    if (n && !v) return ex_invalid_sender(EX_EINVAL, "ex_just: NULL value array");
    ex_sender *s = ex_sender_alloc(&exi_just_vt, sizeof(just_sender));
    if (!s) return exi_oom_sender();
    just_sender *js = (just_sender *)s;
    if (exi_values_copy(js->v, v, n, s->alloc, &js->nested, &js->nested_size).code) {
        ex_sender_release(s);
        return exi_oom_sender();
    }
    js->n = n;
    ex_sig sig = exi_sig_of_values(v, n);
    s->sigs = exi_sigs_of(&sig, 0);
    s->op_size = sizeof(just_op) + n * sizeof(ex_value);
    s->op_align = alignof(just_op);
    return s;
}

/* -------------------------------------------------------------- just_error */

static const ex_sender_vtable just_error_vt = { "ex_just_error", exi_error_connect, NULL, exi_error_sender_destroy, NULL };

/* Takes e's reference (cexec/error.h): the sender holds it, each operation
 * takes one of its own, and the sender's last release drops it. */
ex_sender *ex_just_error(ex_error e) {
    if (e.code == EX_OK) {
        exi_error_drop(e);
        e = ex_err(EX_EINVAL, "ex_just_error: error code is EX_OK");
    }
    if (!e.msg) e.msg = "ex_just_error";
    ex_sender *s = exi_error_sender_new(&just_error_vt, e, false);
    if (s->status.code) exi_error_drop(e);  /* refused (no memory): nothing holds it */
    return s;
}

/* ------------------------------------------------------------ just_stopped */

typedef struct stopped_op {
    ex_operation base;
    ex_receiver r;
} stopped_op;

static void stopped_start(ex_operation *op) { ex_set_stopped(((stopped_op *)op)->r); }

static const ex_operation_vtable stopped_op_vt = { stopped_start, NULL };

static ex_error stopped_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    stopped_op *o = storage;
    o->base.vt = &stopped_op_vt;
    o->r = r;
    return ex_ok();
}

static const ex_sender_vtable just_stopped_vt = { "ex_just_stopped", stopped_connect, NULL, NULL, NULL };

static ex_sender just_stopped_sender = {
    .vt = &just_stopped_vt,
    .op_size = sizeof(stopped_op),
    .op_align = alignof(stopped_op),
    .sigs = { 0, EX_SIGS_STOPPED, { { 0, { 0 } } } },
    .refs = 0,  /* static */
};

ex_sender *ex_just_stopped(void) { return &just_stopped_sender; }

/* --------------------------------------------------------------- read_env */

typedef struct read_env_sender {
    ex_sender base;
    const ex_key *key;
    ex_type type;
} read_env_sender;

typedef struct read_env_op {
    ex_operation base;
    ex_receiver r;
    const ex_key *key;
    ex_type type;
} read_env_op;

static void read_env_start(ex_operation *op) {
    read_env_op *o = (read_env_op *)op;
    ex_env env = ex_receiver_env(o->r);
    ex_value v;
    if (o->key == &ex_key_get_stop_token) {
        v = ex_token_value(ex_get_stop_token(env));
    } else if (o->key == &ex_key_get_allocator) {
        v = ex_alloc_value(ex_get_allocator(env));
    } else if (!ex_env_query(env, o->key, &v)) {
        ex_set_error(o->r, ex_err(EX_EINVAL, "ex_read_env: the receiver's environment does not answer the key"));
        return;
    }
    if (o->type != EX_T_ANY && v.type != o->type) {
        ex_set_error(o->r, ex_err(EX_EINVAL, "ex_read_env: the environment answered with a value of another type"));
        return;
    }
    ex_set_value(o->r, &v, 1);
}

static const ex_operation_vtable read_env_op_vt = { read_env_start, NULL };

static ex_error read_env_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const read_env_sender *rs = (const read_env_sender *)s;
    read_env_op *o = storage;
    o->base.vt = &read_env_op_vt;
    o->r = r;
    o->key = rs->key;
    o->type = rs->type;
    return ex_ok();
}

static const ex_sender_vtable read_env_vt = { "ex_read_env", read_env_connect, NULL, NULL, NULL };

ex_sender *ex_read_env(const ex_key *key, ex_type type) {
    if (!key) return ex_invalid_sender(EX_EINVAL, "ex_read_env: NULL key");
    if ((unsigned)type >= EX_T_COUNT_) return ex_invalid_sender(EX_EINVAL, "ex_read_env: invalid type");
    ex_sender *s = ex_sender_alloc(&read_env_vt, sizeof(read_env_sender));
    if (!s) return exi_oom_sender();
    read_env_sender *rs = (read_env_sender *)s;
    rs->key = key;
    rs->type = type;
    ex_sig sig = EX_SIG((uint8_t)type);
    bool defaulted = key == &ex_key_get_stop_token || key == &ex_key_get_allocator;
    s->sigs = exi_sigs_of(&sig, defaulted ? 0 : EX_SIGS_ERROR);
    s->op_size = sizeof(read_env_op);
    s->op_align = alignof(read_env_op);
    return s;
}
