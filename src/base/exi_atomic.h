/* SPDX-License-Identifier: MIT */
/* exi_atomic.h - the only place cexec touches atomics.
 *
 * Normal builds map to Concurrency Kit's ck_pr.  The ThreadSanitizer build
 * (CEXEC_TSAN, or a compiler that defines __SANITIZE_THREAD__) maps to the
 * compiler's C11-model __atomic builtins, because TSan cannot see ck_pr's
 * inline assembly.  Orders: rlx = relaxed, acq = acquire, rel = release;
 * read-modify-writes are sequentially consistent (full barriers). */
#ifndef EXI_ATOMIC_H
#define EXI_ATOMIC_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__SANITIZE_THREAD__) && !defined(CEXEC_TSAN)
#define CEXEC_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) && !defined(CEXEC_TSAN)
#define CEXEC_TSAN 1
#endif
#endif

#ifdef CEXEC_TSAN

#define EXI_DEF(T, N)                                                                          \
    static inline T exi_load_rlx_##N(const T *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); } \
    static inline T exi_load_acq_##N(const T *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); } \
    static inline void exi_store_rlx_##N(T *p, T v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); } \
    static inline void exi_store_rel_##N(T *p, T v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); } \
    static inline bool exi_cas_##N(T *p, T *expected, T desired) {                           \
        return __atomic_compare_exchange_n(p, expected, desired, false, __ATOMIC_SEQ_CST,   \
                                           __ATOMIC_SEQ_CST);                               \
    }                                                                                        \
    static inline T exi_fas_##N(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }

EXI_DEF(uint8_t, u8)
EXI_DEF(uint32_t, u32)
EXI_DEF(uint64_t, u64)
typedef void *exi_ptr_t;
EXI_DEF(exi_ptr_t, ptr)
static inline uint32_t exi_faa_u32(uint32_t *p, uint32_t d) { return __atomic_fetch_add(p, d, __ATOMIC_SEQ_CST); }
static inline uint64_t exi_faa_u64(uint64_t *p, uint64_t d) { return __atomic_fetch_add(p, d, __ATOMIC_SEQ_CST); }
static inline uint32_t exi_fas_or_u32(uint32_t *p, uint32_t m) { return __atomic_fetch_or(p, m, __ATOMIC_SEQ_CST); }
static inline uint32_t exi_fas_and_u32(uint32_t *p, uint32_t m) { return __atomic_fetch_and(p, m, __ATOMIC_SEQ_CST); }
static inline uint64_t exi_fas_or_u64(uint64_t *p, uint64_t m) { return __atomic_fetch_or(p, m, __ATOMIC_SEQ_CST); }
static inline void exi_fence_full(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#undef EXI_DEF

#else /* ck_pr */

#include <ck_pr.h>

/* ck_pr's read-modify-writes are full barriers on x86 (lock prefix); on
 * weaker targets CK asks callers to bracket them with full fences. */
#if defined(__x86_64__) || defined(__i386__)
#define EXI_RMW_FENCE() ((void)0)
#else
#define EXI_RMW_FENCE() ck_pr_fence_memory()
#endif

static inline uint8_t exi_load_rlx_u8(const uint8_t *p) { return ck_pr_load_8(p); }
static inline void exi_store_rlx_u8(uint8_t *p, uint8_t v) { ck_pr_store_8(p, v); }
static inline uint32_t exi_load_rlx_u32(const uint32_t *p) { return ck_pr_load_32(p); }
static inline uint32_t exi_load_acq_u32(const uint32_t *p) { uint32_t v = ck_pr_load_32(p); ck_pr_fence_acquire(); return v; }
static inline void exi_store_rlx_u32(uint32_t *p, uint32_t v) { ck_pr_store_32(p, v); }
static inline void exi_store_rel_u32(uint32_t *p, uint32_t v) { ck_pr_fence_release(); ck_pr_store_32(p, v); }
static inline bool exi_cas_u32(uint32_t *p, uint32_t *expected, uint32_t desired) {
    EXI_RMW_FENCE();
    bool ok = ck_pr_cas_32_value(p, *expected, desired, expected);
    EXI_RMW_FENCE();
    return ok;
}
static inline uint32_t exi_fas_u32(uint32_t *p, uint32_t v) { EXI_RMW_FENCE(); uint32_t r = ck_pr_fas_32(p, v); EXI_RMW_FENCE(); return r; }
static inline uint32_t exi_faa_u32(uint32_t *p, uint32_t d) { EXI_RMW_FENCE(); uint32_t r = ck_pr_faa_32(p, d); EXI_RMW_FENCE(); return r; }
static inline uint32_t exi_fas_or_u32(uint32_t *p, uint32_t m) {
    uint32_t old = ck_pr_load_32(p);
    while (!exi_cas_u32(p, &old, old | m)) { }
    return old;
}
static inline uint32_t exi_fas_and_u32(uint32_t *p, uint32_t m) {
    uint32_t old = ck_pr_load_32(p);
    while (!exi_cas_u32(p, &old, old & m)) { }
    return old;
}

static inline uint64_t exi_load_rlx_u64(const uint64_t *p) { return ck_pr_load_64(p); }
static inline uint64_t exi_load_acq_u64(const uint64_t *p) { uint64_t v = ck_pr_load_64(p); ck_pr_fence_acquire(); return v; }
static inline void exi_store_rlx_u64(uint64_t *p, uint64_t v) { ck_pr_store_64(p, v); }
static inline void exi_store_rel_u64(uint64_t *p, uint64_t v) { ck_pr_fence_release(); ck_pr_store_64(p, v); }
static inline bool exi_cas_u64(uint64_t *p, uint64_t *expected, uint64_t desired) {
    EXI_RMW_FENCE();
    bool ok = ck_pr_cas_64_value(p, *expected, desired, expected);
    EXI_RMW_FENCE();
    return ok;
}
static inline uint64_t exi_fas_u64(uint64_t *p, uint64_t v) { EXI_RMW_FENCE(); uint64_t r = ck_pr_fas_64(p, v); EXI_RMW_FENCE(); return r; }
static inline uint64_t exi_faa_u64(uint64_t *p, uint64_t d) { EXI_RMW_FENCE(); uint64_t r = ck_pr_faa_64(p, d); EXI_RMW_FENCE(); return r; }

static inline uint64_t exi_fas_or_u64(uint64_t *p, uint64_t m) {
    uint64_t old = ck_pr_load_64(p);
    while (!exi_cas_u64(p, &old, old | m)) { }
    return old;
}

static inline void *exi_load_rlx_ptr(void *const *p) { return ck_pr_load_ptr(p); }
static inline void *exi_load_acq_ptr(void *const *p) { void *v = ck_pr_load_ptr(p); ck_pr_fence_acquire(); return v; }
static inline void exi_store_rlx_ptr(void **p, void *v) { ck_pr_store_ptr(p, v); }
static inline void exi_store_rel_ptr(void **p, void *v) { ck_pr_fence_release(); ck_pr_store_ptr(p, v); }
static inline bool exi_cas_ptr(void **p, void **expected, void *desired) {
    EXI_RMW_FENCE();
    bool ok = ck_pr_cas_ptr_value(p, *expected, desired, expected);
    EXI_RMW_FENCE();
    return ok;
}
static inline void *exi_fas_ptr(void **p, void *v) { EXI_RMW_FENCE(); void *r = ck_pr_fas_ptr(p, v); EXI_RMW_FENCE(); return r; }
static inline void exi_fence_full(void) { ck_pr_fence_memory(); }

#endif

/* A counter written by one thread only and read by others: no locked
 * instruction, yet every read sees a whole value. */
static inline void exi_owner_add_u64(uint64_t *p, uint64_t d) { exi_store_rlx_u64(p, exi_load_rlx_u64(p) + d); }

/* Spin-wait hint. */
static inline void exi_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
