/* SPDX-License-Identifier: MIT */
/* split.c - [exec.split]: one shared run of a sender for many consumers.
 *
 * The shared state holds the child's operation, an in-place stop source,
 * the stored result, and a lock-free stack of waiting consumers whose head
 * becomes COMPLETED once the result is stored: a consumer that finds
 * COMPLETED completes at once; otherwise the child's completion pops the
 * whole stack and completes each consumer. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "core/exi_domain.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

enum { DISP_VALUE = 1, DISP_ERROR, DISP_STOPPED };

struct split_op;

typedef struct split_state {
    uint32_t refs;
    uint32_t started;
    void *waiters;            /* struct split_op *, or COMPLETED */
    ex_stop_source stop;
    ex_env_pair child_env;    /* only get_stop_token */
    uint32_t disposition;
    exi_store values;
    ex_error err;
    ex_sender *child;
    ex_operation *child_op;   /* after this struct, in the same block */
    const ex_allocator *alloc;
    size_t size, align;
} split_state;

typedef struct split_op {
    ex_operation base;
    ex_receiver r;
    split_state *st;
    struct split_op *next;
    ex_stop_callback on_stop;
} split_op;

typedef struct split_sender {
    ex_sender base;
    split_state *st;
} split_sender;

static char completed_marker;
#define COMPLETED ((void *)&completed_marker)

static void state_release(split_state *st) {
    if (exi_faa_u32(&st->refs, (uint32_t)-1) != 1) return;
    ex_operation_destroy(st->child_op);
    ex_sender_release(st->child);
    exi_store_clear(&st->values);
    exi_error_drop(st->err);
    ex_deallocate(st->alloc, st, st->size, st->align);
}

/* Completes one consumer with the stored result. */
static void notify(split_op *o) {
    split_state *st = o->st;
    ex_stop_callback_deregister(&o->on_stop);
    switch (exi_load_acq_u32(&st->disposition)) {
    case DISP_VALUE: ex_set_value(o->r, st->values.v, st->values.n); break;
    case DISP_ERROR: ex_set_error(o->r, exi_error_copy(st->err)); break;  /* a reference per consumer */
    default: ex_set_stopped(o->r); break;
    }
}

static void complete_all(split_state *st, uint32_t disposition) {
    exi_store_rel_u32(&st->disposition, disposition);
    split_op *w = exi_fas_ptr(&st->waiters, COMPLETED);
    while (w) {
        split_op *next = w->next;  /* w may be gone after notify */
        notify(w);
        w = next;
    }
}

static void sr_set_value(void *self, const ex_value *v, size_t n) {
    split_state *st = self;
    ex_error e = exi_store_set(&st->values, v, n, st->alloc);
    if (e.code) {
        st->err = e;
        complete_all(st, DISP_ERROR);
    } else {
        complete_all(st, DISP_VALUE);
    }
}

static void sr_set_error(void *self, ex_error e) {
    split_state *st = self;
    st->err = e;
    complete_all(st, DISP_ERROR);
}

static void sr_set_stopped(void *self) { complete_all(self, DISP_STOPPED); }

static ex_env sr_env(void *self) { return ex_env_of_pair(&((split_state *)self)->child_env); }

static const ex_receiver_vtable split_rcvr_vt = { sr_set_value, sr_set_error, sr_set_stopped, sr_env, NULL };

/* ------------------------------------------------------------- consumers */

/* A consumer asked for stop.  The shared work may complete inside the
 * request and every consumer with it, releasing the state while
 * request_stop still walks st->stop: hold a reference around it. */
static void on_stop(ex_stop_callback *cb) {
    split_state *st = EXI_CONTAINER_OF(cb, split_op, on_stop)->st;
    exi_faa_u32(&st->refs, 1);
    ex_stop_source_request_stop(&st->stop);
    state_release(st);
}

static void split_start(ex_operation *op) {
    split_op *o = (split_op *)op;
    split_state *st = o->st;
    /* Once queued, this consumer may be completed on another thread and its
     * receiver may free the operations and the sender: the reference keeps
     * the state alive until start is done with it. */
    exi_faa_u32(&st->refs, 1);
    ex_stop_callback_register(&o->on_stop, ex_get_stop_token(ex_receiver_env(o->r)), on_stop);
    void *head = exi_load_acq_ptr(&st->waiters);
    for (;;) {
        if (head == COMPLETED) {
            notify(o);
            state_release(st);
            return;
        }
        o->next = head;
        if (exi_cas_ptr(&st->waiters, &head, o)) break;
    }
    /* Queued.  The first consumer starts the shared work. */
    uint32_t not_started = 0;
    if (exi_cas_u32(&st->started, &not_started, 1)) {
        if (ex_stop_source_stop_requested(&st->stop)) complete_all(st, DISP_STOPPED);
        else ex_start(st->child_op);
    }
    state_release(st);
}

static void split_op_destroy(ex_operation *op) { state_release(((split_op *)op)->st); }

static const ex_operation_vtable split_op_vt = { split_start, split_op_destroy };

static ex_error split_connect(const ex_sender *s, ex_receiver r, void *storage) {
    split_state *st = ((const split_sender *)s)->st;
    split_op *o = storage;
    o->base.vt = &split_op_vt;
    o->r = r;
    o->st = st;
    o->next = NULL;
    o->on_stop.src = NULL;
    exi_faa_u32(&st->refs, 1);
    return ex_ok();
}

static void split_destroy(ex_sender *s) {
    split_state *st = ((split_sender *)s)->st;
    if (st) state_release(st);
}

static const ex_sender_vtable split_vt = { "ex_split", split_connect, NULL, split_destroy, NULL };

ex_sender *ex_split(ex_sender *child) {
    ex_error e = ex_check_input(child, "ex_split: NULL input sender");
    if (e.code) return exi_reject1(e.code, e.msg, child);
    const ex_allocator *a = ex_default_allocator();
    size_t off = ex_align_up(sizeof(split_state), child->op_align);
    size_t size = ex_size_add(off, child->op_size);
    size_t align = ex_max_size(alignof(split_state), child->op_align);
    split_state *st = ex_allocate(a, size, align);
    if (!st) return exi_reject1(EX_ENOMEM, NULL, child);
    ex_sender *s = ex_sender_alloc(&split_vt, sizeof(split_sender));
    if (!s) {
        ex_deallocate(a, st, size, align);
        return exi_reject1(EX_ENOMEM, NULL, child);
    }
    st->refs = 1;  /* the sender's */
    st->started = 0;
    st->waiters = NULL;
    ex_stop_source_init(&st->stop);
    ex_env_pair_init(&st->child_env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&st->stop)),
                     ex_env_empty());
    st->disposition = 0;
    exi_store_init(&st->values);
    st->err = ex_ok();
    st->child = child;
    st->child_op = (ex_operation *)(void *)((char *)st + off);
    st->alloc = a;
    st->size = size;
    st->align = align;
    ex_receiver cr = { &split_rcvr_vt, st };
    e = exi_connect_child_in_env(child, cr, st->child_op);
    if (e.code) {
        ex_deallocate(a, st, size, align);
        ex_sender_release(s);
        return exi_reject1(e.code, e.msg, child);
    }
    ((split_sender *)s)->st = st;
    s->sigs = child->sigs;
    s->sigs.flags |= EX_SIGS_ERROR | EX_SIGS_STOPPED;
    s->op_size = sizeof(split_op);
    s->op_align = alignof(split_op);
    s->depth = child->depth + 1;
    return s;
}
