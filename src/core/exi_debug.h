/* SPDX-License-Identifier: MIT */
/* exi_debug.h - debug mode (cexec/debug.h) where senders and operations
 * are released, used and connected.  Internal. */
#ifndef EXI_DEBUG_H
#define EXI_DEBUG_H

#include <stdbool.h>
#include <stdint.h>

#include <cexec/cexec.h>

#include "base/exi_atomic.h"

/* refs of a sender kept after its last release (never a real count). */
#define EXI_SENDER_DEAD 0xDEADDEADu

extern uint32_t exi_debug_on;

static inline bool exi_debug(void) { return exi_load_rlx_u32(&exi_debug_on) != 0; }

/* Keeps p, released for good, in the quarantine instead of freeing it, so
 * that a later use is recognised; free_fn(p) frees it when it is evicted or
 * debug mode is turned off. */
void exi_debug_keep(void *p, void (*free_fn)(void *p));

/* Keeps s, whose last reference went and whose children are released,
 * instead of freeing it: a later use of it is then caught. */
void exi_debug_bury(ex_sender *s);

/* Aborts: `call` was given s, a sender already released for good. */
__attribute__((noreturn, cold)) void exi_debug_dead_sender(const ex_sender *s, const char *call);

/* Whether s was released for good (debug mode keeps such senders). */
static inline bool exi_sender_dead(const ex_sender *s) {
    return __builtin_expect(exi_load_rlx_u32(&s->refs) == EXI_SENDER_DEAD, 0);
}

/* Debug mode's ex_connect (arguments checked): connects s into storage
 * through a wrapper operation that catches a second start and a destroy
 * while running; *op is the wrapper.  EX_ENOMEM if it cannot be made. */
ex_error exi_debug_connect(const ex_sender *s, ex_receiver r, void *storage, ex_operation **op);

/* The operation a debug wrapper stands for, or op itself. */
ex_operation *exi_debug_inner(ex_operation *op);

#endif
