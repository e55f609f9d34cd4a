/* SPDX-License-Identifier: MIT */
/* cexec/split.h - split ([exec.split], with the R10 fix).
 *
 * ex_split(child) returns a sender whose every connection (consumer)
 * shares one run of child.  The first consumer started starts child; every
 * consumer completes with child's result (values deep-copied once into the
 * shared state and lent to each consumer; an error given to each consumer
 * as a reference of its own, cexec/error.h), on the agent where child
 * completed, or at once, inside start, for a consumer started after child
 * completed.  A stop request on any consumer's stop token requests stop on
 * the shared work.  The shared state is reference counted by the sender
 * and by every connected consumer; it is allocated when the sender is
 * built, from the default allocator. */
#ifndef CEXEC_SPLIT_H
#define CEXEC_SPLIT_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Takes ownership of child.  Signatures: child's, plus set_error (copying
 * tuple values may fail with EX_ENOMEM) and set_stopped. */
ex_sender *ex_split(ex_sender *child);

#ifdef __cplusplus
}
#endif
#endif
