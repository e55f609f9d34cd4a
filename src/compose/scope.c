/* SPDX-License-Identifier: MIT */
/* scope.c - simple_counting_scope, counting_scope, spawn, spawn_future.
 *
 * The scope's state word counts associations (<< 2) and carries JOINING and
 * CLOSED.  Associating and ending an association are one atomic operation
 * each; the mutex only guards the list of waiting joins, and a join sets
 * JOINING under it so the last disassociation cannot miss a join. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

enum { JOINING = 1, CLOSED = 2, ONE = 4 };

static ex_error scope_init(ex_scope_impl *s, bool stoppable) {
    if (pthread_mutex_init(&s->mu, NULL)) return ex_err(EX_EAGAIN, "ex_counting_scope_init: pthread_mutex_init failed");
    s->state = 0;
    s->joiners = NULL;
    s->failed = 0;
    s->first_error = ex_ok();
    s->stoppable = stoppable;
    ex_stop_source_init(&s->stop);
    return ex_ok();
}

ex_error ex_simple_counting_scope_init(ex_simple_counting_scope *s) {
    if (!s) return ex_err(EX_EINVAL, "ex_simple_counting_scope_init: NULL scope");
    return scope_init(&s->impl, false);
}
ex_error ex_counting_scope_init(ex_counting_scope *s) {
    if (!s) return ex_err(EX_EINVAL, "ex_counting_scope_init: NULL scope");
    return scope_init(&s->impl, true);
}

/* A NULL scope gives the empty token, with which nothing associates. */
ex_scope_token ex_simple_counting_scope_token(ex_simple_counting_scope *s) {
    ex_scope_token t = { s ? &s->impl : NULL };
    return t;
}
ex_scope_token ex_counting_scope_token(ex_counting_scope *s) {
    ex_scope_token t = { s ? &s->impl : NULL };
    return t;
}

static void scope_close(ex_scope_impl *s) { (void)exi_fas_or_u64(&s->state, CLOSED); }
void ex_simple_counting_scope_close(ex_simple_counting_scope *s) {
    if (s) scope_close(&s->impl);
}
void ex_counting_scope_close(ex_counting_scope *s) {
    if (s) scope_close(&s->impl);
}

void ex_counting_scope_request_stop(ex_counting_scope *s) {
    if (s) ex_stop_source_request_stop(&s->impl.stop);
}

bool ex_scope_token_try_associate(ex_scope_token t) {
    if (!t.scope) return false;
    uint64_t old = exi_load_rlx_u64(&t.scope->state);
    for (;;) {
        if (old & CLOSED) return false;
        if (exi_cas_u64(&t.scope->state, &old, old + ONE)) return true;
    }
}

/* ------------------------------------------------------------------ join */

/* [exec.scope.counting] (P3149): a join that had to wait completes through
 * schedule(get_scheduler(get_env(rcvr))), connected when the join is; one
 * that finds no association completes inline in start. */
typedef struct join_op {
    ex_operation base;
    ex_receiver r;
    ex_scope_impl *scope;
    struct join_op *next;
    bool failed;             /* outcome is the scope's first error (a reference of this join's) */
    ex_error outcome;
    ex_operation *sched_op;  /* in sched_room, or in sched_block */
    void *sched_block;       /* when the scheduler needs more than sched_room */
    const ex_allocator *sched_alloc;
    size_t sched_size, sched_align;
    alignas(max_align_t) unsigned char sched_room[EX_SCHEDULE_OP_INLINE];
} join_op;

static const char join_no_scheduler_msg[] =
    "ex_counting_scope_join: the receiver's environment has no scheduler (get_scheduler) for the join to complete "
    "on; give it one (ex_write_env with ex_key_get_scheduler: ex_inline_scheduler() completes where the last "
    "association ends)";

