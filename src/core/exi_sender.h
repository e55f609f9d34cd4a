/* SPDX-License-Identifier: MIT */
/* exi_sender.h - building, laying out and releasing senders.  Internal. */
#ifndef EXI_SENDER_H
#define EXI_SENDER_H

#include <stdalign.h>
#include <string.h>

#include <cexec/cexec.h>

#include "allocators/exi_builtin.h"
#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "core/exi_debug.h"

/* ex_sender.memo: its completion domain has no apply_sender, so
 * ex_sync_wait need not look for it again (a query through the
 * attributes: a tenth of a small bulk's launch). */
#define EXI_MEMO_NO_APPLY 1u

/* The header fields every sender needs set (not sigs and status). */
static inline void exi_sender_header(ex_sender *s, const ex_sender_vtable *vt, size_t size, const ex_allocator *a) {
    s->vt = vt;
    s->refs = 1;
    s->size = (uint32_t)size;
    s->alloc = a;
    s->op_size = sizeof(ex_operation);
    s->op_align = alignof(ex_operation);
    s->depth = 1;
}

/* ex_sender_release, inline for the hot paths (a when_all's children, a
 * task's awaited sender). */
static inline void exi_sender_release(ex_sender *s) {
    if (!s) return;
    /* Acquire: a release that left ours the last reference happened before. */
    uint32_t refs = exi_load_acq_u32(&s->refs);
    if (!refs) return;  /* a static sender */
    if (__builtin_expect(refs == EXI_SENDER_DEAD, 0)) exi_debug_dead_sender(s, "ex_sender_release");
    /* The last reference, ours: nobody else can retain or release it, so
     * no read-modify-write (most senders are released by their only user). */
    if (refs != 1 && exi_faa_u32(&s->refs, (uint32_t)-1) != 1) return;
    if (s->vt->destroy) s->vt->destroy(s);
    if (__builtin_expect(exi_debug(), 0)) exi_debug_bury(s);  /* kept, to catch a later use */
    else exi_block_free(s->alloc, s, s->size);
}

/* ex_sender_alloc without zeroing the block past the ex_sender header
 * (sigs: none, status: EX_OK): for hot senders that set every field of
 * their own.  Inline: a fork-join step builds three senders. */
static inline ex_sender *exi_sender_alloc_bare(const ex_sender_vtable *vt, size_t size) {
    const ex_allocator *a = exi_default_allocator();
    if (size > UINT32_MAX) return NULL;
    ex_sender *s = exi_block_alloc(a, size);
    if (!s) return NULL;
    exi_sender_header(s, vt, size, a);
    s->sigs.nvalues = 0;
    s->sigs.flags = 0;
    s->status = ex_ok();
    return s;
}

/* Receiver check of a run-time connected sender against the receiver's
 * declared acceptance. */
ex_error exi_check_accepts(const ex_sender *s, ex_receiver r, const char *who);

/* ex_connect_alloc without setting the late domain: for a domain's
 * replacement, under which nothing is offered again. */
ex_error exi_connect_alloc_as_is(const ex_sender *s, ex_receiver r, ex_operation **op);

/* Finishes a builder: sets op layout for a one-child adaptor whose own part
 * of the operation is `own` bytes with alignment `own_align` and child
 * placed after it, and its depth (one more than the child's).  Returns the
 * child offset. */
static inline size_t exi_child_offset(size_t own, const ex_sender *child) {
    return ex_align_up(own, child->op_align);
}
static inline void exi_layout_one_child(ex_sender *s, size_t own, size_t own_align, const ex_sender *child) {
    s->op_size = ex_size_add(exi_child_offset(own, child), child->op_size);  /* saturates: see ex_size_add */
    s->op_align = ex_max_size(own_align, child->op_align);
    s->depth = child->depth + 1;
}

/* Releases an input and returns an invalid sender (one-input builders). */
static inline ex_sender *exi_reject1(int code, const char *msg, ex_sender *in) {
    return ex_reject(code, msg, 1, &in);
}

/* A sender that completes with set_error(e) when started (vt's connect
 * must be exi_error_connect; vt->name names it in messages).  invalid:
 * it is an invalid sender (status e), which connect and builders refuse.
 * Out of memory: the shared out-of-memory invalid sender. */
ex_sender *exi_error_sender_new(const ex_sender_vtable *vt, ex_error e, bool invalid);
ex_error exi_error_connect(const ex_sender *s, ex_receiver r, void *storage);
/* The destroy of such a sender that owns its error (ex_just_error): releases it. */
void exi_error_sender_destroy(ex_sender *s);

/* Starts an allocated block where the allocation-free path has none. */
ex_sender *exi_oom_sender(void);

#endif
