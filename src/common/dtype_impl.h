/* Private: the fp32 <-> bf16/fp16 conversion bodies, shared by the scalar reference, the vector
 * tails and the optimizer's fused write-back, and the per-ISA array converters (dtype_*.c). */
#ifndef ZERO_COMMON_DTYPE_IMPL_H
#define ZERO_COMMON_DTYPE_IMPL_H

#include "zero/common.h"

#include <stdint.h>
#include <string.h>

/* Contract of every conversion here (scalar and vector alike, bitwise):
 *  - narrowing rounds to nearest, ties to even; finite values past the largest finite value
 *    round to Inf exactly as IEEE 754 says (fp16: |x| >= 65520 -> Inf); subnormal results are
 *    produced (bf16 keeps fp32 subnormals, fp16 rounds into its subnormal range correctly);
 *  - every NaN produced is quiet: sign and the leading payload bits kept, the quiet bit set
 *    (that is what F16C's vcvtps2ph/vcvtph2ps do, and the scalar code matches it);
 *  - widening is exact for every non-NaN value. */

static inline uint32_t zero__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float zero__f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint16_t zero__fp32_to_bf16_bits(float f) {
    uint32_t u = zero__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7fff plus the kept LSB carries into the kept half exactly when the dropped half
     * is above one half, or exactly one half with an odd kept half; the carry may ripple into
     * the exponent, which is the correct rounding up to the next binade or to Inf. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float zero__bf16_bits_to_fp32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
    return zero__f32_from_bits(u);
}

static inline uint16_t zero__fp32_to_fp16_bits(float f) {
    uint32_t u = zero__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t x = u & 0x7fffffffu;
    if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x03ffu));
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (halfway past max) */
    if (x >= 0x38800000u) {                                   /* >= 2^-14: an fp16 normal */
        uint32_t r = x - 0x38000000u;                         /* exponent bias 127 -> 15 */
        r += 0x0fffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    uint32_t e = x >> 23;
    if (e < 102) return sign; /* below 2^-25: rounds to zero */
    /* fp16 subnormal k * 2^-24: x = mant * 2^(e-150), so k = mant >> (126 - e) rounded. */
    uint32_t mant = (x & 0x007fffffu) | 0x00800000u;
    uint32_t shift = 126u - e; /* 14..24 */
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++; /* q = 0x400 is the smallest normal */
    return (uint16_t)(sign | q);
}

static inline float zero__fp16_bits_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x03ffu;
    if (e == 0) {
        float v = (float)m * 0x1p-24f; /* exact: m < 2^10 */
        return zero__f32_from_bits(zero__f32_bits(v) | sign);
    }
    if (e == 31) return zero__f32_from_bits(sign | 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0u));
    return zero__f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

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

/* Vector bodies for the files compiled with the ISA's flags (dtype_*.c, optim_*.c). */
#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

static inline __m128i zero__bf16x8_from_ps256(__m256 x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)),
                                                     _mm256_set1_epi32(0x7fff)));
    r = _mm256_srli_epi32(r, 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x0040)), nan);
    /* packus works per 128-bit lane: [r0..3 r0..3 | r4..7 r4..7]; gather quadwords 0 and 2. */
    const __m256i packed = _mm256_packus_epi32(r, r);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0xD8));
}

static inline __m256 zero__ps256_from_bf16x8(__m128i h) {
    __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    u = _mm256_or_si256(u, _mm256_and_si256(nan, _mm256_set1_epi32(0x00400000)));
    return _mm256_castsi256_ps(u);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>

static inline __m256i zero__bf16x16_from_ps512(__m512 x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)),
                                                     _mm512_set1_epi32(0x7fff)));
    r = _mm512_srli_epi32(r, 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x0040));
    return _mm512_cvtepi32_epi16(r);
}

static inline __m512 zero__ps512_from_bf16x16(__m256i h) {
    __m512i u = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                  _mm512_set1_epi32(0x7f800000));
    u = _mm512_mask_or_epi32(u, nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_castsi512_ps(u);
}
#endif

#endif
