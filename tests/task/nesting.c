/* SPDX-License-Identifier: MIT */
/* [task] nesting: a task about to suspend in an await runs the child
 * tasks its awaited operation queued on its worker (and no thief took) on
 * its own stack, as calls, instead of on stacks of their own (src/task/task_run.c,
 * "Nesting").  What must hold: the children run there (no stack taken),
 * only when the whole stack_size they ask for is left, never for work the
 * task does not wait for, and every task keeps its affinity, its stop
 * behaviour and its result when a nested child suspends, changes scheduler
 * or completes inside a stop request. */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "task/exi_stack.h"
#include "common/helpers.h"
#include "task/local_fixtures.h"

TEST_SUITE(exec_task_nesting, 60);

/* One test's shared state (each test runs in its own process). */
static struct {
    ex_pool *pool;
    ex_scheduler other;          /* a single_thread_context's */
    cnt_alloc child_stacks;      /* the children's stack allocator */
    ex_task_options child;       /* the children's options */
    atomic_uintptr_t where[4];   /* a local's address in child i */
    atomic_int workers_ok;       /* resumptions seen on the pool */
    ex_counting_scope scope;
} S;

/* An address in the caller's stack. */
static __attribute__((noinline)) uintptr_t here(void) { return (uintptr_t)__builtin_frame_address(0); }

static void setup_children(size_t stack_size) {
    cnt_alloc_init(&S.child_stacks);
    memset(&S.child, 0, sizeof S.child);
    S.child.stack_allocator = &S.child_stacks.base;
    S.child.stack_size = stack_size;
}

/* Child i: notes where its stack is, returns 10 * i. */
static ex_task_result child_note(ex_task *t, void *arg) {
    (void)t;
    intptr_t i = (intptr_t)arg;
    atomic_store(&S.where[i], here());
    return ex_task_i64(10 * i);
}

static ex_task_result parent_of_two(ex_task *t, void *arg) {
    ex_task_fn fn = (ex_task_fn)(uintptr_t)arg;
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(fn, (void *)1, &S.child),
                                                ex_task_create(fn, (void *)2, &S.child)));
    TCHECK(ex_pool_current_worker(S.pool) >= 0);
    if (r.status != EX_AWAIT_VALUE) return r.status == EX_AWAIT_ERROR ? ex_task_with_error(r.error) : ex_task_stopped();
    return ex_task_i64(r.v[0].as.i + r.v[1].as.i);
}

/* Runs parent(child) with a stack of parent_stack bytes from `stacks`: on
 * the pool, or where sync_wait runs it for an EX_TASK_INLINE parent. */
static ex_result run_task_with(ex_task_fn parent, ex_task_fn child, cnt_alloc *stacks, size_t parent_stack,
                               bool inline_parent) {
    ex_task_options o = { .stack_allocator = &stacks->base, .stack_size = parent_stack };
    if (inline_parent) o.affinity = EX_TASK_INLINE;
    ex_sender *task = ex_task_create(parent, (void *)(uintptr_t)child, &o);
    return ex_sync_wait(inline_parent ? task : ex_starts_on(ex_pool_scheduler(S.pool), task));
}

/* parent_of_two(fn) on the pool. */
static ex_result run_parent(ex_task_fn fn, cnt_alloc *stacks, size_t parent_stack) {
    return run_task_with(parent_of_two, fn, stacks, parent_stack, false);
}

/* S.pool of `workers` (no lent slots), children of 16 KiB stacks, and the parents' stack
 * allocator. */
static void setup_pool(unsigned workers, cnt_alloc *parent_stacks) {
    /* No lending: with it, main would run the parent and the worker could
     * steal its children ("no thief" below counts on the workers alone). */
    ex_pool_config c = test_pool_config(workers, NULL);
    c.lend_slots = -1;
    S.pool = test_pool_new_cfg(&c);
    setup_children(16384);
    cnt_alloc_init(parent_stacks);
}

static void start_other(ex_single_thread_context *ctx) {
    test_stc_init(ctx);
    S.other = ex_single_thread_context_scheduler(ctx);
}

static bool inside(uintptr_t p, const cnt_alloc *block) {
    return p >= (uintptr_t)block->last_p && p < (uintptr_t)block->last_p + block->last_size;
}

