/* models/kernels/kernels.h — the model kernels: fp32 element-wise, row-wise and attention kernels
 * of the decoder models (GPT-2, Llama-family), each with a scalar reference and AVX2/AVX-512 twins.
 *
 * Conventions for every function here:
 *  - fp32, row-major. A "row" of width C starts `ld` floats after the previous one (ld >= C;
 *    contiguous rows: ld = C), so a head or a half of a fused projection can be addressed in place;
 *  - `impl` picks the implementation: ZERO_IMPL_AUTO is zero_impl_best() (ZERO_IMPL=scalar|avx2|
 *    avx512 overrides it), ZERO_IMPL_SCALAR the reference. An impl this CPU cannot run returns
 *    ZERO_ERR_UNSUPPORTED and an impl outside the enum ZERO_ERR_INVALID_ARG, before anything is
 *    written. Every kernel returns ZERO_OK otherwise unless its comment names another status;
 *  - the vector impls differ from the scalar reference only by floating-point rounding and the
 *    vector exp (docs/KERNELS.md states the bounds, which the unit tests check);
 *  - OpenMP inside: work below about 2^18 elements runs on the calling thread. Every result is
 *    bitwise independent of the thread count (rows split between threads; column sums over fixed
 *    chunks of rows, summed in chunk order), except mk_gemm_bf16's, which are its BLAS's;
 *  - gradients: "written" means overwritten, "accumulated" means `+=` into what the caller holds;
 *  - aliasing: only where a comment allows it (same index, element for element).
 * No global state: the kernels keep nothing between calls. */
#ifndef ZERO_MODELS_KERNELS_H
#define ZERO_MODELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- activations */
/* GPT-2's gelu_new, the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
 * computed as x * sigmoid(2u) (the same function without the cancellation of 1 + tanh for
 * negative x). out (n) = gelu(x (n)); out may equal x. */
zero_status mk_gelu_fwd(float *out, const float *x, size_t n, zero_impl impl);
/* dx (n) = dy * gelu'(x), written; dx may equal dy or x. */
zero_status mk_gelu_bwd(float *dx, const float *dy, const float *x, size_t n, zero_impl impl);

/* A linear layer's bias add fused with its GELU (one pass instead of two): x (rows, cols; ld_x)
 * += bias (cols) in place, so that x then holds the pre-activation the backward reads, and
 * out (ld_out) = gelu(x). out must not be x. Same values as adding the bias, then mk_gelu_fwd. */
zero_status mk_bias_gelu_fwd(float *out, size_t ld_out, float *x, size_t ld_x, const float *bias,
                             size_t rows, size_t cols, zero_impl impl);
/* GELU's backward fused with the bias gradient of the layer before it: dx = dy * gelu'(x)
 * written (dx may equal dy), dbias (cols) += column sums of dx; all three (rows, cols) arrays ld
 * apart. Bitwise what mk_gelu_bwd then mk_colsum give. ZERO_ERR_NOMEM as mk_colsum. */
zero_status mk_gelu_bwd_bias(float *dx, float *dbias, const float *dy, const float *x, size_t rows,
                             size_t cols, size_t ld, zero_impl impl);

/* SiLU (swish) x * sigmoid(x). out (n) = silu(x); out may equal x. */
zero_status mk_silu_fwd(float *out, const float *x, size_t n, zero_impl impl);
/* dx (n) = dy * silu'(x), written; dx may equal dy or x. */
zero_status mk_silu_bwd(float *dx, const float *dy, const float *x, size_t n, zero_impl impl);

/* SwiGLU, the Llama MLP's middle: out = silu(gate) * up, on `rows` rows of `cols`. gate and up
 * rows are ld_in apart (a fused gate_up projection (rows, 2F): up = gate + F, ld_in = 2F; separate
 * tensors: ld_in = F); out rows ld_out apart. out may equal gate or up (same ld). */
