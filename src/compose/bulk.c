/* SPDX-License-Identifier: MIT */
/* bulk.c - [exec.bulk]: bulk, bulk_chunked and bulk_unchunked with P3481's
 * execution policy; the sequential default and the generic side of a
 * resource's bulk (ex_bulk_job).
 *
 * Every message names the stage, "ex_bulk(name): ..." (bulk.h); the name
 * is one pointer in the sender and the operation, read only to make a
 * message. */
#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "compose/exi_bulk.h"
#include "core/exi_domain.h"
#include "core/exi_error.h"
#include "core/exi_error_text.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

typedef union bulk_fn { ex_bulk_fn one; ex_bulk_chunk_fn chunk; } bulk_fn;

/* The builder: for messages, and whether f takes chunks or each index is
 * an agent of its own. */
typedef enum bulk_builder { BULK, BULK_GRAIN, BULK_CHUNKED, BULK_UNCHUNKED } bulk_builder;

/* A builder's fixed messages, each the fallback of its named form. */
typedef struct bulk_texts {
    const char *stage, *null_child, *null_fn, *failed, *bad_policy, *not_concurrent;
} bulk_texts;

#define BULK_TEXTS(stage)                                                                                    \
    {                                                                                                        \
        stage, stage ": NULL input sender", stage ": NULL function", stage ": the function failed",          \
            stage ": invalid execution policy",                                                              \
            stage ": the scheduler promises concurrent forward progress but does not customise bulk"         \
    }

static const bulk_texts texts[] = { BULK_TEXTS("ex_bulk"), BULK_TEXTS("ex_bulk_grain"), BULK_TEXTS("ex_bulk_chunked"),
                                    BULK_TEXTS("ex_bulk_unchunked") };

typedef struct bulk_sender {
    ex_sender base;
    ex_sender *child;
    size_t shape, grain;
    bool chunked;
    uint8_t builder;           /* bulk_builder */
    uint8_t policy;            /* ex_execution_policy, checked */
    bool child_concurrent;     /* the child's value completion scheduler promises concurrent progress */
    bulk_fn fn;
    void *ctx;
    const char *name;          /* the stage's, for messages; NULL: none */
    ex_bulk_run_fn run;        /* a domain's (ex_bulk_run_on), else NULL: the sequential loop */
    void *run_self;
} bulk_sender;

typedef struct bulk_op {
    ex_operation base;
    ex_receiver r;
    ex_operation *child;
    bool chunked;
    uint8_t builder;         /* bulk_builder */
    uint8_t policy;          /* ex_execution_policy, for the resource */
    bulk_fn fn;
    void *ctx;
    size_t shape, grain;
    ex_bulk_run_fn run;      /* the resource's, or NULL: the sequential loop */
    void *run_self;
    /* parallel execution */
    ex_bulk_job job;
    exi_store values;
    ex_stop_token token;
    uint32_t failed;         /* first error recorded (0/1) */
    uint32_t skipped;        /* a chunk was skipped because of a stop request */
    ex_error err;
    const char *name;        /* the stage's (messages only) */
} bulk_op;

static inline __attribute__((always_inline)) ex_error run_range(bulk_op *o, size_t begin, size_t end, const ex_value *v, size_t n) {
    if (o->chunked) return o->fn.chunk(o->ctx, begin, end, v, n);
    for (size_t i = begin; i < end; i++) {
        ex_error e = o->fn.one(o->ctx, i, v, n);
        if (e.code) return e;
    }
    return ex_ok();
}

/* The error of a function that gave no message: the stage's. */
static ex_error with_message(const bulk_op *o, ex_error e) {
    if (!e.msg) e.msg = exi_stage_fixed(texts[o->builder].failed, o->name);
    return e;
}

/* ----------------------------------------------------------- ex_bulk_job */

static bulk_op *op_of(ex_bulk_job *job) { return EXI_CONTAINER_OF(job, bulk_op, job); }

static bool job_run(ex_bulk_job *job, size_t begin, size_t end) {
    bulk_op *o = op_of(job);
    if (exi_load_acq_u32(&o->failed)) return false;
    if (ex_stop_token_stop_possible(o->token) && ex_stop_token_stop_requested(o->token)) {
        exi_store_rel_u32(&o->skipped, 1);
        return false;
    }
    if (end > o->shape) end = o->shape;
    if (begin >= end) return true;  /* empty (or a resource's wrapped end): nothing to run */
    ex_error e = run_range(o, begin, end, o->values.v, o->values.n);
    if (e.code) {
        uint32_t expected = 0;
        if (exi_cas_u32(&o->failed, &expected, 1)) o->err = with_message(o, e);  /* the first is the result (only it is named) */
        else exi_error_drop(e);  /* given to us (cexec/error.h) and dropped */
        return false;
    }
    return true;
}

