/* SPDX-License-Identifier: MIT */
/* task_await.c - ex_await_into and ex_await_all_into, and the fork they
 * run for a when_all of tasks (see cexec/task.h).  The fork's start stays
 * in this file so that its steps are inlined into one function. */
#include <sched.h>
#include <string.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "compose/exi_join.h"
#include "compose/exi_when_all.h"
#include "core/exi_domain.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"
#include "resources/exi_pool.h"
#include "task/exi_task.h"

/* An await that fails before its operation starts. */
static void await_fail(ex_await_result *out, ex_error e) {
    out->status = EX_AWAIT_ERROR;
    out->n = 0;
    out->error = e;
}

/* ------------------------------------------------ a when_all of tasks */

/* ex_await of an ex_when_all whose children are all tasks affine to the
 * awaiting task's scheduler runs as a fork instead of through when_all's
 * operation: the children's control blocks go straight into the awaiting
 * task's await area, they get the awaiting task's scheduler and allocator
 * without asking the environment, all but the last are queued where
 * thieves can take them, and the last starts at once, nested.  What the
 * children and the body observe is what when_all gives (values in order;
 * the first error or stopped wins and asks the others to stop; the
 * receiver's stop request forwarded; nothing starts when stop was already
 * requested); only the queueing differs. */

/* Stop linking.  A fork forwards its task's stop requests to its own
 * source, as when_all does, through a lazy source (core/exi_lazy_stop.h):
 * a fork awaited below another fork-join registers nothing on its
 * parent's source unless someone registers on its own token, and learns
 * at start whether its parents were stopped from the process-wide count
 * of requests, one shared load while there are none. */

typedef struct fork_op fork_op;

typedef struct fork_slot {
    ex_task task;            /* the child's control block */
    fork_op *f;
    uint8_t cap;             /* values the child may send */
    uint8_t n;               /* values it sent */
    ex_value v[EX_MAX_ARITY];
    void *nested;            /* its tuples' deep copies */
    size_t nested_size;
} fork_slot;

struct fork_op {
    ex_operation base;
    ex_task *p;              /* the awaiting task */
    size_t n;
    exi_join join;           /* count, disposition, the children's stop source (when_all's rule) */
    ex_env_node env_node;    /* the children's receiver environment */
    uint32_t deferred;       /* lazy: children [0, deferred) neither started nor queued */
    fork_op *deferred_next;  /* the next fork holding children back on the same carrier */
    fork_slot slots[];
};

_Static_assert(alignof(fork_op) <= alignof(max_align_t), "a fork goes at the start of a task's await area");

static void fork_complete(fork_op *f) {
    exi_lazy_stop_unfollow(&f->join.stop);
    ex_task *p = f->p;
    uint32_t d = exi_load_acq_u32(&f->join.disposition);
    if (d == EXI_JOIN_ERROR) {
        exi_task_await_error(p, f->join.err);
        return;
    }
    if (d == EXI_JOIN_STOPPED) {
        exi_task_await_stopped(p);
        return;
    }
    /* Straight into the body's result; tuples (deep copies in the slots,
     * freed with the fork) are copied again into the task's own, as any
     * await's are, to outlive the fork when the body returns them. */
    ex_await_result *out = p->await_out;
    size_t k = 0;
    bool tuples = false;
    for (size_t i = 0; i < f->n; i++) {
        const fork_slot *sl = &f->slots[i];
        if (k + sl->n > EX_MAX_ARITY) {
            exi_task_await_error(p, ex_err(EX_EINVAL, "ex_when_all: the children sent more than EX_MAX_ARITY values"));
            return;
        }
        for (size_t j = 0; j < sl->n; j++) out->v[k + j] = sl->v[j];
        k += sl->n;
        tuples |= sl->nested != NULL;
    }
    if (tuples) {
        ex_value all[EX_MAX_ARITY];
        memcpy(all, out->v, k * sizeof(ex_value));
        exi_task_await_value(p, all, k);
        return;
    }
    out->status = EX_AWAIT_VALUE;
    out->n = (uint8_t)k;
    out->error = ex_ok();
    exi_task_await_complete(p);
}

