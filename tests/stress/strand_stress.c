/* SPDX-License-Identifier: MIT */
/* strand_stress.c - several strands over one 4-worker pool; several
 * submitting threads post, dispatch (from outside: queued) and start
 * schedule operations on random strands, with random stop requests on the
 * schedule operations (before start, or racing the strand); some items, when
 * they run, dispatch a child to their own strand (it must run inline) and
 * post or dispatch a child to another strand.
 *
 * Checked every round: every item and schedule operation completes exactly
 * once (no item lost, none run twice); a schedule operation whose stop was
 * requested before start completes stopped, none completes with an error;
 * per strand, at most one item is inside at a time (relaxed counters only,
 * so the check adds no happens-before edge); per (submitter, strand) and per
 * (source strand, strand) items run in the order they were given, checked
 * with plain (non-atomic) state that only the strand's own ordering
 * protects, so ThreadSanitizer also checks that each item sees the writes
 * of the previous one; ex_strand_executed counts what was queued; the
 * strands can be destroyed at the end; library memory returns to where it
 * started.  Some rounds shut the pool down while the submitters are still
 * at work: then every item still completes exactly once (run, cancelled or
 * stopped), and the strands are idle once the pool is gone.
 *
 * Bounded: rounds run until about 6 s have passed (at least 4 rounds). */
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

#include <cexec/cexec.h>
#include <cexec/strand.h>
#include "stress_util.h"

enum { STRANDS = 4, SUBMITTERS = 4, PER_SUBMITTER = 400, MIN_ROUNDS = 4, MAX_ROUNDS = 400 };
#define TIME_BUDGET_S 6.0

enum { K_POST, K_DISPATCH, K_SCHED, K_NESTED, K_CHILD_INLINE, K_CHILD_POST };
enum { STOP_NONE, STOP_BEFORE, STOP_RACE };
enum { D_RUN = D_STOPPED + 1, D_CANCEL };  /* besides stress_util.h's D_* */

/* ------------------------------------------------------------ state */

typedef struct sstate {
    ex_strand *s;
    ex_sender *snd;                   /* ex_schedule of the strand */
    uint32_t inside;                  /* relaxed */
    /* Plain: read and written only by items of this strand. */
    uint32_t last_seq[SUBMITTERS];
    uint32_t last_nested[STRANDS];    /* per source strand */
    uint32_t nested_out[STRANDS];     /* next seq of children this strand posts to each strand */
    uint64_t queued;                  /* relaxed: items given to the strand's queue */
    uint64_t inlined;                 /* relaxed: items dispatched inline */
} sstate;

typedef struct node {
    ex_work w;
    uint8_t kind, strand, sub, src, stop_plan;
    bool checks;                      /* ordering/exclusion checks (off in shutdown rounds) */
    bool via_dispatch;
    uint32_t seq;
    uint32_t done;                    /* completions (relaxed) */
    uint32_t submitted;               /* children: set by the parent before posting */
    int disp;
    uint32_t child_ran_inline;        /* parent: the inline child had run when dispatch returned */
    struct node *child_inline, *child_post;
    ex_stop_source stop;
    ex_env_pair pair;
    ex_operation *op;
    _Alignas(max_align_t) unsigned char storage[128];
} node;

static ex_pool *pool;
static sstate st[STRANDS];
static node nodes[SUBMITTERS][PER_SUBMITTER];
static node children[SUBMITTERS][PER_SUBMITTER][2];

static uint32_t completions;        /* release increments, acquire read by main */
static uint32_t children_submitted; /* relaxed */
static uint32_t submitted_ops;      /* relaxed: a trigger only */
static uint32_t excl_violations, fifo_violations, inline_failures, errors_seen, stop_before_ran;
static uint32_t ran_in_call, off_pool;

/* Set around the submitting calls (post, dispatch from outside, start):
 * work that finds it set on the thread running it ran inside the call. */
static _Thread_local bool in_call;
static uint32_t go;
static bool round_shutdown;  /* written by main before the submitters start; read by them */

static void bump(uint32_t *c) { __atomic_fetch_add(c, 1, __ATOMIC_RELAXED); }

