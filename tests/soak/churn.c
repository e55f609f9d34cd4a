/* SPDX-License-Identifier: MIT */
/* churn.c - execution resources created and destroyed under running tasks
 * (issue 17: what keeps a resource alive; docs/RELIABILITY.md).
 *
 * Each churn thread runs cycles while a round lasts.  A cycle creates a
 * pool (1-2 workers), a single-thread context, a run loop (driven by the
 * churn's own loop thread) and a strand over the pool or over the context,
 * launches tasks on them (ex_task_launch into the cycle's counting scope,
 * or connect_alloc + start), which move between them
 * (ex_change_coroutine_scheduler), await ex_schedule on the others, yield
 * and await tuples, and destroys the four resources, one after the other
 * at random moments, while the tasks are away from them.  Launches go on
 * between the destroys, onto the resources still there.
 *
 * The rules the cycle keeps (and checks the library keeps):
 *  - A task holds every pool and strand it ran on until its completion has
 *    been delivered.  It may name them (move back, schedule there) even
 *    while they are being destroyed: the pool refuses (EX_ESHUTDOWN) or
 *    drops the work (the task is stopped), the strand keeps running.
 *    ex_pool_destroy returns, and ex_strand_destroy stops answering
 *    EX_EBUSY, only once every such task has completed (checked).
 *  - Anything else a task names (a run loop, a single-thread context, a
 *    pool or strand it never ran on) it names under a "use": a counter the
 *    destroyer waits for, after it has marked the resource closing (no new
 *    uses).  A task keeps a use of the run loop or context it runs on.  So
 *    a destroy waits for the tasks on the resource, not for the ones that
 *    left it, and no task touches a resource after it is gone.
 *  - A strand goes before the resource under it.
 * Checks: every launched task completes exactly once, with the outcome its
 * body recorded (its tuple (id, checksum), its error, or stopped when a
 * pool going away dropped its work); refusals and stops only where a pool
 * is going away; every resumption, move and probe on the right thread;
 * strand items exclusive; the churn's allocator empty after every cycle. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "churn.h"

const char *const res_names[R_COUNT] = { "pool", "strand", "context", "loop" };
static const char *op_names[] = { "move", "schedule", "yield", "tuple", "done" };
static const char *phase_names[] = { "idle",       "creating",  "launching", "waiting for users of",
                                      "destroying", "joining the scope" };

static churn *churns;


void cviolation(const ctask *k, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!k) {
        violation(NULL, "churn: %s", msg);
        return;
    }
    const cycle *cy = k->cy;
    violation(NULL, "churn %d cycle %llu (seed 0x%016llx, strand over the %s) task %u (%s on the %s%s, step %u): %s",
              cy->ch->id, (unsigned long long)cy->no, (unsigned long long)k->seed, res_names[cy->strand_under], k->id,
              k->launch ? "ex_task_launch" : "connect_alloc", res_names[k->start], k->own_alloc ? ", own allocator" : "",
              __atomic_load_n(&k->step, __ATOMIC_RELAXED), msg);
}

static void pause_us(long us) {
    struct timespec ts = { 0, us * 1000 };
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------ launching */

/* Launches task k on resource x (not closing: only the churn thread, which
 * is the destroyer, marks resources closing). */
