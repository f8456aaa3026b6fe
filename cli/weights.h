/* cli/weights.h — models and their weights from files, for `zero train`, `sample`, `export`,
 * `estimate` and `plan`: what model a preset, a Hugging Face model directory, a checkpoint or a
 * safetensors file holds, and `--init-from` (its weights into an engine). */
#ifndef ZERO_CLI_WEIGHTS_H
#define ZERO_CLI_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "decoder/decoder.h"
#include "zero/ckpt.h"
#include "zero/zero.h"

/* Where a model description came from. */
typedef enum cli_model_kind {
    CLI_MODEL_PRESET = 0, /* a preset name (random initialization) */
    CLI_MODEL_HF,         /* a Hugging Face model directory: config.json (+ weights) */
    CLI_MODEL_CKPT,       /* a zero checkpoint: the model its run recorded */
    CLI_MODEL_FILE,       /* one safetensors file */
} cli_model_kind;

typedef struct cli_model {
    cli_model_kind kind;
    dec_config cfg;
    char *config_json; /* the config.json the model came with (HF directory, or recorded by a
                          checkpoint or an exported file), malloc'd; NULL: none (a preset) */
    char *source;      /* the Hugging Face directory of the weights and tokenizer files, or NULL */
    char *notes;       /* what config.json asks for that zero does not apply, or NULL */
    char name[512];    /* for messages and summaries: the preset name, or the path */
} cli_model;

void cli_model_free(cli_model *m);
/* 1 when a and b have the same shape (architecture and every size, tied head). */
int cli_model_same_shape(const dec_config *a, const dec_config *b);
/* "LlamaForCausalLM L16 C2048 H32/8 D64 F8192 V128256 ctx131072, tied" */
const char *cli_model_describe(const dec_config *c, char *buf, size_t cap);

/* `--model NAME|DIR` (flag names the flag for messages): a preset or a model directory's
 * config.json. Prints the error and returns its exit status. */
int cli_model_from_name(const char *name, const char *flag, cli_model *out);
/* `--init-from PATH`: a model directory (its config.json), a checkpoint (the model its run
 * recorded), or a safetensors file (its metadata: `zero export`'s config, or GPT-2's n_layer,
 * n_embd, n_head, n_ctx, vocab; else GPT-2's shape from the tensors, with n_head from `heads` or
 * width / 64). heads > 0 overrides a GPT-2 file's head count. A pickle is refused. */
int cli_model_from_path(const char *path, int heads, const char *flag, cli_model *out);
/* Shape flags against a model that came from a file: a flag (> 0) that disagrees is a usage
 * error naming both values. model_name: the --model value, or NULL. */
int cli_model_check_flags(const cli_model *m, const char *model_name, int layers, int dim, int heads, int vocab);

/* Sequences of T tokens on model m (cfg.n_ctx positions). Past them, a model whose weights are
 * loaded (loaded != 0: --init-from) is refused: a usage error naming T, the positions and why
 * they do not grow. One built from its shape may grow n_ctx to T (the caller does, on its copy
 * of m->cfg: m keeps what the source said); when the shape is a model directory's config.json,
 * note (cap bytes; else "") says so, for the caller to print: that file said otherwise. A preset
 * grows without a note (docs/CLI.md: its n_ctx is zero's default). Returns an exit status. */
int cli_model_check_seq(const cli_model *m, int T, int loaded, char *note, size_t cap);

/* Sets every parameter of the model registered on e (after finalize) from `path`: a model
 * directory (dec_hf_load: each rank reads only the ranges it keeps), a safetensors file (ours
 * or Hugging Face's GPT-2 layout: an optional "transformer." prefix; attention-mask buffers and
 * a tied lm_head.weight ignored; F32, BF16 or F16) or a checkpoint directory (its
 * "<unit>/master" tensors, checksums verified first). Every tensor of the model must be there
 * with its exact shape, and nothing else that is a parameter. Every rank calls it; the ranks
 * agree on the outcome (collective on the engine's communicator), and exactly one line is
 * printed on failure. Returns an exit status. */
int cli_init_from(zero_engine *e, const char *path);
/* Sets the parameters of a LoRA run's checkpoint (the adapters, and the base when it was saved
 * with --save-frozen) on an engine registered by dec_lora_register with the run's LoRA record;
 * frozen base tensors the checkpoint does not hold keep the values the caller gave them before
 * (cli_init_from of the base directory, or dec_engine_init of a preset's seed). Collective, one
 * line on failure, as cli_init_from. */
int cli_init_from_lora(zero_engine *e, const char *ckpt);

/* A parameter as a checkpoint's manifest describes it ("units"[].params[]). */
typedef struct cli_ckpt_param {
    const char *name;  /* points into the list's storage */
    const char *unit;  /* the unit's name: its master is the tensor "<unit>/master" */
    uint64_t offset;   /* elements into the tensor that holds it (cli_ckpt_param_tensor) */
    uint64_t numel;
    int ndim;
    int64_t shape[ZERO_ST_MAX_DIMS];
    int frozen;        /* ZERO_PARAM_FROZEN: in "<unit>/frozen" when the checkpoint has it (else absent) */
} cli_ckpt_param;

/* The logical tensor that holds q: "<unit>/master", or "<unit>/frozen" for a frozen parameter. */
const char *cli_ckpt_param_tensor(const cli_ckpt_param *q, char *buf, size_t cap);

typedef struct cli_ckpt_params {
    int n;
    cli_ckpt_param *p;
    void *json; /* unused: the names point into the open checkpoint's manifest */
} cli_ckpt_params;

/* Reads the parameter table of an engine checkpoint (zero_ckpt_engine_manifest, validated at
 * open: every unit's "<unit>/master" exists with the unit's numel; the parameters cover every
 * unit exactly). On failure writes a message into msg and returns ZERO_ERR_FORMAT. The names
 * stay valid while c is open. */
zero_status cli_ckpt_params_read(zero_ckpt *c, cli_ckpt_params *out, char *msg, size_t cap);
void cli_ckpt_params_free(cli_ckpt_params *ps);
/* The model recorded by `zero train` (manifest "user"): its config.json ("model"."config"), or
 * the GPT-2 shape of older checkpoints, and the source directory. -1 when absent or invalid
 * (msg says why). */
int cli_ckpt_model(zero_ckpt *c, cli_model *out, char *msg, size_t cap);
/* Verifies the checksum of every "<unit>/master" and "<unit>/frozen" tensor in every rank file:
 * what export and --init-from read, in pieces that zero_ckpt_read_range would not check. */
zero_status cli_ckpt_verify_masters(zero_ckpt *c, char *msg, size_t cap);

#endif
