/* models/kernels/mk_linear.c — linear layers: the products through the BLAS (fp32 sgemm, or bf16
 * operands with fp32 accumulation through mk_gemm_bf16) with the bias and the residual written
 * into the output before the product adds to it, the backward's two products and bias gradient;
 * and the scalar reference (plain loops, sums in double). */
#include <stdlib.h>
#include <string.h>

#include "kernels/mk_internal.h"

/* ---------------------------------------------------------------- the scalar reference */
/* v rounded to bf16 and back when on (round to nearest even, as zero_convert). */
static inline double op(float v, int on) { return on ? (double)zero_bf16_to_fp32(zero_fp32_to_bf16(v)) : (double)v; }

/* W'(i, o): the weight of input i for output o. */
static inline float wat(const float *W, int i, int o, int IC, int OC, int tw) {
    return tw ? W[(size_t)o * IC + i] : W[(size_t)i * OC + o];
}

static void ref_fwd(float *out, const float *x, const float *W, const float *bias, const float *resid, size_t N,
                    int IC, int OC, int tw, int bf) {
    for (size_t n = 0; n < N; n++)
        for (int o = 0; o < OC; o++) {
            double s = 0.0;
            for (int i = 0; i < IC; i++) s += op(x[n * IC + i], bf) * op(wat(W, i, o, IC, OC, tw), bf);
            float v = (float)s;
            if (bias) v += bias[o];
            if (resid) v += resid[n * OC + o];
            out[n * OC + o] = v;
        }
}

static void ref_bwd(float *dx, float *dW, const float *dy, const float *x, const float *W, size_t N, int IC,
                    int OC, int tw, int bf) {
    if (dx)
        for (size_t n = 0; n < N; n++)
            for (int i = 0; i < IC; i++) {
                double s = 0.0;
                for (int o = 0; o < OC; o++) s += op(dy[n * OC + o], bf) * op(wat(W, i, o, IC, OC, tw), bf);
                dx[n * IC + i] = (float)s;
            }
    if (dW)
        for (int i = 0; i < IC; i++)
            for (int o = 0; o < OC; o++) {
                double s = 0.0;
                for (size_t n = 0; n < N; n++) s += op(x[n * IC + i], bf) * op(dy[n * OC + o], bf);
                float *d = tw ? &dW[(size_t)o * IC + i] : &dW[(size_t)i * OC + o];
                *d += (float)s;
            }
}

/* ---------------------------------------------------------------- bf16 operands */
/* n floats rounded to bf16 into a new array (NULL when out of memory). */
static uint16_t *to_bf16(const float *x, size_t n) {
    uint16_t *b = malloc(sizeof(uint16_t) * (n ? n : 1));
    if (b) zero_convert(x, ZERO_DTYPE_FP32, b, ZERO_DTYPE_BF16, n, ZERO_IMPL_AUTO);
    return b;
}

/* ---------------------------------------------------------------- entry points */
zero_status mk_linear_fwd_bf16(float *out, const uint16_t *xb, const uint16_t *wb, int N, int IC, int OC,
                               int trans_w, float beta) {
    const int tw = trans_w ? 1 : 0;
    return mk_gemm_bf16(0, tw, N, OC, IC, 1.0f, xb, IC, wb, tw ? IC : OC, beta, out, OC, MK_GEMM_AUTO);
}

zero_status mk_linear_bwd_bf16(float *dx, float *dW, const uint16_t *dyb, const uint16_t *xb, const uint16_t *wb,
                               int N, int IC, int OC, int trans_w) {
    const int tw = trans_w ? 1 : 0;
    zero_status st = ZERO_OK;
    if (dx) st = mk_gemm_bf16(0, !tw, N, IC, OC, 1.0f, dyb, OC, wb, tw ? IC : OC, 0.0f, dx, IC, MK_GEMM_AUTO);
    if (!st && dW)
        st = tw ? mk_gemm_bf16(1, 0, OC, IC, N, 1.0f, dyb, OC, xb, IC, 1.0f, dW, IC, MK_GEMM_AUTO)
                : mk_gemm_bf16(1, 0, IC, OC, N, 1.0f, xb, IC, dyb, OC, 1.0f, dW, OC, MK_GEMM_AUTO);
    return st;
}

