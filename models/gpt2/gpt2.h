/* models/gpt2/gpt2.h — the reference GPT-2 in plain C: configuration and presets, the parameter
 * table (Hugging Face names), initialization, explicit fp32 forward/backward, sampling.
 *
 * A client of libzero's public API only. Two ways to drive it:
 *  - raw: the caller owns one fp32 buffer per unit (units below) and passes the pointers:
 *      gpt2_model *m;  gpt2_create(&m, &cfg, B, T, checkpointing, &err);
 *      gpt2_forward_backward(m, params, grads, tokens, targets, B, T, 1.0f, &loss, NULL);
 *  - through a zero_engine (gpt2_engine_* below): the engine owns and shards the parameters;
 *    the model gathers each unit just before it uses it and hands back its gradient.
 *
 * Units (the grain of gathering, reduction and offload), in this order:
 *   0           "embeddings": wte.weight (V, C), wpe.weight (n_ctx, C)
 *   1 .. L      "h.{l}"     : ln_1.weight (C), ln_1.bias (C), attn.c_attn.weight (C, 3C),
 *                             attn.c_attn.bias (3C), attn.c_proj.weight (C, C), attn.c_proj.bias (C),
 *                             ln_2.weight (C), ln_2.bias (C), mlp.c_fc.weight (C, 4C),
 *                             mlp.c_fc.bias (4C), mlp.c_proj.weight (4C, C), mlp.c_proj.bias (C)
 *   L + 1       "ln_f"      : ln_f.weight (C), ln_f.bias (C)
 * A unit is one flat fp32 buffer: its parameters back to back in that order, each row-major.
 * Linear weights are stored in Hugging Face's Conv1D layout (in, out): y = x W + b, so every
 * tensor has exactly the shape and the element order of the HF GPT-2 checkpoint. The LM head is
 * tied to wte (logits = x wte^T). Biases and LayerNorm parameters carry ZERO_PARAM_NO_DECAY.
 *
 * Loss: mean cross-entropy over the B*T positions of the micro-batch. Backward ACCUMULATES
 * (+=) d(loss * loss_scale)/d(param) into the gradient buffers it is given; it never overwrites.
 * Results are deterministic: the same inputs give bitwise the same loss and gradients, with and
 * without activation checkpointing.
 */
#ifndef ZERO_MODELS_GPT2_H
#define ZERO_MODELS_GPT2_H

#include <stddef.h>
#include <stdint.h>

#include "zero/zero.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- configuration */
typedef struct gpt2_config {
    int n_layer; /* L: transformer blocks */
    int n_embd;  /* C: model width; a multiple of n_head */
    int n_head;  /* H: attention heads */
    int n_ctx;   /* maximum sequence length (rows of wpe) */
    int vocab;   /* V: vocabulary size (rows of wte) */
} gpt2_config;

/* Presets: "tiny" (L2 C64 H4 ctx64 V256, for tests), "small" (L6 C512 H8 ctx512 V256, 19.3M
 * parameters, byte-level), "gpt2" (124M), "gpt2-medium" (355M), "gpt2-large" (774M),
 * "gpt2-xl" (1558M). Overrides are plain assignments to the fields, followed by gpt2_config_check. */
zero_status gpt2_config_preset(gpt2_config *cfg, const char *name, zero_error *err);
/* The preset names, NULL-terminated (for help texts and "expected one of" messages). */
const char *const *gpt2_preset_names(void);
/* Checks ranges: every field >= 1, n_embd % n_head == 0, and sizes that keep every tensor
 * index below 2^62. err names the field, its value and what was expected. */
zero_status gpt2_config_check(const gpt2_config *cfg, zero_error *err);

/* Total parameters (the tied LM head counted once): V*C + n_ctx*C + L*(12C^2 + 13C) + 2C. */
uint64_t gpt2_num_params(const gpt2_config *cfg);
/* Bytes of the activation and scratch buffers gpt2_create allocates for micro-batch B and
 * sequence length T, with or without activation checkpointing (the planner's figure; equal to
 * what gpt2_activation_bytes_allocated reports for a model created with the same arguments). */
uint64_t gpt2_activation_bytes(const gpt2_config *cfg, int B, int T, int checkpointing);

/* ---------------------------------------------------------------- units and parameters */
enum { GPT2_UNIT_EMBEDDINGS = 0 }; /* block l is unit 1 + l, ln_f is unit n_layer + 1 */

int gpt2_num_units(const gpt2_config *cfg);                  /* n_layer + 2 */
/* Writes the unit's name ("embeddings", "h.3", "ln_f") into buf; returns buf ("" if invalid). */
const char *gpt2_unit_name(const gpt2_config *cfg, int unit, char *buf, size_t cap);
uint64_t gpt2_unit_numel(const gpt2_config *cfg, int unit);  /* 0 for an invalid unit */
/* Offset of the unit in the "all units back to back" flat layout (sum of the earlier units). */
uint64_t gpt2_unit_offset(const gpt2_config *cfg, int unit);

typedef struct gpt2_param_desc {
    char name[64];     /* HF name: "wte.weight", "h.0.attn.c_attn.weight", "ln_f.bias" */
    int unit;
    uint64_t offset;   /* in elements, inside the unit */
    uint64_t numel;
    int ndim;          /* 1 or 2 */
    int64_t shape[2];
    unsigned flags;    /* ZERO_PARAM_NO_DECAY for biases and LayerNorm parameters */
} gpt2_param_desc;

