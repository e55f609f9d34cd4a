/* SPDX-License-Identifier: MIT */
/* exi_macros.h - language helpers every layer uses.  Internal.
 *
 * Layer base/: platform and language primitives (atomics, thread
 * identity, the fork generation, the worker slot, tracing, CPU count).
 * It includes nothing of the library but the public headers. */
#ifndef EXI_MACROS_H
#define EXI_MACROS_H

#include <stddef.h>

#define EXI_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Thread-locals on hot paths use the initial-exec TLS model: in a
 * position-independent build the default model calls __tls_get_addr on
 * every access. */
#define EXI_TLS _Thread_local __attribute__((tls_model("initial-exec")))

#endif
