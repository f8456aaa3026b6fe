/* Private entry points of the GPU build's kernels (src/cuda/kernels.cu), callable from C.
 * Compile-only on machines without a GPU; the CPU kernels in src/optim are the reference. */
#ifndef ZERO_CUDA_H
#define ZERO_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* dst[i] = round-to-nearest-even(src[i]) as bf16 (dst_bf16 = 1) or fp16, on `stream`. 0 or -1. */
int zero__cuda_f32_to_half(const float *src, void *dst, int dst_bf16, size_t n, void *stream);
/* The fused AdamW step of zero_optim_step (decoupled decay, bias correction for 1-based `step`),
 * with the write-back of p to out in out_dt (0 none, 1 bf16, 2 fp16). 0 or -1. */
int zero__cuda_adamw(float *p, float *m, float *v, const float *g, float grad_scale, float lr, float b1, float b2,
                     float eps, float wd, long long step, size_t n, void *out, int out_dt, void *stream);

#ifdef __cplusplus
}
#endif
#endif