zero_status mk_swiglu_fwd(float *out, size_t ld_out, const float *gate, const float *up,
                          size_t ld_in, size_t rows, size_t cols, zero_impl impl);
/* dgate = dy * up * silu'(gate), dup = dy * silu(gate), both written, with the layout (ld_in) of
 * gate and up; dy has ld_out. dgate may equal gate and dup may equal up. */
zero_status mk_swiglu_bwd(float *dgate, float *dup, const float *dy, size_t ld_out,
                          const float *gate, const float *up, size_t ld_in, size_t rows, size_t cols,
                          zero_impl impl);

/* GeGLU, Gemma's MLP middle: out = gelu(gate) * up with GPT-2's tanh GELU (gelu_pytorch_tanh),
 * the layout and aliasing of mk_swiglu_fwd. */
zero_status mk_geglu_fwd(float *out, size_t ld_out, const float *gate, const float *up,
                         size_t ld_in, size_t rows, size_t cols, zero_impl impl);
/* dgate = dy * up * gelu'(gate), dup = dy * gelu(gate), as mk_swiglu_bwd. */
zero_status mk_geglu_bwd(float *dgate, float *dup, const float *dy, size_t ld_out,
                         const float *gate, const float *up, size_t ld_in, size_t rows, size_t cols,
                         zero_impl impl);

/* ---------------------------------------------------------------- normalization */
/* LayerNorm over each row of C: y = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + eps) with the
 * biased variance. x rows are ldx apart, y rows ldy apart. mean and rstd (rows) receive the row
 * statistics for the backward (rounded to fp32; the backward recomputes x-hat from them); either
 * may be NULL when no backward follows. b may be NULL (no bias). y may equal x when ldx == ldy. */
zero_status mk_layernorm_fwd(float *y, float *mean, float *rstd, const float *x, const float *w,
                             const float *b, size_t rows, int C, size_t ldx, size_t ldy, float eps,
                             zero_impl impl);
/* LayerNorm backward from dy (rows, C; ldy): dx (ldx) is written (accumulate == 0) or accumulated
 * (accumulate != 0, e.g. into a residual stream's gradient); dw and db (C) are accumulated; either
 * may be NULL (not computed: a frozen gain or bias, or no bias). dx must not alias dy or x. ZERO_ERR_NOMEM when the column-sum scratch (rows/64 * 2C
 * floats at most) cannot be allocated (nothing written then). */
zero_status mk_layernorm_bwd(float *dx, float *dw, float *db, const float *dy, const float *x,
                             const float *w, const float *mean, const float *rstd, size_t rows,
                             int C, size_t ldx, size_t ldy, int accumulate, zero_impl impl);

/* RMSNorm over each row of C (Llama's, Qwen3's q/k norm over head_dim): y = x * rstd * w with
 * rstd = 1/sqrt(mean(x^2) + eps). w may be NULL (no weight). rstd (rows) may be NULL. For a
 * per-head norm on a fused projection, call once per head with x = base + h*head_dim, C =
 * head_dim, ldx = the token stride. y may equal x when ldx == ldy. */
zero_status mk_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, size_t rows,
                           int C, size_t ldx, size_t ldy, float eps, zero_impl impl);
/* RMSNorm backward: dx written or accumulated as in mk_layernorm_bwd; dw (C) accumulated (NULL
 * when w was NULL, or not computed: a frozen gain). ZERO_ERR_NOMEM as mk_layernorm_bwd. */
zero_status mk_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w,
                           const float *rstd, size_t rows, int C, size_t ldx, size_t ldy,
                           int accumulate, zero_impl impl);

/* RMSNorm per head (Qwen3's q/k norm) in one call: n_tok tokens (x rows ldx apart, y rows ldy
 * apart), each with n_heads heads of head_dim side by side; head h of token n is the row
 * n * n_heads + h: x + n*ldx + h*head_dim, normalized with the shared weight w (head_dim) into
 * y + n*ldy + h*head_dim; rstd (n_tok * n_heads, may be NULL) in that row order. Same values as
 * mk_rmsnorm_fwd on each head; the work is split over all the rows. */
