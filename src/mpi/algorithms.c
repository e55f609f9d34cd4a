/* SPDX-License-Identifier: MIT */
/* mpi/algorithms.c - distributed scans and reductions
 * (cexec/mpi_algorithms.h).
 *
 * One sender type for every builder.  A run has three steps, each an
 * ordinary sender whose operation is allocated when the step starts and
 * freed when it completes:
 *   1. the rank's total: ex_reduce_* over its array on sch;
 *   2. the collective on the totals (ex_mpi_iexscan, _ireduce,
 *      _iallreduce), connected at connect, so that once a run started
 *      nothing can keep this rank from joining it;
 *   3. the scans' local pass from the rank's offset.
 *
 * What travels through MPI is a message of one element: a mark (nonzero:
 * the sender's local pass failed or stopped, or depends on one that did)
 * and the element.  Its datatype is a contiguous run of bytes made per
 * run; the reduction operation, made once per process, finds the monoid
 * to apply through an attribute of that datatype (MPI hands a reduction
 * function the datatype, never a context pointer).  So concurrent runs
 * with different monoids never share state, and the typed forms go
 * through the same path with a monoid that adds. */
#include <pthread.h>
#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include <cexec/env.h>
#include <cexec/error.h>
#include <cexec/mpi_algorithms.h>
#include <cexec/sender.h>
#include <cexec/sync_wait.h>
#include <cexec/value.h>

#include "algorithms/exi_algo.h"
#include "mpi/exi_mpi.h"

typedef enum algo_kind { K_INCLUSIVE, K_EXCLUSIVE, K_REDUCE, K_ALLREDUCE } algo_kind;

/* The messages of one builder: the local algorithms' argument checks
 * (exi_algo.h's order), then this file's own. */
typedef struct algo_texts {
    const char *args[10];
    const char *no_engine, *no_comm, *bad_root, *no_result, *no_memory, *root_range, *missing;
} algo_texts;

#define ALGO_TEXTS(who, missing)                                                                             \
    {                                                                                                        \
        EXI_ALGO_MESSAGES(who), who ": NULL progress engine", who ": MPI_COMM_NULL", who ": negative root",   \
            who ": NULL result", who ": out of memory", who ": root is not a rank of the communicator",        \
            who ": " missing " contributed no total (its local pass failed or stopped)"                       \
    }
#define SCAN_TEXTS(who) ALGO_TEXTS(who, "a rank before this one")
#define REDUCE_TEXTS(who) ALGO_TEXTS(who, "a rank")

typedef struct algo_sender {
    ex_sender base;
    const algo_texts *texts;
    algo_kind kind;
    exi_elem_kind ek;
    ex_mpi_progress *engine;
    ex_scheduler sch;
    MPI_Comm comm;
    const void *in;
    void *out;                  /* scans */
    void *result;               /* generic reductions */
    size_t n;
    int root;                   /* reductions */
    ex_monoid m;                /* identity points into bytes (typed forms: a static monoid) */
    const unsigned char *init;  /* exclusive scans, typed reductions: into bytes; else NULL */
    unsigned char bytes[];      /* the identity, then init */
} algo_sender;

/* A message: the mark in the first 8 bytes, the element from byte
 * MSG_HEAD (so it keeps max_align_t alignment in the operation). */
#define MSG_HEAD ((size_t)alignof(max_align_t))

typedef struct algo_op {
    ex_operation base;
    ex_receiver r;
    algo_sender *s;             /* retained for the run: the datatype's attribute points at s->m */
    ex_operation *step;         /* step 1 or 3 while it runs */
    ex_operation *coll;         /* step 2, from connect until it completes */
    MPI_Datatype type;          /* the messages' datatype; MPI_DATATYPE_NULL when freed or none */
    int rank, nranks;
    ex_disposition local;       /* how step 1 ended (EX_DISP_VALUE when it was skipped) */
    ex_error local_err;
    unsigned char *mine, *theirs;  /* messages: this rank's, and the collective's result */
} algo_op;

static size_t msg_size(size_t elem) { return ex_align_up(MSG_HEAD + elem, alignof(max_align_t)); }
static size_t op_head(void) { return ex_align_up(sizeof(algo_op), alignof(max_align_t)); }

static void *value_of(unsigned char *msg) { return msg + MSG_HEAD; }

