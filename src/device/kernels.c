/* The device's kernels, one body each, run where the backend runs device work: on the caller
 * (cpu), in the fake device's worker process (fake). They loop over the kernel layer's element
 * formulas (kernels/elem.h), which the host references and src/cuda/kernels.cu run too, so a
 * device result equals the host's bit for bit (test_device). */
#include "device/internal.h"
#include "kernels/quant.h"
#include "zero/optim.h"

#include <string.h>

static void k_fill_f32(const zero__kcall *k) {
    float *p = k->p[0];
    const float v = (float)k->a[0];
    for (uint64_t i = 0; i < k->n; i++) p[i] = v;
}

static void k_axpy_f32(const zero__kcall *k) {
    float *y = k->p[0];
    const float *x = k->p[1];
    const float a = (float)k->a[0];
    for (uint64_t i = 0; i < k->n; i++) y[i] += a * x[i];
}

static void k_f32_to_bf16(const zero__kcall *k) {
    const float *x = k->p[0];
    uint16_t *y = k->p[1];
    for (uint64_t i = 0; i < k->n; i++) y[i] = zero__fp32_to_bf16_bits(x[i]);
}

static void k_f32_to_fp16(const zero__kcall *k) {
    const float *x = k->p[0];
    uint16_t *y = k->p[1];
    for (uint64_t i = 0; i < k->n; i++) y[i] = zero__fp32_to_fp16_bits(x[i]);
}

/* The optimizer's step: the same element steps, in the same order, as the host reference. */
static void k_optim(const zero__kcall *k) {
    float *p = k->p[0], *s0 = k->p[1], *s1 = k->p[2];
    const float *g = k->p[3];
    const zero__optim_k *c = &k->optim;
    for (uint64_t i = 0; i < k->n; i++) {
        switch (c->type) {
        case ZERO_OPTIM_ADAMW:
        case ZERO_OPTIM_ADAM: zero__adam_elem(c, p + i, s0 + i, s1 + i, g[i]); break;
        case ZERO_OPTIM_SGD: zero__sgd_elem(c, p + i, s0 ? s0 + i : NULL, g[i]); break;
        case ZERO_OPTIM_LION: zero__lion_elem(c, p + i, s0 + i, g[i]); break;
        default: break;
        }
    }
}

/* The host reductions' scalar bodies (src/common/reduce.c): every vector body gives their bits. */
static void k_widen(const zero__kcall *k) {
    const uint16_t *x = k->p[0];
    float *y = k->p[1];
    const int bf = (zero_dtype)k->a[0] == ZERO_DTYPE_BF16;
    for (uint64_t i = 0; i < k->n; i++) y[i] = bf ? zero__bf16_bits_to_fp32(x[i]) : zero__fp16_bits_to_fp32(x[i]);
}

static void k_add(const zero__kcall *k) {
    const void *const src[2] = {k->p[0], k->p[1]};
    zero__reduce_scalar((zero_dtype)k->a[0], 0, src, 2, k->p[0], (size_t)k->n, 0);
}

static void k_accum_f32(const zero__kcall *k) {
    zero__accumulate_scalar((zero_dtype)k->a[0], k->p[0], k->p[1], (size_t)k->n);
}

static void k_sumsq(const zero__kcall *k) {
    const zero_dtype dt = (zero_dtype)k->a[0];
    const uint64_t block = (uint64_t)k->a[1];
    const size_t es = zero_dtype_size(dt);
    double *out = k->p[1];
    for (uint64_t lo = 0, b = 0; lo < k->n; lo += block, b++)
        out[b] =
            zero__sumsq_scalar(dt, (const char *)k->p[0] + lo * es, (size_t)(k->n - lo < block ? k->n - lo : block));
}

/* The quantized base's tile loaders (kernels/quant.h), over a whole tensor of n elements */
static void k_nf4_load(const zero__kcall *k) {
    zero__nf4_load(k->p[0], k->p[1], 0, (uint64_t)k->a[0], 0, k->n, k->p[2]);
}

static void k_q8_load(const zero__kcall *k) {
    zero__q8_load(k->p[0], k->p[1], k->p[2], 0, (uint64_t)k->a[0], 0, k->n, k->p[3]);
}

