/* cli/export_lora.h — `zero export` of a LoRA run's checkpoint: --adapter (PEFT's adapter
 * directory) and --merge (the full model, W + s·B·A folded into every targeted weight, its base
 * read from the checkpoint when saved with --save-frozen, else from the base directory the run
 * recorded or --base, which must be that base). */
#ifndef ZERO_CLI_EXPORT_LORA_H
#define ZERO_CLI_EXPORT_LORA_H

#include "weights.h"

typedef struct lora_export lora_export;

/* *out = NULL and CLI_OK for a checkpoint without frozen parameters and neither flag. Errors
 * (printed): a flag on a checkpoint that is not of a LoRA run, a LoRA checkpoint without a flag,
 * both flags, a base that is missing or not the run's. */
int export_lora_open(zero_ckpt *c, const cli_ckpt_params *ps, const cli_model *m, int adapter, int merge,
                     const char *base, lora_export **out);
void export_lora_free(lora_export *x);
int export_lora_adapter(const lora_export *x); /* 1: --adapter */
/* alpha as llama.cpp's adapters give it, whose scale is alpha / r: the run's scale times r (rsLoRA's
 * alpha / sqrt(r) included). */
double export_lora_alpha_for_scale_over_r(const lora_export *x);
/* The base model directory the run recorded (or --base gave); NULL when none. */
const char *export_lora_base_dir(const lora_export *x);
/* The parameters the export writes (the adapters, or the base's), into out (storage shared with ps). */
int export_lora_params(const lora_export *x, const cli_ckpt_params *ps, cli_ckpt_params *out);
/* The name a parameter gets in the output: PEFT's key of an adapter; NULL: the caller's rule. */
const char *export_lora_name(const lora_export *x, const char *name, char *buf, size_t cap);
/* Elements [at, at + n) of parameter q as written: an adapter's master, or a base tensor with
 * its adapters merged. Prints the error and returns CLI_RUNTIME on failure. */
int export_lora_read(lora_export *x, zero_ckpt *c, const cli_ckpt_param *q, uint64_t at, uint64_t n, float *buf);
/* dir/adapter_config.json. */
int export_lora_write_config(const lora_export *x, const char *dir);

#endif