static uint64_t mark_of(const unsigned char *msg) {
    uint64_t m;
    memcpy(&m, msg, sizeof m);
    return m;
}

static void set_mark(unsigned char *msg, uint64_t m) { memcpy(msg, &m, sizeof m); }

/* ------------------------------------------------------ the typed monoids */

static const double f64_identity = -0.0;  /* x + -0.0 == x for every x, signed zeros included */
static const uint64_t u64_identity = 0;

static void add_f64(void *ctx, void *acc, const void *x) {
    (void)ctx;
    double a, b;
    memcpy(&a, acc, sizeof a);
    memcpy(&b, x, sizeof b);
    a += b;
    memcpy(acc, &a, sizeof a);
}

/* Unsigned: the sum wraps instead of overflowing. */
static void add_u64(void *ctx, void *acc, const void *x) {
    (void)ctx;
    uint64_t a, b;
    memcpy(&a, acc, sizeof a);
    memcpy(&b, x, sizeof b);
    a += b;
    memcpy(acc, &a, sizeof a);
}

static const ex_monoid f64_sum = { sizeof(double), &f64_identity, add_f64, NULL };
static const ex_monoid u64_sum = { sizeof(uint64_t), &u64_identity, add_u64, NULL };

/* ----------------------------------------- the MPI reduction operation */

static pthread_once_t mpi_once = PTHREAD_ONCE_INIT;
static int monoid_keyval = MPI_KEYVAL_INVALID;
static MPI_Op combine_op = MPI_OP_NULL;
static int once_rc = MPI_SUCCESS;
static const char *once_call = "";

/* The monoid a run attached to its datatype, or NULL. */
static const ex_monoid *monoid_of(MPI_Datatype type) {
    void *v = NULL;
    int found = 0;
    if (MPI_Type_get_attr(type, monoid_keyval, &v, &found) != MPI_SUCCESS || !found) return NULL;
    return v;
}

/* inout[i] = in[i] (+) inout[i]: MPI passes the lower ranks' side as in.
 * A mark on either side marks the result.  The elements are combined in
 * aligned copies (MPI's buffers need not be aligned for the element
 * type); the copies live on this stack, so two threads running this at
 * once share nothing. */
static void combine_messages(void *in, void *inout, int *len, MPI_Datatype *type) {
    const ex_monoid *m = monoid_of(*type);
    size_t sz = m ? m->size : 0, step = MSG_HEAD + sz;
    alignas(max_align_t) unsigned char acc[EX_MONOID_MAX_SIZE];
    alignas(max_align_t) unsigned char x[EX_MONOID_MAX_SIZE];
    for (int i = 0; i < *len; i++) {
        unsigned char *left = (unsigned char *)in + (size_t)i * step, *right = (unsigned char *)inout + (size_t)i * step;
        if (!m || mark_of(left) || mark_of(right)) {
            set_mark(right, 1);  /* no monoid cannot happen; marking beats a wrong value */
            continue;
        }
        memcpy(acc, left + MSG_HEAD, sz);
        memcpy(x, right + MSG_HEAD, sz);
        m->combine(m->ctx, acc, x);
        memcpy(right + MSG_HEAD, acc, sz);
    }
}

/* The keyval and the operation, made once (never freed: MPI_Finalize
 * releases them).  commute = 0: MPI keeps the ranks in order. */
static void make_once(void) {
    once_call = "MPI_Type_create_keyval";
    once_rc = MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, &monoid_keyval, NULL);
    if (once_rc != MPI_SUCCESS) return;
    once_call = "MPI_Op_create";
    once_rc = MPI_Op_create(combine_messages, 0, &combine_op);
}

/* The run's datatype: msg bytes of MPI_BYTE, carrying m. */
static ex_error make_type(algo_op *o) {
    (void)pthread_once(&mpi_once, make_once);
    if (once_rc != MPI_SUCCESS) return exi_mpi_error(once_call, once_rc);
    MPI_Datatype t;
    int rc = MPI_Type_contiguous((int)(MSG_HEAD + o->s->m.size), MPI_BYTE, &t);
    if (rc != MPI_SUCCESS) return exi_mpi_error("MPI_Type_contiguous", rc);
    const char *call = "MPI_Type_commit";
    rc = MPI_Type_commit(&t);
    if (rc == MPI_SUCCESS) {
        call = "MPI_Type_set_attr";
        rc = MPI_Type_set_attr(t, monoid_keyval, &o->s->m);
    }
    if (rc != MPI_SUCCESS) {
        MPI_Type_free(&t);
        return exi_mpi_error(call, rc);
    }
    o->type = t;
    return ex_ok();
}