zero_status mk_rmsnorm_heads_fwd(float *y, float *rstd, const float *x, const float *w,
                                 size_t n_tok, int n_heads, int head_dim, size_t ldx, size_t ldy,
                                 float eps, zero_impl impl);
/* Its backward: dx (layout of x) written or accumulated, dw (head_dim) accumulated over every
 * row, in row order by chunks as every column sum here (thread-count independent); dw NULL: not
 * computed (a frozen gain). */
zero_status mk_rmsnorm_heads_bwd(float *dx, float *dw, const float *dy, const float *x,
                                 const float *w, const float *rstd, size_t n_tok, int n_heads,
                                 int head_dim, size_t ldx, size_t ldy, int accumulate,
                                 zero_impl impl);

/* ---------------------------------------------------------------- softmax, cross-entropy */
/* y (rows, cols) = softmax of each row of x; y may equal x. */
zero_status mk_softmax_fwd(float *y, const float *x, size_t rows, int cols, zero_impl impl);
/* dx = y * (dy - sum(y * dy)) per row, written; dx may equal dy. */
zero_status mk_softmax_bwd(float *dx, const float *dy, const float *y, size_t rows, int cols,
                           zero_impl impl);

/* Cross-entropy from logits (rows, V), fused with its gradient. losses[r] = logsumexp(row) -
 * logits[r][targets[r]] (natural log, unscaled) for a target in [0, V); a negative target
 * (-1, or Hugging Face's -100) is ignored: loss 0 and, when a gradient is asked, a zero row.
 * dscale != 0: the logits are replaced by the gradient dscale * (softmax - onehot(target)), where
 * the caller's dscale is loss_scale / (number of counted targets: the loss denominator, which may
 * span micro-batches or ranks); dscale == 0: the logits are only read. Each row is read three
 * times (max; exp and sum, storing the exps when a gradient is asked; the scaled write).
 * ZERO_ERR_INVALID_ARG (nothing written) for a target >= V. */
zero_status mk_cross_entropy(float *logits, float *losses, const int32_t *targets, size_t rows,
                             int V, float dscale, zero_impl impl);

/* ---------------------------------------------------------------- rotary embeddings */
typedef enum mk_rope_scaling {
    MK_ROPE_NONE = 0,   /* inv_freq_i = theta^(-2i/rot_dim) */
    MK_ROPE_LINEAR = 1, /* inv_freq / factor (position interpolation) */
    MK_ROPE_LLAMA3 = 2, /* Llama 3.1's piecewise rescaling of the wavelengths */
    MK_ROPE_LONGROPE = 3, /* Phi-3's: inv_freq_i / ext_factors[i] */
} mk_rope_scaling;

/* The frequencies of a model, as its config.json gives them (rope_theta, rope_scaling). */
typedef struct mk_rope_freq {
    double theta;           /* rope_theta (10000 for Llama 2, 500000 for Llama 3, 1e6 for Qwen2) */
    mk_rope_scaling scaling;
    double factor;          /* LINEAR and LLAMA3 */
    double low_freq_factor; /* LLAMA3 */
    double high_freq_factor;
    int original_max_pos;   /* LLAMA3: original_max_position_embeddings */
    const double *ext_factors; /* LONGROPE: rot_dim/2 factors (short_factor or long_factor) */
    double attn_factor;     /* LONGROPE: cos and sin multiplied by it (its attention scaling) */
} mk_rope_freq;

/* Fills cos and sin (n_pos, rot_dim/2): angle = p * inv_freq_i for position p and pair i, with
 * inv_freq computed as Hugging Face's rotary embedding computes it in fp32. rot_dim even, >= 2.
 * ZERO_ERR_INVALID_ARG for an odd or non-positive rot_dim, n_pos < 1, theta <= 1, or scaling
 * factors that are not finite and positive (LLAMA3 also needs high_freq_factor > low_freq_factor). */
