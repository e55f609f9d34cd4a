/* SPDX-License-Identifier: MIT */
/* exi_stack.h - guarded, pooled stacks for fibers. Internal.
 *
 * The stack allocator is an ex_allocator, so a task's stack comes from the
 * frame allocator like the rest of its frame.  allocate(ctx, size, align)
 * returns the LOWEST usable address of a stack of `size` bytes rounded up
 * to whole pages, with a PROT_NONE guard page right below it: running off
 * the end of the stack faults there instead of writing over other memory.
 * (One page: a function whose frame is bigger than a page can step over
 * it unless compiled with -fstack-clash-protection.)  align may be up to
 * the page size; a larger one fails.  deallocate takes the same size.  A
 * failed mmap returns NULL (the caller's EX_ENOMEM).
 *
 * Pooling: each thread keeps up to EXI_STACK_CACHE freed stacks of any
 * size (a LIFO, so the stack used last, still in the CPU caches, comes
 * back first); the hit path is a few loads and stores, no lock, no
 * syscall.  A thread with a full cache moves its oldest half to a global
 * depot of at most EXI_STACK_DEPOT stacks (one lock per batch), where a
 * thread with none of the wanted size finds them: stacks freed on one
 * thread are reused on another.  Beyond that they go back to the OS, as
 * does a thread's cache when the thread exits.  Pooled stacks keep the
 * pages their last user touched (no madvise), so the memory the pool can
 * hold is (EXI_STACK_CACHE * threads + EXI_STACK_DEPOT) stacks.
 *
 * Stats (ex_allocator_stats): allocations, frees, failures; bytes in use =
 * usable stack bytes handed out and not returned (guard pages excluded);
 * peak = the most usable stack bytes mapped at once (in use or pooled).
 *
 * ASan builds poison pooled stacks (a use of a freed stack is reported)
 * and register mapped stacks as LeakSanitizer root regions, so pointers
 * held only on a suspended fiber's stack are not reported as leaks. */
#ifndef EXI_STACK_H
#define EXI_STACK_H

#include <stdint.h>

#include <cexec/allocator.h>

enum { EXI_STACK_CACHE = 16, EXI_STACK_DEPOT = 64 };

/* The process's guarded stack allocator (thread-safe). */
extern const ex_allocator exi_guarded_stack;
static inline const ex_allocator *exi_guarded_stack_allocator(void) { return &exi_guarded_stack; }

/* The system page size (cached). */
size_t exi_page_size(void);

/* Returns the calling thread's pooled stacks and the depot's to the OS. */
void exi_stack_trim(void);

/* Usable stack bytes currently mapped (in use plus pooled). */
uint64_t exi_stack_mapped_bytes(void);

#endif