/* Takes the scope's outcome: a reference to its first error, if any. */
static void join_take_outcome(join_op *o, ex_scope_impl *s) {
    o->failed = exi_load_acq_u32(&s->failed) != 0;
    if (o->failed) o->outcome = exi_error_copy(s->first_error);
}

/* Completes with the outcome taken: set_value(), or the first error. */
static void join_deliver(join_op *o) {
    bool failed = o->failed;
    ex_error e = o->outcome;
    o->failed = false;
    o->outcome = ex_ok();
    if (failed) ex_set_error(o->r, e);
    else ex_set_value(o->r, NULL, 0);
}

/* The outcome is not delivered (the hop failed or stopped). */
static void join_drop_outcome(join_op *o) {
    if (o->failed) exi_error_drop(o->outcome);
    o->failed = false;
    o->outcome = ex_ok();
}

/* The schedule operation's receiver: the hop onto the receiver's scheduler. */
static void join_hop_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    join_deliver(self);
}
static void join_hop_error(void *self, ex_error e) {
    join_op *o = self;
    join_drop_outcome(o);
    ex_set_error(o->r, e);
}
static void join_hop_stopped(void *self) {
    join_op *o = self;
    join_drop_outcome(o);
    ex_set_stopped(o->r);
}
static ex_env join_hop_env(void *self) { return ex_receiver_env(((join_op *)self)->r); }
static const ex_receiver_vtable join_hop_vt = { join_hop_value, join_hop_error, join_hop_stopped, join_hop_env, NULL };

void ex_scope_token_disassociate(ex_scope_token t) {
    ex_scope_impl *s = t.scope;
    if (!s) return;
    /* The last association of a joining scope closes it in the same atomic
     * step, so no association can slip in before the joins complete. */
    uint64_t old = exi_load_rlx_u64(&s->state), next;
    bool last;
    do {
        next = old - ONE;
        last = (next >> 2) == 0 && (old & JOINING);
        if (last) next = (next | CLOSED) & ~(uint64_t)JOINING;
    } while (!exi_cas_u64(&s->state, &old, next));
    if (!last) return;
    /* A join sets JOINING and queues itself under the mutex: once we hold
     * it, every join that saw JOINING is in the list. */
    pthread_mutex_lock(&s->mu);
    join_op *list = s->joiners;
    s->joiners = NULL;
    pthread_mutex_unlock(&s->mu);
    /* Every outcome first: once one join completes, its receiver may
     * destroy the scope. */
    for (join_op *o = list; o; o = o->next) join_take_outcome(o, s);
    while (list) {
        join_op *next_op = list->next;  /* list may be destroyed by its completion */
        ex_start(list->sched_op);
        list = next_op;
    }
}

static void join_start(ex_operation *op) {
    join_op *o = (join_op *)op;
    ex_scope_impl *s = o->scope;
    pthread_mutex_lock(&s->mu);
    uint64_t old = exi_load_rlx_u64(&s->state);
    bool done;
    for (;;) {
        done = (old >> 2) == 0;
        uint64_t next = done ? ((old | CLOSED) & ~(uint64_t)JOINING) : (old | JOINING);
        if (exi_cas_u64(&s->state, &old, next)) break;
    }
    if (!done) {
        o->next = s->joiners;
        s->joiners = o;
    }
    pthread_mutex_unlock(&s->mu);
    if (done) {
        join_take_outcome(o, s);
        join_deliver(o);
    }
}

static void join_destroy_op(ex_operation *op) {
    join_op *o = (join_op *)op;
    ex_operation_destroy(o->sched_op);
    if (o->sched_block) ex_deallocate(o->sched_alloc, o->sched_block, o->sched_size, o->sched_align);
    join_drop_outcome(o);
}

static const ex_operation_vtable join_op_vt = { join_start, join_destroy_op };

typedef struct join_sender {
    ex_sender base;
    ex_scope_impl *scope;
} join_sender;

/* Storage for sch's schedule operation: the room in the join, else a block
 * from the environment's allocator (at connect, so completing allocates
 * nothing). */
