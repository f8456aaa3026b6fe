/* cli/train.h — `zero train`'s options and its two phases: prepare (every check that needs no
 * MPI, so usage errors exit 2 before any launch) and run (on the communicator). */
#ifndef ZERO_CLI_TRAIN_H
#define ZERO_CLI_TRAIN_H

#include <stdint.h>

#include "cli.h"
#include "decoder/data.h"
#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "decoder/pref.h"
#include "run_ux.h"
#include "weights.h"
#include "zero/zero.h"

typedef struct train_opts {
    const char *config, *model, *data, *precision, *log_json;
    const char *val_data; /* --val-data FILE|DIR: validation on it instead of --data's held-out split */
    const char *offload_optimizer, *offload_param, *save, *resume, *init_from, *trace;
    const char *chat_template; /* --chat-template NAME, or NULL */
    const char *tensorboard;   /* --tensorboard DIR, or NULL (then the config's tensorboard section) */
    int ranks, stage, micro_batch, grad_accum, seq, checkpointing, val_batches, skip_bad;
    const char *hostfile;               /* --hostfile FILE: the launcher's hosts (cli/launch_elastic.c) */
    const char *elastic;                /* --elastic MIN:MAX as given, or NULL */
    int elastic_min, elastic_max;       /* its hosts */
    int max_restarts;                   /* --max-restarts (-1: not given) */
    int elastic_restart, elastic_world; /* in a rank of an elastic restart: its number and the world before */
    int deterministic; /* --deterministic */
    const char *optim_states; /* --optimizer-states fp32|int8 */
    const char *quantize_base; /* --quantize-base nf4|int8|none */
    int quantize_embeddings;   /* --quantize-embeddings */
    int quantized_weights;     /* --quantized-weights: ZeRO++ qwZ (zero_optimization.zero_quantized_weights) */
    int quantized_grads;       /* --quantized-gradients: ZeRO++ qgZ (zero_optimization.zero_quantized_gradients) */
    const char *doc_mask;      /* --doc-mask on|off|auto */
    const char *objective;     /* --objective lm|dpo|orpo */
    dec_objective obj;         /* ... parsed (DEC_OBJ_LM by default) */
    double beta, label_smoothing; /* --beta (DPO's beta, ORPO's lambda; default 0.1), --label-smoothing */
    int beta_given;
    int det_atom;      /* --det-atom A (0: the config's, default 1) */
    int layers, dim, heads, vocab, model_given;
    int64_t steps, val_every, save_every;
    int save_total_limit; /* --save-total-limit N: keep the newest N checkpoints (0: all) */
    double lr;
    uint64_t seed;
    int seed_given; /* --seed on the command line (a resumed run must agree with its checkpoint) */
    const char *lora_spec, *lora_from; /* --lora SPEC, --lora-from ADAPTER_DIR */
    int save_frozen;                   /* --save-frozen */
    const char *device;                /* --device NAME (NULL: $ZERO_DEVICE, else cpu) */
    const char *device_memory;         /* --device-memory SIZE as given (NULL: $ZERO_DEVICE_MEMORY) */

    cli_device dev; /* filled by train_device_resolve: what every rank's engine gets */

    /* filled by train_prepare */
    zero_config cfg;
    cli_model src;        /* the model: configuration and where it came from */
    dec_config model_cfg; /* src.cfg, with n_ctx grown to --seq when training from scratch */
    int T;
    zero_chat_format chat;   /* --chat-template's format (NONE: from the tokenizer) */
    zero_tokenizer *tok;     /* the model's tokenizer when the data is text or JSONL, else NULL */
    char tokdir[1024];       /* where it came from */
    dec_data *dataset;
    dec_data *valset;        /* --val-data's, all of it validation (NULL: dataset's split) */
    int docs;                /* packed examples attend within themselves (zero_config.doc_mask resolved) */
    /* LoRA (cli/train_lora.c): on when --lora, --lora-from or zero_extensions.lora asks */
    int lora_on;
    dec_lora lora;
    char base_hash[64];   /* the base's identity (dec_hf_fingerprint, or "preset:NAME:seed:S") */
    int base_saved;       /* --resume: the checkpoint holds the base (it was saved with --save-frozen) */

    /* --resume: the checkpoint's record of the run (train_resume_run) */
    int run_recorded;        /* the record has the run's configuration (run_cfg) */
    zero_config run_cfg;     /* ... as the run had it, its batch left out */
    char *run_strings[5];    /* data, validation data, chat format, template text and the DPO reference taken from the record (owned) */
    const char *dpo_reference_in; /* DPO resumed: the reference its record keeps (run_strings[4]) */
    char *dpo_reference;     /* DPO: the reference this run records (the trainer's text; owned) */
    const char *data_changed; /* --resume on data other than the run's (what differs), else NULL */
    const char *chat_template_text; /* the model's chat template a resumed run trained with (run_strings[3]) */
    zero_config run_pre;     /* this run's configuration before it is resolved, its batch left out (recorded) */
    /* --data's digest (train_data_digest_once): read once a run, by the process that first needs
     * it (the launcher, or rank 0), and passed on to the ranks; the same in both flag passes */
    uint32_t data_crc;
    uint64_t data_bytes;
    int data_digested;
    char data_digest_of[4096]; /* the real path it is the digest of */
    int prepare_world;         /* the world train_prepare runs for (0: the pass before MPI starts) */

    train_ux ux; /* --print-every, the resume's batch, the progress (cli/run_ux.h) */
} train_opts;

