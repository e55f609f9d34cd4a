/* SPDX-License-Identifier: MIT */
/* cexec/task.h - the coroutine task (P3552 in C): stackful tasks with
 * scheduler affinity.
 *
 * A task is a C function run on a stack of its own (or, when its parent
 * waits for it anyway, on the rest of its parent's: see "Nesting").  Inside it,
 * ex_await(t, sender) suspends the task until the sender completes and
 * gives back its value(s), or its error for the body to inspect.  This
 * task's main runs it on sync_wait's run loop and gets 42
 * (examples/task_hello.c):
 *
 *     static ex_task_result hello(ex_task *t, void *arg) {
 *         (void)arg;
 *         printf("Hello, world!\n");
 *         // An await that completes inline: no stack switch.
 *         ex_await_result r = ex_await(t, ex_just(ex_int(41)));
 *         if (r.status != EX_AWAIT_VALUE) return ex_task_void();
 *         return ex_task_i64(r.v[0].as.i + 1);
 *     }
 *
 *     int main(void) {
 *         ex_result r = ex_sync_wait(ex_task_create(hello, NULL, NULL));
 *
 * The sender ex_task_create returns is lazy (nothing runs before start) and
 * single-shot (a second connect fails with EX_EINVAL).  It completes with
 * the body's result: set_value(values...), set_error(e) (ex_task_with_error,
 * P3552's with_error), or set_stopped.
 *
 * Scheduler affinity ([exec.affine.on], P3552 §4.5): the task's scheduler
 * is get_scheduler of its receiver's environment.  The body starts on it,
 * and every ex_await resumes on it: when the awaited sender completes
 * elsewhere, the task hops back (through the scheduler's dispatch when it
 * has one, so the hop is skipped when the completion already runs on it).
 * When the hop cannot be made (the scheduler refuses or drops it, or there
 * is no memory for it), the await reports that error — or stopped — in
 * place of the sender's result, as affine_on would; a task whose start
 * cannot reach its scheduler completes with it without running its body.
 * A receiver environment without a scheduler makes connect fail with
 * EX_EINVAL, unless the task opted out with EX_TASK_INLINE (then the task
 * resumes wherever the awaited sender completes).
 * ex_change_coroutine_scheduler moves the task to another scheduler.
 *
 * Awaits that complete inline (ex_just, a then chain on values, an
 * inline scheduler) neither switch stacks nor grow the stack: a loop of a
 * million awaits runs in constant stack.
 *
 * Stopped: when an awaited sender completes with set_stopped, ex_await
 * returns EX_AWAIT_STOPPED and the task is stopped for good: whatever the
 * body returns, the task completes with set_stopped, and any later
 * ex_await returns EX_AWAIT_STOPPED at once (releasing its sender) — so the
 * body can release what it holds and return.  C has no unwinding: the body
 * must return itself (P3552's task is never resumed; a C body gets one
 * chance to clean up instead).
 *
 * Frames: the task's control block is its operation state (caller storage,
 * or the environment's allocator with ex_connect_alloc; it also holds the
 * awaited operation state and the schedule operation of the hop back, up to
 * a size, so steady-state awaits allocate nothing); its stack comes
 * from the options' stack allocator — by default pooled stacks with a guard
 * page below, so running off the end faults instead of corrupting memory —
 * when the task first runs on it.
 *
 * Nesting: a task about to suspend in an await first runs, on its own
 * stack and as plain calls, the child tasks that the awaited operation
 * queued on its pool worker and no other worker took yet (the tasks that
 * operation's completion waits for: those whose receiver environment leads
 * back to the await; never a task spawned into a scope); a task it
 * awaits directly starts nested at once when its scheduler's dispatch runs
 * it inline (or it is EX_TASK_INLINE).  Such a child
 * needs no stack of its own and no context switch; it runs only when its
 * whole stack_size is left below, and if it suspends, the parent's stack
 * waits with it.  The default stacks map 4 x stack_size of address space
 * (pages are committed as they are touched) to leave that room.
 *
 * Fork-join: ex_await_all(t, children...) of tasks (created affine, the
 * default), or ex_await of their ex_when_all, from an affine task runs as
 * a fork: the children's control blocks go into the awaiting task's await
 * area (no when_all operation, no environment queries), all but the last child are
 * queued on the worker for thieves (unless the worker already has work
 * queued: then they run nested after the last, and are queued only if the
 * stack suspends first) and the last starts at once, nested.
 * The result and everything the children observe are when_all's: values
 * in order, the first error or stopped wins and asks the others to stop
 * (their stop token is the when_all's own), the awaiting task's stop
 * request reaches them, and no child starts when stop was already
 * requested.  A when_all too big for the await area (640 bytes a
 * child; 4 KiB with the default stack), or with another kind of child,
 * runs as any sender does.
 *
 * Threads: a task runs on one thread at a time, possibly a different one
 * after each await (its scheduler's agents).  Do not keep the address of a
 * thread-local variable across an ex_await. */
