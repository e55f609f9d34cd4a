/* SPDX-License-Identifier: MIT */
/* run.c - operation slots, the six ways the soak runs a graph, the drivers
 * that keep the slots busy, the stopper thread, and the checks made when
 * a slot is reaped.
 *
 * A slot holds one operation at a time: FREE -> LIVE (its driver built and
 * started it) -> DONE (the graph's completion arrived) -> FREE (its driver
 * checked it).  The number of slots bounds the operations in flight.
 * Only the slot's driver launches and reaps it; completions only store the
 * outcome, count, and post the driver's semaphore (they may run on any
 * thread, the stopper's included, so they take no lock).  The stopper
 * requests stop under the slot's mutex, which the reaper takes to recycle
 * the slot: a stop request never reaches the next operation of a slot. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "soak.h"

static const char *mode_names[M_COUNT] = { "pipeline", "sync_wait", "task", "spawn", "launch", "future" };
static const char *route_names[] = { "none", "env", "write_env", "task_options" };
static const char *under_names[U_COUNT] = { "libc", "recycling", "jemalloc", "budget" };

const char *mode_name(int m) { return mode_names[m]; }

bool on_scheduler(ex_scheduler sch) {
    if (ex_scheduler_equal(sch, W.sch[SCH_POOL])) return ex_pool_current_worker(W.pool) >= 0;
    if (ex_scheduler_equal(sch, W.sch[SCH_LOOP])) return pthread_equal(pthread_self(), W.stc_tid) != 0;
    return true;  /* inline, or a sync_wait's run loop: anywhere */
}

/* ------------------------------------------------------------ the tracking allocator */

static void *tr_allocate(void *ctx, size_t size, size_t align) {
    track *t = ctx;
    void *p = t->under->allocate(t->under->ctx, size, align);
    if (p) {
        __atomic_fetch_add(&t->allocs, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&t->in_use, size, __ATOMIC_RELAXED);
    }
    return p;
}

/* The release is the block's last touch of the slot's allocators: once the
 * reaper acquires in_use == 0 it may re-initialise them. */
static void tr_deallocate(void *ctx, void *p, size_t size, size_t align) {
    track *t = ctx;
    t->under->deallocate(t->under->ctx, p, size, align);
    __atomic_fetch_add(&t->frees, 1, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&t->in_use, size, __ATOMIC_RELEASE);
}

static void track_init(track *t, const ex_allocator *under) {
    t->base = (ex_allocator){ tr_allocate, tr_deallocate, t, "soak-track", NULL };
    t->under = under;
    t->allocs = t->frees = t->in_use = 0;
}

