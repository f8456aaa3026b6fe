/* The device layer's GEMM (kernel ZERO__K_GEMM: the column-major call a GPU hands cuBLASLt,
 * src/device/internal.h) on the cpu and fake backends (ZERO_TEST_DEVICE=cuda: on a GPU, through
 * cuBLASLt, from scripts/gpu_check.sh):
 *   - every combination of transposes, leading dimensions past the rows, alpha, beta (0: C not
 *     read, NaN there) and the bias, fp32 and bf16 operands, against a float64 reference of the
 *     same description written here (each result within 2e-6 of the sum of |products|);
 *   - the models' row-major linear layers as column-major GEMMs (zero__gemm_linear_fwd / _bwd_x /
 *     _bwd_w) against mk_linear_fwd / mk_linear_bwd's scalar reference (fp32 and bf16): the
 *     mapping of layouts and transposes a GPU model will hand cuBLASLt;
 *   - a description with a leading dimension below its rows, or m x n not the results, refused
 *     before it runs. */
#include "device/internal.h"
#include "device_probe.h"
#include "harness.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static uint16_t to_bf16(float x) { return zero__fp32_to_bf16_bits(x); }
static float from(const void *p, int dt, int64_t i) {
    return dt == ZERO_DTYPE_BF16 ? zero__bf16_bits_to_fp32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

/* Device copies of host arrays, in device memory of d. */
static void *up(zero_device *d, zero_stream *s, const void *h, size_t bytes) {
    void *p = NULL;
    if (zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, bytes, &p) != ZERO_OK) return NULL;
    if (h && zero_stream_copy(s, p, h, bytes) != ZERO_OK) return NULL;
    return p;
}

/* One described GEMM on the device against the float64 reference. */
static void one(zero_device *d, zero_stream *s, const char *backend, int m, int n, int k, int ta, int tb, int extra,
                int dt, float alpha, float beta, int bias) {
    const int64_t lda = (ta ? k : m) + extra, ldb = (tb ? n : k) + extra, ldc = m + extra;
    const int64_t na = lda * (ta ? m : k), nb = ldb * (tb ? k : n), nc = ldc * n;
    const size_t es = dt == ZERO_DTYPE_BF16 ? 2 : 4;
    void *a = malloc((size_t)na * es), *b = malloc((size_t)nb * es);
    float *c = malloc((size_t)nc * 4), *got = malloc((size_t)nc * 4), *bv = malloc((size_t)m * 4);
    for (int64_t i = 0; i < na; i++) {
        const float v = rnd();
        if (dt == ZERO_DTYPE_BF16) ((uint16_t *)a)[i] = to_bf16(v);
        else ((float *)a)[i] = v;
    }
    for (int64_t i = 0; i < nb; i++) {
        const float v = rnd();
        if (dt == ZERO_DTYPE_BF16) ((uint16_t *)b)[i] = to_bf16(v);
        else ((float *)b)[i] = v;
    }
    for (int64_t i = 0; i < nc; i++) c[i] = beta != 0.0f ? rnd() : NAN; /* beta 0: C not read */
    for (int i = 0; i < m; i++) bv[i] = rnd();
    void *da = up(d, s, a, (size_t)na * es), *db = up(d, s, b, (size_t)nb * es), *dc = up(d, s, c, (size_t)nc * 4);
    void *dbias = up(d, s, bv, (size_t)m * 4);
    zero__kcall kc;
    memset(&kc, 0, sizeof kc);
    kc.id = ZERO__K_GEMM;
    kc.n = (uint64_t)m * (uint64_t)n;
    kc.gemm = (zero__gemm_k){m, n, k, ta, tb, lda, ldb, ldc, dt, alpha, beta, bias};
    kc.p[0] = da, kc.p[1] = db, kc.p[2] = dc, kc.p[3] = bias ? dbias : NULL;
    ZT_OK(zero__stream_launch(s, &kc));
    ZT_OK(zero_stream_copy(s, got, dc, (size_t)nc * 4));
    ZT_OK(zero_stream_sync(s));
    int bad = 0;
    double worst = 0;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double acc = 0, mag = 0;
            for (int l = 0; l < k; l++) {
                const double x = from(a, dt, ta ? l + i * lda : i + l * lda),
                             y = from(b, dt, tb ? j + l * ldb : l + j * ldb);
                acc += x * y;
                mag += fabs(x * y);
            }
            double want = alpha * acc + (beta != 0.0f ? beta * c[i + j * ldc] : 0.0) + (bias ? bv[i] : 0.0);
            const double err = fabs(got[i + j * ldc] - want),
                         tol = 2e-6 * (fabs(alpha) * mag + 1.0) + 1e-6 * fabs(want);
            if (!(err <= tol)) bad++;
            if (err > worst) worst = err;
        }
    ZT_CHECKF(bad == 0,
              "%s gemm m %d n %d k %d ta %d tb %d ld+%d %s alpha %g beta %g bias %d: %d of %d results off (worst %.3g)",
              backend, m, n, k, ta, tb, extra, dt == ZERO_DTYPE_BF16 ? "bf16" : "fp32", alpha, beta, bias, bad, m * n,
              worst);
    zero_device_release(d, da), zero_device_release(d, db), zero_device_release(d, dc), zero_device_release(d, dbias);
    free(a), free(b), free(c), free(got), free(bv);
}

