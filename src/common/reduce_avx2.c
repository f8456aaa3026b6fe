/* The host reductions (many-source sum, half-precision accumulation, sum of squares) compiled for AVX2 + F16C
 * (8 fp32 lanes, vector half conversions); run only when the CPU has them. Bitwise equal to the
 * scalar bodies. */
#include "common/reduce_impl.h"
#include "common/dtype_impl.h"

void zero__reduce_avx2(zero_dtype dt, int max, const void *const *src, int nsrc, void *dst, size_t n, int stream) {
    const int bf = dt == ZERO_DTYPE_BF16;
    zero__reduce_body(dt, max, src, nsrc, dst, n, stream, bf ? zero__cvt_bf16_to_fp32_avx2 : zero__cvt_fp16_to_fp32_avx2,
                      bf ? zero__cvt_fp32_to_bf16_avx2 : zero__cvt_fp32_to_fp16_avx2);
}

void zero__accumulate_avx2(zero_dtype dt, void *dst, const float *src, size_t n) {
    const int bf = dt == ZERO_DTYPE_BF16;
    zero__accumulate_body(dt, dst, src, n, bf ? zero__cvt_bf16_to_fp32_avx2 : zero__cvt_fp16_to_fp32_avx2,
                          bf ? zero__cvt_fp32_to_bf16_avx2 : zero__cvt_fp32_to_fp16_avx2);
}

double zero__sumsq_avx2(zero_dtype dt, const void *x, size_t n) {
    return zero__sumsq_body(dt, x, n, dt == ZERO_DTYPE_BF16 ? zero__cvt_bf16_to_fp32_avx2 : zero__cvt_fp16_to_fp32_avx2);
}
