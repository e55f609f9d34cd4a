/* SPDX-License-Identifier: MIT */
/* mpi/progress.c - the progress engine: pending MPI requests tested in
 * batches by one item that runs on the engine's scheduler (docs/mpi.md).
 *
 * Submitters push onto `incoming` under a small lock; the item in flight
 * (at most one: `running`, under the same lock) owns the `active` list,
 * tests it with MPI_Testsome, unlinks what completed, and only then, after
 * deciding whether to run again, completes those operations: a completion
 * may destroy its operation, start new ones, or (once nothing is pending)
 * destroy the engine. */
#include <pthread.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include <cexec/error.h>
#include <cexec/sender.h>
#include <cexec/scheduler.h>
#include <cexec/timer.h>
#include <cexec/value.h>

#include "base/exi_atomic.h"
#include "mpi/exi_mpi.h"

/* Requests tested by one MPI_Testsome call (arrays on the item's stack). */
#define BATCH 64
/* Rounds without a completion before the item waits on the clock. */
#define IDLE_ROUNDS 16
#define BACKOFF_MIN_NS (50 * EX_NS_PER_US)
#define BACKOFF_MAX_NS (1 * EX_NS_PER_MS)

struct ex_mpi_progress {
    ex_scheduler sch;
    pthread_mutex_t lock;
    /* Under lock. */
    exi_mpi_pending *incoming;  /* pushed by submitters, LIFO */
    size_t pending;             /* submitted, not yet unlinked as complete */
    bool running;               /* the progress item is queued, waiting or running */
    /* The item's own (one item in flight). */
    exi_mpi_pending *active;    /* doubly linked */
    unsigned idle_rounds;
    int64_t backoff_ns;
    ex_work work;
    void *timer_op;             /* timer_op_size bytes, aligned; NULL: no clock */
    bool timer_connected;
    /* Set by a stop callback: the next round starts without backoff. */
    uint32_t kicked;
    /* Counters (atomic: read from any thread). */
    uint64_t n_submitted, n_completed, n_rounds, n_testsome, n_backoffs;
};

ex_error exi_mpi_error(const char *call, int rc) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, cls = rc;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    text[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = '\0';
    if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) cls = rc;
    return ex_error_format(EX_EIO, "%s: %s (MPI error class %d)", call, len ? text : "unknown MPI error", cls);
}

static void count(uint64_t *c, uint64_t d) { (void)exi_faa_u64(c, d); }

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

static void take_incoming(ex_mpi_progress *p) {
    pthread_mutex_lock(&p->lock);
    exi_mpi_pending *in = p->incoming;
    p->incoming = NULL;
    pthread_mutex_unlock(&p->lock);
    while (in) {
        exi_mpi_pending *next = in->next;
        active_push(p, in);
        in = next;
    }
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

/* ------------------------------------------------------------ the item */

static void round_run(ex_mpi_progress *p);

static void timer_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    ex_mpi_progress *p = self;
    ex_operation_destroy((ex_operation *)p->timer_op);
    p->timer_connected = false;
    round_run(p);
}
static void timer_error(void *self, ex_error e) { ex_error_release(e); timer_value(self, NULL, 0); }
static void timer_stopped(void *self) { timer_value(self, NULL, 0); }

static const ex_receiver_vtable timer_receiver_vt = { timer_value, timer_error, timer_stopped, NULL, NULL };

/* The scheduler refused the item (it shuts down): nobody polls any more.
 * The pending operations stay pending (the scheduler must outlive them). */
static void give_up(ex_mpi_progress *p) {
    pthread_mutex_lock(&p->lock);
    p->running = false;
    pthread_mutex_unlock(&p->lock);
}

static ex_error requeue_now(ex_mpi_progress *p) {
    if (p->sch.vt->yield) return p->sch.vt->yield(p->sch.self, &p->work);
    return ex_post(p->sch, &p->work);
}

static ex_error requeue_later(ex_mpi_progress *p) {
    ex_timer_when when = { p->backoff_ns, true };
    ex_receiver r = { &timer_receiver_vt, p };
    ex_error e = p->sch.vt->connect_schedule_at(p->sch.self, when, r, p->timer_op);
    if (e.code) return e;
    p->timer_connected = true;
    count(&p->n_backoffs, 1);
    p->backoff_ns = p->backoff_ns >= BACKOFF_MAX_NS / 2 ? BACKOFF_MAX_NS : p->backoff_ns * 2;
    ex_start((ex_operation *)p->timer_op);
    return ex_ok();
}

