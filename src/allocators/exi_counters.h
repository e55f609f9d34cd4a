/* SPDX-License-Identifier: MIT */
/* exi_counters.h - allocation counters on relaxed atomics. Internal. */
#ifndef EXI_COUNTERS_H
#define EXI_COUNTERS_H

#include <cexec/allocators.h>

#include "base/exi_atomic.h"

static inline void exi_peak_update(uint64_t *peak, uint64_t value) {
    uint64_t p = exi_load_rlx_u64(peak);
    while (value > p && !exi_cas_u64(peak, &p, value)) { }
}

static inline void exi_count_alloc(ex_alloc_counters *c, size_t bytes) {
    exi_faa_u64(&c->allocations, 1);
    exi_peak_update(&c->peak_bytes, exi_faa_u64(&c->bytes_in_use, bytes) + bytes);
}

static inline void exi_count_free(ex_alloc_counters *c, size_t bytes) {
    exi_faa_u64(&c->frees, 1);
    exi_faa_u64(&c->bytes_in_use, (uint64_t)0 - bytes);
}

static inline void exi_count_fail(ex_alloc_counters *c) { exi_faa_u64(&c->failures, 1); }

static inline void exi_counters_read(ex_alloc_counters *c, ex_alloc_stats *out) {
    out->allocations = exi_load_rlx_u64(&c->allocations);
    out->frees = exi_load_rlx_u64(&c->frees);
    out->failures = exi_load_rlx_u64(&c->failures);
    out->bytes_in_use = exi_load_rlx_u64(&c->bytes_in_use);
    out->peak_bytes = exi_load_rlx_u64(&c->peak_bytes);
}

#endif
