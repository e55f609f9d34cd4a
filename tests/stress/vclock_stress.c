/* SPDX-License-Identifier: MIT */
/* vclock_stress.c - a virtual clock (cexec/virtual_clock.h) advanced by
 * one thread while two others arm timers on a pool and on a run loop that
 * share the clock and a third stops some of them, under ThreadSanitizer.
 *
 * Per round: 8-32 timers, each on the pool or on the loop (run by a
 * thread of the program), at a virtual deadline 0-1000 us after the
 * clock's time when armed (ex_schedule_at or ex_schedule_after); a third
 * of them stopped at a random moment; the main thread advances the clock
 * in random steps of 0-300 us meanwhile, then past the last deadline.
 * Each timer completes exactly once: set_value with the clock at or past
 * its deadline, on the resource's thread (a worker, or the loop's);
 * set_stopped only if stopped.  Nothing of the round stays allocated.
 * At the end the loop and the pool leave the clock and it is destroyed.
 * Runs its rounds, cut short after about 2 s once it ran MIN_ROUNDS. */
#include <pthread.h>
#include <string.h>

#include "stress_util.h"

enum { WORKERS = 2, MAX_TIMERS = 32, ROUNDS = 4000, MIN_ROUNDS = 12, ARMERS = 2 };
enum { WINDOW_NS = 1000 * 1000, STEP_NS = 300 * 1000 };
#define SECONDS 2.0

static int checks;
static ex_clock *vclock;
static ex_pool *pool;
static ex_run_loop loop;
static pthread_t loop_thread;

typedef struct vslot {
    srec rec;           /* first: the completion hook finds the slot */
    bool on_loop;
    bool stop_planned;
    int64_t deadline;   /* virtual; a lower bound for ex_schedule_after */
    uint32_t started;   /* atomic, release */
    bool stop_sent;
    int64_t clock_at_completion;
    bool on_resource;
} vslot;

static vslot slots[MAX_TIMERS];

static void note_completion(srec *r, int disp) {
    (void)disp;
    vslot *s = (vslot *)(void *)r;
    s->clock_at_completion = ex_clock_now(vclock);
    s->on_resource = s->on_loop ? pthread_equal(pthread_self(), loop_thread)
                                : (ex_pool_current_worker(pool) >= 0 && ex_pool_current_worker(pool) < WORKERS);
}

static void arm_slot(vslot *s) {
    ex_scheduler sch = s->on_loop ? ex_run_loop_scheduler(&loop) : ex_pool_scheduler(pool);
    int64_t ahead = (int64_t)rnd(WINDOW_NS + 1);
    s->deadline = ex_clock_now(vclock) + ahead;  /* ex_schedule_after reads the clock later: no earlier */
    ex_sender *snd = rnd(2) ? ex_schedule_at(sch, s->deadline) : ex_schedule_after(sch, ahead);
    int counted = 0;  /* not `checks`: this runs on an armer (a failure is still reported) */
    s->rec.op = srec_connect(&s->rec, snd, 0, &counted);
    if (s->rec.op) ex_start(s->rec.op);
    __atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
}

typedef struct arm_job {
    size_t n, first;
} arm_job;

static void arm_share(void *arg) {
    arm_job *j = arg;
    for (size_t i = j->first; i < j->n; i += ARMERS) arm_slot(&slots[i]);
}

static void stop_planned(void *arg) {
    size_t n = *(size_t *)arg;
    for (size_t i = 0; i < n; i++) {
        if (!slots[i].stop_planned || !wait_flag(&slots[i].started)) continue;
        spin_delay(rnd(2000));
        ex_stop_source_request_stop(&slots[i].rec.stop);
        slots[i].stop_sent = true;
    }
}

static void loop_main(void *arg) {
    (void)arg;
    CHECK(ex_run_loop_run(&loop).code == 0, "ex_run_loop_run failed");
    checks++;
}

static bool check_slot(vslot *s, int round) {
    if (!s->rec.op) return true;
    if (!srec_wait(&s->rec, "timer", round, &checks)) return false;
    srec_expect_once(&s->rec, "timer", round, &checks);
    if (s->rec.disp == D_VALUE) {
        CHECK(s->clock_at_completion >= s->deadline, "round %d: fired at %lld, before its deadline %lld", round,
              (long long)s->clock_at_completion, (long long)s->deadline);
        CHECK(s->on_resource, "round %d: a timer on the %s completed elsewhere", round, s->on_loop ? "loop" : "pool");
        checks += 2;
    } else {
        CHECK(s->rec.disp == D_STOPPED && s->stop_sent, "round %d: completed with %d, stop sent %d", round, s->rec.disp,
              s->stop_sent);
        checks++;
    }
    return true;
}

