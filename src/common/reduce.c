/* The host reductions every layer shares (the shared-memory collectives' many-source sum, the
 * engine's gradient accumulation): the baseline-ISA bodies (vectorized by OpenMP simd for SSE2,
 * scalar half conversions), the run-time choice of the AVX2 ones, and the streaming copy that
 * writes large results past the caches. */
#include "common/reduce_impl.h"
#include "common/dtype_impl.h"

#include <stdint.h>

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

void zero__reduce_scalar(zero_dtype dt, int max, const void *const *src, int nsrc, void *dst, size_t n,
                         int stream) {
    const int bf = dt == ZERO_DTYPE_BF16;
    zero__reduce_body(dt, max, src, nsrc, dst, n, stream, bf ? widen_bf16 : widen_fp16, bf ? narrow_bf16 : narrow_fp16);
}

void zero__accumulate_scalar(zero_dtype dt, void *dst, const float *src, size_t n) {
    const int bf = dt == ZERO_DTYPE_BF16;
    zero__accumulate_body(dt, dst, src, n, bf ? widen_bf16 : widen_fp16, bf ? narrow_bf16 : narrow_fp16);
}

double zero__sumsq_scalar(zero_dtype dt, const void *x, size_t n) {
    return zero__sumsq_body(dt, x, n, dt == ZERO_DTYPE_BF16 ? widen_bf16 : widen_fp16);
}

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

void zero__copy_stream(void *dst, const void *src, size_t n) {
    zero__copy_stream_unfenced(dst, src, n);
    zero__stream_fence();
}

void zero__copy_stream_unfenced(void *dst, const void *src, size_t n) {
#if defined(__x86_64__)
    unsigned char *d = dst;
    const unsigned char *s = src;
    /* Head up to a 16-byte boundary of dst, streaming stores of 64 bytes, tail. */
    size_t head = (size_t)(-(uintptr_t)d & 15u);
    if (head > n) head = n;
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 48));
        _mm_stream_si128((__m128i *)(void *)(d + i), a);
        _mm_stream_si128((__m128i *)(void *)(d + i + 16), b);
        _mm_stream_si128((__m128i *)(void *)(d + i + 32), c);
        _mm_stream_si128((__m128i *)(void *)(d + i + 48), e);
    }
    memcpy(d + i, s + i, n - i);
#else
    memcpy(dst, src, n);
#endif
}

/* AVX-512 adds nothing here: the loops are bound by memory, and the AVX2 bodies run there too. */
static int use_avx2(zero_impl impl) {
    if (impl == ZERO_IMPL_AUTO) impl = zero_impl_best();
    return impl != ZERO_IMPL_SCALAR && zero_impl_available(ZERO_IMPL_AVX2);
}

void zero__reduce(zero_dtype dt, int max, const void *const *src, int nsrc, void *dst, size_t n, int stream,
                  zero_impl impl) {
    if (use_avx2(impl)) zero__reduce_avx2(dt, max, src, nsrc, dst, n, stream);
    else zero__reduce_scalar(dt, max, src, nsrc, dst, n, stream);
}

void zero__accumulate(zero_dtype dt, void *dst, const float *src, size_t n, zero_impl impl) {
    if (use_avx2(impl)) zero__accumulate_avx2(dt, dst, src, n);
    else zero__accumulate_scalar(dt, dst, src, n);
}

double zero__sumsq(zero_dtype dt, const void *x, size_t n, zero_impl impl) {
    return use_avx2(impl) ? zero__sumsq_avx2(dt, x, n) : zero__sumsq_scalar(dt, x, n);
}
