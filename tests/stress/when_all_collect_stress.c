/* SPDX-License-Identifier: MIT */
/* when_all_collect_stress.c - ex_when_all_collect_n over up to 48
 * children on a pool: children of 0..3 values, children that send a
 * tuple, children that fail or complete stopped; some hop onto the pool
 * (starts_on), and in some rounds the collect itself starts on a worker
 * (the fork-join path); another thread requests stop on the receiver's
 * token at a random moment.  Every collect completes exactly once, with a
 * disposition consistent with its children and the stop request; a value
 * holds every child's values in order (checked while they are lent, on
 * the completing thread); every block of a round is freed by its end. */
#include <string.h>

#include "stress_util.h"

enum { ROUNDS = 2000, MAX_CHILDREN = 48 };
enum { M_VALUES, M_TUPLE, M_ERROR, M_STOPPED };
enum { PLAN_NONE, PLAN_BEFORE_START, PLAN_RACE };

static uint32_t stop_fired;
static void request_stop(void *src) {
    if (ex_stop_source_request_stop(src)) __atomic_store_n(&stop_fired, 1, __ATOMIC_RELAXED);
}

/* -------------------------------------------------------------- children */

typedef struct child_ctx {
    int mode;
    uint8_t arity;        /* M_VALUES: 0..3 */
    int64_t base;         /* value k is base + k */
    int code;
    uint32_t runs;
    ex_value tv[2];       /* M_TUPLE: the tuple's storage (lent to the collect) */
    ex_tuple t;
} child_ctx;

static ex_error values_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    child_ctx *c = ctx;
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    for (uint8_t k = 0; k < c->arity; k++) out[k] = ex_int(c->base + k);
    return ex_ok();
}

static ex_error tuple_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    child_ctx *c = ctx;
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    c->tv[0] = ex_int(c->base);
    c->tv[1] = ex_str("t");
    c->t = (ex_tuple){ 7, 2, c->tv };
    out[0] = ex_tuple_value(&c->t);
    return ex_ok();
}

static ex_error err_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    child_ctx *c = ctx;
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    return ex_error_format(c->code, "when_all_collect_stress: injected error %d", c->code);
}

static ex_sender *stopped_fn(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    child_ctx *c = ctx;
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    return ex_just_stopped();
}

/* The child's work, on the pool: after a schedule, or hopping there. */
static ex_sender *make_child(ex_scheduler sch, child_ctx *c, bool hop) {
    static const ex_sig ints[4] = { { 0, { 0 } },
                                    { 1, { EX_T_INT } },
                                    { 2, { EX_T_INT, EX_T_INT } },
                                    { 3, { EX_T_INT, EX_T_INT, EX_T_INT } } };
    ex_sender *start = hop ? ex_just() : ex_schedule(sch);
    ex_sender *work;
    switch (c->mode) {
    case M_VALUES: work = ex_then(start, values_fn, c, EX_SIG0, ints[c->arity]); break;
    case M_TUPLE: work = ex_then(start, tuple_fn, c, EX_SIG0, EX_SIG(EX_T_TUPLE)); break;
    case M_ERROR: work = ex_then(start, err_fn, c, EX_SIG0, EX_SIG(EX_T_INT)); break;
    default: work = ex_let_value(start, stopped_fn, c, EX_SIG0); break;
    }
    return hop ? ex_starts_on(sch, work) : work;
}

/* ------------------------------------------- the value, checked while lent */

static child_ctx ctx[MAX_CHILDREN];
static size_t round_n;
static bool values_ok;   /* written by the completion, read after srec_wait */

static bool element_ok(const ex_value *e, const child_ctx *c) {
    if (e->type != EX_T_TUPLE || !e->as.tuple || e->as.tuple->index != 0) return false;
    const ex_tuple *t = e->as.tuple;
    if (c->mode == M_TUPLE) {
        if (t->n != 1 || t->v[0].type != EX_T_TUPLE) return false;
        const ex_tuple *in = t->v[0].as.tuple;
        return in != &c->t && in->index == 7 && in->n == 2 && in->v[0].type == EX_T_INT && in->v[0].as.i == c->base &&
               in->v[1].type == EX_T_STR && strcmp(in->v[1].as.s, "t") == 0;
    }
    if (t->n != c->arity) return false;
    for (uint32_t k = 0; k < t->n; k++)
        if (t->v[k].type != EX_T_INT || t->v[k].as.i != c->base + k) return false;
    return true;
}

static void check_value(srec *r, int disp) {
    if (disp != D_VALUE) return;
    bool ok = r->n == 1 && r->v[0].type == EX_T_TUPLE && r->v[0].as.tuple && r->v[0].as.tuple->n == round_n;
    for (size_t i = 0; ok && i < round_n; i++) ok = element_ok(&r->v[0].as.tuple->v[i], &ctx[i]);
    values_ok = ok;
}

/* ------------------------------------------------------- checks of a round */

typedef struct round_view {
    bool any_error, any_stopped, error_ran, stopped_ran, all_ran_once, none_ran, none_twice;
} round_view;

static round_view view_of_round(size_t n) {
    round_view w = { false, false, false, false, true, true, true };
    for (size_t i = 0; i < n; i++) {
        uint32_t runs = __atomic_load_n(&ctx[i].runs, __ATOMIC_RELAXED);
        w.any_error |= ctx[i].mode == M_ERROR;
        w.any_stopped |= ctx[i].mode == M_STOPPED;
        if (runs > 1) w.none_twice = false;
        if (runs != 1) w.all_ran_once = false;
        if (runs) w.none_ran = false;
        if (runs && ctx[i].mode == M_ERROR) w.error_ran = true;
        if (runs && ctx[i].mode == M_STOPPED) w.stopped_ran = true;
    }
    return w;
}

