/* Tests of the model kernels the decoder adds to the element-wise ones: linear layers (fp32 and
 * bf16 products, bias and residual fused, both weight layouts), embeddings and the per-head
 * RMSNorm, each impl against the scalar reference; the bf16 arithmetic against fp32 within the
 * documented bound, and its fallback (bitwise convert + sgemm where the CPU has no bf16); the
 * weight given in bf16 against it widened. */
#include <cblas.h>

#include "mkernels_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static const zero_impl all_impls[] = {ZERO_IMPL_SCALAR, ZERO_IMPL_AVX2, ZERO_IMPL_AVX512};

/* max |a - b| <= atol + rtol * max |ref| over the array (products: the error scales with the
 * sum of |terms|, bounded here by the array's largest magnitude) */
static void close_scaled(const char *what, const float *got, const float *ref, size_t n, double rtol, double *worst) {
    double d = 0.0, m = 1.0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - ref[i]);
        if (e > d || isnan(e)) d = e, at = i;
        m = fmax(m, fabs(ref[i]));
    }
    if (worst) *worst = fmax(*worst, d / (rtol * m));
    ZT_CHECKF(d <= rtol * m, "%s: max |diff| %.3g at %zu (%.9g vs %.9g), scale %.3g", what, d, at, got[at], ref[at], m);
}

static float bf16_round(float v) { return zero_bf16_to_fp32(zero_fp32_to_bf16(v)); }

/* ---------------------------------------------------------------- linear layers */
typedef struct lin_case {
    size_t N;
    int IC, OC;
} lin_case;

static const lin_case lin_cases[] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {300, 130, 140}, {64, 256, 96}};
enum { NLIN = sizeof lin_cases / sizeof lin_cases[0] };

/* Each impl against the scalar reference: the forward with every combination of bias and
 * residual (the residual also in place), the backward's dx, dW (accumulated) and dbias. */
