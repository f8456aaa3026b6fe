/* DeepSpeed's defaults, and zero_config_resolve: "auto" fields, the batch triple for a world
 * size, every value's range (the same table the loader uses) and the combinations of values. */
#include "config/internal.h"
#include "partition/own.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void zero_config_default(zero_config *cfg) {
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->steps_per_print = 10;
    cfg->optim_states_min = 4096; /* ZERO_QUANT_Q8_MIN */
    cfg->quant_double = 1;
    zero_optim_hparams_default(&cfg->optim, ZERO_OPTIM_ADAMW);
    cfg->sched_enabled = 0;
    cfg->sched.type = ZERO_SCHED_CONSTANT;
    cfg->sched.warmup_min_lr = 0.0;
    cfg->sched.warmup_max_lr = 1e-3;
    cfg->sched.warmup_num_steps = 1000;
    cfg->sched.warmup_type_log = 1;
    cfg->sched.total_num_steps = 0;
    cfg->sched.warmup_min_ratio = 0.0;
    cfg->sched.cos_min_ratio = 1e-4;

    cfg->precision = ZERO_DTYPE_FP32;
    cfg->loss_scale = 0.0;
    cfg->initial_scale_power = 16;
    cfg->loss_scale_window = 1000;
    cfg->hysteresis = 2;
    cfg->min_loss_scale = 1.0;
    cfg->consecutive_hysteresis = 0;

    cfg->stage = 0;
    cfg->contiguous_gradients = 1;
    cfg->overlap_comm = -1;
    cfg->reduce_scatter = 1;
    cfg->allgather_partitions = 1;
    cfg->round_robin_gradients = 0;
    cfg->reduce_bucket_size = 500000000;
    cfg->allgather_bucket_size = 500000000;
    cfg->sub_group_size = 1000000000;
    cfg->prefetch_bucket_size = 50000000;
    cfg->param_persistence_threshold = 100000;
    cfg->max_live_parameters = 1000000000;
    cfg->max_reuse_distance = 1000000000;
    cfg->gather_16bit_weights_on_model_save = 0;
    cfg->hpz_partition_size = 1;
    cfg->quant_weights = 0;
    cfg->quant_weights_block = 2048;
    cfg->quant_grads = 0;
    cfg->quant_grads_block = 2048;
    zero_offload_config *o[2] = {&cfg->offload_optimizer, &cfg->offload_param};
    for (int i = 0; i < 2; i++) {
        o[i]->device = ZERO_OFFLOAD_NONE;
        o[i]->buffer_size = 100000000;
        o[i]->max_in_cpu = 1000000000;
        o[i]->ratio = 1.0;
    }
    cfg->offload_optimizer.buffer_count = 4;
    cfg->offload_param.buffer_count = 5;

    cfg->aio_block_size = 1048576;
    cfg->aio_queue_depth = 8;
    cfg->aio_intra_op_parallelism = 1;
    cfg->aio_single_submit = 0;
    cfg->aio_overlap_events = 1;

    cfg->check_divergence = 1;
    cfg->reuse_buffers = 1;
    cfg->deterministic_atom = 1;
    cfg->align_bytes = 64;
    cfg->frozen_dtype = ZERO_DTYPE_COUNT;
    cfg->save_frozen = 0;
    memset(&cfg->lora, 0, sizeof cfg->lora);
    cfg->lora.alpha = 8;
    cfg->auto_fields = 0;
}

