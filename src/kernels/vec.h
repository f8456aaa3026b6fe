/* The kernel layer's SIMD vocabulary: one set of names (vf, v_load, v_add, v_fmadd, v_to_bf16 ...)
 * for AVX2+FMA+F16C (8 lanes) or AVX-512 F/BW/VL/DQ (16 lanes, when ZERO_VEC_AVX512 is defined),
 * so that every vector kernel body is written once and compiled twice.
 *
 * Included only by files compiled with that ISA's flags (*_avx2.c / *_avx512.c, or the bodies they
 * include: src/optim/optim_vec.h, src/common/dtype_vec.h, models/kernels/mk_vec.h), each of which
 * names its functions with V_FN(name) (name_avx2 / name_avx512). Every operation is a thin
 * wrapper of one or two intrinsics with the same meaning on both ISAs: IEEE add, sub, mul, div
 * and sqrt round as the scalar operations of kernels/elem.h do, so a body that uses them in the
 * scalar order, in a file compiled with fp-contract off, is bitwise equal to the scalar
 * reference; v_fmadd & co. are fused (one rounding) and used only where a bound, not equality,
 * is the contract (the model kernels). Partial vectors: v_load_n loads lanes [0, n) (others 0,
 * never touching memory past n), v_store_n stores lanes [0, n). min/max follow the SSE rule (the
 * second operand when either is NaN): v_min(const, x) keeps a NaN x. */
#ifndef ZERO_KERNELS_VEC_H
#define ZERO_KERNELS_VEC_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#ifdef ZERO_VEC_AVX512
#define V_W        16
#define V_FN(name) name##_avx512
typedef __m512 vf;
typedef __m512i vi;

