/* task.c - stackful coroutine tasks (see cexec/task.h).
 *
 * The operation state is the task's control block; the body runs on a
 * fiber (exi_fiber.h).  Whoever runs the task (start, or the completion
 * that resumes it) switches from its own stack to the fiber and gets
 * control back when the task suspends or finishes, with a note saying
 * which.  Suspension is published only after the switch away has finished
 * (by the resumer, on its own stack): a completion on another thread can
 * then never switch to a fiber whose state is still being saved.
 *
 * The await handshake, on `await_state`:
 *   AWAITING  --completion, fiber not yet switched away--> DONE
 *   AWAITING  --resumer, after the switch away---------> SUSPENDED
 *   SUSPENDED --completion: hop to the scheduler, resume-> DONE
 * A completion that finds AWAITING only records its result: the fiber (or
 * its resumer, whose CAS then fails) sees DONE and carries on without a
 * round trip through any queue.
 *
 * Nesting (TBB's "help while waiting", safe for stackful tasks): a task
 * about to suspend in an await first takes back, from the bottom of its
 * worker's deque, child tasks that this await's operation queued and that
 * no thief took yet, and runs each as a plain call on its own stack
 * (run_nested) instead of on a stack of the child's own.  Only children
 * the awaiting task waits for anyway qualify (their receiver environment
 * leads back to this await), so running them underneath delays nothing
 * the parent could do; a child that suspends suspends the whole stack (the
 * "carrier") and resumes it wherever it resumes.  The switch notes name
 * the task that suspended, since it may be any task on the carrier. */
#include <sched.h>
#include <stdlib.h>

#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "base/exi_thread.h"
#include "compose/exi_join.h"
#include "compose/exi_when_all.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"
#include "resources/exi_pool.h"
#include "task/exi_fiber.h"
#include "task/exi_stack.h"

enum { AWAITING, SUSPENDED, DONE };

/* A switch away from a carrier says why: its owner's body returned, or
 * (any other value) the ex_task that suspended in an await. */
#define NOTE_FINISHED ((void *)(uintptr_t)1)

/* Stack kept free under a nested child besides its stack_size: the
 * nesting machinery's frames. */
#define NEST_MARGIN 2048
/* The default stacks map this many times the stack_size a task asks for
 * (address space only: pages are committed when touched), so children
 * can run nested on it with their whole stack_size still below them. */
#define STACK_RESERVE_FACTOR 4

/* What lives above the usable part of the task's stack, in the same block
 * (which is why the control block stays small enough for a when_all of
 * tasks to fit in its parent's await area): the schedule operation of the
 * hop back, and the awaited operation. */
typedef struct task_area {
    alignas(max_align_t) unsigned char hop[EX_SCHEDULE_OP_INLINE];
    alignas(max_align_t) unsigned char await[];  /* await_size bytes */
} task_area;

/* task_fill_as rounds and adds stack sizes unchecked: ex_task_create keeps
 * stack_size at most EX_TASK_STACK_MAX, far below where they would wrap. */
_Static_assert(EX_TASK_STACK_MAX <= (SIZE_MAX - 15 - sizeof(task_area) - EX_TASK_AWAIT_INLINE) / STACK_RESERVE_FACTOR,
               "a task's stack block size cannot wrap");

typedef struct task_sender {
    ex_sender base;
    ex_task_fn fn;
    void *arg;
    ex_task_options opt;
    uint32_t connected;     /* single shot */
    bool plain;             /* opt asks for nothing but (at most) a value signature */
} task_sender;

struct ex_task {
    /* Set by connect, field by field. */
    ex_operation base;
    ex_receiver r;
    ex_task_fn fn;
    void *arg;
    ex_env user_env;                 /* the options' environment (node NULL: none) */
    const ex_allocator *alloc;       /* get_allocator inside the task */
    ex_scheduler sched;
    size_t stack_size;               /* usable bytes mapped, a multiple of 16 */
    size_t stack_need;               /* the options' stack_size: what the body is promised */
    size_t block_size;               /* stack + area */
    size_t await_size;               /* bytes of area->await */
    const ex_allocator *stack_alloc;
    struct held_schedulers *left;    /* holds on schedulers the task moved away from (see take_holds) */
    ex_sig value_sig;                /* the declared value signature, when check_sig */
    ex_env_node env_node;            /* the environment inside the task */
    ex_env_node await_env_node;      /* the awaited operation's: env_node plus the nesting key */
    /* Zeroed by connect (ZERO_FROM .. ZERO_TO: a few vector stores). */
    bool inline_affinity;
    bool stopped;                    /* an await completed stopped */
    bool must_hop;                   /* this await must end on sched (a scheduler change) */
    bool started;                    /* the body has begun */
    bool nest_hop;                   /* a child awaited directly ran nested and ended elsewhere */
    bool off_sched;                  /* has carried on off its scheduler after a failed hop */
    bool sched_borrowed;             /* sched held by the awaiting task of its fork, not by it */
    bool check_sig;                  /* the options declared a value signature: values must match it */
    uint32_t await_state;
    uint32_t direct_window;          /* starting a directly awaited child here (relaxed) */
    void *nested;                    /* deep copies of the last await's tuples */
    size_t nested_size;
    ex_operation *await_op;          /* kept until the next await (borrowed values) */
    ex_sender *await_sender;
    void *await_buf;                 /* operations too big for the area */
    size_t await_cap;
    ex_operation *hop_op;            /* the hop back to the scheduler */
    void *hop_block;                 /* schedule operations bigger than area->hop */
    size_t hop_block_size;
    ex_task *carrier;                /* whose fiber runs this task: itself, or the task it is nested on */
    void *stack;                     /* own stack (take_stack), else NULL */
    task_area *area;                 /* at stack + stack_size, or in run_nested's frame */
    /* Initialised where first used. */
    exi_fiber *resumer;              /* the carrier's: the context to go back to (run) */
    const void *runner;              /* thread running the fiber, or that ran it last (relaxed; run) */
    unsigned char *await_area;       /* area->await, kept for the await path */
    const ex_task_result *result;    /* the body's, on its finished fiber's stack */
    ex_await_result *await_out;      /* the awaiting body's result, on the fiber's stack */
    exi_fiber fiber;                 /* initialised with an own stack only */
    uint32_t switches;               /* a carrier's: times any task on it switched away */
    struct fork_op *deferred;        /* a carrier's: forks on it holding children back (lazy) */
    ex_work hop;
    ex_work yield_work;              /* ex_task_yield's queued resumption */
};

#define ZERO_FROM offsetof(ex_task, inline_affinity)
#define ZERO_TO offsetof(ex_task, resumer)

