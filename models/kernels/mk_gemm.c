/* models/kernels/mk_gemm.c — GEMM with bf16 operands and fp32 accumulation: the native path where
 * the build and the CPU have one, else both operands widened to fp32 (exactly) and cblas_sgemm. */
#include <cblas.h>
#include <stdlib.h>

#include "kernels/mk_internal.h"

/* Widens rows x cols of a bf16 matrix (ld apart) into a packed fp32 one. */
static void widen(float *dst, const uint16_t *src, int rows, int cols, int ld) {
    if (ld == cols) {
        zero_convert(src, ZERO_DTYPE_BF16, dst, ZERO_DTYPE_FP32, (size_t)rows * cols, ZERO_IMPL_AUTO);
        return;
    }
#pragma omp parallel for schedule(static) if ((size_t)rows * cols >= MK_PAR_MIN)
    for (int r = 0; r < rows; r++)
        zero_convert(src + (size_t)r * ld, ZERO_DTYPE_BF16, dst + (size_t)r * cols, ZERO_DTYPE_FP32,
                     (size_t)cols, ZERO_IMPL_AUTO);
}

static zero_status gemm_convert(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A,
                                int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc) {
    const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    float *a = malloc(sizeof(float) * ((size_t)ar * ac + (size_t)br * bc));
    if (!a) return ZERO_ERR_NOMEM;
    float *b = a + (size_t)ar * ac;
    widen(a, A, ar, ac, lda);
    widen(b, B, br, bc, ldb);
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
                K, alpha, a, ac, b, bc, beta, C, ldc);
    free(a);
    return ZERO_OK;
}

zero_status mk_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta,
                         float *C, int ldc, mk_gemm_path path) {
    if (M < 0 || N < 0 || K < 0 || ldc < (N > 1 ? N : 1) || lda < ((trans_a ? M : K) > 1 ? (trans_a ? M : K) : 1) ||
        ldb < ((trans_b ? K : N) > 1 ? (trans_b ? K : N) : 1) || !isfinite(alpha) || !isfinite(beta))
        return ZERO_ERR_INVALID_ARG;
    if (path != MK_GEMM_AUTO && path != MK_GEMM_CONVERT && path != MK_GEMM_NATIVE)
        return ZERO_ERR_INVALID_ARG;
    if (path == MK_GEMM_NATIVE) return ZERO_ERR_UNSUPPORTED;
    if (!M || !N) return ZERO_OK;
    if (!C || (K && (!A || !B))) return ZERO_ERR_INVALID_ARG;
    if (!K) { /* no products: C = beta C (beta 0 writes zeros, as BLAS does) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return ZERO_OK;
    }
    return gemm_convert(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *mk_gemm_bf16_path_name(void) { return "convert"; }
