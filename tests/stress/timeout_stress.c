/* SPDX-License-Identifier: MIT */
/* timeout_stress.c - ex_timeout on a pool, its timer racing the child's
 * own completion.
 *
 * Timers of 0 to 30 us against children that finish after about as long:
 *   - pool children that work for a while, watching their stop token, and
 *     then complete with a value, an owned error or stopped (or, once they
 *     saw the stop, with stopped, an owned error or a value anyway);
 *   - children completed by another thread (an agent) after a while,
 *     whatever the stop token says.
 * Each timeout completes exactly once, and with an outcome its child
 * allows: the child's value whenever the child completed with a value
 * (the value wins), else the child's error, stopped, or EX_ETIMEDOUT.
 * 1. One thread, a stop from outside in a quarter of the rounds, every
 *    block of the round freed (the round allocation check).
 * 2. Three threads at once, each with its own timeouts and agent; every
 *    block freed once they are done.
 * Each part runs a fixed number of rounds, cut short after 1.5 s on a
 * loaded machine (the rounds done are printed). */
#include <sched.h>
#include <string.h>

#include "stress_util.h"

enum { ROUNDS = 4000, MIN_ROUNDS = 300, WORKERS = 2, THREADS = 3 };
#define PART_SECONDS 1.5

static bool part_over(int round, double t0) { return round >= MIN_ROUNDS && now_s() - t0 > PART_SECONDS; }

static int checks;  /* part 1's; part 2's threads count their own and add them */

/* How a child completes (mode) and how it did (completed). */
enum { C_NONE, C_VALUE, C_ERROR, C_STOPPED };

typedef struct child_ctx {
    int mode;           /* C_VALUE, C_ERROR, C_STOPPED: by itself */
    int on_stop;        /* the same, once it saw a stop request (pool children) */
    uint32_t work;      /* spin_delay units before it completes */
    int64_t value;
    int code;
    int completed;      /* C_*: what it completed with (C_NONE: it never ran) */
    uint32_t runs;      /* atomic */
    void *op;           /* atomic: the agent child's operation, once started */
} child_ctx;

static ex_sender *completion(child_ctx *c, int kind) {
    c->completed = kind;
    switch (kind) {
    case C_VALUE: return ex_just(ex_int(c->value));
    case C_ERROR: return ex_just_error(ex_error_format(c->code, "timeout_stress: child error %d", c->code));
    default: return ex_just_stopped();
    }
}

/* ----------------------------------------------------------- pool child */

/* Works up to c->work units on a worker, looking at its token now and
 * then; completes as it was told for either case. */
static ex_sender *pool_work(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    child_ctx *c = ctx;
    ex_stop_token tok = in[0].as.token;
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    for (uint32_t done = 0; done < c->work; done += 256) {
        if (ex_stop_token_stop_requested(tok)) return completion(c, c->on_stop);
        spin_delay(256);
    }
    return completion(c, c->mode);
}

static ex_sender *pool_child(ex_scheduler sch, child_ctx *c) {
    return ex_let_value(ex_starts_on(sch, ex_read_env(&ex_key_get_stop_token, EX_T_TOKEN)), pool_work, c,
                        EX_SIG(EX_T_TOKEN));
}

/* ---------------------------------------------------------- agent child */

/* Its start publishes the operation; an agent completes it (stop or not). */
typedef struct agent_op {
    ex_operation base;
    ex_receiver r;
    child_ctx *c;
} agent_op;

typedef struct agent_sender {
    ex_sender base;
    child_ctx *c;
} agent_sender;

static void agent_child_start(ex_operation *op) {
    agent_op *o = (agent_op *)op;
    __atomic_store_n(&o->c->op, o, __ATOMIC_RELEASE);
}

static const ex_operation_vtable agent_op_vt = { agent_child_start, NULL };

static ex_error agent_connect(const ex_sender *s, ex_receiver r, void *storage) {
    agent_op *o = storage;
    o->base.vt = &agent_op_vt;
    o->r = r;
    o->c = ((const agent_sender *)s)->c;
    return ex_ok();
}

