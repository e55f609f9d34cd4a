/* SPDX-License-Identifier: MIT */
/* graph.c - the soak's random graphs: generation from the operation's
 * seed, and how a node becomes a sender.  Every function a node runs
 * counts its calls (at most once per operation) and checks its inputs;
 * task bodies check where they run after every await. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "soak.h"

uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* ------------------------------------------------------------ generation */

typedef struct gen {
    graph *g;
    uint64_t *rng;
    slot *owner;
} gen;

static int new_node(gen *G, nkind k) {
    graph *g = G->g;
    if (g->count >= MAX_NODES) {  /* a bug of the generator, not of cexec */
        fprintf(stderr, "soak: graph generator overflow\n");
        abort();
    }
    node *nd = &g->n[g->count];
    memset(nd, 0, sizeof *nd);
    nd->kind = (uint8_t)k;
    nd->owner = G->owner;
    nd->fail_at = NO_FAIL;
    for (int j = 0; j < MAX_KIDS; j++) nd->kids[j] = -1;
    return g->count++;
}

static void set_kid(gen *G, int parent, int j, int kid) {
    G->g->n[parent].kids[j] = (int8_t)kid;
    if (G->g->n[parent].nkids < j + 1) G->g->n[parent].nkids = (uint8_t)(j + 1);
}

/* Mostly values, so that most graphs reach their deeper nodes. */
static int gen_leaf(gen *G) {
    uint32_t r = rng_below(G->rng, 100);
    nkind k = r < 76 ? N_JUST : r < 90 ? N_JUST_ERROR : N_JUST_STOPPED;
    int i = new_node(G, k);
    G->g->n[i].k = rng_below(G->rng, k == N_JUST ? 1000 : 16);
    return i;
}

static uint8_t pick_sched(gen *G) {
    uint32_t r = rng_below(G->rng, 100);
    return (uint8_t)(r < 45 ? SCH_POOL : r < 75 ? SCH_LOOP : SCH_INLINE);
}

static int gen_node(gen *G, int depth, bool has_sched);
static int gen_task(gen *G, int depth, bool has_sched);

/* when_all of two child tasks, each awaiting small graphs. */
static int gen_task_pair(gen *G, int depth) {
    int w = new_node(G, N_WHEN_ALL);
    for (int j = 0; j < 2; j++) set_kid(G, w, j, gen_task(G, depth + 2, true));
    return w;
}

static int gen_task(gen *G, int depth, bool has_sched) {
    if (!has_sched) {  /* a task needs a scheduler in its environment */
        int w = new_node(G, N_STARTS_ON);
        G->g->n[w].sched = pick_sched(G);
        set_kid(G, w, 0, gen_task(G, depth + 1, true));
        return w;
    }
    int t = new_node(G, N_TASK);
    G->g->tasks++;
    uint8_t f = 0;
    if (rng_below(G->rng, 100) < 30) f |= T_CATCH;
    if (rng_below(G->rng, 100) < 35) f |= T_HOP;
    if (rng_below(G->rng, 100) < 8) f |= T_WITH_ERROR;
    if (rng_below(G->rng, 100) < 25) f |= T_STACK_FA;
    if (rng_below(G->rng, 100) < 50) f |= T_SIG;
    if (rng_below(G->rng, 100) < 10) f |= T_INLINE;
    int nk = 1 + (int)rng_below(G->rng, 3);
    for (int j = 0; j < nk; j++) {
        bool pair = depth < MAX_DEPTH && G->g->tasks + 2 <= MAX_TASKS && G->g->count < SOFT_NODES &&
                    rng_below(G->rng, 4) == 0;
        set_kid(G, t, j, pair ? gen_task_pair(G, depth + 1) : gen_node(G, depth + 1, true));
    }
    node *nd = &G->g->n[t];
    nd->flags = f;
    nd->hop_at = (uint8_t)rng_below(G->rng, (uint32_t)nk);
    nd->k = rng_below(G->rng, 1000);
    return t;
}