/* Builds the config (defaults < JSON < flags) and resolves it for `world` ranks (0: not known
 * yet, skip what needs it), the model configuration, and opens and checks the data (text and
 * JSONL through the model directory's tokenizer). Returns an exit status (CLI_OK, or the error
 * already printed). */
int train_prepare(train_opts *o, int world);
/* --resume: takes the model, sequence length and seed from the checkpoint's record of the run
 * (an explicit, different --model/--layers/--dim/--heads/--vocab/--seq is an error). */
int train_resume_settings(train_opts *o);
/* --resume, before the config and the flags apply: what the checkpoint recorded of the run — its
 * configuration (the base the config file and flags then change), its data and validation data
 * (used when --data / --val-data are not given again, and then checked against their recorded
 * digests: data that changed is an error), its chat format and activation checkpointing. The
 * changes the flags make are said at the start (ux.run_note). Returns an exit status. */
int train_resume_run(train_opts *o);
/* After the flags: ux.run_note lists what differs from the recorded configuration. */
void train_resume_changes(train_opts *o);
/* The digest of a data file or directory (CRC32C and bytes of its contents; a directory's regular
 * files in name order, names included): 0, or -1 with err set. With ZERO_LOG=debug each read says
 * so on stderr. */
int train_data_digest(const char *path, uint32_t *crc, uint64_t *bytes, char *err, size_t cap);
/* o->data's digest for this run (o->data_crc, o->data_bytes): read the first time, or taken from
 * the launcher (train_data_digest_pass_on) or rank 0 (train_data_digest_share), then the same for
 * the rest of the process. 0, or -1 with err set. */
int train_data_digest_once(train_opts *o, char *err, size_t cap);
/* Before the launcher starts the ranks: the digest it read goes to them in the environment. */
void train_data_digest_pass_on(const train_opts *o);
/* Under MPI, before train_prepare's pass for the world: rank 0 reads the digest the run needs (a
 * save records it, --resume compares it) and every rank takes it. Returns an exit status. */
int train_data_digest_share(train_opts *o, zero_comm *comm);
/* --device / $ZERO_DEVICE and --device-memory / $ZERO_DEVICE_MEMORY into o->dev_*: an unknown
 * backend, one this build lacks (cuda) and a malformed size are each one line and exit 2. */
int train_device_resolve(train_opts *o);
/* The device's capacity against the plan's per-rank device bytes of this run (model states on
 * the device, the transient, the activations), before anything is allocated: one line naming the
 * bytes, the largest unit and the `zero plan` that suggests a setup, exit 2, when they do not fit. */
int train_device_check(const train_opts *o, int world);
/* The JSON object a checkpoint keeps of this run (malloc'd), or NULL when out of memory. */
char *train_user_json(const train_opts *o, int world);
/* cli/train_lora.c. --lora's value ("r=16,alpha=32,targets=q_proj,v_proj,dropout=0.05,rslora")
 * over out; -1 on a usage error (printed). */
int train_lora_parse(const char *spec, zero_lora_config *out);
/* After the model is known: LoRA on or off, its settings (from the config and the flags, or the
 * adapter of --lora-from), the base's identity. Returns an exit status. */
int train_lora_prepare(train_opts *o);
/* --resume of a LoRA run: its settings from the checkpoint's record, the base it needs (--init-from
 * or the recorded directory, whose identity must be the recorded one). Returns an exit status. */
int train_lora_resume(train_opts *o, zero_ckpt *c);
/* The record a checkpoint keeps of the LoRA settings and the base (a JSON object's members,
 * added to root: a cJSON *). */
void train_lora_record(const train_opts *o, void *root);
/* The adapters on a registered and finalized engine whose base is loaded: PEFT's initialization,
 * or --lora-from's weights (every rank; the ranks agree). Returns an exit status. */
int train_lora_init(const train_opts *o, zero_engine *e);
/* Frees what train_prepare opened (the data, the tokenizer, the model description). */
void train_release(train_opts *o);
/* Trains on the MPI world (mpi != 0) or one rank; returns the exit status. */
int train_run(train_opts *o, int mpi);

#endif
