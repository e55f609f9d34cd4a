/* SPDX-License-Identifier: MIT */
/* task_run.c - running a task: its fiber, its first run and each
 * resumption, finish, nesting, the hop back to its scheduler, and the
 * completion side of an await (see cexec/task.h; the files: exi_task.h).
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
 * no thief took yet, and runs each as a plain call on its own stack (help
 * in task_await.c, exi_task_run_nested here) instead of on a stack of the
 * child's own.  Only children the awaiting task waits for anyway qualify
 * (their receiver environment leads back to this await), so running them
 * underneath delays nothing the parent could do; a child that suspends
 * suspends the whole stack (the "carrier") and resumes it wherever it
 * resumes.  The switch notes name the task that suspended, since it may
 * be any task on the carrier. */
#include <stdlib.h>

#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "base/exi_thread.h"
#include "core/exi_error.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"
#include "task/exi_task.h"

/* See exi_task.h; asked by exi_task_nestable. */
const ex_key exi_task_key_awaiting = { "cexec: awaiting task", true };

/* ------------------------------------------------------ running the fiber */

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

/* What start took besides the stack and the holds: the fiber's tool
 * state, the hop's operation and block (from the task's allocator). */
static inline __attribute__((always_inline)) void release_run(ex_task *t) {
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
static void finish(ex_task *t) {
    release_run(t);
    /* The last await's operation goes now (it lives in the frame area,
     * freed with the stack before the completion); the deep copies of its
     * tuples, which the body may return, stay in t->nested until the
     * operation is destroyed (task_destroy): freed after the completion,
     * here, they raced the receiver's thread, which may already have
     * returned from sync_wait and dropped the allocator. */
    if (t->await_op) ex_operation_destroy(t->await_op);
    t->await_op = NULL;
    exi_sender_release(t->await_sender);
    t->await_sender = NULL;
    if (t->await_buf) ex_deallocate(t->alloc, t->await_buf, t->await_cap, alignof(max_align_t));
    t->await_buf = NULL;
    ex_receiver r = t->r;
    /* Only what the completion reads leaves the stack before it goes. */
    const ex_task_result *res = t->result;
    ex_task_result_kind kind = t->stopped ? EX_TASK_STOPPED : res->kind;
    ex_error error = kind == EX_TASK_ERROR ? res->error : ex_ok();
    if (t->stopped && res->kind == EX_TASK_ERROR) exi_error_drop(res->error);  /* stopped wins: nobody sees it */
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
    else ex_set_value(r, values, n);
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
void exi_task_run(ex_task *t) {
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
            exi_task_resume_on_scheduler(s);
            return;
        }
        t = s;
    }
}

/* ------------------------------------------------------------- nesting */

/* Whether the queued item w may run nested under p, now, here: it is the
 * start of a child task of p's await (see exi_task_key_awaiting) on p's
 * scheduler (the item came from this worker's deque, so this thread is
 * one of its agents), and p's carrier has the child's whole stack_size
 * left below this frame. */