static int gen_split(gen *G, int depth) {
    int i = new_node(G, N_SPLIT);
    set_kid(G, i, 0, gen_node(G, depth + 1, false));  /* split's child sees no scheduler */
    node *nd = &G->g->n[i];
    nd->ncons = (uint8_t)(2 + rng_below(G->rng, 2));
    for (int c = 0; c < nd->ncons; c++) nd->styles[c] = (uint8_t)rng_below(G->rng, 4);
    nd->sched = pick_sched(G);
    return i;
}

static int gen_bulk(gen *G, int depth, bool has_sched) {
    int i = new_node(G, N_BULK);
    set_kid(G, i, 0, gen_node(G, depth + 1, has_sched));
    node *nd = &G->g->n[i];
    nd->shape = rng_below(G->rng, MAX_SHAPE);
    if (nd->shape && rng_below(G->rng, 5) == 0) nd->fail_at = rng_below(G->rng, nd->shape);
    nd->fn = (uint8_t)rng_below(G->rng, 3);
    nd->grain = rng_below(G->rng, 5);
    return i;
}

static int gen_let(gen *G, nkind k, int depth, bool has_sched) {
    int i = new_node(G, k);
    set_kid(G, i, 0, gen_node(G, depth + 1, has_sched));
    if (rng_below(G->rng, 2)) set_kid(G, i, 1, gen_node(G, depth + 1, has_sched));
    G->g->n[i].k = rng_below(G->rng, 1000);
    return i;
}

/* Inner-node weights: then, upon_error, upon_stopped, let_value, let_error,
 * let_stopped, when_all, split, bulk, continues_on, starts_on, task. */
static const nkind inner_kinds[] = { N_THEN, N_UPON_ERROR, N_UPON_STOPPED, N_LET_VALUE, N_LET_ERROR, N_LET_STOPPED,
                                     N_WHEN_ALL, N_SPLIT, N_BULK, N_CONTINUES_ON, N_STARTS_ON, N_TASK };
static const uint32_t inner_weights[] = { 14, 6, 6, 8, 5, 3, 11, 5, 6, 8, 8, 10 };

static nkind pick_inner(gen *G) {
    uint32_t total = 0, n = (uint32_t)(sizeof inner_weights / sizeof inner_weights[0]);
    for (uint32_t j = 0; j < n; j++) total += inner_weights[j];
    uint32_t r = rng_below(G->rng, total);
    for (uint32_t j = 0; j < n; j++) {
        if (r < inner_weights[j]) return inner_kinds[j];
        r -= inner_weights[j];
    }
    return N_THEN;
}

static int gen_node(gen *G, int depth, bool has_sched) {
    if (depth >= MAX_DEPTH || G->g->count >= SOFT_NODES || rng_below(G->rng, 100) < (uint32_t)(15 + depth * 12))
        return gen_leaf(G);
    nkind k = pick_inner(G);
    if (k == N_TASK && G->g->tasks >= MAX_TASKS) k = N_THEN;
    int i;
    switch (k) {
    case N_TASK: return gen_task(G, depth, has_sched);
    case N_SPLIT: return gen_split(G, depth);
    case N_BULK: return gen_bulk(G, depth, has_sched);
    case N_LET_VALUE:
    case N_LET_ERROR:
    case N_LET_STOPPED: return gen_let(G, k, depth, has_sched);
    case N_WHEN_ALL: {
        i = new_node(G, k);
        int nk = 1 + (int)rng_below(G->rng, 3);
        for (int j = 0; j < nk; j++) set_kid(G, i, j, gen_node(G, depth + 1, has_sched));
        return i;
    }
    case N_CONTINUES_ON:
    case N_STARTS_ON:
        i = new_node(G, k);
        G->g->n[i].sched = pick_sched(G);
        set_kid(G, i, 0, gen_node(G, depth + 1, has_sched || k == N_STARTS_ON));
        return i;
    default:  /* then, upon_error, upon_stopped */
        i = new_node(G, k);
        set_kid(G, i, 0, gen_node(G, depth + 1, has_sched));
        if (k == N_THEN) {
            uint32_t r = rng_below(G->rng, 100);
            G->g->n[i].fn = (uint8_t)(r < 10 ? F_FAIL : r < 55 ? F_ADD : F_MUL);
        }
        G->g->n[i].k = rng_below(G->rng, 1000);
        return i;
    }
}

