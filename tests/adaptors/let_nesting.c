/* SPDX-License-Identifier: MIT */
/* [exec.let]: chains, nesting and deep recursion (suite exec_let, declared in let.c). */
#include <pthread.h>

#include "adaptors/callbacks.h"

/* ------------------------------------------------------------- nesting */

static ex_sender *lv_inc(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    ((seen *)ctx)->calls++;
    return ex_just(ex_int(in[0].as.i + 1));
}

Test(exec_let, chain_of_1000_let_values) {
    seen sn = { 0 };
    ex_sender *s = ex_just(ex_int(0));
    for (int i = 0; i < 1000; i++) s = ex_let_value(s, lv_inc, &sn, EX_SIG(EX_T_INT));
    cr_assert_eq(ex_sender_status(s).code, 0);
    expect_sync_int(s, 1000);
    cr_assert_eq(sn.calls, 1000);
    expect_no_leaks();
}

typedef struct nest_ctx {
    int depth, max, calls;
} nest_ctx;

/* Each level returns another let_value until max levels deep. */
static ex_sender *lv_nest(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    nest_ctx *nc = ctx;
    nc->calls++;
    if (in[0].as.i + 1 >= nc->max) return ex_just(ex_int(in[0].as.i + 1));
    return ex_let_value(ex_just(ex_int(in[0].as.i + 1)), lv_nest, nc, EX_SIG(EX_T_INT));
}

Test(exec_let, returned_senders_nested_1000_deep) {
    nest_ctx nc = { 0, 1000, 0 };
    expect_sync_int(ex_let_value(ex_just(ex_int(0)), lv_nest, &nc, EX_SIG(EX_T_INT)), 1000);
    cr_assert_eq(nc.calls, 1000);
    expect_no_leaks();
}

/* A recursion 100000 levels deep whose function builds the next level:
 * each level's operation is connected to the inner receiver of the level
 * above.  Environment lookups that walked the receivers or the environment
 * nodes of every level above took about 80 s here (quadratic); the suite's
 * timeout fails that. */
#define DEEP_LETS 100000

typedef struct deep_let {
    int64_t level;
    bool scheduled;      /* each level waits for a schedule on sync_wait's run loop */
    bool writes_key;     /* each level also writes a key of its own (write_env) */
    ex_scheduler sch;
    ex_result result;
} deep_let;

static const ex_key deep_let_key = { "test.let.deep", true };

static ex_sender *deep_let_step(void *ctx, const ex_value *in, size_t n);

static ex_sender *deep_let_level(deep_let *d) {
    if (d->level == DEEP_LETS) return ex_just(ex_int(d->level));
    ex_sender *first = d->scheduled ? ex_schedule(d->sch) : ex_just();
    ex_sender *level = ex_let_value(first, deep_let_step, d, EX_SIG0);
    return d->writes_key ? ex_write_env(level, &deep_let_key, ex_int(d->level)) : level;
}

static ex_sender *deep_let_step(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    deep_let *d = ctx;
    d->level++;
    return deep_let_level(d);
}

static ex_sender *deep_let_start(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    deep_let *d = ctx;
    d->sch = in[0].as.sched;
    return deep_let_level(d);
}

static void deep_let_run(deep_let *d) {
    d->result = ex_sync_wait(
        ex_let_value(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), deep_let_start, d, EX_SIG(EX_T_SCHED)));
}

/* The recursion went DEEP_LETS levels down and its value came back up. */
static void expect_reached_the_bottom(deep_let *d) {
    expect_value_int(&d->result, DEEP_LETS);
    cr_assert_eq(d->level, DEEP_LETS);
}

Test(exec_let, recursion_100000_deep_through_a_run_loop) {
    /* The levels complete one into the next: the stack stays flat (also at
     * -O1 under ASan, where the completions used to nest one call per level). */
    deep_let d = { .scheduled = true };
    deep_let_run(&d);
    expect_reached_the_bottom(&d);
    expect_no_leaks();
}

static void *deep_let_thread(void *arg) {
    deep_let_run(arg);
    return NULL;
}

/* Runs the recursion on a thread with a big stack, for recursions whose
 * stack grows with the depth in some builds (about 1 KiB a level under
 * ASan). */
static void deep_let_run_on_a_big_stack(deep_let *d) {
    pthread_attr_t attr;
    cr_assert_eq(pthread_attr_init(&attr), 0);
    cr_assert_eq(pthread_attr_setstacksize(&attr, (size_t)512 << 20), 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, &attr, deep_let_thread, d), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&attr);
}

Test(exec_let, recursion_100000_deep_writing_a_key_at_every_level) {
    /* The levels add nodes with different keys in turn (the key, and the
     * let's scheduler): the stop token the run loop asks for, which no
     * level answers, is still found missing in one step.  The completions
     * pass through write_env at every level: without tail calls (ASan)
     * they nest a call per level. */
    deep_let d = { .scheduled = true, .writes_key = true };
    deep_let_run_on_a_big_stack(&d);
    expect_value_int(&d.result, DEEP_LETS);
    expect_no_leaks();
}

Test(exec_let, recursion_100000_deep_completing_inline) {
    /* Every level starts the next inside its own start: the stack grows
     * with the depth like a recursive function's (about 1 KiB a level
     * under ASan). */
    deep_let d = { .scheduled = false };
    deep_let_run_on_a_big_stack(&d);
    expect_reached_the_bottom(&d);
    expect_no_leaks();
}