zero_status mk_rope_table(float *cos, float *sin, int n_pos, int rot_dim, const mk_rope_freq *f);

/* A table made by mk_rope_table; the kernels only read it. */
typedef struct mk_rope {
    const float *cos, *sin; /* (n_pos, rot_dim/2) */
    int n_pos, rot_dim;
} mk_rope;

/* Rotary embedding, in place, in transformers' rotate-half convention: for each head of each
 * token, with half = rot_dim/2 and i < half, (x_i, x_{i+half}) becomes
 * (x_i cos - x_{i+half} sin, x_{i+half} cos + x_i sin); the dimensions past rot_dim are left as
 * they are. x: n_tok tokens ld floats apart, each with n_heads heads of head_dim (rot_dim <=
 * head_dim) back to back. Position of token n: pos[n] when pos is not NULL, else n % T (tokens
 * are B sequences of T). ZERO_ERR_INVALID_ARG for a position outside [0, n_pos) (nothing
 * written), rot_dim > head_dim, or an odd rot_dim. */
zero_status mk_rope_fwd(const mk_rope *r, float *x, size_t ld, size_t n_tok, int T, int n_heads,
                        int head_dim, const int32_t *pos, zero_impl impl);
/* The backward, in place on the gradient: the inverse rotation (sin negated). Same arguments. */
zero_status mk_rope_bwd(const mk_rope *r, float *dx, size_t ld, size_t n_tok, int T, int n_heads,
                        int head_dim, const int32_t *pos, zero_impl impl);

/* ---------------------------------------------------------------- reductions */
/* dst (cols) += the column sums of src (rows, cols; rows ld apart): a bias gradient.
 * ZERO_ERR_NOMEM when the chunk scratch (rows/64 * cols floats at most) cannot be allocated. */
zero_status mk_colsum(float *dst, const float *src, size_t rows, size_t cols, size_t ld,
                      zero_impl impl);
/* *out = sum of x[i]^2 in double (for gradient norms). */
zero_status mk_sum_squares(const float *x, size_t n, double *out, zero_impl impl);

/* ---------------------------------------------------------------- attention */
/* Causal multi-head attention with grouped key/value heads (GQA; MHA when n_kv_head == n_head).
 * Query head h reads key/value head h / (n_head / n_kv_head), as transformers' repeat_kv does.
 * Element (b, t, head, d) of q is q[(b*T + t)*ld_q + head*head_dim + d]; likewise k and v (with
 * n_kv_head heads) and out (n_head heads, ld_o). The gradients dq, dk, dv share the layout of q,
 * k, v and dout that of out, so one fused qkv buffer and its gradient work in place. */
typedef struct mk_attn {
    int B, T;                       /* sequences, tokens per sequence */
    int n_head, n_kv_head, head_dim; /* n_kv_head divides n_head; head_dim in [1, 256] */
    size_t ld_q, ld_k, ld_v, ld_o;   /* floats between consecutive tokens */
    float scale;                     /* logit = scale * q.k, usually 1/sqrt(head_dim) */
    float softcap;                   /* > 0: logit = softcap * tanh(logit / softcap) (Gemma 2's
                                      * attn_logit_softcapping) before the softmax; 0: none */
    int window;                      /* > 0: sliding window, query t sees keys j with
                                      * t - window < j <= t (the window keys ending at itself,
                                      * transformers' sliding_window); 0: every j <= t */
    const int32_t *doc;              /* NULL, or B*T values: doc[b*T + t] is the first token of
                                      * t's document in sequence b (packed examples), and query t
                                      * sees no key before it. doc[b*T] = 0 and each next value
                                      * repeats the one before or is its own t: documents are
                                      * runs of tokens, block-diagonal causal attention */
} mk_attn;

