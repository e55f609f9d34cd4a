/* SPDX-License-Identifier: MIT */
/* exi_kernels_impl.h - one copy of the sum and scan kernels, included by
 * kernels.c once per element type and instruction set.  Parameters:
 *   K_T      element type (double or uint64_t)
 *   K_V      its 4-lane vector type (GCC/clang vector extension)
 *   K_ZERO   the identity (-0.0 or 0)
 *   K_NAME   name suffix, K_ATTR function attributes
 *   K_STREAM(p, v)  non-temporal store of a 4-lane vector at p (16-byte aligned) */

/* Adds the 16 elements at p to the lane accumulators a0..a3. */
#define K_SUM_BLOCK(p)                        \
    do {                                      \
        K_V x0, x1, x2, x3;                   \
        memcpy(&x0, (p), sizeof x0);          \
        memcpy(&x1, (p) + 4, sizeof x1);      \
        memcpy(&x2, (p) + 8, sizeof x2);      \
        memcpy(&x3, (p) + 12, sizeof x3);     \
        a0 += x0, a1 += x1, a2 += x2, a3 += x3; \
    } while (0)

/* Adds the elements p[j..n) to the lanes, whole blocks of 16 from j on and
 * a last partial block padded with the identity, then combines the lanes
 * into `into`: the end of every sum, so that all give the same bits. */
#define K_SUM_FINISH(p, j, n, into)                                                    \
    do {                                                                               \
        for (; (j) + 16 <= (n); (j) += 16) K_SUM_BLOCK((p) + (j));                      \
        if ((j) < (n)) {                                                               \
            K_T pad[16];                                                               \
            for (size_t k = 0; k < 16; k++) pad[k] = (j) + k < (n) ? (p)[(j) + k] : K_ZERO; \
            K_SUM_BLOCK(pad);                                                          \
        }                                                                              \
        K_V t = (a0 + a1) + (a2 + a3);                                                 \
        (into) = (t[0] + t[2]) + (t[1] + t[3]);                                        \
    } while (0)

static K_ATTR K_T K_PASTE(sum_, K_NAME)(const K_T *in, size_t n, bool prefetch) {
    const K_V z = { K_ZERO, K_ZERO, K_ZERO, K_ZERO };
    K_V a0 = z, a1 = z, a2 = z, a3 = z;
    /* Blocks i < pf_end prefetch the block SUM_AHEAD bytes on, which
     * still lies in the array (no prefetch address leaves it); the others
     * run a loop without the prefetches, which cost time from L2. */
    const size_t ahead = SUM_AHEAD / sizeof(K_T);
    const size_t pf_end = prefetch && n > ahead + 15 ? n - ahead - 15 : 0;
    size_t i = 0;
    for (; i < pf_end; i += 16) {
        __builtin_prefetch(in + i + ahead, 0, 3);
        __builtin_prefetch(in + i + ahead + 8, 0, 3);
        K_SUM_BLOCK(in + i);
    }
    K_T sum;
    K_SUM_FINISH(in, i, n, sum);
    return sum;
}

/* One block of 8 elements of the scan at in + i: the in-block prefix (two
 * shifted adds per half, then the second half offset by the first half's
 * total; none of it waits on c), the output, and c += the block total,
 * the only dependency chain (one add per 8 elements). */
#define K_SCAN_BLOCK(i)                                                     \
    do {                                                                    \
        K_V x, y;                                                           \
        memcpy(&x, in + (i), sizeof x);                                     \
        memcpy(&y, in + (i) + 4, sizeof y);                                 \
        x += __builtin_shufflevector(x, z, 4, 0, 1, 2);                     \
        y += __builtin_shufflevector(y, z, 4, 0, 1, 2);                     \
        x += __builtin_shufflevector(x, z, 4, 5, 0, 1);                     \
        y += __builtin_shufflevector(y, z, 4, 5, 0, 1);                     \
        y += __builtin_shufflevector(x, x, 3, 3, 3, 3);                     \
        K_V ox, oy;                                                         \
        if (exclusive) {                                                    \
            ox = c + __builtin_shufflevector(x, z, 4, 0, 1, 2);             \
            oy = c + __builtin_shufflevector(x, y, 3, 4, 5, 6);             \
        } else {                                                            \
            ox = c + x;                                                     \
            oy = c + y;                                                     \
        }                                                                   \
        c += __builtin_shufflevector(y, y, 3, 3, 3, 3);                     \
        if (stream) {                                                       \
            K_STREAM(out + (i), ox);                                        \
            K_STREAM(out + (i) + 4, oy);                                    \
        } else {                                                            \
            memcpy(out + (i), &ox, sizeof ox);                              \
            memcpy(out + (i) + 4, &oy, sizeof oy);                          \
        }                                                                   \
    } while (0)

/* Prefetches the next line of the next tile into L2, if any is left. */
#define K_SCAN_PREFETCH()                                                   \
    do {                                                                    \
        if (pf_left) {                                                      \
            __builtin_prefetch(pf, 0, 2);                                   \
            size_t step = pf_left < 64 ? pf_left : 64;                      \
            pf += step, pf_left -= step;                                    \
        }                                                                   \
    } while (0)

static K_ATTR K_T K_PASTE(scan_, K_NAME)(const K_T *in, K_T *out, size_t n, K_T carry, bool exclusive,
                                          bool stream, const K_T *nx, size_t nx_n, K_T *nx_sum) {
    const K_V z = { K_ZERO, K_ZERO, K_ZERO, K_ZERO };
    K_V c = { carry, carry, carry, carry };
    K_V a0 = z, a1 = z, a2 = z, a3 = z;  /* the next tile's sum (K_SUM_BLOCK) */
    const char *pf = (const char *)nx;
    size_t pf_left = nx ? nx_n * sizeof(K_T) : 0;
    /* The next tile's lines are prefetched one per block of 8, as fast as
     * this tile is read; its sum trails them by SCAN_SUM_LAG elements, so
     * that its loads find them in cache instead of stalling the scan. */
    size_t i = 0, j = 0;
    for (; i + 16 <= n; i += 16) {
        K_SCAN_PREFETCH();
        K_SCAN_PREFETCH();
        K_SCAN_BLOCK(i);
        K_SCAN_BLOCK(i + 8);
        if (nx_sum && i >= SCAN_SUM_LAG && j + 16 <= nx_n) {
            K_SUM_BLOCK(nx + j);
            j += 16;
        }
    }
    if (i + 8 <= n) {
        K_SCAN_PREFETCH();
        K_SCAN_BLOCK(i);
        i += 8;
    }
    K_T s = c[0];
    for (; i < n; i++) {
        K_T a = in[i];
        if (exclusive) {
            out[i] = s;
            s += a;
        } else {
            s += a;
            out[i] = s;
        }
    }
    if (nx_sum) K_SUM_FINISH(nx, j, nx_n, *nx_sum);
    return s;
}
#undef K_SCAN_BLOCK
#undef K_SCAN_PREFETCH
#undef K_SUM_FINISH
#undef K_SUM_BLOCK
