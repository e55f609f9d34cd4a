/* SPDX-License-Identifier: MIT */
/* harness.h - what the parts of the sender-graph harness share (private
 * to fuzz/; the graph is graph.h, the reference ref_interp.h):
 *
 *   harness_state.c       the run's state, the allocators, boxed ints, the
 *                         tap sender, callback failures
 *   build_nodes.c         sg_build: the adaptors, read_env / write_env, variants
 *   build_algo.c          the parallel-algorithm nodes
 *   build_tasks_scopes.c  the task and scope nodes
 *   sender_graph.c        the runners, the checks, the libFuzzer entry points
 *
 * The harness runs one input at a time: its state is one global, G. */
#ifndef FUZZ_HARNESS_H
#define FUZZ_HARNESS_H

#include <cexec/cexec.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "ref_interp.h"

/* What a node's tap saw.  Two completions are kept: the leaf child of a
 * TK_TWICE task runs twice. */
typedef struct node_rec {
    atomic_int started;
    atomic_int completions;
    r_out out[2];
    bool bad[2];         /* a value that is not an (encoded) int */
} node_rec;

/* rec[] slot of the root's completion in spawn mode (a tap around the root,
 * or ex_task_launch's handlers). */
#define TOP_REC G_MAX_NODES

/* sg_tap's node for a tap that records nothing. */
#define NO_REC (G_MAX_NODES + 1)

/* A boxed int x travels as tuple(int x, tuple(int x ^ G_BOX_KEY)): nested,
 * so every deep copy on the way is exercised (and checked on arrival). */
#define G_BOX_KEY 0x5a5a

/* The arrays of one algorithm node (G_ALGO), made before the graph is
 * built and freed after the run. */
typedef struct algo_data {
    void *orig;              /* the inputs (in place overwrites `in`) */
    void *in, *out;          /* what the algorithm gets; out == in in place, NULL without output */
    void *expect;            /* the serial reference's output */
    double *det;             /* g_algo_wide: the inline scheduler's output (a reduction's in det[0]) */
    double det_total;        /* ... and its value */
    int64_t value;           /* what the converter sends on success */
    atomic_int *hits;        /* for_each: runs of each index */
    unsigned char *result;   /* generic reduce: its result */
    unsigned char *identity, *init;  /* generic forms */
    ex_monoid m;
} algo_data;

/* The state of the run (one input at a time). */
typedef struct sg_state {
    ex_pool *pool;
    ex_run_loop loop;
    ex_stop_source top_src;
    ex_stop_source node_src[G_MAX_NODES];
    ex_fault_allocator fault;
    ex_fault_allocator stack_fault; /* over sg_guarded_alloc, failing like `fault` (task stacks) */
    ex_counting_scope scope;      /* the run's: spawn_future nodes, spawn mode */
    ex_env_pair spawn_env;
    atomic_int top_done;          /* rec[TOP_REC] was written */
    bool root_spawned;            /* spawn mode: ex_spawn_env / ex_task_launch succeeded */
    _Atomic(ex_sender *) task_child[G_MAX_NODES];  /* a task's child, taken by its body */
    _Atomic(ex_sender *) task_child2[G_MAX_NODES]; /* ... and its second one (TK_TWO) */
    ex_sig task_sig[G_MAX_NODES];
    ex_env_pair task_env[G_MAX_NODES];  /* TO_ENV: the user environment */
    algo_data algo[G_MAX_NODES];
    ex_sigs variant_sigs[G_MAX_NODES];  /* G_VARIANT: the child's signatures (into_variant's index) */
    const ex_allocator *pool_alloc;     /* what get_allocator answers under the pool (A_POOL) */
    /* The first failure a callback saw (node + 1, what, where): reported after the run. */
    atomic_int cb_bad;
    const char *cb_why;
    size_t cb_at;
    atomic_int twice_differ;      /* a TK_TWICE task's two awaits gave different values */
    g_graph g;
    node_rec rec[G_MAX_NODES + 1];
    atomic_int bulk_hits[G_MAX_NODES][8];
    atomic_int fn_bad;       /* a callback saw values that are not ints */
    bool verbose;
} sg_state;

extern sg_state G;

/* The allocators of the run (harness_state.c), all counted in
 * sg_cnt_in_use (blocks in use): the process default, the alternative one
 * (A_ALT), and guarded task stacks. */
extern atomic_long sg_cnt_in_use;
extern const ex_allocator sg_counting_alloc;
extern const ex_allocator sg_alt_alloc;
extern const ex_allocator sg_guarded_alloc;
/* The user key of read_env / write_env nodes and tasks' user environments. */
extern const ex_key sg_user_key;

/* ------------------------------------------------------ harness_state.c */

ex_scheduler sg_sched_of(unsigned s);          /* g_sched -> the run's scheduler */
bool sg_ints_of(const ex_value *v, size_t n, int64_t *out);  /* unboxed ints, false if not */
ex_sig sg_int_sig(unsigned arity);             /* (int, ..., int) */
unsigned sg_node_index(const g_node *nd);
void sg_fn_inputs_bad(void);                   /* a callback saw values that are not ints */
/* Records the first failure a callback saw, reported after the run. */
void sg_cb_fail(unsigned node, const char *why, size_t at);
/* Records a completion in G.rec[node]. */
void sg_tap_record(unsigned node, uint8_t disp, const ex_value *v, size_t n, int code);
/* The tap sender around child (takes it); opaque: no attributes. */
ex_sender *sg_wrap(ex_sender *child, unsigned node, bool opaque);
ex_sender *sg_tap(ex_sender *child, unsigned node);

/* ------------------------------------------------------------ the builders */

/* Node i's sender (wrapped in its tap unless taps are off); memo holds the
 * splits of the tree being built (build_nodes.c). */
ex_sender *sg_build(unsigned i, ex_sender **memo);
/* A tree built on its own (the root's, a let body's): splits of its own. */
ex_sender *sg_build_tree(unsigned root);

ex_sender *sg_build_algo(unsigned i);          /* build_algo.c */
void sg_algo_prepare(void);                    /* the algorithm nodes' arrays, before the run */
void sg_algo_free(void);                       /* ... freed after it */

ex_sender *sg_build_scope(unsigned i, ex_sender **memo);  /* build_tasks_scopes.c */
ex_sender *sg_build_task(unsigned i, ex_sender **memo);

#endif