zero_status zero__zc_check_table(zc_ctx *c, const zc_key *keys, const zero_config *cfg) {
    for (const zc_key *k = keys; k->name; k++) {
        if (k->types && c->type_bit && !(k->types & c->type_bit)) continue;
        if (k->flags & (ZC_NO_EFFECT | ZC_OFF_ONLY | ZC_NOSAVE)) continue; /* nothing stored */
        size_t old = zero__zc_push(c, k->name);
        zero_status st = ZERO_OK;
        const char *f = (const char *)cfg + k->off;
        double v = 0;
        if (k->check) st = k->check(c, k, cfg);
        else {
            switch (k->kind) {
            case ZC_OBJECT: st = zero__zc_check_table(c, k->children, cfg); break;
            case ZC_BOOL: {
                int b = *(const int *)f;
                if (!(b == 0 || b == 1 || ((k->flags & ZC_UNSET_NEG) && b == -1)))
                    st = zero__zc_fail(c, ZERO_ERR_CONFIG, "%d is not a boolean (expected 0 or 1%s)", b,
                                       (k->flags & ZC_UNSET_NEG) ? ", or -1 for the default" : "");
                break;
            }
            case ZC_INT: v = *(const int *)f; goto number;
            case ZC_I64: v = (double)*(const int64_t *)f; goto number;
            case ZC_F32: v = *(const float *)f; goto number;
            case ZC_F64:
                v = *(const double *)f;
            number:
                if ((k->flags & ZC_UNSET0) && v == 0) break;
                if ((k->flags & ZC_UNSET_NEG) && v == -1) break;
                st = zero__zc_check_number(c, k, v);
                break;
            case ZC_CUSTOM: break;
            }
        }
        zero__zc_pop(c, old);
        if (st) return st;
    }
    return ZERO_OK;
}

static const char *device_name(zero_offload_device d) {
    return d == ZERO_OFFLOAD_CPU ? "cpu" : d == ZERO_OFFLOAD_NVME ? "nvme" : "none";
}

static zero_status fail(zero_error *err, zero_status st, const char *fmt, ...) ZERO__PRINTF(3, 4);
static zero_status fail(zero_error *err, zero_status st, const char *fmt, ...) {
    if (!err) return st;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return st;
}

/* train = micro * accum * world; 0 = not given (DeepSpeed's rules, but a remainder is an error
 * where DeepSpeed rounds down silently). */
static zero_status resolve_batch(zero_config *t, int64_t w, zero_error *err) {
    int64_t T = t->train_batch_size, M = t->micro_batch, A = t->grad_accum, prod;
    if (T && M && A) {
        if (__builtin_mul_overflow(M, A, &prod) || __builtin_mul_overflow(prod, w, &prod) || prod != T)
            return fail(err, ZERO_ERR_CONFIG,
                        "train_batch_size %lld != train_micro_batch_size_per_gpu %lld * gradient_accumulation_steps "
                        "%lld * world size %lld (= %lld)",
                        (long long)T, (long long)M, (long long)A, (long long)w, (long long)(M * A * w));
        return ZERO_OK;
    }
    if (T && M) {
        if (__builtin_mul_overflow(M, w, &prod) || T % prod)
            return fail(err, ZERO_ERR_CONFIG,
                        "train_batch_size %lld is not divisible by train_micro_batch_size_per_gpu %lld * world size "
                        "%lld (= %lld): gradient_accumulation_steps would not be an integer",
                        (long long)T, (long long)M, (long long)w, (long long)(M * w));
        t->grad_accum = T / prod;
        return ZERO_OK;
    }
    if (T && A) {
        if (__builtin_mul_overflow(A, w, &prod) || T % prod)
            return fail(err, ZERO_ERR_CONFIG,
                        "train_batch_size %lld is not divisible by gradient_accumulation_steps %lld * world size "
                        "%lld (= %lld): train_micro_batch_size_per_gpu would not be an integer",
                        (long long)T, (long long)A, (long long)w, (long long)(A * w));
        t->micro_batch = T / prod;
        return ZERO_OK;
    }
    if (T) {
        if (T % w)
            return fail(err, ZERO_ERR_CONFIG,
                        "train_batch_size %lld is not divisible by the world size %lld: "
                        "train_micro_batch_size_per_gpu would not be an integer",
                        (long long)T, (long long)w);
        t->micro_batch = T / w;
        t->grad_accum = 1;
        return ZERO_OK;
    }
    if (!M) M = 1;
    if (!A) A = 1;
    if (__builtin_mul_overflow(M, A, &prod) || __builtin_mul_overflow(prod, w, &prod))
        return fail(err, ZERO_ERR_CONFIG,
                    "train_micro_batch_size_per_gpu %lld * gradient_accumulation_steps %lld * world size %lld "
                    "overflows a 64-bit train_batch_size", (long long)M, (long long)A, (long long)w);
    t->micro_batch = M;
    t->grad_accum = A;
    t->train_batch_size = prod;
    return ZERO_OK;
}

/* The ownership plan's rules of the config (src/partition/own.h): which ones it breaks. */
static unsigned plan_rules(const zero_config *t, int world) {
    zero__own_in in;
    zero__own_in_config(&in, t, world);
    zero__own_plan plan;
    zero__own_plan_of(&in, &plan);
    return plan.invalid;
}

