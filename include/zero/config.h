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
    char nvme_path[1024];
    int pin_memory;
    int buffer_count;     /* optimizer: 4, param: 5 */
    int64_t buffer_size;  /* param: 1e8 elements */
    int64_t max_in_cpu;   /* param: 1e9 elements */
    int pipeline_read, pipeline_write;
    double ratio;         /* optimizer: 1.0 */
} zero_offload_config;

/* Fields left "auto" in JSON; zero_config_resolve fills them. */
enum {
    ZERO_AUTO_TRAIN_BATCH = 1u << 0,
    ZERO_AUTO_MICRO_BATCH = 1u << 1,
    ZERO_AUTO_GRAD_ACCUM = 1u << 2,
    ZERO_AUTO_LR = 1u << 3,
    ZERO_AUTO_WEIGHT_DECAY = 1u << 4,
    ZERO_AUTO_BETAS = 1u << 5,
    ZERO_AUTO_EPS = 1u << 6,
    ZERO_AUTO_CLIPPING = 1u << 7,
    ZERO_AUTO_PRECISION = 1u << 8,
    ZERO_AUTO_SCHED = 1u << 9,
    ZERO_AUTO_BUCKETS = 1u << 10,
};

typedef struct zero_config {
    /* batch: train_batch_size = micro_batch * grad_accum * world (0 = not given) */
    int64_t train_batch_size;
    int64_t micro_batch;       /* train_micro_batch_size_per_gpu */
    int64_t grad_accum;        /* gradient_accumulation_steps */
    double gradient_clipping;  /* max global L2 norm; 0 = off */
    int64_t steps_per_print;
    int wall_clock_breakdown;

    zero_optim_hparams optim;
    int sched_enabled;         /* 0: constant lr */
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
    int contiguous_gradients, overlap_comm, reduce_scatter, allgather_partitions;
    int round_robin_gradients;
    int64_t reduce_bucket_size, allgather_bucket_size, sub_group_size;
    int64_t prefetch_bucket_size;        /* stage3_prefetch_bucket_size (elements) */
    int64_t param_persistence_threshold; /* stage3_param_persistence_threshold */
    int64_t max_live_parameters;         /* stage3_max_live_parameters (elements) */
    int64_t max_reuse_distance;          /* stage3_max_reuse_distance */
    int gather_16bit_weights_on_model_save;
    zero_offload_config offload_optimizer, offload_param;

    /* aio */
    int64_t aio_block_size;    /* 1 MiB */
    int aio_queue_depth;       /* 8 */
    int aio_intra_op_parallelism, aio_single_submit, aio_overlap_events;

    /* zero's own (under "zero_extensions" in JSON) */
    int check_divergence;      /* exchange a tag before each collective: a mismatch is an error, not a hang (default 1) */
    int64_t align_bytes;       /* partition alignment in bytes (default 64) */

    unsigned auto_fields;      /* ZERO_AUTO_* */
} zero_config;

void zero_config_default(zero_config *cfg);

/* Loads DeepSpeed-style JSON over cfg (keys absent from the JSON keep cfg's values). On error
 * cfg may be partly updated and err says what and where; returns ZERO_ERR_CONFIG, or
 * ZERO_ERR_UNSUPPORTED for known keys zero does not implement, or ZERO_ERR_IO. */
zero_status zero_config_load_json_file(zero_config *cfg, const char *path, zero_error *err);
zero_status zero_config_load_json_string(zero_config *cfg, const char *json, zero_error *err);

/* Resolves "auto" fields and the batch triple for `world` ranks and checks every value and
 * their combinations (e.g. offload_param needs stage 3). */
zero_status zero_config_resolve(zero_config *cfg, int world, zero_error *err);

/* Writes cfg as DeepSpeed-style JSON that zero_config_load_json_* accepts (malloc'd string,
 * free() it). NULL on allocation failure. */
char *zero_config_to_json(const zero_config *cfg);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_CONFIG_H */
