/* SPDX-License-Identifier: MIT */
/* domain.c - domains (cexec/domain.h): tags, the early and late steps, and
 * apply_sender for sync_wait. */
#include <stdalign.h>

#include <cexec/cexec.h>
#include <cexec/domain.h>

#include "base/exi_atomic.h"
#include "core/exi_debug.h"
#include "core/exi_domain.h"
#include "core/exi_env.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"

const ex_tag ex_tag_then = { "then" };
const ex_tag ex_tag_upon_error = { "upon_error" };
const ex_tag ex_tag_upon_stopped = { "upon_stopped" };
const ex_tag ex_tag_let_value = { "let_value" };
const ex_tag ex_tag_let_error = { "let_error" };
const ex_tag ex_tag_let_stopped = { "let_stopped" };
const ex_tag ex_tag_bulk = { "bulk" };
const ex_tag ex_tag_bulk_chunked = { "bulk_chunked" };
const ex_tag ex_tag_bulk_unchunked = { "bulk_unchunked" };
const ex_tag ex_tag_when_all = { "when_all" };
const ex_tag ex_tag_starts_on = { "starts_on" };
const ex_tag ex_tag_continues_on = { "continues_on" };
const ex_tag ex_tag_inclusive_scan = { "inclusive_scan" };
const ex_tag ex_tag_exclusive_scan = { "exclusive_scan" };
const ex_tag ex_tag_reduce = { "reduce" };
const ex_tag ex_tag_for_each_index = { "for_each_index" };
const ex_tag ex_tag_transform = { "transform" };
const ex_tag ex_tag_sync_wait = { "sync_wait" };



/* ---------------------------------------------------------------- queries */

const ex_tag *ex_sender_tag(const ex_sender *s) { return s ? s->vt->tag : NULL; }

const ex_domain *ex_scheduler_domain(ex_scheduler sch) { return sch.vt ? sch.vt->domain : NULL; }

const ex_domain *ex_get_domain(ex_env e, ex_scheduler *sch) {
    ex_scheduler own = { 0, 0 };
    const ex_domain *d = exi_env_domain(e, &own);
    if (sch) *sch = own;
    return d;
}

const ex_domain *ex_sender_domain(const ex_sender *s, ex_scheduler *sch) {
    ex_scheduler own = { 0, 0 };
    if (sch) *sch = own;
    if (!s || !s->vt->attrs) return NULL;
    if (!ex_get_completion_scheduler(s, &ex_key_completion_scheduler_value, &own) || !own.vt || !own.vt->domain) return NULL;
    if (sch) *sch = own;
    return own.vt->domain;
}


static ex_sender *call_transform(const ex_domain *d, ex_scheduler sch, ex_sender *s, const ex_env *env) {
    exi_in_domain++;
    ex_sender *t = d->transform_sender(d, sch, s, env);
    exi_in_domain--;
    return t;
}

/* ------------------------------------------------------------- early step */

ex_sender *exi_transform_early(ex_sender *s, const ex_domain *d, ex_scheduler sch) {
    if (exi_in_domain || s->status.code || !exi_domain_offers(d, s->vt->tag)) return s;
    ex_sender *t = call_transform(d, sch, s, NULL);
    if (!t || t == s) {
        if (t) ex_sender_release(t);  /* a domain that handed s back retained it */
        return s;
    }
    ex_sender_release(s);
    return t;
}

ex_sender *exi_early_from_children_slow(ex_sender *s, ex_sender *const *children, size_t n) {
    const ex_domain *common = NULL;
    ex_scheduler common_sch = { 0, 0 };
    for (size_t i = 0; i < n; i++) {
        ex_scheduler sch;
        const ex_domain *d = ex_sender_domain(children[i], &sch);
        if (!d) continue;  /* the default domain: no say */
        if (common && d != common) return s;  /* two domains: neither decides */
        if (!common) common_sch = sch;
        common = d;
    }
    return common ? exi_transform_early(s, common, common_sch) : s;
}

