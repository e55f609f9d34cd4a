/* SPDX-License-Identifier: MIT */
/* manual_fixtures.h - what the manual_scheduler suite's files share: a
 * scheduler set up and torn down with assertions, posted items that log
 * their ids and act on their scheduler when they run, and schedule or
 * timer operations whose completions log their ids too (one log, so a
 * test sees the order of everything). */
#ifndef CEXEC_TEST_MANUAL_FIXTURES_H
#define CEXEC_TEST_MANUAL_FIXTURES_H

#include <stdalign.h>
#include <stddef.h>

#include "common/helpers.h"

/* Initialises m (asserting); returns its scheduler. */
ex_scheduler ms_init(ex_manual_scheduler *m);
/* Destroys m, asserting EX_OK. */
void ms_destroy(ex_manual_scheduler *m);

/* Ids in the order things ran or completed. */
typedef struct ms_log {
    int ids[128];
    int n;
} ms_log;

/* Asserts the log reads ids[0..n). */
void ms_expect_log(const ms_log *log, const int *ids, int n);
#define MS_EXPECT_LOG(log, ...)                                                   \
    do {                                                                          \
        const int want_[] = { __VA_ARGS__ };                                      \
        ms_expect_log((log), want_, (int)(sizeof want_ / sizeof want_[0]));       \
    } while (0)

/* A posted item: logs its id when it runs, then does what its fields
 * say; counts its cancels (shutdown, destroy). */
typedef struct ms_item {
    ex_work work;              /* first member */
    int id;
    ms_log *log;
    ex_manual_scheduler *m;
    int runs, cancels;
    const void *thread;        /* where it last ran */
    struct ms_item *post;      /* posted (asserting EX_OK) when it runs */
    int requeue;               /* posts itself again this many times */
    bool shutdown;             /* shuts m down when it runs */
    bool try_destroy;          /* calls destroy: result in `result` */
    bool try_run;              /* calls ex_manual_run: result in `result`, `ran` */
    ex_error result;
    size_t ran;
    void (*also)(struct ms_item *it);  /* runs last, if set */
    void *ctx;                 /* for also */
} ms_item;

void ms_item_init(ms_item *it, int id, ms_log *log, ex_manual_scheduler *m);
/* ex_post(it) on m's scheduler, asserting EX_OK. */
void ms_post(ms_item *it);

/* A schedule or timer operation with a recording receiver (its stop
 * source answers get_stop_token) whose completion logs id. */
typedef struct ms_op {
    rec r;                     /* first member */
    int id;
    ms_log *log;
    alignas(max_align_t) unsigned char storage[256];
    ex_operation *op;
} ms_op;

/* Connects s (released) to o and starts it. */
void ms_op_start(ms_op *o, int id, ms_log *log, ex_sender *s);
/* The same with the receiver's stop already requested. */
void ms_op_start_stopped(ms_op *o, int id, ms_log *log, ex_sender *s);
/* Asserts exactly one completion, of kind EX_DISP_VALUE / _ERROR (code) /
 * _STOPPED, then destroys the operation. */
void ms_op_expect(ms_op *o, ex_disposition disp, int code);

/* A deadline that has passed (now - 1 s, or 0). */
int64_t ms_past(void);
/* Waits (bounded) until ex_now() >= deadline. */
void ms_wait_clock(int64_t deadline);

#endif
