/* SPDX-License-Identifier: MIT */
/* exi_when_all.h - what the task layer may know of a when_all sender.
 * Internal.
 *
 * Layer compose/: senders of many children (when_all, bulk, split,
 * counting scope) and the join count they share.  It may include
 * adaptors/, core/, allocators/ and base/. */
#ifndef EXI_WHEN_ALL_H
#define EXI_WHEN_ALL_H

#include <stdbool.h>

#include <cexec/cexec.h>

extern const ex_sender_vtable exi_when_all_vt;

/* Whether s is an ex_when_all sender (ex_await runs a when_all of tasks
 * as a fork, task/). */
static inline bool exi_is_when_all(const ex_sender *s) { return s->vt == &exi_when_all_vt; }

/* The sender's layout belongs to when_all.c; other layers read it only
 * through the accessor below.  It is in this header so that the accessor
 * is inline: a fork-join step awaits one when_all per level. */
typedef struct exi_when_all_sender {
    ex_sender base;
    size_t n;
    size_t hops;           /* children that start by queueing an item (starts_on) */
    size_t values_off;     /* in the operation: the value arrays ... */
    size_t collect_off;    /* ... a collect's result (0 in a when_all's) ... */
    size_t ops_off;        /* ... then the children's operations (aligned each) */
    ex_sender *children[];
} exi_when_all_sender;

/* The children of a when_all sender s, in order; their count in *n. */
static inline ex_sender *const *exi_when_all_children(const ex_sender *s, size_t *n) {
    const exi_when_all_sender *ws = (const exi_when_all_sender *)(const void *)s;
    *n = ws->n;
    return ws->children;
}

#endif