static void job_done(ex_bulk_job *job) {
    bulk_op *o = op_of(job);
    if (exi_load_acq_u32(&o->failed)) ex_set_error(o->r, o->err);
    else if (exi_load_acq_u32(&o->skipped)) ex_set_stopped(o->r);
    else ex_set_value(o->r, o->values.v, o->values.n);
}

/* Asked for only when needed (few launches need it): a query per launch
 * was a tenth of a short bulk's cost. */
static const ex_allocator *op_allocator(const bulk_op *o) { return ex_get_allocator(ex_receiver_env(o->r)); }

static const ex_allocator *job_allocator(const ex_bulk_job *job) {
    return op_allocator(EXI_CONTAINER_OF(job, const bulk_op, job));
}

static const ex_bulk_job_vtable job_vt = { job_run, job_done, job_allocator };

/* The job for a resource: its helper items are the resource's to fill. */
static void job_init(bulk_op *o) {
    o->job.vt = &job_vt;
    o->job.shape = o->shape;
    o->job.grain = o->grain;
    o->job.policy = (ex_execution_policy)o->policy;
    o->job.unchunked = o->builder == BULK_UNCHUNKED;
    memset(o->job.scratch, 0, sizeof o->job.scratch);
    o->job.extra = NULL;
    o->job.extra_size = 0;
}

/* --------------------------------------------------------------- receiver */

static void b_set_value(void *self, const ex_value *v, size_t n) {
    bulk_op *o = self;
    if (!o->run) {
        /* [exec.bulk]: the sequential loop on the completing agent. */
        ex_error e = o->shape ? run_range(o, 0, o->shape, v, n) : ex_ok();
        if (e.code) {
            ex_set_error(o->r, with_message(o, e));
        } else {
            ex_set_value(o->r, v, n);
        }
        return;
    }
    /* Flat values are copied as they are: the allocator is for tuples. */
    ex_error e = exi_store_set(&o->values, v, n, exi_values_flat(v, n) ? NULL : op_allocator(o));
    if (e.code) {
        ex_set_error(o->r, exi_stage_error(texts[o->builder].stage, o->name, e));
        return;
    }
    o->failed = 0;
    o->skipped = 0;
    o->err = ex_ok();
    o->token = ex_get_stop_token(ex_receiver_env(o->r));
    job_init(o);
    o->run(o->run_self, &o->job);
}

static void b_set_error(void *self, ex_error e) { ex_set_error(((bulk_op *)self)->r, e); }
static void b_set_stopped(void *self) { ex_set_stopped(((bulk_op *)self)->r); }
static ex_env b_env(void *self) { return ex_env_forward(ex_receiver_env(((bulk_op *)self)->r)); }

static const ex_receiver_vtable b_rcvr_vt = { b_set_value, b_set_error, b_set_stopped, b_env, NULL };

static void b_start(ex_operation *op) { ex_start(((bulk_op *)op)->child); }

static void b_destroy_op(ex_operation *op) {
    bulk_op *o = (bulk_op *)op;
    ex_operation_destroy(o->child);
    exi_store_clear(&o->values);
}

static const ex_operation_vtable b_op_vt = { b_start, b_destroy_op };

/* Whether the child's value completion scheduler promises concurrent
 * forward progress (asked once, when the sender is made). */
static bool child_concurrent(const ex_sender *child) {
    ex_scheduler s;
    return ex_get_completion_scheduler(child, &ex_key_completion_scheduler_value, &s) && s.vt &&
           s.vt->progress == EX_PROGRESS_CONCURRENT;
}

/* bulk_unchunked promises each index an agent of its own: on a scheduler
 * that promises concurrent forward progress, the sequential loop would
 * break that promise (P3481 makes it ill-formed: refused at connect). */
static bool breaks_concurrency(const bulk_sender *bs, ex_receiver r) {
    if (bs->builder != BULK_UNCHUNKED) return false;
    if (bs->child_concurrent) return true;
    ex_scheduler s;
    return ex_get_scheduler(ex_receiver_env(r), &s) && s.vt && s.vt->progress == EX_PROGRESS_CONCURRENT;
}

/* A resource runs the bulk when the domain of the child's completion
 * scheduler replaced it when built (early), or the environment's domain
 * does now (late): either way through ex_bulk_run_on. */
