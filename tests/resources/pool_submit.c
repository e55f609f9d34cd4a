/* SPDX-License-Identifier: MIT */
/* The pool: many items from main, from outside threads and from workers
 * (nested trees, fan-out), a pool at a recycled address, sync_wait across
 * pools (suite exec_pool, declared in pool_create.c). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "resources/pool_fixtures.h"

/* ======================================================== many items */

static ex_error count_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    (*(int *)ctx)++;
    return ex_ok();
}

Test(exec_pool, ten_thousand_sync_waits_from_main) {
    enum { N = 10000 };
    ex_pool *p = test_pool_new(4);
    int *counts = calloc(N, sizeof *counts);
    cr_assert_not_null(counts);
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int i = 0; i < N; i++) {
        ex_result r = ex_sync_wait(ex_then(ex_schedule(sch), count_fn, &counts[i], EX_SIG0, EX_SIG0));
        cr_assert_eq(r.disposition, EX_DISP_VALUE, "item %d: disposition %d", i, r.disposition);
        ex_result_destroy(&r);
    }
    for (int i = 0; i < N; i++) cr_assert_eq(counts[i], 1, "item %d ran %d times", i, counts[i]);
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_eq(sum.executed, (uint64_t)N, "executed %llu items, submitted %d", (unsigned long long)sum.executed, N);
    free(counts);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, batch_of_ten_thousand_from_main_each_exactly_once) {
    enum { N = 10000 };
    ex_pool *p = test_pool_new(4);
    slot *s = slots_new(N);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    slots_start(s, N, p, snd);
    long got = wait_long_reaches(&g_completed, N);
    cr_assert_eq(got, N, "%ld of %d completions", got, N);
    cr_assert_eq(slots_expect_once(s, N), N, "every item completes with a value");
    for (int i = 0; i < N; i++) cr_assert_geq(s[i].r.worker, 0, "item %d completed off the workers", i);
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_eq(sum.executed, (uint64_t)N, "executed %llu, submitted %d", (unsigned long long)sum.executed, N);
    slots_destroy(s, N);
    ex_sender_release(snd);
    free(s);
    test_pool_free(p);
    cr_assert_eq(atomic_load(&g_completed), N, "destroy completed something twice");
    expect_no_leaks();
}

/* Many small batches from one thread: each batch's last submission races
 * with workers taking the earlier ones, and nothing submitted afterwards
 * would rescue an item a worker failed to see. */
static void small_batches(unsigned threads, int rounds, int batch) {
    ex_pool *p = test_pool_new(threads);
    slot s[16];
    cr_assert_leq(batch, 16);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    for (int round = 0; round < rounds; round++) {
        slots_start(s, batch, p, snd);
        long got = wait_long_reaches(&g_completed, batch);
        cr_assert_eq(got, batch,
                     "%u thread(s), round %d: only %ld of %d items ran; the rest stayed queued with idle workers",
                     threads, round, got, batch);
        cr_assert_eq(slots_expect_once(s, batch), batch);
        slots_destroy(s, batch);
    }
    ex_sender_release(snd);
    test_pool_free(p);
}

Test(exec_pool, small_batches_from_main_are_never_stranded) {
    small_batches(1, 3000, 4);
    small_batches(2, 2000, 8);
    expect_no_leaks();
}

/* ------------------------------------------------- external submitters */

enum { SUBMITTERS = 8, PER_SUBMITTER = 2000 };

typedef struct submitter {
    pthread_t thread;
    ex_pool *pool;
    const ex_sender *snd;
    slot *slots;
    int connect_failures;
} submitter;

static void *submitter_main(void *arg) {
    submitter *sb = arg;
    for (int i = 0; i < PER_SUBMITTER; i++) {
        slot_init(&sb->slots[i], sb->pool);
        if (slot_connect(&sb->slots[i], sb->snd).code) {
            sb->connect_failures++;
            continue;
        }
        ex_start(sb->slots[i].op);
        if (i % 256 == 0) sched_yield();
    }
    return NULL;
}