#ifndef CEXEC_TASK_H
#define CEXEC_TASK_H

#include <cexec/scope.h>
#include <cexec/types.h>
#include <cexec/value.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ex_task ex_task;  /* the running task, handed to its body */

/* Default usable stack size of a task. */
#define EX_TASK_STACK_DEFAULT ((size_t)64 << 10)
/* Bounds of ex_task_options.stack_size (0 aside): ex_task_create gives an
 * invalid sender (EX_EINVAL) outside them.  1 GiB is Go's cap on a
 * goroutine's stack too; a bigger one is more likely a negative number
 * cast to size_t than a need, and the default stacks map 4 times it. */
#define EX_TASK_STACK_MIN ((size_t)4096)
#define EX_TASK_STACK_MAX ((size_t)1 << 30)

/* Bytes of an awaited operation state kept in the task's frame, in the
 * block of its stack but above the usable part: stack_size / 16, at least
 * 256 and at most EX_TASK_AWAIT_INLINE (reached from 64 KiB stacks, the
 * default).  A bigger operation goes into a buffer from the task's
 * allocator, kept and reused by later awaits. */
#define EX_TASK_AWAIT_INLINE 4096
static inline size_t ex_task_await_inline_size(size_t stack_size) {
    size_t n = (stack_size ? stack_size : EX_TASK_STACK_DEFAULT) / 16 & ~(size_t)15;
    return n < 256 ? 256 : n > EX_TASK_AWAIT_INLINE ? EX_TASK_AWAIT_INLINE : n;
}

typedef enum ex_task_affinity {
    EX_TASK_AFFINE = 0,   /* resume on the receiver environment's scheduler (default) */
    EX_TASK_INLINE = 1    /* opt out: resume on the thread that completes the await (or, if
                             it completes before the task has suspended, on the task's own) */
} ex_task_affinity;

typedef struct ex_task_options {
    /* Usable stack bytes the body may use (rounded up to pages by the
     * default stack allocator, which maps 4 times as much so children can
     * run nested; see "Nesting"); 0: EX_TASK_STACK_DEFAULT; else in
     * [EX_TASK_STACK_MIN, EX_TASK_STACK_MAX]. */
    size_t stack_size;
    /* Where the stack comes from (allocate(size, 16) must return its lowest
     * address; size is stack_size plus the task's frame area, at most
     * 4.4 KiB more; a task that runs nested takes none); NULL: pooled
     * stacks with a guard page.  A frame allocator such as a per-worker
     * jemalloc arena works too (no guard page). */
    const struct ex_allocator *stack_allocator;
    /* What get_allocator answers inside the task (and what ex_await gives
     * children); NULL: the receiver environment's allocator. */
    const struct ex_allocator *allocator;
    ex_task_affinity affinity;
    /* A user environment: inside the task, ex_task_env answers its
     * forwarding queries (P3552's Environment); NULL node: the receiver
     * environment's forwarding queries.  Must outlive the task. */
    ex_env env;
    /* The value signature the body returns, for the sender's completion
     * signatures; NULL: dynamic (checked when the values arrive).  A body
     * that returns values of another signature completes the task with
     * set_error(EX_EINVAL) instead: the receiver gets only what the sender
     * declared. */
    const ex_sig *value_sig;
} ex_task_options;