/* The last child to arrive completes the fork (exi_join_arrive). */
static void fork_arrive(fork_op *f) {
    if (exi_join_arrive(&f->join)) fork_complete(f);
}

static void fork_fail(fork_op *f, ex_error e) { exi_join_fail(&f->join, e); }

static void fork_value(void *self, const ex_value *v, size_t n) {
    fork_slot *sl = self;
    fork_op *f = sl->f;
    if (exi_load_acq_u32(&f->join.disposition) == EXI_JOIN_VALUE) {
        bool tuples = false;
        for (size_t i = 0; i < n && i < sl->cap; i++) {
            sl->v[i] = v[i];
            tuples |= v[i].type == EX_T_TUPLE;
        }
        if (n > sl->cap) {
            fork_fail(f, ex_err(EX_EINVAL, "ex_when_all: a child sent more values than its signature allows"));
        } else if (tuples) {
            ex_error e = exi_values_copy(sl->v, v, n, f->p->alloc, &sl->nested, &sl->nested_size);
            if (e.code) fork_fail(f, e);
            else sl->n = (uint8_t)n;
        } else {
            sl->n = (uint8_t)n;
        }
    }
    fork_arrive(f);
}

static void fork_error(void *self, ex_error e) {
    fork_op *f = ((fork_slot *)self)->f;
    fork_fail(f, e);
    fork_arrive(f);
}

static void fork_stopped(void *self) {
    fork_op *f = ((fork_slot *)self)->f;
    exi_join_stopped(&f->join);
    fork_arrive(f);
}

/* when_all's environment: its own stop token (linked on demand), the rest
 * forwarded from the awaiting task's await (which answers
 * exi_task_key_awaiting with it). */
static bool fork_env_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
    fork_op *f = EXI_CONTAINER_OF(n, fork_op, env_node);
    if (key == &ex_key_get_stop_token) {
        *out = ex_token_value(exi_join_token(&f->join));
        return true;
    }
    ex_env e = { &f->p->await_env_node, 0 };
    return ex_env_query(ex_env_forward(e), key, out);
}

static ex_env fork_env(void *self) {
    ex_env e = { &((fork_slot *)self)->f->env_node, 0 };
    return e;
}

static const ex_receiver_vtable fork_rcvr_vt = { fork_value, fork_error, fork_stopped, fork_env, NULL };

/* The awaiting task's stop request, forwarded once the fork's source is
 * linked (exi_join.h). */
static void fork_fire(exi_lazy_stop *l) {
    fork_op *f = EXI_CONTAINER_OF(l, fork_op, join.stop);
    if (exi_join_forward_stop(&f->join)) fork_arrive(f);
}

static void fork_destroy(ex_operation *op) {
    fork_op *f = (fork_op *)op;
    /* A child's hop resources went when it completed (release_run in
     * task_run.c), and a child that never started has none: only the
     * values' copies are left, the slot's and the child's own (the tuples
     * it returned, which its operation's destroy frees). */
    for (size_t i = 0; i < f->n; i++) {
        fork_slot *sl = &f->slots[i];
        if (sl->nested) ex_deallocate(f->p->alloc, sl->nested, sl->nested_size, alignof(ex_value));
        ex_operation_destroy(&sl->task.base);
    }
}

static const ex_operation_vtable fork_op_vt = { NULL, fork_destroy };

/* A queued child of fork f, taken back by f's task: run it nested. */
static bool fork_nestable(ex_work *w, void *ctx) {
    fork_op *f = ctx;
    if (w->execute != exi_task_hop_execute) return false;
    ex_task *c = EXI_CONTAINER_OF(w, ex_task, hop);
    /* Not a child's resumption (a scheduler whose dispatch queues puts one
     * here): only a start runs nested. */
    if (c->started || c->carrier) return false;
    return c->r.vt == &fork_rcvr_vt && ((fork_slot *)c->r.self)->f == f && has_room(c, f->p);
}

