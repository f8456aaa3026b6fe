/* cli/sample_lora.h — `zero sample` of a LoRA model: a LoRA run's checkpoint (its base from the
 * checkpoint, the recorded base directory or a preset's seed, then its adapters) or a base with a
 * PEFT adapter directory (--lora-from), the adapters applied by the pass as training applies them. */
#ifndef ZERO_CLI_SAMPLE_LORA_H
#define ZERO_CLI_SAMPLE_LORA_H

#include "decoder/lora.h"
#include "weights.h"

typedef struct sample_lora {
    int on;              /* 0: no adapters (a plain model; base must have been NULL) */
    dec_lora l;          /* the adapters' settings, from the checkpoint or adapter_config.json */
    const char *ckpt;    /* the LoRA run's checkpoint (its adapters), or NULL */
    const char *adapter; /* the PEFT adapter directory, or NULL */
    char base[4096];     /* what cli_init_from reads first ("": the checkpoint holds it, or a preset) */
    int preset;          /* the base is a preset's random model of seed `seed` */
    uint64_t seed;
} sample_lora;

/* Decides where the weights come from for the model `model` (src, from cli_model_from_path),
 * `base` (--init-from beside --resume: a LoRA checkpoint's base, else NULL) and `lora_from`
 * (--lora-from, else NULL). A base given where none is read, a base that is not the run's, or
 * --lora-from on a LoRA checkpoint: the error printed, its exit status returned. */
int sample_lora_prepare(const cli_model *src, const char *model, const char *base, const char *lora_from,
                        sample_lora *out);
/* Registers the model on e (after it: zero_engine_finalize), with the adapters when x->on. */
zero_status sample_lora_register(const sample_lora *x, const dec_config *cfg, zero_engine *e, zero_error *err);
/* Sets every parameter of the registered, finalized engine: the base, then the adapters (when
 * x->on; else cli_init_from(model)). Prints the error and returns its exit status. */
int sample_lora_load(const sample_lora *x, const dec_config *cfg, zero_engine *e, const char *model);

#endif /* ZERO_CLI_SAMPLE_LORA_H */