bool exi_task_nestable(ex_work *w, void *ctx) {
    ex_task *p = ctx;
    if (w->execute != exi_task_hop_execute) return false;
    ex_task *c = EXI_CONTAINER_OF(w, ex_task, hop);
    if (c->started || c->carrier || c->inline_affinity || !ex_scheduler_equal(c->sched, p->sched)) return false;
    if (!has_room(c, p)) return false;
    ex_value v;
    return ex_env_query(ex_receiver_env(c->r), &exi_task_key_awaiting, &v) && v.type == EX_T_PTR && v.as.p == p;
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
EXI_NO_ASAN bool exi_task_run_nested(ex_task *c, ex_task *p) {
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

/* Runs c, awaited directly by p and allowed to run here, nested on p's
 * stack when the room is there, else on its own. */
void exi_task_run_awaited_child(ex_task *c, ex_task *p) {
    if (!has_room(c, p)) {
        exi_task_run(c);
        return;
    }
    if (exi_task_run_nested(c, p)) p->nest_hop = true;
}

/* ----------------------------------------------- the hop to the scheduler */

void exi_task_hop_execute(ex_work *w) { exi_task_run(EXI_CONTAINER_OF(w, ex_task, hop)); }
/* A resource dropping queued work (a pool being destroyed). */
void exi_task_hop_cancel(ex_work *w) { exi_task_hop_failed(EXI_CONTAINER_OF(w, ex_task, hop), ex_ok(), true); }

static void hop_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    exi_task_run(self);
}
static void hop_error(void *self, ex_error e) { exi_task_hop_failed(self, e, false); }
static void hop_stopped(void *self) { exi_task_hop_failed(self, ex_ok(), true); }
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
void exi_task_hop_failed(ex_task *t, ex_error e, bool stopped) {
    if (!t->started) {
        abort_start(t, e, stopped);
        return;
    }
    ex_await_result *out = t->await_out;
    /* The hop's outcome replaces the await's, which was written just
     * before the hop: an error there is the task's to release. */
    if (out->status == EX_AWAIT_ERROR) exi_error_drop(out->error);
    out->status = stopped ? EX_AWAIT_STOPPED : EX_AWAIT_ERROR;
    out->n = 0;
    out->error = stopped ? ex_ok() : e;
    t->off_sched = true;  /* a parent it is nested on must hop back itself */
    exi_task_run(t);
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
void exi_task_resume_on_scheduler(ex_task *t) {
    if (t->inline_affinity) {
        exi_task_run(t);
        return;
    }
    ex_scheduler s = t->sched;
    if (s.vt->dispatch) {
        t->hop = (ex_work){ NULL, exi_task_hop_execute, exi_task_hop_cancel };
        ex_error e = ex_dispatch(s, &t->hop);
        if (e.code) exi_task_hop_failed(t, e, false);
        return;
    }
    if (t->hop_op) ex_operation_destroy(t->hop_op);
    t->hop_op = NULL;
    ex_receiver r = { &hop_receiver_vt, t };
    void *storage = t->carrier || take_stack(t) ? hop_storage_for(t, s) : NULL;
    if (!storage) {
        exi_task_hop_failed(t, ex_err(EX_ENOMEM, "ex_task: out of memory for the hop back to the task's scheduler"),
                            false);
        return;
    }
    ex_error e = ex_connect_schedule(s, r, storage);
    if (e.code) {
        exi_task_hop_failed(t, e, false);
        return;
    }
    t->hop_op = storage;
    ex_start(t->hop_op);
}

/* ----------------------------------------- the completion side of an await */

void exi_task_await_complete(ex_task *t) {
    if (exi_load_rlx_ptr((void *const *)&t->runner) == exi_thread_id()) {
        /* The fiber's own thread: either inside the fiber (an inline
         * completion) or after its resumer published SUSPENDED; no other
         * thread writes the state now, so no read-modify-write is needed. */
        uint32_t st = exi_load_rlx_u32(&t->await_state);
        exi_store_rlx_u32(&t->await_state, DONE);
        if (st == SUSPENDED) exi_task_resume_on_scheduler(t);
        return;
    }
    uint32_t expected = AWAITING;
    if (exi_cas_u32(&t->await_state, &expected, DONE)) return;  /* the fiber is still on its way out */
    exi_store_rel_u32(&t->await_state, DONE);
    exi_task_resume_on_scheduler(t);
}

/* Completions write straight into the body's result (ex_await is inline
 * in the header, so that is the caller's own variable). */
void exi_task_await_value(void *self, const ex_value *v, size_t n) {
    ex_task *t = self;
    ex_await_result *out = t->await_out;
    if (__builtin_expect(n > EX_MAX_ARITY, 0)) {  /* out->v holds EX_MAX_ARITY: a sender of yours sent more */
        out->status = EX_AWAIT_ERROR;
        out->n = 0;
        out->error = ex_err(EX_EINVAL, "ex_await: the sender completed with more than EX_MAX_ARITY values");
        exi_task_await_complete(t);
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
    exi_task_await_complete(t);
}

void exi_task_await_error(void *self, ex_error e) {
    ex_task *t = self;
    ex_await_result *out = t->await_out;
    out->status = EX_AWAIT_ERROR;
    out->n = 0;
    out->error = e;
    exi_task_await_complete(t);
}

void exi_task_await_stopped(void *self) {
    ex_task *t = self;
    ex_await_result *out = t->await_out;
    out->status = EX_AWAIT_STOPPED;
    out->n = 0;
    out->error = ex_ok();
    exi_task_await_complete(t);
}

static ex_env await_env(void *self) {
    ex_task *t = self;
    ex_env e = { &t->await_env_node, 0 };
    return e;
}

const ex_receiver_vtable exi_task_await_receiver_vt = { exi_task_await_value, exi_task_await_error,
                                                        exi_task_await_stopped, await_env, NULL };
