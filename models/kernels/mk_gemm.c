/* models/kernels/mk_gemm.c — GEMM with bf16 operands and fp32 accumulation: the native path where
 * the build and the CPU have one, else both operands widened to fp32 (exactly) and cblas_sgemm. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kernels/mk_internal.h"

static int blas_threads; /* mk_set_blas_threads: 0 the BLAS's choice */

void mk_set_blas_threads(int n) { blas_threads = n > 0 ? n : 0; }
int mk_blas_threads(void) { return blas_threads; }

/* The OpenMP build of OpenBLAS sizes each call by the caller's OpenMP team size; the pthread
 * build by its own pool: both are set for the call and restored after it. */
int mk__blas_enter(void) {
    if (!blas_threads) return 0;
    const int prev = omp_get_max_threads();
    omp_set_num_threads(blas_threads);
    openblas_set_num_threads(blas_threads);
    return prev;
}

void mk__blas_leave(int prev) {
    if (!prev) return;
    omp_set_num_threads(prev);
    openblas_set_num_threads(prev);
}

#ifdef ZERO_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

#ifdef ZERO_HAVE_DNNL
/* ZERO_GEMM: "blas" (the default) or "dnnl"; read once. */
static int use_dnnl_sgemm(void) {
    static int cached = -1;
    if (cached < 0) {
        const char *v = getenv("ZERO_GEMM");
        cached = v && !strcmp(v, "dnnl");
    }
    return cached;
}
#endif

void mk__sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda, const float *B, int ldb,
               float beta, float *C, int ldc) {
    const int pin = mk__blas_enter();
#ifdef ZERO_HAVE_DNNL
    if (use_dnnl_sgemm() && dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) ==
                                dnnl_success) {
        mk__blas_leave(pin);
        return;
    }
#endif
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda,
                B, ldb, beta, C, ldc);
    mk__blas_leave(pin);
}

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
    mk__sgemm(ta, tb, M, N, K, alpha, a, ac, b, bc, beta, C, ldc);
    free(a);
    return ZERO_OK;
}

#ifdef ZERO_HAVE_DNNL
/* oneDNN's bf16 kernels only where the CPU multiplies bf16 itself (AVX512-BF16, AMX): on other
 * AVX-512 CPUs oneDNN would emulate them, slower than widening once and calling sgemm. */
static int dnnl_native(void) {
    const unsigned isa = (unsigned)dnnl_get_effective_cpu_isa();
    return (isa & (unsigned)dnnl_cpu_isa_avx512_core_bf16) == (unsigned)dnnl_cpu_isa_avx512_core_bf16;
}

/* One matmul primitive per call, on the caller's strided operands (oneDNN caches the compiled
 * kernel by shape); alpha as the output scale, beta as a sum post-op. */
static zero_status gemm_dnnl(int ta, int tb, int M, int N, int K, float alpha, const uint16_t *A,
                             int lda, const uint16_t *B, int ldb, float beta, float *C, int ldc) {
    zero_status st = ZERO_ERR_UNSUPPORTED;
    dnnl_engine_t eng = NULL;
    dnnl_stream_t strm = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    dnnl_memory_desc_t amd, bmd, cmd;
    const dnnl_dims_t ad = {M, K}, bd = {K, N}, cd = {M, N};
    const dnnl_dims_t as = {ta ? 1 : lda, ta ? lda : 1}, bs = {tb ? 1 : ldb, tb ? ldb : 1}, cs = {ldc, 1};
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success) goto done;
    if (dnnl_stream_create(&strm, eng, dnnl_stream_default_flags) != dnnl_success) goto done;
    if (dnnl_memory_desc_init_by_strides(&amd, 2, ad, dnnl_bf16, as) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dnnl_bf16, bs) != dnnl_success ||
        dnnl_memory_desc_init_by_strides(&cmd, 2, cd, dnnl_f32, cs) != dnnl_success)
        goto done;
    dnnl_matmul_desc_t md;
    if (dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd) != dnnl_success) goto done;
    if (dnnl_primitive_attr_create(&attr) != dnnl_success) goto done;
    if (alpha != 1.0f && dnnl_primitive_attr_set_output_scales(attr, 1, 0, &alpha) != dnnl_success) goto done;
    if (beta != 0.0f) {
        if (dnnl_post_ops_create(&po) != dnnl_success || dnnl_post_ops_append_sum(po, beta) != dnnl_success ||
            dnnl_primitive_attr_set_post_ops(attr, po) != dnnl_success)
            goto done;
    }
    if (dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL) != dnnl_success) goto done;
    if (dnnl_primitive_create(&prim, pd) != dnnl_success) goto done;
    if (dnnl_memory_create(&ma, &amd, eng, (void *)A) != dnnl_success ||
        dnnl_memory_create(&mb, &bmd, eng, (void *)B) != dnnl_success ||
        dnnl_memory_create(&mc, &cmd, eng, C) != dnnl_success)
        goto done;
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
    if (dnnl_primitive_execute(prim, strm, 3, args) != dnnl_success || dnnl_stream_wait(strm) != dnnl_success)
        st = ZERO_ERR_INTERNAL;
    else
        st = ZERO_OK;