/* Clears ZERO_FROM .. ZERO_TO with 16-byte stores: a memset of an
 * operation state of unknown alignment became `rep stos`, whose start-up
 * cost was a third of connect. */
typedef unsigned long long zero_chunk __attribute__((vector_size(16), aligned(8), may_alias));
_Static_assert(ZERO_TO - ZERO_FROM == 7 * sizeof(zero_chunk), "zero_fields stores 7 chunks");
static inline void zero_fields(ex_task *t) {
    /* Written out: GCC turns the loop back into memset. */
    zero_chunk *z = (zero_chunk *)(void *)((char *)t + ZERO_FROM), zero = { 0, 0 };
    z[0] = zero, z[1] = zero, z[2] = zero, z[3] = zero;
    z[4] = zero, z[5] = zero, z[6] = zero;
}

static void run(ex_task *t);
static void resume_on_scheduler(ex_task *t);

/* --------------------------------------------------------- environment */

static bool task_env_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
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
    return ex_env_query(ex_env_forward(user), key, out);
}

/* Answered only by the environment of an await's receiver, and forwarded
 * by the adaptors in between: a task whose receiver environment answers it
 * with P is part of the operation P awaits, which P waits for anyway. */
static const ex_key key_awaiting_task = { "cexec: awaiting task", true };

static bool await_env_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
    const ex_task *t = EXI_CONTAINER_OF(n, ex_task, await_env_node);
    if (key == &key_awaiting_task) {
        *out = ex_ptr((void *)(uintptr_t)t);
        return true;
    }
    return task_env_query(&t->env_node, key, out);
}

ex_env ex_task_env(const ex_task *t) {
    ex_env e = { &t->env_node, 0 };
    return e;
}

ex_scheduler ex_task_scheduler(const ex_task *t) { return t->sched; }

/* The receiver's token itself: every token is an in-place one in C, so the
 * task needs no source of its own and no callback forwarding to it (which
 * P3552's task registers only when the receiver's token type differs). */
ex_stop_token ex_task_stop_token(const ex_task *t) { return ex_get_stop_token(ex_receiver_env(t->r)); }
bool ex_task_is_stopped(const ex_task *t) { return t->stopped; }

/* ------------------------------------------------------ running the fiber */

static inline __attribute__((always_inline)) void release_await(ex_task *t) {
    if (t->await_op) ex_operation_destroy(t->await_op);
    t->await_op = NULL;
    exi_sender_release(t->await_sender);
    t->await_sender = NULL;
    if (t->nested) ex_deallocate(t->alloc, t->nested, t->nested_size, alignof(ex_value));
    t->nested = NULL;
}

static inline void release_hop(ex_task *t) {
    if (t->hop_op) ex_operation_destroy(t->hop_op);
    t->hop_op = NULL;
    if (t->hop_block) ex_deallocate(t->alloc, t->hop_block, t->hop_block_size, alignof(max_align_t));
    t->hop_block = NULL;
}

/* Holds.  A task holds every scheduler it has run on, from its start (or
 * from its move there) until its completion has been delivered: the
 * handle ex_change_coroutine_scheduler returns stays valid for the task's
 * whole life, and a resource whose allocator served the task's frames
 * cannot go away under the task's last frees (docs/design.md, "What keeps
 * a resource alive").  The current scheduler's hold is t->sched's (unless
 * borrowed from the awaiting task of a fork); the others live in `left`,
 * a libc block: it is freed after the resources' allocators are done with,
 * so it must not come from one of them. */
typedef struct held_schedulers {
    size_t n, cap;
    ex_scheduler s[];
} held_schedulers;

/* What finish() and abort_start() release after the completion, copied
 * out of the task, which the completion may destroy. */
typedef struct holds {
    ex_scheduler current;  /* vt NULL: none (borrowed) */
    held_schedulers *left;
} holds;

static holds take_holds(ex_task *t) {
    holds h = { t->sched_borrowed ? (ex_scheduler){ 0 } : t->sched, t->left };
    t->left = NULL;
    return h;
}

static void release_holds(holds h) {
    if (h.current.vt) ex_scheduler_release(h.current);
    if (!h.left) return;
    for (size_t i = 0; i < h.left->n; i++) ex_scheduler_release(h.left->s[i]);
    free(h.left);
}

/* Index of sch among the holds in `left`, or -1. */
static ptrdiff_t left_find(const ex_task *t, ex_scheduler sch) {
    if (!t->left) return -1;
    for (size_t i = 0; i < t->left->n; i++)
        if (ex_scheduler_equal(t->left->s[i], sch)) return (ptrdiff_t)i;
    return -1;
}

/* Room in `left` for one more hold.  False: no memory. */
static bool left_reserve(ex_task *t) {
    held_schedulers *l = t->left;
    if (l && l->n < l->cap) return true;
    size_t cap = l ? l->cap * 2 : 4;
    held_schedulers *g = realloc(l, sizeof *g + cap * sizeof g->s[0]);
    if (!g) return false;
    if (!l) g->n = 0;
    g->cap = cap;
    t->left = g;
    return true;
}

/* What start took besides the stack and the holds: the fiber's tool
 * state, the hop's operation and block (from the task's allocator). */
static void release_run(ex_task *t) {
    if (t->stack) exi_fiber_destroy(&t->fiber);
    release_hop(t);
}

/* The stack and the frame area above it (a nested task has neither). */
static void free_stack(ex_task *t) {
    if (t->stack) t->stack_alloc->deallocate(t->stack_alloc->ctx, t->stack, t->block_size, 16);
    t->stack = NULL;
    t->area = NULL;
}

static void fiber_entry(void *arg, void *user);

/* The task's own stack, taken when it first runs on it (a task that runs
 * nested never needs one).  False: no memory. */
static bool take_stack(ex_task *t) {
    t->stack = t->stack_alloc->allocate(t->stack_alloc->ctx, t->block_size, 16);
    if (!t->stack) return false;
    t->area = (task_area *)(void *)((unsigned char *)t->stack + t->stack_size);
    t->await_area = t->area->await;
    exi_fiber_init(&t->fiber, t->stack, t->stack_size, fiber_entry, t);
    t->switches = 0;
    t->carrier = t;
    t->deferred = NULL;
    return true;
}

/* After the body returned (on the resumer's stack, or on the carrier for a
 * nested task): free the frame and the stack, then complete, which may
 * destroy the operation. */
static void fork_value(void *self, const ex_value *v, size_t n);
static const ex_receiver_vtable fork_rcvr_vt;

