/* SPDX-License-Identifier: MIT */
/* cexec/into_variant.h - into_variant ([exec.into.variant]),
 * stopped_as_optional ([exec.stopped.as.optional]) and stopped_as_error
 * ([exec.stopped.as.error]). */
#ifndef CEXEC_INTO_VARIANT_H
#define CEXEC_INTO_VARIANT_H

#include <cexec/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every value completion becomes set_value(tuple) with one EX_T_TUPLE datum
 * whose index is the child's value signature that matched (0 for a child
 * with run-time signatures) and whose elements are the datums.  The tuple is
 * borrowed for the completion, like any value.  Errors and stopped pass
 * through. */
ex_sender *ex_into_variant(ex_sender *child);

/* set_value(v) -> set_value(v); set_value(a, b, ...) -> set_value(tuple);
 * set_stopped() -> set_value(none) (an EX_T_NONE datum).  Never completes
 * stopped.  The child must have exactly one value signature with at least
 * one datum (single-sender-value-type non-void), else EX_EINVAL. */
ex_sender *ex_stopped_as_optional(ex_sender *child);

/* set_stopped() -> set_error(err).  Never completes stopped.  Takes err's
 * reference, as ex_just_error does (released with the sender, or at once
 * when the sender is refused). */
ex_sender *ex_stopped_as_error(ex_sender *child, ex_error err);

#ifdef __cplusplus
}
#endif
#endif
