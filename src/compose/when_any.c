/* SPDX-License-Identifier: MIT */
/* when_any.c - races: ex_when_any and ex_stop_when.
 *
 * One block, as when_all's: the header, one slot per child, room for the
 * winner's values (as many as the widest child may send), then the
 * children's operations.  The count, the children's stop source and the
 * hold a forwarded stop request takes are exi_join's (its disposition and
 * error are not used: here the first completion wins, whatever it is).
 *
 * Every child's completion requests stop on the children's source (a
 * no-op after the first) before it arrives, so the others are asked to
 * stop and nobody can complete the race while that request runs.  The
 * first completion of a child that may win takes the result (a CAS on
 * `won`) and keeps it in the block; the last arrival completes with it.
 * stop_when is the same race with two children of which the second, the
 * trigger, never takes the result. */
#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "compose/exi_join.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

enum { RACE_NONE, RACE_VALUE, RACE_ERROR, RACE_STOPPED };

struct race_op;

typedef struct race_slot {
    struct race_op *op;
    ex_operation *child;
    bool trigger;              /* never takes the result (stop_when's trigger) */
} race_slot;

typedef struct race_op {
    ex_operation base;
    ex_receiver r;
    size_t n;
    exi_join join;             /* count and the children's stop source */
    uint32_t won;              /* atomic: 1 once a child took the result */
    uint8_t disp;              /* RACE_*: the winner's, written by it alone */
    uint8_t cap, nv;           /* room for values, values kept */
    bool stop_early;           /* stopped before start: complete at once (when_any) */
    ex_value *v;               /* cap values, in the block */
    void *nested;              /* tuple contents, from alloc */
    size_t nested_size;
    ex_error err;
    const char *too_many;      /* message for a child over its signature */
    ex_stop_callback on_stop;  /* on the receiver's token */
    ex_stop_token token;       /* the receiver's */
    ex_env_pair child_env;
    const ex_allocator *alloc;
    race_slot slots[];
} race_op;

/* Laid out when the sender is built, after its children's pointers. */
typedef struct race_child {
    size_t op_off;
    bool trigger;
} race_child;

typedef struct race_sender {
    ex_sender base;
    size_t n;
    size_t values_off;
    uint8_t cap;
    bool stop_early;
    const char *too_many;
    ex_sender *children[];
} race_sender;

_Static_assert(alignof(race_child) <= alignof(ex_sender *), "the layout follows the children's pointers");

static const race_child *child_layout(const race_sender *rs) {
    return (const race_child *)(const void *)(rs->children + rs->n);
}

/* ------------------------------------------------------ keeping results */


static void keep_values(race_op *o, const ex_value *v, size_t n) {
    ex_error e = n > o->cap ? ex_err(EX_EINVAL, o->too_many)
                            : exi_values_copy(o->v, v, n, o->alloc, &o->nested, &o->nested_size);
    if (e.code) {
        o->disp = RACE_ERROR;
        o->err = e;
    } else {
        o->disp = RACE_VALUE;
        o->nv = (uint8_t)n;
    }
}

/* ----------------------------------------------------------- completing */

static void complete(race_op *o) {
    ex_stop_callback_deregister(&o->on_stop);
    switch (o->disp) {
    case RACE_VALUE: ex_set_value(o->r, o->v, o->nv); break;
    case RACE_ERROR: {
        ex_error e = o->err;
        o->err = ex_ok();  /* the receiver's now: the destroy must not release it */
        ex_set_error(o->r, e);
        break;
    }
    default: ex_set_stopped(o->r); break;
    }
}

static void arrive(race_op *o) {
    if (exi_join_arrive(&o->join)) complete(o);
}

/* A child completed: the others are asked to stop (before it arrives,
 * so the race cannot complete while the request runs). */
static void child_done(race_op *o) {
    exi_join_request_stop(&o->join);
    arrive(o);
}

/* Whether the child of slot s is the first to complete among those that
 * may win. */
static bool takes_result(race_slot *s) {
    if (s->trigger) return false;
    uint32_t none = 0;
    return exi_cas_u32(&s->op->won, &none, 1);
}

