/* SPDX-License-Identifier: MIT */
/* pool_bulk.c - the pool's bulk (its domain hands every bulk job here):
 * chunks of one bulk job shared by the caller and idle workers (EX_PAR,
 * EX_PAR_UNSEQ), or run by the caller alone in index order (EX_SEQ,
 * EX_UNSEQ). */
#include <stdalign.h>

#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_trace.h"
#include "resources/exi_bulk_helpers.h"
#include "resources/exi_pool.h"
#include "resources/exi_pool_impl.h"

/* Chunks are claimed from a shared counter, so uneven chunks balance
 * themselves: whoever is free takes the next one.  The caller takes part;
 * up to n-1 helper items let idle workers join (they are stolen from the
 * caller's deque like any other work).  The last participant to leave
 * completes the job.  scratch: [0] next chunk, [1] participants still
 * inside, [2] chunk count, [3] chunk size. */
enum { BJ_NEXT, BJ_INSIDE, BJ_CHUNKS, BJ_GRAIN };

/* By the last participant out. */
static void bulk_complete(ex_bulk_job *job) {
    if (job->extra) ex_deallocate(ex_bulk_job_allocator(job), job->extra, job->extra_size, alignof(ex_bulk_helper));
    job->extra = NULL;
    ex_bulk_job_done(job);
}

/* Drops `count` participants; the last one out completes the job. */
static void bulk_leave_n(ex_bulk_job *job, uint64_t count) {
    if (exi_faa_u64(&job->scratch[BJ_INSIDE], (uint64_t)0 - count) != count) return;
    bulk_complete(job);
}

static void bulk_leave(ex_bulk_job *job) { bulk_leave_n(job, 1); }

/* Runs chunk c, just claimed; false when there is no such chunk (or the
 * job stopped: then nobody starts another). */
static bool run_chunk(ex_bulk_job *job, uint64_t c) {
    uint64_t chunks = job->scratch[BJ_CHUNKS], grain = job->scratch[BJ_GRAIN];
    if (c >= chunks) return false;
    size_t begin = (size_t)(c * grain);  /* < shape: c < chunks */
    size_t end = job->shape - begin > grain ? begin + (size_t)grain : job->shape;  /* no wrap near SIZE_MAX */
    if (ex_bulk_job_run(job, begin, end)) return true;
    exi_store_rlx_u64(&job->scratch[BJ_NEXT], chunks);
    return false;
}

/* Claims and runs the next chunk; false when none is left. */
static bool run_next_chunk(ex_bulk_job *job) { return run_chunk(job, exi_faa_u64(&job->scratch[BJ_NEXT], 1)); }

/* The same while the caller is alone with the job (no helper queued: the
 * queueing publishes the count): no locked instruction. */
static bool run_next_chunk_alone(ex_bulk_job *job) {
    uint64_t c = exi_load_rlx_u64(&job->scratch[BJ_NEXT]);
    exi_store_rlx_u64(&job->scratch[BJ_NEXT], c + 1);
    return run_chunk(job, c);
}

static void bulk_participate(ex_bulk_job *job) {
    while (run_next_chunk(job)) {}
    bulk_leave(job);
}

static void bulk_helper_run(ex_work *w) { bulk_participate(((ex_bulk_helper *)(void *)w)->job); }
/* Dropped at shutdown: the other participants run the chunks. */
static void bulk_helper_cancel(ex_work *w) { bulk_leave(((ex_bulk_helper *)(void *)w)->job); }

/* ------------------------------------------------------------ the caller */

/* Below this much remaining work a parked worker is not worth waking: the
 * caller's futex wake and the worker's way back to a CPU cost a few
 * microseconds, so the caller finishes the chunks sooner alone.  Below
 * SHARE_WORTH even an awake worker is not worth a helper item: stealing it
 * and finding the chunks costs it cache misses the caller would then wait
 * for, and a worker kept busy that way does not go back to sleep.
 * Measured in time-stamp counter ticks on x86 (a read costs a third of
 * clock_gettime's, which was a tenth of a small bulk); the counter runs at
 * 1 to 4 GHz, so the bounds are 2.5 to 10 us and 0.5 to 2 us: rough ones
 * are enough. */
