/* SPDX-License-Identifier: MIT */
/* run_loop_fixtures.h - what the exec_run_loop suite's files share: a nap,
 * work items that log their ids and act on their loop, rl_env (a loop, its
 * schedule sender, a log and items) most tests start from, a thread that
 * runs a loop or a function, connected schedule operations with recording
 * receivers, and an item that holds its thread until released. */
#ifndef CEXEC_TEST_RUN_LOOP_FIXTURES_H
#define CEXEC_TEST_RUN_LOOP_FIXTURES_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>

#include "common/helpers.h"

void rl_nap(long usec);

/* A work item that appends its id to a shared log. */
typedef struct rl_log {
    int ids[64];
    int n;
} rl_log;

typedef struct rl_item {
    ex_work work;     /* first member */
    int id;
    rl_log *log;
    ex_run_loop *loop;
    /* optional actions */
    bool finish;                 /* call finish() when executed */
    bool nested_run;             /* call run() when executed */
    bool try_destroy;            /* call destroy() when executed */
    struct rl_item *push[2];     /* items to push when executed */
    ex_error nested;             /* what run()/destroy() returned */
    const void *thread;
} rl_item;

void rl_item_init(rl_item *it, int id, rl_log *log, ex_run_loop *loop);
/* Asserts the log holds 0..n-1 in order. */
void rl_expect_log_in_order(const rl_log *log, int n);

/* A loop, its log and items 0..RL_ITEMS-1 logging into it. */
#define RL_ITEMS 16

typedef struct rl_env {
    ex_run_loop loop;
    ex_sender *sched;  /* schedule(the loop's scheduler) */
    rl_log log;
    rl_item it[RL_ITEMS];
} rl_env;

/* Initialises the loop (asserting), its schedule sender, an empty log and
 * the items, and pushes the first `pushed` of them. */
void rl_env_open(rl_env *e, int pushed);
/* Releases the sender, destroys the loop (asserting EX_OK) and checks
 * nothing leaked. */
void rl_env_close(rl_env *e);
/* The same after checking that items 0..n-1 ran, in order. */
void rl_env_close_after(rl_env *e, int n);

/* A thread that runs fn(arg) (ex_run_loop_run by default). */
typedef struct rl_runner {
    ex_error (*fn)(void *arg);
    void *arg;
    ex_error result;
    const void *thread;
    atomic_int started;
    atomic_int returned;
} rl_runner;

/* Starts a thread running fn(arg) and waits until it started. */
void rl_thread_start(rl_runner *r, ex_error (*fn)(void *arg), void *arg, pthread_t *th);
/* Starts a thread running loop and waits until it started. */
void rl_runner_start(rl_runner *r, ex_run_loop *loop, pthread_t *th);

/* A connected schedule operation with a recording receiver. */
typedef struct rl_sched_op {
    rec r;
    _Alignas(max_align_t) unsigned char storage[256];
    ex_operation *op;
} rl_sched_op;

void rl_connect_schedule(rl_sched_op *o, ex_sender *s);
/* Initialises n operations' receivers, connects them to s and starts them
 * in order. */
void rl_sched_ops_start(rl_sched_op *o, int n, ex_sender *s);
/* Asserts each of the n operations completed once with a value (on thread
 * `thread` unless NULL) and destroys it. */
void rl_sched_ops_expect_values(rl_sched_op *o, int n, const void *thread);

/* An item that finishes its loop (if any), then holds its thread inside it
 * until the test lets it go. */
typedef struct rl_holder {
    ex_work work;   /* first member */
    ex_run_loop *loop;
    atomic_int finished, release;
} rl_holder;

void rl_holder_init(rl_holder *h, ex_run_loop *loop);

#endif
