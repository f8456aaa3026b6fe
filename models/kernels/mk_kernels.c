/* models/kernels/mk_kernels.c — the model kernels' entry points: argument checks, the choice of
 * implementation (zero_impl_best), and the OpenMP split of rows, chunks and attention blocks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/mk_internal.h"

/* Resolves impl to a table; *which receives the concrete impl. */
zero_status mk__pick(zero_impl impl, const mk__isa **isa, zero_impl *which) {
    if (impl == ZERO_IMPL_AUTO) impl = zero_impl_best();
    switch (impl) {
    case ZERO_IMPL_SCALAR: *isa = &mk__isa_scalar; break;
    case ZERO_IMPL_AVX2: *isa = &mk__isa_avx2; break;
    case ZERO_IMPL_AVX512: *isa = &mk__isa_avx512; break;
    default: return ZERO_ERR_INVALID_ARG;
    }
    if (!zero_impl_available(impl)) return ZERO_ERR_UNSUPPORTED;
    if (which) *which = impl;
    return ZERO_OK;
}

#define PICK(impl, isa)                                                                            \
    const mk__isa *isa;                                                                            \
    do {                                                                                           \
        zero_status st_ = mk__pick(impl, &isa, NULL);                                                  \
        if (st_ != ZERO_OK) return st_;                                                            \
    } while (0)

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* ---------------------------------------------------------------- element-wise */
typedef void (*ew2_fn)(float *, const float *, size_t);
typedef void (*ew3_fn)(float *, const float *, const float *, size_t);

static void run_ew2(ew2_fn f, float *out, const float *x, size_t n) {
    const size_t nch = (n + MK_CHUNK_ELEMS - 1) / MK_CHUNK_ELEMS;
#pragma omp parallel for schedule(static) if (n >= MK_PAR_MIN)
    for (size_t c = 0; c < nch; c++) {
        const size_t i = c * MK_CHUNK_ELEMS;
        f(out + i, x + i, min_sz(MK_CHUNK_ELEMS, n - i));
    }
}

static void run_ew3(ew3_fn f, float *out, const float *a, const float *b, size_t n) {
    const size_t nch = (n + MK_CHUNK_ELEMS - 1) / MK_CHUNK_ELEMS;
#pragma omp parallel for schedule(static) if (n >= MK_PAR_MIN)
    for (size_t c = 0; c < nch; c++) {
        const size_t i = c * MK_CHUNK_ELEMS;
        f(out + i, a + i, b + i, min_sz(MK_CHUNK_ELEMS, n - i));
    }
}

zero_status mk_gelu_fwd(float *out, const float *x, size_t n, zero_impl impl) {
    PICK(impl, isa);
    if (n && (!out || !x)) return ZERO_ERR_INVALID_ARG;
    run_ew2(isa->gelu_fwd, out, x, n);
    return ZERO_OK;
}

zero_status mk_gelu_bwd(float *dx, const float *dy, const float *x, size_t n, zero_impl impl) {
    PICK(impl, isa);
    if (n && (!dx || !dy || !x)) return ZERO_ERR_INVALID_ARG;
    run_ew3(isa->gelu_bwd, dx, dy, x, n);
    return ZERO_OK;
}

zero_status mk_bias_gelu_fwd(float *out, size_t ld_out, float *x, size_t ld_x, const float *bias,
                             size_t rows, size_t cols, zero_impl impl) {
    PICK(impl, isa);
    if (!rows || !cols) return ZERO_OK;
    if (!out || !x || !bias || out == x || ld_out < cols || ld_x < cols) return ZERO_ERR_INVALID_ARG;
#pragma omp parallel for schedule(static) if (rows * cols >= MK_PAR_MIN)
    for (size_t r = 0; r < rows; r++) isa->bias_gelu_row(out + r * ld_out, x + r * ld_x, bias, cols);
    return ZERO_OK;
}

/* reduce_parts is defined with the column sums below */
static void reduce_parts(float *const *dst, int nparts, const float *part, size_t nch, size_t stride,
                         size_t cols);

