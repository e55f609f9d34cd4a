/* SPDX-License-Identifier: MIT */
/* race_stress.c - races and linked stop sources under contention.
 *
 * 1. when_any over pool children that meet at a barrier and then complete
 *    at the same moment (values, errors, stopped), while another thread
 *    may request stop on the receiver's token: every race completes
 *    exactly once, with a completion one of its children made, after all
 *    of them completed (a lost child completion would hang the round);
 *    every block of the round is freed.
 * 2. Linked sources whose two parents are stopped at once from two
 *    threads while the owner deregisters its callback and destroys the
 *    source: the callback runs at most once, and exactly once when both
 *    requests were through before the owner started; once destroy
 *    returned nothing touches the source (it is overwritten at once:
 *    TSan sees a late access as a race).
 * 3. ex_link_stop_token over a when_any whose child completes from its
 *    stop callback (on the thread that stops the extra token) racing a
 *    pool child, the receiver freeing the operation inside its
 *    completion: exactly one completion, nothing touched afterwards.
 * Each part runs a fixed number of rounds, cut short after 1.5 s on a
 * loaded machine (the rounds done are printed). */
#include <sched.h>
#include <string.h>

#include "stress_util.h"

enum { RACE_ROUNDS = 3000, LINK_ROUNDS = 5000, ADAPTOR_ROUNDS = 3000, MAX_CHILDREN = 3, WORKERS = 2 };

/* Each part runs its rounds, or stops after PART_SECONDS once it ran
 * MIN_ROUNDS: a round waits for threads to be scheduled, which on a
 * loaded machine can take milliseconds. */
#define PART_SECONDS 1.5
enum { MIN_ROUNDS = 300 };

static bool part_over(int round, double t0) { return round >= MIN_ROUNDS && now_s() - t0 > PART_SECONDS; }
enum { M_VALUE, M_ERROR, M_STOPPED };

static int checks;

/* Requests stop on an ex_stop_source; `fired` says the request was first. */
typedef struct stopper_arg {
    ex_stop_source *src;
    uint32_t fired;   /* atomic */
    uint32_t through; /* atomic, release: the request returned */
} stopper_arg;

static void request_stop(void *p) {
    stopper_arg *a = p;
    if (ex_stop_source_request_stop(a->src)) __atomic_store_n(&a->fired, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&a->through, 1, __ATOMIC_RELEASE);
}

static void stopper_init(stopper_arg *a, ex_stop_source *src) {
    a->src = src;
    a->fired = 0;
    a->through = 0;
}

/* ---------------------------------------------------------- 1. when_any */

/* A round: pool children wait at a barrier the main thread opens once one
 * of them is there; the main thread then completes a child of its own at
 * once, so a pool child and the main thread complete at the same moment
 * (and often the other pool child too). */
typedef struct race_round {
    uint32_t arrived;        /* atomic: pool children at the barrier */
    uint32_t open;           /* atomic: the barrier is open */
    uint32_t misses;         /* atomic: pool children that gave up waiting */
} race_round;

typedef struct child_ctx {
    race_round *round;
    int mode;
    int64_t value;
    int code;
    uint32_t runs;           /* atomic */
} child_ctx;

static ex_sender *completion_of(const child_ctx *c) {
    switch (c->mode) {
    case M_VALUE: return ex_just(ex_int(c->value));
    case M_ERROR: return ex_just_error(ex_error_format(c->code, "race_stress: injected error %d", c->code));
    default: return ex_just_stopped();
    }
}

/* A pool child: waits (bounded) for the barrier or a stop request on its
 * token, then completes as its mode says. */
static ex_sender *meet_then_complete(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    child_ctx *c = ctx;
    ex_stop_token tok = in[0].as.token;
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    race_round *r = c->round;
    __atomic_fetch_add(&r->arrived, 1, __ATOMIC_ACQ_REL);
    for (unsigned spins = 0; !__atomic_load_n(&r->open, __ATOMIC_ACQUIRE) && !ex_stop_token_stop_requested(tok);) {
        if (++spins > 20000000) {
            __atomic_fetch_add(&r->misses, 1, __ATOMIC_RELAXED);
            break;
        }
    }
    return completion_of(c);
}

