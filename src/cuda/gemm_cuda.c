/* The cuda backend's GEMM (kernel ZERO__K_GEMM, docs/DEVICE.md "The cuda backend"): the device
 * layer's column-major call description (zero__gemm_k, src/device/internal.h) handed to cuBLASLt
 * as it is — each operand a layout of its stored rows, columns and leading dimension, op(A) and
 * op(B) as the matmul's transposes, fp32 compute and scale, fp32 C and D, the bias as the BIAS
 * epilogue over D's rows. cuBLASLt is opened with dlopen at the first GEMM (the module links no CUDA
 * library but the static runtime), its functions looked up by name; one handle serves the process.
 * The description's CPU reference (src/device/kernels.c) is what unit.test_device_gemm checks the
 * models' linear layers against; scripts/gpu_check.sh runs the same calls here on a GPU. */
#include "cuda/cuda.h"
#include "device/internal.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct {
    pthread_once_t once;
    char why[256]; /* why cuBLASLt is not there ("": it is) */
    cublasLtHandle_t handle;
    cublasStatus_t (*create)(cublasLtHandle_t *);
    cublasStatus_t (*desc_create)(cublasLtMatmulDesc_t *, cublasComputeType_t, cudaDataType_t);
    cublasStatus_t (*desc_destroy)(cublasLtMatmulDesc_t);
    cublasStatus_t (*desc_set)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, const void *, size_t);
    cublasStatus_t (*layout_create)(cublasLtMatrixLayout_t *, cudaDataType, uint64_t, uint64_t, int64_t);
    cublasStatus_t (*layout_destroy)(cublasLtMatrixLayout_t);
    cublasStatus_t (*matmul)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t,
                             const void *, cublasLtMatrixLayout_t, const void *, const void *, cublasLtMatrixLayout_t,
                             void *, cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
                             cudaStream_t);
    const char *(*status_string)(cublasStatus_t);
} lt = {.once = PTHREAD_ONCE_INIT};

static void lt_open(void) {
    static const char *const names[] = ZERO__CUBLASLT_NAMES;
    void *h = NULL;
    for (int i = 0; names[i] && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(lt.why, sizeof lt.why, "cuBLASLt is not installed (dlopen %s: %s)", names[0], dlerror());
        return;
    }
    struct {
        void *dst;
        const char *sym;
    } f[] = {{&lt.create, "cublasLtCreate"},
             {&lt.desc_create, "cublasLtMatmulDescCreate"},
             {&lt.desc_destroy, "cublasLtMatmulDescDestroy"},
             {&lt.desc_set, "cublasLtMatmulDescSetAttribute"},
             {&lt.layout_create, "cublasLtMatrixLayoutCreate"},
             {&lt.layout_destroy, "cublasLtMatrixLayoutDestroy"},
             {&lt.matmul, "cublasLtMatmul"},
             {&lt.status_string, "cublasLtGetStatusString"}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        void *p = dlsym(h, f[i].sym);
        if (!p) {
            snprintf(lt.why, sizeof lt.why, "cuBLASLt (%s) has no %s", names[0], f[i].sym);
            return;
        }
        memcpy(f[i].dst, &p, sizeof p);
    }
    const cublasStatus_t st = lt.create(&lt.handle);
    if (st != CUBLAS_STATUS_SUCCESS) snprintf(lt.why, sizeof lt.why, "cublasLtCreate: %s", lt.status_string(st));
}

/* A layout of `rows` x `cols` (column-major, leading dimension ld) in type t; 0 or a status. */
static cublasStatus_t layout(cublasLtMatrixLayout_t *l, cudaDataType t, int64_t rows, int64_t cols, int64_t ld) {
    return lt.layout_create(l, t, (uint64_t)rows, (uint64_t)cols, ld);
}

int zero__cuda_gemm(const zero__gemm_k *g, void *const p[4], void *stream, char *why, size_t cap) {
    pthread_once(&lt.once, lt_open);
    if (lt.why[0]) {
        snprintf(why, cap, "%s", lt.why);
        return -1;
    }
    const cudaDataType ab = g->dtype == ZERO_DTYPE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, lc = NULL;
    const cublasOperation_t ta = g->transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g->transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const char *call = "cublasLtMatmulDescCreate";
    cublasStatus_t st = lt.desc_create(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmulDescSetAttribute";
        st = lt.desc_set(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    }
    if (st == CUBLAS_STATUS_SUCCESS) st = lt.desc_set(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (st == CUBLAS_STATUS_SUCCESS && g->bias) {
        const cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_BIAS;
        const cudaDataType bt = CUDA_R_32F;
        const void *bias = p[3];
        st = lt.desc_set(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep);
        if (st == CUBLAS_STATUS_SUCCESS) st = lt.desc_set(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        if (st == CUBLAS_STATUS_SUCCESS) st = lt.desc_set(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
    }
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatrixLayoutCreate";
        st = layout(&la, ab, g->transa ? g->k : g->m, g->transa ? g->m : g->k, g->lda);
    }
    if (st == CUBLAS_STATUS_SUCCESS) st = layout(&lb, ab, g->transb ? g->n : g->k, g->transb ? g->k : g->n, g->ldb);
    if (st == CUBLAS_STATUS_SUCCESS) st = layout(&lc, CUDA_R_32F, g->m, g->n, g->ldc);
    if (st == CUBLAS_STATUS_SUCCESS) {
        call = "cublasLtMatmul";
        st = lt.matmul(lt.handle, op, &g->alpha, p[0], la, p[1], lb, &g->beta, p[2], lc, p[2], lc, NULL, NULL, 0,
                       (cudaStream_t)stream);
    }
    if (lc) lt.layout_destroy(lc);
    if (lb) lt.layout_destroy(lb);
    if (la) lt.layout_destroy(la);
    if (op) lt.desc_destroy(op);
    if (st == CUBLAS_STATUS_SUCCESS) return 0;
    snprintf(why, cap, "kernel gemm: %s: %s (m %d, n %d, k %d, transa %d, transb %d, %s)", call, lt.status_string(st),
             g->m, g->n, g->k, g->transa, g->transb, g->dtype == ZERO_DTYPE_BF16 ? "bf16" : "fp32");
    return (int)st;
}