/* out = softmax(scale * q k^T, causal, within the window and the document) v, written; lse (B, n_head, T)
 * receives each row's natural-log sum of exp of the logits (for the backward). The vector impls are blockwise
 * (online softmax over key blocks; no (T, T) buffer); the scalar reference materializes one
 * row of T logits at a time. With a window the vector impls skip the key blocks wholly outside
 * it (work of order T * (window + 64) instead of T^2 / 2); a window >= T gives the causal result
 * bit for bit; the key blocks wholly before a query block's document are skipped too, and a
 * document mask keeps no (T, T) buffer. ZERO_ERR_INVALID_ARG for a shape outside the limits above,
 * a negative window, a doc array that is not runs as above, or a stride too small for its heads; ZERO_ERR_NOMEM if a thread's block scratch (209 KiB at head_dim 256;
 * the scalar reference: 4T bytes) cannot be allocated (the output is then incomplete). out must
 * not alias q, k or v. */
zero_status mk_attention_fwd(const mk_attn *a, float *out, float *lse, const float *q,
                             const float *k, const float *v, zero_impl impl);
/* The backward from dout, out and lse of the forward: dq, dk, dv written (not accumulated), none
 * aliasing an input. Work is split over (sequence, key/value head) pairs: B * n_kv_head tasks.
 * Errors as mk_attention_fwd; a thread's scratch is 544 KiB at head_dim 256, plus
 * 4 (n_head/n_kv_head) T bytes (the scalar reference: 8T bytes). */
zero_status mk_attention_bwd(const mk_attn *a, float *dq, float *dk, float *dv, const float *dout,
                             const float *q, const float *k, const float *v, const float *out,
                             const float *lse, zero_impl impl);

/* ---------------------------------------------------------------- embeddings */
/* out (n_tok, C) = wte[tokens[n]] (+ wpe[position of n] when wpe is not NULL: pos[n] when pos is
 * not NULL, else n % T: tokens are sequences of T). Tokens and positions are not checked (the
 * caller validated them against the vocabulary and the table). Bitwise equal in every impl (one
 * addition per element). */
zero_status mk_embed_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe,
                         size_t n_tok, int T, int C, const int32_t *pos, zero_impl impl);
/* dwte[tokens[n]] += dout[n]; dwpe[position of n] += dout[n] when dwpe is not NULL. Each row of
 * dwte and dwpe receives its tokens' rows in token order, so the result is bitwise the same in
 * every impl and on any thread count. */
zero_status mk_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens,
                         size_t n_tok, int T, int C, const int32_t *pos, zero_impl impl);

/* ---------------------------------------------------------------- linear layers */
/* The precision of a linear layer's products. */
typedef enum mk_prec {
    MK_PREC_FP32 = 0, /* cblas_sgemm */
    MK_PREC_BF16 = 1, /* both operands rounded to bf16, products accumulated in fp32 (mk_gemm_bf16,
                         MK_GEMM_AUTO: native where the build and CPU have it, else convert) */
} mk_prec;

/* A linear layer over N rows, contiguous: x (N, IC), out (N, OC). The weight W is (OC, IC)
 * (trans_w = 1, torch's Linear: out = x W^T) or (IC, OC) (trans_w = 0, GPT-2's Conv1D:
 * out = x W). out = x W' + bias + resid, where bias (OC) and resid (N, OC) may be NULL and resid
 * may equal out (then the product is added to what out holds). The bias and the residual are
 * written into out before the product, which the GEMM then adds to (beta = 1): no pass after it.
 * impl: ZERO_IMPL_SCALAR is the reference (plain loops, products summed in double, then
 * + bias + resid); the others use the BLAS. ZERO_ERR_NOMEM when bf16's operand copies cannot be
 * allocated; ZERO_ERR_INVALID_ARG for sizes < 1 or NULL operands. out must not alias x or W. */
