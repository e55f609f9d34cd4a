/* churn.c - execution resources created and destroyed under running tasks
 * (issue 17: what keeps a resource alive; docs/RELIABILITY.md).
 *
 * Each churn thread runs cycles while a round lasts.  A cycle creates a
 * pool (1-2 workers), a single-thread context, a run loop (driven by the
 * churn's own loop thread) and a strand over the pool or over the context,
 * launches tasks on them (ex_task_launch into the cycle's counting scope,
 * or connect_alloc + start), which move between them
 * (ex_change_coroutine_scheduler), await ex_schedule on the others, yield
 * and await tuples, and destroys the four resources, one after the other
 * at random moments, while the tasks are away from them.  Launches go on
 * between the destroys, onto the resources still there.
 *
 * The rules the cycle keeps (and checks the library keeps):
 *  - A task holds every pool and strand it ran on until its completion has
 *    been delivered.  It may name them (move back, schedule there) even
 *    while they are being destroyed: the pool refuses (EX_ESHUTDOWN) or
 *    drops the work (the task is stopped), the strand keeps running.
 *    ex_pool_destroy returns, and ex_strand_destroy stops answering
 *    EX_EBUSY, only once every such task has completed (checked).
 *  - Anything else a task names (a run loop, a single-thread context, a
 *    pool or strand it never ran on) it names under a "use": a counter the
 *    destroyer waits for, after it has marked the resource closing (no new
 *    uses).  A task keeps a use of the run loop or context it runs on.  So
 *    a destroy waits for the tasks on the resource, not for the ones that
 *    left it, and no task touches a resource after it is gone.
 *  - A strand goes before the resource under it.
 * Checks: every launched task completes exactly once, with the outcome its
 * body recorded (its tuple (id, checksum), its error, or stopped when a
 * pool going away dropped its work); refusals and stops only where a pool
 * is going away; every resumption, move and probe on the right thread;
 * strand items exclusive; the churn's allocator empty after every cycle. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "soak.h"

#define CONTAINER_OF(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

enum { R_POOL, R_STRAND, R_STC, R_LOOP, R_COUNT };
static const char *res_names[R_COUNT] = { "pool", "strand", "context", "loop" };

/* Only pools and strands count holders (ex_scheduler_retain). */
static bool has_holders(int x) { return x == R_POOL || x == R_STRAND; }

enum { MAX_CTASKS = 24, MAX_STEPS = 14 };
enum { OP_MOVE, OP_SCHED, OP_YIELD, OP_TUPLE, OP_DONE };
static const char *op_names[] = { "move", "schedule", "yield", "tuple", "done" };
enum { ACC_NO, ACC_USE, ACC_MINE };  /* how a task may name a resource */
enum { PH_IDLE, PH_CREATE, PH_LAUNCH, PH_USERS, PH_DESTROY, PH_JOIN };
static const char *phase_names[] = { "idle",       "creating",  "launching", "waiting for users of",
                                      "destroying", "joining the scope" };

typedef struct resource {
    ex_scheduler sch;
    uint32_t closing;  /* atomic: destroy has begun, no new uses */
    uint32_t users;    /* atomic: tasks naming it under a use */
    uint32_t inside;   /* strand: items running inside it (atomic) */
    bool gone;
} resource;

struct cycle;

typedef struct ctask {
    struct cycle *cy;
    uint32_t id;
    uint64_t seed;
    int start;            /* the resource it is launched on */
    bool launch;          /* ex_task_launch, else connect_alloc + start */
    bool own_alloc;       /* its frames come from the churn's counting allocator */
    bool with_error;
    int use;              /* the run loop or context it runs on under a use, or -1 */
    ex_work probe;        /* posted to a closing pool: is its shutdown under way? */
    uint32_t probe_queued;  /* atomic: the probe is on the pool's queue */
    uint32_t held;        /* atomic: bit per pool / strand it ran on */
    uint32_t body_ran, body_done, completions, completed;  /* atomic */
    int exp_kind;         /* what the body expects (written before it returns) */
    int64_t exp_v, acc;
    uint32_t step, op, cur;  /* where the body is (relaxed; for the watchdog's dump) */
    ex_operation *opstate;   /* connect mode */
    ex_env_pair env;
} ctask;

typedef struct churn churn;