static ex_error join_sched_storage(join_op *o, ex_scheduler sch, ex_env env) {
    o->sched_block = NULL;
    o->sched_op = (ex_operation *)(void *)o->sched_room;
    if (sch.vt->schedule_op_size <= sizeof o->sched_room && sch.vt->schedule_op_align <= alignof(max_align_t))
        return ex_ok();
    o->sched_alloc = ex_get_allocator(env);
    o->sched_size = sch.vt->schedule_op_size;
    o->sched_align = sch.vt->schedule_op_align;
    o->sched_block = ex_allocate(o->sched_alloc, o->sched_size, o->sched_align);
    if (!o->sched_block) return ex_err(EX_ENOMEM, "ex_counting_scope_join: out of memory for the schedule operation");
    o->sched_op = o->sched_block;
    return ex_ok();
}

static ex_error join_connect(const ex_sender *s, ex_receiver r, void *storage) {
    join_op *o = storage;
    ex_env env = ex_receiver_env(r);
    ex_scheduler sch;
    if (!ex_get_scheduler(env, &sch) || !sch.vt || !sch.vt->connect_schedule)
        return ex_err(EX_EINVAL, join_no_scheduler_msg);
    ex_error e = join_sched_storage(o, sch, env);
    if (e.code) return e;
    ex_receiver hop = { &join_hop_vt, o };
    e = sch.vt->connect_schedule(sch.self, hop, o->sched_op);
    if (e.code) {
        if (o->sched_block) ex_deallocate(o->sched_alloc, o->sched_block, o->sched_size, o->sched_align);
        return e;
    }
    o->base.vt = &join_op_vt;
    o->r = r;
    o->scope = ((const join_sender *)s)->scope;
    o->next = NULL;
    o->failed = false;
    o->outcome = ex_ok();
    return ex_ok();
}

static const ex_sender_vtable join_vt = { "ex_counting_scope_join", join_connect, NULL, NULL };

static ex_sender *scope_join(ex_scope_impl *scope) {
    ex_sender *s = ex_sender_alloc(&join_vt, sizeof(join_sender));
    if (!s) return exi_oom_sender();
    ((join_sender *)s)->scope = scope;
    static const ex_sig none = { 0, { 0 } };
    /* The first error of spawned work; the scheduler's schedule may fail
     * or stop, and which scheduler is known only at connect. */
    s->sigs = exi_sigs_of(&none, EX_SIGS_ERROR | EX_SIGS_STOPPED);
    s->op_size = sizeof(join_op);
    s->op_align = alignof(join_op);
    return s;
}

ex_sender *ex_simple_counting_scope_join(ex_simple_counting_scope *s) {
    if (!s) return ex_invalid_sender(EX_EINVAL, "ex_simple_counting_scope_join: NULL scope");
    return scope_join(&s->impl);
}
ex_sender *ex_counting_scope_join(ex_counting_scope *s) {
    if (!s) return ex_invalid_sender(EX_EINVAL, "ex_counting_scope_join: NULL scope");
    return scope_join(&s->impl);
}

static ex_error scope_destroy(ex_scope_impl *s) {
    pthread_mutex_lock(&s->mu);
    bool busy = (exi_load_acq_u64(&s->state) >> 2) != 0 || s->joiners != NULL;
    pthread_mutex_unlock(&s->mu);
    if (busy) return ex_err(EX_EBUSY, "ex_counting_scope_destroy: work is still associated or a join is waiting");
    pthread_mutex_destroy(&s->mu);
    exi_error_drop(s->first_error);
    s->first_error = ex_ok();
    return ex_ok();
}

ex_error ex_simple_counting_scope_destroy(ex_simple_counting_scope *s) {
    if (!s) return ex_err(EX_EINVAL, "ex_simple_counting_scope_destroy: NULL scope");
    return scope_destroy(&s->impl);
}
ex_error ex_counting_scope_destroy(ex_counting_scope *s) {
    if (!s) return ex_err(EX_EINVAL, "ex_counting_scope_destroy: NULL scope");
    return scope_destroy(&s->impl);
}

