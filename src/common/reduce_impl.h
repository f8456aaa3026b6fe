/* Private: the bodies of the many-source reduction (the shared-memory collectives' kernel) and of
 * the engine's half-precision accumulation, included by reduce.c (baseline ISA) and
 * reduce_avx2.c (compiled with -mavx2 -mf16c). */
#ifndef ZERO_COMMON_REDUCE_IMPL_H
#define ZERO_COMMON_REDUCE_IMPL_H

#include "common/internal.h"
#include "kernels/elem.h"

#include <string.h>

/* Elements per tile: the fp32 accumulator and one widened source stay in L1 (8 KiB). */
#define ZERO__REDUCE_TILE 1024

typedef void (*zero__widen_fn)(const uint16_t *src, float *dst, size_t n);
typedef void (*zero__narrow_fn)(const float *src, uint16_t *dst, size_t n);

/* acc[j] = acc[j] op x[j]; MAX as the comm layer's element-wise op: a NaN already in acc wins,
 * then a NaN in x, then the larger value, x when they compare equal (so of -0 and +0, x's zero). */
static inline void zero__combine_f32(float *restrict acc, const float *restrict x, size_t n,
                                         int max) {
    if (max) {
#pragma omp simd
        for (size_t j = 0; j < n; j++) {
            const float a = acc[j], b = x[j];
            float m = a > b ? a : b;
            m = b != b ? b : m;
            acc[j] = a != a ? a : m;
        }
    } else {
#pragma omp simd
        for (size_t j = 0; j < n; j++) acc[j] += x[j];
    }
}

/* Integers: dst[i] op= x[i] in their own width (sums wrap as unsigned arithmetic). */
#define ZERO__COMBINE_INT(T, U)                                                                    \
    do {                                                                                           \
        const T *x_ = (const T *)(const void *)x;                                                  \
        T *y_ = (T *)(void *)y;                                                                    \
        if (max)                                                                                   \
            for (size_t i_ = 0; i_ < len; i_++) y_[i_] = x_[i_] > y_[i_] ? x_[i_] : y_[i_];        \
        else                                                                                       \
            for (size_t i_ = 0; i_ < len; i_++) y_[i_] = (T)((U)y_[i_] + (U)x_[i_]);               \
    } while (0)

static inline void zero__combine_int(zero_dtype dt, int max, const unsigned char *x, unsigned char *y, size_t len) {
    switch (dt) {
    case ZERO_DTYPE_INT32: ZERO__COMBINE_INT(int32_t, uint32_t); break;
    case ZERO_DTYPE_INT64: ZERO__COMBINE_INT(int64_t, uint64_t); break;
    case ZERO_DTYPE_UINT8: ZERO__COMBINE_INT(uint8_t, uint8_t); break;
    default: break;
    }
}

/* dst[i] = src[0][i] op src[1][i] op ... op src[nsrc-1][i], combined left to right (the order of
 * the local ranks), for i < n; op is a sum, or MAX when `max`. fp32 accumulates in fp32;
 * bf16/fp16 widen every source to fp32, accumulate in fp32 and round to the half type once;
 * integers combine in their own width (sums wrap). dst may be one of the sources exactly (same
 * address: each tile is read before it is written) but must not overlap one partially. With
 * `stream`, dst is written with non-temporal stores (zero__copy_stream). */
