/* SPDX-License-Identifier: MIT */
/* task_launch.c - ex_task_launch: a task started detached into a counting
 * scope, its completion handed to user handlers (D4003's run_async). */
#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "core/exi_value.h"

typedef struct handled_sender {
    ex_sender base;
    ex_sender *child;
    ex_task_handlers h;
} handled_sender;

typedef struct handled_op {
    ex_operation base;
    ex_receiver r;
    ex_task_handlers h;
    ex_operation *child;
} handled_op;

static void h_value(void *self, const ex_value *v, size_t n) {
    handled_op *o = self;
    if (o->h.on_value) o->h.on_value(o->h.ctx, v, n);
    ex_set_value(o->r, NULL, 0);
}

/* Handled, the error is the handler's; unhandled, it is the scope's (its
 * join completes with the first one): never dropped, never printed. */
static void h_error(void *self, ex_error e) {
    handled_op *o = self;
    if (!o->h.on_error) {
        ex_set_error(o->r, e);
        return;
    }
    o->h.on_error(o->h.ctx, e);
    ex_set_value(o->r, NULL, 0);
}

static void h_stopped(void *self) {
    handled_op *o = self;
    if (o->h.on_stopped) o->h.on_stopped(o->h.ctx);
    ex_set_value(o->r, NULL, 0);
}

static ex_env h_env(void *self) { return ex_receiver_env(((handled_op *)self)->r); }

static const ex_receiver_vtable handled_receiver_vt = { h_value, h_error, h_stopped, h_env, NULL };

static void h_start(ex_operation *op) { ex_start(((handled_op *)op)->child); }
static void h_destroy_op(ex_operation *op) { ex_operation_destroy(((handled_op *)op)->child); }
static const ex_operation_vtable handled_op_vt = { h_start, h_destroy_op };

static size_t child_offset(const ex_sender *child) { return ex_align_up(sizeof(handled_op), child->op_align); }

static ex_error h_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const handled_sender *hs = (const handled_sender *)s;
    handled_op *o = storage;
    o->base.vt = &handled_op_vt;
    o->r = r;
    o->h = hs->h;
    o->child = (ex_operation *)(void *)((char *)storage + child_offset(hs->child));
    ex_receiver cr = { &handled_receiver_vt, o };
    return ex_connect_child(hs->child, cr, o->child);
}

static void h_destroy(ex_sender *s) { ex_sender_release(((handled_sender *)s)->child); }

static const ex_sender_vtable handled_vt = { "ex_task_launch", h_connect, NULL, h_destroy, NULL };

ex_error ex_task_launch(ex_scope_token scope, ex_scheduler sch, ex_sender *task, const ex_task_handlers *h) {
    ex_error e = ex_check_input(task, "ex_task_launch: NULL task");
    if (e.code) {
        ex_sender_release(task);
        if (task && e.code == EX_ENOMEM) return e;  /* the task could not be built */
        return ex_err(EX_EINVAL, task ? "ex_task_launch: the task is an invalid sender" : e.msg);
    }
    if (!sch.vt || !sch.vt->connect_schedule) {
        ex_sender_release(task);
        return ex_err(EX_EINVAL, "ex_task_launch: invalid scheduler handle");
    }
    ex_sender *child = ex_write_env(task, &ex_key_get_scheduler, ex_sched_value(sch));
    if ((e = ex_sender_status(child)).code) {
        ex_sender_release(child);
        return e;
    }
    handled_sender *hs = (handled_sender *)ex_sender_alloc(&handled_vt, sizeof(handled_sender));
    if (!hs) {
        ex_sender_release(child);
        return ex_err(EX_ENOMEM, "ex_task_launch: out of memory");
    }
    hs->child = child;
    if (h) hs->h = *h;
    else memset(&hs->h, 0, sizeof hs->h);
    hs->base.sigs = exi_sigs_of(&(ex_sig){ 0, { 0 } }, 0);
    hs->base.op_size = ex_size_add(child_offset(child), child->op_size);
    hs->base.op_align = ex_max_size(alignof(handled_op), child->op_align);
    hs->base.depth = child->depth + 1;
    return ex_spawn(&hs->base, scope);
}
