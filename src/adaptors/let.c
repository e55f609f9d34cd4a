/* SPDX-License-Identifier: MIT */
/* let.c - let_value, let_error, let_stopped ([exec.let]).
 *
 * The child's datums are kept in the operation state (tuple contents in a
 * block from the environment's allocator) until the operation is
 * destroyed, which is after the sender returned by fn completed.  That
 * sender's operation is allocated from the same allocator.
 *
 * Every message names the stage, "ex_let_value(name): ..." (let.h); the
 * name is one pointer in the sender and the operation, read only to make a
 * message. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "adaptors/exi_just.h"
#include "adaptors/exi_stage_name.h"
#include "core/exi_env.h"
#include "core/exi_error_text.h"
#include "core/exi_domain.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

typedef enum let_kind { LET_VALUE, LET_ERROR, LET_STOPPED } let_kind;

typedef union let_fn {
    ex_let_value_fn value;
    ex_let_error_fn error;
    ex_let_stopped_fn stopped;
} let_fn;

typedef struct let_sender {
    ex_sender base;
    ex_sender *child;
    let_kind kind;
    bool borrowed;           /* ex_let_value_borrowed: fn lends its sender */
    /* let_value over a just without tuples (the lazy idiom
     * let_value(just(), fn)): its values, inside the child */
    bool just_child;
    bool just_matches;       /* its values match `in` (checked once, here) */
    bool child_attrs;        /* the child has attributes (a completion scheduler may be asked) */
    size_t just_n;
    const ex_value *just_v;
    let_fn fn;
    void *ctx;
    const char *name;        /* the stage's, for messages; NULL: none */
    ex_sig in;
} let_sender;

/* The fields every run touches first, then the datum stores (their
 * counts lead), then the scheduler node, which few lets build: a let
 * touches a few cache lines of its operation, not all of them. */
typedef struct let_op {
    ex_operation base;
    ex_receiver r;
    ex_operation *child;
    let_kind kind;
    bool borrowed;
    bool just_child;         /* the child's values are in args already: no child operation */
    bool just_matches;       /* ... and match `in` (the sender checked them once) */
    bool has_sched;
    bool late_known;         /* the body's late domain was known at connect (late_domain, late_sch) */
    let_fn fn;
    void *ctx;
    ex_sig in;
    ex_env env;              /* the receiver's, read once at connect */
    const ex_allocator *alloc;  /* the environment's, looked up once when first needed (let_alloc) */
    ex_operation *inner;     /* operation of fn's sender */
    const ex_allocator *inner_alloc;
    size_t inner_size, inner_align;
    ex_error err;            /* the error let_error's fn sees (set before it is called) */
    exi_store args;          /* the datums fn sees */
    exi_store result;        /* the inner sender's values, kept once its operation is freed */
    ex_env_pair env2;        /* JOIN-ENV(SCHED-ENV(completion scheduler), FWD-ENV(env)) */
    const ex_domain *late_domain;
    uint64_t late_offers;
    ex_scheduler late_sch;
    const char *name;        /* the stage's (messages only) */
} let_op;

/* A builder's fixed messages, each the fallback of its named or
 * formatted form (exi_error_text.h). */
typedef struct let_texts {
    const char *stage, *null_child, *null_fn, *in_sig, *in_values, *returned_null, *no_memory;
} let_texts;

#define LET_TEXTS(stage)                                                                                   \
    { stage, stage ": NULL input sender", stage ": NULL function",                                        \
      stage ": the input sender's value signature does not match the function's input signature",         \
      stage ": the child's values do not match the function's input signature",                          \
      stage ": the function returned NULL", stage ": out of memory for the operation of the function's sender" }

/* By kind; ex_let_value_borrowed last. */
static const let_texts texts[] = { LET_TEXTS("ex_let_value"), LET_TEXTS("ex_let_error"), LET_TEXTS("ex_let_stopped"),
                                   LET_TEXTS("ex_let_value_borrowed") };

static const let_texts *texts_of(let_kind kind, bool borrowed) { return &texts[borrowed ? 3 : kind]; }

/* An error cexec makes for the stage (storing values), named. */
static ex_error stage_error(const let_op *o, ex_error e) {
    return exi_stage_error(texts_of(o->kind, o->borrowed)->stage, o->name, e);
}

