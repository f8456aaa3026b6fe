/* The GPU kernels' bodies (src/cuda/bodies.h, what each thread of src/cuda/kernels.cu computes)
 * compiled by the host compiler and run in the GPU's decomposition — one call per element, the sum
 * of squares as 16 lane threads per block and one thread's tree — equal the host references bit
 * for bit (a NaN's payload aside) on values that include zeros, subnormals, infinities and NaN: the widening, the
 * two-source sum, the accumulation, axpy, the narrowing, every optimizer's step, and the sums of
 * squares for blocks shorter than the lanes, not a multiple of them, and larger than the data. A
 * sum in another order is seen to differ, so the comparison can fail. Runs on every machine: the
 * same text is what nvcc compiles. */
#pragma GCC optimize("fp-contract=off") /* the rounding rule of the kernel layer (docs/KERNELS.md) */
#include "common/internal.h"
#include "cuda/bodies.h"
#include "harness.h"
#include "optim/internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t st = 2024;
static uint32_t rnd32(void) {
    st = st * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(st >> 32);
}

static float rnd_float(size_t i) {
    static const float edge[] = {0.0f, -0.0f,    1e-40f,        -1e-40f,     INFINITY, -INFINITY,
                                 NAN,  65520.0f, 3.3895314e38f, 1.00390625f, 6e-8f,    -2.9802322e-08f};
    if (i % 53 < 12) return edge[i % 53];
    if (i % 53 == 12) {
        const uint32_t u = rnd32();
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return (float)((int32_t)rnd32() % 2000001) * 1e-4f;
}

#define N 20011

/* Equal bits, or both NaN: a NaN's payload is not part of the contract. Where two NaNs meet in an
 * addition x86 keeps one operand's payload and the compiler may commute the operands (the host's
 * vectorized sum does), and a GPU's arithmetic returns its canonical NaN 0x7fffffff; every other
 * value is compared bit for bit. */
static int is_nan_bits(const void *p, size_t es, int bf) {
    if (es == 4) {
        uint32_t u;
        memcpy(&u, p, 4);
        return (u & 0x7fffffffu) > 0x7f800000u;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return bf ? (h & 0x7fffu) > 0x7f80u : (h & 0x7fffu) > 0x7c00u;
}
static uint64_t dbits(double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}
static size_t differ(const void *a, const void *b, size_t n, size_t es, int bf) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const char *x = (const char *)a + i * es, *y = (const char *)b + i * es;
        bad += memcmp(x, y, es) != 0 && !(is_nan_bits(x, es, bf) && is_nan_bits(y, es, bf));
    }
    return bad;
}