/* Frees the datatype, unless MPI is gone (an operation destroyed after
 * MPI_Finalize: MPI released it). */
static void free_type(algo_op *o) {
    if (o->type == MPI_DATATYPE_NULL) return;
    int done = 0;
    MPI_Finalized(&done);
    if (!done) MPI_Type_free(&o->type);
    o->type = MPI_DATATYPE_NULL;
}

/* -------------------------------------------------------------- finishing */

static bool is_scan(algo_kind k) { return k == K_INCLUSIVE || k == K_EXCLUSIVE; }

/* Completes with the value of a reduction held in msg. */
static void complete_reduction(algo_op *o, unsigned char *msg) {
    const algo_sender *s = o->s;
    ex_value v;
    if (s->ek == ELEM_F64) {
        double d;
        memcpy(&d, value_of(msg), sizeof d);
        v = ex_double(d);
    } else if (s->ek == ELEM_I64) {
        uint64_t u;
        memcpy(&u, value_of(msg), sizeof u);
        v = ex_int((int64_t)u);
    } else {
        memcpy(s->result, value_of(msg), s->m.size);
        v = ex_ptr(s->result);
    }
    ex_set_value(o->r, &v, 1);
}

/* Step 1's own outcome, when it was not a value. */
/* The completion is the last touch of o (its receiver may destroy it), so
 * the error is marked handed over before it. */
static bool complete_local_failure(algo_op *o) {
    ex_disposition local = o->local;
    if (local != EX_DISP_ERROR && local != EX_DISP_STOPPED) return false;
    o->local = EX_DISP_VALUE;  /* handed over: destroy must not release it */
    if (local == EX_DISP_ERROR) ex_set_error(o->r, o->local_err);
    else ex_set_stopped(o->r);
    return true;
}

/* --------------------------------------------------------------- the steps */

static ex_env step_env(void *self) { return ex_env_forward(ex_receiver_env(((algo_op *)self)->r)); }

static void free_step(algo_op *o) {
    ex_operation_free(o->step);
    o->step = NULL;
}

/* Connects s (consumed) to a receiver of vt on o and starts it; a
 * failure to connect goes to vt's set_error. */
static void run_step(algo_op *o, ex_sender *s, const ex_receiver_vtable *vt) {
    ex_receiver r = { vt, o };
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, r, &op);
    ex_sender_release(s);
    if (e.code) {
        vt->set_error(o, e);
        return;
    }
    o->step = op;
    ex_start(op);
}

static void after_collective(algo_op *o);

/* Step 2, or straight to what follows when there is no collective. */
static void after_total(algo_op *o) {
    if (o->coll) ex_start(o->coll);
    else after_collective(o);
}

/* ---- step 1: the rank's total */

static void total_value(void *self, const ex_value *v, size_t n) {
    algo_op *o = self;
    const algo_sender *s = o->s;
    (void)n;
    if (s->ek == ELEM_F64) memcpy(value_of(o->mine), &v[0].as.d, sizeof(double));
    else if (s->ek == ELEM_I64) memcpy(value_of(o->mine), &v[0].as.i, sizeof(int64_t));
    /* (generic: ex_reduce wrote it into value_of(o->mine)) */
    free_step(o);
    if (s->ek == ELEM_GENERIC && s->init && o->rank == 0) {
        /* rank 0 contributes init (+) its elements */
        alignas(max_align_t) unsigned char acc[EX_MONOID_MAX_SIZE];
        memcpy(acc, s->init, s->m.size);
        s->m.combine(s->m.ctx, acc, value_of(o->mine));
        memcpy(value_of(o->mine), acc, s->m.size);
    }
    after_total(o);
}

static void total_error(void *self, ex_error e) {
    algo_op *o = self;
    if (o->step) free_step(o);
    o->local = EX_DISP_ERROR;
    o->local_err = e;
    set_mark(o->mine, 1);
    after_total(o);
}

