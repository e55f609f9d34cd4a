/* SPDX-License-Identifier: MIT */
/* sender.c - sender lifetime, connect, and invalid senders. */
#include <stdio.h>
#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "allocators/exi_builtin.h"
#include "base/exi_atomic.h"
#include "core/exi_domain.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

/* ------------------------------------------------------------ error senders */

typedef struct error_op {
    ex_operation base;
    ex_receiver r;
    ex_error e;
} error_op;

static void error_start(ex_operation *op) {
    error_op *o = (error_op *)op;
    ex_error e = o->e;
    o->e = ex_ok();  /* the operation's reference goes to the receiver */
    ex_set_error(o->r, e);
}

static void error_op_destroy(ex_operation *op) { exi_error_drop(((error_op *)op)->e); }

static const ex_operation_vtable error_op_vt = { error_start, NULL };
/* An owned error (ex_just_error of one): the operation holds a reference
 * from connect to start, or to its destroy if it never starts. */
static const ex_operation_vtable owned_error_op_vt = { error_start, error_op_destroy };

typedef struct error_sender {
    ex_sender base;
    ex_error e;
} error_sender;

ex_error exi_error_connect(const ex_sender *s, ex_receiver r, void *storage) {
    error_op *o = storage;
    o->r = r;
    o->e = s->status.code ? s->status : exi_error_copy(((const error_sender *)s)->e);
    o->base.vt = o->e.box ? &owned_error_op_vt : &error_op_vt;
    return ex_ok();
}

void exi_error_sender_destroy(ex_sender *s) { exi_error_drop(((error_sender *)s)->e); }

static const ex_sender_vtable invalid_vt = { "ex_invalid_sender", exi_error_connect, NULL, NULL, NULL };

static ex_sender oom_sender = {
    .vt = &invalid_vt,
    .op_size = sizeof(error_op),
    .op_align = alignof(error_op),
    .depth = 1,
    .sigs = { 0, EX_SIGS_ERROR, { { 0, { 0 } } } },
    .status = { EX_ENOMEM, "cexec: out of memory building a sender", NULL, NULL },
    .refs = 0,  /* static */
};

ex_sender *exi_oom_sender(void) { return &oom_sender; }

ex_sender *exi_error_sender_new(const ex_sender_vtable *vt, ex_error e, bool invalid) {
    ex_sender *s = ex_sender_alloc(vt, sizeof(error_sender));
    if (!s) return &oom_sender;
    ((error_sender *)s)->e = e;
    s->op_size = sizeof(error_op);
    s->op_align = alignof(error_op);
    s->sigs = exi_sigs_of(NULL, EX_SIGS_ERROR);
    if (invalid) s->status = e;
    return s;
}

ex_sender *ex_invalid_sender(int code, const char *msg) {
    if (code == EX_ENOMEM) return &oom_sender;
    if (code == EX_OK) code = EX_EINVAL;
    return exi_error_sender_new(&invalid_vt, ex_err(code, msg ? msg : "cexec: invalid sender"), true);
}

ex_sender *ex_reject(int code, const char *msg, size_t n, ex_sender *const *inputs) {
    for (size_t i = 0; i < n; i++) ex_sender_release(inputs[i]);
    return ex_invalid_sender(code, msg);
}

ex_error ex_check_input(const ex_sender *s, const char *null_msg) {
    if (!s) return ex_err(EX_EINVAL, null_msg);
    if (exi_sender_dead(s)) {
        /* The builder's name: null_msg begins with it ("ex_then: ..."). */
        char call[64];
        size_t n = strcspn(null_msg ? null_msg : "", ":");
        snprintf(call, sizeof call, "%.*s", (int)(n < sizeof call ? n : sizeof call - 1), null_msg ? null_msg : "");
        exi_debug_dead_sender(s, call);
    }
    if (s->status.code) return s->status;
    if (s->depth >= EX_SENDER_MAX_DEPTH)
        return ex_err(EX_ETOODEEP, "cexec: the input sender is EX_SENDER_MAX_DEPTH deep; nesting it deeper could "
                                   "overflow the stack when the chain runs (sender.h)");
    return ex_ok();
}

