/* SPDX-License-Identifier: MIT */
/* task_stress.c - tasks migrating between the workers of two pools.
 *
 * Two pools of 2 workers.  Each round starts TASKS tasks (on pool 0); each
 * task runs STEPS steps, and each step is one of, at random (per-task
 * random stream):
 *   - ex_change_coroutine_scheduler to the other pool (and checks it runs
 *     there afterwards, and that it got the previous scheduler back),
 *   - an await of ex_schedule on either pool (affinity: back on its own),
 *   - an await of when_all(child task, child task, schedule on the other
 *     pool); each child hops between the pools itself, checks where it
 *     runs and returns a value that depends on its id,
 *   - a burst of inline awaits (ex_just, then).
 * Meanwhile the main thread requests stop on random tasks at random
 * moments.  The task bodies and their stack data are plain (non-atomic)
 * memory written on whatever worker the task runs on: only the library's
 * hand-overs order those accesses, which is what ThreadSanitizer checks.
 *
 * Checks, per task: it completed exactly once; with its value if no stop
 * was requested; stopped only if one was; its steps ran exactly once each
 * and in order (a stopped task: a prefix of them); its stack-local words
 * survived every suspension and migration; after every await it ran on a
 * worker of the pool it belongs to (and not of the other); children
 * completed at most once, exactly once when their when_all gave values,
 * with the right values; every allocation made through the default
 * allocator was returned.  Bounded: rounds run for about 5 seconds. */
#include <string.h>

#include "stress_util.h"

enum { POOLS = 2, WORKERS = 2, TASKS = 24, STEPS = 40, WORDS = 24, CHILD_STEPS = 4, MAX_ROUNDS = 400 };
#define BUDGET_S 5.0

static ex_pool *pools[POOLS];
static ex_scheduler scheds[POOLS];

/* ------------------------------------------------------------ task state */

typedef struct child {
    int id;
    int pool;            /* the pool it starts on (its parent's) */
    uint32_t runs[CHILD_STEPS];
    uint32_t finished;   /* the body returned (plain: ordered by the library) */
    uint32_t bad;
} child;

typedef struct tstate {
    int id;
    uint64_t rng;
    /* written by the body, wherever it runs */
    uint32_t step_runs[STEPS];
    uint32_t next_step;
    uint32_t bad_order, bad_where, bad_local, bad_child, bad_await, bad_prev;
    uint32_t saw_stop;
    uint32_t changes, hops, whenalls;
    /* written by main */
    uint32_t stop_requested;
    srec out;               /* the receiver: completion, stop source, environment, operation */
} tstate;

static tstate tasks[TASKS];

static uint32_t trnd(uint64_t *s, uint32_t n) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (uint32_t)(*s % n);
}

static uint64_t word(int id, int i) { return UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(id * WORDS + i + 1); }

/* Where the calling thread is: the pool it belongs to, -1 if none. */
static int where(void) {
    for (int p = 0; p < POOLS; p++)
        if (ex_pool_current_worker(pools[p]) >= 0) return p;
    return -1;
}

/* ------------------------------------------------------------ the bodies */

static ex_task_result child_body(ex_task *t, void *arg) {
    child *c = arg;
    volatile uint64_t mine[4];
    for (int i = 0; i < 4; i++) mine[i] = word(1000 + c->id, i);
    int cur = c->pool;
    if (where() != cur) c->bad++;
    for (int k = 0; k < CHILD_STEPS; k++) {
        c->runs[k]++;
        ex_await_result r;
        if (k == 1) {
            /* A yield: resumed behind the queued work, on the same pool
             * (another worker may steal the resumption). */
            ex_error e = ex_task_yield(t);
            if (e.code == EX_ECANCELED) break;
            if (e.code) c->bad++;
        } else if (k == 2) {
            ex_scheduler prev = ex_change_coroutine_scheduler(t, scheds[1 - cur]);
            if (!ex_scheduler_equal(prev, scheds[cur])) c->bad++;
            if (ex_task_is_stopped(t)) break;
            cur = 1 - cur;
        } else {
            r = ex_await(t, ex_schedule(scheds[(c->id + k) % POOLS]));
            if (r.status == EX_AWAIT_STOPPED) break;
            if (r.status != EX_AWAIT_VALUE) c->bad++;
        }
        if (where() != cur) c->bad++;
        for (int i = 0; i < 4; i++)
            if (mine[i] != word(1000 + c->id, i)) c->bad++;
    }
    c->finished++;
    return ex_task_i64(c->id * 7);
}

static ex_error ret_seven(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(7);
    return ex_ok();
}