/* What a body returns; build it with the ex_task_* helpers below. */
typedef enum ex_task_result_kind { EX_TASK_VALUE, EX_TASK_ERROR, EX_TASK_STOPPED } ex_task_result_kind;

typedef struct ex_task_result {
    ex_task_result_kind kind;
    uint8_t n;
    ex_value v[EX_MAX_ARITY];
    ex_error error;
} ex_task_result;

typedef ex_task_result (*ex_task_fn)(ex_task *t, void *arg);

/* The task `fn(t, arg)` as a sender (opt may be NULL).  Values the body
 * returns are copied; a pointer, string or tuple among them must not point
 * into the task's stack (it is gone when the task completes).  Never NULL:
 * bad options give an invalid sender (EX_EINVAL), allocation failure one
 * with EX_ENOMEM.  Connect errors: EX_EINVAL (connected before: a task is
 * single-shot; no scheduler in the receiver's environment).  When its stack
 * cannot be had (taken at its first run on it: on the task's scheduler, or
 * at start for a scheduler with neither post nor dispatch, whose hop needs
 * it) the task completes with set_error(EX_ENOMEM) without running its
 * body. */
ex_sender *ex_task_create(ex_task_fn fn, void *arg, const ex_task_options *opt);

/* ------------------------------------------------------- inside a task */

typedef enum ex_await_status { EX_AWAIT_VALUE, EX_AWAIT_ERROR, EX_AWAIT_STOPPED } ex_await_status;

typedef struct ex_await_result {
    ex_await_status status;
    uint8_t n;                  /* values (EX_AWAIT_VALUE) */
    ex_value v[EX_MAX_ARITY];
    ex_error error;             /* EX_AWAIT_ERROR: the body's (cexec/error.h): return it with
                                   ex_task_with_error, or ex_error_release it */
} ex_await_result;

/* Suspends t until s completes (consumes s) and returns its completion, on
 * t's scheduler.  The operation state lives in the task (up to
 * ex_task_await_inline_size(stack size) bytes, 4 KiB with the default
 * stack, without any allocation; bigger ones in a
 * buffer from the task's allocator that later awaits reuse; EX_ENOMEM as
 * an EX_AWAIT_ERROR if that fails).  Values are copied, tuples deeply
 * (from the task's allocator; EX_ENOMEM as an EX_AWAIT_ERROR), and stay
 * readable until the next ex_await, ex_task_yield or
 * ex_change_coroutine_scheduler (each is an await) — or, when the body
 * returns them, until the task's operation state is destroyed.  Strings and pointers are not
 * copied: they point where the sender put them.  Connect errors come back as
 * EX_AWAIT_ERROR.  A sender with more than one value signature is refused
 * (P3552R3 §4.4, as ex_sync_wait refuses it): EX_AWAIT_ERROR with
 * EX_EINVAL, s released unstarted; await ex_into_variant(s) instead.
 * Call only from t's own body; a NULL t gives EX_AWAIT_ERROR (EX_EINVAL)
 * and releases s.  (The other functions here
 * take a NULL task too: EX_EINVAL, the invalid scheduler, the empty env,
 * the never-stop token, false.) */
static inline ex_await_result ex_await(ex_task *t, ex_sender *s);

/* ex_await writing into *out (what ex_await does; inline above, so the
 * completion writes straight into the caller's variable). */
void ex_await_into(ex_task *t, ex_sender *s, ex_await_result *out);

static inline ex_await_result ex_await(ex_task *t, ex_sender *s) {
    ex_await_result r;
    ex_await_into(t, s, &r);
    return r;
}

/* Awaits the n senders at once: what ex_await(t, ex_when_all_n(children,
 * n)) gives (values concatenated in order; the first error or stopped
 * wins and asks the others to stop; every error and refusal of
 * ex_when_all_n, as EX_AWAIT_ERROR), consuming the children (not the
 * array).  When they are all tasks (affine, the default) and t may fork
 * (see "Fork-join"), it runs the fork without building the when_all
 * sender: the children are connected into t's await area and their
 * senders released at once (a fifth fewer instructions a fork step than
 * awaiting their ex_when_all).  Otherwise it awaits their when_all.
 * Call only from t's own body. */
