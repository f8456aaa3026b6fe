/* zero/engine.h — the ZeRO engine: stages 0-3 over a communicator.
 *
 * A model registers its parameters in units (a transformer block, the embeddings, ...). A unit
 * is one flat buffer: its parameters back to back in registration order, fp32 in the model's
 * view. The engine owns all parameter, gradient and optimizer memory and shards it per stage.
 *
 *   zero_engine *e;  zero_engine_create(&e, comm, &cfg);
 *   int u = zero_engine_add_unit(e, "h.0");
 *   zero_engine_add_param(e, u, "h.0.attn.c_attn.weight", shape, 2, 0);
 *   zero_engine_finalize(e);                    // allocates; parameters are zero
 *   zero_engine_set_unit(e, u, values);         // every rank passes the same full unit values
 *   for each step:
 *     for each micro-batch:
 *       forward:  const float *p = zero_engine_gather(e, u); ... zero_engine_release(e, u);
 *       backward: p = zero_engine_gather(e, u); float *g = zero_engine_grad(e, u);
 *                 ... g += d loss / d p  (scaled by zero_engine_loss_scale(e)) ...
 *                 zero_engine_grad_ready(e, u); zero_engine_release(e, u);
 *     zero_engine_step(e, &stats);
 *
 * Gradients: the model writes the gradient of *its micro-batch's mean loss* multiplied by the
 * loss scale; the engine averages over ranks and micro-batches (divides by world * grad_accum)
 * and unscales in the step, so the update is that of the global batch's mean loss.
 * zero_engine_grad() returns an fp32 buffer of the unit's numel that the model *adds* its
 * gradient into (never overwrites: in stages 0-1 fp32 it is the persistent gradient that already
 * holds the earlier micro-batches of the step; otherwise a zero-filled scratch).
 *
 * Every rank must make the same calls in the same order. With check_divergence on (default),
 * a rank that gathers another unit, or calls step while others gather, gets ZERO_ERR_DIVERGED
 * on every rank: during the first step at that very call, naming the unit and the ranks; later
 * at the next step, from a hash of the call sequence (ZERO_DIVERGENCE_COLLECTIVE checks every
 * call, always naming the unit; docs/ENGINE.md §5).
 *
 * Errors: every call returns a status (or NULL/negative) and zero_engine_last_error() says
 * what failed. After ZERO_ERR_COMM or ZERO_ERR_DIVERGED the engine is unusable: free it.
 */
#ifndef ZERO_ENGINE_H
#define ZERO_ENGINE_H

#include "zero/comm.h"
#include "zero/device.h"
#include "zero/common.h"
#include "zero/config.h"
#include "zero/io.h"
#include "zero/precision.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zero_engine zero_engine;

/* Parameter flags. */
enum {
    ZERO_PARAM_NO_DECAY = 1u << 0, /* exclude from weight decay (biases, norm gains) */
    /* Not trained: no gradient, no master, no optimizer state, never reduced; gathered like the
     * others (partitioned at stage 3, whole at stages 0-2) and stored in the frozen dtype
     * (zero_config.frozen_dtype: the working dtype by default, or e.g. bf16 beside fp32
     * training). A unit may mix frozen and trainable parameters: its gradient buffer then holds
     * only the trainable ones, back to back (zero_param_info.grad_offset); a unit with nothing
     * trainable takes no gradient and no part in any reduction (docs/ENGINE.md §3). */
    ZERO_PARAM_FROZEN = 1u << 1,
    /* With ZERO_PARAM_FROZEN: stored in the base format when the config has one
     * (zero_config.quant_base: NF4 or int8; docs/QUANT.md), else in the frozen dtype like the others.
     * The parameter is then one record of zero/quant.h in the frozen part (zero_param_info.format,
     * frozen_offset), coded as one tensor from the fp32 values it is set to: set it whole, or in
     * pieces from its first element in order (set_unit_range), on the ranks that keep any of it
     * (zero_param_info.own_lo/own_hi: all of it or nothing). Its view (zero_engine_gather) holds
     * the decoded values. A model reads it from zero_engine_gather_parts, a tile at a time. */
    ZERO_PARAM_QUANTIZE = 1u << 2,
};