zero_status mk_gelu_bwd_bias(float *dx, float *dbias, const float *dy, const float *x, size_t rows,
                             size_t cols, size_t ld, zero_impl impl) {
    PICK(impl, isa);
    if (!rows || !cols) return ZERO_OK;
    if (!dx || !dbias || !dy || !x || ld < cols) return ZERO_ERR_INVALID_ARG;
    const size_t nch = (rows + MK_CHUNK_ROWS - 1) / MK_CHUNK_ROWS;
    float *part = calloc(nch * cols, sizeof(float));
    if (!part) return ZERO_ERR_NOMEM;
#pragma omp parallel for schedule(static) if (rows * cols >= MK_PAR_MIN)
    for (size_t c = 0; c < nch; c++) {
        const size_t r1 = min_sz(rows, (c + 1) * MK_CHUNK_ROWS);
        for (size_t r = c * MK_CHUNK_ROWS; r < r1; r++)
            isa->gelu_bwd_bias_row(dx + r * ld, part + c * cols, dy + r * ld, x + r * ld, cols);
    }
    float *d[1] = {dbias};
    reduce_parts(d, 1, part, nch, cols, cols);
    free(part);
    return ZERO_OK;
}

zero_status mk_silu_fwd(float *out, const float *x, size_t n, zero_impl impl) {
    PICK(impl, isa);
    if (n && (!out || !x)) return ZERO_ERR_INVALID_ARG;
    run_ew2(isa->silu_fwd, out, x, n);
    return ZERO_OK;
}

zero_status mk_silu_bwd(float *dx, const float *dy, const float *x, size_t n, zero_impl impl) {
    PICK(impl, isa);
    if (n && (!dx || !dy || !x)) return ZERO_ERR_INVALID_ARG;
    run_ew3(isa->silu_bwd, dx, dy, x, n);
    return ZERO_OK;
}

typedef void (*glu_fwd_fn)(float *out, const float *g, const float *u, size_t n);
typedef void (*glu_bwd_fn)(float *dg, float *du, const float *dy, const float *g, const float *u, size_t n);

/* A gated unit's forward and backward (SwiGLU, GeGLU) on rows of a fused or separate layout. */
static zero_status glu_fwd(glu_fwd_fn fn, float *out, size_t ld_out, const float *gate, const float *up,
                           size_t ld_in, size_t rows, size_t cols) {
    if (!rows || !cols) return ZERO_OK;
    if (!out || !gate || !up || ld_out < cols || ld_in < cols) return ZERO_ERR_INVALID_ARG;
    if (ld_out == cols && ld_in == cols) { /* contiguous: one flat range */
        run_ew3(fn, out, gate, up, rows * cols);
        return ZERO_OK;
    }
#pragma omp parallel for schedule(static) if (rows * cols >= MK_PAR_MIN)
    for (size_t r = 0; r < rows; r++) fn(out + r * ld_out, gate + r * ld_in, up + r * ld_in, cols);
    return ZERO_OK;
}

static zero_status glu_bwd(glu_bwd_fn fn, float *dgate, float *dup, const float *dy, size_t ld_out,
                           const float *gate, const float *up, size_t ld_in, size_t rows, size_t cols) {
    if (!rows || !cols) return ZERO_OK;
    if (!dgate || !dup || !dy || !gate || !up || ld_out < cols || ld_in < cols)
        return ZERO_ERR_INVALID_ARG;
    if (ld_out == cols && ld_in == cols) {
        const size_t n = rows * cols, nch = (n + MK_CHUNK_ELEMS - 1) / MK_CHUNK_ELEMS;
#pragma omp parallel for schedule(static) if (n >= MK_PAR_MIN)
        for (size_t c = 0; c < nch; c++) {
            const size_t i = c * MK_CHUNK_ELEMS;
            fn(dgate + i, dup + i, dy + i, gate + i, up + i, min_sz(MK_CHUNK_ELEMS, n - i));
        }
        return ZERO_OK;
    }
#pragma omp parallel for schedule(static) if (rows * cols >= MK_PAR_MIN)
    for (size_t r = 0; r < rows; r++)
        fn(dgate + r * ld_in, dup + r * ld_in, dy + r * ld_out, gate + r * ld_in, up + r * ld_in, cols);
    return ZERO_OK;
}