static ex_sender *pool_child(ex_scheduler sch, child_ctx *c) {
    return ex_let_value(ex_starts_on(sch, ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN)), meet_then_complete, c,
                        EX_SIG(EX_T_TOKEN));
}

/* The main thread's child: its start publishes the operation; the main
 * thread completes it (it ignores stop requests: the race must wait). */
typedef struct main_op {
    ex_operation base;
    ex_receiver r;
} main_op;

static main_op *main_started;  /* atomic */

static void main_start(ex_operation *op) { __atomic_store_n(&main_started, (main_op *)op, __ATOMIC_RELEASE); }
static const ex_operation_vtable main_op_vt = { main_start, NULL };

static ex_error main_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    main_op *o = storage;
    o->base.vt = &main_op_vt;
    o->r = r;
    return ex_ok();
}

static const ex_sender_vtable main_vt = { "race_stress.main_child", main_connect, NULL, NULL, NULL };

static ex_sender *main_child(void) {
    ex_sender *s = ex_sender_alloc(&main_vt, sizeof(ex_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "race_stress: no memory");
    ex_sigs sigs = ex_sigs_none();
    ex_sigs_add_value(&sigs, EX_SIG(EX_T_INT));
    sigs.flags = EX_SIGS_ERROR | EX_SIGS_STOPPED;
    s->sigs = sigs;
    s->op_size = sizeof(main_op);
    s->op_align = _Alignof(main_op);
    return s;
}

static void complete_main_child(main_op *o, const child_ctx *c) {
    switch (c->mode) {
    case M_VALUE: {
        ex_value v = ex_int(c->value);
        ex_set_value(o->r, &v, 1);
        break;
    }
    case M_ERROR: ex_set_error(o->r, ex_error_format(c->code, "race_stress: injected error %d", c->code)); break;
    default: ex_set_stopped(o->r); break;
    }
}

/* Waits (bounded) until a pool child is at the barrier or the outer
 * request (if armed) fired: it may stop them before they run.  False if
 * no child came. */
static bool wait_arrival(race_round *r, const stopper_arg *outer) {
    double deadline = now_s() + 5.0;
    for (unsigned spins = 0; !__atomic_load_n(&r->arrived, __ATOMIC_ACQUIRE); spins++) {
        if (outer && __atomic_load_n(&outer->fired, __ATOMIC_RELAXED)) return false;
        if ((spins & 63) == 63) {
            sched_yield();
            if (now_s() > deadline) return false;
        }
    }
    return true;
}

/* The race's result is one a child that ran made. */
static bool result_from_a_child(const srec *rec, const child_ctx *ctx, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!__atomic_load_n(&ctx[i].runs, __ATOMIC_RELAXED)) continue;
        if (rec->disp == D_VALUE && ctx[i].mode == M_VALUE && srec_int(rec) == ctx[i].value) return true;
        if (rec->disp == D_ERROR && ctx[i].mode == M_ERROR && rec->err.code == ctx[i].code) return true;
        if (rec->disp == D_STOPPED && ctx[i].mode == M_STOPPED) return true;
    }
    return false;
}