/* The linear layer y = x W^T + b and its backward through the mappings, against mk_linear's reference. */
static void linear(zero_device *d, zero_stream *s, const char *backend, int N, int in, int out, int dt) {
    const size_t es = dt == ZERO_DTYPE_BF16 ? 2 : 4;
    const mk_prec prec = dt == ZERO_DTYPE_BF16 ? MK_PREC_BF16 : MK_PREC_FP32;
    float *x = malloc((size_t)N * in * 4), *w = malloc((size_t)out * in * 4), *bias = malloc((size_t)out * 4);
    float *dy = malloc((size_t)N * out * 4), *y = malloc((size_t)N * out * 4), *dx = malloc((size_t)N * in * 4);
    float *dw = malloc((size_t)out * in * 4), *dw0 = malloc((size_t)out * in * 4);
    float *gy = malloc((size_t)N * out * 4), *gdx = malloc((size_t)N * in * 4), *gdw = malloc((size_t)out * in * 4);
    uint16_t *xb = malloc((size_t)N * in * 2), *wb = malloc((size_t)out * in * 2), *dyb = malloc((size_t)N * out * 2);
    for (int i = 0; i < N * in; i++) x[i] = rnd(), xb[i] = to_bf16(x[i]);
    for (int i = 0; i < out * in; i++) w[i] = rnd(), wb[i] = to_bf16(w[i]), dw0[i] = rnd(), dw[i] = dw0[i];
    for (int i = 0; i < N * out; i++) dy[i] = rnd(), dyb[i] = to_bf16(dy[i]);
    for (int i = 0; i < out; i++) bias[i] = rnd();
    ZT_OK(mk_linear_fwd(y, x, w, bias, NULL, (size_t)N, in, out, 1, prec, ZERO_IMPL_SCALAR));
    ZT_OK(mk_linear_bwd(dx, dw, NULL, dy, x, w, (size_t)N, in, out, 1, prec, ZERO_IMPL_SCALAR));
    const int bf = dt == ZERO_DTYPE_BF16;
    void *dX = up(d, s, bf ? (void *)xb : (void *)x, (size_t)N * in * es),
         *dW = up(d, s, bf ? (void *)wb : (void *)w, (size_t)out * in * es);
    void *dDY = up(d, s, bf ? (void *)dyb : (void *)dy, (size_t)N * out * es);
    float *dB = up(d, s, bias, (size_t)out * 4), *dY = up(d, s, NULL, (size_t)N * out * 4);
    float *dDX = up(d, s, NULL, (size_t)N * in * 4), *dDW = up(d, s, dw0, (size_t)out * in * 4);
    zero__kcall k;
    zero__gemm_linear_fwd(&k, N, in, out, dt, dX, dW, dY, dB);
    ZT_OK(zero__stream_launch(s, &k));
    zero__gemm_linear_bwd_x(&k, N, in, out, dt, dDY, dW, dDX);
    ZT_OK(zero__stream_launch(s, &k));
    zero__gemm_linear_bwd_w(&k, N, in, out, dt, dDY, dX, dDW);
    ZT_OK(zero__stream_launch(s, &k));
    ZT_OK(zero_stream_copy(s, gy, dY, (size_t)N * out * 4));
    ZT_OK(zero_stream_copy(s, gdx, dDX, (size_t)N * in * 4));
    ZT_OK(zero_stream_copy(s, gdw, dDW, (size_t)out * in * 4));
    ZT_OK(zero_stream_sync(s));
    const struct {
        const char *what;
        const float *got, *want;
        int n, sum;
    } r[3] = {{"y", gy, y, N * out, in}, {"dx", gdx, dx, N * in, out}, {"dW", gdw, dw, out * in, N}};
    for (int t = 0; t < 3; t++) {
        double worst = 0;
        for (int i = 0; i < r[t].n; i++) {
            const double e = fabs(r[t].got[i] - r[t].want[i]);
            if (e > worst) worst = e;
        }
        /* products of values below 1: a sum of `sum` terms within its rounding (fp32 sums in two orders) */
        ZT_CHECKF(worst <= 4e-6 * r[t].sum + 1e-6, "%s linear N %d in %d out %d %s: %s off mk_linear by %.3g", backend,
                  N, in, out, bf ? "bf16" : "fp32", r[t].what, worst);
    }
    zero_device_release(d, dX), zero_device_release(d, dW), zero_device_release(d, dDY), zero_device_release(d, dB);
    zero_device_release(d, dY), zero_device_release(d, dDX), zero_device_release(d, dDW);
    free(x), free(w), free(bias), free(dy), free(y), free(dx), free(dw), free(dw0), free(gy), free(gdx), free(gdw);
    free(xb), free(wb), free(dyb);
}

