/* SPDX-License-Identifier: MIT */
/* mpi/progress.c - the progress engine: pending MPI requests tested in
 * batches on the engine's scheduler (docs/mpi.md).
 *
 * Starters push their nodes onto `incoming`, a lock-free stack (a CAS
 * push; the round takes it whole by exchange, so no ABA), and count them
 * in `pending`.  A round (engine_round) runs on one agent at a time: it
 * moves incoming nodes to its own `active` list (issuing their calls
 * first below MPI_THREAD_MULTIPLE), tests them with MPI_Testsome,
 * unlinks what completed and only then completes those operations: a
 * completion may destroy its operation, start new ones, or (once nothing
 * is pending) destroy the engine.
 *
 * Who runs rounds:
 *   - on a pool (ex_pool_of_scheduler): a poller of the pool
 *     (cexec/poller.h): workers poll between items, instead of idling and
 *     before parking, a caller waiting in ex_sync_wait while it waits;
 *   - on any other scheduler: one item, posted when the engine becomes
 *     active, that queues itself again behind other work (yield) and
 *     backs off on the scheduler's clock.
 * Both follow the same rule for going idle: `state` holds ACTIVE and
 * AGAIN; a start sets both; a round clears AGAIN first and clears ACTIVE
 * only by a CAS from exactly ACTIVE once nothing is pending, so a start
 * during the round keeps the engine active. */
#include <pthread.h>
#include <stdalign.h>
#include <string.h>

#include <cexec/allocator.h>
#include <cexec/error.h>
#include <cexec/poller.h>
#include <cexec/sender.h>
#include <cexec/scheduler.h>
#include <cexec/timer.h>
#include <cexec/value.h>

#include "base/exi_atomic.h"
#include "mpi/exi_mpi.h"

/* Requests tested by one MPI_Testsome call (arrays on the round's stack). */
#define BATCH 64
/* Item mode: rounds without a completion before the item waits on the clock. */
#define IDLE_ROUNDS 16
#define BACKOFF_MIN_NS (50 * EX_NS_PER_US)
#define BACKOFF_MAX_NS (1 * EX_NS_PER_MS)

#define ACTIVE 1u
#define AGAIN 2u

struct ex_mpi_progress {
    ex_scheduler sch;
    const ex_allocator *alloc;  /* the default allocator at create: the engine's block */
    size_t size, align;
    int level;                  /* MPI's thread level at create */
    ex_pool_poller *poller;     /* pool mode; NULL: item mode */
    exi_mpi_pending *incoming;  /* pushed by starters (atomic), LIFO */
    uint64_t pending;           /* started, not yet unlinked as complete (atomic) */
    uint32_t state;             /* ACTIVE | AGAIN (item mode; the poller keeps its own) */
    /* The round's own (one round at a time). */
    exi_mpi_pending *active;    /* doubly linked */
    /* Item mode. */
    unsigned idle_rounds;
    int64_t backoff_ns;
    ex_work work;
    void *timer_op;             /* timer_op_size bytes, aligned; NULL: no clock */
    /* Set by a stop callback: the next item round starts without backoff. */
    uint32_t kicked;
    /* Counters (written by rounds only; read from any thread). */
    uint64_t n_completed, n_rounds, n_testsome, n_backoffs;
};

ex_error exi_mpi_error(const char *call, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, cls = rc;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
    return ex_error_format(EX_EIO, "%s: %s (MPI error class %d)", call, len ? text : "unknown MPI error", cls);
}

/* The counters are written by rounds, which run one at a time (the
 * poller's busy flag, or the one item): no locked instruction needed. */
static void count(uint64_t *c, uint64_t d) { exi_owner_add_u64(c, d); }

/* ------------------------------------------------------------ active list */

static void active_push(ex_mpi_progress *p, exi_mpi_pending *n) {
    n->prev = NULL;
    n->next = p->active;
    if (p->active) p->active->prev = n;
    p->active = n;
}

static void active_unlink(ex_mpi_progress *p, exi_mpi_pending *n) {
    if (n->prev) n->prev->next = n->next;
    else p->active = n->next;
    if (n->next) n->next->prev = n->prev;
}

/* Takes what starters pushed.  Below MPI_THREAD_MULTIPLE the calls are
 * issued here, on the round's agent; one that fails goes to *done. */