static ex_error plus_one(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

static const ex_sig sig_int = { 1, { EX_T_INT } };

static ex_task_result task_body(ex_task *t, void *arg) {
    tstate *s = arg;
    volatile uint64_t local[WORDS];
    for (int i = 0; i < WORDS; i++) local[i] = word(s->id, i);
    int cur = 0;
    if (where() != cur) s->bad_where++;
    for (int step = 0; step < STEPS; step++) {
        if (s->next_step != (uint32_t)step) s->bad_order++;
        s->step_runs[step]++;
        s->next_step = (uint32_t)step + 1;
        ex_await_result r;
        switch (trnd(&s->rng, 4)) {
        case 0: {
            ex_scheduler prev = ex_change_coroutine_scheduler(t, scheds[1 - cur]);
            if (!ex_scheduler_equal(prev, scheds[cur])) s->bad_prev++;
            if (ex_task_is_stopped(t)) goto stopped;
            cur = 1 - cur;
            s->changes++;
            break;
        }
        case 1:
            r = ex_await(t, ex_schedule(scheds[trnd(&s->rng, POOLS)]));
            if (r.status == EX_AWAIT_STOPPED) goto stopped;
            if (r.status != EX_AWAIT_VALUE) s->bad_await++;
            s->hops++;
            break;
        case 2: {
            child a, b;  /* on this task's stack, alive while awaited */
            memset(&a, 0, sizeof a);
            memset(&b, 0, sizeof b);
            a.id = s->id * 100 + step * 2;
            b.id = a.id + 1;
            a.pool = b.pool = cur;
            ex_task_options o;
            memset(&o, 0, sizeof o);
            o.value_sig = &sig_int;
            r = ex_await(t, ex_when_all(ex_task_create(child_body, &a, &o), ex_task_create(child_body, &b, &o),
                                        ex_then(ex_schedule(scheds[1 - cur]), ret_seven, NULL, EX_SIG0, EX_SIG(EX_T_INT))));
            if (a.finished > 1 || b.finished > 1 || a.bad || b.bad) s->bad_child++;
            for (int k = 0; k < CHILD_STEPS; k++)
                if (a.runs[k] > 1 || b.runs[k] > 1) s->bad_child++;
            if (r.status == EX_AWAIT_STOPPED) goto stopped;
            if (r.status != EX_AWAIT_VALUE || r.n != 3) {
                s->bad_await++;
                break;
            }
            if (a.finished != 1 || b.finished != 1) s->bad_child++;
            if (r.v[0].as.i != a.id * 7 || r.v[1].as.i != b.id * 7 || r.v[2].as.i != 7) s->bad_child++;
            s->whenalls++;
            break;
        }
        default:
            for (int k = 0; k < 8; k++) {
                r = ex_await(t, ex_then(ex_just(ex_int(k)), plus_one, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)));
                if (r.status != EX_AWAIT_VALUE || r.v[0].as.i != k + 1) s->bad_await++;
            }
            break;
        }
        if (where() != cur) s->bad_where++;
        for (int i = 0; i < WORDS; i++)
            if (local[i] != word(s->id, i)) s->bad_local++;
    }
    return ex_task_i64((int64_t)s->id * 1000 + STEPS);
stopped:
    s->saw_stop++;
    for (int i = 0; i < WORDS; i++)
        if (local[i] != word(s->id, i)) s->bad_local++;
    return ex_task_i64(-1);  /* ignored: the task completes stopped */
}

/* -------------------------------------------------------------------- main */

