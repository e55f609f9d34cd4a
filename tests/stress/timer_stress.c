/* SPDX-License-Identifier: MIT */
/* timer_stress.c - timers (cexec/timer.h) armed, cancelled, fired and
 * dropped from several threads at once, under ThreadSanitizer.
 *
 * 1. Pool of 2: per round, 8-32 timers armed from 2-3 threads at once,
 *    deadlines 0-200 us ahead (ex_schedule_at or ex_schedule_after), a
 *    third of them stopped from another thread around their deadline, a
 *    quarter freed by their receiver inside the completion.  Each
 *    completes exactly once: set_value never before its deadline and on
 *    a worker; set_stopped only if stopped, on the stopping thread (the
 *    cancel took it out of the heap) or on a worker (it had fired).
 *    Nothing of the round stays allocated, and a timer armed after the
 *    round fires (the pool still keeps time).
 * 2. The same on a single-thread context, on a run loop run by a
 *    thread of the program (finished at the end; its destroy must then
 *    succeed), and on the loop of an ex_sync_wait on a thread of the
 *    program (ended by a stop request from this thread): values on the
 *    resource's thread.
 * 3. Shutdown racing arms: a pool (even rounds, the armers hold it with
 *    ex_scheduler_retain) or a context (odd rounds) destroyed while 2-3
 *    threads keep arming (a quarter of the timers 1 s ahead, for the
 *    shutdown to drop) and another stops some of them.  Each accepted
 *    timer completes exactly once (fired; dropped by the shutdown:
 *    set_stopped on the destroying thread, or the context's; cancelled);
 *    an arming thread goes on until one is refused, which completes
 *    set_error(EX_ESHUTDOWN) in its start; destroy returns EX_OK.
 *    3b. A pool destroyed as soon as a timer armed from outside, without
 *    a hold, fired, while the arming thread may still be in ex_start.
 * 4. Periodic chains on the pool: each completion arms the chain's next
 *    timer from the worker it runs on, and another thread stops the chain
 *    after a random number of links.  Every link completes exactly once,
 *    the chain ends exactly once (set_stopped, or set_value after its last
 *    link), values never early and on a worker.
 * Parts 1 and 3b found the pool's arm reading the operation and the pool
 * after releasing the heap's lock (fixed: it wakes the keeper under it).
 * Each part runs its rounds, cut short after PART_SECONDS once it ran
 * MIN_ROUNDS (a loaded machine, TSan); the rounds done are printed. */
#include <pthread.h>
#include <sched.h>
#include <string.h>

#include "stress_util.h"

enum { WORKERS = 2, MAX_TIMERS = 32, MAX_ARMERS = 3 };
enum { TIMER_ROUNDS = 5000, SHUTDOWN_ROUNDS = 2000, CHAIN_ROUNDS = 600, MIN_ROUNDS = 12 };
enum { WINDOW_NS = 200 * 1000, FAR_NS = 1000 * 1000 * 1000, LINK_NS = 40 * 1000 };
#define PART_SECONDS 0.6

static int checks;

static bool part_over(int round, double t0) { return round >= MIN_ROUNDS && now_s() - t0 > PART_SECONDS; }

