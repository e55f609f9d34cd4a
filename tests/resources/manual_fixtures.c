/* SPDX-License-Identifier: MIT */
/* manual_fixtures.c - see manual_fixtures.h. */
#include <stdio.h>
#include <string.h>

#include "resources/manual_fixtures.h"

ex_scheduler ms_init(ex_manual_scheduler *m) {
    ex_error e = ex_manual_scheduler_init(m);
    cr_assert_eq(e.code, 0, "ex_manual_scheduler_init: %s", e.msg ? e.msg : "");
    return ex_manual_scheduler_get(m);
}

void ms_destroy(ex_manual_scheduler *m) {
    ex_error e = ex_manual_scheduler_destroy(m);
    cr_assert_eq(e.code, 0, "ex_manual_scheduler_destroy: %s", e.msg ? e.msg : "");
}

static void ms_log_add(ms_log *log, int id) {
    cr_assert_lt(log->n, (int)(sizeof log->ids / sizeof log->ids[0]), "the log is full");
    log->ids[log->n++] = id;
}

void ms_expect_log(const ms_log *log, const int *ids, int n) {
    char got[512] = "", want[512] = "";
    for (int i = 0; i < log->n; i++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%d", i ? " " : "", log->ids[i]);
    for (int i = 0; i < n; i++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? " " : "", ids[i]);
    cr_assert_str_eq(got, want, "the log reads [%s], expected [%s]", got, want);
}

/* ------------------------------------------------------------------ items */

static void ms_item_execute(ex_work *w) {
    ms_item *it = (ms_item *)(void *)w;
    it->runs++;
    it->thread = test_thread_id();
    ms_log_add(it->log, it->id);
    if (it->post) ms_post(it->post);
    if (it->requeue > 0) {
        it->requeue--;
        ms_post(it);
    }
    if (it->shutdown) cr_assert_eq(ex_manual_scheduler_shutdown(it->m).code, 0);
    if (it->try_destroy) it->result = ex_manual_scheduler_destroy(it->m);
    if (it->try_run) it->result = ex_manual_run(it->m, SIZE_MAX, &it->ran);
    if (it->also) it->also(it);
}

static void ms_item_cancel(ex_work *w) { ((ms_item *)(void *)w)->cancels++; }

void ms_item_init(ms_item *it, int id, ms_log *log, ex_manual_scheduler *m) {
    memset(it, 0, sizeof *it);
    it->work.execute = ms_item_execute;
    it->work.cancel = ms_item_cancel;
    it->id = id;
    it->log = log;
    it->m = m;
}

void ms_post(ms_item *it) {
    ex_error e = ex_post(ex_manual_scheduler_get(it->m), &it->work);
    cr_assert_eq(e.code, 0, "ex_post of item %d: %s", it->id, e.msg ? e.msg : "");
}

/* ------------------------------------------------------------- operations */

static void ms_op_logged(rec *r) {
    ms_op *o = (ms_op *)(void *)r;
    ms_log_add(o->log, o->id);
}

static void ms_op_connect_start(ms_op *o, int id, ms_log *log, ex_sender *s, bool stopped) {
    if (stopped) rec_init_stop_requested(&o->r);
    else {
        rec_init(&o->r);
        rec_with_stop(&o->r);
    }
    o->r.after = ms_op_logged;
    o->id = id;
    o->log = log;
    cr_assert_leq(ex_sender_op_size(s), sizeof o->storage);
    ex_error e = ex_connect(s, rec_receiver(&o->r), o->storage, sizeof o->storage, &o->op);
    ex_sender_release(s);
    cr_assert_eq(e.code, 0, "connect: %s", e.msg ? e.msg : "");
    ex_start(o->op);
}

void ms_op_start(ms_op *o, int id, ms_log *log, ex_sender *s) { ms_op_connect_start(o, id, log, s, false); }

void ms_op_start_stopped(ms_op *o, int id, ms_log *log, ex_sender *s) { ms_op_connect_start(o, id, log, s, true); }

void ms_op_expect(ms_op *o, ex_disposition disp, int code) {
    switch (disp) {
    case EX_DISP_VALUE: rec_expect_values(&o->r, 0); break;
    case EX_DISP_ERROR: rec_expect_error(&o->r, code); break;
    case EX_DISP_STOPPED: rec_expect_stopped(&o->r); break;
    }
    ex_operation_destroy(o->op);
}

/* ------------------------------------------------------------------ clock */

int64_t ms_past(void) {
    int64_t now = ex_now();
    return now > EX_NS_PER_S ? now - EX_NS_PER_S : 0;
}

void ms_wait_clock(int64_t deadline) {
    double limit = test_now_s() + TEST_WAIT_LIMIT_S;
    while (ex_now() < deadline) {
        cr_assert_lt(test_now_s(), limit, "the clock did not reach the deadline");
        test_nap_us(100);
    }
}