static zero_status check_offload(const zero_config *t, int world, const zero_offload_config *o, const char *name,
                                 int is_param, zero_error *err) {
    if (o->device == ZERO_OFFLOAD_NONE) return ZERO_OK;
    const unsigned bad = plan_rules(t, world);
    if (is_param && (bad & OWN_PARAM_OFFLOAD_STAGE))
        return fail(err, ZERO_ERR_CONFIG,
                    "zero_optimization.%s.device: \"%s\" needs zero_optimization.stage 3 (stage is %d): only stage 3 "
                    "partitions the parameters",
                    name, device_name(o->device), t->stage);
    if (!is_param && (bad & OWN_OPTIM_OFFLOAD_STAGE))
        return fail(err, ZERO_ERR_CONFIG,
                    "zero_optimization.%s.device: \"%s\" needs zero_optimization.stage 1, 2 or 3 (stage is 0)", name,
                    device_name(o->device));
    if (o->device == ZERO_OFFLOAD_NVME && !o->nvme_path[0])
        return fail(err, ZERO_ERR_CONFIG, "zero_optimization.%s.nvme_path: required when device is \"nvme\"", name);
    if (o->device == ZERO_OFFLOAD_CPU)
        zero__log(ZERO_LOG_INFO,
                  "config: zero_optimization.%s.device \"cpu\": a CPU rank already keeps these in host memory; "
                  "nothing to offload",
                  name);
    return ZERO_OK;
}

zero_status zero__config_check_states(const zero_config *t, char *msg, size_t cap) {
    const char *key = "zero_extensions.optimizer_states";
    if (t->optim_states != ZERO_OPTIM_STATES_FP32 && t->optim_states != ZERO_OPTIM_STATES_INT8) {
        if (msg) zero__errorf(msg, cap, "%s: %d: expected fp32 (0) or int8 (1)", key, t->optim_states);
        return ZERO_ERR_CONFIG;
    }
    if (t->optim_states == ZERO_OPTIM_STATES_FP32) return ZERO_OK;
    if (t->optim.type != ZERO_OPTIM_ADAMW && t->optim.type != ZERO_OPTIM_ADAM) {
        if (msg) zero__errorf(msg, cap, "%s: \"int8\" needs optimizer AdamW or Adam (its two moments are what is kept in "
                              "8 bits), not %s", key, zero_optim_name(t->optim.type));
        return ZERO_ERR_CONFIG;
    }
    if (t->optim_states_min < 0) {
        if (msg) zero__errorf(msg, cap, "zero_extensions.optimizer_states_min_size: %lld: expected an integer >= 0",
                              (long long)t->optim_states_min);
        return ZERO_ERR_CONFIG;
    }
    return ZERO_OK;
}

int zero_config_base_format(const zero_config *cfg) {
    if (!cfg) return ZERO_QFMT_NONE;
    if (cfg->quant_base == ZERO_QFMT_NF4 && cfg->quant_double) return ZERO_QFMT_NF4_DQ;
    return cfg->quant_base == ZERO_QFMT_NF4 || cfg->quant_base == ZERO_QFMT_INT8 ? cfg->quant_base : ZERO_QFMT_NONE;
}

zero_status zero__config_check_hpz(const zero_config *t, int world, char *msg, size_t cap) {
    const int h = t->hpz_partition_size;
    const char *key = "zero_optimization.zero_hpz_partition_size";
    const unsigned bad = plan_rules(t, world);
    if (bad & OWN_HPZ_RANGE) {
        if (msg) zero__errorf(msg, cap, "%s: %d is out of range (expected an integer >= 1: 1 is off, else the ranks "
                              "of a group, usually the ranks per node)", key, h);
        return ZERO_ERR_CONFIG;
    }
    if (bad & OWN_HPZ_STAGE) {
        if (msg) zero__errorf(msg, cap, "%s: %d needs zero_optimization.stage 3 (stage is %d): hpZ partitions the "
                              "parameters a second time, and only stage 3 partitions them", key, h, t->stage);
        return ZERO_ERR_CONFIG;
    }
    if (bad & OWN_HPZ_WORLD) {
        if (msg) zero__errorf(msg, cap, "%s: %d %s the world size %d (expected a divisor of the world size: the ranks "
                              "per node, usually)", key, h, h > world ? "is larger than" : "does not divide", world);
        return ZERO_ERR_CONFIG;
    }
    if (bad & OWN_HPZ_NVME) {
        if (msg) zero__errorf(msg, cap, "%s: %d with zero_optimization.offload_param.device \"nvme\" is not supported "
                              "yet (only 1 is accepted with parameter offload)", key, h);
        return ZERO_ERR_UNSUPPORTED;
    }
    return ZERO_OK;
}

