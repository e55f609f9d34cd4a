/* SPDX-License-Identifier: MIT */
/* graph.h - the sender graph the fuzzer decodes from its input, shared by
 * the decoder (graph_decode.c), the harness (harness.h: builder, runner)
 * and the reference interpreter (ref_interp.h).
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

#include <stdatomic.h>
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
    G_ALGO,          /* leaf: a parallel algorithm (op AO_*, sched, n, aflags, seed, k), its
                        result turned into one int by a then */
    G_VARIANT,       /* child[0], op VK_*: into_variant / stopped_as_optional / stopped_as_error,
                        the result turned into (n, hash) by a then */
    G_READ_ENV,      /* leaf: read_env(op RK_*) turned into one int (an id) by a then */
    G_WRITE_ENV,     /* child[0]: write_env of op WK_* (the user key = k, get_scheduler = sched,
                        get_allocator = the alternative allocator) */
    G_SCOPE,         /* nchild 1..3 spawned into a scope of its own (op SC_*), then its join */
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
    TK_SIG = 32,         /* declare the (last) child's value signature (when it has exactly one) */
    TK_OPTS = 64,        /* an options byte follows (g_node.topt: TO_*) */
    TK_TWO = 128         /* two children, awaited in turn: the first non-value result, else the second's */
};

/* Task options (g_node.topt, with TK_OPTS). */
enum {
    TO_STACK_MASK = 3,    /* stack_size: 0 the default, 32 KiB, 48 KiB, 256 KiB */
    TO_SALLOC_SHIFT = 2,  /* stack_allocator (2 bits): NULL, guarded counting stacks, a fault allocator over
                             them, NULL */
    TO_ALLOC = 16,        /* allocator: the alternative counting allocator (A_ALT) */
    TO_ENV = 32,          /* env: a user environment whose user key is 100 + the node's index */
    TO_CHECK = 64         /* the body checks ex_task_env against ex_task_scheduler / _stop_token / options */
};

/* Parallel algorithms (G_ALGO, g_node.op). */
typedef enum g_algo_op {
    AO_ISCAN_I64, AO_ESCAN_I64, AO_REDUCE_I64,
    AO_ISCAN_F64, AO_ESCAN_F64, AO_REDUCE_F64,
    AO_ISCAN_GEN, AO_ESCAN_GEN, AO_REDUCE_GEN,  /* on the affine-map monoid (non-commutative) */
    AO_FOR_EACH,                                /* out[i] = 3 in[i] + 1; fails at fail_idx */
    AO_TRANSFORM,                               /* int32 -> int64 (in place: int64 -> int64) */
    AO_TRANSFORM_F64,                           /* 2x + 1 */
    AO_COUNT
} g_algo_op;

/* G_ALGO flags (g_node.aflags). */
enum {
    AF_INPLACE = 1,       /* out == in (scans, transform) */
    AF_WIDE = 2,          /* f64: inputs of many magnitudes (inexact sums; checked against the inline run
                             bit for bit and against the documented error bound); generic: see AF_GSIZE */
    AF_GSIZE_SHIFT = 1,   /* generic element size (2 bits): 16, 1024, 4096, 16 bytes */
    AF_BAD_NULL = 8,      /* a NULL array with n > 0 (for_each: a NULL function): an invalid sender */
    AF_BAD_OVERLAP = 16   /* out = in + 1 element (n >= 2; forms without out: as AF_BAD_NULL) */
};

/* into_variant and friends (G_VARIANT, g_node.op). */
typedef enum g_variant { VK_INTO_VARIANT, VK_STOPPED_AS_OPTIONAL, VK_STOPPED_AS_ERROR, VK_COUNT } g_variant;

/* read_env keys (G_READ_ENV, g_node.op) and what write_env writes (G_WRITE_ENV). */
typedef enum g_read_key { RK_SCHED, RK_TOKEN, RK_ALLOC, RK_USER, RK_COUNT } g_read_key;
typedef enum g_write_key { WK_USER, WK_SCHED, WK_ALLOC, WK_COUNT } g_write_key;

/* Ids of what read_env reads, as the harness's converter sends them. */
enum { ID_SCHED_OTHER = 3 };  /* schedulers: g_sched, else 3 (sync_wait's run_loop) */
enum { TOK_NEVER = 0, TOK_TOP = 1, TOK_OTHER = 2, TOK_NODE0 = 10 };  /* stop tokens (TOK_NODE0 + i: node_src[i]) */
enum { A_COUNT, A_FAULT, A_ALT, A_POOL, A_OTHER, A_IDS };  /* allocators */