static size_t take_incoming(ex_mpi_progress *p, exi_mpi_pending **done) {
    exi_mpi_pending *in = exi_load_rlx_ptr((void *const *)&p->incoming) ? exi_fas_ptr((void **)&p->incoming, NULL) : NULL;
    size_t failed = 0;
    while (in) {
        exi_mpi_pending *next = in->next;
        if (p->level != MPI_THREAD_MULTIPLE && in->issue && in->req == MPI_REQUEST_NULL && !in->advance) {
            in->rc = in->issue(in);
            if (in->rc != MPI_SUCCESS) {
                in->next = *done;
                *done = in;
                failed++;
                in = next;
                continue;
            }
        }
        active_push(p, in);
        in = next;
    }
    return failed;
}

/* ----------------------------------------------------------------- testing */

/* Issues the cancellations stop callbacks asked for (the item's thread is
 * the only one that touches a request after submit). */
static void issue_cancel(exi_mpi_pending *n) {
    if (!n->cancellable || n->cancel_issued || !exi_load_acq_u32(&n->cancel_asked)) return;
    n->cancel_issued = true;
    (void)MPI_Cancel(&n->req);  /* an error here leaves the request to complete normally */
}

/* MPI_Testsome over batch[0, k); moves what completed to *done.  Returns
 * how many completed. */
static size_t test_batch(ex_mpi_progress *p, exi_mpi_pending **batch, int k, exi_mpi_pending **done) {
    MPI_Request reqs[BATCH];
    MPI_Status st[BATCH];
    int idx[BATCH];
    int outcount = 0;
    for (int i = 0; i < k; i++) reqs[i] = batch[i]->req;
    count(&p->n_testsome, 1);
    int rc = MPI_Testsome(k, reqs, &outcount, idx, st);
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
        /* The call as a whole failed: test one by one, so each request
         * gets its own outcome and none is lost. */
        outcount = 0;
        for (int i = 0; i < k; i++) {
            int flag = 0;
            int r1 = MPI_Test(&reqs[i], &flag, &st[outcount]);
            if (r1 != MPI_SUCCESS) { flag = 1; st[outcount].MPI_ERROR = r1; }
            if (flag) idx[outcount++] = i;
        }
        rc = MPI_ERR_IN_STATUS;
    }
    if (outcount == MPI_UNDEFINED) outcount = 0;
    for (int j = 0; j < outcount; j++) {
        exi_mpi_pending *n = batch[idx[j]];
        n->req = MPI_REQUEST_NULL;
        n->status = st[j];
        n->rc = rc == MPI_ERR_IN_STATUS ? st[j].MPI_ERROR : MPI_SUCCESS;
        active_unlink(p, n);
        n->next = *done;
        *done = n;
    }
    return (size_t)outcount;
}

/* A node without a request yet (a probe): polled by its own advance. */
static bool advance_one(ex_mpi_progress *p, exi_mpi_pending *n, exi_mpi_pending **done) {
    if (!n->advance(n) || n->req != MPI_REQUEST_NULL) return false;
    active_unlink(p, n);
    n->next = *done;
    *done = n;
    return true;
}

static size_t test_active(ex_mpi_progress *p, exi_mpi_pending **done) {
    exi_mpi_pending *batch[BATCH];
    size_t completed = 0;
    exi_mpi_pending *n = p->active;
    while (n) {
        int k = 0;
        while (n && k < BATCH) {
            exi_mpi_pending *next = n->next;  /* n may leave the list */
            if (n->req == MPI_REQUEST_NULL && n->advance) completed += advance_one(p, n, done);
            if (n->req != MPI_REQUEST_NULL) {
                issue_cancel(n);
                batch[k++] = n;
            }
            n = next;
        }
        if (!k) break;
        /* n is read before test_batch unlinks: it is the next batch's first. */
        completed += test_batch(p, batch, k, done);
    }
    return completed;
}

/* ------------------------------------------------------------ a round */

static void complete_all(exi_mpi_pending *done) {
    while (done) {
        exi_mpi_pending *next = done->next;
        done->finish(done);
        done = next;
    }
}

/* Takes new nodes, tests the active ones, and unlinks what completed into
 * *done.  Returns how many are still pending; *moved: whether any node
 * completed. */
