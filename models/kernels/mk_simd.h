/* models/kernels/mk_simd.h — the vector vocabulary of the model kernels, for AVX2+FMA (8 lanes)
 * or AVX-512 (16 lanes, when MK_AVX512 is defined), and the vector exp both use.
 *
 * Included only by mk_avx2.c / mk_avx512.c (compiled with that ISA's flags). Every operation is
 * a thin wrapper of one or two intrinsics with the same meaning on both ISAs, so mk_vec.h reads
 * once and runs on either. Partial vectors: v_load_n loads lanes [0, n) (others 0, never touching
 * memory past n), v_store_n stores lanes [0, n). min/max follow the SSE rule (the second operand
 * when either is NaN): v_min(const, x) keeps a NaN x. */
#ifndef ZERO_MODELS_KERNELS_SIMD_H
#define ZERO_MODELS_KERNELS_SIMD_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#ifdef MK_AVX512
#define MK_W 16
#define MK_FN(name) mk__##name##_avx512
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
static inline vf v_fmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }  /* a*b + c */
static inline vf v_fnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } /* c - a*b */
static inline vf v_fmsub(vf a, vf b, vf c) { return _mm512_fmsub_ps(a, b, c); }   /* a*b - c */
static inline vf v_max(vf a, vf b) { return _mm512_max_ps(a, b); }
static inline vf v_min(vf a, vf b) { return _mm512_min_ps(a, b); }
static inline float v_hsum(vf a) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float v_hmax(vf a) {
    const __m256 h = _mm256_max_ps(_mm512_castps512_ps256(a),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline vf v_round(vf a) {
    return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
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

#else /* AVX2 + FMA */
#define MK_W 8
#define MK_FN(name) mk__##name##_avx2
typedef __m256 vf;
typedef __m256i vi;

/* lanes [0, n) of a mask: eight -1 then eight 0, read from 8 - n */
static const int32_t mk__lane_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
static inline __m256i v_mask_(size_t n) {
    return _mm256_loadu_si256((const __m256i *)(mk__lane_mask + 8 - n));
}
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
#endif

/* k lanes, k in [1, MK_W]: a plain load/store when k == MK_W (masked stores are slow on some
 * AVX2 cores; the branch is predictable), masked otherwise. */
static inline vf v_load_k(const float *p, size_t k) { return k == MK_W ? v_load(p) : v_load_n(p, k); }
static inline void v_store_k(float *p, vf a, size_t k) {
    if (k == MK_W)
        v_store(p, a);
    else
        v_store_n(p, a, k);
}

/* exp(x), lane by lane. x is clamped to [-104, 89] (a NaN stays NaN); n = round(x / ln 2) and
 * r = x - n ln 2 (ln 2 split in a 9-bit head and a tail, so n * head is exact); e^r by its degree-7
 * Taylor polynomial on |r| <= ln2/2 (truncation below 5.3e-9 relative), then scaled by 2^n as
 * two factors 2^(n>>1) * 2^(n - n>>1), each a normal float for every n in [-150, 129]: results
 * overflow to inf and go subnormal or 0 where the true value does, rounding once. Measured max
 * error: docs/KERNELS.md (test_mkernels prints it). */
static inline vf v_exp(vf x) {
    x = v_max(v_set1(-104.0f), v_min(v_set1(89.0f), x));
    const vf n = v_round(v_mul(x, v_set1(1.44269504088896341f)));
    vf r = v_fnmadd(n, v_set1(0.693359375f), x);
    r = v_fnmadd(n, v_set1(-2.12194440e-4f), r);
    vf p = v_set1(1.0f / 5040.0f);
    p = v_fmadd(p, r, v_set1(1.0f / 720.0f));
    p = v_fmadd(p, r, v_set1(1.0f / 120.0f));
    p = v_fmadd(p, r, v_set1(1.0f / 24.0f));
    p = v_fmadd(p, r, v_set1(1.0f / 6.0f));
    p = v_fmadd(p, r, v_set1(0.5f));
    p = v_fmadd(p, r, v_set1(1.0f));
    p = v_fmadd(p, r, v_set1(1.0f));
    const vi ni = v_cvt_i32(n), n1 = v_srai1(ni);
    return v_mul(v_mul(p, v_pow2i(n1)), v_pow2i(v_isub(ni, n1)));
}

#endif
