/* models/kernels/mk_scalar.c — the scalar references of the model kernels (libm exp, sums in
 * double): the table every vector twin is tested against, one row or one chunk per call. */
#include <string.h>

#include "kernels/mk_internal.h"

static void gelu_fwd(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = zero__gelu(x[i]);
}

static void gelu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * zero__gelu_grad(x[i]);
}

static void bias_gelu_row(float *out, float *x, const float *bias, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float h = x[i] + bias[i];
        x[i] = h;
        out[i] = zero__gelu(h);
    }
}

static void gelu_bwd_bias_row(float *dx, float *part, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float g = dy[i] * zero__gelu_grad(x[i]);
        dx[i] = g;
        part[i] += g;
    }
}

static void silu_fwd(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = zero__silu(x[i]);
}

static void silu_bwd(float *dx, const float *dy, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = dy[i] * zero__silu_grad(x[i]);
}

static void swiglu_fwd(float *out, const float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = zero__swiglu(g[i], u[i]);
}

static void swiglu_bwd(float *dg, float *du, const float *dy, const float *g, const float *u,
                       size_t n) {
    for (size_t i = 0; i < n; i++) zero__swiglu_grad(dy[i], g[i], u[i], dg + i, du + i);
}

static void geglu_fwd(float *out, const float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = zero__gelu(g[i]) * u[i];
}

static void geglu_bwd(float *dg, float *du, const float *dy, const float *g, const float *u,
                      size_t n) {
    for (size_t i = 0; i < n; i++) {
        dg[i] = dy[i] * u[i] * zero__gelu_grad(g[i]);
        du[i] = dy[i] * zero__gelu(g[i]);
    }
}

static void ln_fwd_row(float *y, float *mean, float *rstd, const float *x, const float *w,
                       const float *b, int C, float eps) {
    double s = 0.0;
    for (int i = 0; i < C; i++) s += x[i];
    const double m = s / C;
    double v = 0.0;
    for (int i = 0; i < C; i++) v += (x[i] - m) * (x[i] - m);
    const float mf = (float)m, rf = (float)(1.0 / sqrt(v / C + eps));
    for (int i = 0; i < C; i++) y[i] = (x[i] - mf) * rf * w[i] + (b ? b[i] : 0.0f);
    *mean = mf;
    *rstd = rf;
}

static void ln_bwd_row(float *dx, float *wpart, float *bpart, const float *dy, const float *x,
                       const float *w, float mean, float rstd, int C, int acc) {
    double sd = 0.0, sdx = 0.0;
    for (int i = 0; i < C; i++) {
        const float dn = dy[i] * w[i];
        sd += dn;
        sdx += (double)dn * ((x[i] - mean) * rstd);
    }
    const float md = (float)(sd / C), mdx = (float)(sdx / C);
    for (int i = 0; i < C; i++) {
        const float xh = (x[i] - mean) * rstd;
        const float g = rstd * (dy[i] * w[i] - md - xh * mdx);
        dx[i] = acc ? dx[i] + g : g;
        if (wpart) wpart[i] += dy[i] * xh;
        if (bpart) bpart[i] += dy[i];
    }
}

static void rms_fwd_row(float *y, float *rstd, const float *x, const float *w, int C, float eps) {
    double s = 0.0;
    for (int i = 0; i < C; i++) s += (double)x[i] * x[i];
    const float rf = (float)(1.0 / sqrt(s / C + eps));
    for (int i = 0; i < C; i++) y[i] = w ? (x[i] * rf) * w[i] : x[i] * rf;
    *rstd = rf;
}

static void rms_bwd_row(float *dx, float *wpart, const float *dy, const float *x, const float *w,
                        float rstd, int C, int acc) {
    double sdx = 0.0;
    for (int i = 0; i < C; i++) {
        const float dn = w ? dy[i] * w[i] : dy[i];
        sdx += (double)dn * (x[i] * rstd);
    }
    const float mdx = (float)(sdx / C);
    for (int i = 0; i < C; i++) {
        const float xh = x[i] * rstd, dn = w ? dy[i] * w[i] : dy[i];
        const float g = rstd * (dn - xh * mdx);
        dx[i] = acc ? dx[i] + g : g;
        if (wpart) wpart[i] += dy[i] * xh;
    }
}

static void softmax_row(float *y, const float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0.0;
    for (int i = 0; i < n; i++) {
        y[i] = expf(x[i] - mx);
        s += y[i];
    }
    const float inv = (float)(1.0 / s);
    for (int i = 0; i < n; i++) y[i] *= inv;
}

static void softmax_bwd_row(float *dx, const float *dy, const float *y, int n) {
    double dot = 0.0;
    for (int i = 0; i < n; i++) dot += (double)y[i] * dy[i];
    const float d = (float)dot;
    for (int i = 0; i < n; i++) dx[i] = y[i] * (dy[i] - d);
}

static float xent_row(float *x, int V, int target, float dscale) {
    const float xt = x[target];
    float mx = x[0];
    for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0.0;
    for (int i = 0; i < V; i++) s += expf(x[i] - mx);
    const float loss = (float)((double)mx + log(s) - xt);
    if (dscale != 0.0f) {
        const float inv = (float)(1.0 / s);
        for (int i = 0; i < V; i++) x[i] = dscale * (expf(x[i] - mx) * inv);
        x[target] -= dscale;
    }
    return loss;
}

static void rope_head(float *x, const float *c, const float *s, int half, float sgn) {
    for (int i = 0; i < half; i++) zero__rope_pair(x + i, x + i + half, c[i], sgn * s[i]);
}

static void colsum_rows(float *part, const float *src, size_t rows, size_t cols, size_t ld) {
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++) part[j] += src[r * ld + j];
}

static double sum_squares(const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return s;
}

static void row_add(float *out, const float *a, const float *b, size_t n) {
    if (!b) {
        if (out != a) memmove(out, a, sizeof(float) * n);
        return;
    }
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

static void row_acc(float *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

static void exp_array(float *y, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = expf(x[i]);
}

const mk__isa mk__isa_scalar = {
    .gelu_fwd = gelu_fwd,
    .gelu_bwd = gelu_bwd,
    .bias_gelu_row = bias_gelu_row,
    .gelu_bwd_bias_row = gelu_bwd_bias_row,
    .silu_fwd = silu_fwd,
    .silu_bwd = silu_bwd,
    .swiglu_fwd = swiglu_fwd,
    .swiglu_bwd = swiglu_bwd,
    .geglu_fwd = geglu_fwd,
    .geglu_bwd = geglu_bwd,
    .ln_fwd_row = ln_fwd_row,
    .ln_bwd_row = ln_bwd_row,
    .rms_fwd_row = rms_fwd_row,
    .rms_bwd_row = rms_bwd_row,
    .softmax_row = softmax_row,
    .softmax_bwd_row = softmax_bwd_row,
    .xent_row = xent_row,
    .rope_head = rope_head,
    .colsum_rows = colsum_rows,
    .sum_squares = sum_squares,
    .row_add = row_add,
    .row_acc = row_acc,
    .exp = exp_array,
};
