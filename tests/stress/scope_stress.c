/* SPDX-License-Identifier: MIT */
/* scope_stress.c - counting_scope: several threads spawn pool work while
 * the main thread requests stop on the scope, closes it (or, in some
 * rounds, leaves it open) and joins it; another thread spawns futures and
 * consumes them racing their completion; two more connect the same
 * associate senders at once.  Half the spawns and futures are given an
 * environment whose stop token the main thread requests at a random
 * moment in some rounds (linked to the scope's: the request races the
 * work completing on the pool).  Every spawn that returned EX_OK
 * completes exactly once, before the join completes; a spawn refused with
 * EX_ESHUTDOWN never runs; the join completes exactly once, with the error
 * of failed work if some work failed; every future completes its consumer
 * exactly once with the work's result; of the two operations connected
 * from one associate sender (built while the scope was open) the first
 * to take the association runs, the other runs or completes stopped,
 * and both finish before the join; the scope can be destroyed right after
 * the join; nothing leaks. */
#include <string.h>

#include "stress_util.h"

enum { ROUNDS = 800, SPAWNERS = 2, PER_SPAWNER = 48, FUTURES = 8, ASSOCS = 4, ASSOCIATORS = 2 };
enum { F_IMMEDIATE, F_DELAYED, F_DROP, F_DEFERRED, F_ACTIONS };
#define NOT_TRIED (-1)

/* ------------------------------------------------------------ state */

static ex_counting_scope scope;
static ex_scheduler sch;
static uint32_t join_done;     /* set when the join completed */
static uint32_t completions;   /* spawned and future work that completed */
static uint32_t late;          /* work that completed after the join */
static uint32_t failed_runs;   /* failing spawned work that ran */
static uint32_t go, ready;     /* start line for the spawning threads */
static uint32_t spawned;       /* spawns made so far (relaxed: a trigger only) */
static uint32_t paced;         /* spawners yield after every spawn */
static uint32_t stopped_works; /* spawned work that completed stopped */

/* The environment half the spawns and futures are given: its stop token
 * (requested in some rounds) is linked to the scope's.  It outlives the
 * work: the round joins before it is reinitialised. */
static ex_stop_source env_stop;
static ex_env_pair env_pair;
static uint32_t env_spawns;    /* spawns and futures given env (relaxed) */

static ex_env spawn_env(void) { return ex_env_of_pair(&env_pair); }

typedef struct slot {
    int result;        /* ex_spawn's code, NOT_TRIED */
    bool fail;
    uint32_t completed;
} slot;

static slot slots[SPAWNERS][PER_SPAWNER];

/* Relaxed on purpose: the counters must not add happens-before edges
 * between pool workers that could hide a missing one in the library.
 * Coherence is enough: the join's read of `completions` sees every
 * increment that happened before the join completed. */
static void count_completion(uint32_t *c) {
    if (__atomic_load_n(&join_done, __ATOMIC_RELAXED)) __atomic_fetch_add(&late, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&completions, 1, __ATOMIC_RELAXED);
}

static ex_error work_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n, (void)out;
    slot *s = ctx;
    if (s->fail) __atomic_fetch_add(&failed_runs, 1, __ATOMIC_RELAXED);
    count_completion(&s->completed);
    return s->fail ? ex_error_format(EX_EUSER + 5, "scope_stress: injected error %p", (void *)s) : ex_ok();
}

static ex_error work_stopped_fn(void *ctx, ex_value *out) {
    (void)out;
    __atomic_fetch_add(&stopped_works, 1, __ATOMIC_RELAXED);
    count_completion(&((slot *)ctx)->completed);
    return ex_ok();
}

static ex_sender *make_work(slot *s) {
    ex_sender *w = ex_then(ex_schedule(sch), work_fn, s, EX_SIG0, EX_SIG0);
    return ex_upon_stopped(w, work_stopped_fn, s, EX_SIG0);
}

