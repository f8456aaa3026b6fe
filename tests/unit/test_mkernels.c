/* Tests of the model kernels (models/kernels) other than attention and GEMM: the vector exp, the
 * activations, the norms, softmax, cross-entropy, RoPE and the reductions; every vector impl the
 * CPU has against the scalar reference on ragged sizes, the scalar reference against double-
 * precision formulas and finite differences, thread-count independence, argument checks. */
#include "mkernels_util.h"

#include "kernels/mk_internal.h"

#ifdef _OPENMP
#include <omp.h>
#endif

static const size_t sizes[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 65537, 300001};
enum { NSIZES = sizeof sizes / sizeof sizes[0] };

static const mk__isa *isa_of(zero_impl impl) {
    return impl == ZERO_IMPL_AVX2 ? &mk__isa_avx2 : impl == ZERO_IMPL_AVX512 ? &mk__isa_avx512 : &mk__isa_scalar;
}

/* Inputs for activations: mostly [-8, 8], with the large and special values mixed in. */
static void fill_act(float *x, size_t n) {
    static const float special[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 30.0f, -30.0f, 50.0f, -50.0f,
                                    100.0f, -100.0f, 1e4f, -1e4f, 3.0e-4f, -3.0e-4f};
    for (size_t i = 0; i < n; i++) x[i] = (i % 97 == 5) ? special[(i / 97) % 14] : mt_unif(8.0f);
}

/* ---------------------------------------------------------------- exp */
static double ulp_of(double r) {
    if (r < 1.1754943508222875e-38) return ldexp(1.0, -149);
    int e;
    frexp(r, &e);
    return ldexp(1.0, e - 24);
}

static void test_exp(void) {
    printf("exp (vector twins against exp() in double):\n");
    const size_t n = 2000003;
    float *x = mt_alloc(n), *y = mt_alloc(n);
    for (size_t i = 0; i < n; i++) x[i] = (float)(-103.9 + (88.72 + 103.9) * (double)i / (n - 1));
    for (int v = 0; v < MT_NVEC; v++) {
        const zero_impl impl = mt_vec_impls[v];
        if (!mt_impl_runs(impl)) continue;
        isa_of(impl)->exp(y, x, n);
        double worst = 0.0, worst_at = 0.0;
        for (size_t i = 0; i < n; i++) {
            const double r = exp((double)x[i]), u = fabs(y[i] - r) / ulp_of(r);
            if (u > worst) worst = u, worst_at = x[i];
        }
        printf("  %-8s max error %.2f ulp (at x = %.6g)\n", zero_impl_name(impl), worst, worst_at);
        ZT_CHECKF(worst <= 2.0, "%s exp error %.2f ulp > 2", zero_impl_name(impl), worst);
        /* edges and specials, each through a tail lane too */
        const float xs[] = {0.0f, -0.0f, 1.0f, 88.72f, 88.8f, 89.0f, 200.0f, INFINITY, -104.0f, -110.0f,
                            -INFINITY, NAN, -87.0f, -100.0f};
        float ys[14];
        isa_of(impl)->exp(ys, xs, 14);
        ZT_CHECK(ys[0] == 1.0f && ys[1] == 1.0f);
        ZT_CHECK(fabs(ys[2] - 2.718281828) <= 2.4e-7);
        ZT_CHECK(isfinite(ys[3]) && ys[3] > 3.3e38f);
        ZT_CHECK(isinf(ys[4]) && isinf(ys[5]) && isinf(ys[6]) && isinf(ys[7]));
        ZT_CHECK(ys[8] == 0.0f && ys[9] == 0.0f && ys[10] == 0.0f);
        ZT_CHECK(isnan(ys[11]));
        ZT_CHECK(fabs(ys[12] - exp(-87.0)) <= 2 * ulp_of(exp(-87.0)));
        ZT_CHECK(fabs(ys[13] - exp(-100.0)) <= ldexp(1.0, -149)); /* subnormal: within one step */
    }
    free(x);
    free(y);
}

/* ---------------------------------------------------------------- activations */
/* 0.5 x (1 + tanh u) = x sigmoid(2u); in double, in the form without cancellation (1 + tanh u
 * loses every digit for u < -19 even in double). */
static double gelu_d(double x) {
    const double u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}
static double gelu_grad_d(double x) {
    const double k = 0.7978845608028654, a = 0.044715, u = k * (x + a * x * x * x);
    const double e = exp(-2.0 * u), s = 1.0 / (1.0 + e);
    if (isinf(e)) return 0.0; /* x below -30: the limit */
    return s + 2.0 * x * s * (e * s) * k * (1.0 + 3.0 * a * x * x);
}
static double silu_d(double x) { return x / (1.0 + exp(-x)); }
static double silu_grad_d(double x) {
    const double s = 1.0 / (1.0 + exp(-x));
    return s * (1.0 + x * (1.0 - s));
}

typedef enum {
    A_GELU, A_GELU_B, A_SILU, A_SILU_B, A_SWIGLU, A_SWIGLU_BG, A_SWIGLU_BU, A_GEGLU, A_GEGLU_BG, A_GEGLU_BU, A_COUNT
} act_kind;
static const char *act_name[A_COUNT] = {"gelu fwd",   "gelu bwd",         "silu fwd",        "silu bwd",
                                        "swiglu fwd", "swiglu bwd dgate", "swiglu bwd dup",  "geglu fwd",
                                        "geglu bwd dgate", "geglu bwd dup"};

/* Runs every activation kernel on (x, y, d) of n with impl; outs[k] receives kind k. */
static void run_acts(zero_impl impl, const float *x, const float *u, const float *d, size_t n,
                     float *outs[A_COUNT]) {
    ZT_OK(mk_gelu_fwd(outs[A_GELU], x, n, impl));
    ZT_OK(mk_gelu_bwd(outs[A_GELU_B], d, x, n, impl));
    ZT_OK(mk_silu_fwd(outs[A_SILU], x, n, impl));
    ZT_OK(mk_silu_bwd(outs[A_SILU_B], d, x, n, impl));
    ZT_OK(mk_swiglu_fwd(outs[A_SWIGLU], n ? n : 1, x, u, n ? n : 1, n ? 1 : 0, n, impl));
    ZT_OK(mk_swiglu_bwd(outs[A_SWIGLU_BG], outs[A_SWIGLU_BU], d, n ? n : 1, x, u, n ? n : 1, n ? 1 : 0, n, impl));
    ZT_OK(mk_geglu_fwd(outs[A_GEGLU], n ? n : 1, x, u, n ? n : 1, n ? 1 : 0, n, impl));
    ZT_OK(mk_geglu_bwd(outs[A_GEGLU_BG], outs[A_GEGLU_BU], d, n ? n : 1, x, u, n ? n : 1, n ? 1 : 0, n, impl));
}

