/* SPDX-License-Identifier: MIT */
/* transfer.c - starts_on, continues_on / schedule_from, and on
 * ([exec.starts.on], [exec.continues.on], [exec.schedule.from], [exec.on]).
 *
 * Each operation embeds the schedule operation it needs, so hopping between
 * resources allocates nothing.  ex_on learns the scheduler it returns to only
 * at connect: a capture node (exi_write_env) publishes it under a private
 * key, and the inner continues_on reads it there. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "adaptors/exi_on.h"
#include "adaptors/exi_write_env.h"
#include "base/exi_macros.h"
#include "core/exi_domain.h"
#include "core/exi_env.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

static const ex_key exi_key_on_orig = { "cexec.on.original_scheduler", true };

static const char on_missing_msg[] = "ex_on: the receiver's environment has no scheduler to return to";

/* --------------------------------------------------------------- starts_on */

typedef struct starts_on_sender {
    ex_sender base;
    ex_sender *child;
    ex_scheduler sch;
    size_t sched_off, child_off;
} starts_on_sender;

typedef struct starts_on_op {
    exi_starts_on_head h;   /* base, r, sched_op (exi_on.h) */
    ex_operation *child;
    ex_env child_env;       /* JOIN-ENV(SCHED-ENV(sch), FWD-ENV(env)): the pair, or FWD-ENV(env) when env says that already */
    ex_env_pair own_env;
} starts_on_op;

static void so_sched_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    ex_start(((starts_on_op *)self)->child);
}
static void so_set_error(void *self, ex_error e) { ex_set_error(((starts_on_op *)self)->h.r, e); }
static void so_set_stopped(void *self) { ex_set_stopped(((starts_on_op *)self)->h.r); }
static ex_env so_sched_env(void *self) { return ex_env_forward(ex_receiver_env(((starts_on_op *)self)->h.r)); }
static const ex_receiver_vtable so_sched_vt = { so_sched_value, so_set_error, so_set_stopped, so_sched_env, NULL };

static void so_child_value(void *self, const ex_value *v, size_t n) { ex_set_value(((starts_on_op *)self)->h.r, v, n); }
static ex_env so_child_env(void *self) { return ((starts_on_op *)self)->child_env; }
static const ex_receiver_vtable so_child_vt = { so_child_value, so_set_error, so_set_stopped, so_child_env, NULL };

static void so_start(ex_operation *op) { ex_start(((starts_on_op *)op)->h.sched_op); }

static void so_destroy_op(ex_operation *op) {
    starts_on_op *o = (starts_on_op *)op;
    ex_operation_destroy(o->h.sched_op);
    ex_operation_destroy(o->child);
}
static const ex_operation_vtable so_op_vt = { so_start, so_destroy_op };

static inline __attribute__((always_inline)) ex_error so_connect_now(const ex_sender *s, ex_receiver r, void *storage) {
    const starts_on_sender *ss = (const starts_on_sender *)s;
    starts_on_op *o = storage;
    o->h.base.vt = &so_op_vt;
    o->h.r = r;
    o->h.sched_op = (ex_operation *)(void *)((char *)storage + ss->sched_off);
    o->child = (ex_operation *)(void *)((char *)storage + ss->child_off);
    ex_env env = ex_receiver_env(r);
    /* Already on sch's terms (a fork's child put back on the pool the
     * fork runs on): no pair, two lookups and a link fewer a fork. */
    if (exi_env_is_sched_env(env, ss->sch)) {
        o->child_env = ex_env_forward(env);
    } else {
        exi_env_pair_init_sched_alloc(&o->own_env, ss->sch, exi_allocator_under(env, &ss->sch), ex_env_forward(env));
        o->child_env = ex_env_of_pair(&o->own_env);
    }
    ex_receiver sr = { &so_sched_vt, o };
    ex_error e = ss->sch.vt->connect_schedule(ss->sch.self, sr, o->h.sched_op);
    if (e.code) return e;
    ex_receiver cr = { &so_child_vt, o };
    /* Its own variable, and ex_ok() on success: copying the error the
     * callee just wrote stalls on store forwarding; only its code is read
     * on the way. */
    /* The child's late domain: sch's when it has one (SCHED-ENV), else
     * what the child's environment names above it. */
    ex_error ce = exi_connect_child_under(ss->child, cr, o->child, ss->sch);
    if (ce.code) {
        ex_operation_destroy(o->h.sched_op);
        return ce;
    }
    return ex_ok();
}