static void record_error(ex_scope_impl *s, ex_error e) {
    uint32_t expected = 0;
    if (exi_cas_u32(&s->failed, &expected, 1)) s->first_error = e;  /* kept until the scope is destroyed */
    else exi_error_drop(e);
}

/* ----------------------------------------------------------------- spawn */

typedef struct spawn_block {
    ex_scope_impl *scope;
    const ex_allocator *alloc;
    size_t size, align;
    ex_env env;
    ex_env_pair stop_env;   /* counting scope: its stop token joined to env */
    ex_operation *op;
} spawn_block;

static void spawn_finish(spawn_block *b) {
    ex_scope_token t = { b->scope };
    ex_operation_destroy(b->op);
    ex_deallocate(b->alloc, b, b->size, b->align);
    ex_scope_token_disassociate(t);  /* last: it may let the scope be joined and destroyed */
}

static void sp_set_value(void *self, const ex_value *v, size_t n) { (void)v, (void)n; spawn_finish(self); }
static void sp_set_error(void *self, ex_error e) {
    spawn_block *b = self;
    record_error(b->scope, e);
    spawn_finish(b);
}
static void sp_set_stopped(void *self) { spawn_finish(self); }
static ex_env sp_env(void *self) { return ((spawn_block *)self)->env; }

static const ex_receiver_vtable spawn_rcvr_vt = { sp_set_value, sp_set_error, sp_set_stopped, sp_env, NULL };

/* The environment spawned work sees. */
static ex_env spawn_env(ex_scope_impl *scope, ex_env_pair *pair, ex_env env) {
    if (!scope->stoppable) return env;
    ex_env_pair_init(pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&scope->stop)), env);
    return ex_env_of_pair(pair);
}

ex_error ex_spawn_env(ex_sender *s, ex_scope_token t, ex_env env) {
    ex_error e = ex_check_input(s, "ex_spawn: NULL sender");
    if (e.code) {
        ex_sender_release(s);
        return e;
    }
    if (!t.scope) {
        ex_sender_release(s);
        return ex_err(EX_EINVAL, "ex_spawn: NULL scope token");
    }
    if (!ex_scope_token_try_associate(t)) {
        ex_sender_release(s);
        return ex_err(EX_ESHUTDOWN, "ex_spawn: the scope is closed");
    }
    const ex_allocator *a = ex_get_allocator(env);
    size_t off = ex_align_up(sizeof(spawn_block), s->op_align);
    size_t size = ex_size_add(off, s->op_size), align = ex_max_size(alignof(spawn_block), s->op_align);
    spawn_block *b = ex_allocate(a, size, align);
    if (!b) {
        ex_sender_release(s);
        ex_scope_token_disassociate(t);
        return ex_err(EX_ENOMEM, "ex_spawn: out of memory for the operation");
    }
    b->scope = t.scope;
    b->alloc = a;
    b->size = size;
    b->align = align;
    b->env = spawn_env(t.scope, &b->stop_env, env);
    b->op = (ex_operation *)(void *)((char *)b + off);
    ex_receiver r = { &spawn_rcvr_vt, b };
    e = ex_connect_child(s, r, b->op);
    ex_sender_release(s);
    if (e.code) {
        ex_deallocate(a, b, size, align);
        ex_scope_token_disassociate(t);
        return e;
    }
    ex_start(b->op);
    return ex_ok();
}

ex_error ex_spawn(ex_sender *s, ex_scope_token t) { return ex_spawn_env(s, t, ex_env_empty()); }

/* ---------------------------------------------------------- spawn_future */

enum { F_VALUE = 1, F_ERROR, F_STOPPED };

static char done_marker;
#define F_DONE ((void *)&done_marker)