static void test_activations(void) {
    printf("activations:\n");
    /* Bounds (see docs/KERNELS.md): scalar twin vs double, and vector vs scalar. Relative bounds
     * carry the exp argument's rounding, which grows with |u| up to the clamp at 80. */
    /* Derivatives cross zero (gelu' at x = -0.75, silu' at -1.28): there the bound is absolute,
     * a few fp32 roundings of the O(1) terms times |dy| <= 2 (and |up| <= 3 for dgate). */
    const double ref_atol[A_COUNT] = {1e-30, 8e-7, 1e-30, 8e-7, 1e-30, 2.4e-6, 1e-30, 1e-30, 2.4e-6, 1e-30};
    /* GELU's exp argument -2u carries the fp32 rounding of u: relative 2^-23 |2u| in exp(-2u),
     * up to 1e-5 near the clamp (80), where gelu(x) is below 1e-33. */
    const double ref_rtol[A_COUNT] = {1.2e-5, 1.2e-5, 1e-6, 1e-6, 1e-6, 1e-6, 1e-6, 1.2e-5, 1.2e-5, 1.2e-5};
    const double vec_rtol[A_COUNT] = {1.2e-5, 1.2e-5, 1e-6, 1e-6, 1e-6, 1e-6, 1e-6, 1.2e-5, 1.2e-5, 1.2e-5};
    mt_err eref[A_COUNT] = {{0}}, evec[2][A_COUNT] = {{{0}}};
    const size_t nmax = sizes[NSIZES - 1];
    float *x = mt_alloc(nmax), *u = mt_alloc(nmax), *d = mt_alloc(nmax), *ref = mt_alloc(nmax);
    float *so[A_COUNT], *vo[A_COUNT];
    for (int k = 0; k < A_COUNT; k++) so[k] = mt_alloc(nmax), vo[k] = mt_alloc(nmax);
    for (int si = 0; si < NSIZES; si++) {
        const size_t n = sizes[si];
        fill_act(x, n);
        mt_fill(u, n, 3.0f);
        mt_fill(d, n, 2.0f);
        run_acts(ZERO_IMPL_SCALAR, x, u, d, n, so);
        /* the scalar twin against the formulas in double */
        for (int k = 0; k < A_COUNT; k++) {
            for (size_t i = 0; i < n; i++) {
                const double xi = x[i];
                double r = 0.0;
                switch (k) {
                case A_GELU: r = gelu_d(xi); break;
                case A_GELU_B: r = d[i] * gelu_grad_d(xi); break;
                case A_SILU: r = silu_d(xi); break;
                case A_SILU_B: r = d[i] * silu_grad_d(xi); break;
                case A_SWIGLU: r = silu_d(xi) * u[i]; break;
                case A_SWIGLU_BG: r = (double)d[i] * u[i] * silu_grad_d(xi); break;
                case A_SWIGLU_BU: r = d[i] * silu_d(xi); break;
                case A_GEGLU: r = gelu_d(xi) * u[i]; break;
                case A_GEGLU_BG: r = (double)d[i] * u[i] * gelu_grad_d(xi); break;
                case A_GEGLU_BU: r = d[i] * gelu_d(xi); break;
                }
                ref[i] = (float)r;
            }
            /* |x| = 1e4 overflows x^3 in the float twin's gelu polynomial only for |x| > 1e12 */
            mt_close(act_name[k], so[k], ref, n, ref_atol[k], ref_rtol[k], &eref[k]);
        }
        for (int v = 0; v < MT_NVEC; v++) {
            if (!mt_impl_runs(mt_vec_impls[v])) continue;
            run_acts(mt_vec_impls[v], x, u, d, n, vo);
            for (int k = 0; k < A_COUNT; k++)
                mt_close(act_name[k], vo[k], so[k], n, ref_atol[k], vec_rtol[k], &evec[v][k]);
        }
    }
    for (int k = 0; k < A_COUNT; k++) {
        char what[80];
        snprintf(what, sizeof what, "%s scalar vs double", act_name[k]);
        mt_report(what, &eref[k]);
        for (int v = 0; v < MT_NVEC; v++) {
            if (!zero_impl_available(mt_vec_impls[v])) continue;
            snprintf(what, sizeof what, "%s %s vs scalar", act_name[k], zero_impl_name(mt_vec_impls[v]));
            mt_report(what, &evec[v][k]);
        }
    }
    /* in place: out == x, dx == dy, SwiGLU's gradients over its inputs give the same bits */
    const size_t n = 1001;
    fill_act(x, n);
    mt_fill(u, n, 3.0f);
    mt_fill(d, n, 2.0f);
    for (int v = -1; v < MT_NVEC; v++) {
        const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
        if (v >= 0 && !zero_impl_available(impl)) continue;
        run_acts(impl, x, u, d, n, vo);
        float *t = mt_dup(x, n), *t2 = mt_dup(u, n), *t3 = mt_dup(d, n);
        ZT_OK(mk_gelu_fwd(t, t, n, impl));
        ZT_CHECK(!memcmp(t, vo[A_GELU], 4 * n));
        ZT_OK(mk_gelu_bwd(t3, t3, x, n, impl));
        ZT_CHECK(!memcmp(t3, vo[A_GELU_B], 4 * n));
        memcpy(t, x, 4 * n);
        ZT_OK(mk_silu_fwd(t, t, n, impl));
        ZT_CHECK(!memcmp(t, vo[A_SILU], 4 * n));
        memcpy(t, x, 4 * n);
        ZT_OK(mk_swiglu_fwd(t, n, t, u, n, 1, n, impl));
        ZT_CHECK(!memcmp(t, vo[A_SWIGLU], 4 * n));
        memcpy(t, x, 4 * n);
        ZT_OK(mk_swiglu_bwd(t, t2, d, n, t, t2, n, 1, n, impl));
        ZT_CHECK(!memcmp(t, vo[A_SWIGLU_BG], 4 * n) && !memcmp(t2, vo[A_SWIGLU_BU], 4 * n));
        free(t), free(t2), free(t3);
    }
    /* SwiGLU on a fused gate_up (rows, 2F) into strided output rows equals the flat call */
    const size_t rows = 37, F = 45;
    float *gu = mt_alloc(rows * 2 * F), *o = mt_alloc(rows * 50), *dy = mt_alloc(rows * 50);
    float *dgu = mt_alloc(rows * 2 * F), *g1 = mt_alloc(rows * F), *u1 = mt_alloc(rows * F);
    float *o1 = mt_alloc(rows * F), *dy1 = mt_alloc(rows * F), *dg1 = mt_alloc(rows * F), *du1 = mt_alloc(rows * F);
    mt_fill(gu, rows * 2 * F, 6.0f);
    mt_fill(dy, rows * 50, 1.0f);
    for (size_t r = 0; r < rows; r++) {
        memcpy(g1 + r * F, gu + r * 2 * F, 4 * F);
        memcpy(u1 + r * F, gu + r * 2 * F + F, 4 * F);
        memcpy(dy1 + r * F, dy + r * 50, 4 * F);
    }
    for (int v = -1; v < MT_NVEC; v++) {
        const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
        if (v >= 0 && !zero_impl_available(impl)) continue;
        ZT_OK(mk_swiglu_fwd(o, 50, gu, gu + F, 2 * F, rows, F, impl));
        ZT_OK(mk_swiglu_fwd(o1, F, g1, u1, F, rows, F, impl));
        ZT_OK(mk_swiglu_bwd(dgu, dgu + F, dy, 50, gu, gu + F, 2 * F, rows, F, impl));
        ZT_OK(mk_swiglu_bwd(dg1, du1, dy1, F, g1, u1, F, rows, F, impl));
        int same = 1;
        for (size_t r = 0; r < rows; r++)
            same &= !memcmp(o + r * 50, o1 + r * F, 4 * F) && !memcmp(dgu + r * 2 * F, dg1 + r * F, 4 * F) &&
                    !memcmp(dgu + r * 2 * F + F, du1 + r * F, 4 * F);
        ZT_CHECKF(same, "%s: strided SwiGLU differs from the contiguous call", zero_impl_name(impl));
    }
    free(gu), free(o), free(dy), free(dgu), free(g1), free(u1), free(o1), free(dy1), free(dg1), free(du1);
    for (int k = 0; k < A_COUNT; k++) free(so[k]), free(vo[k]);
    free(x), free(u), free(d), free(ref);
}

