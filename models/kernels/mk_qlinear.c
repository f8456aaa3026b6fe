/* models/kernels/mk_qlinear.c — linear layers over a frozen weight in a blockwise quantized format
 * (NF4 or int8, docs/QUANT.md): the weight is decoded a tile of rows at a time into the GEMM's
 * operand by the kernel layer's tile loaders (kernels/quant.h, the body a CUDA kernel shares), so no
 * whole dequantized matrix is ever kept; the scalar reference decodes the whole weight and runs the
 * dense reference on it. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/mk_internal.h"
#include "kernels/quant.h"
#include "zero/quant.h"

/* fp32 values per decoded tile: a tile is this many over IC rows of the weight (at least one) */
#define QTILE_FLOATS ((size_t)1 << 16)

int mk_qweight_tile_rows(int IC) {
    const size_t r = QTILE_FLOATS / (size_t)IC;
    return r ? (int)r : 1;
}

static int bad_weight(const mk_qweight *w) {
    return !w || w->OC < 1 || w->IC < 1 || !w->codes || (w->fmt != MK_Q_NF4 && w->fmt != MK_Q_INT8) ||
           (!w->absmax && !(w->qabsmax && w->absmax2));
}

/* The signed dynamic map (double-quantized scales) and int8's linear map, built once. */
static float map_signed[256], map_linear[256];
static pthread_once_t maps_once = PTHREAD_ONCE_INIT;

static void maps_init(void) {
    zero_quant_dynamic_map(1, map_signed);
    zero_quant_linear_map(map_linear);
}

/* The blocks' scales of flat elements [first, first + n) into sc (sc[0] is the block of `first`). */
static void tile_scales(const mk_qweight *w, uint64_t first, uint64_t n, uint64_t block, float *sc) {
    const uint64_t b0 = first / block, b1 = (first + n - 1) / block;
    if (w->absmax) {
        memcpy(sc, w->absmax + b0, (size_t)(b1 - b0 + 1) * sizeof *sc);
        return;
    }
    for (uint64_t b = b0; b <= b1; b++)
        sc[b - b0] = zero__dq_absmax(w->qabsmax, map_signed, w->absmax2, ZERO_QUANT_DQ_BLOCK, w->offset, b);
}

zero_status mk_qweight_rows(const mk_qweight *w, int r0, int rows, float *dst) {
    if (bad_weight(w) || r0 < 0 || rows < 1 || r0 + rows > w->OC || !dst) return ZERO_ERR_INVALID_ARG;
    const uint64_t block = w->fmt == MK_Q_NF4 ? ZERO_QUANT_NF4_BLOCK : ZERO_QUANT_INT8_BLOCK;
    const uint64_t first = (uint64_t)r0 * (uint64_t)w->IC, n = (uint64_t)rows * (uint64_t)w->IC;
    const uint64_t nsc = (first + n - 1) / block - first / block + 1;
    float *sc = malloc((size_t)nsc * sizeof *sc);
    if (!sc) return ZERO_ERR_NOMEM;
    pthread_once(&maps_once, maps_init);
    tile_scales(w, first, n, block, sc);
    if (w->fmt == MK_Q_NF4) zero__nf4_load(w->codes, sc, first / block, block, first, n, dst);
    else zero__q8_load(w->codes, map_linear, sc, first / block, block, first, n, dst);
    free(sc);
    return ZERO_OK;
}

/* The parts' rows in all (-1 when a part is bad or their widths differ). */
static int parts_rows(const mk_qweight *w, int nparts) {
    if (!w || nparts < 1) return -1;
    int64_t oc = 0;
    for (int k = 0; k < nparts; k++) {
        if (bad_weight(&w[k]) || w[k].IC != w[0].IC) return -1;
        oc += w[k].OC;
    }
    return oc <= INT32_MAX ? (int)oc : -1;
}

/* The whole weight decoded, its parts one under the other (the scalar reference's operand). */
static float *decoded(const mk_qweight *w, int nparts, int OC) {
    float *W = malloc((size_t)OC * (size_t)w->IC * sizeof *W);
    size_t at = 0;
    for (int k = 0; W && k < nparts; k++) {
        if (mk_qweight_rows(&w[k], 0, w[k].OC, W + at) != ZERO_OK) {
            free(W);
            W = NULL;
        }
        at += (size_t)w[k].OC * (size_t)w->IC;
    }
    return W;
}

/* A tile of rows of the parts' concatenation: `rows` rows of part k from its row r (inside it). */
typedef struct qtile {
    int k, r, rows, R; /* R: its first row in the whole weight */
} qtile;

/* The next tile of at most T rows after t (t->rows 0: the first); 0 when none is left. Tiles stay
 * inside a part. */
static int next_tile(const mk_qweight *w, int nparts, int T, qtile *t) {
    if (t->rows) {
        t->r += t->rows;
        t->R += t->rows;
        if (t->r == w[t->k].OC) {
            t->k++;
            t->r = 0;
        }
    }
    if (t->k >= nparts) return 0;
    t->rows = w[t->k].OC - t->r < T ? w[t->k].OC - t->r : T;
    return 1;
}