static inline __attribute__((always_inline)) ex_error b_connect_now(const ex_sender *s, ex_receiver r, void *storage) {
    const bulk_sender *bs = (const bulk_sender *)s;
    bulk_op *o = storage;
    o->run = bs->run;
    o->run_self = bs->run_self;
    if (!o->run && breaks_concurrency(bs, r))
        return ex_err(EX_EINVAL, exi_stage_fixed(texts[bs->builder].not_concurrent, bs->name));
    o->base.vt = &b_op_vt;
    o->r = r;
    o->chunked = bs->chunked;
    o->builder = bs->builder;
    o->policy = bs->policy;
    o->fn = bs->fn;
    o->ctx = bs->ctx;
    o->name = bs->name;
    o->shape = bs->shape;
    o->grain = bs->grain;
    exi_store_init(&o->values);
    o->child = (ex_operation *)(void *)((char *)storage + exi_child_offset(sizeof(bulk_op), bs->child));
    ex_receiver cr = { &b_rcvr_vt, o };
    return ex_connect_child(bs->child, cr, o->child);
}

static ex_error b_connect(const ex_sender *s, ex_receiver r, void *storage) {
    /* (A bulk a domain took already is not offered again.) */
    if (!((const bulk_sender *)s)->run && exi_late_wants(s)) return exi_connect_late(s, r, storage, b_connect_now);
    return b_connect_now(s, r, storage);
}

static ex_env b_attrs(const ex_sender *s) { return ex_env_forward(ex_sender_attrs(((const bulk_sender *)s)->child)); }

static void b_destroy(ex_sender *s) { ex_sender_release(((bulk_sender *)s)->child); }

static const ex_sender_vtable bulk_vts[] = {
    [BULK] = { "ex_bulk", b_connect, b_attrs, b_destroy, &ex_tag_bulk },
    [BULK_GRAIN] = { "ex_bulk_grain", b_connect, b_attrs, b_destroy, &ex_tag_bulk },
    [BULK_CHUNKED] = { "ex_bulk_chunked", b_connect, b_attrs, b_destroy, &ex_tag_bulk_chunked },
    [BULK_UNCHUNKED] = { "ex_bulk_unchunked", b_connect, b_attrs, b_destroy, &ex_tag_bulk_unchunked },
};

static bool is_bulk(const ex_sender *s) { return s->vt >= bulk_vts && s->vt < bulk_vts + 4; }

static bool valid_policy(ex_execution_policy policy) {
    switch (policy) {
    case EX_SEQ:
    case EX_PAR:
    case EX_PAR_UNSEQ:
    case EX_UNSEQ:
        return true;
    }
    return false;
}

static ex_sender *run_on(const ex_sender *s, ex_bulk_run_fn run, void *self);
static const exi_bulk_ops bulk_ops = { run_on };

static ex_sender *make_bulk(bulk_builder builder, ex_sender *child, ex_execution_policy policy, size_t shape,
                            size_t grain, void *fn, void *ctx, const char *name) {
    const bulk_texts *t = &texts[builder];
    exi_bulk_ops_register(&bulk_ops);  /* before a domain can be given a bulk sender */
    ex_error e = ex_check_input(child, t->null_child);
    if (e.code) {
        if (!child) return exi_reject1(EX_EINVAL, exi_stage_fixed(t->null_child, name), child);
        return exi_reject1(e.code, e.msg, child);  /* the child's own error */
    }
    if (!fn) return exi_reject1(EX_EINVAL, exi_stage_fixed(t->null_fn, name), child);
    if (!valid_policy(policy)) return exi_reject1(EX_EINVAL, exi_stage_fixed(t->bad_policy, name), child);
    ex_sender *s = ex_sender_alloc(&bulk_vts[builder], sizeof(bulk_sender));
    if (!s) return exi_reject1(EX_ENOMEM, NULL, child);
    bulk_sender *bs = (bulk_sender *)s;
    bs->child = child;
    bs->shape = shape;
    bs->grain = grain;
    bs->chunked = builder == BULK_CHUNKED;
    bs->builder = (uint8_t)builder;
    bs->policy = (uint8_t)policy;
    bs->child_concurrent = child_concurrent(child);
    memcpy(&bs->fn, &fn, sizeof fn);
    bs->ctx = ctx;
    bs->name = name;
    s->sigs = child->sigs;
    if (child->sigs.nvalues || (child->sigs.flags & EX_SIGS_DYNAMIC))
        s->sigs.flags |= EX_SIGS_ERROR | EX_SIGS_STOPPED;  /* f may fail; a parallel run may stop */
    exi_layout_one_child(s, sizeof(bulk_op), alignof(bulk_op), child);
    return exi_early_from_child(s, child);
}

