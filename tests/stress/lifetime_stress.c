/* SPDX-License-Identifier: MIT */
/* lifetime_stress.c - pools destroyed while their tasks are away (issue 17,
 * items 1 and 2): each round launches tasks on a fresh pool that move to a
 * single-thread context and back, await work there and return tuples,
 * while another thread destroys the pool at a random moment.  Every task
 * completes exactly once with a checked result, and ex_pool_destroy
 * returns only after every task that held the pool has completed. */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <string.h>

#include <cexec/cexec.h>
#include "stress.h"

enum { ROUNDS = 400, TASKS = 50 };

typedef struct round_state {
    ex_pool *pool;
    ex_scheduler pool_sched, other;
    uint32_t completed;          /* completions delivered (atomic) */
    uint32_t values, refused;    /* results by kind (atomic) */
    uint32_t bad;                /* wrong results (atomic) */
    uint32_t per_task[TASKS];    /* completions of each task (atomic) */
} round_state;

static round_state S;

typedef struct task_arg { uint32_t index; uint32_t steps; } task_arg;
static task_arg args[TASKS];

static void spin_a_little(uint32_t seed) {
    for (uint32_t i = 0; i < (seed % 64) * 50; i++) __asm__ volatile("" ::: "memory");
}

static ex_task_result body(ex_task *t, void *arg) {
    task_arg *a = arg;
    ex_scheduler prev = ex_change_coroutine_scheduler(t, S.other);
    spin_a_little(a->index * 7 + a->steps);
    if (a->steps & 1) (void)ex_task_yield(t);
    /* Back to the pool: refused once its destroy has begun, and safe
     * either way (the task still holds it). */
    (void)ex_change_coroutine_scheduler(t, prev);
    ex_await_result r = ex_await(t, ex_schedule(S.other));
    spin_a_little(a->index * 13 + a->steps);
    r = ex_await(t, ex_into_variant(ex_just(ex_int(a->index), ex_int(2))));
    if (r.status != EX_AWAIT_VALUE) return ex_task_with_error(ex_err(EX_EINVAL, "tuple await failed"));
    return ex_task_values(r.n, r.v);
}

static void on_value(void *ctx, const ex_value *v, size_t n) {
    task_arg *a = ctx;
    bool ok = n == 1 && v[0].type == EX_T_TUPLE && v[0].as.tuple->n == 2 &&
              v[0].as.tuple->v[0].as.i == (int64_t)a->index && v[0].as.tuple->v[1].as.i == 2;
    if (!ok) __atomic_fetch_add(&S.bad, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&S.values, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&S.per_task[a->index], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&S.completed, 1, __ATOMIC_RELEASE);
}

static void on_error(void *ctx, ex_error e) {
    task_arg *a = ctx;
    if (e.code != EX_ESHUTDOWN) __atomic_fetch_add(&S.bad, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&S.refused, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&S.per_task[a->index], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&S.completed, 1, __ATOMIC_RELEASE);
}

static void on_stopped(void *ctx) {
    task_arg *a = ctx;
    /* A task whose start was cancelled by the shutdown. */
    __atomic_fetch_add(&S.refused, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&S.per_task[a->index], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&S.completed, 1, __ATOMIC_RELEASE);
}

static uint32_t completed_at_return;

static void *destroyer(void *arg) {
    uint32_t delay_us = (uint32_t)(uintptr_t)arg;
    struct timespec d = { 0, (long)delay_us * 1000 };
    nanosleep(&d, NULL);
    ex_error e = ex_pool_destroy(S.pool);
    CHECK(e.code == 0, "ex_pool_destroy: %d", e.code);
    __atomic_store_n(&completed_at_return, __atomic_load_n(&S.completed, __ATOMIC_ACQUIRE), __ATOMIC_RELAXED);
    return NULL;
}

int main(void) {
    int checks = 0;
    uint64_t total_values = 0, total_refused = 0;
    ex_single_thread_context ctx;
    if (ex_single_thread_context_init(&ctx).code) return 1;
    uint64_t rng = 0x2545f4914f6cdd1dull;
    for (int round = 0; round < ROUNDS; round++) {
        memset(&S, 0, sizeof S);
        ex_pool_config c = { 0 };
        c.threads = 2;
        if (ex_pool_create(&c, &S.pool).code) return 1;
        S.pool_sched = ex_pool_scheduler(S.pool);
        S.other = ex_single_thread_context_scheduler(&ctx);
        ex_simple_counting_scope scope;
        if (ex_simple_counting_scope_init(&scope).code) return 1;
        ex_task_handlers h[TASKS];
        uint32_t launched = 0;
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        /* Held while launching: destroy may begin at any time, but cannot
         * free the pool under a launch. */
        ex_scheduler_retain(S.pool_sched);
        pthread_t th;
        pthread_create(&th, NULL, destroyer, (void *)(uintptr_t)(rng % 400));
        for (uint32_t i = 0; i < TASKS; i++) {
            args[i] = (task_arg){ i, (uint32_t)(rng >> (i % 32)) };
            h[i] = (ex_task_handlers){ on_value, on_error, on_stopped, &args[i] };
            ex_error e = ex_task_launch(ex_simple_counting_scope_token(&scope), S.pool_sched,
                                        ex_task_create(body, &args[i], NULL), &h[i]);
            if (e.code == 0) launched++;
            else __atomic_fetch_add(&S.per_task[i], 1, __ATOMIC_RELAXED);  /* refused outright: counts as its one outcome */
        }
        ex_scheduler_release(S.pool_sched);
        ex_result jr = ex_sync_wait(ex_simple_counting_scope_join(&scope));
        CHECK(jr.disposition == EX_DISP_VALUE, "scope join: %d", (int)jr.disposition);
        ex_result_destroy(&jr);
        pthread_join(th, NULL);
        ex_simple_counting_scope_destroy(&scope);
        uint32_t done = __atomic_load_n(&S.completed, __ATOMIC_ACQUIRE);
        CHECK(done == launched, "round %d: %u of %u launched tasks completed", round, done, launched);
        checks++;
        for (uint32_t i = 0; i < TASKS; i++) {
            CHECK(S.per_task[i] == 1, "round %d: task %u had %u outcomes", round, i, S.per_task[i]);
            checks++;
        }
        total_values += S.values;
        total_refused += S.refused;
        CHECK(S.bad == 0, "round %d: %u wrong results", round, S.bad);
        checks++;
        /* Every task launched before destroy began held the pool; those
         * launched after were refused.  Destroy returned after all the
         * completions of the tasks it waited for: completed at return
         * equals completed in the end unless a launch was refused. */
        uint32_t at_return = __atomic_load_n(&completed_at_return, __ATOMIC_RELAXED);
        CHECK(at_return == done, "round %d: ex_pool_destroy returned with %u of %u completions delivered", round,
              at_return, done);
        checks++;
    }
    ex_single_thread_context_destroy(&ctx);
    printf("lifetime_stress: %d rounds, %llu tasks completed with values, %llu refused by the pool's shutdown\n", ROUNDS,
           (unsigned long long)total_values, (unsigned long long)total_refused);
    return stress_finish("lifetime_stress", checks);
}