static inline ex_await_result ex_await_all_n(ex_task *t, ex_sender *const *children, size_t n);

/* ex_await_all_n writing into *out (inline above, as ex_await is). */
void ex_await_all_into(ex_task *t, ex_sender *const *children, size_t n, ex_await_result *out);

static inline ex_await_result ex_await_all_n(ex_task *t, ex_sender *const *children, size_t n) {
    ex_await_result r;
    ex_await_all_into(t, children, n, &r);
    return r;
}

/* ex_await_all(t, a, b, ...) */
#ifndef __cplusplus
#define ex_await_all(t, ...)                                        \
    ex_await_all_n((t), (ex_sender *const[]){ __VA_ARGS__ },        \
                   sizeof((ex_sender *[]){ __VA_ARGS__ }) / sizeof(ex_sender *))
#else  /* no compound literals in C++ */
#define ex_await_all(t, ...) exi_cxx_await_all((t), { __VA_ARGS__ })
#endif

/* The scheduler the task runs on (the inline scheduler with
 * EX_TASK_INLINE). */
ex_scheduler ex_task_scheduler(const ex_task *t);

/* Lets the work waiting on t's scheduler run, then resumes t there.  On a
 * pool that means behind everything queued on the calling worker: a plain
 * ex_await(t, ex_schedule(pool)) is not a yield, its item goes on top of
 * the worker's LIFO deque and runs first again.  Schedulers without a
 * yield hook get an await of ex_schedule.  Returns EX_OK; the scheduler's
 * refusal (e.g. EX_ESHUTDOWN; t did not move); or EX_ECANCELED when the
 * queued resumption was dropped or the task is stopped (ex_task_is_stopped
 * is then true).  Call only from t's own body. */
ex_error ex_task_yield(ex_task *t);

/* Suspends t for duration_ns and resumes it on its scheduler: an await of
 * ex_schedule_after(ex_task_scheduler(t), duration_ns) (cexec/timer.h),
 * so the timer fires on the scheduler's resource, never early, and the
 * task resumes there without a hop; the thread is free meanwhile.
 * Returns EX_OK once the time has passed; EX_ECANCELED if the task's stop
 * was requested during the sleep (the timer is removed at once; the task
 * is then stopped, ex_task_is_stopped, as after any await that completes
 * stopped) or it was stopped already; the error of the timer or of the
 * hop back (EX_ESHUTDOWN from a resource shutting down; the caller owns
 * it, cexec/error.h); EX_ENOMEM without memory for the timer's sender (the
 * task is not stopped); EX_ENOTSUP if the task's scheduler has no clock:
 * the inline scheduler of an EX_TASK_INLINE task, a strand, a scheduler
 * without connect_schedule_at, and ex_sync_wait's own run loop (a task
 * given straight to ex_sync_wait: start it on a pool, a single-thread
 * context or an ex_run_loop with ex_starts_on to sleep); EX_EINVAL for a
 * NULL task, a negative duration or one that overflows the clock.  Call
 * only from t's body. */
ex_error ex_task_sleep_for(ex_task *t, int64_t duration_ns);

/* ex_task_sleep_for until CLOCK_MONOTONIC (ex_now()) reaches deadline_ns.
 * A deadline already past still goes through the resource: t resumes
 * when the resource fires its due timers (at once on an idle one).
 * EX_EINVAL for a negative deadline, else as ex_task_sleep_for. */
ex_error ex_task_sleep_until(ex_task *t, int64_t deadline_ns);

/* Moves t to sch: returns the previous scheduler; when it returns, the task
 * runs on sch, and later awaits resume there.  The task keeps its hold on
 * the previous scheduler's resource (and on every one it ran on) until it
 * completes, so the handle returned stays valid for the task's life, and
 * moving back to it is safe even while the resource is being destroyed
 * (that move is refused: EX_ESHUTDOWN).  No memory to record the hold:
 * the task does not move.  EX_TASK_INLINE tasks switch
 * too (they hop once).  If the move fails (sch refuses work, no memory for
 * the hop) the task stays with its scheduler (ex_task_scheduler tells); a
 * stop request that stops the move stops the task (ex_task_is_stopped); a
 * task that is already stopped does not move. */
