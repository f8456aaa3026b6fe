/* The loss scaler: static, none (bf16/fp32), and dynamic with hysteresis, exactly the rules of
 * include/zero/precision.h (DeepSpeed's DynamicLossScaler, scale factor 2). */
#include "common/internal.h"
#include "zero/precision.h"

#include <math.h>
#include <string.h>

/* Arguments out of range cannot be refused (the call returns nothing): they are brought to
 * the nearest meaningful value instead, and the config layer is where users get told. */
void zero_loss_scaler_init(zero_loss_scaler *s, double static_scale, int initial_scale_power,
                           int64_t window, int hysteresis, double min_scale,
                           int consecutive_hysteresis) {
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->window = window < 1 ? 1 : window;
    s->hysteresis = hysteresis < 1 ? 1 : hysteresis;
    s->delayed_shift = s->hysteresis;
    s->consecutive_hysteresis = consecutive_hysteresis != 0;
    s->iter = 0;
    s->last_overflow_iter = -1;
    if (static_scale > 0 && isfinite(static_scale)) {
        s->dynamic = 0;
        s->scale = static_scale;
        s->min_scale = static_scale;
        return;
    }
    s->dynamic = 1;
    if (initial_scale_power < -1022) initial_scale_power = -1022;
    if (initial_scale_power > 1023) initial_scale_power = 1023;
    s->scale = ldexp(1.0, initial_scale_power);
    s->min_scale = min_scale > 0 && isfinite(min_scale) ? min_scale : 1.0; /* DeepSpeed's default */
}

void zero_loss_scaler_init_none(zero_loss_scaler *s) { zero_loss_scaler_init(s, 1.0, 0, 1, 1, 1.0, 0); }

void zero_loss_scaler_update(zero_loss_scaler *s, int overflow) {
    if (!s) return;
    if (s->dynamic) {
        if (overflow) {
            if (s->delayed_shift == 1 || s->scale == s->min_scale) {
                double next = s->scale / 2.0;
                s->scale = next > s->min_scale ? next : s->min_scale;
            } else {
                s->delayed_shift -= 1;
            }
            s->last_overflow_iter = s->iter;
        } else {
            if (s->consecutive_hysteresis) s->delayed_shift = s->hysteresis;
            const int64_t window = s->window > 0 ? s->window : 1; /* a struct edited by hand */
            if ((s->iter - s->last_overflow_iter) % window == 0) {
                if (!s->consecutive_hysteresis) s->delayed_shift = s->hysteresis;
                s->scale *= 2.0;
            }
        }
    }
    s->iter += 1;
}
