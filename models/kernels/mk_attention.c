/* models/kernels/mk_attention.c — the scalar reference of causal GQA attention (optionally within a
 * sliding window and within documents): one query row at a time with its logits materialized (dots and sums in double),
 * forward and backward. */
#include <math.h>
#include <string.h>

#include "kernels/mk_internal.h"

static double dot(const float *a, const float *b, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

void mk__att_fwd_row_scalar(const mk_attn *a, float *out, float *lse, const float *q,
                            const float *k, const float *v, int b, int h, int t, float *ws) {
    const int T = a->T, hd = a->head_dim, kvh = h / (a->n_head / a->n_kv_head);
    const size_t tok = (size_t)b * T + t;
    const float *qt = q + tok * a->ld_q + (size_t)h * hd;
    const int j_lo = mk__att_first_key(a, b, t);
    float mx = -INFINITY;
    for (int j = j_lo; j <= t; j++) {
        const float *kj = k + ((size_t)b * T + j) * a->ld_k + (size_t)kvh * hd;
        ws[j] = (float)(a->scale * dot(qt, kj, hd));
        if (a->softcap > 0.0f) ws[j] = a->softcap * tanhf(ws[j] / a->softcap);
        mx = ws[j] > mx ? ws[j] : mx;
    }
    double l = 0.0, acc[MK_ATT_MAX_HD] = {0};
    for (int j = j_lo; j <= t; j++) {
        const float p = expf(ws[j] - mx);
        const float *vj = v + ((size_t)b * T + j) * a->ld_v + (size_t)kvh * hd;
        l += p;
        for (int d = 0; d < hd; d++) acc[d] += (double)p * vj[d];
    }
    float *o = out + tok * a->ld_o + (size_t)h * hd;
    for (int d = 0; d < hd; d++) o[d] = (float)(acc[d] / l);
    if (lse) lse[((size_t)b * a->n_head + h) * T + t] = (float)(mx + log(l));
}

static const float *kj_of(const mk_attn *a, const float *k, size_t kt, int g) {
    return k + kt * a->ld_k + (size_t)g * a->head_dim;
}

void mk__att_bwd_scalar(const mk_attn *a, float *dq, float *dk, float *dv, const float *dout,
                        const float *q, const float *k, const float *v, const float *out,
                        const float *lse, int b, int g, float *ws) {
    (void)out; /* the reference forms D = sum p dp itself; the blockwise twin uses dout . out */
    const int T = a->T, hd = a->head_dim, grp = a->n_head / a->n_kv_head;
    float *p = ws, *dp = ws + T;
    for (int t = 0; t < T; t++) {
        const size_t tok = (size_t)b * T + t;
        memset(dk + tok * a->ld_k + (size_t)g * hd, 0, sizeof(float) * (size_t)hd);
        memset(dv + tok * a->ld_v + (size_t)g * hd, 0, sizeof(float) * (size_t)hd);
    }
    for (int hh = 0; hh < grp; hh++) {
        const int h = g * grp + hh;
        for (int t = 0; t < T; t++) {
            const size_t tok = (size_t)b * T + t;
            const float *qt = q + tok * a->ld_q + (size_t)h * hd;
            const float *dot_ = dout + tok * a->ld_o + (size_t)h * hd;
            const float l = lse[((size_t)b * a->n_head + h) * T + t];
            const int j_lo = mk__att_first_key(a, b, t);
            double D = 0.0;
            for (int j = j_lo; j <= t; j++) {
                const size_t kt = (size_t)b * T + j;
                float s = (float)(a->scale * dot(qt, k + kt * a->ld_k + (size_t)g * hd, hd));
                if (a->softcap > 0.0f) s = a->softcap * tanhf(s / a->softcap);
                p[j] = expf(s - l);
                dp[j] = (float)dot(dot_, v + kt * a->ld_v + (size_t)g * hd, hd);
                D += (double)p[j] * dp[j];
            }
            double acc[MK_ATT_MAX_HD] = {0};
            for (int j = j_lo; j <= t; j++) {
                const size_t kt = (size_t)b * T + j;
                float ds = a->scale * (p[j] * (dp[j] - (float)D));
                if (a->softcap > 0.0f) { /* d cap tanh(s/cap) / ds = 1 - tanh^2 */
                    const float th = tanhf((float)(a->scale * dot(qt, kj_of(a, k, kt, g), hd)) / a->softcap);
                    ds *= 1.0f - th * th;
                }
                const float *kj = k + kt * a->ld_k + (size_t)g * hd;
                float *dkj = dk + kt * a->ld_k + (size_t)g * hd, *dvj = dv + kt * a->ld_v + (size_t)g * hd;
                for (int d = 0; d < hd; d++) {
                    acc[d] += (double)ds * kj[d];
                    dkj[d] += ds * qt[d];
                    dvj[d] += p[j] * dot_[d];
                }
            }
            float *dqt = dq + tok * a->ld_q + (size_t)h * hd;
            for (int d = 0; d < hd; d++) dqt[d] = (float)acc[d];
        }
    }
}