static void finish(ex_task *t) {
    release_run(t);
    /* The last await's operation goes now (it lives in the frame area,
     * freed with the stack before the completion); the deep copies of its
     * tuples, which the body may return, outlive the completion. */
    if (t->await_op) ex_operation_destroy(t->await_op);
    t->await_op = NULL;
    exi_sender_release(t->await_sender);
    t->await_sender = NULL;
    if (t->await_buf) ex_deallocate(t->alloc, t->await_buf, t->await_cap, alignof(max_align_t));
    t->await_buf = NULL;
    void *nested = t->nested;
    size_t nested_size = t->nested_size;
    const ex_allocator *alloc = t->alloc;
    ex_receiver r = t->r;
    /* Only what the completion reads leaves the stack before it goes. */
    const ex_task_result *res = t->result;
    ex_task_result_kind kind = t->stopped ? EX_TASK_STOPPED : res->kind;
    ex_error error = kind == EX_TASK_ERROR ? res->error : ex_ok();
    size_t n = kind == EX_TASK_VALUE ? res->n : 0;
    if (kind == EX_TASK_VALUE && t->check_sig && !ex_sig_matches(&t->value_sig, res->v, n)) {
        /* The sender promised its receiver only the declared signature. */
        kind = EX_TASK_ERROR;
        error = ex_err(EX_EINVAL, "ex_task: the body returned values that do not match the task's value_sig");
        n = 0;
    }
    ex_value v[EX_MAX_ARITY];
    const ex_value *values = res->v;  /* a nested task's result outlives its completion */
    if (t->stack) {
        for (size_t i = 0; i < n; i++) v[i] = res->v[i];
        values = v;
    }
    free_stack(t);
    t->result = NULL;
    /* The holds go last: the completion and the frees above and below may
     * use a resource's allocator (see take_holds). */
    holds h = take_holds(t);
    if (kind == EX_TASK_ERROR) ex_set_error(r, error);
    else if (kind == EX_TASK_STOPPED) ex_set_stopped(r);
    else if (r.vt == &fork_rcvr_vt) fork_value(r.self, values, n);  /* a direct call for the fork-join step */
    else ex_set_value(r, values, n);
    if (nested) ex_deallocate(alloc, nested, nested_size, alignof(ex_value));
    release_holds(h);
}

/* The body returns straight into `res`, read by finish() from the other
 * stack before this one is freed (copying the whole result stalled on
 * store forwarding).  Not ASan-instrumented, so `res` is on the real
 * stack, not on a fake stack the final switch discards. */
EXI_NO_ASAN static void fiber_entry(void *arg, void *user) {
    (void)arg;
    ex_task *t = user;
    ex_task_result res = t->fn(t, t->arg);
    t->result = &res;
    exi_fiber_switch_final(&t->fiber, t->resumer, NOTE_FINISHED);
}

static void abort_start(ex_task *t, ex_error e, bool stopped);

/* Runs the task's carrier on the calling thread until it suspends or its
 * owner finishes: the task's first run (on a stack of its own), or its
 * resumption after an await. */
static void run(ex_task *t) {
    if (!t->carrier && !take_stack(t)) {
        abort_start(t, ex_err(EX_ENOMEM, "ex_task: out of memory for the task's stack"), false);
        return;
    }
    for (;;) {
        ex_task *k = t->carrier;
        exi_fiber self;
        exi_fiber_init_thread(&self);
        k->resumer = &self;
        t->started = true;
        exi_store_rlx_ptr((void **)&t->runner, (void *)(uintptr_t)exi_thread_id());
        void *n = exi_fiber_switch(&self, &k->fiber, NULL);
        if (n == NOTE_FINISHED) {
            finish(k);
            return;
        }
        /* A task on the carrier suspended: publish it, unless the
         * completion came first. */
        ex_task *s = n;
        uint32_t expected = AWAITING;
        if (exi_cas_u32(&s->await_state, &expected, SUSPENDED)) return;
        /* DONE already: the task carries on here (this thread runs on the
         * task's scheduler: it just ran the task), unless the scheduler
         * just changed. */
        if (s->must_hop) {
            resume_on_scheduler(s);
            return;
        }
        t = s;
    }
}

/* ------------------------------------------------------------- nesting */

static void hop_execute(ex_work *w);

/* Whether p's carrier has c's whole stack_size left below this frame, and
 * room for c's frame area and the nesting machinery. */
static bool has_room(const ex_task *c, const ex_task *p) {
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    uintptr_t lo = (uintptr_t)p->carrier->stack;
    return sp >= lo && sp - lo >= c->stack_need + sizeof(task_area) + EX_TASK_AWAIT_INLINE + NEST_MARGIN;
}

/* Whether the queued item w may run nested under p, now, here: it is the
 * start of a child task of p's await (see key_awaiting_task) on p's
 * scheduler (the item came from this worker's deque, so this thread is
 * one of its agents), and p's carrier has the child's whole stack_size
 * left below this frame. */
static bool nestable(ex_work *w, void *ctx) {
    ex_task *p = ctx;
    if (w->execute != hop_execute) return false;
    ex_task *c = EXI_CONTAINER_OF(w, ex_task, hop);
    if (c->started || c->carrier || c->inline_affinity || !ex_scheduler_equal(c->sched, p->sched)) return false;
    if (!has_room(c, p)) return false;
    ex_value v;
    return ex_env_query(ex_receiver_env(c->r), &key_awaiting_task, &v) && v.type == EX_T_PTR && v.as.p == p;
}

/* Runs child c's body as a call on p's carrier, its frame area in this
 * frame; completes c when the body returns.  c may suspend inside, which
 * suspends the carrier (p beneath it stays AWAITING meanwhile, and its
 * runner is cleared so a completion of p's await takes the CAS path).
 * Returns whether p must hop back to its scheduler before going on: the
 * carrier suspended meanwhile and c may have finished elsewhere (a
 * scheduler change, an EX_TASK_INLINE child resumed by a foreign
 * completion, a hop that failed, perhaps in a task nested under c).  Not ASan-instrumented, like
 * fiber_entry: the area and the result stay on the carrier's real stack. */