/* The fused bias + GELU kernels give the bits of the unfused calls, for every impl, on strided rows. */
static void test_fused_bias_gelu(void) {
    static const size_t shapes[][3] = {{1, 1, 1}, {3, 7, 9}, {70, 33, 33}, {129, 100, 104}, {600, 512, 512}};
    for (int si = 0; si < 5; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1], ld = shapes[si][2], n = rows * ld;
        float *x = mt_alloc(n), *bias = mt_alloc(cols), *dy = mt_alloc(n);
        fill_act(x, n);
        mt_fill(bias, cols, 1.0f), mt_fill(dy, n, 1.0f);
        for (int v = -1; v < MT_NVEC; v++) {
            const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
            if (v >= 0 && !zero_impl_available(impl)) continue;
            float *h1 = mt_dup(x, n), *h2 = mt_dup(x, n), *o1 = mt_alloc(n), *o2 = mt_alloc(n);
            memset(o1, 0, 4 * n), memset(o2, 0, 4 * n);
            ZT_OK(mk_bias_gelu_fwd(o1, ld, h1, ld, bias, rows, cols, impl));
            for (size_t r = 0; r < rows; r++) {
                for (size_t j = 0; j < cols; j++) h2[r * ld + j] += bias[j];
                ZT_OK(mk_gelu_fwd(o2 + r * ld, h2 + r * ld, cols, impl));
            }
            ZT_CHECKF(!memcmp(h1, h2, 4 * n) && !memcmp(o1, o2, 4 * n), "%s: bias+gelu differs from the unfused calls",
                      zero_impl_name(impl));
            float *d1 = mt_dup(dy, n), *d2 = mt_dup(dy, n), *b1 = mt_alloc(cols), *b2 = mt_alloc(cols);
            for (size_t j = 0; j < cols; j++) b1[j] = b2[j] = 0.5f;
            ZT_OK(mk_gelu_bwd_bias(d1, b1, d1, h1, rows, cols, ld, impl)); /* in place on dy */
            for (size_t r = 0; r < rows; r++) ZT_OK(mk_gelu_bwd(d2 + r * ld, dy + r * ld, h1 + r * ld, cols, impl));
            ZT_OK(mk_colsum(b2, d2, rows, cols, ld, impl));
            ZT_CHECKF(!memcmp(d1, d2, 4 * n) && !memcmp(b1, b2, 4 * cols), "%s: gelu bwd + bias grad differs from the unfused calls",
                      zero_impl_name(impl));
            free(h1), free(h2), free(o1), free(o2), free(d1), free(d2), free(b1), free(b2);
        }
        free(x), free(bias), free(dy);
    }
    float x[4] = {0};
    ZT_EQ_INT(mk_bias_gelu_fwd(x, 4, x, 4, x, 1, 4, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
}

/* Central differences of the scalar forward twins against their backward twins. */
static void test_activation_fd(void) {
    const size_t n = 4001;
    float *x = mt_alloc(n), *one = mt_alloc(n), *g = mt_alloc(n), *fp = mt_alloc(n), *fm = mt_alloc(n);
    float *xp = mt_alloc(n), *xm = mt_alloc(n), *u = mt_alloc(n), *gu = mt_alloc(n);
    for (size_t i = 0; i < n; i++) x[i] = -10.0f + 20.0f * (float)i / (float)(n - 1), one[i] = 1.0f;
    mt_fill(u, n, 2.0f);
    const float h = 1e-2f;
    for (size_t i = 0; i < n; i++) xp[i] = x[i] + h, xm[i] = x[i] - h;
    double worst = 0.0;
    for (int kind = 0; kind < 3; kind++) {
        if (kind == 0) {
            mk_gelu_bwd(g, one, x, n, ZERO_IMPL_SCALAR);
            mk_gelu_fwd(fp, xp, n, ZERO_IMPL_SCALAR);
            mk_gelu_fwd(fm, xm, n, ZERO_IMPL_SCALAR);
        } else if (kind == 1) {
            mk_silu_bwd(g, one, x, n, ZERO_IMPL_SCALAR);
            mk_silu_fwd(fp, xp, n, ZERO_IMPL_SCALAR);
            mk_silu_fwd(fm, xm, n, ZERO_IMPL_SCALAR);
        } else {
            mk_swiglu_bwd(g, gu, one, n, x, u, n, 1, n, ZERO_IMPL_SCALAR);
            mk_swiglu_fwd(fp, n, xp, u, n, 1, n, ZERO_IMPL_SCALAR);
            mk_swiglu_fwd(fm, n, xm, u, n, 1, n, ZERO_IMPL_SCALAR);
        }
        for (size_t i = 0; i < n; i++) {
            const double fd = ((double)fp[i] - fm[i]) / ((double)xp[i] - xm[i]);
            const double err = fabs(fd - g[i]) / (1e-3 + 1e-3 * fabs(g[i]));
            if (err > worst) worst = err;
            if (err > 1.0) {
                ZT_FAIL("fd kind %d at x = %g: fd %.7g, backward %.7g", kind, x[i], fd, g[i]);
                break;
            }
        }
    }
    /* SwiGLU's dup is silu(gate) exactly (linear in up) */
    mk_silu_fwd(fp, x, n, ZERO_IMPL_SCALAR);
    ZT_CHECK(!memcmp(fp, gu, 4 * n));
    printf("activations: finite differences of the scalar twins within %.2f of the bound\n", worst);
    free(x), free(one), free(g), free(fp), free(fm), free(xp), free(xm), free(u), free(gu);
}

/* ---------------------------------------------------------------- norms */
typedef struct norm_case {
    size_t rows;
    int C;
    size_t ldx, ldy;
} norm_case;

static const norm_case norm_cases[] = {{1, 1, 1, 1},      {3, 7, 7, 9},      {5, 8, 11, 8},
                                       {64, 17, 17, 17},   {65, 33, 40, 35},  {130, 64, 64, 64},
                                       {257, 100, 100, 100}, {40, 768, 800, 768}, {4096, 64, 192, 64},
                                       {9, 1031, 1031, 1031}};
enum { NNORM = sizeof norm_cases / sizeof norm_cases[0] };

/* Double-precision LayerNorm/RMSNorm and their gradients (the independent reference). */
static void norm_ref(int rms, const norm_case *c, const float *x, const float *w, const float *b,
                     const float *dy, float *y, float *dx, double *dw, double *db) {
    const int C = c->C;
    for (size_t r = 0; r < c->rows; r++) {
        const float *xr = x + r * c->ldx, *dr = dy + r * c->ldy;
        double m = 0.0, v = 0.0;
        if (!rms) {
            for (int i = 0; i < C; i++) m += xr[i];
            m /= C;
        }
        for (int i = 0; i < C; i++) v += (xr[i] - m) * (xr[i] - m);
        const double rs = 1.0 / sqrt(v / C + 1e-5);
        double s1 = 0.0, s2 = 0.0;
        for (int i = 0; i < C; i++) {
            const double xh = (xr[i] - m) * rs, dn = (double)dr[i] * (w ? w[i] : 1.0);
            y[r * c->ldy + i] = (float)(xh * (w ? w[i] : 1.0) + (b ? b[i] : 0.0));
            s1 += dn;
            s2 += dn * xh;
            if (dw) dw[i] += dr[i] * xh;
            if (db) db[i] += dr[i];
        }
        for (int i = 0; i < C; i++) {
            const double xh = (xr[i] - m) * rs, dn = (double)dr[i] * (w ? w[i] : 1.0);
            dx[r * c->ldx + i] = (float)(rs * (dn - (rms ? 0.0 : s1 / C) - xh * s2 / C));
        }
    }
}

static void test_norms(void) {
    printf("norms (LayerNorm, RMSNorm):\n");
    mt_err e_ref[2][3] = {{{0}}}, e_vec[2][2][3] = {{{{0}}}};
    for (int rms = 0; rms < 2; rms++) {
        for (int ci = 0; ci < NNORM; ci++) {
            const norm_case *c = &norm_cases[ci];
            const int C = c->C;
            const size_t nx = c->rows * c->ldx, ny = c->rows * c->ldy;
            float *x = mt_alloc(nx), *dy = mt_alloc(ny), *w = mt_alloc(C), *b = mt_alloc(C);
            mt_fill(x, nx, 2.0f);
            for (size_t r = 0; r < c->rows; r++) /* an offset per row: LayerNorm must remove it */
                for (int i = 0; i < C; i++) x[r * c->ldx + i] += (float)(r % 5) - 2.0f;
            mt_fill(dy, ny, 1.0f);
            mt_fill(w, C, 1.5f);
            mt_fill(b, C, 0.5f);
            float *yr = mt_alloc(ny), *dxr = mt_alloc(nx);
            double *dwr = calloc(C, sizeof(double)), *dbr = calloc(C, sizeof(double));
            for (size_t i = 0; i < ny; i++) yr[i] = 7.0f; /* the padding between rows, untouched */
            memset(dxr, 0, 4 * nx);
            norm_ref(rms, c, x, w, rms ? NULL : b, dy, yr, dxr, dwr, rms ? NULL : dbr);
            float *dwrf = mt_alloc(C), *dbrf = mt_alloc(C);
            for (int i = 0; i < C; i++) dwrf[i] = (float)(0.25 + dwr[i]), dbrf[i] = (float)(-0.5 + dbr[i]);
            /* outputs per impl: y, dx (accumulated onto 0.125), dw (onto 0.25), db (onto -0.5) */
            float *out[3][4];
            for (int v = -1; v < MT_NVEC; v++) {
                const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
                if (v >= 0 && !mt_impl_runs(impl)) continue;
                float *y = mt_alloc(ny), *dx = mt_alloc(nx), *dw = mt_alloc(C), *db = mt_alloc(C);
                float *mean = mt_alloc(c->rows), *rstd = mt_alloc(c->rows);
                for (size_t i = 0; i < ny; i++) y[i] = 7.0f; /* padding between rows stays */
                for (size_t i = 0; i < nx; i++) dx[i] = 0.125f;
                for (int i = 0; i < C; i++) dw[i] = 0.25f, db[i] = -0.5f;
                if (!rms) {
                    ZT_OK(mk_layernorm_fwd(y, mean, rstd, x, w, b, c->rows, C, c->ldx, c->ldy, 1e-5f, impl));
                    ZT_OK(mk_layernorm_bwd(dx, dw, db, dy, x, w, mean, rstd, c->rows, C, c->ldx, c->ldy, 1, impl));
                } else {
                    ZT_OK(mk_rmsnorm_fwd(y, rstd, x, w, c->rows, C, c->ldx, c->ldy, 1e-5f, impl));
                    ZT_OK(mk_rmsnorm_bwd(dx, dw, dy, x, w, rstd, c->rows, C, c->ldx, c->ldy, 1, impl));
                }
                int pad_ok = 1;
                for (size_t r = 0; r < c->rows; r++) {
                    for (size_t i = C; i < c->ldy; i++) pad_ok &= y[r * c->ldy + i] == 7.0f;
                    for (size_t i = C; i < c->ldx; i++) pad_ok &= dx[r * c->ldx + i] == 0.125f;
                }
                ZT_CHECKF(pad_ok, "%s: a norm wrote between rows", zero_impl_name(impl));
                out[v + 1][0] = y, out[v + 1][1] = dx, out[v + 1][2] = dw, out[v + 1][3] = db;
                free(mean), free(rstd);
            }
            /* the scalar twin against double; the dx reference gets the 0.125 it accumulates onto */
            for (size_t i = 0; i < nx; i++) dxr[i] += 0.125f;
            mt_close(rms ? "rms y" : "ln y", out[0][0], yr, ny, 2e-6, 2e-6, &e_ref[rms][0]);
            mt_close(rms ? "rms dx" : "ln dx", out[0][1], dxr, nx, 2e-6, 2e-5, &e_ref[rms][1]);
            mt_close(rms ? "rms dw" : "ln dw", out[0][2], dwrf, C, 1e-6 * c->rows, 1e-5, &e_ref[rms][2]);
            if (!rms) mt_close("ln db", out[0][3], dbrf, C, 1e-6 * c->rows, 1e-5, &e_ref[rms][2]);
            for (int v = 0; v < MT_NVEC; v++) {
                if (!zero_impl_available(mt_vec_impls[v])) continue;
                mt_close("norm y vec", out[v + 1][0], out[0][0], ny, 2e-6, 2e-6, &e_vec[rms][v][0]);
                mt_close("norm dx vec", out[v + 1][1], out[0][1], nx, 2e-6, 2e-5, &e_vec[rms][v][1]);
                mt_close("norm dw vec", out[v + 1][2], out[0][2], C, 1e-6 * c->rows, 1e-5, &e_vec[rms][v][2]);
                if (!rms) mt_close("ln db vec", out[v + 1][3], out[0][3], C, 1e-6 * c->rows, 1e-5, &e_vec[rms][v][2]);
            }
            for (int v = 0; v <= MT_NVEC; v++) {
                if (v > 0 && !zero_impl_available(mt_vec_impls[v - 1])) continue;
                for (int k = 0; k < 4; k++) free(out[v][k]);
            }
            free(x), free(dy), free(w), free(b), free(yr), free(dxr), free(dwr), free(dbr), free(dwrf), free(dbrf);
        }
        const char *nm = rms ? "rmsnorm" : "layernorm";
        static const char *part[3] = {"y", "dx", "dw/db"};
        for (int k = 0; k < 3; k++) {
            char what[80];
            snprintf(what, sizeof what, "%s %s scalar vs double", nm, part[k]);
            mt_report(what, &e_ref[rms][k]);
            for (int v = 0; v < MT_NVEC; v++) {
                if (!zero_impl_available(mt_vec_impls[v])) continue;
                snprintf(what, sizeof what, "%s %s %s vs scalar", nm, part[k], zero_impl_name(mt_vec_impls[v]));
                mt_report(what, &e_vec[rms][v][k]);
            }
        }
    }
}

/* Written (accumulate = 0) equals accumulated onto zeros; no weight equals weight 1; no bias
 * equals bias 0; in place (y == x) equals out of place; a frozen gain (dw NULL) leaves dx as it
 * is with dw. */
static void test_norm_modes(void) {
    const size_t rows = 77;
    const int C = 45;
    float *x = mt_alloc(rows * C), *dy = mt_alloc(rows * C), *w = mt_alloc(C), *ones = mt_alloc(C);
    float *zeros = mt_alloc(C), *y1 = mt_alloc(rows * C), *y2 = mt_alloc(rows * C), *st = mt_alloc(2 * rows);
    float *dx1 = mt_alloc(rows * C), *dx2 = mt_alloc(rows * C), *dw1 = mt_alloc(C), *dw2 = mt_alloc(C);
    float *db = mt_alloc(C);
    mt_fill(x, rows * C, 3.0f);
    mt_fill(dy, rows * C, 1.0f);
    mt_fill(w, C, 1.0f);
    for (int i = 0; i < C; i++) ones[i] = 1.0f, zeros[i] = 0.0f;
    for (int v = -1; v < MT_NVEC; v++) {
        const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
        if (v >= 0 && !zero_impl_available(impl)) continue;
        float *mean = st, *rstd = st + rows;
        ZT_OK(mk_layernorm_fwd(y1, mean, rstd, x, w, NULL, rows, C, C, C, 1e-5f, impl));
        ZT_OK(mk_layernorm_fwd(y2, NULL, NULL, x, w, zeros, rows, C, C, C, 1e-5f, impl));
        ZT_CHECK(!memcmp(y1, y2, 4 * rows * C));
        memcpy(y2, x, 4 * rows * C);
        ZT_OK(mk_layernorm_fwd(y2, NULL, NULL, y2, w, NULL, rows, C, C, C, 1e-5f, impl));
        ZT_CHECK(!memcmp(y1, y2, 4 * rows * C));
        memset(dx2, 0, 4 * rows * C);
        memset(dw1, 0, 4 * C), memset(dw2, 0, 4 * C), memset(db, 0, 4 * C);
        for (size_t i = 0; i < rows * C; i++) dx1[i] = 99.0f;
        ZT_OK(mk_layernorm_bwd(dx1, dw1, NULL, dy, x, w, mean, rstd, rows, C, C, C, 0, impl));
        ZT_OK(mk_layernorm_bwd(dx2, dw2, db, dy, x, w, mean, rstd, rows, C, C, C, 1, impl));
        ZT_CHECK(!memcmp(dx1, dx2, 4 * rows * C) && !memcmp(dw1, dw2, 4 * C));
        /* a frozen gain and bias (LoRA): dw and db NULL, or db alone; dx the same */
        memset(dx2, 0, 4 * rows * C);
        ZT_OK(mk_layernorm_bwd(dx2, NULL, NULL, dy, x, w, mean, rstd, rows, C, C, C, 1, impl));
        ZT_CHECK(!memcmp(dx1, dx2, 4 * rows * C));
        memset(dw2, 0, 4 * C);
        memcpy(y1, db, 4 * C), memset(db, 0, 4 * C);
        ZT_OK(mk_layernorm_bwd(dx2, NULL, db, dy, x, w, mean, rstd, rows, C, C, C, 0, impl));
        ZT_CHECK(!memcmp(dx1, dx2, 4 * rows * C) && !memcmp(y1, db, 4 * C));
        /* RMSNorm with a frozen gain: dx as with its gradient */
        ZT_OK(mk_rmsnorm_fwd(y1, rstd, x, w, rows, C, C, C, 1e-6f, impl));
        ZT_OK(mk_rmsnorm_bwd(dx1, dw1, dy, x, w, rstd, rows, C, C, C, 0, impl));
        ZT_OK(mk_rmsnorm_bwd(dx2, NULL, dy, x, w, rstd, rows, C, C, C, 0, impl));
        ZT_CHECK(!memcmp(dx1, dx2, 4 * rows * C));
        /* RMSNorm: w NULL is w = 1; rstd NULL is allowed in the forward */
        ZT_OK(mk_rmsnorm_fwd(y1, rstd, x, NULL, rows, C, C, C, 1e-6f, impl));
        ZT_OK(mk_rmsnorm_fwd(y2, NULL, x, ones, rows, C, C, C, 1e-6f, impl));
        ZT_CHECK(!memcmp(y1, y2, 4 * rows * C));
        for (size_t i = 0; i < rows * C; i++) dx1[i] = 99.0f;
        memset(dx2, 0, 4 * rows * C);
        memset(dw2, 0, 4 * C);
        ZT_OK(mk_rmsnorm_bwd(dx1, NULL, dy, x, NULL, rstd, rows, C, C, C, 0, impl));
        ZT_OK(mk_rmsnorm_bwd(dx2, dw2, dy, x, ones, rstd, rows, C, C, C, 1, impl));
        ZT_CHECK(!memcmp(dx1, dx2, 4 * rows * C));
    }
    free(x), free(dy), free(w), free(ones), free(zeros), free(y1), free(y2), free(st);
    free(dx1), free(dx2), free(dw1), free(dw2), free(db);
}

/* L = sum r .* y; dL/d(x, w, b) by central differences of the scalar forward. */
static void test_norm_fd(void) {
    const size_t rows = 3;
    const int C = 7;
    const size_t n = rows * C;
    float x[21], w[7], b[7], r[21], y[21], mean[3], rstd[3], dx[21], dw[7], db[7];
    double worst = 0.0;
    for (int rms = 0; rms < 2; rms++) {
        mt_fill(x, n, 2.0f);
        mt_fill(w, C, 1.5f);
        mt_fill(b, C, 1.0f);
        mt_fill(r, n, 1.0f);
        memset(dx, 0, sizeof dx), memset(dw, 0, sizeof dw), memset(db, 0, sizeof db);
        if (!rms) {
            mk_layernorm_fwd(y, mean, rstd, x, w, b, rows, C, C, C, 1e-5f, ZERO_IMPL_SCALAR);
            mk_layernorm_bwd(dx, dw, db, r, x, w, mean, rstd, rows, C, C, C, 1, ZERO_IMPL_SCALAR);
        } else {
            mk_rmsnorm_fwd(y, rstd, x, w, rows, C, C, C, 1e-5f, ZERO_IMPL_SCALAR);
            mk_rmsnorm_bwd(dx, dw, r, x, w, rstd, rows, C, C, C, 1, ZERO_IMPL_SCALAR);
        }
        float *params[3] = {x, w, b};
        const float *grads[3] = {dx, dw, db};
        const size_t counts[3] = {n, (size_t)C, (size_t)C};
        double gmax = 0.0;
        for (size_t i = 0; i < n; i++) gmax = fmax(gmax, fabs(dx[i]));
        for (int p = 0; p < (rms ? 2 : 3); p++) {
            for (size_t i = 0; i < counts[p]; i++) {
                const float save = params[p][i], h = 1e-2f;
                double l[2];
                for (int s = 0; s < 2; s++) {
                    params[p][i] = save + (s ? -h : h);
                    if (!rms)
                        mk_layernorm_fwd(y, NULL, NULL, x, w, b, rows, C, C, C, 1e-5f, ZERO_IMPL_SCALAR);
                    else
                        mk_rmsnorm_fwd(y, NULL, x, w, rows, C, C, C, 1e-5f, ZERO_IMPL_SCALAR);
                    l[s] = 0.0;
                    for (size_t k = 0; k < n; k++) l[s] += (double)r[k] * y[k];
                }
                params[p][i] = save;
                const double fd = (l[0] - l[1]) / (2.0 * h), g = grads[p][i];
                const double err = fabs(fd - g) / (2e-3 * gmax + 2e-3 * fabs(g) + 2e-4);
                worst = fmax(worst, err);
                ZT_CHECKF(err <= 1.0, "%s fd param %d[%zu]: fd %.7g, backward %.7g", rms ? "rms" : "ln", p, i, fd, g);
            }
        }
    }
    printf("norms: finite differences of the scalar twins within %.2f of the bound\n", worst);
}

/* ---------------------------------------------------------------- softmax, cross-entropy */
static void test_softmax_xent(void) {
    printf("softmax, cross-entropy:\n");
    static const int widths[] = {1, 2, 7, 8, 9, 17, 64, 100, 1000, 50257};
    mt_err es[3] = {{0}}, ex[3] = {{0}}, el[3] = {{0}}, eb[3] = {{0}};
    for (int wi = 0; wi < 10; wi++) {
        const int V = widths[wi];
        const size_t rows = V > 1000 ? 7 : 23, n = rows * V;
        float *x = mt_alloc(n), *sm = mt_alloc(n), *dy = mt_alloc(n), *ref = mt_alloc(n), *dref = mt_alloc(n);
        float *lref = mt_alloc(rows);
        int32_t *tg = malloc(sizeof(int32_t) * rows);
        mt_fill(x, n, 6.0f);
        mt_fill(dy, n, 1.0f);
        for (size_t r = 0; r < rows; r++) {
            tg[r] = (r % 5 == 3) ? -1 : (r % 7 == 4 ? -100 : (int32_t)(mt_next() % (uint64_t)V));
            if (r == 1) x[r * V] = 80.0f; /* a dominating logit */
        }
        const float dscale = 0.75f / 13.0f;
        /* double references: softmax, its backward, losses, the loss gradient */
        for (size_t r = 0; r < rows; r++) {
            const float *xr = x + r * V;
            double mx = xr[0], s = 0.0, dot = 0.0;
            for (int i = 1; i < V; i++) mx = fmax(mx, xr[i]);
            for (int i = 0; i < V; i++) s += exp(xr[i] - mx);
            for (int i = 0; i < V; i++) ref[r * V + i] = (float)(exp(xr[i] - mx) / s);
            for (int i = 0; i < V; i++) dot += (double)ref[r * V + i] * dy[r * V + i];
            for (int i = 0; i < V; i++) dref[r * V + i] = (float)(ref[r * V + i] * (dy[r * V + i] - dot));
            lref[r] = tg[r] < 0 ? 0.0f : (float)(mx + log(s) - xr[tg[r]]);
        }
        for (int v = -1; v < MT_NVEC; v++) {
            const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
            if (v >= 0 && !mt_impl_runs(impl)) continue;
            float *y = mt_alloc(n), *dx = mt_alloc(n), *lg = mt_dup(x, n), *loss = mt_alloc(rows);
            float *lg0 = mt_dup(x, n), *loss0 = mt_alloc(rows);
            ZT_OK(mk_softmax_fwd(y, x, rows, V, impl));
            ZT_OK(mk_softmax_bwd(dx, dy, y, rows, V, impl));
            ZT_OK(mk_cross_entropy(lg, loss, tg, rows, V, dscale, impl));
            ZT_OK(mk_cross_entropy(lg0, loss0, tg, rows, V, 0.0f, impl));
            ZT_CHECKF(!memcmp(lg0, x, 4 * n), "%s: dscale 0 changed the logits", zero_impl_name(impl));
            ZT_CHECK(!memcmp(loss0, loss, 4 * rows));
            /* the gradient reference: (softmax - onehot) * dscale, zero rows for ignored targets */
            float *gref = mt_alloc(n);
            for (size_t r = 0; r < rows; r++)
                for (int i = 0; i < V; i++)
                    gref[r * V + i] = tg[r] < 0 ? 0.0f : (float)(dscale * ((double)ref[r * V + i] - (i == tg[r])));
            mt_close("softmax", y, ref, n, 1e-9, 3e-6, &es[v + 1]);
            /* dy - sum(y dy) cancels: the bound is absolute, a few roundings of |dy| <= 1 */
            mt_close("softmax bwd", dx, dref, n, 2e-7, 1e-5, &eb[v + 1]);
            mt_close("xent loss", loss, lref, rows, 1e-6, 1e-6, &el[v + 1]);
            /* at the target, dscale p - dscale cancels: absolute bound, 2 ulp of dscale */
            mt_close("xent grad", lg, gref, n, 2.4e-7 * dscale, 3e-6, &ex[v + 1]);
            for (size_t r = 0; r < rows; r++)
                if (tg[r] < 0) ZT_CHECK(loss[r] == 0.0f);
            free(gref), free(y), free(dx), free(lg), free(loss), free(lg0), free(loss0);
        }
        free(x), free(sm), free(dy), free(ref), free(dref), free(lref), free(tg);
    }
    for (int v = -1; v < MT_NVEC; v++) {
        const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
        if (v >= 0 && !zero_impl_available(impl)) continue;
        char what[80];
        snprintf(what, sizeof what, "softmax %s vs double", zero_impl_name(impl));
        mt_report(what, &es[v + 1]);
        snprintf(what, sizeof what, "softmax bwd %s vs double", zero_impl_name(impl));
        mt_report(what, &eb[v + 1]);
        snprintf(what, sizeof what, "xent loss %s vs double", zero_impl_name(impl));
        mt_report(what, &el[v + 1]);
        snprintf(what, sizeof what, "xent grad %s vs double", zero_impl_name(impl));
        mt_report(what, &ex[v + 1]);
    }
    /* finite differences of the scalar loss, and in-place softmax equals out of place */
    const int V = 11;
    const size_t rows = 4;
    float x[44], g[44], loss[4], lp[4], xc[44];
    const int32_t tg[4] = {3, -1, 0, 10};
    mt_fill(x, 44, 3.0f);
    memcpy(g, x, sizeof x);
    ZT_OK(mk_cross_entropy(g, loss, tg, rows, V, 0.5f, ZERO_IMPL_SCALAR));
    double worst = 0.0;
    for (size_t i = 0; i < rows * V; i++) {
        double l[2];
        for (int s = 0; s < 2; s++) {
            memcpy(xc, x, sizeof x);
            xc[i] += s ? -1e-2f : 1e-2f;
            ZT_OK(mk_cross_entropy(xc, lp, tg, rows, V, 0.0f, ZERO_IMPL_SCALAR));
            l[s] = 0.5 * ((double)lp[0] + lp[1] + lp[2] + lp[3]);
        }
        const double fd = (l[0] - l[1]) / 2e-2, err = fabs(fd - g[i]) / (2e-4 + 2e-3 * fabs(g[i]));
        worst = fmax(worst, err);
        ZT_CHECKF(err <= 1.0, "xent fd[%zu]: %.7g vs %.7g", i, fd, g[i]);
    }
    printf("cross-entropy: finite differences of the scalar twin within %.2f of the bound\n", worst);
    /* softmax: L = sum r .* softmax(x), dL/dx = mk_softmax_bwd(r, y) */
    float rr[44], y[44], dxs[44], yp[44];
    mt_fill(rr, 44, 1.0f);
    ZT_OK(mk_softmax_fwd(y, x, rows, V, ZERO_IMPL_SCALAR));
    ZT_OK(mk_softmax_bwd(dxs, rr, y, rows, V, ZERO_IMPL_SCALAR));
    worst = 0.0;
    for (size_t i = 0; i < rows * V; i++) {
        double l[2];
        for (int sg = 0; sg < 2; sg++) {
            memcpy(xc, x, sizeof x);
            xc[i] += sg ? -1e-2f : 1e-2f;
            ZT_OK(mk_softmax_fwd(yp, xc, rows, V, ZERO_IMPL_SCALAR));
            l[sg] = 0.0;
            for (size_t k = 0; k < rows * V; k++) l[sg] += (double)rr[k] * yp[k];
        }
        const double fd = (l[0] - l[1]) / 2e-2, err = fabs(fd - dxs[i]) / (2e-4 + 2e-3 * fabs(dxs[i]));
        worst = fmax(worst, err);
        ZT_CHECKF(err <= 1.0, "softmax fd[%zu]: %.7g vs %.7g", i, fd, dxs[i]);
    }
    printf("softmax: finite differences of the scalar twin within %.2f of the bound\n", worst);
    memcpy(xc, x, sizeof x);
    ZT_OK(mk_softmax_fwd(g, x, rows, V, ZERO_IMPL_AUTO));
    ZT_OK(mk_softmax_fwd(xc, xc, rows, V, ZERO_IMPL_AUTO));
    ZT_CHECK(!memcmp(g, xc, sizeof x));
    /* a target >= V is refused before anything is written */
    const int32_t bad[4] = {1, 2, 11, 0};
    memcpy(xc, x, sizeof x);
    ZT_EQ_INT(mk_cross_entropy(xc, lp, bad, rows, V, 1.0f, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(!memcmp(xc, x, sizeof x));
}

/* ---------------------------------------------------------------- RoPE */
static void test_rope(void) {
    printf("rope:\n");
    const int n_pos = 300, rot = 64;
    float *cs = mt_alloc(n_pos * rot / 2), *sn = mt_alloc(n_pos * rot / 2);
    mk_rope_freq f = {.theta = 10000.0, .scaling = MK_ROPE_NONE};
    ZT_OK(mk_rope_table(cs, sn, n_pos, rot, &f));
    /* against double angles: the fp32 angle p * inv_freq carries up to p * inv * 2^-23 */
    double worst = 0.0;
    for (int p = 0; p < n_pos; p++)
        for (int i = 0; i < rot / 2; i++) {
            const double inv = pow(10000.0, -2.0 * i / rot), ang = p * inv;
            const double bound = 1e-7 + 2.5 * ang * ldexp(1.0, -24);
            const double e = fmax(fabs(cs[p * rot / 2 + i] - cos(ang)), fabs(sn[p * rot / 2 + i] - sin(ang)));
            worst = fmax(worst, e / bound);
        }
    printf("  table vs double angles: worst error/bound %.3f\n", worst);
    ZT_CHECK(worst <= 1.0);
    ZT_CHECK(cs[0] == 1.0f && sn[0] == 0.0f);
    /* linear scaling: position p of factor 4 is position p/4 unscaled (p a multiple of 4) */
    float *cl = mt_alloc(n_pos * rot / 2), *sl = mt_alloc(n_pos * rot / 2);
    f.scaling = MK_ROPE_LINEAR, f.factor = 4.0;
    ZT_OK(mk_rope_table(cl, sl, n_pos, rot, &f));
    int lin_ok = 1;
    for (int p = 0; p < n_pos; p += 4)
        for (int i = 0; i < rot / 2; i++)
            lin_ok &= fabs(cl[p * rot / 2 + i] - cs[p / 4 * rot / 2 + i]) <= 2e-6 + p * 1e-7;
    ZT_CHECK(lin_ok);
    /* Llama 3: high frequencies unchanged, low ones divided by the factor */
    f = (mk_rope_freq){.theta = 500000.0, .scaling = MK_ROPE_LLAMA3, .factor = 8.0, .low_freq_factor = 1.0,
                       .high_freq_factor = 4.0, .original_max_pos = 8192};
    float *c3 = mt_alloc(n_pos * rot / 2), *s3 = mt_alloc(n_pos * rot / 2);
    ZT_OK(mk_rope_table(c3, s3, n_pos, rot, &f));
    f.scaling = MK_ROPE_NONE;
    ZT_OK(mk_rope_table(cl, sl, n_pos, rot, &f));
    ZT_CHECK(c3[1 * rot / 2 + 0] == cl[1 * rot / 2 + 0]); /* i = 0: wavelength 2 pi < 2048 */
    const double inv_last = pow(500000.0, -2.0 * 31 / 64) / 8.0; /* wavelength far above 8192 */
    ZT_CHECK(fabs(s3[299 * rot / 2 + 31] - sin(299 * inv_last)) < 1e-6);
    /* bad tables */
    ZT_EQ_INT(mk_rope_table(cl, sl, n_pos, 63, &f), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_rope_table(cl, sl, 0, 64, &f), ZERO_ERR_INVALID_ARG);
    f.theta = 1.0;
    ZT_EQ_INT(mk_rope_table(cl, sl, n_pos, 64, &f), ZERO_ERR_INVALID_ARG);
    f = (mk_rope_freq){.theta = 1e4, .scaling = MK_ROPE_LLAMA3, .factor = 8, .low_freq_factor = 4, .high_freq_factor = 1, .original_max_pos = 8192};
    ZT_EQ_INT(mk_rope_table(cl, sl, n_pos, 64, &f), ZERO_ERR_INVALID_ARG);

    /* apply: a fused qkv-like layout, partial rotary dims, positions from T and from an array */
    static const int hds[][2] = {{64, 64}, {16, 16}, {6, 4}, {80, 64}, {34, 34}, {128, 32}};
    for (int hi = 0; hi < 6; hi++) {
        const int hd = hds[hi][0], rd = hds[hi][1], H = 3, T = 37, B = 2;
        const size_t ld = (size_t)H * hd + 5, N = (size_t)B * T;
        float *ct = mt_alloc(n_pos * rd / 2), *st = mt_alloc(n_pos * rd / 2);
        mk_rope_freq ff = {.theta = 10000.0};
        ZT_OK(mk_rope_table(ct, st, n_pos, rd, &ff));
        const mk_rope rp = {ct, st, n_pos, rd};
        float *x = mt_alloc(N * ld), *ref = mt_alloc(N * ld), *y = mt_alloc(N * ld);
        mt_fill(x, N * ld, 2.0f);
        memcpy(ref, x, 4 * N * ld);
        for (size_t n = 0; n < N; n++)
            for (int h = 0; h < H; h++) {
                float *r = ref + n * ld + h * hd;
                const int p = (int)(n % T);
                for (int i = 0; i < rd / 2; i++) {
                    const double c = ct[p * rd / 2 + i], s = st[p * rd / 2 + i], a = r[i], b = r[i + rd / 2];
                    r[i] = (float)(a * c - b * s);
                    r[i + rd / 2] = (float)(b * c + a * s);
                }
            }
        int32_t *pos = malloc(sizeof(int32_t) * N);
        for (size_t n = 0; n < N; n++) pos[n] = (int32_t)(n % T);
        for (int v = -1; v < MT_NVEC; v++) {
            const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
            if (v >= 0 && !mt_impl_runs(impl)) continue;
            memcpy(y, x, 4 * N * ld);
            ZT_OK(mk_rope_fwd(&rp, y, ld, N, T, H, hd, NULL, impl));
            mt_close("rope fwd", y, ref, N * ld, 1e-6, 1e-6, NULL);
            float *y2 = mt_dup(x, N * ld);
            ZT_OK(mk_rope_fwd(&rp, y2, ld, N, 0, H, hd, pos, impl));
            ZT_CHECK(!memcmp(y, y2, 4 * N * ld));
            /* the backward undoes the forward (rotation by -angle) */
            ZT_OK(mk_rope_bwd(&rp, y2, ld, N, T, H, hd, NULL, impl));
            mt_close("rope bwd(fwd(x))", y2, x, N * ld, 1e-6, 1e-6, NULL);
            /* adjoint: <fwd(a), b> = <a, bwd(b)> */
            float *a = mt_alloc(N * ld), *bb = mt_alloc(N * ld);
            mt_fill(a, N * ld, 1.0f), mt_fill(bb, N * ld, 1.0f);
            float *fa = mt_dup(a, N * ld), *gb = mt_dup(bb, N * ld);
            ZT_OK(mk_rope_fwd(&rp, fa, ld, N, T, H, hd, NULL, impl));
            ZT_OK(mk_rope_bwd(&rp, gb, ld, N, T, H, hd, NULL, impl));
            double l1 = 0.0, l2 = 0.0;
            for (size_t i = 0; i < N * ld; i++) l1 += (double)fa[i] * bb[i], l2 += (double)a[i] * gb[i];
            ZT_NEAR(l1, l2, 1e-5);
            free(a), free(bb), free(fa), free(gb), free(y2);
        }
        pos[5] = n_pos;
        ZT_EQ_INT(mk_rope_fwd(&rp, y, ld, N, T, H, hd, pos, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
        pos[5] = -1;
        ZT_EQ_INT(mk_rope_fwd(&rp, y, ld, N, T, H, hd, pos, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
        ZT_EQ_INT(mk_rope_fwd(&rp, y, H * hd - 1, N, T, H, hd, NULL, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
        const mk_rope big = {ct, st, n_pos, hd + 2};
        ZT_EQ_INT(mk_rope_fwd(&big, y, ld, N, T, H, hd, NULL, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
        free(pos), free(x), free(ref), free(y), free(ct), free(st);
    }
    const mk_rope shortt = {cs, sn, 10, rot};
    float xx[64 * 20];
    mt_fill(xx, 64 * 20, 1.0f);
    ZT_EQ_INT(mk_rope_fwd(&shortt, xx, 64, 20, 20, 1, 64, NULL, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    free(cs), free(sn), free(cl), free(sl), free(c3), free(s3);
}

/* The table against transformers' LlamaRotaryEmbedding (tests/data/mk_rope_golden.txt, written
 * by scripts/mk_rope_golden.py). The inverse frequencies are computed in fp32 the same way, but
 * torch's fp32 pow is not correctly rounded (within 1 ulp), so an inv_freq may differ by an ulp,
 * which moves the fp32 angle p * inv by up to p * 2^-23 inv: the bound is the rounding of torch's
 * cos/sin (3e-7) plus that. Most values need no allowance; the test prints how many did. */
static void test_rope_golden(void) {
    const char *dir = getenv("ZERO_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/mk_rope_golden.txt", dir ? dir : ".");
    FILE *f = fopen(path, "r");
    ZT_CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return;
    char line[65536];
    int cases = 0, positions = 0, rd = 0, n_pos = 32768;
    float *cs = mt_alloc((size_t)n_pos * 64), *sn = mt_alloc((size_t)n_pos * 64);
    double worst = 0.0;
    int allowance = 0, values = 0;
    mk_rope_freq fr = {0};
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        if (!strncmp(line, "case ", 5)) {
            char name[64];
            int scaling, orig, np;
            ZT_EQ_INT(sscanf(line, "case %63s %d %lf %lf %lf %lf %d %d %d", name, &scaling, &fr.theta, &fr.factor,
                             &fr.low_freq_factor, &fr.high_freq_factor, &orig, &rd, &np), 9);
            fr.scaling = (mk_rope_scaling)scaling, fr.original_max_pos = orig;
            ZT_OK(mk_rope_table(cs, sn, n_pos, rd, &fr));
            cases++;
            continue;
        }
        int p, off;
        if (sscanf(line, "pos %d%n", &p, &off) != 1) continue;
        const char *q = line + off;
        for (int i = 0; i < rd; i++) {
            char *end;
            const double g = strtod(q, &end);
            q = end;
            const int k = i < rd / 2 ? i : i - rd / 2;
            const float got = i < rd / 2 ? cs[(size_t)p * rd / 2 + k] : sn[(size_t)p * rd / 2 + k];
            /* inv_freq of pair k, recovered from the table's position-1 angle (exact for sin < 1) */
            const double inv = atan2(sn[(size_t)rd / 2 + k], cs[(size_t)rd / 2 + k]);
            const double bound = 3e-7 + p * ldexp(fabs(inv), -23) * 1.01;
            worst = fmax(worst, fabs(got - g));
            allowance += fabs(got - g) > 3e-7;
            values++;
            ZT_CHECKF(fabs(got - g) <= bound, "rope golden pos %d [%d]: %.9g vs transformers %.9g", p, i, got, g);
        }
        positions++;
    }
    fclose(f);
    ZT_EQ_INT(cases, 4);
    ZT_EQ_INT(positions, 36);
    printf("  table vs transformers (4 configs, positions up to 32767): worst |diff| %.3g; %d of %d values "
           "beyond 3e-7 (an inv_freq an ulp from torch's)\n", worst, allowance, values);
    free(cs), free(sn);
}

/* ---------------------------------------------------------------- reductions */
static void test_reductions(void) {
    printf("reductions:\n");
    static const size_t shapes[][3] = {{1, 1, 1}, {7, 3, 5}, {64, 17, 17}, {65, 33, 40}, {129, 768, 768},
                                       {1000, 9, 9}, {513, 3072, 3072}, {3, 100000, 100000}};
    for (int si = 0; si < 8; si++) {
        const size_t rows = shapes[si][0], cols = shapes[si][1], ld = shapes[si][2];
        float *src = mt_alloc(rows * ld);
        mt_fill(src, rows * ld, 1.0f);
        float *ref = mt_alloc(cols);
        for (size_t j = 0; j < cols; j++) {
            double s = 0.5;
            for (size_t r = 0; r < rows; r++) s += src[r * ld + j];
            ref[j] = (float)s;
        }
        for (int v = -1; v < MT_NVEC; v++) {
            const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
            if (v >= 0 && !mt_impl_runs(impl)) continue;
            float *dst = mt_alloc(cols);
            for (size_t j = 0; j < cols; j++) dst[j] = 0.5f;
            ZT_OK(mk_colsum(dst, src, rows, cols, ld, impl));
            /* fp32 within chunks of 64 rows: 64 roundings of sums below 64 at most */
            mt_close("colsum", dst, ref, cols, 64 * 64 * 6e-8, 1e-6, NULL);
            free(dst);
        }
        free(src), free(ref);
    }
    for (int si = 0; si < NSIZES; si++) {
        const size_t n = sizes[si];
        float *x = mt_alloc(n);
        mt_fill(x, n, 3.0f);
        double ref = 0.0;
        for (size_t i = 0; i < n; i++) ref += (double)x[i] * x[i];
        for (int v = -1; v < MT_NVEC; v++) {
            const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
            if (v >= 0 && !mt_impl_runs(impl)) continue;
            double s = -1.0;
            ZT_OK(mk_sum_squares(x, n, &s, impl));
            ZT_CHECKF(fabs(s - ref) <= 1e-12 * ref, "sum_squares %s n=%zu: %.17g vs %.17g", zero_impl_name(impl), n, s, ref);
        }
        free(x);
    }
}

/* ---------------------------------------------------------------- threads */
/* Every kernel gives the same bits on 1 and 3 threads, on inputs above the parallel threshold. */
static void test_threads(void) {
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    const size_t rows = 2048, C = 200, n = rows * C;
    float *x = mt_alloc(n), *dy = mt_alloc(n), *w = mt_alloc(C), *b = mt_alloc(C);
    mt_fill(x, n, 4.0f), mt_fill(dy, n, 1.0f), mt_fill(w, C, 1.0f), mt_fill(b, C, 1.0f);
    int32_t *tg = malloc(sizeof(int32_t) * rows);
    for (size_t r = 0; r < rows; r++) tg[r] = (int32_t)(r % 205) - 10;
    for (int v = -1; v < MT_NVEC; v++) {
        const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
        if (v >= 0 && !zero_impl_available(impl)) continue;
        float *res[2][8];
        double ss[2];
        for (int k = 0; k < 2; k++) {
            omp_set_num_threads(k ? 3 : 1);
            float **o = res[k];
            for (int i = 0; i < 8; i++) o[i] = mt_alloc(i == 3 || i == 4 ? C : n);
            ZT_OK(mk_gelu_fwd(o[0], x, n, impl));
            ZT_OK(mk_gelu_bwd(o[1], dy, x, n, impl));
            float mean[2048], rstd[2048];
            ZT_OK(mk_layernorm_fwd(o[2], mean, rstd, x, w, b, rows, (int)C, C, C, 1e-5f, impl));
            memset(o[3], 0, 4 * C), memset(o[4], 0, 4 * C);
            ZT_OK(mk_layernorm_bwd(o[5], o[3], o[4], dy, x, w, mean, rstd, rows, (int)C, C, C, 0, impl));
            ZT_OK(mk_colsum(o[4], dy, rows, C, C, impl));
            memcpy(o[6], x, 4 * n);
            float loss[2048];
            ZT_OK(mk_cross_entropy(o[6], loss, tg, rows, (int)C, 0.01f, impl));
            ZT_OK(mk_swiglu_bwd(o[7], o[0], dy, C, x, x, C, rows, C, impl));
            ZT_OK(mk_sum_squares(x, n, &ss[k], impl));
        }
        int same = ss[0] == ss[1];
        for (int i = 0; i < 8; i++) same &= !memcmp(res[0][i], res[1][i], 4 * (i == 3 || i == 4 ? C : n));
        ZT_CHECKF(same, "%s: results differ between 1 and 3 threads", zero_impl_name(impl));
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 8; i++) free(res[k][i]);
    }
    omp_set_num_threads(saved);
    free(x), free(dy), free(w), free(b), free(tg);
#endif
}

/* ---------------------------------------------------------------- arguments */
static void test_args(void) {
    float x[16] = {0}, y[16];
    ZT_EQ_INT(mk_gelu_fwd(y, x, 16, (zero_impl)9), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_gelu_fwd(NULL, x, 16, ZERO_IMPL_SCALAR), ZERO_ERR_INVALID_ARG);
    ZT_OK(mk_gelu_fwd(NULL, NULL, 0, ZERO_IMPL_AUTO));
    ZT_EQ_INT(mk_layernorm_fwd(y, NULL, NULL, x, x, NULL, 2, 8, 7, 8, 1e-5f, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_layernorm_fwd(y, NULL, NULL, x, NULL, NULL, 2, 8, 8, 8, 1e-5f, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_layernorm_fwd(y, NULL, NULL, x, x, NULL, 2, 8, 8, 8, -1.0f, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_rmsnorm_bwd(y, y, x, x, NULL, x, 2, 8, 8, 8, 0, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG); /* dw without w */
    ZT_EQ_INT(mk_swiglu_fwd(y, 3, x, x, 4, 2, 4, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_colsum(y, x, 2, 8, 7, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_sum_squares(x, 4, NULL, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_softmax_fwd(y, x, 2, 0, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    int32_t t[2] = {0, 1};
    ZT_EQ_INT(mk_cross_entropy(x, y, t, 2, 8, NAN, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
}

int main(void) {
    printf("impl chosen here: %s\n", zero_impl_name(zero_impl_best()));
    test_exp();
    test_activations();
    test_fused_bias_gelu();
    test_activation_fd();
    test_norms();
    test_norm_modes();
    test_norm_fd();
    test_softmax_xent();
    test_rope();
    test_rope_golden();
    test_reductions();
    test_threads();
    test_args();
    return zt_finish("test_mkernels");
}