static int bad_sizes(size_t N, int IC, int OC) { return N < 1 || N > (size_t)INT32_MAX || IC < 1 || OC < 1; }

/* n bf16 values widened into a new fp32 array (NULL when out of memory): the scalar references
 * read a weight given in bf16 this way (rounding it again for the products changes nothing). */
static float *widened(const uint16_t *b, size_t n) {
    float *f = malloc(sizeof(float) * (n ? n : 1));
    if (f) zero_convert(b, ZERO_DTYPE_BF16, f, ZERO_DTYPE_FP32, n, ZERO_IMPL_AUTO);
    return f;
}

/* mk_linear_fwd with the weight in fp32 (W) or already rounded to bf16 (wb, bf16 products). */
static zero_status linear_fwd(float *out, const float *x, const float *W, const uint16_t *wb, const float *bias,
                              const float *resid, size_t N, int IC, int OC, int tw, mk_prec prec, zero_impl impl) {
    const mk__isa *isa;
    zero_impl which;
    zero_status st = mk__pick(impl, &isa, &which);
    if (st != ZERO_OK) return st;
    if (bad_sizes(N, IC, OC) || !out || !x || (!W && !wb) || (prec != MK_PREC_FP32 && prec != MK_PREC_BF16))
        return ZERO_ERR_INVALID_ARG;
    if (which == ZERO_IMPL_SCALAR) {
        float *Wf = wb ? widened(wb, (size_t)IC * OC) : NULL;
        if (wb && !Wf) return ZERO_ERR_NOMEM;
        ref_fwd(out, x, wb ? Wf : W, bias, resid, N, IC, OC, tw, prec == MK_PREC_BF16);
        free(Wf);
        return ZERO_OK;
    }
    uint16_t *xb = NULL, *wown = NULL;
    if (prec == MK_PREC_BF16) {
        xb = to_bf16(x, N * (size_t)IC);
        if (!wb) wb = wown = to_bf16(W, (size_t)IC * OC);
        if (!xb || !wb) {
            free(xb), free(wown);
            return ZERO_ERR_NOMEM;
        }
    }
    /* out = resid + bias before the product; the GEMM adds to it (beta 1) */
    const size_t oc = (size_t)OC;
    float beta = 0.0f;
    if (bias || resid) {
        beta = 1.0f;
        if (!(resid == out && !bias)) {
#pragma omp parallel for schedule(static) if (N * oc >= MK_PAR_MIN)
            for (size_t n = 0; n < N; n++)
                isa->row_add(out + n * oc, resid ? resid + n * oc : bias, resid ? bias : NULL, oc);
        }
    }
    if (prec == MK_PREC_FP32) {
        mk__sgemm(0, tw, (int)N, OC, IC, 1.0f, x, IC, W, tw ? IC : OC, beta, out, OC);
    } else {
        st = mk_linear_fwd_bf16(out, xb, wb, (int)N, IC, OC, tw, beta);
    }
    free(xb), free(wown);
    return st;
}