void graph_generate(graph *g, uint64_t *rng, bool root_task, slot *owner) {
    g->count = 0;
    g->tasks = 0;
    gen G = { g, rng, owner };
    if (root_task) gen_task(&G, 0, true);
    else gen_node(&G, 0, true);
}

void graph_release(graph *g) {
    for (int i = 0; i < g->count; i++) {
        ex_sender_release(g->n[i].split);
        g->n[i].split = NULL;
    }
}

/* ------------------------------------------------------------ node functions */

static void once(node *nd, uint32_t *ctr, const char *what) {
    if (__atomic_fetch_add(ctr, 1, __ATOMIC_RELAXED) != 0) node_bad(nd, what);
}

static bool one_int(node *nd, const ex_value *in, size_t n, int64_t *v) {
    if (n != 1 || in[0].type != EX_T_INT) {
        node_bad(nd, "a function got values other than one int");
        return false;
    }
    *v = in[0].as.i;
    return true;
}

/* The entry of a function over one int that must run once (ctr counts its
 * runs): false (a fault noted) if the input is not one int. */
static bool once_with_int(node *nd, uint32_t *ctr, const char *twice, const ex_value *in, size_t n, int64_t *v) {
    once(nd, ctr, twice);
    return one_int(nd, in, n, v);
}

static ex_error then_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    node *nd = ctx;
    int64_t v;
    if (!once_with_int(nd, &nd->calls, "then ran twice", in, n, &v)) return ex_err(EX_EINVAL, "soak: bad input");
    switch (nd->fn) {
    case F_ADD: out[0] = ex_int(vmask(v + nd->k)); return ex_ok();
    case F_MUL: out[0] = ex_int(vmask(v * 3 + nd->k)); return ex_ok();
    default: return ex_err(EX_EUSER + ERR_THEN + (int)(nd->k % 8), "soak: then failed");
    }
}

static ex_error upon_error_fn(void *ctx, ex_error err, ex_value *out) {
    node *nd = ctx;
    once(nd, &nd->calls, "upon_error ran twice");
    out[0] = ex_int(vmask((int64_t)err.code * 100 + nd->k));
    return ex_ok();
}

static ex_error upon_stopped_fn(void *ctx, ex_value *out) {
    node *nd = ctx;
    once(nd, &nd->calls, "upon_stopped ran twice");
    out[0] = ex_int(nd->k);
    return ex_ok();
}

/* Sums the ints of a when_all; with a node, counts the call. */
static ex_error sum_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    node *nd = ctx;
    if (nd) once(nd, &nd->calls, "when_all's sum ran twice");
    int64_t sum = 0;
    for (size_t j = 0; j < n; j++) {
        if (in[j].type != EX_T_INT) return ex_err(EX_EINVAL, "soak: when_all gave a non-int");
        sum += in[j].as.i;
    }
    out[0] = ex_int(vmask(sum));
    return ex_ok();
}

