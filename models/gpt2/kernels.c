/* models/gpt2/kernels.c — GPT-2's fp32 forward and backward kernels: embeddings, LayerNorm,
 * linear layers (cblas_sgemm), causal attention, GELU, cross-entropy. OpenMP for the rest. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "gpt2/gpt2_internal.h"

/* Columns per OpenMP task in column reductions: each column is summed over rows in row order,
 * so the result does not depend on how columns are split between threads. */
#define COLS_PER_TASK 128
/* Below this many elements of work a loop runs on one thread: waking a team costs more than it
 * saves, and far more on a busy machine where a woken thread may not get a core. */
#define PAR_MIN (1 << 18)

void gpt2__encoder_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B,
                       int T, int C) {
    const long N = (long)B * T;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (long n = 0; n < N; n++) {
        const float *e = wte + (size_t)tokens[n] * C, *p = wpe + (size_t)(n % T) * C;
        float *o = out + (size_t)n * C;
        for (int i = 0; i < C; i++) o[i] = e[i] + p[i];
    }
}

void gpt2__encoder_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B,
                       int T, int C) {
    const long N = (long)B * T;
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (int t = 0; t < T; t++) {
        float *dp = dwpe + (size_t)t * C;
        for (int b = 0; b < B; b++) {
            const float *d = dout + ((size_t)b * T + t) * C;
            for (int i = 0; i < C; i++) dp[i] += d[i];
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

void gpt2__layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                         const float *b, size_t N, int C) {
#pragma omp parallel for schedule(static) if (N * C >= PAR_MIN)
    for (size_t n = 0; n < N; n++) {
        const float *x = inp + n * C;
        double s = 0.0;
        for (int i = 0; i < C; i++) s += x[i];
        const double m = s / C;
        double v = 0.0;
        for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
        /* Rounded to fp32 first: backward recomputes x-hat from these very values. */
        const float mf = (float)m, rf = (float)(1.0 / sqrt(v / C + 1e-5));
        float *o = out + n * C;
        for (int i = 0; i < C; i++) o[i] = (x[i] - mf) * rf * w[i] + b[i];
        mean[n] = mf;
        rstd[n] = rf;
    }
}

void gpt2__layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                         const float *w, const float *mean, const float *rstd, size_t N, int C) {
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

void gpt2__matmul_fwd(float *out, const float *inp, const float *W, const float *bias, size_t N,
                      int IC, int OC, int accumulate) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, OC, IC, 1.0f, inp, IC, W, OC,
                accumulate ? 1.0f : 0.0f, out, OC);
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

void gpt2__matmul_bwd(float *dinp, float *dW, float *dbias, const float *dout, const float *inp,
                      const float *W, size_t N, int IC, int OC) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, IC, OC, 1.0f, dout, OC, W, OC, 0.0f,
                dinp, IC);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, IC, OC, (int)N, 1.0f, inp, IC, dout, OC, 1.0f,
                dW, OC);
    if (dbias) colsum_acc(dbias, dout, N, OC);
}

void gpt2__attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C, int H) {
    const int hs = C / H, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const float *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            float *a = att + ((size_t)b * H + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, scale, q, C3, q + C, C3,
                        0.0f, a, T);
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
            const float *v = qkv + (size_t)b * T * C3 + 2 * (size_t)C + (size_t)h * hs;
            const float *a = att + ((size_t)b * H + h) * T * T;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, v, C3, 0.0f,
                        out + (size_t)b * T * C + (size_t)h * hs, C);
        }
    }
}

void gpt2__attention_bwd(float *dqkv, float *scratch, const float *dout, const float *att,
                         const float *qkv, int B, int T, int C, int H) {
    const int hs = C / H, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < H; h++) {
            const size_t base = (size_t)b * T * C3 + (size_t)h * hs;
            const float *q = qkv + base, *k = q + C, *v = q + 2 * C;
            float *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
            const float *a = att + ((size_t)b * H + h) * T * T;
            const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, 1.0f, a, T, dy, C, 0.0f, dv, C3);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, hs, 1.0f, dy, C, v, C3, 0.0f,
                        scratch, T);
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
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, hs, T, scale, scratch, T, k, C3,
                        0.0f, dq, C3);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, hs, T, scale, scratch, T, q, C3,
                        0.0f, dk, C3);
        }
    }
}

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_A 0.044715f

/* tanh from one expf: glibc's tanhf (through expm1f) was a sixth of a training step. Absolute
 * error below 2e-7; exp overflow gives exactly +-1. */
static inline float fast_tanh(float u) { return 1.0f - 2.0f / (1.0f + expf(2.0f * u)); }

void gpt2__gelu_fwd(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        out[i] = 0.5f * x * (1.0f + fast_tanh(GELU_K * (x + GELU_A * x * x * x)));
    }
}

void gpt2__gelu_bwd(float *d, const float *inp, size_t n) {
#pragma omp parallel for schedule(static) if (n >= PAR_MIN)
    for (size_t i = 0; i < n; i++) {
        const float x = inp[i];
        const float th = fast_tanh(GELU_K * (x + GELU_A * x * x * x));
        const float g = 0.5f * (1.0f + th) +
                        0.5f * x * (1.0f - th * th) * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
        d[i] *= g;
    }
}

void gpt2__crossentropy(float *logits, float *losses, const int32_t *targets, size_t rows, int V,
                        float dscale) {
#pragma omp parallel for schedule(static) if (rows * V >= PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        float *x = logits + r * V;
        float mx = x[0];
        for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        double s = 0.0;
        for (int i = 0; i < V; i++) s += expf(x[i] - mx);
        const int y = targets[r];
        losses[r] = (float)((double)mx + log(s) - x[y]);
        if (dscale != 0.0f) {
            const float inv = (float)(1.0 / s);
            for (int i = 0; i < V; i++) x[i] = dscale * (expf(x[i] - mx) * inv);
            x[y] -= dscale;
        }
    }
}

double gpt2__sum(const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}
