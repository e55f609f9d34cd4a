/* SPDX-License-Identifier: MIT */
/* ref_private.h - what the parts of the reference interpreter share
 * (private to fuzz/; the interface is ref_interp.h):
 *
 *   ref_values.c        the function table; outcomes and outcome sets
 *   ref_sigs.c          static completion signatures, connect failures
 *   ref_interp.c        the semantics; evaluation contexts, the leaves,
 *                       the dispatcher, ref_run's two passes
 *   ref_adaptors.c      then / upon_*, let_*, when_all, bulk, variants
 *   ref_tasks_scopes.c  tasks, scope nodes, spawn_future work */
#ifndef FUZZ_REF_PRIVATE_H
#define FUZZ_REF_PRIVATE_H

#include "ref_interp.h"

/* ------------------------------------------------------- ref_values.c */

uint64_t r_sum_plus(int64_t k, const int64_t *in, size_t n);  /* k + sum(in), wrapping */
r_out r_out_value(const int64_t *v, size_t n, bool top_req);
r_out r_out_error(int code, bool top_req);
r_out r_out_stopped(bool top_req);
void r_set_clear(r_set *s);
void r_set_add(r_set *s, r_out o);             /* once; a full set becomes ANY */
void r_set_union(r_set *s, const r_set *t);

/* --------------------------------------------------------- ref_sigs.c */

enum { CS_NONE = 0xff };

typedef struct ssig {
    uint16_t mask;            /* value arities, bit a = set_value with a ints */
    bool dyn, err, stop;
    bool invalid;             /* an invalid sender (EX_EINVAL at start) */
    uint8_t cs_value, cs_error, cs_stopped;  /* completion schedulers (CS_NONE or g_sched) */
} ssig;

/* A node's static signatures.  A builder given an invalid input returns
 * an invalid sender with the input's error (ex_check_input): invalidity
 * climbs to the root of the tree built together (a let body is built, and
 * fails, on its own). */
ssig r_sig_of(const g_graph *g, unsigned i);
/* Whether connecting node i fails (EX_EINVAL) in an environment whose
 * scheduler is env (GS_COUNT: none). */
bool r_conn_fails(const g_graph *g, unsigned i, unsigned env);

/* --------------------------------------------------------- evaluation */

#define ENV_OTHER 0xfe  /* a scheduler that is not one of the graph's (sync_wait's loop) */

typedef struct rctx {
    uint8_t stop;        /* r_stop */
    bool top_linked;     /* a request on the top source reaches this token at once */
    uint8_t env_sched;   /* get_scheduler of the environment: g_sched, GS_COUNT (none) or ENV_OTHER */
    uint8_t tok;         /* which token get_stop_token answers: TOK_* */
    uint8_t alloc;       /* the allocators get_allocator may answer (1 << A_*); 0: none written, resolved
                            when read (env.h: the scheduler's, else the process default) */
    bool late;           /* may run after the harness restored the process default allocator */
    int16_t user;        /* the user key's value; -1: not in the environment */
    uint8_t alloc_dev;   /* allocators get_allocator answers besides (1 << A_*): see r_alloc_shortcut */
} rctx;

/* The interpreter's state over one ref_run. */
typedef struct rstate {
    const g_graph *g;
    const r_params *p;
    r_result *res;
    int phase;                         /* 1: collect split contexts; 2: compute */
    bool record;
    uint8_t split_join[G_MAX_SPLITS];  /* 1 << r_stop of each consumer context */
    r_set split_set[G_MAX_SPLITS];
    bool last;                         /* the recording round */
    bool spawn_done[G_MAX_NODES];      /* spawn_set computed in this phase */
    uint8_t split_walked;              /* r_walk_spawns: shared children already walked */
    r_set spawn_set[G_MAX_NODES];      /* a spawn_future's work */
    bool algo_done[G_MAX_NODES];       /* algo_value computed */
    int64_t algo_value[G_MAX_NODES];   /* what an algorithm node's converter sends */
} rstate;

/* ref_interp.c */
rctx r_ctx_detached(unsigned stop);
void r_eval(rstate *st, unsigned i, rctx cx, r_set *out);
void r_eval_conn(rstate *st, unsigned i, rctx cx, r_set *out);
unsigned r_observe(const rstate *st, rctx cx, bool req);
uint8_t r_alloc_ids(const rstate *st, rctx cx);
void r_alloc_shortcut(const rstate *st, rctx *cc);

/* ref_adaptors.c */
void r_eval_then(rstate *st, const g_node *nd, rctx cx, r_set *out);
void r_eval_let(rstate *st, const g_node *nd, rctx cx, r_set *out);
void r_eval_when_all_valid(rstate *st, const g_node *nd, rctx cx, r_set *out);
void r_eval_bulk(rstate *st, const g_node *nd, rctx cx, r_set *out);
void r_eval_variant(rstate *st, const g_node *nd, rctx cx, r_set *out);

/* ref_tasks_scopes.c */
void r_eval_task(rstate *st, unsigned i, const g_node *nd, rctx cx, r_set *out);
void r_eval_scope(rstate *st, const g_node *nd, rctx cx, r_set *out);
const r_set *r_spawn_work(rstate *st, unsigned i);
void r_walk_spawns(rstate *st, unsigned i);

#endif