/* Agents draw their own numbers (each thread's xorshift starts alike). */
static void seed_thread(void) {
    static _Thread_local bool seeded;
    static uint64_t next = 1;
    if (seeded) return;
    seeded = true;
    rng_state ^= 0x2545f4914f6cdd1dull * __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ targets */

/* A resource with a clock, and how to tell its threads. */
typedef struct target {
    const char *name;
    ex_scheduler sch;
    ex_pool *pool;     /* a pool: its workers are its threads */
    pthread_t thread;  /* else: its one thread */
} target;

static bool on_resource(const target *tg) {
    if (tg->pool) {
        int w = ex_pool_current_worker(tg->pool);  /* reads no pool memory */
        return w >= 0 && w < WORKERS;
    }
    return pthread_equal(pthread_self(), tg->thread);
}

/* ------------------------------------------------------------ a timer */

typedef struct tslot {
    srec rec;                /* first: the completion hook finds the slot */
    const target *tg;
    ex_operation *op;
    int connect_code;
    bool free_inside;        /* the completion frees op */
    bool stop_planned;
    int64_t jitter;          /* the stop comes at deadline + jitter */
    int64_t deadline;        /* a lower bound for ex_schedule_after */
    uint32_t started;        /* atomic, release: ex_start returned */
    bool stop_sent;          /* by the stopping thread */
    /* Written by the completion, published by rec.done: */
    int64_t completed_at;
    bool on_resource;
    pthread_t completer;
} tslot;

static void note_completion(srec *r, int disp) {
    (void)disp;
    tslot *s = (tslot *)(void *)r;
    s->completed_at = ex_now();
    s->on_resource = on_resource(s->tg);
    s->completer = pthread_self();
    if (s->free_inside) ex_operation_free(s->op);  /* completed: the receiver may free it at once */
}

static void slot_init(tslot *s, const target *tg) {
    srec_init(&s->rec);
    s->rec.on_complete = note_completion;
    s->tg = tg;
    s->op = NULL;
    s->connect_code = 0;
    s->free_inside = rnd(4) == 0;
    s->stop_planned = rnd(3) == 0;
    s->jitter = (int64_t)rnd(150 * 1000 + 1) - 100 * 1000;  /* -100 .. +50 us */
    s->deadline = 0;
    s->started = 0;
    s->stop_sent = false;
    s->completed_at = 0;
    s->on_resource = false;
}

/* Builds and starts s's timer, `ahead` ns from now. */
static void arm_slot(tslot *s, int64_t ahead) {
    int64_t now = ex_now();
    s->deadline = now + ahead;  /* ex_schedule_after's start reads the clock later: its deadline is no earlier */
    ex_sender *snd = rnd(2) ? ex_schedule_at(s->tg->sch, s->deadline) : ex_schedule_after(s->tg->sch, ahead);
    ex_error e = ex_connect_alloc(snd, srec_receiver(&s->rec), &s->op);
    ex_sender_release(snd);
    s->connect_code = e.code;
    if (!e.code) ex_start(s->op);
    __atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
}

static void free_slot_op(tslot *s) {
    if (!s->free_inside) ex_operation_free(s->op);
    s->op = NULL;
}

/* Outcomes of a part. */
typedef struct counts {
    unsigned timers, values, cancelled, stopped_on_resource, stops_too_late, dropped, refused;
} counts;

/* A stopped completion is allowed where a stop could make it: inside the
 * request (the cancel), or on the resource (fired or started after the
 * request).  Returns whether it was the cancel. */
static bool check_stopped(const tslot *s, pthread_t stopper, int round) {
    bool cancelled = s->stop_sent && pthread_equal(s->completer, stopper);
    CHECK(s->stop_sent && (cancelled || s->on_resource),
          "round %d: %s: set_stopped (stop sent: %d) neither on the stopping thread nor on the resource", round,
          s->tg->name, s->stop_sent);
    checks++;
    return cancelled;
}

static void check_value(const tslot *s, int round) {
    CHECK(s->completed_at >= s->deadline, "round %d: %s: fired %lld ns before its deadline", round, s->tg->name,
          (long long)(s->deadline - s->completed_at));
    CHECK(s->on_resource, "round %d: %s: set_value off the resource", round, s->tg->name);
    checks += 2;
}

/* A timer armed now on tg fires, on tg: its timers still work. */
static bool probe_fires(const target *tg, int round) {
    static tslot p;
    slot_init(&p, tg);
    p.free_inside = false;
    arm_slot(&p, 0);
    CHECK(p.connect_code == 0, "round %d: %s: probe connect %d", round, tg->name, p.connect_code);
    checks++;
    if (p.connect_code) return true;
    if (!srec_wait(&p.rec, "probe timer", round, &checks)) return false;
    srec_expect_once(&p.rec, "probe timer", round, &checks);
    CHECK(p.rec.disp == D_VALUE && p.on_resource, "round %d: %s: the probe completed %d, on the resource: %d", round,
          tg->name, p.rec.disp, p.on_resource);
    checks++;
    free_slot_op(&p);
    return true;
}

/* ------------------------------------- 1, 2. arm, cancel, expire at once */

static tslot slots[MAX_TIMERS];

typedef struct arm_job {
    tslot *slots;
    size_t n, first, stride;
} arm_job;

/* Arms slots first, first + stride, ... */
static void arm_share(void *arg) {
    seed_thread();
    arm_job *j = arg;
    for (size_t i = j->first; i < j->n; i += j->stride) arm_slot(&j->slots[i], rnd(WINDOW_NS + 1));
}

typedef struct cancel_job {
    tslot *slots;
    size_t n;
} cancel_job;

/* Stops the planned slots, each at its deadline + jitter (at once if that
 * passed), in slot order. */
static void cancel_planned(void *arg) {
    seed_thread();
    cancel_job *j = arg;
    for (size_t i = 0; i < j->n; i++) {
        tslot *s = &j->slots[i];
        if (!s->stop_planned || !wait_flag(&s->started)) continue;  /* a hang: main reports the armer */
        int64_t at = s->deadline + s->jitter;
        while (ex_now() < at) {
        }
        ex_stop_source_request_stop(&s->rec.stop);
        s->stop_sent = true;
    }
}

/* Checks a slot of parts 1 and 2; false if it did not complete (it may
 * still run: the part stops). */
static bool check_timer(tslot *s, pthread_t stopper, int round, counts *c) {
    CHECK(s->connect_code == 0, "round %d: %s: connect %d", round, s->tg->name, s->connect_code);
    checks++;
    if (s->connect_code) return true;
    if (!srec_wait(&s->rec, "timer", round, &checks)) return false;
    srec_expect_once(&s->rec, "timer", round, &checks);
    c->timers++;
    if (s->rec.disp == D_VALUE) {
        check_value(s, round);
        c->values++;
        c->stops_too_late += s->stop_sent;
    } else if (s->rec.disp == D_STOPPED) {
        if (check_stopped(s, stopper, round)) c->cancelled++;
        else c->stopped_on_resource++;
    } else {
        CHECK(false, "round %d: %s: completed with disposition %d (error %d)", round, s->tg->name, s->rec.disp,
              s->rec.err.code);
        checks++;
    }
    return true;
}

/* One round; false when the part must stop (a hang). */
static bool timer_round(const target *tg, agent *armers, agent *canceller, int round, counts *c, long *baseline) {
    size_t k = 8 + rnd(MAX_TIMERS - 7);
    unsigned n_armers = 2 + rnd(MAX_ARMERS - 1);
    for (size_t i = 0; i < k; i++) slot_init(&slots[i], tg);
    static arm_job jobs[MAX_ARMERS];
    static cancel_job cj;
    cj = (cancel_job){ slots, k };
    agent_arm(canceller, cancel_planned, &cj, 0);
    for (unsigned a = 0; a < n_armers; a++) {
        jobs[a] = (arm_job){ slots, k, a, n_armers };
        agent_arm(&armers[a], arm_share, &jobs[a], rnd(2000));
    }
    bool ok = true;
    for (unsigned a = 0; a < n_armers; a++) ok &= agent_wait_checked(&armers[a], "armer", round, &checks);
    ok &= agent_wait_checked(canceller, "canceller", round, &checks);
    if (!ok) return false;
    for (size_t i = 0; i < k; i++)
        if (!check_timer(&slots[i], canceller->thread, round, c)) return false;
    for (size_t i = 0; i < k; i++) free_slot_op(&slots[i]);
    if (!probe_fires(tg, round)) return false;
    expect_round_freed(baseline, round, &checks);
    return true;
}

static void timer_part(const target *tg, agent *armers, agent *canceller) {
    counts c = { 0 };
    long baseline = stress_in_use();
    double t0 = now_s();
    int round = 0;
    for (; round < TIMER_ROUNDS && !part_over(round, t0); round++)
        if (!timer_round(tg, armers, canceller, round, &c, &baseline)) break;
    printf("timer_stress: %s: %d rounds in %.2f s (%u timers: %u values, %u cancelled, %u stopped on the resource; "
           "%u stops came after the fire)\n",
           tg->name, round, now_s() - t0, c.timers, c.values, c.cancelled, c.stopped_on_resource, c.stops_too_late);
}

static void run_loop_main(void *arg) {
    ex_error e = ex_run_loop_run(arg);
    CHECK(e.code == 0, "ex_run_loop_run: %d", e.code);
    checks++;
}

static void part_context(agent *armers, agent *canceller) {
    static ex_single_thread_context ctx;
    ex_error e = ex_single_thread_context_init(&ctx);
    CHECK(e.code == 0, "context init: %d", e.code);
    checks++;
    if (e.code) return;
    target tg = { "context", ex_single_thread_context_scheduler(&ctx), NULL, ex_single_thread_context_thread_id(&ctx) };
    timer_part(&tg, armers, canceller);
    e = ex_single_thread_context_destroy(&ctx);
    CHECK(e.code == 0, "context destroy: %d", e.code);
    checks++;
}

static void part_run_loop(agent *armers, agent *canceller, agent *runner) {
    static ex_run_loop loop;
    ex_error e = ex_run_loop_init(&loop);
    CHECK(e.code == 0, "run loop init: %d", e.code);
    checks++;
    if (e.code) return;
    agent_arm(runner, run_loop_main, &loop, 0);
    target tg = { "run loop", ex_run_loop_scheduler(&loop), NULL, runner->thread };
    timer_part(&tg, armers, canceller);
    ex_run_loop_finish(&loop);
    if (!agent_wait_checked(runner, "run loop", 0, &checks)) return;
    e = ex_run_loop_destroy(&loop);  /* EX_EBUSY if a timer were still armed */
    CHECK(e.code == 0, "run loop destroy: %d", e.code);
    checks++;
}

/* The runner waits in ex_sync_wait for an hour's timer on the wait's own
 * loop, which gives the loop's scheduler to the part; the part's end
 * stops it through sync_end. */
static ex_stop_source sync_end;
static ex_scheduler sync_loop;
static uint32_t sync_loop_ready;

/* An item on the loop: it runs once the wait's start returned, so what
 * the wait allocates is allocated before the part's baseline. */
static void loop_ready(ex_work *w) {
    (void)w;
    __atomic_store_n(&sync_loop_ready, 1, __ATOMIC_RELEASE);
}

static ex_sender *publish_loop(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    static ex_work ready = { NULL, loop_ready, NULL };
    sync_loop = in[0].as.sched;
    CHECK(ex_post(sync_loop, &ready).code == 0, "sync_wait's loop: post failed");
    checks++;
    return ex_link_stop_token(ex_schedule_after(sync_loop, 3600 * EX_NS_PER_S), ex_stop_source_token(&sync_end));
}

static void sync_wait_main(void *arg) {
    (void)arg;
    ex_result r = ex_sync_wait(ex_let_value(ex_read_env(&ex_key_get_scheduler, EX_T_SCHED), publish_loop, NULL,
                                            EX_SIG(EX_T_SCHED)));
    CHECK(r.disposition == EX_DISP_STOPPED, "sync_wait's loop: the wait ended with disposition %d", r.disposition);
    checks++;
    ex_result_destroy(&r);
}

static void part_sync_wait(agent *armers, agent *canceller, agent *runner) {
    ex_stop_source_init(&sync_end);
    __atomic_store_n(&sync_loop_ready, 0, __ATOMIC_RELAXED);
    agent_arm(runner, sync_wait_main, NULL, 0);
    if (!wait_flag(&sync_loop_ready)) return;
    target tg = { "sync_wait's loop", sync_loop, NULL, runner->thread };
    timer_part(&tg, armers, canceller);
    ex_stop_source_request_stop(&sync_end);
    (void)agent_wait_checked(runner, "sync_wait's loop", 0, &checks);
}

/* ---------------------------------------------- 3. shutdown racing arms */

enum { SHUT_PER_ARMER = 40, DESTROY_ROUNDS = 3000 };

static tslot shut_slots[MAX_ARMERS][SHUT_PER_ARMER];

typedef struct shut_job {
    tslot *slots;
    ex_scheduler held;   /* the hold to give back at the end (pool), or an invalid handle */
    uint32_t armed;      /* slots started; read after the agent acknowledged */
    uint32_t finished;   /* atomic, release */
} shut_job;

static bool refused(const tslot *s) {
    return !s->connect_code && __atomic_load_n(&s->rec.done, __ATOMIC_ACQUIRE) && s->rec.disp == D_ERROR;
}

/* Arms until a timer is refused (at most SHUT_PER_ARMER). */
static void arm_until_refused(void *arg) {
    seed_thread();
    shut_job *j = arg;
    uint32_t i = 0;
    while (i < SHUT_PER_ARMER) {
        tslot *s = &j->slots[i++];
        arm_slot(s, rnd(4) == 0 ? FAR_NS : rnd(WINDOW_NS + 1));
        if (refused(s)) break;  /* completed in its start */
        spin_delay(rnd(3000));
    }
    j->armed = i;
    ex_scheduler_release(j->held);  /* the last touch of a pool */
    __atomic_store_n(&j->finished, 1, __ATOMIC_RELEASE);
}

typedef struct shut_cancel {
    shut_job *jobs;
    unsigned n;
} shut_cancel;

/* Stops the planned slots as their start returns, until every armer is
 * done. */
static void cancel_while_arming(void *arg) {
    seed_thread();
    shut_cancel *sc = arg;
    for (;;) {
        bool all_done = true;  /* read before the pass: the last pass sees every start */
        for (unsigned a = 0; a < sc->n; a++) all_done &= __atomic_load_n(&sc->jobs[a].finished, __ATOMIC_ACQUIRE) != 0;
        for (unsigned a = 0; a < sc->n; a++) {
            for (uint32_t i = 0; i < SHUT_PER_ARMER; i++) {
                tslot *s = &sc->jobs[a].slots[i];
                if (!__atomic_load_n(&s->started, __ATOMIC_ACQUIRE)) break;
                if (!s->stop_planned || s->stop_sent) continue;
                spin_delay(rnd(1000));
                ex_stop_source_request_stop(&s->rec.stop);
                s->stop_sent = true;
            }
        }
        if (all_done) return;
        sched_yield();
    }
}

/* The thread that completes the timers a shutdown drops. */
typedef struct shut_round {
    const target *tg;
    pthread_t dropper;
    pthread_t canceller;
} shut_round;

static void check_accepted(const tslot *s, const shut_round *sr, int round, counts *c) {
    if (s->rec.disp == D_VALUE) {
        check_value(s, round);
        c->values++;
        return;
    }
    CHECK(s->rec.disp == D_STOPPED, "round %d: %s: accepted timer completed %d (error %d)", round, sr->tg->name,
          s->rec.disp, s->rec.err.code);
    checks++;
    if (s->rec.disp != D_STOPPED) return;
    if (s->stop_sent && pthread_equal(s->completer, sr->canceller)) {
        c->cancelled++;
    } else if (pthread_equal(s->completer, sr->dropper)) {
        c->dropped++;  /* on a context, also a fire that saw the stop */
    } else {
        CHECK(s->stop_sent && s->on_resource, "round %d: %s: set_stopped on an unexpected thread", round, sr->tg->name);
        checks++;
        c->stopped_on_resource++;
    }
}

/* An armer's slots: all accepted but the last, which is refused if the
 * armer stopped early. */
static bool check_armer(shut_job *j, pthread_t armer, const shut_round *sr, int round, counts *c) {
    for (uint32_t i = 0; i < j->armed; i++) {
        tslot *s = &j->slots[i];
        CHECK(s->connect_code == 0, "round %d: %s: connect %d", round, sr->tg->name, s->connect_code);
        checks++;
        if (s->connect_code) continue;
        if (!srec_wait(&s->rec, "timer", round, &checks)) return false;
        srec_expect_once(&s->rec, "timer", round, &checks);
        c->timers++;
        bool last = i + 1 == j->armed;
        if (last && s->rec.disp == D_ERROR) {
            CHECK(s->rec.err.code == EX_ESHUTDOWN && pthread_equal(s->completer, armer),
                  "round %d: %s: refused with %d, in its start: %d", round, sr->tg->name, s->rec.err.code,
                  pthread_equal(s->completer, armer));
            checks++;
            c->refused++;
        } else {
            check_accepted(s, sr, round, c);
        }
    }
    CHECK(j->armed == SHUT_PER_ARMER || refused(&j->slots[j->armed - 1]),
          "round %d: %s: an armer stopped after %u timers without a refusal", round, sr->tg->name, j->armed);
    checks++;
    return true;
}

static ex_single_thread_context shut_ctx;

/* Creates the round's resource; false if that failed. */
static bool shut_target(int round, target *tg) {
    if (round % 2 == 0) {
        ex_pool *p = stress_pool_new(WORKERS, &checks);
        *tg = (target){ "shutdown pool", p ? ex_pool_scheduler(p) : (ex_scheduler){ 0 }, p, pthread_self() };
        return p != NULL;
    }
    ex_error e = ex_single_thread_context_init(&shut_ctx);
    CHECK(e.code == 0, "context init: %d", e.code);
    checks++;
    *tg = (target){ "shutdown context", ex_single_thread_context_scheduler(&shut_ctx), NULL,
                    ex_single_thread_context_thread_id(&shut_ctx) };
    return e.code == 0;
}

static bool shutdown_round(agent *armers, agent *canceller, int round, counts *c, long *baseline) {
    target tg;
    if (!shut_target(round, &tg)) return false;
    unsigned n_armers = 2 + rnd(MAX_ARMERS - 1);
    static shut_job jobs[MAX_ARMERS];
    static shut_cancel sc;
    for (unsigned a = 0; a < n_armers; a++) {
        for (uint32_t i = 0; i < SHUT_PER_ARMER; i++) slot_init(&shut_slots[a][i], &tg);
        /* A pool is held for its armers before destroy can begin. */
        jobs[a] = (shut_job){ shut_slots[a], tg.pool ? ex_scheduler_retain(tg.sch) : (ex_scheduler){ 0 }, 0, 0 };
    }
    sc = (shut_cancel){ jobs, n_armers };
    for (unsigned a = 0; a < n_armers; a++) agent_arm(&armers[a], arm_until_refused, &jobs[a], rnd(2000));
    agent_arm(canceller, cancel_while_arming, &sc, 0);
    spin_delay(rnd(4) * rnd(60000));
    ex_error e = tg.pool ? ex_pool_destroy(tg.pool) : ex_single_thread_context_destroy(&shut_ctx);
    CHECK(e.code == 0, "round %d: %s: destroy %d", round, tg.name, e.code);
    checks++;
    bool ok = true;
    for (unsigned a = 0; a < n_armers; a++) ok &= agent_wait_checked(&armers[a], "armer", round, &checks);
    ok &= agent_wait_checked(canceller, "canceller", round, &checks);
    if (!ok) return false;
    shut_round sr = { &tg, tg.pool ? pthread_self() : tg.thread, canceller->thread };
    for (unsigned a = 0; a < n_armers; a++)
        if (!check_armer(&jobs[a], armers[a].thread, &sr, round, c)) return false;
    for (unsigned a = 0; a < n_armers; a++)
        for (uint32_t i = 0; i < jobs[a].armed; i++) free_slot_op(&shut_slots[a][i]);
    expect_round_freed(baseline, round, &checks);
    return true;
}

/* 3b. A pool destroyed the moment a timer armed from outside, without a
 * hold, completed (regress_stress does this for submissions): the arming
 * thread may still be in its start, which must not touch the pool once
 * the timer could fire. */
static void arm_soon(void *arg) {
    seed_thread();
    arm_slot(arg, rnd(20 * 1000 + 1));
}

static bool destroy_at_fire_round(agent *armer, int round, long *baseline) {
    target tg;
    if (!shut_target(0, &tg)) return false;
    static tslot s;
    slot_init(&s, &tg);
    s.free_inside = s.stop_planned = false;
    agent_arm(armer, arm_soon, &s, 0);
    if (!srec_wait(&s.rec, "timer armed from outside", round, &checks)) return false;
    ex_error e = ex_pool_destroy(tg.pool);  /* the arming thread may not have left ex_start */
    CHECK(e.code == 0, "round %d: destroy %d", round, e.code);
    checks++;
    if (!agent_wait_checked(armer, "armer", round, &checks)) return false;
    srec_expect_once(&s.rec, "timer armed from outside", round, &checks);
    CHECK(s.connect_code == 0 && s.rec.disp == D_VALUE && s.on_resource, "round %d: completed %d, on a worker: %d",
          round, s.rec.disp, s.on_resource);
    checks++;
    free_slot_op(&s);
    expect_round_freed(baseline, round, &checks);
    return true;
}

static void part_shutdown(agent *armers, agent *canceller) {
    counts c = { 0 };
    long baseline = stress_in_use();
    double t0 = now_s();
    int round = 0;
    for (; round < SHUTDOWN_ROUNDS && !part_over(round, t0); round++)
        if (!shutdown_round(armers, canceller, round, &c, &baseline)) break;
    printf("timer_stress: shutdown racing arms: %d rounds in %.2f s (%u timers: %u values, %u dropped by the "
           "shutdown, %u cancelled, %u stopped on the resource, %u refused)\n",
           round, now_s() - t0, c.timers, c.values, c.dropped, c.cancelled, c.stopped_on_resource, c.refused);
}

static void part_destroy_at_fire(agent *armer) {
    long baseline = stress_in_use();
    double t0 = now_s();
    int round = 0;
    for (; round < DESTROY_ROUNDS && !part_over(round, t0); round++)
        if (!destroy_at_fire_round(armer, round, &baseline)) break;
    printf("timer_stress: pool destroyed as its timer fired: %d rounds in %.2f s\n", round, now_s() - t0);
}

/* ---------------------------------------------------- 4. periodic chains */

enum { MAX_CHAINS = 3, MAX_LINKS = 48 };

typedef struct chain chain;

typedef struct chain_link {
    chain *c;
    uint32_t index;
    ex_operation *op;
    int64_t deadline;
    uint32_t calls;          /* atomic */
    int disp;
    int64_t completed_at;
    bool on_resource;
    pthread_t completer;
} chain_link;

struct chain {
    const target *tg;
    ex_stop_source stop;
    ex_env_pair pair;
    chain_link links[MAX_LINKS];
    uint32_t armed;          /* atomic: links connected */
    int connect_code;
    uint32_t ends;           /* atomic */
    uint32_t done;           /* atomic, release */
    int end_disp;
    uint32_t stop_after;     /* links armed before the stop (above MAX_LINKS: after the end) */
    bool stop_sent;          /* by the stopping thread */
};

static chain chains[MAX_CHAINS];

static void arm_link(chain *c, uint32_t i);

static void chain_end(chain *c, int disp) {
    c->end_disp = disp;
    __atomic_fetch_add(&c->ends, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
}

static void link_complete(chain_link *l, int disp) {
    l->completed_at = ex_now();
    l->on_resource = on_resource(l->c->tg);
    l->completer = pthread_self();
    l->disp = disp;
    __atomic_fetch_add(&l->calls, 1, __ATOMIC_RELAXED);
    /* The periodic re-arm, from the completion (on a worker for a value). */
    if (disp == D_VALUE && l->index + 1 < MAX_LINKS) arm_link(l->c, l->index + 1);
    else chain_end(l->c, disp);
}

static void link_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    link_complete(self, D_VALUE);
}
static void link_error(void *self, ex_error e) {
    ex_error_release(e);
    link_complete(self, D_ERROR);
}
static void link_stopped(void *self) { link_complete(self, D_STOPPED); }
static ex_env link_env(void *self) { return ex_env_of_pair(&((chain_link *)self)->c->pair); }
static const ex_receiver_vtable link_vt = { link_value, link_error, link_stopped, link_env, NULL };

static void arm_link(chain *c, uint32_t i) {
    chain_link *l = &c->links[i];
    l->c = c;
    l->index = i;
    l->calls = 0;
    int64_t ahead = rnd(LINK_NS + 1);
    l->deadline = ex_now() + ahead;
    ex_sender *s = rnd(2) ? ex_schedule_at(c->tg->sch, l->deadline) : ex_schedule_after(c->tg->sch, ahead);
    ex_error e = ex_connect_alloc(s, (ex_receiver){ &link_vt, l }, &l->op);
    ex_sender_release(s);
    if (e.code) {
        c->connect_code = e.code;
        chain_end(c, D_ERROR);
        return;
    }
    __atomic_store_n(&c->armed, i + 1, __ATOMIC_RELAXED);
    ex_start(l->op);
}

/* Stops the chain once it armed stop_after links (or at its end, if it
 * has fewer), a moment later. */
static void stop_chain(void *arg) {
    seed_thread();
    chain *c = arg;
    double give_up = now_s() + 20.0;  /* a chain that hangs: main reports it */
    while (__atomic_load_n(&c->armed, __ATOMIC_RELAXED) < c->stop_after && !__atomic_load_n(&c->done, __ATOMIC_ACQUIRE) &&
           now_s() < give_up)
        sched_yield();
    spin_delay(rnd(3000));
    ex_stop_source_request_stop(&c->stop);
    c->stop_sent = true;
}

static void chain_init(chain *c, const target *tg) {
    c->tg = tg;
    ex_stop_source_init(&c->stop);
    ex_env_pair_init(&c->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&c->stop)), ex_env_empty());
    c->armed = 0;
    c->connect_code = 0;
    c->ends = 0;
    c->done = 0;
    c->end_disp = D_NONE;
    c->stop_after = 1 + rnd(MAX_LINKS + MAX_LINKS / 4);  /* a fifth run to their end */
    c->stop_sent = false;
}

