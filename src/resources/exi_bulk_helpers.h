/* SPDX-License-Identifier: MIT */
/* exi_bulk_helpers.h - the helper items a resource's bulk run queues to
 * share a job (the pool's, the parallel scheduler's shared path).
 * Internal. */
#ifndef EXI_BULK_HELPERS_H
#define EXI_BULK_HELPERS_H

#include <stdalign.h>
#include <cexec/cexec.h>

/* The items for *helpers helpers: the job's own, or allocated from the
 * job's allocator into job->extra (fewer when that fails: slower, never
 * wrong; *helpers says how many).  Whoever frees the job's last
 * participant frees job->extra. */
static inline ex_bulk_helper *exi_bulk_helper_items(ex_bulk_job *job, uint64_t *helpers) {
    job->extra = NULL;
    job->extra_size = 0;
    if (*helpers <= EX_BULK_INLINE_HELPERS) return job->helpers;
    /* Callers bound helpers by their agents (at most 4096). */
    size_t bytes = (size_t)*helpers * sizeof(ex_bulk_helper);
    ex_bulk_helper *h = ex_allocate(ex_bulk_job_allocator(job), bytes, alignof(ex_bulk_helper));
    if (!h) {
        *helpers = EX_BULK_INLINE_HELPERS;
        return job->helpers;
    }
    job->extra = h;
    job->extra_size = bytes;
    return h;
}

#endif
