/* models/decoder/lora.h — LoRA adapters on the decoder, as PEFT computes them: a target module's
 * output y = x W^T + b gains s * (dropout(x) A^T) B^T, with A (r, in) and B (out, r) trainable and
 * the whole base frozen (ZERO_PARAM_FROZEN on the engine), s = alpha / r (rsLoRA: alpha / sqrt(r)).
 *
 *   dec_lora l;  dec_lora_default(&l);  l.r = 16;  l.alpha = 32;
 *   dec_lora_targets(&cfg, "q_proj,k_proj,v_proj,o_proj", &l.targets, &err);
 *   dec_lora_register(&cfg, &l, e, &err);  zero_engine_finalize(e);   // base frozen + adapters
 *   dec_engine_init(&cfg, e, seed, &err) or dec_hf_load(...);          // the base
 *   dec_lora_init(&cfg, &l, e, &err);                                   // A Kaiming-uniform, B 0
 *   dec_create(&m, &cfg, B, T, ckpt, &err);  dec_set_lora(m, &l, &err); // the pass applies them
 *
 * Adapters live in the layer units, after the layer's base tensors, target by target in module
 * order (q, k, v, o, gate, up, down; GPT-2: c_attn, attn.c_proj, c_fc, mlp.c_proj), A then B,
 * named as the module plus ".lora_A.weight" / ".lora_B.weight" (PEFT's keys without the
 * "base_model.model." prefix and GPT-2's "transformer."). docs/MODEL.md, "LoRA". */
#ifndef ZERO_MODELS_DECODER_LORA_H
#define ZERO_MODELS_DECODER_LORA_H

#include "decoder/decoder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Target modules: bits of dec_lora.targets. The Llama family's seven projections; GPT-2's
 * c_attn, c_fc and its two c_proj (attention output and MLP output: "c_proj" is both, as PEFT
 * matches module names by their last component). */
enum {
    DEC_LORA_Q = 1u << 0,
    DEC_LORA_K = 1u << 1,
    DEC_LORA_V = 1u << 2,
    DEC_LORA_O = 1u << 3,
    DEC_LORA_GATE = 1u << 4,
    DEC_LORA_UP = 1u << 5,
    DEC_LORA_DOWN = 1u << 6,
    DEC_LORA_C_ATTN = 1u << 7,
    DEC_LORA_ATTN_C_PROJ = 1u << 8,
    DEC_LORA_C_FC = 1u << 9,
    DEC_LORA_MLP_C_PROJ = 1u << 10,
    DEC_LORA_QKV_PROJ = 1u << 11, /* Phi-3's fused self_attn.qkv_proj */
    DEC_LORA_GATE_UP = 1u << 12,  /* Phi-3's fused mlp.gate_up_proj */
    DEC_LORA_NTARGETS = 13,
};

typedef struct dec_lora {
    int r;            /* rank >= 1 */
    double alpha;     /* lora_alpha > 0 */
    unsigned targets; /* DEC_LORA_* bits (dec_lora_targets) */
    double dropout;   /* lora_dropout in [0, 1): on the adapters' input while training */
    int rslora;       /* scaling alpha / sqrt(r) instead of alpha / r */
    uint64_t seed;    /* initialization of A; the dropout masks (with the key, dec_lora_set_key) */
} dec_lora;

/* PEFT's defaults: r 8, alpha 8, no dropout, no rsLoRA, no target (dec_lora_targets sets them). */
void dec_lora_default(dec_lora *l);
/* Parses comma-separated module names for cfg's architecture into DEC_LORA_* bits: q_proj,
 * k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj (Llama family, Gemma); qkv_proj, o_proj,
 * gate_up_proj, down_proj (Phi-3); c_attn, c_proj, c_fc, attn.c_proj, mlp.c_proj (GPT-2); "" or
 * NULL: PEFT's default for the architecture (q_proj,v_proj; Phi-3 qkv_proj; GPT-2 c_attn). A name the architecture does not have is ZERO_ERR_INVALID_ARG naming it. */
zero_status dec_lora_targets(const dec_config *cfg, const char *names, unsigned *out, zero_error *err);
/* The targets as PEFT's target_modules, comma-separated ("q_proj,v_proj"; GPT-2's two c_proj
 * together as "c_proj"), into buf. */
