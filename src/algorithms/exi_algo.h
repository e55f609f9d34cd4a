/* SPDX-License-Identifier: MIT */
/* exi_algo.h - argument checks and generic-element helpers shared by the
 * algorithm builders (scan.c, reduce.c, for_each.c). Internal. */
#ifndef EXI_ALGO_H
#define EXI_ALGO_H

#include <stdalign.h>
#include <stddef.h>
#include <string.h>

#include <cexec/algorithms.h>

#include "algorithms/exi_tiled.h"

/* Elements per tile of the scans and reductions: 128 KiB of input, read
 * from memory once and again from the core's L2 cache.  Fixed (never tuned
 * to the machine) because the order of floating-point operations, hence
 * the rounding, depends on it. */
#define EXI_TILE_BYTES ((size_t)128 * 1024)

static inline size_t exi_tile_elems(size_t elem_size) {
    size_t t = EXI_TILE_BYTES / elem_size;
    return t ? t : 1;
}

/* Element types of the scans and reductions. */
typedef enum exi_elem_kind { ELEM_F64, ELEM_I64, ELEM_GENERIC } exi_elem_kind;

/* Argument problems, and the messages naming the builder. */
enum { BAD_NONE, BAD_SCHED, BAD_NULL_ARRAY, BAD_OVERFLOW, BAD_OVERLAP, BAD_MONOID, BAD_MONOID_SIZE, BAD_INIT,
       BAD_FN, BAD_SIZE };

#define EXI_ALGO_MESSAGES(who)                                                                           \
    {                                                                                                    \
        NULL, who ": invalid scheduler", who ": NULL array with n > 0", who ": n * element size overflows", \
            who ": input and output overlap (they may only be the same array)",                          \
            who ": NULL monoid, combine or identity", who ": monoid size is 0 or above EX_MONOID_MAX_SIZE", \
            who ": NULL init", who ": NULL function", who ": element size is 0"                           \
    }

/* An invalid sender carrying EX_EINVAL and messages[bad]. */
static inline ex_sender *exi_algo_reject(const char *const *messages, int bad) {
    return ex_reject(EX_EINVAL, messages[bad], 0, NULL);
}

/* in/out may be NULL only when n == 0 (out_size 0: no output array);
 * arrays may be the same when their elements have the same size (in
 * place), and must not otherwise overlap. */
static inline int exi_check_arrays(ex_scheduler sch, const void *in, size_t in_size, const void *out, size_t out_size,
                                   size_t n) {
    if (!ex_scheduler_valid(sch)) return BAD_SCHED;
    if (n && (!in || (out_size && !out))) return BAD_NULL_ARRAY;
    size_t widest = in_size > out_size ? in_size : out_size;
    if (widest && n > (size_t)-1 / widest) return BAD_OVERFLOW;
    if (n && out_size && !(in == out && in_size == out_size)) {  /* in place only element for element */
        const char *a = in, *b = out;
        if (a < b + n * out_size && b < a + n * in_size) return BAD_OVERLAP;
    }
    return BAD_NONE;
}

static inline int exi_check_monoid(const ex_monoid *m) {
    if (!m || !m->combine || !m->identity) return BAD_MONOID;
    if (!m->size || m->size > EX_MONOID_MAX_SIZE) return BAD_MONOID_SIZE;
    return BAD_NONE;
}

/* Scratch slots for generic elements, each max_align_t aligned. */
static inline size_t exi_slot(size_t elem_size) { return ex_align_up(elem_size, alignof(max_align_t)); }

static inline unsigned char *exi_slot_at(void *scratch, size_t elem_size, size_t i) {
    return (unsigned char *)scratch + i * exi_slot(elem_size);
}

/* acc (+)= each element of [in, in + count * size). */
static inline void exi_fold(const ex_monoid *m, void *acc, const unsigned char *in, size_t count) {
    for (size_t i = 0; i < count; i++) m->combine(m->ctx, acc, in + i * m->size);
}

#endif
