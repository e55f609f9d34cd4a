/* SPDX-License-Identifier: MIT */
/* cexec/debug.h - debug mode: ownership mistakes that otherwise corrupt
 * memory silently become an abort with a message naming the object and
 * the call.
 *
 * On with CEXEC_DEBUG=1 in the environment when the program starts, or
 * ex_debug_set(true) at any time (it applies to senders released and
 * operations connected from then on).  In debug mode:
 *   - a sender whose last reference is released is not freed but kept
 *     (its children released, the block not reused) among the last 65536
 *     released: releasing or retaining it again, giving it to a builder,
 *     connecting it or sync_waiting it aborts ("released twice", which is
 *     also what using a sender after a builder took your only reference
 *     comes to: the builder releases it when it is done);
 *   - an operation from ex_connect or ex_connect_alloc aborts when it is
 *     started a second time, or destroyed after start and before its
 *     completion was delivered (destroying a running operation).
 * The message goes to stderr as "cexec debug: <call>: ...", naming the
 * builder that made the sender (its vtable name), then abort() runs.
 *
 * Cost while on: released senders' memory stays allocated (up to 65536
 * blocks), and each connected operation has a small wrapper from malloc
 * (an operation ex_connect gives is then that wrapper, not `storage`:
 * use the op pointer, as the API says).  Off: a comparison when a sender
 * is released, and a flag read when its last reference goes.  Operations connected while debug mode is off are not
 * checked. */
#ifndef CEXEC_DEBUG_H
#define CEXEC_DEBUG_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Turns debug mode on or off; returns whether it was on.  Thread-safe. */
bool ex_debug_set(bool on);
/* Whether debug mode is on. */
bool ex_debug_enabled(void);

#ifdef __cplusplus
}
#endif

#endif
