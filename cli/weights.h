/* cli/weights.h — model weights from files: `--init-from` (a consolidated safetensors file with
 * Hugging Face GPT-2 names, or a checkpoint) into an engine, for `zero train` and `zero sample`. */
#ifndef ZERO_CLI_WEIGHTS_H
#define ZERO_CLI_WEIGHTS_H

#include <stddef.h>
#include <stdint.h>

#include "gpt2/gpt2.h"
#include "zero/ckpt.h"
#include "zero/zero.h"

/* Sets every parameter of the model registered on e (after finalize) from `path`: a safetensors
 * file (ours or Hugging Face's GPT-2: an optional "transformer." prefix; "h.N.attn.bias",
 * "h.N.attn.masked_bias" and the tied "lm_head.weight" are ignored; F32, BF16 or F16) or a
 * checkpoint directory (its "<unit>/master" tensors, checksums verified first). Every tensor of
 * the model must be there with its exact shape, and the file may hold no other parameter. One
 * tensor at a time: memory is the largest tensor in fp32 plus 1 MiB. Every rank calls it; the
 * ranks agree on the outcome (collective on the engine's communicator), and exactly one line is
 * printed on failure. Returns an exit status. */
int cli_init_from(zero_engine *e, const gpt2_config *m, const char *path);

/* The GPT-2 shape of the model in `path`: a checkpoint's record of its run (user.model), or a
 * safetensors file's metadata (n_layer, n_embd, n_head, n_ctx, vocab), or else inferred from the
 * tensors: n_layer from the h.N blocks, vocab and n_embd from wte, n_ctx from wpe, n_head from
 * `heads` (> 0), else n_embd / 64 (GPT-2's head width). heads > 0 always overrides the file's.
 * Prints the error and returns its exit status (2: no such file; 1: unreadable or no shape). */
int cli_weights_shape(const char *path, int heads, gpt2_config *out);

/* A parameter as a checkpoint's manifest describes it ("units"[].params[]). */
typedef struct cli_ckpt_param {
    const char *name;  /* points into the list's storage */
    const char *unit;  /* the unit's name: its master is the tensor "<unit>/master" */
    uint64_t offset;   /* elements into the unit */
    uint64_t numel;
    int ndim;
    int64_t shape[ZERO_ST_MAX_DIMS];
} cli_ckpt_param;

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
/* The run's model shape recorded by `zero train` (manifest "user"."model"); -1 when absent. */
int cli_ckpt_model(zero_ckpt *c, gpt2_config *out);
/* Verifies the checksum of every "<unit>/master" tensor in every rank file: what export and
 * --init-from read, in pieces that zero_ckpt_read_range would not check. */
zero_status cli_ckpt_verify_masters(zero_ckpt *c, char *msg, size_t cap);

#endif
