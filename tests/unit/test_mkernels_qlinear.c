/* Linear layers over a quantized frozen weight (mk_qlinear_fwd / mk_qlinear_bwd): the tile loader
 * against zero_dequant_nf4 / zero_dequant_blockwise bit for bit (tiles that start and end inside a
 * block, double-quantized scales decoded per tile), the scalar reference equal to mk_linear's on
 * the decoded weight bit for bit, and the tiled BLAS path against mk_linear on the decoded weight
 * (fp32 and bf16 products, NF4 and int8, several tiles, a bias and a residual). */
#include "mkernels_util.h"
#include "zero/quant.h"

enum { N = 7, IC = 1024, OC = 200 };

typedef struct qw {
    mk_qweight w;
    uint8_t *codes, *qabsmax;
    float *absmax, *absmax2, *dense; /* dense: the weight decoded whole (the reference's operand) */
} qw;

static void make(qw *q, const float *W, mk_qfmt fmt, int dq) {
    const uint64_t n = (uint64_t)OC * IC, nb = zero_quant_blocks(n, 64), nb2 = zero_quant_blocks(nb, 256);
    memset(q, 0, sizeof *q);
    q->absmax = mt_alloc(nb);
    q->dense = mt_alloc(n);
    if (fmt == MK_Q_NF4) {
        q->codes = malloc(n / 2);
        zero_quant_nf4(W, n, q->codes, q->absmax);
    } else {
        float code[256];
        zero_quant_linear_map(code);
        q->codes = malloc(n);
        zero_quant_blockwise(W, n, 64, code, q->codes, q->absmax);
    }
    q->w = (mk_qweight){fmt, OC, IC, q->codes, q->absmax, NULL, NULL, 0.0f};
    if (dq) { /* the scales double-quantized: the reference decodes them whole first */
        q->qabsmax = malloc(nb);
        q->absmax2 = mt_alloc(nb2);
        zero_quant_absmax(q->absmax, nb, q->qabsmax, q->absmax2, &q->w.offset);
        zero_dequant_absmax(q->qabsmax, q->absmax2, q->w.offset, nb, q->absmax);
        q->w.absmax = NULL;
        q->w.qabsmax = q->qabsmax;
        q->w.absmax2 = q->absmax2;
    }
    if (fmt == MK_Q_NF4) {
        zero_dequant_nf4(q->codes, q->absmax, 0, n, q->dense);
    } else {
        float code[256];
        zero_quant_linear_map(code);
        zero_dequant_blockwise(q->codes, q->absmax, code, 64, 0, n, q->dense);
    }
}

