/* SPDX-License-Identifier: MIT */
/* churn_task.c - the churn's tasks (see churn.c): the steps a task body
 * takes between the cycle's resources, the checks of where it resumed,
 * and what its completion must be. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "churn.h"

/* ------------------------------------------------------------ uses and places */

bool closing_res(const cycle *cy, int x) { return __atomic_load_n(&cy->r[x].closing, __ATOMIC_SEQ_CST) != 0; }
static bool pool_closing(const cycle *cy) { return closing_res(cy, R_POOL); }

void unuse(cycle *cy, int x) { __atomic_fetch_sub(&cy->r[x].users, 1, __ATOMIC_SEQ_CST); }

/* A use of x, unless it is closing: the destroyer marks it closing, then
 * waits for its users (both sides sequentially consistent). */
bool try_use(cycle *cy, int x) {
    if (closing_res(cy, x)) return false;
    __atomic_fetch_add(&cy->r[x].users, 1, __ATOMIC_SEQ_CST);
    if (!closing_res(cy, x)) return true;
    unuse(cy, x);
    return false;
}

/* Whether task k may name x now, and how. */
static int access_res(ctask *k, int x) {
    if (k->use == x) return ACC_MINE;  /* it runs there under a use */
    if (try_use(k->cy, x)) return ACC_USE;
    if (has_holders(x) && (ld(&k->held) & (1u << x))) return ACC_MINE;  /* held: safe while being destroyed */
    return ACC_NO;
}

/* Runs on an agent of x. */
static bool on_res(const cycle *cy, int x) {
    switch (x) {
    case R_POOL: return ex_pool_current_worker(cy->pool) >= 0;
    case R_STRAND: return on_res(cy, cy->strand_under);
    case R_STC: return pthread_equal(pthread_self(), cy->stc_tid) != 0;
    default: return pthread_equal(pthread_self(), cy->ch->loop_th) != 0;
    }
}

/* Inside the strand: nobody else is (the counter), and what the previous
 * item wrote is visible (the plain counter, for TSan). */
static void strand_item(ctask *k, const char *what) {
    cycle *cy = k->cy;
    if (__atomic_fetch_add(&cy->r[R_STRAND].inside, 1, __ATOMIC_ACQ_REL) != 0)
        cviolation(k, "%s: another item runs inside the strand", what);
    cy->strand_items++;
    for (volatile int i = 0; i < 20; i++) { }
    __atomic_fetch_sub(&cy->r[R_STRAND].inside, 1, __ATOMIC_ACQ_REL);
}

/* The body's place after a resumption: on its scheduler's agent, inside
 * the strand when that is the scheduler. */
typedef struct place {
    int cur;    /* the resource of the task's scheduler */
    bool off;   /* carries on elsewhere: the hop to a pool going away was refused */
} place;

/* The calling thread, for messages: pool workers are named "churn-<i>" or
 * "soak-<i>"; the context's and the loop's threads are told apart. */
static const char *thread_name(const cycle *cy, char *buf, size_t size) {
    if (pthread_equal(pthread_self(), cy->stc_tid)) return "the context's thread";
    if (pthread_equal(pthread_self(), cy->ch->loop_th)) return "the loop's thread";
    if (pthread_equal(pthread_self(), cy->ch->self)) return "the churn thread";
    if (pthread_getname_np(pthread_self(), buf, size)) snprintf(buf, size, "?");
    return buf;
}

/* Whether resource x runs on the pool (the pool, or a strand over it). */
static bool pool_bound(const cycle *cy, int x) {
    return x == R_POOL || (x == R_STRAND && cy->strand_under == R_POOL);
}

static void check_here(ctask *k, ex_task *t, const place *p, const char *what) {
    __atomic_store_n(&k->cur, (uint32_t)p->cur, __ATOMIC_RELAXED);
    if (p->off || ex_task_is_stopped(t)) return;
    char name[32];
    if (!on_res(k->cy, p->cur))
        cviolation(k, "%s: resumed off its %s, on %s", what, res_names[p->cur], thread_name(k->cy, name, sizeof name));
    else if (p->cur == R_STRAND) strand_item(k, what);
}

