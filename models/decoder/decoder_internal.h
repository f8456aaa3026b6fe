/* models/decoder/decoder_internal.h — what the decoder's files share and nobody else sees: the
 * random generator, the parameter layout of a unit, the fp32 kernels and their scalar twins, and
 * the unit provider the pass runs over.
 *
 * Shapes in comments: N = B*T rows, C width, H query heads, G key/value heads, D head width,
 * Q = H*D, KV = G*D, QKV = Q + 2 KV, F intermediate width, V vocabulary. Every kernel is
 * deterministic: a given call computes bitwise the same result each time (OpenMP splits work by
 * rows or by columns, never a reduction whose order depends on the thread count). */
#ifndef ZERO_MODELS_DECODER_INTERNAL_H
#define ZERO_MODELS_DECODER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "decoder/decoder.h"

/* ---------------------------------------------------------------- random numbers */
/* splitmix64: the one generator of the model (init, sampling, data order). */
static inline uint64_t dec__mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t dec__next(uint64_t *state) {
    *state += 0x9E3779B97F4A7C15ull;
    return dec__mix64(*state);
}
/* Uniform in [0, 1) with 53 random bits. */
static inline double dec__uniform(uint64_t *state) {
    return (double)(dec__next(state) >> 11) * (1.0 / 9007199254740992.0);
}
/* A standard normal (Box-Muller, cosine branch only: two draws per value). */
double dec__normal(uint64_t *state);

void dec__errorf(zero_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A text file of at most 64 MiB, NUL-terminated (malloc'd), or NULL with err set (hf.c). */
char *dec__read_text(const char *path, zero_error *err);
/* cJSON_Print's text (freed) with two-space indentation, as transformers writes JSON (malloc'd). */
char *dec__json_indent(char *text);

/* ---------------------------------------------------------------- sizes and layout */
typedef struct dec__dims {
    int C, H, G, D, Q, KV, QKV, F;
    int FC;     /* columns of the MLP's first product: F (GELU) or 2I (SwiGLU: [gate | up]) */
    int llama;  /* RMSNorm, RoPE, SwiGLU, Linear (out, in) weights */
} dec__dims;
void dec__dims_of(const dec_config *c, dec__dims *d);

#define DEC__NONE UINT64_MAX /* offset of a tensor the configuration does not have */

/* Element offsets of a layer's tensors inside its unit. The three q/k/v weights are adjacent
 * (one (QKV, C) Linear weight, or GPT-2's fused (C, 3C) c_attn), so are their biases, and so are
 * the gate and up weights (one (2I, C) weight) and their biases. */
typedef struct dec__layout {
    uint64_t ln1_w, ln1_b, qkv_w, qkv_b, q_norm, k_norm, o_w, o_b;
    uint64_t ln2_w, ln2_b, fc_w, fc_b, proj_w, proj_b, numel;
    /* the final unit */
    uint64_t lnf_w, lnf_b, head_w, final_numel;
    /* the embeddings */
    uint64_t wpe, emb_numel; /* wte is at 0 */
} dec__layout;
void dec__layout_of(const dec_config *c, dec__layout *out);

/* ---------------------------------------------------------------- kernels (kernels.c) */
/* The optimized kernels (OpenMP, cblas) and their scalar twins (kernels_ref.c, dec__ref_*: plain
 * loops in the same order of operations where it matters, checked against each other by
 * test_decoder_kernels). */

/* out (B,T,C) = wte[tokens] (+ wpe[t] when wpe) */
void dec__embed_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C);
/* dwte[tokens[b,t]] += dout[b,t]; dwpe[t] += dout[b,t] (when dwpe) */
void dec__embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C);
/* out (N,C) = LayerNorm(inp) * w + b; mean, rstd (N) kept for backward. */
void dec__layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                        const float *b, size_t N, int C, double eps);
/* dinp += ..., dw += ..., db += ... from dout (N,C); dw (and db) NULL: frozen, not computed. */
void dec__layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                        const float *w, const float *mean, const float *rstd, size_t N, int C);
/* RMSNorm over groups of D: for row n and group g, x = inp + n*ldi + g*D, y = out + n*ldo + g*D,
 * y = x * rstd * w with rstd[n*G + g] = 1/sqrt(mean(x^2) + eps) kept for backward. */
void dec__rmsnorm_fwd(float *out, size_t ldo, float *rstd, const float *inp, size_t ldi, const float *w,
                      size_t N, int G, int D, double eps);