static uint64_t round_test(ex_mpi_progress *p, exi_mpi_pending **done, bool *moved) {
    count(&p->n_rounds, 1);
    size_t completed = take_incoming(p, done);
    completed += test_active(p, done);
    *moved = completed > 0;
    if (!completed) return exi_load_acq_u64(&p->pending);
    count(&p->n_completed, completed);
    return exi_faa_u64(&p->pending, (uint64_t)0 - completed) - completed;
}

/* Pool mode: the poller's function.  Completions run last: one may
 * destroy the engine (removing the poller from inside its poll). */
static ex_poll_result engine_poll(void *ctx) {
    ex_mpi_progress *p = ctx;
    exi_mpi_pending *done = NULL;
    bool moved = false;
    uint64_t left = round_test(p, &done, &moved);
    complete_all(done);
    if (!left) return EX_POLL_IDLE;
    return moved ? EX_POLL_PROGRESS : EX_POLL_PENDING;
}

/* ------------------------------------------------------------ item mode */

static void item_round(ex_mpi_progress *p);

static void timer_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    ex_mpi_progress *p = self;
    ex_operation_destroy((ex_operation *)p->timer_op);
    item_round(p);
}
static void timer_error(void *self, ex_error e) { ex_error_release(e); timer_value(self, NULL, 0); }
static void timer_stopped(void *self) { timer_value(self, NULL, 0); }

static const ex_receiver_vtable timer_receiver_vt = { timer_value, timer_error, timer_stopped, NULL, NULL };

/* The scheduler refused the item (it shuts down): nobody polls any more.
 * The pending operations stay pending (the scheduler must outlive them). */
static void give_up(ex_mpi_progress *p) { exi_store_rel_u32(&p->state, 0); }

static ex_error requeue_now(ex_mpi_progress *p) {
    if (p->sch.vt->yield) return p->sch.vt->yield(p->sch.self, &p->work);
    return ex_post(p->sch, &p->work);
}

static ex_error requeue_later(ex_mpi_progress *p) {
    ex_timer_when when = { p->backoff_ns, true };
    ex_receiver r = { &timer_receiver_vt, p };
    ex_error e = p->sch.vt->connect_schedule_at(p->sch.self, when, r, p->timer_op);
    if (e.code) return e;
    count(&p->n_backoffs, 1);
    p->backoff_ns = p->backoff_ns >= BACKOFF_MAX_NS / 2 ? BACKOFF_MAX_NS : p->backoff_ns * 2;
    ex_start((ex_operation *)p->timer_op);
    return ex_ok();
}

static void requeue(ex_mpi_progress *p, bool moved, bool again) {
    if (moved || again || exi_fas_u32(&p->kicked, 0)) {
        p->idle_rounds = 0;
        p->backoff_ns = BACKOFF_MIN_NS;
    } else if (p->idle_rounds < IDLE_ROUNDS) {
        p->idle_rounds++;
    }
    ex_error e;
    if (p->idle_rounds < IDLE_ROUNDS || !p->timer_op) e = requeue_now(p);
    else e = requeue_later(p);
    if (e.code) {
        ex_error_release(e);
        give_up(p);
    }
}

/* One round of the item.  It decides whether to run again before it
 * completes anything: with nothing pending, a completion may destroy p. */
static void item_round(ex_mpi_progress *p) {
    bool again = exi_fas_and_u32(&p->state, ~AGAIN) & AGAIN;
    exi_mpi_pending *done = NULL;
    bool moved = false;
    uint64_t left = round_test(p, &done, &moved);
    uint32_t active = ACTIVE;
    bool stay = left > 0 || !exi_cas_u32(&p->state, &active, 0);
    if (stay) requeue(p, moved, again);  /* the last access: the next round may run at once */
    complete_all(done);
}

static void work_execute(ex_work *w) {
    item_round((ex_mpi_progress *)(void *)((char *)w - offsetof(ex_mpi_progress, work)));
}

static void work_cancel(ex_work *w) { give_up((ex_mpi_progress *)(void *)((char *)w - offsetof(ex_mpi_progress, work))); }

/* Item mode: makes the engine active, posting its item if it was not. */
static ex_error item_activate(ex_mpi_progress *p) {
    if (exi_fas_or_u32(&p->state, ACTIVE | AGAIN) & ACTIVE) return ex_ok();
    p->idle_rounds = 0;  /* the item is not running: these are ours until the post */
    p->backoff_ns = BACKOFF_MIN_NS;
    ex_error e = ex_post(p->sch, &p->work);
    if (e.code) give_up(p);
    return e;
}