zero_status mk_linear_fwd(float *out, const float *x, const float *W, const float *bias,
                          const float *resid, size_t N, int IC, int OC, int trans_w, mk_prec prec,
                          zero_impl impl);
/* The backward from dy (N, OC): dx (N, IC) = dy W'^T written (skipped when dx is NULL);
 * dW (W's layout) += x^T dy (skipped when NULL); dbias (OC) += column sums of dy (mk_colsum's
 * order; skipped when NULL). dx must not alias dy, x or W. bf16: dy, x and W rounded to bf16 for
 * the products (the column sums stay fp32). */
zero_status mk_linear_bwd(float *dx, float *dW, float *dbias, const float *dy, const float *x,
                          const float *W, size_t N, int IC, int OC, int trans_w, mk_prec prec,
                          zero_impl impl);
/* mk_linear_fwd / mk_linear_bwd at bf16 with the weight already in bf16 (raw bits, W's layout:
 * a bf16 working copy, read as it is): the same results as those given the weight widened to
 * fp32 (rounding a widened bf16 value gives it back), without rounding the weight again; x and dy
 * are rounded as there. The scalar reference widens wb into a copy (ZERO_ERR_NOMEM without one). */
zero_status mk_linear_fwd_wb(float *out, const float *x, const uint16_t *wb, const float *bias, const float *resid,
                             size_t N, int IC, int OC, int trans_w, zero_impl impl);
zero_status mk_linear_bwd_wb(float *dx, float *dW, float *dbias, const float *dy, const float *x, const uint16_t *wb,
                             size_t N, int IC, int OC, int trans_w, zero_impl impl);
/* The products of mk_linear_fwd / mk_linear_bwd at bf16 on operands already rounded to bf16 (raw
 * bits; the same layouts, N rows): out = beta·out + x·W'; dx = dy·W'^T (skipped when dx is NULL),
 * dW += x^T·dy in W's layout (skipped when NULL); through mk_gemm_bf16 (MK_GEMM_AUTO). No checks
 * beyond mk_gemm_bf16's. For callers that keep operands rounded across products (the decoder's LM
 * head rounds its weight once for all its chunks) or time the products alone (dec_gemm_rate). */
zero_status mk_linear_fwd_bf16(float *out, const uint16_t *xb, const uint16_t *wb, int N, int IC, int OC,
                               int trans_w, float beta);
zero_status mk_linear_bwd_bf16(float *dx, float *dW, const uint16_t *dyb, const uint16_t *xb, const uint16_t *wb,
                               int N, int IC, int OC, int trans_w);

/* ---------------------------------------------------------------- quantized frozen weights */
/* A frozen linear weight (OC, IC), torch's layout (out = x W^T), in a blockwise quantized format of
 * zero/quant.h over its flat elements: NF4 (codes packed two a byte, blocks of 64) or int8 (indices
 * into the linear map, blocks of 64); the blocks' scales as fp32 (absmax) or double-quantized
 * (qabsmax, absmax2, offset; absmax NULL). */
typedef enum mk_qfmt { MK_Q_NF4 = 1, MK_Q_INT8 = 2 } mk_qfmt;
typedef struct mk_qweight {
    mk_qfmt fmt;
    int OC, IC;
    const uint8_t *codes;
    const float *absmax;
    const uint8_t *qabsmax;
    const float *absmax2;
    float offset;
} mk_qweight;

/* Rows of the weight decoded per tile: 65,536 fp32 values' worth (256 KiB), at least one row. */
int mk_qweight_tile_rows(int IC);
/* Rows [r0, r0 + rows) of the weight into dst (rows x IC fp32): the tile loader. */
zero_status mk_qweight_rows(const mk_qweight *w, int r0, int rows, float *dst);
/* mk_linear_fwd (trans_w = 1) over the quantized weight: out = x W^T + bias + resid, the weight
 * decoded a tile of mk_qweight_tile_rows rows at a time into the GEMM's operand (bf16: rounded, as
 * mk_linear_fwd rounds a weight); no whole decoded matrix. The weight is w[0..nparts) one under
 * the other (the same IC; a fused product over tensors quantized each on its own, as q, k and v
 * are): out's columns are theirs in order. ZERO_IMPL_SCALAR: the whole weight decoded and
 * mk_linear_fwd's scalar reference on it. */