static void stress_when_any(ex_pool *pool, agent *stopper) {
    ex_scheduler sch = ex_pool_scheduler(pool);
    long baseline = stress_in_use();
    static srec rec;
    static child_ctx ctx[MAX_CHILDREN];  /* the pool children, then the main thread's */
    static race_round rr;
    static stopper_arg outer;
    unsigned outcome[4] = { 0 }, met = 0, misses = 0;
    double t0 = now_s();
    int round = 0;
    for (; round < RACE_ROUNDS && !part_over(round, t0); round++) {
        size_t n = 2 + rnd(MAX_CHILDREN - 1);  /* n - 1 pool children */
        rr.arrived = rr.open = rr.misses = 0;
        uint32_t shape = rnd(4);  /* 0, 1: values only; 2: errors too; 3: stopped too */
        for (size_t i = 0; i < n; i++) {
            child_ctx *c = &ctx[i];
            c->round = &rr;
            c->mode = shape == 2 && rnd(2) ? M_ERROR : shape == 3 && rnd(2) ? M_STOPPED : M_VALUE;
            c->value = (int64_t)round * 8 + (int64_t)i;
            c->code = EX_EUSER + (int)i;
            c->runs = 0;
        }
        srec_init(&rec);
        ex_sender *children[MAX_CHILDREN];
        for (size_t i = 0; i + 1 < n; i++) children[i] = pool_child(sch, &ctx[i]);
        children[n - 1] = main_child();
        __atomic_store_n(&main_started, NULL, __ATOMIC_RELAXED);
        ex_operation *op = srec_connect(&rec, ex_when_any_n(children, n), round, &checks);
        if (!op) continue;
        bool race_stop = rnd(4) == 0;
        if (race_stop) {
            stopper_init(&outer, &rec.stop);
            agent_arm(stopper, request_stop, &outer, rnd(3000));
        }
        ex_start(op);
        /* Not started only when the outer request came first: the race
         * then completed stopped in start. */
        main_op *mo = __atomic_load_n(&main_started, __ATOMIC_ACQUIRE);
        CHECK(mo || (race_stop && __atomic_load_n(&rec.done, __ATOMIC_ACQUIRE) && rec.disp == D_STOPPED),
              "round %d: the main thread's child was not started", round);
        checks++;
        if (mo) {
            met += wait_arrival(&rr, race_stop ? &outer : NULL);
            __atomic_store_n(&rr.open, 1, __ATOMIC_RELEASE);
            __atomic_fetch_add(&ctx[n - 1].runs, 1, __ATOMIC_RELAXED);
            complete_main_child(mo, &ctx[n - 1]);
        }
        if (!srec_wait(&rec, "when_any", round, &checks)) break;  /* may still run: do not free it */
        if (race_stop && !agent_wait_checked(stopper, "stopper", round, &checks)) break;
        srec_expect_once(&rec, "when_any", round, &checks);
        bool ran_once = true;
        for (size_t i = 0; i < n; i++) ran_once &= __atomic_load_n(&ctx[i].runs, __ATOMIC_RELAXED) <= 1;
        CHECK(ran_once, "round %d: a child ran twice", round);
        /* A pool child the outer request stopped before it ran may win
         * with stopped; otherwise the winner is a child that ran. */
        bool outer_stopped = race_stop && __atomic_load_n(&outer.fired, __ATOMIC_RELAXED);
        CHECK(result_from_a_child(&rec, ctx, n) || (outer_stopped && rec.disp == D_STOPPED),
              "round %d: result (disp %d) is no child's", round, rec.disp);
        checks += 2;
        outcome[rec.disp]++;
        misses += __atomic_load_n(&rr.misses, __ATOMIC_RELAXED);
        ex_operation_free(op);
        expect_round_freed(&baseline, round, &checks);
    }
    printf("race_stress: when_any %d rounds in %.2f s (value %u, error %u, stopped %u; a pool child met the main "
           "thread in %u, barrier timeouts %u)\n",
           round, now_s() - t0, outcome[D_VALUE], outcome[D_ERROR], outcome[D_STOPPED], met, misses);
}

/* --------------------------------------------------- 2. linked sources */

typedef struct link_cb {
    ex_stop_callback cb;
    uint32_t calls;  /* atomic */
} link_cb;

static void count_call(ex_stop_callback *cb) {
    link_cb *c = (link_cb *)(void *)cb;
    __atomic_fetch_add(&c->calls, 1, __ATOMIC_RELAXED);
    spin_delay(rnd(200));  /* a callback that takes a moment: destroy may have to wait */
}