typedef struct zero_step_stats {
    int64_t step;        /* optimizer steps taken so far, skipped ones included */
    double lr;           /* learning rate used by this step */
    double grad_norm;    /* global L2 norm of the averaged, unscaled gradient (before clipping) */
    double loss_scale;   /* scale used by this step's micro-batches */
    int skipped;         /* 1 when an overflow (Inf/NaN) skipped the update on every rank */
    int redo;            /* deterministic mode: 1 when this step's gradients outgrew their fixed-point
                          * grids (always the first step of a run: no grids yet). Nothing was updated
                          * and `step` did not advance; the grids now fit these atoms: compute the
                          * same global batch again (docs/ENGINE.md §11). grad_norm is NaN. */
    double comm_wait_ms; /* time this step spent waiting on communication (exposed comm) */
    double step_ms;      /* wall time of zero_engine_step */
} zero_step_stats;

/* A unit is two parts, each partitioned on its own: the trainable parameters back to back (the
 * gradient buffer's layout) and the frozen ones back to back. Without frozen parameters the
 * trainable part is the whole unit, in the model's own layout. */
typedef struct zero_unit_info {
    const char *name;
    uint64_t numel;    /* elements of the unit (sum of its parameters): the gathered fp32 view */
    uint64_t trainable; /* elements of the trainable part: the gradient buffer (numel - frozen) */
    uint64_t padded;   /* the trainable part's padded size (multiple of world * align) */
    uint64_t shard;    /* its elements this rank owns: padded / world */
    uint64_t offset;   /* its first owned element (in trainable-part coordinates) */
    uint64_t valid;    /* its owned elements that are real (not padding) */
    uint64_t frozen;   /* elements of the frozen part (ZERO_PARAM_FROZEN parameters), in the frozen dtype:
                        * a quantized parameter's record counts as its bytes / the dtype's size, and
                        * starts on ZERO_QUANT_RECORD_ALIGN bytes (zero_quant_place) */
    uint64_t frozen_padded, frozen_shard, frozen_offset, frozen_valid; /* its partition, as above */
    int nparams;
} zero_unit_info;

typedef struct zero_param_info {
    const char *name;
    int unit;
    uint64_t offset;   /* in elements, inside the unit (its gathered fp32 view) */
    uint64_t numel;
    int ndim;
    int64_t shape[8];
    unsigned flags;
    uint64_t grad_offset; /* in elements, inside the unit's gradient buffer (zero_engine_grad) and
                           * its trainable part (zero_engine_gather_parts): `offset` when the unit
                           * has no frozen parameter; UINT64_MAX when frozen */
    uint64_t frozen_offset; /* in elements, inside the unit's frozen part; UINT64_MAX when trainable. A
                             * quantized parameter's record starts at byte frozen_offset x the frozen
                             * dtype's size of the part (zero_quant_record_view) */
    zero_qformat format;     /* ZERO_QFMT_NONE, or the format of its record (ZERO_PARAM_QUANTIZE) */
    uint64_t own_lo, own_hi; /* the elements [own_lo, own_hi) of this parameter that this rank keeps
                              * (stage 3: its shard's part, possibly empty; otherwise all): what a
                              * loader must pass to zero_engine_set_unit_range on this rank */
} zero_param_info;

/* What environment variables set for the engine, for a program that embeds it: a NULL field
 * takes its variable (zero_engine_options_default leaves them all so). */
typedef struct zero_engine_options {
    const char *job_id; /* names the NVMe offload files, 1 to 40 of [A-Za-z0-9._-]; NULL: $ZERO_JOB_ID
                         * (rank 0's), else rank 0's pid and engine count. Rank 0's value rules. */
    zero_io_options io; /* the offload's I/O backend and fault rules (zero/io.h: ZERO_IO, ZERO_FAULT) */
    zero_device_options device; /* the device the engine's states live on (zero/device.h): backend
                                 * NULL = $ZERO_DEVICE, else "cpu" (host memory, today's path);
                                 * capacity 0 = $ZERO_DEVICE_MEMORY, else the backend's */
    int sync_copies;    /* on a device: each upload of ZeRO-Offload's updated working copy is waited for
                         * before the host goes on (no overlap: a benchmark's baseline); 0: overlapped */
    int test_skip_wait; /* tests only: the wait before an upload buffer is filled again is dropped, a
                         * schedule with a missing wait that the fake device must show (wrong numbers) */
} zero_engine_options;
void zero_engine_options_default(zero_engine_options *o);