/* Scopes (G_SCOPE, g_node.op). */
enum {
    SC_COUNTING = 1,      /* ex_counting_scope, else ex_simple_counting_scope */
    SC_STOP_SHIFT = 1,    /* (2 bits, counting only) 1: request_stop before the spawns, 2: after them */
    SC_CLOSE = 8,         /* close the scope before the last spawn (it fails with EX_ESHUTDOWN) */
    SC_ENV = 16           /* ex_spawn_env with the node's receiver environment, else ex_spawn */
};
enum { SC_STOP_BEFORE = 1, SC_STOP_AFTER = 2 };

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
    uint8_t boxed;        /* G_JUST: each value sent as a tuple (see just_boxed in build_nodes.c); needs G_BOXING */
    uint8_t op;           /* G_ALGO: AO_*; G_VARIANT: VK_*; G_READ_ENV: RK_*; G_WRITE_ENV: WK_*; G_SCOPE: SC_* */
    uint8_t aflags;       /* G_ALGO: AF_* */
    uint8_t agrain;       /* G_ALGO, for_each: the grain argument */
    uint8_t topt;         /* G_TASK with TK_OPTS: TO_* */
    uint32_t n;           /* G_ALGO: elements */
    uint32_t fail_idx;    /* G_ALGO, for_each: the index whose range fails (>= n: none) */
    uint32_t seed;        /* G_ALGO: inputs */
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

/* The (n, hash) pair the G_VARIANT converter sends for a value list. */
int64_t g_hash(const int64_t *v, size_t n);

/* ---------------------------------------------- parallel algorithms (algo_model.c) */

/* The affine-map monoid of the generic forms: an element is (a, b), x -> a x + b,
 * in the first 16 bytes of an element of g_algo_gsize bytes (the rest zero);
 * p (+) q applies p, then q: (qa pa, qa pb + qb), wrapping.  Not commutative. */
typedef struct g_affine { uint64_t a, b; } g_affine;
void g_affine_combine(void *ctx, void *acc, const void *x);

size_t g_algo_gsize(const g_node *nd);      /* generic element size */
size_t g_algo_in_size(const g_node *nd);    /* bytes of one input element (0: no input array) */
size_t g_algo_out_size(const g_node *nd);   /* bytes of one output element (0: no output array) */
bool g_algo_invalid(const g_node *nd);      /* built with a bad argument: an invalid sender (EX_EINVAL) */
bool g_algo_wide(const g_node *nd);         /* an f64 scan or reduction of inexact sums (AF_WIDE) */
int g_algo_fail_code(const g_node *nd);     /* for_each's error */

/* Fills in[0..n) with the node's inputs (g_algo_in_size bytes each). */
void g_algo_inputs(const g_node *nd, void *in);

/* The serial reference: the expected output array (NULL: not wanted) and
 * the int the node's converter sends on success.  For g_algo_wide nodes
 * the serial order of additions rounds differently: *value is n, and the
 * output is compared with the inline scheduler's run instead (see
 * g_algo_f64_check). */
void g_algo_expect(const g_node *nd, const void *in, void *out, int64_t *value);

/* AF_WIDE doubles: whether out (the inline scheduler's result, n elements;
 * for a reduction out[0] is the result) is within the documented error
 * bound of the exact result ((3080 + tile) u sum|x| per scan output,
 * (1029 + tiles) u sum|x| for a reduction).  On failure writes the first
 * element that is not to *bad. */
bool g_algo_f64_check(const g_node *nd, const double *in, const double *out, size_t *bad);

/* The harness's per-element work (algo_model.c is built without the
 * fuzzer's comparison tracing).  The first index where a and b differ in
 * the first cmp bytes (a multiple of 8) of their esz-byte elements, or n. */
size_t g_algo_first_diff(const void *a, const void *b, size_t n, size_t esz, size_t cmp);
size_t g_algo_first_value_diff(const double *a, const double *b, size_t n);  /* by value (== ) */
size_t g_algo_not_once(atomic_int *hits, size_t n);                         /* first hits[i] != 1, or n */

/* for_each's function over [begin, end): counts hits, writes out[i] =
 * 3 in[i] + 1, fails at fail_idx.  *at: the index it stopped at. */
enum { FE_OK, FE_FAIL, FE_OUT_OF_RANGE, FE_TWICE };
int g_algo_for_each_range(const g_node *nd, const int64_t *in, int64_t *out, atomic_int *hits, size_t begin, size_t end,
                          size_t *at);
void g_algo_transform_fn(void *ctx, const void *x, void *y);  /* ctx: the node; 7x - 1 */
double g_algo_f64_fn(void *ctx, double x);                    /* 2x + 1 */

#endif
