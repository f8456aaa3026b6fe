/* models/decoder/decoder_internal.h — what the decoder's files share and nobody else sees: the
 * random generator, the parameter layout of a unit, the choice of kernels, and the unit provider
 * the pass runs over.
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
#include "kernels/kernels.h"

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
    uint64_t pan_w, pfn_w; /* Gemma 2/3: the attention's and the MLP's output norms */
    /* the final unit */
    uint64_t lnf_w, lnf_b, head_w, final_numel;
    /* the embeddings */
    uint64_t wpe, emb_numel; /* wte is at 0 */
} dec__layout;
void dec__layout_of(const dec_config *c, dec__layout *out);

/* ---------------------------------------------------------------- kernels */
/* Every kernel of the pass is a model kernel (models/kernels/kernels.h: each with its scalar
 * reference and AVX2/AVX-512 twins, and the linear layers through the BLAS); the model resolves
 * the implementation once, at dec_create (zero_impl_best: ZERO_IMPL=scalar runs the references). */
/* The attention kernel's largest head (mk_attn). */
#define DEC__MAX_HEAD_DIM 256

/* Sets the precision of the linear layers' products as asked, native or not (tests: the bf16
 * arithmetic on a CPU without bf16 instructions). dec_set_matmul_dtype falls back instead. */
void dec__set_matmul_prec(dec_model *m, mk_prec prec);
/* The engine's passes: the products for the engine's working precision (dec_set_matmul_dtype),
 * unless dec__set_matmul_prec forced them. */
void dec__matmul_for_engine(dec_model *m, zero_dtype precision);
/* Whether bf16 products read the units' bf16 parts as they are (1, the default) or the fp32 view
 * (tests: both must give the same bits). */
void dec__set_working_copy(dec_model *m, int on);
/* The gathers of the last pass whose weights were read in bf16 as kept (tests: the path was taken). */
int dec__working_reads(const dec_model *m);
/* Computes the LM head's logits `rows` rows at a time (tests: several chunks on a small
 * vocabulary); ZERO_ERR_INVALID_ARG outside [1, the rows dec_create sized its buffer for]. */
zero_status dec__set_head_rows(dec_model *m, size_t rows);
/* The weight rows a tile of the LM head holds where a frozen bf16 head runs under fp32 products
 * (tests: several tiles on a small vocabulary; 0: the default, 16 MiB of fp32). */
void dec__set_head_wtile(dec_model *m, size_t rows);
/* Sets the model kernels' implementation (tests: ZERO_IMPL_SCALAR runs every reference);
 * ZERO_ERR_UNSUPPORTED for one this CPU cannot run. */
zero_status dec__set_impl(dec_model *m, zero_impl impl);

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
/* A layer's adapter elements (dec_lora_unit_numel), and them widened from a bf16 trainable part
 * into the LoRA scratch (valid until the next call). */
uint64_t dec__lora_numel(const dec__lora *x);
const float *dec__lora_adapters(dec__lora *x, const uint16_t *b);
/* y (N rows; the site's output) += the adapters of `site` on input in (N rows). ad: the layer's
 * adapters back to back in fp32 (the gradient buffer's layout): the unit's view after its base
 * tensors, or its trainable part (widened by dec__lora_adapters when bf16). */
void dec__lora_fwd(dec__lora *x, int site, const float *ad, const float *in, float *y, size_t N, int layer);
/* From dy (the site's output gradient): the adapters' gradients added into g (the layer's
 * gradient buffer: adapters only) and d in added into dinp. */
void dec__lora_bwd(dec__lora *x, int site, const float *ad, float *g, const float *in, const float *dy, float *dinp,
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
    /* Called after each kernel of the pass (NULL: none): lets the provider's collectives in
     * flight move while the pass computes (zero_engine_progress). */
    zero_status (*progress)(dec_model *m, void *ctx);
    /* The unit's parts as they are kept (zero_engine_gather_parts; NULL: none). Taken instead of
     * gather where the products are bf16 (gather_unit in decoder.c); released by release. */
    zero_status (*gather_parts)(dec_model *m, void *ctx, int unit, zero_unit_parts *out);
    /* Where the tensor at element `offset` of unit `unit`'s view is kept in its frozen part: its
     * first element there (*slot, in frozen-dtype elements) and its format (ZERO_QFMT_NONE: elements
     * of the frozen dtype; else a record of zero/quant.h at byte *slot x the dtype's size).
     * NULL: the provider keeps no quantized base. */
    zero_status (*frozen_place)(dec_model *m, void *ctx, int unit, uint64_t offset, uint64_t *slot, zero_qformat *fmt);
    /* The dtype gather_parts hands a frozen part in (ZERO_DTYPE_COUNT: unknown, or no parts). */
    zero_dtype frozen_dtype;
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
    int sampling;           /* 1: a sampling pass: no documents (dec_set_docs) and no sequence weights */
} dec__pass;

zero_status dec__run(dec_model *m, const dec__units *u, const dec__pass *p);
/* dec__run with the overflow probe: each unit's output (the embeddings, every layer, the final
 * norm, the LM head's logits) is checked as the forward makes it. ZERO_ERR_FORMAT when one is not
 * finite, the model's message naming the first (the site, its input's largest magnitude and the
 * tensor of largest magnitude it reads); else dec__run's status. */
zero_status dec__run_probe(dec_model *m, const dec__units *u, const dec__pass *p);
/* Sampling loop shared by the raw and the engine generate. */
zero_status dec__generate(dec_model *m, const dec__units *u, const int32_t *prompt, int n_prompt, int n_new,
                          const dec_sampling *s, int32_t *out);
void dec__seterr(dec_model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dec__fail(dec_model *m, zero_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
