/* SPDX-License-Identifier: MIT */
/* exi_alloc_limits.h - which requests the built-in allocators serve.
 * Internal.
 *
 * Layer allocators/: the libc allocator and the process default, the
 * recycling, jemalloc, budget, monotonic and failing allocators.  It may
 * include base/ only: senders, resources and tasks allocate through it. */
#ifndef EXI_ALLOC_LIMITS_H
#define EXI_ALLOC_LIMITS_H

#include <stdbool.h>

#include <cexec/allocator.h>

/* Whether the built-in allocators serve a request (allocator.h): size at
 * most EX_ALLOC_MAX_SIZE, alignment a power of two (0: none) at most
 * EX_ALLOC_MAX_ALIGN.  Below these bounds size + alignment + a header
 * cannot wrap. */
static inline bool exi_alloc_request_ok(size_t size, size_t align) {
    return size <= EX_ALLOC_MAX_SIZE && align <= EX_ALLOC_MAX_ALIGN && (align & (align - 1)) == 0;
}

#endif
