// The device layer's kernels on an NVIDIA GPU, one per id of src/device/internal.h's table. Each
// thread runs a body of src/cuda/bodies.h (the kernel layer's element formulas, src/kernels/elem.h),
// compiled with --fmad=false (CMakeLists.txt): the same roundings in the same order as the host
// reference, so the same bits; the sum of squares keeps the host's 16 lanes and fixed tree.
#include <cuda_runtime.h>

#include "cuda/bodies.h"
#include "cuda/cuda.h"
#include "device/kernel_ids.h"
#include "kernels/quant.h"

namespace {

constexpr int kThreads = 256;

// A grid-stride loop: element i of n for every thread of the grid.
#define ZERO_CUDA_FOR(i, n)                                                                                       \
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < (n); i += (uint64_t)gridDim.x * blockDim.x)

__global__ void fill_f32(float *y, float v, uint64_t n) { ZERO_CUDA_FOR(i, n) y[i] = v; }

__global__ void axpy_f32(float *y, const float *x, float a, uint64_t n) { ZERO_CUDA_FOR(i, n) zero__kb_axpy(y, x, a, i); }

__global__ void to_half(const float *x, uint16_t *y, int bf, uint64_t n) {
    ZERO_CUDA_FOR(i, n) y[i] = bf ? zero__fp32_to_bf16_bits(x[i]) : zero__fp32_to_fp16_bits(x[i]);
}

__global__ void widen(const uint16_t *x, float *y, int bf, uint64_t n) { ZERO_CUDA_FOR(i, n) y[i] = zero__kb_widen(bf, x[i]); }

__global__ void add(int dt, void *dst, const void *src, uint64_t n) { ZERO_CUDA_FOR(i, n) zero__kb_add(dt, dst, src, i); }

__global__ void accum_f32(int dt, void *dst, const float *src, uint64_t n) {
    ZERO_CUDA_FOR(i, n) zero__kb_accum(dt, dst, src, i);
}

// k by value (kernel parameter memory)
__global__ void optim(zero__optim_k k, float *p, float *s0, float *s1, const float *g, uint64_t n) {
    ZERO_CUDA_FOR(i, n) zero__kb_optim(&k, p, s0, s1, g, i);
}

// Block b of nb (block elements each, the last one shorter) to out[b]: a CUDA block holds
// kThreads / 16 groups of 16 threads, a group per block of the sum, a thread per lane.
__global__ void sumsq(int dt, const void *x, uint64_t n, uint64_t block, uint64_t nb, double *out) {
    __shared__ double lanes[kThreads];
    constexpr unsigned groups = kThreads / ZERO__KB_LANES;
    const unsigned lane = threadIdx.x % ZERO__KB_LANES, grp = threadIdx.x / ZERO__KB_LANES;
    const size_t es = zero__kb_dtype_size(dt);
    for (uint64_t b0 = (uint64_t)blockIdx.x * groups; b0 < nb; b0 += (uint64_t)gridDim.x * groups) {
        const uint64_t b = b0 + grp;
        double acc = 0;
        if (b < nb) {
            const uint64_t lo = b * block, len = n - lo < block ? n - lo : block;
            acc = zero__kb_sumsq_lane(dt, static_cast<const char *>(x) + lo * es, len, lane);
        }
        lanes[threadIdx.x] = acc;
        __syncthreads();
        if (lane == 0 && b < nb) out[b] = zero__kb_sumsq_tree(lanes + grp * ZERO__KB_LANES);
        __syncthreads();
    }
}

// The quantized base's tile loaders (kernels/quant.h), a thread per element: the host's loader
// body on a run of one.
__global__ void nf4_load(const uint8_t *packed, const float *absmax, uint64_t block, float *dst, uint64_t n) {
    ZERO_CUDA_FOR(i, n) zero__nf4_load(packed, absmax, 0, block, i, 1, dst + i);
}

__global__ void q8_load(const uint8_t *idx, const float *code, const float *absmax, uint64_t block, float *dst,
                        uint64_t n) {
    ZERO_CUDA_FOR(i, n) zero__q8_load(idx, code, absmax, 0, block, i, 1, dst + i);
}