/* ------------------------------------------------------------ starting */

/* Takes n back out of incoming after a refused post: the item never ran,
 * so nobody else took it. */
static bool unpush(ex_mpi_progress *p, exi_mpi_pending *n) {
    exi_mpi_pending *in = exi_fas_ptr((void **)&p->incoming, NULL), *keep = NULL;
    bool found = false;
    while (in) {
        exi_mpi_pending *next = in->next;
        if (in == n) found = true;
        else {
            in->next = keep;
            keep = in;
        }
        in = next;
    }
    while (keep) {  /* the others wait for the next start */
        exi_mpi_pending *next = keep->next;
        exi_mpi_pending *head = exi_load_rlx_ptr((void *const *)&p->incoming);
        do keep->next = head;
        while (!exi_cas_ptr((void **)&p->incoming, (void **)&head, keep));
        keep = next;
    }
    return found;
}

static void push(ex_mpi_progress *p, exi_mpi_pending *n) {
    exi_mpi_pending *head = exi_load_rlx_ptr((void *const *)&p->incoming);
    do n->next = head;
    while (!exi_cas_ptr((void **)&p->incoming, (void **)&head, n));
}

void exi_mpi_start(ex_mpi_progress *p, exi_mpi_pending *n) {
    n->req = MPI_REQUEST_NULL;
    n->cancel_issued = false;
    n->rc = MPI_SUCCESS;
    n->fail = ex_ok();
    if (n->issue && p->level == MPI_THREAD_MULTIPLE) {
        n->rc = n->issue(n);
        if (n->rc != MPI_SUCCESS) {
            n->finish(n);
            return;
        }
    }
    (void)exi_faa_u64(&p->pending, 1);
    push(p, n);
    if (p->poller) {
        ex_pool_poller_activate(p->poller);
        return;
    }
    ex_error e = item_activate(p);
    if (!e.code || !unpush(p, n)) {
        ex_error_release(e);  /* (a round took n after all: it is progressed) */
        return;
    }
    (void)exi_faa_u64(&p->pending, (uint64_t)-1);
    /* The scheduler shuts down: end the request here, blocking, so its
     * buffer is MPI's no longer, and report why. */
    if (n->req != MPI_REQUEST_NULL) {
        if (n->cancellable) (void)MPI_Cancel(&n->req);
        (void)MPI_Wait(&n->req, MPI_STATUS_IGNORE);
    }
    n->fail = e;
    n->finish(n);
}

void exi_mpi_ask_cancel(ex_mpi_progress *p, exi_mpi_pending *n) {
    exi_store_rel_u32(&n->cancel_asked, 1);
    exi_store_rel_u32(&p->kicked, 1);
    if (p->poller) ex_pool_poller_activate(p->poller);  /* polls turn eager again */
}

bool exi_mpi_cancel_asked(const exi_mpi_pending *n) { return exi_load_acq_u32(&n->cancel_asked) != 0; }

/* ------------------------------------------------------------ the engine */

static ex_error check_mpi_ready(int *level) {
    int inited = 0, finalized = 0;
    *level = MPI_THREAD_SINGLE;
    if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited) return ex_err(EX_EINVAL, "cexec mpi: MPI is not initialised");
    if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return ex_err(EX_EINVAL, "cexec mpi: MPI is finalised");
    if (MPI_Query_thread(level) != MPI_SUCCESS || *level == MPI_THREAD_SINGLE)
        return ex_err(EX_ENOTSUP, "cexec mpi: MPI runs at MPI_THREAD_SINGLE (FUNNELED at least is needed)");
    return ex_ok();
}

/* Below MULTIPLE every MPI call is made by the engine's agent, one at a
 * time: a pool's poller serialises its polls (SERIALIZED), but its
 * workers are not MPI's main thread (FUNNELED needs a scheduler run by
 * that thread: a run loop, say). */
static ex_error check_level(int level, ex_pool *pool) {
    if (level == MPI_THREAD_FUNNELED && pool)
        return ex_err(EX_EINVAL, "ex_mpi_progress_create: at MPI_THREAD_FUNNELED the engine needs a scheduler that "
                                 "runs on MPI's main thread (a run loop driven by it), not a pool");
    return ex_ok();
}

