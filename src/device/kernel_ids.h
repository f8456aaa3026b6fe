/* The ids of the device layer's kernels, shared by the front (src/device/internal.h) and the GPU
 * kernels (src/cuda/kernels.cu): plain C, no includes, so that nvcc compiles it too. */
#ifndef ZERO_DEVICE_KERNEL_IDS_H
#define ZERO_DEVICE_KERNEL_IDS_H

enum {
    ZERO__K_FILL_F32 = 0,    /* p[0][i] = a[0], i < n */
    ZERO__K_AXPY_F32 = 1,    /* p[0][i] += a[0] * p[1][i], i < n */
    ZERO__K_F32_TO_BF16 = 2, /* (uint16) p[1][i] = bf16(p[0][i]), round to nearest even */
    ZERO__K_F32_TO_FP16 = 3, /* (uint16) p[1][i] = fp16(p[0][i]) */
    ZERO__K_OPTIM = 4,       /* optim's element step over master p[0], states p[1], p[2], gradient p[3] */
    ZERO__K_WIDEN = 5,       /* (float) p[1][i] = widen(p[0][i]), p[0] in the half dtype a[0] (bf16 / fp16) */
    ZERO__K_ADD = 6,         /* p[0][i] += p[1][i], both in dtype a[0]: the host reduction's two-source sum */
    ZERO__K_ACCUM_F32 = 7,   /* p[0][i] (dtype a[0]) += (float) p[1][i]: the host accumulation */
    ZERO__K_SUMSQ = 8,       /* (double) p[1][b] = Σ x² over block b of a[1] elements of p[0] (dtype a[0]) */
    ZERO__K_NF4_LOAD = 9,    /* (float) p[2][i] = NF4 code i of p[0] (two a byte) x absmax p[1][i / a[0]] */
    ZERO__K_Q8_LOAD = 10,    /* (float) p[3][i] = code table p[1][index p[0][i]] x absmax p[2][i / a[0]] */
    ZERO__K_Q8_STORE = 11, /* p[0] (float) coded in blocks of a[0] against code table p[1]: indices p[2], absmax p[3] */
    ZERO__K_GEMM = 12,     /* C = alpha op(A) op(B) + beta C (+ bias per row), column-major: the call
                            * a GPU hands cuBLASLt, described by zero__gemm_k (device/internal.h) */
    ZERO__K_COUNT
};
#endif
