/* SPDX-License-Identifier: MIT */
/* strand_fixtures.c - see strand_fixtures.h. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "resources/strand_fixtures.h"

ex_strand *strand_new(ex_scheduler under) {
    ex_strand *s = NULL;
    ex_error e = ex_strand_create(under, NULL, &s);
    cr_assert_eq(e.code, 0, "ex_strand_create: %s", e.msg ? e.msg : "");
    cr_assert_not_null(s);
    return s;
}

/* Destroys a strand whose items have all completed.  The strand's turn on
 * its underlying agent may still be finishing after the last completion
 * (EX_EBUSY is then correct: its drain is running), so EX_EBUSY is retried
 * for a bounded time; anything else fails. */
void strand_free(ex_strand *s) {
    double end = test_now_s() + TEST_WAIT_LIMIT_S;
    ex_error e;
    while ((e = ex_strand_destroy(s)).code == EX_EBUSY && test_now_s() < end) sched_yield();
    cr_assert_eq(e.code, 0, "ex_strand_destroy of a strand with nothing queued: %d (%s)", e.code,
                 e.msg ? e.msg : "");
}

/* Destroy that must succeed at once (the underlying agents are known idle). */
void strand_free_now(ex_strand *s) {
    ex_error e = ex_strand_destroy(s);
    cr_assert_eq(e.code, 0, "ex_strand_destroy of an idle strand: %d (%s)", e.code, e.msg ? e.msg : "");
}

_Thread_local bool tl_in_call;

/* ---------------------------------------------------------- shared state */

box *box_new(ex_pool *p) {
    box *b = calloc(1, sizeof *b);
    cr_assert_not_null(b);
    b->pool = p;
    return b;
}

void box_enter(box *b) {
    if (atomic_fetch_add(&b->inside, 1) != 0) atomic_fetch_add(&b->violations, 1);
}

void box_leave(box *b) { atomic_fetch_sub(&b->inside, 1); }

static void box_note(box *b, int id) {
    b->plain++;
    if (b->nlog < LOG_MAX) b->log[b->nlog++] = id;
}

void expect_log_in_order(const box *b, int n) {
    cr_assert_eq(b->nlog, n, "%d entries logged, expected %d", b->nlog, n);
    for (int i = 0; i < n; i++) cr_assert_eq(b->log[i], i, "position %d ran item %d", i, b->log[i]);
}

/* ------------------------------------------------------------- work items */

static void item_exec(ex_work *w) {
    item *it = (item *)(void *)w;
    box *b = it->b;
    if (!it->nested) box_enter(b);
    it->tid = pthread_self();
    it->thread = test_thread_id();
    it->worker = b->pool ? ex_pool_current_worker(b->pool) : -1;
    it->saw_in_call = tl_in_call;
    it->ran_seen = atomic_load(&b->ran);
    box_note(b, it->id);
    for (volatile unsigned k = 0; k < it->spin; k++) {}
    if (it->action) it->action(it);
    if (!it->nested) box_leave(b);
    atomic_fetch_add(&it->runs, 1);
    atomic_fetch_add(&b->ran, 1);
}

static void item_cancel(ex_work *w) { atomic_fetch_add(&((item *)(void *)w)->cancels, 1); }

void item_init(item *it, int id, box *b) {
    memset(it, 0, sizeof *it);
    it->w.execute = item_exec;
    it->w.cancel = item_cancel;
    it->id = id;
    it->b = b;
    it->worker = -2;
}

item *items_new(int n, box *b) {
    item *it = calloc((size_t)n, sizeof *it);
    cr_assert_not_null(it);
    for (int i = 0; i < n; i++) item_init(&it[i], i, b);
    return it;
}

void post_ok(ex_scheduler sch, item *it) {
    tl_in_call = true;
    ex_error e = ex_post(sch, &it->w);
    tl_in_call = false;
    cr_assert_eq(e.code, 0, "ex_post: %s", e.msg ? e.msg : "");
}

void dispatch_ok(ex_scheduler sch, item *it) {
    tl_in_call = true;
    ex_error e = ex_dispatch(sch, &it->w);
    tl_in_call = false;
    cr_assert_eq(e.code, 0, "ex_dispatch: %s", e.msg ? e.msg : "");
}

/* --------------------------------------------- schedule operations (sops) */

static void sop_note(sop *o) {
    box *b = o->b;
    box_enter(b);
    o->worker = b->pool ? ex_pool_current_worker(b->pool) : -1;
    o->tid = pthread_self();
    o->saw_in_call = tl_in_call;
    box_note(b, o->id);
    box_leave(b);
}