/* Whether p may await a fork of n children: p is affine and on its
 * scheduler, which can queue work, and the fork fits p's await area. */
static bool can_fork(const ex_task *p, size_t n) {
    if (p->inline_affinity || p->off_sched || p->must_hop || !p->sched.vt->post) return false;
    return p->await_size >= sizeof(fork_op) && n <= (p->await_size - sizeof(fork_op)) / sizeof(fork_slot);
}

/* Whether c can be a fork's child: a task affine to its receiver's
 * scheduler (the fork checks at connect that it is fresh). */
static bool forkable_child(const ex_sender *c) {
    return c->vt == &exi_task_vt && ((const task_sender *)c)->opt.affinity == EX_TASK_AFFINE;
}

/* Whether s (a when_all) can be awaited by p as a fork: every child can
 * be a fork's, and p may await a fork of that many. */
static bool forkable(const ex_task *p, const ex_sender *s, ex_sender *const **ch, size_t *n) {
    *ch = exi_when_all_children(s, n);
    if (!can_fork(p, *n)) return false;
    for (size_t i = 0; i < *n; i++)
        if (!forkable_child((*ch)[i])) return false;
    return true;
}

/* Whether ch[0..n) can be awaited by p as a fork with no when_all built:
 * as forkable, and none of them is what ex_when_all_n refuses (NULL, a
 * released sender, or values past EX_MAX_ARITY in all: the when_all path
 * gives the error). */
static bool forkable_all(const ex_task *p, ex_sender *const *ch, size_t n) {
    if (!ch || n == 0 || !can_fork(p, n)) return false;
    size_t arity = 0;
    for (size_t i = 0; i < n; i++) {
        const ex_sender *c = ch[i];
        if (!c || exi_sender_dead(c) || !forkable_child(c)) return false;
        if (c->sigs.nvalues == 1 && !(c->sigs.flags & EX_SIGS_DYNAMIC)) arity += c->sigs.values[0].arity;
        if (arity > EX_MAX_ARITY) return false;
    }
    return true;
}

/* Queue items on the worker at and above which a fork runs its children
 * nested without queueing them (see start_children). */
#define FORK_LAZY 2

/* Queues fork child c (initialised, not started) on its scheduler. */
static void queue_child(ex_task *c) {
    if (!exi_pool_post_here(c->sched, &c->hop) && ex_post(c->sched, &c->hop).code) exi_task_resume_on_scheduler(c);
}

/* Carrier k is about to switch away: queue every child a fork on it holds
 * back, so that no child waits for the carrier to come back (a sibling
 * may be what the suspended task waits for). */
void exi_task_flush_deferred(ex_task *k) {
    for (fork_op *f = k->deferred; f; f = f->deferred_next) {
        uint32_t d = f->deferred;
        f->deferred = 0;
        for (uint32_t i = 0; i < d; i++) queue_child(&f->slots[i].task);
    }
    k->deferred = NULL;
}

/* Lays a fork of n children out at the start of p's await area. */
static fork_op *fork_init(ex_task *p, size_t n) {
    fork_op *f = (fork_op *)(void *)p->await_area;
    f->base.vt = &fork_op_vt;
    f->p = p;
    f->n = 0;
    exi_join_init_lazy(&f->join, (uint32_t)n, fork_fire);
    f->env_node.query = fork_env_query;
    return f;
}

/* Marks ts connected (a task is single-shot).  sole: s, the when_all, has
 * no other holder; then a child only s holds cannot be connected by anyone
 * else meanwhile, and needs no read-modify-write.  False: connected before. */