/* The engine keeps `comm` (does not own it: free the engine first) and copies cfg, which must
 * have been resolved (zero_config_resolve) for comm's world size, and the options (NULL: the
 * defaults). err (may be NULL) says what is wrong, naming the config field ("zero_optimization.
 * stage 7: expected 0..3"). */
zero_status zero_engine_create_with(zero_engine **out, zero_comm *comm, const zero_config *cfg,
                                    const zero_engine_options *opts, zero_error *err);
/* The same with default options; the reason of a failure goes to the log callback only. */
zero_status zero_engine_create(zero_engine **out, zero_comm *comm, const zero_config *cfg);
void zero_engine_free(zero_engine *e); /* NULL is a no-op; offload files are removed */
const char *zero_engine_last_error(const zero_engine *e);

/* Returns the unit id (0, 1, ...) or a negative zero_status. */
int zero_engine_add_unit(zero_engine *e, const char *name);
/* ndim in 1..8; names unique across the engine. */
zero_status zero_engine_add_param(zero_engine *e, int unit, const char *name, const int64_t *shape,
                                  int ndim, unsigned flags);
/* Allocates every shard for the configured stage; parameters and states start at zero. */
zero_status zero_engine_finalize(zero_engine *e);

/* Sets a unit's parameters (master and working copy): `values` holds the unit's numel fp32
 * values; each rank keeps what its stage needs. Every rank must pass the same values. Not
 * collective. Only between steps. */
zero_status zero_engine_set_unit(zero_engine *e, int unit, const float *values);
/* Sets one parameter by name the same way (numel values). Not collective. */
zero_status zero_engine_set_param(zero_engine *e, const char *name, const float *values);
/* Sets elements [lo, hi) of a unit the same way (values: hi - lo fp32 values, element lo first).
 * Each rank keeps what its stage needs of the range, so at stage 3 a rank may pass only the
 * elements it owns (zero_engine_unit_info: [offset, offset + valid)): a model is loaded without
 * any rank holding a whole unit. Not collective. */
zero_status zero_engine_set_unit_range(zero_engine *e, int unit, uint64_t lo, uint64_t hi, const float *values);

/* The unit's full parameters as fp32 (numel values, read-only), valid until release. Stage 3:
 * collective (all-gather). Returns NULL on error. Gathering a unit twice without release is
 * allowed (the second returns the same pointer; release once per gather). */
const float *zero_engine_gather(zero_engine *e, int unit);
/* A unit's two parts as the engine keeps them, read-only, valid until release (zero_unit_info). */
typedef struct zero_unit_parts {
    const void *trainable;      /* the trainable parameters back to back (their grad_offset), NULL when none */
    uint64_t trainable_numel;
    zero_dtype trainable_dtype; /* the working dtype */
    const void *frozen;         /* the frozen parameters back to back (their frozen_offset), NULL when none */
    uint64_t frozen_numel;
    zero_dtype frozen_dtype;    /* zero_config.frozen_dtype: the working dtype by default */
} zero_unit_parts;
/* The unit's parameters in their stored dtypes: a gather like zero_engine_gather (collective at
 * stage 3, the same in the call sequence, released once), without the fp32 view that one makes
 * of half parameters. A model whose products take bf16 operands reads its weights from here and
 * widens only what it needs in fp32. Without frozen parameters the trainable part is the whole
 * unit in the view's layout. zero_engine_gather of the same unit while it is held makes the
 * fp32 view then. */
zero_status zero_engine_gather_parts(zero_engine *e, int unit, zero_unit_parts *out);
zero_status zero_engine_release(zero_engine *e, int unit);

/* The unit's fp32 gradient buffer for this micro-batch (its `trainable` values: every parameter
 * when none is frozen, else the trainable ones back to back at their grad_offset): add into it.
 * A unit with no trainable parameter has none (NULL, ZERO_ERR_STATE; so does grad_ready). */
float *zero_engine_grad(zero_engine *e, int unit);
/* The unit's gradient for this micro-batch is complete: starts its reduction (collective,
 * non-blocking). The buffer from zero_engine_grad must not be touched afterwards. */
zero_status zero_engine_grad_ready(zero_engine *e, int unit);

/* Marks the end of a micro-batch: the boundary is explicit, never inferred. Call it after each
 * micro-batch's backward; zero_engine_step implies it for the last one (so a step without
 * gradient accumulation needs no call). A unit's grad or grad_ready after its grad_ready in the
 * same micro-batch is ZERO_ERR_STATE. Units that had no grad_ready in the micro-batch contribute
 * zero gradient. A call with no gradient call since the last boundary (an evaluation pass) does
 * nothing. */