static void stress_linked(agent *a1, agent *a2) {
    static ex_stop_source parent[2];
    static ex_linked_stop_source l;
    static link_cb cb;
    static stopper_arg s1, s2;
    unsigned ran = 0, must_run = 0, stopped_at_init = 0;
    double t0 = now_s();
    int round = 0;
    for (; round < LINK_ROUNDS && !part_over(round, t0); round++) {
        ex_stop_source_init(&parent[0]);
        ex_stop_source_init(&parent[1]);
        ex_stop_token tokens[3] = { ex_stop_source_token(&parent[0]), ex_never_stop_token(),
                                    ex_stop_source_token(&parent[1]) };
        ex_error e = ex_linked_stop_source_init(&l, tokens, 3);
        CHECK(e.code == 0, "round %d: init: %s", round, e.msg ? e.msg : "");
        checks++;
        cb.calls = 0;
        (void)ex_stop_callback_register(&cb.cb, ex_linked_stop_source_token(&l), count_call);
        stopper_init(&s1, &parent[0]);
        stopper_init(&s2, &parent[1]);
        uint32_t d = rnd(2000);
        agent_arm(a1, request_stop, &s1, d);
        agent_arm(a2, request_stop, &s2, rnd(4) == 0 ? d : rnd(2000));  /* often at the same moment */
        spin_delay(rnd(40000));  /* before, while or after the parents stop */
        /* Both requests through before the owner starts: stop reached l. */
        bool both_through =
            __atomic_load_n(&s1.through, __ATOMIC_ACQUIRE) && __atomic_load_n(&s2.through, __ATOMIC_ACQUIRE);
        ex_stop_callback_deregister(&cb.cb);
        ex_linked_stop_source_destroy(&l);
        uint32_t calls = __atomic_load_n(&cb.calls, __ATOMIC_RELAXED);
        bool stopped = ex_linked_stop_source_stop_requested(&l);
        memset(&l, 0xa5, sizeof l);  /* no parent's request may touch it from now on */
        CHECK(calls <= 1, "round %d: the callback ran %u times", round, calls);
        CHECK(!calls || stopped, "round %d: the callback ran but the source is not stopped", round);
        CHECK(!both_through || calls == 1, "round %d: both parents stopped, callback ran %u times", round, calls);
        checks += 3;
        ran += calls;
        must_run += both_through;
        if (!agent_wait_checked(a1, "parent 1", round, &checks) || !agent_wait_checked(a2, "parent 2", round, &checks))
            break;
        /* A parent stopped already stops a new source at once. */
        e = ex_linked_stop_source_init(&l, tokens, 3);
        stopped_at_init += ex_linked_stop_source_stop_requested(&l);
        CHECK(e.code == 0 && ex_linked_stop_source_stop_requested(&l), "round %d: parents stopped, new source is not",
              round);
        checks++;
        ex_linked_stop_source_destroy(&l);
    }
    printf("race_stress: linked %d rounds in %.2f s (callback ran %u, both parents through first %u, stopped at init %u)\n",
           round, now_s() - t0, ran, must_run, stopped_at_init);
}

/* ----------------------------------------- 3. link_stop_token adaptor */

/* A child that completes from its stop callback (so on the thread whose
 * request reached it), with set_value(int -1). */
typedef struct cb_op {
    ex_operation base;
    ex_receiver r;
    ex_stop_callback cb;
} cb_op;

static void cb_fire(ex_stop_callback *cb) {
    cb_op *o = (cb_op *)(void *)((char *)cb - offsetof(cb_op, cb));
    ex_stop_callback_deregister(&o->cb);
    ex_value v = ex_int(-1);
    ex_set_value(o->r, &v, 1);
}

static void cb_start(ex_operation *op) {
    cb_op *o = (cb_op *)op;
    (void)ex_stop_callback_register(&o->cb, ex_get_stop_token(ex_receiver_env(o->r)), cb_fire);
}

static const ex_operation_vtable cb_op_vt = { cb_start, NULL };