static void test_linear(mk_prec prec) {
    const char *pn = prec == MK_PREC_BF16 ? "bf16" : "fp32";
    printf("linear layers, %s products (each impl against the scalar reference):\n", pn);
    double worst[3] = {0};
    for (int ci = 0; ci < NLIN; ci++) {
        const lin_case *c = &lin_cases[ci];
        const size_t N = c->N, nx = N * c->IC, ny = N * c->OC, nw = (size_t)c->IC * c->OC;
        /* products of K terms of |x w| <= 1: fp32 sums within K 2^-24 relative each way */
        const double rtol = 3e-7 * sqrt((double)(c->IC > (int)N ? c->IC : (int)N)) + 1e-7;
        float *x = mt_alloc(nx), *W = mt_alloc(nw), *bias = mt_alloc(c->OC), *res = mt_alloc(ny), *dy = mt_alloc(ny);
        mt_fill(x, nx, 1.0f), mt_fill(W, nw, 1.0f), mt_fill(bias, c->OC, 1.0f), mt_fill(res, ny, 2.0f);
        mt_fill(dy, ny, 1.0f);
        for (int tw = 0; tw < 2; tw++) {
            for (int mode = 0; mode < 4; mode++) { /* 0 plain, 1 bias, 2 bias + resid, 3 resid in place */
                float *ref = mt_alloc(ny), *got = mt_alloc(ny);
                const float *b = mode == 1 || mode == 2 ? bias : NULL;
                memcpy(ref, res, 4 * ny);
                ZT_OK(mk_linear_fwd(ref, x, W, b, mode == 2 ? res : mode == 3 ? ref : NULL, N, c->IC, c->OC, tw, prec,
                                    ZERO_IMPL_SCALAR));
                for (int v = 1; v < 3; v++) {
                    if (!mt_impl_runs(all_impls[v])) continue;
                    memcpy(got, res, 4 * ny);
                    ZT_OK(mk_linear_fwd(got, x, W, b, mode == 2 ? res : mode == 3 ? got : NULL, N, c->IC, c->OC, tw,
                                        prec, all_impls[v]));
                    close_scaled("linear fwd", got, ref, ny, rtol, &worst[0]);
                }
                free(ref), free(got);
            }
            float *dx[2], *dW[2], *db[2];
            for (int k = 0; k < 2; k++) {
                dx[k] = mt_alloc(nx), dW[k] = mt_alloc(nw), db[k] = mt_alloc(c->OC);
                for (size_t i = 0; i < nx; i++) dx[k][i] = 99.0f; /* written, not accumulated */
                for (size_t i = 0; i < nw; i++) dW[k][i] = 0.5f;  /* accumulated */
                for (int i = 0; i < c->OC; i++) db[k][i] = -0.25f;
            }
            ZT_OK(mk_linear_bwd(dx[0], dW[0], db[0], dy, x, W, N, c->IC, c->OC, tw, prec, ZERO_IMPL_SCALAR));
            for (int v = 1; v < 3; v++) {
                if (!zero_impl_available(all_impls[v])) continue;
                float *gx = mt_alloc(nx), *gw = mt_alloc(nw), *gb = mt_alloc(c->OC);
                for (size_t i = 0; i < nw; i++) gw[i] = 0.5f;
                for (int i = 0; i < c->OC; i++) gb[i] = -0.25f;
                ZT_OK(mk_linear_bwd(gx, gw, gb, dy, x, W, N, c->IC, c->OC, tw, prec, all_impls[v]));
                close_scaled("linear bwd dx", gx, dx[0], nx, rtol, &worst[1]);
                close_scaled("linear bwd dW", gw, dW[0], nw, rtol, &worst[2]);
                /* the bias gradient is mk_colsum's: the same bits in every impl */
                ZT_CHECKF(!memcmp(gb, db[0], 4 * (size_t)c->OC), "linear bwd dbias differs from the reference (%s)",
                          zero_impl_name(all_impls[v]));
                /* NULL outputs are skipped */
                float *gx2 = mt_alloc(nx);
                ZT_OK(mk_linear_bwd(gx2, NULL, NULL, dy, x, W, N, c->IC, c->OC, tw, prec, all_impls[v]));
                ZT_CHECK(!memcmp(gx, gx2, 4 * nx));
                free(gx), free(gw), free(gb), free(gx2);
            }
            for (int k = 0; k < 2; k++) free(dx[k]), free(dW[k]), free(db[k]);
        }
        free(x), free(W), free(bias), free(res), free(dy);
    }
    printf("  worst diff/bound: fwd %.3f, dx %.3f, dW %.3f\n", worst[0], worst[1], worst[2]);
    float z = 0.0f;
    ZT_EQ_INT(mk_linear_fwd(&z, &z, &z, NULL, NULL, 0, 1, 1, 0, prec, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_linear_fwd(&z, &z, &z, NULL, NULL, 1, 1, 1, 0, (mk_prec)7, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_linear_bwd(&z, &z, NULL, NULL, &z, &z, 1, 1, 1, 0, prec, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_linear_fwd(&z, &z, &z, NULL, NULL, 1, 1, 1, 0, prec, (zero_impl)9), ZERO_ERR_INVALID_ARG);
}

/* bf16 products against fp32 products of the unrounded operands: each operand within 2^-8
 * relative (8 significant bits), a product within 2^-7 + 2^-16, the fp32 accumulation within
 * K 2^-23 of sum |a b|: |bf16 - fp32| <= (2^-7 + 2^-16 + K 2^-23) sum_k |a_k b_k| (docs/KERNELS.md).
 * And the path: native where mk_gemm_bf16_native, else bitwise zero_convert to bf16, widen,
 * cblas_sgemm. */
static void test_linear_bf16_bound(void) {
    printf("linear layers, bf16 against fp32 (path: %s):\n", mk_gemm_bf16_path_name());
    const size_t N = 96;
    const int IC = 200, OC = 72;
    float *x = mt_alloc(N * IC), *W = mt_alloc((size_t)IC * OC), *y16 = mt_alloc(N * OC), *y32 = mt_alloc(N * OC);
    mt_fill(x, N * IC, 2.0f), mt_fill(W, (size_t)IC * OC, 0.5f);
    double worst = 0.0;
    for (int tw = 0; tw < 2; tw++) {
        ZT_OK(mk_linear_fwd(y16, x, W, NULL, NULL, N, IC, OC, tw, MK_PREC_BF16, ZERO_IMPL_AUTO));
        ZT_OK(mk_linear_fwd(y32, x, W, NULL, NULL, N, IC, OC, tw, MK_PREC_FP32, ZERO_IMPL_AUTO));
        for (size_t n = 0; n < N; n++)
            for (int o = 0; o < OC; o++) {
                double sabs = 0.0;
                for (int i = 0; i < IC; i++)
                    sabs += fabs((double)x[n * IC + i] * (tw ? W[(size_t)o * IC + i] : W[(size_t)i * OC + o]));
                const double bound = (ldexp(1, -7) + ldexp(1, -16) + IC * ldexp(1, -23)) * sabs + 1e-30;
                const double d = fabs((double)y16[n * OC + o] - y32[n * OC + o]);
                worst = fmax(worst, d / bound);
                if (!(d <= bound)) {
                    ZT_FAIL("bf16 product (%zu, %d): %.9g vs fp32 %.9g, bound %.3g", n, o, y16[n * OC + o],
                            y32[n * OC + o], bound);
                    n = N;
                    break;
                }
            }
        if (!mk_gemm_bf16_native()) {
            /* the fallback: operands rounded by zero_convert, widened (exactly), cblas_sgemm */
            float *xr = mt_alloc(N * IC), *wr = mt_alloc((size_t)IC * OC), *yc = mt_alloc(N * OC);
            for (size_t i = 0; i < N * IC; i++) xr[i] = bf16_round(x[i]);
            for (size_t i = 0; i < (size_t)IC * OC; i++) wr[i] = bf16_round(W[i]);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, tw ? CblasTrans : CblasNoTrans, (int)N, OC, IC, 1.0f, xr, IC, wr,
                        tw ? IC : OC, 0.0f, yc, OC);
            ZT_CHECKF(!memcmp(yc, y16, 4 * N * OC), "bf16 fallback is not bitwise convert + sgemm (trans_w %d)", tw);
            free(xr), free(wr), free(yc);
        }
    }
    printf("  worst |bf16 - fp32| / bound %.3f\n", worst);
    if (!mk_gemm_bf16_native())
        printf("  SKIP native bf16: not in this build or CPU (the fallback checked bitwise: convert + sgemm)\n");
    free(x), free(W), free(y16), free(y32);
}

/* The weight given in bf16 (mk_linear_fwd_wb / _bwd_wb, the decoder on a bf16 working copy)
 * against the same weight widened to fp32 with bf16 products: the same bits in every impl (the
 * rounding of a widened bf16 value gives it back), the bias and residual fused alike, dx written,
 * dW and dbias accumulated, NULL outputs skipped. */
static void test_linear_wb(void) {
    printf("linear layers, the weight in bf16 against it widened (bitwise, every impl):\n");
    int compared = 0;
    for (int ci = 0; ci < NLIN; ci++) {
        const lin_case *c = &lin_cases[ci];
        const size_t N = c->N, nx = N * c->IC, ny = N * c->OC, nw = (size_t)c->IC * c->OC;
        float *x = mt_alloc(nx), *W = mt_alloc(nw), *bias = mt_alloc(c->OC), *res = mt_alloc(ny), *dy = mt_alloc(ny);
        mt_fill(x, nx, 1.0f), mt_fill(W, nw, 1.0f), mt_fill(bias, c->OC, 1.0f), mt_fill(res, ny, 2.0f);
        mt_fill(dy, ny, 1.0f);
        uint16_t *wb = malloc(2 * nw);
        zero_convert(W, ZERO_DTYPE_FP32, wb, ZERO_DTYPE_BF16, nw, ZERO_IMPL_SCALAR);
        zero_convert(wb, ZERO_DTYPE_BF16, W, ZERO_DTYPE_FP32, nw, ZERO_IMPL_SCALAR); /* W: wb widened */
        for (int v = 0; v < 3; v++) {
            const zero_impl im = all_impls[v];
            if (!mt_impl_runs(im)) continue;
            for (int tw = 0; tw < 2; tw++) {
                float *a = mt_alloc(ny), *b = mt_alloc(ny);
                memcpy(a, res, 4 * ny), memcpy(b, res, 4 * ny);
                ZT_OK(mk_linear_fwd_wb(a, x, wb, bias, a, N, c->IC, c->OC, tw, im));
                ZT_OK(mk_linear_fwd(b, x, W, bias, b, N, c->IC, c->OC, tw, MK_PREC_BF16, im));
                ZT_CHECKF(!memcmp(a, b, 4 * ny), "fwd_wb (%zu, %d, %d) trans_w %d %s: not the widened weight's bits", N,
                          c->IC, c->OC, tw, zero_impl_name(im));
                float *gx[2], *gw[2], *gb[2];
                for (int k = 0; k < 2; k++) {
                    gx[k] = mt_alloc(nx), gw[k] = mt_alloc(nw), gb[k] = mt_alloc(c->OC);
                    for (size_t i = 0; i < nx; i++) gx[k][i] = 99.0f;
                    for (size_t i = 0; i < nw; i++) gw[k][i] = 0.5f;
                    for (int i = 0; i < c->OC; i++) gb[k][i] = -0.25f;
                }
                ZT_OK(mk_linear_bwd_wb(gx[0], gw[0], gb[0], dy, x, wb, N, c->IC, c->OC, tw, im));
                ZT_OK(mk_linear_bwd(gx[1], gw[1], gb[1], dy, x, W, N, c->IC, c->OC, tw, MK_PREC_BF16, im));
                ZT_CHECKF(!memcmp(gx[0], gx[1], 4 * nx) && !memcmp(gw[0], gw[1], 4 * nw) &&
                              !memcmp(gb[0], gb[1], 4 * (size_t)c->OC),
                          "bwd_wb (%zu, %d, %d) trans_w %d %s: not the widened weight's bits", N, c->IC, c->OC, tw,
                          zero_impl_name(im));
                /* dW alone (no weight needed), and dx alone */
                ZT_OK(mk_linear_bwd_wb(NULL, gw[1], NULL, dy, x, NULL, N, c->IC, c->OC, tw, im));
                ZT_OK(mk_linear_bwd_wb(gx[1], NULL, NULL, dy, NULL, wb, N, c->IC, c->OC, tw, im));
                ZT_CHECK(!memcmp(gx[0], gx[1], 4 * nx));
                compared++;
                for (int k = 0; k < 2; k++) free(gx[k]), free(gw[k]), free(gb[k]);
                free(a), free(b);
            }
        }
        free(x), free(W), free(bias), free(res), free(dy), free(wb);
    }
    printf("  %d cases\n", compared);
    float z = 0.0f;
    ZT_EQ_INT(mk_linear_fwd_wb(&z, &z, NULL, NULL, NULL, 1, 1, 1, 0, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_linear_bwd_wb(&z, NULL, NULL, &z, &z, NULL, 1, 1, 1, 0, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_linear_fwd(&z, &z, NULL, NULL, NULL, 1, 1, 1, 0, MK_PREC_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- embeddings */
static void test_embed(void) {
    printf("embeddings (every impl bitwise the reference, 1 and 3 threads):\n");
    static const int shapes[][4] = {{2, 5, 7, 11}, {4, 64, 300, 97}, {3, 9, 1031, 5}}; /* B, T, C, V */
    for (int si = 0; si < 3; si++) {
        const int B = shapes[si][0], T = shapes[si][1], C = shapes[si][2], V = shapes[si][3];
        const size_t N = (size_t)B * T;
        int32_t *tok = malloc(sizeof(int32_t) * N);
        for (size_t i = 0; i < N; i++) tok[i] = (int32_t)(mt_next() % (uint64_t)V);
        /* positions restarting at random documents' starts, as packed examples have them */
        int32_t *dpos = malloc(sizeof(int32_t) * N);
        for (size_t i = 0; i < N; i++) dpos[i] = i % (size_t)T == 0 || mt_next() % 5 == 0 ? 0 : dpos[i - 1] + 1;
        float *wte = mt_alloc((size_t)V * C), *wpe = mt_alloc((size_t)T * C), *dout = mt_alloc(N * C);
        mt_fill(wte, (size_t)V * C, 1.0f), mt_fill(wpe, (size_t)T * C, 1.0f), mt_fill(dout, N * C, 1.0f);
        for (int k = 0; k < 3; k++) { /* wpe by n % T, none, wpe by positions */
            const float *pe = k == 1 ? NULL : wpe;
            const int32_t *pos = k == 2 ? dpos : NULL;
#define EPOS(n) (pos ? (size_t)pos[n] : (n) % T)
            /* independent reference: plain loops, tokens in order */
            float *ref = mt_alloc(N * C), *gref = mt_alloc((size_t)V * C), *pref = mt_alloc((size_t)T * C);
            for (size_t n = 0; n < N; n++)
                for (int i = 0; i < C; i++)
                    ref[n * C + i] = wte[(size_t)tok[n] * C + i] + (pe ? pe[EPOS(n) * C + i] : 0.0f);
            for (size_t i = 0; i < (size_t)V * C; i++) gref[i] = 0.125f;
            for (size_t i = 0; i < (size_t)T * C; i++) pref[i] = -0.5f;
            for (size_t n = 0; n < N; n++)
                for (int i = 0; i < C; i++) {
                    gref[(size_t)tok[n] * C + i] += dout[n * C + i];
                    pref[EPOS(n) * C + i] += dout[n * C + i];
                }
            for (int v = 0; v < 3; v++) {
                if (v && !mt_impl_runs(all_impls[v])) continue;
                for (int threads = 1; threads <= 3; threads += 2) {
#ifdef _OPENMP
                    omp_set_num_threads(threads);
#endif
                    float *o = mt_alloc(N * C), *g = mt_alloc((size_t)V * C), *p = mt_alloc((size_t)T * C);
                    for (size_t i = 0; i < (size_t)V * C; i++) g[i] = 0.125f;
                    for (size_t i = 0; i < (size_t)T * C; i++) p[i] = -0.5f;
                    ZT_OK(mk_embed_fwd(o, tok, wte, pe, N, T, C, pos, all_impls[v]));
                    ZT_OK(mk_embed_bwd(g, pe ? p : NULL, dout, tok, N, T, C, pos, all_impls[v]));
                    ZT_CHECKF(!memcmp(o, ref, 4 * N * C), "embed fwd %s differs", zero_impl_name(all_impls[v]));
                    ZT_CHECKF(!memcmp(g, gref, 4 * (size_t)V * C), "embed bwd wte %s differs", zero_impl_name(all_impls[v]));
                    if (pe) ZT_CHECKF(!memcmp(p, pref, 4 * (size_t)T * C), "embed bwd wpe %s differs", zero_impl_name(all_impls[v]));
                    free(o), free(g), free(p);
                }
            }
            free(ref), free(gref), free(pref);
#undef EPOS
        }
#ifdef _OPENMP
        omp_set_num_threads(2);
#endif
        free(tok), free(dpos), free(wte), free(wpe), free(dout);
    }
}

/* ---------------------------------------------------------------- per-head RMSNorm */
/* One call over every head equals a call per head (forward bitwise: the same row kernel;
 * backward dx bitwise, dw within the column sums' rounding) and the double reference. */
static void test_rmsnorm_heads(void) {
    printf("per-head RMSNorm (q/k norm):\n");
    static const int shapes[][3] = {{5, 3, 8}, {300, 9, 64}, {77, 2, 17}}; /* tokens, heads, head_dim */
    for (int si = 0; si < 3; si++) {
        const size_t N = (size_t)shapes[si][0];
        const int H = shapes[si][1], D = shapes[si][2];
        const size_t ldx = (size_t)H * D + 13, ldy = (size_t)H * D + 3; /* inside wider rows */
        float *x = mt_alloc(N * ldx), *dy = mt_alloc(N * ldy), *w = mt_alloc(D);
        mt_fill(x, N * ldx, 3.0f), mt_fill(dy, N * ldy, 1.0f), mt_fill(w, D, 1.5f);
        for (int v = 0; v < 3; v++) {
            const zero_impl im = all_impls[v];
            if (v && !mt_impl_runs(im)) continue;
            float *y1 = mt_alloc(N * ldy), *y2 = mt_alloc(N * ldy), *r1 = mt_alloc(N * H), *r2 = mt_alloc(N * H);
            float *dx1 = mt_alloc(N * ldx), *dx2 = mt_alloc(N * ldx), *dw1 = mt_alloc(D), *dw2 = mt_alloc(D);
            for (size_t i = 0; i < N * ldy; i++) y1[i] = y2[i] = 7.0f;
            for (size_t i = 0; i < N * ldx; i++) dx1[i] = dx2[i] = 0.25f;
            for (int i = 0; i < D; i++) dw1[i] = dw2[i] = 0.5f;
            ZT_OK(mk_rmsnorm_heads_fwd(y1, r1, x, w, N, H, D, ldx, ldy, 1e-6f, im));
            ZT_OK(mk_rmsnorm_heads_bwd(dx1, dw1, dy, x, w, r1, N, H, D, ldx, ldy, 1, im));
            float *rh = mt_alloc(N);
            for (int h = 0; h < H; h++) {
                ZT_OK(mk_rmsnorm_fwd(y2 + (size_t)h * D, rh, x + (size_t)h * D, w, N, D, ldx, ldy, 1e-6f, im));
                for (size_t n = 0; n < N; n++) r2[n * H + h] = rh[n];
                ZT_OK(mk_rmsnorm_bwd(dx2 + (size_t)h * D, dw2, dy + (size_t)h * D, x + (size_t)h * D, w, rh, N, D, ldx,
                                     ldy, 1, im));
            }
            ZT_CHECKF(!memcmp(y1, y2, 4 * N * ldy) && !memcmp(r1, r2, 4 * N * H), "heads fwd %s differs per head",
                      zero_impl_name(im));
            ZT_CHECKF(!memcmp(dx1, dx2, 4 * N * ldx), "heads bwd dx %s differs per head", zero_impl_name(im));
            /* dw: the double reference */
            double *dwr = calloc(D, sizeof(double));
            for (size_t n = 0; n < N; n++)
                for (int h = 0; h < H; h++) {
                    const float *xr = x + n * ldx + (size_t)h * D, *dr = dy + n * ldy + (size_t)h * D;
                    double s = 0.0;
                    for (int i = 0; i < D; i++) s += (double)xr[i] * xr[i];
                    const double rs = 1.0 / sqrt(s / D + 1e-6);
                    for (int i = 0; i < D; i++) dwr[i] += dr[i] * xr[i] * rs;
                }
            float *dwrf = mt_alloc(D);
            for (int i = 0; i < D; i++) dwrf[i] = (float)(0.5 + dwr[i]);
            mt_close("heads bwd dw", dw1, dwrf, D, 1e-6 * N * H, 1e-5, NULL);
            free(y1), free(y2), free(r1), free(r2), free(dx1), free(dx2), free(dw1), free(dw2), free(rh), free(dwr),
                free(dwrf);
        }
        free(x), free(dy), free(w);
    }
    float z = 0.0f;
    ZT_EQ_INT(mk_rmsnorm_heads_fwd(&z, NULL, &z, NULL, 1, 2, 4, 7, 8, 1e-6f, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
}

int main(void) {
    test_linear(MK_PREC_FP32);
    test_linear(MK_PREC_BF16);
    test_linear_bf16_bound();
    test_linear_wb();
    test_embed();
    test_rmsnorm_heads();
    return zt_finish("test_mkernels_linear");
}