static const ex_sender_vtable agent_child_vt = { "timeout_stress.agent_child", agent_connect, NULL, NULL, NULL };

static ex_sender *agent_child(child_ctx *c) {
    ex_sender *s = ex_sender_alloc(&agent_child_vt, sizeof(agent_sender));
    if (!s) return ex_invalid_sender(EX_ENOMEM, "timeout_stress: no memory");
    ((agent_sender *)s)->c = c;
    ex_sigs sigs = ex_sigs_none();
    ex_sigs_add_value(&sigs, EX_SIG(EX_T_INT));
    sigs.flags = EX_SIGS_ERROR | EX_SIGS_STOPPED;
    s->sigs = sigs;
    s->op_size = sizeof(agent_op);
    s->op_align = _Alignof(agent_op);
    return s;
}

/* The agent's action: completes the started child as its mode says. */
static void complete_agent_child(void *p) {
    child_ctx *c = p;
    agent_op *o = __atomic_load_n(&c->op, __ATOMIC_ACQUIRE);
    __atomic_fetch_add(&c->runs, 1, __ATOMIC_RELAXED);
    c->completed = c->mode;
    switch (c->mode) {
    case C_VALUE: {
        ex_value v = ex_int(c->value);
        ex_set_value(o->r, &v, 1);
        break;
    }
    case C_ERROR: ex_set_error(o->r, ex_error_format(c->code, "timeout_stress: child error %d", c->code)); break;
    default: ex_set_stopped(o->r); break;
    }
}

/* ---------------------------------------------------------------- rounds */

typedef struct tally {
    unsigned value, error, timed_out, stopped;
} tally;

static int random_kind(void) { return 1 + (int)rnd(3); }

/* A fresh child context for round `round` of thread `who`. */
static void child_init(child_ctx *c, int who, int round) {
    memset(c, 0, sizeof *c);
    c->mode = rnd(2) ? C_VALUE : random_kind();
    c->on_stop = rnd(4) ? C_STOPPED : random_kind();
    c->work = rnd(30000);
    c->value = (int64_t)who * 1000000 + round;
    c->code = EX_EUSER + 1 + (int)rnd(50);
}

/* Whether r's outcome is one the child allows: its value whenever it
 * completed with one (and only then), else its error, stopped, or the
 * timeout. */
static bool outcome_allowed(const srec *r, const child_ctx *c) {
    if (c->completed == C_VALUE) return r->disp == D_VALUE && srec_int(r) == c->value;
    if (r->disp == D_ERROR && r->err.code == EX_ETIMEDOUT) return strncmp(r->err.msg, "ex_timeout: ", 12) == 0;
    if (r->disp == D_ERROR) return c->completed == C_ERROR && r->err.code == c->code;
    return r->disp == D_STOPPED && (c->completed == C_STOPPED || c->completed == C_NONE);
}

static void count(tally *t, const srec *r) {
    if (r->disp == D_VALUE) t->value++;
    else if (r->disp == D_STOPPED) t->stopped++;
    else if (r->err.code == EX_ETIMEDOUT) t->timed_out++;
    else t->error++;
}

/* The stopper's action: a stop request from outside. */
static void request_stop(void *src) { (void)ex_stop_source_request_stop(src); }

/* One timeout: started, completed (the agent child by `completer`, an
 * outer stop by `stopper` if not NULL), checked.  False if it did not
 * complete (it may still run: stop there). */
