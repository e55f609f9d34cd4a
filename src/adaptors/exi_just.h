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

/* Whether s is an ex_just sender whose values hold no tuple; then *v, *n
 * are its values, inside s (immutable, valid while s is). */
bool exi_just_flat_values(const ex_sender *s, const ex_value **v, size_t *n);

#endif
