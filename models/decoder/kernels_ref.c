/* models/decoder/kernels_ref.c — the scalar twins of the decoder's kernels: one thread, plain
 * loops, no BLAS, written from the formulas; test_decoder_kernels checks kernels.c against them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder_internal.h"

void dec__ref_embed_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const size_t n = (size_t)b * T + t;
            for (int i = 0; i < C; i++)
                out[n * C + i] = wte[(size_t)tokens[n] * C + i] + (wpe ? wpe[(size_t)t * C + i] : 0.0f);
        }
}

void dec__ref_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C) {
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const size_t n = (size_t)b * T + t;
            for (int i = 0; i < C; i++) {
                dwte[(size_t)tokens[n] * C + i] += dout[n * C + i];
                if (dwpe) dwpe[(size_t)t * C + i] += dout[n * C + i];
            }
        }
}

void dec__ref_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                            size_t N, int C, double eps) {
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        double m = 0.0, v = 0.0;
        for (int i = 0; i < C; i++) m += x[i];
        m /= C;
        for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
        mean[n] = (float)m;
        rstd[n] = (float)(1.0 / sqrt(v / C + eps));
        for (int i = 0; i < C; i++) out[n * C + i] = (x[i] - mean[n]) * rstd[n] * w[i] + b[i];
    }
}

void dec__ref_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                            const float *mean, const float *rstd, size_t N, int C) {
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C, *d = dout + n * C;
        double sd = 0.0, sdx = 0.0;
        for (int i = 0; i < C; i++) {
            const double xh = ((double)x[i] - mean[n]) * rstd[n];
            sd += (double)d[i] * w[i];
            sdx += (double)d[i] * w[i] * xh;
            if (dw) dw[i] += (float)(d[i] * xh); /* NULL: frozen (LoRA) */
            if (db) db[i] += d[i];
        }
        for (int i = 0; i < C; i++) {
            const double xh = ((double)x[i] - mean[n]) * rstd[n];
            dinp[n * C + i] += (float)(rstd[n] * ((double)d[i] * w[i] - sd / C - xh * sdx / C));
        }
    }
}

void dec__ref_rmsnorm_fwd(float *out, size_t ldo, float *rstd, const float *inp, size_t ldi, const float *w, size_t N,
                          int G, int D, double eps) {
    for (size_t n = 0; n < N; n++)
        for (int g = 0; g < G; g++) {
            const float *x = inp + n * ldi + (size_t)g * D;
            double s = 0.0;
            for (int i = 0; i < D; i++) s += (double)x[i] * x[i];
            const float r = (float)(1.0 / sqrt(s / D + eps));
            rstd[n * G + g] = r;
            for (int i = 0; i < D; i++) out[n * ldo + (size_t)g * D + i] = w[i] * (x[i] * r);
        }
}

void dec__ref_rmsnorm_bwd(float *dinp, size_t ldd, const float *dout, size_t lddo, const float *inp, size_t ldi,
                          const float *w, const float *rstd, float *dw, size_t N, int G, int D, int accumulate) {
    for (size_t n = 0; n < N; n++)
        for (int g = 0; g < G; g++) {
            const float *x = inp + n * ldi + (size_t)g * D, *d = dout + n * lddo + (size_t)g * D;
            const double r = rstd[n * G + g];
            double s = 0.0;
            for (int i = 0; i < D; i++) {
                s += (double)d[i] * w[i] * x[i] * r;
                if (dw) dw[i] += (float)(d[i] * x[i] * r); /* NULL: frozen (LoRA) */
            }
            float *tmp = malloc((size_t)D * sizeof(float)); /* the row is read before it is written */
            if (!tmp) return;
            for (int i = 0; i < D; i++) tmp[i] = (float)(r * ((double)d[i] * w[i] - x[i] * r * s / D));
            float *di = dinp + n * ldd + (size_t)g * D;
            for (int i = 0; i < D; i++) di[i] = accumulate ? di[i] + tmp[i] : tmp[i];
            free(tmp);
        }
}

