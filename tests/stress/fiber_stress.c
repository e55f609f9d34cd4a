/* SPDX-License-Identifier: MIT */
/* fiber_stress.c - fibers that ping-pong and migrate between threads.
 *
 * Work is a pair of fibers (A, B) on guarded stacks.  A worker thread takes
 * a pair from a shared queue and switches to A; A runs a step, switches
 * straight to B, which runs its step and switches back to A, which yields
 * to the worker; the worker puts the pair back on the queue, so its next
 * step may run on any thread.  Pairs are created by whichever worker
 * finishes one (stacks freed on one thread are reused on another).
 * Two rounds, each with fresh threads.
 * Checks: every step of every fiber runs exactly once, each fiber's stack
 * data survives every switch and migration, fibers did migrate, and the
 * stack allocator's counts balance and stay bounded.  Under TSan the fiber
 * annotations let it follow each fiber across threads. */
#include <pthread.h>
#include <string.h>

#include <cexec/cexec.h>

#include "task/exi_fiber.h"
#include "task/exi_stack.h"
#include "stress.h"

enum { ROUNDS = 2, THREADS = 4, LIVE = 24, TOTAL = 160, STEPS = 200, WORDS = 32, STACK = 64 * 1024 };

typedef struct worker {
    exi_fiber self;
    unsigned index;
} worker;

typedef struct pair pair;

typedef struct frec {
    exi_fiber f;
    void *stack;
    pair *pr;
    unsigned id;
    unsigned threads;       /* bit per worker it ran on */
    unsigned bad_stack;     /* steps that found their stack data changed */
    uint8_t hits[STEPS];
} frec;

struct pair {
    frec a, b;
    pair *next;             /* queue link */
    bool done;
};

static pair pairs[TOTAL];

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pair *head, *tail;
    unsigned created, finished;
} q = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0, 0 };

static void push(pair *p) {
    pthread_mutex_lock(&q.mu);
    p->next = NULL;
    if (q.tail) q.tail->next = p;
    else q.head = p;
    q.tail = p;
    pthread_cond_signal(&q.cv);
    pthread_mutex_unlock(&q.mu);
}

/* The next runnable pair; NULL once every pair has finished. */
static pair *pop(void) {
    pthread_mutex_lock(&q.mu);
    while (!q.head && q.finished < TOTAL) pthread_cond_wait(&q.cv, &q.mu);
    pair *p = q.head;
    if (p) {
        q.head = p->next;
        if (!q.head) q.tail = NULL;
    }
    pthread_mutex_unlock(&q.mu);
    return p;
}

static uint64_t word(unsigned id, unsigned i, unsigned step) {
    uint64_t x = (uint64_t)id << 40 ^ (uint64_t)i << 20 ^ step;
    x *= 0x9e3779b97f4a7c15ull;
    return x ^ x >> 29;
}

/* One step of fiber r: its stack data must be what the last step wrote. */
static void step(frec *r, uint64_t *mine, unsigned s, const worker *w) {
    for (unsigned i = 0; i < WORDS; i++) {
        if (mine[i] != word(r->id, i, s)) r->bad_stack++;
        mine[i] = word(r->id, i, s + 1);
    }
    r->hits[s]++;
    r->threads |= 1u << w->index;
}

/* A and B of a pair take turns: A runs step s and switches to B, B runs
 * its step s and switches back; then A goes back to its worker, which
 * queues the pair again.  B's last switch is final; A's, after the pair is
 * done, goes to the worker. */
static void fiber_entry(void *arg, void *user) {
    frec *r = user;
    worker *w = arg;
    bool is_b = r == &r->pr->b;
    uint64_t mine[WORDS];
    for (unsigned i = 0; i < WORDS; i++) mine[i] = word(r->id, i, 0);
    for (unsigned s = 0;; s++) {
        step(r, mine, s, w);
        if (is_b) {
            if (s == STEPS - 1) exi_fiber_switch_final(&r->f, &r->pr->a.f, w);
            w = exi_fiber_switch(&r->f, &r->pr->a.f, w);
            continue;
        }
        w = exi_fiber_switch(&r->f, &r->pr->b.f, w);  /* B's step s */
        if (s == STEPS - 1) break;
        w = exi_fiber_switch(&r->f, &w->self, r->pr);  /* the worker queues the pair */
    }
    r->pr->done = true;
    exi_fiber_switch_final(&r->f, &w->self, r->pr);
}

static bool fiber_new(frec *r, pair *p, unsigned id) {
    r->stack = ex_allocate(exi_guarded_stack_allocator(), STACK, 16);
    if (!r->stack) return false;
    r->pr = p;
    r->id = id;
    exi_fiber_init(&r->f, r->stack, STACK, fiber_entry, r);
    return true;
}

