/* models/decoder/decoder.h — one decoder-only transformer in plain C, configured like a Hugging
 * Face config.json: GPT-2 (GPT2LMHeadModel) and the Llama family (LlamaForCausalLM,
 * MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM). Configuration, presets, the parameter
 * table (Hugging Face names and layouts), initialization, fp32 forward/backward, sampling.
 *
 * A client of libzero's public API only. Two ways to drive it:
 *  - raw: the caller owns one fp32 buffer per unit (units below) and passes the pointers:
 *      dec_model *m;  dec_create(&m, &cfg, B, T, checkpointing, &err);
 *      dec_forward_backward(m, params, grads, tokens, targets, B, T, 1.0f, 0, &loss, NULL);
 *  - through a zero_engine (dec_engine_* below): the engine owns and shards the parameters; the
 *    model gathers each unit just before it uses it and hands back its gradient.
 *
 * Units (the grain of gathering, reduction and offload), in this order:
 *   0          the embeddings  GPT-2 "embeddings": wte.weight (V, C), wpe.weight (n_ctx, C)
 *                              Llama "embed_tokens": model.embed_tokens.weight (V, C)
 *   1 .. L     decoder layer l GPT-2 "h.{l}", Llama "layers.{l}" (tensors: docs/MODEL.md)
 *   L + 1      the final norm  GPT-2 "ln_f": ln_f.weight, ln_f.bias [, lm_head.weight (V, C)]
 *              and LM head     Llama "norm": model.norm.weight [, lm_head.weight (V, C)]
 * lm_head.weight exists only when the head is not tied to the token embedding. A unit is one
 * flat fp32 buffer: its parameters back to back in registration order, each row-major, with
 * Hugging Face's shapes: GPT-2's Conv1D weights are (in, out), Llama's Linear weights (out, in).
 *
 * Loss: cross-entropy summed over the targets that count (a target of -1 is ignored, like
 * PyTorch's ignore_index) and divided by a denominator the caller gives (0: this micro-batch's
 * own count of targets). Backward ACCUMULATES (+=) d(loss * loss_scale)/d(param) into the
 * gradient buffers it is given; it never overwrites. Results are deterministic: the same inputs
 * give bitwise the same loss and gradients, with and without activation checkpointing.
 */
#ifndef ZERO_MODELS_DECODER_H
#define ZERO_MODELS_DECODER_H

#include <stddef.h>
#include <stdint.h>

#include "zero/zero.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- configuration */
typedef enum dec_arch {
    DEC_ARCH_GPT2 = 0, /* GPT2LMHeadModel: LayerNorm, learned positions, GELU (tanh), biases */
    DEC_ARCH_LLAMA,    /* LlamaForCausalLM: RMSNorm, RoPE, SwiGLU, GQA */
    DEC_ARCH_MISTRAL,  /* MistralForCausalLM: Llama + sliding_window */
    DEC_ARCH_QWEN2,    /* Qwen2ForCausalLM: Llama with q/k/v biases */
    DEC_ARCH_QWEN3,    /* Qwen3ForCausalLM: Llama with per-head q/k RMSNorm */
    DEC_ARCH_GEMMA,    /* GemmaForCausalLM: (1 + w) RMSNorm, GeGLU, embeddings x sqrt(C), tied */
    DEC_ARCH_GEMMA2,   /* Gemma2ForCausalLM: Gemma + sandwich norms, soft-capping, sliding layers */
    DEC_ARCH_GEMMA3,   /* Gemma3ForCausalLM (gemma3_text): Gemma 2 + q/k norms, local RoPE */
    DEC_ARCH_PHI3,     /* Phi3ForCausalLM: Llama with fused qkv_proj and gate_up_proj, LongRoPE */
    DEC_ARCH_COUNT
} dec_arch;

typedef enum dec_rope {
    DEC_ROPE_DEFAULT = 0, /* inv_freq_i = theta^(-2i/D) */
    DEC_ROPE_LINEAR,      /* inv_freq / factor */
    DEC_ROPE_LLAMA3,      /* Llama 3.1's smoothed band scaling */
    DEC_ROPE_LONGROPE,    /* Phi-3's per-pair factors (short or long by sequence length) */
} dec_rope;

