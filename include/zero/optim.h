/* zero/optim.h — optimizer kernels on one shard, learning-rate schedules.
 *
 * Each kernel updates `n` fp32 master elements in place from fp32 gradients, already unscaled
 * and clipped (the caller multiplies by `grad_scale` inside the kernel: grad = g * grad_scale,
 * so unscaling, averaging and clipping cost no extra pass). When `out` is not NULL the updated
 * master is also written to out in `out_dt` (fp32/bf16/fp16, round-to-nearest-even): the fused
 * write-back of the working copy. Every kernel has a scalar reference (ZERO_IMPL_SCALAR) and
 * vectorized variants picked at run time; all parallelize across cores with OpenMP.
 */
#ifndef ZERO_OPTIM_H
#define ZERO_OPTIM_H

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum zero_optim_type {
    ZERO_OPTIM_ADAMW = 0, /* decoupled weight decay (Loshchilov & Hutter) */
    ZERO_OPTIM_ADAM = 1,  /* L2 weight decay added to the gradient (torch.optim.Adam) */
    ZERO_OPTIM_SGD = 2,   /* momentum (0 = plain), dampening 0, optional Nesterov; L2 decay */
    ZERO_OPTIM_LION = 3,  /* sign of interpolated momentum; decoupled decay */
} zero_optim_type;

const char *zero_optim_name(zero_optim_type t);
zero_status zero_optim_parse(const char *name, zero_optim_type *out); /* case-insensitive */
/* Optimizer-state floats per parameter: Adam(W) 2, SGD 1 (0 without momentum), Lion 1. */
int zero_optim_state_count(zero_optim_type t, float momentum);

typedef struct zero_optim_hparams {
    zero_optim_type type;
    float lr;
    float beta1, beta2;  /* Adam/Lion betas */
    float eps;
    float weight_decay;  /* applied only to elements the caller marks as decayed */
    float momentum;      /* SGD */
    int nesterov;        /* SGD */
    int bias_correction; /* Adam(W): 1 (default) */
} zero_optim_hparams;

void zero_optim_hparams_default(zero_optim_hparams *h, zero_optim_type t);

/* The learning rates zero accepts, wherever they come from (zero train --lr, a config's
 * optimizer.params.lr, scheduler.params.warmup_min_lr and warmup_max_lr): [0, ZERO_LR_MAX]. One
 * rule, so that a value the flag refuses cannot come in through the config. Adam moves each
 * weight by about lr per step: beyond 10 a step throws a model past what its forward pass and fp16
 * gradients can hold (lr 1000 in fp16 overflowed every step after the first). */
#define ZERO_LR_MAX 10.0

/* One optimizer step on n elements. `step` is the 1-based step count (Adam bias correction).
 * s0/s1: the state arrays (Adam: m, v; SGD: momentum buffer, s1 unused; Lion: m, s1 unused).
 * `decay` scales weight decay for this range (1 = decayed, 0 = excluded: biases, norms).
 * grad_scale multiplies each gradient before use. out/out_dt: fused write-back (may be NULL). */
zero_status zero_optim_step(const zero_optim_hparams *h, int64_t step, float *master, float *s0,
                            float *s1, const float *grad, float grad_scale, float decay,
                            size_t n, void *out, zero_dtype out_dt, zero_impl impl);

/* 8-bit optimizer states of n values: indices and a block's absmax each (blocks of 256). */
typedef struct zero_q8_state {
    uint8_t *m, *v;          /* first and second moment's indices (v NULL for a one-state optimizer) */
    float *m_absmax, *v_absmax; /* ceil(n / ZERO_QUANT_Q8_BLOCK) each (zero/quant.h) */
} zero_q8_state;

/* One optimizer step (Adam(W) only: ZERO_ERR_UNSUPPORTED naming no other) on n elements whose
 * states are 8-bit: each block's moments decoded to fp32, the fp32 step of zero_optim_step run on
 * them (the same element formula), the block's moments coded again with their new absmax. New
 * states are all-zero bytes (index 0, absmax 0: the value 0), as bitsandbytes' AdamW8bit starts
 * them. The other arguments are zero_optim_step's; st's arrays start at a block's first element. */
zero_status zero_optim_step_q8(const zero_optim_hparams *h, int64_t step, float *master, const zero_q8_state *st,
                               const float *grad, float grad_scale, float decay, size_t n, void *out,
                               zero_dtype out_dt);

/* Learning-rate schedules with DeepSpeed's semantics. */
typedef enum zero_sched_type {
    ZERO_SCHED_CONSTANT = 0,
    ZERO_SCHED_WARMUP_LR = 1,        /* warmup_min_lr -> warmup_max_lr over warmup_num_steps, then flat */
    ZERO_SCHED_WARMUP_DECAY_LR = 2,  /* WarmupLR, then linear decay to 0 at total_num_steps */
    ZERO_SCHED_WARMUP_COSINE_LR = 3, /* warmup ratio, then cosine to cos_min_ratio * lr */
} zero_sched_type;

typedef struct zero_sched {
    zero_sched_type type;
    double warmup_min_lr, warmup_max_lr;
    int64_t warmup_num_steps;
    int warmup_type_log;   /* 1: DeepSpeed's default "log" warmup; 0: "linear" */
    int64_t total_num_steps;
    double warmup_min_ratio, cos_min_ratio; /* WarmupCosineLR */
} zero_sched;

const char *zero_sched_name(zero_sched_type t);
zero_status zero_sched_parse(const char *name, zero_sched_type *out);
/* The learning rate for optimizer step `step` (0-based: the first update uses step 0), given
 * the optimizer's base lr (used by CONSTANT and WarmupCosineLR). */
double zero_sched_lr(const zero_sched *s, double base_lr, int64_t step);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_OPTIM_H */