static inline void zero__reduce_body(zero_dtype dt, int max, const void *const *src,
                                     int nsrc, void *dst, size_t n, int stream,
                                     zero__widen_fn widen, zero__narrow_fn narrow) {
    const size_t es = zero_dtype_size(dt);
    if (dt == ZERO_DTYPE_FP32 || dt == ZERO_DTYPE_BF16 || dt == ZERO_DTYPE_FP16) {
        float acc[ZERO__REDUCE_TILE], tmp[ZERO__REDUCE_TILE];
        const int half = dt != ZERO_DTYPE_FP32;
        for (size_t off = 0; off < n; off += ZERO__REDUCE_TILE) {
            const size_t len = n - off < ZERO__REDUCE_TILE ? n - off : ZERO__REDUCE_TILE;
            const unsigned char *s0 = (const unsigned char *)src[0] + off * es;
            if (half) widen((const uint16_t *)(const void *)s0, acc, len);
            else memcpy(acc, s0, len * sizeof(float));
            for (int k = 1; k < nsrc; k++) {
                const unsigned char *sk = (const unsigned char *)src[k] + off * es;
                const float *x = (const float *)(const void *)sk;
                if (half) {
                    widen((const uint16_t *)(const void *)sk, tmp, len);
                    x = tmp;
                }
                zero__combine_f32(acc, x, len, max);
            }
            unsigned char *d = (unsigned char *)dst + off * es;
            if (half && stream) {
                narrow(acc, (uint16_t *)(void *)tmp, len); /* tmp is free again */
                zero__copy_stream_unfenced(d, tmp, len * es);
            } else if (half) {
                narrow(acc, (uint16_t *)(void *)d, len);
            } else if (stream) {
                zero__copy_stream_unfenced(d, acc, len * sizeof(float));
            } else {
                memcpy(d, acc, len * sizeof(float));
            }
        }
        if (stream) zero__stream_fence();
        return;
    }
    /* Integer types: exact in any order. */
    unsigned char acc[ZERO__REDUCE_TILE * 8];
    const size_t tile = sizeof acc / es;
    for (size_t off = 0; off < n; off += tile) {
        const size_t len = n - off < tile ? n - off : tile;
        memcpy(acc, (const unsigned char *)src[0] + off * es, len * es);
        for (int k = 1; k < nsrc; k++)
            zero__combine_int(dt, max, (const unsigned char *)src[k] + off * es, acc, len);
        if (stream) zero__copy_stream_unfenced((unsigned char *)dst + off * es, acc, len * es);
        else memcpy((unsigned char *)dst + off * es, acc, len * es);
    }
    if (stream) zero__stream_fence();
}

/* dst[i] = dst[i] + src[i] for a working-dtype dst and an fp32 src, accumulated in fp32 and
 * rounded once (to nearest even) for the half types. */
static inline void zero__accumulate_body(zero_dtype dt, void *dst, const float *src, size_t n,
                                         zero__widen_fn widen, zero__narrow_fn narrow) {
    if (dt == ZERO_DTYPE_FP32) {
        float *d = dst;
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] += src[i];
        return;
    }
    float acc[ZERO__REDUCE_TILE];
    uint16_t *d = dst;
    for (size_t off = 0; off < n; off += ZERO__REDUCE_TILE) {
        const size_t len = n - off < ZERO__REDUCE_TILE ? n - off : ZERO__REDUCE_TILE;
        widen(d + off, acc, len);
        zero__combine_f32(acc, src + off, len, 0);
        narrow(acc, d + off, len);
    }
}

/* Σ x[i]² in double: lane j of ZERO__SUMSQ_LANES takes the elements i ≡ j (mod lanes) in order
 * (zero__sq_acc, kernels/elem.h), the lanes are then added pairwise in a fixed tree. A float's
 * square is exact in double, so a fused multiply-add rounds as the plain add does: every body and
 * compiler gives the same bits. */
#define ZERO__SUMSQ_LANES 16
static inline void zero__sumsq_lanes(double *restrict acc, const float *restrict x, size_t n) {
    size_t i = 0;
    for (; i + ZERO__SUMSQ_LANES <= n; i += ZERO__SUMSQ_LANES) {
#pragma omp simd
        for (int j = 0; j < ZERO__SUMSQ_LANES; j++) acc[j] = zero__sq_acc(acc[j], x[i + j]);
    }
    for (int j = 0; i + (size_t)j < n; j++) acc[j] = zero__sq_acc(acc[j], x[i + (size_t)j]);
}

static inline double zero__sumsq_body(zero_dtype dt, const void *x, size_t n, zero__widen_fn widen) {
    double acc[ZERO__SUMSQ_LANES] = {0};
    if (dt == ZERO_DTYPE_FP32) {
        zero__sumsq_lanes(acc, x, n);
    } else { /* a tile at a time (a multiple of the lanes: element i stays in lane i mod lanes) */
        float tile[ZERO__REDUCE_TILE];
        const uint16_t *h = x;
        for (size_t off = 0; off < n; off += ZERO__REDUCE_TILE) {
            const size_t len = n - off < ZERO__REDUCE_TILE ? n - off : ZERO__REDUCE_TILE;
            widen(h + off, tile, len);
            zero__sumsq_lanes(acc, tile, len);
        }
    }
    for (int w = ZERO__SUMSQ_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

#endif
