/* SPDX-License-Identifier: MIT */
/* exi_task.h - what the task's files share (internal to task/).
 *
 * The files, lowest first (each calls only the ones before it;
 * scripts/check-layers.sh refuses two that call each other):
 *   task_run.c    running a task's fiber: its first run and each
 *                 resumption, finish, nesting, the hop back to the
 *                 scheduler, and the completion side of an await;
 *   task.c        the sender and its operation state (connect, start),
 *                 the environment inside a task, the body's results;
 *   task_await.c  ex_await_into, and the fork it runs for a when_all of
 *                 tasks (the fork's start is inlined into it);
 *   task_sched.c  ex_task_yield, ex_change_coroutine_scheduler.
 * Here: the control block, the task sender, and the helpers the files
 * share on hot paths, static inline so that they stay inline there. */
#ifndef EXI_TASK_H
#define EXI_TASK_H

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>

#include <cexec/cexec.h>

#include "core/exi_sender.h"  /* exi_sender_release (release_await) */
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
    struct held_schedulers *left;    /* holds on schedulers the task moved away from (held_schedulers) */
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
    task_area *area;                 /* at stack + stack_size, or in exi_task_run_nested's frame */
    /* Initialised where first used. */
    exi_fiber *resumer;              /* the carrier's: the context to go back to (exi_task_run) */
    const void *runner;              /* thread running the fiber, or that ran it last (relaxed; exi_task_run) */
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

/* ------------------------------------------------ task_run.c (lowest) */

/* Answered only by the environment of an await's receiver, and forwarded
 * by the adaptors in between: a task whose receiver environment answers it
 * with P is part of the operation P awaits, which P waits for anyway. */
extern const ex_key exi_task_key_awaiting;

/* The receiver an await connects its operation to (the task is `self`). */
extern const ex_receiver_vtable exi_task_await_receiver_vt;

/* Runs the task's carrier on the calling thread until it suspends or its
 * owner finishes. */
void exi_task_run(ex_task *t);
/* Runs c, awaited directly by p and allowed to run here, nested on p's
 * stack when the room is there, else on its own. */
void exi_task_run_awaited_child(ex_task *c, ex_task *p);
/* Runs child c's body as a call on p's carrier; returns whether p must
 * hop back to its scheduler before going on. */
bool exi_task_run_nested(ex_task *c, ex_task *p);
/* Whether the queued item w may run nested under the task ctx. */
bool exi_task_nestable(ex_work *w, void *ctx);

/* The hop to the task's scheduler: its work item's execute and cancel,
 * its failure, and the hop itself (inline when it may). */
void exi_task_hop_execute(ex_work *w);
void exi_task_hop_cancel(ex_work *w);
void exi_task_hop_failed(ex_task *t, ex_error e, bool stopped);
void exi_task_resume_on_scheduler(ex_task *t);

/* The await's completion: writes the body's result, then resumes the task
 * (or lets it carry on, see the handshake in task_run.c). */
void exi_task_await_complete(ex_task *t);
void exi_task_await_value(void *self, const ex_value *v, size_t n);
void exi_task_await_error(void *self, ex_error e);
void exi_task_await_stopped(void *self);

/* ------------------------------------------------------------- task.c */

extern const ex_sender_vtable exi_task_vt;
extern const ex_operation_vtable exi_task_op_vt;
/* The environment inside the task, and its awaited operation's. */
bool exi_task_env_query(const ex_env_node *n, const ex_key *key, ex_value *out);
bool exi_task_await_env_query(const ex_env_node *n, const ex_key *key, ex_value *out);

/* ------------------------------------------------------- task_await.c */

/* Carrier k is about to switch away: queues every child the forks on it
 * hold back. */
void exi_task_flush_deferred(ex_task *k);

/* ------------------------------------------- helpers on the hot paths */

/* The hop's schedule operation and its block (task_destroy, finish). */
static inline void release_hop(ex_task *t) {
    if (t->hop_op) ex_operation_destroy(t->hop_op);
    t->hop_op = NULL;
    if (t->hop_block) ex_deallocate(t->alloc, t->hop_block, t->hop_block_size, alignof(max_align_t));
    t->hop_block = NULL;
}

/* The previous await's operation and its tuples' deep copies, which the
 * body may read until its next await (ex_await_into, ex_task_yield). */
static inline __attribute__((always_inline)) void release_await(ex_task *t) {
    if (t->await_op) ex_operation_destroy(t->await_op);
    t->await_op = NULL;
    exi_sender_release(t->await_sender);
    t->await_sender = NULL;
    if (t->nested) ex_deallocate(t->alloc, t->nested, t->nested_size, alignof(ex_value));
    t->nested = NULL;
}

/* Whether p's carrier has c's whole stack_size left below this frame, and
 * room for c's frame area and the nesting machinery.  Always inline: the
 * frame is the caller's. */
static inline __attribute__((always_inline)) bool has_room(const ex_task *c, const ex_task *p) {
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    uintptr_t lo = (uintptr_t)p->carrier->stack;
    return sp >= lo && sp - lo >= c->stack_need + sizeof(task_area) + EX_TASK_AWAIT_INLINE + NEST_MARGIN;
}

/* What connect sets besides the scheduler (and the zeroed fields): for
 * task_connect and for a fork's children.  plain (ts->plain, a constant at
 * each call of task_fill below) makes a plain task's sizes constants. */
static inline __attribute__((always_inline)) void task_fill_as(ex_task *t, const task_sender *ts, ex_receiver r,
                                                               const ex_allocator *alloc, bool plain) {
    const ex_task_options *o = &ts->opt;
    t->base.vt = &exi_task_op_vt;
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
    t->env_node.query = exi_task_env_query;
    t->await_env_node.query = exi_task_await_env_query;
}

static inline void task_fill(ex_task *t, const task_sender *ts, ex_receiver r, const ex_allocator *alloc) {
    if (ts->plain) task_fill_as(t, ts, r, alloc, true);
    else task_fill_as(t, ts, r, alloc, false);
}

#endif