/* The most rotated pairs a LongRoPE config lists (head_dim 256 / 2). */
#define DEC_LONGROPE_MAX 128

typedef struct dec_config {
    dec_arch arch;
    int n_layer;       /* L: num_hidden_layers (GPT-2 n_layer) */
    int n_embd;        /* C: hidden_size (n_embd) */
    int n_head;        /* H: num_attention_heads (n_head) */
    int n_kv_head;     /* key/value heads (num_key_value_heads; GPT-2: n_head); divides n_head */
    int head_dim;      /* D: head_dim (GPT-2, and Llama without head_dim: C / H) */
    int n_inner;       /* F: intermediate_size (GPT-2 n_inner, default 4C) */
    int n_ctx;         /* max_position_embeddings (GPT-2 n_positions: the rows of wpe) */
    int vocab;         /* V: vocab_size */
    int tied;          /* tie_word_embeddings: logits = x wte^T, no lm_head.weight */
    int qkv_bias;      /* q/k/v projections have biases (GPT-2, Qwen2, attention_bias) */
    int o_bias;        /* the output projection has a bias (GPT-2, attention_bias) */
    int mlp_bias;      /* the MLP projections have biases (GPT-2, mlp_bias) */
    int qk_norm;       /* Qwen3: RMSNorm over each q and k head before RoPE */
    double norm_eps;   /* layer_norm_epsilon / rms_norm_eps */
    double rope_theta; /* RoPE base (not used by GPT-2) */
    dec_rope rope_type;
    double rope_factor;       /* linear and llama3 */
    double rope_low_freq;     /* llama3 low_freq_factor */
    double rope_high_freq;    /* llama3 high_freq_factor */
    int rope_orig_ctx;        /* llama3 original_max_position_embeddings */
    int sliding_window;       /* 0: none; else the local layers' window (dec_layer_window): query
                               * t sees keys t - sliding_window < j <= t */
    double init_std;          /* initializer_range */
    int has_pad;              /* pad_token_id is set (not GPT-2): transformers' embedding is then */
    int pad_token;            /* nn.Embedding(padding_idx = it), whose row takes no gradient */
    /* Gemma and Phi-3 (0 for the others: the Llama computation) */
    int gemma;                /* (1 + w) RMSNorm gains, GeGLU, embeddings scaled by sqrt(C) */
    int sandwich;             /* Gemma 2/3: post-attention and pre/post-feedforward norms */
    int fused_names;          /* Phi-3: qkv_proj and gate_up_proj tensors */
    double attn_scalar;       /* query_pre_attn_scalar: scale 1/sqrt(it) (0: head_dim) */
    double attn_softcap;      /* attn_logit_softcapping (0: none) */
    double final_softcap;     /* final_logit_softcapping (0: none) */
    int sliding_pattern;      /* Gemma 2/3: layer l is a sliding (local) layer unless
                               * (l + 1) % pattern == 0; 0: every layer global */
    double rope_local_theta;  /* Gemma 3: the local layers' RoPE base (0: rope_theta) */
    int rotary_dim;           /* Phi-3 partial_rotary_factor: rotated dims of a head (0: head_dim) */
    int rope_max_ctx;         /* LongRoPE: max_position_embeddings for the attention factor */
    int rope_n_factors;       /* LongRoPE: the pairs short/long_factor list (rotary_dim / 2) */
    double rope_short[DEC_LONGROPE_MAX], rope_long[DEC_LONGROPE_MAX];
    double rope_attn_factor;  /* LongRoPE's cos/sin scale (attention_factor, or derived) */
} dec_config;

/* "GPT2LMHeadModel", "LlamaForCausalLM", ... (the config.json "architectures" entry). */
const char *dec_arch_name(dec_arch a);
/* The config.json "model_type": "gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2",
 * "gemma3_text", "phi3". */
