/* SPDX-License-Identifier: MIT */
/* exi_trace.h - per-worker execution trace in the Chrome/Perfetto
 * trace-event JSON format.  Each worker appends to its own buffer; the file
 * is written when the pool is destroyed.  Internal. */
#ifndef EXI_TRACE_H
#define EXI_TRACE_H

#include <stdint.h>
#include <stdio.h>

typedef enum exi_trace_kind { EXI_TRACE_RUN, EXI_TRACE_STEAL, EXI_TRACE_PARK } exi_trace_kind;

typedef struct exi_trace_event {
    uint64_t begin_ns, end_ns;
    uint32_t kind;
} exi_trace_event;

typedef struct exi_trace_buf {
    exi_trace_event *events;
    uint32_t count, capacity;
    uint64_t dropped;
} exi_trace_buf;

uint64_t exi_now_ns(void);

static inline void exi_trace_add(exi_trace_buf *t, exi_trace_kind kind, uint64_t begin, uint64_t end) {
    if (t->count < t->capacity) {
        exi_trace_event *e = &t->events[t->count++];
        e->begin_ns = begin;
        e->end_ns = end;
        e->kind = (uint32_t)kind;
    } else {
        t->dropped++;
    }
}

/* Writes every worker's events; names[i] names worker i.  Returns 0 or -1. */
int exi_trace_write(const char *path, const exi_trace_buf *bufs, const char *const *names, unsigned n,
                    uint64_t origin_ns);

#endif
