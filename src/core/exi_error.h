/* SPDX-License-Identifier: MIT */
/* exi_error.h - dropping and copying owned errors (cexec/error.h) on hot
 * paths: an error that owns nothing costs one test.  Internal. */
#ifndef EXI_ERROR_H
#define EXI_ERROR_H

#include <cexec/error.h>

/* Releases e's reference (an error cexec was given and does not pass on). */
static inline void exi_error_drop(ex_error e) {
    if (__builtin_expect(e.box != 0, 0)) ex_error_release(e);
}

/* Another reference to e (one per consumer of a stored error). */
static inline ex_error exi_error_copy(ex_error e) {
    if (__builtin_expect(e.box != 0, 0)) ex_error_retain(e);
    return e;
}

#endif