static ex_error so_connect(const ex_sender *s, ex_receiver r, void *storage) {
    if (exi_late_wants(s)) return exi_connect_late(s, r, storage, so_connect_now);
    return so_connect_now(s, r, storage);
}

static void so_destroy(ex_sender *s) { ex_sender_release(((starts_on_sender *)s)->child); }

/* Completes where the child completes: the child's attributes, forwarded
 * (default get-attrs of a single-child sender). */
static ex_env so_attrs(const ex_sender *s) { return ex_env_forward(ex_sender_attrs(((const starts_on_sender *)s)->child)); }

const ex_sender_vtable exi_starts_on_vt = { "ex_starts_on", so_connect, so_attrs, so_destroy, &ex_tag_starts_on };

ex_sender *ex_starts_on(ex_scheduler sch, ex_sender *child) {
    ex_error e = ex_check_input(child, "ex_starts_on: NULL input sender");
    if (e.code) return exi_reject1(e.code, e.msg, child);
    if (!sch.vt || !sch.vt->connect_schedule) return exi_reject1(EX_EINVAL, "ex_starts_on: invalid scheduler handle", child);
    ex_sender *s = ex_sender_alloc(&exi_starts_on_vt, sizeof(starts_on_sender));
    if (!s) return exi_reject1(EX_ENOMEM, NULL, child);
    starts_on_sender *ss = (starts_on_sender *)s;
    ss->child = child;
    ss->sch = sch;
    ss->sched_off = ex_align_up(sizeof(starts_on_op), sch.vt->schedule_op_align);
    ss->child_off = ex_align_up(ex_size_add(ss->sched_off, sch.vt->schedule_op_size), child->op_align);
    s->op_size = ex_size_add(ss->child_off, child->op_size);
    s->op_align = ex_max_size(ex_max_size(alignof(starts_on_op), sch.vt->schedule_op_align), child->op_align);
    s->sigs = child->sigs;
    s->sigs.flags |= sch.vt->schedule_flags;
    s->depth = child->depth + 1;
    /* [exec.starts.on]: the early domain is the scheduler's. */
    return sch.vt->domain ? exi_transform_early(s, sch.vt->domain, sch) : s;
}

/* ------------------------------------------------- continues_on / schedule_from */

typedef enum disposition { DISP_NONE, DISP_VALUE, DISP_ERROR, DISP_STOPPED } disposition;

typedef struct continues_sender {
    ex_sender base;
    ex_sender *child;
    bool from_env;           /* scheduler read from exi_key_on_orig at connect */
    bool affine;             /* affine_on: dispatch, so no hop when already there */
    ex_scheduler sch;
    ex_env_pair attrs;       /* SCHED-ATTRS(sch) joined with FWD-ENV(child attrs) */
    size_t child_off, sched_off, sched_room, sched_room_align;
} continues_sender;

typedef struct continues_op {
    ex_operation base;
    ex_receiver r;
    ex_operation *child;
    ex_operation *sched_op;
    void *sched_block;       /* allocated when the scheduler needs more than sched_room */
    const ex_allocator *sched_alloc;
    size_t sched_size, sched_align;
    disposition disp;
    ex_error err;
    exi_store result;
    bool affine;
    ex_scheduler sch;
    ex_work work;            /* affine_on's dispatch */
} continues_op;

