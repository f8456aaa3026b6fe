/* Private entry point of the GPU kernels (src/cuda/kernels.cu), callable from C: the cuda
 * backend (src/cuda/device_cuda.c) launches the device layer's kernels by id through it. Every
 * element runs the body of src/cuda/bodies.h, the kernel layer's formula that the host reference
 * runs, compiled without fma contraction, so the bits are the host's (docs/KERNELS.md, "The kernel
 * layer"). */
#ifndef ZERO_CUDA_H
#define ZERO_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/elem.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Queues kernel `id` (a ZERO__K_* of src/device/internal.h) over n elements on the CUDA stream
 * `stream`, with the operands p and scalars a of the device layer's kernel call (their meaning per
 * id is that table's) and, for ZERO__K_OPTIM, the step's constants. The caller has checked the
 * call (zero__kcall_extents). Returns the launch's cudaError_t (0: queued); n == 0 queues nothing. */
int zero__cuda_kernel(int id, uint64_t n, void *const p[4], const double a[4], const zero__optim_k *optim,
                      void *stream);

/* The names cuBLASLt is opened by (dlopen): this toolkit's major version's soname, then any. */
#define ZERO__CUDA_STR_(x) #x
#define ZERO__CUDA_STR(x)  ZERO__CUDA_STR_(x)
#define ZERO__CUBLASLT_NAMES \
    { "libcublasLt.so." ZERO__CUDA_STR(ZERO_CUDA_MAJOR), "libcublasLt.so", NULL }

/* Queues the GEMM g (ZERO__K_GEMM: operands p[0] A, p[1] B, p[2] C, p[3] bias) on the CUDA stream
 * through cuBLASLt (src/cuda/gemm_cuda.c); 0, or nonzero with one line in why (cuBLASLt missing,
 * a call it refused, with the shapes). */
struct zero__gemm_k;
int zero__cuda_gemm(const struct zero__gemm_k *g, void *const p[4], void *stream, char *why, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