/* ------------------------------------------------------------------ lifetime */

ex_sender *ex_sender_alloc(const ex_sender_vtable *vt, size_t size) {
    const ex_allocator *a = exi_default_allocator();
    if (size < sizeof(ex_sender) || size > UINT32_MAX) return NULL;
    ex_sender *s = exi_block_alloc(a, size);
    if (!s) return NULL;
    memset(s, 0, size);
    /* sigs and status by the memset (whole-struct assignments here cost
     * store-forwarding stalls on every sender). */
    exi_sender_header(s, vt, size, a);
    return s;
}

ex_sender *ex_sender_retain(ex_sender *s) {
    if (s && exi_sender_dead(s)) exi_debug_dead_sender(s, "ex_sender_retain");
    if (s && exi_load_rlx_u32(&s->refs)) exi_faa_u32(&s->refs, 1);  /* refs 0: a static sender */
    return s;
}

void ex_sender_release(ex_sender *s) { exi_sender_release(s); }

ex_error ex_sender_status(const ex_sender *s) {
    if (!s) return ex_err(EX_EINVAL, "ex_sender_status: NULL sender");
    return s->status;
}

uint32_t ex_sender_depth(const ex_sender *s) { return s ? s->depth : 0; }
const ex_sigs *ex_sender_sigs(const ex_sender *s) { return &s->sigs; }
size_t ex_sender_op_size(const ex_sender *s) { return s ? s->op_size : 0; }
size_t ex_sender_op_align(const ex_sender *s) { return s ? s->op_align : 1; }

ex_env ex_sender_attrs(const ex_sender *s) {
    if (!s || !s->vt->attrs) return ex_env_empty();
    return s->vt->attrs(s);
}

bool ex_get_completion_scheduler(const ex_sender *s, const ex_key *key, ex_scheduler *out) {
    ex_value v;
    if (!ex_env_query(ex_sender_attrs(s), key, &v) || v.type != EX_T_SCHED) return false;
    *out = v.as.sched;
    return true;
}

/* ------------------------------------------------------------------- connect */

ex_error exi_check_accepts(const ex_sender *s, ex_receiver r, const char *who) {
    (void)who;
    const char *why = NULL;
    if (r.vt->accepts && !ex_sigs_subset(&s->sigs, r.vt->accepts, &why))
        return ex_err(EX_EINVAL, why);
    return ex_ok();
}

/* 0 means no alignment requirement (as 1). */
static bool op_align_valid(size_t align) { return (align & (align - 1)) == 0; }

static bool receiver_valid(ex_receiver r) {
    return r.vt && r.vt->set_value && r.vt->set_error && r.vt->set_stopped;
}

static ex_error connect_checked(const ex_sender *s, ex_receiver r, void *storage, size_t size, ex_operation **op) {
    if (!op) return ex_err(EX_EINVAL, "ex_connect: op out-parameter is NULL");
    *op = NULL;
    if (!s) return ex_err(EX_EINVAL, "ex_connect: NULL sender");
    if (exi_sender_dead(s)) exi_debug_dead_sender(s, "ex_connect");
    if (!receiver_valid(r)) return ex_err(EX_EINVAL, "ex_connect: receiver vtable is NULL or lacks a completion");
    if (!storage || size < s->op_size)
        return ex_err(EX_EINVAL, "ex_connect: storage is smaller than ex_sender_op_size()");
    if (!op_align_valid(s->op_align))
        return ex_err(EX_EINVAL, "ex_connect: the sender's op_align is not a power of two");
    if ((uintptr_t)storage & (ex_max_size(s->op_align, 1) - 1))
        return ex_err(EX_EINVAL, "ex_connect: storage is not aligned to ex_sender_op_align()");
    ex_error e = exi_check_accepts(s, r, "ex_connect");
    if (e.code) return e;
    if (__builtin_expect(exi_debug(), 0)) return exi_debug_connect(s, r, storage, op);
    e = s->vt->connect(s, r, storage);
    if (__builtin_expect(e.code != 0, 0)) return e;
    /* Not `return e`: copying the callee's error in wide loads stalled on
     * store forwarding, a fifth of a short connect. */
    *op = storage;
    return ex_ok();
}