done:
    dnnl_memory_destroy(ma), dnnl_memory_destroy(mb), dnnl_memory_destroy(mc);
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_post_ops_destroy(po);
    dnnl_primitive_attr_destroy(attr);
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return st;
}
#endif

zero_status mk_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, float alpha,
                         const uint16_t *A, int lda, const uint16_t *B, int ldb, float beta,
                         float *C, int ldc, mk_gemm_path path) {
    if (M < 0 || N < 0 || K < 0 || ldc < (N > 1 ? N : 1) || lda < ((trans_a ? M : K) > 1 ? (trans_a ? M : K) : 1) ||
        ldb < ((trans_b ? K : N) > 1 ? (trans_b ? K : N) : 1) || !isfinite(alpha) || !isfinite(beta))
        return ZERO_ERR_INVALID_ARG;
    if (path != MK_GEMM_AUTO && path != MK_GEMM_CONVERT && path != MK_GEMM_NATIVE)
        return ZERO_ERR_INVALID_ARG;
#ifdef ZERO_HAVE_DNNL
    const int native = dnnl_native();
#else
    const int native = 0;
#endif
    if (path == MK_GEMM_NATIVE && !native) return ZERO_ERR_UNSUPPORTED;
    if (!M || !N) return ZERO_OK;
    if (!C || (K && (!A || !B))) return ZERO_ERR_INVALID_ARG;
    if (!K) { /* no products: C = beta C (beta 0 writes zeros, as BLAS does) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[(size_t)i * ldc + j];
        return ZERO_OK;
    }
#ifdef ZERO_HAVE_DNNL
    if (native && path != MK_GEMM_CONVERT) {
        const int pin = mk__blas_enter(); /* oneDNN sizes its calls by the OpenMP team too */
        const zero_status st = gemm_dnnl(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        mk__blas_leave(pin);
        if (st != ZERO_ERR_UNSUPPORTED || path == MK_GEMM_NATIVE) return st;
    }
#endif
    return gemm_convert(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

const char *mk_gemm_bf16_path_name(void) {
#ifdef ZERO_HAVE_DNNL
    if (dnnl_native()) return "native (oneDNN matmul, bf16 x bf16 -> fp32)";
#endif
    return "convert";
}

const char *mk_blas_name(void) {
    static char name[256];
    if (!name[0]) snprintf(name, sizeof name, "%s, core %s", openblas_get_config(), openblas_get_corename());
    return name;
}

const char *mk_blas_core_better(void) {
    static const char *const avx2_cores[] = {"Haswell", "Zen"};
    if (!zero_impl_available(ZERO_IMPL_AVX512) || !strstr(openblas_get_config(), "DYNAMIC_ARCH")) return NULL;
    const char *core = openblas_get_corename();
    for (size_t i = 0; i < sizeof avx2_cores / sizeof avx2_cores[0]; i++)
        if (!strcasecmp(core, avx2_cores[i])) return "SkylakeX";
    return NULL;
}

int mk_gemm_bf16_native(void) {
#ifdef ZERO_HAVE_DNNL
    return dnnl_native();
#else
    return 0;
#endif
}
