/* The bodies of the device kernels of src/cuda/kernels.cu: what one GPU thread computes for one
 * element (or one lane of a sum of squares), in the common subset of C11 and C++ so that the host
 * compiler compiles them too and tests/unit/test_cuda_bodies.c compares them with the host
 * references bit for bit. Each is the kernel layer's element formula (src/kernels/elem.h) that
 * the host reference (src/device/kernels.c, src/common/reduce.c) runs on that element. */
#ifndef ZERO_CUDA_BODIES_H
#define ZERO_CUDA_BODIES_H

#include "kernels/elem.h"
#include "zero/common.h"
#include "zero/optim.h"

/* ZERO__K_FILL_F32, ZERO__K_AXPY_F32: y[i] += a * x[i], the product rounded before the sum */
static inline ZERO__HD void zero__kb_axpy(float *y, const float *x, float a, uint64_t i) { y[i] = y[i] + a * x[i]; }

/* ZERO__K_WIDEN: a bf16 (bf = 1) or fp16 value to fp32, exactly */
static inline ZERO__HD float zero__kb_widen(int bf, uint16_t h) {
    return bf ? zero__bf16_bits_to_fp32(h) : zero__fp16_bits_to_fp32(h);
}

/* ZERO__K_ADD: dst[i] += src[i] in dt as the host's two-source reduction sums: fp32 added in
 * fp32; a half type widened, added in fp32 and rounded once */
static inline ZERO__HD void zero__kb_add(int dt, void *dst, const void *src, uint64_t i) {
    if (dt == ZERO_DTYPE_FP32) {
        float *d = (float *)dst;
        d[i] = d[i] + ((const float *)src)[i];
        return;
    }
    uint16_t *d = (uint16_t *)dst;
    const int bf = dt == ZERO_DTYPE_BF16;
    const float s = zero__kb_widen(bf, d[i]) + zero__kb_widen(bf, ((const uint16_t *)src)[i]);
    d[i] = bf ? zero__fp32_to_bf16_bits(s) : zero__fp32_to_fp16_bits(s);
}

/* ZERO__K_ACCUM_F32: dst[i] (dt) += src[i] (fp32), rounded once */
static inline ZERO__HD void zero__kb_accum(int dt, void *dst, const float *src, uint64_t i) {
    if (dt == ZERO_DTYPE_FP32) {
        float *d = (float *)dst;
        d[i] = d[i] + src[i];
    } else if (dt == ZERO_DTYPE_BF16) {
        uint16_t *d = (uint16_t *)dst;
        d[i] = zero__bf16_add_f32(d[i], src[i]);
    } else {
        uint16_t *d = (uint16_t *)dst;
        d[i] = zero__fp16_add_f32(d[i], src[i]);
    }
}

/* ZERO__K_OPTIM: element i of the optimizer's step (s0 NULL: SGD without momentum) */
static inline ZERO__HD void zero__kb_optim(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                                           uint64_t i) {
    switch (k->type) {
    case ZERO_OPTIM_ADAMW:
    case ZERO_OPTIM_ADAM: zero__adam_elem(k, p + i, s0 + i, s1 + i, g[i]); break;
    case ZERO_OPTIM_SGD: zero__sgd_elem(k, p + i, s0 ? s0 + i : (float *)0, g[i]); break;
    case ZERO_OPTIM_LION: zero__lion_elem(k, p + i, s0 + i, g[i]); break;
    default: break;
    }
}

/* ZERO__K_SUMSQ: the host's sum of squares of one block (src/common/reduce_impl.h,
 * zero__sumsq_body) is 16 lanes, element j of the block in lane j mod 16, each lane summed in
 * order in double, the lanes then added pairwise in a fixed tree. A GPU thread runs one lane
 * (zero__kb_sumsq_lane) and one thread of the block's 16 the tree (zero__kb_sumsq_tree): the same
 * additions in the same order, so the same bits. */
#define ZERO__KB_LANES 16
static inline ZERO__HD double zero__kb_sumsq_lane(int dt, const void *x, uint64_t len, unsigned lane) {
    double acc = 0;
    if (dt == ZERO_DTYPE_FP32) {
        const float *f = (const float *)x;
        for (uint64_t j = lane; j < len; j += ZERO__KB_LANES) acc = zero__sq_acc(acc, f[j]);
    } else {
        const uint16_t *h = (const uint16_t *)x;
        const int bf = dt == ZERO_DTYPE_BF16;
        for (uint64_t j = lane; j < len; j += ZERO__KB_LANES) acc = zero__sq_acc(acc, zero__kb_widen(bf, h[j]));
    }
    return acc;
}

/* acc[0..16) is consumed */
static inline ZERO__HD double zero__kb_sumsq_tree(double *acc) {
    for (int w = ZERO__KB_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

static inline ZERO__HD size_t zero__kb_dtype_size(int dt) { return dt == ZERO_DTYPE_FP32 ? 4 : 2; }

#endif