static void complete(node *n, int disp) {
    n->disp = disp;
    bump(&n->done);
    __atomic_fetch_add(&completions, 1, __ATOMIC_RELEASE);
}

static void enter(node *n) {
    if (!n->checks) return;
    if (in_call) bump(&ran_in_call);
    if (ex_pool_current_worker(pool) < 0) bump(&off_pool);
    sstate *x = &st[n->strand];
    if (__atomic_fetch_add(&x->inside, 1, __ATOMIC_RELAXED) != 0) bump(&excl_violations);
    uint32_t *last = n->kind == K_CHILD_POST ? &x->last_nested[n->src] : &x->last_seq[n->sub];
    if (n->seq <= *last) bump(&fifo_violations);
    *last = n->seq;
}

static void leave(node *n) {
    if (!n->checks) return;
    __atomic_fetch_sub(&st[n->strand].inside, 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------ items */

static void item_cancel(ex_work *w) { complete((node *)(void *)w, D_CANCEL); }

static void child_inline_exec(ex_work *w) {
    node *n = (node *)(void *)w;
    /* Runs inside its parent's turn: the parent is the one inside. */
    if (n->checks && __atomic_load_n(&st[n->strand].inside, __ATOMIC_RELAXED) != 1) bump(&excl_violations);
    complete(n, D_RUN);
}

static void item_exec(ex_work *w);

static void nested_actions(node *n) {
    sstate *x = &st[n->strand];
    /* 1. dispatch to our own strand: inline. */
    node *ci = n->child_inline;
    ci->kind = K_CHILD_INLINE;
    ci->strand = n->strand;
    ci->checks = n->checks;
    ci->w.next = NULL;
    ci->w.execute = child_inline_exec;
    ci->w.cancel = item_cancel;
    __atomic_store_n(&ci->submitted, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&children_submitted, 1, __ATOMIC_RELAXED);
    ex_error e = ex_dispatch(ex_strand_scheduler(x->s), &ci->w);
    if (e.code) bump(&errors_seen);
    n->child_ran_inline = __atomic_load_n(&ci->done, __ATOMIC_RELAXED);
    if (n->checks && n->child_ran_inline != 1) bump(&inline_failures);
    __atomic_fetch_add(n->child_ran_inline ? &x->inlined : &x->queued, 1, __ATOMIC_RELAXED);

    /* 2. post (or dispatch, to another strand) a child to a random strand. */
    node *cp = n->child_post;
    uint32_t t = rnd(STRANDS);
    bool via_dispatch = rnd(2) == 0;
    if (via_dispatch && t == n->strand) t = (t + 1) % STRANDS;
    cp->kind = K_CHILD_POST;
    cp->strand = (uint8_t)t;
    cp->src = n->strand;
    cp->sub = n->sub;
    cp->checks = n->checks;
    cp->seq = ++x->nested_out[t];  /* plain: inside our strand */
    cp->w.next = NULL;
    cp->w.execute = item_exec;
    cp->w.cancel = rnd(4) ? item_cancel : NULL;
    __atomic_store_n(&cp->submitted, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&children_submitted, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&st[t].queued, 1, __ATOMIC_RELAXED);
    in_call = true;
    e = via_dispatch ? ex_dispatch(ex_strand_scheduler(st[t].s), &cp->w) : ex_post(ex_strand_scheduler(st[t].s), &cp->w);
    in_call = false;
    if (e.code) bump(&errors_seen);
}

static void item_exec(ex_work *w) {
    node *n = (node *)(void *)w;
    enter(n);
    spin_delay(rnd(64));
    if (n->kind == K_NESTED) nested_actions(n);
    leave(n);
    complete(n, D_RUN);
}

/* ------------------------------------------------- schedule operations */

static void r_value(void *self, const ex_value *v, size_t k) {
    (void)v, (void)k;
    node *n = self;
    enter(n);
    if (n->stop_plan == STOP_BEFORE) bump(&stop_before_ran);
    leave(n);
    complete(n, D_VALUE);
}

static void r_stopped(void *self) {
    node *n = self;
    enter(n);
    leave(n);
    complete(n, D_STOPPED);
}

static void r_error(void *self, ex_error e) {
    (void)e;
    bump(&errors_seen);
    complete(self, D_ERROR);
}

static ex_env r_env(void *self) { return ex_env_of_pair(&((node *)self)->pair); }

static const ex_receiver_vtable node_rvt = { r_value, r_error, r_stopped, r_env, NULL };

/* ------------------------------------------------------------ submitters */

static void *submitter(void *arg) {
    uint32_t u = (uint32_t)(uintptr_t)arg;
    rng_state = 0x9e3779b97f4a7c15ull ^ ((uint64_t)(u + 1) * 0x2545f4914f6cdd1dull) ^ (uint64_t)(uintptr_t)&u;
    uint32_t seq[STRANDS] = { 0 };
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) sched_yield();
    node *race = NULL;  /* a started operation whose stop is requested one step later */
    for (uint32_t i = 0; i < PER_SUBMITTER; i++) {
        node *n = &nodes[u][i];
        uint32_t s = rnd(STRANDS);
        uint32_t k = rnd(10);
        n->kind = k < 4 ? K_POST : k < 6 ? K_DISPATCH : k < 8 ? K_SCHED : K_NESTED;
        n->strand = (uint8_t)s;
        n->sub = (uint8_t)u;
        n->checks = !round_shutdown;
        n->seq = ++seq[s];
        n->child_inline = &children[u][i][0];
        n->child_post = &children[u][i][1];
        ex_scheduler sch = ex_strand_scheduler(st[s].s);
        __atomic_fetch_add(&st[s].queued, 1, __ATOMIC_RELAXED);
        ex_error e = ex_ok();
        if (n->kind == K_SCHED) {
            n->stop_plan = (uint8_t)rnd(3);
            ex_stop_source_init(&n->stop);
            ex_env_pair_init(&n->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&n->stop)),
                             ex_env_empty());
            ex_receiver r = { &node_rvt, n };
            e = ex_connect(st[s].snd, r, n->storage, sizeof n->storage, &n->op);
            if (e.code) {
                bump(&errors_seen);
                complete(n, D_ERROR);
            } else {
                if (n->stop_plan == STOP_BEFORE) ex_stop_source_request_stop(&n->stop);
                in_call = true;
                ex_start(n->op);
                in_call = false;
                if (race) ex_stop_source_request_stop(&race->stop);
                race = n->stop_plan == STOP_RACE ? n : NULL;
            }
        } else {
            n->w.next = NULL;
            n->w.execute = item_exec;
            n->w.cancel = rnd(4) ? item_cancel : NULL;
            in_call = true;
            e = n->kind == K_DISPATCH ? ex_dispatch(sch, &n->w) : ex_post(sch, &n->w);
            in_call = false;
            if (e.code) bump(&errors_seen);
        }
        __atomic_fetch_add(&submitted_ops, 1, __ATOMIC_RELAXED);
        if (rnd(64) == 0) sched_yield();
    }
    if (race) ex_stop_source_request_stop(&race->stop);
    return NULL;
}

