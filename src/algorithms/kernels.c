/* SPDX-License-Identifier: MIT */
/* kernels.c - vectorised sum and scan kernels (see exi_kernels.h for the
 * operation order every copy follows). */
#include <string.h>
#include <unistd.h>

#include "algorithms/exi_kernels.h"
#include "base/exi_atomic.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define EXI_KERNELS_X86 1
#endif

typedef double v4f64 __attribute__((vector_size(32)));
typedef uint64_t v4u64 __attribute__((vector_size(32)));
typedef double v2f64 __attribute__((vector_size(16)));
typedef long long v2i64 __attribute__((vector_size(16)));

#define K_PASTE_(a, b) a##b
#define K_PASTE(a, b) K_PASTE_(a, b)

/* Macros, not functions: a 32-byte vector argument would change the ABI
 * between the baseline and the AVX2 copies. */
#ifdef EXI_KERNELS_X86
#define stream_f64(p, v)                                                           \
    do {                                                                           \
        _mm_stream_pd((p), (__m128d)__builtin_shufflevector((v), (v), 0, 1));      \
        _mm_stream_pd((p) + 2, (__m128d)__builtin_shufflevector((v), (v), 2, 3));  \
    } while (0)
#define stream_u64(p, v)                                                                               \
    do {                                                                                               \
        _mm_stream_si128((__m128i *)(void *)(p), (__m128i)__builtin_shufflevector((v), (v), 0, 1));       \
        _mm_stream_si128((__m128i *)(void *)((p) + 2), (__m128i)__builtin_shufflevector((v), (v), 2, 3)); \
    } while (0)
/* In the AVX2 copies: the upper half taken with vextractf128, one cheap
 * uop, where the generic shuffle became a cross-lane vpermpd. */
#define stream_f64_avx2(p, v)                                                   \
    do {                                                                        \
        _mm_stream_pd((p), _mm256_castpd256_pd128((__m256d)(v)));               \
        _mm_stream_pd((p) + 2, _mm256_extractf128_pd((__m256d)(v), 1));         \
    } while (0)
#define stream_u64_avx2(p, v)                                                                     \
    do {                                                                                          \
        _mm_stream_si128((__m128i *)(void *)(p), _mm256_castsi256_si128((__m256i)(v)));           \
        _mm_stream_si128((__m128i *)(void *)((p) + 2), _mm256_extracti128_si256((__m256i)(v), 1)); \
    } while (0)
void exi_stream_fence(void) { _mm_sfence(); }
#else
#define stream_f64(p, v) memcpy((p), &(v), sizeof(v))
#define stream_u64(p, v) memcpy((p), &(v), sizeof(v))
void exi_stream_fence(void) { }
#endif

/* How far ahead of its loads the sum prefetches, into L1 (prefetcht0),
 * when asked to (exi_kernels.h).  Into L2 only (prefetcht1) was slower
 * than no prefetch at all on this AMD EPYC (docs/algorithms.md). */
#define SUM_AHEAD 1024

/* How far (elements) the scan's sum of the next tile trails the prefetch
 * of its lines: 8 KiB, about 0.5 us of scanning, several memory latencies. */
#define SCAN_SUM_LAG 1024

/* Baseline copies (SSE2 on x86-64). */
#define K_ATTR
#define K_T double
#define K_V v4f64
#define K_ZERO (-0.0)
#define K_NAME f64_base
#define K_STREAM stream_f64
#include "algorithms/exi_kernels_impl.h"
#undef K_T
#undef K_V
#undef K_ZERO
#undef K_NAME
#undef K_STREAM
#define K_T uint64_t
#define K_V v4u64
#define K_ZERO 0
#define K_NAME u64_base
#define K_STREAM stream_u64
#include "algorithms/exi_kernels_impl.h"
#undef K_T
#undef K_V
#undef K_ZERO
#undef K_NAME
#undef K_STREAM
#undef K_ATTR

#ifdef EXI_KERNELS_X86
/* AVX2 copies: the same source, wider registers. */
#define K_ATTR __attribute__((target("avx2")))
#define K_T double
#define K_V v4f64
#define K_ZERO (-0.0)
#define K_NAME f64_avx2
#define K_STREAM stream_f64_avx2
#include "algorithms/exi_kernels_impl.h"
#undef K_T
#undef K_V
#undef K_ZERO
#undef K_NAME
#undef K_STREAM
#define K_T uint64_t
#define K_V v4u64
#define K_ZERO 0
#define K_NAME u64_avx2
#define K_STREAM stream_u64_avx2
#include "algorithms/exi_kernels_impl.h"
#undef K_ATTR

static bool use_avx2(void) { return __builtin_cpu_supports("avx2"); }
#define PICK(name, ...) (use_avx2() ? name##_avx2(__VA_ARGS__) : name##_base(__VA_ARGS__))
#else
#define PICK(name, ...) name##_base(__VA_ARGS__)
#endif

double exi_sum_f64(const double *in, size_t n, bool prefetch) { return PICK(sum_f64, in, n, prefetch); }
uint64_t exi_sum_u64(const uint64_t *in, size_t n, bool prefetch) { return PICK(sum_u64, in, n, prefetch); }

double exi_scan_f64(const double *in, double *out, size_t n, double carry, bool exclusive, bool stream,
                    const double *next, size_t next_n, double *next_sum) {
    stream = stream && ((uintptr_t)out & 15) == 0;
    return PICK(scan_f64, in, out, n, carry, exclusive, stream, next, next_n, next_sum);
}

uint64_t exi_scan_u64(const uint64_t *in, uint64_t *out, size_t n, uint64_t carry, bool exclusive, bool stream,
                      const uint64_t *next, size_t next_n, uint64_t *next_sum) {
    stream = stream && ((uintptr_t)out & 15) == 0;
    return PICK(scan_u64, in, out, n, carry, exclusive, stream, next, next_n, next_sum);
}

static uint64_t stream_bytes, core_bytes;  /* 0: not computed yet */

/* A cache size from sysconf: level 3's (falling back to level 2's) for
 * level 3, level 2's for level 2; `fallback` when it is not known.
 * Computed once into *cached. */
static size_t cache_bytes(uint64_t *cached, int level, uint64_t fallback) {
    uint64_t b = exi_load_rlx_u64(cached);
    if (b) return (size_t)b;
    long size = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (level == 3) size = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (size <= 0) size = sysconf(_SC_LEVEL2_CACHE_SIZE);
#else
    (void)level;
#endif
    b = size > 0 ? (uint64_t)size : fallback;
    exi_store_rlx_u64(cached, b);
    return (size_t)b;
}

size_t exi_stream_threshold(void) { return cache_bytes(&stream_bytes, 3, (uint64_t)8 << 20); }

size_t exi_core_cache_bytes(void) { return cache_bytes(&core_bytes, 2, (uint64_t)1 << 20); }
