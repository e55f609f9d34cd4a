/* SPDX-License-Identifier: MIT */
/* exi_single_thread_context.h - what other layers ask of a single-thread
 * context. */
#ifndef CEXEC_EXI_SINGLE_THREAD_CONTEXT_H
#define CEXEC_EXI_SINGLE_THREAD_CONTEXT_H

#include <stdbool.h>

/* Whether the calling thread is a single_thread_context's own thread (the
 * only one that runs that context's work: blocking it waits for ever). */
bool exi_single_thread_context_here(void);

#endif
