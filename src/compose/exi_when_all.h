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

/* The children of a when_all sender s, in order; their count in *n. */
ex_sender *const *exi_when_all_children(const ex_sender *s, size_t *n);

#endif
