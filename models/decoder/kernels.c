/* models/decoder/kernels.c — the decoder's fp32 kernels: embeddings, LayerNorm, RMSNorm, linear
 * layers (cblas_sgemm), grouped causal attention, RoPE, GELU, SwiGLU, masked cross-entropy.
 * OpenMP for the row-wise parts. Each has a scalar twin in kernels_ref.c. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "decoder/decoder_internal.h"

/* Columns per OpenMP task in column reductions: each column is summed over rows in row order,
 * so the result does not depend on how columns are split between threads. */
#define COLS_PER_TASK 128
/* Below this many elements of work a loop runs on one thread: waking a team costs more than it
 * saves, and far more on a busy machine where a woken thread may not get a core. */
#define PAR_MIN (1 << 18)

/* ---------------------------------------------------------------- embeddings */
void dec__embed_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C) {
    const long N = (long)B * T;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (long n = 0; n < N; n++) {
        const float *e = wte + (size_t)tokens[n] * C;
        float *o = out + (size_t)n * C;
        if (wpe) {
            const float *p = wpe + (size_t)(n % T) * C;
            for (int i = 0; i < C; i++) o[i] = e[i] + p[i];
        } else {
            memcpy(o, e, (size_t)C * sizeof(float));
        }
    }
}

void dec__embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C) {
    const long N = (long)B * T;
    if (dwpe) {
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
        for (int t = 0; t < T; t++) {
            float *dp = dwpe + (size_t)t * C;
            for (int b = 0; b < B; b++) {
                const float *d = dout + ((size_t)b * T + t) * C;
                for (int i = 0; i < C; i++) dp[i] += d[i];
            }
        }
    }
    /* Tokens repeat, so rows of dwte are shared: split by columns, rows in order. */
    const int ntask = (C + COLS_PER_TASK - 1) / COLS_PER_TASK;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (int task = 0; task < ntask; task++) {
        const int i0 = task * COLS_PER_TASK, i1 = i0 + COLS_PER_TASK < C ? i0 + COLS_PER_TASK : C;
        for (long n = 0; n < N; n++) {
            float *dw = dwte + (size_t)tokens[n] * C;
            const float *d = dout + (size_t)n * C;
            for (int i = i0; i < i1; i++) dw[i] += d[i];
        }
    }
}

/* ---------------------------------------------------------------- norms */
void dec__layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
                        size_t N, int C, double eps) {
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        double s = 0.0;
        for (int i = 0; i < C; i++) s += x[i];
        const double m = s / C;
        double v = 0.0;
        for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
        /* Rounded to fp32 first: backward recomputes x-hat from these very values. */
        const float mf = (float)m, rf = (float)(1.0 / sqrt(v / C + eps));
        float *o = out + n * C;
        for (int i = 0; i < C; i++) o[i] = (x[i] - mf) * rf * w[i] + b[i];
        mean[n] = mf;
        rstd[n] = rf;
    }
}

void dec__layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp, const float *w,
                        const float *mean, const float *rstd, size_t N, int C) {
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C, *d = dout + n * C;
        const float m = mean[n], r = rstd[n];
        double sd = 0.0, sdx = 0.0;
        for (int i = 0; i < C; i++) {
            const float dn = d[i] * w[i];
            sd += dn;
            sdx += (double)dn * ((x[i] - m) * r);
        }
        const float md = (float)(sd / C), mdx = (float)(sdx / C);
        float *di = dinp + n * C;
        for (int i = 0; i < C; i++) {
            const float xh = (x[i] - m) * r;
            di[i] += r * (d[i] * w[i] - md - xh * mdx);
        }
    }
    if (!dw) return; /* frozen gains and biases (LoRA): no gradient */
    const int ntask = (C + COLS_PER_TASK - 1) / COLS_PER_TASK;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (int task = 0; task < ntask; task++) {
        const int i0 = task * COLS_PER_TASK, i1 = i0 + COLS_PER_TASK < C ? i0 + COLS_PER_TASK : C;
        double aw[COLS_PER_TASK] = {0}, ab[COLS_PER_TASK] = {0};
        for (size_t n = 0; n < N; n++) {
            const float *x = inp + n * C, *d = dout + n * C;
            const float m = mean[n], r = rstd[n];
            for (int i = i0; i < i1; i++) {
                aw[i - i0] += d[i] * ((x[i] - m) * r);
                ab[i - i0] += d[i];
            }
        }
        for (int i = i0; i < i1; i++) {
            dw[i] += (float)aw[i - i0];
            db[i] += (float)ab[i - i0];
        }
    }
}