const char *dec_arch_model_type(dec_arch a);
/* Llama-family layers: RMSNorm, RoPE, SwiGLU, separate q/k/v projections. */
static inline int dec_is_llama(const dec_config *c) { return c->arch != DEC_ARCH_GPT2; }

/* Presets: GPT-2's "tiny" (L2 C64 H4 ctx64 V256, for tests), "small" (L6 C512 H8 ctx512 V256,
 * byte-level), "gpt2" .. "gpt2-xl", and the public shapes of "llama-3.2-1b", "llama-3.2-3b",
 * "llama-3.1-8b", "qwen2.5-0.5b", "qwen2.5-7b", "qwen3-8b", "mistral-7b", "smollm2-135m",
 * "smollm2-1.7b" (docs/MODEL.md). Overrides are plain assignments, then dec_config_check. */
zero_status dec_config_preset(dec_config *cfg, const char *name, zero_error *err);
/* The preset names, NULL-terminated. */
const char *const *dec_preset_names(void);
/* A GPT-2 configuration (the defaults a GPT-2 config.json implies) of the given shape. */
void dec_config_gpt2(dec_config *cfg, int n_layer, int n_embd, int n_head, int n_ctx, int vocab);
/* Checks ranges and consistency (every size >= 1, n_kv_head divides n_head, even head_dim for
 * RoPE, GPT-2's n_embd = n_head * head_dim, sizes that keep every index below 2^62). err names
 * the field, its value and what was expected. */
zero_status dec_config_check(const dec_config *cfg, zero_error *err);
/* Weights read from a file must be finite: a NaN or an infinity (a corrupt or diverged model)
 * would make every step's loss non-finite, each step skipped, and the run "succeed" having trained
 * nothing. ZERO_OK, or ZERO_ERR_FORMAT with err naming the file, the tensor and the element (x
 * holds elements [first, first + n) of it). */
zero_status dec_check_finite(const float *x, size_t n, uint64_t first, const char *file, const char *tensor,
                              zero_error *err);
/* Checks that sequences of T tokens are allowed: T <= n_ctx, and, for Qwen2/Qwen3 with
 * use_sliding_window (whose windowed layers zero does not compute yet), T <= sliding_window. */
zero_status dec_config_check_seq(const dec_config *cfg, int T, zero_error *err);
/* The attention window of layer l, as transformers applies it: sliding_window on every layer of
 * Mistral and Phi-3, on Gemma 2/3's local layers (sliding_pattern), 0 (none) elsewhere — and on
 * Qwen2/Qwen3, whose windowed layers are not computed (dec_config_check_seq refuses a sequence
 * longer than their window, so none masks anything). */
int dec_layer_window(const dec_config *cfg, int l);
/* 1 when a and b describe the same computation (every field equal). */
int dec_config_equal(const dec_config *a, const dec_config *b);

/* config.json (text) -> configuration. Refuses, naming the field and its value, any
 * architecture or setting the decoder does not compute exactly (docs/MODEL.md lists them).
 * *notes (optional, malloc'd or NULL) receives what is accepted but not applied (dropout). */
zero_status dec_config_from_json(dec_config *cfg, const char *json, char **notes, zero_error *err);
/* A config.json for cfg (malloc'd text). base: the imported config.json text to update (its
 * other fields kept), or NULL for a fresh one. dtype: "float32", "bfloat16" or "float16" (its
 * torch_dtype), or NULL to leave it. */
char *dec_config_to_json(const dec_config *cfg, const char *base, const char *dtype);

/* Total parameters (the tied head counted once). */
uint64_t dec_num_params(const dec_config *cfg);
/* Bytes of the activation and scratch buffers dec_create allocates for micro-batch B and
 * sequence length T, with or without activation checkpointing (the planner's figure; equal to
 * what dec_activation_bytes_allocated reports for a model created with the same arguments). */
uint64_t dec_activation_bytes(const dec_config *cfg, int B, int T, int checkpointing);