Test(exec_task_nesting, children_of_an_await_run_on_the_awaiting_tasks_stack) {
    cnt_alloc parent_stacks;
    setup_pool(1, &parent_stacks);  /* no thief: both children stay on the worker */
    ex_result r = run_parent(child_note, &parent_stacks, 256 * 1024);
    expect_value_int(&r, 30);
    cr_assert_eq(atomic_load(&S.child_stacks.allocs), 0, "a nested child took a stack of its own");
    cr_assert_eq(atomic_load(&parent_stacks.allocs), 1);
    cr_assert(inside(atomic_load(&S.where[1]), &parent_stacks) && inside(atomic_load(&S.where[2]), &parent_stacks),
              "the children did not run on the parent's stack");
    task_test_end(S.pool, NULL);
}

Test(exec_task_nesting, a_child_gets_its_own_stack_when_its_stack_size_is_not_left) {
    cnt_alloc parent_stacks;
    setup_pool(1, &parent_stacks);
    ex_result r = run_parent(child_note, &parent_stacks, 16384);  /* less than 16 KiB is left under the parent */
    expect_value_int(&r, 30);
    cr_assert_eq(atomic_load(&S.child_stacks.allocs), 2);
    cr_assert(!inside(atomic_load(&S.where[1]), &parent_stacks) && !inside(atomic_load(&S.where[2]), &parent_stacks));
    cr_assert_eq(atomic_load(&S.child_stacks.in_use), 0);
    task_test_end(S.pool, NULL);
}

/* A child that suspends three times (each await completes on the other
 * context's thread) and must resume on the pool each time. */
static ex_task_result child_suspends(ex_task *t, void *arg) {
    intptr_t i = (intptr_t)arg;
    atomic_store(&S.where[i], here());
    for (int k = 0; k < 3; k++) {
        ex_await_result r = ex_await(t, ex_continues_on(ex_just(ex_int(k)), S.other));
        TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == k);
        if (ex_pool_current_worker(S.pool) >= 0) atomic_fetch_add(&S.workers_ok, 1);
    }
    return ex_task_i64(10 * i);
}

Test(exec_task_nesting, a_nested_child_that_suspends_keeps_every_tasks_affinity) {
    ex_single_thread_context ctx;
    start_other(&ctx);
    cnt_alloc parent_stacks;
    setup_pool(1, &parent_stacks);
    for (int round = 0; round < 50; round++) {
        ex_result r = run_parent(child_suspends, &parent_stacks, 256 * 1024);
        expect_value_int(&r, 30);
    }
    cr_assert_eq(atomic_load(&S.workers_ok), 50 * 2 * 3, "a nested child resumed off its scheduler");
    cr_assert_lt(atomic_load(&S.child_stacks.allocs), 50 * 2, "no child ran nested");
    task_test_end(S.pool, &ctx);
}

/* A child that moves to the other context and finishes there: the parent
 * underneath must still go on on its pool (parent_of_two checks). */
static ex_task_result child_leaves(ex_task *t, void *arg) {
    intptr_t i = (intptr_t)arg;
    ex_scheduler prev = ex_change_coroutine_scheduler(t, S.other);
    TCHECK(prev.vt == ex_pool_scheduler(S.pool).vt);
    TCHECK(ex_pool_current_worker(S.pool) < 0);
    return ex_task_i64(10 * i);
}

Test(exec_task_nesting, a_nested_child_ending_on_another_scheduler_leaves_its_parent_on_its_own) {
    ex_single_thread_context ctx;
    start_other(&ctx);
    for (unsigned workers = 1; workers <= 2; workers++) {
        cnt_alloc parent_stacks;
        setup_pool(workers, &parent_stacks);
        for (int round = 0; round < 50; round++) {
            ex_result r = run_parent(child_leaves, &parent_stacks, 256 * 1024);
            expect_value_int(&r, 30);
        }
        ex_pool_destroy(S.pool);
    }
    task_test_end(NULL, &ctx);
}

/* Child 1 fails once child 2 (taken first from the deque, so nested) waits
 * for a stop: when_all's stop request completes child 2's await inside the
 * request, child 2 resumes and finishes there, on its parent's stack, and
 * must complete only after the request (else when_all, and the parent's
 * await, could be freed under it). */
static ex_task_result child_fail_or_wait(ex_task *t, void *arg) {
    intptr_t i = (intptr_t)arg;
    atomic_store(&S.where[i], here());
    if (i == 1) return ex_task_with_error(ex_err(EX_EUSER + 1, "child 1"));
    ex_await_result r = ex_await(t, until_stopped());
    TCHECK(r.status == EX_AWAIT_STOPPED);
    return ex_task_void();
}

