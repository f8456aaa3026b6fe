/* Tests of the bf16 GEMM wrapper (models/kernels/mk_gemm.c) and of the BLAS the build linked:
 * the convert path bitwise equal to sgemm on the widened operands, every path within the bf16
 * rounding bound of the fp32 product, the native path where this build and CPU have one (SKIP
 * otherwise), argument checks, and that the OpenMP build of OpenBLAS is the one that runs. */
#include "mkernels_util.h"

#include <cblas.h>

static uint16_t bf16_of(float f) { return zero_fp32_to_bf16(f); }

/* C = op(A) op(B) in double from float operands; also sum |a||b| per element (for bounds). */
static void ref_gemm(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                     int ldb, double *C, double *absC) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0.0, sa = 0.0;
            for (int k = 0; k < K; k++) {
                const double a = ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
                const double b = tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
                s += a * b;
                sa += fabs(a * b);
            }
            C[(size_t)i * N + j] = s;
            absC[(size_t)i * N + j] = sa;
        }
}

static void test_paths(void) {
    static const int shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {33, 17, 65}, {64, 96, 128}, {129, 70, 300}};
    const int native = mk_gemm_bf16(0, 0, 1, 1, 1, 1.0f, (const uint16_t[]){0x3f80}, 1,
                                    (const uint16_t[]){0x3f80}, 1, 0.0f, (float[]){0}, 1, MK_GEMM_NATIVE) == ZERO_OK;
    printf("bf16 GEMM: MK_GEMM_AUTO takes \"%s\"\n", mk_gemm_bf16_path_name());
    if (!native) printf("SKIP native bf16 GEMM: not in this build or not on this CPU (checked that it is refused)\n");
    double worst_conv = 0.0, worst_nat = 0.0;
    for (int s = 0; s < 5; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                const int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
                const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb;
                float *A = mt_alloc(na), *B = mt_alloc(nb), *Aw = mt_alloc(na), *Bw = mt_alloc(nb);
                uint16_t *Ah = malloc(2 * na), *Bh = malloc(2 * nb);
                mt_fill(A, na, 1.0f), mt_fill(B, nb, 2.0f);
                for (size_t i = 0; i < na; i++) Ah[i] = bf16_of(A[i]), Aw[i] = zero_bf16_to_fp32(Ah[i]);
                for (size_t i = 0; i < nb; i++) Bh[i] = bf16_of(B[i]), Bw[i] = zero_bf16_to_fp32(Bh[i]);
                const size_t nc = (size_t)M * ldc;
                float *C0 = mt_alloc(nc), *C1 = mt_alloc(nc), *C2 = mt_alloc(nc);
                mt_fill(C0, nc, 1.0f);
                memcpy(C1, C0, 4 * nc), memcpy(C2, C0, 4 * nc);
                const float alpha = 0.75f, beta = 0.5f;
                /* sgemm on the widened operands: what the convert path must give, bit for bit */
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K,
                            alpha, Aw, lda, Bw, ldb, beta, C0, ldc);
                ZT_OK(mk_gemm_bf16(ta, tb, M, N, K, alpha, Ah, lda, Bh, ldb, beta, C1, ldc, MK_GEMM_CONVERT));
                ZT_CHECKF(!memcmp(C0, C1, 4 * nc), "convert path differs from sgemm on widened operands (%d %d %d %d %d)", ta, tb, M, N, K);
                /* every path against the fp32 product of the unrounded operands: each bf16 rounding
                 * is within 2^-8 relative (8 significant bits), a product of two within 2^-7 + 2^-16,
                 * and the fp32 accumulation within about K 2^-24 of sum |a b|: the bound
                 * (2^-7 + 2^-16 + K 2^-23) alpha sum |a b| */
                double *ref = malloc(sizeof(double) * M * N), *ab = malloc(sizeof(double) * M * N);
                float *Cin = mt_alloc(nc);
                memcpy(Cin, C2, 4 * nc);
                ref_gemm(ta, tb, M, N, K, A, lda, B, ldb, ref, ab);
                for (int path = 0; path < 2; path++) {
                    if (path == 1 && !native) break;
                    float *C = path ? C2 : C1;
                    if (path) ZT_OK(mk_gemm_bf16(ta, tb, M, N, K, alpha, Ah, lda, Bh, ldb, beta, C, ldc, MK_GEMM_NATIVE));
                    double worst = 0.0;
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            const double r = alpha * ref[(size_t)i * N + j] + beta * Cin[(size_t)i * ldc + j];
                            const double bound = alpha * ab[(size_t)i * N + j] * (ldexp(1.0, -7) + ldexp(1.0, -16) + K * ldexp(1.0, -23)) +
                                                 fabs(beta * Cin[(size_t)i * ldc + j]) * ldexp(1.0, -23) + 1e-30;
                            worst = fmax(worst, fabs(C[(size_t)i * ldc + j] - r) / bound);
                        }
                    ZT_CHECKF(worst <= 1.0, "bf16 GEMM path %d: error %.3f of the bound", path, worst);
                    if (path) worst_nat = fmax(worst_nat, worst); else worst_conv = fmax(worst_conv, worst);
                    /* the padding columns of C stay */
                    int pad = 1;
                    for (int i = 0; i < M; i++)
                        for (int j = N; j < ldc; j++) pad &= C[(size_t)i * ldc + j] == Cin[(size_t)i * ldc + j];
                    ZT_CHECK(pad);
                }
                free(A), free(B), free(Aw), free(Bw), free(Ah), free(Bh), free(C0), free(C1), free(C2);
                free(ref), free(ab), free(Cin);
            }
    printf("bf16 GEMM against fp32 on unrounded operands: convert %.3f, native %.3f of the bound\n", worst_conv, worst_nat);
}