static ex_error cb_connect(const ex_sender *s, ex_receiver r, void *storage) {
    (void)s;
    cb_op *o = storage;
    o->base.vt = &cb_op_vt;
    o->r = r;
    return ex_ok();
}

static const ex_sender_vtable cb_vt = { "race_stress.value_on_stop", cb_connect, NULL, NULL, NULL };

static ex_sender *value_on_stop(void) {
    ex_sender *s = ex_sender_alloc(&cb_vt, sizeof(ex_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "race_stress: no memory");
    ex_sigs sigs = ex_sigs_none();
    ex_sigs_add_value(&sigs, EX_SIG(EX_T_INT));
    s->sigs = sigs;
    s->op_size = sizeof(cb_op);
    s->op_align = _Alignof(cb_op);
    return s;
}

static ex_error delay_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    spin_delay(rnd(40000));  /* often still running when the extra token stops */
    out[0] = ex_int((int64_t)(intptr_t)ctx);
    return ex_ok();
}

/* The receiver frees the operation inside its completion. */
static void free_op(srec *r, int disp) {
    (void)disp;
    ex_operation_free(r->op);
}

static void stress_adaptor(ex_pool *pool, agent *a1, agent *a2) {
    ex_scheduler sch = ex_pool_scheduler(pool);
    long baseline = stress_in_use();
    static srec rec;
    static ex_stop_source extra;
    static stopper_arg s_extra, s_outer;
    unsigned from_callback = 0, from_pool = 0, stopped = 0;
    double t0 = now_s();
    int round = 0;
    for (; round < ADAPTOR_ROUNDS && !part_over(round, t0); round++) {
        ex_stop_source_init(&extra);
        srec_init(&rec);
        rec.on_complete = free_op;
        int64_t v = round;
        ex_sender *race = ex_when_any(value_on_stop(), ex_then(ex_schedule(sch), delay_fn, (void *)(intptr_t)v, EX_SIG0,
                                                               EX_SIG(EX_T_INT)));
        rec.op = srec_connect(&rec, ex_link_stop_token(race, ex_stop_source_token(&extra)), round, &checks);
        if (!rec.op) continue;
        stopper_init(&s_extra, &extra);
        stopper_init(&s_outer, &rec.stop);
        agent_arm(a1, request_stop, &s_extra, rnd(3000));
        bool outer = rnd(4) == 0;
        if (outer) agent_arm(a2, request_stop, &s_outer, rnd(3000));
        ex_start(rec.op);
        if (!srec_wait(&rec, "link_stop_token", round, &checks)) break;
        if (!agent_wait_checked(a1, "extra stopper", round, &checks)) break;
        if (outer && !agent_wait_checked(a2, "outer stopper", round, &checks)) break;
        srec_expect_once(&rec, "link_stop_token", round, &checks);
        int64_t got = srec_int(&rec);
        /* The pool child may also lose its schedule to the stop request
         * and win with stopped. */
        CHECK(rec.disp == D_STOPPED || (rec.disp == D_VALUE && (got == -1 || got == v)),
              "round %d: disposition %d, value %lld", round, rec.disp, (long long)got);
        checks++;
        from_callback += got == -1;
        from_pool += got == v;
        stopped += rec.disp == D_STOPPED;
        expect_round_freed(&baseline, round, &checks);
    }
    printf("race_stress: link_stop_token %d rounds in %.2f s (won by the stop callback %u, by the pool child %u, "
           "stopped %u)\n",
           round, now_s() - t0, from_callback, from_pool, stopped);
}

/* ----------------------------------------------------------------- main */

int main(void) {
    ex_pool *pool = stress_pool_new(WORKERS, &checks);
    if (!pool) return stress_finish("race_stress", checks);
    static agent a1, a2;
    agent_start(&a1);
    agent_start(&a2);
    stress_when_any(pool, &a1);
    stress_linked(&a1, &a2);
    stress_adaptor(pool, &a1, &a2);
    agent_stop(&a1);
    agent_stop(&a2);
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    return stress_finish("race_stress", checks);
}