/* The environment's allocator, looked up at the first need: a let whose
 * function lends a just (a recursion's leaf) allocates nothing. */
static const ex_allocator *let_alloc(let_op *o) {
    if (!o->alloc) o->alloc = ex_get_allocator(o->env);
    return o->alloc;
}

/* The inner operation is freed as soon as it completes, not when the let
 * operation is destroyed: a recursion through let_value (fib) then holds
 * memory for the operations in flight, not for every one it ever ran. */
static void free_inner(let_op *o) {
    ex_operation_destroy(o->inner);
    ex_deallocate(o->inner_alloc, o->inner, o->inner_size, o->inner_align);
    o->inner = NULL;
}

/* A completion of the inner operation whose receiver is again a let's
 * inner receiver (a recursion whose function returns a let_value) goes on
 * to that let in a loop, not in a nested call per level: the stack stays
 * flat also in builds that do not turn the call into a jump (-O0, ASan). */
static void r2_set_value(void *self, const ex_value *v, size_t n) {
    let_op *o = self;
    for (;;) {
        /* The values may live in the inner operation: copy them out first.
         * (No inner operation: a lent just, see run_inner.) */
        /* (o->alloc: set by run_inner for an inner operation's values; a
         * lent just's are flat, and need none) */
        ex_error e = exi_store_set(&o->result, v, n, o->alloc);
        if (o->inner) free_inner(o);
        if (e.code) { ex_set_error(o->r, stage_error(o, e)); return; }
        if (o->r.vt->set_value != r2_set_value) { ex_set_value(o->r, o->result.v, o->result.n); return; }
        v = o->result.v;
        n = o->result.n;
        o = o->r.self;
    }
}

static void r2_set_error(void *self, ex_error e) {
    let_op *o = self;
    for (;;) {
        free_inner(o);
        if (o->r.vt->set_error != r2_set_error) { ex_set_error(o->r, e); return; }
        o = o->r.self;
    }
}

static void r2_set_stopped(void *self) {
    let_op *o = self;
    for (;;) {
        free_inner(o);
        if (o->r.vt->set_stopped != r2_set_stopped) { ex_set_stopped(o->r); return; }
        o = o->r.self;
    }
}

static ex_env r2_env(void *self) {
    let_op *o = self;
    if (o->has_sched) return ex_env_of_pair(&o->env2);
    return ex_env_forward(o->env);
}
static const ex_receiver_vtable r2_vt = { r2_set_value, r2_set_error, r2_set_stopped, r2_env, NULL };

/* Drops the reference fn handed over, unless it lent the sender. */
static inline void release_returned(const let_op *o, ex_sender *s2) {
    if (!o->borrowed) exi_sender_release(s2);
}

/* Connects and starts the sender fn returned (taking ownership of it,
 * unless fn lent it). */
static void run_inner(let_op *o, ex_sender *s2) {
    if (!s2) {
        ex_set_error(o->r, ex_err(EX_EINVAL, exi_stage_fixed(texts_of(o->kind, o->borrowed)->returned_null, o->name)));
        return;
    }
    ex_error e;
    if (o->r.vt->accepts && (e = exi_check_accepts(s2, o->r, texts_of(o->kind, o->borrowed)->stage)).code) {
        release_returned(o, s2);
        ex_set_error(o->r, stage_error(o, e));
        return;
    }
    /* A lent just without tuples would only send its values when
     * started: they are the result, with no operation to allocate,
     * connect, start and free (a recursion's leaves: fib's F[0], F[1]).
     * The lender keeps the sender while the values are copied. */
    const ex_value *jv;
    size_t jn;
    if (o->borrowed && exi_just_flat_values(s2, &jv, &jn)) {
        r2_set_value(o, jv, jn);
        return;
    }
    const ex_allocator *a = let_alloc(o);
    void *block = ex_allocate(a, s2->op_size, s2->op_align);
    if (!block) {
        release_returned(o, s2);
        ex_set_error(o->r, ex_err(EX_ENOMEM, exi_stage_fixed(texts_of(o->kind, o->borrowed)->no_memory, o->name)));
        return;
    }
    ex_receiver r2 = { &r2_vt, o };
    /* (a fresh variable: copying the error the callee just wrote into
     * another stalls on store forwarding) */
    /* The body's environment decides its late domain: known at connect
     * in the common case, else read from it now. */
    exi_late region;
    if (o->late_known) exi_late_enter_known_bits(&region, o->late_domain, o->late_offers, o->late_sch);
    else exi_late_enter(&region, r2);
    ex_error ce = ex_connect_child(s2, r2, block);
    exi_late_leave(&region);
    if (ce.code) {
        ex_deallocate(a, block, s2->op_size, s2->op_align);
        release_returned(o, s2);
        ex_set_error(o->r, ce);
        return;
    }
    o->inner = block;
    o->inner_alloc = a;
    o->inner_size = s2->op_size;
    o->inner_align = s2->op_align;
    release_returned(o, s2);  /* the operation does not refer to it after connect */
    ex_start(o->inner);
}

