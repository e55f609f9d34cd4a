/* SPDX-License-Identifier: MIT */
/* exi_poison.h - marking memory a cache keeps for reuse as off-limits, so
 * a use after free of a cached block is reported as such: ASan poisoning in
 * ASan builds; memcheck's NOACCESS / UNDEFINED in the valgrind build (the
 * malloc-routed build, CEXEC_JEMALLOC=malloc, when <valgrind/memcheck.h>
 * exists: its client requests are a few no-op instructions outside
 * valgrind).  No-ops in the plain build.  Internal. */
#ifndef EXI_POISON_H
#define EXI_POISON_H

#include <stddef.h>

#if defined(__SANITIZE_ADDRESS__)
#define EXI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EXI_ASAN 1
#endif
#endif

/* A function ASan leaves alone: its locals stay on the real stack. */
#ifdef EXI_ASAN
#define EXI_NO_ASAN __attribute__((no_sanitize("address")))
#else
#define EXI_NO_ASAN
#endif

#ifdef EXI_ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
static inline void exi_poison(void *p, size_t n) { __asan_poison_memory_region(p, n); }
static inline void exi_unpoison(void *p, size_t n) { __asan_unpoison_memory_region(p, n); }
#elif defined(CEXEC_JEMALLOC_VIA_MALLOC) && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define EXI_MEMCHECK 1
static inline void exi_poison(void *p, size_t n) { (void)VALGRIND_MAKE_MEM_NOACCESS(p, n); }
/* Handed out again: addressable, contents undefined (as from malloc). */
static inline void exi_unpoison(void *p, size_t n) { (void)VALGRIND_MAKE_MEM_UNDEFINED(p, n); }
#endif
#endif

#if !defined(EXI_ASAN) && !defined(EXI_MEMCHECK)
static inline void exi_poison(void *p, size_t n) { (void)p, (void)n; }
static inline void exi_unpoison(void *p, size_t n) { (void)p, (void)n; }
#endif

#endif