static void total_stopped(void *self) {
    algo_op *o = self;
    free_step(o);
    o->local = EX_DISP_STOPPED;
    set_mark(o->mine, 1);
    after_total(o);
}

static const ex_receiver_vtable total_vt = { total_value, total_error, total_stopped, step_env, NULL };

/* Rank 0 adds the typed forms' init to its total (the local reduction
 * starts from it); the others start from the identity. */
static ex_sender *total_sender(const algo_op *o) {
    const algo_sender *s = o->s;
    bool with_init = s->init && o->rank == 0;
    if (s->ek == ELEM_F64) {
        double init = f64_identity;
        if (with_init) memcpy(&init, s->init, sizeof init);
        return ex_reduce_f64(s->sch, s->in, s->n, init);
    }
    if (s->ek == ELEM_I64) {
        int64_t init = 0;
        if (with_init) memcpy(&init, s->init, sizeof init);
        return ex_reduce_i64(s->sch, s->in, s->n, init);
    }
    return ex_reduce(s->sch, &s->m, s->in, s->n, value_of(o->mine));
}

/* A scan's last rank never sends its total (MPI_Exscan gives it to
 * nobody), and one rank needs none: the pass is skipped there. */
static bool needs_total(const algo_op *o) {
    if (is_scan(o->s->kind)) return o->nranks > 1 && o->rank < o->nranks - 1;
    return true;
}

/* ---- step 2: the collective */

static void coll_done(algo_op *o) {
    ex_operation_free(o->coll);
    o->coll = NULL;
    free_type(o);
}

static void coll_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    algo_op *o = self;
    coll_done(o);
    after_collective(o);
}

static void coll_error(void *self, ex_error e) {
    algo_op *o = self;
    coll_done(o);
    if (o->local == EX_DISP_ERROR) {  /* this rank's own failure comes first */
        ex_error_release(e);
        e = o->local_err;
        o->local = EX_DISP_VALUE;
    }
    ex_set_error(o->r, e);
}

/* (Collectives ignore stop requests; forwarded in case an MPI layer
 * below ever honours one.) */
static void coll_stopped(void *self) {
    algo_op *o = self;
    coll_done(o);
    if (!complete_local_failure(o)) ex_set_stopped(o->r);
}

static const ex_receiver_vtable coll_vt = { coll_value, coll_error, coll_stopped, step_env, NULL };

static ex_sender *collective_sender(const algo_op *o) {
    const algo_sender *s = o->s;
    switch (s->kind) {
    case K_INCLUSIVE:
    case K_EXCLUSIVE: return ex_mpi_iexscan(s->engine, o->mine, o->theirs, 1, o->type, combine_op, s->comm);
    case K_REDUCE: return ex_mpi_ireduce(s->engine, o->mine, o->theirs, 1, o->type, combine_op, s->root, s->comm);
    case K_ALLREDUCE: return ex_mpi_iallreduce(s->engine, o->mine, o->theirs, 1, o->type, combine_op, s->comm);
    }
    return ex_invalid_sender(EX_EINVAL, "mpi algorithms: unknown kind");
}

/* Made at connect: once the run starts, joining the collective needs no
 * allocation that could fail. */
static ex_error connect_collective(algo_op *o) {
    ex_error e = make_type(o);
    if (e.code) return e;
    ex_sender *c = collective_sender(o);
    e = ex_sender_status(c);
    if (!e.code) {
        ex_receiver r = { &coll_vt, o };
        e = ex_connect_alloc(c, r, &o->coll);
    }
    ex_sender_release(c);
    if (e.code) {
        o->coll = NULL;
        free_type(o);
    }
    return e;
}

/* ---- step 3: the scan from the offset */

static void scan_value(void *self, const ex_value *v, size_t n) {
    algo_op *o = self;
    ex_value keep[1];
    size_t k = n < 1 ? n : 1;
    if (k) keep[0] = v[0];  /* v may live in the step's operation */
    free_step(o);
    ex_set_value(o->r, keep, k);
}

static void scan_error(void *self, ex_error e) {
    algo_op *o = self;
    if (o->step) free_step(o);
    ex_set_error(o->r, e);
}

static void scan_stopped(void *self) {
    algo_op *o = self;
    free_step(o);
    ex_set_stopped(o->r);
}

