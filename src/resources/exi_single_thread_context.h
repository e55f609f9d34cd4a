/* SPDX-License-Identifier: MIT */
/* exi_single_thread_context.h - what other layers ask of a single-thread
 * context. */
#ifndef CEXEC_EXI_SINGLE_THREAD_CONTEXT_H
#define CEXEC_EXI_SINGLE_THREAD_CONTEXT_H

#include <stdbool.h>

#include "base/exi_macros.h"

/* Set for the life of a context's thread. */
extern EXI_TLS bool exi_tls_context_thread;

/* Whether the calling thread is a single_thread_context's own thread (the
 * only one that runs that context's work: blocking it waits for ever).
 * Inline: every ex_sync_wait asks. */
static inline bool exi_single_thread_context_here(void) { return exi_tls_context_thread; }

#endif
