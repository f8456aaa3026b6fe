/* models/decoder/peft.h — PEFT's LoRA adapter directories in and out: adapter_config.json (r,
 * lora_alpha, target_modules, lora_dropout, use_rslora; anything zero does not compute refused,
 * naming the field) and adapter_model.safetensors (keys "base_model.model.<module>.lora_A.weight"
 * and ".lora_B.weight", <module> the Hugging Face module: "model.layers.3.self_attn.q_proj",
 * GPT-2 "transformer.h.3.attn.c_attn"), as peft.PeftModel.save_pretrained writes and
 * from_pretrained reads them. */
#ifndef ZERO_MODELS_DECODER_PEFT_H
#define ZERO_MODELS_DECODER_PEFT_H

#include "decoder/lora.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads dir/adapter_config.json for a base of configuration cfg into *out (seed left 0).
 * Refuses (ZERO_ERR_INVALID_ARG, or ZERO_ERR_IO / ZERO_ERR_FORMAT for a missing or broken file)
 * peft_type other than LORA, a target module the decoder does not have, target_modules as a
 * regular expression, bias other than "none", use_dora, modules_to_save, layers_to_transform,
 * rank_pattern / alpha_pattern, layer_replication, trainable_token_indices, target_parameters
 * and lora_bias, each naming the field and its value. */
zero_status dec_peft_read_config(const char *dir, const dec_config *cfg, dec_lora *out, zero_error *err);
/* Sets every adapter of the engine (registered by dec_lora_register with l) from
 * dir/adapter_model.safetensors: each must be there under its PEFT key with its shape (F32, BF16
 * or F16); a tensor that is not one of them is refused (another adapter or base). Every rank
 * reads the whole file (adapters are small); not collective. */
zero_status dec_peft_load(const char *dir, const dec_config *cfg, const dec_lora *l, zero_engine *e, zero_error *err);
/* PEFT's key of an adapter tensor named `name` (dec_lora_tensor_desc's). */
const char *dec_peft_key(const dec_config *cfg, const char *name, char *buf, size_t cap);
/* adapter_config.json's text for l (malloc'd): PEFT's LoraConfig fields, base_model_name_or_path
 * = base (may be NULL), fan_in_fan_out for GPT-2's Conv1D. */
char *dec_peft_config_json(const dec_config *cfg, const dec_lora *l, const char *base);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_MODELS_DECODER_PEFT_H */