zero_status mk_swiglu_fwd(float *out, size_t ld_out, const float *gate, const float *up,
                          size_t ld_in, size_t rows, size_t cols, zero_impl impl) {
    PICK(impl, isa);
    return glu_fwd(isa->swiglu_fwd, out, ld_out, gate, up, ld_in, rows, cols);
}

zero_status mk_swiglu_bwd(float *dgate, float *dup, const float *dy, size_t ld_out,
                          const float *gate, const float *up, size_t ld_in, size_t rows, size_t cols,
                          zero_impl impl) {
    PICK(impl, isa);
    return glu_bwd(isa->swiglu_bwd, dgate, dup, dy, ld_out, gate, up, ld_in, rows, cols);
}

zero_status mk_geglu_fwd(float *out, size_t ld_out, const float *gate, const float *up,
                         size_t ld_in, size_t rows, size_t cols, zero_impl impl) {
    PICK(impl, isa);
    return glu_fwd(isa->geglu_fwd, out, ld_out, gate, up, ld_in, rows, cols);
}

zero_status mk_geglu_bwd(float *dgate, float *dup, const float *dy, size_t ld_out,
                         const float *gate, const float *up, size_t ld_in, size_t rows, size_t cols,
                         zero_impl impl) {
    PICK(impl, isa);
    return glu_bwd(isa->geglu_bwd, dgate, dup, dy, ld_out, gate, up, ld_in, rows, cols);
}

/* ---------------------------------------------------------------- column-sum chunks */
/* Adds the nparts column-sum vectors held per chunk (chunk c's parts at part + c*stride, part p
 * at + p*cols) to dst[p] (cols each), chunk by chunk in order, in double. */
static void reduce_parts(float *const *dst, int nparts, const float *part, size_t nch, size_t stride,
                         size_t cols) {
#pragma omp parallel for schedule(static) if (nch * cols * nparts >= MK_PAR_MIN)
    for (size_t j = 0; j < cols; j++) {
        for (int p = 0; p < nparts; p++) {
            double s = 0.0;
            for (size_t c = 0; c < nch; c++) s += part[c * stride + (size_t)p * cols + j];
            dst[p][j] += (float)s;
        }
    }
}

/* ---------------------------------------------------------------- normalization */
zero_status mk_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w,
                             const float *b, size_t rows, int C, size_t ldx, size_t ldy, float eps,
                             zero_impl impl) {
    PICK(impl, isa);
    if (!rows) return ZERO_OK;
    if (!y || !x || !w || C < 1 || ldx < (size_t)C || ldy < (size_t)C || !(eps >= 0.0f))
        return ZERO_ERR_INVALID_ARG;
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= MK_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        float m, s;
        isa->ln_fwd_row(y + r * ldy, &m, &s, x + r * ldx, w, b, C, eps);
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = s;
    }
    return ZERO_OK;
}

zero_status mk_layernorm_bwd(float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, const float *mean, const float *rstd, size_t rows,
                             int C, size_t ldx, size_t ldy, int accumulate, zero_impl impl) {
    PICK(impl, isa);
    if (!rows) return ZERO_OK;
    if (!dx || !dy || !x || !w || !mean || !rstd || C < 1 || ldx < (size_t)C || ldy < (size_t)C)
        return ZERO_ERR_INVALID_ARG;
    const size_t cols = (size_t)C, nch = (rows + MK_CHUNK_ROWS - 1) / MK_CHUNK_ROWS;
    /* the partial sums of the gradients asked for: dw's then db's (none when both are NULL) */
    float *dst[2];
    int nparts = 0;
    if (dw) dst[nparts++] = dw;
    if (db) dst[nparts++] = db;
    const size_t stride = cols * (size_t)nparts;
    float *part = NULL;
    if (nparts && !(part = calloc(nch * stride, sizeof(float)))) return ZERO_ERR_NOMEM;
#pragma omp parallel for schedule(static) if (rows * cols >= MK_PAR_MIN)
    for (size_t c = 0; c < nch; c++) {
        float *wp = dw ? part + c * stride : NULL;
        float *bp = db ? part + c * stride + (dw ? cols : 0) : NULL;
        const size_t r1 = min_sz(rows, (c + 1) * MK_CHUNK_ROWS);
        for (size_t r = c * MK_CHUNK_ROWS; r < r1; r++)
            isa->ln_bwd_row(dx + r * ldx, wp, bp, dy + r * ldy, x + r * ldx, w, mean[r], rstd[r], C,
                            accumulate);
    }
    if (part) reduce_parts(dst, nparts, part, nch, stride, cols);
    free(part);
    return ZERO_OK;
}