static bool claim_child(task_sender *ts, bool sole) {
    if (sole && exi_load_acq_u32(&ts->base.refs) == 1 && !exi_load_rlx_u32(&ts->connected)) {
        exi_store_rlx_u32(&ts->connected, 1);
        return true;
    }
    uint32_t fresh = 0;
    return exi_cas_u32(&ts->connected, &fresh, 1);
}

/* Connects ts into slot sl of f: as task_connect does, but with the
 * awaiting task's scheduler and allocator, asking no environment. */
static void connect_child(fork_op *f, fork_slot *sl, const task_sender *ts) {
    ex_task *p = f->p;
    sl->f = f;
    sl->cap = exi_value_cap(&ts->base.sigs);
    sl->n = 0;
    sl->nested = NULL;
    ex_task *c = &sl->task;
    zero_fields(c);
    /* The awaiting task holds the scheduler until every child has
     * completed (each releases what it holds before): children borrow it. */
    c->sched = p->sched;
    c->sched_borrowed = true;
    task_fill(c, ts, (ex_receiver){ &fork_rcvr_vt, sl }, ts->opt.allocator ? ts->opt.allocator : p->alloc);
}

/* Connects the n children ch into f.  sole: nobody else holds a
 * reference to ch that could connect them (see claim_child).  False: one
 * was connected before (f->n says how many slots are set). */
static bool connect_children(fork_op *f, ex_sender *const *ch, size_t n, bool sole) {
    for (size_t i = 0; i < n; i++) {
        task_sender *ts = (task_sender *)(uintptr_t)ch[i];
        if (!claim_child(ts, sole)) return false;
        connect_child(f, &f->slots[i], ts);
        f->n = i + 1;
    }
    return true;
}

/* Makes f's source follow its task's token at its start (see "Stop
 * linking"): returns whether stop was requested on it already.  A child
 * of a fork finds its token without asking the environment. */
static bool link_at_start(fork_op *f, ex_task *p) {
    ex_stop_token t = p->r.vt == &fork_rcvr_vt ? exi_join_token(&((fork_slot *)p->r.self)->f->join)
                                               : ex_task_stop_token(p);
    return exi_lazy_stop_follow(&f->join.stop, t);
}

/* Queues the children but the last (oldest first), or, lazy, holds them
 * back on carrier k's list of forks (exi_task_flush_deferred). */
static void queue_or_defer(fork_op *f, ex_task *k, bool lazy) {
    for (size_t i = 0; i + 1 < f->n; i++) {
        ex_task *c = &f->slots[i].task;
        exi_store_rlx_u32(&c->await_state, SUSPENDED);
        c->hop = (ex_work){ NULL, exi_task_hop_execute, exi_task_hop_cancel };
        if (!lazy) queue_child(c);
    }
    f->deferred = lazy ? (uint32_t)(f->n - 1) : 0;
    if (lazy) {
        f->deferred_next = k->deferred;
        k->deferred = f;
    }
}

/* After the last child: the children f held back, newest first, unless a
 * flush queued them meanwhile.  Nested while they may (room below; no hop
 * back pending, so this thread still runs on the scheduler), else queued. */
static void run_deferred(fork_op *f, ex_task *p, ex_task *k) {
    while (f->deferred) {  /* 0 once flushed */
        ex_task *c = &f->slots[--f->deferred].task;
        if (!p->nest_hop && has_room(c, p)) {
            if (exi_task_run_nested(c, p)) p->nest_hop = true;
        } else {
            queue_child(c);
        }
    }
    if (k->deferred == f) k->deferred = f->deferred_next;  /* else a flush emptied the list */
}

/* Starts f's children.  All but the last queued, oldest first, where
 * thieves take from: the first child (in a recursion, usually the biggest)
 * is the one stolen.  Unless the worker already holds FORK_LAZY items for
 * thieves: then they are held back and run nested after the last (lazy
 * splitting: in a recursion the items already queued are the bigger
 * ones), and queued after all if the carrier switches away meanwhile
 * (exi_task_flush_deferred).  The last starts at once, nested if it may. */
