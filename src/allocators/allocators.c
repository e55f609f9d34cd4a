/* SPDX-License-Identifier: MIT */
/* allocators.c - the budget, monotonic and fault-injecting allocators. */
#include <string.h>

#include <cexec/cexec.h>

#include "allocators/exi_alloc_limits.h"
#include "allocators/exi_counters.h"
#include "base/exi_atomic.h"

/* ------------------------------------------------------------------ budget */

static void *budget_allocate(void *ctx, size_t size, size_t align) {
    ex_budget_allocator *b = ctx;
    if (!exi_alloc_request_ok(size, align)) {
        exi_count_fail(&b->c);
        return NULL;
    }
    /* Reserve the bytes first, so concurrent allocations cannot overshoot. */
    uint64_t in = exi_load_rlx_u64(&b->c.bytes_in_use);
    for (;;) {
        if (in + size > b->limit || in + size < in) {
            exi_count_fail(&b->c);
            return NULL;
        }
        if (exi_cas_u64(&b->c.bytes_in_use, &in, in + size)) break;
    }
    void *p = b->under->allocate(b->under->ctx, size, align);
    if (!p) {
        exi_faa_u64(&b->c.bytes_in_use, (uint64_t)0 - size);
        exi_count_fail(&b->c);
        return NULL;
    }
    exi_faa_u64(&b->c.allocations, 1);
    exi_peak_update(&b->c.peak_bytes, in + size);
    return p;
}

static void budget_deallocate(void *ctx, void *p, size_t size, size_t align) {
    ex_budget_allocator *b = ctx;
    b->under->deallocate(b->under->ctx, p, size, align);
    exi_count_free(&b->c, size);
}

static void budget_stats(void *ctx, ex_alloc_stats *out) { exi_counters_read(&((ex_budget_allocator *)ctx)->c, out); }

void ex_budget_allocator_init(ex_budget_allocator *b, const ex_allocator *under, size_t limit_bytes) {
    memset(b, 0, sizeof *b);
    b->under = under ? under : ex_default_allocator();
    b->limit = limit_bytes;
    b->base = (ex_allocator){ budget_allocate, budget_deallocate, b, "budget", budget_stats };
}

/* --------------------------------------------------------------- monotonic */

static void *mono_allocate(void *ctx, size_t size, size_t align) {
    ex_monotonic_allocator *m = ctx;
    if (!exi_alloc_request_ok(size, align)) {  /* a non-power-of-two mask would misalign */
        exi_count_fail(&m->c);
        return NULL;
    }
    uint64_t used = exi_load_rlx_u64(&m->used);
    for (;;) {
        uintptr_t base = (uintptr_t)m->buf + used;
        uint64_t start = used + (uint64_t)(ex_align_up(base, align) - base);
        uint64_t end = start + size;
        if (end > m->size || end < start) break;  /* exhausted */
        if (exi_cas_u64(&m->used, &used, end)) {
            exi_count_alloc(&m->c, size);
            return m->buf + start;
        }
    }
    void *p = m->upstream ? m->upstream->allocate(m->upstream->ctx, size, align) : NULL;
    if (p) exi_count_alloc(&m->c, size);
    else exi_count_fail(&m->c);
    return p;
}

static void mono_deallocate(void *ctx, void *p, size_t size, size_t align) {
    ex_monotonic_allocator *m = ctx;
    bool inside = (char *)p >= m->buf && (char *)p < m->buf + m->size;
    if (!inside) m->upstream->deallocate(m->upstream->ctx, p, size, align);
    exi_count_free(&m->c, size);
}

static void mono_stats(void *ctx, ex_alloc_stats *out) { exi_counters_read(&((ex_monotonic_allocator *)ctx)->c, out); }

void ex_monotonic_allocator_init(ex_monotonic_allocator *m, void *buf, size_t size, const ex_allocator *upstream) {
    memset(m, 0, sizeof *m);
    m->buf = buf;
    m->size = buf ? size : 0;
    m->upstream = upstream;
    m->base = (ex_allocator){ mono_allocate, mono_deallocate, m, "monotonic", mono_stats };
}

void ex_monotonic_allocator_reset(ex_monotonic_allocator *m) { exi_store_rel_u64(&m->used, 0); }

/* ------------------------------------------------------------------- fault */

static bool should_fail(ex_fault_allocator *f) {
    uint64_t n = exi_faa_u64(&f->count, 1) + 1;
    uint64_t nth = exi_load_rlx_u64(&f->fail_nth);
    if (nth && n == nth) return true;
    uint32_t rate = exi_load_rlx_u32(&f->per_million);
    if (!rate) return false;
    /* xorshift64* over a shared state: one sequence per seed. */
    uint64_t x = exi_load_rlx_u64(&f->seed), next;
    do {
        next = x;
        next ^= next >> 12;
        next ^= next << 25;
        next ^= next >> 27;
    } while (!exi_cas_u64(&f->seed, &x, next));
    return (next * 0x2545F4914F6CDD1Dull >> 32) % 1000000u < rate;
}

static void *fault_allocate(void *ctx, size_t size, size_t align) {
    ex_fault_allocator *f = ctx;
    /* A request no allocator can meet fails without using up a planned failure. */
    void *p = !exi_alloc_request_ok(size, align) || should_fail(f) ? NULL : f->under->allocate(f->under->ctx, size, align);
    if (p) exi_count_alloc(&f->c, size);
    else exi_count_fail(&f->c);
    return p;
}

static void fault_deallocate(void *ctx, void *p, size_t size, size_t align) {
    ex_fault_allocator *f = ctx;
    f->under->deallocate(f->under->ctx, p, size, align);
    exi_count_free(&f->c, size);
}

static void fault_stats(void *ctx, ex_alloc_stats *out) { exi_counters_read(&((ex_fault_allocator *)ctx)->c, out); }

void ex_fault_allocator_init(ex_fault_allocator *f, const ex_allocator *under) {
    memset(f, 0, sizeof *f);
    f->under = under ? under : ex_default_allocator();
    f->base = (ex_allocator){ fault_allocate, fault_deallocate, f, "fault", fault_stats };
}

void ex_fault_allocator_fail_nth(ex_fault_allocator *f, uint64_t n) {
    exi_store_rlx_u64(&f->fail_nth, n ? exi_load_rlx_u64(&f->count) + n : 0);
}

void ex_fault_allocator_fail_randomly(ex_fault_allocator *f, uint64_t seed, uint32_t per_million) {
    exi_store_rlx_u64(&f->seed, seed ? seed : 0x9E3779B97F4A7C15ull);
    exi_store_rlx_u32(&f->per_million, per_million > 1000000u ? 1000000u : per_million);
}

uint64_t ex_fault_allocator_count(const ex_fault_allocator *f) { return exi_load_rlx_u64(&f->count); }
