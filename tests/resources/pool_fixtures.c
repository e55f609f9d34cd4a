/* SPDX-License-Identifier: MIT */
/* pool_fixtures.c - see pool_fixtures.h. */
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "resources/pool_fixtures.h"

ex_pool *pool_named(unsigned threads, const char *prefix) {
    ex_pool_config c = test_pool_config(threads, prefix);
    return test_pool_new_cfg(&c);
}


ex_pool_worker_stats stats_sum(ex_pool *p) {
    ex_pool_worker_stats sum = { 0, 0, 0, 0 };
    for (unsigned i = 0; i < ex_pool_size(p) + ex_pool_lend_slots(p); i++) {
        ex_pool_worker_stats s;
        ex_error e = ex_pool_worker_stats_get(p, i, &s);
        cr_assert_eq(e.code, 0, "ex_pool_worker_stats_get(%u): %s", i, e.msg ? e.msg : "");
        sum.executed += s.executed;
        sum.stolen += s.stolen;
        sum.parked += s.parked;
        sum.woken += s.woken;
    }
    return sum;
}

/* ---------------------------------------- where a then callback ran */

ex_error where_fn(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    where *w = ctx;
    (void)in, (void)n;
    w->calls++;
    w->worker = ex_pool_current_worker(w->pool);
    w->tid = pthread_self();
    w->name[0] = '\0';
    pthread_getname_np(pthread_self(), w->name, sizeof w->name);
    out[0] = ex_int(w->worker);
    return ex_ok();
}

/* Runs one then(schedule(pool)) through sync_wait from the calling thread. */
void run_where(ex_pool *p, where *w) {
    memset(w, 0, sizeof *w);
    w->pool = p;
    w->worker = -2;
    ex_result r = ex_sync_wait(ex_then(ex_schedule(ex_pool_scheduler(p)), where_fn, w, EX_SIG0, EX_SIG(EX_T_INT)));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "disposition %d (%s)", r.disposition,
                 r.error.msg ? r.error.msg : "");
    cr_assert_eq(w->calls, 1);
    ex_result_destroy(&r);
}

/* --------------------------------------------- a thread-safe receiver slot */

atomic_long g_completed;  /* completions of every slot */

/* arec's completions, counted in g_completed as well (last). */
static void slot_value(void *self, const ex_value *v, size_t n) {
    arec_vt.set_value(self, v, n);
    atomic_fetch_add(&g_completed, 1);
}

static void slot_error(void *self, ex_error e) {
    arec_vt.set_error(self, e);
    atomic_fetch_add(&g_completed, 1);
}

static void slot_stopped(void *self) {
    arec_vt.set_stopped(self);
    atomic_fetch_add(&g_completed, 1);
}

static ex_env slot_env(void *self) { return arec_vt.env(self); }

static const ex_receiver_vtable slot_vt = { slot_value, slot_error, slot_stopped, slot_env, NULL };

void slot_init(slot *s, ex_pool *p) {
    arec_init(&s->r, p);
    s->op = NULL;
}

/* Connects snd into the slot's own storage; does not start. */
ex_error slot_connect(slot *s, const ex_sender *snd) {
    ex_receiver r = { &slot_vt, &s->r };
    return ex_connect(snd, r, s->storage, sizeof s->storage, &s->op);
}

/* Main-thread version: connect (asserting) and start. */
void slot_start(slot *s, const ex_sender *snd) {
    ex_error e = slot_connect(s, snd);
    cr_assert_eq(e.code, 0, "ex_connect: %s", e.msg ? e.msg : "");
    ex_start(s->op);
}

slot *slots_new(int n) {
    slot *s = calloc((size_t)n, sizeof *s);
    cr_assert_not_null(s);
    return s;
}

void slots_start(slot *s, int n, ex_pool *p, const ex_sender *snd) {
    atomic_store(&g_completed, 0);
    for (int i = 0; i < n; i++) {
        slot_init(&s[i], p);
        slot_start(&s[i], snd);
    }
}

/* Every slot completed exactly once; returns how many with a value. */
int slots_expect_once(slot *s, int n) {
    int values = 0;
    for (int i = 0; i < n; i++) {
        cr_assert_eq(atomic_load(&s[i].r.total), 1, "slot %d completed %d times", i, atomic_load(&s[i].r.total));
        values += atomic_load(&s[i].r.values);
    }
    return values;
}

void slots_destroy(slot *s, int n) {
    for (int i = 0; i < n; i++)
        if (s[i].op) ex_operation_destroy(s[i].op);
}