/* mk_linear_bwd with the weight in fp32 (W) or already rounded to bf16 (wb, bf16 products). */
static zero_status linear_bwd(float *dx, float *dW, float *dbias, const float *dy, const float *x, const float *W,
                              const uint16_t *wb, size_t N, int IC, int OC, int tw, mk_prec prec, zero_impl impl) {
    const mk__isa *isa;
    zero_impl which;
    zero_status st = mk__pick(impl, &isa, &which);
    if (st != ZERO_OK) return st;
    if (bad_sizes(N, IC, OC) || !dy || (dx && !W && !wb) || (dW && !x) || (prec != MK_PREC_FP32 && prec != MK_PREC_BF16))
        return ZERO_ERR_INVALID_ARG;
    const int M = (int)N;
    if (which == ZERO_IMPL_SCALAR) {
        float *Wf = dx && wb ? widened(wb, (size_t)IC * OC) : NULL;
        if (dx && wb && !Wf) return ZERO_ERR_NOMEM;
        ref_bwd(dx, dW, dy, x, Wf ? Wf : W, N, IC, OC, tw, prec == MK_PREC_BF16);
        free(Wf);
        return dbias ? mk_colsum(dbias, dy, N, (size_t)OC, (size_t)OC, impl) : ZERO_OK;
    }
    if (prec == MK_PREC_FP32) {
        if (dx) {
            if (tw) /* W (OC, IC): dx = dy W */
                mk__sgemm(0, 0, M, IC, OC, 1.0f, dy, OC, W, IC, 0.0f, dx, IC);
            else /* W (IC, OC): dx = dy W^T */
                mk__sgemm(0, 1, M, IC, OC, 1.0f, dy, OC, W, OC, 0.0f, dx, IC);
        }
        if (dW) {
            if (tw) /* dW (OC, IC) += dy^T x */
                mk__sgemm(1, 0, OC, IC, M, 1.0f, dy, OC, x, IC, 1.0f, dW, IC);
            else /* dW (IC, OC) += x^T dy */
                mk__sgemm(1, 0, IC, OC, M, 1.0f, x, IC, dy, OC, 1.0f, dW, OC);
        }
    } else {
        uint16_t *dyb = to_bf16(dy, N * (size_t)OC), *wown = NULL;
        uint16_t *xb = dW ? to_bf16(x, N * (size_t)IC) : NULL;
        if (dx && !wb) wb = wown = to_bf16(W, (size_t)IC * OC);
        if (!dyb || (dx && !wb) || (dW && !xb)) st = ZERO_ERR_NOMEM;
        if (!st) st = mk_linear_bwd_bf16(dx, dW, dyb, xb, wb, M, IC, OC, tw);
        free(dyb), free(wown), free(xb);
        if (st) return st;
    }
    return dbias ? mk_colsum(dbias, dy, N, (size_t)OC, (size_t)OC, impl) : ZERO_OK;
}

zero_status mk_linear_fwd(float *out, const float *x, const float *W, const float *bias,
                          const float *resid, size_t N, int IC, int OC, int trans_w, mk_prec prec,
                          zero_impl impl) {
    if (!W) return ZERO_ERR_INVALID_ARG;
    return linear_fwd(out, x, W, NULL, bias, resid, N, IC, OC, trans_w ? 1 : 0, prec, impl);
}

zero_status mk_linear_bwd(float *dx, float *dW, float *dbias, const float *dy, const float *x,
                          const float *W, size_t N, int IC, int OC, int trans_w, mk_prec prec,
                          zero_impl impl) {
    if (dx && !W) return ZERO_ERR_INVALID_ARG;
    return linear_bwd(dx, dW, dbias, dy, x, W, NULL, N, IC, OC, trans_w ? 1 : 0, prec, impl);
}

zero_status mk_linear_fwd_wb(float *out, const float *x, const uint16_t *wb, const float *bias, const float *resid,
                             size_t N, int IC, int OC, int trans_w, zero_impl impl) {
    if (!wb) return ZERO_ERR_INVALID_ARG;
    return linear_fwd(out, x, NULL, wb, bias, resid, N, IC, OC, trans_w ? 1 : 0, MK_PREC_BF16, impl);
}

zero_status mk_linear_bwd_wb(float *dx, float *dW, float *dbias, const float *dy, const float *x, const uint16_t *wb,
                             size_t N, int IC, int OC, int trans_w, zero_impl impl) {
    if (dx && !wb) return ZERO_ERR_INVALID_ARG;
    return linear_bwd(dx, dW, dbias, dy, x, NULL, wb, N, IC, OC, trans_w ? 1 : 0, MK_PREC_BF16, impl);
}
