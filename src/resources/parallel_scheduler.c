/* SPDX-License-Identifier: MIT */
/* parallel_scheduler.c - the process's parallel scheduler (P2079,
 * [exec.par.scheduler]): the pool the first call creates, or the backend
 * the application installed before it; shut down at exit when that needs
 * no wait for work that may never end.
 *
 * The handle of the default backend is the pool's own: every fast path of
 * the pool (lent callers, held items, its bulk) applies unchanged, and a
 * handle costs one acquire load.  A custom backend gets a vtable of its
 * own over the backend's functions.  Nothing is ever freed, so no handle
 * can outlive what it points to. */
#include <sched.h>
#include <stdalign.h>
#include <stdlib.h>

#include <cexec/cexec.h>
#include <cexec/parallel_scheduler.h>

#include "base/exi_atomic.h"
#include "base/exi_fork.h"
#include "core/exi_error.h"
#include "core/exi_scheduler.h"
#include "resources/exi_bulk_helpers.h"
#include "resources/exi_pool.h"

/* How long the exit handler waits for workers still inside an item. */
#define EXIT_WAIT_NS (100 * EX_NS_PER_MS)

/* The pool's thread limit (ex_pool_create refuses more). */
#define MAX_THREADS 4096u

/* What the parallel scheduler runs on; moves on once, at the first use
 * (UNUSED to ON_POOL or ON_BACKEND), or to CLOSED when shut down unused. */
enum { UNUSED, ON_POOL, ON_BACKEND, CLOSED };

static struct {
    uint32_t phase;              /* written under the lock (release), read with acquire */
    uint32_t shut;               /* ON_BACKEND: ex_parallel_scheduler_shutdown has begun */
    uint64_t lock;               /* 0, or its holder's fork generation + 1 */
    ex_pool *pool;               /* ON_POOL; set before phase */
    uint64_t pool_gen;           /* the fork generation the pool was created in */
    bool staged;                 /* a backend installed, not used yet (under the lock) */
    ex_parallel_backend backend; /* the installed one; set before phase */
} par;

/* ------------------------------------------------------------- the lock */

/* First use, set_backend and shutdown take it, never the handle's fast
 * path.  Not a pthread mutex: one held by a thread of the parent when the
 * process forked would stay locked in the child for ever.  The word holds
 * the holder's fork generation, so a child sees a holder that does not
 * exist in it and takes the lock over.  Held for a pool's creation at
 * most (a few milliseconds, once), so waiters just yield. */
static void par_lock(void) {
    uint64_t mine = exi_fork_watch() + 1;
    for (;;) {
        uint64_t seen = 0;
        if (exi_cas_u64(&par.lock, &seen, mine)) return;
        if (seen != mine && exi_cas_u64(&par.lock, &seen, mine)) return;  /* a parent's holder */
        sched_yield();
    }
}

static void par_unlock(void) { exi_store_rel_u64(&par.lock, 0); }

/* ---------------------------------------------- handles that cannot work */

/* Why a handle refuses all work: a failed creation, or shut down before
 * any use.  One record per reason, so that equal reasons give equal
 * handles. */
typedef struct unavailable {
    int code;
    const char *msg;
} unavailable;

static const unavailable reasons[] = {
    { EX_ENOMEM, "ex_parallel_scheduler: out of memory creating its pool" },
    { EX_EAGAIN, "ex_parallel_scheduler: its pool could not be created (a thread could not be started)" },
    { EX_EINVAL, "ex_parallel_scheduler: its pool could not be created: bad CEXEC_WAIT_POLICY or CEXEC_LINGER_US" },
    { EX_ESHUTDOWN, "ex_parallel_scheduler: shut down (ex_parallel_scheduler_shutdown)" },
};

static const unavailable *reason_of(int code) {
    for (size_t i = 0; i < sizeof reasons / sizeof reasons[0]; i++)
        if (reasons[i].code == code) return &reasons[i];
    return &reasons[1];  /* ex_pool_create makes no other code; any other is a resource it lacked */
}

