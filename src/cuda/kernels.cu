// Device kernels for the GPU build: fp32 <-> bf16/fp16 conversion and the fused optimizer step
// with the half-precision write-back. Each thread runs the kernel layer's element formulas
// (src/kernels/elem.h), the CPU reference's text, compiled with --fmad=false (CMakeLists.txt): the
// same roundings in the same order, so the same bits. Compiled when nvcc is found
// (ZERO_CUDA=AUTO); nothing here runs on a machine without a GPU.
#include <cuda_runtime.h>

#include "cuda/cuda.h"
#include "zero/optim.h"

namespace {

// A grid-stride loop: element i of n for every thread of the grid.
#define ZERO_CUDA_FOR(i, n)                                                                                       \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

__global__ void f32_to_bf16(const float *src, uint16_t *dst, size_t n) {
    ZERO_CUDA_FOR(i, n) dst[i] = zero__fp32_to_bf16_bits(src[i]);
}

__global__ void f32_to_f16(const float *src, uint16_t *dst, size_t n) {
    ZERO_CUDA_FOR(i, n) dst[i] = zero__fp32_to_fp16_bits(src[i]);
}

__global__ void bf16_to_f32(const uint16_t *src, float *dst, size_t n) {
    ZERO_CUDA_FOR(i, n) dst[i] = zero__bf16_bits_to_fp32(src[i]);
}

__global__ void f16_to_f32(const uint16_t *src, float *dst, size_t n) {
    ZERO_CUDA_FOR(i, n) dst[i] = zero__fp16_bits_to_fp32(src[i]);
}

// zero__optim_scalar, one element a thread; k by value (kernel parameter memory).
__global__ void optim_step(zero__optim_k k, float *p, float *s0, float *s1, const float *g, size_t n, void *out,
                           int out_dt) {
    ZERO_CUDA_FOR(i, n) {
        switch (k.type) {
        case ZERO_OPTIM_ADAMW:
        case ZERO_OPTIM_ADAM: zero__adam_elem(&k, p + i, s0 + i, s1 + i, g[i]); break;
        case ZERO_OPTIM_SGD: zero__sgd_elem(&k, p + i, s0 ? s0 + i : nullptr, g[i]); break;
        case ZERO_OPTIM_LION: zero__lion_elem(&k, p + i, s0 + i, g[i]); break;
        }
        if (!out) continue;
        if (out_dt == 1) static_cast<uint16_t *>(out)[i] = zero__fp32_to_bf16_bits(p[i]);
        else if (out_dt == 2) static_cast<uint16_t *>(out)[i] = zero__fp32_to_fp16_bits(p[i]);
        else static_cast<float *>(out)[i] = p[i];
    }
}

int grid_for(size_t n) {
    size_t blocks = (n + 255) / 256;
    return blocks > 65535 ? 65535 : (blocks ? (int)blocks : 1);
}

}  // namespace

extern "C" int zero__cuda_f32_to_half(const float *src, uint16_t *dst, int bf16, size_t n, void *stream) {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (bf16) f32_to_bf16<<<grid_for(n), 256, 0, s>>>(src, dst, n);
    else f32_to_f16<<<grid_for(n), 256, 0, s>>>(src, dst, n);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int zero__cuda_half_to_f32(const uint16_t *src, float *dst, int bf16, size_t n, void *stream) {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (bf16) bf16_to_f32<<<grid_for(n), 256, 0, s>>>(src, dst, n);
    else f16_to_f32<<<grid_for(n), 256, 0, s>>>(src, dst, n);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int zero__cuda_optim(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g, size_t n,
                                void *out, int out_dt, void *stream) {
    if (n == 0) return 0;
    optim_step<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(*k, p, s0, s1, g, n, out, out_dt);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