#if defined(__x86_64__) || defined(__i386__)
#define WAKE_WORTH 10000u
#define SHARE_WORTH 2000u
static uint64_t ticks(void) { return __builtin_ia32_rdtsc(); }
#else
#define WAKE_WORTH 4000u
#define SHARE_WORTH 800u
static uint64_t ticks(void) { return exi_now_ns(); }
#endif

#define EAGER_SHAPE ((uint64_t)1 << 16)

static bool is_helper_of(ex_work *w, void *job) {
    return w->execute == bulk_helper_run && ((ex_bulk_helper *)(void *)w)->job == job;
}

/* Takes back the helpers nobody has taken (the newest first, from the
 * caller's own deque) and leaves with them: no item runs only to find the
 * chunks gone, and a bulk the caller ran alone completes right here.
 * Before it leaves (the completion may go on to anything), it records in
 * *unrun, if given, how many it took back. */
static void leave_with_helpers(ex_bulk_job *job, uint32_t *unrun) {
    uint32_t count = 1;
    while (exi_pool_take_own_if(is_helper_of, job)) count++;
    if (unrun) *unrun = count - 1;
    bulk_leave_n(job, count);
}

/* Queues the helpers, counting them in first (one may run and leave at
 * once); returns whether all went quietly onto the caller's deque (false:
 * the caller is not an agent of p, and each was submitted with a wake-up
 * as usual). */
static bool publish(ex_pool *p, ex_bulk_job *job, ex_bulk_helper *h, uint64_t helpers) {
    (void)exi_faa_u64(&job->scratch[BJ_INSIDE], helpers);
    bool quiet = true;
    for (uint64_t i = 0; i < helpers; i++) {
        h[i].job = job;
        h[i].work.next = NULL;
        h[i].work.execute = bulk_helper_run;
        h[i].work.cancel = bulk_helper_cancel;
        if (quiet && exi_pool_push_quiet(p, &h[i].work)) continue;
        quiet = false;
        if (exi_pool_submit(p, &h[i].work).code) bulk_leave(job);  /* shutting down: the caller does it all */
    }
    return quiet;
}

/* Queues up to *helpers helpers (fewer when their items cannot be
 * allocated); returns whether all went quietly (publish). */
static bool share(ex_pool *p, ex_bulk_job *job, uint64_t *helpers) {
    ex_bulk_helper *h = exi_bulk_helper_items(job, helpers);
    return publish(p, job, h, *helpers);
}

/* The caller's share when its helpers are (`shared`) or would be pushed
 * quietly: it runs chunks and, once the chunks it has run say the rest is
 * worth it, wakes as many parked workers as there are chunks left for them
 * (at most its helpers); an awake worker steals a helper without being
 * woken.  Not `shared` yet: the caller starts alone, and queues the helpers
 * only once the rest is worth an awake worker's time; a short bulk so costs
 * its chunks and two counter reads (no queue operation, no lock, no
 * wake-up). */
static void run_lazily(ex_pool *p, ex_bulk_job *job, uint64_t helpers, bool shared) {
    /* Sharing pays only while two chunks or more are left: one the caller
     * would run at once itself, sooner than anyone it could hand it to.  A
     * bulk of two chunks therefore never reads the clock (a time-stamp
     * read costs tens of cycles: a quarter of a small launch). */
    uint64_t chunks = job->scratch[BJ_CHUNKS];
    uint64_t t0 = chunks > 2 ? ticks() : 0;
    for (uint64_t done = 1; shared ? run_next_chunk(job) : run_next_chunk_alone(job); done++) {
        uint64_t next = exi_load_rlx_u64(&job->scratch[BJ_NEXT]);
        if (next >= chunks || chunks - next < 2) continue;  /* nothing worth sharing */
        uint64_t left = chunks - next, worth = (ticks() - t0) / done * left;
        if (left < helpers) helpers = left;
        if (!shared) {
            if (worth < SHARE_WORTH) continue;
            shared = true;
            if (!share(p, job, &helpers)) {  /* submitted with wake-ups: nothing to take back */
                bulk_participate(job);
                return;
            }
        }
        if (worth < WAKE_WORTH) continue;
        exi_pool_wake(p, (unsigned)helpers);
        while (run_next_chunk(job)) {}
        break;
    }
    if (shared) leave_with_helpers(job, NULL);
    else bulk_complete(job);  /* alone all along */
}