static ex_error error_of(const unavailable *why) { return ex_err(why->code, why->msg); }

typedef struct unavailable_op {
    ex_operation base;
    ex_receiver r;
    const unavailable *why;
} unavailable_op;

static void unavailable_start(ex_operation *op) {
    unavailable_op *o = (unavailable_op *)op;
    ex_set_error(o->r, error_of(o->why));
}

static const ex_operation_vtable unavailable_op_vt = { unavailable_start, NULL };

static ex_error unavailable_connect(void *self, ex_receiver r, void *storage) {
    unavailable_op *o = storage;
    o->base.vt = &unavailable_op_vt;
    o->r = r;
    o->why = self;
    return ex_ok();
}

static ex_error unavailable_post(void *self, ex_work *w) {
    (void)w;
    return error_of(self);
}

static const ex_scheduler_vtable unavailable_vt = {
    .name = "parallel_scheduler",
    .schedule_op_size = sizeof(unavailable_op),
    .schedule_op_align = alignof(unavailable_op),
    .schedule_flags = EX_SIGS_ERROR,
    .connect_schedule = unavailable_connect,
    .progress = EX_PROGRESS_PARALLEL,
    .post = unavailable_post,
    .dispatch = unavailable_post,
};

static ex_scheduler unavailable_handle(int code) {
    ex_scheduler s = { &unavailable_vt, (void *)(uintptr_t)reason_of(code) };
    return s;
}

/* ------------------------------------------------------ a custom backend */

static bool backend_shut(void) { return exi_load_acq_u32(&par.shut) != 0; }

static ex_error backend_schedule(ex_work *w) {
    if (backend_shut()) return error_of(reason_of(EX_ESHUTDOWN));
    return par.backend.schedule(par.backend.self, w);
}

/* The item is the backend's once schedule accepts it: the operation may be
 * gone by the time schedule returns. */
static void backend_start(ex_operation *op) {
    exi_queued_op *o = (exi_queued_op *)op;
    ex_error e = backend_schedule(&o->work);
    if (e.code) ex_set_error(o->r, e);
}

static const ex_operation_vtable backend_op_vt = { backend_start, NULL };

static ex_error backend_connect(void *self, ex_receiver r, void *storage) {
    exi_queued_op_init(storage, &backend_op_vt, self, r);
    return ex_ok();
}

static ex_error backend_post(void *self, ex_work *w) {
    (void)self;
    return backend_schedule(w);
}

/* A bulk job shared out through schedule, for a backend without a bulk of
 * its own.  Chunks are claimed from a counter; the caller takes part, and
 * so do the helper items it queues; the last participant out completes
 * the job.  scratch: [0] next chunk, [1] participants still inside, [2]
 * chunk count, [3] chunk size. */
enum { SH_NEXT, SH_INSIDE, SH_CHUNKS, SH_GRAIN };

static void share_leave(ex_bulk_job *job) {
    if (exi_faa_u64(&job->scratch[SH_INSIDE], (uint64_t)-1) != 1) return;
    if (job->extra) ex_deallocate(ex_bulk_job_allocator(job), job->extra, job->extra_size, alignof(ex_bulk_helper));
    job->extra = NULL;
    ex_bulk_job_done(job);
}

/* Runs chunks until none is left (or the job stops), then leaves. */
static void share_participate(ex_bulk_job *job) {
    uint64_t chunks = job->scratch[SH_CHUNKS], grain = job->scratch[SH_GRAIN];
    for (;;) {
        uint64_t c = exi_faa_u64(&job->scratch[SH_NEXT], 1);
        if (c >= chunks) break;
        size_t begin = (size_t)(c * grain);  /* < shape: c < chunks */
        size_t end = job->shape - begin > grain ? begin + (size_t)grain : job->shape;  /* no wrap near SIZE_MAX */
        if (!ex_bulk_job_run(job, begin, end)) {
            exi_store_rlx_u64(&job->scratch[SH_NEXT], chunks);
            break;
        }
    }
    share_leave(job);
}

