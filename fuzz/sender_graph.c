/* SPDX-License-Identifier: MIT */
/* sender_graph.c - libFuzzer harness: decode the input into a random sender
 * graph, build it with cexec, run it, and compare what happened with the
 * reference interpreter (ref_interp.c).
 *
 * Checked on every input:
 *  - the outcome of the whole graph is one the reference allows;
 *  - with taps (every node wrapped in a recording pass-through sender),
 *    each node that started completed exactly once, with an outcome the
 *    reference allows for that node, and only nodes the reference can
 *    reach started; all consumers of a split got the same result; a bulk
 *    that completed with values ran every index exactly once;
 *  - the top-level receiver completed exactly once;
 *  - every block allocated through cexec's default allocator was freed
 *    (a counting allocator), LeakSanitizer finds nothing (libFuzzer's
 *    -detect_leaks), and no stop callback is left registered;
 *  - the run_loop is empty and can be destroyed.
 *
 * GRAPH_VERBOSE=1 in the environment prints the graph, the reference's
 * sets and what happened.  This file holds the runners, the checks and
 * the libFuzzer entry points; the other parts are listed in harness.h. */
#include "harness.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static r_result ref;   /* large */

/* ---------------------------------------------------------- top receiver */

typedef struct top_rcvr {
    ex_env_pair env;
    atomic_int completions;
    atomic_int done;
    r_out out;
    bool bad;
} top_rcvr;

static void top_record(top_rcvr *t, uint8_t disp, const ex_value *v, size_t n, int code) {
    if (atomic_fetch_add(&t->completions, 1) == 0) {
        t->out.disp = disp;
        t->out.code = code;
        t->out.n = (uint8_t)(n > G_MAX_VALUES ? G_MAX_VALUES : n);
        if (disp == R_VALUE && !sg_ints_of(v, n, t->out.v)) t->bad = true;
    }
    atomic_store_explicit(&t->done, 1, memory_order_release);
}

static void top_set_value(void *self, const ex_value *v, size_t n) { top_record(self, R_VALUE, v, n, 0); }
static void top_set_error(void *self, ex_error e) { top_record(self, R_ERROR, NULL, 0, e.code); }
static void top_set_stopped(void *self) { top_record(self, R_STOPPED, NULL, 0, 0); }
static ex_env top_env(void *self) { return ex_env_of_pair(&((top_rcvr *)self)->env); }

static const ex_receiver_vtable top_vt = { top_set_value, top_set_error, top_set_stopped, top_env, NULL };

/* ----------------------------------------------------------------- threads */

static void *loop_main(void *arg) {
    (void)arg;
    (void)ex_run_loop_run(&G.loop);
    return NULL;
}

static void *stopper_main(void *arg) {
    unsigned delay = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < delay; i++) sched_yield();
    ex_stop_source_request_stop(&G.top_src);
    return NULL;
}

/* ------------------------------------------------------------- comparison */

static int failures_seen;

static void fail_report(const char *what, int node) {
    fprintf(stderr, "\n==== sender_graph: %s", what);
    if (node >= 0) fprintf(stderr, " (node #%d %s)", node, g_kind_name(G.g.nodes[node].kind));
    fprintf(stderr, "\n");
    g_dump(&G.g);
    if (node >= 0) {
        char buf[256];
        r_set_dump("  reference:", &ref.node[node]);
        node_rec *rc = &G.rec[node];
        int comps = atomic_load(&rc->completions);
        for (int k = 0; k < comps && k < 2; k++) {
            r_out_format(&rc->out[k], buf, sizeof buf);
            fprintf(stderr, "  actual: %s\n", buf);
        }
        fprintf(stderr, "  (started %d, completions %d)\n", atomic_load(&rc->started), comps);
    }
    failures_seen++;
    abort();
}

/* A TK_TWICE task's leaf child runs twice; every other node at most once. */
static int max_starts(unsigned i) {
    for (unsigned j = 0; j < G.g.nnodes; j++) {
        const g_node *nd = &G.g.nodes[j];
        if (nd->kind == G_TASK && (nd->task & TK_TWICE) && nd->child[0] == i) return 2;
    }
    return 1;
}

