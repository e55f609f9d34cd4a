/* SPDX-License-Identifier: MIT */
/* fiber.c - fiber creation, the first entry and the final switch
 * (exi_fiber.h). */
#include <stdint.h>
#include <stdlib.h>

#include "task/exi_fiber.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define EXI_VALGRIND 1
#endif
#endif

#ifdef EXI_ASAN
void __sanitizer_finish_switch_fiber(void *fake_stack_save, const void **bottom_old, size_t *size_old);

/* Completes the switch into `self`: ASan takes self's stack as the
 * thread's and restores its fake stack.  The bounds it gives back are the
 * ones of the stack just left, which is how a thread fiber (whose bounds
 * nobody passed in) gets them before anything switches back to it. */
void exi_fiber_asan_arrived(exi_fiber *self) {
    const void *lo;
    size_t size;
    __sanitizer_finish_switch_fiber(self->asan_fake_stack, &lo, &size);
    exi_fiber *prev = self->from;
    if (prev && prev->thread_fiber && !prev->stack_lo) {
        prev->stack_lo = (void *)(uintptr_t)lo;
        prev->stack_size = size;
    }
}
#endif

#ifdef CEXEC_TSAN
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
#endif

/* The first code a fiber runs (on its own stack): finish the tools'
 * switch, then the fiber's entry, which never returns. */
static void fiber_start(void *arg, void *user) {
    exi_fiber *self = user;
#ifdef EXI_ASAN
    exi_fiber_asan_arrived(self);  /* asan_fake_stack is NULL: a fresh one */
#endif
    self->entry(arg, self->user);
    abort();  /* an entry that returns has nowhere to go */
}

void exi_fiber_init_thread(exi_fiber *f) {
    *f = (exi_fiber){ .thread_fiber = true };
#ifdef CEXEC_TSAN
    f->tsan_fiber = __tsan_get_current_fiber();
#endif
}

void exi_fiber_init(exi_fiber *f, void *lo, size_t size, void (*entry)(void *arg, void *user), void *user) {
    *f = (exi_fiber){ .stack_lo = lo, .stack_size = size, .entry = entry, .user = user };
    /* ASan: a reused stack may still carry the redzones of frames its last
     * fiber never returned from; uninstrumented code (libc) running there
     * would trip over them in ASan's interceptors. */
    exi_unpoison(lo, size);
    exi_context_init(&f->ctx, lo, size, fiber_start, f);
#ifdef CEXEC_TSAN
    f->tsan_fiber = __tsan_create_fiber(0);
#endif
#ifdef EXI_VALGRIND
    f->valgrind_id = VALGRIND_STACK_REGISTER(lo, (char *)lo + size);
#endif
}

void exi_fiber_destroy(exi_fiber *f) {
    if (f->thread_fiber) return;
#ifdef CEXEC_TSAN
    __tsan_destroy_fiber(f->tsan_fiber);
    f->tsan_fiber = NULL;
#endif
#ifdef EXI_VALGRIND
    VALGRIND_STACK_DEREGISTER(f->valgrind_id);
#endif
}

void exi_fiber_switch_final(exi_fiber *from, exi_fiber *to, void *arg) {
#ifdef EXI_ASAN
    to->from = from;
    __sanitizer_start_switch_fiber(NULL, to->stack_lo, to->stack_size);  /* NULL: free the fake stack */
#endif
#ifdef CEXEC_TSAN
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
    exi_context_switch(&from->ctx, &to->ctx, arg);
    abort();  /* nothing switches back to a finished fiber */
}