static void test_args(void) {
    uint16_t a[4] = {0x3f80, 0x3f80, 0x3f80, 0x3f80};
    float c[4] = {1, 2, 3, 4};
    ZT_EQ_INT(mk_gemm_bf16(0, 0, 2, 2, 2, 1.0f, a, 1, a, 2, 0.0f, c, 2, MK_GEMM_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_gemm_bf16(0, 0, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 1, MK_GEMM_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_gemm_bf16(0, 0, -1, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2, MK_GEMM_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_gemm_bf16(0, 0, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2, (mk_gemm_path)9), ZERO_ERR_INVALID_ARG);
    /* K = 0: C = beta C */
    ZT_OK(mk_gemm_bf16(0, 0, 2, 2, 0, 1.0f, NULL, 1, NULL, 2, 0.5f, c, 2, MK_GEMM_AUTO));
    ZT_CHECK(c[0] == 0.5f && c[3] == 2.0f);
    ZT_OK(mk_gemm_bf16(0, 0, 2, 2, 2, 1.0f, a, 2, a, 2, 0.0f, c, 2, MK_GEMM_AUTO));
    ZT_CHECK(c[0] == 2.0f && c[3] == 2.0f);
}

/* The BLAS that runs is the one CMake linked: with the OpenMP build found, OpenBLAS reports its
 * OpenMP threading (2), so it shares OpenMP's thread pool. */
static void test_blas_build(void) {
    const int par = openblas_get_parallel();
    printf("OpenBLAS: %s, threading %d (0 none, 1 pthreads, 2 OpenMP)\n", openblas_get_config(), par);
#ifdef ZERO_BLAS_OPENMP
    ZT_EQ_INT(par, 2);
#else
    printf("SKIP the OpenMP build of OpenBLAS: this build did not find it (libopenblas-openmp-dev)\n");
#endif
}

int main(void) {
    test_paths();
    test_args();
    test_blas_build();
    return zt_finish("test_mkernels_gemm");
}