static void check_node(unsigned i) {
    const g_node *nd = &G.g.nodes[i];
    node_rec *rc = &G.rec[i];
    int started = atomic_load(&rc->started), comps = atomic_load(&rc->completions);
    if (started > max_starts(i)) fail_report("a node was started twice", (int)i);
    if (!started && comps) fail_report("a node completed without being started", (int)i);
    if (!started) return;
    if (comps != started) fail_report(comps > started ? "a node completed more than once" : "a started node never completed", (int)i);
    if (!ref.reached[i]) fail_report("a node ran that the reference says cannot start", (int)i);
    for (int k = 0; k < comps; k++) {
        if (rc->bad[k]) fail_report("a node sent a value that is not an int", (int)i);
        if (!r_set_contains(&ref.node[i], &rc->out[k])) fail_report("a node completed with an outcome the reference does not allow", (int)i);
    }
    if (nd->kind == G_BULK && rc->out[0].disp == R_VALUE) {
        for (unsigned j = 0; j < nd->shape; j++)
            if (atomic_load(&G.bulk_hits[i][j]) != 1) fail_report("a bulk completed with values without running every index once", (int)i);
    }
}

static void check_nodes(void) {
    const g_graph *g = &G.g;
    for (unsigned i = 0; i < g->nnodes; i++) check_node(i);
    /* Every consumer of a split sees the same result. */
    for (unsigned s = 0; s < g->nsplits; s++) {
        int first = -1;
        for (unsigned i = 0; i < g->nnodes; i++) {
            if (g->nodes[i].kind != G_SPLIT || g->nodes[i].split_id != s || !atomic_load(&G.rec[i].started)) continue;
            if (first < 0) {
                first = (int)i;
                continue;
            }
            if (!r_set_contains(&(r_set){ .n = 1, .o = { G.rec[first].out[0] } }, &G.rec[i].out[0]))
                fail_report("two consumers of one split got different results", (int)i);
        }
    }
}

/* ----------------------------------------------------------------- runners */

/* Where the top-level stop requests go: the scope in spawn mode (spawned
 * work sees the scope's token), else the top-level source. */
static void request_stop_now(void) {
    if (G.g.mode.spawn) ex_counting_scope_request_stop(&G.scope);
    else ex_stop_source_request_stop(&G.top_src);
}

/* Waits for *done, driving the run_loop unless its thread does; makes the
 * asynchronous stop request when asked to. */
static void drive_until(atomic_int *done, bool inject_stop) {
    for (unsigned it = 0; !atomic_load_explicit(done, memory_order_acquire); it++) {
        if (inject_stop && G.g.mode.stop == GM_STOP_ASYNC && it == G.g.mode.stop_delay) request_stop_now();
        if (G.g.mode.loop_thread || !ex_run_loop_run_one(&G.loop)) sched_yield();
    }
}

static void run_sync_wait(ex_sender *s, r_out *actual, bool *bad) {
    s = ex_write_env(s, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&G.top_src)));
    pthread_t stopper;
    bool stopper_on = G.g.mode.stop == GM_STOP_ASYNC;
    if (stopper_on && pthread_create(&stopper, NULL, stopper_main, (void *)(uintptr_t)G.g.mode.stop_delay)) abort();
    ex_result r = ex_sync_wait(s);
    if (stopper_on) pthread_join(stopper, NULL);
    actual->disp = r.disposition == EX_DISP_VALUE ? R_VALUE : r.disposition == EX_DISP_ERROR ? R_ERROR : R_STOPPED;
    actual->code = r.error.code;
    actual->n = (uint8_t)(r.n > G_MAX_VALUES ? G_MAX_VALUES : r.n);
    if (actual->disp == R_VALUE && !sg_ints_of(r.values, r.n, actual->v)) *bad = true;
    ex_result_destroy(&r);
}

static void run_receiver(ex_sender *s, r_out *actual, bool *bad) {
    static top_rcvr top;
    memset(&top, 0, sizeof top);
    ex_env_pair_init(&top.env, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&G.top_src)), ex_env_empty());
    if (G.g.mode.env_sched != GS_COUNT) {
        top.env.key2 = &ex_key_get_scheduler;
        top.env.value2 = ex_sched_value(sg_sched_of(G.g.mode.env_sched));
    }
    ex_receiver r = { &top_vt, &top };
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, r, &op);
    if (e.code) {
        actual->disp = R_ERROR;
        actual->code = e.code;
    } else {
        ex_start(op);
        drive_until(&top.done, true);
        ex_operation_free(op);
        if (atomic_load(&top.completions) != 1) fail_report("the top-level receiver completed more than once", -1);
        *actual = top.out;
        *bad = top.bad;
    }
    ex_sender_release(s);
}