static void drop(qw *q) { free(q->codes), free(q->qabsmax), free(q->absmax), free(q->absmax2), free(q->dense); }

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static void check(const float *W, mk_qfmt fmt, int dq) {
    qw q;
    make(&q, W, fmt, dq);
    const char *name = fmt == MK_Q_NF4 ? (dq ? "nf4+dq" : "nf4") : "int8";
    /* the tile loader: rows starting inside a block (IC = 1024 is 16 blocks; rows 3..5 of a
     * 1024-wide weight start on a block; a 1-row weight view of IC 1000 does not) */
    float *t = mt_alloc((size_t)5 * IC);
    ZT_OK(mk_qweight_rows(&q.w, 3, 5, t));
    ZT_CHECKF(same_bits(t, q.dense + (size_t)3 * IC, (size_t)5 * IC), "%s: rows 3..8 differ from the whole decode",
              name);
    mk_qweight odd = q.w; /* the same codes seen as (OC * IC / 1000) x 1000: rows start mid-block */
    odd.IC = 1000;
    odd.OC = OC * IC / 1000;
    ZT_OK(mk_qweight_rows(&odd, 7, 3, t));
    ZT_CHECKF(same_bits(t, q.dense + 7000, 3000), "%s: rows starting mid-block differ", name);
    ZT_EQ_INT(mk_qweight_rows(&q.w, OC - 1, 2, t), ZERO_ERR_INVALID_ARG);
    free(t);

    float *x = mt_alloc((size_t)N * IC), *bias = mt_alloc(OC), *resid = mt_alloc((size_t)N * OC);
    float *dy = mt_alloc((size_t)N * OC);
    mt_fill(x, (size_t)N * IC, 1.0f);
    mt_fill(bias, OC, 0.5f);
    mt_fill(resid, (size_t)N * OC, 0.5f);
    mt_fill(dy, (size_t)N * OC, 1.0f);
    float *out = mt_alloc((size_t)N * OC), *ref = mt_alloc((size_t)N * OC);
    float *dx = mt_alloc((size_t)N * IC), *dref = mt_alloc((size_t)N * IC);
    char what[96];
    for (int prec = 0; prec <= 1; prec++) {
        /* the scalar reference: mk_linear's on the decoded weight, bit for bit */
        ZT_OK(mk_qlinear_fwd(out, x, &q.w, 1, bias, resid, N, (mk_prec)prec, ZERO_IMPL_SCALAR));
        ZT_OK(mk_linear_fwd(ref, x, q.dense, bias, resid, N, IC, OC, 1, (mk_prec)prec, ZERO_IMPL_SCALAR));
        ZT_CHECKF(same_bits(out, ref, (size_t)N * OC), "%s %s: scalar forward differs", name, prec ? "bf16" : "fp32");
        ZT_OK(mk_qlinear_bwd(dx, dy, &q.w, 1, N, (mk_prec)prec, ZERO_IMPL_SCALAR));
        ZT_OK(mk_linear_bwd(dref, NULL, NULL, dy, x, q.dense, N, IC, OC, 1, (mk_prec)prec, ZERO_IMPL_SCALAR));
        ZT_CHECKF(same_bits(dx, dref, (size_t)N * IC), "%s %s: scalar backward differs", name, prec ? "bf16" : "fp32");
        /* the tiled path against the dense reference (the sums' order differs across tiles) */
        ZT_OK(mk_qlinear_fwd(out, x, &q.w, 1, bias, resid, N, (mk_prec)prec, ZERO_IMPL_AUTO));
        snprintf(what, sizeof what, "%s %s forward (%d tiles)", name, prec ? "bf16" : "fp32",
                 (OC + mk_qweight_tile_rows(IC) - 1) / mk_qweight_tile_rows(IC));
        mt_err e = {0, 0, 0};
        ZT_EQ_INT(mt_close(what, out, ref, (size_t)N * OC, 1e-4, 1e-5, &e), 0);
        mt_report(what, &e);
        ZT_OK(mk_qlinear_bwd(dx, dy, &q.w, 1, N, (mk_prec)prec, ZERO_IMPL_AUTO));
        snprintf(what, sizeof what, "%s %s backward", name, prec ? "bf16" : "fp32");
        mt_err eb = {0, 0, 0};
        ZT_EQ_INT(mt_close(what, dx, dref, (size_t)N * IC, 1e-4, 1e-5, &eb), 0);
        mt_report(what, &eb);
    }
    /* bad input */
    mk_qweight bad = q.w;
    bad.fmt = (mk_qfmt)9;
    ZT_EQ_INT(mk_qlinear_fwd(out, x, &bad, 1, NULL, NULL, N, MK_PREC_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_qlinear_fwd(out, x, NULL, 1, NULL, NULL, N, MK_PREC_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_qlinear_bwd(dx, dy, &q.w, 1, 0, MK_PREC_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    free(x), free(bias), free(resid), free(dy), free(out), free(ref), free(dx), free(dref);
    drop(&q);
}

/* A fused weight of three tensors quantized each on its own (zero_quant_record_*, as the engine keeps
 * a base's q, k and v): the scalar reference equals mk_linear's on the three decodes one under the
 * other bit for bit; the tiled path (tiles that stop at each part's end) is close to it. */
static void check_parts(const float *W, zero_qformat f) {
    const int rows[3] = {70, 37, OC - 107};
    mk_qweight w[3];
    void *rec[3];
    float *dense = mt_alloc((size_t)OC * IC);
    size_t at = 0;
    for (int k = 0; k < 3; k++) {
        const uint64_t n = (uint64_t)rows[k] * IC;
        rec[k] = malloc((size_t)zero_quant_record_bytes(f, n));
        ZT_OK(zero_quant_record_encode(f, W + at, n, rec[k]));
        zero_quant_view v;
        ZT_OK(zero_quant_record_view(f, rec[k], n, &v));
        ZT_OK(zero_quant_record_decode(&v, 0, n, dense + at));
        w[k] = (mk_qweight){
            f == ZERO_QFMT_INT8 ? MK_Q_INT8 : MK_Q_NF4, rows[k], IC, v.codes, v.absmax, v.qabsmax, v.absmax2, v.offset};
        at += n;
    }
    float *x = mt_alloc((size_t)N * IC), *dy = mt_alloc((size_t)N * OC), *bias = mt_alloc(OC);
    mt_fill(x, (size_t)N * IC, 1.0f);
    mt_fill(dy, (size_t)N * OC, 1.0f);
    mt_fill(bias, OC, 0.5f);
    float *out = mt_alloc((size_t)N * OC), *ref = mt_alloc((size_t)N * OC);
    float *dx = mt_alloc((size_t)N * IC), *dref = mt_alloc((size_t)N * IC);
    char what[96];
    ZT_OK(mk_qlinear_fwd(out, x, w, 3, bias, NULL, N, MK_PREC_FP32, ZERO_IMPL_SCALAR));
    ZT_OK(mk_linear_fwd(ref, x, dense, bias, NULL, N, IC, OC, 1, MK_PREC_FP32, ZERO_IMPL_SCALAR));
    ZT_CHECKF(same_bits(out, ref, (size_t)N * OC), "%s parts: scalar forward differs", zero_qformat_name(f));
    ZT_OK(mk_qlinear_bwd(dx, dy, w, 3, N, MK_PREC_FP32, ZERO_IMPL_SCALAR));
    ZT_OK(mk_linear_bwd(dref, NULL, NULL, dy, x, dense, N, IC, OC, 1, MK_PREC_FP32, ZERO_IMPL_SCALAR));
    ZT_CHECKF(same_bits(dx, dref, (size_t)N * IC), "%s parts: scalar backward differs", zero_qformat_name(f));
    ZT_OK(mk_qlinear_fwd(out, x, w, 3, bias, NULL, N, MK_PREC_FP32, ZERO_IMPL_AUTO));
    snprintf(what, sizeof what, "%s, 3 parts, forward", zero_qformat_name(f));
    mt_err e = {0, 0, 0};
    ZT_EQ_INT(mt_close(what, out, ref, (size_t)N * OC, 1e-4, 1e-5, &e), 0);
    mt_report(what, &e);
    ZT_OK(mk_qlinear_bwd(dx, dy, w, 3, N, MK_PREC_FP32, ZERO_IMPL_AUTO));
    snprintf(what, sizeof what, "%s, 3 parts, backward", zero_qformat_name(f));
    mt_err eb = {0, 0, 0};
    ZT_EQ_INT(mt_close(what, dx, dref, (size_t)N * IC, 1e-4, 1e-5, &eb), 0);
    mt_report(what, &eb);
    mk_qweight wide[2] = {w[0], w[1]}; /* parts of different widths */
    wide[1].IC = IC / 2;
    ZT_EQ_INT(mk_qlinear_fwd(out, x, wide, 2, NULL, NULL, N, MK_PREC_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_qlinear_bwd(dx, dy, w, 0, N, MK_PREC_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    for (int k = 0; k < 3; k++) free(rec[k]);
    free(dense), free(x), free(dy), free(bias), free(out), free(ref), free(dx), free(dref);
}

int main(void) {
    float *W = mt_alloc((size_t)OC * IC);
    mt_fill(W, (size_t)OC * IC, 0.05f);
    W[12345] = 0.9f;                         /* an outlier: its block's other values get coarse codes */
    ZT_CHECK(mk_qweight_tile_rows(IC) < OC); /* several tiles */
    check(W, MK_Q_NF4, 0);
    check(W, MK_Q_NF4, 1);
    check(W, MK_Q_INT8, 0);
    check_parts(W, ZERO_QFMT_NF4_DQ);
    check_parts(W, ZERO_QFMT_INT8);
    free(W);
    return zt_finish("test_mkernels_qlinear");
}
