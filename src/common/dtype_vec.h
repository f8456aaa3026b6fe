/* The array converters fp32 <-> bf16/fp16, written once in the kernel layer's vector vocabulary
 * (kernels/vec.h) and compiled by dtype_avx2.c (8 lanes) and dtype_avx512.c (16 lanes); the
 * tails run the scalar element formulas, so every element is bitwise what dtype.c gives. */
#include "common/dtype_impl.h"
#include "kernels/vec.h"

void V_FN(zero__cvt_fp32_to_bf16)(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + V_W <= n; i += V_W) vh_store(dst + i, v_to_bf16(v_load(src + i)));
    for (; i < n; i++) dst[i] = zero__fp32_to_bf16_bits(src[i]);
}

void V_FN(zero__cvt_bf16_to_fp32)(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + V_W <= n; i += V_W) v_store(dst + i, v_from_bf16(vh_load(src + i)));
    for (; i < n; i++) dst[i] = zero__bf16_bits_to_fp32(src[i]);
}

void V_FN(zero__cvt_fp32_to_fp16)(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + V_W <= n; i += V_W) vh_store(dst + i, v_to_fp16(v_load(src + i)));
    for (; i < n; i++) dst[i] = zero__fp32_to_fp16_bits(src[i]);
}

void V_FN(zero__cvt_fp16_to_fp32)(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + V_W <= n; i += V_W) v_store(dst + i, v_from_fp16(vh_load(src + i)));
    for (; i < n; i++) dst[i] = zero__fp16_bits_to_fp32(src[i]);
}