/* Backward of dec__rmsnorm_fwd: dinp (row stride ldd) receives d loss / d inp — added when
 * accumulate, else written (then dinp may be dout itself: every row is read before it is
 * written); dw (D) += sum over rows and groups (dw NULL: frozen, not computed). */
void dec__rmsnorm_bwd(float *dinp, size_t ldd, const float *dout, size_t lddo, const float *inp, size_t ldi,
                      const float *w, const float *rstd, float *dw, size_t N, int G, int D, int accumulate);
/* out (N,OC) = inp (N,IC) W + bias, with W (IC,OC) (wt = 0, Conv1D) or W^T, W (OC,IC) (wt = 1,
 * Linear); bias may be NULL; accumulate: out += instead of out =. */
void dec__matmul_fwd(float *out, const float *inp, const float *W, const float *bias, size_t N, int IC, int OC,
                     int wt, int accumulate);
/* dinp (N,IC) = dout W^T (overwritten); dW += (inp^T dout, in W's layout); dbias += column sums.
 * dW or dbias NULL: frozen (LoRA's base), not computed. */
void dec__matmul_bwd(float *dinp, float *dW, float *dbias, const float *dout, const float *inp, const float *W,
                     size_t N, int IC, int OC, int wt);
/* Causal self-attention, grouped: qkv (N, QKV) = [q heads | k heads | v heads], head h at
 * columns h*D of its part; query head h reads key/value head h / (H/G). att (B,H,T,T): the
 * softmax probabilities with scale 1/sqrt(D) (zero above the diagonal). out (N, Q). */
void dec__attention_fwd(float *out, float *att, const float *qkv, int B, int T, int H, int G, int D);
/* dqkv (N, QKV) = (overwritten) from dout (N, Q); scratch: T*T floats. */
void dec__attention_bwd(float *dqkv, float *scratch, const float *dout, const float *att, const float *qkv,
                        int B, int T, int H, int G, int D);
/* RoPE, rotate-half convention, in place on `heads` heads of D columns starting at x (row stride
 * ld) for N rows of sequences of T (position t = row % T): (x1, x2) -> (x1 c - x2 s, x2 c + x1 s)
 * with c, s = cos, sin tables (T, D/2). */
void dec__rope_fwd(float *x, size_t ld, size_t N, int T, int heads, int D, const float *cos, const float *sin);
/* Its transpose (the backward): (d1, d2) -> (d1 c + d2 s, d2 c - d1 s). */
void dec__rope_bwd(float *dx, size_t ld, size_t N, int T, int heads, int D, const float *cos, const float *sin);
/* GELU, tanh approximation (GPT-2's gelu_new). */
void dec__gelu_fwd(float *out, const float *inp, size_t n);
/* d (in place): d = d * gelu'(inp). */
void dec__gelu_bwd(float *d, const float *inp, size_t n);
/* SwiGLU: h (N,F) = silu(gate) * up, with gu (N, 2I) rows [gate | up]. */
void dec__swiglu_fwd(float *h, const float *gu, size_t N, int F);
/* dgu (N, 2I) = (overwritten) from dh (N, F). */
void dec__swiglu_bwd(float *dgu, const float *dh, const float *gu, size_t N, int F);
/* Cross-entropy over `rows` rows of logits (rows, V), in place: each row's loss to losses[i]
 * (0 for a target of -1); when dscale != 0 replaces the row by dscale * (softmax - onehot) (by
 * zeros for a target of -1). */
void dec__crossentropy(float *logits, float *losses, const int32_t *targets, size_t rows, int V, float dscale);
/* Sum of n floats in a fixed order, in double. */
double dec__sum(const float *x, size_t n);

/* The scalar twins (kernels_ref.c). */
void dec__ref_embed_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B, int T, int C);
void dec__ref_embed_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B, int T, int C);
void dec__ref_layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                            const float *b, size_t N, int C, double eps);
void dec__ref_layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                            const float *w, const float *mean, const float *rstd, size_t N, int C);
void dec__ref_rmsnorm_fwd(float *out, size_t ldo, float *rstd, const float *inp, size_t ldi, const float *w,
                          size_t N, int G, int D, double eps);
void dec__ref_rmsnorm_bwd(float *dinp, size_t ldd, const float *dout, size_t lddo, const float *inp, size_t ldi,
                          const float *w, const float *rstd, float *dw, size_t N, int G, int D, int accumulate);
void dec__ref_matmul_fwd(float *out, const float *inp, const float *W, const float *bias, size_t N, int IC, int OC,
                         int wt, int accumulate);