EXI_NO_ASAN static bool run_nested(ex_task *c, ex_task *p) {
    alignas(max_align_t) unsigned char area[sizeof(task_area) + EX_TASK_AWAIT_INLINE];
    ex_task *k = p->carrier;
    c->carrier = k;
    c->area = (task_area *)(void *)area;
    c->await_area = c->area->await;
    c->started = true;
    exi_store_rlx_ptr((void **)&p->runner, NULL);
    exi_store_rlx_ptr((void **)&c->runner, (void *)(uintptr_t)exi_thread_id());
    uint32_t switches = k->switches;
    ex_task_result res = c->fn(c, c->arg);
    c->result = &res;
    /* If nothing on the carrier switched away meanwhile (c or a task
     * nested under it), the carrier never left this thread; if something
     * did, c ended on p's scheduler only if it is affine to it and never
     * carried on after a failed hop. */
    bool hop = k->switches != switches && !p->inline_affinity &&
               (c->inline_affinity || c->off_sched || !ex_scheduler_equal(c->sched, p->sched));
    finish(c);
    exi_store_rlx_ptr((void **)&p->runner, (void *)(uintptr_t)exi_thread_id());
    return hop;
}

/* Before t suspends in an await: runs the children its operation queued
 * here and no thief took (those `accept(w, ctx)` recognises), while the
 * await is not done.  Returns whether t must hop back to its scheduler. */
static bool help(ex_task *t, bool (*accept)(ex_work *w, void *ctx), void *ctx) {
    bool hop = false;
    ex_work *w;
    while (!hop && exi_load_acq_u32(&t->await_state) != DONE && (w = exi_pool_take_own_if(accept, ctx)))
        hop = run_nested(EXI_CONTAINER_OF(w, ex_task, hop), t);
    return hop;
}

/* ----------------------------------------------- the hop to the scheduler */

static void hop_failed(ex_task *t, ex_error e, bool stopped);

static void hop_execute(ex_work *w) { run(EXI_CONTAINER_OF(w, ex_task, hop)); }
/* A resource dropping queued work (a pool being destroyed). */
static void hop_cancel(ex_work *w) { hop_failed(EXI_CONTAINER_OF(w, ex_task, hop), ex_ok(), true); }

static void hop_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    run(self);
}
static void hop_error(void *self, ex_error e) { hop_failed(self, e, false); }
static void hop_stopped(void *self) { hop_failed(self, ex_ok(), true); }
static const ex_receiver_vtable hop_receiver_vt = { hop_value, hop_error, hop_stopped, NULL, NULL };

/* Releases what start took, for a task whose body never ran. */
static void abort_start(ex_task *t, ex_error e, bool stopped) {
    release_run(t);
    free_stack(t);
    holds h = take_holds(t);
    if (stopped) ex_set_stopped(t->r);
    else ex_set_error(t->r, e);
    release_holds(h);
}

/* The hop to the task's scheduler could not be made (no memory for it, the
 * scheduler refused or dropped it).  As P3552's affine_on completes with
 * the scheduling's error or stopped instead of the child's result, the
 * await reports that, and the task carries on here, off its scheduler,
 * only to see it; a task that had not begun completes with it unrun. */
static void hop_failed(ex_task *t, ex_error e, bool stopped) {
    if (!t->started) {
        abort_start(t, e, stopped);
        return;
    }
    ex_await_result *out = t->await_out;
    out->status = stopped ? EX_AWAIT_STOPPED : EX_AWAIT_ERROR;
    out->n = 0;
    out->error = stopped ? ex_ok() : e;
    t->off_sched = true;  /* a parent it is nested on must hop back itself */
    run(t);
}

/* Where the schedule operation of a hop to s goes: the task's inline
 * storage, else a block from the task's allocator kept for the task's
 * life.  NULL when s's operation is over-aligned or memory is short. */
static void *hop_storage_for(ex_task *t, ex_scheduler s) {
    size_t size = s.vt->schedule_op_size;
    if (s.vt->schedule_op_align > alignof(max_align_t)) return NULL;
    if (size <= sizeof t->area->hop) return t->area->hop;
    if (size <= t->hop_block_size) return t->hop_block;
    void *b = ex_allocate(t->alloc, size, alignof(max_align_t));
    if (!b) return NULL;
    if (t->hop_block) ex_deallocate(t->alloc, t->hop_block, t->hop_block_size, alignof(max_align_t));
    t->hop_block = b;
    t->hop_block_size = size;
    return b;
}

/* Resumes t on its scheduler: inline when the calling thread already runs
 * there (dispatch) or the task opted out, else through the scheduler. */
static void resume_on_scheduler(ex_task *t) {
    if (t->inline_affinity) {
        run(t);
        return;
    }
    ex_scheduler s = t->sched;
    if (s.vt->dispatch) {
        t->hop = (ex_work){ NULL, hop_execute, hop_cancel };
        ex_error e = ex_dispatch(s, &t->hop);
        if (e.code) hop_failed(t, e, false);
        return;
    }
    if (t->hop_op) ex_operation_destroy(t->hop_op);
    t->hop_op = NULL;
    ex_receiver r = { &hop_receiver_vt, t };
    void *storage = t->carrier || take_stack(t) ? hop_storage_for(t, s) : NULL;
    if (!storage) {
        hop_failed(t, ex_err(EX_ENOMEM, "ex_task: out of memory for the hop back to the task's scheduler"), false);
        return;
    }
    ex_error e = ex_connect_schedule(s, r, storage);
    if (e.code) {
        hop_failed(t, e, false);
        return;
    }
    t->hop_op = storage;
    ex_start(t->hop_op);
}

/* ------------------------------------------------------------ awaiting */

static void await_complete(ex_task *t) {
    if (exi_load_rlx_ptr((void *const *)&t->runner) == exi_thread_id()) {
        /* The fiber's own thread: either inside the fiber (an inline
         * completion) or after its resumer published SUSPENDED; no other
         * thread writes the state now, so no read-modify-write is needed. */
        uint32_t st = exi_load_rlx_u32(&t->await_state);
        exi_store_rlx_u32(&t->await_state, DONE);
        if (st == SUSPENDED) resume_on_scheduler(t);
        return;
    }
    uint32_t expected = AWAITING;
    if (exi_cas_u32(&t->await_state, &expected, DONE)) return;  /* the fiber is still on its way out */
    exi_store_rel_u32(&t->await_state, DONE);
    resume_on_scheduler(t);
}

/* Completions write straight into the body's result (ex_await is inline
 * in the header, so that is the caller's own variable). */