static void k_q8_store(const zero__kcall *k) {
    const uint64_t block = (uint64_t)k->a[0], nb = (k->n + block - 1) / block;
    for (uint64_t b = 0; b < nb; b++) zero__q8_store_block(k->p[0], k->p[1], block, k->n, b, k->p[2], k->p[3]);
}

/* The GEMM's reference, column-major as the descriptor says: each result a sum over l in order,
 * in fp32 (bf16 operands widened exactly), then alpha times it plus beta C (C not read when beta is
 * 0: new device memory holds NaN), then the bias. */
static float gemm_at(const void *x, int dtype, int64_t i) {
    return dtype == ZERO_DTYPE_BF16 ? zero__bf16_bits_to_fp32(((const uint16_t *)x)[i]) : ((const float *)x)[i];
}

static void k_gemm(const zero__kcall *k) {
    const zero__gemm_k *g = &k->gemm;
    float *c = k->p[2];
    const float *bias = g->bias ? (const float *)k->p[3] : NULL;
    for (int64_t j = 0; j < g->n; j++)
        for (int64_t i = 0; i < g->m; i++) {
            float acc = 0.0f;
            for (int64_t l = 0; l < g->k; l++) {
                const float a = gemm_at(k->p[0], g->dtype, g->transa ? l + i * g->lda : i + l * g->lda);
                const float b = gemm_at(k->p[1], g->dtype, g->transb ? j + l * g->ldb : l + j * g->ldb);
                acc += a * b;
            }
            float v = g->alpha * acc;
            if (g->beta != 0.0f) v += g->beta * c[i + j * g->ldc];
            if (bias) v += bias[i];
            c[i + j * g->ldc] = v;
        }
}

/* Kernel call k of the described GEMM g on operands A, B, C and the bias (NULL: none). */
static void gemm_call(zero__kcall *k, zero__gemm_k g, const void *a, const void *b, float *c, const float *bias) {
    memset(k, 0, sizeof *k);
    k->id = ZERO__K_GEMM;
    k->gemm = g;
    k->p[0] = (void *)a, k->p[1] = (void *)b, k->p[2] = c, k->p[3] = (void *)bias;
    k->n = (uint64_t)g.m * (uint64_t)g.n;
    k->flops = 2.0 * g.m * g.n * g.k;
}

void zero__gemm_linear_fwd(zero__kcall *k, int N, int in, int out, int dtype, const void *x, const void *w, float *y,
                           const float *bias) {
    gemm_call(k, (zero__gemm_k){out, N, in, 1, 0, in, in, out, dtype, 1.0f, 0.0f, bias != NULL}, w, x, y, bias);
}

void zero__gemm_linear_bwd_x(zero__kcall *k, int N, int in, int out, int dtype, const void *dy, const void *w,
                             float *dx) {
    gemm_call(k, (zero__gemm_k){in, N, out, 0, 0, in, out, in, dtype, 1.0f, 0.0f, 0}, w, dy, dx, NULL);
}

void zero__gemm_linear_bwd_w(zero__kcall *k, int N, int in, int out, int dtype, const void *dy, const void *x,
                             float *dw) {
    gemm_call(k, (zero__gemm_k){in, out, N, 0, 1, in, out, in, dtype, 1.0f, 1.0f, 0}, x, dy, dw, NULL);
}

const zero__kernel_fn zero__dev_kernels[ZERO__K_COUNT] = {
    [ZERO__K_FILL_F32] = k_fill_f32,
    [ZERO__K_AXPY_F32] = k_axpy_f32,
    [ZERO__K_F32_TO_BF16] = k_f32_to_bf16,
    [ZERO__K_F32_TO_FP16] = k_f32_to_fp16,
    [ZERO__K_OPTIM] = k_optim,
    [ZERO__K_WIDEN] = k_widen,
    [ZERO__K_ADD] = k_add,
    [ZERO__K_ACCUM_F32] = k_accum_f32,
    [ZERO__K_SUMSQ] = k_sumsq,
    [ZERO__K_NF4_LOAD] = k_nf4_load,
    [ZERO__K_Q8_LOAD] = k_q8_load,
    [ZERO__K_Q8_STORE] = k_q8_store,
    [ZERO__K_GEMM] = k_gemm,
};