static bool one_timeout(ex_pool *pool, int who, int round, srec *rec, child_ctx *c, agent *completer, agent *stopper,
                        tally *t, int *nchecks) {
    child_init(c, who, round);
    bool by_agent = rnd(3) == 0;
    srec_init(rec);
    ex_sender *child = by_agent ? agent_child(c) : pool_child(ex_pool_scheduler(pool), c);
    ex_operation *op = srec_connect(rec, ex_timeout(child, ex_pool_scheduler(pool), (int64_t)rnd(30000)), round, nchecks);
    if (!op) return true;
    ex_start(op);
    if (by_agent) agent_arm(completer, complete_agent_child, c, rnd(30000));
    if (stopper) agent_arm(stopper, request_stop, &rec->stop, rnd(30000));
    if (!srec_wait(rec, "timeout", round, nchecks)) return false;
    if (by_agent && !agent_wait_checked(completer, "completer", round, nchecks)) return false;
    if (stopper && !agent_wait_checked(stopper, "stopper", round, nchecks)) return false;
    srec_expect_once(rec, "timeout", round, nchecks);
    CHECK(__atomic_load_n(&c->runs, __ATOMIC_RELAXED) <= 1, "round %d: the child ran twice", round);
    CHECK(outcome_allowed(rec, c), "round %d (thread %d): outcome %d (%d: %s) but the child completed %d", round, who,
          rec->disp, rec->disp == D_ERROR ? rec->err.code : 0, rec->disp == D_ERROR ? rec->err.msg : "", c->completed);
    *nchecks += 2;
    count(t, rec);
    ex_operation_free(op);
    return true;
}

static void print_tally(const char *part, int rounds, double t0, const tally *t) {
    printf("timeout_stress: %s %d rounds in %.2f s (value %u, child's error %u, timed out %u, stopped %u)\n", part,
           rounds, now_s() - t0, t->value, t->error, t->timed_out, t->stopped);
}

/* -------------------------------------------------------- 1. one thread */

static void stress_one_thread(ex_pool *pool, agent *completer, agent *stopper) {
    long baseline = stress_in_use();
    static srec rec;
    static child_ctx c;
    tally t = { 0 };
    double t0 = now_s();
    int round = 0;
    for (; round < ROUNDS && !part_over(round, t0); round++) {
        if (!one_timeout(pool, 0, round, &rec, &c, completer, rnd(4) == 0 ? stopper : NULL, &t, &checks)) break;
        expect_round_freed(&baseline, round, &checks);
    }
    print_tally("one thread", round, t0, &t);
}

/* ------------------------------------------------------ 2. many threads */

typedef struct submitter {
    pthread_t thread;
    ex_pool *pool;
    int who, rounds, checks;
    agent completer;
    tally t;
    srec rec;
    child_ctx c;
} submitter;

static void *submit_rounds(void *p) {
    submitter *s = p;
    rng_state ^= (uint64_t)(s->who + 1) * UINT64_C(0x9e3779b97f4a7c15);
    double t0 = now_s();
    for (; s->rounds < ROUNDS && !part_over(s->rounds, t0); s->rounds++)
        if (!one_timeout(s->pool, s->who, s->rounds, &s->rec, &s->c, &s->completer, NULL, &s->t, &s->checks)) break;
    return NULL;
}

static void stress_threads(ex_pool *pool) {
    long baseline = stress_in_use();
    static submitter subs[THREADS];
    double t0 = now_s();
    for (int i = 0; i < THREADS; i++) {
        memset(&subs[i], 0, sizeof subs[i]);
        subs[i].pool = pool;
        subs[i].who = i + 1;
        agent_start(&subs[i].completer);
        pthread_create(&subs[i].thread, NULL, submit_rounds, &subs[i]);
    }
    tally t = { 0 };
    int rounds = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(subs[i].thread, NULL);
        agent_stop(&subs[i].completer);
        checks += subs[i].checks;
        rounds += subs[i].rounds;
        t.value += subs[i].t.value;
        t.error += subs[i].t.error;
        t.timed_out += subs[i].t.timed_out;
        t.stopped += subs[i].t.stopped;
    }
    CHECK(stress_in_use() == baseline, "%ld block(s) not freed", stress_in_use() - baseline);
    checks++;
    print_tally("3 threads", rounds, t0, &t);
}

/* ----------------------------------------------------------------- main */

int main(void) {
    ex_pool *pool = stress_pool_new(WORKERS, &checks);
    if (!pool) return stress_finish("timeout_stress", checks);
    static agent completer, stopper;
    agent_start(&completer);
    agent_start(&stopper);
    stress_one_thread(pool, &completer, &stopper);
    agent_stop(&completer);
    agent_stop(&stopper);
    stress_threads(pool);
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    return stress_finish("timeout_stress", checks);
}