/* -------------------------------------------------------------- late step */

/* An operation for a replacement too large for the storage sized for the
 * sender it replaces: the replacement's operation lives in a block from
 * the receiver's allocator. */
typedef struct moved_op {
    ex_operation base;
    ex_operation *inner;
} moved_op;

static void moved_start(ex_operation *op) { ex_start(((moved_op *)op)->inner); }
static void moved_destroy(ex_operation *op) { ex_operation_free(((moved_op *)op)->inner); }
static const ex_operation_vtable moved_vt = { moved_start, moved_destroy };

/* The senders being replaced on this thread and their replacements, while
 * the replacements connect (a stack: a replacement's part may be replaced
 * in turn). */
typedef struct replacing {
    const ex_sender *s, *t;
    struct replacing *up;
} replacing;

static EXI_TLS replacing *replacing_now;

static bool being_replaced(const ex_sender *s) {
    for (const replacing *m = replacing_now; m; m = m->up)
        if (m->s == s || m->t == s) return true;
    return false;
}

/* Connects t (owned) where s would have been. */
static ex_error connect_replacement(ex_sender *t, const ex_sender *s, ex_receiver r, void *storage) {
    ex_error e = t->status;
    const char *why = NULL;
    if (!e.code && !ex_sigs_subset(&t->sigs, &s->sigs, &why)) {
        /* The sender's parent was built for what s declared. */
        ex_sender_release(t);
        return ex_err(EX_EINVAL, "cexec: a domain's replacement sends what the sender it replaces does not");
    }
    if (!e.code) {
        /* While the replacement connects, neither it nor s is offered
         * again: a domain that wraps s (a then around it, s moved under a
         * starts_on) would be offered s again for ever.  Everything else
         * under it is offered as usual, as P2300 transforms a
         * replacement's children (a bulk inside a bulk on a pool). */
        replacing mark = { s, t, replacing_now };
        replacing_now = &mark;
        size_t align = ex_max_size(t->op_align, 1);
        if (t->op_size <= s->op_size && ((uintptr_t)storage & (align - 1)) == 0) {
            e = t->vt->connect(t, r, storage);
        } else if (s->op_size < sizeof(moved_op) || ((uintptr_t)storage & (alignof(moved_op) - 1))) {
            e = ex_err(EX_EINVAL, "cexec: a domain's replacement needs a larger operation than the sender it "
                                  "replaces, and that sender's leaves no room to point to one");
        } else {
            moved_op *o = storage;
            e = exi_connect_alloc_as_is(t, r, &o->inner);
            if (!e.code) o->base.vt = &moved_vt;
        }
        replacing_now = mark.up;
    } else {
        e = exi_error_copy(e);  /* an invalid replacement's error, which the sender keeps */
    }
    ex_sender_release(t);
    return e;
}

bool exi_late_offer(const ex_sender *s, ex_receiver r, void *storage, ex_error *e, const ex_domain *d, ex_scheduler sch) {
    if (exi_in_domain || (replacing_now && being_replaced(s))) return false;
    if (!d) {
        exi_late *l = exi_late_now;
        if (l->state == EXI_LATE_KNOWN) {
            d = l->domain;
            sch = l->sch;
        } else if (l->state == EXI_LATE_LAZY) {
            /* A lazy region: its receiver's environment decides, for every
             * connect in the region, so it is read once. */
            d = ex_get_domain(ex_receiver_env(l->r), &sch);
            l->state = EXI_LATE_KNOWN;
            l->domain = d;
            l->offers = d ? exi_domain_offer_bits_cached(d) : 0;
            l->sch = sch;
        } else {
            /* No region (a connect called outside ex_connect): this
             * connect's receiver decides, for this connect only. */
            d = ex_get_domain(ex_receiver_env(r), &sch);
        }
    }
    if (!d || !exi_domain_offers(d, s->vt->tag)) return false;
    ex_env env = ex_receiver_env(r);
    ex_sender *t = call_transform(d, sch, (ex_sender *)(uintptr_t)s, &env);
    if (!t) return false;
    if (t == s) {
        ex_sender_release(t);
        return false;
    }
    *e = connect_replacement(t, s, r, storage);
    return true;
}