Test(exec_pool, many_external_submitters_each_completion_exactly_once) {
    ex_pool *p = test_pool_new(4);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    submitter sb[SUBMITTERS];
    atomic_store(&g_completed, 0);
    for (int t = 0; t < SUBMITTERS; t++) {
        sb[t].pool = p;
        sb[t].snd = snd;
        sb[t].connect_failures = 0;
        sb[t].slots = calloc(PER_SUBMITTER, sizeof(slot));
        cr_assert_not_null(sb[t].slots);
    }
    for (int t = 0; t < SUBMITTERS; t++)
        cr_assert_eq(pthread_create(&sb[t].thread, NULL, submitter_main, &sb[t]), 0);
    for (int t = 0; t < SUBMITTERS; t++) pthread_join(sb[t].thread, NULL);
    for (int t = 0; t < SUBMITTERS; t++) cr_assert_eq(sb[t].connect_failures, 0);
    long total = (long)SUBMITTERS * PER_SUBMITTER;
    long got = wait_long_reaches(&g_completed, total);
    cr_assert_eq(got, total, "%ld of %ld completions", got, total);
    for (int t = 0; t < SUBMITTERS; t++) {
        cr_assert_eq(slots_expect_once(sb[t].slots, PER_SUBMITTER), PER_SUBMITTER);
        for (int i = 0; i < PER_SUBMITTER; i++) cr_assert_geq(sb[t].slots[i].r.worker, 0);
    }
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_eq(sum.executed, (uint64_t)total);
    for (int t = 0; t < SUBMITTERS; t++) {
        slots_destroy(sb[t].slots, PER_SUBMITTER);
        free(sb[t].slots);
    }
    ex_sender_release(snd);
    test_pool_free(p);
    expect_no_leaks();
}

/* -------------------------------------------------- nested submission */

#define TREE_DEPTH 12                        /* 2^12 leaves */
#define TREE_NODES ((1 << (TREE_DEPTH + 1)) - 1)

static struct {
    ex_pool *pool;
    ex_sender *snd;
    atomic_int counts[TREE_NODES + 1];  /* heap numbering: root 1, children 2i, 2i+1 */
    atomic_long done;
    atomic_int failures, off_worker, not_value;
} T;

/* Node id (and so its subtree) could not be submitted: counted as done. */
static void tree_lost(int id);

static long subtree_size(int id) {
    int depth = 0;
    for (int x = id; x > 1; x >>= 1) depth++;
    return (1L << (TREE_DEPTH - depth + 1)) - 1;
}

typedef struct tnode {
    int id;
    ex_operation *op;
} tnode;

static void tree_spawn(int id);

static void tnode_complete(tnode *nd, bool value) {
    int id = nd->id;
    atomic_fetch_add(&T.counts[id], 1);
    if (ex_pool_current_worker(T.pool) < 0) atomic_fetch_add(&T.off_worker, 1);
    if (!value) atomic_fetch_add(&T.not_value, 1);
    if (value && id < (1 << TREE_DEPTH)) {
        tree_spawn(2 * id);
        tree_spawn(2 * id + 1);
    } else if (!value && id < (1 << TREE_DEPTH)) {
        atomic_fetch_add(&T.done, subtree_size(id) - 1); /* the children never come */
    }
    ex_operation_free(nd->op); /* allowed inside the completion */
    ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(tnode));
    atomic_fetch_add(&T.done, 1);
}

static void tnode_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    tnode_complete(self, true);
}
static void tnode_error(void *self, ex_error e) {
    (void)e;
    tnode_complete(self, false);
}
static void tnode_stopped(void *self) { tnode_complete(self, false); }

static const ex_receiver_vtable tnode_vt = { tnode_value, tnode_error, tnode_stopped, NULL, NULL };

static void tree_spawn(int id) {
    tnode *nd = ex_allocate(ex_default_allocator(), sizeof *nd, alignof(tnode));
    if (!nd) {
        tree_lost(id);
        return;
    }
    nd->id = id;
    ex_receiver r = { &tnode_vt, nd };
    if (ex_connect_alloc(T.snd, r, &nd->op).code) {
        ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(tnode));
        tree_lost(id);
        return;
    }
    ex_start(nd->op);
}

static void tree_lost(int id) {
    atomic_fetch_add(&T.failures, 1);
    atomic_fetch_add(&T.done, subtree_size(id));
}

static void check_tree_counts(void) {
    for (int id = 1; id <= TREE_NODES; id++)
        cr_assert_eq(atomic_load(&T.counts[id]), 1, "node %d ran %d times", id, atomic_load(&T.counts[id]));
}