typedef struct chain_counts {
    unsigned chains, links, ran_out, cancelled, stopped_on_resource;
} chain_counts;

static void check_link(const chain_link *l, pthread_t stopper, bool last, int round) {
    uint32_t calls = __atomic_load_n(&l->calls, __ATOMIC_RELAXED);
    CHECK(calls == 1, "round %d: link %u completed %u times", round, l->index, calls);
    CHECK(last || l->disp == D_VALUE, "round %d: link %u completed %d but the chain went on", round, l->index, l->disp);
    checks += 2;
    if (l->disp == D_VALUE) {
        CHECK(l->completed_at >= l->deadline, "round %d: link %u fired %lld ns early", round, l->index,
              (long long)(l->deadline - l->completed_at));
        CHECK(l->on_resource, "round %d: link %u: set_value off the pool", round, l->index);
        checks += 2;
    } else if (l->disp == D_STOPPED) {
        CHECK(l->on_resource || pthread_equal(l->completer, stopper),
              "round %d: link %u: set_stopped neither on a worker nor on the stopping thread", round, l->index);
        checks++;
    }
}

static bool check_chain(chain *c, pthread_t stopper, int round, chain_counts *cc) {
    if (!wait_flag(&c->done)) {
        CHECK(false, "round %d: a chain did not end within 20 s", round);
        checks++;
        return false;
    }
    sched_yield();
    uint32_t ends = __atomic_load_n(&c->ends, __ATOMIC_ACQUIRE), n = __atomic_load_n(&c->armed, __ATOMIC_RELAXED);
    CHECK(ends == 1, "round %d: a chain ended %u times", round, ends);
    CHECK(c->connect_code == 0, "round %d: connect %d", round, c->connect_code);
    CHECK(c->end_disp == D_STOPPED ? c->stop_sent : c->end_disp == D_VALUE && n == MAX_LINKS,
          "round %d: a chain ended %d after %u links (stop sent: %d)", round, c->end_disp, n, c->stop_sent);
    checks += 3;
    for (uint32_t i = 0; i < n; i++) check_link(&c->links[i], stopper, i + 1 == n, round);
    cc->chains++;
    cc->links += n;
    if (c->end_disp == D_VALUE) cc->ran_out++;
    else if (n && pthread_equal(c->links[n - 1].completer, stopper)) cc->cancelled++;
    else cc->stopped_on_resource++;
    for (uint32_t i = 0; i < n; i++) ex_operation_free(c->links[i].op);
    return true;
}