static void test_elementwise(void) {
    float *x = malloc(N * 4), *y = malloc(N * 4), *a = malloc(N * 4), *b = malloc(N * 4);
    uint16_t *h = malloc(N * 2), *g = malloc(N * 2), *ha = malloc(N * 2), *hb = malloc(N * 2);
    for (size_t i = 0; i < N; i++) {
        x[i] = rnd_float(i);
        y[i] = rnd_float(i + 5);
        h[i] = (uint16_t)rnd32();
        g[i] = i % 3 ? (uint16_t)rnd32() : (uint16_t)(rnd32() & 0x83ff);
    }
    /* axpy */
    memcpy(a, y, N * 4);
    for (uint64_t i = 0; i < N; i++) zero__kb_axpy(a, x, 0.3f, i);
    for (size_t i = 0; i < N; i++) {
        const float p = 0.3f * x[i];
        b[i] = y[i] + p;
    }
    ZT_CHECKF(!differ(a, b, N, 4, 0), "axpy: %zu elements differ", differ(a, b, N, 4, 0));
    /* widening and narrowing */
    const zero_dtype half[2] = {ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int k = 0; k < 2; k++) {
        const int bf = half[k] == ZERO_DTYPE_BF16;
        for (size_t i = 0; i < N; i++) a[i] = zero__kb_widen(bf, h[i]);
        ZT_OK(zero_convert(h, half[k], b, ZERO_DTYPE_FP32, N, ZERO_IMPL_SCALAR));
        ZT_CHECKF(!differ(a, b, N, 4, 0), "widening %s differs", zero_dtype_name(half[k]));
        for (size_t i = 0; i < N; i++) ha[i] = bf ? zero__fp32_to_bf16_bits(x[i]) : zero__fp32_to_fp16_bits(x[i]);
        ZT_OK(zero_convert(x, ZERO_DTYPE_FP32, hb, half[k], N, ZERO_IMPL_SCALAR));
        ZT_CHECKF(!memcmp(ha, hb, N * 2), "narrowing to %s differs", zero_dtype_name(half[k]));
    }
    /* the two-source sum and the accumulation, per dtype, against the reduction's references */
    const zero_dtype all[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int t = 0; t < 3; t++) {
        const zero_dtype dt = all[t];
        const size_t es = dt == ZERO_DTYPE_FP32 ? 4 : 2;
        const void *A = dt == ZERO_DTYPE_FP32 ? (const void *)x : h, *B = dt == ZERO_DTYPE_FP32 ? (const void *)y : g;
        void *dev = dt == ZERO_DTYPE_FP32 ? (void *)a : ha, *ref = dt == ZERO_DTYPE_FP32 ? (void *)b : hb;
        memcpy(dev, A, N * es);
        for (uint64_t i = 0; i < N; i++) zero__kb_add(dt, dev, B, i);
        memcpy(ref, A, N * es);
        const void *src[2] = {ref, B};
        zero__reduce_scalar(dt, 0, src, 2, ref, N, 0);
        ZT_CHECKF(!differ(dev, ref, N, es, dt == ZERO_DTYPE_BF16), "the %s sum differs", zero_dtype_name(dt));
        memcpy(dev, A, N * es);
        for (uint64_t i = 0; i < N; i++) zero__kb_accum(dt, dev, y, i);
        memcpy(ref, A, N * es);
        zero__accumulate_scalar(dt, ref, y, N);
        ZT_CHECKF(!differ(dev, ref, N, es, dt == ZERO_DTYPE_BF16), "%s accumulation differs", zero_dtype_name(dt));
    }
    free(x), free(y), free(a), free(b), free(h), free(g), free(ha), free(hb);
}