zero_status zero_config_resolve(zero_config *cfg, int world, zero_error *err) {
    if (!cfg) return fail(err, ZERO_ERR_INVALID_ARG, "zero_config_resolve: cfg is NULL");
    if (world < 1) return fail(err, ZERO_ERR_INVALID_ARG, "world size %d: expected an integer >= 1", world);
    zero_config t = *cfg; /* committed only when every check passes */
    if (t.auto_fields & ZERO_AUTO_SCHED_WARMUP_MAX_LR) t.sched.warmup_max_lr = t.optim.lr;

    zc_ctx c;
    zero__zc_init(&c, err);
    zero_status st = zero__zc_check_table(&c, zero__config_schema(), &t);
    if (st) return st;
    if (t.precision != ZERO_DTYPE_FP32 && t.precision != ZERO_DTYPE_BF16 && t.precision != ZERO_DTYPE_FP16)
        return fail(err, ZERO_ERR_CONFIG, "precision: dtype %d is not a training precision (expected fp32, bf16 or fp16)",
                    (int)t.precision);

    if ((st = resolve_batch(&t, world, err))) return st;
    if (t.overlap_comm < 0) t.overlap_comm = t.stage == 3;

    if ((st = check_offload(&t, world, &t.offload_optimizer, "offload_optimizer", 0, err))) return st;
    if ((st = check_offload(&t, world, &t.offload_param, "offload_param", 1, err))) return st;
    if ((st = zero__config_check_states(&t, err ? err->msg : NULL, err ? sizeof err->msg : 0))) return st;
    /* the loader takes 1 only; a program may have set the field directly */
    if (t.offload_optimizer.ratio != 1.0)
        return fail(err, ZERO_ERR_UNSUPPORTED,
                    "zero_optimization.offload_optimizer.ratio: %g is not supported yet (only 1 is accepted: zero "
                    "offloads all of the master and optimizer states)",
                    t.offload_optimizer.ratio);

    if ((st = zero__config_check_hpz(&t, world, err ? err->msg : NULL, err ? sizeof err->msg : 0))) return st;

    if (t.optim.type == ZERO_OPTIM_SGD && t.optim.nesterov && !(t.optim.momentum > 0))
        return fail(err, ZERO_ERR_CONFIG,
                    "optimizer.params.nesterov: true needs optimizer.params.momentum > 0 (momentum is %g)",
                    (double)t.optim.momentum);

    if (t.sched_enabled &&
        (t.sched.type == ZERO_SCHED_WARMUP_DECAY_LR || t.sched.type == ZERO_SCHED_WARMUP_COSINE_LR)) {
        const char *name = t.sched.type == ZERO_SCHED_WARMUP_DECAY_LR ? "WarmupDecayLR" : "WarmupCosineLR";
        if (t.sched.total_num_steps < 1) {
            if (t.auto_fields & ZERO_AUTO_SCHED_TOTAL_NUM_STEPS)
                return fail(err, ZERO_ERR_CONFIG,
                            "scheduler.params.total_num_steps: \"auto\" needs the run's number of steps, which the "
                            "config does not know: set it (zero train sets it from --steps)");
            return fail(err, ZERO_ERR_CONFIG, "scheduler.params.total_num_steps: required by %s (expected an integer >= 1)",
                        name);
        }
        if (t.sched.total_num_steps < t.sched.warmup_num_steps)
            zero__log(ZERO_LOG_WARN,
                      "config: scheduler.params.total_num_steps %lld is less than warmup_num_steps %lld: the decay "
                      "starts right after warmup (DeepSpeed warns likewise)",
                      (long long)t.sched.total_num_steps, (long long)t.sched.warmup_num_steps);
    }

    t.auto_fields = 0;
    *cfg = t;
    return ZERO_OK;
}