static void start_children(fork_op *f, ex_task *p) {
    ex_task *k = p->carrier;
    bool lazy = exi_pool_backlog_here(p->sched) >= FORK_LAZY;
    queue_or_defer(f, k, lazy);
    ex_task *last = &f->slots[f->n - 1].task;
    exi_store_rlx_u32(&last->await_state, SUSPENDED);
    exi_task_run_awaited_child(last, p);
    if (lazy) run_deferred(f, p, k);
}

/* Connects the n children ch as a fork in p's await area and starts
 * them.  holder: the when_all sender that holds them, kept until the
 * await ends (sole: nobody else holds it); NULL: the fork was handed the
 * children themselves, released once connected (a connected task needs
 * its sender no more).  False: a child was connected before; *out holds
 * the error, and the children and holder are released. */
static bool fork_launch(ex_task *p, ex_sender *holder, ex_sender *const *ch, size_t n, bool sole,
                        ex_await_result *out) {
    fork_op *f = fork_init(p, n);
    bool connected = connect_children(f, ch, n, sole);
    if (!holder)
        for (size_t i = 0; i < n; i++) exi_sender_release(ch[i]);
    if (!connected) {
        fork_destroy(&f->base);
        exi_sender_release(holder);
        await_fail(out, ex_err(EX_EINVAL, "ex_task: the task was connected before (a task is single-shot)"));
        return false;
    }
    p->await_op = &f->base;
    p->await_sender = holder;
    p->await_out = out;
    exi_store_rlx_u32(&p->await_state, AWAITING);
    if (link_at_start(f, p)) {
        exi_task_await_stopped(p);  /* stop was already requested: start no child */
        return true;
    }
    start_children(f, p);
    return true;
}

/* ------------------------------------------------------------ awaiting */

/* Before t suspends in an await: runs the children its operation queued
 * here and no thief took (those `accept(w, ctx)` recognises), while the
 * await is not done.  Returns whether t must hop back to its scheduler. */
static bool help(ex_task *t, bool (*accept)(ex_work *w, void *ctx), void *ctx) {
    bool hop = false;
    ex_work *w;
    while (!hop && exi_load_acq_u32(&t->await_state) != DONE && (w = exi_pool_take_own_if(accept, ctx)))
        hop = exi_task_run_nested(EXI_CONTAINER_OF(w, ex_task, hop), t);
    return hop;
}

/* Storage for the awaited operation: the task's buffer, grown on demand
 * (steady state: no allocation). */
static void *await_storage(ex_task *t, size_t size, size_t align) {
    if (size <= t->await_size && align <= alignof(max_align_t)) return t->await_area;
    size_t need = ex_size_add(size, align > alignof(max_align_t) ? align : 0);  /* SIZE_MAX: the allocator refuses */
    if (need > t->await_cap) {
        void *p = ex_allocate(t->alloc, need, alignof(max_align_t));
        if (!p) return NULL;
        if (t->await_buf) ex_deallocate(t->alloc, t->await_buf, t->await_cap, alignof(max_align_t));
        t->await_buf = p;
        t->await_cap = need;
    }
    return (void *)ex_align_up((uintptr_t)t->await_buf, align);
}

/* After the awaited operation started: unless it is done already, runs
 * what it queued here (`accept` recognises it), then suspends t until the
 * completion, and hops back to t's scheduler if something ran elsewhere. */
static inline __attribute__((always_inline)) void await_finish(ex_task *t, ex_await_result *out,
                                                               bool (*accept)(ex_work *w, void *ctx), void *ctx) {
    bool hop = t->nest_hop;  /* a directly awaited child ran nested and ended elsewhere */
    t->nest_hop = false;
    if (hop || t->must_hop || exi_load_acq_u32(&t->await_state) != DONE) {
        if (!hop && !t->must_hop) hop = help(t, accept, ctx);
        bool must_hop = t->must_hop;
        if (hop) t->must_hop = true;  /* exi_task_run() then hops back even if the await is done */
        if (t->must_hop || exi_load_acq_u32(&t->await_state) != DONE) {
            exi_task_flush_deferred(t->carrier);
            t->carrier->switches++;
            (void)exi_fiber_switch(&t->carrier->fiber, t->carrier->resumer, t);
        }
        t->must_hop = must_hop;
    }
    /* DONE: *out was written by the completion (published by its CAS or
     * release store, or by this thread). */
    if (out->status == EX_AWAIT_STOPPED) t->stopped = true;
}

