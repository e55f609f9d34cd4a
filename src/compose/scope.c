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
#include "core/exi_domain.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_stop.h"
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
    /* Before the hop's connect: a scheduler may ask the hop's receiver for
     * its environment there, which is the join's receiver's. */
    o->base.vt = &join_op_vt;
    o->r = r;
    o->scope = ((const join_sender *)s)->scope;
    o->next = NULL;
    o->failed = false;
    o->outcome = ex_ok();
    ex_receiver hop = { &join_hop_vt, o };
    e = sch.vt->connect_schedule(sch.self, hop, o->sched_op);
    if (e.code) {
        if (o->sched_block) ex_deallocate(o->sched_alloc, o->sched_block, o->sched_size, o->sched_align);
        return e;
    }
    return ex_ok();
}

static const ex_sender_vtable join_vt = { "ex_counting_scope_join", join_connect, NULL, NULL, NULL };

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

/* ---------------------------------------------------------------- tokens */

/* [exec.scope.counting] token.wrap: a counting scope's stop reaches what
 * is wrapped (stop_when with the scope's token, ex_link_stop_token here);
 * a simple scope's wrap is the sender itself. */
ex_sender *ex_scope_token_wrap(ex_scope_token t, ex_sender *s) {
    if (!t.scope) return exi_reject1(EX_EINVAL, "ex_scope_token_wrap: NULL scope token", s);
    if (!t.scope->stoppable) return s;
    return ex_link_stop_token(s, ex_stop_source_token(&t.scope->stop));
}

/* ------------------------------------------------------ spawn environment */

/* The allocator of a spawn's block ([exec.spawn], [exec.spawn.future]):
 * the one env answers get_allocator with; else the one the sender's
 * attributes name, which the work's environment then answers too (C++'s
 * JOIN-ENV(prop(get_allocator, alloc), env)); else ex_get_allocator(env)
 * (env's scheduler's default, else the process default). */
typedef struct spawn_alloc {
    const ex_allocator *a;
    bool tell;   /* the work's environment must answer get_allocator with a */
} spawn_alloc;

static bool answers_allocator(ex_env e, const ex_allocator **out) {
    ex_value v;
    if (!ex_env_query(e, &ex_key_get_allocator, &v) || v.type != EX_T_ALLOC || !v.as.alloc) return false;
    *out = v.as.alloc;
    return true;
}

static spawn_alloc spawn_allocator(const ex_sender *s, ex_env env) {
    spawn_alloc al = { NULL, false };
    if (answers_allocator(env, &al.a)) return al;
    if (answers_allocator(ex_sender_attrs(s), &al.a)) {
        al.tell = true;
        return al;
    }
    al.a = ex_get_allocator(env);
    return al;
}

/* The environment spawned work sees: env, with get_stop_token answering
 * `token` when set_token, and get_allocator answering al.a when told. */
static ex_env work_env(ex_env_pair *pair, ex_env env, bool set_token, ex_stop_token token, spawn_alloc al) {
    ex_value tv = ex_token_value(token), av = ex_alloc_value(al.a);
    if (set_token && al.tell) ex_env_pair_init2(pair, &ex_key_get_stop_token, tv, &ex_key_get_allocator, av, env);
    else if (set_token) ex_env_pair_init(pair, &ex_key_get_stop_token, tv, env);
    else if (al.tell) ex_env_pair_init(pair, &ex_key_get_allocator, av, env);
    else return env;
    return ex_env_of_pair(pair);
}

/* ----------------------------------------------------------------- spawn */

/* Work spawned into a counting scope with a stop token in env sees a
 * token of its own, linked to both (token.wrap's stop_when under
 * write_env(env) in C++).  A parent's request runs the work's callbacks,
 * and the work may complete inside one: finishing there would free the
 * linked source while that request still walks it.  So a request holds
 * the block across itself (a count of the work plus the requests in
 * flight, as link_stop.c), and the last to leave finishes. */
typedef struct spawn_link {
    ex_linked_stop_source link;   /* parents: env's token, the scope's */
    uint32_t holds;               /* 1 until the work completes, + requests in flight */
    struct spawn_block *b;
} spawn_link;

/* One block from the spawn's allocator: this header, the work's
 * operation, then (when linked) the spawn_link. */