static bool track_balanced(track *t) {
    return __atomic_load_n(&t->in_use, __ATOMIC_ACQUIRE) == 0 &&
           __atomic_load_n(&t->allocs, __ATOMIC_RELAXED) == __atomic_load_n(&t->frees, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ completions */

static void complete_one(slot *s) {
    if (__atomic_sub_fetch(&s->pending, 1, __ATOMIC_ACQ_REL) != 0) return;
    bump(&W.progress, 1);
    __atomic_store_n(&s->state, ST_DONE, __ATOMIC_RELEASE);
    sem_post(&s->drv->wake);  /* the driver is constant: slots never move */
}

/* Counts a completion of `what` in *count: true for the first; a second
 * one is a violation. */
static bool first_completion(slot *s, uint32_t *count, const char *what) {
    uint32_t prev = __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
    if (prev != 0) violation(s, "%s completed %u times", what, prev + 1);
    return prev == 0;
}

/* The graph's completion: counts it (0 -> 1); a second one is a violation
 * and changes nothing else. */
static void finish(slot *s, outcome o) {
    if (!first_completion(s, &s->completions, "the operation")) return;
    s->got = o;
    s->done_on_sched = on_scheduler(W.sch[s->sched]);
    complete_one(s);
}

static outcome value_outcome(const ex_value *v, size_t n) {
    if (n == 1 && v[0].type == EX_T_INT) return (outcome){ O_VALUE, v[0].as.i };
    return (outcome){ O_VALUE, -1000000 - (int64_t)n };  /* never allowed: reported */
}

static void r_value(void *self, const ex_value *v, size_t n) { finish(self, value_outcome(v, n)); }
static void r_error(void *self, ex_error e) { finish(self, (outcome){ O_ERROR, e.code }); }
static void r_stopped(void *self) { finish(self, (outcome){ O_STOPPED, 0 }); }
static ex_env r_env(void *self) { return ((slot *)self)->env; }
static const ex_receiver_vtable pipe_rcvr_vt = { r_value, r_error, r_stopped, r_env, NULL };

/* The recorder: spawned work and futures complete inside the scope, so the
 * graph's own outcome is taken by then / upon_error / upon_stopped. */
static ex_error rec_value(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)out;
    finish(ctx, value_outcome(in, n));
    return ex_ok();
}
static ex_error rec_error(void *ctx, ex_error e, ex_value *out) {
    (void)out;
    finish(ctx, (outcome){ O_ERROR, e.code });
    return ex_ok();
}
static ex_error rec_stopped(void *ctx, ex_value *out) {
    (void)out;
    finish(ctx, (outcome){ O_STOPPED, 0 });
    return ex_ok();
}

static ex_sender *recorder(slot *s, ex_sender *g) {
    g = ex_then(g, rec_value, s, EX_SIG_VARIADIC, EX_SIG0);
    g = ex_upon_error(g, rec_error, s, EX_SIG0);
    return ex_upon_stopped(g, rec_stopped, s, EX_SIG0);
}

/* ex_task_launch's handlers. */
static void h_value(void *ctx, const ex_value *v, size_t n) { finish(ctx, value_outcome(v, n)); }
static void h_error(void *ctx, ex_error e) { finish(ctx, (outcome){ O_ERROR, e.code }); }
static void h_stopped(void *ctx) { finish(ctx, (outcome){ O_STOPPED, 0 }); }

/* The consumer of a future: the recorder inside makes every result a value. */
static void fut_finish(slot *s, int disp) {
    if (!first_completion(s, &s->fut_completions, "the future's consumer")) return;
    s->fut_disp = disp;
    complete_one(s);
}
static void f_value(void *self, const ex_value *v, size_t n) {
    (void)v;
    fut_finish(self, n == 0 ? O_VALUE : O_NONE);
}
static void f_error(void *self, ex_error e) {
    ((slot *)self)->refuse_err = e;
    fut_finish(self, O_ERROR);
}
static void f_stopped(void *self) { fut_finish(self, O_STOPPED); }
static const ex_receiver_vtable fut_rcvr_vt = { f_value, f_error, f_stopped, NULL, NULL };

/* ------------------------------------------------------------ launching */

typedef struct kv {
    const ex_key *k;
    ex_value v;
} kv;

/* Up to three keys in the slot's two env pairs. */
static ex_env make_env(slot *s, const kv *items, int n) {
    ex_env parent = ex_env_empty();
    if (n == 0) return parent;
    if (n > 2) {
        ex_env_pair_init(&s->env_b, items[2].k, items[2].v, parent);
        parent = ex_env_of_pair(&s->env_b);
    }
    ex_env_pair_init(&s->env_a, items[0].k, items[0].v, parent);
    if (n > 1) {
        s->env_a.key2 = items[1].k;
        s->env_a.value2 = items[1].v;
    }
    return ex_env_of_pair(&s->env_a);
}

static ex_value token_of(slot *s) { return ex_token_value(ex_stop_source_token(&s->stop)); }
static ex_value alloc_of(slot *s) { return ex_alloc_value(&s->tr.base); }

static ex_sender *with_env_keys(slot *s, ex_sender *g, bool alloc) {
    if (alloc) g = ex_write_env(g, &ex_key_get_allocator, alloc_of(s));
    if (s->slot_token) g = ex_write_env(g, &ex_key_get_stop_token, token_of(s));
    return g;
}

static ex_scope_token scope_of(slot *s) {
    return s->counting ? ex_counting_scope_token(&W.cscope) : ex_simple_counting_scope_token(&W.sscope);
}

/* Not started: the outcome is the refusal (allowed only as EX_ENOMEM from
 * the operation's own allocator). */
static void refuse(slot *s, ex_error e) {
    s->refused = 1;
    s->refuse_err = e;
    bump(&W.kstat[s->m][K_REFUSED], 1);
    bump(&W.progress, 1);
    __atomic_store_n(&s->state, ST_DONE, __ATOMIC_RELEASE);
}

static void started(slot *s) { bump(&W.kstat[s->m][K_STARTED], 1); }

/* Spawned work, task launches and futures complete inside a scope. */
static bool async_mode(mode m) { return m == M_SPAWN || m == M_LAUNCH || m == M_FUTURE; }

static void launch_connected(slot *s) {
    kv items[3];
    int n = 0;
    items[n++] = (kv){ &ex_key_get_scheduler, ex_sched_value(W.sch[s->sched]) };
    if (s->slot_token) items[n++] = (kv){ &ex_key_get_stop_token, token_of(s) };
    if (s->aroute == AR_ENV) items[n++] = (kv){ &ex_key_get_allocator, alloc_of(s) };
    s->env = make_env(s, items, n);
    ex_sender *g = graph_build(s, 0);
    if (s->aroute == AR_WRITE_ENV) g = ex_write_env(g, &ex_key_get_allocator, alloc_of(s));
    ex_receiver r = { &pipe_rcvr_vt, s };
    ex_error e = ex_connect_alloc(g, r, &s->op);
    ex_sender_release(g);
    if (e.code) {
        s->op = NULL;
        refuse(s, e);
        return;
    }
    started(s);
    ex_start(s->op);
}

static void launch_sync(slot *s) {
    ex_sender *g = with_env_keys(s, graph_build(s, 0), s->aroute == AR_ENV || s->aroute == AR_WRITE_ENV);
    started(s);
    ex_result r = ex_sync_wait(g);
    outcome o = { O_NONE, 0 };
    if (r.disposition == EX_DISP_VALUE) o = value_outcome(r.values, r.n);
    else if (r.disposition == EX_DISP_ERROR) o = (outcome){ O_ERROR, r.error.code };
    else if (r.disposition == EX_DISP_STOPPED) o = (outcome){ O_STOPPED, 0 };
    ex_result_destroy(&r);
    finish(s, o);
}

static void launch_spawn(slot *s) {
    ex_sender *g = recorder(s, with_env_keys(s, graph_build(s, 0), s->aroute == AR_WRITE_ENV));
    kv items[2];
    int n = 0;
    items[n++] = (kv){ &ex_key_get_scheduler, ex_sched_value(W.sch[s->sched]) };
    if (s->aroute == AR_ENV) items[n++] = (kv){ &ex_key_get_allocator, alloc_of(s) };
    s->env = make_env(s, items, n);
    ex_error e = ex_spawn_env(g, scope_of(s), s->env);
    if (e.code) refuse(s, e);
    else started(s);
}

static void launch_task(slot *s) {
    ex_sender *t = with_env_keys(s, graph_build(s, 0), s->aroute == AR_WRITE_ENV);
    ex_task_handlers h = { h_value, h_error, h_stopped, s };
    ex_error e = ex_task_launch(scope_of(s), W.sch[s->sched], t, &h);
    if (e.code) refuse(s, e);
    else started(s);
}

static void launch_future(slot *s) {
    ex_sender *g = ex_write_env(graph_build(s, 0), &ex_key_get_scheduler, ex_sched_value(W.sch[s->sched]));
    g = recorder(s, with_env_keys(s, g, s->aroute == AR_ENV || s->aroute == AR_WRITE_ENV));
    if (!s->drop_future) __atomic_store_n(&s->pending, 2, __ATOMIC_RELAXED);
    ex_sender *f = ex_spawn_future(g, scope_of(s));
    ex_error e = ex_sender_status(f);
    if (e.code) {
        ex_sender_release(f);
        refuse(s, e);
        return;
    }
    started(s);
    if (s->drop_future) {  /* nobody will read the result: the work is asked to stop */
        __atomic_store_n(&s->stop_requested, 1, __ATOMIC_RELAXED);
        bump(&W.stops_drop, 1);
        ex_sender_release(f);
        return;
    }
    ex_receiver r = { &fut_rcvr_vt, s };
    e = ex_connect_alloc(f, r, &s->op);
    ex_sender_release(f);
    if (e.code) {  /* the work runs on; its recorder completes the slot */
        s->op = NULL;
        violation(s, "connecting a future failed: %s (%d)", e.msg ? e.msg : "", e.code);
        complete_one(s);
        return;
    }
    ex_start(s->op);
}

/* ------------------------------------------------------------ parameters */

static mode pick_mode(uint64_t *rng) {
    uint32_t total = 0;
    for (int m = 0; m < M_COUNT; m++) total += W.rp.mode_weights[m];
    uint32_t r = rng_below(rng, total);
    for (int m = 0; m < M_COUNT; m++) {
        if (r < W.rp.mode_weights[m]) return (mode)m;
        r -= W.rp.mode_weights[m];
    }
    return M_PIPE;
}

static int pick_route(uint64_t *rng, mode m) {
    static const int routes[M_COUNT][4] = {
        [M_PIPE] = { AR_NONE, AR_ENV, AR_WRITE_ENV, AR_TASK_OPT }, [M_SYNC] = { AR_NONE, AR_WRITE_ENV, AR_TASK_OPT, AR_WRITE_ENV },
        [M_TASK] = { AR_NONE, AR_ENV, AR_WRITE_ENV, AR_TASK_OPT }, [M_SPAWN] = { AR_NONE, AR_ENV, AR_WRITE_ENV, AR_TASK_OPT },
        [M_LAUNCH] = { AR_NONE, AR_WRITE_ENV, AR_TASK_OPT, AR_TASK_OPT }, [M_FUTURE] = { AR_NONE, AR_WRITE_ENV, AR_TASK_OPT, AR_WRITE_ENV },
    };
    return routes[m][rng_below(rng, 4)];
}

/* Everything about the next operation of a slot, from its own seed;
 * returns whether stop is to be requested before it starts. */
static bool draw(driver *d, slot *s, uint64_t *fseed) {
    s->opno = d->opno++;
    s->op_seed = mix64(W.cfg.seed ^ mix64(((uint64_t)(unsigned)d->id << 48) ^ s->opno));
    uint64_t rng = s->op_seed | 1;
    s->m = pick_mode(&rng);
    uint32_t r = rng_below(&rng, 100);
    s->sched = r < 50 ? SCH_POOL : r < 75 ? SCH_LOOP : SCH_INLINE;
    s->under = (int)rng_below(&rng, U_COUNT);
    s->aroute = pick_route(&rng, s->m);
    s->fault_ppm = rng_below(&rng, 100) < W.rp.fault_pct ? 1000 + rng_below(&rng, W.rp.fault_ppm_max) : 0;
    s->counting = rng_below(&rng, 2) != 0;
    bool scoped = async_mode(s->m);
    s->slot_token = rng_below(&rng, 100) < (scoped ? (s->counting ? 30u : 60u) : 85u);
    s->scope_token = scoped && s->counting && !s->slot_token;
    s->want_stop = s->slot_token && rng_below(&rng, 100) < W.rp.stop_pct;
    s->stop_at = now_s() + (double)rng_below(&rng, 3000) * 1e-6;  /* within 3 ms: before, during or after */
    bool prestop = s->slot_token && rng_below(&rng, 100) < W.rp.prestop_pct;
    s->drop_future = s->m == M_FUTURE && rng_below(&rng, 10) == 0;
    uint64_t grng = mix64(s->op_seed ^ 0x6A09E667F3BCC908ull) | 1;  /* the graph: from the seed alone */
    graph_generate(&s->g, &grng, s->m == M_TASK || s->m == M_LAUNCH, s);
    *fseed = rng_next(&rng);
    return prestop;
}

/* A fresh slot: counters, allocators and stop source for one operation. */
static void reset(slot *s, uint64_t fseed) {
    s->completions = s->fut_completions = 0;
    s->pending = 1;
    s->got = (outcome){ O_NONE, 0 };
    s->fut_disp = O_NONE;
    s->refused = 0;
    s->refuse_err = ex_ok();
    s->moves = s->moves_failed = s->bad_where = s->bad_prev = s->bad_task = 0;
    s->op = NULL;
    s->op_freed = false;
    s->bad_what = NULL;
    s->stop_requested = 0;
    s->env = ex_env_empty();
    ex_fault_allocator_init(&s->fa, W.unders[s->under]);
    if (s->fault_ppm) ex_fault_allocator_fail_randomly(&s->fa, fseed, s->fault_ppm);
    track_init(&s->tr, ex_fault_allocator_get(&s->fa));
    ex_stop_source_init(&s->stop);
}

/* LIVE under the mutex: the stopper sees everything written before. */
static void go_live(slot *s, bool prestop) {
    pthread_mutex_lock(&s->mu);
    s->t_start = now_s();
    __atomic_store_n(&s->state, ST_LIVE, __ATOMIC_RELEASE);
    if (prestop) {
        __atomic_store_n(&s->stop_requested, 1, __ATOMIC_RELAXED);
        bump(&W.stops_prestart, 1);
        ex_stop_source_request_stop(&s->stop);
    }
    pthread_mutex_unlock(&s->mu);
    if (s->want_stop && !prestop) __atomic_store_n(&s->armed, 1, __ATOMIC_RELEASE);
}

static void launch(driver *d, slot *s) {
    uint64_t fseed;
    bool prestop = draw(d, s, &fseed);
    reset(s, fseed);
    go_live(s, prestop);
    switch (s->m) {
    case M_PIPE:
    case M_TASK: launch_connected(s); break;
    case M_SYNC: launch_sync(s); break;
    case M_SPAWN: launch_spawn(s); break;
    case M_LAUNCH: launch_task(s); break;
    default: launch_future(s); break;
    }
}

/* ------------------------------------------------------------ checks */

static void check_nodes(slot *s) {
    for (int i = 0; i < s->g.count; i++) {
        node *nd = &s->g.n[i];
        uint32_t bad = __atomic_load_n(&nd->bad, __ATOMIC_RELAXED);
        const char *what = __atomic_load_n(&s->bad_what, __ATOMIC_RELAXED);
        if (bad) violation(s, "node %d: %s (%u times)", i, what ? what : "?", bad);
        for (uint32_t j = 0; j < nd->shape && j < MAX_SHAPE; j++)
            if (nd->idx_runs[j] > 1) violation(s, "node %d: bulk index %u ran %u times", i, j, nd->idx_runs[j]);
    }
}

/* A task completes on its scheduler, and ex_task_launch's handlers run
 * there too, unless a stop, a failed allocation or a failed scheduler
 * change intervened, or the root task opted out of affinity. */
static void check_completion_thread(slot *s, rctx c) {
    if (s->m != M_TASK && s->m != M_LAUNCH) return;
    if (c.stop || c.fault || s->moves_failed || s->got.kind == O_STOPPED || (s->g.n[0].flags & T_INLINE)) return;
    if (!s->done_on_sched) violation(s, "the task's completion ran off its scheduler");
}

static void check_tasks(slot *s, bool fault) {
    if (s->bad_where) violation(s, "%u task resumptions off the task's scheduler", s->bad_where);
    if (s->bad_prev) violation(s, "%u scheduler changes returned a wrong previous scheduler", s->bad_prev);
    if (s->bad_task) violation(s, "%u bad await results in task bodies", s->bad_task);
    if (s->moves_failed && !fault) violation(s, "%u scheduler changes failed without an allocation failure", s->moves_failed);
}

static void count_outcome(slot *s, outcome o) {
    int k = o.kind == O_VALUE ? K_VALUE : o.kind == O_STOPPED ? K_STOPPED : o.v == EX_ENOMEM ? K_ENOMEM : K_ERROR;
    bump(&W.kstat[s->m][K_COMPLETED], 1);
    bump(&W.kstat[s->m][k], 1);
}

static void check_outcome(slot *s, rctx c) {
    oset allowed;
    ref_eval(&s->g, 0, c, &allowed);
    if (allowed.any) bump(&W.unchecked, 1);
    if (oset_has(&allowed, s->got)) return;
    char got[64], set[1024];
    outcome_format(s->got, got, sizeof got);
    oset_format(&allowed, set, sizeof set);
    violation(s, "outcome %s not among the allowed %s (stop %d, allocation failure %d)", got, set, c.stop, c.fault);
}

static void check_refusal(slot *s, bool fault) {
    if (s->refuse_err.code == EX_ENOMEM && fault) return;
    violation(s, "not started: %s (error %d)%s", s->refuse_err.msg ? s->refuse_err.msg : "", s->refuse_err.code,
              fault ? "" : " without an allocation failure");
}

static void check_future(slot *s) {
    uint32_t want = s->drop_future || s->refused ? 0 : 1;
    if (s->fut_completions != want) violation(s, "the future's consumer completed %u times", s->fut_completions);
    else if (want && s->fut_disp != O_VALUE)
        violation(s, "the future's consumer completed with %d (%s)", s->fut_disp, s->refuse_err.msg ? s->refuse_err.msg : "");
}

static void check_alloc(slot *s, const ex_alloc_stats *st) {
    if (st->allocations != st->frees || st->bytes_in_use)
        violation(s, "fault allocator: %llu allocations, %llu frees, %llu bytes in use after the operation",
                  (unsigned long long)st->allocations, (unsigned long long)st->frees,
                  (unsigned long long)st->bytes_in_use);
}

/* Everything a finished operation must satisfy. */
static void check(slot *s, bool stop, bool callbacks_left) {
    ex_alloc_stats st;
    ex_allocator_stats(ex_fault_allocator_get(&s->fa), &st);
    check_alloc(s, &st);
    bool fault = st.failures > 0;
    bump(&W.faults, st.failures);
    if (callbacks_left) violation(s, "a stop callback is still registered on the slot's stop source");
    rctx c = { stop || (s->scope_token && __atomic_load_n(&W.scope_stop, __ATOMIC_ACQUIRE)), fault };
    uint32_t want = s->refused ? 0 : 1;
    if (s->completions != want) violation(s, "the operation completed %u times", s->completions);
    if (s->refused) check_refusal(s, fault);
    else if (s->completions == 1) {
        count_outcome(s, s->got);
        check_outcome(s, c);
        check_completion_thread(s, c);
    }
    if (s->m == M_FUTURE) check_future(s);
    check_nodes(s);
    check_tasks(s, fault);
}

/* Blocks that come back after the operation was destroyed are a violation
 * too (something touched the operation's allocator after its completion);
 * a short wait tells them from a leak. */
static void settle(slot *s) {
    if (track_balanced(&s->tr)) return;
    double t0 = now_s();
    while (!track_balanced(&s->tr) && now_s() - t0 < 0.2) sched_yield();
    uint64_t in_use = __atomic_load_n(&s->tr.in_use, __ATOMIC_ACQUIRE);
    violation(s, "%s: %llu bytes of the operation's allocator %s", async_mode(s->m) ? "after the scope's join" : "after destroy",
              (unsigned long long)in_use, in_use ? "never came back (leak)" : "came back late");
}

/* Reaps a DONE slot; false when its blocks are not back yet (spawned work
 * frees after its completion) and strict is not set. */
static bool try_reap(slot *s, bool strict) {
    if (!s->op_freed) {
        if (s->op) ex_operation_free(s->op);
        s->op = NULL;
        graph_release(&s->g);  /* split states hold shared work */
        s->op_freed = true;
    }
    if (!track_balanced(&s->tr)) {
        if (async_mode(s->m) && !strict) return false;
        settle(s);
    }
    pthread_mutex_lock(&s->mu);
    bool stop = __atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED) != 0;
    bool callbacks_left = s->stop.head != NULL;  /* private, read for the check only */
    __atomic_store_n(&s->armed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->state, ST_FREE, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&s->mu);
    check(s, stop, callbacks_left);
    bump(&W.progress, 1);
    return true;
}