void dec__rmsnorm_fwd(float *out, size_t ldo, float *rstd, const float *inp, size_t ldi, const float *w, size_t N,
                      int G, int D, double eps) {
    const size_t rows = N * (size_t)G;
#pragma omp parallel for schedule(static) if (rows * D >= PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const size_t n = r / (size_t)G, g = r % (size_t)G;
        const float *x = inp + n * ldi + g * (size_t)D;
        float *y = out + n * ldo + g * (size_t)D;
        double s = 0.0;
        for (int i = 0; i < D; i++) s += (double)x[i] * x[i];
        const float rf = (float)(1.0 / sqrt(s / D + eps));
        for (int i = 0; i < D; i++) y[i] = w[i] * (x[i] * rf);
        rstd[r] = rf;
    }
}

void dec__rmsnorm_bwd(float *dinp, size_t ldd, const float *dout, size_t lddo, const float *inp, size_t ldi,
                      const float *w, const float *rstd, float *dw, size_t N, int G, int D, int accumulate) {
    const size_t rows = N * (size_t)G;
    /* dw first: in place (dinp == dout) the row pass below overwrites dout. */
    const int ntask = dw ? (D + COLS_PER_TASK - 1) / COLS_PER_TASK : 0; /* dw NULL: a frozen gain */
#pragma omp parallel for schedule(static) if (rows * D >= PAR_MIN)
    for (int task = 0; task < ntask; task++) {
        const int i0 = task * COLS_PER_TASK, i1 = i0 + COLS_PER_TASK < D ? i0 + COLS_PER_TASK : D;
        double aw[COLS_PER_TASK] = {0};
        for (size_t r = 0; r < rows; r++) {
            const size_t n = r / (size_t)G, g = r % (size_t)G;
            const float *x = inp + n * ldi + g * (size_t)D, *d = dout + n * lddo + g * (size_t)D;
            const float rf = rstd[r];
            for (int i = i0; i < i1; i++) aw[i - i0] += d[i] * (x[i] * rf);
        }
        for (int i = i0; i < i1; i++) dw[i] += (float)aw[i - i0];
    }
#pragma omp parallel for schedule(static) if (rows * D >= PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const size_t n = r / (size_t)G, g = r % (size_t)G;
        const float *x = inp + n * ldi + g * (size_t)D, *d = dout + n * lddo + g * (size_t)D;
        float *di = dinp + n * ldd + g * (size_t)D;
        const float rf = rstd[r];
        double s = 0.0;
        for (int i = 0; i < D; i++) s += (double)(d[i] * w[i]) * (x[i] * rf);
        const float mdx = (float)(s / D);
        /* d x_i = r (w_i d_i - xhat_i mean(w d xhat)) */
        if (accumulate)
            for (int i = 0; i < D; i++) di[i] += rf * (d[i] * w[i] - (x[i] * rf) * mdx);
        else
            for (int i = 0; i < D; i++) di[i] = rf * (d[i] * w[i] - (x[i] * rf) * mdx);
    }
}

/* ---------------------------------------------------------------- linear layers */
void dec__matmul_fwd(float *out, const float *inp, const float *W, const float *bias, size_t N, int IC, int OC,
                     int wt, int accumulate) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, wt ? CblasTrans : CblasNoTrans, (int)N, OC, IC, 1.0f, inp, IC, W,
                wt ? IC : OC, accumulate ? 1.0f : 0.0f, out, OC);
    if (!bias) return;
#pragma omp parallel for schedule(static) if (N * OC >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
        float *o = out + n * OC;
        for (int j = 0; j < OC; j++) o[j] += bias[j];
    }
}

/* dst[j] += sum over rows of src[n][j] (src: N rows of `cols`). */
static void colsum_acc(float *dst, const float *src, size_t N, int cols) {
    const int ntask = (cols + COLS_PER_TASK - 1) / COLS_PER_TASK;
#pragma omp parallel for schedule(static) if (N * cols >= PAR_MIN)
    for (int task = 0; task < ntask; task++) {
        const int j0 = task * COLS_PER_TASK, j1 = j0 + COLS_PER_TASK < cols ? j0 + COLS_PER_TASK : cols;
        double acc[COLS_PER_TASK] = {0};
        for (size_t n = 0; n < N; n++) {
            const float *s = src + n * cols;
            for (int j = j0; j < j1; j++) acc[j - j0] += s[j];
        }
        for (int j = j0; j < j1; j++) dst[j] += (float)acc[j - j0];
    }
}

void dec__matmul_bwd(float *dinp, float *dW, float *dbias, const float *dout, const float *inp, const float *W,
                     size_t N, int IC, int OC, int wt) {
    if (wt) { /* W (OC, IC): dinp = dout W, dW += dout^T inp */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, IC, OC, 1.0f, dout, OC, W, IC, 0.0f, dinp, IC);
        if (dW) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, (int)N, 1.0f, dout, OC, inp, IC, 1.0f, dW, IC);
    } else { /* W (IC, OC): dinp = dout W^T, dW += inp^T dout */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, IC, OC, 1.0f, dout, OC, W, OC, 0.0f, dinp, IC);
        if (dW) cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, IC, OC, (int)N, 1.0f, inp, IC, dout, OC, 1.0f, dW, OC);
    }
    if (dbias) colsum_acc(dbias, dout, N, OC);
}