/* RMSNorm over rows r = n * heads + h at x + n*ldx + h*C (heads = 1: plain rows). */
static zero_status rms_fwd(float *y, float *rstd, const float *x, const float *w, size_t n_tok,
                           int heads, int C, size_t ldx, size_t ldy, float eps, zero_impl impl) {
    PICK(impl, isa);
    if (!n_tok) return ZERO_OK;
    if (!y || !x || C < 1 || heads < 1 || ldx < (size_t)C * heads || ldy < (size_t)C * heads ||
        !(eps >= 0.0f))
        return ZERO_ERR_INVALID_ARG;
    const size_t rows = n_tok * (size_t)heads, hs = (size_t)heads;
#pragma omp parallel for schedule(static) if (rows * (size_t)C >= MK_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const size_t n = r / hs, h = r % hs;
        float s;
        isa->rms_fwd_row(y + n * ldy + h * (size_t)C, &s, x + n * ldx + h * (size_t)C, w, C, eps);
        if (rstd) rstd[r] = s;
    }
    return ZERO_OK;
}

static zero_status rms_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                           const float *rstd, size_t n_tok, int heads, int C, size_t ldx,
                           size_t ldy, int accumulate, zero_impl impl) {
    PICK(impl, isa);
    if (!n_tok) return ZERO_OK;
    if (!dx || !dy || !x || !rstd || (!w && dw) || C < 1 || heads < 1 ||
        ldx < (size_t)C * heads || ldy < (size_t)C * heads)
        return ZERO_ERR_INVALID_ARG;
    const size_t rows = n_tok * (size_t)heads, hs = (size_t)heads;
    const size_t cols = (size_t)C, nch = (rows + MK_CHUNK_ROWS - 1) / MK_CHUNK_ROWS;
    float *part = NULL;
    if (dw && !(part = calloc(nch * cols, sizeof(float)))) return ZERO_ERR_NOMEM;
#pragma omp parallel for schedule(static) if (rows * cols >= MK_PAR_MIN)
    for (size_t c = 0; c < nch; c++) {
        float *wp = part ? part + c * cols : NULL;
        const size_t r1 = min_sz(rows, (c + 1) * MK_CHUNK_ROWS);
        for (size_t r = c * MK_CHUNK_ROWS; r < r1; r++) {
            const size_t n = r / hs, h = r % hs, ox = n * ldx + h * cols, oy = n * ldy + h * cols;
            isa->rms_bwd_row(dx + ox, wp, dy + oy, x + ox, w, rstd[r], C, accumulate);
        }
    }
    if (part) {
        float *dst[1] = {dw};
        reduce_parts(dst, 1, part, nch, cols, cols);
        free(part);
    }
    return ZERO_OK;
}

zero_status mk_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, size_t rows,
                           int C, size_t ldx, size_t ldy, float eps, zero_impl impl) {
    return rms_fwd(y, rstd, x, w, rows, 1, C, ldx, ldy, eps, impl);
}

zero_status mk_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                           const float *rstd, size_t rows, int C, size_t ldx, size_t ldy,
                           int accumulate, zero_impl impl) {
    return rms_bwd(dx, dw, dy, x, w, rstd, rows, 1, C, ldx, ldy, accumulate, impl);
}

