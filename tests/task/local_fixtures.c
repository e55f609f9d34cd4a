/* SPDX-License-Identifier: MIT */
/* local_fixtures.c - see local_fixtures.h. */
#include <string.h>

#include "task/local_fixtures.h"

const ex_sig sig_int = { 1, { EX_T_INT } };

ex_result run(ex_sender *s) { return ex_sync_wait(s); }

void expect_disp(ex_result *r, ex_disposition d) {
    cr_assert_eq(r->disposition, d, "expected disposition %d, got %d (%s)", d, r->disposition,
                 r->disposition == EX_DISP_ERROR && r->error.msg ? r->error.msg : "");
}


ex_task_result body_void(ex_task *t, void *arg) {
    (void)t, (void)arg;
    return ex_task_void();
}

ex_task_result body_i64(ex_task *t, void *arg) {
    (void)t;
    return ex_task_i64(*(int64_t *)arg);
}

ex_task_result body_mark(ex_task *t, void *arg) {
    (void)t;
    atomic_fetch_add((atomic_int *)arg, 1);
    return ex_task_i64(5);
}

void task_test_end(ex_pool *pool, ex_single_thread_context *stc) {
    if (pool) ex_pool_destroy(pool);
    if (stc) test_stc_destroy(stc);
    EXPECT_PROBE();
    expect_no_leaks();
}

void trec_setup(trec *tr, ex_scheduler sch, bool with_stop) {
    trec_init(tr);
    if (with_stop) rec_with_stop(&tr->r);
    rec_with_scheduler(&tr->r, sch);
}

ex_operation *start_with(ex_sender *s, trec *tr) {
    ex_operation *op = trec_run_start(s, tr);
    ex_sender_release(s);
    return op;
}

/* ------------------------------------------------ the exec_task_fork suite */

fork_state FS;

void reset_state(void) {
    ex_pool *p = FS.pool;
    memset(&FS, 0, sizeof FS);
    FS.pool = p;
    FS.home = test_thread_id();
}

bool on_home(void) { return FS.pool ? ex_pool_current_worker(FS.pool) >= 0 : test_thread_id() == FS.home; }

void use_pool(unsigned workers) {
    /* No lent slots: `workers` is the number of the pool's agents (a test
     * of one worker counts on one thread running everything in order). */
    ex_pool_config c = test_pool_config(workers, NULL);
    c.lend_slots = -1;
    FS.pool = workers ? test_pool_new_cfg(&c) : NULL;
    FS.home = test_thread_id();
}

void drop_pool(void) {
    if (FS.pool) ex_pool_destroy(FS.pool);
    FS.pool = NULL;
}

void for_pools(unsigned lo, unsigned hi, void (*fn)(unsigned workers)) {
    for (unsigned workers = lo; workers <= hi; workers++) {
        use_pool(workers);
        fn(workers);
        drop_pool();
    }
    task_test_end(NULL, NULL);
}

ex_result run_on_pool(ex_sender *task) {
    return ex_sync_wait(FS.pool ? ex_starts_on(ex_pool_scheduler(FS.pool), task) : task);
}

ex_result run_round(ex_task_fn root, void *arg) {
    reset_state();
    return run_on_pool(ex_task_create(root, arg, NULL));
}

ex_task_result pass_on(ex_await_result r) {
    if (r.status == EX_AWAIT_VALUE) return ex_task_values(r.n, r.v);
    if (r.status == EX_AWAIT_ERROR) return ex_task_with_error(r.error);
    return ex_task_stopped();
}

ex_task_result child_value(ex_task *t, void *arg) {
    (void)t;
    intptr_t i = (intptr_t)arg;
    atomic_fetch_add(&FS.runs[i & 15], 1);
    return ex_task_i64(10 * i + 1);
}

ex_sender *connected_task(intptr_t i, rec *rr, ex_operation **op) {
    ex_sender *s = ex_task_create(child_value, (void *)i, NULL);
    rec_init(rr);
    rec_with_scheduler(rr, ex_pool_scheduler(FS.pool));
    *op = NULL;
    cr_assert_eq(ex_connect_alloc(s, rec_receiver(rr), op).code, 0);
    return s;
}

void drop_connected(ex_operation *op, rec *rr) {
    ex_operation_free(op);
    cr_assert_eq(rec_total(rr), 0, "a task connected and never started completed");
}
