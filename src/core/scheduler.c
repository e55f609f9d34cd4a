/* SPDX-License-Identifier: MIT */
/* scheduler.c - ex_schedule and the inline scheduler. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_macros.h"
#include "core/exi_scheduler.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"

typedef struct schedule_sender {
    ex_sender base;
    ex_scheduler sch;
    ex_env_pair attrs;  /* SCHED-ATTRS(sch): value and stopped completion schedulers */
} schedule_sender;

static ex_error schedule_connect(const ex_sender *s, ex_receiver r, void *storage) {
    const schedule_sender *ss = (const schedule_sender *)s;
    return ss->sch.vt->connect_schedule(ss->sch.self, r, storage);
}

static ex_env schedule_attrs(const ex_sender *s) {
    return ex_env_of_pair(&((const schedule_sender *)s)->attrs);
}

static const ex_sender_vtable schedule_vt = { "ex_schedule", schedule_connect, schedule_attrs, NULL, NULL };

ex_sender *ex_schedule(ex_scheduler sch) {
    if (!sch.vt || !sch.vt->connect_schedule)
        return ex_invalid_sender(EX_EINVAL, "ex_schedule: invalid scheduler handle");
    ex_sender *s = ex_sender_alloc(&schedule_vt, sizeof(schedule_sender));
    if (!s) return exi_oom_sender();
    schedule_sender *ss = (schedule_sender *)s;
    ss->sch = sch;
    ex_env_pair_init2(&ss->attrs, &ex_key_completion_scheduler_value, ex_sched_value(sch),
                      &ex_key_completion_scheduler_stopped, ex_sched_value(sch), ex_env_empty());
    static const ex_sig none = { 0, { 0 } };
    s->sigs = exi_sigs_of(&none, sch.vt->schedule_flags);
    s->op_size = sch.vt->schedule_op_size;
    s->op_align = sch.vt->schedule_op_align;
    return s;
}

ex_error ex_connect_schedule(ex_scheduler sch, ex_receiver r, void *storage) {
    if (!sch.vt || !sch.vt->connect_schedule)
        return ex_err(EX_EINVAL, "ex_connect_schedule: invalid scheduler handle");
    return sch.vt->connect_schedule(sch.self, r, storage);
}

ex_error ex_post(ex_scheduler sch, ex_work *w) {
    if (!w || !w->execute) return ex_err(EX_EINVAL, "ex_post: NULL work item or execute function");
    if (!sch.vt || !sch.vt->post) return ex_err(EX_EINVAL, "ex_post: the scheduler does not support post");
    return sch.vt->post(sch.self, w);
}

ex_error ex_dispatch(ex_scheduler sch, ex_work *w) {
    if (!w || !w->execute) return ex_err(EX_EINVAL, "ex_dispatch: NULL work item or execute function");
    if (!sch.vt || !sch.vt->dispatch) return ex_err(EX_EINVAL, "ex_dispatch: the scheduler does not support dispatch");
    return sch.vt->dispatch(sch.self, w);
}

bool ex_scheduler_equal(ex_scheduler a, ex_scheduler b) {
    if (a.vt != b.vt) return false;
    if (a.vt && a.vt->equal) return a.vt->equal(a.self, b.self);
    return a.self == b.self;
}

ex_scheduler ex_scheduler_retain(ex_scheduler sch) {
    if (sch.vt && sch.vt->retain) sch.vt->retain(sch.self);
    return sch;
}

void ex_scheduler_release(ex_scheduler sch) {
    if (sch.vt && sch.vt->release) sch.vt->release(sch.self);
}

ex_forward_progress ex_get_forward_progress_guarantee(ex_scheduler sch) {
    return sch.vt ? sch.vt->progress : EX_PROGRESS_WEAKLY_PARALLEL;
}

/* -------------------------------------------------------- queued schedule ops */

static void queued_execute(ex_work *w) {
    exi_queued_op *o = EXI_CONTAINER_OF(w, exi_queued_op, work);
    if (ex_stop_token_stop_requested(ex_get_stop_token(ex_receiver_env(o->r)))) ex_set_stopped(o->r);
    else ex_set_value(o->r, NULL, 0);
}

static void queued_cancel(ex_work *w) { ex_set_stopped(EXI_CONTAINER_OF(w, exi_queued_op, work)->r); }

void exi_queued_op_init(exi_queued_op *o, const ex_operation_vtable *vt, void *resource, ex_receiver r) {
    o->base.vt = vt;
    o->work.next = NULL;
    o->work.execute = queued_execute;
    o->work.cancel = queued_cancel;
    o->resource = resource;
    o->r = r;
}

/* ------------------------------------------------------------------ inline */

typedef struct inline_op {
    ex_operation base;
    ex_receiver r;
} inline_op;

static void inline_start(ex_operation *op) { ex_set_value(((inline_op *)op)->r, NULL, 0); }

static const ex_operation_vtable inline_op_vt = { inline_start, NULL };

static ex_error inline_connect(void *self, ex_receiver r, void *storage) {
    (void)self;
    inline_op *o = storage;
    o->base.vt = &inline_op_vt;
    o->r = r;
    return ex_ok();
}

static const ex_scheduler_vtable inline_vt = {
    .name = "inline",
    .schedule_op_size = sizeof(inline_op),
    .schedule_op_align = alignof(inline_op),
    .schedule_flags = 0,
    .connect_schedule = inline_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .equal = NULL,
};

ex_scheduler ex_inline_scheduler(void) {
    ex_scheduler s = { &inline_vt, NULL };
    return s;
}

/* ------------------------------------------------------------ bulk jobs */

bool ex_bulk_job_run(ex_bulk_job *job, size_t begin, size_t end) { return job->vt->run(job, begin, end); }

void ex_bulk_job_done(ex_bulk_job *job) { job->vt->done(job); }

const ex_allocator *ex_bulk_job_allocator(const ex_bulk_job *job) { return job->vt->allocator(job); }