/* ---------------------------------------------------------------- attention */
void dec__attention_fwd(float *out, float *att, const float *qkv, int B, int T, int H, int G, int D) {
    const int Q = H * D, KV = G * D, QKV = Q + 2 * KV, rep = H / G;
    const float scale = 1.0f / sqrtf((float)D);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const float *q = qkv + (size_t)b * T * QKV + (size_t)h * D;
            const float *k = qkv + (size_t)b * T * QKV + Q + (size_t)(h / rep) * D;
            float *a = att + ((size_t)b * H + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, scale, q, QKV, k, QKV, 0.0f, a, T);
        }
    }
    const long rows = (long)B * H * T;
#pragma omp parallel for schedule(static) if (rows * T >= PAR_MIN)
    for (long r = 0; r < rows; r++) {
        const int t = (int)(r % T);
        float *a = att + (size_t)r * T;
        float mx = a[0];
        for (int j = 1; j <= t; j++) mx = a[j] > mx ? a[j] : mx;
        double s = 0.0;
        for (int j = 0; j <= t; j++) {
            a[j] = expf(a[j] - mx);
            s += a[j];
        }
        const float inv = (float)(1.0 / s);
        for (int j = 0; j <= t; j++) a[j] *= inv;
        for (int j = t + 1; j < T; j++) a[j] = 0.0f;
    }
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const float *v = qkv + (size_t)b * T * QKV + Q + KV + (size_t)(h / rep) * D;
            const float *a = att + ((size_t)b * H + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, a, T, v, QKV, 0.0f,
                        out + (size_t)b * T * Q + (size_t)h * D, Q);
        }
    }
}

void dec__attention_bwd(float *dqkv, float *scratch, const float *dout, const float *att, const float *qkv, int B,
                        int T, int H, int G, int D) {
    const int Q = H * D, KV = G * D, QKV = Q + 2 * KV, rep = H / G;
    const float scale = 1.0f / sqrtf((float)D);
    /* k and v heads gather the gradients of their `rep` query heads: added, so zero them first */
    const size_t N = (size_t)B * T;
    for (size_t n = 0; n < N; n++) memset(dqkv + n * QKV + Q, 0, 2 * (size_t)KV * sizeof(float));
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const size_t base = (size_t)b * T * QKV;
            const size_t qo = (size_t)h * D, ko = Q + (size_t)(h / rep) * D, vo = ko + KV;
            const float *q = qkv + base + qo, *k = qkv + base + ko, *v = qkv + base + vo;
            float *dq = dqkv + base + qo, *dk = dqkv + base + ko, *dv = dqkv + base + vo;
            const float *a = att + ((size_t)b * H + h) * T * T;
            const float *dy = dout + (size_t)b * T * Q + (size_t)h * D;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, a, T, dy, Q, 1.0f, dv, QKV);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.0f, dy, Q, v, QKV, 0.0f, scratch, T);
            /* Softmax backward, in place: d_j = p_j (d_j - sum_k p_k d_k), zero above the diagonal. */
#pragma omp parallel for schedule(static) if ((long)T * T >= PAR_MIN)
            for (int t = 0; t < T; t++) {
                const float *p = a + (size_t)t * T;
                float *d = scratch + (size_t)t * T;
                double dot = 0.0;
                for (int j = 0; j <= t; j++) dot += (double)p[j] * d[j];
                const float df = (float)dot;
                for (int j = 0; j <= t; j++) d[j] = p[j] * (d[j] - df);
                for (int j = t + 1; j < T; j++) d[j] = 0.0f;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, scale, scratch, T, k, QKV, 0.0f, dq, QKV);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, scale, scratch, T, q, QKV, 1.0f, dk, QKV);
        }
    }
}

/* ---------------------------------------------------------------- RoPE */
void dec__rope_fwd(float *x, size_t ld, size_t N, int T, int heads, int D, const float *cos, const float *sin) {
    const int h2 = D / 2;
#pragma omp parallel for schedule(static) if (N * heads * D >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
        const float *c = cos + (n % (size_t)T) * h2, *s = sin + (n % (size_t)T) * h2;
        for (int h = 0; h < heads; h++) {
            float *p = x + n * ld + (size_t)h * D;
            for (int i = 0; i < h2; i++) {
                const float x1 = p[i], x2 = p[i + h2];
                p[i] = x1 * c[i] - x2 * s[i];
                p[i + h2] = x2 * c[i] + x1 * s[i];
            }
        }
    }
}