typedef struct future_op {
    ex_operation base;
    ex_receiver r;
    struct future_state *st;
    ex_stop_callback on_stop;
    bool started;
} future_op;

typedef struct future_state {
    uint32_t refs;
    uint32_t taken;           /* the future was connected */
    void *consumer;           /* NULL, a waiting future_op, or F_DONE */
    ex_stop_source stop;
    ex_stop_callback scope_stop;  /* counting scope's stop -> ours */
    ex_env_pair env;
    uint32_t disposition;
    exi_store values;
    ex_error err;
    ex_scope_impl *scope;
    const ex_allocator *alloc;
    size_t size, align;
    ex_operation *op;
} future_state;

static void future_release(future_state *st) {
    if (exi_faa_u32(&st->refs, (uint32_t)-1) != 1) return;
    ex_operation_destroy(st->op);
    exi_store_clear(&st->values);
    exi_error_drop(st->err);
    ex_deallocate(st->alloc, st, st->size, st->align);
}

static void future_notify(future_op *o) {
    future_state *st = o->st;
    ex_stop_callback_deregister(&o->on_stop);
    switch (exi_load_acq_u32(&st->disposition)) {
    case F_VALUE: ex_set_value(o->r, st->values.v, st->values.n); break;
    case F_ERROR: ex_set_error(o->r, exi_error_copy(st->err)); break;
    default: ex_set_stopped(o->r); break;
    }
}

static void future_done(future_state *st, uint32_t disposition) {
    ex_stop_callback_deregister(&st->scope_stop);
    exi_store_rel_u32(&st->disposition, disposition);
    void *waiting = exi_fas_ptr(&st->consumer, F_DONE);
    if (waiting) future_notify(waiting);
    ex_scope_token t = { st->scope };
    future_release(st);  /* the running operation's reference; st may be gone */
    ex_scope_token_disassociate(t);  /* last: it may let the scope be joined and destroyed */
}

static void fs_set_value(void *self, const ex_value *v, size_t n) {
    future_state *st = self;
    ex_error e = exi_store_set(&st->values, v, n, st->alloc);
    if (e.code) {
        st->err = e;
        future_done(st, F_ERROR);
    } else {
        future_done(st, F_VALUE);
    }
}
static void fs_set_error(void *self, ex_error e) {
    future_state *st = self;
    st->err = e;
    future_done(st, F_ERROR);
}
static void fs_set_stopped(void *self) { future_done(self, F_STOPPED); }
static ex_env fs_env(void *self) { return ex_env_of_pair(&((future_state *)self)->env); }

static const ex_receiver_vtable future_rcvr_vt = { fs_set_value, fs_set_error, fs_set_stopped, fs_env, NULL };

/* The work may complete inside a stop request (and the consumer with it),
 * releasing the state while request_stop still walks st->stop: every
 * forwarded request holds a reference around it. */
static void stop_future(future_state *st) {
    exi_faa_u32(&st->refs, 1);
    ex_stop_source_request_stop(&st->stop);
    future_release(st);
}

static void request_own_stop(ex_stop_callback *cb) { stop_future(EXI_CONTAINER_OF(cb, future_state, scope_stop)); }

static void consumer_stop(ex_stop_callback *cb) { stop_future(EXI_CONTAINER_OF(cb, future_op, on_stop)->st); }

static void fo_start(ex_operation *op) {
    future_op *o = (future_op *)op;
    future_state *st = o->st;
    o->started = true;
    ex_stop_callback_register(&o->on_stop, ex_get_stop_token(ex_receiver_env(o->r)), consumer_stop);
    void *expected = NULL;
    if (!exi_cas_ptr(&st->consumer, &expected, o)) future_notify(o);  /* already done */
}

static void fo_destroy(ex_operation *op) {
    future_op *o = (future_op *)op;
    /* Connected but never started: nobody will read the result. */
    if (!o->started) ex_stop_source_request_stop(&o->st->stop);
    future_release(o->st);
}