static const ex_receiver_vtable scan_vt = { scan_value, scan_error, scan_stopped, step_env, NULL };

/* The local pass from `offset` (the ranks before this one, or for rank
 * 0 the exclusive scan's init, the inclusive scan's identity). */
static ex_sender *scan_sender(const algo_op *o, const void *offset) {
    const algo_sender *s = o->s;
    bool excl = s->kind == K_EXCLUSIVE;
    if (s->ek == ELEM_F64) {
        double d;
        memcpy(&d, offset, sizeof d);
        if (excl) return ex_exclusive_scan_f64(s->sch, s->in, s->out, s->n, d);
        /* rank 0: the plain scan, whose empty total is 0.0 as documented */
        if (o->rank == 0) return ex_inclusive_scan_f64(s->sch, s->in, s->out, s->n);
        return ex_inclusive_scan_init_f64(s->sch, s->in, s->out, s->n, d);
    }
    if (s->ek == ELEM_I64) {
        int64_t i;
        memcpy(&i, offset, sizeof i);
        if (excl) return ex_exclusive_scan_i64(s->sch, s->in, s->out, s->n, i);
        return ex_inclusive_scan_init_i64(s->sch, s->in, s->out, s->n, i);
    }
    if (excl) return ex_exclusive_scan(s->sch, &s->m, s->in, s->out, s->n, offset);
    return ex_inclusive_scan_init(s->sch, &s->m, s->in, s->out, s->n, offset);
}

static void finish_scan(algo_op *o) {
    const algo_sender *s = o->s;
    const void *offset;
    if (o->rank == 0) offset = s->kind == K_EXCLUSIVE ? s->init : s->m.identity;
    else if (mark_of(o->theirs)) {
        ex_set_error(o->r, ex_err(EX_EIO, s->texts->missing));
        return;
    } else offset = value_of(o->theirs);
    run_step(o, scan_sender(o, offset), &scan_vt);
}

/* After the collective (or without one): this rank's failure first,
 * then a missing total, then the result. */
static void after_collective(algo_op *o) {
    const algo_sender *s = o->s;
    if (complete_local_failure(o)) return;
    if (is_scan(s->kind)) {
        finish_scan(o);
        return;
    }
    bool has_result = o->nranks > 1 && (s->kind == K_ALLREDUCE || o->rank == s->root);
    if (has_result && mark_of(o->theirs)) {
        ex_set_error(o->r, ex_err(EX_EIO, s->texts->missing));
        return;
    }
    complete_reduction(o, has_result ? o->theirs : o->mine);
}

/* --------------------------------------------------- the operation state */

static void algo_start(ex_operation *op) {
    algo_op *o = (algo_op *)op;
    if (needs_total(o)) {
        run_step(o, total_sender(o), &total_vt);
        return;
    }
    memcpy(value_of(o->mine), o->s->m.identity, o->s->m.size);  /* sent to nobody, but defined */
    after_total(o);
}

static void algo_op_destroy(ex_operation *op) {
    algo_op *o = (algo_op *)op;
    if (o->step) free_step(o);
    if (o->coll) coll_done(o);
    if (o->local == EX_DISP_ERROR) ex_error_release(o->local_err);
    ex_sender_release(&o->s->base);
}

static const ex_operation_vtable algo_op_vt = { algo_start, algo_op_destroy };

static ex_error algo_connect(const ex_sender *sp, ex_receiver r, void *storage) {
    algo_sender *s = (algo_sender *)(uintptr_t)sp;
    algo_op *o = storage;
    o->base.vt = &algo_op_vt;
    o->r = r;
    o->s = s;
    o->step = o->coll = NULL;
    o->type = MPI_DATATYPE_NULL;
    o->local = EX_DISP_VALUE;
    o->local_err = ex_ok();
    o->mine = (unsigned char *)storage + op_head();
    o->theirs = o->mine + msg_size(s->m.size);
    memset(o->mine, 0, 2 * msg_size(s->m.size));
    int rc = MPI_Comm_rank(s->comm, &o->rank);
    if (rc != MPI_SUCCESS) return exi_mpi_error("MPI_Comm_rank", rc);
    rc = MPI_Comm_size(s->comm, &o->nranks);
    if (rc != MPI_SUCCESS) return exi_mpi_error("MPI_Comm_size", rc);
    if (!is_scan(s->kind) && s->root >= o->nranks) return ex_err(EX_EINVAL, s->texts->root_range);
    if (o->nranks > 1) {
        ex_error e = connect_collective(o);
        if (e.code) return e;
    }
    ex_sender_retain(&s->base);
    return ex_ok();
}