static void r_set_value(void *self, const ex_value *v, size_t n) {
    race_slot *s = self;
    if (takes_result(s)) keep_values(s->op, v, n);
    child_done(s->op);
}

static void r_set_error(void *self, ex_error e) {
    race_slot *s = self;
    if (takes_result(s)) {
        s->op->disp = RACE_ERROR;
        s->op->err = e;  /* the winner's reference (cexec/error.h), passed on by complete */
    } else {
        exi_error_drop(e);  /* a loser's or the trigger's: given to us and dropped */
    }
    child_done(s->op);
}

static void r_set_stopped(void *self) {
    race_slot *s = self;
    if (takes_result(s)) s->op->disp = RACE_STOPPED;
    child_done(s->op);
}

static ex_env r_env(void *self) { return ex_env_of_pair(&((race_slot *)self)->op->child_env); }

static const ex_receiver_vtable race_rcvr_vt = { r_set_value, r_set_error, r_set_stopped, r_env, NULL };

/* The receiver asked for stop: forwarded to every child, holding the race
 * across the request (exi_join.h). */
static void forward_stop(ex_stop_callback *cb) {
    race_op *o = EXI_CONTAINER_OF(cb, race_op, on_stop);
    if (exi_join_forward_stop(&o->join)) arrive(o);
}

/* ------------------------------------------------------------ operation */

static void race_start(ex_operation *op) {
    race_op *o = (race_op *)op;
    if (ex_stop_callback_register(&o->on_stop, o->token, forward_stop) && o->stop_early) {
        /* Stop was requested already: start no child. */
        ex_set_stopped(o->r);
        return;
    }
    /* No child can complete the race before the last one is started: the
     * block is read up to that start, never after it. */
    size_t n = o->n;
    race_slot *slots = o->slots;
    for (size_t i = 0; i < n; i++) ex_start(slots[i].child);
}

static void race_destroy_op(ex_operation *op) {
    race_op *o = (race_op *)op;
    for (size_t i = 0; i < o->n; i++) ex_operation_destroy(o->slots[i].child);
    if (o->nested) ex_deallocate(o->alloc, o->nested, o->nested_size, alignof(ex_value));
    o->nested = NULL;
    if (o->disp == RACE_ERROR) exi_error_drop(o->err);  /* a kept error never passed on */
    o->disp = RACE_NONE;
}

static const ex_operation_vtable race_op_vt = { race_start, race_destroy_op };

static ex_error race_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const race_sender *rs = (const race_sender *)s;
    race_op *o = storage;
    o->base.vt = &race_op_vt;
    o->r = r;
    o->n = rs->n;
    exi_join_init(&o->join, (uint32_t)rs->n);
    o->won = 0;
    o->disp = RACE_NONE;
    o->cap = rs->cap;
    o->nv = 0;
    o->stop_early = rs->stop_early;
    o->v = (ex_value *)(void *)((char *)storage + rs->values_off);
    o->nested = NULL;
    o->nested_size = 0;
    o->too_many = rs->too_many;
    ex_env env = ex_receiver_env(r);
    o->alloc = ex_get_allocator(env);
    o->token = ex_get_stop_token(env);
    ex_value tv;
    tv.type = EX_T_TOKEN;
    tv.as.token = exi_join_token(&o->join);
    ex_env_pair_init(&o->child_env, &ex_key_get_stop_token, tv, ex_env_forward(env));
    const race_child *layout = child_layout(rs);
    for (size_t i = 0; i < rs->n; i++) {
        race_slot *sl = &o->slots[i];
        sl->op = o;
        sl->trigger = layout[i].trigger;
        sl->child = (ex_operation *)(void *)((char *)storage + layout[i].op_off);
        ex_receiver cr = { &race_rcvr_vt, sl };
        ex_error e = ex_connect_child(rs->children[i], cr, sl->child);
        if (e.code) {
            for (size_t j = 0; j < i; j++) ex_operation_destroy(o->slots[j].child);
            return e;
        }
    }
    return ex_ok();
}

static void race_destroy(ex_sender *s) {
    race_sender *rs = (race_sender *)s;
    for (size_t i = 0; i < rs->n; i++) ex_sender_release(rs->children[i]);
}