/* make_work after a short timer on the pool: a stop request cancels the
 * timer and completes the work inside the request, on the requesting
 * thread (so a spawn must outlive the request that reached it). */
static ex_sender *make_timed_work(slot *s) {
    ex_sender *w = ex_then(ex_schedule_after(sch, (int64_t)rnd(50) * 1000), work_fn, s, EX_SIG0, EX_SIG0);
    return ex_upon_stopped(w, work_stopped_fn, s, EX_SIG0);
}

static void spawner(void *arg) {
    slot *mine = arg;
    __atomic_fetch_add(&ready, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) sched_yield();
    for (int i = 0; i < PER_SPAWNER; i++) {
        bool with_env = i & 1;
        if (with_env) __atomic_fetch_add(&env_spawns, 1, __ATOMIC_RELAXED);
        ex_error e = with_env ? ex_spawn_env(make_timed_work(&mine[i]), ex_counting_scope_token(&scope), spawn_env())
                              : ex_spawn(make_work(&mine[i]), ex_counting_scope_token(&scope));
        __atomic_store_n(&mine[i].result, e.code, __ATOMIC_RELEASE);
        __atomic_fetch_add(&spawned, 1, __ATOMIC_RELAXED);
        if (e.code) break;  /* closed: every later spawn is refused too */
        if (paced) sched_yield();
    }
}

/* --------------------------------------------------------------- futures */

typedef struct fut {
    int action;
    int status;            /* ex_sender_status of the future */
    int connect_err;       /* ex_connect_alloc of the future */
    int64_t value;
    uint32_t value_runs, stopped_runs, completed;
    ex_sender *s;
    srec out;              /* the consumer */
} fut;

static fut futs[FUTURES];

static ex_error fut_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    fut *f = ctx;
    __atomic_fetch_add(&f->value_runs, 1, __ATOMIC_RELAXED);
    count_completion(&f->completed);
    out[0] = ex_int(f->value);
    return ex_ok();
}

static ex_sender *fut_stopped_fn(void *ctx) {
    fut *f = ctx;
    __atomic_fetch_add(&f->stopped_runs, 1, __ATOMIC_RELAXED);
    count_completion(&f->completed);
    return ex_just_stopped();
}

static ex_error fut_connect(fut *f) {
    ex_error e = ex_connect_alloc(f->s, srec_receiver(&f->out), &f->out.op);
    f->connect_err = e.code;
    if (e.code) f->out.op = NULL;
    return e;
}

static void futurist(void *arg) {
    (void)arg;
    __atomic_fetch_add(&ready, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) sched_yield();
    for (int j = 0; j < FUTURES; j++) {
        fut *f = &futs[j];
        ex_sender *w = ex_then(ex_schedule(sch), fut_fn, f, EX_SIG0, EX_SIG(EX_T_INT));
        w = ex_let_stopped(w, fut_stopped_fn, f);
        if (j & 1) __atomic_fetch_add(&env_spawns, 1, __ATOMIC_RELAXED);
        f->s = j & 1 ? ex_spawn_future_env(w, ex_counting_scope_token(&scope), spawn_env())
                     : ex_spawn_future(w, ex_counting_scope_token(&scope));
        f->status = ex_sender_status(f->s).code;
        switch (f->action) {
        case F_DELAYED: spin_delay(rnd(2000)); /* fall through */
        case F_IMMEDIATE:
            if (fut_connect(f).code) break;
            ex_start(f->out.op);
            ex_sender_release(f->s);
            f->s = NULL;
            break;
        case F_DROP:
            ex_sender_release(f->s);  /* requests stop on the work */
            f->s = NULL;
            break;
        case F_DEFERRED:
            /* Main starts it after the join.  The sender is kept until then:
             * releasing it before the connected operation is started counts
             * as "released without starting" and requests stop on the work. */
            fut_connect(f);
            break;
        }
    }
}

