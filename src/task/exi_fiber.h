/* SPDX-License-Identifier: MIT */
/* exi_fiber.h - a context plus what the sanitizers and valgrind must be
 * told about it. Internal.
 *
 * A fiber is an exi_context, the bounds of its stack and the tools' state:
 *   ASan: the stack bounds and the fake stack (use-after-return frames)
 *         of the suspended fiber, handed over with
 *         __sanitizer_start/finish_switch_fiber at every switch;
 *   TSan: a fiber handle (__tsan_create_fiber, or the thread's own) that
 *         each switch announces with __tsan_switch_to_fiber, so TSan keeps
 *         one shadow stack and clock per fiber, and orders the switch;
 *   valgrind: the stack is registered while the fiber exists, so memcheck
 *         takes a switch for a stack change, not a huge allocation.
 * Without those tools exi_fiber_switch is exi_context_switch.
 *
 * Rules the task layer must keep:
 * - A fiber runs on one thread at a time.  It may be resumed on another
 *   thread than the one it was suspended on (TSan and ASan follow it), but
 *   it may be made resumable elsewhere only once the switch away from it
 *   has completed: hand it over through `arg` and let the code that
 *   receives it (on the stack switched to) publish it.
 * - Thread-local variables: a fiber that migrates must not keep a
 *   thread-local's address across a switch (compilers may reuse the
 *   address computed before the call; errno's __errno_location is
 *   declared const); read TLS through a noinline function after each
 *   switch.
 * - A fiber ends with exi_fiber_switch_final (its entry never returns);
 *   exi_fiber_destroy is then called from another fiber.  Destroying a
 *   suspended, unfinished fiber is allowed but loses its ASan fake stack
 *   (a small leak inside ASan only). */
#ifndef EXI_FIBER_H
#define EXI_FIBER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/exi_atomic.h"   /* CEXEC_TSAN */
#include "task/exi_context.h"
#include "base/exi_poison.h"   /* EXI_ASAN */

typedef struct exi_fiber {
    exi_context ctx;
    void *stack_lo;          /* usable stack [stack_lo, stack_lo + stack_size) */
    size_t stack_size;       /* thread fiber under ASan: learned at its first switch away */
    void (*entry)(void *arg, void *user);
    void *user;
    struct exi_fiber *from;  /* ASan: the fiber that switched to this one last */
    void *asan_fake_stack;   /* ASan: the suspended fiber's fake stack */
    void *tsan_fiber;        /* TSan: the fiber's handle */
    unsigned valgrind_id;    /* valgrind: the registered stack */
    bool thread_fiber;       /* the thread's own stack (exi_fiber_init_thread) */
} exi_fiber;

/* The calling thread's own stack as a fiber, to switch away from and back
 * to.  Call it on that stack (not from a fiber).  Only that thread may
 * switch to it; nothing to destroy. */
void exi_fiber_init_thread(exi_fiber *f);

/* A new fiber on the stack [lo, lo + size): the first switch to it runs
 * entry(arg, user) on that stack.  entry must not return; it ends with
 * exi_fiber_switch_final. */
void exi_fiber_init(exi_fiber *f, void *lo, size_t size, void (*entry)(void *arg, void *user), void *user);

/* Releases the tools' state of a fiber that is not running (finished, or
 * never started).  The stack is the caller's to free. */
void exi_fiber_destroy(exi_fiber *f);

/* Switch bookkeeping of the sanitizers, out of line (fiber.c). */
#ifdef EXI_ASAN
void __sanitizer_start_switch_fiber(void **fake_stack_save, const void *bottom, size_t size);
void exi_fiber_asan_arrived(exi_fiber *self);
#endif
#ifdef CEXEC_TSAN
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
#endif

/* Suspends `from` (the running fiber) and runs `to`; returns the `arg` of
 * the switch that later resumes `from`. */
static inline void *exi_fiber_switch(exi_fiber *from, exi_fiber *to, void *arg) {
#ifdef EXI_ASAN
    to->from = from;
    __sanitizer_start_switch_fiber(&from->asan_fake_stack, to->stack_lo, to->stack_size);
#endif
#ifdef CEXEC_TSAN
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    void *r = exi_context_switch(&from->ctx, &to->ctx, arg);
#ifdef EXI_ASAN
    exi_fiber_asan_arrived(from);
#endif
    return r;
}

/* The last switch of a finishing fiber: like exi_fiber_switch, but ASan
 * frees the fiber's fake stack, and nothing ever resumes it. */
_Noreturn void exi_fiber_switch_final(exi_fiber *from, exi_fiber *to, void *arg);

#endif
