/* SPDX-License-Identifier: MIT */
/* tasks.c - the task benchmarks ("task" group): the cost of a context
 * switch (cexec's fibers against boost::context and Boost.Fiber), of an
 * await that completes inline, of an await that goes through the pool and
 * back, of creating, running and destroying a task, and fib(n) written with
 * tasks against oneTBB's task_group: each step awaits its two child tasks
 * with ex_await_all (the fork-join entry point), and, as a second row, with
 * ex_await of their ex_when_all (the same fork behind a when_all sender). */
#include <stdio.h>

#include <cexec/cexec.h>

#include "task/exi_fiber.h"
#include "task/exi_stack.h"
#include "baselines.h"
#include "bench.h"
#include "harness.h"

enum { SWITCHES = 2000000, AWAITS = 2000000, POOL_AWAITS = 200000, TASKS = 200000 };

static double ns_per_op(double s, double ops) { return s * 1e9 / ops; }
static double as_ms(double s, double size) { (void)size; return s * 1e3; }

/* ------------------------------------------------------------ switches */

typedef struct ping { exi_fiber main, f; size_t n; } ping;

static void ping_entry(void *arg, void *user) {
    (void)arg;
    ping *p = user;
    for (size_t i = 0; i < p->n; i++) exi_fiber_switch(&p->f, &p->main, NULL);
    exi_fiber_switch_final(&p->f, &p->main, NULL);
}

/* n round trips into a fiber and back: 2n switches. */
static void cexec_switches(void *arg) {
    size_t n = *(size_t *)arg;
    const ex_allocator *stacks = exi_guarded_stack_allocator();
    void *stack = stacks->allocate(stacks->ctx, 64 << 10, 16);
    must(stack != NULL, "task: stack");
    ping p = { .n = n };
    exi_fiber_init_thread(&p.main);
    exi_fiber_init(&p.f, stack, 64 << 10, ping_entry, &p);
    for (size_t i = 0; i <= n; i++) exi_fiber_switch(&p.main, &p.f, NULL);
    exi_fiber_destroy(&p.f);
    stacks->deallocate(stacks->ctx, stack, 64 << 10, 16);
}

static void boost_ctx(void *arg) { boost_context_switch_pairs(*(size_t *)arg); }
static void boost_fib(void *arg) { boost_fiber_yield_pairs(*(size_t *)arg); }

/* -------------------------------------------------------------- awaits */

typedef struct await_arg { ex_sender *s; size_t n; } await_arg;

static ex_task_result await_loop(ex_task *t, void *arg) {
    await_arg *a = arg;
    for (size_t i = 0; i < a->n; i++)
        if (ex_await(t, ex_sender_retain(a->s)).status != EX_AWAIT_VALUE) return ex_task_with_error(ex_err(1, "await"));
    return ex_task_void();
}

static void run_task(ex_sender *task) {
    ex_result r = ex_sync_wait(task);
    must(r.disposition == EX_DISP_VALUE, r.disposition == EX_DISP_ERROR ? r.error.msg : "stopped");
    ex_result_destroy(&r);
}

static void inline_awaits(void *arg) {
    ex_task_options o = { .affinity = EX_TASK_INLINE };
    run_task(ex_task_create(await_loop, arg, &o));
}

static void pool_awaits(void *arg) { run_task(ex_starts_on(sched, ex_task_create(await_loop, arg, NULL))); }

/* ------------------------------------------------------ create and run */

static ex_task_result empty_body(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_void();
}

static ex_task_result spawn_loop(ex_task *t, void *arg) {
    size_t n = *(size_t *)arg;
    ex_task_options o = { .affinity = EX_TASK_INLINE };
    for (size_t i = 0; i < n; i++)
        if (ex_await(t, ex_task_create(empty_body, NULL, &o)).status != EX_AWAIT_VALUE)
            return ex_task_with_error(ex_err(1, "child"));
    return ex_task_void();
}

static void create_run_destroy(void *arg) {
    ex_task_options o = { .affinity = EX_TASK_INLINE };
    run_task(ex_task_create(spawn_loop, arg, &o));
}

/* ----------------------------------------------------------------- fib */