static void check_round(const srec *rec, size_t n, int plan, bool stop_requested, int round, int *checks) {
    round_view w = view_of_round(n);
    CHECK(w.none_twice, "round %d: a child ran more than once", round);
    (*checks)++;
    switch (rec->disp) {
    case D_VALUE:
        CHECK(!w.any_error && !w.any_stopped, "round %d: value though a child was made to fail/stop", round);
        CHECK(!stop_requested || plan == PLAN_RACE, "round %d: value after stop before start", round);
        CHECK(w.all_ran_once, "round %d: value but not every child ran exactly once", round);
        CHECK(values_ok, "round %d: the collected values are wrong (%zu children)", round, n);
        *checks += 4;
        break;
    case D_ERROR: {
        bool code_ok = false;
        for (size_t i = 0; i < n; i++) {
            bool ran = __atomic_load_n(&ctx[i].runs, __ATOMIC_RELAXED) == 1;
            if (ctx[i].mode == M_ERROR && ran && rec->err.code == ctx[i].code) code_ok = true;
        }
        CHECK(code_ok, "round %d: error %d (%s) is not one a failed child sent", round, rec->err.code,
              rec->err.msg ? rec->err.msg : "(null)");
        *checks += 1;
        break;
    }
    case D_STOPPED:
        CHECK(!w.error_ran, "round %d: stopped although a child failed (error must win)", round);
        CHECK(stop_requested || w.stopped_ran, "round %d: stopped with no stop request and no stopped child", round);
        *checks += 2;
        break;
    default:
        CHECK(0, "round %d: no disposition recorded", round);
        (*checks)++;
    }
    if (plan == PLAN_BEFORE_START) {
        CHECK(rec->disp == D_STOPPED && w.none_ran, "round %d: stop before start must give stopped, no child run", round);
        (*checks)++;
    }
    if (plan == PLAN_NONE && !w.any_error && !w.any_stopped) {
        CHECK(rec->disp == D_VALUE, "round %d: no failure, no stop, yet disposition %d", round, rec->disp);
        (*checks)++;
    }
}

/* Sets the children of a round up: mostly values, some rounds with
 * failures or stops. */
static size_t plan_children(int round) {
    size_t n = 1 + rnd(MAX_CHILDREN);
    uint32_t shape = rnd(8);  /* 0..3: values and tuples, 4..5: some fail, 6: some stop, 7: mixed */
    for (size_t i = 0; i < n; i++) {
        child_ctx *c = &ctx[i];
        c->mode = rnd(5) == 0 ? M_TUPLE : M_VALUES;
        c->arity = (uint8_t)rnd(4);
        if ((shape == 4 || shape == 5 || shape == 7) && rnd(8) == 0) c->mode = M_ERROR;
        if ((shape == 6 || shape == 7) && rnd(8) == 0) c->mode = M_STOPPED;
        c->base = (int64_t)round * 1000 + (int64_t)i * 8;
        c->code = EX_EUSER + (int)i;
        c->runs = 0;
    }
    return n;
}

int main(void) {
    int checks = 0;
    ex_pool *pool = stress_pool_new(3, &checks);
    if (!pool) return stress_finish("when_all_collect_stress", checks);
    ex_scheduler sch = ex_pool_scheduler(pool);
    long baseline = stress_in_use();
    static agent stopper;
    agent_start(&stopper);
    static srec rec;
    unsigned outcome[4] = { 0 }, on_worker = 0;
    double t0 = now_s();

    for (int round = 0; round < ROUNDS; round++) {
        size_t n = plan_children(round);
        round_n = n;
        values_ok = false;
        srec_init(&rec);
        rec.on_complete = check_value;
        ex_sender *children[MAX_CHILDREN];
        for (size_t i = 0; i < n; i++) children[i] = make_child(sch, &ctx[i], rnd(2) == 0);
        ex_sender *collect = ex_when_all_collect_n(children, n);
        bool from_worker = rnd(2) == 0;  /* the fork-join path: started on a worker */
        on_worker += from_worker;
        ex_operation *op = srec_connect(&rec, from_worker ? ex_starts_on(sch, collect) : collect, round, &checks);
        if (!op) continue;

        uint32_t plan = rnd(20);
        plan = plan < 9 ? PLAN_NONE : plan == 9 ? PLAN_BEFORE_START : PLAN_RACE;
        if (plan == PLAN_BEFORE_START) ex_stop_source_request_stop(&rec.stop);
        if (plan == PLAN_RACE) {
            __atomic_store_n(&stop_fired, 0, __ATOMIC_RELAXED);
            agent_arm(&stopper, request_stop, &rec.stop, rnd(4) == 0 ? 0 : rnd(4000));
        }
        ex_start(op);

        if (!srec_wait(&rec, "collect", round, &checks)) break;  /* it may still run: do not free it */
        if (plan == PLAN_RACE && !agent_wait_checked(&stopper, "stopper", round, &checks)) break;
        bool stop_requested =
            plan == PLAN_BEFORE_START || (plan == PLAN_RACE && __atomic_load_n(&stop_fired, __ATOMIC_RELAXED));
        srec_expect_once(&rec, "collect", round, &checks);
        outcome[rec.disp]++;
        check_round(&rec, n, (int)plan, stop_requested, round, &checks);
        ex_operation_free(op);
        expect_round_freed(&baseline, round, &checks);
    }

    agent_stop(&stopper);
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    printf("when_all_collect_stress: %d rounds in %.2f s (value %u, error %u, stopped %u; %u started on a worker)\n",
           ROUNDS, now_s() - t0, outcome[D_VALUE], outcome[D_ERROR], outcome[D_STOPPED], on_worker);
    return stress_finish("when_all_collect_stress", checks);
}
