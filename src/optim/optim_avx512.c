/* AVX-512 optimizer kernels (16 lanes) with the fused bf16/fp16/fp32 write-back; compiled with
 * the AVX-512 flags, run only when the CPU has them. Bitwise equal to zero__optim_scalar. */
/* No contraction into fma: each lane must round exactly where the scalar reference rounds. */
#pragma GCC optimize("fp-contract=off")

#include "optim/internal.h"

#include <immintrin.h>

static inline void store_out16(void *out, zero_dtype dt, size_t i, __m512 x) {
    if (dt == ZERO_DTYPE_BF16)
        _mm256_storeu_si256((__m256i *)((uint16_t *)out + i), zero__bf16x16_from_ps512(x));
    else if (dt == ZERO_DTYPE_FP16)
        _mm256_storeu_si256((__m256i *)((uint16_t *)out + i), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    else
        _mm512_storeu_ps((float *)out + i, x);
}

static void adam16(const zero__optim_k *k, float *p, float *m, float *v, const float *g, size_t n,
                   void *out, zero_dtype dt) {
    const __m512 gs = _mm512_set1_ps(k->grad_scale), wd = _mm512_set1_ps(k->wd);
    const __m512 dm = _mm512_set1_ps(k->decay_mul), b1 = _mm512_set1_ps(k->beta1);
    const __m512 b2 = _mm512_set1_ps(k->beta2), omb1 = _mm512_set1_ps(k->omb1);
    const __m512 omb2 = _mm512_set1_ps(k->omb2), bc2 = _mm512_set1_ps(k->bc2_sqrt);
    const __m512 eps = _mm512_set1_ps(k->eps), ss = _mm512_set1_ps(k->step_size);
    const int l2 = k->l2, dec = k->decoupled;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gv = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
        __m512 x = _mm512_loadu_ps(p + i);
        if (l2) gv = _mm512_add_ps(gv, _mm512_mul_ps(wd, x));
        if (dec) x = _mm512_mul_ps(x, dm);
        const __m512 mm = _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(m + i)), _mm512_mul_ps(omb1, gv));
        const __m512 vv = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(v + i)),
                                        _mm512_mul_ps(omb2, _mm512_mul_ps(gv, gv)));
        const __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vv), bc2), eps);
        x = _mm512_sub_ps(x, _mm512_mul_ps(ss, _mm512_div_ps(mm, den)));
        _mm512_storeu_ps(m + i, mm);
        _mm512_storeu_ps(v + i, vv);
        _mm512_storeu_ps(p + i, x);
        if (out) store_out16(out, dt, i, x);
    }
    zero__optim_scalar_range(k, p, m, v, g, i, n, out, dt);
}

static void sgd16(const zero__optim_k *k, float *p, float *buf, const float *g, size_t n, void *out,
                  zero_dtype dt) {
    const __m512 gs = _mm512_set1_ps(k->grad_scale), wd = _mm512_set1_ps(k->wd);
    const __m512 mom = _mm512_set1_ps(k->momentum), lr = _mm512_set1_ps(k->lr);
    const int l2 = k->l2, first = k->first_step, nest = k->nesterov;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 gv = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
        __m512 x = _mm512_loadu_ps(p + i);
        if (l2) gv = _mm512_add_ps(gv, _mm512_mul_ps(wd, x));
        if (buf) {
            const __m512 b = first ? gv : _mm512_add_ps(_mm512_mul_ps(mom, _mm512_loadu_ps(buf + i)), gv);
            _mm512_storeu_ps(buf + i, b);
            gv = nest ? _mm512_add_ps(gv, _mm512_mul_ps(mom, b)) : b;
        }
        x = _mm512_sub_ps(x, _mm512_mul_ps(lr, gv));
        _mm512_storeu_ps(p + i, x);
        if (out) store_out16(out, dt, i, x);
    }
    zero__optim_scalar_range(k, p, buf, NULL, g, i, n, out, dt);
}

static void lion16(const zero__optim_k *k, float *p, float *m, const float *g, size_t n, void *out,
                   zero_dtype dt) {
    const __m512 gs = _mm512_set1_ps(k->grad_scale), dm = _mm512_set1_ps(k->decay_mul);
    const __m512 b1 = _mm512_set1_ps(k->beta1), b2 = _mm512_set1_ps(k->beta2);
    const __m512 omb1 = _mm512_set1_ps(k->omb1), omb2 = _mm512_set1_ps(k->omb2);
    const __m512 lr = _mm512_set1_ps(k->lr), zero = _mm512_setzero_ps();
    const __m512 one = _mm512_set1_ps(1.0f), mone = _mm512_set1_ps(-1.0f);
    const int dec = k->decoupled;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 gv = _mm512_mul_ps(_mm512_loadu_ps(g + i), gs);
        __m512 x = _mm512_loadu_ps(p + i);
        if (dec) x = _mm512_mul_ps(x, dm);
        const __m512 mv = _mm512_loadu_ps(m + i);
        const __m512 c = _mm512_add_ps(_mm512_mul_ps(b1, mv), _mm512_mul_ps(omb1, gv));
        __m512 u = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, zero, _CMP_GT_OQ), c, one);
        u = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, zero, _CMP_LT_OQ), u, mone);
        x = _mm512_sub_ps(x, _mm512_mul_ps(lr, u));
        _mm512_storeu_ps(m + i, _mm512_add_ps(_mm512_mul_ps(b2, mv), _mm512_mul_ps(omb2, gv)));
        _mm512_storeu_ps(p + i, x);
        if (out) store_out16(out, dt, i, x);
    }
    zero__optim_scalar_range(k, p, m, NULL, g, i, n, out, dt);
}

void zero__optim_avx512(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                      size_t n, void *out, zero_dtype out_dt) {
    switch (k->type) {
    case ZERO_OPTIM_ADAMW:
    case ZERO_OPTIM_ADAM: adam16(k, p, s0, s1, g, n, out, out_dt); break;
    case ZERO_OPTIM_SGD: sgd16(k, p, s0, g, n, out, out_dt); break;
    case ZERO_OPTIM_LION: lion16(k, p, s0, g, n, out, out_dt); break;
    }
}
