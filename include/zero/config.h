/* zero/config.h — the training configuration: defaults, DeepSpeed-style JSON, validation.
 *
 * Keys follow DeepSpeed's (docs/CONFIG.md lists every key, its default, and what we support).
 * Loading is strict: an unknown or misspelled key is an error naming the key path and the
 * nearest known key; a known key that zero does not implement is "not supported yet"; a value
 * of the wrong type or range names the key path, the value and what was expected. "auto" is
 * accepted where DeepSpeed accepts it and resolved by zero_config_resolve().
 */
#ifndef ZERO_CONFIG_H
#define ZERO_CONFIG_H

#include "zero/common.h"
#include "zero/optim.h"
#include "zero/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zero_offload_device {
    ZERO_OFFLOAD_NONE = 0,
    ZERO_OFFLOAD_CPU = 1,  /* host memory: the GPU build only; a CPU run already lives there */
    ZERO_OFFLOAD_NVME = 2,
} zero_offload_device;

typedef struct zero_offload_config {
    zero_offload_device device;
    char nvme_path[1024];  /* required for NVME: a directory for the swap files */
    int pin_memory;
    int buffer_count;     /* optimizer: 4, param: 5 */
    int64_t buffer_size;  /* param: 1e8 elements */
    int64_t max_in_cpu;   /* param: 1e9 elements */
    int pipeline_read, pipeline_write;
    double ratio;         /* optimizer: 1.0 */
} zero_offload_config;

/* Fields left "auto" in JSON (bits of zero_config.auto_fields). Loading "auto" leaves the field's
 * value as it was (the default, unless the caller set it) and sets its bit; a caller that fills
 * such a field itself (a command-line flag) may clear the bit. zero_config_resolve keeps the
 * values held (they are "our default"), with two exceptions written below, and clears every bit.
 * ZERO_AUTO_SCHED and ZERO_AUTO_BUCKETS are set for any key of their group; the bits from
 * 1u << 11 name each key of those groups. */
enum {
    ZERO_AUTO_TRAIN_BATCH = 1u << 0,
    ZERO_AUTO_MICRO_BATCH = 1u << 1,
    ZERO_AUTO_GRAD_ACCUM = 1u << 2,
    ZERO_AUTO_LR = 1u << 3,
    ZERO_AUTO_WEIGHT_DECAY = 1u << 4,
    ZERO_AUTO_BETAS = 1u << 5,
    ZERO_AUTO_EPS = 1u << 6,
    ZERO_AUTO_CLIPPING = 1u << 7,
    ZERO_AUTO_PRECISION = 1u << 8,  /* fp16.enabled or bf16.enabled */
    ZERO_AUTO_SCHED = 1u << 9,      /* any scheduler.params key */
    ZERO_AUTO_BUCKETS = 1u << 10,   /* any of the four bucket/threshold sizes below */
    ZERO_AUTO_SCHED_WARMUP_MIN_LR = 1u << 11,
    ZERO_AUTO_SCHED_WARMUP_MAX_LR = 1u << 12,  /* resolved to the optimizer's lr (as HF Trainer does) */
    ZERO_AUTO_SCHED_WARMUP_NUM_STEPS = 1u << 13,
    ZERO_AUTO_SCHED_WARMUP_TYPE = 1u << 14,
    ZERO_AUTO_SCHED_TOTAL_NUM_STEPS = 1u << 15, /* the caller must set it (zero train: --steps) */
    ZERO_AUTO_SCHED_WARMUP_MIN_RATIO = 1u << 16,
    ZERO_AUTO_SCHED_COS_MIN_RATIO = 1u << 17,
    ZERO_AUTO_REDUCE_BUCKET = 1u << 18,
    ZERO_AUTO_ALLGATHER_BUCKET = 1u << 19,
    ZERO_AUTO_PREFETCH_BUCKET = 1u << 20,
    ZERO_AUTO_PERSISTENCE_THRESHOLD = 1u << 21,
};

/* Keys whose absence zero reads apart from DeepSpeed (bits of zero_config.set_fields): set by
 * the JSON loader when the key is given (a value or "auto"); a program that sets the field in C
 * sets the bit too. */