Test(exec_task_nesting, a_nested_child_completing_inside_a_stop_request_completes_after_it) {
    cnt_alloc parent_stacks;
    setup_pool(1, &parent_stacks);
    for (int round = 0; round < 20; round++) {
        ex_result r = run_parent(child_fail_or_wait, &parent_stacks, 256 * 1024);
        expect_error(&r, EX_EUSER + 1);
        cr_assert(inside(atomic_load(&S.where[2]), &parent_stacks), "child 2 did not run nested");
    }
    cr_assert_eq(atomic_load(&S.child_stacks.in_use), 0);
    task_test_end(S.pool, NULL);
}

/* A task spawned into a scope before an await that suspends sits at the
 * bottom of the worker's deque when the awaiting task looks: it is not
 * part of the await, so it must get a stack of its own. */
static ex_task_result spawner(ex_task *t, void *arg) {
    (void)arg;
    TCHECK(ex_spawn_env(ex_task_create(child_note, (void *)3, &S.child), ex_counting_scope_token(&S.scope),
                        ex_task_env(t)).code == 0);
    ex_await_result r = ex_await(t, ex_continues_on(ex_just(), S.other));
    TCHECK(r.status == EX_AWAIT_VALUE);
    TCHECK(ex_pool_current_worker(S.pool) >= 0);
    r = ex_await(t, ex_counting_scope_join(&S.scope));
    TCHECK(r.status == EX_AWAIT_VALUE);
    return ex_task_void();
}

Test(exec_task_nesting, work_the_task_does_not_await_never_runs_nested) {
    ex_single_thread_context ctx;
    start_other(&ctx);
    S.pool = test_pool_new(1);
    setup_children(16384);
    cr_assert_eq(ex_counting_scope_init(&S.scope).code, 0);
    ex_result r = ex_sync_wait(ex_starts_on(ex_pool_scheduler(S.pool), ex_task_create(spawner, NULL, NULL)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE);
    ex_result_destroy(&r);
    cr_assert_eq(atomic_load(&S.child_stacks.allocs), 1, "the spawned task ran nested");
    cr_assert_neq(atomic_load(&S.where[3]), 0);
    cr_assert_eq(ex_counting_scope_destroy(&S.scope).code, 0);
    task_test_end(S.pool, &ctx);
}

/* A chain of tasks each awaiting one child, deeper than one stack holds
 * nested: nesting stops where the stack_size is no longer left, the rest
 * take stacks of their own, and the result comes through. */
static ex_task_result chain(ex_task *t, void *arg) {
    intptr_t depth = (intptr_t)arg;
    if (depth == 0) return ex_task_i64(0);
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(chain, (void *)(depth - 1), &S.child)));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_i64(r.v[0].as.i + 1);
}

Test(exec_task_nesting, nesting_stops_where_the_stack_runs_out) {
    S.pool = test_pool_new(2);
    memset(&S.child, 0, sizeof S.child);
    S.child.stack_size = 16384;  /* default (guarded) stacks */
    ex_alloc_stats before, after;
    cr_assert_eq(ex_allocator_stats(exi_guarded_stack_allocator(), &before).code, 0);
    ex_result r = ex_sync_wait(ex_starts_on(ex_pool_scheduler(S.pool), ex_task_create(chain, (void *)200, &S.child)));
    expect_value_int(&r, 200);
    cr_assert_eq(ex_allocator_stats(exi_guarded_stack_allocator(), &after).code, 0);
    uint64_t stacks = after.allocations - before.allocations;
    cr_assert_gt(stacks, 1, "200 nested levels cannot fit one stack");
    cr_assert_lt(stacks, 100, "nesting did not happen (%llu stacks)", (unsigned long long)stacks);
    task_test_end(S.pool, NULL);
}

/* ------------------------------------------------ tasks awaited directly */

static ex_task_result await_child_directly(ex_task *t, void *arg) {
    ex_task_fn fn = (ex_task_fn)(uintptr_t)arg;
    ex_await_result r = ex_await(t, ex_task_create(fn, (void *)1, &S.child));
    if (S.pool) TCHECK(ex_pool_current_worker(S.pool) >= 0);
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_i64(r.v[0].as.i + 1);
}

static ex_error pause_2ms(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    test_sleep_ms(2);
    return ex_ok();
}

/* An EX_TASK_INLINE child that suspends: it resumes on the other
 * context's thread, where the completion runs (2 ms after the hop there,
 * so the child has usually suspended by then).  If its thread was held up
 * for longer, the completion finds it not yet suspended and it goes on
 * where it was: a pause is no promise, so both are accepted. */
