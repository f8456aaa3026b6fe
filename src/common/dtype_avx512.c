/* AVX-512 (F/BW) array converters fp32 <-> bf16/fp16, 16 elements a step, scalar tails; compiled
 * with the AVX-512 flags and called only when the CPU has them (bitwise equal to dtype.c). */
#include "common/dtype_impl.h"

#include <immintrin.h>

void zero__cvt_fp32_to_bf16_avx512(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), zero__bf16x16_from_ps512(_mm512_loadu_ps(src + i)));
    for (; i < n; i++) dst[i] = zero__fp32_to_bf16_bits(src[i]);
}

void zero__cvt_bf16_to_fp32_avx512(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, zero__ps512_from_bf16x16(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++) dst[i] = zero__bf16_bits_to_fp32(src[i]);
}

void zero__cvt_fp32_to_fp16_avx512(const float *src, uint16_t *dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = zero__fp32_to_fp16_bits(src[i]);
}

void zero__cvt_fp16_to_fp32_avx512(const uint16_t *src, float *dst, size_t n) {
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i))));
    for (; i < n; i++) dst[i] = zero__fp16_bits_to_fp32(src[i]);
}