static bool round_run(agent *armers, agent *stopper, int round, long *baseline) {
    size_t n = 8 + rnd(MAX_TIMERS - 7);
    for (size_t i = 0; i < n; i++) {
        vslot *s = &slots[i];
        memset(s, 0, sizeof *s);
        srec_init(&s->rec);
        s->rec.on_complete = note_completion;
        s->on_loop = rnd(2);
        s->stop_planned = rnd(3) == 0;
    }
    static arm_job jobs[ARMERS];
    static size_t count;
    count = n;
    agent_arm(stopper, stop_planned, &count, 0);
    for (unsigned a = 0; a < ARMERS; a++) {
        jobs[a] = (arm_job){ n, a };
        agent_arm(&armers[a], arm_share, &jobs[a], rnd(1000));
    }
    for (int step = 0; step < 8; step++) {
        CHECK(ex_virtual_clock_advance(vclock, (int64_t)rnd(STEP_NS + 1), NULL).code == 0, "advance failed");
        checks++;
        spin_delay(rnd(500));
    }
    bool ok = true;
    for (unsigned a = 0; a < ARMERS; a++) ok &= agent_wait_checked(&armers[a], "armer", round, &checks);
    ok &= agent_wait_checked(stopper, "stopper", round, &checks);
    if (!ok) return false;
    /* Past every deadline: what was not stopped fires. */
    CHECK(ex_virtual_clock_advance(vclock, WINDOW_NS + 1, NULL).code == 0, "advance failed");
    checks++;
    for (size_t i = 0; i < n; i++)
        if (!check_slot(&slots[i], round)) return false;
    CHECK(ex_virtual_clock_armed(vclock) == 0, "round %d: %zu timers still armed", round, ex_virtual_clock_armed(vclock));
    checks++;
    for (size_t i = 0; i < n; i++)
        if (slots[i].rec.op) ex_operation_free(slots[i].rec.op);
    expect_round_freed(baseline, round, &checks);
    return true;
}

int main(void) {
    pool = NULL;
    ex_set_default_allocator(&counting_alloc);
    CHECK(ex_virtual_clock_create(0, &vclock).code == 0, "clock create failed");
    checks++;
    ex_pool_config cfg = { .threads = WORKERS, .name_prefix = "vclock", .clock = vclock };
    CHECK(ex_pool_create(&cfg, &pool).code == 0, "pool create failed");
    checks++;
    CHECK(ex_run_loop_init_clock(&loop, vclock).code == 0, "loop init failed");
    checks++;
    static agent armers[ARMERS], stopper, runner;
    for (int i = 0; i < ARMERS; i++) agent_start(&armers[i]);
    agent_start(&stopper);
    agent_start(&runner);
    loop_thread = runner.thread;
    agent_arm(&runner, loop_main, NULL, 0);
    long baseline = stress_in_use();
    double t0 = now_s();
    int round = 0;
    for (; round < ROUNDS && !(round >= MIN_ROUNDS && now_s() - t0 > SECONDS); round++)
        if (!round_run(armers, &stopper, round, &baseline)) break;
    printf("vclock_stress: %d rounds in %.2f s\n", round, now_s() - t0);
    ex_run_loop_finish(&loop);
    (void)agent_wait_checked(&runner, "loop", 0, &checks);
    CHECK(ex_virtual_clock_destroy(vclock).code == EX_EBUSY, "the clock was destroyed under its resources");
    CHECK(ex_run_loop_destroy(&loop).code == 0, "loop destroy failed");
    stress_pool_free(pool, &checks);
    CHECK(ex_virtual_clock_destroy(vclock).code == 0, "clock destroy failed");
    checks += 3;
    for (int i = 0; i < ARMERS; i++) agent_stop(&armers[i]);
    agent_stop(&stopper);
    agent_stop(&runner);
    ex_set_default_allocator(NULL);
    return stress_finish("vclock_stress", checks);
}