static void sop_value(void *self, const ex_value *v, size_t n) {
    sop *o = self;
    (void)v, (void)n;
    sop_note(o);
    atomic_fetch_add(&o->values, 1);
    atomic_fetch_add(&o->hits, 1);
    atomic_fetch_add(&o->b->ran, 1);
}

static void sop_error(void *self, ex_error e) {
    sop *o = self;
    o->err = e;
    o->worker = o->b->pool ? ex_pool_current_worker(o->b->pool) : -1;
    o->tid = pthread_self();
    atomic_fetch_add(&o->errors, 1);
    atomic_fetch_add(&o->hits, 1);
    atomic_fetch_add(&o->b->ran, 1);
}

static void sop_stopped(void *self) {
    sop *o = self;
    sop_note(o);
    atomic_fetch_add(&o->stops, 1);
    atomic_fetch_add(&o->hits, 1);
    atomic_fetch_add(&o->b->ran, 1);
}

static ex_env sop_env(void *self) {
    sop *o = self;
    return o->has_stop ? ex_env_of_pair(&o->pair) : ex_env_empty();
}

static const ex_receiver_vtable sop_vt = { sop_value, sop_error, sop_stopped, sop_env, NULL };

void sop_init(sop *o, int id, box *b) {
    memset(o, 0, sizeof *o);
    o->b = b;
    o->id = id;
    o->worker = -2;
    ex_stop_source_init(&o->stop);
}

sop *sops_new(int n, box *b, int first_id) {
    sop *o = calloc((size_t)n, sizeof *o);
    cr_assert_not_null(o);
    for (int i = 0; i < n; i++) sop_init(&o[i], first_id + i, b);
    return o;
}

void sop_with_stop(sop *o) {
    ex_env_pair_init(&o->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&o->stop)), ex_env_empty());
    o->has_stop = true;
}

/* Connects snd into the sop's storage and starts it. */
void sop_start(sop *o, const ex_sender *snd) {
    ex_receiver r = { &sop_vt, o };
    ex_error e = ex_connect(snd, r, o->storage, sizeof o->storage, &o->op);
    cr_assert_eq(e.code, 0, "ex_connect: %s", e.msg ? e.msg : "");
    tl_in_call = true;
    ex_start(o->op);
    tl_in_call = false;
}

void sops_destroy(sop *o, int n) {
    for (int i = 0; i < n; i++)
        if (o[i].op) ex_operation_destroy(o[i].op);
}

static void direct_exec(ex_work *w) {
    direct *d = (direct *)(void *)w;
    d->ran_seen = atomic_load(&d->b->ran);
    atomic_fetch_add(&d->runs, 1);
}

void direct_init(direct *d, box *b) {
    memset(d, 0, sizeof *d);
    d->w.execute = direct_exec;
    d->b = b;
}

void sync_schedule_ok(ex_scheduler sch) {
    ex_result r = ex_sync_wait(ex_schedule(sch));
    cr_assert_eq(r.disposition, EX_DISP_VALUE, "sync_wait(schedule): disposition %d", r.disposition);
    ex_result_destroy(&r);
}

/* ------------------------------------------------------------------ rigs */

static void rig_fill(rig *r, ex_scheduler under, int n, int m) {
    r->s = strand_new(under);
    r->sch = ex_strand_scheduler(r->s);
    r->b = box_new(r->p);
    r->n = n;
    r->m = m;
    r->it = items_new(n ? n : 1, r->b);
    r->o = sops_new(m ? m : 1, r->b, n);
    r->snd = ex_schedule(r->sch);
}

void rig_open(rig *r, unsigned threads, int n, int m) {
    memset(r, 0, sizeof *r);
    r->p = test_pool_new(threads);
    rig_fill(r, ex_pool_scheduler(r->p), n, m);
}

void rig_open_held(rig *r, int n, int m) {
    memset(r, 0, sizeof *r);
    r->p = held_pool(&r->h);
    rig_fill(r, ex_pool_scheduler(r->p), n, m);
}

void rig_open_over(rig *r, ex_scheduler under, int n, int m) {
    memset(r, 0, sizeof *r);
    rig_fill(r, under, n, m);
}

void rig_release(rig *r) { hold_release(&r->h); }

void rig_post(rig *r, int from, int to) {
    for (int i = from; i < to; i++) post_ok(r->sch, &r->it[i]);
}

void rig_start(rig *r, int from, int to) {
    for (int i = from; i < to; i++) sop_start(&r->o[i], r->snd);
}

void rig_close(rig *r, bool idle) {
    if (idle) strand_free_now(r->s);
    else strand_free(r->s);
    sops_destroy(r->o, r->m);
    ex_sender_release(r->snd);
    if (r->p) test_pool_free(r->p);
    free(r->o);
    free(r->it);
    free(r->b);
    expect_no_leaks();
}
