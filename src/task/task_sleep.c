/* SPDX-License-Identifier: MIT */
/* task_sleep.c - ex_task_sleep_for and ex_task_sleep_until: an await of a
 * timer on the task's scheduler (see cexec/task.h). */
#include "task/exi_task.h"

/* The sleep's checks before it builds its timer (bad_time: what is
 * wrong with the time given, or NULL): EX_OK to sleep. */
static ex_error sleep_input(const ex_task *t, const char *bad_time, const char *null_task, const char *stopped,
                            const char *no_clock) {
    if (!t) return ex_err(EX_EINVAL, null_task);
    if (bad_time) return ex_err(EX_EINVAL, bad_time);
    if (t->stopped) return ex_err(EX_ECANCELED, stopped);
    if (!t->sched.vt || !t->sched.vt->connect_schedule_at) return ex_err(EX_ENOTSUP, no_clock);
    return ex_ok();
}

/* Awaits the timer: EX_OK once it fired, the error of the timer or of
 * the hop back (the caller's), EX_ECANCELED if it completed stopped. */
static ex_error sleep_await(ex_task *t, ex_sender *timer, const char *stopped) {
    ex_await_result out;
    ex_await_into(t, timer, &out);
    if (out.status == EX_AWAIT_VALUE) return ex_ok();
    if (out.status == EX_AWAIT_ERROR) return out.error;
    return ex_err(EX_ECANCELED, stopped);
}

ex_error ex_task_sleep_for(ex_task *t, int64_t duration_ns) {
    const char *bad = duration_ns < 0                    ? "ex_task_sleep_for: negative duration"
                      : duration_ns > INT64_MAX - ex_now() ? "ex_task_sleep_for: the duration overflows the clock"
                                                           : NULL;
    ex_error e = sleep_input(t, bad, "ex_task_sleep_for: NULL task", "ex_task_sleep_for: the task is stopped",
                             "ex_task_sleep_for: the task's scheduler has no clock (no connect_schedule_at)");
    if (e.code) return e;
    return sleep_await(t, ex_schedule_after(t->sched, duration_ns), "ex_task_sleep_for: the task was stopped");
}

ex_error ex_task_sleep_until(ex_task *t, int64_t deadline_ns) {
    ex_error e = sleep_input(t, deadline_ns < 0 ? "ex_task_sleep_until: negative deadline" : NULL,
                             "ex_task_sleep_until: NULL task", "ex_task_sleep_until: the task is stopped",
                             "ex_task_sleep_until: the task's scheduler has no clock (no connect_schedule_at)");
    if (e.code) return e;
    return sleep_await(t, ex_schedule_at(t->sched, deadline_ns), "ex_task_sleep_until: the task was stopped");
}
