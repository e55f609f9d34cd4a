/* SPDX-License-Identifier: MIT */
/* soak.h - the soak test's shared declarations (make soak; docs/RELIABILITY.md).
 *
 * The soak runs, for a configurable time, a bounded random mix of sender
 * graphs, stackful tasks, scope spawns and task launches, with stop
 * requests from another thread and allocation failures, and checks that
 * every started operation completes exactly once with an outcome its graph
 * allows and that memory returns to its baseline.
 *
 *   graph.c  random graphs (from the seed) and how they become senders
 *   ref.c    the reference: the set of outcomes a graph may complete with
 *   run.c    operation slots, the run modes, drivers, the stopper, checks
 *   churn.c  pools, strands, contexts and run loops created and destroyed
 *            under running tasks (churn_task.c: the tasks' bodies and
 *            completions; churn.h: what the two share)
 *   soak.c   configuration, rounds, memory, progress, watchdog, summary */
#ifndef SOAK_H
#define SOAK_H

#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stdint.h>

#include <cexec/cexec.h>

/* ------------------------------------------------------------ graphs */

/* Nodes live in an array; past SOFT_NODES every new node is a leaf, and
 * the few siblings still pending fit in the rest (checked). */
enum { MAX_NODES = 48, SOFT_NODES = 24, MAX_KIDS = 3, MAX_SHAPE = 40, MAX_TASKS = 5, MAX_DEPTH = 5 };

/* Values stay in 20 bits so sums and products never overflow. */
#define VMASK ((int64_t)0xFFFFF)
#define NO_FAIL UINT32_MAX

/* Error codes the graphs produce themselves (EX_EUSER + ...). */
enum { ERR_JUST = 0, ERR_THEN = 20, ERR_BULK = 30, ERR_TASK = 40 };

typedef enum nkind {
    N_JUST, N_JUST_ERROR, N_JUST_STOPPED, N_THEN, N_UPON_ERROR, N_UPON_STOPPED, N_LET_VALUE, N_LET_ERROR,
    N_LET_STOPPED, N_WHEN_ALL, N_SPLIT, N_BULK, N_CONTINUES_ON, N_STARTS_ON, N_TASK, N_KINDS
} nkind;

/* Schedulers a graph names: inline, the pool, the single-thread context's run loop. */
enum { SCH_INLINE, SCH_POOL, SCH_LOOP, SCH_COUNT };

enum { F_ADD, F_MUL, F_FAIL };                         /* then's function */
enum { B_PLAIN, B_GRAIN, B_CHUNKED };                  /* bulk variant */
enum { C_DIRECT, C_CONTINUES, C_STARTS, C_DEFERRED };  /* split consumer */
enum {                                                 /* task flags */
    T_CATCH = 1,       /* an error of an await is added to the result, not returned */
    T_HOP = 2,         /* ex_change_coroutine_scheduler away and back after await hop_at */
    T_WITH_ERROR = 4,  /* ends with ex_task_with_error */
    T_STACK_FA = 8,    /* the stack comes from the operation's fault allocator */
    T_SIG = 16,        /* declares its value signature */
    T_INLINE = 32      /* EX_TASK_INLINE affinity */
};

struct slot;

typedef struct node {
    uint8_t kind, nkids, sched, fn, flags, hop_at, ncons;
    int8_t kids[MAX_KIDS];   /* let: kids[0] the child, kids[1] the body or -1 */
    uint8_t styles[MAX_KIDS]; /* split consumers */
    int64_t k;
    uint32_t shape, fail_at, grain;
    struct slot *owner;
    /* run time, reset for every operation */
    uint32_t calls;    /* the node's function or body ran (atomic; at most once) */
    uint32_t calls2;   /* its second function ran (bulk's check, when_all's sum) */
    uint32_t bad;      /* faults seen inside (atomic) */
    uint32_t idx_runs[MAX_SHAPE];
    ex_sender *split;  /* the shared sender, kept for deferred consumers */
} node;

typedef struct graph {
    node n[MAX_NODES];
    int count;
    int tasks;
} graph;

/* xorshift64*, one stream per operation. */
static inline uint64_t rng_next(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}
static inline uint32_t rng_below(uint64_t *s, uint32_t n) { return n ? (uint32_t)((rng_next(s) >> 32) % n) : 0; }
static inline int64_t vmask(int64_t v) { return v & VMASK; }
uint64_t mix64(uint64_t x);