static void fiber_free(frec *r) {
    exi_fiber_destroy(&r->f);
    ex_deallocate(exi_guarded_stack_allocator(), r->stack, STACK, 16);
    r->stack = NULL;
}

/* Creates and queues the next pair, if any are left. */
static void create_next(void) {
    pthread_mutex_lock(&q.mu);
    unsigned k = q.created < TOTAL ? q.created++ : TOTAL;
    pthread_mutex_unlock(&q.mu);
    if (k == TOTAL) return;
    pair *p = &pairs[k];
    if (!fiber_new(&p->a, p, 2 * k) || !fiber_new(&p->b, p, 2 * k + 1)) {
        fprintf(stderr, "fiber_stress: out of stacks\n");
        abort();
    }
    push(p);
}

static void *work(void *arg) {
    worker w = { .index = (unsigned)(uintptr_t)arg };
    exi_fiber_init_thread(&w.self);
    for (pair *p; (p = pop());) {
        pair *back = exi_fiber_switch(&w.self, &p->a.f, &w);
        CHECK(back == p, "a pair yielded another pair");
        if (!p->done) {
            push(p);
            continue;
        }
        fiber_free(&p->a);
        fiber_free(&p->b);
        pthread_mutex_lock(&q.mu);
        if (++q.finished == TOTAL) pthread_cond_broadcast(&q.cv);
        pthread_mutex_unlock(&q.mu);
        create_next();
    }
    return NULL;
}

/* One round: LIVE pairs from here, TOTAL in all, THREADS fresh workers
 * (so a later round reuses the stacks an earlier round's threads left in
 * the depot when they exited). */
static int round_checks(unsigned round) {
    int checks = 0;
    memset(pairs, 0, sizeof pairs);
    q.head = q.tail = NULL;
    q.created = q.finished = 0;
    for (unsigned i = 0; i < LIVE; i++) create_next();
    pthread_t t[THREADS];
    for (unsigned i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, work, (void *)(uintptr_t)i);
    for (unsigned i = 0; i < THREADS; i++) pthread_join(t[i], NULL);

    unsigned not_once = 0, bad_stack = 0, migrated = 0, unfinished = 0;
    for (unsigned k = 0; k < TOTAL; k++) {
        frec *rs[2] = { &pairs[k].a, &pairs[k].b };
        for (int j = 0; j < 2; j++) {
            for (unsigned s = 0; s < STEPS; s++) not_once += rs[j]->hits[s] != 1;
            bad_stack += rs[j]->bad_stack;
            migrated += (rs[j]->threads & (rs[j]->threads - 1)) != 0;
        }
        unfinished += !pairs[k].done;
    }
    CHECK(unfinished == 0, "round %u: %u pairs did not finish", round, unfinished);
    CHECK(not_once == 0, "round %u: %u fiber steps did not run exactly once", round, not_once);
    CHECK(bad_stack == 0, "round %u: %u fiber steps found their stack data changed", round, bad_stack);
    CHECK(migrated > 0, "round %u: no fiber ran on more than one thread", round);
    checks += 4;
    printf("fiber_stress: round %u: %u fibers, %u steps each, %u ran on more than one thread\n", round, 2 * TOTAL,
           STEPS, migrated);
    return checks;
}

int main(void) {
    int checks = 0;
    ex_alloc_stats s0;
    ex_allocator_stats(exi_guarded_stack_allocator(), &s0);
    for (unsigned round = 0; round < ROUNDS; round++) checks += round_checks(round);
    ex_alloc_stats s1;
    ex_allocator_stats(exi_guarded_stack_allocator(), &s1);
    uint64_t n = 2 * TOTAL * ROUNDS;
    CHECK(s1.allocations - s0.allocations == n && s1.frees - s0.frees == n, "stack allocations %llu, frees %llu",
          (unsigned long long)(s1.allocations - s0.allocations), (unsigned long long)(s1.frees - s0.frees));
    CHECK(s1.bytes_in_use == s0.bytes_in_use, "stack bytes in use %llu", (unsigned long long)s1.bytes_in_use);
    /* Live stacks, plus what the caches (the workers' and main's) and the depot may hold. */
    uint64_t bound = (uint64_t)(2 * LIVE + EXI_STACK_CACHE * (THREADS + 1) + EXI_STACK_DEPOT) * STACK;
    CHECK(s1.peak_bytes <= bound, "peak stack bytes %llu above %llu", (unsigned long long)s1.peak_bytes,
          (unsigned long long)bound);
    exi_stack_trim();
    CHECK(exi_stack_mapped_bytes() == 0, "%llu stack bytes still mapped", (unsigned long long)exi_stack_mapped_bytes());
    checks += 4;
    return stress_finish("fiber_stress", checks);
}
