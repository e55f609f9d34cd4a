/* SPDX-License-Identifier: MIT */
/* task.c - stackful coroutine tasks (see cexec/task.h): the sender, its
 * operation state, the environment inside a task and the body's results.
 * The rest of the task is in task_run.c, task_await.c and task_sched.c
 * (exi_task.h). */
#include <string.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "base/exi_thread.h"
#include "core/exi_sender.h"
#include "resources/exi_pool.h"
#include "task/exi_task.h"

/* --------------------------------------------------------- environment */

bool exi_task_env_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
    const ex_task *t = EXI_CONTAINER_OF(n, ex_task, env_node);
    if (key == &ex_key_get_scheduler) {
        *out = ex_sched_value(t->sched);
        return true;
    }
    if (key == &ex_key_get_stop_token) {
        *out = ex_token_value(ex_task_stop_token(t));
        return true;
    }
    if (key == &ex_key_get_allocator) {
        *out = ex_alloc_value(t->alloc);
        return true;
    }
    ex_env user = t->user_env.node ? t->user_env : ex_receiver_env(t->r);
    if (key == &ex_key_get_domain) {
        /* SCHED-ENV: the task's scheduler's domain, else the nearest the
         * environment it was started in names (as a region would say). */
        ex_scheduler by;
        const ex_domain *d = t->sched.vt && t->sched.vt->domain ? t->sched.vt->domain : ex_get_domain(user, &by);
        if (!d) return false;
        *out = ex_domain_value(d);
        return true;
    }
    return ex_env_query(ex_env_forward(user), key, out);
}

/* The awaited operation's environment: the task's, plus the nesting key
 * (exi_task_key_awaiting, defined in task_run.c, which asks for it). */
bool exi_task_await_env_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
    const ex_task *t = EXI_CONTAINER_OF(n, ex_task, await_env_node);
    if (key == &exi_task_key_awaiting) {
        *out = ex_ptr((void *)(uintptr_t)t);
        return true;
    }
    return exi_task_env_query(&t->env_node, key, out);
}

ex_env ex_task_env(const ex_task *t) {
    if (!t) return ex_env_empty();
    ex_env e = { &t->env_node, 0 };
    return e;
}

ex_scheduler ex_task_scheduler(const ex_task *t) {
    if (!t) return (ex_scheduler){ NULL, NULL };
    return t->sched;
}

/* The receiver's token itself: every token is an in-place one in C, so the
 * task needs no source of its own and no callback forwarding to it (which
 * P3552's task registers only when the receiver's token type differs). */
ex_stop_token ex_task_stop_token(const ex_task *t) { return t ? ex_get_stop_token(ex_receiver_env(t->r)) : ex_never_stop_token(); }
bool ex_task_is_stopped(const ex_task *t) { return t && t->stopped; }

/* ------------------------------------------------------------- results */

ex_task_result ex_task_values(size_t n, const ex_value *v) {
    ex_task_result r;  /* only what the completion reads is set */
    r.kind = EX_TASK_VALUE;
    r.error = ex_ok();
    if (n > EX_MAX_ARITY) {
        r.kind = EX_TASK_ERROR;
        r.n = 0;
        r.error = ex_err(EX_EINVAL, "ex_task_values: more values than EX_MAX_ARITY");
        return r;
    }
    r.n = (uint8_t)n;
    for (size_t i = 0; i < n; i++) r.v[i] = v[i];
    return r;
}

ex_task_result ex_task_with_error(ex_error e) {
    ex_task_result r;
    memset(&r, 0, sizeof r);
    r.kind = EX_TASK_ERROR;
    r.error = e;
    return r;
}

ex_task_result ex_task_stopped(void) {
    ex_task_result r;
    memset(&r, 0, sizeof r);
    r.kind = EX_TASK_STOPPED;
    return r;
}

/* --------------------------------------------------- operation and sender */

/* A task awaited directly by task p, dispatched: when the dispatch runs
 * it at once, inside p's start of the await (p's window open on this
 * thread), it runs nested on p's stack; queued and run later, on its own.
 * (Another thread never sees p's runner equal to itself, so a stale open
 * window there is harmless.) */
static void direct_execute(ex_work *w) {
    ex_task *c = EXI_CONTAINER_OF(w, ex_task, hop);
    ex_task *p = c->r.self;
    if (exi_load_rlx_u32(&p->direct_window) && exi_load_rlx_ptr((void *const *)&p->runner) == exi_thread_id())
        exi_task_run_awaited_child(c, p);
    else
        exi_task_run(c);
}