/* What a let's function returns: just(b), or b added to its body's value. */
static ex_sender *let_result(node *nd, int64_t base) {
    int64_t b = vmask(base + nd->k);
    if (nd->kids[1] < 0) return ex_just(ex_int(b));
    ex_sender *body = graph_build(nd->owner, nd->kids[1]);
    return ex_then(ex_when_all(ex_just(ex_int(b)), body), sum_fn, NULL, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
}

static ex_sender *let_value_fn(void *ctx, const ex_value *in, size_t n) {
    node *nd = ctx;
    int64_t v = 0;
    once(nd, &nd->calls, "let_value's function ran twice");
    one_int(nd, in, n, &v);
    return let_result(nd, v);
}

static ex_sender *let_error_fn(void *ctx, ex_error err) {
    node *nd = ctx;
    once(nd, &nd->calls, "let_error's function ran twice");
    return let_result(nd, err.code);
}

static ex_sender *let_stopped_fn(void *ctx) {
    node *nd = ctx;
    once(nd, &nd->calls, "let_stopped's function ran twice");
    return let_result(nd, 0);
}

static ex_error bulk_index(node *nd, size_t i) {
    if (i >= nd->shape) {
        node_bad(nd, "bulk index out of its shape");
        return ex_err(EX_EINVAL, "soak: bulk index out of range");
    }
    if (__atomic_fetch_add(&nd->idx_runs[i], 1, __ATOMIC_RELAXED) != 0) node_bad(nd, "a bulk index ran twice");
    bump(&W.bulk_indices, 1);
    if (i == nd->fail_at) return ex_err(EX_EUSER + ERR_BULK, "soak: bulk index failed");
    return ex_ok();
}

static ex_error bulk_fn(void *ctx, size_t i, const ex_value *v, size_t n) {
    int64_t x;
    if (!one_int(ctx, v, n, &x)) return ex_err(EX_EINVAL, "soak: bad input");
    return bulk_index(ctx, i);
}

static ex_error chunk_fn(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    int64_t x;
    if (!one_int(ctx, v, n, &x)) return ex_err(EX_EINVAL, "soak: bad input");
    ex_error first = ex_ok();
    for (size_t i = begin; i < end; i++) {
        ex_error e = bulk_index(ctx, i);
        if (e.code && !first.code) first = e;
    }
    return first;
}

/* After a bulk completed with values: every index ran exactly once. */
static ex_error bulk_check_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    node *nd = ctx;
    int64_t v;
    if (!once_with_int(nd, &nd->calls2, "bulk completed twice", in, n, &v)) return ex_err(EX_EINVAL, "soak: bad input");
    for (uint32_t i = 0; i < nd->shape; i++)
        if (__atomic_load_n(&nd->idx_runs[i], __ATOMIC_RELAXED) != 1) node_bad(nd, "bulk completed with values but an index did not run exactly once");
    out[0] = ex_int(v);
    return ex_ok();
}

static ex_sender *deferred_consumer_fn(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    return ex_sender_retain(((node *)ctx)->split);
}

/* ------------------------------------------------------------ tasks */

static const ex_sig sig_int = { 1, { EX_T_INT } };

static void check_where(slot *s, const node *nd, ex_task *t) {
    if (nd->flags & T_INLINE) return;  /* resumes wherever the await completed */
    if (!on_scheduler(ex_task_scheduler(t))) __atomic_fetch_add(&s->bad_where, 1, __ATOMIC_RELAXED);
}

static ex_scheduler other_sched(ex_scheduler home, int64_t k) {
    for (int j = 0; j < SCH_COUNT; j++) {
        int c = (int)((k + j) % SCH_COUNT);
        if (!ex_scheduler_equal(W.sch[c], home)) return W.sch[c];
    }
    return W.sch[SCH_POOL];
}

/* Moves the task to `to`; false when the task is stopped. */
static bool move_to(slot *s, ex_task *t, ex_scheduler to) {
    ex_scheduler before = ex_task_scheduler(t);
    ex_scheduler prev = ex_change_coroutine_scheduler(t, to);
    if (!ex_scheduler_equal(prev, before)) __atomic_fetch_add(&s->bad_prev, 1, __ATOMIC_RELAXED);
    if (ex_task_is_stopped(t)) return false;
    if (!ex_scheduler_equal(ex_task_scheduler(t), to)) {
        __atomic_fetch_add(&s->moves_failed, 1, __ATOMIC_RELAXED);
        return true;
    }
    __atomic_fetch_add(&s->moves, 1, __ATOMIC_RELAXED);
    bump(&W.moves, 1);
    if (!on_scheduler(to)) __atomic_fetch_add(&s->bad_where, 1, __ATOMIC_RELAXED);
    return true;
}