/* ------------------------------------------------------------ the task's steps */

static int pick_res(uint64_t *rng) { return (int)rng_below(rng, R_COUNT); }

static void probe_done(ex_work *w) { st(&CONTAINER_OF(w, ctask, probe)->probe_queued, 0); }

/* Whether the closing pool refuses work already (its shutdown has begun):
 * a move there is then refused at once.  Asked by a task that holds it. */
static bool pool_refusing(ctask *k) {
    if (ld(&k->probe_queued)) return false;  /* the last probe is still queued: not yet */
    k->probe = (ex_work){ NULL, probe_done, probe_done };
    st(&k->probe_queued, 1);
    ex_error e = ex_post(k->cy->r[R_POOL].sch, &k->probe);
    if (e.code) st(&k->probe_queued, 0);
    return e.code == EX_ESHUTDOWN;
}

/* A move to a pool that a holder makes while the pool closes (back to it,
 * or to it from itself).  Such a move, queued just before the shutdown
 * drops it, used to leave the task running on the thread that shuts the
 * pool down while ex_task_scheduler named its old scheduler (found by the
 * churn; fixed: the task hops back, regression test in tests/lifetimes.c).
 * With --churn-move-race 0 the move is made only once the pool refuses
 * work, so the refusal comes at once, on the task's thread. */
static bool move_back_allowed(ctask *k, int x, int acc) {
    if (x != R_POOL || acc != ACC_MINE || W.cfg.churn_move_race) return true;
    return pool_refusing(k);
}

static void step_move(ctask *k, ex_task *t, place *p, uint64_t *rng) {
    cycle *cy = k->cy;
    int x = pick_res(rng);
    int acc = access_res(k, x);
    if (acc == ACC_NO || !move_back_allowed(k, x, acc)) {
        cbump(C_SKIPPED);
        return;
    }
    cbump(C_MOVES);
    bool was_stopped = ex_task_is_stopped(t);
    ex_scheduler before = ex_task_scheduler(t);
    if (!ex_scheduler_equal(before, cy->r[p->cur].sch))
        cviolation(k, "its scheduler is not the %s it moved to", res_names[p->cur]);
    ex_scheduler prev = ex_change_coroutine_scheduler(t, cy->r[x].sch);
    if (!ex_scheduler_equal(prev, before))
        cviolation(k, "the move to the %s returned another scheduler than its own", res_names[x]);
    ex_scheduler now = ex_task_scheduler(t);
    bool stopped = ex_task_is_stopped(t);
    if (ex_scheduler_equal(now, cy->r[x].sch) && x != p->cur) {
        if (was_stopped) cviolation(k, "a stopped task moved to the %s", res_names[x]);
        if (stopped && !pool_closing(cy))
            cviolation(k, "the move to the %s stopped the task with no pool going away", res_names[x]);
        if (has_holders(x)) __atomic_fetch_or(&k->held, 1u << x, __ATOMIC_RELEASE);
        if (k->use >= 0) unuse(cy, k->use);  /* it left that loop or context */
        k->use = -1;
        if (acc == ACC_USE) {
            if (has_holders(x)) unuse(cy, x);  /* held from now on */
            else k->use = x;                   /* it runs there: the use stays */
        }
        p->cur = x;
        p->off = false;
        check_here(k, t, p, "after a move");
        return;
    }
    if (acc == ACC_USE) unuse(cy, x);
    if (x == p->cur) {  /* a move to where it is: nothing happens */
        /* Unless its pool is going away: the shutdown may drop the move and
         * refuse the hop back, and the task carries on where it is. */
        if (pool_bound(cy, x) && pool_closing(cy) && !on_res(cy, x)) p->off = true;
        check_here(k, t, p, "after a move to its own scheduler");
        return;
    }
    cbump(C_MOVES_REFUSED);
    if (!ex_scheduler_equal(now, before))
        cviolation(k, "a refused move to the %s left the task on another scheduler", res_names[x]);
    if (!was_stopped && !(x == R_POOL && pool_closing(cy)))
        cviolation(k, "the move to the %s was refused with no pool going away", res_names[x]);
    /* A move dropped after the task left returns it to its scheduler; only
     * a scheduler that runs on the closing pool may refuse that too. */
    if (pool_bound(cy, p->cur) && pool_closing(cy) && !on_res(cy, p->cur)) p->off = true;
    check_here(k, t, p, "after a refused move");
}

