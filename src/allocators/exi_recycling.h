/* SPDX-License-Identifier: MIT */
/* exi_recycling.h - the recycling allocator's internal entry points.
 * Internal. */
#ifndef EXI_RECYCLING_H
#define EXI_RECYCLING_H

#include <stdint.h>

#include <cexec/allocators.h>

/* ex_recycling_allocator_create whose shared depot keeps at most
 * depot_batches batches per size class (the public one keeps 64). */
ex_error exi_recycling_allocator_create_bounded(const ex_allocator *under, uint32_t depot_batches,
                                                ex_recycling_allocator **out);
/* Take / give back every lock of r (around fork, for the built-in default). */
void exi_recycling_lock_all(ex_recycling_allocator *r);
void exi_recycling_unlock_all(ex_recycling_allocator *r);

#endif