/* The await of a fork (fork_launch's arguments).  One function for both
 * awaits that run one, so that the fork's steps are inlined once. */
static __attribute__((noinline)) void fork_await(ex_task *p, ex_sender *holder, ex_sender *const *ch, size_t n,
                                                 bool sole, ex_await_result *out) {
    if (fork_launch(p, holder, ch, n, sole, out)) await_finish(p, out, fork_nestable, p->await_op);
}

void ex_await_into(ex_task *t, ex_sender *s, ex_await_result *out) {
    if (__builtin_expect(!t, 0)) {
        ex_sender_release(s);
        await_fail(out, ex_err(EX_EINVAL, "ex_await: NULL task (pass the ex_task * the body was given)"));
        return;
    }
    release_await(t);
    if (t->stopped) {
        ex_sender_release(s);
        out->status = EX_AWAIT_STOPPED;
        out->n = 0;
        out->error = ex_ok();
        return;
    }
    if (__builtin_expect(!s || s->status.code != EX_OK, 0)) {
        ex_error e = ex_check_input(s, "ex_await: NULL sender");
        ex_sender_release(s);
        await_fail(out, e);
        return;
    }
    if (__builtin_expect(s->sigs.nvalues > 1, 0)) {
        /* P3552R3 §4.4: as_awaitable is ill-formed for such a sender, as
         * sync_wait is ([exec.sync.wait]); which one arrived is lost. */
        ex_sender_release(s);
        await_fail(out, ex_err(EX_EINVAL, "ex_await: the sender has more than one value signature; await "
                                          "ex_into_variant(s)"));
        return;
    }
    ex_sender *const *ch;
    size_t n;
    if (exi_is_when_all(s) && forkable(t, s, &ch, &n)) {
        fork_await(t, s, ch, n, exi_load_acq_u32(&s->refs) == 1, out);
        return;
    }
    void *storage = await_storage(t, s->op_size, s->op_align);
    if (!storage) {
        ex_sender_release(s);
        await_fail(out, ex_err(EX_ENOMEM, "ex_await: out of memory"));
        return;
    }
    /* The storage fits and the receiver accepts every completion: connect
     * without ex_connect's checks. */
    ex_receiver r = { &exi_task_await_receiver_vt, t };
    ex_operation *op = storage;
    /* The task's environment decides the domain: its scheduler's, when
     * that has one (SCHED-ENV), else what its receiver's names. */
    ex_error e = t->sched.vt ? exi_connect_child_under(s, r, storage, t->sched) : exi_connect_child_in_env(s, r, storage);
    if (e.code) {
        ex_sender_release(s);
        await_fail(out, e);
        return;
    }
    t->await_op = op;
    t->await_sender = s;
    t->await_out = out;
    exi_store_rlx_u32(&t->await_state, AWAITING);
    ex_start(op);
    await_finish(t, out, exi_task_nestable, t);
}

void ex_await_all_into(ex_task *t, ex_sender *const *children, size_t n, ex_await_result *out) {
    /* Anything but a fork of fresh tasks (and a task that may await one)
     * is the await of their when_all, which also gives every error. */
    if (!t || t->stopped || !forkable_all(t, children, n)) {
        ex_await_into(t, ex_when_all_n(children, n), out);
        return;
    }
    release_await(t);
    /* The caller handed over its references: a child only it held is the
     * fork's alone. */
    fork_await(t, NULL, children, n, true, out);
}
