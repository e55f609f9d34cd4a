/* pool_bulk.c - the pool's bulk hook: chunks of one bulk job shared by
 * the caller and idle workers. */
#include <stdalign.h>

#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "resources/exi_pool_impl.h"

/* Chunks are claimed from a shared counter, so uneven chunks balance
 * themselves: whoever is free takes the next one.  The caller takes part;
 * up to n-1 helper items let idle workers join (they are stolen from the
 * caller's deque like any other work).  The last participant to leave
 * completes the job.  scratch: [0] next chunk, [1] participants still
 * inside, [2] chunk count, [3] chunk size. */
enum { BJ_NEXT, BJ_INSIDE, BJ_CHUNKS, BJ_GRAIN };

static void bulk_leave(ex_bulk_job *job) {
    if (exi_faa_u64(&job->scratch[BJ_INSIDE], (uint64_t)-1) != 1) return;
    if (job->extra) ex_deallocate(ex_bulk_job_allocator(job), job->extra, job->extra_size, alignof(ex_bulk_helper));
    job->extra = NULL;
    ex_bulk_job_done(job);
}

static void bulk_participate(ex_bulk_job *job) {
    uint64_t chunks = job->scratch[BJ_CHUNKS], grain = job->scratch[BJ_GRAIN];
    for (;;) {
        uint64_t c = exi_faa_u64(&job->scratch[BJ_NEXT], 1);
        if (c >= chunks) break;
        size_t begin = (size_t)(c * grain);  /* < shape: c < chunks */
        size_t end = job->shape - begin > grain ? begin + (size_t)grain : job->shape;  /* no wrap near SIZE_MAX */
        if (!ex_bulk_job_run(job, begin, end)) {
            exi_store_rlx_u64(&job->scratch[BJ_NEXT], chunks);  /* nobody starts another chunk */
            break;
        }
    }
    bulk_leave(job);
}

static void bulk_helper_run(ex_work *w) { bulk_participate(((ex_bulk_helper *)(void *)w)->job); }
/* Dropped at shutdown: the other participants run the chunks. */
static void bulk_helper_cancel(ex_work *w) { bulk_leave(((ex_bulk_helper *)(void *)w)->job); }

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
    for (uint64_t i = 0; i < helpers; i++) {
        h[i].job = job;
        h[i].work.next = NULL;
        h[i].work.execute = bulk_helper_run;
        h[i].work.cancel = bulk_helper_cancel;
        if (exi_pool_submit(p, &h[i].work).code) bulk_leave(job);  /* shutting down: the caller does it all */
    }
    bulk_participate(job);
}

