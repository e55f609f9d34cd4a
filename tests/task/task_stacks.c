/* SPDX-License-Identifier: MIT */
/* [task] stacks: awaits do not grow the stack, recursion, the guard page,
 * the stack allocator option, and out-of-memory sweeps (exec_task suite,
 * see task_results.c). */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "task/local_fixtures.h"

/* ================================================================ stacks */

typedef struct loop_arg {
    long n;
    uintptr_t body0, bodyN;    /* a local of the body */
    uintptr_t cb0, cbN;        /* a local of a then callback run inline by the await */
    uintptr_t cb_cur;
    uintptr_t stack_lo, stack_hi;  /* when known: the task's stack */
    int64_t sum;
} loop_arg;

static ex_error note_sp(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)n;
    volatile char here = 0;
    ((loop_arg *)ctx)->cb_cur = (uintptr_t)&here;
    out[0] = in[0];
    return ex_ok();
}

static ex_task_result body_million(ex_task *t, void *arg) {
    loop_arg *a = arg;
    for (long i = 0; i < a->n; i++) {
        volatile char local = 0;
        ex_await_result r;
        if (i == 0 || i == a->n / 2 || i == a->n - 1)
            r = ex_await(t, ex_then(ex_just(ex_int(i)), note_sp, a, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
        else
            r = ex_await(t, ex_just(ex_int(i)));
        if (r.status != EX_AWAIT_VALUE || r.v[0].as.i != i) return ex_task_with_error(ex_err(EX_EUSER, "body_million: bad await"));
        a->sum += r.v[0].as.i;
        if (i == 0) {
            a->body0 = (uintptr_t)&local;
            a->cb0 = a->cb_cur;
        }
        if (i == a->n - 1) {
            a->bodyN = (uintptr_t)&local;
            a->cbN = a->cb_cur;
        }
    }
    return ex_task_i64(a->n);
}

static void million_awaits(bool inline_affinity) {
    loop_arg a = { .n = 1000000 };
    ex_task_options o = { .affinity = inline_affinity ? EX_TASK_INLINE : EX_TASK_AFFINE };
    ex_result r = run(ex_task_create(body_million, &a, &o));
    expect_value_int(&r, a.n);
    cr_assert_eq(a.sum, (int64_t)a.n * (a.n - 1) / 2);
    cr_assert_eq(a.body0, a.bodyN, "the body's frame moved");
    cr_assert_eq(a.cb0, a.cbN, "an inline await at iteration %ld ran %ld bytes deeper than at iteration 0", a.n - 1,
                 (long)(a.cb0 - a.cbN));
    /* The inline completion ran on the task's own stack, just below the body. */
    cr_assert_lt(a.cb0, a.body0);
    cr_assert_lt(a.body0 - a.cb0, (uintptr_t)EX_TASK_STACK_DEFAULT, "the inline await switched stacks");
    expect_no_leaks();
}

Test(exec_task, million_inline_awaits_on_the_inline_scheduler) { million_awaits(true); }

Test(exec_task, million_inline_awaits_on_a_run_loop) { million_awaits(false); }

/* Suspending awaits: the loop's thread resumes the task over and over; its
 * own stack must not grow either. */
static ex_error note_sp0(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    volatile char here = 0;
    ((loop_arg *)ctx)->cb_cur = (uintptr_t)&here;
    return ex_ok();
}

static ex_task_result body_suspend_loop0(ex_task *t, void *arg) {
    loop_arg *a = arg;
    ex_scheduler home = ex_task_scheduler(t);
    for (long i = 0; i < a->n; i++) {
        ex_await_result r = ex_await(t, ex_then(ex_schedule(home), note_sp0, a, EX_SIG0, EX_SIG0));
        if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(ex_err(EX_EUSER, "body_suspend_loop: bad await"));
        if (i == 1) a->cb0 = a->cb_cur;
        if (i == a->n - 1) a->cbN = a->cb_cur;
    }
    return ex_task_i64(a->n);
}

Test(exec_task, suspending_awaits_do_not_grow_the_resuming_stack) {
    loop_arg a = { .n = 100000 };
    ex_result r = run(ex_task_create(body_suspend_loop0, &a, NULL));
    expect_value_int(&r, a.n);
    uintptr_t d = a.cb0 > a.cbN ? a.cb0 - a.cbN : a.cbN - a.cb0;
    cr_assert_lt(d, 4096, "the resuming thread's stack moved by %lu bytes over %ld awaits", (unsigned long)d, a.n);
    expect_no_leaks();
}

/* Recursion: uses the stack it was given. */
static volatile int recursion_limit = INT_MAX;

__attribute__((noinline)) static int recurse(int depth, int until, uintptr_t *deepest) {
    volatile char buf[1024];
    buf[0] = (char)depth;
    buf[sizeof buf - 1] = (char)depth;
    if (depth >= until || depth >= recursion_limit) {
        *deepest = (uintptr_t)&buf[0];
        return buf[0];
    }
    return recurse(depth + 1, until, deepest) + buf[sizeof buf - 1];
}

typedef struct deep_arg {
    int depth;
    uintptr_t top, deepest;
    int result;
} deep_arg;

static ex_task_result body_deep(ex_task *t, void *arg) {
    (void)t;
    deep_arg *a = arg;
    volatile char top = 0;
    a->top = (uintptr_t)&top;
    a->result = recurse(0, a->depth, &a->deepest);
    return ex_task_i64(a->depth);
}

Test(exec_task, deep_recursion_within_the_stack_size) {
    cnt_alloc stacks;
    cnt_alloc_init(&stacks);
    ex_task_options o = { .stack_size = 512 * 1024, .stack_allocator = &stacks.base };
    deep_arg a = { 200, 0, 0, 0 };  /* >= 200 KiB of frames */
    ex_result r = run(ex_task_create(body_deep, &a, &o));
    expect_value_int(&r, 200);
    cr_assert_eq(atomic_load(&stacks.allocs), 1);
    uintptr_t lo = (uintptr_t)stacks.last_p, hi = lo + stacks.last_size;
    cr_assert(a.top > lo && a.top < hi, "the body did not run on the stack from stack_allocator");
    cr_assert(a.deepest >= lo && a.deepest < hi, "the recursion left the task's stack");
    cr_assert_geq(a.top - a.deepest, (uintptr_t)200 * 1024);

    /* and with the default guarded stacks */
    memset(&o, 0, sizeof o);
    o.stack_size = 512 * 1024;
    a = (deep_arg){ 200, 0, 0, 0 };
    r = run(ex_task_create(body_deep, &a, &o));
    expect_value_int(&r, 200);
    cr_assert_geq(a.top - a.deepest, (uintptr_t)200 * 1024);
    expect_no_leaks();
}

static ex_task_result body_overflow(ex_task *t, void *arg) {
    (void)t, (void)arg;
    uintptr_t deepest = 0;
    int x = recurse(0, INT_MAX, &deepest);
    return ex_task_i64(x);
}

/* Running off the end of the stack hits the guard page. */
Test(exec_task, stack_overflow_hits_the_guard_page, .signal = SIGSEGV) {
    signal(SIGSEGV, SIG_DFL);  /* die by the signal (sanitizers would report and exit instead) */
    ex_task_options o = { .stack_size = 16384 };
    ex_result r = run(ex_task_create(body_overflow, NULL, &o));
    (void)r;
}

typedef struct where_stack {
    uintptr_t local;
} where_stack;

static ex_task_result body_where(ex_task *t, void *arg) {
    (void)t;
    volatile char here = 0;
    ((where_stack *)arg)->local = (uintptr_t)&here;
    return ex_task_void();
}

Test(exec_task, stack_allocator_option_provides_the_stack) {
    cnt_alloc stacks;
    cnt_alloc_init(&stacks);
    ex_task_options o = { .stack_allocator = &stacks.base, .stack_size = 100000 };
    where_stack w = { 0 };
    ex_result r = run(ex_task_create(body_where, &w, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_eq(atomic_load(&stacks.allocs), 1);
    cr_assert_eq(atomic_load(&stacks.frees), 1);
    cr_assert_geq(stacks.last_size, 100000);
    cr_assert_eq(stacks.last_align, 16);
    cr_assert_eq(stacks.freed_p, stacks.last_p);
    cr_assert_eq(stacks.freed_size, stacks.last_size);
    cr_assert_eq(stacks.freed_align, stacks.last_align);
    uintptr_t lo = (uintptr_t)stacks.last_p;
    cr_assert(w.local > lo && w.local < lo + stacks.last_size, "the body did not run on the given stack");

    /* stack_size 0: EX_TASK_STACK_DEFAULT */
    o.stack_size = 0;
    r = run(ex_task_create(body_where, &w, &o));
    expect_disp(&r, EX_DISP_VALUE);
    cr_assert_geq(stacks.last_size, EX_TASK_STACK_DEFAULT);
    cr_assert_eq(atomic_load(&stacks.in_use), 0);

    /* the libc allocator and a recycling allocator work as stack allocators */
    o.stack_allocator = ex_libc_allocator();
    o.stack_size = 32768;
    for (int i = 0; i < 20; i++) {
        r = run(ex_task_create(body_where, &w, &o));
        expect_disp(&r, EX_DISP_VALUE);
    }
    ex_recycling_allocator *rc = NULL;
    cr_assert_eq(ex_recycling_allocator_create(NULL, &rc).code, 0);
    o.stack_allocator = ex_recycling_allocator_get(rc);
    for (int i = 0; i < 20; i++) {
        int64_t x = i;
        r = run(ex_task_create(body_i64, &x, &o));
        expect_value_int(&r, i);
    }
    ex_alloc_stats st;
    cr_assert_eq(ex_allocator_stats(ex_recycling_allocator_get(rc), &st).code, 0);
    cr_assert_eq(st.allocations, 20);
    cr_assert_eq(st.frees, 20);
    ex_recycling_allocator_destroy(rc);

    /* a per-worker jemalloc arena allocator (no guard page) */
    ex_jemalloc_allocator *je = NULL;
    cr_assert_eq(ex_jemalloc_allocator_create(2, &je).code, 0);
    o.stack_allocator = ex_jemalloc_allocator_get(je);
    ex_pool *pool = test_pool_new(2);
    for (int i = 0; i < 20; i++) {
        int64_t x = i;
        r = run(ex_starts_on(ex_pool_scheduler(pool), ex_task_create(body_i64, &x, &o)));
        expect_value_int(&r, i);
    }
    ex_pool_destroy(pool);
    ex_jemalloc_allocator_destroy(je);
    expect_no_leaks();
}

/* =================================================================== OOM */

Test(exec_task, stack_allocation_failure_completes_with_enomem) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, ex_libc_allocator());
    ex_fault_allocator_fail_nth(&f, 1);
    ex_task_options o = { .stack_allocator = ex_fault_allocator_get(&f) };
    atomic_int ran = 0;
    ex_result r = run(ex_task_create(body_mark, &ran, &o));
    expect_error(&r, EX_ENOMEM);
    cr_assert_eq(atomic_load(&ran), 0);

    /* through a raw receiver, on a pool */
    ex_pool *pool = test_pool_new(2);
    ex_fault_allocator_fail_nth(&f, 1);
    trec tr;
    trec_setup(&tr, ex_pool_scheduler(pool), true);
    ex_operation *op = start_with(ex_task_create(body_mark, &ran, &o), &tr);
    cr_assert(wait_int(&tr.done));
    cr_assert_eq(tr.r.errors, 1);
    cr_assert_eq(rec_total(&tr.r), 1);
    cr_assert_eq(tr.r.err.code, EX_ENOMEM);
    cr_assert_eq(atomic_load(&ran), 0);
    ex_operation_free(op);

    /* the next one gets its stack */
    r = run(ex_task_create(body_mark, &ran, &o));
    expect_value_int(&r, 5);
    ex_alloc_stats st;
    cr_assert_eq(ex_allocator_stats(ex_fault_allocator_get(&f), &st).code, 0);
    cr_assert_eq(st.bytes_in_use, 0);
    task_test_end(pool, NULL);
}

static ex_sender *lv_sweep_fn(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_then(ex_just(ex_int(in[0].as.i * 2)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

static ex_task_result body_sweep_child(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_then(ex_just(ex_int(4)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    return ex_task_i64(r.v[0].as.i);  /* 5 */
}

static ex_task_result body_sweep(ex_task *t, void *arg) {
    (void)arg;
    ex_await_result r = ex_await(t, ex_let_value(ex_just(ex_int(10)), lv_sweep_fn, NULL, EX_SIG(EX_T_INT)));
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    TCHECK(r.status == EX_AWAIT_VALUE && r.v[0].as.i == 21);
    int64_t a = r.v[0].as.i;
    ex_task_options o = { .value_sig = &sig_int };
    r = ex_await(t, ex_when_all(ex_just(ex_int(100)), ex_task_create(body_sweep_child, NULL, &o),
                                ex_then(ex_just(ex_int(1)), add_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT))));
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    TCHECK(r.status == EX_AWAIT_VALUE && r.n == 3);
    return ex_task_i64(a + r.v[0].as.i + r.v[1].as.i + r.v[2].as.i);  /* 21 + 100 + 5 + 2 */
}

Test(exec_task, oom_sweep_let_value_and_when_all) {
    int values = 0, enomem = 0;
    long k;
    for (k = 1; k < 10000; k++) {
        test_alloc_reset();
        test_alloc_fail_at(k);
        ex_result r = run(ex_task_create(body_sweep, NULL, NULL));
        long failed = test_stats.failed;
        test_alloc_fail_at(0);
        cr_assert(r.disposition == EX_DISP_VALUE || r.disposition == EX_DISP_ERROR, "k=%ld: disposition %d", k,
                  r.disposition);
        if (r.disposition == EX_DISP_VALUE) {
            cr_assert_eq(r.n, 1);
            cr_assert_eq(r.values[0].as.i, 128, "k=%ld", k);
            values++;
        } else {
            cr_assert_eq(r.error.code, EX_ENOMEM, "k=%ld: error %d (%s)", k, r.error.code, r.error.msg ? r.error.msg : "");
            enomem++;
        }
        ex_result_destroy(&r);
        cr_assert_eq(test_stats.in_use, 0, "k=%ld: %ld block(s) leaked", k, test_stats.in_use);
        if (!failed) break;
    }
    cr_assert_lt(k, 10000);
    cr_assert_gt(enomem, 3, "the sweep failed too few allocations (%d)", enomem);
    cr_assert_geq(values, 1);
    task_test_end(NULL, NULL);
}