/* Model FLOPs of one micro-batch of B sequences of T tokens, forward and backward: 3 x the
 * forward's, which is 2 per multiply-add of every linear layer and of the LM head over the B*T
 * rows, plus the causal attention's q k^T and p v (4 B H D per query-key pair a layer sees: T (T + 1)
 * / 2 pairs, or W (W + 1) / 2 + (T - W) W within a sliding window W < T). The convention of model
 * FLOP utilization: recomputation (checkpointing) and the optimizer are not counted. */
double dec_step_flops(const dec_config *cfg, int B, int T);
/* The rate of the BLAS on this model's products (FLOP/s): every linear layer's forward, backward-
 * data and backward-weight product of one layer and the LM head's (in the model's row chunks),
 * at B*T rows, on the calling thread's OpenMP team; after one round not counted (page faults,
 * the BLAS's warm-up), the best of at least 3 rounds run for about `seconds`.
 * `products` ZERO_DTYPE_BF16: bf16 products (mk_gemm_bf16 on operands rounded to bf16 once,
 * before the timing: the GEMM's own rate, which the model's rounding of its operands at every
 * product falls short of) where dec_set_matmul_dtype takes them, else fp32. The denominator of
 * zero bench step's model FLOP utilization. ZERO_ERR_NOMEM when the operands cannot be allocated. */
zero_status dec_gemm_rate(const dec_config *cfg, int B, int T, double seconds, zero_dtype products,
                          double *flops_per_s);

/* ---------------------------------------------------------------- units and parameters */
enum { DEC_UNIT_EMBEDDINGS = 0 }; /* layer l is unit 1 + l, the final unit is n_layer + 1 */

int dec_num_units(const dec_config *cfg); /* n_layer + 2 */
/* Writes the unit's name into buf; returns buf ("" if invalid). */
const char *dec_unit_name(const dec_config *cfg, int unit, char *buf, size_t cap);
uint64_t dec_unit_numel(const dec_config *cfg, int unit); /* 0 for an invalid unit */
/* Offset of the unit in the "all units back to back" flat layout (sum of the earlier units). */
uint64_t dec_unit_offset(const dec_config *cfg, int unit);

typedef struct dec_param_desc {
    char name[80];   /* HF name: "wte.weight", "model.layers.0.self_attn.q_proj.weight" */
    int unit;
    uint64_t offset; /* in elements, inside the unit */
    uint64_t numel;
    int ndim;        /* 1 or 2 */
    int64_t shape[2];
    unsigned flags;  /* ZERO_PARAM_NO_DECAY for biases and norm gains */
} dec_param_desc;

int dec_num_tensors(const dec_config *cfg);
/* Describes tensor `index` (0 .. num_tensors-1, registration order). */
zero_status dec_tensor_desc(const dec_config *cfg, int index, dec_param_desc *out);

/* Initialization of one unit into dst (unit numel values). GPT-2: weights N(0, 0.02), the two
 * c_proj weights N(0, 0.02/sqrt(2L)); Llama family: every weight N(0, initializer_range).
 * Biases 0, norm gains 1. The normals come from the model's own generator (docs/MODEL.md: one
 * stream per (seed, unit)), so every rank computes the same values and a unit can be
 * initialized without the others. */
void dec_init_unit(const dec_config *cfg, int unit, uint64_t seed, float *dst);

/* ---------------------------------------------------------------- the model */
typedef struct dec_model dec_model;

/* Allocates the activation and scratch buffers for micro-batches of up to B sequences of up to
 * T tokens (dec_config_check_seq). With checkpointing only each layer's input is kept in forward
 * and the layer's forward is recomputed in backward. The buffers are accounted as
 * ZERO_MEM_BUFFERS in the model's own zero_mem_stats (dec_mem_stats). */
zero_status dec_create(dec_model **out, const dec_config *cfg, int B, int T, int checkpointing,
                       zero_error *err);