static bool chain_round(const target *tg, agent *stoppers, int round, chain_counts *cc, long *baseline) {
    unsigned n = 1 + rnd(MAX_CHAINS);
    for (unsigned i = 0; i < n; i++) chain_init(&chains[i], tg);
    for (unsigned i = 0; i < n; i++) {
        arm_link(&chains[i], 0);  /* first: a stop before its start would complete it here */
        agent_arm(&stoppers[i], stop_chain, &chains[i], 0);
    }
    bool ok = true;
    for (unsigned i = 0; i < n; i++) ok &= agent_wait_checked(&stoppers[i], "chain stopper", round, &checks);
    if (!ok) return false;
    for (unsigned i = 0; i < n; i++)
        if (!check_chain(&chains[i], stoppers[i].thread, round, cc)) return false;
    if (!probe_fires(tg, round)) return false;
    expect_round_freed(baseline, round, &checks);
    return true;
}

static void part_chains(const target *tg, agent *stoppers) {
    chain_counts cc = { 0 };
    long baseline = stress_in_use();
    double t0 = now_s();
    int round = 0;
    for (; round < CHAIN_ROUNDS && !part_over(round, t0); round++)
        if (!chain_round(tg, stoppers, round, &cc, &baseline)) break;
    printf("timer_stress: periodic chains: %d rounds in %.2f s (%u chains, %u links; %u ran out, %u cancelled, %u "
           "stopped on a worker)\n",
           round, now_s() - t0, cc.chains, cc.links, cc.ran_out, cc.cancelled, cc.stopped_on_resource);
}

/* ----------------------------------------------------------------- main */

int main(void) {
    ex_pool *pool = stress_pool_new(WORKERS, &checks);
    if (!pool) return stress_finish("timer_stress", checks);
    static agent armers[MAX_ARMERS], canceller, runner;
    for (int i = 0; i < MAX_ARMERS; i++) agent_start(&armers[i]);
    agent_start(&canceller);
    agent_start(&runner);
    target tp = { "pool", ex_pool_scheduler(pool), pool, pthread_self() };
    timer_part(&tp, armers, &canceller);
    part_context(armers, &canceller);
    part_run_loop(armers, &canceller, &runner);
    part_sync_wait(armers, &canceller, &runner);
    part_shutdown(armers, &canceller);
    part_destroy_at_fire(&armers[0]);
    part_chains(&tp, armers);
    for (int i = 0; i < MAX_ARMERS; i++) agent_stop(&armers[i]);
    agent_stop(&canceller);
    agent_stop(&runner);
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    return stress_finish("timer_stress", checks);
}