static const ex_operation_vtable future_op_vt = { fo_start, fo_destroy };

typedef struct future_sender {
    ex_sender base;
    future_state *st;
} future_sender;

static ex_error future_connect(const ex_sender *s, ex_receiver r, void *storage) {
    future_state *st = ((const future_sender *)s)->st;
    uint32_t not_taken = 0;
    if (!exi_cas_u32(&st->taken, &not_taken, 1))
        return ex_err(EX_EINVAL, "ex_spawn_future: the future was already connected");
    future_op *o = storage;
    o->base.vt = &future_op_vt;
    o->r = r;
    o->st = st;
    o->on_stop.src = NULL;
    o->started = false;
    exi_faa_u32(&st->refs, 1);
    return ex_ok();
}

static void future_sender_destroy(ex_sender *s) {
    future_state *st = ((future_sender *)s)->st;
    if (!st) return;
    /* Never connected: nobody will ever look at the result, stop the work.
     * (A connected future hands that duty to its operation: adaptors may
     * release the sender between connect and start.) */
    if (!exi_load_acq_u32(&st->taken)) ex_stop_source_request_stop(&st->stop);
    future_release(st);
}

static const ex_sender_vtable future_vt = { "ex_spawn_future", future_connect, NULL, future_sender_destroy };

ex_sender *ex_spawn_future(ex_sender *s, ex_scope_token t) {
    ex_error e = ex_check_input(s, "ex_spawn_future: NULL sender");
    if (e.code) return exi_reject1(e.code, e.msg, s);
    if (!t.scope) return exi_reject1(EX_EINVAL, "ex_spawn_future: NULL scope token", s);
    ex_sender *fs = ex_sender_alloc(&future_vt, sizeof(future_sender));
    if (!fs) return exi_reject1(EX_ENOMEM, NULL, s);
    if (!ex_scope_token_try_associate(t)) {
        ex_sender_release(fs);
        return exi_reject1(EX_ESHUTDOWN, "ex_spawn_future: the scope is closed", s);
    }
    const ex_allocator *a = ex_default_allocator();
    size_t off = ex_align_up(sizeof(future_state), s->op_align);
    size_t size = ex_size_add(off, s->op_size), align = ex_max_size(alignof(future_state), s->op_align);
    future_state *st = ex_allocate(a, size, align);
    if (!st) {
        ex_scope_token_disassociate(t);
        ex_sender_release(fs);
        return exi_reject1(EX_ENOMEM, NULL, s);
    }
    st->refs = 2;  /* the future sender and the running operation */
    st->taken = 0;
    st->consumer = NULL;
    ex_stop_source_init(&st->stop);
    ex_env_pair_init(&st->env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&st->stop)), ex_env_empty());
    st->disposition = 0;
    exi_store_init(&st->values);
    st->err = ex_ok();
    st->scope = t.scope;
    st->alloc = a;
    st->size = size;
    st->align = align;
    st->op = (ex_operation *)(void *)((char *)st + off);
    st->scope_stop.src = NULL;
    ex_receiver r = { &future_rcvr_vt, st };
    e = ex_connect_child(s, r, st->op);
    ex_sigs sigs = s->sigs;
    uint32_t depth = s->depth;
    ex_sender_release(s);
    if (e.code) {
        ex_deallocate(a, st, size, align);
        ex_scope_token_disassociate(t);
        ex_sender_release(fs);
        return ex_invalid_sender(e.code, e.msg);
    }
    ((future_sender *)fs)->st = st;
    fs->sigs = sigs;
    fs->sigs.flags |= EX_SIGS_ERROR | EX_SIGS_STOPPED;
    fs->op_size = sizeof(future_op);
    fs->op_align = alignof(future_op);
    fs->depth = depth + 1;
    if (t.scope->stoppable)
        ex_stop_callback_register(&st->scope_stop, ex_stop_source_token(&t.scope->stop), request_own_stop);
    ex_start(st->op);
    return fs;
}
