/* SPDX-License-Identifier: MIT */
/* strand_fixtures.h - what the exec_strand suite's files share: strands
 * made and destroyed with assertions, the box that checks mutual
 * exclusion and order, work items and schedule operations that record
 * where and when they ran, the rig most tests start from (a strand over a
 * pool or another scheduler with its items and operations), and an item
 * posted straight to a pool.
 *
 * No assertion is about time: sleeps only give threads a chance to reach a
 * point, and every wait for asynchronous work is bounded so that a lost item
 * fails with a message instead of hanging. */
#ifndef CEXEC_TEST_STRAND_FIXTURES_H
#define CEXEC_TEST_STRAND_FIXTURES_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>

#include <cexec/strand.h>
#include "common/helpers.h"
#include "resources/hold.h"

ex_strand *strand_new(ex_scheduler under);
/* Destroys a strand whose items have all completed, retrying EX_EBUSY for
 * a bounded time (its turn may still be finishing). */
void strand_free(ex_strand *s);
/* Destroy that must succeed at once (the underlying agents are known idle). */
void strand_free_now(ex_strand *s);

/* Set on the calling thread around ex_post / ex_dispatch calls: an item that
 * sees it set on the thread running it ran inside the call. */
extern _Thread_local bool tl_in_call;

/* ---------------------------------------------------------- shared state */

#define LOG_MAX 8192

/* The state the items of one test share.  `plain` and `log` are written
 * without synchronisation by items of one strand: the strand orders them. */
typedef struct box {
    atomic_int inside;       /* items inside their strand now */
    atomic_int violations;   /* an item found another one inside */
    atomic_int ran;          /* items (and receivers) that finished */
    long plain;
    int log[LOG_MAX];
    int nlog;
    ex_pool *pool;           /* for worker indexes */
} box;

box *box_new(ex_pool *p);
/* Counts the caller in (a second one inside is a violation) and out. */
void box_enter(box *b);
void box_leave(box *b);
void expect_log_in_order(const box *b, int n);

/* ------------------------------------------------------------- work items */

typedef struct item item;
typedef void (*item_action)(item *it);

struct item {
    ex_work w;               /* first member */
    int id;
    box *b;
    bool nested;             /* runs inline inside another item: no enter/leave */
    atomic_int runs, cancels;
    int worker;
    pthread_t tid;
    const void *thread;
    bool saw_in_call;
    int ran_seen;            /* b->ran when the item ran */
    unsigned spin;
    item_action action;
    void *arg, *arg2;
    ex_scheduler sch;
    ex_error call_err;
    int flag;                /* free for actions */
};

void item_init(item *it, int id, box *b);
item *items_new(int n, box *b);
/* ex_post with tl_in_call set, asserting success. */
void post_ok(ex_scheduler sch, item *it);
/* ex_dispatch with tl_in_call set, asserting success. */
void dispatch_ok(ex_scheduler sch, item *it);

/* --------------------------------------------- schedule operations (sops) */

typedef struct sop {
    box *b;
    int id;
    atomic_int hits, values, errors, stops;
    int worker;
    pthread_t tid;
    bool saw_in_call;
    ex_error err;
    bool has_stop;
    ex_stop_source stop;
    ex_env_pair pair;
    ex_operation *op;
    _Alignas(max_align_t) unsigned char storage[256];
} sop;

void sop_init(sop *o, int id, box *b);
sop *sops_new(int n, box *b, int first_id);
void sop_with_stop(sop *o);
/* Connects snd into the sop's storage and starts it. */
void sop_start(sop *o, const ex_sender *snd);
void sops_destroy(sop *o, int n);

/* ---------------------------------------------------------------- blockers */

/* sync_wait(schedule(sch)), asserting it completed with a value. */
void sync_schedule_ok(ex_scheduler sch);

/* ------------------------------------------------------------------ rigs */

/* What most strand tests start from: a strand (over a pool of its own, or
 * over a given scheduler), a box, n items (ids 0..n-1) and m schedule
 * operations (ids n..n+m-1) with the strand's schedule sender. */
typedef struct rig {
    ex_pool *p;          /* NULL over a given scheduler */
    hold h;              /* with rig_open_held: holds the pool's only worker */
    ex_strand *s;
    ex_scheduler sch;    /* the strand's scheduler */
    box *b;
    item *it;
    sop *o;
    int n, m;
    ex_sender *snd;      /* schedule(sch) */
} rig;

/* A strand over a new pool of `threads` workers. */
void rig_open(rig *r, unsigned threads, int n, int m);
/* The same over a one-worker pool whose worker is held (rig_release lets
 * it go) before the strand is made: nothing runs until then. */
void rig_open_held(rig *r, int n, int m);
/* A strand over under (the box knows no pool). */
void rig_open_over(rig *r, ex_scheduler under, int n, int m);
void rig_release(rig *r);
/* Posts items [from, to) of the rig in order. */
void rig_post(rig *r, int from, int to);
/* Starts schedule operations [from, to) of the rig in order. */
void rig_start(rig *r, int from, int to);
/* Destroys the strand (idle: its agents are known idle, so at once; else
 * retrying EX_EBUSY while its last turn ends), the operations, the pool,
 * and checks nothing leaked. */
void rig_close(rig *r, bool idle);

/* An item posted straight to a pool that notes how many strand items had
 * run when it ran. */
typedef struct direct {
    ex_work w;
    box *b;
    atomic_int runs;
    int ran_seen;
} direct;

void direct_init(direct *d, box *b);

#endif