void dec__ref_matmul_fwd(float *out, const float *inp, const float *W, const float *bias, size_t N, int IC, int OC,
                         int wt, int accumulate) {
    for (size_t n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0.0;
            for (int i = 0; i < IC; i++) s += (double)inp[n * IC + i] * (wt ? W[(size_t)o * IC + i] : W[(size_t)i * OC + o]);
            const float v = (float)s + (bias ? bias[o] : 0.0f);
            out[n * OC + o] = accumulate ? out[n * OC + o] + v : v;
        }
}

void dec__ref_matmul_bwd(float *dinp, float *dW, float *dbias, const float *dout, const float *inp, const float *W,
                         size_t N, int IC, int OC, int wt) {
    for (size_t n = 0; n < N; n++)
        for (int i = 0; i < IC; i++) {
            double s = 0.0;
            for (int o = 0; o < OC; o++) s += (double)dout[n * OC + o] * (wt ? W[(size_t)o * IC + i] : W[(size_t)i * OC + o]);
            dinp[n * IC + i] = (float)s;
        }
    for (int i = 0; dW && i < IC; i++) /* dW NULL: a frozen weight (LoRA) */
        for (int o = 0; o < OC; o++) {
            double s = 0.0;
            for (size_t n = 0; n < N; n++) s += (double)inp[n * IC + i] * dout[n * OC + o];
            if (wt) dW[(size_t)o * IC + i] += (float)s;
            else dW[(size_t)i * OC + o] += (float)s;
        }
    if (dbias)
        for (int o = 0; o < OC; o++) {
            double s = 0.0;
            for (size_t n = 0; n < N; n++) s += dout[n * OC + o];
            dbias[o] += (float)s;
        }
}

void dec__ref_attention_fwd(float *out, float *att, const float *qkv, int B, int T, int H, int G, int D) {
    const int Q = H * D, KV = G * D, QKV = Q + 2 * KV, rep = H / G;
    const double scale = 1.0 / sqrt((double)D);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int g = h / rep;
            for (int t = 0; t < T; t++) {
                const float *q = qkv + ((size_t)b * T + t) * QKV + (size_t)h * D;
                float *a = att + (((size_t)b * H + h) * T + t) * T;
                double mx = -INFINITY, sum = 0.0;
                double sc[T];
                for (int j = 0; j <= t; j++) {
                    const float *k = qkv + ((size_t)b * T + j) * QKV + Q + (size_t)g * D;
                    double s = 0.0;
                    for (int i = 0; i < D; i++) s += (double)q[i] * k[i];
                    sc[j] = s * scale;
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int j = 0; j <= t; j++) sum += exp(sc[j] - mx);
                for (int j = 0; j < T; j++) a[j] = j <= t ? (float)(exp(sc[j] - mx) / sum) : 0.0f;
                float *o = out + ((size_t)b * T + t) * Q + (size_t)h * D;
                for (int i = 0; i < D; i++) {
                    double s = 0.0;
                    for (int j = 0; j <= t; j++) s += (double)a[j] * qkv[((size_t)b * T + j) * QKV + Q + KV + (size_t)g * D + i];
                    o[i] = (float)s;
                }
            }
        }
}

void dec__ref_attention_bwd(float *dqkv, float *scratch, const float *dout, const float *att, const float *qkv, int B,
                            int T, int H, int G, int D) {
    const int Q = H * D, KV = G * D, QKV = Q + 2 * KV, rep = H / G;
    const double scale = 1.0 / sqrt((double)D);
    memset(dqkv, 0, (size_t)B * T * QKV * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const int g = h / rep;
            const float *a = att + ((size_t)b * H + h) * T * T;
            /* d scores (T, T) into scratch */
            for (int t = 0; t < T; t++) {
                const float *dy = dout + ((size_t)b * T + t) * Q + (size_t)h * D;
                double dot = 0.0;
                for (int j = 0; j <= t; j++) {
                    const float *v = qkv + ((size_t)b * T + j) * QKV + Q + KV + (size_t)g * D;
                    double dp = 0.0;
                    for (int i = 0; i < D; i++) dp += (double)dy[i] * v[i];
                    scratch[(size_t)t * T + j] = (float)dp;
                    dot += a[(size_t)t * T + j] * dp;
                }
                for (int j = 0; j < T; j++)
                    scratch[(size_t)t * T + j] = j <= t ? (float)(a[(size_t)t * T + j] * (scratch[(size_t)t * T + j] - dot)) : 0.0f;
            }
            for (int t = 0; t < T; t++)
                for (int i = 0; i < D; i++) {
                    double dq = 0.0, dk = 0.0, dv = 0.0;
                    for (int j = 0; j < T; j++) {
                        dq += (double)scratch[(size_t)t * T + j] * qkv[((size_t)b * T + j) * QKV + Q + (size_t)g * D + i];
                        dk += (double)scratch[(size_t)j * T + t] * qkv[((size_t)b * T + j) * QKV + (size_t)h * D + i];
                        dv += (double)a[(size_t)j * T + t] * dout[((size_t)b * T + j) * Q + (size_t)h * D + i];
                    }
                    dqkv[((size_t)b * T + t) * QKV + (size_t)h * D + i] = (float)(dq * scale);
                    dqkv[((size_t)b * T + t) * QKV + Q + (size_t)g * D + i] += (float)(dk * scale);
                    dqkv[((size_t)b * T + t) * QKV + Q + KV + (size_t)g * D + i] += (float)dv;
                }
        }
}