/* Generates a graph rooted at node 0; root_task forces a task there. */
void graph_generate(graph *g, uint64_t *rng, bool root_task, struct slot *owner);
/* The sender of node i (built when called: let bodies and task children
 * are built when they run). */
ex_sender *graph_build(struct slot *s, int i);
/* Releases what building left in the nodes (split senders). */
void graph_release(graph *g);
/* A one-line description, for messages. */
void graph_format(const graph *g, int i, char *buf, size_t size);

/* ------------------------------------------------------------ outcomes */

enum { O_NONE, O_VALUE, O_ERROR, O_STOPPED };

typedef struct outcome {
    int kind;
    int64_t v;  /* the value, or the error code */
} outcome;

enum { OSET_MAX = 48 };

/* A set of outcomes; `any` when it grew too big to keep (not checked). */
typedef struct oset {
    int n;
    bool any;
    outcome o[OSET_MAX];
} oset;

/* What may intervene: a stop request, an allocation failure. */
typedef struct rctx {
    bool stop, fault;
} rctx;

void ref_eval(const graph *g, int i, rctx c, oset *out);
bool oset_has(const oset *s, outcome o);
void oset_format(const oset *s, char *buf, size_t size);
void outcome_format(outcome o, char *buf, size_t size);

/* ------------------------------------------------------------ slots */

typedef enum mode { M_PIPE, M_SYNC, M_TASK, M_SPAWN, M_LAUNCH, M_FUTURE, M_COUNT } mode;
enum { ST_FREE, ST_LIVE, ST_DONE };
enum { AR_NONE, AR_ENV, AR_WRITE_ENV, AR_TASK_OPT };           /* how the fault allocator reaches the graph */
enum { U_LIBC, U_RECYCLE, U_JEMALLOC, U_BUDGET, U_COUNT };      /* what the fault allocator wraps */

/* The per-operation counting allocator, in front of the fault allocator:
 * its release/acquire counters tell the reaper when the last block is back
 * (the fault allocator's own counters are relaxed). */
typedef struct track {
    ex_allocator base;
    const ex_allocator *under;
    uint64_t allocs, frees, in_use;
} track;

typedef struct slot {
    pthread_mutex_t mu;   /* the stopper against recycling the slot */
    struct driver *drv;
    uint32_t state;       /* ST_*, atomic */
    uint64_t opno, op_seed;
    mode m;
    int aroute, under, sched;
    uint32_t fault_ppm;
    bool slot_token;      /* the slot's stop source reaches the graph */
    bool scope_token;     /* the counting scope's stop token reaches it */
    bool counting;        /* spawned into the counting scope (else the simple one) */
    bool drop_future;
    bool want_stop;
    double stop_at;       /* when the stopper requests stop */
    uint32_t stop_requested;  /* atomic; set before the request */
    uint32_t refused;     /* connect/spawn failed: never started */
    ex_error refuse_err;
    ex_stop_source stop;
    ex_fault_allocator fa;
    track tr;
    ex_env_pair env_a, env_b;
    ex_env env;           /* what the receiver or the spawn hands the graph */
    uint32_t armed;       /* atomic: the stopper has a stop to request */
    const char *bad_what; /* the last fault a node saw */
    ex_operation *op;
    bool op_freed;
    uint32_t pending;      /* completions still expected (atomic) */
    uint32_t completions;  /* of the graph (recorder / receiver / handlers) */
    uint32_t fut_completions;
    outcome got;
    int fut_disp;
    double t_start;
    uint32_t moves, moves_failed, bad_where, bad_prev, bad_task;  /* task bodies (atomic) */
    bool done_on_sched;    /* the completion ran on the operation's scheduler */
    graph g;
} slot;

typedef struct driver {
    int id;
    pthread_t th;
    sem_t wake;
    slot *slots;
    int nslots;
    uint64_t opno;
} driver;

/* ------------------------------------------------------------ the world */

typedef struct soak_cfg {
    double seconds, round_s, report_s, watchdog_s, warmup_s;
    uint64_t seed;
    unsigned workers, drivers, inflight, churn;
    bool churn_move_race;  /* holders move back to a closing pool at any moment (see churn.c) */
    double heap_tol_mb, rss_tol_mb, vm_tol_mb;
} soak_cfg;