static ex_task_result task_body(ex_task *t, void *arg) {
    node *nd = arg;
    slot *s = nd->owner;
    once(nd, &nd->calls, "a task body ran twice");
    bump(&W.task_bodies, 1);
    check_where(s, nd, t);
    int64_t acc = nd->k;
    for (int i = 0; i < nd->nkids; i++) {
        ex_await_result r = ex_await(t, graph_build(s, nd->kids[i]));
        if (r.status == EX_AWAIT_STOPPED) {
            if (!ex_task_is_stopped(t)) __atomic_fetch_add(&s->bad_task, 1, __ATOMIC_RELAXED);
            return ex_task_i64(-1);  /* ignored: the task completes stopped */
        }
        if (r.status == EX_AWAIT_ERROR) {
            if (!(nd->flags & T_CATCH)) return ex_task_with_error(r.error);
            acc = vmask(acc + (int64_t)r.error.code * 100);
        } else if (r.n != 1 || r.v[0].type != EX_T_INT) {
            __atomic_fetch_add(&s->bad_task, 1, __ATOMIC_RELAXED);
        } else {
            acc = vmask(acc + r.v[0].as.i);
        }
        check_where(s, nd, t);
        if ((nd->flags & T_HOP) && i == nd->hop_at) {
            ex_scheduler home = ex_task_scheduler(t);
            if (!move_to(s, t, other_sched(home, nd->k)) || !move_to(s, t, home)) return ex_task_i64(-1);
        }
    }
    if (nd->flags & T_WITH_ERROR) return ex_task_with_error(ex_err(EX_EUSER + ERR_TASK, "soak: task with_error"));
    return ex_task_i64(acc);
}

static ex_sender *build_task(slot *s, node *nd) {
    ex_task_options o;
    memset(&o, 0, sizeof o);
    if (nd->flags & T_STACK_FA) o.stack_allocator = &s->tr.base;
    if (s->aroute == AR_TASK_OPT) o.allocator = &s->tr.base;
    if (nd->flags & T_INLINE) o.affinity = EX_TASK_INLINE;
    if (nd->flags & T_SIG) o.value_sig = &sig_int;
    return ex_task_create(task_body, nd, &o);
}

/* ------------------------------------------------------------ building */