enum {
    /* stage3_prefetch_bucket_size: given, stage 3 prefetches as many units ahead as fit it;
     * absent, only the next unit (zero's default; DeepSpeed's 5e7 would prefetch most of a small
     * model at once, past the memory docs/ENGINE.md and `zero plan` count). */
    ZERO_SET_PREFETCH_BUCKET = 1u << 0,
    /* offload_param.buffer_size: given, each parameter buffer holds that many elements and a unit
     * whose shard is larger is refused (DeepSpeed's rule); absent, each holds the largest unit's
     * shard, both parts (zero's default: DeepSpeed's 1e8 refuses the embeddings of any model with a
     * vocabulary of 128k and a width of 1k or more on one rank, docs/OFFLOAD.md). */
    ZERO_SET_PARAM_BUFFER_SIZE = 1u << 1,
};

/* zero_extensions.check_divergence (docs/ENGINE.md, "Divergence is an error, not a hang"). */
enum {
    ZERO_DIVERGENCE_OFF = 0,        /* false: no check */
    ZERO_DIVERGENCE_STEP = 1,       /* true (default): every collective of the first step is
                                     * checked; then a running hash of the sequence is compared
                                     * once per step (and at every exchange that carries data) */
    ZERO_DIVERGENCE_COLLECTIVE = 2, /* "collective": every collective is checked, the first that
                                     * differs named with its unit (the diagnostic mode) */
};

/* zero_extensions.lora: LoRA adapters of a model (docs/CONFIG.md; the decoder applies them,
 * docs/MODEL.md "LoRA"). The fields are PEFT's LoraConfig: r, lora_alpha, target_modules,
 * lora_dropout, use_rslora. r == 0: no LoRA. */
typedef struct zero_lora_config {
    int r;              /* rank, >= 1 (0: off) */
    double alpha;       /* lora_alpha (scaling alpha / r, or alpha / sqrt(r) with rslora); PEFT's default 8 */
    char targets[256];  /* target_modules, comma-separated ("q_proj,v_proj"); "": the model's default */
    double dropout;     /* lora_dropout in [0, 1) on the adapters' input; 0 by default */
    int rslora;         /* use_rslora */
} zero_lora_config;

/* tensorboard (DeepSpeed's monitor section): zero train writes TensorBoard event files into
 * output_path/job_name, rank 0 only (docs/CLI.md, "TensorBoard"). Read by the trainer, not by
 * the engine. */
typedef struct zero_tensorboard_config {
    int enabled;            /* false by default */
    char output_path[1024]; /* "": the working directory (DeepSpeed's default too) */
    char job_name[256];     /* "": "DeepSpeedJobName", DeepSpeed's default */
} zero_tensorboard_config;

enum { ZERO_DOC_MASK_AUTO = 0, ZERO_DOC_MASK_ON = 1, ZERO_DOC_MASK_OFF = 2 };

