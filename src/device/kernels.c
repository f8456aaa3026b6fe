/* The device's kernels, one body each, run where the backend runs device work: on the caller
 * (cpu), in the fake device's worker process (fake). Element formulas the engine shares with its
 * host paths belong here as the engine moves onto the device (docs/DEVICE.md). */
#include "device/internal.h"

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

const zero__kernel_fn zero__dev_kernels[ZERO__K_COUNT] = {
    [ZERO__K_FILL_F32] = k_fill_f32,
    [ZERO__K_AXPY_F32] = k_axpy_f32,
};