void dec__ref_rope_fwd(float *x, size_t ld, size_t N, int T, int heads, int D, const float *cos, const float *sin) {
    const int h2 = D / 2;
    for (size_t n = 0; n < N; n++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < h2; i++) {
                float *p = x + n * ld + (size_t)h * D;
                const float c = cos[(n % T) * h2 + i], s = sin[(n % T) * h2 + i];
                const float a = p[i], b = p[i + h2];
                p[i] = a * c - b * s;
                p[i + h2] = b * c + a * s;
            }
}

void dec__ref_rope_bwd(float *dx, size_t ld, size_t N, int T, int heads, int D, const float *cos, const float *sin) {
    const int h2 = D / 2;
    for (size_t n = 0; n < N; n++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < h2; i++) {
                float *p = dx + n * ld + (size_t)h * D;
                const float c = cos[(n % T) * h2 + i], s = sin[(n % T) * h2 + i];
                const float a = p[i], b = p[i + h2];
                p[i] = a * c + b * s;
                p[i + h2] = b * c - a * s;
            }
}

void dec__ref_gelu_fwd(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double x = inp[i];
        out[i] = (float)(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
    }
}

void dec__ref_gelu_bwd(float *d, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double x = inp[i], k = 0.7978845608028654, a = 0.044715;
        const double th = tanh(k * (x + a * x * x * x));
        d[i] = (float)(d[i] * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * a * x * x)));
    }
}

void dec__ref_swiglu_fwd(float *h, const float *gu, size_t N, int F) {
    for (size_t n = 0; n < N; n++)
        for (int i = 0; i < F; i++) {
            const double g = gu[n * 2 * F + i], u = gu[n * 2 * F + F + i];
            h[n * F + i] = (float)(g / (1.0 + exp(-g)) * u);
        }
}

void dec__ref_swiglu_bwd(float *dgu, const float *dh, const float *gu, size_t N, int F) {
    for (size_t n = 0; n < N; n++)
        for (int i = 0; i < F; i++) {
            const double g = gu[n * 2 * F + i], u = gu[n * 2 * F + F + i], d = dh[n * F + i];
            const double s = 1.0 / (1.0 + exp(-g));
            dgu[n * 2 * F + i] = (float)(d * u * (s + g * s * (1.0 - s)));
            dgu[n * 2 * F + F + i] = (float)(d * g * s);
        }
}

void dec__ref_crossentropy(float *logits, float *losses, const int32_t *targets, size_t rows, int V, float dscale) {
    for (size_t r = 0; r < rows; r++) {
        float *x = logits + r * V;
        const int y = targets[r];
        if (y < 0) {
            losses[r] = 0.0f;
            for (int i = 0; i < V && dscale != 0.0f; i++) x[i] = 0.0f;
            continue;
        }
        double mx = x[0], s = 0.0;
        for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        for (int i = 0; i < V; i++) s += exp(x[i] - mx);
        losses[r] = (float)(mx + log(s) - x[y]);
        if (dscale != 0.0f) {
            for (int i = 0; i < V; i++) x[i] = (float)(dscale * (exp(x[i] - mx) / s - (i == y)));
        }
    }
}