static void task_start(ex_operation *op) {
    ex_task *t = (ex_task *)op;
    ex_scheduler_retain(t->sched);  /* P3552's task_scheduler: the resource outlives the task */
    /* P3552: the body starts on an agent of the task's scheduler.  A task
     * awaited directly by another task starts at once (dispatch: no queue
     * round trip, like symmetric transfer), nested on the awaiting task's
     * stack when it may; one started by anything else (when_all, spawn) is
     * queued where it can be stolen, so sibling tasks run in parallel (and
     * nest when their parent waits for them, see help in task_await.c).
     * The stack is taken at the first run on it (exi_task_run): a task that
     * nests never has one. */
    exi_store_rlx_u32(&t->await_state, SUSPENDED);
    if (t->r.vt == &exi_task_await_receiver_vt) {
        ex_task *p = t->r.self;
        if (t->inline_affinity) {  /* runs where it is started: here */
            exi_task_run_awaited_child(t, p);
            return;
        }
        if (t->sched.vt->dispatch && ex_scheduler_equal(t->sched, p->sched)) {
            t->hop = (ex_work){ NULL, direct_execute, exi_task_hop_cancel };
            exi_store_rlx_u32(&p->direct_window, 1);
            ex_error e = ex_dispatch(t->sched, &t->hop);
            exi_store_rlx_u32(&p->direct_window, 0);
            if (e.code) exi_task_hop_failed(t, e, false);
            return;
        }
    } else if (!t->inline_affinity && t->sched.vt->post) {
        t->hop = (ex_work){ NULL, exi_task_hop_execute, exi_task_hop_cancel };
        if (!exi_pool_post_started(t->sched, &t->hop).code) return;
    }
    exi_task_resume_on_scheduler(t);
}

/* Also frees the deep copies of the last await's tuples, which the body
 * may have returned: the receiver reads them until it is done, and only
 * the operation's owner knows when that is. */
static void task_destroy(ex_operation *op) {
    ex_task *t = (ex_task *)op;
    release_hop(t);
    if (t->nested) ex_deallocate(t->alloc, t->nested, t->nested_size, alignof(ex_value));
    t->nested = NULL;
}

const ex_operation_vtable exi_task_op_vt = { task_start, task_destroy };

static ex_error task_connect(const ex_sender *s, ex_receiver r, void *storage) {
    task_sender *ts = (task_sender *)(uintptr_t)s;
    uint32_t fresh = 0;
    if (!exi_cas_u32(&ts->connected, &fresh, 1))
        return ex_err(EX_EINVAL, "ex_task: the task was connected before (a task is single-shot)");
    ex_task *t = storage;
    zero_fields(t);
    ex_env env = ex_receiver_env(r);
    if (ts->opt.affinity == EX_TASK_INLINE) {
        t->sched = ex_inline_scheduler();
        t->inline_affinity = true;
    } else if (!ex_get_scheduler(env, &t->sched) || !t->sched.vt) {
        exi_store_rlx_u32(&ts->connected, 0);
        return ex_err(EX_EINVAL, "ex_task: the receiver's environment has no scheduler (give one with "
                                 "ex_write_env or ex_starts_on, or create the task with EX_TASK_INLINE)");
    }
    task_fill(t, ts, r, ts->opt.allocator ? ts->opt.allocator : ex_get_allocator(env));
    return ex_ok();
}

const ex_sender_vtable exi_task_vt = { "ex_task_create", task_connect, NULL, NULL, NULL };

ex_sender *ex_task_create(ex_task_fn fn, void *arg, const ex_task_options *opt) {
    if (!fn) return ex_invalid_sender(EX_EINVAL, "ex_task_create: NULL function");
    if (opt && opt->affinity != EX_TASK_AFFINE && opt->affinity != EX_TASK_INLINE)
        return ex_invalid_sender(EX_EINVAL, "ex_task_create: bad affinity");
    if (opt && opt->stack_size && opt->stack_size < EX_TASK_STACK_MIN)
        return ex_invalid_sender(EX_EINVAL, "ex_task_create: stack_size below EX_TASK_STACK_MIN (4096 bytes)");
    if (opt && opt->stack_size > EX_TASK_STACK_MAX)  /* connect's size sums stay far from wrapping */
        return ex_invalid_sender(EX_EINVAL, "ex_task_create: stack_size above EX_TASK_STACK_MAX (1 GiB)");
    task_sender *s = (task_sender *)exi_sender_alloc_bare(&exi_task_vt, sizeof(task_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "ex_task_create: out of memory");
    s->fn = fn;
    s->arg = arg;
    s->connected = 0;
    if (opt) {
        s->opt = *opt;
        s->plain = !opt->stack_size && !opt->stack_allocator && !opt->allocator && !opt->env.node &&
                   opt->affinity == EX_TASK_AFFINE;
    } else {
        s->opt = (ex_task_options){ 0 };
        s->plain = true;
    }
    /* Field by field: building an ex_sigs aside and copying it stalls. */
    s->base.sigs.flags = EX_SIGS_ERROR | EX_SIGS_STOPPED;
    if (s->opt.value_sig) {
        s->base.sigs.values[0] = *s->opt.value_sig;
        s->base.sigs.nvalues = 1;
    } else {
        s->base.sigs.flags |= EX_SIGS_DYNAMIC;
    }
    s->base.op_size = sizeof(ex_task);
    s->base.op_align = alignof(ex_task);
    return &s->base;
}