void dec_free(dec_model *m); /* NULL is a no-op */
const char *dec_last_error(const dec_model *m);
const dec_config *dec_model_config(const dec_model *m);
size_t dec_activation_bytes_allocated(const dec_model *m);
void dec_mem_stats(const dec_model *m, zero_mem_stats *out);
/* The precision of the linear layers' products (every projection and the LM head):
 * ZERO_DTYPE_FP32 (the default) or ZERO_DTYPE_BF16 — both operands rounded to bf16, products
 * accumulated in fp32 — which is taken only where the CPU multiplies bf16 itself (AVX512-BF16 or
 * AMX, in a build with oneDNN: mk_gemm_bf16_native); elsewhere bf16 falls back to the fp32
 * products (for bf16 working parameters, which the pass receives widened exactly, that is the
 * convert-then-sgemm result). FP16 asks for fp32 products. Returns the dtype now in effect.
 * dec_engine_* set it from the engine's working precision on every call. */
zero_dtype dec_set_matmul_dtype(dec_model *m, zero_dtype want);
/* Threads of every BLAS call of every model (process-wide): 0 (default) the BLAS's choice, n > 0
 * exactly n. The BLAS gives the same bits for the same shapes and thread count only; the model's
 * own kernels for any thread count: with a fixed n a sequence's loss and gradient are the same
 * bits whatever the thread count of the rank (zero train --deterministic sets 1). */
void dec_set_blas_threads(int n);
/* What the models compute with in this process, for reports (zero --version --verbose): the BLAS
 * and its core (mk_blas_name), the core to name in $OPENBLAS_CORETYPE where the one in use leaves
 * AVX-512 unused (NULL where it does not: mk_blas_core_better), the path of bf16 products
 * (mk_gemm_bf16_path_name) and the element-wise kernels' instruction set (zero_impl_best). */
typedef struct dec_compute_info {
    const char *blas, *blas_core_better, *bf16_products, *kernels;
} dec_compute_info;
void dec_compute_info_get(dec_compute_info *out);

/* Packed examples: doc (B*T values, or NULL) gives each token's document as the index of the
 * document's first token in its sequence (doc[b*T] = 0; each next value repeats the one before or
 * is its own position). The passes that follow (forward, backward, on raw buffers or the engine;
 * not sampling) attend within each document only and restart positions at each document's start
 * (RoPE and GPT-2's learned positions): a document computes what it computes alone in a sequence
 * of its own. The pointer is read at each pass, until set again (NULL: each sequence is one
 * document); a doc that breaks the rule is ZERO_ERR_INVALID_ARG at the pass, naming the position. */
void dec_set_docs(dec_model *m, const int32_t *doc);

/* Weighted sequences (preference objectives, docs/MODEL.md "Preference tuning"): w (B values, or
 * NULL: all 1) multiplies each sequence's summed cross-entropy in the passes that follow (not
 * sampling): the loss is sum_b w[b] * (its counted targets' cross-entropy) / denom and the
 * gradients follow (a negative weight pushes the sequence's likelihood down). Read at each pass
 * until set again; a weight that is not finite is ZERO_ERR_INVALID_ARG at the pass. */
void dec_set_seq_weights(dec_model *m, const float *w);
/* After a pass with targets: out[b] = the summed cross-entropy of sequence b's counted targets
 * (minus its log-likelihood), unweighted, for the pass's B sequences of T tokens. */
zero_status dec_seq_losses(const dec_model *m, int B, int T, double *out);

/* One micro-batch, forward and backward, on raw unit buffers. params[u] / grads[u] point to unit
 * u's numel floats. tokens: B*T values in [0, V); targets: B*T values in [0, V) or -1 (not
 * counted), row-major (sequence b, position t). denom: the loss is (sum of the counted targets'
 * cross-entropy) / denom; denom <= 0 means this micro-batch's count of counted targets (its
 * mean; 0 when none counts). Writes the loss to *loss; adds d(loss * loss_scale)/d(param) into
 * grads; logits (optional, B*T*V) receives the logits. Errors: bad sizes or tokens
 * (ZERO_ERR_INVALID_ARG, nothing touched). */
zero_status dec_forward_backward(dec_model *m, const float *const *params, float *const *grads,
                                 const int32_t *tokens, const int32_t *targets, int B, int T,
                                 float loss_scale, double denom, float *loss, float *logits);