static void await_value(void *self, const ex_value *v, size_t n) {
    ex_task *t = self;
    ex_await_result *out = t->await_out;
    if (__builtin_expect(n > EX_MAX_ARITY, 0)) {  /* out->v holds EX_MAX_ARITY: a sender of yours sent more */
        out->status = EX_AWAIT_ERROR;
        out->n = 0;
        out->error = ex_err(EX_EINVAL, "ex_await: the sender completed with more than EX_MAX_ARITY values");
        await_complete(t);
        return;
    }
    out->status = EX_AWAIT_VALUE;
    out->n = (uint8_t)n;
    out->error = ex_ok();
    bool tuples = false;
    for (size_t i = 0; i < n; i++) {
        out->v[i] = v[i];
        tuples |= v[i].type == EX_T_TUPLE;
    }
    /* Values are borrowed for the call only: tuples are deep-copied, to
     * stay readable until the next await. */
    if (tuples) {
        ex_error e = exi_values_copy(out->v, v, n, t->alloc, &t->nested, &t->nested_size);
        if (e.code) {
            out->status = EX_AWAIT_ERROR;
            out->n = 0;
            out->error = e;
        }
    }
    await_complete(t);
}

static void await_error(void *self, ex_error e) {
    ex_task *t = self;
    ex_await_result *out = t->await_out;
    out->status = EX_AWAIT_ERROR;
    out->n = 0;
    out->error = e;
    await_complete(t);
}

static void await_stopped(void *self) {
    ex_task *t = self;
    ex_await_result *out = t->await_out;
    out->status = EX_AWAIT_STOPPED;
    out->n = 0;
    out->error = ex_ok();
    await_complete(t);
}

static ex_env await_env(void *self) {
    ex_task *t = self;
    ex_env e = { &t->await_env_node, 0 };
    return e;
}

static const ex_receiver_vtable await_receiver_vt = { await_value, await_error, await_stopped, await_env, NULL };