static void co_replay(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    continues_op *o = self;
    switch (o->disp) {
    case DISP_VALUE: ex_set_value(o->r, o->result.v, o->result.n); break;
    case DISP_ERROR: {
        ex_error e = o->err;
        o->err = ex_ok();  /* the child's reference goes on to the receiver */
        ex_set_error(o->r, e);
        break;
    }
    default: ex_set_stopped(o->r); break;
    }
}
static void co_fwd_error(void *self, ex_error e) { ex_set_error(((continues_op *)self)->r, e); }
static void co_fwd_stopped(void *self) { ex_set_stopped(((continues_op *)self)->r); }
static ex_env co_env(void *self) { return ex_env_forward(ex_receiver_env(((continues_op *)self)->r)); }
static const ex_receiver_vtable co_sched_vt = { co_replay, co_fwd_error, co_fwd_stopped, co_env, NULL };

static void co_work_execute(ex_work *w) { co_replay(EXI_CONTAINER_OF(w, continues_op, work), NULL, 0); }
static void co_work_cancel(ex_work *w) { ex_set_stopped(EXI_CONTAINER_OF(w, continues_op, work)->r); }

/* To the scheduler: affine_on dispatches (inline when this thread already
 * runs there), continues_on always schedules. */
static void co_hop(continues_op *o) {
    if (o->affine && o->sch.vt->dispatch) {
        o->work = (ex_work){ NULL, co_work_execute, co_work_cancel };
        if (!ex_dispatch(o->sch, &o->work).code) return;
    }
    ex_start(o->sched_op);
}

static void co_child_value(void *self, const ex_value *v, size_t n) {
    continues_op *o = self;
    ex_error e = exi_store_set(&o->result, v, n, ex_get_allocator(ex_receiver_env(o->r)));
    if (e.code) { ex_set_error(o->r, e); return; }
    o->disp = DISP_VALUE;
    co_hop(o);
}
static void co_child_error(void *self, ex_error e) {
    continues_op *o = self;
    o->err = e;
    o->disp = DISP_ERROR;
    co_hop(o);
}
static void co_child_stopped(void *self) {
    continues_op *o = self;
    o->disp = DISP_STOPPED;
    co_hop(o);
}
static const ex_receiver_vtable co_child_vt = { co_child_value, co_child_error, co_child_stopped, co_env, NULL };

static void co_start(ex_operation *op) { ex_start(((continues_op *)op)->child); }

static void co_release_sched(continues_op *o) {
    ex_operation_destroy(o->sched_op);
    if (o->sched_block) ex_deallocate(o->sched_alloc, o->sched_block, o->sched_size, o->sched_align);
    o->sched_block = NULL;
}

static void co_destroy_op(ex_operation *op) {
    continues_op *o = (continues_op *)op;
    ex_operation_destroy(o->child);
    co_release_sched(o);
    exi_store_clear(&o->result);
    exi_error_drop(o->err);  /* a child's error the hop did not deliver (it failed or stopped) */
}
static const ex_operation_vtable co_op_vt = { co_start, co_destroy_op };