int gpt2_num_tensors(const gpt2_config *cfg);                /* 2 + 12 L + 2 */
/* Describes tensor `index` (0 .. num_tensors-1, registration order). */
zero_status gpt2_tensor_desc(const gpt2_config *cfg, int index, gpt2_param_desc *out);

/* GPT-2 initialization of one unit into dst (unit numel values): weights N(0, 0.02), the two
 * c_proj weights N(0, 0.02/sqrt(2L)), biases 0, LayerNorm gains 1 and biases 0. The normals come
 * from a generator of this model's own (docs/MODEL.md: splitmix64 + Box-Muller, one stream per
 * (seed, unit)), so every rank and every run computes the same values, and a unit can be
 * initialized without the others. */
void gpt2_init_unit(const gpt2_config *cfg, int unit, uint64_t seed, float *dst);

/* ---------------------------------------------------------------- the model */
typedef struct gpt2_model gpt2_model;

/* Allocates the activation and scratch buffers for micro-batches of up to B sequences of up to
 * T tokens (T <= n_ctx). With checkpointing only each block's input is kept in forward and the
 * block's forward is recomputed in backward. The buffers are accounted as ZERO_MEM_BUFFERS in
 * the model's own zero_mem_stats (gpt2_mem_stats). */
zero_status gpt2_create(gpt2_model **out, const gpt2_config *cfg, int B, int T, int checkpointing,
                        zero_error *err);
void gpt2_free(gpt2_model *m); /* NULL is a no-op */
const char *gpt2_last_error(const gpt2_model *m);
const gpt2_config *gpt2_model_config(const gpt2_model *m);
size_t gpt2_activation_bytes_allocated(const gpt2_model *m);
void gpt2_mem_stats(const gpt2_model *m, zero_mem_stats *out);

/* One micro-batch, forward and backward, on raw unit buffers. params[u] / grads[u] point to
 * unit u's numel floats (u < num_units). tokens and targets: B*T values in [0, V), row-major
 * (sequence b, position t). Writes the mean loss to *loss; adds d(loss * loss_scale)/d(param)
 * into grads; logits (optional, B*T*V) receives the logits. Errors: bad sizes or tokens
 * (ZERO_ERR_INVALID_ARG, nothing touched). */
zero_status gpt2_forward_backward(gpt2_model *m, const float *const *params, float *const *grads,
                                  const int32_t *tokens, const int32_t *targets, int B, int T,
                                  float loss_scale, float *loss, float *logits);
/* Forward only: *loss when targets is not NULL (loss may be NULL otherwise), logits optional. */
zero_status gpt2_forward(gpt2_model *m, const float *const *params, const int32_t *tokens,
                         const int32_t *targets, int B, int T, float *loss, float *logits);

/* Sampling: temperature <= 0 picks the most likely token (greedy); top_k > 0 keeps the k most
 * likely tokens. The generator is seeded by `seed` only, so every rank draws the same tokens. */
typedef struct gpt2_sampling {
    float temperature; /* 1.0 */
    int top_k;         /* 0: off */
    uint64_t seed;
} gpt2_sampling;

/* Appends n_new tokens to the prompt (n_prompt >= 1 tokens in [0, V)), writing them to out.
 * The context is the last T tokens (the T the model was created with). Needs B >= 1. */
zero_status gpt2_generate(gpt2_model *m, const float *const *params, const int32_t *prompt,
                          int n_prompt, int n_new, const gpt2_sampling *s, int32_t *out);

/* ---------------------------------------------------------------- on a zero_engine */
/* Registers the units and tensors (names, shapes, flags) on e, before zero_engine_finalize.
 * Unit ids are those above (the engine must be empty: the first unit added gets id 0). */
zero_status gpt2_engine_register(const gpt2_config *cfg, zero_engine *e, zero_error *err);
/* Sets every unit to gpt2_init_unit(seed) with zero_engine_set_unit (after finalize; every rank
 * passes the same seed). */
zero_status gpt2_engine_init(const gpt2_config *cfg, zero_engine *e, uint64_t seed, zero_error *err);
/* One micro-batch on the engine: gathers/releases each unit around its use in forward (the
 * embeddings twice: the tied LM head needs wte again, and its part of d wte goes into the
 * embeddings' gradient buffer right there), then in reverse order gathers, fetches the gradient
 * buffer, accumulates, marks it ready and releases; the embedding backward reads no parameter,
 * so the embeddings' buffer is completed and marked ready without a third gather (docs/MODEL.md
 * lists the exact order). The loss gradient is scaled by zero_engine_loss_scale(e). Collective
 * (every rank calls it, with its own tokens). On an engine error the pass stops where it was
 * (units may stay gathered): the engine is to be freed. */
zero_status gpt2_engine_micro_batch(gpt2_model *m, zero_engine *e, const int32_t *tokens,
                                    const int32_t *targets, int B, int T, float *loss);
/* Forward only (validation loss of this rank's tokens); collective. */
zero_status gpt2_engine_eval(gpt2_model *m, zero_engine *e, const int32_t *tokens,
                             const int32_t *targets, int B, int T, float *loss);
/* gpt2_generate on the engine's parameters; collective (every rank gets the same tokens). */
zero_status gpt2_engine_generate(gpt2_model *m, zero_engine *e, const int32_t *prompt, int n_prompt,
                                 int n_new, const gpt2_sampling *s, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_MODELS_GPT2_H */