static void await_fail(ex_await_result *out, ex_error e) {
    out->status = EX_AWAIT_ERROR;
    out->n = 0;
    out->error = e;
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

typedef enum fork_outcome { FORK_NOT, FORK_STARTED_OK, FORK_FAILED } fork_outcome;
static fork_outcome fork_start(ex_task *p, ex_sender *s, ex_await_result *out);
static void flush_deferred(ex_task *k);
static bool fork_nestable(ex_work *w, void *ctx);

void ex_await_into(ex_task *t, ex_sender *s, ex_await_result *out) {
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
    bool (*accept)(ex_work *w, void *ctx) = nestable;
    void *ctx = t;
    if (exi_is_when_all(s)) {
        fork_outcome fo = fork_start(t, s, out);
        if (fo == FORK_FAILED) return;
        if (fo == FORK_STARTED_OK) {
            accept = fork_nestable;
            ctx = t->await_op;
            goto started;
        }
    }
    void *storage = await_storage(t, s->op_size, s->op_align);
    if (!storage) {
        ex_sender_release(s);
        await_fail(out, ex_err(EX_ENOMEM, "ex_await: out of memory"));
        return;
    }
    /* The storage fits and the receiver accepts every completion: connect
     * without ex_connect's checks. */
    ex_receiver r = { &await_receiver_vt, t };
    ex_operation *op = storage;
    ex_error e = ex_connect_child(s, r, storage);
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
started:;
    bool hop = t->nest_hop;  /* a directly awaited child ran nested and ended elsewhere */
    t->nest_hop = false;
    if (hop || t->must_hop || exi_load_acq_u32(&t->await_state) != DONE) {
        if (!hop && !t->must_hop) hop = help(t, accept, ctx);
        bool must_hop = t->must_hop;
        if (hop) t->must_hop = true;  /* run() then hops back even if the await is done */
        if (t->must_hop || exi_load_acq_u32(&t->await_state) != DONE) {
            flush_deferred(t->carrier);
            t->carrier->switches++;
            (void)exi_fiber_switch(&t->carrier->fiber, t->carrier->resumer, t);
        }
        t->must_hop = must_hop;
    }
    /* DONE: *out was written by the completion (published by its CAS or
     * release store, or by this thread). */
    if (out->status == EX_AWAIT_STOPPED) t->stopped = true;
}

/* ex_task_yield's resumption ran (or was dropped): it completes the
 * "await" the yield is. */
static void yield_execute(ex_work *w) {
    ex_task *t = EXI_CONTAINER_OF(w, ex_task, yield_work);
    ex_await_result *out = t->await_out;
    out->status = EX_AWAIT_VALUE;
    out->n = 0;
    out->error = ex_ok();
    await_complete(t);
}

static void yield_cancel(ex_work *w) {
    ex_task *t = EXI_CONTAINER_OF(w, ex_task, yield_work);
    ex_await_result *out = t->await_out;
    out->status = EX_AWAIT_STOPPED;
    out->n = 0;
    out->error = ex_ok();
    await_complete(t);
}

ex_error ex_task_yield(ex_task *t) {
    if (t->stopped) return ex_err(EX_ECANCELED, "ex_task_yield: the task is stopped");
    ex_scheduler s = t->sched;
    ex_await_result out;
    if (!s.vt->yield) {
        ex_await_into(t, ex_schedule(s), &out);
    } else {
        /* An await whose "operation" is the resumption queued behind the
         * waiting work: the same handshake as any suspending await. */
        release_await(t);
        t->await_out = &out;
        t->yield_work = (ex_work){ NULL, yield_execute, yield_cancel };
        exi_store_rlx_u32(&t->await_state, AWAITING);
        ex_error e = s.vt->yield(s.self, &t->yield_work);
        if (e.code) return e;
        if (exi_load_acq_u32(&t->await_state) != DONE) {
            flush_deferred(t->carrier);
            t->carrier->switches++;
            (void)exi_fiber_switch(&t->carrier->fiber, t->carrier->resumer, t);
        }
        if (out.status == EX_AWAIT_STOPPED) t->stopped = true;
    }
    if (out.status == EX_AWAIT_VALUE) return ex_ok();
    if (out.status == EX_AWAIT_ERROR) return out.error;
    return ex_err(EX_ECANCELED, "ex_task_yield: the task was stopped");
}

/* Hops t back to prev after a move that failed once t had suspended.  If
 * prev refuses too, t carries on where it is, as after any refused hop. */
static void return_to(ex_task *t, ex_scheduler prev) {
    t->must_hop = true;
    ex_await_result back;
    ex_await_into(t, ex_schedule(prev), &back);
    t->must_hop = false;
}

ex_scheduler ex_change_coroutine_scheduler(ex_task *t, ex_scheduler sch) {
    ex_scheduler prev = t->sched;
    if (!sch.vt || t->stopped) return prev;  /* a stopped task stays where it is */
    /* The task keeps its hold on prev until it completes (see take_holds),
     * so the handle returned stays valid: room for it first. */
    bool same = ex_scheduler_equal(sch, prev);
    if (!same && !t->sched_borrowed && !left_reserve(t)) return prev;
    ptrdiff_t found = same ? -1 : left_find(t, sch);  /* sch held already: that hold moves to current */
    if (!same && found < 0) ex_scheduler_retain(sch);
    t->sched = sch;
    bool was_inline = t->inline_affinity;
    t->inline_affinity = false;
    t->must_hop = true;  /* even if the schedule completes at once, end on sch */
    uint32_t switches = t->carrier->switches;
    ex_await_result moved;
    ex_await_into(t, ex_schedule(sch), &moved);
    t->must_hop = false;
    t->inline_affinity = was_inline;
    if (moved.status == EX_AWAIT_ERROR) {
        /* The task did not get there: it stays with its scheduler. */
        t->sched = prev;
        if (!same && found < 0) ex_scheduler_release(sch);
        /* It had left prev's agent, though, if the move was queued and then
         * dropped (a pool shut down with it queued resumes the task on the
         * thread that shuts it down): back to prev, as if it never left. */
        if (t->carrier->switches != switches && !was_inline) return_to(t, prev);
        return prev;
    }
    if (same) return prev;
    held_schedulers *l = t->left;
    if (found >= 0) l->s[found] = l->s[--l->n];
    if (t->sched_borrowed) t->sched_borrowed = false;  /* prev is its fork's, held until the fork ends */
    else l->s[l->n++] = prev;                          /* `left` never holds the current one */
    return prev;
}

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
/* Runs c, awaited directly by p and allowed to run here, nested on p's
 * stack when the room is there, else on its own. */
static void run_awaited_child(ex_task *c, ex_task *p) {
    if (!has_room(c, p)) {
        run(c);
        return;
    }
    if (run_nested(c, p)) p->nest_hop = true;
}

static void direct_execute(ex_work *w) {
    ex_task *c = EXI_CONTAINER_OF(w, ex_task, hop);
    ex_task *p = c->r.self;
    if (exi_load_rlx_u32(&p->direct_window) && exi_load_rlx_ptr((void *const *)&p->runner) == exi_thread_id())
        run_awaited_child(c, p);
    else
        run(c);
}

static void task_start(ex_operation *op) {
    ex_task *t = (ex_task *)op;
    ex_scheduler_retain(t->sched);  /* P3552's task_scheduler: the resource outlives the task */
    /* P3552: the body starts on an agent of the task's scheduler.  A task
     * awaited directly by another task starts at once (dispatch: no queue
     * round trip, like symmetric transfer), nested on the awaiting task's
     * stack when it may; one started by anything else (when_all, spawn) is
     * queued where it can be stolen, so sibling tasks run in parallel (and
     * nest when their parent waits for them, see help).  The stack is
     * taken at the first run on it (run): a task that nests never has one. */
    exi_store_rlx_u32(&t->await_state, SUSPENDED);
    if (t->r.vt == &await_receiver_vt) {
        ex_task *p = t->r.self;
        if (t->inline_affinity) {  /* runs where it is started: here */
            run_awaited_child(t, p);
            return;
        }
        if (t->sched.vt->dispatch && ex_scheduler_equal(t->sched, p->sched)) {
            t->hop = (ex_work){ NULL, direct_execute, hop_cancel };
            exi_store_rlx_u32(&p->direct_window, 1);
            ex_error e = ex_dispatch(t->sched, &t->hop);
            exi_store_rlx_u32(&p->direct_window, 0);
            if (e.code) hop_failed(t, e, false);
            return;
        }
    } else if (!t->inline_affinity && t->sched.vt->post) {
        t->hop = (ex_work){ NULL, hop_execute, hop_cancel };
        if (!ex_post(t->sched, &t->hop).code) return;
    }
    resume_on_scheduler(t);
}

static void task_destroy(ex_operation *op) { release_hop((ex_task *)op); }

static const ex_operation_vtable task_op_vt = { task_start, task_destroy };

static inline void task_fill(ex_task *t, const task_sender *ts, ex_receiver r, const ex_allocator *alloc);

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

/* What connect sets besides the scheduler (and the zeroed fields); plain
 * (ts->plain, a constant at each call of task_fill below) makes a plain
 * task's sizes constants. */
static inline __attribute__((always_inline)) void task_fill_as(ex_task *t, const task_sender *ts, ex_receiver r,
                                                               const ex_allocator *alloc, bool plain) {
    const ex_task_options *o = &ts->opt;
    t->base.vt = &task_op_vt;
    t->r = r;
    t->fn = ts->fn;
    t->arg = ts->arg;
    t->user_env = plain ? (ex_env){ 0 } : o->env;
    t->alloc = alloc;
    t->left = NULL;
    t->check_sig = o->value_sig != NULL;
    if (o->value_sig) t->value_sig = *o->value_sig;
    bool own_stacks = !plain && o->stack_allocator;
    t->stack_alloc = own_stacks ? o->stack_allocator : exi_guarded_stack_allocator();
    size_t usable = !plain && o->stack_size ? o->stack_size : EX_TASK_STACK_DEFAULT;
    t->stack_need = (usable + 15) & ~(size_t)15;
    t->stack_size = own_stacks ? t->stack_need : t->stack_need * STACK_RESERVE_FACTOR;
    t->await_size = ex_task_await_inline_size(t->stack_need);
    t->block_size = t->stack_size + sizeof(task_area) + t->await_size;
    t->env_node.query = task_env_query;
    t->await_env_node.query = await_env_query;
}

static inline void task_fill(ex_task *t, const task_sender *ts, ex_receiver r, const ex_allocator *alloc) {
    if (ts->plain) task_fill_as(t, ts, r, alloc, true);
    else task_fill_as(t, ts, r, alloc, false);
}

static const ex_sender_vtable task_vt = { "ex_task_create", task_connect, NULL, NULL };

ex_sender *ex_task_create(ex_task_fn fn, void *arg, const ex_task_options *opt) {
    if (!fn) return ex_invalid_sender(EX_EINVAL, "ex_task_create: NULL function");
    if (opt && opt->affinity != EX_TASK_AFFINE && opt->affinity != EX_TASK_INLINE)
        return ex_invalid_sender(EX_EINVAL, "ex_task_create: bad affinity");
    if (opt && opt->stack_size && opt->stack_size < EX_TASK_STACK_MIN)
        return ex_invalid_sender(EX_EINVAL, "ex_task_create: stack_size below EX_TASK_STACK_MIN (4096 bytes)");
    if (opt && opt->stack_size > EX_TASK_STACK_MAX)  /* connect's size sums stay far from wrapping */
        return ex_invalid_sender(EX_EINVAL, "ex_task_create: stack_size above EX_TASK_STACK_MAX (1 GiB)");
    task_sender *s = (task_sender *)exi_sender_alloc_bare(&task_vt, sizeof(task_sender));
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
 * source, as when_all does, but a fork awaited by a child of another fork
 * (the recursion case) registers on that fork's source only when someone
 * asks for its token (every token handed out is a linked one; linking goes
 * up the chain first).  What it must still know at start, whether stop was
 * requested on its task's token, it learns from two process-wide counts
 * of requests on forks' sources (exi_stop_source_request_stop_counted):
 * fork_stops_begun, moved before a request's flag can be seen, and
 * fork_stops_done, moved once it is set.  A fork's start that finds no
 * stop keeps, as its epoch, a count of done requests read before its
 * check.  A fork below it that reads begun equal to that epoch knows that
 * every request ever begun had set its flag before that check, which saw
 * it: nothing in the chain can be stopped.  Otherwise it reads done, then
 * walks up the unlinked forks, checking their flags, to the first linked
 * one, and keeps that done.  A recursion without stop requests costs one
 * shared load per fork. */
enum { UNLINKED, LINKING, LINKED };
static uint64_t fork_stops_begun, fork_stops_done;

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
    ex_stop_callback on_stop;  /* on the awaiting task's token, once linked */
    fork_op *up;             /* the fork the awaiting task is a child of, if linking lazily */
    uint32_t link;           /* UNLINKED, LINKING, LINKED */
    uint64_t epoch;          /* fork_stops_done read before its start found no stop */
    ex_env_node env_node;    /* the children's receiver environment */
    uint32_t deferred;       /* lazy: children [0, deferred) neither started nor queued */
    fork_op *deferred_next;  /* the next fork holding children back on the same carrier */
    fork_slot slots[];
};

_Static_assert(alignof(fork_op) <= alignof(max_align_t), "a fork goes at the start of a task's await area");

static void fork_complete(fork_op *f) {
    if (exi_load_acq_u32(&f->link) == LINKED) ex_stop_callback_deregister(&f->on_stop);
    ex_task *p = f->p;
    uint32_t d = exi_load_acq_u32(&f->join.disposition);
    if (d == EXI_JOIN_ERROR) {
        await_error(p, f->join.err);
        return;
    }
    if (d == EXI_JOIN_STOPPED) {
        await_stopped(p);
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
            await_error(p, ex_err(EX_EINVAL, "ex_when_all: the children sent more than EX_MAX_ARITY values"));
            return;
        }
        for (size_t j = 0; j < sl->n; j++) out->v[k + j] = sl->v[j];
        k += sl->n;
        tuples |= sl->nested != NULL;
    }
    if (tuples) {
        ex_value all[EX_MAX_ARITY];
        memcpy(all, out->v, k * sizeof(ex_value));
        await_value(p, all, k);
        return;
    }
    out->status = EX_AWAIT_VALUE;
    out->n = (uint8_t)k;
    out->error = ex_ok();
    await_complete(p);
}

