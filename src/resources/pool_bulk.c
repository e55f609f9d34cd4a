/* SPDX-License-Identifier: MIT */
/* pool_bulk.c - the pool's bulk hook: chunks of one bulk job shared by
 * the caller and idle workers. */
#include <stdalign.h>

#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_trace.h"
#include "resources/exi_pool.h"
#include "resources/exi_pool_impl.h"

/* Chunks are claimed from a shared counter, so uneven chunks balance
 * themselves: whoever is free takes the next one.  The caller takes part;
 * up to n-1 helper items let idle workers join (they are stolen from the
 * caller's deque like any other work).  The last participant to leave
 * completes the job.  scratch: [0] next chunk, [1] participants still
 * inside, [2] chunk count, [3] chunk size. */
enum { BJ_NEXT, BJ_INSIDE, BJ_CHUNKS, BJ_GRAIN };

/* Drops `count` participants; the last one out completes the job. */
static void bulk_leave_n(ex_bulk_job *job, uint64_t count) {
    if (exi_faa_u64(&job->scratch[BJ_INSIDE], (uint64_t)0 - count) != count) return;
    if (job->extra) ex_deallocate(ex_bulk_job_allocator(job), job->extra, job->extra_size, alignof(ex_bulk_helper));
    job->extra = NULL;
    ex_bulk_job_done(job);
}

static void bulk_leave(ex_bulk_job *job) { bulk_leave_n(job, 1); }

/* Claims and runs the next chunk; false when none is left (or the job
 * stopped: then nobody starts another). */
static bool run_next_chunk(ex_bulk_job *job) {
    uint64_t chunks = job->scratch[BJ_CHUNKS], grain = job->scratch[BJ_GRAIN];
    uint64_t c = exi_faa_u64(&job->scratch[BJ_NEXT], 1);
    if (c >= chunks) return false;
    size_t begin = (size_t)(c * grain);  /* < shape: c < chunks */
    size_t end = job->shape - begin > grain ? begin + (size_t)grain : job->shape;  /* no wrap near SIZE_MAX */
    if (ex_bulk_job_run(job, begin, end)) return true;
    exi_store_rlx_u64(&job->scratch[BJ_NEXT], chunks);
    return false;
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
 * microseconds, so the caller finishes the chunks sooner alone.  Measured
 * in time-stamp counter ticks on x86 (a read costs a third of
 * clock_gettime's, which was a tenth of a small bulk); the counter runs at
 * 1 to 4 GHz, so the bound is 2.5 to 10 us: a rough one is enough. */
#if defined(__x86_64__) || defined(__i386__)
#define WAKE_WORTH 10000u
static uint64_t ticks(void) { return __builtin_ia32_rdtsc(); }
#else
#define WAKE_WORTH 4000u
static uint64_t ticks(void) { return exi_now_ns(); }
#endif

#define EAGER_SHAPE ((uint64_t)1 << 16)

/* The caller's share when its helpers were pushed quietly: it runs chunks
 * and, once the chunks it has run say the rest is worth it, wakes as many
 * parked workers as there are chunks left for them (at most its helpers).
 * An awake worker steals a helper without being woken.  `eager`: wake
 * before the first chunk (each chunk is a participant's whole share). */
static void run_lazily(ex_pool *p, ex_bulk_job *job, unsigned helpers, bool eager) {
    if (eager) {
        /* Workers awake and looking steal the helpers without a wake-up
         * (a futex call on the caller's path); busy ones take them later. */
        unsigned awake = exi_pool_awake_others(p);
        if (awake < helpers) exi_pool_wake(p, helpers - awake);
        while (run_next_chunk(job)) {}
        return;
    }
    uint64_t t0 = ticks();
    for (uint64_t done = 1; run_next_chunk(job); done++) {
        uint64_t next = exi_load_rlx_u64(&job->scratch[BJ_NEXT]), chunks = job->scratch[BJ_CHUNKS];
        if (next >= chunks) continue;  /* nothing left to share */
        uint64_t left = chunks - next, spent = ticks() - t0;
        if (spent / done * left < WAKE_WORTH) continue;
        exi_pool_wake(p, left < helpers ? (unsigned)left : helpers);
        while (run_next_chunk(job)) {}
        return;
    }
}

static bool is_helper_of(ex_work *w, void *job) {
    return w->execute == bulk_helper_run && ((ex_bulk_helper *)(void *)w)->job == job;
}

/* Takes back the helpers nobody has taken (the newest first, from the
 * caller's own deque) and leaves with them: no item runs only to find the
 * chunks gone, and a bulk the caller ran alone completes right here. */
static void leave_with_helpers(ex_bulk_job *job) {
    uint64_t count = 1;
    while (exi_pool_take_own_if(is_helper_of, job)) count++;
    bulk_leave_n(job, count);
}

/* Queues the helpers; returns whether all went quietly onto the caller's
 * deque (false: the caller is not an agent of p, and each was submitted
 * with a wake-up as usual). */
static bool publish(ex_pool *p, ex_bulk_job *job, ex_bulk_helper *h, uint64_t helpers) {
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

void exi_pool_bulk(void *self, ex_bulk_job *job) {
    ex_pool *p = self;
    uint64_t shape = job->shape;
    /* Rounded-up divisions written so that a shape near SIZE_MAX cannot
     * wrap (it once made 0 chunks: a silent no-op). */
    uint64_t parts = 8ull * p->n;
    uint64_t grain = job->grain ? job->grain : shape / parts + (shape % parts != 0);
    if (grain == 0) grain = 1;
    uint64_t chunks = shape / grain + (shape % grain != 0);
    uint64_t helpers = chunks > 1 ? chunks - 1 : 0;
    if (helpers > p->n - 1) helpers = p->n - 1;
    ex_bulk_helper *h = job->helpers;
    if (helpers > EX_BULK_INLINE_HELPERS) {
        size_t bytes = (size_t)helpers * sizeof(ex_bulk_helper);
        if ((h = ex_allocate(ex_bulk_job_allocator(job), bytes, alignof(ex_bulk_helper)))) {
            job->extra = h;
            job->extra_size = bytes;
        } else {
            h = job->helpers;  /* fewer helpers: slower, never wrong */
            helpers = EX_BULK_INLINE_HELPERS;
        }
    }
    job->scratch[BJ_NEXT] = 0;
    job->scratch[BJ_INSIDE] = helpers + 1;
    job->scratch[BJ_CHUNKS] = chunks;
    job->scratch[BJ_GRAIN] = grain;
    if (!helpers || !publish(p, job, h, helpers)) {
        bulk_participate(job);
        return;
    }
    /* Woken at once: for an explicit grain (the caller sized the chunks to
     * be shared; the algorithms give one chunk per participant, and waking
     * after the caller's first chunk would come after its whole share), and
     * for a shape so large that even an empty body (a nanosecond an index)
     * pays for the wake-ups. */
    bool eager = job->grain || shape >= EAGER_SHAPE;
    run_lazily(p, job, (unsigned)helpers, eager);
    leave_with_helpers(job);
}