void dec__rope_bwd(float *dx, size_t ld, size_t N, int T, int heads, int D, const float *cos, const float *sin) {
    const int h2 = D / 2;
#pragma omp parallel for schedule(static) if (N * heads * D >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
        const float *c = cos + (n % (size_t)T) * h2, *s = sin + (n % (size_t)T) * h2;
        for (int h = 0; h < heads; h++) {
            float *p = dx + n * ld + (size_t)h * D;
            for (int i = 0; i < h2; i++) {
                const float d1 = p[i], d2 = p[i + h2];
                p[i] = d1 * c[i] + d2 * s[i];
                p[i + h2] = d2 * c[i] - d1 * s[i];
            }
        }
    }
}

/* ---------------------------------------------------------------- activations */
#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* tanh from one expf: glibc's tanhf (through expm1f) was a sixth of a training step. Absolute
 * error below 2e-7; exp overflow gives exactly +-1. */
static inline float fast_tanh(float u) { return 1.0f - 2.0f / (1.0f + expf(2.0f * u)); }

void dec__gelu_fwd(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + fast_tanh(GELU_K * (x + GELU_A * x * x * x)));
    }
}

void dec__gelu_bwd(float *d, const float *inp, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float th = fast_tanh(GELU_K * (x + GELU_A * x * x * x));
        const float g = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
        d[i] *= g;
    }
}

/* sigmoid(x) = 1 / (1 + e^-x); e^-x overflows to inf for x < -88, giving exactly 0. */
static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void dec__swiglu_fwd(float *h, const float *gu, size_t N, int F) {
#pragma omp parallel for schedule(static) if (N * F >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
        const float *g = gu + n * 2 * (size_t)F, *u = g + F;
        float *o = h + n * (size_t)F;
        for (int i = 0; i < F; i++) o[i] = g[i] * sigmoidf(g[i]) * u[i];
    }
}

void dec__swiglu_bwd(float *dgu, const float *dh, const float *gu, size_t N, int F) {
#pragma omp parallel for schedule(static) if (N * F >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
        const float *g = gu + n * 2 * (size_t)F, *u = g + F, *d = dh + n * (size_t)F;
        float *dg = dgu + n * 2 * (size_t)F, *du = dg + F;
        for (int i = 0; i < F; i++) {
            const float s = sigmoidf(g[i]);
            du[i] = d[i] * (g[i] * s);
            dg[i] = d[i] * u[i] * (s * (1.0f + g[i] * (1.0f - s)));
        }
    }
}

/* ---------------------------------------------------------------- loss */
void dec__crossentropy(float *logits, float *losses, const int32_t *targets, size_t rows, int V, float dscale) {
#pragma omp parallel for schedule(static) if (rows * V >= PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        float *x = logits + r * V;
        const int y = targets[r];
        if (y < 0) { /* not counted: no loss, no gradient */
            losses[r] = 0.0f;
            if (dscale != 0.0f) memset(x, 0, (size_t)V * sizeof(float));
            continue;
        }
        float mx = x[0];
        for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        double s = 0.0;
        for (int i = 0; i < V; i++) s += expf(x[i] - mx);
        losses[r] = (float)((double)mx + log(s) - x[y]);
        if (dscale != 0.0f) {
            const float inv = (float)(1.0 / s);
            for (int i = 0; i < V; i++) x[i] = dscale * (expf(x[i] - mx) * inv);
            x[y] -= dscale;
        }
    }
}

double dec__sum(const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

/* ---------------------------------------------------------------- RoPE tables */
void dec__rope_tables(const dec_config *c, int T, float *cosv, float *sinv) {
    const int D = c->head_dim, h2 = D / 2;
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < h2; i++) {
        /* transformers: 1 / theta ** (arange(0, D, 2).float() / D), in fp32 */
        const float e = (float)(2 * i) / (float)D;
        float inv = 1.0f / (float)pow(c->rope_theta, (double)e);
        if (c->rope_type == DEC_ROPE_LINEAR) {
            inv = (float)(inv / c->rope_factor);
        } else if (c->rope_type == DEC_ROPE_LLAMA3) {
            const double old = c->rope_orig_ctx, lo = c->rope_low_freq, hi = c->rope_high_freq, f = c->rope_factor;
            const double low_wl = old / lo, high_wl = old / hi;
            const double wl = 2.0 * pi / inv;
            if (wl > low_wl) {
                inv = (float)(inv / f);
            } else if (!(wl < high_wl)) { /* between the bands: interpolate */
                const double smooth = (old / wl - lo) / (hi - lo);
                inv = (float)((1.0 - smooth) * inv / f + smooth * inv);
            }
        }
        for (int t = 0; t < T; t++) {
            const float a = (float)t * inv;
            cosv[(size_t)t * h2 + i] = (float)cos((double)a);
            sinv[(size_t)t * h2 + i] = (float)sin((double)a);
        }
    }
}
