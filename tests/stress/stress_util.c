/* SPDX-License-Identifier: MIT */
/* stress_util.c - see stress_util.h and stress.h. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stress_util.h"

/* ------------------------------------------------------------- harness */

int stress_failures;

int stress_finish(const char *name, int checks) {
    printf("%s: %d passed, %d failed\n", name, checks - stress_failures, stress_failures);
    return stress_failures ? 1 : 0;
}

/* ------------------------------------------------ counting allocator */

long alloc_in_use;

static void *c_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    __atomic_fetch_add(&alloc_in_use, 1, __ATOMIC_RELAXED);
    return p;
}

static void c_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)size, (void)align;
    free(p);
    __atomic_fetch_sub(&alloc_in_use, 1, __ATOMIC_RELAXED);
}

ex_allocator counting_alloc = { c_allocate, c_deallocate, NULL, "counting", NULL };

long stress_in_use(void) { return __atomic_load_n(&alloc_in_use, __ATOMIC_RELAXED); }

/* ------------------------------------------------------------ helpers */

_Thread_local uint64_t rng_state = 0x9e3779b97f4a7c15ull;

uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

void spin_delay(uint32_t n) {
    for (volatile uint32_t i = 0; i < n; i++) { }
}

double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

bool wait_flag(const uint32_t *flag) {
    double deadline = now_s() + 20.0;
    for (unsigned spins = 0; !__atomic_load_n(flag, __ATOMIC_ACQUIRE); spins++) {
        if (spins < 100) {
            sched_yield();
        } else {
            struct timespec d = { 0, 20000 };
            nanosleep(&d, NULL);
            if ((spins & 255) == 0 && now_s() > deadline) return false;
        }
    }
    return true;
}

/* --------------------------------------------------------------- agents */

static void *agent_main(void *p) {
    agent *a = p;
    uint32_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&a->mu);
        while (a->seq == seen && !a->quit) pthread_cond_wait(&a->cv, &a->mu);
        if (a->seq == seen) {
            pthread_mutex_unlock(&a->mu);
            return NULL;
        }
        seen = a->seq;
        void (*fn)(void *) = a->fn;
        void *arg = a->arg;
        uint32_t delay = a->delay;
        pthread_mutex_unlock(&a->mu);
        spin_delay(delay);
        fn(arg);
        pthread_mutex_lock(&a->mu);
        a->ack = seen;
        pthread_cond_broadcast(&a->cv);
        pthread_mutex_unlock(&a->mu);
    }
}

void agent_start(agent *a) {
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    pthread_create(&a->thread, NULL, agent_main, a);
}

void agent_arm(agent *a, void (*fn)(void *), void *arg, uint32_t delay) {
    pthread_mutex_lock(&a->mu);
    a->fn = fn;
    a->arg = arg;
    a->delay = delay;
    a->seq++;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

bool agent_wait(agent *a) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 20;
    bool ok = true;
    pthread_mutex_lock(&a->mu);
    while (ok && a->ack != a->seq) ok = pthread_cond_timedwait(&a->cv, &a->mu, &deadline) == 0 || a->ack == a->seq;
    pthread_mutex_unlock(&a->mu);
    return ok;
}

void agent_stop(agent *a) {
    pthread_mutex_lock(&a->mu);
    a->quit = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
}

/* ---------------------------------------------------- the stress receiver */

void srec_complete(srec *r, int disp) {
    if (r->on_complete) r->on_complete(r, disp);
    r->disp = disp;
    if (r->pool) r->worker = ex_pool_current_worker(r->pool);
    __atomic_fetch_add(&r->calls, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
}

static void srec_value(void *self, const ex_value *v, size_t n) {
    srec *r = self;
    r->n = n;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) r->v[i] = v[i];
    srec_complete(r, D_VALUE);
}

void srec_keep_error(srec *r, ex_error e) {
    r->err = e;
    if (!ex_error_is_owned(e)) return;
    snprintf(r->err_text, sizeof r->err_text, "%s", e.msg);
    r->err.msg = r->err_text;
    r->err.data = NULL;
    r->err.box = NULL;
    ex_error_release(e);
}

static void srec_error(void *self, ex_error e) {
    srec *r = self;
    srec_keep_error(r, e);
    srec_complete(r, D_ERROR);
}

static void srec_stopped(void *self) { srec_complete(self, D_STOPPED); }

static ex_env srec_env(void *self) {
    srec *r = self;
    return r->has_env ? ex_env_of_pair(&r->pair) : ex_env_empty();
}

static const ex_receiver_vtable srec_vt = { srec_value, srec_error, srec_stopped, srec_env, NULL };

void srec_init_plain(srec *r) {
    memset(r, 0, sizeof *r);
    r->worker = -2;
}

void srec_init(srec *r) {
    srec_init_plain(r);
    ex_stop_source_init(&r->stop);
    ex_env_pair_init(&r->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&r->stop)), ex_env_empty());
    r->has_env = true;
}

ex_receiver srec_receiver(srec *r) {
    ex_receiver x = { &srec_vt, r };
    return x;
}

ex_operation *srec_connect(srec *r, ex_sender *s, int round, int *checks) {
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, srec_receiver(r), &op);
    ex_sender_release(s);
    CHECK(e.code == 0, "round %d: connect: %s", round, e.msg ? e.msg : "");
    (*checks)++;
    return e.code ? NULL : op;
}

int64_t srec_int(const srec *r) { return r->n == 1 && r->v[0].type == EX_T_INT ? r->v[0].as.i : -2; }

/* ------------------------------------------------- checks of a round */

ex_pool *stress_pool_new(unsigned threads, int *checks) {
    ex_set_default_allocator(&counting_alloc);
    ex_pool *pool = NULL;
    ex_pool_config cfg = { .threads = threads };
    ex_error e = ex_pool_create(&cfg, &pool);
    CHECK(e.code == 0, "create: %s", e.msg ? e.msg : "");
    (*checks)++;
    return e.code ? NULL : pool;
}

void stress_pool_free(ex_pool *p, int *checks) {
    ex_error e = ex_pool_destroy(p);
    CHECK(e.code == 0, "destroy: %d (%s)", e.code, e.msg ? e.msg : "");
    (*checks)++;
}

bool srec_wait(srec *r, const char *what, int round, int *checks) {
    bool completed = wait_flag(&r->done);
    CHECK(completed, "round %d: %s did not complete within 20 s", round, what);
    (*checks)++;
    return completed;
}

void srec_expect_once(srec *r, const char *what, int round, int *checks) {
    sched_yield();
    uint32_t calls = __atomic_load_n(&r->calls, __ATOMIC_ACQUIRE);
    CHECK(calls == 1, "round %d: %s completed %u times", round, what, calls);
    (*checks)++;
}

bool agent_wait_checked(agent *a, const char *what, int round, int *checks) {
    bool acked = agent_wait(a);
    CHECK(acked, "round %d: %s hung", round, what);
    (*checks)++;
    return acked;
}

void expect_round_freed(long *baseline, int round, int *checks) {
    long in_use = stress_in_use();
    CHECK(in_use == *baseline, "round %d: %ld block(s) not freed", round, in_use - *baseline);
    (*checks)++;
    *baseline = in_use;
}