/* ------------------------------------------------------------ drivers */

static void wait_wake(driver *d) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 2000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    while (sem_timedwait(&d->wake, &ts) != 0 && errno == EINTR) { }
}

static bool closing(void) { return __atomic_load_n(&W.closing, __ATOMIC_ACQUIRE) != 0; }

/* One pass over the driver's slots; returns whether it did something. */
static bool service(driver *d, bool launch_more, bool strict) {
    bool did = false;
    for (int i = 0; i < d->nslots; i++) {
        slot *s = &d->slots[i];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == ST_DONE) did |= try_reap(s, strict);
        if (launch_more && !closing() && __atomic_load_n(&s->state, __ATOMIC_RELAXED) == ST_FREE) {
            launch(d, s);
            did = true;
        }
    }
    return did;
}

/* Drained: every slot free, or done and waiting for its scope's join. */
static bool drained(driver *d, bool strict) {
    for (int i = 0; i < d->nslots; i++) {
        slot *s = &d->slots[i];
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (st == ST_FREE) continue;
        if (!strict && st == ST_DONE && s->op_freed && async_mode(s->m)) continue;
        return false;
    }
    return true;
}

static void phase_arrive(uint32_t *counter) {
    pthread_mutex_lock(&W.ph_mu);
    (*counter)++;
    pthread_cond_broadcast(&W.ph_cv);
    pthread_mutex_unlock(&W.ph_mu);
}