static const ex_sender_vtable algo_vt = { "ex_mpi_algorithm", algo_connect, NULL, NULL, NULL };

/* ----------------------------------------------------------------- builders */

/* What a builder was given. */
typedef struct algo_args {
    algo_kind kind;
    exi_elem_kind ek;
    ex_mpi_progress *engine;
    ex_scheduler sch;
    MPI_Comm comm;
    const ex_monoid *m;
    const void *in;
    void *out;
    void *result;
    size_t n;
    const void *init;  /* NULL: none */
    int root;
} algo_args;

/* The first problem with a's arguments, as a message, or NULL. */
static const char *check_args(const algo_texts *t, const algo_args *a) {
    if (!a->engine) return t->no_engine;
    if (a->comm == MPI_COMM_NULL) return t->no_comm;
    int bad = exi_check_monoid(a->m);
    size_t out_size = is_scan(a->kind) ? a->m->size : 0;
    if (!bad) bad = exi_check_arrays(a->sch, a->in, a->m->size, a->out, out_size, a->n);
    if (bad) return t->args[bad];
    if (a->kind == K_EXCLUSIVE && !a->init) return t->args[BAD_INIT];
    if (!is_scan(a->kind) && a->ek == ELEM_GENERIC && !a->result) return t->no_result;
    if (a->kind == K_REDUCE && a->root < 0) return t->bad_root;
    return NULL;
}

static ex_sender *build(const algo_texts *t, const algo_args *a) {
    const char *bad = check_args(t, a);
    if (bad) return ex_invalid_sender(EX_EINVAL, bad);
    size_t sz = a->m->size;
    ex_sender *base = ex_sender_alloc(&algo_vt, sizeof(algo_sender) + 2 * sz);
    if (!base) return ex_invalid_sender(EX_ENOMEM, t->no_memory);
    algo_sender *s = (algo_sender *)base;
    s->texts = t;
    s->kind = a->kind;
    s->ek = a->ek;
    s->engine = a->engine;
    s->sch = a->sch;
    s->comm = a->comm;
    s->in = a->in;
    s->out = a->out;
    s->result = a->result;
    s->n = a->n;
    s->root = a->root;
    s->m = *a->m;
    memcpy(s->bytes, a->m->identity, sz);
    s->m.identity = s->bytes;
    s->init = NULL;
    if (a->init) {
        memcpy(s->bytes + sz, a->init, sz);
        s->init = s->bytes + sz;
    }
    base->op_size = ex_size_add(op_head(), 2 * msg_size(sz));
    base->op_align = alignof(max_align_t);
    base->sigs = ex_sigs_none();
    ex_sig sig = EX_SIG0;
    if (a->ek == ELEM_F64) sig = EX_SIG(EX_T_DOUBLE);
    else if (a->ek == ELEM_I64) sig = EX_SIG(EX_T_INT);
    else if (!is_scan(a->kind)) sig = EX_SIG(EX_T_PTR);
    (void)ex_sigs_add_value(&base->sigs, sig);
    base->sigs.flags = EX_SIGS_ERROR | EX_SIGS_STOPPED;
    return base;
}

/* The typed forms' arguments (m: the static monoid that adds). */
static algo_args typed_args(algo_kind kind, exi_elem_kind ek, ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm,
                            const void *in, void *out, size_t n, const void *init, int root) {
    algo_args a = { kind, ek, p, sch, comm, ek == ELEM_F64 ? &f64_sum : &u64_sum, in, out, NULL, n, init, root };
    return a;
}

ex_sender *ex_mpi_inclusive_scan_f64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const double *in,
                                     double *out, size_t n) {
    static const algo_texts t = SCAN_TEXTS("ex_mpi_inclusive_scan_f64");
    algo_args a = typed_args(K_INCLUSIVE, ELEM_F64, p, sch, comm, in, out, n, NULL, 0);
    return build(&t, &a);
}

