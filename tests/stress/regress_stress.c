/* SPDX-License-Identifier: MIT */
/* regress_stress.c - races the soak test found, kept as regressions under
 * ThreadSanitizer (make test-tsan runs every program here).
 *
 * 1. split: a consumer started on one thread while another consumer's
 *    start begins the shared work; the receiver frees the operations and
 *    the sender as soon as both completed, without waiting for the second
 *    start to return.  split_start used to touch the shared state after
 *    queueing itself (freed by then: a race TSan reports, or a write to
 *    freed memory).
 * 2. senders: two threads retaining and releasing one sender at once (the
 *    reference count used to be read with a plain load).
 * 3. pool destroy right after work submitted from outside completed: the
 *    submitter used to wake a worker after leaving the gate destroy waits
 *    for, so it could read the freed pool (task_stress saw it as a task
 *    resuming its parent on another pool). */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#include <cexec/cexec.h>

#include "stress.h"

enum { SPLIT_ROUNDS = 4000, CHURN_ROUNDS = 50000 };

/* ------------------------------------------------------------- split */

typedef struct rec { uint32_t done, values; } rec;

static void r_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    rec *r = self;
    __atomic_fetch_add(&r->values, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&r->done, 1, __ATOMIC_RELEASE);
}
static void r_error(void *self, ex_error e) {
    (void)e;
    __atomic_fetch_add(&((rec *)self)->done, 1, __ATOMIC_RELEASE);
}
static void r_stopped(void *self) { __atomic_fetch_add(&((rec *)self)->done, 1, __ATOMIC_RELEASE); }
static const ex_receiver_vtable rvt = { r_value, r_error, r_stopped, NULL, NULL };

static ex_operation *op_b;
static uint32_t round_no, quit;

/* Starts consumer B of each round and never tells main that start returned. */
static void *starter(void *arg) {
    (void)arg;
    for (uint32_t seen = 0;;) {
        uint32_t r;
        while ((r = __atomic_load_n(&round_no, __ATOMIC_ACQUIRE)) == seen) {
            if (__atomic_load_n(&quit, __ATOMIC_ACQUIRE)) return NULL;
            sched_yield();
        }
        seen = r;
        ex_start(__atomic_load_n(&op_b, __ATOMIC_ACQUIRE));
    }
}

static void wait_done(const rec *r) {
    while (!__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) sched_yield();
}

static int split_rounds(ex_pool *pool) {
    int checks = 0;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, starter, NULL) == 0, "pthread_create");
    for (uint32_t i = 1; i <= SPLIT_ROUNDS; i++) {
        rec ra = { 0, 0 }, rb = { 0, 0 };
        ex_sender *shared = ex_split(ex_schedule(ex_pool_scheduler(pool)));
        ex_operation *a = NULL, *b = NULL;
        if (ex_connect_alloc(shared, (ex_receiver){ &rvt, &ra }, &a).code ||
            ex_connect_alloc(shared, (ex_receiver){ &rvt, &rb }, &b).code) {
            CHECK(0, "connect failed in round %u", i);
            break;
        }
        __atomic_store_n(&op_b, b, __ATOMIC_RELEASE);
        __atomic_store_n(&round_no, i, __ATOMIC_RELEASE);  /* the starter starts B now */
        ex_start(a);
        wait_done(&ra);
        wait_done(&rb);
        CHECK(ra.done == 1 && rb.done == 1, "round %u: completions %u and %u", i, ra.done, rb.done);
        CHECK(ra.values == 1 && rb.values == 1, "round %u: values %u and %u", i, ra.values, rb.values);
        checks += 2;
        /* Both completed: the operations and the sender may go now. */
        ex_operation_free(a);
        ex_operation_free(b);
        ex_sender_release(shared);
    }
    __atomic_store_n(&quit, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    return checks;
}

/* ----------------------------------------------------------- senders */

static ex_sender *shared_sender;

static void *churn(void *arg) {
    (void)arg;
    for (int i = 0; i < CHURN_ROUNDS; i++) ex_sender_release(ex_sender_retain(shared_sender));
    return NULL;
}

static int sender_churn(void) {
    shared_sender = ex_just(ex_int(7));
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, churn, NULL);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    ex_result r = ex_sync_wait(shared_sender);  /* consumes the last reference */
    CHECK(r.disposition == EX_DISP_VALUE && r.values[0].as.i == 7, "the shared sender still works");
    ex_result_destroy(&r);
    return 1;
}

/* ----------------------------------------------------- destroy race */

enum { DESTROY_ROUNDS = 300 };

typedef struct outside {
    ex_pool *pool;
    uint32_t ran;     /* the item ran: main may destroy the pool */
    uint32_t go;
} outside;

/* The completion: from here on the operation may go and the pool may be
 * destroyed (1: value, 3: error or stopped). */
static void ran_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    __atomic_store_n(&((outside *)self)->ran, 1, __ATOMIC_RELEASE);
}
static void ran_error(void *self, ex_error e) {
    (void)e;
    __atomic_store_n(&((outside *)self)->ran, 3, __ATOMIC_RELEASE);
}
static void ran_stopped(void *self) { __atomic_store_n(&((outside *)self)->ran, 3, __ATOMIC_RELEASE); }
static const ex_receiver_vtable ran_vt = { ran_value, ran_error, ran_stopped, NULL, NULL };

/* Submits from a thread that is no worker of the pool. */
static void *submit_from_outside(void *arg) {
    outside *o = arg;
    while (!__atomic_load_n(&o->go, __ATOMIC_ACQUIRE)) sched_yield();
    ex_operation *op = NULL;
    ex_sender *s = ex_schedule(ex_pool_scheduler(o->pool));
    if (ex_connect_alloc(s, (ex_receiver){ &ran_vt, o }, &op).code) __atomic_store_n(&o->ran, 2, __ATOMIC_RELEASE);
    else ex_start(op);  /* main destroys the pool as soon as the item ran */
    ex_sender_release(s);
    while (__atomic_load_n(&o->ran, __ATOMIC_ACQUIRE) == 0) sched_yield();
    if (op) ex_operation_free(op);
    return NULL;
}

static int destroy_rounds(void) {
    int checks = 0;
    for (int i = 0; i < DESTROY_ROUNDS; i++) {
        outside o = { NULL, 0, 0 };
        ex_pool_config cfg = { .threads = 2 };
        if (ex_pool_create(&cfg, &o.pool).code) {
            CHECK(0, "pool create failed in round %d", i);
            break;
        }
        pthread_t th;
        pthread_create(&th, NULL, submit_from_outside, &o);
        __atomic_store_n(&o.go, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&o.ran, __ATOMIC_ACQUIRE)) sched_yield();
        CHECK(ex_pool_destroy(o.pool).code == 0, "destroy in round %d", i);
        pthread_join(th, NULL);
        CHECK(o.ran == 1, "round %d: the item did not run", i);
        checks += 2;
    }
    return checks;
}

int main(void) {
    ex_pool *pool = NULL;
    ex_pool_config cfg = { .threads = 2 };
    if (ex_pool_create(&cfg, &pool).code) return 2;
    int checks = split_rounds(pool);
    checks += sender_churn();
    checks += destroy_rounds();
    ex_pool_destroy(pool);
    return stress_finish("regress_stress", checks);
}