typedef struct zero_config {
    /* batch: train_batch_size = micro_batch * grad_accum * world (0 = not given) */
    int64_t train_batch_size;
    int64_t micro_batch;       /* train_micro_batch_size_per_gpu */
    int64_t grad_accum;        /* gradient_accumulation_steps */
    double gradient_clipping;  /* max global L2 norm; 0 = off */
    int64_t steps_per_print;   /* 10; for the caller's progress lines */
    int wall_clock_breakdown;  /* false; for the caller's timing lines */

    zero_optim_hparams optim;
    int sched_enabled;         /* 0: constant lr (no "scheduler" section) */
    zero_sched sched;

    zero_dtype precision;      /* working params: fp32 (default), bf16 (bf16.enabled), fp16 */
    double loss_scale;         /* fp16: 0 = dynamic */
    int initial_scale_power;   /* 16 */
    int64_t loss_scale_window; /* 1000 */
    int hysteresis;            /* 2 */
    double min_loss_scale;     /* 1 */
    int consecutive_hysteresis;/* false */

    /* zero_optimization */
    int stage;                 /* 0..3 */
    int contiguous_gradients, reduce_scatter, allgather_partitions;
    int overlap_comm;          /* -1 until resolved: DeepSpeed's default, true at stage 3 else false */
    int round_robin_gradients;
    int64_t reduce_bucket_size, allgather_bucket_size, sub_group_size;
    int64_t prefetch_bucket_size;        /* stage3_prefetch_bucket_size (elements) */
    int64_t param_persistence_threshold; /* stage3_param_persistence_threshold */
    int64_t max_live_parameters;         /* stage3_max_live_parameters (elements) */
    int64_t max_reuse_distance;          /* stage3_max_reuse_distance */
    int gather_16bit_weights_on_model_save;
    /* zero_hpz_partition_size (ZeRO++ hpZ, stage 3): 1 (default) off; H > 1 keeps a secondary
     * copy of the working parameters sharded over each group of H consecutive ranks (normally a
     * node), so that gathers after the first one of a step stay inside the group. H must divide
     * the world size; H equal to it changes nothing (docs/ENGINE.md, "Hierarchical partitions"). */
    int hpz_partition_size;
    /* zero_quantized_weights (ZeRO++ qwZ, stage 3): 1 sends the all-gathers of the parameters as
     * int8 (the linear map of zero/quant.h) in blocks of quant_weights_block elements with an fp32
     * absmax each, decoded on arrival; a rank's own shard is used as it is, the master weights are
     * never quantized (docs/ENGINE.md, "Quantized weight gathers"). Default 0. JSON:
     * zero_optimization.zero_quantized_weights, zero_extensions.quantized_weights_block (default
     * 2048). */
    int quant_weights;
    int64_t quant_weights_block;
    /* zero_quantized_gradients (ZeRO++ qgZ, stages 2-3): 1 reduce-scatters each micro-batch's
     * gradients with zero_comm_ireduce_scatter_q8: what crosses MPI goes as int8 in blocks of
     * quant_grads_block (an fp32 absmax each), decoded and summed in fp32; the node step through
     * shared memory stays exact (docs/ENGINE.md, "Quantized gradient reduction"). Default 0.
     * JSON: zero_optimization.zero_quantized_gradients, zero_extensions.quantized_gradients_block
     * (default 2048). */
    int quant_grads;
    int64_t quant_grads_block;
    zero_offload_config offload_optimizer, offload_param;

    /* aio */
    int64_t aio_block_size;    /* 1 MiB */
    int aio_queue_depth;       /* 8 */
    int aio_intra_op_parallelism, aio_single_submit, aio_overlap_events;

    /* zero's own (under "zero_extensions" in JSON) */
    int check_divergence;      /* ZERO_DIVERGENCE_*: ranks that run different code get an error, not a hang (default STEP) */
    int64_t align_bytes;       /* partition alignment in bytes (default 64) */
    int reuse_buffers;         /* keep transient buffers between uses instead of freeing them (default 1) */
    /* ZERO_PARAM_FROZEN parameters are stored in this dtype (fp32, bf16 or fp16); ZERO_DTYPE_COUNT
     * ("auto", the default): the working precision. JSON: zero_extensions.frozen_dtype. */
    zero_dtype frozen_dtype;
    int save_frozen;           /* zero_engine_save also stores the frozen parameters (default 0) */
    /* Adam(W)'s moments: ZERO_OPTIM_STATES_FP32 (default) or ZERO_OPTIM_STATES_INT8 (the dynamic 8-bit
     * format of zero/quant.h, blocks of 256: bitsandbytes' 8-bit Adam; docs/QUANT.md) for every unit
     * of at least optim_states_min trainable elements (default 4096, ZERO_QUANT_Q8_MIN; smaller units
     * keep fp32). JSON: zero_extensions.optimizer_states, zero_extensions.optimizer_states_min_size. */
    int optim_states;
    int64_t optim_states_min;
    /* A frozen base in a quantized format (docs/QUANT.md): the frozen parameters a model marks
     * ZERO_PARAM_QUANTIZE (a LoRA base's linear weights) are stored as ZERO_QFMT_NF4 or
     * ZERO_QFMT_INT8 (zero/quant.h); ZERO_QFMT_NONE (default): in frozen_dtype. quant_double: NF4's
     * absmax double-quantized (default 1). JSON: zero_extensions.quantize_base ("nf4", "int8" or
     * "none"), zero_extensions.double_quant. zero_config_base_format says which format results.
     * quant_embed: the token embeddings and the LM head quantized too (default 0: kept in
     * frozen_dtype); needs quant_base. JSON: zero_extensions.quantize_embeddings. Read by the model. */
    int quant_base;
    int quant_double;
    int quant_embed;
    zero_lora_config lora;     /* zero_extensions.lora: read by the model, not by the engine */
    int deterministic;         /* bitwise the same training for any world size, stage and offload (default 0;
                                * docs/ENGINE.md, "Deterministic mode") */
    int deterministic_atom;    /* zero train: sequences per atom in deterministic mode (default 1); read by
                                * the trainer, not by the engine (docs/CLI.md) */
    /* zero train: the examples packed in a row attend to themselves only, their positions from 0
     * (ZERO_DOC_MASK_ON), or across the row (OFF); AUTO (0, the default): on for packed examples,
     * off for a stream of documents. Read by the trainer. JSON: zero_extensions.document_mask
     * (true, false or "auto"; docs/MODEL.md, "Packed examples"). */
    int doc_mask;
    zero_tensorboard_config tensorboard;

    unsigned auto_fields;      /* ZERO_AUTO_* */
    unsigned set_fields;       /* ZERO_SET_* */
} zero_config;