static void launch_value(void *ctx, const ex_value *v, size_t n) { (void)ctx, sg_tap_record(TOP_REC, R_VALUE, v, n, 0); }
static void launch_error(void *ctx, ex_error e) { (void)ctx, sg_tap_record(TOP_REC, R_ERROR, NULL, 0, e.code); }
static void launch_stopped(void *ctx) { (void)ctx, sg_tap_record(TOP_REC, R_STOPPED, NULL, 0, 0); }

static bool launched(void) { return G.g.mode.spawn && G.g.nodes[G.g.root].kind == G_TASK; }

/* Spawn mode: the root goes into the run's scope, its completion is seen by
 * a tap around it (ex_spawn_env) or by the launch handlers (task roots). */
static void run_spawn(ex_sender *s, r_out *actual, bool *bad) {
    ex_scope_token tok = ex_counting_scope_token(&G.scope);
    ex_error e;
    if (launched()) {
        static const ex_task_handlers h = { launch_value, launch_error, launch_stopped, NULL };
        atomic_store(&G.rec[TOP_REC].started, 1);
        e = ex_task_launch(tok, sg_sched_of(ref_launch_sched(&G.g)), s, &h);
    } else {
        ex_env env = ex_env_empty();
        if (G.g.mode.env_sched != GS_COUNT) {
            ex_env_pair_init(&G.spawn_env, &ex_key_get_scheduler, ex_sched_value(sg_sched_of(G.g.mode.env_sched)), ex_env_empty());
            env = ex_env_of_pair(&G.spawn_env);
        }
        e = ex_spawn_env(sg_tap(s, TOP_REC), tok, env);
    }
    G.root_spawned = !e.code;
    if (e.code) {
        atomic_store(&G.rec[TOP_REC].started, 0);
        actual->disp = R_ERROR;
        actual->code = e.code;
        return;
    }
    drive_until(&G.top_done, true);
    node_rec *rc = &G.rec[TOP_REC];
    if (atomic_load(&rc->completions) != 1) fail_report("the spawned root completed more than once", -1);
    *actual = rc->out[0];
    *bad = rc->bad[0];
}

/* The scope's join, started like a graph: it waits for every spawned
 * future's work (and the spawned root). */
typedef struct join_rcvr {
    atomic_int done;
    r_out out;
    ex_env_pair env;  /* get_scheduler: the inline scheduler (the join completes where the last association ends) */
} join_rcvr;

static void join_set_value(void *self, const ex_value *v, size_t n) {
    join_rcvr *j = self;
    (void)v;
    j->out.disp = R_VALUE;
    j->out.n = (uint8_t)n;
    atomic_store_explicit(&j->done, 1, memory_order_release);
}

static void join_set_error(void *self, ex_error e) {
    join_rcvr *j = self;
    j->out.disp = R_ERROR;
    j->out.code = e.code;
    atomic_store_explicit(&j->done, 1, memory_order_release);
}

static void join_set_stopped(void *self) {
    join_rcvr *j = self;
    j->out.disp = R_STOPPED;
    atomic_store_explicit(&j->done, 1, memory_order_release);
}

static ex_env join_env(void *self) { return ex_env_of_pair(&((join_rcvr *)self)->env); }

static const ex_receiver_vtable join_vt = { join_set_value, join_set_error, join_set_stopped, join_env, NULL };

/* What the join must report: set_value, or the spawned root's error (the
 * scope keeps the first error of work spawned with ex_spawn). */
static r_out join_expected(const r_out *actual, bool spawned) {
    r_out o;
    memset(&o, 0, sizeof o);
    o.disp = R_VALUE;
    if (spawned && !launched() && actual->disp == R_ERROR) {
        o.disp = R_ERROR;
        o.code = actual->code;
    }
    return o;
}

