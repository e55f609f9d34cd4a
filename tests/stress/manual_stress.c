/* SPDX-License-Identifier: MIT */
/* manual_stress.c - the manual scheduler (cexec/manual_scheduler.h) fed
 * from several threads while the test thread runs it, under
 * ThreadSanitizer.
 *
 * 1. Three submitters post items, start schedule operations and timers
 *    (due at once or a few microseconds away) and request stop on a third
 *    of the operations right after starting them, racing the runner.  The
 *    main thread runs the scheduler with every run function; a rival
 *    thread keeps calling ex_manual_run too.  Checks: every unit completes
 *    exactly once (items run, operations complete with a value, or stopped
 *    only when their stop was requested), no two items ever run at the
 *    same time, the rival is refused (EX_EBUSY) or runs whole items, and
 *    destroy finds nothing left.
 * 2. Shutdown racing the submitters, who submit until they are refused:
 *    every accepted unit runs or is cancelled (stopped) exactly once,
 *    every refused one is refused with EX_ESHUTDOWN and never runs. */
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <string.h>

#include <cexec/cexec.h>
#include "base/exi_macros.h"
#include "stress.h"
#include "stress_util.h"

enum { SUBMITTERS = 3, UNITS = 200, RUN_ROUNDS = 60, SHUTDOWN_ROUNDS = 120 };
enum kind { POST, SCHEDULE, TIMER_DUE, TIMER_SOON, KINDS };

typedef struct unit {
    ex_work work;                 /* a posted item */
    ex_stop_source stop;          /* an operation's receiver's stop token */
    ex_env_pair env;
    alignas(max_align_t) unsigned char storage[192];
    ex_operation *op;
    enum kind kind;
    bool started, refused, stop_requested;
    uint32_t runs, cancels, values, stops, errors, shutdown_errors;  /* atomic */
} unit;

typedef struct submitter {
    pthread_t thread;
    ex_manual_scheduler *m;
    ex_sender *senders[KINDS];    /* [POST] unused */
    unit units[UNITS];
    bool until_refused;           /* part 2: stop at the first refusal */
} submitter;

static submitter subs[SUBMITTERS];
static uint32_t inside;           /* items and value completions running now (atomic) */
static uint32_t overlaps;         /* times two of them ran at once (atomic) */
static uint32_t completions;      /* of the round (atomic) */
static uint32_t submitters_done;  /* atomic */
static uint32_t submitted;        /* units submitted in the round (atomic) */

/* Entering an item: a short stay inside widens the window in which a
 * second runner would be caught. */
static void enter(void) {
    if (__atomic_fetch_add(&inside, 1, __ATOMIC_ACQ_REL) != 0) __atomic_fetch_add(&overlaps, 1, __ATOMIC_RELAXED);
    spin_delay(rnd(64));
}
static void leave(void) { __atomic_fetch_sub(&inside, 1, __ATOMIC_ACQ_REL); }
static void count(uint32_t *c) {
    __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&completions, 1, __ATOMIC_RELEASE);
}

static void item_execute(ex_work *w) {
    enter();
    count(&EXI_CONTAINER_OF(w, unit, work)->runs);
    leave();
}
static void item_cancel(ex_work *w) { count(&EXI_CONTAINER_OF(w, unit, work)->cancels); }

static void on_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    enter();
    count(&((unit *)self)->values);
    leave();
}
static void on_error(void *self, ex_error e) {
    unit *u = self;
    if (e.code == EX_ESHUTDOWN) count(&u->shutdown_errors);
    else count(&u->errors);
    ex_error_release(e);
}
static void on_stopped(void *self) { count(&((unit *)self)->stops); }
static ex_env on_env(void *self) { return ex_env_of_pair(&((unit *)self)->env); }
static const ex_receiver_vtable unit_rvt = { on_value, on_error, on_stopped, on_env, NULL };

/* Submits u; false if the scheduler refused it. */
static bool submit(submitter *s, unit *u) {
    memset(u, 0, sizeof *u);
    u->kind = (enum kind)rnd(KINDS);
    u->started = true;
    if (u->kind == POST) {
        u->work.execute = item_execute;
        u->work.cancel = item_cancel;
        u->refused = ex_post(ex_manual_scheduler_get(s->m), &u->work).code == EX_ESHUTDOWN;
        return !u->refused;
    }
    ex_stop_source_init(&u->stop);
    ex_env_pair_init(&u->env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&u->stop)), ex_env_empty());
    ex_receiver r = { &unit_rvt, u };
    if (ex_connect(s->senders[u->kind], r, u->storage, sizeof u->storage, &u->op).code) abort();
    ex_start(u->op);
    if (__atomic_load_n(&u->shutdown_errors, __ATOMIC_RELAXED)) {
        u->refused = true;  /* refused inside the start */
        return false;
    }
    if (rnd(3) == 0) {
        u->stop_requested = true;
        (void)ex_stop_source_request_stop(&u->stop);
    }
    return true;
}

