/* Private entry points of the GPU build's kernels (src/cuda/kernels.cu), callable from C.
 * Compile-only on machines without a GPU. Every element runs the kernel layer's formula
 * (src/kernels/elem.h) that the CPU reference runs, compiled without fma contraction, so the bits
 * are the CPU's (docs/KERNELS.md, "The kernel layer"). */
#ifndef ZERO_CUDA_H
#define ZERO_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = src[i] narrowed to bf16 (bf16 = 1) or fp16 bits, as zero__fp32_to_bf16_bits /
 * zero__fp32_to_fp16_bits round, on `stream`. 0 or -1. */
int zero__cuda_f32_to_half(const float *src, uint16_t *dst, int bf16, size_t n, void *stream);
/* dst[i] = src[i] widened from bf16 (bf16 = 1) or fp16 bits, exactly. 0 or -1. */
int zero__cuda_half_to_f32(const uint16_t *src, float *dst, int bf16, size_t n, void *stream);
/* The step of zero_optim_step on n elements (AdamW, Adam, SGD with or without momentum, Lion, as
 * k->type says) with the per-step constants k (zero__optim_consts, src/optim/internal.h; passed
 * by value to the device): p master, s0/s1 the states (NULL where the optimizer keeps none),
 * g the gradient; with out, each updated element is also stored there in out_dt (0 fp32, 1 bf16,
 * 2 fp16). 0 or -1. */
int zero__cuda_optim(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g, size_t n, void *out,
                     int out_dt, void *stream);

#ifdef __cplusplus
}
#endif
#endif