static void join_scope(const r_out *actual, bool spawned) {
    static join_rcvr j;
    memset(&j, 0, sizeof j);
    ex_env_pair_init(&j.env, &ex_key_get_scheduler, ex_sched_value(ex_inline_scheduler()), ex_env_empty());
    ex_sender *s = ex_counting_scope_join(&G.scope);
    ex_operation *op = NULL;
    if (ex_connect_alloc(s, (ex_receiver){ &join_vt, &j }, &op).code) fail_report("the scope's join could not be connected", -1);
    ex_start(op);
    drive_until(&j.done, false);
    ex_operation_free(op);
    ex_sender_release(s);
    r_out want = join_expected(actual, spawned);
    if (!r_set_contains(&(r_set){ .n = 1, .o = { want } }, &j.out)) {
        char a[128], b[128];
        r_out_format(&j.out, a, sizeof a);
        r_out_format(&want, b, sizeof b);
        fprintf(stderr, "\njoin: %s, expected %s\n", a, b);
        fail_report("the scope's join completed with the wrong result", -1);
    }
    if (ex_counting_scope_destroy(&G.scope).code) fail_report("the scope could not be destroyed after its join", -1);
}

/* Children of tasks whose body never ran are still ours. */
static void release_task_children(void) {
    for (unsigned i = 0; i < G_MAX_NODES; i++) {
        ex_sender_release(atomic_exchange(&G.task_child[i], NULL));
        ex_sender_release(atomic_exchange(&G.task_child2[i], NULL));
    }
}

