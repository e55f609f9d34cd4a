/* SPDX-License-Identifier: MIT */
/* poll_stress.c - pool pollers (cexec/poller.h) activated, polled and
 * removed from several threads at once, under ThreadSanitizer.
 *
 * 1. No lost activation, each token once: 3 threads each hand over
 *    tokens (a counter, then ex_pool_poller_activate) to a poller of a
 *    2-worker pool whose poll takes every token handed over so far and
 *    says idle when there was none.  Some activators wait in ex_sync_wait
 *    meanwhile (lent callers poll too), some pause so the workers park.
 *    Every token is taken exactly once, and none is left once the
 *    activators stop: an activation racing an idle poll kept the poller
 *    active.  Polls of one poller never overlap.
 * 2. Remove racing polls: a poller kept active by its own polls is
 *    removed from another thread while workers poll it; after remove
 *    returns no poll runs, and the room is reused by the next round.
 * Each part runs its rounds, cut short after PART_SECONDS once it ran
 * MIN_ROUNDS; the rounds done are printed. */
#include <pthread.h>
#include <sched.h>

#include <cexec/poller.h>

#include "stress_util.h"

enum { ACTIVATORS = 3, TOKENS = 4000, ROUNDS = 200, MIN_ROUNDS = 4 };
#define PART_SECONDS 1.5

static int checks;

typedef struct tokens {
    ex_pool *pool;
    ex_pool_poller *q;
    uint64_t handed;   /* tokens handed over, not yet taken */
    uint64_t taken;    /* tokens taken by polls */
    uint32_t inside;   /* a poll runs */
    uint32_t overlaps;
    uint32_t after_remove;  /* polls that began after remove returned */
    uint32_t removed;
} tokens;

static ex_poll_result take_tokens(void *ctx) {
    tokens *t = ctx;
    if (__atomic_exchange_n(&t->inside, 1, __ATOMIC_ACQ_REL)) __atomic_add_fetch(&t->overlaps, 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&t->removed, __ATOMIC_ACQUIRE)) __atomic_add_fetch(&t->after_remove, 1, __ATOMIC_RELAXED);
    uint64_t n = __atomic_exchange_n(&t->handed, 0, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&t->taken, n, __ATOMIC_RELAXED);
    __atomic_store_n(&t->inside, 0, __ATOMIC_RELEASE);
    return n ? EX_POLL_PROGRESS : EX_POLL_IDLE;
}

static void hand_one(tokens *t) {
    __atomic_add_fetch(&t->handed, 1, __ATOMIC_ACQ_REL);
    ex_pool_poller_activate(t->q);
}

typedef struct activator {
    tokens *t;
    int index;
} activator;

static void *activate_loop(void *arg) {
    activator *a = arg;
    for (int i = 0; i < TOKENS / ACTIVATORS; i++) {
        hand_one(a->t);
        if (a->index == 0 && i % 64 == 0) {
            /* A lent caller: the activation inside its wait is polled by it. */
            ex_result r = ex_sync_wait(ex_schedule(ex_pool_scheduler(a->t->pool)));
            ex_result_destroy(&r);
        }
        if (a->index == 1 && i % 128 == 0) {
            struct timespec ts = { 0, 200000 };  /* the workers park meanwhile */
            nanosleep(&ts, NULL);
        }
        if (rnd(8) == 0) spin_delay(rnd(200));
    }
    return NULL;
}

static bool all_taken(tokens *t, uint64_t total) {
    for (int i = 0; i < 20000; i++) {
        if (__atomic_load_n(&t->taken, __ATOMIC_ACQUIRE) == total) return true;
        struct timespec ts = { 0, 100000 };
        nanosleep(&ts, NULL);
    }
    return false;
}

static void part_tokens(ex_pool *pool) {
    double t0 = now_s();
    int round = 0;
    for (; round < ROUNDS && !(round >= MIN_ROUNDS && now_s() - t0 > PART_SECONDS); round++) {
        tokens t = { .pool = pool };
        CHECK(ex_pool_poller_add(pool, take_tokens, &t, &t.q).code == EX_OK, "add");
        pthread_t th[ACTIVATORS];
        activator a[ACTIVATORS];
        for (int i = 0; i < ACTIVATORS; i++) {
            a[i] = (activator){ &t, i };
            pthread_create(&th[i], NULL, activate_loop, &a[i]);
        }
        for (int i = 0; i < ACTIVATORS; i++) pthread_join(th[i], NULL);
        uint64_t total = (uint64_t)(TOKENS / ACTIVATORS) * ACTIVATORS;
        CHECK(all_taken(&t, total), "round %d: %llu of %llu tokens taken: an activation was lost", round,
              (unsigned long long)t.taken, (unsigned long long)total);
        CHECK(ex_pool_poller_remove(t.q).code == EX_OK, "remove");
        CHECK(t.taken == total && t.handed == 0, "round %d: taken %llu, left %llu", round, (unsigned long long)t.taken,
              (unsigned long long)t.handed);
        CHECK(t.overlaps == 0, "round %d: %u overlapping polls", round, t.overlaps);
        checks += 4;
    }
    printf("poll_stress: tokens: %d rounds\n", round);
}

/* Part 2: always pending, so the workers keep polling it. */
static ex_poll_result busy_poll(void *ctx) {
    tokens *t = ctx;
    (void)take_tokens(ctx);
    return __atomic_load_n(&t->removed, __ATOMIC_ACQUIRE) ? EX_POLL_PENDING : EX_POLL_PROGRESS;
}

static void part_remove(ex_pool *pool) {
    double t0 = now_s();
    int round = 0;
    for (; round < ROUNDS && !(round >= MIN_ROUNDS && now_s() - t0 > PART_SECONDS); round++) {
        tokens t = { .pool = pool };
        CHECK(ex_pool_poller_add(pool, busy_poll, &t, &t.q).code == EX_OK, "round %d: add (room not freed?)", round);
        ex_pool_poller_activate(t.q);
        spin_delay(rnd(20000));
        CHECK(ex_pool_poller_remove(t.q).code == EX_OK, "remove");
        __atomic_store_n(&t.removed, 1, __ATOMIC_RELEASE);
        spin_delay(rnd(20000));
        CHECK(__atomic_load_n(&t.after_remove, __ATOMIC_ACQUIRE) == 0, "round %d: polled after remove returned", round);
        CHECK(t.overlaps == 0, "round %d: overlapping polls", round);
        checks += 4;
    }
    printf("poll_stress: remove: %d rounds\n", round);
}

int main(void) {
    ex_pool_config cfg = { 0 };
    cfg.threads = 2;
    ex_pool *pool = NULL;
    if (ex_pool_create(&cfg, &pool).code) return 1;
    part_tokens(pool);
    part_remove(pool);
    CHECK(ex_pool_destroy(pool).code == EX_OK, "destroy");
    return stress_finish("poll_stress", checks + 1);
}