ex_sender *ex_mpi_exclusive_scan_f64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const double *in,
                                     double *out, size_t n, double init) {
    static const algo_texts t = SCAN_TEXTS("ex_mpi_exclusive_scan_f64");
    algo_args a = typed_args(K_EXCLUSIVE, ELEM_F64, p, sch, comm, in, out, n, &init, 0);
    return build(&t, &a);
}

ex_sender *ex_mpi_inclusive_scan_i64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const int64_t *in,
                                     int64_t *out, size_t n) {
    static const algo_texts t = SCAN_TEXTS("ex_mpi_inclusive_scan_i64");
    algo_args a = typed_args(K_INCLUSIVE, ELEM_I64, p, sch, comm, in, out, n, NULL, 0);
    return build(&t, &a);
}

ex_sender *ex_mpi_exclusive_scan_i64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const int64_t *in,
                                     int64_t *out, size_t n, int64_t init) {
    static const algo_texts t = SCAN_TEXTS("ex_mpi_exclusive_scan_i64");
    algo_args a = typed_args(K_EXCLUSIVE, ELEM_I64, p, sch, comm, in, out, n, &init, 0);
    return build(&t, &a);
}

ex_sender *ex_mpi_inclusive_scan(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const ex_monoid *m,
                                 const void *in, void *out, size_t n) {
    static const algo_texts t = SCAN_TEXTS("ex_mpi_inclusive_scan");
    algo_args a = { K_INCLUSIVE, ELEM_GENERIC, p, sch, comm, m, in, out, NULL, n, NULL, 0 };
    return build(&t, &a);
}

ex_sender *ex_mpi_exclusive_scan(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const ex_monoid *m,
                                 const void *in, void *out, size_t n, const void *init) {
    static const algo_texts t = SCAN_TEXTS("ex_mpi_exclusive_scan");
    algo_args a = { K_EXCLUSIVE, ELEM_GENERIC, p, sch, comm, m, in, out, NULL, n, init, 0 };
    return build(&t, &a);
}

ex_sender *ex_mpi_reduce_f64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const double *in, size_t n,
                             double init, int root) {
    static const algo_texts t = REDUCE_TEXTS("ex_mpi_reduce_f64");
    algo_args a = typed_args(K_REDUCE, ELEM_F64, p, sch, comm, in, NULL, n, &init, root);
    return build(&t, &a);
}

ex_sender *ex_mpi_reduce_i64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const int64_t *in, size_t n,
                             int64_t init, int root) {
    static const algo_texts t = REDUCE_TEXTS("ex_mpi_reduce_i64");
    algo_args a = typed_args(K_REDUCE, ELEM_I64, p, sch, comm, in, NULL, n, &init, root);
    return build(&t, &a);
}

ex_sender *ex_mpi_reduce(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const ex_monoid *m, const void *in,
                         size_t n, void *result, int root) {
    static const algo_texts t = REDUCE_TEXTS("ex_mpi_reduce");
    algo_args a = { K_REDUCE, ELEM_GENERIC, p, sch, comm, m, in, NULL, result, n, NULL, root };
    return build(&t, &a);
}

ex_sender *ex_mpi_allreduce_f64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const double *in, size_t n,
                                double init) {
    static const algo_texts t = REDUCE_TEXTS("ex_mpi_allreduce_f64");
    algo_args a = typed_args(K_ALLREDUCE, ELEM_F64, p, sch, comm, in, NULL, n, &init, 0);
    return build(&t, &a);
}

ex_sender *ex_mpi_allreduce_i64(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const int64_t *in, size_t n,
                                int64_t init) {
    static const algo_texts t = REDUCE_TEXTS("ex_mpi_allreduce_i64");
    algo_args a = typed_args(K_ALLREDUCE, ELEM_I64, p, sch, comm, in, NULL, n, &init, 0);
    return build(&t, &a);
}

ex_sender *ex_mpi_allreduce(ex_mpi_progress *p, ex_scheduler sch, MPI_Comm comm, const ex_monoid *m, const void *in,
                            size_t n, void *result) {
    static const algo_texts t = REDUCE_TEXTS("ex_mpi_allreduce");
    algo_args a = { K_ALLREDUCE, ELEM_GENERIC, p, sch, comm, m, in, NULL, result, n, NULL, 0 };
    return build(&t, &a);
}