static ex_task_result fib_task(ex_task *t, void *arg) {
    intptr_t n = (intptr_t)arg;
    if (n < 2) return ex_task_i64(n);
    ex_await_result r = ex_await_all(t, ex_task_create(fib_task, (void *)(n - 1), NULL),
                                     ex_task_create(fib_task, (void *)(n - 2), NULL));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_i64(r.v[0].as.i + r.v[1].as.i);
}

static ex_task_result fib_task_when_all(ex_task *t, void *arg) {
    intptr_t n = (intptr_t)arg;
    if (n < 2) return ex_task_i64(n);
    ex_await_result r = ex_await(t, ex_when_all(ex_task_create(fib_task_when_all, (void *)(n - 1), NULL),
                                                ex_task_create(fib_task_when_all, (void *)(n - 2), NULL)));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(r.error);
    return ex_task_i64(r.v[0].as.i + r.v[1].as.i);
}

static int64_t fib_expected;

static void fib_with(ex_task_fn body, intptr_t n) {
    ex_result r = ex_sync_wait(ex_starts_on(sched, ex_task_create(body, (void *)n, NULL)));
    must(r.disposition == EX_DISP_VALUE && r.values[0].as.i == fib_expected, "task: fib via tasks gave a wrong result");
    ex_result_destroy(&r);
}

static void fib_cexec_tasks(void *arg) { fib_with(fib_task, *(intptr_t *)arg); }
static void fib_cexec_when_all(void *arg) { fib_with(fib_task_when_all, *(intptr_t *)arg); }

static void fib_tbb_tg(void *arg) { must(tbb_fib(*(intptr_t *)arg, 0) == fib_expected, "task: tbb fib"); }

void bench_task_group(bool quick) {
    size_t switches = quick ? SWITCHES / 20 : SWITCHES;
    double nsw = 2.0 * (double)switches;
    bench_measure("task", "switch", "cexec", nsw, 1, runs, cexec_switches, &switches, ns_per_op, "ns/switch");
    bench_measure("task", "switch", "boost-context", nsw, 1, runs, boost_ctx, &switches, ns_per_op, "ns/switch");
    bench_measure("task", "switch", "boost-fiber", nsw, 1, runs, boost_fib, &switches, ns_per_op, "ns/switch");

    ex_sender *just = ex_just(ex_int(1));
    await_arg a = { just, quick ? AWAITS / 20 : AWAITS };
    bench_measure("task", "await, inline completion", "cexec", (double)a.n, 1, runs, inline_awaits, &a, ns_per_op,
                  "ns/await");
    ex_sender_release(just);

    ex_sender *hop = ex_schedule(sched);
    await_arg p = { hop, quick ? POOL_AWAITS / 20 : POOL_AWAITS };
    bench_measure("task", "await, through the pool", "cexec", (double)p.n, 1, runs, pool_awaits, &p, ns_per_op,
                  "ns/await");
    ex_sender_release(hop);

    size_t tasks = quick ? TASKS / 20 : TASKS;
    bench_measure("task", "create+run+destroy", "cexec", (double)tasks, 1, runs, create_run_destroy, &tasks, ns_per_op,
                  "ns/task");

    intptr_t n = quick ? 20 : 30;  /* the task issue names fib(30) */
    fib_expected = serial_fib(n);
    char name[48];
    snprintf(name, sizeof name, "fib(%d) tasks", (int)n);
    bench_measure("task", name, "cexec", (double)n, 1, runs, fib_cexec_tasks, &n, as_ms, "ms");
    bench_measure("task", name, "cexec-when_all", (double)n, 1, runs, fib_cexec_when_all, &n, as_ms, "ms");
    /* The same with plain malloc as the process default (the senders' allocator). */
    ex_set_default_allocator(ex_libc_allocator());
    bench_measure("task", name, "cexec-malloc-default", (double)n, 1, runs, fib_cexec_tasks, &n, as_ms, "ms");
    ex_set_default_allocator(NULL);
    bench_measure("task", name, "tbb", (double)n, 1, runs, fib_tbb_tg, &n, as_ms, "ms");
}