static ex_error make_engine(ex_scheduler sch, ex_mpi_progress **out) {
    size_t align = ex_max_size(alignof(ex_mpi_progress), sch.vt->timer_op_align ? sch.vt->timer_op_align : 1);
    align = ex_max_size(align, sizeof(void *));
    size_t head = ex_align_up(sizeof(ex_mpi_progress), align);
    bool clock = sch.vt->connect_schedule_at != NULL;
    size_t size = ex_size_add(head, clock ? sch.vt->timer_op_size : 0);
    const ex_allocator *a = ex_default_allocator();
    void *mem = size > EX_ALLOC_MAX_SIZE || (align & (align - 1)) ? NULL : ex_allocate(a, size, align);
    if (!mem) return ex_err(EX_ENOMEM, "ex_mpi_progress_create: out of memory");
    ex_mpi_progress *p = mem;
    memset(p, 0, sizeof *p);
    p->alloc = a;
    p->size = size;
    p->align = align;
    p->sch = sch;
    p->work.execute = work_execute;
    p->work.cancel = work_cancel;
    p->timer_op = clock ? (char *)mem + head : NULL;
    p->backoff_ns = BACKOFF_MIN_NS;
    *out = p;
    return ex_ok();
}

static void free_engine(ex_mpi_progress *p) { ex_deallocate(p->alloc, p, p->size, p->align); }

ex_error ex_mpi_progress_create(ex_scheduler sch, ex_mpi_progress **out) {
    if (!out) return ex_err(EX_EINVAL, "ex_mpi_progress_create: NULL out");
    *out = NULL;
    if (!sch.vt || !sch.vt->post) return ex_err(EX_EINVAL, "ex_mpi_progress_create: a scheduler with post is needed");
    int level = 0;
    ex_error e = check_mpi_ready(&level);
    ex_pool *pool = ex_pool_of_scheduler(sch);
    if (!e.code) e = check_level(level, pool);
    ex_mpi_progress *p = NULL;
    if (!e.code) e = make_engine(sch, &p);
    if (e.code) return e;
    p->level = level;
    if (pool && (e = ex_pool_poller_add(pool, engine_poll, p, &p->poller)).code) {
        free_engine(p);
        return e;
    }
    *out = p;
    return ex_ok();
}

ex_error ex_mpi_progress_destroy(ex_mpi_progress *p) {
    if (!p) return ex_ok();
    bool busy = exi_load_acq_u64(&p->pending) > 0 || (!p->poller && exi_load_acq_u32(&p->state));
    if (busy) return ex_err(EX_EBUSY, "ex_mpi_progress_destroy: operations are pending");
    /* Waits for a poll still running on another agent (it may be
     * completing the last operations). */
    if (p->poller) (void)ex_pool_poller_remove(p->poller);
    free_engine(p);
    return ex_ok();
}

ex_mpi_progress_stats ex_mpi_progress_get_stats(const ex_mpi_progress *p) {
    ex_mpi_progress_stats s = { 0, 0, 0, 0, 0 };
    if (!p) return s;
    s.completed = exi_load_acq_u64(&p->n_completed);
    s.submitted = s.completed + exi_load_acq_u64(&p->pending);  /* started successfully */
    s.rounds = exi_load_acq_u64(&p->n_rounds);
    s.testsome = exi_load_acq_u64(&p->n_testsome);
    s.backoffs = exi_load_acq_u64(&p->n_backoffs);
    return s;
}

/* ------------------------------------------------------------ init */

ex_error ex_mpi_init(int *argc, char ***argv) {
    int inited = 0, provided = 0;
    if (MPI_Initialized(&inited) == MPI_SUCCESS && inited)
        return ex_err(EX_EBUSY, "ex_mpi_init: MPI is already initialised (use ex_mpi_attach)");
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return exi_mpi_error("MPI_Init_thread", rc);
    (void)MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided == MPI_THREAD_SINGLE)
        return ex_err(EX_ENOTSUP, "ex_mpi_init: MPI granted only MPI_THREAD_SINGLE");
    return ex_ok();
}

ex_error ex_mpi_finalize(void) {
    int inited = 0, finalized = 0;
    if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited) return ex_ok();
    if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return ex_ok();
    int rc = MPI_Finalize();
    return rc == MPI_SUCCESS ? ex_ok() : exi_mpi_error("MPI_Finalize", rc);
}

ex_error ex_mpi_attach(void) {
    int level = 0;
    return check_mpi_ready(&level);
}