zero_status mk_qlinear_fwd(float *out, const float *x, const mk_qweight *w, int nparts, const float *bias,
                           const float *resid, size_t N, mk_prec prec, zero_impl impl) {
    const mk__isa *isa;
    zero_impl which;
    zero_status st = mk__pick(impl, &isa, &which);
    if (st != ZERO_OK) return st;
    const int OC = parts_rows(w, nparts);
    if (OC < 1 || !out || !x || N < 1 || N > (size_t)INT32_MAX || (prec != MK_PREC_FP32 && prec != MK_PREC_BF16))
        return ZERO_ERR_INVALID_ARG;
    const int IC = w->IC;
    if (which == ZERO_IMPL_SCALAR) {
        float *W = decoded(w, nparts, OC);
        if (!W) return ZERO_ERR_NOMEM;
        st = mk_linear_fwd(out, x, W, bias, resid, N, IC, OC, 1, prec, ZERO_IMPL_SCALAR);
        free(W);
        return st;
    }
    const int T = mk_qweight_tile_rows(IC);
    float *tile = malloc((size_t)T * (size_t)IC * sizeof *tile);
    uint16_t *tb = prec == MK_PREC_BF16 ? malloc((size_t)T * (size_t)IC * sizeof *tb) : NULL;
    uint16_t *xb = prec == MK_PREC_BF16 ? malloc(N * (size_t)IC * sizeof *xb) : NULL;
    if (!tile || (prec == MK_PREC_BF16 && (!tb || !xb))) {
        free(tile), free(tb), free(xb);
        return ZERO_ERR_NOMEM;
    }
    if (xb) zero_convert(x, ZERO_DTYPE_FP32, xb, ZERO_DTYPE_BF16, N * (size_t)IC, ZERO_IMPL_AUTO);
    /* out = resid + bias before the products, which add to it (beta 1), as mk_linear_fwd */
    const size_t oc = (size_t)OC;
    float beta = 0.0f;
    if (bias || resid) {
        beta = 1.0f;
        if (!(resid == out && !bias))
            for (size_t n = 0; n < N; n++)
                isa->row_add(out + n * oc, resid ? resid + n * oc : bias, resid ? bias : NULL, oc);
    }
    qtile t = {0, 0, 0, 0};
    while (st == ZERO_OK && next_tile(w, nparts, T, &t)) {
        const int rows = t.rows, r0 = t.R;
        st = mk_qweight_rows(&w[t.k], t.r, rows, tile);
        if (st != ZERO_OK) break;
        /* out[:, r0 .. r0 + rows) (+)= x tile^T */
        if (prec == MK_PREC_FP32) {
            mk__sgemm(0, 1, (int)N, rows, IC, 1.0f, x, IC, tile, IC, beta, out + r0, OC);
        } else {
            zero_convert(tile, ZERO_DTYPE_FP32, tb, ZERO_DTYPE_BF16, (size_t)rows * (size_t)IC, ZERO_IMPL_AUTO);
            st = mk_gemm_bf16(0, 1, (int)N, rows, IC, 1.0f, xb, IC, tb, IC, beta, out + r0, OC, MK_GEMM_AUTO);
        }
    }
    free(tile), free(tb), free(xb);
    return st;
}

zero_status mk_qlinear_bwd(float *dx, const float *dy, const mk_qweight *w, int nparts, size_t N, mk_prec prec,
                           zero_impl impl) {
    const mk__isa *isa;
    zero_impl which;
    zero_status st = mk__pick(impl, &isa, &which);
    if (st != ZERO_OK) return st;
    const int OC = parts_rows(w, nparts);
    if (OC < 1 || !dx || !dy || N < 1 || N > (size_t)INT32_MAX || (prec != MK_PREC_FP32 && prec != MK_PREC_BF16))
        return ZERO_ERR_INVALID_ARG;
    const int IC = w->IC;
    if (which == ZERO_IMPL_SCALAR) {
        float *W = decoded(w, nparts, OC);
        if (!W) return ZERO_ERR_NOMEM;
        st = mk_linear_bwd(dx, NULL, NULL, dy, NULL, W, N, IC, OC, 1, prec, ZERO_IMPL_SCALAR);
        free(W);
        return st;
    }
    const int T = mk_qweight_tile_rows(IC);
    float *tile = malloc((size_t)T * (size_t)IC * sizeof *tile);
    uint16_t *tb = prec == MK_PREC_BF16 ? malloc((size_t)T * (size_t)IC * sizeof *tb) : NULL;
    uint16_t *dyb = prec == MK_PREC_BF16 ? malloc(N * (size_t)OC * sizeof *dyb) : NULL;
    if (!tile || (prec == MK_PREC_BF16 && (!tb || !dyb))) {
        free(tile), free(tb), free(dyb);
        return ZERO_ERR_NOMEM;
    }
    if (dyb) zero_convert(dy, ZERO_DTYPE_FP32, dyb, ZERO_DTYPE_BF16, N * (size_t)OC, ZERO_IMPL_AUTO);
    /* dx = dy W = the sum over row tiles of dy[:, r0 .. r0 + rows) tile */
    qtile t = {0, 0, 0, 0};
    while (st == ZERO_OK && next_tile(w, nparts, T, &t)) {
        const int rows = t.rows, r0 = t.R;
        const float beta = r0 ? 1.0f : 0.0f;
        st = mk_qweight_rows(&w[t.k], t.r, rows, tile);
        if (st != ZERO_OK) break;
        if (prec == MK_PREC_FP32) {
            mk__sgemm(0, 0, (int)N, IC, rows, 1.0f, dy + r0, OC, tile, IC, beta, dx, IC);
        } else {
            zero_convert(tile, ZERO_DTYPE_FP32, tb, ZERO_DTYPE_BF16, (size_t)rows * (size_t)IC, ZERO_IMPL_AUTO);
            st = mk_gemm_bf16(0, 0, (int)N, IC, rows, 1.0f, dyb + r0, OC, tb, IC, beta, dx, IC, MK_GEMM_AUTO);
        }
    }
    free(tile), free(tb), free(dyb);
    return st;
}