/* ------------------------------------------------------------- associate */

/* ASSOCS associate senders built by main while the scope is open; each
 * associator connects every one of them (the two racing for the
 * association the sender took when built), starts it, waits for it and
 * destroys the operation (which ends its association), then drops its
 * reference. */
static ex_sender *assoc_senders[ASSOCS];
static slot assoc_slots[ASSOCS];
static srec assoc_out[ASSOCIATORS][ASSOCS];
static uint32_t assoc_hung;

static void associator(void *arg) {
    srec *out = arg;
    __atomic_fetch_add(&ready, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) sched_yield();
    for (int k = 0; k < ASSOCS; k++) {
        ex_operation *op = NULL;
        srec_init(&out[k]);
        ex_error e = ex_connect_alloc(assoc_senders[k], srec_receiver(&out[k]), &op);
        if (e.code) {
            out[k].disp = -e.code;  /* checked by main */
        } else {
            ex_start(op);
            if (wait_flag(&out[k].done)) ex_operation_free(op);
            else __atomic_store_n(&assoc_hung, 1, __ATOMIC_RELAXED);  /* leaked on purpose: it may still run */
        }
        ex_sender_release(assoc_senders[k]);
    }
}

/* ------------------------------------------------------------------ join */

static uint32_t join_snapshot;  /* completions seen when the join completed */

static void note_join(srec *r, int disp) {
    (void)r, (void)disp;
    join_snapshot = __atomic_load_n(&completions, __ATOMIC_RELAXED);
    __atomic_store_n(&join_done, 1, __ATOMIC_RELAXED);
}

/* The sync_wait form: then / upon_error record the snapshot on the agent
 * where the join completed and turn the outcome into an int. */
static srec sw_rec;
static ex_error sw_value_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    srec_complete(&sw_rec, D_VALUE);
    out[0] = ex_int(0);
    return ex_ok();
}
static ex_error sw_error_fn(void *ctx, ex_error e, ex_value *out) {
    (void)ctx;
    srec_keep_error(&sw_rec, e);
    srec_complete(&sw_rec, D_ERROR);
    out[0] = ex_int(e.code);
    return ex_ok();
}

/* ----------------------------------------------------------------- main */