ex_scheduler ex_change_coroutine_scheduler(ex_task *t, ex_scheduler sch);

/* The task's stop token: its receiver's (P3552 §4.7 links a token of the
 * task's own to it only when the receiver's token has another type; in C
 * every token has the same type), which children awaited by the task see.
 * Call from t's body or from work it awaits. */
ex_stop_token ex_task_stop_token(const ex_task *t);

/* The environment inside the task (read_env): get_scheduler (the task's),
 * get_allocator, get_stop_token (the task's), and the forwarding queries of
 * the user environment (or of the receiver's).  Valid while the task runs;
 * query it from the body or from work the task awaits. */
ex_env ex_task_env(const ex_task *t);

/* Whether an await of t completed stopped (the task will complete stopped). */
bool ex_task_is_stopped(const ex_task *t);

/* --------------------------------------------------------- results */

/* set_value(v[0..n)) */
ex_task_result ex_task_values(size_t n, const ex_value *v);
/* set_value() */
static inline ex_task_result ex_task_void(void) {
    ex_task_result r;  /* only what the completion reads is set */
    r.kind = EX_TASK_VALUE;
    r.n = 0;
    r.error = ex_ok();
    return r;
}
/* set_value(x); inline, as the result is built on every return. */
static inline ex_task_result ex_task_value(ex_value x) {
    ex_task_result r;  /* only what the completion reads is set */
    r.kind = EX_TASK_VALUE;
    r.n = 1;
    r.v[0] = x;
    r.error = ex_ok();
    return r;
}
static inline ex_task_result ex_task_i64(int64_t i) {
    ex_task_result r;
    r.kind = EX_TASK_VALUE;
    r.n = 1;
    r.v[0].type = EX_T_INT;
    r.v[0].as.i = i;
    r.error = ex_ok();
    return r;
}
/* set_error(e): P3552's `co_yield with_error{e}`.  Takes e's reference:
 * `return ex_task_with_error(r.error)` passes an await's error on; if the
 * task ends stopped instead, the error is released. */
ex_task_result ex_task_with_error(ex_error e);
/* set_stopped() */
ex_task_result ex_task_stopped(void);

/* ------------------------------------------------------------ launching */

/* What happens to the result of a launched task.  Each handler may be
 * NULL; an error without an on_error handler goes to the scope: its join
 * completes with the first such error (a detached task's error is never
 * dropped silently, and the library prints nothing).  Handlers run on the
 * task's scheduler, after the task's stack is gone. */
/* on_error is given the error's reference (cexec/error.h): it releases it. */
typedef struct ex_task_handlers {
    void (*on_value)(void *ctx, const ex_value *v, size_t n);
    void (*on_error)(void *ctx, ex_error e);
    void (*on_stopped)(void *ctx);
    void *ctx;
} ex_task_handlers;

/* D4003's run_async in C: starts `task` (any sender, usually from
 * ex_task_create; consumed) detached, as work of the counting scope behind
 * `scope`, with sch as its scheduler (what its receiver's get_scheduler
 * answers: the task starts and resumes there) and the scope's stop token.
 * The scope's join waits for it.  h may be NULL (results dropped, errors
 * to the scope's join).  Errors (the task is not started and is released): those of
 * ex_spawn (EX_ESHUTDOWN: scope closed; EX_ENOMEM; EX_EINVAL: invalid
 * task or scheduler). */
ex_error ex_task_launch(ex_scope_token scope, ex_scheduler sch, ex_sender *task, const ex_task_handlers *h);

#ifdef __cplusplus
}
#endif

#ifdef __cplusplus
#include <initializer_list>
static inline ex_await_result exi_cxx_await_all(ex_task *t, std::initializer_list<ex_sender *> c) {
    return ex_await_all_n(t, c.begin(), c.size());
}
#endif
#endif