/* The late domain of the connect in progress on this thread (here, where
 * connects begin; domain.c reads it). */
static exi_late late_root = { EXI_LATE_NONE, NULL, ~(uint64_t)0, { NULL, NULL }, { NULL, NULL }, NULL };
EXI_TLS exi_late *exi_late_now = &late_root;
EXI_TLS unsigned exi_in_domain;
EXI_TLS exi_late_bits_cache exi_late_bits;

/* A root connect: r's environment decides the late domain of everything
 * connected under it (exi_domain.h). */
ex_error ex_connect(const ex_sender *s, ex_receiver r, void *storage, size_t size, ex_operation **op) {
    exi_late region;
    exi_late_enter(&region, r);
    ex_error e = connect_checked(s, r, storage, size, op);
    exi_late_leave(&region);
    return e;
}

typedef struct alloc_header {
    const ex_allocator *alloc;
    void *block;
    size_t size, align;
} alloc_header;

ex_error exi_connect_alloc_as_is(const ex_sender *s, ex_receiver r, ex_operation **op) {
    if (!op) return ex_err(EX_EINVAL, "ex_connect_alloc: op out-parameter is NULL");
    *op = NULL;
    if (!s) return ex_err(EX_EINVAL, "ex_connect_alloc: NULL sender");
    if (exi_sender_dead(s)) exi_debug_dead_sender(s, "ex_connect_alloc");
    if (!receiver_valid(r)) return ex_err(EX_EINVAL, "ex_connect_alloc: receiver vtable is NULL or lacks a completion");
    if (!op_align_valid(s->op_align))
        return ex_err(EX_EINVAL, "ex_connect_alloc: the sender's op_align is not a power of two");
    size_t align = ex_max_size(s->op_align, alignof(alloc_header));
    size_t head = ex_align_up(sizeof(alloc_header), align);
    size_t total = ex_size_add(head, s->op_size);  /* a wrapped sum would be a small block */
    if (total > EX_ALLOC_MAX_SIZE || align > EX_ALLOC_MAX_ALIGN)  /* as malloc: too big is ENOMEM */
        return ex_err(EX_ENOMEM, "ex_connect_alloc: the operation state is larger than any allocation can be");
    const ex_allocator *a = ex_get_allocator(ex_receiver_env(r));
    char *block = ex_allocate(a, total, align);
    if (!block) return ex_err(EX_ENOMEM, "ex_connect_alloc: out of memory for the operation state");
    alloc_header *h = (alloc_header *)(void *)(block + head - sizeof(alloc_header));
    h->alloc = a;
    h->block = block;
    h->size = total;
    h->align = align;
    ex_error e = connect_checked(s, r, block + head, s->op_size, op);
    if (e.code) ex_deallocate(a, block, total, align);
    return e;
}

ex_error ex_connect_alloc(const ex_sender *s, ex_receiver r, ex_operation **op) {
    exi_late region;
    exi_late_enter(&region, r);
    ex_error e = exi_connect_alloc_as_is(s, r, op);
    exi_late_leave(&region);
    return e;
}

void ex_operation_free(ex_operation *op) {
    if (!op) return;
    ex_operation *inner = exi_debug_inner(op);  /* the block is the real operation's */
    ex_operation_destroy(op);
    alloc_header *h = (alloc_header *)(void *)((char *)inner - sizeof(alloc_header));
    ex_deallocate(h->alloc, h->block, h->size, h->align);
}
