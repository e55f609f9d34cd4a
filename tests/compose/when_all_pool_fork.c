/* SPDX-License-Identifier: MIT */
/* [exec.when.all] on a pool agent, run as a fork-join (compose/when_all.c):
 * a child that hops onto the pool (starts_on) is taken back, or held back,
 * by the agent that started the when_all, and run nested in that start
 * unless a thief took it; a held-back child is queued as soon as the agent
 * waits for something, since a sibling may be waiting for it.
 *
 * The pools here have one worker and no lent slots: no thief, and the
 * test thread never runs a pool item, so where each item runs is fixed. */
#include <stdatomic.h>
#include <string.h>

#include "common/pool.h"
#include "common/receivers.h"
#include "common/run.h"
#include "common/wait.h"
#include "compose/compose_fixtures.h"

static ex_pool *lone_worker_pool(void) {
    ex_pool_config c = test_pool_config(1, NULL);
    c.lend_slots = -1;
    return test_pool_new_cfg(&c);
}

/* ------------------------------------------- completes within its start */

typedef struct pad_item {
    ex_work w;                /* first: the item is the pad */
    atomic_int *ran;
} pad_item;

typedef struct nested_ctx {
    ex_scheduler sch;
    int queued_before;        /* items the worker posts to itself first */
    pad_item pad[2];
    atomic_int pads_ran;
    trec r;
    ex_operation *op;
    int connect_code;
    int done_at_return;       /* the when_all had completed when its start returned */
    const void *worker;       /* the thread that ran the body */
    const void *child_thread; /* the thread that ran the starts_on child */
} nested_ctx;

/* An item the worker posts to itself; counts its run. */
static void count_pad(ex_work *w) { atomic_fetch_add(((pad_item *)(void *)w)->ran, 1); }

static ex_error note_child(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    ((nested_ctx *)ctx)->child_thread = test_thread_id();
    out[0] = ex_int(1);
    return ex_ok();
}

/* On the worker: posts queued_before items to itself, then starts
 * when_all(starts_on(pool, child), just(2)) and notes whether it completed
 * before its start returned. */
static ex_error start_fork(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    nested_ctx *c = ctx;
    (void)in, (void)n, (void)out;
    c->worker = test_thread_id();
    for (int i = 0; i < c->queued_before; i++) {
        c->pad[i] = (pad_item){ { NULL, count_pad, NULL }, &c->pads_ran };
        (void)ex_post(c->sch, &c->pad[i].w);
    }
    ex_sender *s = ex_when_all(ex_starts_on(c->sch, ex_then(ex_just(), note_child, c, EX_SIG0, EX_SIG(EX_T_INT))),
                               ex_just(ex_int(2)));
    ex_error e = ex_connect_alloc(s, trec_receiver(&c->r), &c->op);
    ex_sender_release(s);
    c->connect_code = e.code;
    if (e.code) return e;
    ex_start(c->op);
    c->done_at_return = atomic_load(&c->r.done);
    return ex_ok();
}

static void run_nested(int queued_before) {
    ex_pool *p = lone_worker_pool();
    nested_ctx c;
    memset(&c, 0, sizeof c);
    c.sch = ex_pool_scheduler(p);
    c.queued_before = queued_before;
    trec_init(&c.r);
    ex_result res = ex_sync_wait(ex_then(ex_schedule(c.sch), start_fork, &c, EX_SIG0, EX_SIG0));
    cr_assert_eq(res.disposition, EX_DISP_VALUE, "%s", res.error.msg ? res.error.msg : "");
    ex_result_destroy(&res);
    cr_assert_eq(c.connect_code, 0);
    trec_wait_done(&c.r);
    cr_assert_eq(c.r.r.values, 1);
    cr_assert_eq(c.r.r.n, 2);
    cr_assert_eq(c.r.r.v[0].as.i, 1);
    cr_assert_eq(c.r.r.v[1].as.i, 2);
    cr_assert_eq(c.child_thread, c.worker, "the child ran on the agent that started the when_all");
    cr_assert(c.done_at_return, "with %d items queued before: the child was not run within the when_all's start",
              queued_before);
    cr_assert_eq(wait_int_reaches(&c.pads_ran, queued_before), queued_before);
    ex_operation_free(c.op);
    test_pool_free(p);
}

Test(exec_when_all_pool_fork, a_queued_child_is_taken_back_and_run_within_start) {
    run_nested(0);
    expect_no_leaks();
}

