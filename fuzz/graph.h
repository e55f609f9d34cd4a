/* graph.h - the sender graph the fuzzer decodes from its input, shared by
 * the harness (sender_graph.c: decoder, builder, runner) and the reference
 * interpreter (ref_interp.c).
 *
 * A graph is a tree of nodes (array indices, root first) plus a table of
 * split definitions: a split is one node whose result is shared by 1..3
 * consumer nodes (kind G_SPLIT, same split id).  A let node whose function
 * is LF_BODY owns an extra subtree (its body) that the function builds and
 * returns when it is called; splits inside a body are scoped to the body.
 * See fuzz/README.md for the byte grammar. */
#ifndef FUZZ_GRAPH_H
#define FUZZ_GRAPH_H

/* Tuple-boxed just values: off until the reference's signature model knows
 * types (see the decoder). */
#ifndef G_BOXING
#define G_BOXING 0
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define G_MAX_NODES 32
#define G_MAX_DEPTH 6
#define G_MAX_SPLITS 8
#define G_MAX_CONSUMERS 3
#define G_MAX_VALUES 8   /* EX_MAX_ARITY */
#define G_EUSER 1000     /* EX_EUSER: codes of the graph's own errors start here */

typedef enum g_kind {
    G_JUST,          /* arity values vals[] */
    G_JUST_ERROR,    /* code */
    G_JUST_STOPPED,
    G_THEN,          /* child[0], fn, arity (output), k */
    G_UPON_ERROR,
    G_UPON_STOPPED,
    G_LET_VALUE,     /* child[0], fn (LF_*), arity, k; child[1] = body if fn == LF_BODY */
    G_LET_ERROR,
    G_LET_STOPPED,
    G_WHEN_ALL,      /* nchild 2..3 */
    G_BULK,          /* child[0], shape, grain, fail_at (>= shape: never), k (error code offset) */
    G_SPLIT,         /* split_id; the split's child is splits[split_id].child */
    G_CONTINUES_ON,  /* child[0], sched */
    G_STARTS_ON,     /* sched, child[0] */
    G_STOP_ENV,      /* child[0], stop_env: write_env(get_stop_token, ...) */
    G_TASK,          /* child[0], task (TK_* flags), sched (TK_CHANGE's target) */
    G_SPAWN_FUTURE,  /* child[0]: spawned into the run's counting scope when built */
    G_KIND_COUNT
} g_kind;

/* Functions of then / upon_error / upon_stopped.  Their input is the value
 * list (then), the error code (upon_error) or nothing (upon_stopped); they
 * produce `arity` values: out[i] = f(in) + i. */
typedef enum g_then_fn {
    TF_ADD,       /* sum(in) + k */
    TF_MUL,       /* prod(in) * (k + 1)   (empty product 1) */
    TF_ERR,       /* error G_EUSER + (k & 15) */
    TF_STOPREQ,   /* requests stop on the harness's top-level stop source, then sum(in) + k */
    TF_COUNT
} g_then_fn;

/* Functions of let_value / let_error / let_stopped (input as for then). */
typedef enum g_let_fn {
    LF_JUST,      /* just(sum(in) + k + i for i < arity) */
    LF_ERR,       /* just_error(G_EUSER + (k & 15)) */
    LF_STOPPED,   /* just_stopped() */
    LF_BODY,      /* the body subtree, built when the function is called */
    LF_NULL,      /* returns NULL: EX_EINVAL */
    LF_ECHO,      /* just(in...) */
    LF_COUNT
} g_let_fn;

typedef enum g_sched {
    GS_INLINE,
    GS_LOOP,      /* the harness's run_loop */
    GS_POOL,      /* the 2-worker ex_pool made in LLVMFuzzerInitialize */
    GS_COUNT
} g_sched;

typedef enum g_stop_env {
    SE_NEVER,     /* the never-stop token: the subtree cannot be stopped */
    SE_FRESH,     /* a token of a fresh source nobody stops */
    SE_STOPPED,   /* a token of a source stopped before the run */
    SE_COUNT
} g_stop_env;

/* Variants of a task node (g_node.task).  The body awaits the child and
 * returns what it got. */
enum {
    TK_TWICE = 1,        /* await the (multi-shot, leaf) child twice, the second result wins */
    TK_YIELD_BEFORE = 2, /* ex_task_yield before the await */
    TK_YIELD_AFTER = 4,  /* ... and after it */
    TK_CHANGE = 8,       /* ex_change_coroutine_scheduler(sched) around the await, then back */
    TK_INLINE = 16,      /* EX_TASK_INLINE affinity */
    TK_SIG = 32          /* declare the child's value signature (when it has exactly one) */
};

typedef struct g_node {
    uint8_t kind;
    uint8_t nchild;
    uint8_t child[3];
    uint8_t fn;
    uint8_t arity;
    uint8_t sched;
    uint8_t stop_env;
    uint8_t split_id;
    uint8_t shape, grain, fail_at;
    uint8_t depth;
    uint8_t in_body;      /* inside some let body (built at run time) */
    uint8_t task;         /* G_TASK: TK_* */
    uint8_t boxed;        /* G_JUST: each value sent as a tuple (see g_box in sender_graph.c); needs G_BOXING */
    int32_t code;
    int64_t k;
    int64_t vals[3];
} g_node;

typedef struct g_split {
    uint8_t child;        /* node index of the shared sender */
    uint8_t consumers;    /* G_SPLIT nodes referring to it */
    uint8_t scope;        /* 0xff: the root tree; else the let node whose body holds it */
} g_split;

/* How the harness runs the graph (from the first input bytes). */
typedef enum g_stop_mode { GM_STOP_NONE, GM_STOP_BEFORE, GM_STOP_ASYNC } g_stop_mode;
typedef enum g_fault_mode { GM_FAULT_NONE, GM_FAULT_DEFAULT, GM_FAULT_ENV } g_fault_mode;

typedef struct g_mode {
    uint8_t stop;          /* g_stop_mode */
    uint8_t use_sync_wait; /* ex_sync_wait on the harness thread, else a custom receiver */
    uint8_t loop_thread;   /* the run_loop is driven by a thread of its own */
    uint8_t fault;         /* g_fault_mode */
    uint8_t taps;          /* wrap every node in a recording pass-through sender */
    uint8_t env_sched;     /* custom receiver: get_scheduler is none (GS_COUNT), loop or pool */
    uint8_t spawn;         /* the root is spawned into the run's counting scope (ex_spawn_env, or
                              ex_task_launch for a task root) and the scope joined */
    uint16_t stop_delay;   /* GM_STOP_ASYNC: iterations before the request */
    uint32_t fault_param;  /* fail_nth or rate */
    uint64_t fault_seed;
} g_mode;

typedef struct g_graph {
    g_mode mode;
    uint8_t nnodes;
    uint8_t nsplits;
    uint8_t root;
    bool has_stopreq;      /* some then/upon function requests stop */
    g_node nodes[G_MAX_NODES];
    g_split splits[G_MAX_SPLITS];
} g_graph;

/* Decodes any byte string into a valid bounded graph (never fails). */
void g_decode(g_graph *g, const uint8_t *data, size_t size);

/* Writes a readable form of the graph to stderr. */
void g_dump(const g_graph *g);

const char *g_kind_name(unsigned kind);

/* The function tables, shared by the harness and the reference: input list
 * in[0..n), results written to out[0..arity).  Return the error code, or 0. */
int g_then_apply(const g_node *nd, const int64_t *in, size_t n, int64_t *out);

#endif