/* Per-round parameters, drawn from the seed. */
typedef struct round_params {
    uint32_t stop_pct, prestop_pct, fault_pct, fault_ppm_max, mode_weights[M_COUNT];
    double scope_stop_at;  /* seconds into the round; 0: none */
} round_params;

enum { K_STARTED, K_COMPLETED, K_REFUSED, K_VALUE, K_ERROR, K_ENOMEM, K_STOPPED, K_COUNT };

/* The churn's counters (churn.c). */
enum {
    C_CYCLES, C_POOLS, C_LAUNCHED, C_COMPLETED, C_VALUE, C_ERROR, C_STOPPED, C_UNRUN, C_BODIES,
    C_MOVES, C_MOVES_REFUSED, C_SCHEDS, C_SCHED_REFUSED, C_YIELDS, C_TUPLES, C_SKIPPED,
    C_POOL_AWAY,     /* pool destroys that began with tasks that had run on it still running elsewhere */
    C_AWAY_TASKS,    /* those tasks */
    C_STRAND_EBUSY,  /* ex_strand_destroy answered EX_EBUSY */
    C_STRAND_HELD,   /* strand destroys that met EX_EBUSY while a task that left it held it */
    C_COUNT
};

typedef struct soak_world {
    soak_cfg cfg;
    ex_pool *pool;
    ex_single_thread_context stc;
    pthread_t stc_tid;
    ex_scheduler sch[SCH_COUNT];
    ex_budget_allocator dflt;        /* the process default: counts senders and shared states */
    ex_budget_allocator budget;      /* a small shared budget, one of the fault allocators' unders */
    ex_recycling_allocator *rec;     /* another under */
    ex_budget_allocator rec_under;   /* counts what the recycling allocator holds, caches included */
    const ex_allocator *pool_frames; /* the pool's default frame allocator (per-worker arenas) */
    ex_jemalloc_allocator *je;       /* another under */
    const ex_allocator *unders[U_COUNT];
    ex_counting_scope cscope;
    ex_simple_counting_scope sscope;
    pthread_mutex_t round_mu;        /* the scopes' life against the stopper */
    bool scopes_live;                /* guarded by round_mu */
    uint32_t scope_stop;             /* atomic: the counting scope's stop was requested */
    round_params rp;
    double round_t0;
    uint32_t round;
    /* phases between main and the drivers */
    pthread_mutex_t ph_mu;
    pthread_cond_t ph_cv;
    uint32_t ph_round;    /* main: a round begins */
    uint32_t closing;     /* atomic: no new operations */
    uint32_t joined;      /* the scopes were joined: strict reaping */
    uint32_t drained, finished;  /* drivers that reached each point */
    uint32_t quit;
    driver *drivers;
    /* counters (relaxed atomics) */
    uint64_t kstat[M_COUNT][K_COUNT];
    uint64_t faults, stops_slot, stops_scope, stops_prestart, stops_drop;
    uint64_t progress, violations, unchecked, bulk_indices, task_bodies, moves, split_consumers;
    uint64_t churn[C_COUNT];
} soak_world;

extern soak_world W;

static inline void bump(uint64_t *c, uint64_t d) { __atomic_fetch_add(c, d, __ATOMIC_RELAXED); }
static inline uint64_t rd(const uint64_t *c) { return __atomic_load_n(c, __ATOMIC_RELAXED); }
double now_s(void);

/* A violation: printed (the first ones in full) and counted; the run stops
 * at the end of the round and exits non-zero. */
void violation(const slot *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void node_bad(node *nd, const char *what);

/* run.c */
void slots_init(void);
void slots_destroy(void);
void *driver_main(void *arg);
void *stopper_main(void *arg);
void dump_slots(void);
void slot_describe(const slot *s, char *buf, size_t size);
const char *mode_name(int m);
bool on_scheduler(ex_scheduler sch);
/* The rounds, for the drivers and the churn threads: waits for the next
 * round (false: the run is over); whether the round is closing; leaves a
 * closed round (drained, then finished once the scopes are joined). */
bool round_wait(uint32_t *seen);
bool round_closing(void);
void round_leave(uint32_t round);

/* churn.c */
void churn_start(void);
void churn_stop(void);
void dump_churn(void);

#endif
