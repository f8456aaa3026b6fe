/* zero/precision.h — loss scaling for fp16 training, with DeepSpeed's semantics.
 *
 * Dynamic scaling starts at 2^initial_scale_power; the field `delayed_shift` counts the overflows
 * still tolerated before the scale drops (DeepSpeed's cur_hysteresis; `hysteresis` is its
 * configured value). Exactly DeepSpeed's DynamicLossScaler.update_scale:
 *   overflow:    if hysteresis == 1 or delayed_shift == 1: scale = max(scale / 2, min_scale)
 *                else: delayed_shift -= 1
 *                last_overflow_iter = iter
 *   no overflow: if consecutive_hysteresis: delayed_shift = hysteresis
 *                if (iter - last_overflow_iter) % window == 0:
 *                    if not consecutive_hysteresis: delayed_shift = hysteresis
 *                    scale *= 2
 *   iter += 1 after every step, skipped or not (iter starts at 0, last_overflow_iter at -1).
 * Static scaling (loss_scale > 0) never changes; bf16/fp32 use scale 1 and never skip on
 * account of the scaler (Inf/NaN gradients still skip the step and are reported).
 */
#ifndef ZERO_PRECISION_H
#define ZERO_PRECISION_H

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zero_loss_scaler {
    int dynamic;
    double scale;
    double min_scale;
    int64_t window;
    int hysteresis;
    int consecutive_hysteresis;
    int delayed_shift;
    int64_t iter;
    int64_t last_overflow_iter;
} zero_loss_scaler;

/* static_scale > 0: static scaling; 0: dynamic with the other parameters. */
void zero_loss_scaler_init(zero_loss_scaler *s, double static_scale, int initial_scale_power,
                           int64_t window, int hysteresis, double min_scale,
                           int consecutive_hysteresis);
/* Scale 1, never changes: for fp32 and bf16. */
void zero_loss_scaler_init_none(zero_loss_scaler *s);
/* Records the outcome of one step (overflow on any rank or not) and updates the scale. */
void zero_loss_scaler_update(zero_loss_scaler *s, int overflow);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_PRECISION_H */
