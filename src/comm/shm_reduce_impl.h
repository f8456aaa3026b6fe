/* Private: the body of the many-source reduction the shared-memory collectives run, included by
 * comm_shm_reduce.c (baseline ISA) and comm_shm_reduce_avx2.c (compiled with -mavx2 -mf16c). */
#ifndef ZERO_COMM_SHM_REDUCE_IMPL_H
#define ZERO_COMM_SHM_REDUCE_IMPL_H

#include "comm/internal.h"

#include <string.h>

/* Elements per tile: the fp32 accumulator and one widened source stay in L1 (8 KiB). */
#define ZERO__SHM_TILE 1024

typedef void (*zero__shm_widen_fn)(const uint16_t *src, float *dst, size_t n);
typedef void (*zero__shm_narrow_fn)(const float *src, uint16_t *dst, size_t n);

/* acc[j] = acc[j] op x[j]; MAX exactly as zero__comm_reduce's: a NaN already in acc wins, then a
 * NaN in x, then the larger value, x when they compare equal (so of -0 and +0, x's zero). */
static inline void zero__shm_combine_f32(float *restrict acc, const float *restrict x, size_t n,
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

/* dst[i] = src[0][i] op src[1][i] op ... op src[nsrc-1][i], combined left to right (the order of
 * the local ranks), for i < n; op is SUM or MAX. fp32 accumulates in fp32; bf16/fp16 widen every
 * source to fp32, accumulate in fp32 and round to the half type once; integers combine in their
 * own width with zero__comm_reduce (sums wrap). dst may be one of the sources exactly (same
 * address: each tile is read before it is written) but must not overlap one partially. With
 * `stream`, dst is written with non-temporal stores (zero__shm_copy_stream). */
static inline void zero__shm_reduce_body(zero_dtype dt, zero_op op, const void *const *src,
                                         int nsrc, void *dst, size_t n, int stream,
                                         zero__shm_widen_fn widen, zero__shm_narrow_fn narrow) {
    const int max = op == ZERO_OP_MAX;
    const size_t es = zero_dtype_size(dt);
    if (dt == ZERO_DTYPE_FP32 || dt == ZERO_DTYPE_BF16 || dt == ZERO_DTYPE_FP16) {
        float acc[ZERO__SHM_TILE], tmp[ZERO__SHM_TILE];
        const int half = dt != ZERO_DTYPE_FP32;
        for (size_t off = 0; off < n; off += ZERO__SHM_TILE) {
            const size_t len = n - off < ZERO__SHM_TILE ? n - off : ZERO__SHM_TILE;
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
                zero__shm_combine_f32(acc, x, len, max);
            }
            unsigned char *d = (unsigned char *)dst + off * es;
            if (half && stream) {
                narrow(acc, (uint16_t *)(void *)tmp, len); /* tmp is free again */
                zero__shm_copy_stream_unfenced(d, tmp, len * es);
            } else if (half) {
                narrow(acc, (uint16_t *)(void *)d, len);
            } else if (stream) {
                zero__shm_copy_stream_unfenced(d, acc, len * sizeof(float));
            } else {
                memcpy(d, acc, len * sizeof(float));
            }
        }
        if (stream) zero__shm_stream_fence();
        return;
    }
    /* Integer types: exact in any order, so the generic element-wise op serves. */
    unsigned char acc[ZERO__SHM_TILE * 8];
    const size_t tile = sizeof acc / es;
    for (size_t off = 0; off < n; off += tile) {
        const size_t len = n - off < tile ? n - off : tile;
        memcpy(acc, (const unsigned char *)src[0] + off * es, len * es);
        for (int k = 1; k < nsrc; k++)
            zero__comm_reduce(dt, op, (const unsigned char *)src[k] + off * es, acc, len);
        if (stream) zero__shm_copy_stream_unfenced((unsigned char *)dst + off * es, acc, len * es);
        else memcpy((unsigned char *)dst + off * es, acc, len * es);
    }
    if (stream) zero__shm_stream_fence();
}

#endif
