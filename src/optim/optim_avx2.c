/* AVX2 optimizer kernels (8 lanes) with the fused bf16/fp16/fp32 write-back; compiled with
 * -mavx2 -mfma -mf16c, run only when the CPU has them. Bitwise equal to zero__optim_scalar. */
/* No contraction into fma: each lane must round exactly where the scalar reference rounds. */
#pragma GCC optimize("fp-contract=off")

#include "optim/internal.h"

#include <immintrin.h>

static inline void store_out8(void *out, zero_dtype dt, size_t i, __m256 x) {
    if (dt == ZERO_DTYPE_BF16)
        _mm_storeu_si128((__m128i *)((uint16_t *)out + i), zero__bf16x8_from_ps256(x));
    else if (dt == ZERO_DTYPE_FP16)
        _mm_storeu_si128((__m128i *)((uint16_t *)out + i), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    else
        _mm256_storeu_ps((float *)out + i, x);
}

static void adam8(const zero__optim_k *k, float *p, float *m, float *v, const float *g, size_t n,
                  void *out, zero_dtype dt) {
    const __m256 gs = _mm256_set1_ps(k->grad_scale), wd = _mm256_set1_ps(k->wd);
    const __m256 dm = _mm256_set1_ps(k->decay_mul), b1 = _mm256_set1_ps(k->beta1);
    const __m256 b2 = _mm256_set1_ps(k->beta2), omb1 = _mm256_set1_ps(k->omb1);
    const __m256 omb2 = _mm256_set1_ps(k->omb2), bc2 = _mm256_set1_ps(k->bc2_sqrt);
    const __m256 eps = _mm256_set1_ps(k->eps), ss = _mm256_set1_ps(k->step_size);
    const int l2 = k->l2, dec = k->decoupled;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
        __m256 x = _mm256_loadu_ps(p + i);
        if (l2) gv = _mm256_add_ps(gv, _mm256_mul_ps(wd, x));
        if (dec) x = _mm256_mul_ps(x, dm);
        const __m256 mm = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(omb1, gv));
        const __m256 vv = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)),
                                        _mm256_mul_ps(omb2, _mm256_mul_ps(gv, gv)));
        const __m256 den = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vv), bc2), eps);
        x = _mm256_sub_ps(x, _mm256_mul_ps(ss, _mm256_div_ps(mm, den)));
        _mm256_storeu_ps(m + i, mm);
        _mm256_storeu_ps(v + i, vv);
        _mm256_storeu_ps(p + i, x);
        if (out) store_out8(out, dt, i, x);
    }
    zero__optim_scalar_range(k, p, m, v, g, i, n, out, dt);
}

static void sgd8(const zero__optim_k *k, float *p, float *buf, const float *g, size_t n, void *out,
                 zero_dtype dt) {
    const __m256 gs = _mm256_set1_ps(k->grad_scale), wd = _mm256_set1_ps(k->wd);
    const __m256 mom = _mm256_set1_ps(k->momentum), lr = _mm256_set1_ps(k->lr);
    const int l2 = k->l2, first = k->first_step, nest = k->nesterov;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 gv = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
        __m256 x = _mm256_loadu_ps(p + i);
        if (l2) gv = _mm256_add_ps(gv, _mm256_mul_ps(wd, x));
        if (buf) {
            const __m256 b = first ? gv : _mm256_add_ps(_mm256_mul_ps(mom, _mm256_loadu_ps(buf + i)), gv);
            _mm256_storeu_ps(buf + i, b);
            gv = nest ? _mm256_add_ps(gv, _mm256_mul_ps(mom, b)) : b;
        }
        x = _mm256_sub_ps(x, _mm256_mul_ps(lr, gv));
        _mm256_storeu_ps(p + i, x);
        if (out) store_out8(out, dt, i, x);
    }
    zero__optim_scalar_range(k, p, buf, NULL, g, i, n, out, dt);
}

static void lion8(const zero__optim_k *k, float *p, float *m, const float *g, size_t n, void *out,
                  zero_dtype dt) {
    const __m256 gs = _mm256_set1_ps(k->grad_scale), dm = _mm256_set1_ps(k->decay_mul);
    const __m256 b1 = _mm256_set1_ps(k->beta1), b2 = _mm256_set1_ps(k->beta2);
    const __m256 omb1 = _mm256_set1_ps(k->omb1), omb2 = _mm256_set1_ps(k->omb2);
    const __m256 lr = _mm256_set1_ps(k->lr), zero = _mm256_setzero_ps();
    const __m256 one = _mm256_set1_ps(1.0f), mone = _mm256_set1_ps(-1.0f);
    const int dec = k->decoupled;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gv = _mm256_mul_ps(_mm256_loadu_ps(g + i), gs);
        __m256 x = _mm256_loadu_ps(p + i);
        if (dec) x = _mm256_mul_ps(x, dm);
        const __m256 mv = _mm256_loadu_ps(m + i);
        const __m256 c = _mm256_add_ps(_mm256_mul_ps(b1, mv), _mm256_mul_ps(omb1, gv));
        __m256 u = _mm256_blendv_ps(c, one, _mm256_cmp_ps(c, zero, _CMP_GT_OQ));
        u = _mm256_blendv_ps(u, mone, _mm256_cmp_ps(c, zero, _CMP_LT_OQ));
        x = _mm256_sub_ps(x, _mm256_mul_ps(lr, u));
        _mm256_storeu_ps(m + i, _mm256_add_ps(_mm256_mul_ps(b2, mv), _mm256_mul_ps(omb2, gv)));
        _mm256_storeu_ps(p + i, x);
        if (out) store_out8(out, dt, i, x);
    }
    zero__optim_scalar_range(k, p, m, NULL, g, i, n, out, dt);
}

void zero__optim_avx2(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                      size_t n, void *out, zero_dtype out_dt) {
    switch (k->type) {
    case ZERO_OPTIM_ADAMW:
    case ZERO_OPTIM_ADAM: adam8(k, p, s0, s1, g, n, out, out_dt); break;
    case ZERO_OPTIM_SGD: sgd8(k, p, s0, g, n, out, out_dt); break;
    case ZERO_OPTIM_LION: lion8(k, p, s0, g, n, out, out_dt); break;
    }
}