static bool values_match(let_op *o, const ex_value *v, size_t n) {
    if (exi_sig_matches(&o->in, v, n)) return true;
    const let_texts *t = texts_of(o->kind, o->borrowed);
    ex_set_error(o->r, ex_err(EX_EINVAL, exi_stage_values_mismatch(t->stage, o->name, t->in_values, v, n, &o->in)));
    return false;
}

static void let_set_value(void *self, const ex_value *v, size_t n) {
    let_op *o = self;
    if (o->kind != LET_VALUE) { ex_set_value(o->r, v, n); return; }
    if (!values_match(o, v, n)) return;
    ex_error e = exi_store_set(&o->args, v, n, let_alloc(o));
    if (e.code) { ex_set_error(o->r, stage_error(o, e)); return; }
    run_inner(o, o->fn.value(o->ctx, o->args.v, o->args.n));
}

static void let_set_error(void *self, ex_error err) {
    let_op *o = self;
    if (o->kind != LET_ERROR) { ex_set_error(o->r, err); return; }
    o->err = err;
    run_inner(o, o->fn.error(o->ctx, o->err));
}

static void let_set_stopped(void *self) {
    let_op *o = self;
    if (o->kind != LET_STOPPED) { ex_set_stopped(o->r); return; }
    run_inner(o, o->fn.stopped(o->ctx));
}

static ex_env let_env(void *self) { return ex_env_forward(((let_op *)self)->env); }

static const ex_receiver_vtable let_rcvr_vt = { let_set_value, let_set_error, let_set_stopped, let_env, NULL };

/* A just child would complete with its values as soon as started: the
 * let takes them at connect and goes on at start as if it had. */
static void let_start(ex_operation *op) {
    let_op *o = (let_op *)op;
    if (!o->just_child) {
        ex_start(o->child);
        return;
    }
    if (o->just_matches || values_match(o, o->args.v, o->args.n)) run_inner(o, o->fn.value(o->ctx, o->args.v, o->args.n));
}

static void let_op_destroy(ex_operation *op) {
    let_op *o = (let_op *)op;
    if (!o->just_child) ex_operation_destroy(o->child);
    if (o->inner) free_inner(o);
    exi_store_clear(&o->args);
    exi_store_clear(&o->result);
}

static const ex_operation_vtable let_op_vt = { let_start, let_op_destroy };

static const ex_key *const channel_keys[] = {
    &ex_key_completion_scheduler_value, &ex_key_completion_scheduler_error, &ex_key_completion_scheduler_stopped };

/* If the child has a completion scheduler for the let's channel, builds
 * the inner receiver's environment on it and returns true.  Out of line:
 * the common connect (no scheduler) keeps a small frame. */
static __attribute__((noinline)) bool join_completion_scheduler(let_op *o, const let_sender *ls) {
    ex_scheduler sch;
    if (!ex_get_completion_scheduler(ls->child, channel_keys[ls->kind], &sch)) return false;
    /* Answering the allocator here too spares the inner sender the
     * lookup.  The node shadows the same node of a let above it, so a
     * recursion's chain of them stays as short as one. */
    ex_env_pair_init2(&o->env2, &ex_key_get_scheduler, ex_sched_value(sch), &ex_key_get_allocator,
                      ex_alloc_value(exi_allocator_under(o->env, &sch)), ex_env_forward(o->env));
    return true;
}