static inline __mmask16 v_mask_(size_t n) { return (__mmask16)((1u << n) - 1u); }
static inline vf v_set1(float a) { return _mm512_set1_ps(a); }
static inline vf v_zero(void) { return _mm512_setzero_ps(); }
static inline vf v_load(const float *p) { return _mm512_loadu_ps(p); }
static inline void v_store(float *p, vf a) { _mm512_storeu_ps(p, a); }
static inline vf v_load_n(const float *p, size_t n) { return _mm512_maskz_loadu_ps(v_mask_(n), p); }
static inline vf v_load_n_fill(const float *p, size_t n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), v_mask_(n), p);
}
static inline void v_store_n(float *p, vf a, size_t n) { _mm512_mask_storeu_ps(p, v_mask_(n), a); }
static inline vf v_keep_n(vf a, size_t n) { return _mm512_maskz_mov_ps(v_mask_(n), a); }
static inline vf v_add(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf v_div(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf v_fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   /* a*b + c */
static inline vf v_fnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a*b */
static inline vf v_fmsub(vf a, vf b, vf c) { return _mm512_fmsub_ps(a, b, c); }   /* a*b - c */
static inline vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf v_min(vf a, vf b) { return _mm512_min_ps(a, b); }
static inline float v_hsum(vf a) {
    const __m256 h =
        _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float v_hmax(vf a) {
    const __m256 h =
        _mm256_max_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline vf v_round(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vi v_cvt_i32(vf a) { return _mm512_cvtps_epi32(a); }
static inline vi v_srai1(vi a) { return _mm512_srai_epi32(a, 1); }
static inline vi v_isub(vi a, vi b) { return _mm512_sub_epi32(a, b); }
/* 2^e for integer lanes e in [-126, 127]. */
static inline vf v_pow2i(vi e) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(e, _mm512_set1_epi32(127)), 23));
}
/* Sum of squares of the lanes of a, added in double to two accumulators. */
typedef __m512d vd;
static inline vd vd_zero(void) { return _mm512_setzero_pd(); }
static inline void vd_sq_acc(vd *lo, vd *hi, vf a) {
    const __m512d l = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
    const __m512d h = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    *lo = _mm512_fmadd_pd(l, l, *lo);
    *hi = _mm512_fmadd_pd(h, h, *hi);
}
static inline double vd_hsum(vd a) { return _mm512_reduce_add_pd(a); }

/* Comparisons, selection, square root; V_W 16-bit values (bf16 or fp16 bits) and their
 * conversions, bitwise equal to zero__fp32_to_bf16_bits & co. (kernels/elem.h). */
typedef __mmask16 vm;
typedef __m256i vh;
static inline vf v_sqrt(vf a) { return _mm512_sqrt_ps(a); }
static inline vm v_gt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
static inline vm v_lt(vf a, vf b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
static inline vf v_select(vm m, vf t, vf f) { return _mm512_mask_blend_ps(m, f, t); } /* m ? t : f */
static inline vh vh_load(const uint16_t *p) { return _mm256_loadu_si256((const __m256i *)(const void *)p); }
static inline void vh_store(uint16_t *p, vh a) { _mm256_storeu_si256((__m256i *)(void *)p, a); }
static inline vh v_to_fp16(vf x) { return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); }
static inline vf v_from_fp16(vh h) { return _mm512_cvtph_ps(h); }
/* bf16: integer arithmetic (AVX512-BF16's vcvtneps2bf16 flushes subnormals, which the contract
 * keeps), vpmovdw to narrow. */
static inline vh v_to_bf16(vf x) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i hi = _mm512_srli_epi32(u, 16);
    __m512i r =
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_and_si512(hi, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fff)));
    r = _mm512_srli_epi32(r, 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    r = _mm512_mask_or_epi32(r, nan, hi, _mm512_set1_epi32(0x0040));
    return _mm512_cvtepi32_epi16(r);
}
static inline vf v_from_bf16(vh h) {
    __m512i u = _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    u = _mm512_mask_or_epi32(u, nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_castsi512_ps(u);
}

#else /* AVX2 + FMA */
#define V_W        8
#define V_FN(name) name##_avx2
typedef __m256 vf;
typedef __m256i vi;

/* lanes [0, n) of a mask: eight -1 then eight 0, read from 8 - n */
static const int32_t zero__v_lane_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static inline __m256i v_mask_(size_t n) { return _mm256_loadu_si256((const __m256i *)(zero__v_lane_mask + 8 - n)); }
static inline vf v_set1(float a) { return _mm256_set1_ps(a); }
static inline vf v_zero(void) { return _mm256_setzero_ps(); }
static inline vf v_load(const float *p) { return _mm256_loadu_ps(p); }
static inline void v_store(float *p, vf a) { _mm256_storeu_ps(p, a); }
static inline vf v_load_n(const float *p, size_t n) { return _mm256_maskload_ps(p, v_mask_(n)); }
static inline vf v_load_n_fill(const float *p, size_t n, float fill) {
    const __m256i m = v_mask_(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
}
static inline void v_store_n(float *p, vf a, size_t n) { _mm256_maskstore_ps(p, v_mask_(n), a); }
static inline vf v_keep_n(vf a, size_t n) { return _mm256_and_ps(a, _mm256_castsi256_ps(v_mask_(n))); }
static inline vf v_add(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf v_sub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf v_mul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf v_div(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf v_fmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf v_fnmadd(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
static inline vf v_fmsub(vf a, vf b, vf c) { return _mm256_fmsub_ps(a, b, c); }
static inline vf v_max(vf a, vf b) { return _mm256_max_ps(a, b); }
static inline vf v_min(vf a, vf b) { return _mm256_min_ps(a, b); }
static inline float v_hsum(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float v_hmax(vf a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline vf v_round(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vi v_cvt_i32(vf a) { return _mm256_cvtps_epi32(a); }
static inline vi v_srai1(vi a) { return _mm256_srai_epi32(a, 1); }
static inline vi v_isub(vi a, vi b) { return _mm256_sub_epi32(a, b); }
static inline vf v_pow2i(vi e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
}
typedef __m256d vd;
static inline vd vd_zero(void) { return _mm256_setzero_pd(); }
static inline void vd_sq_acc(vd *lo, vd *hi, vf a) {
    const __m256d l = _mm256_cvtps_pd(_mm256_castps256_ps128(a));
    const __m256d h = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
    *lo = _mm256_fmadd_pd(l, l, *lo);
    *hi = _mm256_fmadd_pd(h, h, *hi);
}
static inline double vd_hsum(vd a) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}
/* Comparisons, selection, square root; V_W 16-bit values (bf16 or fp16 bits) and their
 * conversions, bitwise equal to zero__fp32_to_bf16_bits & co. (kernels/elem.h). */
typedef __m256 vm;
typedef __m128i vh;
static inline vf v_sqrt(vf a) { return _mm256_sqrt_ps(a); }
static inline vm v_gt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
static inline vm v_lt(vf a, vf b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
static inline vf v_select(vm m, vf t, vf f) { return _mm256_blendv_ps(f, t, m); } /* m ? t : f */
static inline vh vh_load(const uint16_t *p) { return _mm_loadu_si128((const __m128i *)(const void *)p); }
static inline void vh_store(uint16_t *p, vh a) { _mm_storeu_si128((__m128i *)(void *)p, a); }
static inline vh v_to_fp16(vf x) { return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT); }
static inline vf v_from_fp16(vh h) { return _mm256_cvtph_ps(h); }
/* bf16: integer arithmetic, then packus (per 128-bit lane) and a permute to narrow. */
static inline vh v_to_bf16(vf x) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i hi = _mm256_srli_epi32(u, 16);
    __m256i r =
        _mm256_add_epi32(u, _mm256_add_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(1)), _mm256_set1_epi32(0x7fff)));
    r = _mm256_srli_epi32(r, 16);
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, _mm256_set1_epi32(0x0040)), nan);
    /* packus works per 128-bit lane: [r0..3 r0..3 | r4..7 r4..7]; gather quadwords 0 and 2. */
    const __m256i packed = _mm256_packus_epi32(r, r);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0xD8));
}
static inline vf v_from_bf16(vh h) {
    __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    u = _mm256_or_si256(u, _mm256_and_si256(nan, _mm256_set1_epi32(0x00400000)));
    return _mm256_castsi256_ps(u);
}
#endif

/* k lanes, k in [1, V_W]: a plain load/store when k == V_W (masked stores are slow on some
 * AVX2 cores; the branch is predictable), masked otherwise. */
static inline vf v_load_k(const float *p, size_t k) { return k == V_W ? v_load(p) : v_load_n(p, k); }
static inline void v_store_k(float *p, vf a, size_t k) {
    if (k == V_W) v_store(p, a);
    else v_store_n(p, a, k);
}

#endif