static ex_task_result child_inline_suspends(ex_task *t, void *arg) {
    intptr_t i = (intptr_t)arg;
    atomic_store(&S.where[i], here());
    const void *before = test_thread_id();
    ex_await_result r = ex_await(t, ex_then(ex_continues_on(ex_just(), S.other), pause_2ms, NULL, EX_SIG0, EX_SIG0));
    TCHECK(r.status == EX_AWAIT_VALUE);
    /* inline affinity: where it completed */
    if (S.pool) TCHECK(ex_pool_current_worker(S.pool) < 0 || test_thread_id() == before);
    return ex_task_i64(10 * i);
}

/* `rounds` runs, on a one-worker pool, of an affine task (256 KiB stack)
 * awaiting `child` directly (EX_TASK_INLINE children when asked): each
 * gives `expect`, task number `nested` ran on the parent's stack, and no
 * child took a stack (await_child_directly checks the parent's affinity). */
static void expect_direct_nesting(ex_task_fn child, bool inline_children, int rounds, int64_t expect, int nested) {
    ex_single_thread_context ctx;
    start_other(&ctx);
    S.pool = test_pool_new(1);
    setup_children(16384);
    if (inline_children) S.child.affinity = EX_TASK_INLINE;
    cnt_alloc parent_stacks;
    cnt_alloc_init(&parent_stacks);
    for (int round = 0; round < rounds; round++) {
        ex_result r = run_task_with(await_child_directly, child, &parent_stacks, 256 * 1024, false);
        expect_value_int(&r, expect);
        cr_assert(inside(atomic_load(&S.where[nested]), &parent_stacks), "task %d did not run on its parent's stack", nested);
    }
    cr_assert_eq(atomic_load(&S.child_stacks.allocs), 0);
    task_test_end(S.pool, &ctx);
}

Test(exec_task_nesting, a_task_awaited_directly_runs_nested) {
    expect_direct_nesting(child_note, false, 10, 11, 1);
}

Test(exec_task_nesting, an_inline_child_resumed_elsewhere_leaves_an_affine_parent_on_its_scheduler) {
    expect_direct_nesting(child_inline_suspends, true, 20, 11, 1);
}

Test(exec_task_nesting, inline_tasks_awaiting_inline_tasks_nest_without_a_scheduler) {
    ex_single_thread_context ctx;
    start_other(&ctx);
    setup_children(16384);
    S.child.affinity = EX_TASK_INLINE;
    cnt_alloc parent_stacks;
    cnt_alloc_init(&parent_stacks);
    ex_result r = run_task_with(await_child_directly, child_inline_suspends, &parent_stacks, 256 * 1024, true);
    expect_value_int(&r, 11);
    cr_assert(inside(atomic_load(&S.where[1]), &parent_stacks));
    cr_assert_eq(atomic_load(&S.child_stacks.allocs), 0);
    task_test_end(NULL, &ctx);
}

/* An affine task awaits an EX_TASK_INLINE child, which awaits an inline
 * grandchild that resumes on the other context: both nest, the grandchild
 * moves the whole stack there, and the affine task must still go on on its
 * pool after its child returns (found by the soak: only the grandchild had
 * suspended, so the child looked as if it had never left). */
static ex_task_result inline_middle(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_task_create(child_inline_suspends, (void *)2, &S.child));
    return r.status == EX_AWAIT_VALUE ? ex_task_i64(r.v[0].as.i) : ex_task_with_error(r.error);
}

Test(exec_task_nesting, a_grandchild_resumed_elsewhere_leaves_an_affine_task_on_its_scheduler) {
    expect_direct_nesting(inline_middle, true, 20, 21, 2);
}

/* An EX_TASK_INLINE child that moves to its parent's pool stays inline:
 * its next await resumes it where the completion runs, so having the
 * parent's scheduler does not mean it ended there (found in review). */
static ex_task_result inline_child_moves_to_the_pool(ex_task *t, void *arg) {
    intptr_t i = (intptr_t)arg;
    atomic_store(&S.where[i], here());
    (void)ex_change_coroutine_scheduler(t, ex_pool_scheduler(S.pool));
    ex_await_result r = ex_await(t, ex_then(ex_continues_on(ex_just(), S.other), pause_2ms, NULL, EX_SIG0, EX_SIG0));
    TCHECK(r.status == EX_AWAIT_VALUE);
    return ex_task_i64(10 * i);
}

Test(exec_task_nesting, an_inline_child_on_its_parents_scheduler_still_makes_the_parent_hop) {
    expect_direct_nesting(inline_child_moves_to_the_pool, true, 20, 11, 1);
}