void dec__ref_matmul_bwd(float *dinp, float *dW, float *dbias, const float *dout, const float *inp,
                         const float *W, size_t N, int IC, int OC, int wt);
void dec__ref_attention_fwd(float *out, float *att, const float *qkv, int B, int T, int H, int G, int D);
void dec__ref_attention_bwd(float *dqkv, float *scratch, const float *dout, const float *att, const float *qkv,
                            int B, int T, int H, int G, int D);
void dec__ref_rope_fwd(float *x, size_t ld, size_t N, int T, int heads, int D, const float *cos, const float *sin);
void dec__ref_rope_bwd(float *dx, size_t ld, size_t N, int T, int heads, int D, const float *cos, const float *sin);
void dec__ref_gelu_fwd(float *out, const float *inp, size_t n);
void dec__ref_gelu_bwd(float *d, const float *inp, size_t n);
void dec__ref_swiglu_fwd(float *h, const float *gu, size_t N, int F);
void dec__ref_swiglu_bwd(float *dgu, const float *dh, const float *gu, size_t N, int F);
void dec__ref_crossentropy(float *logits, float *losses, const int32_t *targets, size_t rows, int V, float dscale);

/* RoPE tables (T, D/2): cos and sin of t * inv_freq_i, inv_freq as the configuration's rope type
 * gives it, computed in fp32 as transformers does. */
void dec__rope_tables(const dec_config *c, int T, float *cos, float *sin);

/* ---------------------------------------------------------------- LoRA (lora.c) */
/* The four linear sites of a layer the adapters attach to: the q/k/v product (GPT-2 c_attn), the
 * attention output, the MLP's first product ([gate | up], GPT-2 c_fc) and its second. */
enum { DEC__SITE_QKV = 0, DEC__SITE_O = 1, DEC__SITE_FC = 2, DEC__SITE_PROJ = 3, DEC__NSITES };
struct dec_lora;
typedef struct dec__lora dec__lora;
/* The adapters' state for passes of up to B x T rows; *bytes: its scratch. NULL on error. */
dec__lora *dec__lora_create(const dec_config *c, const struct dec_lora *l, int B, int T, uint64_t *bytes, zero_error *err);
void dec__lora_free(dec__lora *x);
/* A pass begins: dropout applies only to training passes. */
void dec__lora_begin(dec__lora *x, int training);
void dec__lora_key(dec__lora *x, uint64_t key);
/* y (N rows; the site's output) += the adapters of `site` on input in (N rows), with layer
 * unit view p. */
void dec__lora_fwd(dec__lora *x, int site, const float *p, const float *in, float *y, size_t N, int layer);
/* From dy (the site's output gradient): the adapters' gradients added into g (the layer's
 * gradient buffer: adapters only) and d in added into dinp. */
void dec__lora_bwd(dec__lora *x, int site, const float *p, float *g, const float *in, const float *dy, float *dinp,
                   size_t N, int layer);

/* ---------------------------------------------------------------- the pass over units */
/* Where the pass gets unit memory: raw pointers or the engine. On failure a call returns a
 * negative status, or NULL after recording the reason and the status with dec__fail. */
typedef struct dec__units {
    const float *(*gather)(dec_model *m, void *ctx, int unit);
    zero_status (*release)(dec_model *m, void *ctx, int unit);
    float *(*grad)(dec_model *m, void *ctx, int unit);
    zero_status (*grad_ready)(dec_model *m, void *ctx, int unit);
    void *ctx;
} dec__units;

typedef struct dec__pass {
    const int32_t *tokens;  /* (B,T) */
    const int32_t *targets; /* (B,T) or NULL: no loss; -1 entries do not count */
    int B, T;
    int backward;           /* forward + backward (targets required) */
    float loss_scale;
    double denom;           /* the loss is sum / denom; <= 0: the count of counted targets */
    float *loss;            /* out: sum / denom (when targets) */
    float *logits;          /* optional out: (B,T,V) */
    float *last_logits;     /* optional out: (B,V), the last position of each sequence */
} dec__pass;

zero_status dec__run(dec_model *m, const dec__units *u, const dec__pass *p);
/* Sampling loop shared by the raw and the engine generate. */
zero_status dec__generate(dec_model *m, const dec__units *u, const int32_t *prompt, int n_prompt, int n_new,
                          const dec_sampling *s, int32_t *out);
void dec__seterr(dec_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dec__fail(dec_model *m, zero_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
