/* SPDX-License-Identifier: MIT */
/* cexec/scheduler.h - schedulers ([exec.sched], [exec.schedule]) and the
 * inline scheduler.
 *
 * ex_scheduler is a two-word handle {vtable, resource}.  The vtable also
 * names the resource's domain (cexec/domain.h), through which it replaces
 * algorithms (its bulk), and its post, dispatch and timer hooks. */
#ifndef CEXEC_SCHEDULER_H
#define CEXEC_SCHEDULER_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* [exec.get.forward.progress.guarantee]; the default is weakly parallel. */
typedef enum ex_forward_progress {
    EX_PROGRESS_CONCURRENT,
    EX_PROGRESS_PARALLEL,
    EX_PROGRESS_WEAKLY_PARALLEL
} ex_forward_progress;

/* Bytes every scheduler's schedule operation should fit in: adaptors that
 * learn their scheduler only when connected (ex_on) reserve this much inline
 * and allocate when a scheduler needs more. */
#define EX_SCHEDULE_OP_INLINE 96

/* ---------------------------------------------------- bulk customisation */

/* Helper work items a bulk job carries for the resource that runs it. */
#define EX_BULK_INLINE_HELPERS 3

struct ex_bulk_job;

/* What a bulk job does; set by the operation that makes the job (ex_bulk
 * or any other), called through the ex_bulk_job_* functions below.  The
 * resource needs to know nothing of who made the job. */
typedef struct ex_bulk_job_vtable {
    bool (*run)(struct ex_bulk_job *job, size_t begin, size_t end);
    void (*done)(struct ex_bulk_job *job);
    const struct ex_allocator *(*allocator)(const struct ex_bulk_job *job);
} ex_bulk_job_vtable;

typedef struct ex_bulk_helper {
    ex_work work;
    struct ex_bulk_job *job;
} ex_bulk_helper;

/* The index space of one bulk execution, handed to the function a domain
 * gave ex_bulk_run_on (bulk.h).
 * The resource calls ex_bulk_job_run for disjoint ranges that together
 * cover [0, shape), as `policy` allows, stops handing out ranges once a
 * call returns false, and calls ex_bulk_job_done exactly once, after every
 * ex_bulk_job_run call has returned.  The job's memory stays valid until
 * done is called, and not after.
 *
 * policy (types.h) says what the function permits.  EX_SEQ: one call at a
 * time, all from one agent, ranges in increasing order (simplest: run them
 * on the agent that called the hook).  EX_UNSEQ: one agent, any order.
 * EX_PAR, EX_PAR_UNSEQ: from any of the resource's agents, concurrently.  unchunked: the job is ex_bulk_unchunked's, whose indices
 * are each an agent of their own: hand out one index at a time (grain is
 * 1, so a resource that only honours grain does that too). */
typedef struct ex_bulk_job {
    const ex_bulk_job_vtable *vt;  /* the maker's; resources leave it alone */
    size_t shape;
    size_t grain;              /* chunk size asked for by the user; 0: resource's choice */
    ex_execution_policy policy;
    bool unchunked;
    /* For the resource; cexec does not touch these. */
    uint64_t scratch[4];
    ex_bulk_helper helpers[EX_BULK_INLINE_HELPERS];
    void *extra;
    size_t extra_size;
} ex_bulk_job;

/* Runs the bulk function for every index in [begin, end) (end capped at
 * shape; an empty range runs nothing).  Returns false when the job should
 * stop (an index failed, or stop was requested).  Compute end without
 * wrapping: near SIZE_MAX, begin + grain does. */
bool ex_bulk_job_run(ex_bulk_job *job, size_t begin, size_t end);

/* Ends the job: the bulk operation completes (on the calling thread). */
void ex_bulk_job_done(ex_bulk_job *job);

/* The allocator of the operation's environment, for resources that need
 * more helper items than the job carries. */
const struct ex_allocator *ex_bulk_job_allocator(const ex_bulk_job *job);

/* When a timed schedule operation completes (cexec/timer.h): at ns on
 * CLOCK_MONOTONIC (ex_now()), or, when relative, ns after the operation
 * starts. */
typedef struct ex_timer_when {
    int64_t ns;
    bool relative;
} ex_timer_when;

