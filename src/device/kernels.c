/* The device's kernels, one body each, run where the backend runs device work: on the caller
 * (cpu), in the fake device's worker process (fake). They loop over the kernel layer's element
 * formulas (kernels/elem.h), which the host references and src/cuda/kernels.cu run too, so a
 * device result equals the host's bit for bit (test_device). */
#include "device/internal.h"
#include "zero/optim.h"

static void k_fill_f32(const zero__kcall *k) {
    float *p = k->p[0];
    const float v = (float)k->a[0];
    for (uint64_t i = 0; i < k->n; i++) p[i] = v;
}

static void k_axpy_f32(const zero__kcall *k) {
    float *y = k->p[0];
    const float *x = k->p[1];
    const float a = (float)k->a[0];
    for (uint64_t i = 0; i < k->n; i++) y[i] += a * x[i];
}

static void k_f32_to_bf16(const zero__kcall *k) {
    const float *x = k->p[0];
    uint16_t *y = k->p[1];
    for (uint64_t i = 0; i < k->n; i++) y[i] = zero__fp32_to_bf16_bits(x[i]);
}

static void k_f32_to_fp16(const zero__kcall *k) {
    const float *x = k->p[0];
    uint16_t *y = k->p[1];
    for (uint64_t i = 0; i < k->n; i++) y[i] = zero__fp32_to_fp16_bits(x[i]);
}

/* The optimizer's step: the same element steps, in the same order, as the host reference. */
static void k_optim(const zero__kcall *k) {
    float *p = k->p[0], *s0 = k->p[1], *s1 = k->p[2];
    const float *g = k->p[3];
    const zero__optim_k *c = &k->optim;
    for (uint64_t i = 0; i < k->n; i++) {
        switch (c->type) {
        case ZERO_OPTIM_ADAMW:
        case ZERO_OPTIM_ADAM: zero__adam_elem(c, p + i, s0 + i, s1 + i, g[i]); break;
        case ZERO_OPTIM_SGD: zero__sgd_elem(c, p + i, s0 ? s0 + i : NULL, g[i]); break;
        case ZERO_OPTIM_LION: zero__lion_elem(c, p + i, s0 + i, g[i]); break;
        default: break;
        }
    }
}

const zero__kernel_fn zero__dev_kernels[ZERO__K_COUNT] = {
    [ZERO__K_FILL_F32] = k_fill_f32,       [ZERO__K_AXPY_F32] = k_axpy_f32, [ZERO__K_F32_TO_BF16] = k_f32_to_bf16,
    [ZERO__K_F32_TO_FP16] = k_f32_to_fp16, [ZERO__K_OPTIM] = k_optim,
};