Test(exec_pool, nested_schedule_tree_from_workers_each_exactly_once) {
    memset(&T, 0, sizeof T);
    T.pool = test_pool_new(4);
    T.snd = ex_schedule(ex_pool_scheduler(T.pool));
    tree_spawn(1);
    long got = wait_long_reaches(&T.done, TREE_NODES);
    cr_assert_eq(got, TREE_NODES, "%ld of %d nodes", got, TREE_NODES);
    cr_assert_eq(atomic_load(&T.failures), 0);
    cr_assert_eq(atomic_load(&T.not_value), 0, "a node completed with error or stopped");
    cr_assert_eq(atomic_load(&T.off_worker), 0, "a node completed off the workers");
    check_tree_counts();
    ex_pool_worker_stats sum = stats_sum(T.pool);
    cr_assert_eq(sum.executed, (uint64_t)TREE_NODES, "executed %llu of %d", (unsigned long long)sum.executed,
                 TREE_NODES);
    ex_sender_release(T.snd);
    test_pool_free(T.pool);
    cr_assert_eq(atomic_load(&T.done), TREE_NODES);
    expect_no_leaks();
}

/* The same tree with ex_post of work items the test allocates. */
typedef struct pnode {
    ex_work w;
    int id;
} pnode;

static atomic_int P_cancelled;

static void ptree_post(int id);

static void pnode_exec(ex_work *w) {
    pnode *nd = (pnode *)w;
    int id = nd->id;
    ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(pnode));
    atomic_fetch_add(&T.counts[id], 1);
    if (ex_pool_current_worker(T.pool) < 0) atomic_fetch_add(&T.off_worker, 1);
    if (id < (1 << TREE_DEPTH)) {
        ptree_post(2 * id);
        ptree_post(2 * id + 1);
    }
    atomic_fetch_add(&T.done, 1);
}

static void pnode_cancel(ex_work *w) {
    pnode *nd = (pnode *)w;
    atomic_fetch_add(&P_cancelled, 1);
    atomic_fetch_add(&T.done, subtree_size(nd->id));
    ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(pnode));
}

static void ptree_post(int id) {
    pnode *nd = ex_allocate(ex_default_allocator(), sizeof *nd, alignof(pnode));
    if (!nd) {
        tree_lost(id);
        return;
    }
    nd->w.next = NULL;
    nd->w.execute = pnode_exec;
    nd->w.cancel = pnode_cancel;
    nd->id = id;
    if (ex_post(ex_pool_scheduler(T.pool), &nd->w).code) {
        ex_deallocate(ex_default_allocator(), nd, sizeof *nd, alignof(pnode));
        tree_lost(id);
    }
}

Test(exec_pool, nested_post_tree_from_workers_each_exactly_once) {
    memset(&T, 0, sizeof T);
    atomic_store(&P_cancelled, 0);
    T.pool = test_pool_new(4);
    ptree_post(1);
    long got = wait_long_reaches(&T.done, TREE_NODES);
    cr_assert_eq(got, TREE_NODES, "%ld of %d nodes", got, TREE_NODES);
    cr_assert_eq(atomic_load(&T.failures), 0);
    cr_assert_eq(atomic_load(&P_cancelled), 0);
    cr_assert_eq(atomic_load(&T.off_worker), 0);
    check_tree_counts();
    ex_pool_worker_stats sum = stats_sum(T.pool);
    cr_assert_eq(sum.executed, (uint64_t)TREE_NODES);
    test_pool_free(T.pool);
    expect_no_leaks();
}

/* One item fans out many schedule operations from its worker: the worker's
 * deque grows past its initial size while other workers steal from it. */
typedef struct fanout {
    ex_pool *pool;
    const ex_sender *snd;
    slot *slots;
    int n;
    int connect_failures;
    int owner;  /* the worker that fanned out */
    atomic_int fanned;
} fanout;

typedef struct fanout_item {
    ex_work w;
    fanout f;
} fanout_item;

static void fanout_exec(ex_work *w) {
    fanout *f = &((fanout_item *)w)->f;
    f->owner = ex_pool_current_worker(f->pool);
    for (int i = 0; i < f->n; i++) {
        slot_init(&f->slots[i], f->pool);
        if (slot_connect(&f->slots[i], f->snd).code) {
            f->connect_failures++;
            continue;
        }
        ex_start(f->slots[i].op);
    }
    atomic_store(&f->fanned, 1);
}