/* ------------------------------------------------------------ a round */

static int checks;

static void round_reset(void) {
    memset(nodes, 0, sizeof nodes);
    memset(children, 0, sizeof children);
    __atomic_store_n(&completions, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&children_submitted, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&submitted_ops, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&go, 0, __ATOMIC_RELAXED);
}

/* Waits until every top-level item and every child submitted so far
 * completed.  Completions are read first: a child is counted as submitted
 * before it can complete (an inline child completes before its parent), so
 * have <= want unless something completed twice; have == want means every
 * top-level item completed, and only running items submit children. */
static bool wait_all(uint32_t top) {
    double deadline = now_s() + 20.0;
    for (;;) {
        uint32_t have = __atomic_load_n(&completions, __ATOMIC_ACQUIRE);
        uint32_t want = top + __atomic_load_n(&children_submitted, __ATOMIC_RELAXED);
        if (have >= want) return have == want;
        if (now_s() > deadline) return false;
        struct timespec d = { 0, 100000 };
        nanosleep(&d, NULL);
    }
}

static void run_round(int round, bool with_shutdown) {
    round_reset();
    round_shutdown = with_shutdown;
    for (int s = 0; s < STRANDS; s++) {
        memset(&st[s], 0, sizeof st[s]);
        ex_error e = ex_strand_create(ex_pool_scheduler(pool), NULL, &st[s].s);
        CHECK(e.code == 0, "round %d: ex_strand_create: %s", round, e.msg ? e.msg : "");
        checks++;
        if (e.code) exit(stress_finish("strand_stress", checks));
        st[s].snd = ex_schedule(ex_strand_scheduler(st[s].s));
    }
    uint32_t excl0 = excl_violations, fifo0 = fifo_violations, inl0 = inline_failures, err0 = errors_seen,
             sb0 = stop_before_ran, ric0 = ran_in_call, off0 = off_pool;

    pthread_t th[SUBMITTERS];
    for (uintptr_t u = 0; u < SUBMITTERS; u++) pthread_create(&th[u], NULL, submitter, (void *)u);
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    if (with_shutdown) {
        /* Shut the pool down part way through the submissions. */
        uint32_t at = rnd(SUBMITTERS * PER_SUBMITTER);
        double deadline = now_s() + 20.0;
        while (__atomic_load_n(&submitted_ops, __ATOMIC_RELAXED) < at && now_s() < deadline) sched_yield();
        ex_error e = ex_pool_shutdown(pool);
        CHECK(e.code == 0, "round %d: ex_pool_shutdown: %s", round, e.msg ? e.msg : "");
        checks++;
    }
    for (int u = 0; u < SUBMITTERS; u++) pthread_join(th[u], NULL);

    bool all = wait_all(SUBMITTERS * PER_SUBMITTER);
    CHECK(all, "round %d: %u of %u completions", round, __atomic_load_n(&completions, __ATOMIC_ACQUIRE),
          SUBMITTERS * PER_SUBMITTER + __atomic_load_n(&children_submitted, __ATOMIC_RELAXED));
    checks++;

    /* Exactly once, per item. */
    uint32_t lost = 0, twice = 0, ghost = 0;
    for (int u = 0; u < SUBMITTERS; u++)
        for (int i = 0; i < PER_SUBMITTER; i++) {
            node *n = &nodes[u][i];
            uint32_t d = __atomic_load_n(&n->done, __ATOMIC_RELAXED);
            if (d == 0) lost++;
            if (d > 1) twice++;
            for (int c = 0; c < 2; c++) {
                node *ch = &children[u][i][c];
                uint32_t cd = __atomic_load_n(&ch->done, __ATOMIC_RELAXED);
                if (__atomic_load_n(&ch->submitted, __ATOMIC_RELAXED)) {
                    if (cd == 0) lost++;
                    if (cd > 1) twice++;
                } else if (cd) {
                    ghost++;
                }
            }
        }
    CHECK(lost == 0, "round %d: %u item(s) never completed", round, lost);
    CHECK(twice == 0, "round %d: %u item(s) completed more than once", round, twice);
    CHECK(ghost == 0, "round %d: %u child item(s) completed without being submitted", round, ghost);
    CHECK(errors_seen == err0, "round %d: %u error(s) (post/dispatch/connect failure or set_error)", round,
          errors_seen - err0);
    CHECK(stop_before_ran == sb0, "round %d: %u schedule op(s) with stop requested before start got set_value",
          round, stop_before_ran - sb0);
    checks += 5;
    if (!with_shutdown) {
        CHECK(excl_violations == excl0, "round %d: %u time(s) two items of one strand were inside at once", round,
              excl_violations - excl0);
        CHECK(fifo_violations == fifo0, "round %d: %u item(s) ran out of submission order", round,
              fifo_violations - fifo0);
        CHECK(inline_failures == inl0, "round %d: %u dispatch(es) from inside the strand did not run inline", round,
              inline_failures - inl0);
        CHECK(ran_in_call == ric0, "round %d: %u item(s) ran inside the post/dispatch/start call that queued them",
              round, ran_in_call - ric0);
        CHECK(off_pool == off0, "round %d: %u item(s) ran off the pool's workers", round, off_pool - off0);
        checks += 5;
        for (int s = 0; s < STRANDS; s++) {
            /* Items that went through the queue; whether an item dispatched
             * inline counts as well is left open. */
            uint64_t ex = ex_strand_executed(st[s].s);
            uint64_t q = __atomic_load_n(&st[s].queued, __ATOMIC_RELAXED);
            uint64_t inl = __atomic_load_n(&st[s].inlined, __ATOMIC_RELAXED);
            CHECK(ex >= q && ex <= q + inl, "round %d: strand %d executed %llu, %llu queued, %llu inline", round, s,
                  (unsigned long long)ex, (unsigned long long)q, (unsigned long long)inl);
            checks++;
        }
    }

    /* Library state. */
    if (with_shutdown) {
        ex_error e = ex_pool_destroy(pool);
        CHECK(e.code == 0, "round %d: ex_pool_destroy: %s", round, e.msg ? e.msg : "");
        checks++;
        pool = NULL;
    }
    for (int u = 0; u < SUBMITTERS; u++)
        for (int i = 0; i < PER_SUBMITTER; i++)
            if (nodes[u][i].op) ex_operation_destroy(nodes[u][i].op);
    for (int s = 0; s < STRANDS; s++) {
        ex_error e;
        if (with_shutdown) {
            e = ex_strand_destroy(st[s].s); /* the pool's threads are gone: idle now */
        } else {
            double deadline = now_s() + (all ? 20.0 : 1.0);
            while ((e = ex_strand_destroy(st[s].s)).code == EX_EBUSY && now_s() < deadline) sched_yield();
        }
        CHECK(e.code == 0, "round %d: ex_strand_destroy(%d): %d %s", round, s, e.code, e.msg ? e.msg : "");
        checks++;
        ex_sender_release(st[s].snd);
    }
    if (with_shutdown) {
        ex_pool_config cfg = { .threads = 4 };
        ex_error e = ex_pool_create(&cfg, &pool);
        CHECK(e.code == 0, "round %d: ex_pool_create: %s", round, e.msg ? e.msg : "");
        checks++;
        if (e.code) exit(stress_finish("strand_stress", checks));
    }
}