zero_status mk_rmsnorm_heads_fwd(float *y, float *rstd, const float *x, const float *w,
                                 size_t n_tok, int n_heads, int head_dim, size_t ldx, size_t ldy,
                                 float eps, zero_impl impl) {
    return rms_fwd(y, rstd, x, w, n_tok, n_heads, head_dim, ldx, ldy, eps, impl);
}

zero_status mk_rmsnorm_heads_bwd(float *dx, float *dw, const float *dy, const float *x,
                                 const float *w, const float *rstd, size_t n_tok, int n_heads,
                                 int head_dim, size_t ldx, size_t ldy, int accumulate,
                                 zero_impl impl) {
    return rms_bwd(dx, dw, dy, x, w, rstd, n_tok, n_heads, head_dim, ldx, ldy, accumulate, impl);
}

/* ---------------------------------------------------------------- softmax, cross-entropy */
zero_status mk_softmax_fwd(float *y, const float *x, size_t rows, int cols, zero_impl impl) {
    PICK(impl, isa);
    if (!rows) return ZERO_OK;
    if (!y || !x || cols < 1) return ZERO_ERR_INVALID_ARG;
#pragma omp parallel for schedule(static) if (rows * (size_t)cols >= MK_PAR_MIN)
    for (size_t r = 0; r < rows; r++) isa->softmax_row(y + r * (size_t)cols, x + r * (size_t)cols, cols);
    return ZERO_OK;
}

zero_status mk_softmax_bwd(float *dx, const float *dy, const float *y, size_t rows, int cols,
                           zero_impl impl) {
    PICK(impl, isa);
    if (!rows) return ZERO_OK;
    if (!dx || !dy || !y || cols < 1) return ZERO_ERR_INVALID_ARG;
#pragma omp parallel for schedule(static) if (rows * (size_t)cols >= MK_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        const size_t o = r * (size_t)cols;
        isa->softmax_bwd_row(dx + o, dy + o, y + o, cols);
    }
    return ZERO_OK;
}

zero_status mk_cross_entropy(float *logits, float *losses, const int32_t *targets, size_t rows,
                             int V, float dscale, zero_impl impl) {
    PICK(impl, isa);
    if (!rows) return ZERO_OK;
    if (!logits || !losses || !targets || V < 1 || !isfinite(dscale)) return ZERO_ERR_INVALID_ARG;
    for (size_t r = 0; r < rows; r++)
        if (targets[r] >= V) return ZERO_ERR_INVALID_ARG;
#pragma omp parallel for schedule(static) if (rows * (size_t)V >= MK_PAR_MIN)
    for (size_t r = 0; r < rows; r++) {
        float *x = logits + r * (size_t)V;
        if (targets[r] < 0) {
            losses[r] = 0.0f;
            if (dscale != 0.0f) memset(x, 0, sizeof(float) * (size_t)V);
        } else {
            losses[r] = isa->xent_row(x, V, targets[r], dscale);
        }
    }
    return ZERO_OK;
}

/* ---------------------------------------------------------------- RoPE */
static zero_status rope_run(const mk_rope *rp, float *x, size_t ld, size_t n_tok, int T,
                            int n_heads, int head_dim, const int32_t *pos, zero_impl impl, float sgn) {
    PICK(impl, isa);
    if (!n_tok) return ZERO_OK;
    if (!rp || !rp->cos || !rp->sin || !x || n_heads < 1 || head_dim < 1 || rp->rot_dim < 2 ||
        rp->rot_dim % 2 || rp->rot_dim > head_dim || rp->n_pos < 1 ||
        ld < (size_t)n_heads * (size_t)head_dim || (!pos && T < 1))
        return ZERO_ERR_INVALID_ARG;
    if (pos)
        for (size_t n = 0; n < n_tok; n++)
            if (pos[n] < 0 || pos[n] >= rp->n_pos) return ZERO_ERR_INVALID_ARG;
    if (!pos && min_sz((size_t)T, n_tok) > (size_t)rp->n_pos) return ZERO_ERR_INVALID_ARG;
    const int half = rp->rot_dim / 2;
#pragma omp parallel for schedule(static) if (n_tok * (size_t)n_heads * (size_t)rp->rot_dim >= MK_PAR_MIN)
    for (size_t n = 0; n < n_tok; n++) {
        const size_t p = pos ? (size_t)pos[n] : n % (size_t)T;
        const float *c = rp->cos + p * (size_t)half, *s = rp->sin + p * (size_t)half;
        for (int h = 0; h < n_heads; h++) isa->rope_head(x + n * ld + (size_t)h * head_dim, c, s, half, sgn);
    }
    return ZERO_OK;
}