zero_status mk_qlinear_fwd(float *out, const float *x, const mk_qweight *w, int nparts, const float *bias,
                           const float *resid, size_t N, mk_prec prec, zero_impl impl);
/* The backward to the input only (the weight is frozen): dx (N, IC) = dy W, summed over the tiles. */
zero_status mk_qlinear_bwd(float *dx, const float *dy, const mk_qweight *w, int nparts, size_t N, mk_prec prec,
                           zero_impl impl);

/* ---------------------------------------------------------------- bf16 GEMM */
typedef enum mk_gemm_path {
    MK_GEMM_AUTO = 0,     /* the native bf16 path where this build and CPU have one, else CONVERT */
    MK_GEMM_CONVERT = 1,  /* widen A and B to fp32 (exact) and call cblas_sgemm */
    MK_GEMM_NATIVE = 2,   /* the native bf16 GEMM only (ZERO_ERR_UNSUPPORTED where there is none) */
} mk_gemm_path;

/* C (M, N) = alpha * op(A) op(B) + beta * C, row-major, A and B bf16 (raw uint16_t bits), C fp32,
 * products accumulated in fp32. op(A) is (M, K): A is (M, K) with lda >= K, or (K, M) with
 * lda >= M when trans_a. op(B) is (K, N): B (K, N), ldb >= N, or (N, K), ldb >= K when trans_b.
 * Returns ZERO_ERR_INVALID_ARG for bad sizes, ZERO_ERR_NOMEM when CONVERT's fp32 copies (M*K +
 * K*N floats) cannot be allocated, ZERO_ERR_UNSUPPORTED for NATIVE where it is missing. */
zero_status mk_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta,
                         float *C, int ldc, mk_gemm_path path);
/* Which path MK_GEMM_AUTO takes in this build on this CPU: "native (...)" or "convert". */
const char *mk_gemm_bf16_path_name(void);
/* Threads of every BLAS call of the kernels: 0 (default) the BLAS's own choice (OpenBLAS: the
 * OpenMP team size); n > 0 exactly n. OpenBLAS gives the same bits for the same shapes and thread
 * count only, so a run that must be bitwise the same whatever the ranks' thread counts (zero
 * train --deterministic) fixes it. Process-wide; set it before computing. */
void mk_set_blas_threads(int n);
int mk_blas_threads(void);
/* 1 when MK_GEMM_AUTO takes the native path (this build has it and the CPU multiplies bf16). */
int mk_gemm_bf16_native(void);

/* ---------------------------------------------------------------- the BLAS in the process */
/* OpenBLAS's build line (version, threading) and the core whose kernels it runs, for reports:
 * "OpenBLAS 0.3.21 ... USE_OPENMP, core SkylakeX". */
const char *mk_blas_name(void);
/* Where the OpenBLAS core in use runs AVX2 kernels (Haswell, Zen) on a CPU and OS that run AVX-512
 * (zero_impl_available): the core to name instead, "SkylakeX"; else NULL. OpenBLAS with
 * DYNAMIC_ARCH picks its core when it loads, from $OPENBLAS_CORETYPE or else its own table (0.3.21
 * takes AMD Zen 5 for Cooperlake, an AVX-512 core), so this happens where the environment names an
 * AVX2 core; its AVX-512 sgemm is 1.9x faster on Zen 5 (docs/KERNELS.md, "The OpenBLAS core"). */
const char *mk_blas_core_better(void);

#ifdef __cplusplus
}
#endif

#endif
