/* models/kernels/mk_vec.h — the vector model kernels, written once in mk_simd.h's vocabulary and
 * compiled twice: by mk_avx2.c (8 lanes) and mk_avx512.c (16 lanes, MK_AVX512 defined).
 *
 * Each kernel evaluates the scalar reference's expressions (mk_internal.h, mk_scalar.c) with the
 * vector exp and fused multiply-adds; tails use masked loads and stores, so a tail element gets
 * the same arithmetic as the others. Sums over a row accumulate in fp32 lanes, flushed into a
 * double every MK_FLUSH vectors (the reference sums in double). */
#include <math.h>
#include <string.h>

#include "kernels/mk_internal.h"
#include "kernels/mk_simd.h"

#define MK_FLUSH 64

/* ---------------------------------------------------------------- element-wise */
static inline vf gelu_v(vf x) {
    const vf t = v_fmadd(v_set1(MK_GELU_A), v_mul(x, x), v_set1(1.0f)); /* 1 + A x^2 */
    const vf m2u = v_mul(v_mul(v_set1(-2.0f * MK_GELU_K), x), t);       /* -2u */
    const vf e = v_exp(v_min(v_set1(MK_SIG_CLAMP), m2u));
    return v_div(x, v_add(v_set1(1.0f), e));
}

static inline vf gelu_grad_v(vf x) {
    const vf x2 = v_mul(x, x);
    const vf t = v_fmadd(v_set1(MK_GELU_A), x2, v_set1(1.0f));
    const vf e = v_exp(v_min(v_set1(MK_SIG_CLAMP), v_mul(v_mul(v_set1(-2.0f * MK_GELU_K), x), t)));
    const vf s = v_div(v_set1(1.0f), v_add(v_set1(1.0f), e));
    const vf du = v_mul(v_set1(MK_GELU_K), v_fmadd(v_set1(3.0f * MK_GELU_A), x2, v_set1(1.0f)));
    /* s + 2x s (e s) u' */
    return v_fmadd(v_mul(v_mul(v_add(x, x), s), v_mul(e, s)), du, s);
}

static inline vf silu_v(vf x) {
    const vf e = v_exp(v_min(v_set1(MK_SIG_CLAMP), v_sub(v_zero(), x)));
    return v_div(x, v_add(v_set1(1.0f), e));
}

/* silu'(x) in *g, silu(x) returned (the backward of SwiGLU needs both). */
static inline vf silu_and_grad_v(vf x, vf *g) {
    const vf e = v_exp(v_min(v_set1(MK_SIG_CLAMP), v_sub(v_zero(), x)));
    const vf s = v_div(v_set1(1.0f), v_add(v_set1(1.0f), e));
    *g = v_mul(s, v_fmadd(x, v_mul(e, s), v_set1(1.0f)));
    return v_div(x, v_add(v_set1(1.0f), e));
}

static void MK_FN(gelu_fwd)(float *out, const float *x, size_t n) {
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) v_store(out + i, gelu_v(v_load(x + i)));
    if (i < n) v_store_n(out + i, gelu_v(v_load_n(x + i, n - i)), n - i);
}

static void MK_FN(gelu_bwd)(float *dx, const float *dy, const float *x, size_t n) {
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) v_store(dx + i, v_mul(v_load(dy + i), gelu_grad_v(v_load(x + i))));
    if (i < n)
        v_store_n(dx + i, v_mul(v_load_n(dy + i, n - i), gelu_grad_v(v_load_n(x + i, n - i))), n - i);
}

static void MK_FN(bias_gelu_row)(float *out, float *x, const float *bias, size_t n) {
    for (size_t i = 0; i < n; i += MK_W) {
        const size_t k = n - i < MK_W ? n - i : MK_W;
        const vf h = v_add(v_load_k(x + i, k), v_load_k(bias + i, k));
        v_store_k(x + i, h, k);
        v_store_k(out + i, gelu_v(h), k);
    }
}

static void MK_FN(gelu_bwd_bias_row)(float *dx, float *part, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i += MK_W) {
        const size_t k = n - i < MK_W ? n - i : MK_W;
        const vf g = v_mul(v_load_k(dy + i, k), gelu_grad_v(v_load_k(x + i, k)));
        v_store_k(dx + i, g, k);
        v_store_k(part + i, v_add(v_load_k(part + i, k), g), k);
    }
}

static void MK_FN(silu_fwd)(float *out, const float *x, size_t n) {
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) v_store(out + i, silu_v(v_load(x + i)));
    if (i < n) v_store_n(out + i, silu_v(v_load_n(x + i, n - i)), n - i);
}

static void MK_FN(silu_bwd)(float *dx, const float *dy, const float *x, size_t n) {
    size_t i = 0;
    vf g;
    for (; i + MK_W <= n; i += MK_W) {
        silu_and_grad_v(v_load(x + i), &g);
        v_store(dx + i, v_mul(v_load(dy + i), g));
    }
    if (i < n) {
        silu_and_grad_v(v_load_n(x + i, n - i), &g);
        v_store_n(dx + i, v_mul(v_load_n(dy + i, n - i), g), n - i);
    }
}

static void MK_FN(swiglu_fwd)(float *out, const float *g, const float *u, size_t n) {
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) v_store(out + i, v_mul(silu_v(v_load(g + i)), v_load(u + i)));
    if (i < n)
        v_store_n(out + i, v_mul(silu_v(v_load_n(g + i, n - i)), v_load_n(u + i, n - i)), n - i);
}

static void MK_FN(swiglu_bwd)(float *dg, float *du, const float *dy, const float *g, const float *u,
                              size_t n) {
    size_t i = 0;
    vf sg;
    for (; i + MK_W <= n; i += MK_W) {
        const vf d = v_load(dy + i), uu = v_load(u + i);
        const vf s = silu_and_grad_v(v_load(g + i), &sg);
        v_store(dg + i, v_mul(v_mul(d, uu), sg));
        v_store(du + i, v_mul(d, s));
    }
    if (i < n) {
        const size_t m = n - i;
        const vf d = v_load_n(dy + i, m), uu = v_load_n(u + i, m);
        const vf s = silu_and_grad_v(v_load_n(g + i, m), &sg);
        v_store_n(dg + i, v_mul(v_mul(d, uu), sg), m);
        v_store_n(du + i, v_mul(d, s), m);
    }
}

