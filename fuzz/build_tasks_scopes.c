/* SPDX-License-Identifier: MIT */
/* build_tasks_scopes.c - the scope nodes (a sender of the harness's that
 * spawns its children into a scope of its own, then joins it) and the
 * task nodes (a body that awaits the children, with the node's options). */
#include "harness.h"

#include <stddef.h>
#include <string.h>

/* ------------------------------------------------------------ scope node */

/* A sender that, when started, spawns its children into a scope of its
 * own (in its operation state), then completes when the scope's join
 * does: with the join's error (the first error of spawned work), else the
 * first spawn's failure, else value(number of children).  The scope is
 * destroyed with the operation, which must succeed then. */
typedef struct scope_sender {
    ex_sender base;
    unsigned node;
    unsigned n;
    ex_sender *child[3];
} scope_sender;

typedef union scope_u {
    ex_simple_counting_scope simple;
    ex_counting_scope counting;
} scope_u;

typedef struct scope_op {
    ex_operation base;
    ex_receiver r;
    unsigned node, n;
    uint8_t flags;
    ex_sender *child[3];      /* retained until spawned */
    scope_u scope;
    ex_sender *join;
    ex_operation *join_op;
    ex_error spawn_error;
    ex_env_pair join_env;     /* get_scheduler: the inline scheduler */
    _Alignas(max_align_t) unsigned char join_storage[512];
} scope_op;

static ex_scope_token scope_token(scope_op *o) {
    return (o->flags & SC_COUNTING) ? ex_counting_scope_token(&o->scope.counting)
                                    : ex_simple_counting_scope_token(&o->scope.simple);
}

static void scope_join_value(void *self, const ex_value *v, size_t n) {
    scope_op *o = self;
    (void)v;
    if (n != 0) sg_cb_fail(o->node, "a scope's join completed with values", n);
    if (o->spawn_error.code) {
        ex_set_error(o->r, o->spawn_error);
    } else {
        ex_value c = ex_int(o->n);
        ex_set_value(o->r, &c, 1);
    }
}

static void scope_join_error(void *self, ex_error e) { ex_set_error(((scope_op *)self)->r, e); }

static void scope_join_stopped(void *self) {
    scope_op *o = self;
    sg_cb_fail(o->node, "a scope's join completed stopped", 0);
    ex_set_stopped(o->r);
}

/* The join completes on its receiver's scheduler: the inline one, so
 * where the last spawned work completed (the reference's model). */
static ex_env scope_join_env(void *self) { return ex_env_of_pair(&((scope_op *)self)->join_env); }

static const ex_receiver_vtable scope_join_vt = { scope_join_value, scope_join_error, scope_join_stopped, scope_join_env,
                                                  NULL };

static void scope_start(ex_operation *op) {
    scope_op *o = (scope_op *)op;
    ex_scope_token tok = scope_token(o);
    unsigned stop = (o->flags & SC_COUNTING) ? (o->flags >> SC_STOP_SHIFT) & 3 : 0;
    if (stop == SC_STOP_BEFORE) ex_counting_scope_request_stop(&o->scope.counting);
    ex_env env = ex_env_forward(ex_receiver_env(o->r));
    for (unsigned j = 0; j < o->n; j++) {
        if ((o->flags & SC_CLOSE) && j == o->n - 1) {
            if (o->flags & SC_COUNTING) ex_counting_scope_close(&o->scope.counting);
            else ex_simple_counting_scope_close(&o->scope.simple);
        }
        ex_sender *c = o->child[j];
        o->child[j] = NULL;
        ex_error e = (o->flags & SC_ENV) ? ex_spawn_env(c, tok, env) : ex_spawn(c, tok);
        if (e.code && !o->spawn_error.code) o->spawn_error = e;
    }
    if (stop == SC_STOP_AFTER) ex_counting_scope_request_stop(&o->scope.counting);
    ex_start(o->join_op);
}

static void scope_op_destroy(ex_operation *op) {
    scope_op *o = (scope_op *)op;
    ex_operation_destroy(o->join_op);
    ex_sender_release(o->join);
    for (unsigned j = 0; j < o->n; j++) ex_sender_release(o->child[j]);
    ex_error e = (o->flags & SC_COUNTING) ? ex_counting_scope_destroy(&o->scope.counting)
                                          : ex_simple_counting_scope_destroy(&o->scope.simple);
    if (e.code) sg_cb_fail(o->node, "a scope could not be destroyed after its join completed", (size_t)e.code);
}

static const ex_operation_vtable scope_op_vt = { scope_start, scope_op_destroy };

