/* AVX2 + F16C array converters fp32 <-> bf16/fp16, 8 elements a step, scalar tails; compiled
 * with -mavx2 -mfma -mf16c and called only when the CPU has them (bitwise equal to dtype.c). */
#include "common/dtype_impl.h"

#include <immintrin.h>

void zero__cvt_fp32_to_bf16_avx2(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), zero__bf16x8_from_ps256(_mm256_loadu_ps(src + i)));
    for (; i < n; i++) dst[i] = zero__fp32_to_bf16_bits(src[i]);
}

void zero__cvt_bf16_to_fp32_avx2(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, zero__ps256_from_bf16x8(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = zero__bf16_bits_to_fp32(src[i]);
}

void zero__cvt_fp32_to_fp16_avx2(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = zero__fp32_to_fp16_bits(src[i]);
}

void zero__cvt_fp16_to_fp32_avx2(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    for (; i < n; i++) dst[i] = zero__fp16_bits_to_fp32(src[i]);
}