static void MK_FN(geglu_fwd)(float *out, const float *g, const float *u, size_t n) {
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) v_store(out + i, v_mul(gelu_v(v_load(g + i)), v_load(u + i)));
    if (i < n)
        v_store_n(out + i, v_mul(gelu_v(v_load_n(g + i, n - i)), v_load_n(u + i, n - i)), n - i);
}

static void MK_FN(geglu_bwd)(float *dg, float *du, const float *dy, const float *g, const float *u,
                             size_t n) {
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) {
        const vf d = v_load(dy + i), uu = v_load(u + i), gg = v_load(g + i);
        v_store(dg + i, v_mul(v_mul(d, uu), gelu_grad_v(gg)));
        v_store(du + i, v_mul(d, gelu_v(gg)));
    }
    if (i < n) {
        const size_t m = n - i;
        const vf d = v_load_n(dy + i, m), uu = v_load_n(u + i, m), gg = v_load_n(g + i, m);
        v_store_n(dg + i, v_mul(v_mul(d, uu), gelu_grad_v(gg)), m);
        v_store_n(du + i, v_mul(d, gelu_v(gg)), m);
    }
}

static void MK_FN(exp_array)(float *y, const float *x, size_t n) {
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) v_store(y + i, v_exp(v_load(x + i)));
    if (i < n) v_store_n(y + i, v_exp(v_load_n(x + i, n - i)), n - i);
}

/* ---------------------------------------------------------------- norms */
static inline float row_sum(const float *x, size_t n) {
    vf a0 = v_zero(), a1 = v_zero();
    size_t i = 0;
    for (; i + 2 * MK_W <= n; i += 2 * MK_W) {
        a0 = v_add(a0, v_load(x + i));
        a1 = v_add(a1, v_load(x + i + MK_W));
    }
    for (; i + MK_W <= n; i += MK_W) a0 = v_add(a0, v_load(x + i));
    if (i < n) a1 = v_add(a1, v_load_n(x + i, n - i));
    return v_hsum(v_add(a0, a1));
}

static void MK_FN(ln_fwd_row)(float *y, float *mean, float *rstd, const float *x, const float *w,
                              const float *b, int C, float eps) {
    const size_t n = (size_t)C;
    const float m = row_sum(x, n) / (float)C;
    const vf mv = v_set1(m);
    vf a0 = v_zero(), a1 = v_zero();
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) {
        const vf d = v_sub(v_load(x + i), mv);
        a0 = v_fmadd(d, d, a0);
    }
    if (i < n) {
        const vf d = v_keep_n(v_sub(v_load_n(x + i, n - i), mv), n - i);
        a1 = v_fmadd(d, d, a1);
    }
    const float r = 1.0f / sqrtf(v_hsum(v_add(a0, a1)) / (float)C + eps);
    const vf rv = v_set1(r);
    for (i = 0; i + MK_W <= n; i += MK_W) {
        const vf xh = v_mul(v_sub(v_load(x + i), mv), rv);
        const vf bb = b ? v_load(b + i) : v_zero();
        v_store(y + i, v_fmadd(xh, v_load(w + i), bb));
    }
    if (i < n) {
        const size_t k = n - i;
        const vf xh = v_mul(v_sub(v_load_n(x + i, k), mv), rv);
        const vf bb = b ? v_load_n(b + i, k) : v_zero();
        v_store_n(y + i, v_fmadd(xh, v_load_n(w + i, k), bb), k);
    }
    *mean = m;
    *rstd = r;
}

static void MK_FN(ln_bwd_row)(float *dx, float *wpart, float *bpart, const float *dy,
                              const float *x, const float *w, float mean, float rstd, int C,
                              int acc) {
    const size_t n = (size_t)C;
    const vf mv = v_set1(mean), rv = v_set1(rstd);
    vf s1 = v_zero(), s2 = v_zero();
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) {
        const vf xh = v_mul(v_sub(v_load(x + i), mv), rv), dn = v_mul(v_load(dy + i), v_load(w + i));
        s1 = v_add(s1, dn);
        s2 = v_fmadd(dn, xh, s2);
    }
    if (i < n) { /* masked lanes: dn = 0, so they add nothing */
        const size_t k = n - i;
        const vf xh = v_mul(v_sub(v_load_n(x + i, k), mv), rv);
        const vf dn = v_mul(v_load_n(dy + i, k), v_load_n(w + i, k));
        s1 = v_add(s1, dn);
        s2 = v_fmadd(dn, xh, s2);
    }
    const vf md = v_set1(v_hsum(s1) / (float)C), mdx = v_set1(v_hsum(s2) / (float)C);
    for (i = 0; i < n; i += MK_W) {
        const size_t k = n - i < MK_W ? n - i : MK_W;
        const vf d = v_load_k(dy + i, k), xh = v_mul(v_sub(v_load_k(x + i, k), mv), rv);
        vf g = v_mul(rv, v_sub(v_mul(d, v_load_k(w + i, k)), v_fmadd(xh, mdx, md)));
        if (acc) g = v_add(v_load_k(dx + i, k), g);
        v_store_k(dx + i, g, k);
        if (wpart) v_store_k(wpart + i, v_fmadd(d, xh, v_load_k(wpart + i, k)), k);
        if (bpart) v_store_k(bpart + i, v_add(v_load_k(bpart + i, k), d), k);
    }
}