static ex_error scope_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const scope_sender *ss = (const scope_sender *)s;
    scope_op *o = storage;
    const g_node *nd = &G.g.nodes[ss->node];
    o->base.vt = &scope_op_vt;
    o->r = r;
    o->node = ss->node;
    o->n = ss->n;
    o->flags = nd->op;
    o->spawn_error = ex_ok();
    ex_env_pair_init(&o->join_env, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler()), ex_env_empty());
    ex_error e = (o->flags & SC_COUNTING) ? ex_counting_scope_init(&o->scope.counting)
                                          : ex_simple_counting_scope_init(&o->scope.simple);
    if (e.code) return e;
    o->join = (o->flags & SC_COUNTING) ? ex_counting_scope_join(&o->scope.counting)
                                       : ex_simple_counting_scope_join(&o->scope.simple);
    e = ex_sender_status(o->join);
    if (!e.code) e = ex_connect(o->join, (ex_receiver){ &scope_join_vt, o }, o->join_storage, sizeof o->join_storage, &o->join_op);
    if (e.code) {
        ex_sender_release(o->join);
        if (o->flags & SC_COUNTING) (void)ex_counting_scope_destroy(&o->scope.counting);
        else (void)ex_simple_counting_scope_destroy(&o->scope.simple);
        return e;
    }
    for (unsigned j = 0; j < o->n; j++) o->child[j] = ex_sender_retain(ss->child[j]);
    return ex_ok();
}

static void scope_sender_destroy(ex_sender *s) {
    scope_sender *ss = (scope_sender *)s;
    for (unsigned j = 0; j < ss->n; j++) ex_sender_release(ss->child[j]);
}

static const ex_sender_vtable scope_vt = { "fuzz_scope", scope_connect, NULL, scope_sender_destroy, NULL };

ex_sender *sg_build_scope(unsigned i, ex_sender **memo) {
    const g_node *nd = &G.g.nodes[i];
    ex_sender *c[3] = { NULL, NULL, NULL };
    for (unsigned j = 0; j < nd->nchild; j++) c[j] = sg_build(nd->child[j], memo);
    ex_sender *s = ex_sender_alloc(&scope_vt, sizeof(scope_sender));
    if (!s) return ex_reject(EX_ENOMEM, "fuzz_scope: out of memory", nd->nchild, c);
    scope_sender *ss = (scope_sender *)s;
    ss->node = i;
    ss->n = nd->nchild;
    for (unsigned j = 0; j < 3; j++) ss->child[j] = c[j];
    s->sigs = ex_sigs_none();
    (void)ex_sigs_add_value(&s->sigs, sg_int_sig(1));
    s->sigs.flags = EX_SIGS_ERROR;
    s->op_size = sizeof(scope_op);
    s->op_align = _Alignof(scope_op);
    return s;
}

/* ------------------------------------------------------------------ tasks */

static ex_task_result task_result(const ex_await_result *r) {
    switch (r->status) {
    case EX_AWAIT_VALUE: return ex_task_values(r->n, r->v);
    case EX_AWAIT_ERROR: return ex_task_with_error(r->error);
    default: return ex_task_stopped();
    }
}

/* A failed yield: a stopped task completes stopped whatever it returns. */
static ex_task_result task_failed(ex_task *t, ex_error e) {
    return ex_task_is_stopped(t) ? ex_task_stopped() : ex_task_with_error(e);
}

/* Awaits the leaf (multi-shot) child twice; the second result wins, and two
 * value results must agree. */
static void await_twice(ex_task *t, ex_sender *c, ex_await_result *r) {
    ex_await_into(t, ex_sender_retain(c), r);
    if (r->status != EX_AWAIT_VALUE) {
        ex_sender_release(c);
        return;
    }
    int64_t first[G_MAX_VALUES], second[G_MAX_VALUES];
    size_t n = r->n;
    if (!sg_ints_of(r->v, n, first)) sg_fn_inputs_bad();
    ex_await_into(t, c, r);
    if (r->status == EX_AWAIT_VALUE &&
        (r->n != n || !sg_ints_of(r->v, n, second) || memcmp(first, second, n * sizeof first[0]) != 0))
        atomic_store(&G.twice_differ, 1);
}

static void unbox_all(ex_await_result *r) {
    int64_t v[G_MAX_VALUES];
    if (!sg_ints_of(r->v, r->n, v)) sg_fn_inputs_bad();
    for (unsigned i = 0; i < r->n && i < G_MAX_VALUES; i++) r->v[i] = ex_int(v[i]);
}

/* TO_CHECK: the task's environment (read_env inside the task) agrees with
 * the task's own accessors and with its options. */
static void check_task_env(ex_task *t, const g_node *nd) {
    unsigned i = sg_node_index(nd);
    ex_env e = ex_task_env(t);
    ex_scheduler sch;
    if (!ex_get_scheduler(e, &sch) || !ex_scheduler_equal(sch, ex_task_scheduler(t)))
        sg_cb_fail(i, "ex_task_env's get_scheduler is not ex_task_scheduler", 0);
    if (ex_get_stop_token(e).src != ex_task_stop_token(t).src) sg_cb_fail(i, "ex_task_env's get_stop_token is not ex_task_stop_token", 0);
    if ((nd->topt & TO_ALLOC) && ex_get_allocator(e) != &sg_alt_alloc) sg_cb_fail(i, "ex_task_env's get_allocator is not the option's", 0);
    ex_value v;
    if ((nd->topt & TO_ENV) && (!ex_env_query(e, &sg_user_key, &v) || v.type != EX_T_INT || v.as.i != 100 + (int64_t)i))
        sg_cb_fail(i, "ex_task_env does not answer the user environment's key", 0);
}