static void *submit_all(void *arg) {
    submitter *s = arg;
    rng_state = (uint64_t)(uintptr_t)arg * 2654435761u + 1;
    for (uint32_t i = 0; i < UNITS; i++) {
        bool accepted = submit(s, &s->units[i]);
        __atomic_fetch_add(&submitted, 1, __ATOMIC_RELAXED);
        if (!accepted && s->until_refused) break;
        if (rnd(8) == 0) sched_yield();
    }
    __atomic_fetch_add(&submitters_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void submitters_start(ex_manual_scheduler *m, bool until_refused) {
    ex_scheduler sch = ex_manual_scheduler_get(m);
    __atomic_store_n(&submitters_done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&completions, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&submitted, 0, __ATOMIC_RELAXED);
    for (int i = 0; i < SUBMITTERS; i++) {
        submitter *s = &subs[i];
        memset(s->units, 0, sizeof s->units);
        s->m = m;
        s->until_refused = until_refused;
        s->senders[POST] = NULL;
        s->senders[SCHEDULE] = ex_schedule(sch);
        s->senders[TIMER_DUE] = ex_schedule_after(sch, 0);
        s->senders[TIMER_SOON] = ex_schedule_after(sch, rnd(30) * EX_NS_PER_US);
        pthread_create(&s->thread, NULL, submit_all, s);
    }
}

static void submitters_join(void) {
    for (int i = 0; i < SUBMITTERS; i++) pthread_join(subs[i].thread, NULL);
}

/* Failed checks of one unit (shut_down: a shutdown may have stopped it);
 * destroys its operation. */
static int settle(unit *u, bool shut_down) {
    if (!u->started) return 0;
    uint32_t runs = u->runs, cancels = u->cancels, values = u->values, stops = u->stops;
    uint32_t refusals = u->shutdown_errors;
    int bad = u->errors != 0;
    if (u->refused) {
        bad += runs + cancels + values + stops != 0;                 /* refused work never runs */
        bad += u->kind != POST && refusals != 1;
    } else {
        bad += runs + cancels + values + stops + refusals != 1;      /* exactly once */
        bad += refusals != 0;
        bad += !shut_down && (cancels || (stops && !u->stop_requested));
    }
    if (u->op) ex_operation_destroy(u->op);
    return bad;
}

static int settle_all(bool shut_down) {
    int bad = 0;
    for (int i = 0; i < SUBMITTERS; i++) {
        for (uint32_t k = 0; k < UNITS; k++) bad += settle(&subs[i].units[k], shut_down);
        for (int k = 0; k < KINDS; k++)
            if (subs[i].senders[k]) ex_sender_release(subs[i].senders[k]);
    }
    return bad;
}

/* Units started (accepted or not) and accepted, over the submitters. */
static uint32_t accepted_units(void) {
    uint32_t n = 0;
    for (int i = 0; i < SUBMITTERS; i++)
        for (uint32_t k = 0; k < UNITS; k++) n += subs[i].units[k].started && !subs[i].units[k].refused;
    return n;
}

/* ------------------------------------------------ 1. runners and submitters */

typedef struct rival {
    ex_manual_scheduler *m;
    uint32_t quit;      /* atomic */
    uint32_t busy, ran; /* refusals, items run */
} rival;

static void *rival_main(void *arg) {
    rival *rv = arg;
    while (!__atomic_load_n(&rv->quit, __ATOMIC_ACQUIRE)) {
        size_t n = 0;
        ex_error e = ex_manual_run(rv->m, 1 + rnd(3), &n);
        if (e.code == EX_EBUSY) rv->busy++;
        rv->ran += (uint32_t)n;
        (void)ex_manual_pending(rv->m);
        spin_delay(rnd(200));
    }
    return NULL;
}

/* One turn of the main runner with a random run function. */
static void run_some(ex_manual_scheduler *m) {
    switch (rnd(4)) {
    case 0: (void)ex_manual_run_one(m); break;
    case 1: (void)ex_manual_run_pending(m); break;
    case 2: (void)ex_manual_run_until_idle(m); break;
    default: (void)ex_manual_run(m, 1 + rnd(8), NULL); break;
    }
}

static int run_round(uint32_t round, uint32_t *units_total, uint32_t *rival_busy, uint32_t *rival_ran) {
    ex_manual_scheduler m;
    if (ex_manual_scheduler_init(&m).code) return 1;
    rival rv = { .m = &m };
    pthread_t rt;
    bool with_rival = round % 2 == 0;
    if (with_rival) pthread_create(&rt, NULL, rival_main, &rv);
    submitters_start(&m, false);
    double limit = now_s() + 20;
    int bad = 0;
    /* Until the submitters are done and every accepted unit completed. */
    uint32_t want = UINT32_MAX;  /* known once the submitters are done */
    for (;;) {
        run_some(&m);
        if (want == UINT32_MAX && __atomic_load_n(&submitters_done, __ATOMIC_ACQUIRE) == SUBMITTERS)
            want = accepted_units();
        uint32_t got = __atomic_load_n(&completions, __ATOMIC_ACQUIRE);
        if (got == want) break;
        if (now_s() > limit) {
            fprintf(stderr, "run round %u: timed out (%u completions, %u wanted)\n", round, got, want);
            bad++;
            break;
        }
        if (rnd(4) == 0) sched_yield();
    }
    submitters_join();
    if (with_rival) {
        __atomic_store_n(&rv.quit, 1, __ATOMIC_RELEASE);
        pthread_join(rt, NULL);
        *rival_busy += rv.busy;
        *rival_ran += rv.ran;
    }
    *units_total += accepted_units();
    if (ex_manual_pending(&m) || ex_manual_timers_armed(&m)) bad++;
    bad += settle_all(false);
    if (ex_manual_scheduler_destroy(&m).code) bad++;
    return bad;
}

static int run_rounds(void) {
    int bad = 0;
    uint32_t units = 0, busy = 0, rival_ran = 0;
    long baseline = stress_in_use();
    for (uint32_t r = 0; r < RUN_ROUNDS && !bad; r++) {  /* the first failure ends the part */
        bad = run_round(r, &units, &busy, &rival_ran);
        if (bad) fprintf(stderr, "run round %u: %d failed checks\n", r, bad);
    }
    CHECK(bad == 0, "runners and submitters: %d failed checks in a round", bad);
    CHECK(__atomic_load_n(&overlaps, __ATOMIC_RELAXED) == 0, "%u times two items ran at once", overlaps);
    CHECK(stress_in_use() == baseline, "%ld blocks leaked", stress_in_use() - baseline);
    printf("manual_stress: %u units run exactly once over %d rounds; the rival runner ran %u items and was refused "
           "%u times\n", units, RUN_ROUNDS, rival_ran, busy);
    return 3;
}

/* ------------------------------------------------- 2. shutdown vs submitters */

static int shutdown_round(uint32_t *accepted, uint32_t *refused_subs) {
    ex_manual_scheduler m;
    if (ex_manual_scheduler_init(&m).code) return 1;
    submitters_start(&m, true);
    /* Shut down while the submitters are in full swing (or done). */
    uint32_t when = rnd(SUBMITTERS * UNITS / 2);
    while (__atomic_load_n(&submitted, __ATOMIC_RELAXED) < when &&
           __atomic_load_n(&submitters_done, __ATOMIC_RELAXED) < SUBMITTERS)
        run_some(&m);
    int bad = ex_manual_scheduler_shutdown(&m).code != 0;
    submitters_join();
    if (ex_manual_run_until_idle(&m) != 0) bad++;  /* nothing accepted after the shutdown */
    /* A TIMER_SOON accepted before the shutdown was stopped by it. */
    *accepted += accepted_units();
    for (int i = 0; i < SUBMITTERS; i++)
        for (uint32_t k = 0; k < UNITS; k++)
            if (subs[i].units[k].refused) {
                (*refused_subs)++;
                break;
            }
    bad += settle_all(true);
    if (ex_manual_scheduler_destroy(&m).code) bad++;
    return bad;
}

static int shutdown_rounds(void) {
    int bad = 0;
    uint32_t accepted = 0, refused = 0;
    long baseline = stress_in_use();
    for (uint32_t r = 0; r < SHUTDOWN_ROUNDS && !bad; r++) {
        bad = shutdown_round(&accepted, &refused);
        if (bad) fprintf(stderr, "shutdown round %u: %d failed checks\n", r, bad);
    }
    CHECK(bad == 0, "shutdown racing submitters: %d failed checks in a round", bad);
    CHECK(stress_in_use() == baseline, "%ld blocks leaked", stress_in_use() - baseline);
    printf("manual_stress: %u units accepted around %d shutdowns; %u of %d submitters refused\n", accepted,
           SHUTDOWN_ROUNDS, refused, SHUTDOWN_ROUNDS * SUBMITTERS);
    return 2;
}

int main(void) {
    ex_set_default_allocator(&counting_alloc);
    int checks = 0;
    double t0 = now_s();
    checks += run_rounds();
    checks += shutdown_rounds();
    printf("manual_stress: %.1f s\n", now_s() - t0);
    return stress_finish("manual_stress", checks);
}
