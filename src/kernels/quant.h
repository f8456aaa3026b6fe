/* The kernel layer's quantization formulas: one element of the blockwise formats of docs/QUANT.md
 * (NF4, int8, the 8-bit dynamic maps), and the tile loader that turns a run of a quantized tensor
 * into fp32 — one body for the host's GEMM operand and the CUDA backend's.
 *
 * Header-only, written like elem.h (cc and nvcc, ZERO__HD, no restrict). A block's scale is its
 * absmax; a value x of a block with absmax a is coded as the nearest entry of a sorted code table
 * to x * (1 / a), clamped to [-1, 1] (the last, partial block of a tensor: x / a); decoding is
 * code[q] * a, one fp32 product. A value on the midpoint of two entries takes the lower one. */
#ifndef ZERO_KERNELS_QUANT_H
#define ZERO_KERNELS_QUANT_H

#include "kernels/elem.h"

/* NF4's 16 values: the quantiles of N(0, 1) scaled to [-1, 1] with an exact zero (the QLoRA
 * paper's data type, as bitsandbytes tabulates it). */
#define ZERO__NF4_TABLE                                                                                     \
    {                                                                                                       \
        -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f, -0.28444138169288635f,    \
            -0.18477343022823334f, -0.09105003625154495f, 0.0f, 0.07958029955625534f, 0.16093020141124725f, \
            0.24611230194568634f, 0.33791524171829224f, 0.44070982933044434f, 0.5626170039176941f,          \
            0.7229568362236023f, 1.0f                                                                       \
    }

/* The normalized value of x in a block whose absmax is a: x * (1 / a) (x / a in a partial block),
 * clamped to [-1, 1]; 0 where a is 0. */
static inline ZERO__HD float zero__q_norm(float x, float a, int partial) {
    if (!(a > 0.0f)) return 0.0f;
    float v = partial ? x / a : x * (1.0f / a);
    return v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
}

/* The index of v in code[0..n) (ascending): the number of midpoints (code[i] + code[i + 1]) / 2,
 * each rounded to fp32, that lie below v — the nearest entry, a value on a midpoint taking the
 * lower one (torch.bucketize over the midpoints, as bitsandbytes' CUDA kernels and PyTorch
 * backend decide). By bisection: the midpoints ascend with the code. */
static inline ZERO__HD int zero__q_index(const float *code, int n, float v) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if ((code[mid] + code[mid + 1]) * 0.5f < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The 4-bit code of element i of a packed NF4 tensor: two a byte, the first in the high nibble. */
static inline ZERO__HD int zero__nf4_code(const uint8_t *packed, uint64_t i) {
    const uint8_t b = packed[i >> 1];
    return (i & 1) ? (b & 15) : (b >> 4);
}

/* The tile loader: elements [first, first + n) of an NF4 tensor (flat indices: packed is the whole
 * tensor's) into dst as fp32, each code's value times its block's absmax (blocks of `block`);
 * absmax[j] is block b0 + j's scale (b0 = 0: the whole tensor's array; a tile's caller decodes just
 * its blocks' scales, from b0 = first / block: a double-quantized absmax with zero__dq_absmax). */
/* NF4's value of code c (0..15) as a switch: what a GPU thread looks up (a local array would live
 * in its stack frame, local memory; the switch stays in registers). tests/unit/test_quant.c holds
 * it to ZERO__NF4_TABLE entry by entry. */
static inline ZERO__HD float zero__nf4_value_switch(int c) {
    switch (c & 15) {
    case 0: return -1.0f;
    case 1: return -0.6961928009986877f;
    case 2: return -0.5250730514526367f;
    case 3: return -0.39491748809814453f;
    case 4: return -0.28444138169288635f;
    case 5: return -0.18477343022823334f;
    case 6: return -0.09105003625154495f;
    case 7: return 0.0f;
    case 8: return 0.07958029955625534f;
    case 9: return 0.16093020141124725f;
    case 10: return 0.24611230194568634f;
    case 11: return 0.33791524171829224f;
    case 12: return 0.44070982933044434f;
    case 13: return 0.5626170039176941f;
    case 14: return 0.7229568362236023f;
    default: return 1.0f;
    }
}

/* NF4's value of code c: the table on the host (a third faster than the switch in the loader's
 * loop, measured), the switch on a GPU; the same 16 numbers. */
static inline ZERO__HD float zero__nf4_value(int c) {
#ifdef __CUDA_ARCH__
    return zero__nf4_value_switch(c);
#else
    static const float table[16] = ZERO__NF4_TABLE;
    return table[c & 15];
#endif
}

static inline ZERO__HD void zero__nf4_load(const uint8_t *packed, const float *absmax, uint64_t b0, uint64_t block,
                                           uint64_t first, uint64_t n, float *dst) {
    /* a block's run at a time: its scale read once (no division per element) */
    for (uint64_t k = 0; k < n;) {
        const uint64_t i = first + k, b = i / block, end = (b + 1) * block - first < n ? (b + 1) * block - first : n;
        const float a = absmax[b - b0];
        for (; k < end; k++) dst[k] = zero__nf4_value(zero__nf4_code(packed, first + k)) * a;
    }
}

/* The same for a tensor of 8-bit indices into a 256-entry code (int8's linear map, the dynamic maps). */
static inline ZERO__HD void zero__q8_load(const uint8_t *idx, const float *code, const float *absmax, uint64_t b0,
                                          uint64_t block, uint64_t first, uint64_t n, float *dst) {
    for (uint64_t k = 0; k < n;) {
        const uint64_t i = first + k, b = i / block, end = (b + 1) * block - first < n ? (b + 1) * block - first : n;
        const float a = absmax[b - b0];
        for (; k < end; k++) dst[k] = code[idx[first + k]] * a;
    }
}

/* Coding: a block's absmax, the largest |x| of its len values (a NaN never wins a comparison, so it
 * is passed over; the maximum does not depend on the order, so a GPU's tree gives the same), and
 * the 8-bit index of one value of a block with absmax a (`partial`: the tensor's last block, shorter
 * than the others) into a 256-entry code. What zero_quant_blockwise computes (its host index is a
 * faster search with the same results: zero__quant_index_check). */
static inline ZERO__HD float zero__q8_absmax_step(float a, float x) {
    const float m = x < 0.0f ? -x : x;
    return m > a ? m : a;
}

static inline ZERO__HD uint8_t zero__q8_code(const float *code, float x, float a, int partial) {
    return (uint8_t)zero__q_index(code, 256, zero__q_norm(x, a, partial));
}

/* Block b of n values of x (blocks of `block`) coded: absmax[b] and idx of its values. */
static inline ZERO__HD void zero__q8_store_block(const float *x, const float *code, uint64_t block, uint64_t n,
                                                 uint64_t b, uint8_t *idx, float *absmax) {
    const uint64_t lo = b * block, len = n - lo < block ? n - lo : block;
    float a = 0.0f;
    for (uint64_t i = lo; i < lo + len; i++) a = zero__q8_absmax_step(a, x[i]);
    absmax[b] = a;
    for (uint64_t i = lo; i < lo + len; i++) idx[i] = zero__q8_code(code, x[i], a, len < block);
}

/* A double-quantized absmax: its 8-bit code (signed dynamic map) times the second level's absmax
 * (blocks of `block2`), plus the offset (the first level's mean). */
static inline ZERO__HD float zero__dq_absmax(const uint8_t *q, const float *code, const float *absmax2, uint64_t block2,
                                             float offset, uint64_t b) {
    return code[q[b]] * absmax2[b / block2] + offset;
}

#endif
