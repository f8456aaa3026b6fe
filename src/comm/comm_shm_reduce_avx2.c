/* The many-source reduction of the shared-memory collectives compiled for AVX2 + F16C (8 fp32
 * lanes, vector half conversions); run only when the CPU has them. Bitwise equal to the scalar. */
#include "comm/shm_reduce_impl.h"
#include "common/dtype_impl.h"

void zero__shm_reduce_avx2(zero_dtype dt, zero_op op, const void *const *src, int nsrc, void *dst,
                           size_t n, int stream) {
    const int bf = dt == ZERO_DTYPE_BF16;
    zero__shm_reduce_body(dt, op, src, nsrc, dst, n, stream,
                          bf ? zero__cvt_bf16_to_fp32_avx2 : zero__cvt_fp16_to_fp32_avx2,
                          bf ? zero__cvt_fp32_to_bf16_avx2 : zero__cvt_fp32_to_fp16_avx2);
}