static void MK_FN(rms_fwd_row)(float *y, float *rstd, const float *x, const float *w, int C,
                               float eps) {
    const size_t n = (size_t)C;
    vf a0 = v_zero(), a1 = v_zero();
    size_t i = 0;
    for (; i + 2 * MK_W <= n; i += 2 * MK_W) {
        const vf u = v_load(x + i), t = v_load(x + i + MK_W);
        a0 = v_fmadd(u, u, a0);
        a1 = v_fmadd(t, t, a1);
    }
    for (; i + MK_W <= n; i += MK_W) {
        const vf u = v_load(x + i);
        a0 = v_fmadd(u, u, a0);
    }
    if (i < n) {
        const vf u = v_load_n(x + i, n - i);
        a1 = v_fmadd(u, u, a1);
    }
    const float r = 1.0f / sqrtf(v_hsum(v_add(a0, a1)) / (float)C + eps);
    const vf rv = v_set1(r);
    for (i = 0; i < n; i += MK_W) {
        const size_t k = n - i < MK_W ? n - i : MK_W;
        vf o = v_mul(v_load_k(x + i, k), rv);
        if (w) o = v_mul(o, v_load_k(w + i, k));
        v_store_k(y + i, o, k);
    }
    *rstd = r;
}

static void MK_FN(rms_bwd_row)(float *dx, float *wpart, const float *dy, const float *x,
                               const float *w, float rstd, int C, int acc) {
    const size_t n = (size_t)C;
    const vf rv = v_set1(rstd);
    vf s = v_zero();
    for (size_t i = 0; i < n; i += MK_W) {
        const size_t k = n - i < MK_W ? n - i : MK_W;
        vf dn = v_load_k(dy + i, k);
        if (w) dn = v_mul(dn, v_load_k(w + i, k));
        s = v_fmadd(dn, v_mul(v_load_k(x + i, k), rv), s);
    }
    const vf mdx = v_set1(v_hsum(s) / (float)C);
    for (size_t i = 0; i < n; i += MK_W) {
        const size_t k = n - i < MK_W ? n - i : MK_W;
        const vf d = v_load_k(dy + i, k), xh = v_mul(v_load_k(x + i, k), rv);
        const vf dn = w ? v_mul(d, v_load_k(w + i, k)) : d;
        vf g = v_mul(rv, v_fnmadd(xh, mdx, dn));
        if (acc) g = v_add(v_load_k(dx + i, k), g);
        v_store_k(dx + i, g, k);
        if (wpart) v_store_k(wpart + i, v_fmadd(d, xh, v_load_k(wpart + i, k)), k);
    }
}

/* ---------------------------------------------------------------- softmax, cross-entropy */
static inline float row_max(const float *x, size_t n) {
    vf m = v_set1(-INFINITY);
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) m = v_max(m, v_load(x + i));
    if (i < n) m = v_max(m, v_load_n_fill(x + i, n - i, -INFINITY));
    return v_hmax(m);
}

/* sum of exp(x - mx) over the row; stores the exps in y when y is not NULL (y may equal x). */
static inline double row_sum_exp(float *y, const float *x, size_t n, float mx) {
    const vf mv = v_set1(mx);
    double total = 0.0;
    vf s = v_zero();
    size_t i = 0, k = 0;
    for (; i + MK_W <= n; i += MK_W) {
        const vf e = v_exp(v_sub(v_load(x + i), mv));
        if (y) v_store(y + i, e);
        s = v_add(s, e);
        if (++k == MK_FLUSH) {
            total += v_hsum(s);
            s = v_zero();
            k = 0;
        }
    }
    if (i < n) {
        const vf e = v_keep_n(v_exp(v_sub(v_load_n(x + i, n - i), mv)), n - i);
        if (y) v_store_n(y + i, e, n - i);
        s = v_add(s, e);
    }
    return total + v_hsum(s);
}

static inline void row_scale(float *y, size_t n, float f) {
    const vf fv = v_set1(f);
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) v_store(y + i, v_mul(v_load(y + i), fv));
    if (i < n) v_store_n(y + i, v_mul(v_load_n(y + i, n - i), fv), n - i);
}

static void MK_FN(softmax_row)(float *y, const float *x, int n) {
    const float mx = row_max(x, (size_t)n);
    const double s = row_sum_exp(y, x, (size_t)n, mx);
    row_scale(y, (size_t)n, (float)(1.0 / s));
}

static void MK_FN(softmax_bwd_row)(float *dx, const float *dy, const float *y, int n) {
    const size_t m = (size_t)n;
    double total = 0.0;
    vf s = v_zero();
    size_t i = 0, k = 0;
    for (; i + MK_W <= m; i += MK_W) {
        s = v_fmadd(v_load(y + i), v_load(dy + i), s);
        if (++k == MK_FLUSH) {
            total += v_hsum(s);
            s = v_zero();
            k = 0;
        }
    }
    if (i < m) s = v_fmadd(v_load_n(y + i, m - i), v_load_n(dy + i, m - i), s);
    const vf d = v_set1((float)(total + v_hsum(s)));
    for (i = 0; i < m; i += MK_W) {
        const size_t r = m - i < MK_W ? m - i : MK_W;
        v_store_k(dx + i, v_mul(v_load_k(y + i, r), v_sub(v_load_k(dy + i, r), d)), r);
    }
}

static float MK_FN(xent_row)(float *x, int V, int target, float dscale) {
    const size_t n = (size_t)V;
    const float xt = x[target];
    const float mx = row_max(x, n);
    const double s = row_sum_exp(dscale != 0.0f ? x : NULL, x, n, mx);
    const float loss = (float)((double)mx + log(s) - xt);
    if (dscale != 0.0f) {
        row_scale(x, n, (float)(dscale / s));
        x[target] -= dscale;
    }
    return loss;
}