static void requeue(ex_mpi_progress *p, size_t completed) {
    if (completed || exi_fas_u32(&p->kicked, 0)) {
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

static void round_run(ex_mpi_progress *p) {
    count(&p->n_rounds, 1);
    take_incoming(p);
    exi_mpi_pending *done = NULL;
    size_t completed = test_active(p, &done);
    if (completed) count(&p->n_completed, completed);
    pthread_mutex_lock(&p->lock);
    p->pending -= completed;
    bool again = p->pending > 0;
    if (!again) p->running = false;
    pthread_mutex_unlock(&p->lock);
    /* From here on, with nothing pending, p may be destroyed by a
     * completion: touch only the done list. */
    if (again) requeue(p, completed);  /* the last access: the next round may run at once */
    while (done) {
        exi_mpi_pending *next = done->next;
        done->finish(done);
        done = next;
    }
}

static void work_execute(ex_work *w) {
    ex_mpi_progress *p = (ex_mpi_progress *)(void *)((char *)w - offsetof(ex_mpi_progress, work));
    round_run(p);
}

static void work_cancel(ex_work *w) {
    give_up((ex_mpi_progress *)(void *)((char *)w - offsetof(ex_mpi_progress, work)));
}

/* ------------------------------------------------------------ submitting */

/* Hands n (with a started request, or an `advance`) to p.  On error (p's
 * scheduler refused the progress item: EX_ESHUTDOWN) n was not taken. */
static ex_error submit(ex_mpi_progress *p, exi_mpi_pending *n) {
    pthread_mutex_lock(&p->lock);
    n->next = p->incoming;
    p->incoming = n;
    p->pending++;
    bool start = !p->running;
    p->running = true;
    if (start) {
        p->idle_rounds = 0;
        p->backoff_ns = BACKOFF_MIN_NS;
    }
    pthread_mutex_unlock(&p->lock);
    count(&p->n_submitted, 1);
    if (!start) return ex_ok();
    ex_error e = ex_post(p->sch, &p->work);
    if (e.code) {
        /* Nobody else saw n: the item never ran, so incoming holds only
         * what was pushed since, which waits for the next submit. */
        pthread_mutex_lock(&p->lock);
        exi_mpi_pending **at = &p->incoming;
        while (*at != n) at = &(*at)->next;
        *at = n->next;
        p->pending--;
        p->running = false;
        pthread_mutex_unlock(&p->lock);
    }
    return e;
}

void exi_mpi_start(ex_mpi_progress *p, exi_mpi_pending *n) {
    n->req = MPI_REQUEST_NULL;
    n->cancel_issued = false;
    n->rc = MPI_SUCCESS;
    n->fail = ex_ok();
    if (n->issue) {
        n->rc = n->issue(n);
        if (n->rc != MPI_SUCCESS) {
            n->finish(n);
            return;
        }
    }
    ex_error e = submit(p, n);
    if (!e.code) return;
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
}

bool exi_mpi_cancel_asked(const exi_mpi_pending *n) { return exi_load_acq_u32(&n->cancel_asked) != 0; }

/* ------------------------------------------------------------ the engine */

static ex_error check_mpi_ready(void) {
    int inited = 0, finalized = 0, level = 0;
    if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited) return ex_err(EX_EINVAL, "cexec mpi: MPI is not initialised");
    if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return ex_err(EX_EINVAL, "cexec mpi: MPI is finalised");
    if (MPI_Query_thread(&level) != MPI_SUCCESS || level != MPI_THREAD_MULTIPLE)
        return ex_err(EX_ENOTSUP, "cexec mpi: MPI does not run at MPI_THREAD_MULTIPLE");
    return ex_ok();
}

ex_error ex_mpi_progress_create(ex_scheduler sch, ex_mpi_progress **out) {
    if (!out) return ex_err(EX_EINVAL, "ex_mpi_progress_create: NULL out");
    *out = NULL;
    if (!sch.vt || !sch.vt->post) return ex_err(EX_EINVAL, "ex_mpi_progress_create: a scheduler with post is needed");
    ex_error e = check_mpi_ready();
    if (e.code) return e;
    size_t align = ex_max_size(alignof(ex_mpi_progress), sch.vt->timer_op_align ? sch.vt->timer_op_align : 1);
    align = ex_max_size(align, sizeof(void *));
    size_t head = ex_align_up(sizeof(ex_mpi_progress), align);
    bool clock = sch.vt->connect_schedule_at != NULL;
    size_t size = ex_size_add(head, clock ? sch.vt->timer_op_size : 0);
    void *mem = NULL;
    if (size == SIZE_MAX || (align & (align - 1)) || posix_memalign(&mem, align, size) != 0)
        return ex_err(EX_ENOMEM, "ex_mpi_progress_create: out of memory");
    ex_mpi_progress *p = mem;
    memset(p, 0, sizeof *p);
    if (pthread_mutex_init(&p->lock, NULL) != 0) {
        free(mem);
        return ex_err(EX_ENOMEM, "ex_mpi_progress_create: no mutex");
    }
    p->sch = sch;
    p->work.execute = work_execute;
    p->work.cancel = work_cancel;
    p->timer_op = clock ? (char *)mem + head : NULL;
    p->backoff_ns = BACKOFF_MIN_NS;
    *out = p;
    return ex_ok();
}

ex_error ex_mpi_progress_destroy(ex_mpi_progress *p) {
    if (!p) return ex_ok();
    pthread_mutex_lock(&p->lock);
    bool busy = p->pending > 0 || p->running;
    pthread_mutex_unlock(&p->lock);
    if (busy) return ex_err(EX_EBUSY, "ex_mpi_progress_destroy: operations are pending");
    pthread_mutex_destroy(&p->lock);
    free(p);
    return ex_ok();
}

ex_mpi_progress_stats ex_mpi_progress_get_stats(const ex_mpi_progress *p) {
    ex_mpi_progress_stats s = { 0, 0, 0, 0, 0 };
    if (!p) return s;
    s.submitted = exi_load_acq_u64(&p->n_submitted);
    s.completed = exi_load_acq_u64(&p->n_completed);
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
    if (provided != MPI_THREAD_MULTIPLE)
        return ex_err(EX_ENOTSUP, "ex_mpi_init: MPI granted less than MPI_THREAD_MULTIPLE");
    return ex_ok();
}

ex_error ex_mpi_finalize(void) {
    int inited = 0, finalized = 0;
    if (MPI_Initialized(&inited) != MPI_SUCCESS || !inited) return ex_ok();
    if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return ex_ok();
    int rc = MPI_Finalize();
    return rc == MPI_SUCCESS ? ex_ok() : exi_mpi_error("MPI_Finalize", rc);
}

ex_error ex_mpi_attach(void) { return check_mpi_ready(); }