/* The body's late domain, when known now: its completion scheduler's
 * when that has one (SCHED-ENV answers get_domain with it), else the
 * let's own (the body's environment names nothing more). */
static inline void body_late_domain(let_op *o) {
    const exi_late *l = exi_late_now;
    if (o->has_sched && o->env2.value.as.sched.vt->domain) {
        o->late_sch = o->env2.value.as.sched;
        o->late_domain = o->late_sch.vt->domain;
        o->late_offers = exi_domain_offer_bits_cached(o->late_domain);
        o->late_known = true;
    } else if (l->state == EXI_LATE_KNOWN) {
        o->late_known = true;
        o->late_domain = l->domain;
        o->late_offers = l->offers;
        o->late_sch = l->sch;
    } else {
        o->late_known = false;
    }
}

static inline __attribute__((always_inline)) ex_error let_connect_now(const ex_sender *s,
                                                                      ex_receiver r, void *storage) {
    const let_sender *ls = (const let_sender *)s;
    let_op *o = storage;
    o->base.vt = &let_op_vt;
    o->r = r;
    o->kind = ls->kind;
    o->fn = ls->fn;
    o->ctx = ls->ctx;
    o->name = ls->name;
    o->in = ls->in;
    o->borrowed = ls->borrowed;
    o->inner = NULL;
    exi_store_init(&o->args);
    exi_store_init(&o->result);
    /* The environment is read once: asking the receiver again at every
     * level of a recursion through let_value would walk every receiver
     * above (each let's inner receiver asks its own receiver). */
    ex_env env = ex_receiver_env(r);
    o->env = env;
    o->alloc = NULL;
    /* A child without attributes (just(), most recursions' head) has no
     * completion scheduler: no query.  Known from the sender's own line:
     * the child's header and vtable are two dependent loads more, which
     * the time profile of a fork charged with a tenth of its connect. */
    o->has_sched = ls->child_attrs && join_completion_scheduler(o, ls);
    body_late_domain(o);
    o->child = (ex_operation *)(void *)((char *)storage + exi_child_offset(sizeof(let_op), ls->child));
    o->just_child = ls->just_child;
    o->just_matches = ls->just_matches;
    if (ls->just_child) return exi_store_set(&o->args, ls->just_v, ls->just_n, NULL);  /* flat: no allocation */
    ex_receiver cr = { &let_rcvr_vt, o };
    return ex_connect_child(ls->child, cr, o->child);
}

static ex_error let_connect(const ex_sender *s, ex_receiver r, void *storage) {
    if (exi_late_wants(s)) return exi_connect_late(s, r, storage, let_connect_now);
    return let_connect_now(s, r, storage);
}

static void let_destroy(ex_sender *s) { ex_sender_release(((let_sender *)s)->child); }

static const ex_sender_vtable let_vts[] = {
    { "ex_let_value", let_connect, NULL, let_destroy, &ex_tag_let_value },
    { "ex_let_error", let_connect, NULL, let_destroy, &ex_tag_let_error },
    { "ex_let_stopped", let_connect, NULL, let_destroy, &ex_tag_let_stopped },
};
static const ex_sender_vtable let_value_borrowed_vt = { "ex_let_value_borrowed", let_connect, NULL, let_destroy, NULL };