typedef struct spawn_block {
    ex_scope_impl *scope;
    const ex_allocator *alloc;
    size_t size, align;
    ex_env env;             /* what the work sees */
    ex_env_pair env_pair;   /* its node, when it adds keys to the caller's env */
    spawn_link *link;       /* NULL: the work sees env's token or the scope's as they are */
    ex_operation *op;
} spawn_block;

static void spawn_finish(spawn_block *b) {
    ex_scope_token t = { b->scope };
    /* No parent's request touches the block once this returns (one running
     * on another thread is waited for; it finds no hold to take). */
    if (b->link) ex_linked_stop_source_destroy(&b->link->link);
    ex_operation_destroy(b->op);
    ex_deallocate(b->alloc, b, b->size, b->align);
    ex_scope_token_disassociate(t);  /* last: it may let the scope be joined and destroyed */
}

static void spawn_leave(spawn_link *l) {
    if (exi_faa_u32(&l->holds, (uint32_t)-1) == 1) spawn_finish(l->b);
}

/* The work completed: finish now unless a parent's request holds the
 * block (then the last request to leave finishes). */
static void spawn_completed(spawn_block *b) {
    spawn_link *l = b->link;
    uint32_t alone = 1;
    if (!l || exi_cas_u32(&l->holds, &alone, 0)) spawn_finish(b);
    else spawn_leave(l);
}

/* A parent's request reached the linked source. */
static void spawn_parent_stopped(ex_linked_stop_source *ls) {
    spawn_link *l = EXI_CONTAINER_OF(ls, spawn_link, link);
    /* Held, unless the work completed: its finish is unlinking the parents
     * and waits for this callback to return. */
    uint32_t c = exi_load_acq_u32(&l->holds);
    do {
        if (c == 0) return;
    } while (!exi_cas_u32(&l->holds, &c, c + 1));
    (void)ex_stop_source_request_stop(&ls->source);
    spawn_leave(l);
}

static void sp_set_value(void *self, const ex_value *v, size_t n) { (void)v, (void)n; spawn_completed(self); }
static void sp_set_error(void *self, ex_error e) {
    spawn_block *b = self;
    record_error(b->scope, e);
    spawn_completed(b);
}
static void sp_set_stopped(void *self) { spawn_completed(self); }
static ex_env sp_env(void *self) { return ((spawn_block *)self)->env; }

static const ex_receiver_vtable spawn_rcvr_vt = { sp_set_value, sp_set_error, sp_set_stopped, sp_env, NULL };

/* Whether the work needs a source linked to env's token and the scope's:
 * a counting scope, and a token in env that is not the scope's. */
static bool needs_link(ex_scope_impl *scope, ex_stop_token outer) {
    return scope->stoppable && ex_stop_token_stop_possible(outer) &&
           !ex_stop_token_equal(outer, ex_stop_source_token(&scope->stop));
}

/* The block's layout: header, operation at *op_off, link at *link_off
 * (when linked); sizes saturate (ex_allocate then fails). */
static void spawn_layout(const ex_sender *s, bool linked, size_t *op_off, size_t *link_off, size_t *size,
                         size_t *align) {
    *op_off = ex_align_up(sizeof(spawn_block), s->op_align);
    *size = ex_size_add(*op_off, s->op_size);
    *align = ex_max_size(alignof(spawn_block), s->op_align);
    *link_off = 0;
    if (!linked) return;
    *link_off = ex_align_up(*size, alignof(spawn_link));
    *size = ex_size_add(*link_off, sizeof(spawn_link));
    *align = ex_max_size(*align, alignof(spawn_link));
}

/* Links the block's own source to env's token and the scope's (a parent
 * already stopped stops it here); returns the token the work sees. */
