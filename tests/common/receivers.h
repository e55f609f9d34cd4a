/* SPDX-License-Identifier: MIT */
/* receivers.h - recording receivers: rec (one thread), trec (completes on
 * any thread, publishes `done`), arec (atomic counters, notes the pool
 * worker and thread that completed it). */
#ifndef CEXEC_TEST_RECEIVERS_H
#define CEXEC_TEST_RECEIVERS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <cexec/cexec.h>

/* Address unique to the calling thread. */
const void *test_thread_id(void);
/* Formats n datums with ex_value_format, joined by "; ". */
void test_format_values(char *text, size_t size, const ex_value *v, size_t n);

/* ------------------------------------------------------ recording receiver */

typedef struct rec {
    ex_receiver_vtable vt;
    int values, errors, stops;   /* completion counts (exactly one expected) */
    size_t n;
    ex_value v[EX_MAX_ARITY];    /* shallow copy of the last values */
    char text[256];              /* the last values, formatted while alive ("; " between) */
    ex_error err;
    const void *thread;          /* test_thread_id() of the completion */
    ex_env env;                  /* what env() answers */
    ex_env_pair pair;            /* storage for rec_with_* helpers */
    ex_stop_source stop;
    void (*after)(struct rec *r);  /* run after each completion was recorded (trec, frees_op_rec) */
} rec;

void rec_init(rec *r);
ex_receiver rec_receiver(rec *r);
int rec_total(const rec *r);
/* Makes the receiver's env answer get_stop_token with its own source. */
void rec_with_stop(rec *r);
/* rec_init, rec_with_stop, and the stop already requested. */
void rec_init_stop_requested(rec *r);
/* Makes the receiver's env answer get_scheduler with sch (a stop token set
 * by rec_with_stop first is kept). */
void rec_with_scheduler(rec *r, ex_scheduler sch);

/* ---------------------------------------------- completes on any thread */

/* A rec whose fields are written before `done` is published (seq_cst), so
 * reading them after done != 0 is race-free. */
typedef struct trec {
    rec r;
    ex_receiver_vtable vt;
    atomic_int done;
} trec;

void trec_init(trec *a);
ex_receiver trec_receiver(trec *a);

/* ------------------------------------------------------ atomic counters */

/* Counters are atomic, for completions that may happen on any thread; it
 * also notes the pool worker and the thread that completed it.  Its
 * environment is empty until arec_with_stop / arec_with_scheduler. */
typedef struct arec {
    atomic_int total, values, errors, stops;
    ex_pool *pool;
    int worker;             /* ex_pool_current_worker(pool) at completion */
    const void *thread;     /* test_thread_id() at completion */
    size_t n;
    ex_value v[EX_MAX_ARITY];
    ex_error err;
    bool has_env;
    ex_env_pair pair;
    ex_stop_source stop;
} arec;

extern const ex_receiver_vtable arec_vt;
void arec_init(arec *r, ex_pool *p);
ex_receiver arec_receiver(arec *r);
/* The environment answers get_stop_token with the receiver's own source. */
void arec_with_stop(arec *r);
/* The environment answers get_scheduler with sch (a stop token is kept). */
void arec_with_scheduler(arec *r, ex_scheduler sch);

/* ------------------------------------------- frees its own operation */

/* A rec (in .r, whose vtable it answers with) that frees its operation
 * inside its completion, after recording it: set op to what
 * ex_connect_alloc gave. */
typedef struct frees_op_rec {
    rec r;
    ex_operation *op;
} frees_op_rec;

void frees_op_rec_init(frees_op_rec *f);
ex_receiver frees_op_rec_receiver(frees_op_rec *f);

#endif
