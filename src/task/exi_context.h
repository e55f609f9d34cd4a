/* SPDX-License-Identifier: MIT */
/* exi_context.h - machine context switching for stackful tasks. Internal.
 *
 * A context is the saved state of a suspended execution: only its stack
 * pointer, because everything else the switch keeps is pushed on its own
 * stack.  The switch saves exactly what the ABI makes callee-saved:
 *   x86-64 SysV: rbx, rbp, r12-r15, rsp, the MXCSR word and the x87
 *                control word;
 *   aarch64 AAPCS64: x19-x29, x30 (lr), sp, d8-d15 and FPCR.
 * The floating-point control words are per context (a task that changes its
 * rounding mode does not change another's), as for a thread.  Everything
 * else is caller-saved at the call, so the compiler keeps nothing there.
 *
 * No sanitizer or valgrind knowledge here: exi_fiber.h wraps this. */
#ifndef EXI_CONTEXT_H
#define EXI_CONTEXT_H

#include <stddef.h>

typedef struct exi_context {
    void *sp;
} exi_context;

/* Switches from the running context (its state saved into *from) to *to;
 * returns, when something later switches back to *from, the `arg` that
 * switch passed.  from == to is not allowed. */
void *exi_context_switch(exi_context *from, exi_context *to, void *arg);

/* Prepares *ctx so the first switch to it runs entry(arg_of_that_switch,
 * user) on the stack [lo, lo + size), with the stack 16-byte aligned at the
 * call as the ABI wants.  entry must never return: its last act is a switch
 * away.  The new context starts with the caller's floating-point control
 * words (MXCSR and x87 CW, or FPCR).  The first frame takes the top 80
 * (x86-64) or 192 (aarch64) bytes, plus up to 15 for alignment; the rest is
 * entry's. */
void exi_context_init(exi_context *ctx, void *lo, size_t size, void (*entry)(void *arg, void *user), void *user);

#endif