Test(exec_when_all_pool_fork, a_held_back_child_is_run_within_start) {
    run_nested(2);
    expect_no_leaks();
}

/* --------------------------------- a held-back child a sibling waits for */

typedef struct held_ctx {
    ex_scheduler sch;
    atomic_int flag;
} held_ctx;

static ex_error set_flag(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    atomic_store(&((held_ctx *)ctx)->flag, 1);
    return ex_ok();
}

/* Waits for its sibling through ex_sync_wait on the worker, which runs
 * the pool's items meanwhile: bounded, so that a sibling nobody can run
 * fails the test instead of hanging it. */
static ex_error wait_for_sibling(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    held_ctx *h = ctx;
    (void)in, (void)n, (void)out;
    for (int i = 0; i < 200 && !atomic_load(&h->flag); i++) {
        ex_result r = ex_sync_wait(ex_schedule(h->sch));
        ex_result_destroy(&r);
    }
    if (!atomic_load(&h->flag)) return ex_err(EX_EINVAL, "the sibling this child waits for never ran");
    return ex_ok();
}

Test(exec_when_all_pool_fork, a_held_back_child_is_queued_when_its_agent_waits) {
    ex_pool *p = lone_worker_pool();
    held_ctx h;
    h.sch = ex_pool_scheduler(p);
    atomic_init(&h.flag, 0);
    /* The first two hops are queued (the worker's deque is empty, then
     * holds one); the inner when_all's hop finds two items there for
     * thieves and is held back, while its sibling waits for it. */
    ex_sender *inner = ex_when_all(ex_starts_on(h.sch, ex_then(ex_just(), set_flag, &h, EX_SIG0, EX_SIG0)),
                                   ex_then(ex_just(), wait_for_sibling, &h, EX_SIG0, EX_SIG0));
    ex_sender *outer = ex_when_all(ex_starts_on(h.sch, ex_just()), ex_starts_on(h.sch, ex_just()), inner);
    ex_result r = ex_sync_wait(ex_starts_on(h.sch, outer));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "%s", r.error.msg ? r.error.msg : "");
    cr_assert_eq(atomic_load(&h.flag), 1);
    ex_result_destroy(&r);
    test_pool_free(p);
    expect_no_leaks();
}

/* ------------------------------------------- deep recursion through hops */

/* R = let_value(just(), fn) with fn returning F = when_all(starts_on(pool,
 * R), just()) while levels remain, then just(): a recursion only through
 * hops, which the worker loop ran one at a time on a shallow stack.  Run
 * nested, every level would stay on the stack. */
typedef struct deep_ctx {
    int left;
    ex_sender *f;
    ex_sender *leaf;
} deep_ctx;

static ex_sender *deep_next(void *ctx, const ex_value *in, size_t n) {
    deep_ctx *d = ctx;
    (void)in, (void)n;
    return d->left-- > 0 ? d->f : d->leaf;
}

/* Deep enough to overflow a worker's 8 MiB stack nested (about 35,000
 * levels, GCC -O2).  On the way back up, GCC -O2 turns the completions
 * into tail calls; clang and the sanitizer builds keep a few frames per
 * level there too (clang -O2 overflows at about 30,000 levels, before and
 * after nesting), so they go less deep and only check the result. */
#if defined(__SANITIZE_ADDRESS__)
#define DEEP_LEVELS 2000
#elif defined(__clang__)
#define DEEP_LEVELS 20000
#else
#define DEEP_LEVELS 200000
#endif

Test(exec_when_all_pool_fork, a_recursion_through_hops_does_not_nest_without_bound) {
    ex_pool *p = lone_worker_pool();
    ex_scheduler sch = ex_pool_scheduler(p);
    deep_ctx d = { DEEP_LEVELS, NULL, ex_just() };
    ex_sender *r = ex_let_value_borrowed(ex_just(), deep_next, &d, EX_SIG0);
    d.f = ex_when_all(ex_starts_on(sch, ex_sender_retain(r)), ex_just());
    ex_result res = ex_sync_wait(ex_starts_on(sch, ex_sender_retain(r)));
    cr_assert_eq(res.disposition, EX_DISP_VALUE, "%s", res.error.msg ? res.error.msg : "");
    cr_assert_eq(d.left, -1);
    ex_result_destroy(&res);
    ex_sender_release(d.f);  /* (it holds r) */
    ex_sender_release(r);
    ex_sender_release(d.leaf);
    test_pool_free(p);
    expect_no_leaks();
}
