/* SPDX-License-Identifier: MIT */
/* exi_just.h - what other adaptors may know of a just sender.  Internal.
 *
 * Layer adaptors/: sources, one-child adaptors, sinks.  It may include
 * resources/ and below. */
#ifndef EXI_JUST_H
#define EXI_JUST_H

#include <stdbool.h>
#include <stddef.h>

#include <cexec/cexec.h>

extern const ex_sender_vtable exi_just_vt;

bool exi_just_flat_values_of(const ex_sender *s, const ex_value **v, size_t *n);

/* Whether s is an ex_just sender whose values hold no tuple; then *v, *n
 * are its values, inside s (immutable, valid while s is).  Any other
 * sender is told apart inline (let_value asks at every run). */
static inline bool exi_just_flat_values(const ex_sender *s, const ex_value **v, size_t *n) {
    return s->vt == &exi_just_vt && exi_just_flat_values_of(s, v, n);
}

#endif
