/* SPDX-License-Identifier: MIT */
/* deque.c - Chase-Lev deque; orderings follow Le et al. (PPoPP 2013),
 * figure 1, with its C11 fences mapped onto exi_atomic.h. */
#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "resources/exi_deque.h"

static exi_deque_array *array_new(const ex_allocator *a, uint64_t capacity) {
    size_t bytes = sizeof(exi_deque_array) + capacity * sizeof(ex_work *);
    exi_deque_array *arr = ex_allocate(a, bytes, alignof(exi_deque_array));
    if (!arr) return NULL;
    arr->retired_next = NULL;
    arr->mask = capacity - 1;
    return arr;
}

static void array_free(const ex_allocator *a, exi_deque_array *arr) {
    ex_deallocate(a, arr, sizeof(exi_deque_array) + (arr->mask + 1) * sizeof(ex_work *), alignof(exi_deque_array));
}

static ex_work *slot_load(exi_deque_array *a, int64_t i) {
    return exi_load_rlx_ptr((void *const *)&a->slots[(uint64_t)i & a->mask]);
}

static void slot_store(exi_deque_array *a, int64_t i, ex_work *w) {
    exi_store_rlx_ptr((void **)&a->slots[(uint64_t)i & a->mask], w);
}

ex_error exi_deque_init(exi_deque *d, uint64_t capacity, const ex_allocator *alloc) {
    if (capacity < 2 || (capacity & (capacity - 1))) return ex_err(EX_EINVAL, "exi_deque_init: capacity must be a power of two");
    d->top = 0;
    d->bottom = 0;
    d->retired = NULL;
    d->alloc = alloc;
    exi_deque_array *a = array_new(alloc, capacity);
    if (!a) return ex_err(EX_ENOMEM, "ex_pool_create: out of memory for a worker deque");
    d->array = a;
    return ex_ok();
}

void exi_deque_destroy(exi_deque *d) {
    array_free(d->alloc, d->array);
    for (exi_deque_array *r = d->retired, *next; r; r = next) {
        next = r->retired_next;
        array_free(d->alloc, r);
    }
    d->array = NULL;
    d->retired = NULL;
}

/* Doubles the array, copying [t, b).  The old array is retired, not freed:
 * a thief may have loaded it and still read a slot from it. */
static exi_deque_array *grow(exi_deque *d, exi_deque_array *old, int64_t t, int64_t b) {
    exi_deque_array *a = array_new(d->alloc, (old->mask + 1) * 2);
    if (!a) return NULL;
    for (int64_t i = t; i < b; i++) slot_store(a, i, slot_load(old, i));
    exi_store_rel_ptr(&d->array, a);
    old->retired_next = d->retired;
    d->retired = old;
    return a;
}

bool exi_deque_push(exi_deque *d, ex_work *w) {
    int64_t b = (int64_t)exi_load_rlx_u64(&d->bottom);
    int64_t t = (int64_t)exi_load_acq_u64(&d->top);
    exi_deque_array *a = exi_load_rlx_ptr(&d->array);
    if (b - t > (int64_t)a->mask) {
        a = grow(d, a, t, b);
        if (!a) return false;
    }
    slot_store(a, b, w);
    /* release: the slot is visible before the new bottom */
    exi_store_rel_u64(&d->bottom, (uint64_t)(b + 1));
    return true;
}

ex_work *exi_deque_take(exi_deque *d) {
    int64_t b = (int64_t)exi_load_rlx_u64(&d->bottom) - 1;
    exi_deque_array *a = exi_load_rlx_ptr(&d->array);
    /* store(bottom) then load(top) must not be reordered (store-load): a
     * full barrier.  The exchange is one on every target. */
    (void)exi_fas_u64(&d->bottom, (uint64_t)b);
    int64_t t = (int64_t)exi_load_rlx_u64(&d->top);
    ex_work *w = NULL;
    if (t <= b) {
        w = slot_load(a, b);
        if (t == b) {
            /* Last item: race the thieves for it. */
            uint64_t expected = (uint64_t)t;
            if (!exi_cas_u64(&d->top, &expected, (uint64_t)(t + 1))) w = NULL;
            exi_store_rlx_u64(&d->bottom, (uint64_t)(b + 1));
        }
    } else {
        exi_store_rlx_u64(&d->bottom, (uint64_t)(b + 1));
    }
    return w;
}

ex_work *exi_deque_peek(exi_deque *d) {
    int64_t b = (int64_t)exi_load_rlx_u64(&d->bottom) - 1;
    int64_t t = (int64_t)exi_load_acq_u64(&d->top);
    if (t > b) return NULL;
    return slot_load(exi_load_rlx_ptr(&d->array), b);
}

exi_steal_result exi_deque_steal(exi_deque *d, ex_work **out) {
    int64_t t = (int64_t)exi_load_acq_u64(&d->top);
    exi_fence_full();
    int64_t b = (int64_t)exi_load_acq_u64(&d->bottom);
    if (t >= b) return EXI_STEAL_EMPTY;
    exi_deque_array *a = exi_load_acq_ptr(&d->array);
    ex_work *w = slot_load(a, t);
    uint64_t expected = (uint64_t)t;
    if (!exi_cas_u64(&d->top, &expected, (uint64_t)(t + 1))) return EXI_STEAL_ABORT;
    *out = w;
    return EXI_STEAL_OK;
}