/* ---------------------------------------------------------------- RoPE */
static void MK_FN(rope_head)(float *x, const float *c, const float *s, int half, float sgn) {
    const vf sg = v_set1(sgn);
    float *hi = x + half;
    for (int i = 0; i < half; i += MK_W) {
        const size_t k = (size_t)(half - i < MK_W ? half - i : MK_W);
        const vf a = v_load_k(x + i, k), b = v_load_k(hi + i, k);
        const vf cc = v_load_k(c + i, k), ss = v_mul(sg, v_load_k(s + i, k));
        v_store_k(x + i, v_fnmadd(b, ss, v_mul(a, cc)), k);
        v_store_k(hi + i, v_fmadd(a, ss, v_mul(b, cc)), k);
    }
}

/* ---------------------------------------------------------------- reductions */
static void MK_FN(colsum_rows)(float *part, const float *src, size_t rows, size_t cols,
                               size_t ld) {
    size_t j = 0;
    for (; j + 4 * MK_W <= cols; j += 4 * MK_W) {
        vf a0 = v_load(part + j), a1 = v_load(part + j + MK_W);
        vf a2 = v_load(part + j + 2 * MK_W), a3 = v_load(part + j + 3 * MK_W);
        for (size_t r = 0; r < rows; r++) {
            const float *p = src + r * ld + j;
            a0 = v_add(a0, v_load(p));
            a1 = v_add(a1, v_load(p + MK_W));
            a2 = v_add(a2, v_load(p + 2 * MK_W));
            a3 = v_add(a3, v_load(p + 3 * MK_W));
        }
        v_store(part + j, a0);
        v_store(part + j + MK_W, a1);
        v_store(part + j + 2 * MK_W, a2);
        v_store(part + j + 3 * MK_W, a3);
    }
    for (; j < cols; j += MK_W) {
        const size_t k = cols - j < MK_W ? cols - j : MK_W;
        vf a = v_load_k(part + j, k);
        for (size_t r = 0; r < rows; r++) a = v_add(a, v_load_k(src + r * ld + j, k));
        v_store_k(part + j, a, k);
    }
}

static double MK_FN(sum_squares)(const float *x, size_t n) {
    vd a0 = vd_zero(), a1 = vd_zero(), a2 = vd_zero(), a3 = vd_zero();
    size_t i = 0;
    for (; i + 2 * MK_W <= n; i += 2 * MK_W) {
        vd_sq_acc(&a0, &a1, v_load(x + i));
        vd_sq_acc(&a2, &a3, v_load(x + i + MK_W));
    }
    for (; i < n; i += MK_W) vd_sq_acc(&a0, &a1, v_load_n(x + i, n - i < MK_W ? n - i : MK_W));
    return (vd_hsum(a0) + vd_hsum(a1)) + (vd_hsum(a2) + vd_hsum(a3));
}

static void MK_FN(row_add)(float *out, const float *a, const float *b, size_t n) {
    if (!b) {
        if (out != a) memmove(out, a, sizeof(float) * n);
        return;
    }
    size_t i = 0;
    for (; i + MK_W <= n; i += MK_W) v_store(out + i, v_add(v_load(a + i), v_load(b + i)));
    if (i < n) v_store_n(out + i, v_add(v_load_n(a + i, n - i), v_load_n(b + i, n - i)), n - i);
}

static void MK_FN(row_acc)(float *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 4 * MK_W <= n; i += 4 * MK_W) {
        v_store(dst + i, v_add(v_load(dst + i), v_load(src + i)));
        v_store(dst + i + MK_W, v_add(v_load(dst + i + MK_W), v_load(src + i + MK_W)));
        v_store(dst + i + 2 * MK_W, v_add(v_load(dst + i + 2 * MK_W), v_load(src + i + 2 * MK_W)));
        v_store(dst + i + 3 * MK_W, v_add(v_load(dst + i + 3 * MK_W), v_load(src + i + 3 * MK_W)));
    }
    for (; i + MK_W <= n; i += MK_W) v_store(dst + i, v_add(v_load(dst + i), v_load(src + i)));
    if (i < n) v_store_n(dst + i, v_add(v_load_n(dst + i, n - i), v_load_n(src + i, n - i)), n - i);
}

/* ---------------------------------------------------------------- attention */
/* Block scratch layout: see mk__att_fwd_ws / mk__att_bwd_ws (mk_kernels.c), which size it for
 * 16 lanes; here hdp = head_dim rounded up to this ISA's width. Key blocks are packed twice:
 * transposed (hd, BC) for the logits, and as rows (BC, hdp) zero-padded for the products that
 * run along head_dim. */
#define BR MK_ATT_BR
#define BC MK_ATT_BC

static inline int round_w(int n) { return (n + MK_W - 1) / MK_W * MK_W; }

/* C[r][0..ncp) = sum_d ar[r][d] Bt[d][0..ncp) for r < R; C rows and Bt rows BC apart; ncp a
 * multiple of 2 MK_W. Four rows at a time keep eight accumulators in registers. */
static void att_dot(float *C, const float *const *ar, const float *Bt, int hd, int R, int ncp) {
    for (int c = 0; c < ncp; c += 2 * MK_W) {
        int r = 0;
        for (; r + 4 <= R; r += 4) {
            const float *q0 = ar[r], *q1 = ar[r + 1], *q2 = ar[r + 2], *q3 = ar[r + 3];
            vf x00 = v_zero(), x01 = v_zero(), x10 = v_zero(), x11 = v_zero();
            vf x20 = v_zero(), x21 = v_zero(), x30 = v_zero(), x31 = v_zero();
            const float *bp = Bt + c;
            for (int d = 0; d < hd; d++, bp += BC) {
                const vf b0 = v_load(bp), b1 = v_load(bp + MK_W);
                vf s = v_set1(q0[d]);
                x00 = v_fmadd(s, b0, x00);
                x01 = v_fmadd(s, b1, x01);
                s = v_set1(q1[d]);
                x10 = v_fmadd(s, b0, x10);
                x11 = v_fmadd(s, b1, x11);
                s = v_set1(q2[d]);
                x20 = v_fmadd(s, b0, x20);
                x21 = v_fmadd(s, b1, x21);
                s = v_set1(q3[d]);
                x30 = v_fmadd(s, b0, x30);
                x31 = v_fmadd(s, b1, x31);
            }
            float *o = C + (size_t)r * BC + c;
            v_store(o, x00);
            v_store(o + MK_W, x01);
            v_store(o + BC, x10);
            v_store(o + BC + MK_W, x11);
            v_store(o + 2 * BC, x20);
            v_store(o + 2 * BC + MK_W, x21);
            v_store(o + 3 * BC, x30);
            v_store(o + 3 * BC + MK_W, x31);
        }
        for (; r < R; r++) {
            const float *q0 = ar[r];
            vf x0 = v_zero(), x1 = v_zero();
            const float *bp = Bt + c;
            for (int d = 0; d < hd; d++, bp += BC) {
                const vf s = v_set1(q0[d]);
                x0 = v_fmadd(s, v_load(bp), x0);
                x1 = v_fmadd(s, v_load(bp + MK_W), x1);
            }
            v_store(C + (size_t)r * BC + c, x0);
            v_store(C + (size_t)r * BC + c + MK_W, x1);
        }
    }
}