static void share_helper_run(ex_work *w) { share_participate(((ex_bulk_helper *)(void *)w)->job); }

/* Dropped by the backend: the other participants (the caller at least)
 * run the chunks. */
static void share_helper_cancel(ex_work *w) { share_leave(((ex_bulk_helper *)(void *)w)->job); }

/* The most agents a shared job is cut for (as a pool's workers). */
#define EXI_SHARE_MAX_AGENTS 4096u

static void share(ex_bulk_job *job) {
    uint64_t agents = par.backend.concurrency ? par.backend.concurrency : ex_default_thread_count();
    if (agents > EXI_SHARE_MAX_AGENTS) agents = EXI_SHARE_MAX_AGENTS;  /* bounds the helper array */
    uint64_t shape = job->shape, parts = 8 * agents;
    /* Rounded up without wrapping near SIZE_MAX. */
    uint64_t grain = job->grain ? job->grain : shape <= parts ? 1 : shape / parts + (shape % parts != 0);
    uint64_t chunks = shape / grain + (shape % grain != 0);
    uint64_t helpers = chunks > 1 ? chunks - 1 : 0;
    if (helpers > agents - 1) helpers = agents - 1;
    /* Sequenced policies: one agent, the caller, chunks in index order
     * (the counter hands them out in order). */
    if (job->policy == EX_SEQ || job->policy == EX_UNSEQ) helpers = 0;
    ex_bulk_helper *h = exi_bulk_helper_items(job, &helpers);
    job->scratch[SH_NEXT] = 0;
    job->scratch[SH_CHUNKS] = chunks;
    job->scratch[SH_GRAIN] = grain;
    job->scratch[SH_INSIDE] = 1 + helpers;  /* counted before any can leave */
    for (uint64_t i = 0; i < helpers; i++) {
        h[i].job = job;
        h[i].work.next = NULL;
        h[i].work.execute = share_helper_run;
        h[i].work.cancel = share_helper_cancel;
        ex_error e = backend_schedule(&h[i].work);
        if (e.code) {  /* refused: the others run its chunks; the error was given to us */
            exi_error_drop(e);
            share_leave(job);
        }
    }
    share_participate(job);
}

/* Once shut down, the calling thread runs it all (as the pool does). */
static void backend_bulk(void *self, ex_bulk_job *job) {
    (void)self;
    bool parallel = job->policy == EX_PAR || job->policy == EX_PAR_UNSEQ;
    if (parallel && !backend_shut() && par.backend.bulk) par.backend.bulk(par.backend.self, job);
    else share(job);  /* a sequenced job runs in order on this agent */
}

static const ex_scheduler_vtable backend_vt;

/* The parallel scheduler's domain: bulk goes to the backend (backend_bulk). */
static const ex_bulk_domain par_domain = EX_BULK_DOMAIN("parallel_scheduler", &backend_vt, backend_bulk);

static unsigned backend_concurrency(void *self) {
    (void)self;
    return par.backend.concurrency ? par.backend.concurrency : ex_default_thread_count();
}

static const ex_scheduler_vtable backend_vt = {
    .name = "parallel_scheduler",
    .schedule_op_size = sizeof(exi_queued_op),
    .schedule_op_align = alignof(exi_queued_op),
    .schedule_flags = EX_SIGS_ERROR | EX_SIGS_STOPPED,
    .connect_schedule = backend_connect,
    .progress = EX_PROGRESS_PARALLEL,
    .post = backend_post,
    .dispatch = backend_post,  /* a backend cannot tell its own agents: dispatch queues */
    .domain = &par_domain.domain,
    .concurrency = backend_concurrency,
};

static ex_scheduler backend_handle(void) {
    ex_scheduler s = { &backend_vt, &par };
    return s;
}

/* ------------------------------------------------------------ first use */

/* At exit, the default pool is shut down if that needs no long wait (see
 * the header: an item may never return). */