static void fanout_run(unsigned threads, int n, bool destroy_at_once) {
    fanout_item *fi = calloc(1, sizeof *fi);
    cr_assert_not_null(fi);
    fi->w.execute = fanout_exec;
    fi->f.pool = test_pool_new(threads);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(fi->f.pool));
    fi->f.snd = snd;
    fi->f.n = n;
    fi->f.slots = calloc((size_t)n, sizeof(slot));
    cr_assert_not_null(fi->f.slots);
    atomic_store(&g_completed, 0);
    cr_assert_eq(ex_post(ex_pool_scheduler(fi->f.pool), &fi->w).code, 0);
    EXPECT_INT_REACHES(&fi->f.fanned, 1);
    cr_assert_eq(fi->f.connect_failures, 0);
    if (destroy_at_once) {
        test_pool_free(fi->f.pool); /* races the workers for what is queued */
        cr_assert_eq(atomic_load(&g_completed), n, "%ld of %d completed by the time destroy returned",
                     atomic_load(&g_completed), n);
        int values = slots_expect_once(fi->f.slots, n);
        int stops = 0;
        for (int i = 0; i < n; i++) {
            cr_assert_eq(atomic_load(&fi->f.slots[i].r.errors), 0);
            stops += atomic_load(&fi->f.slots[i].r.stops);
        }
        cr_assert_eq(values + stops, n);
    } else {
        long got = wait_long_reaches(&g_completed, n);
        cr_assert_eq(got, n, "%ld of %d completions", got, n);
        cr_assert_eq(slots_expect_once(fi->f.slots, n), n);
        for (int i = 0; i < n; i++) cr_assert_geq(fi->f.slots[i].r.worker, 0);
        ex_pool_worker_stats sum = stats_sum(fi->f.pool);
        cr_assert_eq(sum.executed, (uint64_t)n + 1);
        /* Every item sat in the owner's deque: whatever another worker ran,
         * it stole; the owner stole nothing. */
        cr_assert_geq(fi->f.owner, 0);
        for (unsigned i = 0; i < threads; i++) {
            ex_pool_worker_stats st;
            cr_assert_eq(ex_pool_worker_stats_get(fi->f.pool, i, &st).code, 0);
            if ((int)i == fi->f.owner)
                cr_assert_eq(st.stolen, 0u, "the owner stole %llu items", (unsigned long long)st.stolen);
            else
                cr_assert_eq(st.stolen, st.executed, "worker %u ran %llu items but stole %llu", i,
                             (unsigned long long)st.executed, (unsigned long long)st.stolen);
        }
        test_pool_free(fi->f.pool);
    }
    slots_destroy(fi->f.slots, n);
    free(fi->f.slots);
    ex_sender_release(snd);
    free(fi);
}

Test(exec_pool, fan_out_from_one_worker_grows_its_deque) {
    fanout_run(1, 5000, false);
    fanout_run(4, 5000, false);
    expect_no_leaks();
}

Test(exec_pool, destroy_races_workers_for_a_grown_deque) {
    for (int round = 0; round < 5; round++) fanout_run(round % 2 ? 4 : 2, 3000, true);
    expect_no_leaks();
}

/* A thread's submissions to a pool created at the address of a destroyed
 * one (allocators reuse blocks) must go to the new pool's queues.  The
 * recycling allocator below makes the reuse certain, in every build. */
static struct {
    pthread_mutex_t mu;
    struct { void *p; size_t size, align; } cache[8];
} recycler = { PTHREAD_MUTEX_INITIALIZER, { { NULL, 0, 0 } } };

static void *recycle_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    pthread_mutex_lock(&recycler.mu);
    for (int i = 0; i < 8; i++) {
        if (recycler.cache[i].p && recycler.cache[i].size == size && recycler.cache[i].align == align) {
            void *p = recycler.cache[i].p;
            recycler.cache[i].p = NULL;
            pthread_mutex_unlock(&recycler.mu);
            return p;
        }
    }
    pthread_mutex_unlock(&recycler.mu);
    return test_allocator.allocate(test_allocator.ctx, size, align);
}

static void recycle_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx;
    pthread_mutex_lock(&recycler.mu);
    for (int i = 0; i < 8; i++) {
        if (!recycler.cache[i].p) {
            recycler.cache[i].p = p;
            recycler.cache[i].size = size;
            recycler.cache[i].align = align;
            pthread_mutex_unlock(&recycler.mu);
            return;
        }
    }
    pthread_mutex_unlock(&recycler.mu);
    test_allocator.deallocate(test_allocator.ctx, p, size, align);
}