/* C[i][0..ncols) += sum_{kk < K} A[i*sai + kk*sak] B[kk*ldb + 0..ncols) for i < R (R <= 4);
 * C rows ldc apart; ncols a multiple of MK_W. A is read by broadcasts, so it may be read
 * transposed (sai = 1, sak = row stride). */
static void att_acc(float *C, size_t ldc, const float *A, size_t sai, size_t sak, const float *B,
                    size_t ldb, int R, int K, int ncols) {
    if (K <= 0) return;
    if (R == 4) {
        const float *a0 = A, *a1 = A + sai, *a2 = A + 2 * sai, *a3 = A + 3 * sai;
        int dc = 0;
        for (; dc + 2 * MK_W <= ncols; dc += 2 * MK_W) {
            float *c0 = C + dc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
            vf x00 = v_load(c0), x01 = v_load(c0 + MK_W), x10 = v_load(c1), x11 = v_load(c1 + MK_W);
            vf x20 = v_load(c2), x21 = v_load(c2 + MK_W), x30 = v_load(c3), x31 = v_load(c3 + MK_W);
            const float *bp = B + dc;
            for (int kk = 0; kk < K; kk++, bp += ldb) {
                const size_t o = (size_t)kk * sak;
                const vf b0 = v_load(bp), b1 = v_load(bp + MK_W);
                vf s = v_set1(a0[o]);
                x00 = v_fmadd(s, b0, x00);
                x01 = v_fmadd(s, b1, x01);
                s = v_set1(a1[o]);
                x10 = v_fmadd(s, b0, x10);
                x11 = v_fmadd(s, b1, x11);
                s = v_set1(a2[o]);
                x20 = v_fmadd(s, b0, x20);
                x21 = v_fmadd(s, b1, x21);
                s = v_set1(a3[o]);
                x30 = v_fmadd(s, b0, x30);
                x31 = v_fmadd(s, b1, x31);
            }
            v_store(c0, x00);
            v_store(c0 + MK_W, x01);
            v_store(c1, x10);
            v_store(c1 + MK_W, x11);
            v_store(c2, x20);
            v_store(c2 + MK_W, x21);
            v_store(c3, x30);
            v_store(c3 + MK_W, x31);
        }
        if (dc < ncols) {
            float *c0 = C + dc, *c1 = c0 + ldc, *c2 = c1 + ldc, *c3 = c2 + ldc;
            vf x0 = v_load(c0), x1 = v_load(c1), x2 = v_load(c2), x3 = v_load(c3);
            const float *bp = B + dc;
            for (int kk = 0; kk < K; kk++, bp += ldb) {
                const size_t o = (size_t)kk * sak;
                const vf b0 = v_load(bp);
                x0 = v_fmadd(v_set1(a0[o]), b0, x0);
                x1 = v_fmadd(v_set1(a1[o]), b0, x1);
                x2 = v_fmadd(v_set1(a2[o]), b0, x2);
                x3 = v_fmadd(v_set1(a3[o]), b0, x3);
            }
            v_store(c0, x0);
            v_store(c1, x1);
            v_store(c2, x2);
            v_store(c3, x3);
        }
        return;
    }
    for (int i = 0; i < R; i++) {
        const float *ai = A + (size_t)i * sai;
        float *ci = C + (size_t)i * ldc;
        for (int dc = 0; dc < ncols; dc += MK_W) {
            vf x = v_load(ci + dc);
            const float *bp = B + dc;
            for (int kk = 0; kk < K; kk++, bp += ldb) x = v_fmadd(v_set1(ai[(size_t)kk * sak]), v_load(bp), x);
            v_store(ci + dc, x);
        }
    }
}

/* Packs keys j0 .. j0+nc-1 of one head: Kt (hd, BC) transposed, columns [nc, ncp) zero. */
static void pack_t(float *Kt, const float *base, size_t ld, int nc, int ncp, int hd) {
    for (int j = 0; j < nc; j++) {
        const float *src = base + (size_t)j * ld;
        for (int d = 0; d < hd; d++) Kt[(size_t)d * BC + j] = src[d];
    }
    if (ncp > nc)
        for (int d = 0; d < hd; d++) memset(Kt + (size_t)d * BC + nc, 0, sizeof(float) * (size_t)(ncp - nc));
}

/* Packs n rows of hd floats (ld apart) into rows of hdp, zero-padded. */
static void pack_rows(float *P, const float *base, size_t ld, int n, int hd, int hdp) {
    for (int j = 0; j < n; j++) {
        memcpy(P + (size_t)j * hdp, base + (size_t)j * ld, sizeof(float) * (size_t)hd);
        if (hdp > hd) memset(P + (size_t)j * hdp + hd, 0, sizeof(float) * (size_t)(hdp - hd));
    }
}