/* Forward only: *loss when targets is not NULL (loss may be NULL otherwise), logits optional. */
zero_status dec_forward(dec_model *m, const float *const *params, const int32_t *tokens,
                        const int32_t *targets, int B, int T, double denom, float *loss, float *logits);
/* Targets that count (not -1) among n. */
int64_t dec_count_targets(const int32_t *targets, size_t n);

/* Sampling: temperature <= 0 picks the most likely token (greedy); top_k > 0 keeps the k most
 * likely tokens. The generator is seeded by `seed` only, so every rank draws the same tokens. */
typedef struct dec_sampling {
    float temperature; /* 1.0 */
    int top_k;         /* 0: off */
    uint64_t seed;
} dec_sampling;

/* Appends n_new token ids to the prompt (n_prompt >= 1 ids in [0, V)), writing them to out.
 * The context is the last T tokens (the T the model was created with); no KV cache. Logits that
 * are not finite are ZERO_ERR_FORMAT, the model's message naming the unit where the forward
 * overflowed (as dec_engine_locate_overflow), instead of a token drawn from them. */
zero_status dec_generate(dec_model *m, const float *const *params, const int32_t *prompt,
                         int n_prompt, int n_new, const dec_sampling *s, int32_t *out);

/* ---------------------------------------------------------------- on a zero_engine */
/* Registers the units and tensors (names, shapes, flags) on e, before zero_engine_finalize.
 * Unit ids are those above (the engine must be empty: the first unit added gets id 0). */
zero_status dec_engine_register(const dec_config *cfg, zero_engine *e, zero_error *err);
/* Sets every unit to dec_init_unit(seed) with zero_engine_set_unit (after finalize; every rank
 * passes the same seed); a unit with LoRA adapters appended gets its base part through
 * zero_engine_set_unit_range (dec_lora_init sets the adapters). */
zero_status dec_engine_init(const dec_config *cfg, zero_engine *e, uint64_t seed, zero_error *err);
/* One micro-batch on the engine (docs/MODEL.md lists the exact gather/release order). The loss
 * gradient is scaled by zero_engine_loss_scale(e). denom: the counted targets of the whole
 * global batch (every rank's every micro-batch of the step), so that the step's update is that
 * of the mean over the global batch's counted targets, whatever the number of ranks; <= 0: this
 * micro-batch's own count (each micro-batch's mean, then averaged by the engine). *loss is this
 * micro-batch's share scaled so that its mean over the ranks and micro-batches of the step is
 * the step's loss (with denom <= 0: the micro-batch's mean). Collective (every rank calls it,
 * with its own tokens). On an engine error the pass stops where it was: free the engine. */
zero_status dec_engine_micro_batch(dec_model *m, zero_engine *e, const int32_t *tokens,
                                   const int32_t *targets, int B, int T, double denom, float *loss);
/* Forward only (validation loss of this rank's tokens, the micro-batch's mean); collective. */
zero_status dec_engine_eval(dec_model *m, zero_engine *e, const int32_t *tokens,
                            const int32_t *targets, int B, int T, float *loss);
/* Where the forward pass of these tokens stops being finite: ZERO_OK when the output of every
 * unit (the embeddings, each layer, the final norm, the LM head's logits) is finite; else
 * ZERO_ERR_FORMAT, err naming the first that is not (`layer 0 outputs +inf from a finite input
 * (largest magnitude 4.9); the largest weight it reads is 'h.0.mlp.c_fc.weight' (magnitude
 * 3e+38)`). For a loss that came out NaN: finite weights whose forward overflows (a model that
 * cannot be trained or sampled) are told from a diverged step. A forward pass plus a scan of each
 * unit's output; collective, as dec_engine_eval. Other errors as dec_engine_eval's. */
zero_status dec_engine_locate_overflow(dec_model *m, zero_engine *e, const int32_t *tokens, int B, int T,
                                       zero_error *err);
/* dec_generate on the engine's parameters; collective (every rank gets the same tokens). */
zero_status dec_engine_generate(dec_model *m, zero_engine *e, const int32_t *prompt, int n_prompt,
                                int n_new, const dec_sampling *s, int32_t *out);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_MODELS_DECODER_H */
