/* stress_util.h - what the composition stress programs share: a counting
 * allocator (library allocations must return to where they started), a
 * per-thread xorshift, short busy waits, bounded flag waits, and "agents":
 * threads that run an armed action after a delay.  Internal to tests/stress. */
#ifndef CEXEC_STRESS_UTIL_H
#define CEXEC_STRESS_UTIL_H

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include <cexec/cexec.h>

/* ------------------------------------------------ counting allocator */

static long alloc_in_use __attribute__((unused));

static inline void *c_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    __atomic_fetch_add(&alloc_in_use, 1, __ATOMIC_RELAXED);
    return p;
}

static inline void c_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)size, (void)align;
    free(p);
    __atomic_fetch_sub(&alloc_in_use, 1, __ATOMIC_RELAXED);
}

static ex_allocator counting_alloc __attribute__((unused)) = { c_allocate, c_deallocate, NULL, "counting", NULL };

/* ------------------------------------------------------------ helpers */

static _Thread_local uint64_t rng_state __attribute__((unused)) = 0x9e3779b97f4a7c15ull;  /* per thread */
static inline uint32_t rnd(uint32_t n) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* A short busy wait (no yield: on a loaded machine a yield can cost a
 * whole time slice, which would turn "a few microseconds" into "never"). */
static inline void spin_delay(uint32_t n) {
    for (volatile uint32_t i = 0; i < n; i++) { }
}

static inline double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Waits for *flag != 0; gives up (returns false) after 20 s. */
static inline bool wait_flag(const uint32_t *flag) {
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

/* A thread that, each time it is armed, waits `delay` and runs fn(arg).
 * Idle agents sleep on a condition variable (they must not eat the CPU the
 * pool needs); the hand-over is the ordinary one a program would use. */
typedef struct agent {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t seq, ack, quit;  /* guarded by mu */
    void (*fn)(void *arg);
    void *arg;
    uint32_t delay;
} agent;

static inline void *agent_main(void *p) {
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

static inline void agent_start(agent *a) {
    pthread_mutex_init(&a->mu, NULL);
    pthread_cond_init(&a->cv, NULL);
    pthread_create(&a->thread, NULL, agent_main, a);
}

static inline void agent_arm(agent *a, void (*fn)(void *), void *arg, uint32_t delay) {
    pthread_mutex_lock(&a->mu);
    a->fn = fn;
    a->arg = arg;
    a->delay = delay;
    a->seq++;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* Waits until the last armed action ran; false after 20 s. */
static inline bool agent_wait(agent *a) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 20;
    bool ok = true;
    pthread_mutex_lock(&a->mu);
    while (ok && a->ack != a->seq) ok = pthread_cond_timedwait(&a->cv, &a->mu, &deadline) == 0 || a->ack == a->seq;
    pthread_mutex_unlock(&a->mu);
    return ok;
}

static inline void agent_stop(agent *a) {
    pthread_mutex_lock(&a->mu);
    a->quit = 1;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->thread, NULL);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
}

#endif
