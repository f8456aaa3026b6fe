/* The engine's gradient accumulation kernel (src/common/reduce.c, zero__accumulate: a working-
 * dtype buffer += an fp32 one, one rounding): scalar and AVX2 bodies against an independent
 * element-by-element reference (tests/ref_half.h) and each other bit for bit, fp32/bf16/fp16,
 * lengths around the tile, specials included. The gradient norm's sum of squares
 * (zero__sumsq): scalar and AVX2 bit for bit, within 4 n 2^-53 of a long-double sum in
 * sequence, a NaN or infinity anywhere giving a sum that is not finite. */
#include "common/internal.h"
#include "harness.h"
#include "ref_half.h"
#include "zero/zero.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_state = 0x2545f4914f6cdd1dull;
static uint32_t rnd(void) {
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return (uint32_t)(g_state >> 16);
}

static float value(void) {
    uint32_t r = rnd();
    switch (r % 16) {
    case 0: return INFINITY;
    case 1: return -INFINITY;
    case 2: return NAN;
    case 3: return 0.0f;
    case 4: return -0.0f;
    case 5: return 6e-8f; /* an fp16 denormal */
    case 6: return 70000.0f; /* above fp16's range */
    default: return ((float)(int32_t)rnd() / 2147483648.0f) * 8.0f;
    }
}

static uint16_t to_half(zero_dtype dt, float f) { return dt == ZERO_DTYPE_BF16 ? ref_to_bf16(f) : ref_to_fp16(f); }
static float from_half(zero_dtype dt, uint16_t h) { return dt == ZERO_DTYPE_BF16 ? ref_from_bf16(h) : ref_from_fp16(h); }

/* Bitwise equality, any NaN equal to any NaN of the same dtype. */
static int same(zero_dtype dt, const void *a, const void *b, size_t i) {
    if (dt == ZERO_DTYPE_FP32) {
        float x = ((const float *)a)[i], y = ((const float *)b)[i];
        return (isnan(x) && isnan(y)) || !memcmp(&x, &y, 4);
    }
    uint16_t x = ((const uint16_t *)a)[i], y = ((const uint16_t *)b)[i];
    return (isnan(from_half(dt, x)) && isnan(from_half(dt, y))) || x == y;
}

int main(void) {
    const zero_dtype dts[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    const size_t lens[6] = {0, 1, 7, 1023, 1024, 5000};
    const int have_avx2 = zero_impl_available(ZERO_IMPL_AVX2);
    for (int d = 0; d < 3; d++)
        for (int li = 0; li < 6; li++) {
            const zero_dtype dt = dts[d];
            const size_t n = lens[li], es = zero_dtype_size(dt);
            float *src = malloc((n + 1) * 4);
            unsigned char *init = malloc((n + 1) * es), *ref = malloc((n + 1) * es), *a = malloc((n + 1) * es),
                          *b = malloc((n + 1) * es);
            for (size_t i = 0; i < n; i++) {
                float x = value();
                src[i] = value();
                if (dt == ZERO_DTYPE_FP32) ((float *)init)[i] = x;
                else ((uint16_t *)init)[i] = to_half(dt, x);
            }
            for (size_t i = 0; i < n; i++) { /* the reference: widen, add in fp32, round once */
                if (dt == ZERO_DTYPE_FP32) ((float *)ref)[i] = ((float *)init)[i] + src[i];
                else ((uint16_t *)ref)[i] = to_half(dt, from_half(dt, ((uint16_t *)init)[i]) + src[i]);
            }
            memcpy(a, init, n * es);
            memcpy(b, init, n * es);
            zero__accumulate_scalar(dt, a, src, n);
            if (have_avx2) zero__accumulate_avx2(dt, b, src, n);
            else zero__accumulate(dt, b, src, n, ZERO_IMPL_AUTO);
            int bad = 0;
            for (size_t i = 0; i < n && !bad; i++) {
                if (!same(dt, a, ref, i)) {
                    ZT_FAIL("%s n=%zu: scalar element %zu differs from the reference", zero_dtype_name(dt), n, i);
                    bad = 1;
                }
                if (!same(dt, b, ref, i)) {
                    ZT_FAIL("%s n=%zu: %s element %zu differs from the reference", zero_dtype_name(dt), n,
                            have_avx2 ? "avx2" : "auto", i);
                    bad = 1;
                }
            }
            zt_checks++;
            free(src);
            free(init);
            free(ref);
            free(a);
            free(b);
        }
    /* the sum of squares */
    const size_t slens[10] = {0, 1, 7, 15, 16, 17, 1023, 1024, 1025, 70001};
    for (int d = 0; d < 3; d++)
        for (int li = 0; li < 10; li++) {
            const zero_dtype dt = dts[d];
            const size_t n = slens[li], es = zero_dtype_size(dt);
            unsigned char *x = malloc((n + 1) * es);
            long double ref = 0;
            for (size_t i = 0; i < n; i++) {
                float v = ((float)(int32_t)rnd() / 2147483648.0f) * (float)(1 << (rnd() % 12));
                if (dt == ZERO_DTYPE_FP32) ((float *)x)[i] = v;
                else ((uint16_t *)x)[i] = to_half(dt, v), v = from_half(dt, ((uint16_t *)x)[i]);
                ref += (long double)v * v;
            }
            const double a = zero__sumsq_scalar(dt, x, n);
            const double b = have_avx2 ? zero__sumsq_avx2(dt, x, n) : zero__sumsq(dt, x, n, ZERO_IMPL_AUTO);
            ZT_CHECKF(!memcmp(&a, &b, sizeof a), "sumsq %s n=%zu: scalar %.17g, %s %.17g", zero_dtype_name(dt), n, a,
                     have_avx2 ? "avx2" : "auto", b);
            ZT_CHECKF(fabsl((long double)a - ref) <= 4.0L * (long double)n * 0x1p-53L * ref,
                     "sumsq %s n=%zu: %.17g against the long-double sum %.17Lg", zero_dtype_name(dt), n, a, ref);
            if (n) { /* one special anywhere spoils the sum */
                const float sp[3] = {INFINITY, -INFINITY, NAN};
                const size_t at = n / 2;
                for (int k = 0; k < 3; k++) {
                    if (dt == ZERO_DTYPE_FP32) ((float *)x)[at] = sp[k];
                    else ((uint16_t *)x)[at] = to_half(dt, sp[k]);
                    ZT_CHECKF(!isfinite(zero__sumsq_scalar(dt, x, n)) && !isfinite(zero__sumsq(dt, x, n, ZERO_IMPL_AUTO)),
                             "sumsq %s n=%zu: a %g at %zu gave a finite sum", zero_dtype_name(dt), n, (double)sp[k], at);
                }
            }
            free(x);
        }
    return zt_finish("test_accumulate");
}