zero_status mk_rope_fwd(const mk_rope *r, float *x, size_t ld, size_t n_tok, int T, int n_heads,
                        int head_dim, const int32_t *pos, zero_impl impl) {
    return rope_run(r, x, ld, n_tok, T, n_heads, head_dim, pos, impl, 1.0f);
}

zero_status mk_rope_bwd(const mk_rope *r, float *dx, size_t ld, size_t n_tok, int T, int n_heads,
                        int head_dim, const int32_t *pos, zero_impl impl) {
    return rope_run(r, dx, ld, n_tok, T, n_heads, head_dim, pos, impl, -1.0f);
}

/* ---------------------------------------------------------------- embeddings */
/* Columns per task in the embedding backward: rows of dwte repeat across tokens, so the split is
 * by columns, each task adding every token's slice in token order. */
#define MK_EMB_COLS 256

static inline size_t emb_pos(const int32_t *pos, size_t n, int T) { return pos ? (size_t)pos[n] : n % (size_t)T; }

zero_status mk_embed_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                         size_t n_tok, int T, int C, const int32_t *pos, zero_impl impl) {
    PICK(impl, isa);
    if (!n_tok) return ZERO_OK;
    if (!out || !tokens || !wte || C < 1 || (wpe && !pos && T < 1)) return ZERO_ERR_INVALID_ARG;
    const size_t cols = (size_t)C;
#pragma omp parallel for schedule(static) if (n_tok * cols >= MK_PAR_MIN)
    for (size_t n = 0; n < n_tok; n++)
        isa->row_add(out + n * cols, wte + (size_t)tokens[n] * cols, wpe ? wpe + emb_pos(pos, n, T) * cols : NULL,
                     cols);
    return ZERO_OK;
}

zero_status mk_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                         size_t n_tok, int T, int C, const int32_t *pos, zero_impl impl) {
    PICK(impl, isa);
    if (!n_tok) return ZERO_OK;
    if (!dwte || !dout || !tokens || C < 1 || (dwpe && !pos && T < 1)) return ZERO_ERR_INVALID_ARG;
    const size_t cols = (size_t)C, ntask = (cols + MK_EMB_COLS - 1) / MK_EMB_COLS;
    /* by columns, each task adding every token's slice in token order (to wte's and wpe's rows) */
#pragma omp parallel for schedule(static) if (n_tok * cols >= MK_PAR_MIN)
    for (size_t task = 0; task < ntask; task++) {
        const size_t j0 = task * MK_EMB_COLS, nj = min_sz(MK_EMB_COLS, cols - j0);
        for (size_t n = 0; n < n_tok; n++) {
            isa->row_acc(dwte + (size_t)tokens[n] * cols + j0, dout + n * cols + j0, nj);
            if (dwpe) isa->row_acc(dwpe + emb_pos(pos, n, T) * cols + j0, dout + n * cols + j0, nj);
        }
    }
    return ZERO_OK;
}

/* ---------------------------------------------------------------- reductions */
zero_status mk_colsum(float *dst, const float *src, size_t rows, size_t cols, size_t ld,
                      zero_impl impl) {
    PICK(impl, isa);
    if (!rows || !cols) return ZERO_OK;
    if (!dst || !src || ld < cols) return ZERO_ERR_INVALID_ARG;
    const size_t nch = (rows + MK_CHUNK_ROWS - 1) / MK_CHUNK_ROWS;
    float *part = calloc(nch * cols, sizeof(float));
    if (!part) return ZERO_ERR_NOMEM;
#pragma omp parallel for schedule(static) if (rows * cols >= MK_PAR_MIN)
    for (size_t c = 0; c < nch; c++) {
        const size_t r0 = c * MK_CHUNK_ROWS;
        isa->colsum_rows(part + c * cols, src + r0 * ld, min_sz(MK_CHUNK_ROWS, rows - r0), cols, ld);
    }
    float *d[1] = {dst};
    reduce_parts(d, 1, part, nch, cols, cols);
    free(part);
    return ZERO_OK;
}

