/* SPDX-License-Identifier: MIT */
/* exi_thread.h - who the calling thread is.  Internal. */
#ifndef EXI_THREAD_H
#define EXI_THREAD_H

/* The identity of the calling thread (an address unique per live thread).
 * Out of line: a task that migrates must not reuse a cached TLS address. */
const void *exi_thread_id(void);

#endif
