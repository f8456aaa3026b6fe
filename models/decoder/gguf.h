/* models/decoder/gguf.h — the decoder as llama.cpp reads it: which GGUF tensors a model has, where
 * each comes from (the parameter's name, and the row order or transposition llama.cpp's layout
 * needs), and the metadata that describes the model and its tokenizer (docs/CHECKPOINT.md, "GGUF").
 * The bytes are written by zero/gguf.h; `zero export --format gguf` streams the parameters through
 * this plan.
 *
 * Covered: Llama (LlamaForCausalLM: Llama 2/3, SmolLM, TinyLlama), Mistral without a sliding window
 * shorter than the context, Qwen2, Qwen3 and GPT-2; tokenizers that are byte-level BPE of a family
 * llama.cpp names (Llama 3 "llama-bpe", Qwen2 "qwen2", SmolLM "smollm", GPT-2 "gpt-2"). Anything
 * else is ZERO_ERR_UNSUPPORTED naming what ("... is not supported yet").
 */
#ifndef ZERO_MODELS_DECODER_GGUF_H
#define ZERO_MODELS_DECODER_GGUF_H

#include <stdint.h>

#include "decoder/decoder.h"
#include "zero/gguf.h"
#include "zero/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dec_gguf_order {
    DEC_GGUF_ROWS = 0,  /* the parameter as it is */
    DEC_GGUF_ROPE_PERM, /* q or k of the llama architecture: within each of `heads` heads, rows
                         * [0, 2, 4, ..., 1, 3, 5, ...] (transformers' rotate-half layout back to
                         * the interleaved pairs llama.cpp's rotation reads) */
    DEC_GGUF_TRANSPOSE, /* GPT-2's Conv1D weights: (in, out) stored as (out, in) */
    DEC_GGUF_VALUES,    /* computed here (rope_freqs): `values` */
} dec_gguf_order;

typedef struct dec_gguf_tensor {
    char name[64];      /* the GGUF name: "blk.0.attn_q.weight" */
    char src[128];      /* the parameter it comes from ("model.layers.0.self_attn.q_proj.weight") */
    int64_t rows, cols; /* as GGUF stores it, outermost first: (rows, cols); a vector is (1, n) */
    int ndim;           /* 1: a vector (norms, biases, rope_freqs) kept in F32; 2: a matrix */
    dec_gguf_order order;
    int heads;           /* DEC_GGUF_ROPE_PERM */
    const float *values; /* DEC_GGUF_VALUES: rows * cols values (owned by the plan) */
} dec_gguf_tensor;

typedef struct dec_gguf_plan {
    const char *arch; /* general.architecture: "llama", "qwen2", "qwen3", "gpt2" */
    dec_gguf_tensor *t;
    int n;
    float *values; /* rope_freqs' values */
} dec_gguf_plan;

/* The tensors of a model: ZERO_ERR_UNSUPPORTED (err naming the architecture or the feature) for a
 * model llama.cpp's architecture would compute differently. */
zero_status dec_gguf_plan_make(const dec_config *c, dec_gguf_plan *out, zero_error *err);
void dec_gguf_plan_free(dec_gguf_plan *p);
/* Source row of GGUF row r of a DEC_GGUF_ROPE_PERM tensor of `rows` rows over `heads` heads. */
int64_t dec_gguf_perm_row(int64_t r, int64_t rows, int heads);

/* The metadata of the model and its tokenizer into w (before its tensors): general.* (name,
 * file_type, quantization_version), the architecture's hyperparameters, and tokenizer.ggml.*
 * (model "gpt2", pre, tokens as tokenizer.json spells them with [PAD<id>] for the ids past the
 * tokenizer, token types, merges, BOS/EOS/padding ids, add_bos_token) and tokenizer.chat_template, taken
 * from tok (NULL: ZERO_ERR_INVALID_ARG: a GGUF without its tokenizer does not run). */
zero_status dec_gguf_metadata(const dec_config *c, const dec_gguf_plan *p, zero_tokenizer *tok, const char *name,
                              uint32_t file_type, zero_gguf_writer *w, zero_error *err);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_MODELS_DECODER_GGUF_H */
