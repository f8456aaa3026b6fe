/* Private to the optim layer: the per-step constants every kernel reads, the per-element scalar
 * bodies (the reference, also used for vector tails) and the per-ISA kernel entry points. */
#ifndef ZERO_OPTIM_INTERNAL_H
#define ZERO_OPTIM_INTERNAL_H

#include "common/dtype_impl.h"
#include "zero/optim.h"

#include <math.h>

/* Everything a kernel needs for one step, computed once by zero_optim_step (in double, rounded
 * to float) so that every implementation reads the same float constants. */
typedef struct zero__optim_k {
    zero_optim_type type;
    float grad_scale;
    float lr;
    float beta1, beta2, omb1, omb2; /* omb = 1 - beta, rounded once */
    float eps;
    float step_size; /* Adam(W): lr / (1 - beta1^step); lr without bias correction */
    float bc2_sqrt;  /* Adam(W): sqrt(1 - beta2^step); 1 without bias correction */
    int l2;          /* Adam, SGD: grad += wd * p (only when wd != 0) */
    float wd;        /* weight_decay * decay */
    int decoupled;   /* AdamW, Lion: p *= decay_mul before the update (only when wd != 0) */
    float decay_mul; /* 1 - lr * wd */
    float momentum;  /* SGD */
    int nesterov;    /* SGD */
    int first_step;  /* SGD: step == 1, the momentum buffer starts as the gradient */
} zero__optim_k;

/* A kernel on n elements: p (master), s0/s1 (states), g (gradient); out: the write-back of
 * element 0 of this range in out_dt, or NULL. Vector kernels equal the scalar one bitwise. */
typedef void (*zero__optim_kernel)(const zero__optim_k *k, float *p, float *s0, float *s1,
                                   const float *g, size_t n, void *out, zero_dtype out_dt);

void zero__optim_scalar(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                        size_t n, void *out, zero_dtype out_dt);
void zero__optim_avx2(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                      size_t n, void *out, zero_dtype out_dt);
void zero__optim_avx512(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                        size_t n, void *out, zero_dtype out_dt);

/* The scalar reference, one element each. Every operation is a single IEEE float operation
 * in a fixed order (no fma: the files that use these are compiled with fp-contract off), which
 * the vector kernels repeat lane by lane: that is what makes them bitwise equal. */
static inline void zero__adam_elem(const zero__optim_k *k, float *p, float *m, float *v, float g0) {
    float g = g0 * k->grad_scale;
    float x = *p;
    if (k->l2) g = g + k->wd * x;
    if (k->decoupled) x = x * k->decay_mul;
    float mm = k->beta1 * *m + k->omb1 * g;
    float vv = k->beta2 * *v + k->omb2 * (g * g);
    float denom = sqrtf(vv) / k->bc2_sqrt + k->eps;
    x = x - k->step_size * (mm / denom);
    *m = mm;
    *v = vv;
    *p = x;
}

static inline void zero__sgd_elem(const zero__optim_k *k, float *p, float *buf, float g0) {
    float g = g0 * k->grad_scale;
    float x = *p;
    if (k->l2) g = g + k->wd * x;
    if (buf) {
        float b = k->first_step ? g : k->momentum * *buf + g;
        *buf = b;
        g = k->nesterov ? g + k->momentum * b : b;
    }
    *p = x - k->lr * g;
}

static inline void zero__lion_elem(const zero__optim_k *k, float *p, float *m, float g0) {
    float g = g0 * k->grad_scale;
    float x = *p;
    if (k->decoupled) x = x * k->decay_mul;
    float c = k->beta1 * *m + k->omb1 * g;
    /* sign(c); a zero stays a zero and a NaN stays a NaN, as torch.sign does */
    float u = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : c);
    *p = x - k->lr * u;
    *m = k->beta2 * *m + k->omb2 * g;
}

static inline void zero__store_out(void *out, zero_dtype dt, size_t i, float x) {
    if (dt == ZERO_DTYPE_BF16) ((uint16_t *)out)[i] = zero__fp32_to_bf16_bits(x);
    else if (dt == ZERO_DTYPE_FP16) ((uint16_t *)out)[i] = zero__fp32_to_fp16_bits(x);
    else ((float *)out)[i] = x;
}

/* The scalar loop over [i0, n): the reference kernel, and the tails of the vector kernels. */
static inline void zero__optim_scalar_range(const zero__optim_k *k, float *p, float *s0, float *s1,
                                            const float *g, size_t i0, size_t n, void *out,
                                            zero_dtype out_dt) {
    for (size_t i = i0; i < n; i++) {
        switch (k->type) {
        case ZERO_OPTIM_ADAMW:
        case ZERO_OPTIM_ADAM: zero__adam_elem(k, p + i, s0 + i, s1 + i, g[i]); break;
        case ZERO_OPTIM_SGD: zero__sgd_elem(k, p + i, s0 ? s0 + i : NULL, g[i]); break;
        case ZERO_OPTIM_LION: zero__lion_elem(k, p + i, s0 + i, g[i]); break;
        }
        if (out) zero__store_out(out, out_dt, i, p[i]);
    }
}

#endif