static void at_exit(void) {
    if (exi_load_acq_u32(&par.phase) != ON_POOL) return;
    ex_pool *p = par.pool;
    if (par.pool_gen != exi_fork_generation()) return;  /* the parent's pool: nothing to join here */
    if (ex_pool_current_worker(p) >= 0) return;         /* exit() from work the pool runs */
    (void)exi_pool_shutdown_by(p, EXIT_WAIT_NS);
}

/* Under the lock. */
static ex_scheduler start_pool(void) {
    unsigned threads = ex_default_thread_count();
    ex_pool_config cfg = { .threads = threads < MAX_THREADS ? threads : MAX_THREADS, .name_prefix = "cexec-par" };
    ex_pool *p;
    ex_error e = ex_pool_create(&cfg, &p);
    if (e.code) return unavailable_handle(e.code);  /* nothing kept: the next call tries again */
    par.pool = p;
    par.pool_gen = exi_fork_generation();
    (void)atexit(at_exit);  /* (when it fails the pool runs until the process ends) */
    exi_store_rel_u32(&par.phase, ON_POOL);
    return ex_pool_scheduler(p);
}

/* Under the lock. */
static ex_scheduler current_handle(void) {
    switch (par.phase) {
    case ON_POOL: return ex_pool_scheduler(par.pool);
    case ON_BACKEND: return backend_handle();
    case CLOSED: return unavailable_handle(EX_ESHUTDOWN);
    default: break;
    }
    if (!par.staged) return start_pool();
    exi_store_rel_u32(&par.phase, ON_BACKEND);
    return backend_handle();
}

ex_scheduler ex_parallel_scheduler(void) {
    uint32_t phase = exi_load_acq_u32(&par.phase);
    if (phase == ON_POOL) return ex_pool_scheduler(par.pool);
    if (phase == ON_BACKEND) return backend_handle();
    par_lock();
    ex_scheduler s = current_handle();
    par_unlock();
    return s;
}

ex_error ex_parallel_scheduler_set_backend(const ex_parallel_backend *b) {
    if (b && !b->schedule) return ex_err(EX_EINVAL, "ex_parallel_scheduler_set_backend: the backend has no schedule function");
    ex_error e = ex_ok();
    par_lock();
    if (par.phase != UNUSED) {
        e = ex_err(EX_EBUSY, "ex_parallel_scheduler_set_backend: the parallel scheduler is already in use or shut down "
                             "(install a backend before the first ex_parallel_scheduler call)");
    } else if (b) {
        par.backend = *b;
        par.staged = true;
    } else {
        par.staged = false;
    }
    par_unlock();
    return e;
}

/* ------------------------------------------------------------- shutdown */

static ex_error shutdown_pool(ex_pool *p) {
    if (par.pool_gen != exi_fork_generation())
        return ex_err(EX_EINVAL, "ex_parallel_scheduler_shutdown: its pool belongs to the parent process (fork)");
    int me = ex_pool_current_worker(p);
    if (me >= 0 && (unsigned)me < ex_pool_size(p))
        return ex_err(EX_EINVAL, "ex_parallel_scheduler_shutdown: called on one of its pool's workers");
    return ex_pool_shutdown(p);
}

ex_error ex_parallel_scheduler_shutdown(void) {
    par_lock();
    uint32_t phase = par.phase;
    bool hook = false;
    if (phase == UNUSED) {
        hook = par.staged;
        exi_store_rel_u32(&par.phase, CLOSED);
    } else if (phase == ON_BACKEND) {
        hook = !exi_fas_u32(&par.shut, 1);
    }
    par_unlock();
    /* Outside the lock: the pool's cancellations and the backend's hook
     * run user code, which may call in here again. */
    if (phase == ON_POOL) return shutdown_pool(par.pool);
    if (hook && par.backend.shutdown) par.backend.shutdown(par.backend.self);
    return ex_ok();
}

ex_pool *ex_parallel_scheduler_pool(void) { return exi_load_acq_u32(&par.phase) == ON_POOL ? par.pool : NULL; }
