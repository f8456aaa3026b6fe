/* models/kernels/mk_internal.h — what the model-kernel files share and callers do not see: the
 * per-ISA table of row/chunk kernels, the scalar element formulas, the block sizes.
 *
 * Shapes: rows of C floats (ld apart); the dispatcher (mk_kernels.c) checks arguments, picks a
 * table and splits the work between OpenMP threads; a table entry works on one row or one chunk. */
#ifndef ZERO_MODELS_KERNELS_INTERNAL_H
#define ZERO_MODELS_KERNELS_INTERNAL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/elem.h" /* src/kernels: the element formulas (header-only) */
#include "kernels/kernels.h"

/* The GELU constants and the sigmoid's exp clamp are the kernel layer's (src/kernels/elem.h),
 * so the vector bodies evaluate the scalar formulas' constants. */
#define MK_GELU_K ZERO__GELU_K
#define MK_GELU_A ZERO__GELU_A
#define MK_SIG_CLAMP ZERO__SIG_CLAMP

/* Column sums (bias, LayerNorm and RMSNorm weight gradients) are taken over chunks of this many
 * rows, each chunk summed in row order in fp32, the chunks then summed in order in double: the
 * result depends on the row count only, never on the thread count. */
#define MK_CHUNK_ROWS 64
/* Element-wise kernels split their range in chunks of this many elements (a multiple of every
 * vector width); below MK_PAR_MIN elements of work a call stays on the calling thread. */
#define MK_CHUNK_ELEMS 16384
#define MK_PAR_MIN (1 << 18)

/* Around each BLAS call: mk__blas_enter fixes its thread count when mk_set_blas_threads asked for
 * one (returning what to restore, 0 for nothing), mk__blas_leave restores it. */
int mk__blas_enter(void);
void mk__blas_leave(int prev);

/* The fp32 products of the linear layers, row-major C = alpha op(A) op(B) + beta C, on the caller's
 * thread count (mk__blas_enter/leave inside): OpenBLAS's cblas_sgemm, or oneDNN's dnnl_sgemm in a
 * build with oneDNN where ZERO_GEMM=dnnl asks for it (docs/KERNELS.md, "GEMM libraries"). */
void mk__sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc);

/* Attention blocks: BR query rows by BC keys. BC is a multiple of 2 * 16 (the widest tile). */
#define MK_ATT_BR 64
#define MK_ATT_BC 64
#define MK_ATT_MAX_HD 256

/* Per-ISA kernels. Row kernels take one row; "part" pointers are a chunk's fp32 column-sum
 * partials (accumulated, NULL when not wanted). */
typedef struct mk__isa {
    void (*gelu_fwd)(float *out, const float *x, size_t n);
    void (*gelu_bwd)(float *dx, const float *dy, const float *x, size_t n);
    /* x += bias; out = gelu(x) (one row) */
    void (*bias_gelu_row)(float *out, float *x, const float *bias, size_t n);
    /* dx = dy gelu'(x); part += dx (one row) */
    void (*gelu_bwd_bias_row)(float *dx, float *part, const float *dy, const float *x, size_t n);
    void (*silu_fwd)(float *out, const float *x, size_t n);
    void (*silu_bwd)(float *dx, const float *dy, const float *x, size_t n);
    void (*swiglu_fwd)(float *out, const float *g, const float *u, size_t n);
    void (*swiglu_bwd)(float *dg, float *du, const float *dy, const float *g, const float *u, size_t n);
    void (*geglu_fwd)(float *out, const float *g, const float *u, size_t n);
    void (*geglu_bwd)(float *dg, float *du, const float *dy, const float *g, const float *u, size_t n);
    /* y = (x - mean) * rstd * w + b; *mean, *rstd receive the row statistics. b may be NULL. */
    void (*ln_fwd_row)(float *y, float *mean, float *rstd, const float *x, const float *w,
                       const float *b, int C, float eps);
    /* dx (= or += by acc) from dy; wpart += dy * xhat, bpart += dy when not NULL. */
    void (*ln_bwd_row)(float *dx, float *wpart, float *bpart, const float *dy, const float *x,
                       const float *w, float mean, float rstd, int C, int acc);
    void (*rms_fwd_row)(float *y, float *rstd, const float *x, const float *w, int C, float eps);
    void (*rms_bwd_row)(float *dx, float *wpart, const float *dy, const float *x, const float *w,
                        float rstd, int C, int acc);
    void (*softmax_row)(float *y, const float *x, int n);
    void (*softmax_bwd_row)(float *dx, const float *dy, const float *y, int n);
    /* One row of logits with a valid target; returns the loss; writes the gradient if dscale != 0. */
    float (*xent_row)(float *x, int V, int target, float dscale);
    /* One head: rotates x[0..half) against x[half..2 half); sgn = -1 for the backward. */
    void (*rope_head)(float *x, const float *cos, const float *sin, int half, float sgn);
    /* part (cols) += rows of src (ld apart), in row order. */
    void (*colsum_rows)(float *part, const float *src, size_t rows, size_t cols, size_t ld);
    double (*sum_squares)(const float *x, size_t n);
    /* out = a + b (b NULL: out = a); out may equal a or b. One addition per element: every impl
     * gives the same bits. */
    void (*row_add)(float *out, const float *a, const float *b, size_t n);
    /* dst += src */
    void (*row_acc)(float *dst, const float *src, size_t n);
    /* y = exp(x) with this ISA's exp (tests measure its error through this entry). */
    void (*exp)(float *y, const float *x, size_t n);
} mk__isa;