const char *dec_lora_targets_string(const dec_config *cfg, unsigned targets, char *buf, size_t cap);
/* Checks r >= 1, alpha > 0 and finite, dropout in [0, 1), at least one target of cfg's
 * architecture; err names the field. */
zero_status dec_lora_check(const dec_config *cfg, const dec_lora *l, zero_error *err);
/* s: alpha / r, or alpha / sqrt(r) with rslora. */
double dec_lora_scaling(const dec_lora *l);

/* Adapter tensors: (layers) x (targets) x {A, B}, in registration order. */
int dec_lora_num_tensors(const dec_config *cfg, const dec_lora *l);
/* Tensor i: name, layer unit, shape (A: (r, in), B: (out, r)), offset inside the unit's view
 * (after the layer's base tensors), flags 0 (decayed, as 2-D tensors are). */
zero_status dec_lora_tensor_desc(const dec_config *cfg, const dec_lora *l, int i, dec_param_desc *out);
/* Adapter elements of a unit (0 for the embeddings and the final unit), and in all. */
uint64_t dec_lora_unit_numel(const dec_config *cfg, const dec_lora *l, int unit);
uint64_t dec_lora_num_params(const dec_config *cfg, const dec_lora *l);
/* 1 when name is an adapter tensor's (ends in ".lora_A.weight" or ".lora_B.weight"). */
int dec_lora_is_param(const char *name);
/* The base module a target bit and layer name in Hugging Face's model ("model.layers.3.self_attn.
 * q_proj", GPT-2 "transformer.h.3.attn.c_attn"), and its weight's (out, in) sizes. */
const char *dec_lora_module(const dec_config *cfg, unsigned target, int layer, char *buf, size_t cap, int *out_f,
                            int *in_f);

/* 1 when a quantized base (zero_config.quant_base) keeps base tensor d as a record: a layer's
 * linear weight (2-D, Llama's (out, in)), and with `embeddings` (zero_config.quant_embed) the token
 * embeddings and an untied LM head (V, C) too; norms and biases stay in the frozen dtype. */
int dec_lora_quantizes(const dec_config *cfg, const dec_param_desc *d, int embeddings);
/* Registers the model on e as dec_engine_register does, every base tensor ZERO_PARAM_FROZEN (and
 * ZERO_PARAM_QUANTIZE where dec_lora_quantizes says so: GPT-2 is refused under a quantized base),
 * and the adapters in the layer units. */
zero_status dec_lora_register(const dec_config *cfg, const dec_lora *l, zero_engine *e, zero_error *err);
/* Sets every adapter as PEFT initializes it: A Kaiming-uniform (a = sqrt(5): U(-1/sqrt(in),
 * 1/sqrt(in))), B zero; from the model's generator, one stream per (seed, layer unit), A tensors
 * in registration order, row-major (docs/MODEL.md, "LoRA"). Every rank passes the same seed. */
zero_status dec_lora_init(const dec_config *cfg, const dec_lora *l, zero_engine *e, zero_error *err);
/* The values dec_lora_init gives unit u's adapters (dec_lora_unit_numel floats, in order). */
void dec_lora_init_unit(const dec_config *cfg, const dec_lora *l, int unit, float *dst);

/* Makes the model's pass apply the adapters (units registered by dec_lora_register: the base
 * frozen, so the pass computes no base gradient; a layer's gradient buffer holds its adapters'
 * gradients). Allocates the adapters' scratch (accounted with the model's buffers). */
zero_status dec_set_lora(dec_model *m, const dec_lora *l, zero_error *err);
/* The dropout masks of the training passes that follow are a function of (seed, key, layer,
 * target, element) only: give each micro-batch of each rank its own key (zero train: rank, step
 * and micro-batch), and a pass recomputed or resumed gets the same masks again. */
void dec_lora_set_key(dec_model *m, uint64_t key);
/* Bytes of that scratch for micro-batch B and sequence length T (added to dec_activation_bytes):
 * the r-wide products and their gradients, with dropout the dropped inputs and their gradients,
 * and one layer's adapters in fp32 (widened from a bf16 trainable part). */
uint64_t dec_lora_activation_bytes(const dec_config *cfg, const dec_lora *l, int B, int T);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_MODELS_DECODER_LORA_H */
