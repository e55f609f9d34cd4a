/* SPDX-License-Identifier: MIT */
/* transfer_fixtures.h - what the tests of starts_on, continues_on /
 * schedule_from and on (on.c, starts_on.c, continues_on.c) share:
 * callbacks that note the thread they ran on, single-thread contexts,
 * connecting into exactly-sized heap storage. */
#ifndef CEXEC_TEST_TRANSFER_FIXTURES_H
#define CEXEC_TEST_TRANSFER_FIXTURES_H

#include <pthread.h>

#include "common/helpers.h"

/* Where (and how often) a callback ran. */
typedef struct mark {
    pthread_t tid;
    int calls;
    int64_t add;
} mark;

/* Notes the calling thread and counts the call. */
void mark_here(mark *m);

ex_error mark_int(void *ctx, const ex_value *in, size_t n, ex_value *out);       /* int -> int + add */
ex_error mark_make_int(void *ctx, const ex_value *in, size_t n, ex_value *out);  /* () -> int add */
ex_error mark_count(void *ctx, const ex_value *in, size_t n, ex_value *out);     /* any -> int n */
ex_error mark_error(void *ctx, ex_error e, ex_value *out);                       /* error -> int code */
ex_error mark_stopped(void *ctx, ex_value *out);                                 /* stopped -> int -1 */
/* then(s, mark_int, m). */
ex_sender *then_mark(ex_sender *s, mark *m);

bool on_thread(pthread_t a, ex_single_thread_context *c);
/* Two single-thread contexts and their schedulers. */
typedef struct stc_pair {
    ex_single_thread_context a, b;
    ex_scheduler sa, sb;
} stc_pair;

void stc_pair_init(stc_pair *p);      /* test_stc_init on each */
void stc_pair_destroy(stc_pair *p);   /* test_stc_destroy on each */

/* Connect into exactly-sized storage from the heap with ex_connect (*mem
 * to free after destroying the operation; NULL when connect failed). */
ex_error connect_heap(const ex_sender *s, rec *r, ex_operation **op, void **mem);
/* Runs items of `loop` on this thread until r got its completion. */
void drive_until_complete(ex_run_loop *loop, rec *r);

/* adapt(sch, child) runs child on a single-thread context whose scheduler
 * is sch: the child's environment answers get_scheduler with sch. */
void expect_child_env_scheduler_is_sch(ex_sender *(*adapt)(ex_scheduler sch, ex_sender *child));

extern const ex_scheduler bad_sched;   /* { NULL, NULL } */

#endif