typedef struct probe {
    ctask *k;
    int x;
    int64_t token;
    uint32_t ran;
} probe;

/* Runs where ex_schedule(x) completes: on x, inside the strand. */
static ex_error probe_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    probe *pr = ctx;
    pr->ran++;
    if (!on_res(pr->k->cy, pr->x)) cviolation(pr->k, "ex_schedule(%s) completed off it", res_names[pr->x]);
    else if (pr->x == R_STRAND) strand_item(pr->k, "a schedule probe");
    out[0] = ex_int(pr->token);
    return ex_ok();
}

/* A refusal or a drop: only where a pool is going away (the target, or the
 * task's own scheduler for the hop back). */
static void check_refusal(ctask *k, place *p, int x, bool was_stopped, ex_await_status status, ex_error e,
                          const char *what) {
    cycle *cy = k->cy;
    if (status == EX_AWAIT_STOPPED && was_stopped) return;  /* a stopped task's awaits stop at once */
    bool pool_involved = x == R_POOL || p->cur == R_POOL ||
                         (cy->strand_under == R_POOL && (x == R_STRAND || p->cur == R_STRAND));
    if (status == EX_AWAIT_ERROR && e.code != EX_ESHUTDOWN)
        cviolation(k, "%s %s: error %d (%s)", what, res_names[x], e.code, e.msg ? e.msg : "");
    else if (!pool_involved || !pool_closing(cy))
        cviolation(k, "%s %s: %s with no pool going away", what, res_names[x],
                   status == EX_AWAIT_ERROR ? "refused" : "stopped");
    if (status == EX_AWAIT_ERROR && p->cur == R_POOL) p->off = true;  /* the hop back was refused, or will be */
}

static void step_sched(ctask *k, ex_task *t, place *p, uint64_t *rng) {
    int x = pick_res(rng);
    int acc = access_res(k, x);
    if (acc == ACC_NO) {
        cbump(C_SKIPPED);
        return;
    }
    cbump(C_SCHEDS);
    bool was_stopped = ex_task_is_stopped(t);
    probe pr = { k, x, (int64_t)rng_below(rng, 1u << 20), 0 };
    ex_sender *s = ex_then(ex_schedule(k->cy->r[x].sch), probe_fn, &pr, EX_SIG0, EX_SIG(EX_T_INT));
    ex_await_result r = ex_await(t, s);
    if (acc == ACC_USE) unuse(k->cy, x);
    if (r.status == EX_AWAIT_VALUE) {
        if (r.n != 1 || r.v[0].type != EX_T_INT || r.v[0].as.i != pr.token || pr.ran != 1)
            cviolation(k, "ex_schedule(%s) gave a wrong value (probe ran %u times)", res_names[x], pr.ran);
        check_here(k, t, p, "after ex_schedule");
        return;
    }
    cbump(C_SCHED_REFUSED);
    if (pr.ran > 1) cviolation(k, "a probe on the %s ran %u times", res_names[x], pr.ran);
    check_refusal(k, p, x, was_stopped, r.status, r.error, "awaiting ex_schedule on the");
    check_here(k, t, p, "after a refused ex_schedule");
}