/* The body of every task node: await the child (built with the graph, kept
 * in G.task_child), and with TK_TWO the second one after a value of the
 * first, and return what the last await gave. */
static ex_task_result task_body(ex_task *t, void *arg) {
    const g_node *nd = arg;
    unsigned i = sg_node_index(nd);
    ex_sender *c = atomic_exchange(&G.task_child[i], NULL), *c2 = atomic_exchange(&G.task_child2[i], NULL);
    ex_error e;
    if (nd->task & TK_OPTS && nd->topt & TO_CHECK) check_task_env(t, nd);
    if ((nd->task & TK_YIELD_BEFORE) && (e = ex_task_yield(t)).code) {
        ex_sender_release(c);
        ex_sender_release(c2);
        return task_failed(t, e);
    }
    ex_scheduler prev = ex_task_scheduler(t);
    if (nd->task & TK_CHANGE) prev = ex_change_coroutine_scheduler(t, sg_sched_of(nd->sched));
    ex_await_result r;
    if (nd->task & TK_TWICE) await_twice(t, c, &r);
    else ex_await_into(t, c, &r);
    if (c2 && r.status == EX_AWAIT_VALUE) ex_await_into(t, c2, &r);
    else ex_sender_release(c2);
    /* A scheduler change or a yield may await internally (a run loop's yield
     * is an await of ex_schedule) and free r's tuple copies: unbox first. */
    if ((nd->task & (TK_CHANGE | TK_YIELD_AFTER)) && r.status == EX_AWAIT_VALUE) unbox_all(&r);
    if (nd->task & TK_CHANGE) (void)ex_change_coroutine_scheduler(t, prev);
    if (nd->task & TK_OPTS && nd->topt & TO_CHECK) check_task_env(t, nd);
    if ((nd->task & TK_YIELD_AFTER) && (e = ex_task_yield(t)).code) return task_failed(t, e);
    return task_result(&r);
}

/* The options of TK_OPTS (graph.h, TO_*). */
static void task_options(unsigned i, const g_node *nd, ex_task_options *opt) {
    /* Not below 32 KiB: under ASan a malloc alone takes some 4 KiB of stack
     * (its interceptor unwinds into a buffer there), and a deep graph
     * awaited inline runs on the task's stack: 8 KiB overflowed. */
    static const size_t stacks[4] = { 0, 32 << 10, 48 << 10, 256 << 10 };
    opt->stack_size = stacks[nd->topt & TO_STACK_MASK];
    switch ((nd->topt >> TO_SALLOC_SHIFT) & 3) {
    case 1: opt->stack_allocator = &sg_guarded_alloc; break;
    case 2: opt->stack_allocator = ex_fault_allocator_get(&G.stack_fault); break;
    default: break;
    }
    if (nd->topt & TO_ALLOC) opt->allocator = &sg_alt_alloc;
    if (nd->topt & TO_ENV) {
        ex_env_pair_init(&G.task_env[i], &sg_user_key, ex_int(100 + (int64_t)i), ex_env_empty());
        opt->env = ex_env_of_pair(&G.task_env[i]);
    }
}

ex_sender *sg_build_task(unsigned i, ex_sender **memo) {
    const g_node *nd = &G.g.nodes[i];
    ex_task_options opt;
    memset(&opt, 0, sizeof opt);
    opt.affinity = (nd->task & TK_INLINE) ? EX_TASK_INLINE : EX_TASK_AFFINE;
    if (nd->task & TK_OPTS) task_options(i, nd, &opt);
    int a = (nd->task & TK_SIG) ? ref_value_arity(&G.g, nd->child[nd->nchild - 1]) : -1;
    if (a >= 0) {
        /* Ints, like every other signature here: the reference tells
         * signatures apart by arity only, and an (any, any) next to an
         * (int, int) from an upon_* function would be two signatures to
         * cexec.  With tuple boxing on this needs a typed reference. */
        memset(&G.task_sig[i], 0, sizeof G.task_sig[i]);
        G.task_sig[i].arity = (uint8_t)a;
        for (int k = 0; k < a; k++) G.task_sig[i].types[k] = G_BOXING ? EX_T_ANY : EX_T_INT;
        opt.value_sig = &G.task_sig[i];
    }
    ex_sender_release(atomic_exchange(&G.task_child[i], sg_build(nd->child[0], memo)));
    if (nd->nchild == 2) ex_sender_release(atomic_exchange(&G.task_child2[i], sg_build(nd->child[1], memo)));
    return ex_task_create(task_body, (void *)nd, &opt);
}
