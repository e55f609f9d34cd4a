/* SPDX-License-Identifier: MIT */
/* exi_libc.h - the libc allocator's fork handlers.  Internal. */
#ifndef EXI_LIBC_H
#define EXI_LIBC_H

/* Take / give back the lock of the libc allocator's thread registry (the
 * built-in default's fork handlers take it after their own). */
void exi_libc_prefork(void);
void exi_libc_postfork_parent(void);

#endif
