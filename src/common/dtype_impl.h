/* Private: the fp32 <-> bf16/fp16 conversions of the common layer: the scalar element formulas
 * (from the kernel layer) and the per-ISA array converters (dtype_vec.h, compiled twice). */
#ifndef ZERO_COMMON_DTYPE_IMPL_H
#define ZERO_COMMON_DTYPE_IMPL_H

#include "zero/common.h"

#include <stdint.h>
#include <string.h>

/* The scalar conversions (zero__fp32_to_bf16_bits, zero__bf16_bits_to_fp32,
 * zero__fp32_to_fp16_bits, zero__fp16_bits_to_fp32) are the kernel layer's element formulas,
 * with their contract: src/kernels/elem.h. */
#include "kernels/elem.h"

/* Array converters of one ISA: n elements, src and dst do not overlap. Bitwise equal to the
 * scalar functions above for every input. */
void zero__cvt_fp32_to_bf16_avx2(const float *src, uint16_t *dst, size_t n);
void zero__cvt_bf16_to_fp32_avx2(const uint16_t *src, float *dst, size_t n);
void zero__cvt_fp32_to_fp16_avx2(const float *src, uint16_t *dst, size_t n);
void zero__cvt_fp16_to_fp32_avx2(const uint16_t *src, float *dst, size_t n);
void zero__cvt_fp32_to_bf16_avx512(const float *src, uint16_t *dst, size_t n);
void zero__cvt_bf16_to_fp32_avx512(const uint16_t *src, float *dst, size_t n);
void zero__cvt_fp32_to_fp16_avx512(const float *src, uint16_t *dst, size_t n);
void zero__cvt_fp16_to_fp32_avx512(const uint16_t *src, float *dst, size_t n);

#endif
