/* SPDX-License-Identifier: MIT */
/* exi_jemalloc.h - the pool's jemalloc allocators.  Internal. */
#ifndef EXI_JEMALLOC_H
#define EXI_JEMALLOC_H

#include <cexec/allocators.h>

/* A pool's jemalloc allocator: a parked one with at least `arenas` arenas
 * (stats counted from now), else a new one; and parking it again when the
 * pool goes (never freed: blocks from it stay valid; jemalloc.c). */
ex_error exi_jemalloc_acquire(unsigned arenas, ex_jemalloc_allocator **out);
void exi_jemalloc_park(ex_jemalloc_allocator *j);

#endif