enum { ZERO_OPTIM_STATES_FP32 = 0, ZERO_OPTIM_STATES_INT8 = 1 };
/* The format of a quantized base's parameters under cfg (a zero_qformat: NF4_DQ for nf4 with
 * double quantization; ZERO_QFMT_NONE without a quantized base). */
int zero_config_base_format(const zero_config *cfg);

/* DeepSpeed's defaults (docs/CONFIG.md has the table): stage 0, fp32, AdamW with
 * zero_optim_hparams_default's values (lr 1e-3), no scheduler, batch triple not given (0). */
void zero_config_default(zero_config *cfg);

/* Loads DeepSpeed-style JSON over cfg: keys absent from the JSON keep cfg's values, except that
 * naming optimizer.type resets the optimizer's parameters to that type's defaults first.
 * On error cfg is left unchanged and err (may be NULL) says what and where, naming the key path:
 * ZERO_ERR_CONFIG (unknown/misspelled key with the nearest known one, wrong type, value out of
 * range, malformed JSON with line/column/byte offset), ZERO_ERR_UNSUPPORTED (a known DeepSpeed
 * key or value that zero does not implement yet), ZERO_ERR_IO (the file cannot be read),
 * ZERO_ERR_INVALID_ARG (NULL cfg/path/json). Every key of a well-formed document is read, and
 * every problem is reported at once: one as its own message; several as "N problems: A; B; ..."
 * in document order (as many as fit in err, then "(and K more)"); the status is the first's. */
zero_status zero_config_load_json_file(zero_config *cfg, const char *path, zero_error *err);
zero_status zero_config_load_json_string(zero_config *cfg, const char *json, zero_error *err);
/* zero_config_load_json_file that also hands back every problem's message, one a line ("\n" after
 * each), in *problems: malloc'd (free() it), NULL when the document loads or the error is not one
 * of its keys' (malformed JSON, I/O). problems may be NULL. */
zero_status zero_config_load_json_file_report(zero_config *cfg, const char *path, char **problems, zero_error *err);

/* Resolves "auto" fields and the batch triple for `world` ranks and checks every value and
 * their combinations (e.g. offload_param needs stage 3). Batch triple (0 = not given): all three
 * must satisfy train = micro * accum * world; two given derive the third (an error when it does
 * not divide); train alone gives micro = train / world, accum 1; micro or accum missing
 * otherwise default to 1. overlap_comm left at -1 becomes (stage == 3). On error cfg is left
 * unchanged (ZERO_ERR_CONFIG, or ZERO_ERR_INVALID_ARG for world < 1). */
zero_status zero_config_resolve(zero_config *cfg, int world, zero_error *err);

/* Writes cfg as DeepSpeed-style JSON that zero_config_load_json_* loads back, over
 * zero_config_default, into an equal config (fields still marked "auto" are written as "auto";
 * a batch field or total_num_steps at 0 is left out). Returns a malloc'd string (free() it), or
 * NULL on allocation failure or a NULL cfg. */
char *zero_config_to_json(const zero_config *cfg);

/* What differs between two configurations, as their JSON (zero_config_to_json) differs: the
 * number of keys whose values differ, written into out as "optimizer.params.lr 0.002 -> 0.001;
 * zero_optimization.stage 3 -> 2" (a key one side lacks: "(none)"; cut at cap), or -1 on
 * allocation failure. */
int zero_config_diff(const zero_config *from, const zero_config *to, char *out, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_CONFIG_H */