zero_status zero_engine_micro_batch_done(zero_engine *e);

/* Lets the collectives the engine has in flight (stage 3's prefetched all-gathers, the
 * reductions posted at grad_ready) move while the model computes: one pass of the communicator's
 * progress engine (zero_comm_progress) when any is in flight, nothing otherwise. Over TCP,
 * OpenMPI moves them only inside MPI calls, so a model that computes for long between engine
 * calls should call this between its kernels. Not collective; cheap (a probe). */
zero_status zero_engine_progress(zero_engine *e);

/* Waits for the reductions, unscales, checks overflow on all ranks, clips, updates the shards
 * and refreshes the working copies. Collective. */
zero_status zero_engine_step(zero_engine *e, zero_step_stats *stats);

/* The loss scale the model multiplies its loss gradient by (1 unless fp16). */
double zero_engine_loss_scale(const zero_engine *e);

/* Copies a full unit's current fp32 values (numel, the gathered view's layout: the masters of the
 * trainable parameters, the stored values of the frozen ones) into dst: collective in stages 1-3
 * (all-gather of masters), used by export and tests. */
zero_status zero_engine_read_unit(zero_engine *e, int unit, float *dst);

/* Saves a sharded checkpoint (docs/CHECKPOINT.md): DIR/step_%08lld/ with manifest.json, one
 * safetensors file per rank holding the valid slice of every unit's fp32 master and optimizer
 * states (its trainable part), COMMIT, and DIR/latest. Frozen parameters are saved only with
 * zero_config.save_frozen ("<unit>/frozen", in the frozen dtype). Collective; between steps only. user_json: a JSON object stored
 * in the manifest under "user" (data position, seeds, model description), or NULL. If any rank
 * fails, every rank returns an error and the previous checkpoint stays `latest`. */
zero_status zero_engine_save(zero_engine *e, const char *dir, const char *user_json);
/* Loads a checkpoint saved with any world size and any stage (a step directory, or a save
 * directory: its `latest`), reading on each rank only the element ranges it keeps; restores the
 * step count and the loss scaler. The model (units, sizes, which parameters are frozen) and the
 * optimizer type must match. Frozen parameters are read when the checkpoint holds them
 * ("<unit>/frozen"), else left as they are (set them from the base model first).
 * Collective; *user_json (if not NULL) gets the saved "user" object as malloc'd text, or NULL. */
zero_status zero_engine_load(zero_engine *e, const char *path, char **user_json);

int zero_engine_num_units(const zero_engine *e);
int zero_engine_num_params(const zero_engine *e);
zero_status zero_engine_unit_info(const zero_engine *e, int unit, zero_unit_info *out);
zero_status zero_engine_param_info(const zero_engine *e, int param, zero_param_info *out);
int zero_engine_find_param(const zero_engine *e, const char *name); /* index or -1 */

/* Memory accounting of this engine on this rank (bytes per category, current and peak). The
 * engine keeps its transient buffers between steps for reuse (ZERO_MEM_BUFFERS, never more than
 * the most it had in use at once); zero_engine_trim frees them and returns their bytes. */
void zero_engine_mem_stats(const zero_engine *e, zero_mem_stats *out);
size_t zero_engine_trim(zero_engine *e);
/* Traffic of this engine's data collectives on this rank (see comm.h for the rule). */
void zero_engine_comm_counters(const zero_engine *e, zero_comm_counters *out);
/* The device the engine's states live on ("cpu": host memory, zero_engine_mem_stats has every
 * figure), its memory of a space (ZERO_SPACE_DEVICE, ZERO_SPACE_HOST_PINNED: the device layer's
 * side table; zeros on cpu) and its copy counters (zeros on cpu). */
const char *zero_engine_device(const zero_engine *e);
void zero_engine_device_mem_stats(const zero_engine *e, zero_mem_space space, zero_mem_stats *out);
void zero_engine_device_counters(const zero_engine *e, zero_device_counters *out);
const zero_config *zero_engine_config(const zero_engine *e);
const zero_loss_scaler *zero_engine_scaler(const zero_engine *e);
int64_t zero_engine_step_count(const zero_engine *e);
zero_comm *zero_engine_comm(const zero_engine *e);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_ENGINE_H */
