/* Learning-rate schedules with DeepSpeed's semantics (deepspeed/runtime/lr_schedules.py:
 * WarmupLR, WarmupDecayLR, WarmupCosineLR), as a pure function of the optimizer step. */
#include "common/internal.h"
#include "zero/optim.h"

#include <math.h>
#include <strings.h>

const char *zero_sched_name(zero_sched_type t) {
    switch (t) {
    case ZERO_SCHED_CONSTANT: return "constant";
    case ZERO_SCHED_WARMUP_LR: return "WarmupLR";
    case ZERO_SCHED_WARMUP_DECAY_LR: return "WarmupDecayLR";
    case ZERO_SCHED_WARMUP_COSINE_LR: return "WarmupCosineLR";
    }
    return "invalid";
}

zero_status zero_sched_parse(const char *name, zero_sched_type *out) {
    if (!name || !out) return ZERO_ERR_INVALID_ARG;
    if (!strcasecmp(name, "none")) {
        *out = ZERO_SCHED_CONSTANT;
        return ZERO_OK;
    }
    for (int t = ZERO_SCHED_CONSTANT; t <= ZERO_SCHED_WARMUP_COSINE_LR; t++) {
        if (!strcasecmp(name, zero_sched_name((zero_sched_type)t))) {
            *out = (zero_sched_type)t;
            return ZERO_OK;
        }
    }
    /* DeepSpeed's other schedulers: known, not built */
    if (!strcasecmp(name, "OneCycle") || !strcasecmp(name, "LRRangeTest")) return ZERO_ERR_UNSUPPORTED;
    return ZERO_ERR_INVALID_ARG;
}

/* DeepSpeed's warmup fraction at iteration `step` < W (W already raised to at least 2):
 * log: log(step + 1) / log(W), computed as DeepSpeed does (inverse_log_warm_up * log(step+1));
 * linear: step / W. */
static double warmup_gamma(const zero_sched *s, int64_t step, int64_t W) {
    if (s->warmup_type_log) return (1.0 / log((double)W)) * log((double)step + 1.0);
    return (double)step / (double)W;
}

double zero_sched_lr(const zero_sched *s, double base_lr, int64_t step) {
    if (!s) return base_lr;
    /* DeepSpeed: self.warmup_num_steps = max(2, warmup_num_steps) */
    const int64_t W = s->warmup_num_steps < 2 ? 2 : s->warmup_num_steps;
    const int64_t T = s->total_num_steps;
    switch (s->type) {
    case ZERO_SCHED_CONSTANT: return base_lr;
    case ZERO_SCHED_WARMUP_LR:
    case ZERO_SCHED_WARMUP_DECAY_LR: {
        const double lo = s->warmup_min_lr;
        /* a negative (unset) warmup_max_lr means the optimizer's lr, as DeepSpeed's None does */
        const double hi = s->warmup_max_lr >= 0 ? s->warmup_max_lr : base_lr;
        if (step < 0) return lo;
        double gamma;
        if (step < W) gamma = warmup_gamma(s, step, W);
        else if (s->type == ZERO_SCHED_WARMUP_LR) gamma = 1.0;
        else {
            const double span = (double)(T - W) > 1.0 ? (double)(T - W) : 1.0;
            gamma = (double)(T - step) / span;
            if (gamma < 0.0) gamma = 0.0;
        }
        return lo + (hi - lo) * gamma;
    }
    case ZERO_SCHED_WARMUP_COSINE_LR: {
        if (step < 0) return 0.0;
        double ratio;
        if (step < W) {
            ratio = s->warmup_min_ratio + warmup_gamma(s, step, W) * (1.0 - s->warmup_min_ratio);
        } else {
            const double done = (double)(step - W + 1);
            const double span = (double)(T - W) > 1.0 ? (double)(T - W) : 1.0;
            double progress = done / span;
            if (progress > 1.0) progress = 1.0; /* past the end: stay at the floor */
            ratio = s->cos_min_ratio + (1.0 - s->cos_min_ratio) * ((1.0 + cos(M_PI * progress)) / 2.0);
            if (ratio < 0.0) ratio = 0.0;
        }
        return base_lr * ratio;
    }
    }
    return NAN; /* an invalid type: a NaN lr is refused by zero_optim_step */
}