/* Resolves impl (ZERO_IMPL_AUTO: the best) to its table and, when which is not NULL, the concrete
 * impl; ZERO_ERR_UNSUPPORTED / ZERO_ERR_INVALID_ARG as every kernel returns them. */
zero_status mk__pick(zero_impl impl, const mk__isa **isa, zero_impl *which);

extern const mk__isa mk__isa_scalar;
extern const mk__isa mk__isa_avx2;
extern const mk__isa mk__isa_avx512;

/* The first key query t of sequence b sees: the start of its window and of its document. */
static inline int mk__att_first_key(const mk_attn *a, int b, int t) {
    int lo = a->window > 0 && t - a->window + 1 > 0 ? t - a->window + 1 : 0;
    if (a->doc && a->doc[(size_t)b * a->T + t] > lo) lo = a->doc[(size_t)b * a->T + t];
    return lo;
}
/* One past the last query of sequence b that sees key x (queries x .. end-1 do): x + window
 * within a window, the start of the next document, else T. The documents are found by a binary
 * search (doc is non-decreasing). */
static inline int mk__att_rows_end(const mk_attn *a, int b, int x) {
    int end = a->window > 0 && x + a->window < a->T ? x + a->window : a->T;
    if (a->doc) {
        const int32_t *d = a->doc + (size_t)b * a->T;
        int lo = x + 1;
        while (lo < end) { /* the first t in [x + 1, end) whose document starts after x */
            const int mid = lo + (end - lo) / 2;
            if (d[mid] > x)
                end = mid;
            else
                lo = mid + 1;
        }
    }
    return end;
}

/* Attention tasks (mk_attention.c holds the scalar reference, mk_vec.h the blockwise kernels).
 * Forward: one (sequence b, query head h, query block qb) per call, ws of mk__att_fwd_ws floats.
 * Backward: one (sequence b, key/value head g) per call, ws of mk__att_bwd_ws floats. */
size_t mk__att_fwd_ws(const mk_attn *a);
size_t mk__att_bwd_ws(const mk_attn *a);
typedef void (*mk__att_fwd_fn)(const mk_attn *a, float *out, float *lse, const float *q,
                               const float *k, const float *v, int b, int h, int qb, float *ws);
typedef void (*mk__att_bwd_fn)(const mk_attn *a, float *dq, float *dk, float *dv,
                               const float *dout, const float *q, const float *k, const float *v,
                               const float *out, const float *lse, int b, int g, float *ws);
void mk__att_fwd_avx2(const mk_attn *a, float *out, float *lse, const float *q, const float *k,
                      const float *v, int b, int h, int qb, float *ws);
void mk__att_bwd_avx2(const mk_attn *a, float *dq, float *dk, float *dv, const float *dout,
                      const float *q, const float *k, const float *v, const float *out,
                      const float *lse, int b, int g, float *ws);
void mk__att_fwd_avx512(const mk_attn *a, float *out, float *lse, const float *q, const float *k,
                        const float *v, int b, int h, int qb, float *ws);
void mk__att_bwd_avx512(const mk_attn *a, float *dq, float *dk, float *dv, const float *dout,
                        const float *q, const float *k, const float *v, const float *out,
                        const float *lse, int b, int g, float *ws);
/* The scalar reference: forward one query row (b, h, t) with a scratch of T floats; backward one
 * (b, g) task with a scratch of 2T floats. */
void mk__att_fwd_row_scalar(const mk_attn *a, float *out, float *lse, const float *q,
                            const float *k, const float *v, int b, int h, int t, float *ws);
void mk__att_bwd_scalar(const mk_attn *a, float *dq, float *dk, float *dv, const float *dout,
                        const float *q, const float *k, const float *v, const float *out,
                        const float *lse, int b, int g, float *ws);

/* The scalar element formulas (GELU, SiLU, SwiGLU, RoPE) are the kernel layer's: zero__gelu,
 * zero__gelu_grad, zero__silu, zero__silu_grad, zero__swiglu, zero__swiglu_grad, zero__rope_pair
 * (src/kernels/elem.h, libm expf). mk_scalar.c loops over them; the vector twins (mk_vec.h)
 * evaluate the same expressions with their own exp and fused multiply-adds. */

#endif