typedef struct ex_scheduler_vtable {
    const char *name;
    /* The schedule operation: completes the receiver with set_value() on an
     * agent of this resource (or set_stopped / set_error as schedule_flags
     * says).  Constructed into storage of schedule_op_size bytes aligned to
     * schedule_op_align. */
    size_t schedule_op_size;
    size_t schedule_op_align;
    uint8_t schedule_flags;  /* EX_SIGS_ERROR / EX_SIGS_STOPPED */
    ex_error (*connect_schedule)(void *self, ex_receiver r, void *storage);
    ex_forward_progress progress;
    /* Equality beyond identity (NULL: equal iff same vtable and self). */
    bool (*equal)(void *a, void *b);
    /* D4003's executor operations on a work item (NULL: not supported).
     * post queues it and never runs it inline; dispatch runs it inline when
     * the caller is already on this resource, else queues it. */
    ex_error (*post)(void *self, ex_work *w);
    ex_error (*dispatch)(void *self, ex_work *w);
    /* Like post, but behind the work already queued where the caller runs
     * (a pool worker's own queue is LIFO: post from a worker runs next;
     * yield runs after what is waiting).  For long runners that hand the
     * agent back (a strand's turn).  NULL: post. */
    ex_error (*yield)(void *self, ex_work *w);
    /* The resource's domain (cexec/domain.h): what it does in place of
     * cexec's algorithms, bulk among them (ex_bulk_run_on).  NULL: the
     * default domain, which replaces nothing. */
    const struct ex_domain *domain;
    /* Agents that run this resource's work at once, for algorithms that
     * size their parts by it (NULL hook: 1). */
    unsigned (*concurrency)(void *self);
    /* The resource's default frame allocator (NULL hook or result: none).
     * An environment that names no allocator but whose get_scheduler is
     * this resource allocates through it (see ex_get_allocator). */
    const struct ex_allocator *(*allocator)(void *self);
    /* The owning form of the handle (P3552's task_scheduler holds its
     * resource): retain/release count holders; while one remains, the
     * resource's destroy waits (ex_pool_destroy) or refuses (EX_EBUSY,
     * ex_strand_destroy).  NULL: the resource's lifetime is the user's to
     * guarantee (run loops, the inline scheduler). */
    void (*retain)(void *self);
    void (*release)(void *self);
    /* Timed scheduling (cexec/timer.h).  NULL: the resource has no clock,
     * and ex_schedule_at / ex_schedule_after give an invalid sender with
     * EX_ENOTSUP.  Constructs, into storage of timer_op_size bytes aligned
     * to timer_op_align, an operation that completes with set_value() on
     * an agent of this resource once the deadline `when` names has passed.
     * A stop request before then removes the timer and completes with
     * set_stopped at once, on the requesting thread.  The completion
     * signatures are those of schedule (schedule_flags). */
    size_t timer_op_size;
    size_t timer_op_align;
    ex_error (*connect_schedule_at)(void *self, ex_timer_when when, ex_receiver r, void *storage);
} ex_scheduler_vtable;

/* A sender that completes on sch's resource ([exec.schedule]).  Its
 * attributes answer the value and stopped completion schedulers with sch.
 * An invalid handle (vt == NULL) gives an invalid sender (EX_EINVAL). */
ex_sender *ex_schedule(ex_scheduler sch);

/* Whether a and b schedule onto the same execution resource (P2300's
 * scheduler equality): the same vtable and resource, or what the
 * vtable's equal hook says. */
bool ex_scheduler_equal(ex_scheduler a, ex_scheduler b);

/* Owning handles: ex_scheduler_retain takes a hold on sch's resource and
 * returns sch; ex_scheduler_release gives it back.  A task holds its
 * scheduler this way while it runs.  No-ops for resources without holders
 * (see the vtable's retain). */
ex_scheduler ex_scheduler_retain(ex_scheduler sch);
void ex_scheduler_release(ex_scheduler sch);
ex_forward_progress ex_get_forward_progress_guarantee(ex_scheduler sch);
static inline bool ex_scheduler_valid(ex_scheduler sch) { return sch.vt != 0; }

/* Connects the schedule operation of sch into storage (sized as its vtable
 * says).  For authors of adaptors that hop between schedulers. */
ex_error ex_connect_schedule(ex_scheduler sch, ex_receiver r, void *storage);

/* Queue w on sch's resource; never runs it inline (D4003 post).  Errors:
 * EX_EINVAL (a scheduler without post, or w/execute NULL), the resource's own
 * (EX_ESHUTDOWN for a pool being destroyed).  On success w->execute runs
 * exactly once on the resource, or w->cancel if the resource drops it. */
ex_error ex_post(ex_scheduler sch, ex_work *w);

/* Runs w inline when the calling thread already runs on sch's resource,
 * else queues it like ex_post (D4003 dispatch). */
ex_error ex_dispatch(ex_scheduler sch, ex_work *w);

/* The inline scheduler: schedule completes with set_value() inside start,
 * on the thread that starts it.  Never stopped, never fails. */
ex_scheduler ex_inline_scheduler(void);

#ifdef __cplusplus
}
#endif
#endif
