/* exi_poison.h - ASan poisoning of memory a cache keeps for reuse, so a
 * use after free of a cached block is reported as such.  No-ops in other
 * builds.  Internal. */
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

#ifdef EXI_ASAN
void __asan_poison_memory_region(void const volatile *addr, size_t size);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);
static inline void exi_poison(void *p, size_t n) { __asan_poison_memory_region(p, n); }
static inline void exi_unpoison(void *p, size_t n) { __asan_unpoison_memory_region(p, n); }
#else
static inline void exi_poison(void *p, size_t n) { (void)p, (void)n; }
static inline void exi_unpoison(void *p, size_t n) { (void)p, (void)n; }
#endif

#endif
