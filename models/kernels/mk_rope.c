/* models/kernels/mk_rope.c — the rotary embedding's cos/sin table: the inverse frequencies as
 * Hugging Face computes them in fp32 (default, linear, Llama 3 and LongRoPE scaling), angles p * inv_freq. */
#include <math.h>

#include "kernels/mk_internal.h"

zero_status mk_rope_table(float *cos_t, float *sin_t, int n_pos, int rot_dim, const mk_rope_freq *f) {
    if (!cos_t || !sin_t || !f || n_pos < 1 || rot_dim < 2 || rot_dim % 2 || !(f->theta > 1.0) ||
        !isfinite(f->theta))
        return ZERO_ERR_INVALID_ARG;
    if (f->scaling == MK_ROPE_LINEAR && !(f->factor > 0.0 && isfinite(f->factor)))
        return ZERO_ERR_INVALID_ARG;
    if (f->scaling == MK_ROPE_LLAMA3 &&
        !(f->factor > 0.0 && isfinite(f->factor) && f->low_freq_factor > 0.0 &&
          f->high_freq_factor > f->low_freq_factor && isfinite(f->high_freq_factor) &&
          f->original_max_pos > 0))
        return ZERO_ERR_INVALID_ARG;
    if (f->scaling == MK_ROPE_LONGROPE && !(f->ext_factors && f->attn_factor > 0.0 && isfinite(f->attn_factor)))
        return ZERO_ERR_INVALID_ARG;
    for (int i = 0; f->scaling == MK_ROPE_LONGROPE && i < rot_dim / 2; i++)
        if (!(f->ext_factors[i] > 0.0) || !isfinite(f->ext_factors[i])) return ZERO_ERR_INVALID_ARG;
    if (f->scaling != MK_ROPE_NONE && f->scaling != MK_ROPE_LINEAR && f->scaling != MK_ROPE_LLAMA3 &&
        f->scaling != MK_ROPE_LONGROPE)
        return ZERO_ERR_INVALID_ARG;
    const int half = rot_dim / 2;
    const float base = (float)f->theta, factor = (float)f->factor;
    for (int i = 0; i < half; i++) {
        /* inv_freq = 1 / base ** (arange(0, dim, 2) / dim), every step in fp32 */
        const float e = (float)(2 * i) / (float)rot_dim;
        float inv = 1.0f / (float)pow((double)base, (double)e);
        if (f->scaling == MK_ROPE_LINEAR) inv = inv / factor;
        if (f->scaling == MK_ROPE_LONGROPE) /* 1 / (ext * base ** e), each step in fp32 */
            inv = 1.0f / ((float)f->ext_factors[i] * (float)pow((double)base, (double)e));
        const float amp = f->scaling == MK_ROPE_LONGROPE ? (float)f->attn_factor : 1.0f;
        if (f->scaling == MK_ROPE_LLAMA3) {
            const float old_ctx = (float)f->original_max_pos;
            const float lf = (float)f->low_freq_factor;
            const float low_wl = (float)(f->original_max_pos / f->low_freq_factor);
            const float high_wl = (float)(f->original_max_pos / f->high_freq_factor);
            const float wl = (float)(2.0 * M_PI) / inv;
            float v = wl > low_wl ? inv / factor : inv;
            if (!(wl < high_wl) && !(wl > low_wl)) { /* medium frequencies: interpolate */
                const float smooth = (old_ctx / wl - lf) / (float)(f->high_freq_factor - f->low_freq_factor);
                v = (1.0f - smooth) * v / factor + smooth * v;
            }
            inv = v;
        }
        for (int p = 0; p < n_pos; p++) {
            const float ang = (float)p * inv;
            cos_t[(size_t)p * half + i] = (float)cos((double)ang) * amp;
            sin_t[(size_t)p * half + i] = (float)sin((double)ang) * amp;
        }
    }
    return ZERO_OK;
}
