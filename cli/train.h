/* cli/train.h — `zero train`'s options and its two phases: prepare (every check that needs no
 * MPI, so usage errors exit 2 before any launch) and run (on the communicator). */
#ifndef ZERO_CLI_TRAIN_H
#define ZERO_CLI_TRAIN_H

#include <stdint.h>

#include "decoder/data.h"
#include "decoder/decoder.h"
#include "weights.h"
#include "zero/zero.h"

typedef struct train_opts {
    const char *config, *model, *data, *precision, *log_json;
    const char *offload_optimizer, *offload_param, *save, *resume, *init_from, *trace;
    const char *chat_template; /* --chat-template NAME, or NULL */
    int ranks, stage, micro_batch, grad_accum, seq, checkpointing, val_batches, skip_bad;
    int layers, dim, heads, vocab, model_given;
    int64_t steps, val_every, save_every;
    double lr;
    uint64_t seed;

    /* filled by train_prepare */
    zero_config cfg;
    cli_model src;        /* the model: configuration and where it came from */
    dec_config model_cfg; /* src.cfg, with n_ctx grown to --seq when training from scratch */
    int T;
    zero_chat_format chat;   /* --chat-template's format (NONE: from the tokenizer) */
    zero_tokenizer *tok;     /* the model's tokenizer when the data is text or JSONL, else NULL */
    char tokdir[1024];       /* where it came from */
    dec_data *dataset;
} train_opts;

/* Builds the config (defaults < JSON < flags) and resolves it for `world` ranks (0: not known
 * yet, skip what needs it), the model configuration, and opens and checks the data (text and
 * JSONL through the model directory's tokenizer). Returns an exit status (CLI_OK, or the error
 * already printed). */
int train_prepare(train_opts *o, int world);
/* --resume: takes the model, sequence length and seed from the checkpoint's record of the run
 * (an explicit, different --model/--layers/--dim/--heads/--vocab/--seq is an error). */
int train_resume_settings(train_opts *o);
/* The JSON object a checkpoint keeps of this run (malloc'd), or NULL when out of memory. */
char *train_user_json(const train_opts *o, int world);
/* Frees what train_prepare opened (the data, the tokenizer, the model description). */
void train_release(train_opts *o);
/* Trains on the MPI world (mpi != 0) or one rank; returns the exit status. */
int train_run(train_opts *o, int mpi);

#endif
