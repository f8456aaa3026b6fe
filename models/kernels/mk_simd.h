/* models/kernels/mk_simd.h — the model kernels' names on top of the kernel layer's SIMD
 * vocabulary (src/kernels/vec.h: AVX2+FMA, 8 lanes, or AVX-512, 16 lanes when ZERO_VEC_AVX512
 * is defined), and the vector exp the models' activations, softmax and attention use.
 *
 * Included only by mk_vec.h through mk_avx2.c / mk_avx512.c (compiled with that ISA's flags). */
#ifndef ZERO_MODELS_KERNELS_SIMD_H
#define ZERO_MODELS_KERNELS_SIMD_H

#include "kernels/vec.h" /* src/kernels: the one vector vocabulary (header-only) */

#define MK_W V_W
#define MK_FN(name) V_FN(mk__##name)

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