static void step_yield(ctask *k, ex_task *t, place *p) {
    cbump(C_YIELDS);
    bool was_stopped = ex_task_is_stopped(t);
    ex_error e = ex_task_yield(t);
    if (e.code == 0) {
        if (was_stopped) cviolation(k, "a stopped task yielded");
    } else if (e.code == EX_ECANCELED) {
        if (!was_stopped && !pool_closing(k->cy)) cviolation(k, "ex_task_yield: dropped with no pool going away");
    } else if (e.code == EX_ESHUTDOWN) {
        check_refusal(k, p, p->cur, was_stopped, EX_AWAIT_ERROR, e, "yielding on the");
    } else {
        cviolation(k, "ex_task_yield: error %d (%s)", e.code, e.msg ? e.msg : "");
    }
    check_here(k, t, p, "after ex_task_yield");
}

/* Awaits into_variant(just(a, b)); true with the tuple's values checked. */
static bool await_tuple(ctask *k, ex_task *t, place *p, int64_t a, int64_t b, ex_await_result *r) {
    bool was_stopped = ex_task_is_stopped(t);
    *r = ex_await(t, ex_into_variant(ex_just(ex_int(a), ex_int(b))));
    if (r->status == EX_AWAIT_VALUE) {
        const ex_tuple *tu = r->n == 1 && r->v[0].type == EX_T_TUPLE ? r->v[0].as.tuple : NULL;
        if (!tu || tu->n != 2 || tu->v[0].type != EX_T_INT || tu->v[0].as.i != a || tu->v[1].as.i != b) {
            cviolation(k, "into_variant(just(%lld, %lld)) gave a wrong tuple", (long long)a, (long long)b);
            return false;
        }
        check_here(k, t, p, "after a tuple");
        return true;
    }
    if (r->status == EX_AWAIT_STOPPED) {
        if (!was_stopped) cviolation(k, "into_variant(just) completed stopped in a task that was not stopped");
    } else if (!(p->off && r->error.code == EX_ESHUTDOWN)) {
        cviolation(k, "into_variant(just) failed: error %d (%s)", r->error.code, r->error.msg ? r->error.msg : "");
    }
    return false;
}

static void step_tuple(ctask *k, ex_task *t, place *p, uint64_t *rng) {
    cbump(C_TUPLES);
    int64_t a = rng_below(rng, 1u << 20), b = rng_below(rng, 1u << 20);
    ex_await_result r;
    if (await_tuple(k, t, p, a, b, &r)) k->acc = vmask(k->acc * 31 + a + 7 * b);
}

/* The body's last act: what the completion must be. */
static ex_task_result finish_body(ctask *k, ex_task *t, place *p) {
    ex_task_result res;
    if (ex_task_is_stopped(t)) {
        k->exp_kind = O_STOPPED;
        res = ex_task_void();
    } else if (k->with_error) {
        k->exp_kind = O_ERROR;
        k->exp_v = EX_EUSER + 60 + k->id % 8;
        res = ex_task_with_error(ex_err((int)k->exp_v, "soak churn: with_error"));
    } else {
        ex_await_result r;
        if (await_tuple(k, t, p, k->id, k->acc, &r)) {
            k->exp_kind = O_VALUE;
            res = ex_task_values(r.n, r.v);  /* the tuple's copy lives until the completion is delivered */
        } else if (r.status == EX_AWAIT_STOPPED || ex_task_is_stopped(t)) {
            k->exp_kind = O_STOPPED;
            res = ex_task_void();
        } else {
            k->exp_kind = O_ERROR;
            k->exp_v = r.error.code;
            res = ex_task_with_error(r.error);
        }
    }
    __atomic_store_n(&k->op, OP_DONE, __ATOMIC_RELAXED);
    st(&k->body_done, 1);
    return res;
}