static ex_sender *make_let(let_kind kind, bool borrowed, ex_sender *child, let_fn fn, bool fn_null, void *ctx,
                           ex_sig in, const char *name) {
    const let_texts *t = texts_of(kind, borrowed);
    ex_error e = ex_check_input(child, t->null_child);
    if (e.code) {
        if (!child) return exi_reject1(EX_EINVAL, exi_stage_fixed(t->null_child, name), child);
        return exi_reject1(e.code, e.msg, child);  /* the child's own error */
    }
    if (fn_null) return exi_reject1(EX_EINVAL, exi_stage_fixed(t->null_fn, name), child);

    const ex_sigs *cs = &child->sigs;
    ex_sigs sigs = *cs;
    bool calls;
    if (kind == LET_VALUE) {
        for (unsigned i = 0; i < cs->nvalues; i++)
            if (!ex_sig_compatible(&in, &cs->values[i]))
                return exi_reject1(EX_EINVAL, exi_stage_sig_mismatch(t->stage, name, t->in_sig, &cs->values[i], &in), child);
        calls = cs->nvalues > 0 || (cs->flags & EX_SIGS_DYNAMIC);
        sigs.nvalues = 0;
        sigs.flags &= (uint8_t)~EX_SIGS_DYNAMIC;
        if (calls) sigs.flags |= EX_SIGS_ERROR;  /* storing the datums may fail */
    } else if (kind == LET_ERROR) {
        calls = (cs->flags & EX_SIGS_ERROR) != 0;
        sigs.flags &= (uint8_t)~EX_SIGS_ERROR;
    } else {
        calls = (cs->flags & EX_SIGS_STOPPED) != 0;
        sigs.flags &= (uint8_t)~EX_SIGS_STOPPED;
    }
    /* The function's sender is unknown until run time. */
    if (calls) sigs.flags |= EX_SIGS_DYNAMIC | EX_SIGS_ERROR | EX_SIGS_STOPPED;

    ex_sender *s = ex_sender_alloc(borrowed ? &let_value_borrowed_vt : &let_vts[kind], sizeof(let_sender));
    if (!s) return exi_reject1(EX_ENOMEM, NULL, child);
    let_sender *ls = (let_sender *)s;
    ls->child = child;
    ls->kind = kind;
    ls->borrowed = borrowed;
    ls->just_child = kind == LET_VALUE && exi_just_flat_values(child, &ls->just_v, &ls->just_n);
    ls->just_matches = ls->just_child && exi_sig_matches(&in, ls->just_v, ls->just_n);
    ls->child_attrs = child->vt->attrs != NULL;
    ls->fn = fn;
    ls->ctx = ctx;
    ls->name = name;
    ls->in = in;
    s->sigs = sigs;
    exi_layout_one_child(s, sizeof(let_op), alignof(let_op), child);
    return exi_early_from_child(s, child);
}

/* (The plain names are macros in C, let.h: parenthesised, they name the
 * functions.) */
ex_sender *ex_let_value_named(ex_sender *child, ex_let_value_fn fn, void *ctx, ex_sig in, const char *name) {
    let_fn f = { .value = fn };
    return make_let(LET_VALUE, false, child, f, fn == NULL, ctx, in, name);
}

ex_sender *(ex_let_value)(ex_sender *child, ex_let_value_fn fn, void *ctx, ex_sig in) {
    return ex_let_value_named(child, fn, ctx, in, NULL);
}

ex_sender *ex_let_value_borrowed_named(ex_sender *child, ex_let_value_fn fn, void *ctx, ex_sig in, const char *name) {
    let_fn f = { .value = fn };
    return make_let(LET_VALUE, true, child, f, fn == NULL, ctx, in, name);
}

ex_sender *(ex_let_value_borrowed)(ex_sender *child, ex_let_value_fn fn, void *ctx, ex_sig in) {
    return ex_let_value_borrowed_named(child, fn, ctx, in, NULL);
}

ex_sender *ex_let_error_named(ex_sender *child, ex_let_error_fn fn, void *ctx, const char *name) {
    let_fn f = { .error = fn };
    return make_let(LET_ERROR, false, child, f, fn == NULL, ctx, EX_SIG_VARIADIC, name);
}

ex_sender *(ex_let_error)(ex_sender *child, ex_let_error_fn fn, void *ctx) {
    return ex_let_error_named(child, fn, ctx, NULL);
}

ex_sender *ex_let_stopped_named(ex_sender *child, ex_let_stopped_fn fn, void *ctx, const char *name) {
    let_fn f = { .stopped = fn };
    return make_let(LET_STOPPED, false, child, f, fn == NULL, ctx, EX_SIG_VARIADIC, name);
}

ex_sender *(ex_let_stopped)(ex_sender *child, ex_let_stopped_fn fn, void *ctx) {
    return ex_let_stopped_named(child, fn, ctx, NULL);
}

const char *exi_let_stage_name(const ex_sender *s) {
    bool ours = s->vt == &let_value_borrowed_vt;
    for (size_t i = 0; i < sizeof let_vts / sizeof let_vts[0]; i++) ours = ours || s->vt == &let_vts[i];
    return ours ? ((const let_sender *)s)->name : NULL;
}