int main(void) {
    int checks = 0;
    ex_pool *pool = stress_pool_new(2, &checks);
    if (!pool) return stress_finish("scope_stress", checks);
    sch = ex_pool_scheduler(pool);
    long baseline = stress_in_use();

    static agent spawners[SPAWNERS], future_agent, associators[ASSOCIATORS];
    for (int t = 0; t < SPAWNERS; t++) agent_start(&spawners[t]);
    agent_start(&future_agent);
    for (int t = 0; t < ASSOCIATORS; t++) agent_start(&associators[t]);

    unsigned freed_after_join = 0;
    unsigned n_ok = 0, n_refused = 0, n_open_joins = 0, n_join_errors = 0, fut_disp[4] = { 0 };
    unsigned n_env_spawns = 0, n_env_stops = 0, n_assoc_runs = 0, n_assoc_refused = 0;
    double t0 = now_s();

    for (int round = 0; round < ROUNDS; round++) {
        ex_error e = ex_counting_scope_init(&scope);
        CHECK(e.code == 0, "round %d: scope init", round);
        checks++;
        if (e.code) break;
        join_done = completions = late = failed_runs = go = ready = spawned = env_spawns = 0;
        ex_stop_source_init(&env_stop);
        ex_env_pair_init(&env_pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&env_stop)),
                         ex_env_empty());
        for (int k = 0; k < ASSOCS; k++) {
            slot *as = &assoc_slots[k];
            as->result = EX_OK;
            as->fail = false;
            as->completed = 0;
            /* Built while the scope is open: each holds an association. */
            assoc_senders[k] = ex_associate(make_work(as), ex_counting_scope_token(&scope));
            ex_sender_retain(assoc_senders[k]);  /* a reference per associator */
        }
        bool inject = rnd(4) == 0;
        for (int t = 0; t < SPAWNERS; t++)
            for (int i = 0; i < PER_SPAWNER; i++) {
                slot *s = &slots[t][i];
                s->result = NOT_TRIED;
                s->fail = inject && rnd(16) == 0;
                s->completed = 0;
            }
        for (int j = 0; j < FUTURES; j++) {
            fut *f = &futs[j];
            memset(f, 0, sizeof *f);
            srec_init_plain(&f->out);
            f->action = (int)rnd(F_ACTIONS);
            f->value = round * 100 + j;
        }
        bool request_stop = rnd(10) < 6;
        bool stop_env = rnd(2) == 0;
        bool close_first = rnd(5) != 0;
        bool use_sync_wait = rnd(2) == 0;
        bool join_on_pool = rnd(2) == 0;
        if (!close_first) n_open_joins++;
        paced = !close_first;  /* keep the count hovering near zero while joining */

        for (int t = 0; t < SPAWNERS; t++) agent_arm(&spawners[t], spawner, slots[t], 0);
        agent_arm(&future_agent, futurist, NULL, 0);
        for (int t = 0; t < ASSOCIATORS; t++) agent_arm(&associators[t], associator, assoc_out[t], 0);
        while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) != SPAWNERS + 1 + ASSOCIATORS) sched_yield();
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);

        /* Stop, close and join land anywhere from before the first spawn to
         * after the last one: triggered by the spawners' progress, so that
         * a loaded machine does not push them all to one end. */
        uint32_t stop_at = rnd(SPAWNERS * PER_SPAWNER + 1), close_at = rnd(SPAWNERS * PER_SPAWNER + 1);
        if (close_at < stop_at) {
            uint32_t t = close_at;
            close_at = stop_at;
            stop_at = t;
        }
        uint32_t env_stop_at = rnd(SPAWNERS * PER_SPAWNER + 1);
        bool env_stopped = false;
        while (__atomic_load_n(&spawned, __ATOMIC_RELAXED) < stop_at) {
            if (stop_env && !env_stopped && __atomic_load_n(&spawned, __ATOMIC_RELAXED) >= env_stop_at) {
                ex_stop_source_request_stop(&env_stop);
                env_stopped = true;
            }
            sched_yield();
        }
        spin_delay(rnd(3000));
        if (request_stop) ex_counting_scope_request_stop(&scope);
        while (__atomic_load_n(&spawned, __ATOMIC_RELAXED) < close_at) {
            if (stop_env && !env_stopped && __atomic_load_n(&spawned, __ATOMIC_RELAXED) >= env_stop_at) {
                ex_stop_source_request_stop(&env_stop);
                env_stopped = true;
            }
            sched_yield();
        }
        spin_delay(rnd(3000));
        if (close_first) ex_counting_scope_close(&scope);
        if (stop_env && !env_stopped) {
            ex_stop_source_request_stop(&env_stop);
            env_stopped = true;
        }
        if (env_stopped) n_env_stops++;

        srec jr;
        srec_init_plain(&jr);
        jr.on_complete = note_join;
        srec *j = &jr;
        ex_operation *jop = NULL;
        if (use_sync_wait) {
            srec_init_plain(&sw_rec);
            sw_rec.on_complete = note_join;
            j = &sw_rec;
            ex_sender *js = ex_then(ex_counting_scope_join(&scope), sw_value_fn, NULL, EX_SIG0, EX_SIG(EX_T_INT));
            js = ex_upon_error(js, sw_error_fn, NULL, EX_SIG(EX_T_INT));
            ex_result res = ex_sync_wait(js);
            CHECK(res.disposition == EX_DISP_VALUE && res.n == 1 && res.values[0].type == EX_T_INT,
                  "round %d: sync_wait of the join gave disposition %d", round, res.disposition);
            checks++;
            ex_result_destroy(&res);
        } else {
            /* The join completes on its receiver's scheduler: the pool
             * (a hop after the last association ended) or the inline
             * scheduler (on the agent that ended it). */
            ex_scheduler js_sch = join_on_pool ? sch : ex_inline_scheduler();
            ex_sender *js = ex_write_env(ex_counting_scope_join(&scope), &ex_key_get_scheduler, ex_sched_value(js_sch));
            e = ex_connect_alloc(js, srec_receiver(&jr), &jop);
            ex_sender_release(js);
            CHECK(e.code == 0, "round %d: connect join: %s", round, e.msg ? e.msg : "");
            checks++;
            if (e.code) break;
            ex_start(jop);
        }
        if (!srec_wait(j, "the join", round, &checks)) break;
        bool ok;

        /* The join closed the scope: later spawns are refused and never run. */
        static slot extra;
        extra.result = NOT_TRIED;
        extra.fail = false;
        extra.completed = 0;
        e = ex_spawn(make_work(&extra), ex_counting_scope_token(&scope));
        CHECK(e.code == EX_ESHUTDOWN, "round %d: spawn after the join returned %d", round, e.code);
        checks++;

        ok = true;
        for (int t = 0; t < SPAWNERS; t++) ok = ok && agent_wait(&spawners[t]);
        ok = ok && agent_wait(&future_agent);
        for (int t = 0; t < ASSOCIATORS; t++) ok = ok && agent_wait(&associators[t]);
        CHECK(ok && !__atomic_load_n(&assoc_hung, __ATOMIC_RELAXED), "round %d: a spawning thread hung", round);
        checks++;
        if (!ok) break;
        for (int jx = 0; jx < FUTURES; jx++) {
            fut *f = &futs[jx];
            if (f->action == F_DEFERRED && f->out.op) {
                ex_start(f->out.op);
                ex_sender_release(f->s);
                f->s = NULL;
            }
        }
        for (int jx = 0; ok && jx < FUTURES; jx++)
            if (futs[jx].out.op) ok = wait_flag(&futs[jx].out.done);
        CHECK(ok, "round %d: a future did not complete within 20 s", round);
        checks++;
        if (!ok) break;

        /* Destroy must succeed at once: the join saw no association left. */
        e = ex_counting_scope_destroy(&scope);
        CHECK(e.code == 0, "round %d: scope destroy after the join: %s", round, e.msg ? e.msg : "");
        checks++;
        if (e.code) {
            double deadline = now_s() + 20.0;
            while ((e = ex_counting_scope_destroy(&scope)).code && now_s() < deadline) sched_yield();
            if (e.code) break;
        }
        sched_yield();

        /* Spawned work. */
        uint32_t ok_spawns = 0, bad_ok = 0, bad_refused = 0, bad_code = 0;
        for (int t = 0; t < SPAWNERS; t++)
            for (int i = 0; i < PER_SPAWNER; i++) {
                slot *s = &slots[t][i];
                int res = __atomic_load_n(&s->result, __ATOMIC_ACQUIRE);
                uint32_t c = __atomic_load_n(&s->completed, __ATOMIC_RELAXED);
                if (res == EX_OK) {
                    ok_spawns++;
                    if (c != 1) bad_ok++;
                } else if (res == EX_ESHUTDOWN) {
                    n_refused++;
                    if (c != 0) bad_refused++;
                } else if (res != NOT_TRIED) {
                    bad_code++;
                } else if (c != 0) {
                    bad_refused++;
                }
            }
        n_ok += ok_spawns;
        CHECK(bad_ok == 0, "round %d: %u accepted spawns did not complete exactly once", round, bad_ok);
        CHECK(bad_refused == 0, "round %d: %u refused spawns ran", round, bad_refused);
        CHECK(bad_code == 0, "round %d: %u spawns failed with an unexpected code", round, bad_code);
        CHECK(extra.completed == 0, "round %d: the spawn refused after the join ran", round);
        checks += 4;

        /* Futures. */
        uint32_t ok_futures = 0;
        for (int jx = 0; jx < FUTURES; jx++) {
            fut *f = &futs[jx];
            uint32_t vr = __atomic_load_n(&f->value_runs, __ATOMIC_RELAXED);
            uint32_t sr = __atomic_load_n(&f->stopped_runs, __ATOMIC_RELAXED);
            bool consumed = f->out.op != NULL;
            CHECK(f->connect_err == 0, "round %d: future %d: connect failed with %d", round, jx, f->connect_err);
            checks++;
            if (f->status == EX_OK) {
                ok_futures++;
                CHECK(vr + sr == 1, "round %d: future %d: work completed %u times", round, jx, vr + sr);
                checks++;
            } else {
                CHECK(f->status == EX_ESHUTDOWN && vr + sr == 0,
                      "round %d: future %d: status %d, work completed %u times", round, jx, f->status, vr + sr);
                checks++;
            }
            if (!consumed) continue;
            uint32_t calls = __atomic_load_n(&f->out.calls, __ATOMIC_ACQUIRE);
            CHECK(calls == 1, "round %d: future %d completed %u times", round, jx, calls);
            checks++;
            fut_disp[f->out.disp]++;
            if (f->status != EX_OK) {
                CHECK(f->out.disp == D_ERROR && f->out.err.code == EX_ESHUTDOWN,
                      "round %d: future %d of a closed scope gave disposition %d code %d", round, jx, f->out.disp,
                      f->out.err.code);
            } else if (f->out.disp == D_VALUE) {
                CHECK(vr == 1 && f->out.n == 1 && f->out.v[0].type == EX_T_INT && f->out.v[0].as.i == f->value,
                      "round %d: future %d: wrong value", round, jx);
            } else if (f->out.disp == D_STOPPED) {
                bool may_stop = request_stop || (env_stopped && (jx & 1));
                CHECK(sr == 1 && may_stop, "round %d: future %d stopped (stop requested: %d, env's: %d, stopped runs %u)",
                      round, jx, request_stop, env_stopped, sr);
            } else {
                CHECK(0, "round %d: future %d: unexpected disposition %d (code %d)", round, jx, f->out.disp, f->out.err.code);
            }
            checks++;
        }

        /* Associate: every operation completed once; those that ran (value:
         * the work maps stopped to a value) are the work's runs, at least
         * one per sender (it was built while the scope was open). */
        uint32_t assoc_runs = 0;
        for (int k = 0; k < ASSOCS; k++) {
            uint32_t runs = __atomic_load_n(&assoc_slots[k].completed, __ATOMIC_RELAXED), values = 0;
            for (int t = 0; t < ASSOCIATORS; t++) {
                srec *o = &assoc_out[t][k];
                CHECK(o->disp == D_VALUE || o->disp == D_STOPPED,
                      "round %d: associate %d, connect %d: disposition %d (a negative one: connect failed)", round, k, t,
                      o->disp);
                CHECK(__atomic_load_n(&o->calls, __ATOMIC_ACQUIRE) == 1, "round %d: associate %d, connect %d completed %u times",
                      round, k, t, o->calls);
                checks += 2;
                if (o->disp == D_VALUE) values++;
                else n_assoc_refused++;
            }
            CHECK(runs >= 1 && runs == values,
                  "round %d: associate %d: the work ran %u times, %u operations completed with a value", round, k, runs,
                  values);
            checks++;
            assoc_runs += runs;
        }
        n_assoc_runs += assoc_runs;
        n_env_spawns += __atomic_load_n(&env_spawns, __ATOMIC_RELAXED);

        /* The join. */
        srec_expect_once(j, "the join", round, &checks);
        CHECK(join_snapshot == ok_spawns + ok_futures + assoc_runs,
              "round %d: when the join completed %u works had completed, but %u spawns, %u futures and %u associated "
              "runs were accepted (%s)",
              round, join_snapshot, ok_spawns, ok_futures, assoc_runs,
              close_first ? "closed, then joined" : "joined while open");
        uint32_t late_n = __atomic_load_n(&late, __ATOMIC_RELAXED);
        CHECK(late_n == 0, "round %d: %u accepted works completed after the join had completed (%s)", round, late_n,
              close_first ? "closed, then joined" : "joined while open");
        uint32_t fr = __atomic_load_n(&failed_runs, __ATOMIC_RELAXED);
        if (fr) {
            n_join_errors++;
            CHECK(j->disp == D_ERROR && j->err.code == EX_EUSER + 5, "round %d: failed work, but join gave %d (%d)",
                  round, j->disp, j->err.code);
        } else {
            CHECK(j->disp == D_VALUE, "round %d: no work failed, but join gave disposition %d (%d)", round, j->disp,
                  j->err.code);
        }
        checks += 3;
        if (!request_stop) {
            bool all_values = true;
            for (int jx = 0; jx < FUTURES; jx++)
                if (futs[jx].status == EX_OK && futs[jx].action == F_IMMEDIATE && futs[jx].out.disp != D_VALUE &&
                    !(env_stopped && (jx & 1)))
                    all_values = false;
            CHECK(all_values, "round %d: without a stop request a consumed future did not give its value", round);
            checks++;
        }
        for (int jx = 0; jx < FUTURES; jx++) {
            ex_operation_free(futs[jx].out.op);
            ex_sender_release(futs[jx].s);
        }
        ex_operation_free(jop);
        /* The join completed, the scope is destroyed and every future and
         * consumer is released: nothing of the round may still be held.  A
         * block that another thread frees a little later means library work
         * of the scope outlived its join; a block never freed is a leak. */
        long in_use = __atomic_load_n(&alloc_in_use, __ATOMIC_RELAXED);
        checks++;
        if (in_use != baseline) {
            double deadline = now_s() + 0.5;
            while ((in_use = __atomic_load_n(&alloc_in_use, __ATOMIC_ACQUIRE)) != baseline && now_s() < deadline) {
                struct timespec d = { 0, 50000 };
                nanosleep(&d, NULL);
            }
            if (in_use == baseline) {
                if (freed_after_join++ < 3)
                    fprintf(stderr, "round %d: a block of the round was still allocated after the join completed "
                                    "and every future was released; another thread freed it later\n", round);
            } else {
                CHECK(0, "round %d: %ld block(s) never freed", round, in_use - baseline);
                baseline = in_use;
            }
        }
    }

    CHECK(freed_after_join == 0, "in %u of %d rounds a block of the round was freed by another thread only after "
          "the join had completed and every future and consumer was released", freed_after_join, ROUNDS);
    checks++;
    for (int t = 0; t < SPAWNERS; t++) agent_stop(&spawners[t]);
    agent_stop(&future_agent);
    for (int t = 0; t < ASSOCIATORS; t++) agent_stop(&associators[t]);
    stress_pool_free(pool, &checks);
    ex_set_default_allocator(NULL);
    printf("scope_stress: %d rounds in %.2f s (%u spawns accepted, %u stopped, %u refused; %u joins without close, "
           "%u join errors; futures value %u, error %u, stopped %u; %u spawns and futures with env, its token "
           "stopped in %u rounds; associate: %u runs, %u connects without an association)\n",
           ROUNDS, now_s() - t0, n_ok, stopped_works, n_refused, n_open_joins, n_join_errors, fut_disp[D_VALUE],
           fut_disp[D_ERROR], fut_disp[D_STOPPED], n_env_spawns, n_env_stops, n_assoc_runs, n_assoc_refused);
    return stress_finish("scope_stress", checks);
}