typedef struct cycle {
    churn *ch;
    uint64_t no, rng;
    resource r[R_COUNT];
    ex_pool *pool;
    ex_strand *strand;
    int strand_under;     /* R_POOL or R_STC */
    ex_single_thread_context *stc;
    pthread_t stc_tid;
    ex_run_loop *loop;
    ex_counting_scope scope;
    uint64_t strand_items;  /* plain: only strand items touch it (TSan checks the strand's ordering) */
    ctask tasks[MAX_CTASKS];
    uint32_t ntasks, launched;
    uint32_t pending;     /* atomic: launched, not completed */
    uint32_t phase, phase_res;  /* relaxed, for the dump */
} cycle;

struct churn {
    int id;
    pthread_t th, loop_th;
    pthread_t self;  /* th, as the churn thread itself stored it (messages) */
    /* the loop thread: runs the cycle's run loop until it is finished */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ex_run_loop *loop_next, *loop_ran;
    bool quit;
    ex_budget_allocator frames;  /* own_alloc tasks' frames and the strands */
    cycle cy;
    uint64_t cycles;
};

static churn *churns;

static uint32_t ld(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static void st(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static void cbump(int c) { bump(&W.churn[c], 1); }

static void cviolation(const ctask *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void cviolation(const ctask *k, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!k) {
        violation(NULL, "churn: %s", msg);
        return;
    }
    const cycle *cy = k->cy;
    violation(NULL, "churn %d cycle %llu (seed 0x%016llx, strand over the %s) task %u (%s on the %s%s, step %u): %s",
              cy->ch->id, (unsigned long long)cy->no, (unsigned long long)k->seed, res_names[cy->strand_under], k->id,
              k->launch ? "ex_task_launch" : "connect_alloc", res_names[k->start], k->own_alloc ? ", own allocator" : "",
              __atomic_load_n(&k->step, __ATOMIC_RELAXED), msg);
}

static void pause_us(long us) {
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ uses and places */

static bool closing_res(const cycle *cy, int x) { return __atomic_load_n(&cy->r[x].closing, __ATOMIC_SEQ_CST) != 0; }
static bool pool_closing(const cycle *cy) { return closing_res(cy, R_POOL); }

static void unuse(cycle *cy, int x) { __atomic_fetch_sub(&cy->r[x].users, 1, __ATOMIC_SEQ_CST); }

/* A use of x, unless it is closing: the destroyer marks it closing, then
 * waits for its users (both sides sequentially consistent). */
static bool try_use(cycle *cy, int x) {
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

static ex_task_result churn_body(ex_task *t, void *arg) {
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

static void c_value(void *self, const ex_value *v, size_t n) { ctask_done(self, O_VALUE, 0, v, n); }
static void c_error(void *self, ex_error e) { ctask_done(self, O_ERROR, e.code, NULL, 0); }
static void c_stopped(void *self) { ctask_done(self, O_STOPPED, 0, NULL, 0); }
static ex_env c_env(void *self) { return ex_env_of_pair(&((ctask *)self)->env); }
static const ex_receiver_vtable ctask_rcvr_vt = { c_value, c_error, c_stopped, c_env, NULL };

/* ------------------------------------------------------------ launching */

/* Launches task k on resource x (not closing: only the churn thread, which
 * is the destroyer, marks resources closing). */
static void launch_one(cycle *cy, ctask *k, int x) {
    churn *ch = cy->ch;
    uint64_t rng = k->seed ^ 0x5bd1e995u;
    k->held = k->body_ran = k->body_done = k->completions = k->completed = 0;
    k->start = x;
    k->launch = rng_below(&rng, 2) != 0;
    k->own_alloc = rng_below(&rng, 2) != 0;
    k->with_error = rng_below(&rng, 10) == 0;
    k->acc = (int64_t)k->id;
    k->use = -1;
    if (!try_use(cy, x)) {
        cviolation(k, "the %s is closing at its launch", res_names[x]);
        return;
    }
    if (has_holders(x)) __atomic_fetch_or(&k->held, 1u << x, __ATOMIC_RELAXED);  /* from its start */
    else k->use = x;
    ex_task_options o;
    memset(&o, 0, sizeof o);
    const ex_allocator *own = ex_budget_allocator_get(&ch->frames);
    if (k->own_alloc && k->launch) o.allocator = own;
    ex_sender *s = ex_task_create(churn_body, k, &o);
    __atomic_fetch_add(&cy->pending, 1, __ATOMIC_ACQ_REL);  /* it may complete before the launch returns */
    ex_error e;
    if (k->launch) {
        ex_task_handlers h = { c_value, c_error, c_stopped, k };
        e = ex_task_launch(ex_counting_scope_token(&cy->scope), cy->r[x].sch, s, &h);
    } else {
        ex_env_pair_init(&k->env, &ex_key_get_scheduler, ex_sched_value(cy->r[x].sch), ex_env_empty());
        if (k->own_alloc) {
            k->env.key2 = &ex_key_get_allocator;
            k->env.value2 = ex_alloc_value(own);
        }
        ex_receiver r = { &ctask_rcvr_vt, k };
        e = ex_connect_alloc(s, r, &k->opstate);
        ex_sender_release(s);
        if (!e.code) ex_start(k->opstate);
    }
    if (e.code) {  /* nothing here may fail but memory, which does not run short */
        cviolation(k, "launching failed: %s (%d)", e.msg ? e.msg : "", e.code);
        k->opstate = NULL;
        __atomic_store_n(&k->held, 0, __ATOMIC_RELAXED);
        st(&k->completed, 1);
        __atomic_fetch_sub(&cy->pending, 1, __ATOMIC_ACQ_REL);
        if (k->use >= 0) unuse(cy, k->use);
        if (has_holders(x)) unuse(cy, x);
        return;
    }
    cy->launched++;
    cbump(C_LAUNCHED);
    if (has_holders(x)) unuse(cy, x);  /* the started task holds it */
}

static void launch_batch(cycle *cy, uint32_t n) {
    __atomic_store_n(&cy->phase, PH_LAUNCH, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < n && cy->launched < cy->ntasks; i++) {
        int open[R_COUNT], nopen = 0;
        for (int x = 0; x < R_COUNT; x++)
            if (!closing_res(cy, x)) open[nopen++] = x;
        if (!nopen) return;
        ctask *k = &cy->tasks[cy->launched];
        uint32_t before = cy->launched;
        launch_one(cy, k, open[rng_below(&cy->rng, (uint32_t)nopen)]);
        if (cy->launched == before) return;  /* refused (a violation): keep the rest simple */
    }
}

/* ------------------------------------------------------------ the loop thread */

/* Runs each cycle's run loop until the cycle finishes it. */
static void *loop_main(void *arg) {
    churn *ch = arg;
    pthread_mutex_lock(&ch->mu);
    for (;;) {
        while (!ch->loop_next && !ch->quit) pthread_cond_wait(&ch->cv, &ch->mu);
        ex_run_loop *l = ch->loop_next;
        if (!l) break;
        ch->loop_next = NULL;
        pthread_mutex_unlock(&ch->mu);
        ex_error e = ex_run_loop_run(l);
        if (e.code) cviolation(NULL, "ex_run_loop_run failed: %s (%d)", e.msg ? e.msg : "", e.code);
        pthread_mutex_lock(&ch->mu);
        ch->loop_ran = l;
        pthread_cond_broadcast(&ch->cv);
    }
    pthread_mutex_unlock(&ch->mu);
    return NULL;
}

/* ------------------------------------------------------------ creating, destroying */

static void fatal(ex_error e, const char *what) {
    if (!e.code) return;
    fprintf(stderr, "soak: churn: %s failed: %s (%d)\n", what, e.msg ? e.msg : "", e.code);
    exit(2);
}

static void cycle_create(cycle *cy) {
    churn *ch = cy->ch;
    __atomic_store_n(&cy->phase, PH_CREATE, __ATOMIC_RELAXED);
    ex_pool_config pc = { .threads = 1 + rng_below(&cy->rng, 2), .name_prefix = "churn" };
    pc.spin_rounds = rng_below(&cy->rng, 2) ? 4 : 0;  /* 0: the default (256) */
    fatal(ex_pool_create(&pc, &cy->pool), "ex_pool_create");
    cy->stc = malloc(sizeof *cy->stc);
    cy->loop = malloc(sizeof *cy->loop);
    if (!cy->stc || !cy->loop) fatal(ex_err(EX_ENOMEM, "malloc"), "allocating a context and a loop");
    fatal(ex_single_thread_context_init(cy->stc), "ex_single_thread_context_init");
    cy->stc_tid = ex_single_thread_context_thread_id(cy->stc);
    fatal(ex_run_loop_init(cy->loop), "ex_run_loop_init");
    pthread_mutex_lock(&ch->mu);
    ch->loop_next = cy->loop;
    pthread_cond_broadcast(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
    cy->r[R_POOL].sch = ex_pool_scheduler(cy->pool);
    cy->r[R_STC].sch = ex_single_thread_context_scheduler(cy->stc);
    cy->r[R_LOOP].sch = ex_run_loop_scheduler(cy->loop);
    cy->strand_under = rng_below(&cy->rng, 2) ? R_POOL : R_STC;
    fatal(ex_strand_create(cy->r[cy->strand_under].sch, ex_budget_allocator_get(&ch->frames), &cy->strand),
          "ex_strand_create");
    cy->r[R_STRAND].sch = ex_strand_scheduler(cy->strand);
    fatal(ex_counting_scope_init(&cy->scope), "ex_counting_scope_init");
    cbump(C_POOLS);
}

static void set_phase(cycle *cy, uint32_t ph, int x) {
    __atomic_store_n(&cy->phase_res, (uint32_t)x, __ATOMIC_RELAXED);
    __atomic_store_n(&cy->phase, ph, __ATOMIC_RELAXED);
    bump(&W.progress, 1);
}

/* Marks x closing and waits until no task names it under a use. */
static void close_res(cycle *cy, int x) {
    set_phase(cy, PH_USERS, x);
    __atomic_store_n(&cy->r[x].closing, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&cy->r[x].users, __ATOMIC_SEQ_CST)) pause_us(20);
    set_phase(cy, PH_DESTROY, x);
}

/* Launched tasks that ran on x (a pool or strand) and have not completed. */
static uint32_t holders_running(cycle *cy, int x) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < cy->launched; i++)
        if ((ld(&cy->tasks[i].held) & (1u << x)) && !ld(&cy->tasks[i].completed)) n++;
    return n;
}

/* Once x's destroy succeeded, every task that held it had completed. */
static void check_holders_done(cycle *cy, int x, const char *what) {
    for (uint32_t i = 0; i < cy->launched; i++) {
        ctask *k = &cy->tasks[i];
        if ((ld(&k->held) & (1u << x)) && !ld(&k->completed))
            cviolation(k, "%s returned while this task, which ran on it, had not completed", what);
    }
}

static void destroy_pool(cycle *cy) {
    uint32_t away = holders_running(cy, R_POOL);
    if (away) {
        cbump(C_POOL_AWAY);
        bump(&W.churn[C_AWAY_TASKS], away);
    }
    ex_error e = ex_pool_destroy(cy->pool);
    if (e.code) cviolation(NULL, "ex_pool_destroy failed: %s (%d)", e.msg ? e.msg : "", e.code);
    check_holders_done(cy, R_POOL, "ex_pool_destroy");
    cy->pool = NULL;
}

/* EX_EBUSY while a task holds the strand or items run: retried. */
static void destroy_strand(cycle *cy) {
    bool held_seen = false;
    for (;;) {
        bool held = holders_running(cy, R_STRAND) != 0;
        ex_error e = ex_strand_destroy(cy->strand);
        if (e.code == 0) break;
        if (e.code != EX_EBUSY) {
            cviolation(NULL, "ex_strand_destroy failed: %s (%d)", e.msg ? e.msg : "", e.code);
            return;
        }
        cbump(C_STRAND_EBUSY);
        if (held && !held_seen) cbump(C_STRAND_HELD);
        held_seen |= held;
        pause_us(20);
    }
    check_holders_done(cy, R_STRAND, "ex_strand_destroy");
    cy->strand = NULL;
}

static void destroy_stc(cycle *cy) {
    ex_error e = ex_single_thread_context_destroy(cy->stc);
    if (e.code) cviolation(NULL, "ex_single_thread_context_destroy failed: %s (%d)", e.msg ? e.msg : "", e.code);
    free(cy->stc);
    cy->stc = NULL;
}

static void destroy_loop(cycle *cy) {
    churn *ch = cy->ch;
    ex_run_loop_finish(cy->loop);
    pthread_mutex_lock(&ch->mu);
    while (ch->loop_ran != cy->loop) pthread_cond_wait(&ch->cv, &ch->mu);
    ch->loop_ran = NULL;
    pthread_mutex_unlock(&ch->mu);
    ex_error e = ex_run_loop_destroy(cy->loop);
    if (e.code) cviolation(NULL, "ex_run_loop_destroy after its run returned failed: %s (%d)", e.msg ? e.msg : "", e.code);
    free(cy->loop);
    cy->loop = NULL;
}

static void destroy_res(cycle *cy, int x) {
    close_res(cy, x);
    switch (x) {
    case R_POOL: destroy_pool(cy); break;
    case R_STRAND: destroy_strand(cy); break;
    case R_STC: destroy_stc(cy); break;
    default: destroy_loop(cy); break;
    }
    cy->r[x].gone = true;
}

/* A random order in which the strand goes before the resource under it. */
static void destroy_order(cycle *cy, int order[R_COUNT]) {
    for (int i = 0; i < R_COUNT; i++) order[i] = i;
    for (int i = R_COUNT - 1; i > 0; i--) {
        int j = (int)rng_below(&cy->rng, (uint32_t)i + 1), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    int is = 0, iu = 0;
    for (int i = 0; i < R_COUNT; i++) {
        if (order[i] == R_STRAND) is = i;
        if (order[i] == cy->strand_under) iu = i;
    }
    if (iu < is) {
        order[iu] = R_STRAND;
        order[is] = cy->strand_under;
    }
}

/* ------------------------------------------------------------ a cycle */

static void join_cycle_scope(cycle *cy) {
    set_phase(cy, PH_JOIN, 0);
    ex_counting_scope_close(&cy->scope);
    ex_result r = ex_sync_wait(ex_counting_scope_join(&cy->scope));
    if (r.disposition != EX_DISP_VALUE) cviolation(NULL, "the cycle's scope join completed with %d", (int)r.disposition);
    ex_result_destroy(&r);
    ex_error e = ex_counting_scope_destroy(&cy->scope);
    if (e.code) cviolation(NULL, "destroying the cycle's scope failed: %d", e.code);
}

/* Everything is gone: every launched task completed exactly once, and
 * what it allocated is back (the connect-mode operations go now, into the
 * pool's parked arenas for those that ran on it). */
static void cycle_check(cycle *cy) {
    uint32_t pending = __atomic_load_n(&cy->pending, __ATOMIC_ACQUIRE);
    if (pending) cviolation(NULL, "cycle %llu: %u tasks never completed", (unsigned long long)cy->no, pending);
    for (uint32_t i = 0; i < cy->launched; i++) {
        ctask *k = &cy->tasks[i];
        if (ld(&k->completions) != 1) cviolation(k, "completed %u times", ld(&k->completions));
        if (ld(&k->probe_queued)) cviolation(k, "its probe of the pool was neither run nor cancelled");
        if (k->opstate) ex_operation_free(k->opstate);
        k->opstate = NULL;
    }
    ex_alloc_stats s;
    ex_allocator_stats(ex_budget_allocator_get(&cy->ch->frames), &s);
    if (s.bytes_in_use || s.allocations != s.frees)
        cviolation(NULL, "cycle %llu: the churn's allocator holds %llu bytes (%llu allocations, %llu frees)",
                   (unsigned long long)cy->no, (unsigned long long)s.bytes_in_use, (unsigned long long)s.allocations,
                   (unsigned long long)s.frees);
}

static void cycle_run(churn *ch) {
    cycle *cy = &ch->cy;
    memset(cy, 0, sizeof *cy);
    cy->ch = ch;
    cy->no = ch->cycles++;
    cy->rng = mix64(W.cfg.seed ^ mix64(0xC4A1100000000ull ^ ((uint64_t)(unsigned)ch->id << 40) ^ cy->no)) | 1;
    cycle_create(cy);
    cy->ntasks = 4 + rng_below(&cy->rng, MAX_CTASKS - 3);
    for (uint32_t i = 0; i < cy->ntasks; i++) {
        cy->tasks[i].cy = cy;
        cy->tasks[i].id = i;
        cy->tasks[i].seed = rng_next(&cy->rng);
        cy->tasks[i].use = -1;
    }
    int order[R_COUNT];
    destroy_order(cy, order);
    launch_batch(cy, cy->ntasks / 2 + rng_below(&cy->rng, cy->ntasks / 2 + 1));
    for (int i = 0; i < R_COUNT; i++) {
        pause_us((long)rng_below(&cy->rng, 1500));
        destroy_res(cy, order[i]);
        if (i + 1 < R_COUNT) launch_batch(cy, rng_below(&cy->rng, cy->ntasks - cy->launched + 1));
    }
    join_cycle_scope(cy);
    cycle_check(cy);
    set_phase(cy, PH_IDLE, 0);
    cbump(C_CYCLES);
}

/* ------------------------------------------------------------ the churn threads */

static void *churn_main(void *arg) {
    churn *ch = arg;
    ch->self = pthread_self();
    uint32_t seen = 0;
    while (round_wait(&seen)) {
        while (!round_closing()) cycle_run(ch);
        round_leave(seen);
    }
    return NULL;
}

void churn_start(void) {
    if (!W.cfg.churn) return;
    churns = calloc(W.cfg.churn, sizeof *churns);
    if (!churns) fatal(ex_err(EX_ENOMEM, "calloc"), "allocating the churn threads");
    for (unsigned i = 0; i < W.cfg.churn; i++) {
        churn *ch = &churns[i];
        ch->id = (int)i;
        ex_budget_allocator_init(&ch->frames, ex_libc_allocator(), (size_t)1 << 30);
        pthread_mutex_init(&ch->mu, NULL);
        pthread_cond_init(&ch->cv, NULL);
        if (pthread_create(&ch->loop_th, NULL, loop_main, ch) || pthread_create(&ch->th, NULL, churn_main, ch))
            fatal(ex_err(EX_EAGAIN, "pthread_create"), "starting a churn thread");
    }
}

/* After the rounds (W.quit): the churn threads are idle between cycles. */
void churn_stop(void) {
    for (unsigned i = 0; i < W.cfg.churn; i++) {
        churn *ch = &churns[i];
        pthread_join(ch->th, NULL);
        pthread_mutex_lock(&ch->mu);
        ch->quit = true;
        pthread_cond_broadcast(&ch->cv);
        pthread_mutex_unlock(&ch->mu);
        pthread_join(ch->loop_th, NULL);
        pthread_cond_destroy(&ch->cv);
        pthread_mutex_destroy(&ch->mu);
    }
    free(churns);
    churns = NULL;
}

void dump_churn(void) {
    for (unsigned i = 0; churns && i < W.cfg.churn; i++) {
        cycle *cy = &churns[i].cy;
        uint32_t ph = __atomic_load_n(&cy->phase, __ATOMIC_RELAXED), x = __atomic_load_n(&cy->phase_res, __ATOMIC_RELAXED);
        fprintf(stderr, "  churn %u cycle %llu: %s%s%s, %u of %u tasks launched, %u not completed; strand over the %s\n", i,
                (unsigned long long)cy->no, phase_names[ph], ph == PH_USERS || ph == PH_DESTROY ? " the " : "",
                ph == PH_USERS || ph == PH_DESTROY ? res_names[x] : "", cy->launched, cy->ntasks,
                __atomic_load_n(&cy->pending, __ATOMIC_RELAXED), res_names[cy->strand_under]);
        for (int r = 0; r < R_COUNT; r++)
            fprintf(stderr, "    %s: closing %u, users %u, gone %d\n", res_names[r],
                    __atomic_load_n(&cy->r[r].closing, __ATOMIC_RELAXED), __atomic_load_n(&cy->r[r].users, __ATOMIC_RELAXED),
                    cy->r[r].gone);
        for (uint32_t j = 0; j < cy->launched; j++) {
            ctask *k = &cy->tasks[j];
            if (ld(&k->completed)) continue;
            uint32_t op = __atomic_load_n(&k->op, __ATOMIC_RELAXED);
            fprintf(stderr, "    task %u (%s on the %s, seed 0x%016llx): body ran %u, step %u (%s), on the %s, held %#x\n",
                    k->id, k->launch ? "launched" : "connected", res_names[k->start], (unsigned long long)k->seed,
                    ld(&k->body_ran), __atomic_load_n(&k->step, __ATOMIC_RELAXED), op_names[op < 5 ? op : 4],
                    res_names[__atomic_load_n(&k->cur, __ATOMIC_RELAXED) % R_COUNT], ld(&k->held));
        }
    }
}
