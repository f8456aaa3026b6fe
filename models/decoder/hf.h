/* models/decoder/hf.h — Hugging Face model directories in: config.json plus model.safetensors, or
 * the sharded form (model-0000k-of-0000n.safetensors + model.safetensors.index.json), with F32,
 * BF16 or F16 tensors, streamed into an engine so that each rank reads only what it keeps.
 *
 *   dec_hf *h;  dec_hf_open(&h, "Llama-3.2-1B", &err);       // config.json + every file's header
 *   dec_engine_register(dec_hf_config(h), e, &err);  zero_engine_finalize(e);
 *   dec_hf_load(h, e, &err);                                  // the weights, tensor by tensor
 *   dec_hf_close(h);
 *
 * Tensor names are Hugging Face's: the decoder's own (docs/MODEL.md), and for GPT-2 also with the
 * "transformer." prefix GPT2LMHeadModel saves. Tensors that are not parameters are skipped:
 * GPT-2's attn.bias / attn.masked_bias buffers, rotary_emb.inv_freq buffers, and lm_head.weight
 * of a model whose head is tied (when it equals the embeddings; refused otherwise). Any other
 * tensor, a missing one, or a shape that differs from the configuration's is refused with a
 * message naming the tensor, the file and both shapes; so are a tensor in two files (or GPT-2's
 * "transformer.X" beside "X") and an index that disagrees with its shards.
 * pytorch_model.bin (a pickle) is refused with a message that says how to convert it. */
#ifndef ZERO_MODELS_DECODER_HF_H
#define ZERO_MODELS_DECODER_HF_H

#include "decoder/decoder.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dec_hf dec_hf;

/* 1 when dir is a directory with a config.json (a model directory, not a checkpoint). */
int dec_hf_is_dir(const char *dir);
/* 1 when the file at path starts like a PyTorch pickle (.bin/.pt: a zip archive or a pickle
 * stream), which zero refuses to read. */
int dec_hf_is_pickle(const char *path);
/* The message for a pickle at `what` (a file or a directory holding pytorch_model.bin). */
void dec_hf_pickle_error(zero_error *err, const char *what);

/* Reads dir/config.json only (dec_config_from_json): for sizing a model without its weights.
 * json (optional): the file's text (malloc'd); notes (optional): as dec_config_from_json. */
zero_status dec_hf_read_config(const char *dir, dec_config *cfg, char **json, char **notes, zero_error *err);

/* What a model directory's JSON files may be (docs/SECURITY.md), refused past these before they
 * are parsed: config.json (published ones: a few KB), model.safetensors.index.json (DeepSeek-V3's,
 * 91k tensors: 9 MB), and the weight files an index may name. */
#define DEC_HF_CONFIG_MAX_BYTES (UINT64_C(4) << 20)
#define DEC_HF_CONFIG_MAX_VALUES (UINT64_C(1) << 18)
#define DEC_HF_INDEX_MAX_BYTES (UINT64_C(64) << 20)
#define DEC_HF_INDEX_MAX_VALUES (UINT64_C(1) << 19)
#define DEC_HF_MAX_FILES 4096

/* The distinct weight files a model.safetensors.index.json (text, len bytes) names in its
 * weight_map, in order of first appearance: *names (malloc'd, n of them; free with
 * dec_hf_names_free). Each is a plain file name inside dir (zero_path_in_dir: no '/', no '..',
 * no symbolic link leading out of dir). `what` names the file in messages. ZERO_ERR_FORMAT
 * naming the entry otherwise. */
zero_status dec_hf_index_files(const char *dir, const char *what, const char *text, size_t len, char ***names,
                               int *n, zero_error *err);
void dec_hf_names_free(char **names, int n);

/* Opens a model directory: config.json and the header of every weight file (no tensor data).
 * Errors: no config.json or no weights (ZERO_ERR_IO naming what is missing), a pickle
 * (ZERO_ERR_FORMAT with the conversion advice), a corrupt file or index (ZERO_ERR_FORMAT), a
 * configuration the decoder does not compute (ZERO_ERR_INVALID_ARG naming the field). */
zero_status dec_hf_open(dec_hf **out, const char *dir, zero_error *err);
void dec_hf_close(dec_hf *h); /* NULL is a no-op */
const dec_config *dec_hf_config(const dec_hf *h);
const char *dec_hf_config_json(const dec_hf *h); /* config.json's text */
const char *dec_hf_notes(const dec_hf *h);       /* what is accepted but not applied, or NULL */
/* The stored dtype: config.json's torch_dtype (or dtype), else the first weight's, as
 * "float32", "bfloat16" or "float16"; NULL when neither says. */
const char *dec_hf_dtype(const dec_hf *h);
int dec_hf_num_files(const dec_hf *h);

/* Sets every parameter of the engine (registered with dec_engine_register from this directory's
 * configuration, finalized) from the files. Each rank reads only the element ranges its stage
 * keeps (stage 3: its shard of every unit; stages 0-2: every element), 1 Mi elements at a time:
 * memory is 6 MiB of buffers whatever the model's size. Checksums written by zero are verified
 * on tensors read whole. Not collective: the ranks should agree on the outcome afterwards. */
zero_status dec_hf_load(dec_hf *h, zero_engine *e, zero_error *err);

/* A cheap identity of the model in the directory (what a LoRA run's checkpoint records of its
 * base, to refuse another base on resume): FNV-1a 64 over config.json's bytes and, for every
 * tensor of every weight file in order, its name, dtype, shape, byte count and first and last
 * DEC_HF_FINGERPRINT_BYTES bytes (all of a smaller tensor): a few KiB read per tensor whatever
 * the model's size. out: "fnv1a64:" and 16 hex digits. */
#define DEC_HF_FINGERPRINT_BYTES 4096
zero_status dec_hf_fingerprint(dec_hf *h, char *out, size_t cap, zero_error *err);
/* Elements [lo, hi) of the tensor of parameter `name` (the decoder's name; GPT-2's body also
 * under "transformer.") as fp32 (from F32, BF16 or F16). */
zero_status dec_hf_read(dec_hf *h, const char *name, uint64_t lo, uint64_t hi, float *dst, zero_error *err);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_MODELS_DECODER_HF_H */
