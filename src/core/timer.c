/* SPDX-License-Identifier: MIT */
/* timer.c - the clock and the timed schedule senders (cexec/timer.h).  The
 * resource does the timing: the sender only carries the deadline to its
 * connect_schedule_at. */
#include <stdalign.h>
#include <time.h>
#include <cexec/cexec.h>

#include "core/exi_sender.h"
#include "core/exi_value.h"

int64_t ex_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * EX_NS_PER_S + ts.tv_nsec;
}

typedef struct timed_sender {
    ex_sender base;
    ex_scheduler sch;
    ex_timer_when when;
    ex_env_pair attrs;  /* the value completion scheduler: sch (stopped may come on the stopping thread) */
} timed_sender;

static ex_error timed_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const timed_sender *ts = (const timed_sender *)s;
    return ts->sch.vt->connect_schedule_at(ts->sch.self, ts->when, r, storage);
}

static ex_env timed_attrs(const ex_sender *s) { return ex_env_of_pair(&((const timed_sender *)s)->attrs); }

static const ex_sender_vtable timed_vts[] = {
    { "ex_schedule_at", timed_connect, timed_attrs, NULL, NULL },
    { "ex_schedule_after", timed_connect, timed_attrs, NULL, NULL },
};

static ex_sender *timed_new(ex_scheduler sch, ex_timer_when when) {
    if (!sch.vt || !sch.vt->connect_schedule)
        return ex_invalid_sender(EX_EINVAL, when.relative ? "ex_schedule_after: invalid scheduler handle"
                                                          : "ex_schedule_at: invalid scheduler handle");
    if (!sch.vt->connect_schedule_at)
        return ex_invalid_sender(EX_ENOTSUP, when.relative
                                                 ? "ex_schedule_after: the scheduler has no clock (no connect_schedule_at)"
                                                 : "ex_schedule_at: the scheduler has no clock (no connect_schedule_at)");
    if (when.ns < 0)
        return ex_invalid_sender(EX_EINVAL, when.relative ? "ex_schedule_after: negative duration"
                                                          : "ex_schedule_at: negative deadline");
    if (when.relative && when.ns > INT64_MAX - ex_now())
        return ex_invalid_sender(EX_EINVAL, "ex_schedule_after: the duration overflows the clock");
    ex_sender *s = ex_sender_alloc(&timed_vts[when.relative ? 1 : 0], sizeof(timed_sender));
    if (!s) return exi_oom_sender();
    timed_sender *ts = (timed_sender *)s;
    ts->sch = sch;
    ts->when = when;
    ex_env_pair_init(&ts->attrs, &ex_key_completion_scheduler_value, ex_sched_value(sch), ex_env_empty());
    static const ex_sig none = { 0, { 0 } };
    s->sigs = exi_sigs_of(&none, (uint8_t)(sch.vt->schedule_flags | EX_SIGS_STOPPED));
    s->op_size = sch.vt->timer_op_size;
    s->op_align = sch.vt->timer_op_align;
    return s;
}

ex_sender *ex_schedule_at(ex_scheduler sch, int64_t deadline_ns) {
    ex_timer_when w = { deadline_ns, false };
    return timed_new(sch, w);
}

ex_sender *ex_schedule_after(ex_scheduler sch, int64_t duration_ns) {
    ex_timer_when w = { duration_ns, true };
    return timed_new(sch, w);
}