/* At most this many chunks: a chunk is MK_CHUNK_ELEMS elements or a multiple, fixed by n alone. */
#define SUMSQ_MAX_CHUNKS 4096

zero_status mk_sum_squares(const float *x, size_t n, double *out, zero_impl impl) {
    PICK(impl, isa);
    if (!out || (n && !x)) return ZERO_ERR_INVALID_ARG;
    size_t chunk = MK_CHUNK_ELEMS;
    while ((n + chunk - 1) / chunk > SUMSQ_MAX_CHUNKS) chunk *= 2;
    const size_t nch = (n + chunk - 1) / chunk;
    double part[SUMSQ_MAX_CHUNKS];
#pragma omp parallel for schedule(static) if (n >= MK_PAR_MIN)
    for (size_t c = 0; c < nch; c++) part[c] = isa->sum_squares(x + c * chunk, min_sz(chunk, n - c * chunk));
    double s = 0.0;
    for (size_t c = 0; c < nch; c++) s += part[c];
    *out = s;
    return ZERO_OK;
}

/* ---------------------------------------------------------------- attention */
static size_t hd_pad16(int hd) { return (size_t)(hd + 15) / 16 * 16; }

size_t mk__att_fwd_ws(const mk_attn *a) {
    const size_t hd = (size_t)a->head_dim, hdp = hd_pad16(a->head_dim);
    return hd * MK_ATT_BC + (size_t)MK_ATT_BC * hdp + (size_t)MK_ATT_BR * MK_ATT_BC +
           (size_t)MK_ATT_BR * hdp + 2 * (size_t)MK_ATT_BR;
}

size_t mk__att_bwd_ws(const mk_attn *a) {
    const size_t hd = (size_t)a->head_dim, hdp = hd_pad16(a->head_dim);
    const size_t grp = (size_t)(a->n_head / a->n_kv_head);
    return 2 * hd * MK_ATT_BC + 3 * (size_t)MK_ATT_BC * hdp + 3 * (size_t)MK_ATT_BR * hdp +
           2 * (size_t)MK_ATT_BR * MK_ATT_BC + grp * (size_t)a->T;
}

static zero_status att_check(const mk_attn *a) {
    if (!a || a->B < 0 || a->T < 0 || a->n_head < 1 || a->n_kv_head < 1 ||
        a->n_head % a->n_kv_head || a->head_dim < 1 || a->head_dim > MK_ATT_MAX_HD || a->window < 0 ||
        !(a->scale > 0.0f) || !isfinite(a->scale))
        return ZERO_ERR_INVALID_ARG;
    const size_t hq = (size_t)a->n_head * a->head_dim, hk = (size_t)a->n_kv_head * a->head_dim;
    if (a->ld_q < hq || a->ld_o < hq || a->ld_k < hk || a->ld_v < hk) return ZERO_ERR_INVALID_ARG;
    if (a->doc) /* runs: each value repeats the one before or starts a document at its own t */
        for (size_t b = 0; b < (size_t)a->B; b++) {
            const int32_t *d = a->doc + b * (size_t)a->T;
            for (int t = 0; t < a->T; t++)
                if (d[t] != t && (t == 0 || d[t] != d[t - 1])) return ZERO_ERR_INVALID_ARG;
        }
    return ZERO_OK;
}

/* Keys a query row sees at most: the window, or T. */
static int att_keys(const mk_attn *a) { return a->window > 0 && a->window < a->T ? a->window : a->T; }