/* ex_bulk_run_on (core/domain.c) once it knows s is a bulk sender. */
static ex_sender *run_on(const ex_sender *s, ex_bulk_run_fn run, void *self) {
    if (!is_bulk(s)) return ex_invalid_sender(EX_EINVAL, "ex_bulk_run_on: not a sender of ex_bulk or its family");
    const bulk_sender *from = (const bulk_sender *)s;
    ex_sender *t = ex_sender_alloc(s->vt, sizeof(bulk_sender));
    if (!t) return ex_invalid_sender(EX_ENOMEM, "ex_bulk_run_on: out of memory");
    bulk_sender *bs = (bulk_sender *)t;
    /* The recipe after the header, and the header's immutable fields:
     * never refs, which other threads may be changing (s is shared). */
    memcpy((char *)bs + sizeof(ex_sender), (const char *)from + sizeof(ex_sender),
           sizeof(bulk_sender) - sizeof(ex_sender));
    t->op_size = s->op_size;
    t->op_align = s->op_align;
    t->depth = s->depth;
    t->sigs = s->sigs;
    t->status = s->status;
    ex_sender_retain(bs->child);
    bs->run = run;
    bs->run_self = self;
    return t;
}

/* A function pointer as the data pointer make_bulk keeps in its union. */
static void *fn_ptr(const void *fn_bytes, bool null) {
    void *f = NULL;
    if (!null) memcpy(&f, fn_bytes, sizeof f);
    return f;
}

/* (The plain names are macros in C, bulk.h: parenthesised, they name the
 * functions.) */
ex_sender *ex_bulk_named(ex_sender *child, ex_execution_policy policy, size_t shape, ex_bulk_fn fn, void *ctx,
                         const char *name) {
    return make_bulk(BULK, child, policy, shape, 0, fn_ptr(&fn, !fn), ctx, name);
}

ex_sender *(ex_bulk)(ex_sender *child, ex_execution_policy policy, size_t shape, ex_bulk_fn fn, void *ctx) {
    return ex_bulk_named(child, policy, shape, fn, ctx, NULL);
}

ex_sender *ex_bulk_grain_named(ex_sender *child, ex_execution_policy policy, size_t shape, size_t grain,
                               ex_bulk_fn fn, void *ctx, const char *name) {
    return make_bulk(BULK_GRAIN, child, policy, shape, grain, fn_ptr(&fn, !fn), ctx, name);
}

ex_sender *(ex_bulk_grain)(ex_sender *child, ex_execution_policy policy, size_t shape, size_t grain, ex_bulk_fn fn,
                           void *ctx) {
    return ex_bulk_grain_named(child, policy, shape, grain, fn, ctx, NULL);
}

ex_sender *ex_bulk_chunked_named(ex_sender *child, ex_execution_policy policy, size_t shape, size_t grain,
                                 ex_bulk_chunk_fn fn, void *ctx, const char *name) {
    return make_bulk(BULK_CHUNKED, child, policy, shape, grain, fn_ptr(&fn, !fn), ctx, name);
}

ex_sender *(ex_bulk_chunked)(ex_sender *child, ex_execution_policy policy, size_t shape, size_t grain,
                             ex_bulk_chunk_fn fn, void *ctx) {
    return ex_bulk_chunked_named(child, policy, shape, grain, fn, ctx, NULL);
}

ex_sender *ex_bulk_unchunked_named(ex_sender *child, ex_execution_policy policy, size_t shape, ex_bulk_fn fn,
                                   void *ctx, const char *name) {
    return make_bulk(BULK_UNCHUNKED, child, policy, shape, 1, fn_ptr(&fn, !fn), ctx, name);  /* an index a chunk */
}

ex_sender *(ex_bulk_unchunked)(ex_sender *child, ex_execution_policy policy, size_t shape, ex_bulk_fn fn, void *ctx) {
    return ex_bulk_unchunked_named(child, policy, shape, fn, ctx, NULL);
}

bool exi_bulk_stage(const ex_sender *s, const char **builder, const char **name) {
    if (!is_bulk(s)) return false;
    const bulk_sender *bs = (const bulk_sender *)s;
    *builder = texts[bs->builder].stage;
    *name = bs->name;
    return true;
}
