/* SPDX-License-Identifier: MIT */
/* exi_on.h - what other layers may know of a starts_on sender.  Internal.
 *
 * Layer adaptors/: sources, one-child adaptors, sinks.  It may include
 * resources/ and below. */
#ifndef EXI_ON_H
#define EXI_ON_H

#include <stdbool.h>

#include <cexec/cexec.h>

#include "resources/exi_pool.h"

extern const ex_sender_vtable exi_starts_on_vt;

/* Whether s is an ex_starts_on sender: its operation queues an item when
 * started (when_all takes it back on a pool agent, compose/when_all.c). */
static inline bool exi_is_starts_on(const ex_sender *s) { return s->vt == &exi_starts_on_vt; }

/* A starts_on operation begins with this (on.c). */
typedef struct exi_starts_on_head {
    ex_operation base;
    ex_receiver r;
    ex_operation *sched_op;  /* the schedule operation, connected in the same block */
} exi_starts_on_head;

/* Starts op, a starts_on operation, holding its hop back on the calling
 * pool agent when the pool allows (exi_pool_hold_started): then returns
 * the held item, which the caller runs (or finds queued) once it has
 * started its other children; else starts op as ex_start does and
 * returns NULL.  Inline: a fork-join step makes one per fork. */
static inline ex_work *exi_starts_on_start_lazy(ex_operation *op) {
    ex_operation *sched_op = ((exi_starts_on_head *)(void *)op)->sched_op;  /* (the head is the op's first member) */
    ex_work *held = exi_pool_hold_started(sched_op);
    if (!held) ex_start(sched_op);
    return held;
}

#endif