/* The last child to arrive completes the fork.  Only children and the
 * stop callback (registered once linked) change the count: unlinked, a
 * child that reads 1 is the last, every other arrival is behind it, and
 * no read-modify-write is needed. */
static void fork_arrive(fork_op *f) {
    if (exi_load_acq_u32(&f->link) != LINKED && exi_load_acq_u32(&f->join.count) == 1) {
        exi_store_rlx_u32(&f->join.count, 0);
        fork_complete(f);
        return;
    }
    if (exi_join_arrive(&f->join)) fork_complete(f);
}

/* Every request on a fork's source is counted (see "Stop linking"). */
static void fork_fail(fork_op *f, ex_error e) { exi_join_fail(&f->join, e, &fork_stops_begun, &fork_stops_done); }

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
    exi_join_stopped(&f->join, &fork_stops_begun, &fork_stops_done);
    fork_arrive(f);
}

static void fork_stop_cb(ex_stop_callback *cb);

/* Links f's source to its task's token (the fork above's source, linked
 * first) unless that is done; any thread, once: a second caller waits for
 * the first. */
static void fork_link(fork_op *f) {
    uint32_t st = exi_load_acq_u32(&f->link);
    if (st == LINKED) return;
    if (st == UNLINKED && exi_cas_u32(&f->link, &st, LINKING)) {
        fork_link(f->up);
        (void)ex_stop_callback_register(&f->on_stop, ex_stop_source_token(&f->up->join.stop), fork_stop_cb);
        exi_store_rel_u32(&f->link, LINKED);
        return;
    }
    for (unsigned spins = 0; exi_load_acq_u32(&f->link) != LINKED; spins++) {
        if (spins < 64) exi_pause();
        else sched_yield();  /* the linking thread was preempted */
    }
}

/* Whether stop was requested on the token of a fork awaited by a child of
 * `up` (see "Stop linking"); sets *epoch to the epoch that answer holds for. */
static bool fork_up_stopped(const fork_op *up, uint64_t *epoch) {
    uint64_t begun = exi_load_acq_u64(&fork_stops_begun);
    if (begun == up->epoch) {
        *epoch = begun;  /* = done now: nothing began since */
        return false;
    }
    *epoch = exi_load_acq_u64(&fork_stops_done);  /* before the walk */
    for (const fork_op *x = up; x; x = x->up) {
        if (ex_stop_source_stop_requested(&x->join.stop)) return true;
        if (exi_load_acq_u32(&x->link) == LINKED) return false;  /* follows everything above */
    }
    return false;
}

/* when_all's environment: its own stop token (linked on demand), the rest
 * forwarded from the awaiting task's await (which answers
 * key_awaiting_task with it). */