static void backend_checks(const char *backend) {
    zero_device_options o;
    zero_device_options_default(&o);
    o.backend = backend;
    o.capacity = 64u << 20;
    o.max_delay_us = 20;
    zero_device *d = NULL;
    zero_error err = {{0}};
    if (zero_device_create(&d, &o, &err) != ZERO_OK) {
        ZT_FAIL("create %s: %s", backend, err.msg);
        return;
    }
    zero_stream *s = NULL;
    ZT_OK(zero_stream_create(d, &s));
    for (int dt = 0; dt < 2; dt++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int v = 0; v < 2; v++)
                    one(d, s, backend, 17 + v * 20, 9 + v, 33 - v * 20, ta, tb, v * 3,
                        dt ? ZERO_DTYPE_BF16 : ZERO_DTYPE_FP32, v ? -0.5f : 1.0f, v ? 0.75f : 0.0f, (ta + tb + v) % 2);
    linear(d, s, backend, 7, 24, 40, ZERO_DTYPE_FP32);
    linear(d, s, backend, 33, 64, 17, ZERO_DTYPE_BF16);
    /* bad descriptions: one line each, nothing run */
    void *m = up(d, s, NULL, 4096);
    zero__kcall k;
    memset(&k, 0, sizeof k);
    k.id = ZERO__K_GEMM;
    k.gemm = (zero__gemm_k){4, 4, 4, 0, 0, 3, 4, 4, ZERO_DTYPE_FP32, 1.0f, 0.0f, 0};
    k.n = 16;
    k.p[0] = k.p[1] = k.p[2] = m;
    ZT_EQ_INT(zero__stream_launch(s, &k), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_device_last_error(d), "launch gemm: m 4, n 4, k 4") != NULL, "%s", zero_device_last_error(d));
    k.gemm.lda = 4;
    k.n = 15;
    ZT_EQ_INT(zero__stream_launch(s, &k), ZERO_ERR_INVALID_ARG);
    k.n = 16;
    k.gemm.k = 300; /* A (4 x 300) past its block */
    k.gemm.ldb = 300;
    ZT_EQ_INT(zero__stream_launch(s, &k), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_device_last_error(d), "operand 0") != NULL, "%s", zero_device_last_error(d));
    zero_device_release(d, m);
    zero_stream_free(s);
    zero_device_free(d);
}

int main(void) {
    const char *extra = getenv("ZERO_TEST_DEVICE");
    if (extra && *extra && strcmp(extra, "cpu") != 0 && strcmp(extra, "fake") != 0) { /* cuda: skipped without a GPU */
        const int r = zt_device_probe("test_device_gemm", extra);
        if (r == 0) return 77;
        if (r > 0) backend_checks(extra);
        return zt_finish("test_device_gemm");
    }
    backend_checks("cpu");
    backend_checks("fake");
    return zt_finish("test_device_gemm");
}
