// Device kernels for the GPU build: fp32 <-> bf16/fp16 conversion and the fused AdamW step with
// the half-precision write-back, the same formulas as the CPU kernels of src/optim (docs/KERNELS.md).
// Compiled when nvcc is found (ZERO_CUDA=AUTO); nothing here runs on a machine without a GPU.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/cuda.h"

namespace {

__global__ void f32_to_bf16(const float *src, __nv_bfloat16 *dst, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2bfloat16_rn(src[i]);
}

__global__ void f32_to_f16(const float *src, __half *dst, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2half_rn(src[i]);
}

// AdamW on n elements: p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
// p -= lr * (m / bc1) / (sqrt(v / bc2) + eps); out (optional) = round(p) in out_dt.
__global__ void adamw(float *p, float *m, float *v, const float *g, float grad_scale, float lr, float b1, float b2,
                      float eps, float wd, float bc1, float bc2, size_t n, void *out, int out_dt) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i] * grad_scale;
        float pi = p[i] - lr * wd * p[i];
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        pi -= lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
        p[i] = pi;
        m[i] = mi;
        v[i] = vi;
        if (out_dt == 1) static_cast<__nv_bfloat16 *>(out)[i] = __float2bfloat16_rn(pi);
        else if (out_dt == 2) static_cast<__half *>(out)[i] = __float2half_rn(pi);
    }
}

int grid_for(size_t n) {
    size_t blocks = (n + 255) / 256;
    return blocks > 65535 ? 65535 : (blocks ? (int)blocks : 1);
}

}  // namespace

extern "C" int zero__cuda_f32_to_half(const float *src, void *dst, int dst_bf16, size_t n, void *stream) {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    if (dst_bf16) f32_to_bf16<<<grid_for(n), 256, 0, s>>>(src, static_cast<__nv_bfloat16 *>(dst), n);
    else f32_to_f16<<<grid_for(n), 256, 0, s>>>(src, static_cast<__half *>(dst), n);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

extern "C" int zero__cuda_adamw(float *p, float *m, float *v, const float *g, float grad_scale, float lr, float b1,
                                float b2, float eps, float wd, long long step, size_t n, void *out, int out_dt,
                                void *stream) {
    const float bc1 = 1.0f - powf(b1, (float)step), bc2 = 1.0f - powf(b2, (float)step);
    adamw<<<grid_for(n), 256, 0, static_cast<cudaStream_t>(stream)>>>(p, m, v, g, grad_scale, lr, b1, b2, eps, wd, bc1,
                                                                       bc2, n, out, out_dt);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}