static bool fork_env_query(const ex_env_node *n, const ex_key *key, ex_value *out) {
    fork_op *f = EXI_CONTAINER_OF(n, fork_op, env_node);
    if (key == &ex_key_get_stop_token) {
        fork_link(f);
        *out = ex_token_value(ex_stop_source_token(&f->join.stop));
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

/* The awaiting task's stop request, forwarded (exi_join.h). */
static void fork_stop_cb(ex_stop_callback *cb) {
    fork_op *f = EXI_CONTAINER_OF(cb, fork_op, on_stop);
    if (!exi_join_hold(&f->join)) return;
    exi_join_request_stop(&f->join, &fork_stops_begun, &fork_stops_done);
    fork_arrive(f);
}

static void fork_destroy(ex_operation *op) {
    fork_op *f = (fork_op *)op;
    /* A child's hop resources went when it completed (release_run), and a
     * child that never started has none: only the values' copies are left. */
    for (size_t i = 0; i < f->n; i++) {
        fork_slot *sl = &f->slots[i];
        if (sl->nested) ex_deallocate(f->p->alloc, sl->nested, sl->nested_size, alignof(ex_value));
    }
}

static const ex_operation_vtable fork_op_vt = { NULL, fork_destroy };

/* A queued child of fork f, taken back by f's task: run it nested. */
static bool fork_nestable(ex_work *w, void *ctx) {
    fork_op *f = ctx;
    if (w->execute != hop_execute) return false;
    ex_task *c = EXI_CONTAINER_OF(w, ex_task, hop);
    /* Not a child's resumption (a scheduler whose dispatch queues puts one
     * here): only a start runs nested. */
    if (c->started || c->carrier) return false;
    return c->r.vt == &fork_rcvr_vt && ((fork_slot *)c->r.self)->f == f && has_room(c, f->p);
}

/* Whether s (a when_all) can be awaited by p as a fork: every child is a
 * fresh task affine to its receiver's scheduler, p is affine and on its
 * scheduler, which can queue work, and the fork fits p's await area. */
static bool forkable(const ex_task *p, const ex_sender *s, ex_sender *const **ch, size_t *n) {
    if (p->inline_affinity || p->off_sched || p->must_hop || !p->sched.vt->post) return false;
    *ch = exi_when_all_children(s, n);
    if (sizeof(fork_op) + *n * sizeof(fork_slot) > p->await_size) return false;
    for (size_t i = 0; i < *n; i++) {
        const ex_sender *c = (*ch)[i];
        if (c->vt != &task_vt || ((const task_sender *)c)->opt.affinity != EX_TASK_AFFINE) return false;
    }
    return true;
}

/* Queue items on the worker at and above which a fork runs its children
 * nested without queueing them (see fork_start). */
#define FORK_LAZY 2

/* Queues fork child c (initialised, not started) on its scheduler. */
static void queue_child(ex_task *c) {
    if (!exi_pool_post_here(c->sched, &c->hop) && ex_post(c->sched, &c->hop).code) resume_on_scheduler(c);
}

/* Carrier k is about to switch away: queue every child a fork on it holds
 * back, so that no child waits for the carrier to come back (a sibling
 * may be what the suspended task waits for). */
static void flush_deferred(ex_task *k) {
    for (fork_op *f = k->deferred; f; f = f->deferred_next) {
        uint32_t d = f->deferred;
        f->deferred = 0;
        for (uint32_t i = 0; i < d; i++) queue_child(&f->slots[i].task);
    }
    k->deferred = NULL;
}

/* Connects and starts s's children as a fork in p's await area (see
 * above).  FORK_NOT: s is not one, nothing done; FORK_FAILED: *out holds
 * the connect error, s is released. */
static fork_outcome fork_start(ex_task *p, ex_sender *s, ex_await_result *out) {
    ex_sender *const *ch;
    size_t n;
    if (!forkable(p, s, &ch, &n)) return FORK_NOT;
    fork_op *f = (fork_op *)(void *)p->await_area;
    f->base.vt = &fork_op_vt;
    f->p = p;
    f->n = 0;
    exi_join_init(&f->join, (uint32_t)n);
    f->env_node.query = fork_env_query;
    /* A child only the when_all holds, which only this await holds, cannot
     * be connected by anyone else meanwhile: no read-modify-write. */
    bool sole = exi_load_acq_u32(&s->refs) == 1;
    for (size_t i = 0; i < n; i++) {
        task_sender *ts = (task_sender *)(uintptr_t)ch[i];
        uint32_t fresh = 0;
        if (sole && exi_load_acq_u32(&ts->base.refs) == 1 && !exi_load_rlx_u32(&ts->connected))
            exi_store_rlx_u32(&ts->connected, 1);
        else if (!exi_cas_u32(&ts->connected, &fresh, 1)) {
            fork_destroy(&f->base);
            ex_sender_release(s);
            await_fail(out, ex_err(EX_EINVAL, "ex_task: the task was connected before (a task is single-shot)"));
            return FORK_FAILED;
        }
        fork_slot *sl = &f->slots[i];
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
        f->n = i + 1;
    }
    p->await_op = &f->base;
    p->await_sender = s;
    p->await_out = out;
    exi_store_rlx_u32(&p->await_state, AWAITING);
    bool stopped;
    if (p->r.vt == &fork_rcvr_vt) {
        f->up = ((fork_slot *)p->r.self)->f;
        f->link = UNLINKED;
        stopped = fork_up_stopped(f->up, &f->epoch);
    } else {
        f->up = NULL;
        f->link = LINKED;
        f->epoch = exi_load_acq_u64(&fork_stops_done);  /* before the check the registration makes */
        stopped = ex_stop_callback_register(&f->on_stop, ex_task_stop_token(p), fork_stop_cb);
    }
    if (stopped) {
        await_stopped(p);  /* stop was already requested: start no child */
        return FORK_STARTED_OK;
    }
    /* All but the last queued, oldest first, where thieves take from: the
     * first child (in a recursion, usually the biggest) is the one stolen.
     * Unless the worker already holds FORK_LAZY items for thieves: then
     * they are held back and run nested after the last (lazy splitting:
     * in a recursion the items already queued are the bigger ones), and
     * queued after all if the carrier switches away meanwhile
     * (flush_deferred). */
    ex_task *k = p->carrier;
    bool lazy = exi_pool_backlog_here(p->sched) >= FORK_LAZY;
    for (size_t i = 0; i + 1 < n; i++) {
        ex_task *c = &f->slots[i].task;
        exi_store_rlx_u32(&c->await_state, SUSPENDED);
        c->hop = (ex_work){ NULL, hop_execute, hop_cancel };
        if (!lazy) queue_child(c);
    }
    f->deferred = lazy ? (uint32_t)(n - 1) : 0;
    if (lazy) {
        f->deferred_next = k->deferred;
        k->deferred = f;
    }
    ex_task *last = &f->slots[n - 1].task;
    exi_store_rlx_u32(&last->await_state, SUSPENDED);
    run_awaited_child(last, p);
    if (lazy) {
        while (f->deferred) {  /* 0 once flushed */
            ex_task *c = &f->slots[--f->deferred].task;
            /* Nested while it may (room below; no hop back pending, so
             * this thread still runs on the scheduler), else queued. */
            if (!p->nest_hop && has_room(c, p)) {
                if (run_nested(c, p)) p->nest_hop = true;
            } else {
                queue_child(c);
            }
        }
        if (k->deferred == f) k->deferred = f->deferred_next;  /* else a flush emptied the list */
    }
    return FORK_STARTED_OK;
}
