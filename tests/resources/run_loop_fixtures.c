/* SPDX-License-Identifier: MIT */
/* run_loop_fixtures.c - see run_loop_fixtures.h. */
#include <sched.h>
#include <string.h>
#include <time.h>

#include "resources/run_loop_fixtures.h"

void rl_nap(long usec) {
    struct timespec ts = { usec / 1000000, (usec % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

static void rl_execute(ex_work *w) {
    rl_item *it = (rl_item *)(void *)w;
    it->thread = test_thread_id();
    if (it->log && it->log->n < 64) it->log->ids[it->log->n++] = it->id;
    if (it->nested_run) it->nested = ex_run_loop_run(it->loop);
    if (it->try_destroy) it->nested = ex_run_loop_destroy(it->loop);
    for (int i = 0; i < 2; i++)
        if (it->push[i]) ex_run_loop_push(it->loop, &it->push[i]->work);
    if (it->finish) ex_run_loop_finish(it->loop);
}

void rl_item_init(rl_item *it, int id, rl_log *log, ex_run_loop *loop) {
    memset(it, 0, sizeof *it);
    it->work.execute = rl_execute;
    it->id = id;
    it->log = log;
    it->loop = loop;
}

void rl_expect_log_in_order(const rl_log *log, int n) {
    cr_assert_eq(log->n, n, "%d items ran, expected %d", log->n, n);
    for (int i = 0; i < n; i++) cr_assert_eq(log->ids[i], i, "position %d ran item %d", i, log->ids[i]);
}

void rl_env_open(rl_env *e, int pushed) {
    test_loop_init(&e->loop);
    e->sched = ex_schedule(ex_run_loop_scheduler(&e->loop));
    e->log.n = 0;
    for (int i = 0; i < RL_ITEMS; i++) rl_item_init(&e->it[i], i, &e->log, &e->loop);
    for (int i = 0; i < pushed; i++) ex_run_loop_push(&e->loop, &e->it[i].work);
}

void rl_env_close(rl_env *e) {
    ex_sender_release(e->sched);
    test_loop_destroy(&e->loop);
    expect_no_leaks();
}

void rl_env_close_after(rl_env *e, int n) {
    rl_expect_log_in_order(&e->log, n);
    rl_env_close(e);
}

static void *rl_runner_main(void *arg) {
    rl_runner *r = arg;
    r->thread = test_thread_id();
    atomic_store(&r->started, 1);
    r->result = r->fn(r->arg);
    atomic_store(&r->returned, 1);
    return NULL;
}

static ex_error run_loop(void *loop) { return ex_run_loop_run(loop); }

void rl_runner_start(rl_runner *r, ex_run_loop *loop, pthread_t *th) { rl_thread_start(r, run_loop, loop, th); }

void rl_thread_start(rl_runner *r, ex_error (*fn)(void *arg), void *arg, pthread_t *th) {
    r->fn = fn;
    r->arg = arg;
    r->result = ex_err(-1, "not run");
    r->thread = NULL;
    atomic_init(&r->started, 0);
    atomic_init(&r->returned, 0);
    cr_assert_eq(pthread_create(th, NULL, rl_runner_main, r), 0);
    while (!atomic_load(&r->started)) sched_yield();
}

void rl_connect_schedule(rl_sched_op *o, ex_sender *s) {
    cr_assert_leq(ex_sender_op_size(s), sizeof o->storage);
    ex_error e = ex_connect(s, rec_receiver(&o->r), o->storage, sizeof o->storage, &o->op);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
}

void rl_sched_ops_start(rl_sched_op *o, int n, ex_sender *s) {
    for (int i = 0; i < n; i++) {
        rec_init(&o[i].r);
        rl_connect_schedule(&o[i], s);
        ex_start(o[i].op);
    }
}

void rl_sched_ops_expect_values(rl_sched_op *o, int n, const void *thread) {
    for (int i = 0; i < n; i++) {
        cr_assert_eq(o[i].r.values, 1, "op %d did not complete with a value", i);
        cr_assert_eq(rec_total(&o[i].r), 1, "op %d completed %d times", i, rec_total(&o[i].r));
        if (thread) cr_assert_eq(o[i].r.thread, thread, "op %d completed on another thread", i);
        ex_operation_destroy(o[i].op);
    }
}

static void rl_holder_execute(ex_work *w) {
    rl_holder *h = (rl_holder *)(void *)w;
    if (h->loop) ex_run_loop_finish(h->loop);
    atomic_store(&h->finished, 1);
    while (!atomic_load(&h->release)) sched_yield();
}

void rl_holder_init(rl_holder *h, ex_run_loop *loop) {
    memset(h, 0, sizeof *h);
    h->work.execute = rl_holder_execute;
    h->loop = loop;
    atomic_init(&h->finished, 0);
    atomic_init(&h->release, 0);
}
