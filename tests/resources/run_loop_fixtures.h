/* run_loop_fixtures.h - what the exec_run_loop suite's files share: a nap,
 * work items that log their ids and act on their loop, a thread that runs
 * a loop, a connected schedule operation with a recording receiver, and
 * an item that holds its thread until released. */
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
/* Initialises n items 0..n-1 and pushes them in order. */
void rl_items_push(rl_item *it, int n, rl_log *log, ex_run_loop *loop);
/* Asserts the log holds 0..n-1 in order. */
void rl_expect_log_in_order(const rl_log *log, int n);

/* A thread that runs a loop. */
typedef struct rl_runner {
    ex_run_loop *loop;
    ex_error result;
    const void *thread;
    atomic_int started;
    atomic_int returned;
} rl_runner;

/* Starts a thread running loop and waits until it started. */
void rl_runner_start(rl_runner *r, ex_run_loop *loop, pthread_t *th);

/* A connected schedule operation with a recording receiver. */
typedef struct rl_sched_op {
    rec r;
    _Alignas(max_align_t) unsigned char storage[256];
    ex_operation *op;
} rl_sched_op;

void rl_connect_schedule(rl_sched_op *o, ex_sender *s);

/* An item that finishes its loop (if any), then holds its thread inside it
 * until the test lets it go. */
typedef struct rl_holder {
    ex_work work;   /* first member */
    ex_run_loop *loop;
    atomic_int finished, release;
} rl_holder;

void rl_holder_init(rl_holder *h, ex_run_loop *loop);

#endif
