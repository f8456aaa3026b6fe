/* models/gpt2/gpt2_internal.h — what the GPT-2 model's files share and nobody else sees: the
 * fp32 kernels (kernels.c), the random generator, and the unit provider the pass runs over.
 *
 * Shapes in comments: N = B*T rows, C width, H heads, hs = C/H, V vocabulary. Every kernel is
 * deterministic: a given call computes bitwise the same result each time (OpenMP splits work by
 * rows or by columns, never a reduction whose order depends on the thread count at run time
 * beyond what OpenBLAS itself fixes for a given shape). */
#ifndef ZERO_MODELS_GPT2_INTERNAL_H
#define ZERO_MODELS_GPT2_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2/gpt2.h"

/* ---------------------------------------------------------------- random numbers */
/* splitmix64: the one generator of the model (init, sampling, data order). */
static inline uint64_t gpt2__mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline uint64_t gpt2__next(uint64_t *state) {
    *state += 0x9E3779B97F4A7C15ull;
    return gpt2__mix64(*state);
}
/* Uniform in [0, 1) with 53 random bits. */
static inline double gpt2__uniform(uint64_t *state) {
    return (double)(gpt2__next(state) >> 11) * (1.0 / 9007199254740992.0);
}
/* A standard normal (Box-Muller, cosine branch only: two draws per value). */
double gpt2__normal(uint64_t *state);

/* ---------------------------------------------------------------- parameter layout */
/* Element offsets of a block's tensors inside its unit (registration order). */
typedef struct gpt2__block_layout {
    uint64_t ln1_w, ln1_b, attn_w, attn_b, attnproj_w, attnproj_b;
    uint64_t ln2_w, ln2_b, fc_w, fc_b, fcproj_w, fcproj_b, numel;
} gpt2__block_layout;
void gpt2__block_layout_of(int C, gpt2__block_layout *out);

/* ---------------------------------------------------------------- kernels (kernels.c) */
/* out (B,T,C) = wte[tokens] + wpe[t] */
void gpt2__encoder_fwd(float *out, const int32_t *tokens, const float *wte, const float *wpe, int B,
                       int T, int C);
/* dwte[tokens[b,t]] += dout[b,t]; dwpe[t] += dout[b,t] */
void gpt2__encoder_bwd(float *dwte, float *dwpe, const float *dout, const int32_t *tokens, int B,
                       int T, int C);
/* out (N,C) = LayerNorm(inp) * w + b (eps 1e-5); mean, rstd (N) kept for backward. */
void gpt2__layernorm_fwd(float *out, float *mean, float *rstd, const float *inp, const float *w,
                         const float *b, size_t N, int C);
/* dinp += ..., dw += ..., db += ... from dout (N,C). */
void gpt2__layernorm_bwd(float *dinp, float *dw, float *db, const float *dout, const float *inp,
                         const float *w, const float *mean, const float *rstd, size_t N, int C);
/* out (N,OC) = inp (N,IC) W (IC,OC) + bias; accumulate: out += instead of out =. */
void gpt2__matmul_fwd(float *out, const float *inp, const float *W, const float *bias, size_t N,
                      int IC, int OC, int accumulate);
/* dinp (N,IC) = dout W^T (overwritten); dW += inp^T dout; dbias += column sums of dout. */
void gpt2__matmul_bwd(float *dinp, float *dW, float *dbias, const float *dout, const float *inp,
                      const float *W, size_t N, int IC, int OC);
/* Causal self-attention. qkv (N,3C) = [q | k | v], head h at columns h*hs. att (B,H,T,T): the
 * softmax probabilities (zero above the diagonal). out (N,C): the heads side by side. */
void gpt2__attention_fwd(float *out, float *att, const float *qkv, int B, int T, int C, int H);
/* dqkv (N,3C) = (overwritten) from dout (N,C); scratch: T*T floats. */
void gpt2__attention_bwd(float *dqkv, float *scratch, const float *dout, const float *att,
                         const float *qkv, int B, int T, int C, int H);
/* GELU, tanh approximation. */
void gpt2__gelu_fwd(float *out, const float *inp, size_t n);
/* d (in place): d = d * gelu'(inp). */
void gpt2__gelu_bwd(float *d, const float *inp, size_t n);
/* Cross-entropy over `rows` rows of logits (rows, V), in place: writes each row's loss to
 * losses[i]; when dscale != 0 replaces the row by dscale * (softmax - onehot(target)). */
void gpt2__crossentropy(float *logits, float *losses, const int32_t *targets, size_t rows, int V,
                        float dscale);
/* Sum of n floats in a fixed order, in double. */
double gpt2__sum(const float *x, size_t n);

/* ---------------------------------------------------------------- the pass over units */
/* Where the pass gets unit memory: raw pointers or the engine. On failure a call returns a
 * negative status, or NULL after recording the reason and the status with gpt2__fail. */
typedef struct gpt2__units {
    const float *(*gather)(gpt2_model *m, void *ctx, int unit);
    zero_status (*release)(gpt2_model *m, void *ctx, int unit);
    float *(*grad)(gpt2_model *m, void *ctx, int unit);
    zero_status (*grad_ready)(gpt2_model *m, void *ctx, int unit);
    void *ctx;
} gpt2__units;

typedef struct gpt2__pass {
    const int32_t *tokens;  /* (B,T) */
    const int32_t *targets; /* (B,T) or NULL: no loss */
    int B, T;
    int backward;           /* forward + backward (targets required) */
    float loss_scale;
    float *loss;            /* out: mean loss (when targets) */
    float *logits;          /* optional out: (B,T,V) */
    float *last_logits;     /* optional out: (B,V), the last position of each sequence */
} gpt2__pass;

zero_status gpt2__run(gpt2_model *m, const gpt2__units *u, const gpt2__pass *p);
/* Sampling loop shared by the raw and the engine generate. */
zero_status gpt2__generate(gpt2_model *m, const gpt2__units *u, const int32_t *prompt, int n_prompt,
                           int n_new, const gpt2_sampling *s, int32_t *out);
void gpt2__seterr(gpt2_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gpt2__fail(gpt2_model *m, zero_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void gpt2__errorf(zero_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