static void launch_one(cycle *cy, ctask *k, int x) {
    churn *ch = cy->ch;
    uint64_t rng = k->seed ^ 0x5bd1e995u;
    k->held = k->body_ran = k->body_done = k->completions = k->completed = 0;
    k->start = x;
    k->launch = rng_below(&rng, 2) != 0;
    k->own_alloc = rng_below(&rng, 2) != 0;
    k->with_error = rng_below(&rng, 10) == 0;
    k->acc = (int64_t)k->id;
    k->use = -1;
    if (!try_use(cy, x)) {
        cviolation(k, "the %s is closing at its launch", res_names[x]);
        return;
    }
    if (has_holders(x)) __atomic_fetch_or(&k->held, 1u << x, __ATOMIC_RELAXED);  /* from its start */
    else k->use = x;
    ex_task_options o;
    memset(&o, 0, sizeof o);
    const ex_allocator *own = ex_budget_allocator_get(&ch->frames);
    if (k->own_alloc && k->launch) o.allocator = own;
    ex_sender *s = ex_task_create(churn_body, k, &o);
    __atomic_fetch_add(&cy->pending, 1, __ATOMIC_ACQ_REL);  /* it may complete before the launch returns */
    ex_error e;
    if (k->launch) {
        ex_task_handlers h = { ctask_value, ctask_error, ctask_stopped, k };
        e = ex_task_launch(ex_counting_scope_token(&cy->scope), cy->r[x].sch, s, &h);
    } else {
        ex_env_pair_init(&k->env, &ex_key_get_scheduler, ex_sched_value(cy->r[x].sch), ex_env_empty());
        if (k->own_alloc) {
            k->env.key2 = &ex_key_get_allocator;
            k->env.value2 = ex_alloc_value(own);
        }
        ex_receiver r = { &ctask_rcvr_vt, k };
        e = ex_connect_alloc(s, r, &k->opstate);
        ex_sender_release(s);
        if (!e.code) ex_start(k->opstate);
    }
    if (e.code) {  /* nothing here may fail but memory, which does not run short */
        cviolation(k, "launching failed: %s (%d)", e.msg ? e.msg : "", e.code);
        k->opstate = NULL;
        __atomic_store_n(&k->held, 0, __ATOMIC_RELAXED);
        st(&k->completed, 1);
        __atomic_fetch_sub(&cy->pending, 1, __ATOMIC_ACQ_REL);
        if (k->use >= 0) unuse(cy, k->use);
        if (has_holders(x)) unuse(cy, x);
        return;
    }
    cy->launched++;
    cbump(C_LAUNCHED);
    if (has_holders(x)) unuse(cy, x);  /* the started task holds it */
}

static void launch_batch(cycle *cy, uint32_t n) {
    __atomic_store_n(&cy->phase, PH_LAUNCH, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < n && cy->launched < cy->ntasks; i++) {
        int open[R_COUNT], nopen = 0;
        for (int x = 0; x < R_COUNT; x++)
            if (!closing_res(cy, x)) open[nopen++] = x;
        if (!nopen) return;
        ctask *k = &cy->tasks[cy->launched];
        uint32_t before = cy->launched;
        launch_one(cy, k, open[rng_below(&cy->rng, (uint32_t)nopen)]);
        if (cy->launched == before) return;  /* refused (a violation): keep the rest simple */
    }
}

/* ------------------------------------------------------------ the loop thread */

/* Runs each cycle's run loop until the cycle finishes it. */
static void *loop_main(void *arg) {
    churn *ch = arg;
    pthread_mutex_lock(&ch->mu);
    for (;;) {
        while (!ch->loop_next && !ch->quit) pthread_cond_wait(&ch->cv, &ch->mu);
        ex_run_loop *l = ch->loop_next;
        if (!l) break;
        ch->loop_next = NULL;
        pthread_mutex_unlock(&ch->mu);
        ex_error e = ex_run_loop_run(l);
        if (e.code) cviolation(NULL, "ex_run_loop_run failed: %s (%d)", e.msg ? e.msg : "", e.code);
        pthread_mutex_lock(&ch->mu);
        ch->loop_ran = l;
        pthread_cond_broadcast(&ch->cv);
    }
    pthread_mutex_unlock(&ch->mu);
    return NULL;
}

/* ------------------------------------------------------------ creating, destroying */

static void fatal(ex_error e, const char *what) {
    if (!e.code) return;
    fprintf(stderr, "soak: churn: %s failed: %s (%d)\n", what, e.msg ? e.msg : "", e.code);
    exit(2);
}