/* Logits of a (query block, key block) pair, four rows at a time, each group only over the key
 * tiles up to its last row's diagonal (the diagonal block costs half). Rows that see no key of
 * the block are left as they are (the callers zero them). */
static void att_logits(float *S, const float *const *ar, const float *Kt, int hd, int nr, int t0,
                       int j0, int nc) {
    for (int r = 0; r < nr; r += 4) {
        const int R = nr - r < 4 ? nr - r : 4;
        int lim = t0 + r + R - j0;
        lim = lim < nc ? lim : nc;
        if (lim <= 0) continue;
        att_dot(S + (size_t)r * BC, ar + r, Kt, hd, R, (lim + 2 * MK_W - 1) / (2 * MK_W) * (2 * MK_W));
    }
}

/* e with its first k lanes (0 <= k < MK_W) zero: the keys of a vector before a row's window
 * (whatever they held, inf or NaN from a logit the row does not see, is overwritten). */
static inline vf zero_below(vf e, int k) {
    float tmp[MK_W];
    v_store(tmp, e);
    for (int z = 0; z < k; z++) tmp[z] = 0.0f;
    return v_load(tmp);
}

/* The first key of a key block (j0) that query t of sequence b sees within its window and its
 * document, relative to j0: 0 when it sees the block from its start. */
static inline int win_start(const mk_attn *a, int b, int t, int j0) {
    const int lo = mk__att_first_key(a, b, t) - j0;
    return lo > 0 ? lo : 0;
}

static inline float dot_hd(const float *a, const float *b, int hd) {
    vf s = v_zero();
    for (int d = 0; d < hd; d += MK_W) {
        const size_t k = (size_t)(hd - d < MK_W ? hd - d : MK_W);
        s = v_fmadd(v_load_k(a + d, k), v_load_k(b + d, k), s);
    }
    return v_hsum(s);
}

void MK_FN(att_fwd)(const mk_attn *a, float *out, float *lse, const float *q, const float *k,
                    const float *v, int b, int h, int qb, float *ws) {
    const int T = a->T, hd = a->head_dim, hdp = round_w(hd);
    const int kvh = h / (a->n_head / a->n_kv_head);
    const int t0 = qb * BR, nr = T - t0 < BR ? T - t0 : BR, t_last = t0 + nr - 1;
    const float scale = a->scale;
    float *Kt = ws, *Vp = Kt + (size_t)hd * BC, *S = Vp + (size_t)BC * hdp;
    float *O = S + (size_t)BR * BC, *M = O + (size_t)BR * hdp, *L = M + BR;
    const float *qr[BR];
    for (int r = 0; r < nr; r++) qr[r] = q + ((size_t)b * T + t0 + r) * a->ld_q + (size_t)h * hd;
    memset(O, 0, sizeof(float) * (size_t)nr * hdp);
    for (int r = 0; r < nr; r++) {
        M[r] = -INFINITY;
        L[r] = 0.0f;
    }
    const float *kb = k + (size_t)b * T * a->ld_k + (size_t)kvh * hd;
    const float *vb = v + (size_t)b * T * a->ld_v + (size_t)kvh * hd;
    /* the block's first row sees no key before its window's and its document's start (the later
     * rows' starts are no earlier): the key blocks wholly before it are skipped (the work grows
     * with T * window, not T^2, and with the documents' lengths) */
    const int j_first = mk__att_first_key(a, b, t0) / BC * BC;
    for (int j0 = j_first; j0 <= t_last; j0 += BC) {
        const int nc = t_last - j0 + 1 < BC ? t_last - j0 + 1 : BC;
        const int ncp = (nc + 2 * MK_W - 1) / (2 * MK_W) * (2 * MK_W);
        pack_t(Kt, kb + (size_t)j0 * a->ld_k, a->ld_k, nc, ncp, hd);
        pack_rows(Vp, vb + (size_t)j0 * a->ld_v, a->ld_v, nc, hd, hdp);
        att_logits(S, qr, Kt, hd, nr, t0, j0, nc);
        /* online softmax: scale, running max, exps (zero outside each row's visible keys
         * [st, valid): past its diagonal, and before its window) */
        for (int r = 0; r < nr; r++) {
            float *s = S + (size_t)r * BC;
            const int valid = t0 + r - j0 + 1 < nc ? t0 + r - j0 + 1 : nc, st = win_start(a, b, t0 + r, j0);
            const int i0 = st / MK_W * MK_W; /* the vector holding the row's first visible key */
            if (valid <= st) { /* no key of the block in view (st >= 0) */
                memset(s, 0, sizeof(float) * (size_t)ncp);
                continue;
            }
            if (a->softcap > 0.0f) /* soft-capped logits: scaled and capped here, sc then 1 */
                for (int j = st; j < valid; j++) s[j] = a->softcap * tanhf(s[j] * scale / a->softcap);
            for (int j = i0; j < st; j++) s[j] = -INFINITY; /* out of the max */
            const vf sc = v_set1(a->softcap > 0.0f ? 1.0f : scale);
            vf mx = v_set1(-INFINITY);
            int i = i0;
            for (; i + MK_W <= valid; i += MK_W) {
                const vf x = v_mul(v_load(s + i), sc);
                v_store(s + i, x);
                mx = v_max(mx, x);
            }
            if (i < valid) {
                const size_t kk = (size_t)(valid - i);
                const vf x = v_mul(v_load_n(s + i, kk), sc);
                v_store_n(s + i, x, kk);
                mx = v_max(mx, v_load_n_fill(s + i, kk, -INFINITY));
            }
            const float m_new = M[r] > v_hmax(mx) ? M[r] : v_hmax(mx);
            const float alpha = expf(M[r] - m_new);
            const vf mv = v_set1(m_new);
            vf sum = v_zero();
            for (i = 0; i < i0; i += MK_W) v_store(s + i, v_zero());
            for (; i + MK_W <= valid; i += MK_W) {
                vf e = v_exp(v_sub(v_load(s + i), mv));
                if (i < st) e = zero_below(e, st - i);
                v_store(s + i, e);
                sum = v_add(sum, e);
            }
            if (i < valid) {
                vf e = v_keep_n(v_exp(v_sub(v_load(s + i), mv)), (size_t)(valid - i));
                if (i < st) e = zero_below(e, st - i);
                v_store(s + i, e);
                sum = v_add(sum, e);
                i += MK_W;
            }
            for (; i < ncp; i += MK_W) v_store(s + i, v_zero());
            L[r] = L[r] * alpha + v_hsum(sum);
            M[r] = m_new;
            if (alpha != 1.0f) {
                float *o = O + (size_t)r * hdp;
                const vf av = v_set1(alpha);
                for (int d = 0; d < hdp; d += MK_W) v_store(o + d, v_mul(v_load(o + d), av));
            }
        }
        /* O += P V, four rows at a time over the keys from the first one's window start to the
         * last one's diagonal (the probabilities outside are zero) */
        for (int r = 0; r < nr; r += 4) {
            const int R = nr - r < 4 ? nr - r : 4, js = win_start(a, b, t0 + r, j0);
            int jm = t0 + r + R - 1 - j0 + 1;
            jm = jm < nc ? jm : nc;
            att_acc(O + (size_t)r * hdp, (size_t)hdp, S + (size_t)r * BC + js, BC, 1, Vp + (size_t)js * hdp,
                    (size_t)hdp, R, jm - js, hdp);
        }
    }
    for (int r = 0; r < nr; r++) {
        const int t = t0 + r;
        float *o = out + ((size_t)b * T + t) * a->ld_o + (size_t)h * hd;
        const float *src = O + (size_t)r * hdp;
        const vf inv = v_set1(1.0f / L[r]);
        for (int d = 0; d < hd; d += MK_W) {
            const size_t kk = (size_t)(hd - d < MK_W ? hd - d : MK_W);
            v_store_k(o + d, v_mul(v_load(src + d), inv), kk);
        }
        if (lse) lse[((size_t)b * a->n_head + h) * T + t] = M[r] + logf(L[r]);
    }
}