/* every optimizer (SGD with and without momentum, Nesterov), decay on, grad_scale != 1 */
static void test_optim(void) {
    float *p0 = malloc(N * 4), *m0 = malloc(N * 4), *v0 = malloc(N * 4), *g = malloc(N * 4);
    float *p = malloc(N * 4), *m = malloc(N * 4), *v = malloc(N * 4);
    float *rp = malloc(N * 4), *rm = malloc(N * 4), *rv = malloc(N * 4);
    for (size_t i = 0; i < N; i++) {
        p0[i] = rnd_float(i);
        g[i] = rnd_float(i + 11) * 0.37f;
        m0[i] = (float)((int32_t)rnd32() % 1000) * 1e-5f;
        v0[i] = (float)(rnd32() % 1000) * 1e-6f;
    }
    struct {
        zero_optim_type t;
        float momentum;
        int nesterov, l2;
    } cases[] = {{ZERO_OPTIM_ADAMW, 0, 0, 0},  {ZERO_OPTIM_ADAM, 0, 0, 1},   {ZERO_OPTIM_SGD, 0, 0, 1},
                 {ZERO_OPTIM_SGD, 0.9f, 0, 1}, {ZERO_OPTIM_SGD, 0.9f, 1, 0}, {ZERO_OPTIM_LION, 0, 0, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        zero_optim_hparams hp;
        zero_optim_hparams_default(&hp, cases[c].t);
        hp.weight_decay = 0.1f;
        hp.momentum = cases[c].momentum;
        hp.nesterov = cases[c].nesterov;
        zero__optim_k k;
        zero__optim_consts(&hp, 3, 0.5f, 1.0f, &k);
        const int states = zero_optim_state_count(cases[c].t, hp.momentum);
        memcpy(p, p0, N * 4), memcpy(m, m0, N * 4), memcpy(v, v0, N * 4);
        memcpy(rp, p0, N * 4), memcpy(rm, m0, N * 4), memcpy(rv, v0, N * 4);
        float *s0 = states >= 1 ? m : NULL, *s1 = states >= 2 ? v : NULL;
        for (uint64_t i = 0; i < N; i++) zero__kb_optim(&k, p, s0, s1, g, i);
        zero__optim_scalar(&k, rp, states >= 1 ? rm : NULL, states >= 2 ? rv : NULL, g, N, NULL, ZERO_DTYPE_FP32);
        ZT_CHECKF(!differ(p, rp, N, 4, 0) && !differ(m, rm, N, 4, 0) && !differ(v, rv, N, 4, 0),
                  "optimizer case %zu (%s) differs from zero__optim_scalar", c, zero_optim_name(cases[c].t));
    }
    free(p0), free(m0), free(v0), free(g), free(p), free(m), free(v), free(rp), free(rm), free(rv);
}

/* The sum of squares as kernels.cu runs it: per block, 16 lane threads, then one thread's tree. */
static double gpu_block_sumsq(zero_dtype dt, const void *x, uint64_t len) {
    double lanes[ZERO__KB_LANES];
    for (unsigned l = 0; l < ZERO__KB_LANES; l++) lanes[l] = zero__kb_sumsq_lane(dt, x, len, l);
    return zero__kb_sumsq_tree(lanes);
}

static void test_sumsq(void) {
    const size_t n = 100003;
    float *x = malloc(n * 4);
    uint16_t *h = malloc(n * 2);
    for (size_t i = 0; i < n; i++) {
        /* no NaN or Inf here but in a few blocks: a non-finite sum hides nothing of the order */
        x[i] = i % 9973 == 5 ? INFINITY : (float)((int32_t)rnd32() % 2000001) * 1e-3f;
        if (i % 7 == 0) x[i] = (float)((int32_t)rnd32() % 2000001) * 1e-41f; /* subnormal squares */
        h[i] = (uint16_t)(rnd32() & 0x7bff ? rnd32() & 0xfbff : 0x7e00);     /* finite halves, a NaN now and then */
    }
    const zero_dtype all[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    const uint64_t blocks[7] = {1, 7, 16, 17, 1000, 65536, 200000};
    int order_seen = 0;
    for (int t = 0; t < 3; t++) {
        const zero_dtype dt = all[t];
        const size_t es = dt == ZERO_DTYPE_FP32 ? 4 : 2;
        const char *X = dt == ZERO_DTYPE_FP32 ? (const char *)x : (const char *)h;
        for (int b = 0; b < 7; b++) {
            int wrong = 0;
            for (uint64_t lo = 0; lo < n; lo += blocks[b]) {
                const uint64_t len = n - lo < blocks[b] ? n - lo : blocks[b];
                const double got = gpu_block_sumsq(dt, X + lo * es, len);
                const double ref = zero__sumsq_scalar(dt, X + lo * es, (size_t)len);
                wrong += dbits(got) != dbits(ref);
                /* the plain sum in element order: another order, other bits somewhere */
                double seq = 0;
                for (uint64_t j = 0; j < len; j++) {
                    const float f = dt == ZERO_DTYPE_FP32 ? ((const float *)(const void *)X)[lo + j]
                                                          : zero__kb_widen(dt == ZERO_DTYPE_BF16,
                                                                           ((const uint16_t *)(const void *)X)[lo + j]);
                    seq = zero__sq_acc(seq, f);
                }
                order_seen += isfinite(ref) && dbits(seq) != dbits(ref);
            }
            ZT_CHECKF(wrong == 0, "%s sums of squares by %llu: %d blocks differ from zero__sumsq_scalar",
                      zero_dtype_name(dt), (unsigned long long)blocks[b], wrong);
        }
    }
    ZT_CHECKF(order_seen > 10, "a sum in element order matched the lanes' bits everywhere (%d): the test is blind",
              order_seen);
    printf("sums in element order that differ from the lanes': %d blocks\n", order_seen);
    free(x), free(h);
}

int main(void) {
    test_elementwise();
    test_optim();
    test_sumsq();
    return zt_finish("test_cuda_bodies");
}