static void cycle_create(cycle *cy) {
    churn *ch = cy->ch;
    __atomic_store_n(&cy->phase, PH_CREATE, __ATOMIC_RELAXED);
    ex_pool_config pc = { .threads = 1 + rng_below(&cy->rng, 2), .name_prefix = "churn" };
    pc.spin_rounds = rng_below(&cy->rng, 2) ? 4 : 0;  /* 0: the default (256) */
    fatal(ex_pool_create(&pc, &cy->pool), "ex_pool_create");
    cy->stc = malloc(sizeof *cy->stc);
    cy->loop = malloc(sizeof *cy->loop);
    if (!cy->stc || !cy->loop) fatal(ex_err(EX_ENOMEM, "malloc"), "allocating a context and a loop");
    fatal(ex_single_thread_context_init(cy->stc), "ex_single_thread_context_init");
    cy->stc_tid = ex_single_thread_context_thread_id(cy->stc);
    fatal(ex_run_loop_init(cy->loop), "ex_run_loop_init");
    pthread_mutex_lock(&ch->mu);
    ch->loop_next = cy->loop;
    pthread_cond_broadcast(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
    cy->r[R_POOL].sch = ex_pool_scheduler(cy->pool);
    cy->r[R_STC].sch = ex_single_thread_context_scheduler(cy->stc);
    cy->r[R_LOOP].sch = ex_run_loop_scheduler(cy->loop);
    cy->strand_under = rng_below(&cy->rng, 2) ? R_POOL : R_STC;
    fatal(ex_strand_create(cy->r[cy->strand_under].sch, ex_budget_allocator_get(&ch->frames), &cy->strand),
          "ex_strand_create");
    cy->r[R_STRAND].sch = ex_strand_scheduler(cy->strand);
    fatal(ex_counting_scope_init(&cy->scope), "ex_counting_scope_init");
    cbump(C_POOLS);
}

static void set_phase(cycle *cy, uint32_t ph, int x) {
    __atomic_store_n(&cy->phase_res, (uint32_t)x, __ATOMIC_RELAXED);
    __atomic_store_n(&cy->phase, ph, __ATOMIC_RELAXED);
    bump(&W.progress, 1);
}

/* Marks x closing and waits until no task names it under a use. */
static void close_res(cycle *cy, int x) {
    set_phase(cy, PH_USERS, x);
    __atomic_store_n(&cy->r[x].closing, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&cy->r[x].users, __ATOMIC_SEQ_CST)) pause_us(20);
    set_phase(cy, PH_DESTROY, x);
}

/* Launched tasks that ran on x (a pool or strand) and have not completed. */
static uint32_t holders_running(cycle *cy, int x) {
    uint32_t n = 0;
    for (uint32_t i = 0; i < cy->launched; i++)
        if ((ld(&cy->tasks[i].held) & (1u << x)) && !ld(&cy->tasks[i].completed)) n++;
    return n;
}

/* Once x's destroy succeeded, every task that held it had completed. */
static void check_holders_done(cycle *cy, int x, const char *what) {
    for (uint32_t i = 0; i < cy->launched; i++) {
        ctask *k = &cy->tasks[i];
        if ((ld(&k->held) & (1u << x)) && !ld(&k->completed))
            cviolation(k, "%s returned while this task, which ran on it, had not completed", what);
    }
}

static void destroy_pool(cycle *cy) {
    uint32_t away = holders_running(cy, R_POOL);
    if (away) {
        cbump(C_POOL_AWAY);
        bump(&W.churn[C_AWAY_TASKS], away);
    }
    ex_error e = ex_pool_destroy(cy->pool);
    if (e.code) cviolation(NULL, "ex_pool_destroy failed: %s (%d)", e.msg ? e.msg : "", e.code);
    check_holders_done(cy, R_POOL, "ex_pool_destroy");
    cy->pool = NULL;
}

/* EX_EBUSY while a task holds the strand or items run: retried. */
static void destroy_strand(cycle *cy) {
    bool held_seen = false;
    for (;;) {
        bool held = holders_running(cy, R_STRAND) != 0;
        ex_error e = ex_strand_destroy(cy->strand);
        if (e.code == 0) break;
        if (e.code != EX_EBUSY) {
            cviolation(NULL, "ex_strand_destroy failed: %s (%d)", e.msg ? e.msg : "", e.code);
            return;
        }
        cbump(C_STRAND_EBUSY);
        if (held && !held_seen) cbump(C_STRAND_HELD);
        held_seen |= held;
        pause_us(20);
    }
    check_holders_done(cy, R_STRAND, "ex_strand_destroy");
    cy->strand = NULL;
}

static void destroy_stc(cycle *cy) {
    ex_error e = ex_single_thread_context_destroy(cy->stc);
    if (e.code) cviolation(NULL, "ex_single_thread_context_destroy failed: %s (%d)", e.msg ? e.msg : "", e.code);
    free(cy->stc);
    cy->stc = NULL;
}