void MK_FN(att_bwd)(const mk_attn *a, float *dq, float *dk, float *dv, const float *dout,
                    const float *q, const float *k, const float *v, const float *out,
                    const float *lse, int b, int g, float *ws) {
    const int T = a->T, hd = a->head_dim, hdp = round_w(hd), H = a->n_head;
    const int grp = a->n_head / a->n_kv_head;
    const float scale = a->scale;
    float *Kt = ws, *Vt = Kt + (size_t)hd * BC, *Kp = Vt + (size_t)hd * BC;
    float *dKa = Kp + (size_t)BC * hdp, *dVa = dKa + (size_t)BC * hdp;
    float *Qp = dVa + (size_t)BC * hdp, *dOp = Qp + (size_t)BR * hdp, *dQb = dOp + (size_t)BR * hdp;
    float *P = dQb + (size_t)BR * hdp, *dS = P + (size_t)BR * BC, *D = dS + (size_t)BR * BC;
    const float *kb = k + (size_t)b * T * a->ld_k + (size_t)g * hd;
    const float *vb = v + (size_t)b * T * a->ld_v + (size_t)g * hd;

    /* dq rows of the group's heads start at zero; D = rowsum(dout * out) per head and row */
    for (int hh = 0; hh < grp; hh++) {
        const int h = g * grp + hh;
        for (int t = 0; t < T; t++) {
            const size_t tok = (size_t)b * T + t;
            memset(dq + tok * a->ld_q + (size_t)h * hd, 0, sizeof(float) * (size_t)hd);
            D[(size_t)hh * T + t] = dot_hd(dout + tok * a->ld_o + (size_t)h * hd,
                                           out + tok * a->ld_o + (size_t)h * hd, hd);
        }
    }
    const float *qr[BR], *dr[BR];
    for (int j0 = 0; j0 < T; j0 += BC) {
        const int nc = T - j0 < BC ? T - j0 : BC;
        const int ncp = (nc + 2 * MK_W - 1) / (2 * MK_W) * (2 * MK_W);
        pack_t(Kt, kb + (size_t)j0 * a->ld_k, a->ld_k, nc, ncp, hd);
        pack_t(Vt, vb + (size_t)j0 * a->ld_v, a->ld_v, nc, ncp, hd);
        pack_rows(Kp, kb + (size_t)j0 * a->ld_k, a->ld_k, nc, hd, hdp);
        memset(dKa, 0, sizeof(float) * (size_t)nc * hdp);
        memset(dVa, 0, sizeof(float) * (size_t)nc * hdp);
        /* rows from the block's last key's window end or next document on see no key of it */
        const int t_end = mk__att_rows_end(a, b, j0 + nc - 1);
        for (int hh = 0; hh < grp; hh++) {
            const int h = g * grp + hh;
            const float *lh = lse + ((size_t)b * H + h) * T;
            for (int t0 = j0 / BR * BR; t0 < t_end; t0 += BR) {
                const int nr = T - t0 < BR ? T - t0 : BR;
                for (int r = 0; r < nr; r++) {
                    const size_t tok = (size_t)b * T + t0 + r;
                    qr[r] = q + tok * a->ld_q + (size_t)h * hd;
                    dr[r] = dout + tok * a->ld_o + (size_t)h * hd;
                }
                pack_rows(Qp, qr[0], a->ld_q, nr, hd, hdp);
                pack_rows(dOp, dr[0], a->ld_o, nr, hd, hdp);
                att_logits(P, qr, Kt, hd, nr, t0, j0, nc);
                att_logits(dS, dr, Vt, hd, nr, t0, j0, nc);
                /* P = exp(scale s - lse); dS = scale P (dP - D); both zero outside the row's
                 * visible keys [st, valid) */
                const vf sc = v_set1(scale);
                for (int r = 0; r < nr; r++) {
                    const int t = t0 + r;
                    const int valid = t - j0 + 1 < nc ? t - j0 + 1 : nc, st = win_start(a, b, t, j0);
                    float *p = P + (size_t)r * BC, *ds = dS + (size_t)r * BC;
                    int i = 0;
                    if (valid > st && a->softcap > 0.0f) { /* through the cap: d/ds = 1 - tanh^2 */
                        const float cap = a->softcap, dd = D[(size_t)hh * T + t];
                        for (; i < st; i++) p[i] = ds[i] = 0.0f;
                        for (; i < valid; i++) {
                            const float th = tanhf(p[i] * scale / cap), e = expf(cap * th - lh[t]);
                            p[i] = e;
                            ds[i] = scale * (e * (ds[i] - dd)) * (1.0f - th * th);
                        }
                        for (; i < ncp && i % MK_W; i++) p[i] = ds[i] = 0.0f;
                    } else if (valid > st) {
                        const vf l = v_set1(lh[t]), dd = v_set1(D[(size_t)hh * T + t]);
                        for (const int i0 = st / MK_W * MK_W; i < i0; i += MK_W) {
                            v_store(p + i, v_zero());
                            v_store(ds + i, v_zero());
                        }
                        for (; i < valid; i += MK_W) {
                            vf e = v_exp(v_fmsub(v_load(p + i), sc, l));
                            if (valid - i < MK_W) e = v_keep_n(e, (size_t)(valid - i));
                            vf d = v_mul(sc, v_mul(e, v_sub(v_load(ds + i), dd)));
                            if (i < st) e = zero_below(e, st - i), d = zero_below(d, st - i);
                            v_store(p + i, e);
                            v_store(ds + i, d);
                        }
                    }
                    for (; i < ncp; i += MK_W) {
                        v_store(p + i, v_zero());
                        v_store(ds + i, v_zero());
                    }
                }
                /* dV += P^T dO and dK += dS^T Q, four keys at a time over the rows that see them:
                 * from the first key's diagonal to the last key's window or document end */
                for (int j = 0; j < nc; j += 4) {
                    const int R = nc - j < 4 ? nc - j : 4;
                    const int r0 = j0 + j - t0 > 0 ? j0 + j - t0 : 0;
                    const int e = mk__att_rows_end(a, b, j0 + j + R - 1) - t0, r1 = e < nr ? e : nr;
                    if (r0 >= r1) continue;
                    att_acc(dVa + (size_t)j * hdp, (size_t)hdp, P + (size_t)r0 * BC + j, 1, BC,
                            dOp + (size_t)r0 * hdp, (size_t)hdp, R, r1 - r0, hdp);
                    att_acc(dKa + (size_t)j * hdp, (size_t)hdp, dS + (size_t)r0 * BC + j, 1, BC,
                            Qp + (size_t)r0 * hdp, (size_t)hdp, R, r1 - r0, hdp);
                }
                /* dQ += dS K, into the rows of dq */
                memset(dQb, 0, sizeof(float) * (size_t)nr * hdp);
                for (int r = 0; r < nr; r += 4) {
                    const int R = nr - r < 4 ? nr - r : 4, js = win_start(a, b, t0 + r, j0);
                    int jm = t0 + r + R - 1 - j0 + 1;
                    jm = jm < nc ? jm : nc;
                    att_acc(dQb + (size_t)r * hdp, (size_t)hdp, dS + (size_t)r * BC + js, BC, 1,
                            Kp + (size_t)js * hdp, (size_t)hdp, R, jm - js, hdp);
                }
                for (int r = 0; r < nr; r++) {
                    float *o = dq + ((size_t)b * T + t0 + r) * a->ld_q + (size_t)h * hd;
                    const float *src = dQb + (size_t)r * hdp;
                    for (int d = 0; d < hd; d += MK_W) {
                        const size_t kk = (size_t)(hd - d < MK_W ? hd - d : MK_W);
                        v_store_k(o + d, v_add(v_load_k(o + d, kk), v_load(src + d)), kk);
                    }
                }
            }
        }
        for (int j = 0; j < nc; j++) {
            const size_t tok = (size_t)b * T + j0 + j;
            memcpy(dk + tok * a->ld_k + (size_t)g * hd, dKa + (size_t)j * hdp, sizeof(float) * (size_t)hd);
            memcpy(dv + tok * a->ld_v + (size_t)g * hd, dVa + (size_t)j * hdp, sizeof(float) * (size_t)hd);
        }
    }
}

