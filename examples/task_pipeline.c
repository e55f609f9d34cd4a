/* SPDX-License-Identifier: MIT */
/* task_pipeline.c - a task that
 *   1. moves itself to the process's parallel scheduler, a thread pool
 *      (ex_change_coroutine_scheduler),
 *   2. awaits two child tasks running on the pool at once (ex_await_all:
 *      their when_all, run as a fork),
 *   3. moves back to where it started (sync_wait's thread),
 *   4. then works in rounds on the pool until it is cancelled from outside:
 *      another thread requests stop once the task has done a few rounds,
 *      the next awaited schedule completes stopped, and the whole task
 *      completes stopped.
 * Every step checks where it runs; the program exits 0 only if all held. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include <cexec/cexec.h>

typedef struct shared {
    ex_pool *pool;  /* the parallel scheduler's, to check where code runs */
    ex_stop_source stop;
    atomic_int rounds;
    int failures;
} shared;

static void check(shared *s, bool ok, const char *what) {
    if (!ok) {
        fprintf(stderr, "task_pipeline: FAILED: %s\n", what);
        s->failures++;
    }
}

/* A child: sums [from, to) in pieces, each piece after a hop to the pool's
 * queue (ex_schedule), and checks it always runs on a worker. */
typedef struct range { shared *s; int64_t from, to; } range;

static ex_task_result partial_sum(ex_task *t, void *arg) {
    range *r = arg;
    int64_t sum = 0;
    for (int64_t i = r->from; i < r->to; i++) {
        if (i % 1000 == 0 && ex_await(t, ex_schedule(ex_pool_scheduler(r->s->pool))).status != EX_AWAIT_VALUE)
            return ex_task_void();  /* stopped: the task completes stopped */
        sum += i;
    }
    check(r->s, ex_pool_current_worker(r->s->pool) >= 0, "a child task resumed off the pool");
    return ex_task_i64(sum);
}

static ex_task_result pipeline(ex_task *t, void *arg) {
    shared *s = arg;
    ex_scheduler pool = ex_pool_scheduler(s->pool);

    ex_scheduler home = ex_change_coroutine_scheduler(t, pool);                 /* 1 */
    check(s, ex_pool_current_worker(s->pool) >= 0, "not on the pool after change_coroutine_scheduler");

    range lo = { s, 0, 500000 }, hi = { s, 500000, 1000000 };                    /* 2 */
    ex_await_result both = ex_await_all(t, ex_task_create(partial_sum, &lo, NULL),
                                        ex_task_create(partial_sum, &hi, NULL));
    if (both.status != EX_AWAIT_VALUE) return ex_task_with_error(both.error);
    int64_t total = both.v[0].as.i + both.v[1].as.i;
    check(s, total == (int64_t)999999 * 1000000 / 2, "wrong sum from the child tasks");
    printf("task_pipeline: children summed 0..999999 = %lld on the pool\n", (long long)total);

    ex_change_coroutine_scheduler(t, home);                                      /* 3 */
    check(s, ex_pool_current_worker(s->pool) < 0, "still on the pool after changing back");

    for (;;) {                                                                   /* 4 */
        ex_await_result r = ex_await(t, ex_schedule(pool));
        if (r.status == EX_AWAIT_STOPPED) {
            printf("task_pipeline: cancelled after %d rounds\n", atomic_load(&s->rounds));
            return ex_task_void();  /* ignored: the task completes stopped */
        }
        check(s, ex_pool_current_worker(s->pool) < 0, "a round resumed off the task's scheduler");
        atomic_fetch_add(&s->rounds, 1);
    }
}

static void *canceller(void *arg) {
    shared *s = arg;
    while (atomic_load(&s->rounds) < 100) sched_yield();
    ex_stop_source_request_stop(&s->stop);
    return NULL;
}

int main(void) {
    shared s = { .failures = 0 };
    atomic_init(&s.rounds, 0);
    ex_stop_source_init(&s.stop);
    ex_scheduler par = ex_parallel_scheduler();
    s.pool = ex_parallel_scheduler_pool();
    if (!s.pool) {
        ex_result failed = ex_sync_wait(ex_schedule(par));  /* the reason it has no pool */
        fprintf(stderr, "task_pipeline: %s\n", failed.disposition == EX_DISP_ERROR ? failed.error.msg : "no pool");
        ex_result_destroy(&failed);
        return 1;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, canceller, &s)) return 1;
    ex_sender *task = ex_task_create(pipeline, &s, NULL);
    ex_result r = ex_sync_wait(ex_write_env(task, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&s.stop))));
    pthread_join(th, NULL);
    check(&s, r.disposition == EX_DISP_STOPPED, "the task did not complete stopped");
    if (r.disposition == EX_DISP_ERROR) fprintf(stderr, "task_pipeline: error: %s\n", r.error.msg);
    ex_result_destroy(&r);
    if (s.failures) return 1;
    printf("task_pipeline: ok\n");
    return 0;
}
