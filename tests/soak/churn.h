/* SPDX-License-Identifier: MIT */
/* churn.h - what the two halves of the churn share (churn.c: cycles,
 * launching, destroying; churn_task.c: the tasks' bodies and completions).
 * See churn.c for what the churn does and the rules it keeps. */
#ifndef SOAK_CHURN_H
#define SOAK_CHURN_H

#include <stddef.h>

#include "soak.h"

#define CONTAINER_OF(p, T, m) ((T *)(void *)((char *)(p) - offsetof(T, m)))

enum { R_POOL, R_STRAND, R_STC, R_LOOP, R_COUNT };
extern const char *const res_names[R_COUNT];

/* Only pools and strands count holders (ex_scheduler_retain). */
static inline bool has_holders(int x) { return x == R_POOL || x == R_STRAND; }

enum { MAX_CTASKS = 24, MAX_STEPS = 14 };
enum { OP_MOVE, OP_SCHED, OP_YIELD, OP_TUPLE, OP_DONE };
enum { ACC_NO, ACC_USE, ACC_MINE };  /* how a task may name a resource */
enum { PH_IDLE, PH_CREATE, PH_LAUNCH, PH_USERS, PH_DESTROY, PH_JOIN };

typedef struct resource {
    ex_scheduler sch;
    uint32_t closing;  /* atomic: destroy has begun, no new uses */
    uint32_t users;    /* atomic: tasks naming it under a use */
    uint32_t inside;   /* strand: items running inside it (atomic) */
    bool gone;
} resource;

struct cycle;

typedef struct ctask {
    struct cycle *cy;
    uint32_t id;
    uint64_t seed;
    int start;            /* the resource it is launched on */
    bool launch;          /* ex_task_launch, else connect_alloc + start */
    bool own_alloc;       /* its frames come from the churn's counting allocator */
    bool with_error;
    int use;              /* the run loop or context it runs on under a use, or -1 */
    ex_work probe;        /* posted to a closing pool: is its shutdown under way? */
    uint32_t probe_queued;  /* atomic: the probe is on the pool's queue */
    uint32_t held;        /* atomic: bit per pool / strand it ran on */
    uint32_t body_ran, body_done, completions, completed;  /* atomic */
    int exp_kind;         /* what the body expects (written before it returns) */
    int64_t exp_v, acc;
    uint32_t step, op, cur;  /* where the body is (relaxed; for the watchdog's dump) */
    ex_operation *opstate;   /* connect mode */
    ex_env_pair env;
} ctask;

typedef struct churn churn;

typedef struct cycle {
    churn *ch;
    uint64_t no, rng;
    resource r[R_COUNT];
    ex_pool *pool;
    ex_strand *strand;
    int strand_under;     /* R_POOL or R_STC */
    ex_single_thread_context *stc;
    pthread_t stc_tid;
    ex_run_loop *loop;
    ex_counting_scope scope;
    uint64_t strand_items;  /* plain: only strand items touch it (TSan checks the strand's ordering) */
    ctask tasks[MAX_CTASKS];
    uint32_t ntasks, launched;
    uint32_t pending;     /* atomic: launched, not completed */
    uint32_t phase, phase_res;  /* relaxed, for the dump */
} cycle;

struct churn {
    int id;
    pthread_t th, loop_th;
    pthread_t self;  /* th, as the churn thread itself stored it (messages) */
    /* the loop thread: runs the cycle's run loop until it is finished */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ex_run_loop *loop_next, *loop_ran;
    bool quit;
    ex_budget_allocator frames;  /* own_alloc tasks' frames and the strands */
    cycle cy;
    uint64_t cycles;
};

static inline uint32_t ld(const uint32_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void st(uint32_t *p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
static inline void cbump(int c) { bump(&W.churn[c], 1); }

/* A violation found by the churn, with what k (may be NULL) was doing. */
void cviolation(const ctask *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* churn_task.c */

/* Is resource x closing (its destroy has begun)? */
bool closing_res(const cycle *cy, int x);
/* A use of x, unless it is closing; unuse gives it back. */
bool try_use(cycle *cy, int x);
void unuse(cycle *cy, int x);
/* The task body (arg: its ctask). */
ex_task_result churn_body(ex_task *t, void *arg);
/* The completion of task k (handlers of ex_task_launch; the receiver
 * ctask_rcvr_vt forwards to them). */
void ctask_value(void *self, const ex_value *v, size_t n);
void ctask_error(void *self, ex_error e);
void ctask_stopped(void *self);
extern const ex_receiver_vtable ctask_rcvr_vt;

#endif