#undef BR
#undef BC

const mk__isa MK_TABLE = {
    .gelu_fwd = MK_FN(gelu_fwd),
    .gelu_bwd = MK_FN(gelu_bwd),
    .bias_gelu_row = MK_FN(bias_gelu_row),
    .gelu_bwd_bias_row = MK_FN(gelu_bwd_bias_row),
    .silu_fwd = MK_FN(silu_fwd),
    .silu_bwd = MK_FN(silu_bwd),
    .swiglu_fwd = MK_FN(swiglu_fwd),
    .swiglu_bwd = MK_FN(swiglu_bwd),
    .geglu_fwd = MK_FN(geglu_fwd),
    .geglu_bwd = MK_FN(geglu_bwd),
    .ln_fwd_row = MK_FN(ln_fwd_row),
    .ln_bwd_row = MK_FN(ln_bwd_row),
    .rms_fwd_row = MK_FN(rms_fwd_row),
    .rms_bwd_row = MK_FN(rms_bwd_row),
    .softmax_row = MK_FN(softmax_row),
    .softmax_bwd_row = MK_FN(softmax_bwd_row),
    .xent_row = MK_FN(xent_row),
    .rope_head = MK_FN(rope_head),
    .colsum_rows = MK_FN(colsum_rows),
    .sum_squares = MK_FN(sum_squares),
    .row_add = MK_FN(row_add),
    .row_acc = MK_FN(row_acc),
    .exp = MK_FN(exp_array),
};