static ex_error co_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const continues_sender *cs = (const continues_sender *)s;
    /* get-domain-late: a hop's late domain is its scheduler's.  ex_on's
     * hop back, whose scheduler it reads from the environment below, is
     * not offered (docs/design.md, "Domains"). */
    ex_error le;
    const ex_domain *hop_domain = cs->from_env ? NULL : cs->sch.vt->domain;
    if (hop_domain && exi_domain_offers(hop_domain, s->vt->tag) && exi_late_offer(s, r, storage, &le, hop_domain, cs->sch))
        return le;
    continues_op *o = storage;
    ex_scheduler sch = cs->sch;
    if (cs->from_env) {
        ex_value v;
        if (!ex_env_query(ex_receiver_env(r), &exi_key_on_orig, &v) || v.type != EX_T_SCHED || !v.as.sched.vt)
            return ex_err(EX_EINVAL, on_missing_msg);
        sch = v.as.sched;
    }
    o->base.vt = &co_op_vt;
    o->r = r;
    o->affine = cs->affine;
    o->sch = sch;
    o->disp = DISP_NONE;
    o->err = ex_ok();
    exi_store_init(&o->result);
    o->child = (ex_operation *)(void *)((char *)storage + cs->child_off);
    o->sched_block = NULL;
    o->sched_op = (ex_operation *)(void *)((char *)storage + cs->sched_off);
    if (sch.vt->schedule_op_size > cs->sched_room || sch.vt->schedule_op_align > cs->sched_room_align) {
        o->sched_alloc = ex_get_allocator(ex_receiver_env(r));
        o->sched_size = sch.vt->schedule_op_size;
        o->sched_align = sch.vt->schedule_op_align;
        o->sched_block = ex_allocate(o->sched_alloc, o->sched_size, o->sched_align);
        if (!o->sched_block) return ex_err(EX_ENOMEM, "ex_on: out of memory for the schedule operation");
        o->sched_op = o->sched_block;
    }
    ex_receiver sr = { &co_sched_vt, o };
    ex_error e = sch.vt->connect_schedule(sch.self, sr, o->sched_op);
    if (e.code) {
        if (o->sched_block) ex_deallocate(o->sched_alloc, o->sched_block, o->sched_size, o->sched_align);
        return e;
    }
    ex_receiver cr = { &co_child_vt, o };
    e = ex_connect_child(cs->child, cr, o->child);
    if (e.code) co_release_sched(o);
    return e;
}

static ex_env co_attrs(const ex_sender *s) {
    const continues_sender *cs = (const continues_sender *)s;
    if (cs->from_env) return ex_env_empty();
    return ex_env_of_pair(&cs->attrs);
}

static void co_destroy(ex_sender *s) { ex_sender_release(((continues_sender *)s)->child); }

static const ex_sender_vtable continues_vt = { "ex_continues_on", co_connect, co_attrs, co_destroy, &ex_tag_continues_on };
static const ex_sender_vtable affine_vt = { "ex_affine_on", co_connect, co_attrs, co_destroy, &ex_tag_continues_on };

static ex_sender *make_continues(ex_sender *child, const ex_scheduler *sch, const char *who_null, const char *who_sched,
                                 bool affine) {
    ex_error e = ex_check_input(child, who_null);
    if (e.code) return exi_reject1(e.code, e.msg, child);
    if (sch && (!sch->vt || !sch->vt->connect_schedule)) return exi_reject1(EX_EINVAL, who_sched, child);
    ex_sender *s = ex_sender_alloc(affine ? &affine_vt : &continues_vt, sizeof(continues_sender));
    if (!s) return exi_reject1(EX_ENOMEM, NULL, child);
    continues_sender *cs = (continues_sender *)s;
    cs->child = child;
    cs->from_env = sch == NULL;
    cs->affine = affine;
    size_t room, align;
    if (sch) {
        cs->sch = *sch;
        room = sch->vt->schedule_op_size;
        align = sch->vt->schedule_op_align;
        ex_env_pair_init2(&cs->attrs, &ex_key_completion_scheduler_value, ex_sched_value(*sch),
                          &ex_key_completion_scheduler_stopped, ex_sched_value(*sch),
                          ex_env_forward(ex_sender_attrs(child)));
        s->sigs = child->sigs;
        s->sigs.flags |= sch->vt->schedule_flags;
    } else {
        room = EX_SCHEDULE_OP_INLINE;
        align = alignof(max_align_t);
        s->sigs = child->sigs;
        s->sigs.flags |= EX_SIGS_ERROR | EX_SIGS_STOPPED;
    }
    /* [exec.schedule.from]: an error only when keeping the values across
     * the hop can fail.  Flat values are copied into the operation state;
     * a tuple (or a datum of any type, which may be one) takes an
     * allocation, and a dynamic or variadic child may send too many. */
    if (exi_sigs_keeping_may_fail(&child->sigs)) s->sigs.flags |= EX_SIGS_ERROR;
    cs->sched_room = room;
    cs->sched_room_align = align;
    cs->sched_off = ex_align_up(sizeof(continues_op), align);
    cs->child_off = ex_align_up(ex_size_add(cs->sched_off, room), child->op_align);
    s->op_size = ex_size_add(cs->child_off, child->op_size);
    s->op_align = ex_max_size(ex_max_size(alignof(continues_op), align), child->op_align);
    s->depth = child->depth + 1;
    return exi_early_from_child(s, child);
}