static ex_sender *build_split(slot *s, node *nd) {
    ex_sender *shared = ex_split(graph_build(s, nd->kids[0]));
    if (nd->split) node_bad(nd, "a split node was built twice");
    ex_sender_release(nd->split);
    nd->split = shared;  /* keeps a reference for the deferred consumers */
    ex_sender *cons[MAX_KIDS];
    ex_scheduler sch = W.sch[nd->sched];
    for (int c = 0; c < nd->ncons; c++) {
        switch (nd->styles[c]) {
        case C_DIRECT: cons[c] = ex_sender_retain(shared); break;
        case C_CONTINUES: cons[c] = ex_continues_on(ex_sender_retain(shared), sch); break;
        case C_STARTS: cons[c] = ex_starts_on(sch, ex_sender_retain(shared)); break;
        default:  /* connected only once an earlier hop has run */
            cons[c] = ex_let_value(ex_starts_on(sch, ex_just(ex_int(0))), deferred_consumer_fn, nd, EX_SIG(EX_T_INT));
            break;
        }
    }
    bump(&W.split_consumers, nd->ncons);
    return ex_then(ex_when_all_n(cons, nd->ncons), sum_fn, nd, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
}

static ex_sender *build_bulk(slot *s, node *nd) {
    ex_sender *c = graph_build(s, nd->kids[0]), *b;
    switch (nd->fn) {
    case B_PLAIN: b = ex_bulk(c, EX_PAR, nd->shape, bulk_fn, nd); break;
    case B_GRAIN: b = ex_bulk_grain(c, EX_PAR, nd->shape, nd->grain + 1, bulk_fn, nd); break;
    default: b = ex_bulk_chunked(c, EX_PAR, nd->shape, nd->grain, chunk_fn, nd); break;
    }
    return ex_then(b, bulk_check_fn, nd, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

ex_sender *graph_build(slot *s, int i) {
    node *nd = &s->g.n[i];
    ex_sender *kids[MAX_KIDS];
    switch ((nkind)nd->kind) {
    case N_JUST: return ex_just(ex_int(nd->k));
    case N_JUST_ERROR: return ex_just_error(ex_err(EX_EUSER + ERR_JUST + (int)nd->k, "soak: just_error"));
    case N_JUST_STOPPED: return ex_just_stopped();
    case N_THEN: return ex_then(graph_build(s, nd->kids[0]), then_fn, nd, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    case N_UPON_ERROR: return ex_upon_error(graph_build(s, nd->kids[0]), upon_error_fn, nd, EX_SIG(EX_T_INT));
    case N_UPON_STOPPED: return ex_upon_stopped(graph_build(s, nd->kids[0]), upon_stopped_fn, nd, EX_SIG(EX_T_INT));
    case N_LET_VALUE: return ex_let_value(graph_build(s, nd->kids[0]), let_value_fn, nd, EX_SIG(EX_T_INT));
    case N_LET_ERROR: return ex_let_error(graph_build(s, nd->kids[0]), let_error_fn, nd);
    case N_LET_STOPPED: return ex_let_stopped(graph_build(s, nd->kids[0]), let_stopped_fn, nd);
    case N_WHEN_ALL:
        for (int j = 0; j < nd->nkids; j++) kids[j] = graph_build(s, nd->kids[j]);
        return ex_then(ex_when_all_n(kids, nd->nkids), sum_fn, nd, EX_SIG_VARIADIC, EX_SIG(EX_T_INT));
    case N_SPLIT: return build_split(s, nd);
    case N_BULK: return build_bulk(s, nd);
    case N_CONTINUES_ON: return ex_continues_on(graph_build(s, nd->kids[0]), W.sch[nd->sched]);
    case N_STARTS_ON: return ex_starts_on(W.sch[nd->sched], graph_build(s, nd->kids[0]));
    case N_TASK: return build_task(s, nd);
    default: return ex_invalid_sender(EX_EINVAL, "soak: unknown node");
    }
}

/* ------------------------------------------------------------ printing */

typedef struct sbuf {
    char *p;
    size_t size, len;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    if (b->len >= b->size) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->p + b->len, b->size - b->len, fmt, ap);
    va_end(ap);
    if (n > 0) b->len += (size_t)n;
}

static const char *sched_names[SCH_COUNT] = { "inline", "pool", "loop" };

static void fmt_node(const graph *g, int i, sbuf *b) {
    const node *nd = &g->n[i];
    static const char *names[N_KINDS] = { "just", "just_error", "just_stopped", "then", "upon_error", "upon_stopped",
                                          "let_value", "let_error", "let_stopped", "when_all", "split", "bulk",
                                          "continues_on", "starts_on", "task" };
    put(b, "%s", names[nd->kind]);
    switch ((nkind)nd->kind) {
    case N_JUST:
    case N_JUST_ERROR: put(b, "(%lld)", (long long)nd->k); return;
    case N_JUST_STOPPED: return;
    case N_THEN: put(b, "[%s%lld]", nd->fn == F_ADD ? "+" : nd->fn == F_MUL ? "*3+" : "fail", (long long)nd->k); break;
    case N_SPLIT: put(b, "[%u consumers @%s]", nd->ncons, sched_names[nd->sched]); break;
    case N_BULK:
        put(b, "[%u%s%s g%u]", nd->shape, nd->fail_at != NO_FAIL ? " fails" : "",
            nd->fn == B_PLAIN ? "" : nd->fn == B_GRAIN ? " grain" : " chunked", nd->grain);
        break;
    case N_CONTINUES_ON:
    case N_STARTS_ON: put(b, "@%s", sched_names[nd->sched]); break;
    case N_TASK: put(b, "[f%02x hop%u]", nd->flags, nd->hop_at); break;
    default: break;
    }
    put(b, "(");
    for (int j = 0; j < nd->nkids; j++) {
        if (j) put(b, ", ");
        if (nd->kids[j] < 0) put(b, "-");
        else fmt_node(g, nd->kids[j], b);
    }
    put(b, ")");
}

void graph_format(const graph *g, int i, char *buf, size_t size) {
    sbuf b = { buf, size, 0 };
    if (size) buf[0] = 0;
    fmt_node(g, i, &b);
}