static void destroy_loop(cycle *cy) {
    churn *ch = cy->ch;
    ex_run_loop_finish(cy->loop);
    pthread_mutex_lock(&ch->mu);
    while (ch->loop_ran != cy->loop) pthread_cond_wait(&ch->cv, &ch->mu);
    ch->loop_ran = NULL;
    pthread_mutex_unlock(&ch->mu);
    ex_error e = ex_run_loop_destroy(cy->loop);
    if (e.code) cviolation(NULL, "ex_run_loop_destroy after its run returned failed: %s (%d)", e.msg ? e.msg : "", e.code);
    free(cy->loop);
    cy->loop = NULL;
}

static void destroy_res(cycle *cy, int x) {
    close_res(cy, x);
    switch (x) {
    case R_POOL: destroy_pool(cy); break;
    case R_STRAND: destroy_strand(cy); break;
    case R_STC: destroy_stc(cy); break;
    default: destroy_loop(cy); break;
    }
    cy->r[x].gone = true;
}

/* A random order in which the strand goes before the resource under it. */
static void destroy_order(cycle *cy, int order[R_COUNT]) {
    for (int i = 0; i < R_COUNT; i++) order[i] = i;
    for (int i = R_COUNT - 1; i > 0; i--) {
        int j = (int)rng_below(&cy->rng, (uint32_t)i + 1), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    int is = 0, iu = 0;
    for (int i = 0; i < R_COUNT; i++) {
        if (order[i] == R_STRAND) is = i;
        if (order[i] == cy->strand_under) iu = i;
    }
    if (iu < is) {
        order[iu] = R_STRAND;
        order[is] = cy->strand_under;
    }
}

/* ------------------------------------------------------------ a cycle */

static void join_cycle_scope(cycle *cy) {
    set_phase(cy, PH_JOIN, 0);
    ex_counting_scope_close(&cy->scope);
    ex_result r = ex_sync_wait(ex_counting_scope_join(&cy->scope));
    if (r.disposition != EX_DISP_VALUE) cviolation(NULL, "the cycle's scope join completed with %d", (int)r.disposition);
    ex_result_destroy(&r);
    ex_error e = ex_counting_scope_destroy(&cy->scope);
    if (e.code) cviolation(NULL, "destroying the cycle's scope failed: %d", e.code);
}

/* Everything is gone: every launched task completed exactly once, and
 * what it allocated is back (the connect-mode operations go now, into the
 * pool's parked arenas for those that ran on it). */
static void cycle_check(cycle *cy) {
    uint32_t pending = __atomic_load_n(&cy->pending, __ATOMIC_ACQUIRE);
    if (pending) cviolation(NULL, "cycle %llu: %u tasks never completed", (unsigned long long)cy->no, pending);
    for (uint32_t i = 0; i < cy->launched; i++) {
        ctask *k = &cy->tasks[i];
        if (ld(&k->completions) != 1) cviolation(k, "completed %u times", ld(&k->completions));
        if (ld(&k->probe_queued)) cviolation(k, "its probe of the pool was neither run nor cancelled");
        if (k->opstate) ex_operation_free(k->opstate);
        k->opstate = NULL;
    }
    ex_alloc_stats s;
    ex_allocator_stats(ex_budget_allocator_get(&cy->ch->frames), &s);
    if (s.bytes_in_use || s.allocations != s.frees)
        cviolation(NULL, "cycle %llu: the churn's allocator holds %llu bytes (%llu allocations, %llu frees)",
                   (unsigned long long)cy->no, (unsigned long long)s.bytes_in_use, (unsigned long long)s.allocations,
                   (unsigned long long)s.frees);
}

static void cycle_run(churn *ch) {
    cycle *cy = &ch->cy;
    memset(cy, 0, sizeof *cy);
    cy->ch = ch;
    cy->no = ch->cycles++;
    cy->rng = mix64(W.cfg.seed ^ mix64(0xC4A1100000000ull ^ ((uint64_t)(unsigned)ch->id << 40) ^ cy->no)) | 1;
    cycle_create(cy);
    cy->ntasks = 4 + rng_below(&cy->rng, MAX_CTASKS - 3);
    for (uint32_t i = 0; i < cy->ntasks; i++) {
        cy->tasks[i].cy = cy;
        cy->tasks[i].id = i;
        cy->tasks[i].seed = rng_next(&cy->rng);
        cy->tasks[i].use = -1;
    }
    int order[R_COUNT];
    destroy_order(cy, order);
    launch_batch(cy, cy->ntasks / 2 + rng_below(&cy->rng, cy->ntasks / 2 + 1));
    for (int i = 0; i < R_COUNT; i++) {
        pause_us((long)rng_below(&cy->rng, 1500));
        destroy_res(cy, order[i]);
        if (i + 1 < R_COUNT) launch_batch(cy, rng_below(&cy->rng, cy->ntasks - cy->launched + 1));
    }
    join_cycle_scope(cy);
    cycle_check(cy);
    set_phase(cy, PH_IDLE, 0);
    cbump(C_CYCLES);
}

/* ------------------------------------------------------------ the churn threads */

static void *churn_main(void *arg) {
    churn *ch = arg;
    ch->self = pthread_self();
    uint32_t seen = 0;
    while (round_wait(&seen)) {
        while (!round_closing()) cycle_run(ch);
        round_leave(seen);
    }
    return NULL;
}

void churn_start(void) {
    if (!W.cfg.churn) return;
    churns = calloc(W.cfg.churn, sizeof *churns);
    if (!churns) fatal(ex_err(EX_ENOMEM, "calloc"), "allocating the churn threads");
    for (unsigned i = 0; i < W.cfg.churn; i++) {
        churn *ch = &churns[i];
        ch->id = (int)i;
        ex_budget_allocator_init(&ch->frames, ex_libc_allocator(), (size_t)1 << 30);
        pthread_mutex_init(&ch->mu, NULL);
        pthread_cond_init(&ch->cv, NULL);
        if (pthread_create(&ch->loop_th, NULL, loop_main, ch) || pthread_create(&ch->th, NULL, churn_main, ch))
            fatal(ex_err(EX_EAGAIN, "pthread_create"), "starting a churn thread");
    }
}

/* After the rounds (W.quit): the churn threads are idle between cycles. */
void churn_stop(void) {
    for (unsigned i = 0; i < W.cfg.churn; i++) {
        churn *ch = &churns[i];
        pthread_join(ch->th, NULL);
        pthread_mutex_lock(&ch->mu);
        ch->quit = true;
        pthread_cond_broadcast(&ch->cv);
        pthread_mutex_unlock(&ch->mu);
        pthread_join(ch->loop_th, NULL);
        pthread_cond_destroy(&ch->cv);
        pthread_mutex_destroy(&ch->mu);
    }
    free(churns);
    churns = NULL;
}

void dump_churn(void) {
    for (unsigned i = 0; churns && i < W.cfg.churn; i++) {
        cycle *cy = &churns[i].cy;
        uint32_t ph = __atomic_load_n(&cy->phase, __ATOMIC_RELAXED), x = __atomic_load_n(&cy->phase_res, __ATOMIC_RELAXED);
        fprintf(stderr, "  churn %u cycle %llu: %s%s%s, %u of %u tasks launched, %u not completed; strand over the %s\n", i,
                (unsigned long long)cy->no, phase_names[ph], ph == PH_USERS || ph == PH_DESTROY ? " the " : "",
                ph == PH_USERS || ph == PH_DESTROY ? res_names[x] : "", cy->launched, cy->ntasks,
                __atomic_load_n(&cy->pending, __ATOMIC_RELAXED), res_names[cy->strand_under]);
        for (int r = 0; r < R_COUNT; r++)
            fprintf(stderr, "    %s: closing %u, users %u, gone %d\n", res_names[r],
                    __atomic_load_n(&cy->r[r].closing, __ATOMIC_RELAXED), __atomic_load_n(&cy->r[r].users, __ATOMIC_RELAXED),
                    cy->r[r].gone);
        for (uint32_t j = 0; j < cy->launched; j++) {
            ctask *k = &cy->tasks[j];
            if (ld(&k->completed)) continue;
            uint32_t op = __atomic_load_n(&k->op, __ATOMIC_RELAXED);
            fprintf(stderr, "    task %u (%s on the %s, seed 0x%016llx): body ran %u, step %u (%s), on the %s, held %#x\n",
                    k->id, k->launch ? "launched" : "connected", res_names[k->start], (unsigned long long)k->seed,
                    ld(&k->body_ran), __atomic_load_n(&k->step, __ATOMIC_RELAXED), op_names[op < 5 ? op : 4],
                    res_names[__atomic_load_n(&k->cur, __ATOMIC_RELAXED) % R_COUNT], ld(&k->held));
        }
    }
}