int main(void) {
    ex_set_default_allocator(&counting_alloc);
    ex_pool_config cfg = { .threads = 4 };
    ex_error e = ex_pool_create(&cfg, &pool);
    CHECK(e.code == 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    checks++;
    if (e.code) return stress_finish("strand_stress", checks);
    long base = __atomic_load_n(&alloc_in_use, __ATOMIC_RELAXED);

    double start = now_s();
    int rounds = 0, shutdowns = 0;
    for (; rounds < MAX_ROUNDS && (rounds < MIN_ROUNDS || now_s() - start < TIME_BUDGET_S); rounds++) {
        bool with_shutdown = rounds % 4 == 3;
        shutdowns += with_shutdown;
        long before = __atomic_load_n(&alloc_in_use, __ATOMIC_RELAXED);
        run_round(rounds, with_shutdown);
        long after = __atomic_load_n(&alloc_in_use, __ATOMIC_RELAXED);
        if (!with_shutdown) {
            CHECK(after == before, "round %d: %ld block(s) not freed", rounds, after - before);
            checks++;
        }
        if (stress_failures) break;
    }
    e = ex_pool_destroy(pool);
    CHECK(e.code == 0, "ex_pool_destroy: %s", e.msg ? e.msg : "");
    checks++;
    long end = __atomic_load_n(&alloc_in_use, __ATOMIC_RELAXED);
    CHECK(end == 0, "%ld block(s) still in use at the end (%ld after creating the first pool)", end, base);
    checks++;
    printf("strand_stress: %d rounds (%d with a pool shutdown) in %.1f s\n", rounds, shutdowns, now_s() - start);
    ex_set_default_allocator(NULL);
    return stress_finish("strand_stress", checks);
}