static const ex_sender_vtable when_any_vt = { "ex_when_any", race_connect, NULL, race_destroy, NULL };
static const ex_sender_vtable stop_when_vt = { "ex_stop_when", race_connect, NULL, race_destroy, NULL };

/* -------------------------------------------------------------- building */

/* The race sender over checked children, the last `triggers` of which
 * never take the result; its signatures are the caller's to set. */
static ex_sender *race_new(const ex_sender_vtable *vt, ex_sender *const *children, size_t n, size_t triggers,
                           const char *too_many) {
    if (n > (SIZE_MAX - sizeof(race_sender)) / (sizeof(ex_sender *) + sizeof(race_child)) || n > UINT32_MAX - 1)
        return ex_reject(EX_EINVAL, "ex_when_any: too many children", n, children);
    ex_sender *s = ex_sender_alloc(vt, sizeof(race_sender) + n * (sizeof(ex_sender *) + sizeof(race_child)));
    if (!s) return ex_reject(EX_ENOMEM, NULL, n, children);
    race_sender *rs = (race_sender *)s;
    rs->n = n;
    rs->too_many = too_many;
    race_child *layout = (race_child *)(void *)(rs->children + n);
    uint8_t cap = 0;
    uint32_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        rs->children[i] = children[i];
        layout[i].trigger = i >= n - triggers;
        if (!layout[i].trigger) {
            uint8_t c = exi_sigs_max_arity(&children[i]->sigs);
            if (c > cap) cap = c;
        }
        if (children[i]->depth > depth) depth = children[i]->depth;
    }
    rs->cap = cap;
    size_t off = ex_align_up(sizeof(race_op) + n * sizeof(race_slot), alignof(ex_value));
    rs->values_off = off;
    off += (size_t)cap * sizeof(ex_value);
    size_t align = alignof(race_op);
    for (size_t i = 0; i < n; i++) {
        off = ex_align_up(off, children[i]->op_align);
        layout[i].op_off = off;
        off = ex_size_add(off, children[i]->op_size);
        align = ex_max_size(align, children[i]->op_align);
    }
    s->op_size = off;
    s->op_align = align;
    s->depth = depth + 1;
    return s;
}

/* The error flag a race adds for keeping the values of a child that may
 * win. */
static uint8_t keeping_error(const ex_sigs *cs) { return exi_sigs_keeping_may_fail(cs) ? EX_SIGS_ERROR : 0; }

ex_sender *ex_when_any_n(ex_sender *const *children, size_t n) {
    if (!children || n == 0) return ex_invalid_sender(EX_EINVAL, "ex_when_any: needs at least one sender");
    ex_sigs sigs = ex_sigs_none();
    for (size_t i = 0; i < n; i++) {
        ex_error e = ex_check_input(children[i], "ex_when_any: NULL input sender");
        if (e.code) return ex_reject(e.code, e.msg, n, children);
        ex_sigs_merge(&sigs, &children[i]->sigs);
        sigs.flags |= keeping_error(&children[i]->sigs);
    }
    sigs.flags |= EX_SIGS_STOPPED;
    ex_sender *s = race_new(&when_any_vt, children, n, 0, "ex_when_any: a child sent more values than its signature allows");
    if (s->status.code) return s;
    s->sigs = sigs;
    ((race_sender *)s)->stop_early = true;
    return s;
}

ex_sender *ex_stop_when(ex_sender *sender, ex_sender *trigger) {
    ex_sender *both[2] = { sender, trigger };
    ex_error e = ex_check_input(sender, "ex_stop_when: NULL input sender");
    if (!e.code) e = ex_check_input(trigger, "ex_stop_when: NULL trigger sender");
    if (e.code) return ex_reject(e.code, e.msg, 2, both);
    ex_sigs sigs = sender->sigs;
    sigs.flags |= keeping_error(&sender->sigs);
    ex_sender *s = race_new(&stop_when_vt, both, 2, 1, "ex_stop_when: the sender sent more values than its signature allows");
    if (s->status.code) return s;
    s->sigs = sigs;
    ((race_sender *)s)->stop_early = false;
    return s;
}