zero_status mk_attention_fwd(const mk_attn *a, float *out, float *lse, const float *q,
                             const float *k, const float *v, zero_impl impl) {
    const mk__isa *isa;
    zero_impl which;
    zero_status st = mk__pick(impl, &isa, &which);
    if (st != ZERO_OK) return st;
    if ((st = att_check(a)) != ZERO_OK) return st;
    if (!a->B || !a->T) return ZERO_OK;
    if (!out || !q || !k || !v) return ZERO_ERR_INVALID_ARG;
    const int B = a->B, T = a->T, H = a->n_head;
    const double work = (double)B * H * T * (double)att_keys(a) * a->head_dim;
    int fail = 0;
    if (which == ZERO_IMPL_SCALAR) {
        const long rows = (long)B * H * T;
#pragma omp parallel if (work >= MK_PAR_MIN)
        {
            float *ws = malloc(sizeof(float) * (size_t)T);
            if (!ws) {
#pragma omp atomic write
                fail = 1;
            }
#pragma omp for schedule(dynamic, 16)
            for (long r = 0; r < rows; r++) {
                if (!ws) continue;
                const long bh = r / T;
                mk__att_fwd_row_scalar(a, out, lse, q, k, v, (int)(bh / H), (int)(bh % H), (int)(r % T), ws);
            }
            free(ws);
        }
        return fail ? ZERO_ERR_NOMEM : ZERO_OK;
    }
    const mk__att_fwd_fn fn = which == ZERO_IMPL_AVX2 ? mk__att_fwd_avx2 : mk__att_fwd_avx512;
    const long nqb = (T + MK_ATT_BR - 1) / MK_ATT_BR, nbh = (long)B * H, ntask = nbh * nqb;
#pragma omp parallel if (work >= MK_PAR_MIN && ntask > 1)
    {
        float *ws = malloc(sizeof(float) * mk__att_fwd_ws(a));
        if (!ws) {
#pragma omp atomic write
            fail = 1;
        }
        /* the longest blocks (last query rows) first */
#pragma omp for schedule(dynamic, 1)
        for (long i = 0; i < ntask; i++) {
            if (!ws) continue;
            const long qb = nqb - 1 - i / nbh, bh = i % nbh;
            fn(a, out, lse, q, k, v, (int)(bh / H), (int)(bh % H), (int)qb, ws);
        }
        free(ws);
    }
    return fail ? ZERO_ERR_NOMEM : ZERO_OK;
}

zero_status mk_attention_bwd(const mk_attn *a, float *dq, float *dk, float *dv, const float *dout,
                             const float *q, const float *k, const float *v, const float *out,
                             const float *lse, zero_impl impl) {
    const mk__isa *isa;
    zero_impl which;
    zero_status st = mk__pick(impl, &isa, &which);
    if (st != ZERO_OK) return st;
    if ((st = att_check(a)) != ZERO_OK) return st;
    if (!a->B || !a->T) return ZERO_OK;
    if (!dq || !dk || !dv || !dout || !q || !k || !v || !out || !lse) return ZERO_ERR_INVALID_ARG;
    const int B = a->B, T = a->T, G = a->n_kv_head;
    const double work = (double)B * a->n_head * T * (double)att_keys(a) * a->head_dim;
    const long ntask = (long)B * G;
    const size_t wsn = which == ZERO_IMPL_SCALAR ? 2 * (size_t)T : mk__att_bwd_ws(a);
    const mk__att_bwd_fn fn = which == ZERO_IMPL_SCALAR ? mk__att_bwd_scalar
                              : which == ZERO_IMPL_AVX2 ? mk__att_bwd_avx2
                                                        : mk__att_bwd_avx512;
    int fail = 0;
#pragma omp parallel if (work >= MK_PAR_MIN && ntask > 1)
    {
        float *ws = malloc(sizeof(float) * wsn);
        if (!ws) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (long i = 0; i < ntask; i++) {
            if (!ws) continue;
            fn(a, dq, dk, dv, dout, q, k, v, out, lse, (int)(i / G), (int)(i % G), ws);
        }
        free(ws);
    }
    return fail ? ZERO_ERR_NOMEM : ZERO_OK;
}