int main(void) {
    int checks = 0;
    ex_set_default_allocator(&counting_alloc);
    long baseline = stress_in_use();  /* the pools' blocks count: they are destroyed before the check */
    for (int p = 0; p < POOLS; p++) {
        pools[p] = stress_pool_new(WORKERS, &checks);
        if (!pools[p]) return stress_finish("task_stress", checks);
        scheds[p] = ex_pool_scheduler(pools[p]);
    }

    unsigned long n_value = 0, n_stopped = 0, n_changes = 0, n_hops = 0, n_whenalls = 0, n_steps = 0;
    int rounds = 0;
    double t0 = now_s();
    uint64_t seed = 0x243f6a8885a308d3ull;
    for (; rounds < MAX_ROUNDS && now_s() - t0 < BUDGET_S; rounds++) {
        uint32_t stop_pct = trnd(&seed, 4) == 0 ? 0 : trnd(&seed, 60);  /* some rounds without stops */
        for (int i = 0; i < TASKS; i++) {
            tstate *s = &tasks[i];
            memset(s, 0, sizeof *s);
            s->id = rounds * TASKS + i;
            s->rng = seed ^ (UINT64_C(0x9e3779b97f4a7c15) * (uint64_t)(s->id + 1));
            if (!s->rng) s->rng = 1;
            srec_init(&s->out);  /* its environment: the stop token and pool 0 as scheduler */
            s->out.pair.key2 = &ex_key_get_scheduler;
            s->out.pair.value2 = ex_sched_value(scheds[0]);
            ex_sender *snd = ex_task_create(task_body, s, NULL);
            ex_error e = ex_connect_alloc(snd, srec_receiver(&s->out), &s->out.op);
            ex_sender_release(snd);
            CHECK(e.code == 0, "round %d task %d: connect: %s", rounds, i, e.msg ? e.msg : "");
            checks++;
            if (e.code) {
                s->out.op = NULL;
                s->out.done = 1;
                s->out.disp = D_NONE;
                continue;
            }
        }
        for (int i = 0; i < TASKS; i++)
            if (tasks[i].out.op) ex_start(tasks[i].out.op);
        /* Random stop requests while the tasks run. */
        for (int i = 0; i < TASKS; i++) {
            uint32_t k = trnd(&seed, TASKS);
            if (trnd(&seed, 100) < stop_pct) {
                spin_delay(trnd(&seed, 20000));
                __atomic_store_n(&tasks[k].stop_requested, 1, __ATOMIC_RELAXED);
                ex_stop_source_request_stop(&tasks[k].out.stop);
            }
        }
        for (int i = 0; i < TASKS; i++) {
            tstate *s = &tasks[i];
            if (!srec_wait(&s->out, "a task", rounds, &checks))
                return stress_finish("task_stress", checks);  /* its memory may still be in use */
        }
        for (int i = 0; i < TASKS; i++) {
            tstate *s = &tasks[i];
            if (!s->out.op) continue;
            srec_expect_once(&s->out, "a task", rounds, &checks);
            CHECK(s->out.disp == D_VALUE || s->out.disp == D_STOPPED, "round %d task %d: disposition %d (%s)", rounds, i,
                  s->out.disp, s->out.disp == D_ERROR && s->out.err.msg ? s->out.err.msg : "");
            bool requested = __atomic_load_n(&s->stop_requested, __ATOMIC_RELAXED);
            if (s->out.disp == D_VALUE) {
                n_value++;
                CHECK(srec_int(&s->out) == (int64_t)s->id * 1000 + STEPS, "round %d task %d: value %lld", rounds, i,
                      (long long)srec_int(&s->out));
                CHECK(s->saw_stop == 0, "round %d task %d: completed with a value after a stopped await", rounds, i);
                CHECK(s->next_step == STEPS, "round %d task %d: %u of %d steps", rounds, i, s->next_step, STEPS);
                checks += 3;
            } else if (s->out.disp == D_STOPPED) {
                n_stopped++;
                CHECK(requested, "round %d task %d: completed stopped without a stop request", rounds, i);
                CHECK(s->saw_stop == 1, "round %d task %d: completed stopped, body saw %u stopped awaits", rounds, i, s->saw_stop);
                checks += 2;
            }
            /* each step exactly once, in order: a prefix of the steps */
            for (int k = 0; k < STEPS; k++) {
                uint32_t want = (uint32_t)k < s->next_step ? 1 : 0;
                CHECK(s->step_runs[k] == want, "round %d task %d: step %d ran %u times (next %u)", rounds, i, k,
                      s->step_runs[k], s->next_step);
            }
            checks += STEPS;
            CHECK(s->bad_order == 0, "round %d task %d: %u steps out of order", rounds, i, s->bad_order);
            CHECK(s->bad_where == 0, "round %d task %d: %u resumptions off the task's pool", rounds, i, s->bad_where);
            CHECK(s->bad_local == 0, "round %d task %d: stack data changed %u times", rounds, i, s->bad_local);
            CHECK(s->bad_child == 0, "round %d task %d: %u child task faults", rounds, i, s->bad_child);
            CHECK(s->bad_await == 0, "round %d task %d: %u bad await results", rounds, i, s->bad_await);
            CHECK(s->bad_prev == 0, "round %d task %d: %u wrong previous schedulers", rounds, i, s->bad_prev);
            checks += 7;
            n_changes += s->changes;
            n_hops += s->hops;
            n_whenalls += s->whenalls;
            n_steps += s->next_step;
            ex_operation_free(s->out.op);
            s->out.op = NULL;
        }
    }
    for (int p = 0; p < POOLS; p++) stress_pool_free(pools[p], &checks);
    long leaked = stress_in_use() - baseline;
    CHECK(leaked == 0, "%ld allocation(s) not returned", leaked);
    CHECK(n_changes > 0 && n_whenalls > 0 && n_hops > 0, "the mix never ran some action");
    CHECK(n_value > 0, "no task completed with a value");
    checks += 3;
    ex_set_default_allocator(NULL);
    printf("task_stress: %d rounds in %.1f s: %lu tasks with values, %lu stopped, %lu steps, %lu scheduler changes, "
           "%lu hops, %lu when_alls of child tasks\n",
           rounds, now_s() - t0, n_value, n_stopped, n_steps, n_changes, n_hops, n_whenalls);
    return stress_finish("task_stress", checks);
}