ex_error exi_connect_late(const ex_sender *s, ex_receiver r, void *storage,
                          ex_error (*now)(const ex_sender *s, ex_receiver r, void *storage)) {
    ex_error e;
    ex_scheduler none = { 0, 0 };
    if (exi_late_offer(s, r, storage, &e, NULL, none)) return e;
    return now(s, r, storage);
}

ex_sender *ex_transform_early(ex_sender *s, const ex_sender *input) {
    if (!s || !input || s->status.code) return s;
    return exi_early_from_child(s, input);
}

bool ex_transform_late(const ex_sender *s, ex_receiver r, void *storage, ex_error *e) {
    if (!s || !e || !exi_late_wants(s)) return false;
    ex_scheduler none = { 0, 0 };
    return exi_late_offer(s, r, storage, e, NULL, none);
}

ex_error ex_connect_child_in_env(const ex_sender *child, ex_receiver r, void *storage) {
    return exi_connect_child_in_env(child, r, storage);
}

/* ---------------------------------------------------- bulk on a resource */

static const exi_bulk_ops *bulk_ops;

void exi_bulk_ops_register(const exi_bulk_ops *ops) {
    if (exi_load_rlx_ptr((void *const *)&bulk_ops) != ops) exi_store_rel_ptr((void **)&bulk_ops, (void *)(uintptr_t)ops);
}

ex_sender *ex_bulk_run_on(const ex_sender *s, ex_bulk_run_fn run, void *self) {
    if (!s || !run) return ex_invalid_sender(EX_EINVAL, "ex_bulk_run_on: NULL sender or function");
    const exi_bulk_ops *ops = exi_load_acq_ptr((void *const *)&bulk_ops);
    if (!ops) return ex_invalid_sender(EX_EINVAL, "ex_bulk_run_on: not a sender of ex_bulk or its family");
    return ops->run_on(s, run, self);
}

const ex_tag *const ex_bulk_domain_tags[] = { &ex_tag_bulk, &ex_tag_bulk_chunked, &ex_tag_bulk_unchunked, NULL };

ex_sender *ex_bulk_domain_transform(const ex_domain *d, ex_scheduler sch, ex_sender *s, const ex_env *env) {
    const ex_bulk_domain *bd = (const ex_bulk_domain *)(const void *)d;
    /* Late, the bulk runs where its environment's scheduler is: the domain
     * may come from an enclosing scheduler (SCHED-ENV of one without a
     * domain falls through to it), and work put under another scheduler
     * (starts_on(inline) inside pool work) stays there. */
    if (env && !ex_get_scheduler(*env, &sch)) return NULL;
    if (!sch.vt || (bd->vt && sch.vt != bd->vt)) return NULL;  /* which resource would run it? */
    return ex_bulk_run_on(s, bd->run, sch.self);
}

/* ------------------------------------------------------------ apply_sender */

bool exi_apply_sync_wait(ex_sender *s, ex_result *out) {
    if (exi_in_domain) return false;
    /* Relaxed: the answer is the same whoever finds it (the attributes do
     * not change), so a racing reader at worst looks again. */
    if (exi_load_rlx_u8(&s->memo) & EXI_MEMO_NO_APPLY) return false;
    ex_scheduler sch;
    const ex_domain *d = ex_sender_domain(s, &sch);
    if (!d || !d->apply_sender) {
        /* Never into a static sender (refs 0), which may sit in read-only
         * memory: the library writes none, as retain and release do not. */
        if (exi_load_rlx_u32(&s->refs)) exi_store_rlx_u8(&s->memo, EXI_MEMO_NO_APPLY);
        return false;
    }
    exi_in_domain++;
    bool done = d->apply_sender(d, sch, &ex_tag_sync_wait, s, out);
    exi_in_domain--;
    return done;
}
