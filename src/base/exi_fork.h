/* SPDX-License-Identifier: MIT */
/* exi_fork.h - telling whether the process forked since a resource was
 * created.  Internal.
 *
 * fork() copies only the calling thread, so in a child a resource of the
 * parent has no threads of its own: work given to it would wait for ever.
 * A resource notes the fork generation when it is created; the child's
 * fork handler moves the generation on, and the resource refuses work
 * whose generation differs. */
#ifndef EXI_FORK_H
#define EXI_FORK_H

#include <stdint.h>

/* Installs the fork handler (once per process) and returns the current
 * generation: call when creating a resource. */
uint64_t exi_fork_watch(void);

/* The current generation (one relaxed load). */
uint64_t exi_fork_generation(void);

#endif