bool round_closing(void) { return closing(); }

bool round_wait(uint32_t *seen) {
    pthread_mutex_lock(&W.ph_mu);
    while (W.ph_round == *seen && !W.quit) pthread_cond_wait(&W.ph_cv, &W.ph_mu);
    bool quit = W.quit;
    *seen = W.ph_round;
    pthread_mutex_unlock(&W.ph_mu);
    return !quit;
}

static void wait_joined(uint32_t round) {
    pthread_mutex_lock(&W.ph_mu);
    while (W.joined != round) pthread_cond_wait(&W.ph_cv, &W.ph_mu);
    pthread_mutex_unlock(&W.ph_mu);
}

void round_leave(uint32_t round) {
    phase_arrive(&W.drained);
    wait_joined(round);
    phase_arrive(&W.finished);
}

static void run_round(driver *d, uint32_t round) {
    while (!closing())
        if (!service(d, true, false)) wait_wake(d);
    while (!drained(d, false))
        if (!service(d, false, false)) wait_wake(d);
    phase_arrive(&W.drained);
    wait_joined(round);
    while (!drained(d, true))
        if (!service(d, false, true)) wait_wake(d);
    phase_arrive(&W.finished);
}

void *driver_main(void *arg) {
    driver *d = arg;
    uint32_t seen = 0;
    while (round_wait(&seen)) run_round(d, seen);
    return NULL;
}