static void recycle_flush(void) {
    for (int i = 0; i < 8; i++) {
        if (recycler.cache[i].p)
            test_allocator.deallocate(test_allocator.ctx, recycler.cache[i].p, recycler.cache[i].size,
                                      recycler.cache[i].align);
        recycler.cache[i].p = NULL;
    }
}

static ex_allocator recycle_allocator = { recycle_allocate, recycle_deallocate, NULL, "recycle", NULL };

static void *submit_one_main(void *arg) {
    ex_pool *p = arg;
    where w;
    memset(&w, 0, sizeof w);
    w.pool = p;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), where_fn, &w, EX_SIG0, EX_SIG(EX_T_INT)));
    ex_result_destroy(&r);
    return NULL;
}

Test(exec_pool, new_pool_at_a_recycled_address_gets_its_work) {
    for (int attempt = 0; attempt < 3; attempt++) {
        /* Three other threads submit first, so main's submissions to the
         * 4-thread pool come from a later "home" than 0. */
        /* No lending: sync_wait must submit through the home inboxes. */
        ex_pool_config ca = test_pool_config(4, NULL), cb = test_pool_config(1, NULL);
        ca.lend_slots = cb.lend_slots = -1;
        ex_set_default_allocator(&recycle_allocator);
        ex_pool *a = test_pool_new_cfg(&ca);
        ex_set_default_allocator(&test_allocator);
        for (int t = 0; t < 3; t++) {
            pthread_t th;
            cr_assert_eq(pthread_create(&th, NULL, submit_one_main, a), 0);
            pthread_join(th, NULL);
        }
        where w;
        run_where(a, &w);
        test_pool_free(a);
        ex_set_default_allocator(&recycle_allocator);
        ex_pool *b = test_pool_new_cfg(&cb);
        ex_set_default_allocator(&test_allocator);
        cr_assert_eq(b, a, "test setup: the recycling allocator did not give the old pool's address");
        slot s[10];
        ex_sender *snd = ex_schedule(ex_pool_scheduler(b));
        slots_start(s, 10, b, snd);
        long got = wait_long_reaches(&g_completed, 10);
        cr_assert_eq(got, 10, "attempt %d: the pool at the reused address ran %ld of 10 items from main", attempt,
                     got);
        cr_assert_eq(slots_expect_once(s, 10), 10);
        for (int i = 0; i < 10; i++) cr_assert_eq(s[i].r.worker, 0);
        slots_destroy(s, 10);
        ex_sender_release(snd);
        ex_pool_worker_stats st;
        cr_assert_eq(ex_pool_worker_stats_get(b, 0, &st).code, 0);
        cr_assert_eq(st.executed, 10u, "the new pool ran %llu of 10 items", (unsigned long long)st.executed);
        test_pool_free(b);
        recycle_flush();
    }
    expect_no_leaks();
}

/* sync_wait on a worker of one pool for work on another pool, and back. */
typedef struct cross {
    ex_pool *p, *q;
    int inner_worker_q;
} cross;

static ex_error cross_inner(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    cross *c = ctx;
    (void)in, (void)n;
    c->inner_worker_q = ex_pool_current_worker(c->q);
    /* and from q's worker back to p, whose worker is waiting on us */
    ex_result r = ex_sync_wait(ex_schedule(ex_pool_scheduler(c->p)));
    ex_result_destroy(&r);
    out[0] = ex_int(r.disposition == EX_DISP_VALUE ? 1 : -100);
    return ex_ok();
}

static ex_error cross_outer(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    cross *c = ctx;
    (void)in, (void)n;
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(c->q)), cross_inner, c, EX_SIG0, EX_SIG(EX_T_INT)));
    int64_t v = r.disposition == EX_DISP_VALUE ? r.values[0].as.i : -1000;
    ex_result_destroy(&r);
    out[0] = ex_int(v + 1);
    return ex_ok();
}

Test(exec_pool, sync_wait_across_two_one_thread_pools) {
    cross c;
    memset(&c, 0, sizeof c);
    c.p = pool_named(1, "p");
    c.q = pool_named(1, "q");
    c.inner_worker_q = -2;
    ex_result r = ex_sync_wait(
        ex_then(ex_schedule(ex_pool_scheduler(c.p)), cross_outer, &c, EX_SIG0, EX_SIG(EX_T_INT)));
    expect_value_int(&r, 2);
    cr_assert_eq(c.inner_worker_q, 0);
    ex_result_destroy(&r);
    test_pool_free(c.q);
    test_pool_free(c.p);
    expect_no_leaks();
}