ex_task_result churn_body(ex_task *t, void *arg) {
    ctask *k = arg;
    st(&k->body_ran, 1);
    cbump(C_BODIES);
    uint64_t rng = k->seed | 1;
    place p = { k->start, false };
    check_here(k, t, &p, "at the start");
    uint32_t steps = 2 + rng_below(&rng, MAX_STEPS - 1);
    for (uint32_t i = 0; i < steps; i++) {
        __atomic_store_n(&k->step, i, __ATOMIC_RELAXED);
        uint32_t r = rng_below(&rng, 100);
        int op = r < 30 ? OP_MOVE : r < 60 ? OP_SCHED : r < 72 ? OP_YIELD : OP_TUPLE;
        __atomic_store_n(&k->op, (uint32_t)op, __ATOMIC_RELAXED);
        switch (op) {
        case OP_MOVE: step_move(k, t, &p, &rng); break;
        case OP_SCHED: step_sched(k, t, &p, &rng); break;
        case OP_YIELD: step_yield(k, t, &p); break;
        default: step_tuple(k, t, &p, &rng); break;
        }
    }
    return finish_body(k, t, &p);
}

/* ------------------------------------------------------------ completions */

static bool value_matches(const ctask *k, const ex_value *v, size_t n) {
    const ex_tuple *tu = n == 1 && v[0].type == EX_T_TUPLE ? v[0].as.tuple : NULL;
    return tu && tu->n == 2 && tu->v[0].type == EX_T_INT && tu->v[0].as.i == (int64_t)k->id && tu->v[1].as.i == k->acc;
}

/* A task whose body never ran: its start could not reach a pool going away. */
static void check_unrun(ctask *k, int kind, int64_t code) {
    cbump(C_UNRUN);
    bool pool_start = k->start == R_POOL || (k->start == R_STRAND && k->cy->strand_under == R_POOL);
    bool allowed = kind == O_STOPPED || (kind == O_ERROR && code == EX_ESHUTDOWN);
    if (!allowed || !pool_start || !pool_closing(k->cy))
        cviolation(k, "completed (%d, %lld) without running its body", kind, (long long)code);
}

static void check_outcome_of(ctask *k, int kind, int64_t code, const ex_value *v, size_t n) {
    if (!ld(&k->body_ran)) {
        check_unrun(k, kind, code);
        return;
    }
    if (!ld(&k->body_done)) {
        cviolation(k, "completed while its body had not returned");
        return;
    }
    if (kind != k->exp_kind) cviolation(k, "completed with %d, its body expected %d", kind, k->exp_kind);
    else if (kind == O_ERROR && code != k->exp_v)
        cviolation(k, "completed with error %lld, expected %lld", (long long)code, (long long)k->exp_v);
    else if (kind == O_VALUE && !value_matches(k, v, n)) cviolation(k, "completed with a wrong tuple");
}

/* The task's completion (receiver or launch handler): exactly once.  Its
 * last touches release the task's use and the cycle's count. */
static void ctask_done(ctask *k, int kind, int64_t code, const ex_value *v, size_t n) {
    if (__atomic_fetch_add(&k->completions, 1, __ATOMIC_ACQ_REL) != 0) {
        cviolation(k, "completed twice");
        return;
    }
    check_outcome_of(k, kind, code, v, n);
    cbump(kind == O_VALUE ? C_VALUE : kind == O_ERROR ? C_ERROR : C_STOPPED);
    cbump(C_COMPLETED);
    bump(&W.progress, 1);
    cycle *cy = k->cy;
    int use = k->use;
    k->use = -1;
    st(&k->completed, 1);
    if (use >= 0) unuse(cy, use);
    __atomic_fetch_sub(&cy->pending, 1, __ATOMIC_ACQ_REL);
}

void ctask_value(void *self, const ex_value *v, size_t n) { ctask_done(self, O_VALUE, 0, v, n); }
void ctask_error(void *self, ex_error e) { ctask_done(self, O_ERROR, e.code, NULL, 0); }
void ctask_stopped(void *self) { ctask_done(self, O_STOPPED, 0, NULL, 0); }
static ex_env c_env(void *self) { return ex_env_of_pair(&((ctask *)self)->env); }
const ex_receiver_vtable ctask_rcvr_vt = { ctask_value, ctask_error, ctask_stopped, c_env, NULL };