/* Whether the policy lets other agents run chunks: EX_SEQ and EX_UNSEQ
 * keep every call on one agent (unseq only lets calls interleave on it,
 * which a call through a function pointer cannot), so the caller runs the
 * chunks itself, in order. */
static bool may_share(ex_execution_policy policy) { return policy == EX_PAR || policy == EX_PAR_UNSEQ; }

void exi_pool_bulk(void *self, ex_bulk_job *job) {
    ex_pool *p = self;
    uint64_t shape = job->shape;
    /* Rounded-up divisions written so that a shape near SIZE_MAX cannot
     * wrap (it once made 0 chunks: a silent no-op).  A shape within the
     * parts is one index a chunk, without the divisions. */
    uint64_t parts = 8ull * p->n;
    uint64_t grain = job->grain ? job->grain : shape <= parts ? 1 : shape / parts + (shape % parts != 0);
    if (grain == 0) grain = 1;
    uint64_t chunks = grain == 1 ? shape : shape / grain + (shape % grain != 0);
    uint64_t helpers = chunks > 1 ? chunks - 1 : 0;
    if (helpers > p->n - 1) helpers = p->n - 1;
    if (!may_share(job->policy)) helpers = 0;
    job->scratch[BJ_NEXT] = 0;
    job->scratch[BJ_INSIDE] = 1;  /* the caller; publish counts the helpers */
    job->scratch[BJ_CHUNKS] = chunks;
    job->scratch[BJ_GRAIN] = grain;
    if (!helpers) {  /* one chunk, one worker, or a sequenced policy: the caller alone, in index order */
        while (run_next_chunk_alone(job)) {}
        bulk_complete(job);
        return;
    }
    /* Eager: for an explicit grain (the caller sized the chunks to be
     * shared; the algorithms give one chunk per participant, and waking
     * after the caller's first chunk would come after its whole share), and
     * for a shape so large that even an empty body (a nanosecond an index)
     * pays for the wake-ups. */
    bool eager = job->grain || shape >= EAGER_SHAPE;
    /* At most an index per worker, on an agent of p: the caller starts
     * alone (a launch of that size is mostly overhead).  Larger shapes queue
     * their helpers first, for awake workers to take part from the start
     * (an index may wait for another one to run). */
    if (!eager && shape <= p->n && ex_pool_current_worker(p) >= 0) {
        run_lazily(p, job, helpers, false);
        return;
    }
    if (!share(p, job, &helpers)) {
        bulk_participate(job);
        return;
    }
    if (!eager) {
        run_lazily(p, job, helpers, true);
        return;
    }
    /* Workers awake and looking steal the helpers without a wake-up (a
     * futex call on the caller's path); busy ones take them later.  As
     * many of those counted awake as this agent's last helpers that came
     * back unrun were not looking: busy elsewhere, or runnable on a CPU
     * they did not get.  (A worker queued behind this thread on its CPU
     * counts as awake, and a parked one on an idle CPU was then never
     * woken: the caller ran bulk after bulk alone, for milliseconds.) */
    exi_worker *me = exi_pool_current();
    if (me && me->pool != p) me = NULL;
    unsigned awake = exi_pool_awake_others(p), missed = me ? me->unrun_helpers : 0;
    awake = awake > missed ? awake - missed : 0;
    if (awake < helpers) exi_pool_wake(p, (unsigned)helpers - awake);
    while (run_next_chunk(job)) {}
    leave_with_helpers(job, me ? &me->unrun_helpers : NULL);
}