/* ------------------------------------------------------------ the stopper */

static void stop_slot(slot *s, double t) {
    if (!__atomic_load_n(&s->armed, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&s->mu);
    if (__atomic_load_n(&s->armed, __ATOMIC_RELAXED) && t >= s->stop_at) {
        __atomic_store_n(&s->armed, 0, __ATOMIC_RELAXED);
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == ST_LIVE) {
            __atomic_store_n(&s->stop_requested, 1, __ATOMIC_RELAXED);
            bump(&W.stops_slot, 1);
            ex_stop_source_request_stop(&s->stop);  /* completions may run here */
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static void stop_scope(double t) {
    pthread_mutex_lock(&W.round_mu);  /* the round's parameters and scopes */
    if (W.scopes_live && W.rp.scope_stop_at > 0 && !__atomic_load_n(&W.scope_stop, __ATOMIC_RELAXED) &&
        t - W.round_t0 >= W.rp.scope_stop_at) {
        __atomic_store_n(&W.scope_stop, 1, __ATOMIC_RELEASE);
        bump(&W.stops_scope, 1);
        ex_counting_scope_request_stop(&W.cscope);
    }
    pthread_mutex_unlock(&W.round_mu);
}

/* Requests stop on armed slots once their moment came, and on the
 * counting scope once per round where the round's parameters say so. */
void *stopper_main(void *arg) {
    (void)arg;
    uint64_t rng = mix64(W.cfg.seed ^ 0x570770ull) | 1;
    while (!__atomic_load_n(&W.quit, __ATOMIC_ACQUIRE)) {
        struct timespec ts = { 0, 50000 + (long)rng_below(&rng, 250000) };
        nanosleep(&ts, NULL);
        double t = now_s();
        for (unsigned i = 0; i < W.cfg.drivers; i++)
            for (int j = 0; j < W.drivers[i].nslots; j++) stop_slot(&W.drivers[i].slots[j], t);
        stop_scope(t);
    }
    return NULL;
}

/* ------------------------------------------------------------ setup, dump */

void slots_init(void) {
    W.drivers = calloc(W.cfg.drivers, sizeof *W.drivers);
    unsigned per = (W.cfg.inflight + W.cfg.drivers - 1) / W.cfg.drivers;
    for (unsigned i = 0; i < W.cfg.drivers; i++) {
        driver *d = &W.drivers[i];
        d->id = (int)i;
        d->nslots = (int)per;
        d->slots = calloc(per, sizeof *d->slots);
        if (!d->slots) {
            fprintf(stderr, "soak: out of memory for slots\n");
            exit(2);
        }
        sem_init(&d->wake, 0, 0);
        for (unsigned j = 0; j < per; j++) {
            d->slots[j].drv = d;
            pthread_mutex_init(&d->slots[j].mu, NULL);
        }
    }
}

void slots_destroy(void) {
    for (unsigned i = 0; i < W.cfg.drivers; i++) {
        driver *d = &W.drivers[i];
        for (int j = 0; j < d->nslots; j++) pthread_mutex_destroy(&d->slots[j].mu);
        sem_destroy(&d->wake);
        free(d->slots);
    }
    free(W.drivers);
    W.drivers = NULL;
}

void slot_describe(const slot *s, char *buf, size_t size) {
    char g[2048];
    graph_format(&s->g, 0, g, sizeof g);
    snprintf(buf, size,
             "%s op %u.%llu (op seed 0x%016llx) sched %s, allocator route %s over %s, fault %u ppm, stop token %s%s%s: %s",
             mode_names[s->m], (unsigned)s->drv->id, (unsigned long long)s->opno, (unsigned long long)s->op_seed,
             s->sched == SCH_POOL ? "pool" : s->sched == SCH_LOOP ? "loop" : "inline", route_names[s->aroute],
             under_names[s->under], s->fault_ppm, s->slot_token ? "slot" : s->scope_token ? "scope" : "none",
             async_mode(s->m) ? (s->counting ? ", counting scope" : ", simple scope") : "",
             s->drop_future ? ", future dropped" : "", g);
}

void dump_slots(void) {
    double t = now_s();
    static char line[4096];
    for (unsigned i = 0; i < W.cfg.drivers; i++) {
        driver *d = &W.drivers[i];
        for (int j = 0; j < d->nslots; j++) {
            slot *s = &d->slots[j];
            uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
            if (st == ST_FREE) continue;
            slot_describe(s, line, sizeof line);
            fprintf(stderr, "  slot %u.%d %s for %.1f s, completions %u, pending %u, stop requested %u, %llu bytes out: %s\n",
                    i, j, st == ST_LIVE ? "LIVE" : "DONE", t - s->t_start, __atomic_load_n(&s->completions, __ATOMIC_RELAXED),
                    __atomic_load_n(&s->pending, __ATOMIC_RELAXED), __atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED),
                    (unsigned long long)__atomic_load_n(&s->tr.in_use, __ATOMIC_RELAXED), line);
        }
    }
}