// 8-bit coding (kernels/quant.h): a CUDA block per block of the format, its absmax by a tree of
// maxima in shared memory (a maximum is exact, in any order: the host's sequential scan's value),
// then a thread per value.
__global__ void q8_store(const float *x, const float *code, uint64_t block, uint64_t n, uint8_t *idx, float *absmax) {
    __shared__ float part[kThreads];
    const uint64_t nb = (n + block - 1) / block;
    for (uint64_t b = blockIdx.x; b < nb; b += gridDim.x) {
        const uint64_t lo = b * block, len = n - lo < block ? n - lo : block;
        float a = 0.0f;
        for (uint64_t i = threadIdx.x; i < len; i += blockDim.x) a = zero__q8_absmax_step(a, x[lo + i]);
        part[threadIdx.x] = a;
        __syncthreads();
        for (unsigned h = blockDim.x / 2; h > 0; h /= 2) {
            if (threadIdx.x < h) part[threadIdx.x] = zero__q8_absmax_step(part[threadIdx.x], part[threadIdx.x + h]);
            __syncthreads();
        }
        a = part[0];
        if (threadIdx.x == 0) absmax[b] = a;
        for (uint64_t i = threadIdx.x; i < len; i += blockDim.x) idx[lo + i] = zero__q8_code(code, x[lo + i], a, len < block);
        __syncthreads(); // part[0] is read by every thread before the next block writes part
    }
}

unsigned grid_for(uint64_t items, unsigned per_block) {
    const uint64_t blocks = (items + per_block - 1) / per_block;
    return blocks > 65535 ? 65535u : (blocks ? (unsigned)blocks : 1u);
}

}  // namespace

extern "C" int zero__cuda_kernel(int id, uint64_t n, void *const p[4], const double a[4], const zero__optim_k *k,
                                 void *stream) {
    if (n == 0) return cudaSuccess;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const unsigned g = grid_for(n, kThreads);
    const int dt = (int)a[0];
    switch (id) {
    case ZERO__K_FILL_F32: fill_f32<<<g, kThreads, 0, s>>>(static_cast<float *>(p[0]), (float)a[0], n); break;
    case ZERO__K_AXPY_F32:
        axpy_f32<<<g, kThreads, 0, s>>>(static_cast<float *>(p[0]), static_cast<const float *>(p[1]), (float)a[0], n);
        break;
    case ZERO__K_F32_TO_BF16:
    case ZERO__K_F32_TO_FP16:
        to_half<<<g, kThreads, 0, s>>>(static_cast<const float *>(p[0]), static_cast<uint16_t *>(p[1]),
                                       id == ZERO__K_F32_TO_BF16, n);
        break;
    case ZERO__K_OPTIM:
        optim<<<g, kThreads, 0, s>>>(*k, static_cast<float *>(p[0]), static_cast<float *>(p[1]),
                                     static_cast<float *>(p[2]), static_cast<const float *>(p[3]), n);
        break;
    case ZERO__K_WIDEN:
        widen<<<g, kThreads, 0, s>>>(static_cast<const uint16_t *>(p[0]), static_cast<float *>(p[1]),
                                     dt == ZERO_DTYPE_BF16, n);
        break;
    case ZERO__K_ADD: add<<<g, kThreads, 0, s>>>(dt, p[0], p[1], n); break;
    case ZERO__K_ACCUM_F32: accum_f32<<<g, kThreads, 0, s>>>(dt, p[0], static_cast<const float *>(p[1]), n); break;
    case ZERO__K_SUMSQ: {
        const uint64_t block = (uint64_t)a[1], nb = (n + block - 1) / block;
        sumsq<<<grid_for(nb, kThreads / ZERO__KB_LANES), kThreads, 0, s>>>(dt, p[0], n, block, nb,
                                                                             static_cast<double *>(p[1]));
        break;
    }
    case ZERO__K_NF4_LOAD:
        nf4_load<<<g, kThreads, 0, s>>>(static_cast<const uint8_t *>(p[0]), static_cast<const float *>(p[1]),
                                        (uint64_t)a[0], static_cast<float *>(p[2]), n);
        break;
    case ZERO__K_Q8_LOAD:
        q8_load<<<g, kThreads, 0, s>>>(static_cast<const uint8_t *>(p[0]), static_cast<const float *>(p[1]),
                                       static_cast<const float *>(p[2]), (uint64_t)a[0], static_cast<float *>(p[3]), n);
        break;
    case ZERO__K_Q8_STORE: {
        const uint64_t block = (uint64_t)a[0];
        q8_store<<<grid_for((n + block - 1) / block, 1), kThreads, 0, s>>>(
            static_cast<const float *>(p[0]), static_cast<const float *>(p[1]), block, n, static_cast<uint8_t *>(p[2]),
            static_cast<float *>(p[3]));
        break;
    }
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}
