/* The many-source reduction of the shared-memory collectives: the baseline-ISA body (vectorized
 * by OpenMP simd for SSE2, scalar half conversions) and the run-time choice of the AVX2 one. */
#include "comm/shm_reduce_impl.h"
#include "common/dtype_impl.h"

static void widen_bf16(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = zero__bf16_bits_to_fp32(src[i]);
}
static void widen_fp16(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = zero__fp16_bits_to_fp32(src[i]);
}
static void narrow_bf16(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = zero__fp32_to_bf16_bits(src[i]);
}
static void narrow_fp16(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = zero__fp32_to_fp16_bits(src[i]);
}

void zero__shm_reduce_scalar(zero_dtype dt, zero_op op, const void *const *src, int nsrc, void *dst,
                             size_t n) {
    const int bf = dt == ZERO_DTYPE_BF16;
    zero__shm_reduce_body(dt, op, src, nsrc, dst, n, bf ? widen_bf16 : widen_fp16,
                          bf ? narrow_bf16 : narrow_fp16);
}

void zero__shm_reduce(zero_dtype dt, zero_op op, const void *const *src, int nsrc, void *dst,
                      size_t n, zero_impl impl) {
    if (impl == ZERO_IMPL_AUTO) impl = zero_impl_best();
    /* AVX-512 adds nothing here: the loop is bound by memory, and the AVX2 body runs there too. */
    if (impl != ZERO_IMPL_SCALAR && zero_impl_available(ZERO_IMPL_AVX2))
        zero__shm_reduce_avx2(dt, op, src, nsrc, dst, n);
    else
        zero__shm_reduce_scalar(dt, op, src, nsrc, dst, n);
}