ex_sender *ex_continues_on(ex_sender *child, ex_scheduler sch) {
    return make_continues(child, &sch, "ex_continues_on: NULL input sender", "ex_continues_on: invalid scheduler handle",
                          false);
}

ex_sender *ex_affine_on(ex_sender *child, ex_scheduler sch) {
    return make_continues(child, &sch, "ex_affine_on: NULL input sender", "ex_affine_on: invalid scheduler handle", true);
}

ex_sender *ex_schedule_from(ex_scheduler sch, ex_sender *child) {
    return make_continues(child, &sch, "ex_schedule_from: NULL input sender", "ex_schedule_from: invalid scheduler handle",
                          false);
}

static ex_sender *exi_continues_on_orig(ex_sender *child) {
    return make_continues(child, NULL, "ex_on: NULL input sender", NULL, false);
}

/* ---------------------------------------------------------------------- on */

/* Publishes the receiver environment's scheduler under exi_key_on_orig. */
static ex_sender *capture_orig(ex_sender *child) {
    return exi_write_env(child, &exi_key_on_orig, ex_none(), &ex_key_get_scheduler, on_missing_msg);
}

ex_sender *ex_on(ex_scheduler sch, ex_sender *child) {
    ex_error e = ex_check_input(child, "ex_on: NULL input sender");
    if (e.code) return exi_reject1(e.code, e.msg, child);
    if (!sch.vt || !sch.vt->connect_schedule) return exi_reject1(EX_EINVAL, "ex_on: invalid scheduler handle", child);
    /* continues_on(starts_on(sch, child), orig) with orig from the env. */
    return capture_orig(exi_continues_on_orig(ex_starts_on(sch, child)));
}

ex_sender *ex_on_closure(ex_sender *child, ex_scheduler sch, ex_closure_fn closure, void *ctx) {
    ex_error e = ex_check_input(child, "ex_on: NULL input sender");
    if (e.code) return exi_reject1(e.code, e.msg, child);
    if (!sch.vt || !sch.vt->connect_schedule) return exi_reject1(EX_EINVAL, "ex_on: invalid scheduler handle", child);
    if (!closure) return exi_reject1(EX_EINVAL, "ex_on: NULL closure", child);
    ex_scheduler orig;
    if (ex_get_completion_scheduler(child, &ex_key_completion_scheduler_value, &orig)) {
        /* write-env(continues_on(closure(continues_on(write-env(child, SCHED-ENV(orig)), sch)), orig), SCHED-ENV(sch)) */
        ex_sender *inner = ex_continues_on(ex_write_env(child, &ex_key_get_scheduler, ex_sched_value(orig)), sch);
        ex_sender *mid = closure(ctx, inner);
        if (!mid) return ex_invalid_sender(EX_EINVAL, "ex_on: the closure returned NULL");
        return ex_write_env(ex_continues_on(mid, orig), &ex_key_get_scheduler, ex_sched_value(sch));
    }
    /* Same shape, with orig read from the receiver's environment at connect. */
    ex_sender *inner = ex_continues_on(
        exi_write_env(child, &ex_key_get_scheduler, ex_none(), &exi_key_on_orig, on_missing_msg), sch);
    ex_sender *mid = closure(ctx, inner);
    if (!mid) return ex_invalid_sender(EX_EINVAL, "ex_on: the closure returned NULL");
    return capture_orig(ex_write_env(exi_continues_on_orig(mid), &ex_key_get_scheduler, ex_sched_value(sch)));
}