static ex_stop_token spawn_link_init(spawn_block *b, size_t link_off, ex_stop_token outer) {
    spawn_link *l = (spawn_link *)(void *)((char *)b + link_off);
    l->holds = 1;
    l->b = b;
    b->link = l;
    ex_stop_token parents[2] = { outer, ex_stop_source_token(&b->scope->stop) };
    (void)exi_linked_stop_source_init_fire(&l->link, parents, 2, spawn_parent_stopped);  /* cannot fail: 2 parents */
    return ex_linked_stop_source_token(&l->link);
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
    spawn_alloc al = spawn_allocator(s, env);
    ex_stop_token outer = ex_get_stop_token(env);
    bool linked = needs_link(t.scope, outer);
    size_t off, link_off, size, align;
    spawn_layout(s, linked, &off, &link_off, &size, &align);
    spawn_block *b = ex_allocate(al.a, size, align);
    if (!b) {
        ex_sender_release(s);
        ex_scope_token_disassociate(t);
        return ex_err(EX_ENOMEM, "ex_spawn: out of memory for the operation");
    }
    b->scope = t.scope;
    b->alloc = al.a;
    b->size = size;
    b->align = align;
    b->link = NULL;
    ex_stop_token token = linked ? spawn_link_init(b, link_off, outer) : ex_stop_source_token(&t.scope->stop);
    b->env = work_env(&b->env_pair, env, t.scope->stoppable, token, al);
    b->op = (ex_operation *)(void *)((char *)b + off);
    ex_receiver r = { &spawn_rcvr_vt, b };
    e = exi_connect_child_in_env(s, r, b->op);
    ex_sender_release(s);
    if (e.code) {
        if (b->link) ex_linked_stop_source_destroy(&b->link->link);
        ex_deallocate(al.a, b, size, align);
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
    ex_stop_source stop;          /* the work's token */
    ex_stop_callback scope_stop;  /* counting scope's stop -> ours */
    ex_stop_callback env_stop;    /* the stop token of the spawn's env -> ours */
    ex_env_pair env_pair;
    ex_env env;                   /* what the work sees */
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
    ex_stop_callback_deregister(&st->env_stop);
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
static ex_env fs_env(void *self) { return ((future_state *)self)->env; }

static const ex_receiver_vtable future_rcvr_vt = { fs_set_value, fs_set_error, fs_set_stopped, fs_env, NULL };

/* The work may complete inside a stop request (and the consumer with it),
 * releasing the state while request_stop still walks st->stop: every
 * forwarded request holds a reference around it. */
static void stop_future(future_state *st) {
    exi_faa_u32(&st->refs, 1);
    ex_stop_source_request_stop(&st->stop);
    future_release(st);
}

static void scope_stopped(ex_stop_callback *cb) { stop_future(EXI_CONTAINER_OF(cb, future_state, scope_stop)); }
static void env_stopped(ex_stop_callback *cb) { stop_future(EXI_CONTAINER_OF(cb, future_state, env_stop)); }

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

static const ex_sender_vtable future_vt = { "ex_spawn_future", future_connect, NULL, future_sender_destroy, NULL };

ex_sender *ex_spawn_future_env(ex_sender *s, ex_scope_token t, ex_env env) {
    ex_error e = ex_check_input(s, "ex_spawn_future: NULL sender");
    if (e.code) return exi_reject1(e.code, e.msg, s);
    if (!t.scope) return exi_reject1(EX_EINVAL, "ex_spawn_future: NULL scope token", s);
    ex_sender *fs = ex_sender_alloc(&future_vt, sizeof(future_sender));
    if (!fs) return exi_reject1(EX_ENOMEM, NULL, s);
    if (!ex_scope_token_try_associate(t)) {
        ex_sender_release(fs);
        return exi_reject1(EX_ESHUTDOWN, "ex_spawn_future: the scope is closed", s);
    }
    spawn_alloc al = spawn_allocator(s, env);
    const ex_allocator *a = al.a;
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
    st->env = work_env(&st->env_pair, env, true, ex_stop_source_token(&st->stop), al);
    st->disposition = 0;
    exi_store_init(&st->values);
    st->err = ex_ok();
    st->scope = t.scope;
    st->alloc = a;
    st->size = size;
    st->align = align;
    st->op = (ex_operation *)(void *)((char *)st + off);
    st->scope_stop.src = NULL;
    st->env_stop.src = NULL;
    ex_receiver r = { &future_rcvr_vt, st };
    e = exi_connect_child_in_env(s, r, st->op);
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
    /* The work's token follows the scope's (token.wrap) and env's (C++:
     * stop_when under write_env(env)); one already stopped stops it here. */
    if (t.scope->stoppable)
        ex_stop_callback_register(&st->scope_stop, ex_stop_source_token(&t.scope->stop), scope_stopped);
    ex_stop_callback_register(&st->env_stop, ex_get_stop_token(env), env_stopped);
    ex_start(st->op);
    return fs;
}

ex_sender *ex_spawn_future(ex_sender *s, ex_scope_token t) { return ex_spawn_future_env(s, t, ex_env_empty()); }