/* ------------------------------------------------------------------ setup */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    ex_set_default_allocator(&sg_counting_alloc);
    ex_pool_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.threads = 2;
    cfg.name_prefix = "fuzz";
    ex_error e = ex_pool_create(&cfg, &G.pool);
    if (e.code) {
        fprintf(stderr, "sender_graph: ex_pool_create failed: %s\n", e.msg);
        abort();
    }
    /* What get_allocator answers under the pool: its own arenas (A_POOL). */
    ex_env_pair pe;
    ex_env_pair_init(&pe, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(G.pool)), ex_env_empty());
    G.pool_alloc = ex_get_allocator(ex_env_of_pair(&pe));
    if (G.pool_alloc == &sg_counting_alloc) {
        fprintf(stderr, "sender_graph: the pool has no allocator of its own (the reference assumes one)\n");
        abort();
    }
    const char *v = getenv("GRAPH_VERBOSE");
    G.verbose = v && *v && *v != '0';
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    g_graph *g = &G.g;
    g_decode(g, data, size);
    if (G.verbose) g_dump(g);

    long baseline = atomic_load(&sg_cnt_in_use);
    memset(G.rec, 0, sizeof G.rec);
    memset(G.bulk_hits, 0, sizeof G.bulk_hits);
    atomic_store(&G.fn_bad, 0);
    atomic_store(&G.top_done, 0);
    G.root_spawned = false;
    atomic_store(&G.twice_differ, 0);
    atomic_store(&G.cb_bad, 0);
    ex_stop_source_init(&G.top_src);
    for (unsigned i = 0; i < g->nnodes; i++) {
        ex_stop_source_init(&G.node_src[i]);
        if (g->nodes[i].kind == G_STOP_ENV && g->nodes[i].stop_env == SE_STOPPED) ex_stop_source_request_stop(&G.node_src[i]);
    }
    if (ex_run_loop_init(&G.loop).code) abort();
    if (ex_counting_scope_init(&G.scope).code) abort();
    pthread_t loop_thread;
    if (g->mode.loop_thread && pthread_create(&loop_thread, NULL, loop_main, NULL)) abort();

    /* Allocation failures (the fault allocator is also a task option:
     * initialise it before the algorithms' inline runs, which use none). */
    ex_fault_allocator_init(&G.fault, &sg_counting_alloc);
    ex_fault_allocator_init(&G.stack_fault, &sg_guarded_alloc);
    sg_algo_prepare();
    if (g->mode.fault != GM_FAULT_NONE) {
        uint32_t p = g->mode.fault_param;
        if (g->mode.fault == GM_FAULT_ENV || (p & 1)) {
            ex_fault_allocator_fail_nth(&G.fault, (p >> 1) % 48 + 1);
            ex_fault_allocator_fail_nth(&G.stack_fault, (p >> 1) % 3 + 1);
        } else {
            ex_fault_allocator_fail_randomly(&G.fault, g->mode.fault_seed, 20000u + (p >> 1) * 2000u);
            ex_fault_allocator_fail_randomly(&G.stack_fault, g->mode.fault_seed, 250000u);
        }
    }
    if (g->mode.fault == GM_FAULT_DEFAULT) ex_set_default_allocator(ex_fault_allocator_get(&G.fault));

    /* spawn_future nodes start their work here, while the graph is built. */
    ex_sender *s = sg_build_tree(g->root);
    if (g->mode.fault == GM_FAULT_ENV)
        s = ex_write_env(s, &ex_key_get_allocator, ex_alloc_value(ex_fault_allocator_get(&G.fault)));
    if (g->mode.stop == GM_STOP_BEFORE) request_stop_now();

    r_out actual;
    memset(&actual, 0, sizeof actual);
    bool actual_bad = false;
    if (g->mode.spawn) run_spawn(s, &actual, &actual_bad);
    else if (g->mode.use_sync_wait) run_sync_wait(s, &actual, &actual_bad);
    else run_receiver(s, &actual, &actual_bad);

    /* The join needs no failing allocator; spawned work may still run. */
    ex_set_default_allocator(&sg_counting_alloc);
    join_scope(&actual, G.root_spawned);
    release_task_children();

    ex_run_loop_finish(&G.loop);
    if (g->mode.loop_thread) pthread_join(loop_thread, NULL);
    else while (ex_run_loop_run_one(&G.loop)) {}
    if (ex_run_loop_destroy(&G.loop).code) fail_report("the run_loop still had work after the graph completed", -1);

    ex_alloc_stats fst, sst;
    ex_allocator_stats(ex_fault_allocator_get(&G.fault), &fst);
    ex_allocator_stats(ex_fault_allocator_get(&G.stack_fault), &sst);
    fst.failures += sst.failures;
    r_params params = { fst.failures > 0 };
    ref_run(g, &params, &ref);
    if (G.verbose) {
        char buf[256];
        r_out_format(&actual, buf, sizeof buf);
        fprintf(stderr, "allocation failures: %llu\n", (unsigned long long)fst.failures);
        r_set_dump("reference (top):", &ref.top);
        fprintf(stderr, "actual (top): %s\n", buf);
        for (unsigned i = 0; i < g->nnodes; i++) {
            char label[64];
            snprintf(label, sizeof label, "  #%u %s%s:", i, g_kind_name(g->nodes[i].kind), ref.reached[i] ? "" : " (unreached)");
            r_set_dump(label, &ref.node[i]);
            for (int k = 0; k < atomic_load(&G.rec[i].completions) && k < 2; k++) {
                r_out_format(&G.rec[i].out[k], buf, sizeof buf);
                fprintf(stderr, "      ran: %s\n", buf);
            }
        }
    }

    if (atomic_load(&G.fn_bad)) fail_report("a callback saw values that are not ints (or an index out of range)", -1);
    if (atomic_load(&G.cb_bad)) {
        fprintf(stderr, "\n(at %zu)\n", G.cb_at);
        fail_report(G.cb_why, atomic_load(&G.cb_bad) - 1);
    }
    if (atomic_load(&G.twice_differ)) fail_report("a task awaiting a just twice got two different values", -1);
    if (actual_bad) fail_report("the graph completed with a value that is not an int", -1);
    if (!r_set_contains(&ref.top, &actual)) {
        char buf[256];
        r_out_format(&actual, buf, sizeof buf);
        fprintf(stderr, "\nactual (top): %s\n", buf);
        r_set_dump("reference (top):", &ref.top);
        fail_report("the graph completed with an outcome the reference does not allow", -1);
    }
    if (g->mode.taps) check_nodes();
    if (G.top_src.head) fail_report("a stop callback is still registered on the top-level source", -1);
    for (unsigned i = 0; i < g->nnodes; i++)
        if (G.node_src[i].head) fail_report("a stop callback is still registered on a stop_env source", (int)i);
    /* An operation may still be returning on a worker after the completion
     * reached us (a split consumer's start keeps the shared state until it
     * returns): give memory a bounded moment to come back. */
    long in_use = atomic_load(&sg_cnt_in_use);
    for (int waited = 0; in_use != baseline && waited < 2000; waited++) {
        struct timespec ms = { 0, 1000 * 1000 };
        nanosleep(&ms, NULL);
        in_use = atomic_load(&sg_cnt_in_use);
    }
    if (in_use != baseline) {
        fprintf(stderr, "\nblocks in use: %ld, before the run: %ld\n", in_use, baseline);
        fail_report("memory allocated through cexec was not freed", -1);
    }
    /* Every operation is gone (its memory came back): the arrays may go. */
    sg_algo_free();
    return 0;
}
