/* Dtypes: sizes, names, parsing, the scalar fp32 <-> bf16/fp16 conversions (the reference the
 * vector converters in dtype_avx2.c / dtype_avx512.c are tested against) and zero_convert. */
#include "common/dtype_impl.h"
#include "common/internal.h"

#include <strings.h>

size_t zero_dtype_size(zero_dtype dt) {
    switch (dt) {
    case ZERO_DTYPE_FP32: return 4;
    case ZERO_DTYPE_BF16: return 2;
    case ZERO_DTYPE_FP16: return 2;
    case ZERO_DTYPE_INT32: return 4;
    case ZERO_DTYPE_INT64: return 8;
    case ZERO_DTYPE_UINT8: return 1;
    case ZERO_DTYPE_COUNT: break;
    }
    return 0;
}

const char *zero_dtype_name(zero_dtype dt) {
    switch (dt) {
    case ZERO_DTYPE_FP32: return "fp32";
    case ZERO_DTYPE_BF16: return "bf16";
    case ZERO_DTYPE_FP16: return "fp16";
    case ZERO_DTYPE_INT32: return "int32";
    case ZERO_DTYPE_INT64: return "int64";
    case ZERO_DTYPE_UINT8: return "uint8";
    case ZERO_DTYPE_COUNT: break;
    }
    return "invalid";
}

zero_status zero_dtype_parse(const char *name, zero_dtype *out) {
    static const struct {
        const char *name;
        zero_dtype dt;
    } names[] = {
        {"fp32", ZERO_DTYPE_FP32},  {"float32", ZERO_DTYPE_FP32}, {"bf16", ZERO_DTYPE_BF16},
        {"bfloat16", ZERO_DTYPE_BF16}, {"fp16", ZERO_DTYPE_FP16}, {"float16", ZERO_DTYPE_FP16},
        {"half", ZERO_DTYPE_FP16},  {"int32", ZERO_DTYPE_INT32},  {"int64", ZERO_DTYPE_INT64},
        {"uint8", ZERO_DTYPE_UINT8},
    };
    if (!name || !out) return ZERO_ERR_INVALID_ARG;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!strcasecmp(name, names[i].name)) {
            *out = names[i].dt;
            return ZERO_OK;
        }
    }
    return ZERO_ERR_INVALID_ARG;
}

uint16_t zero_fp32_to_bf16(float f) { return zero__fp32_to_bf16_bits(f); }
float zero_bf16_to_fp32(uint16_t h) { return zero__bf16_bits_to_fp32(h); }
uint16_t zero_fp32_to_fp16(float f) { return zero__fp32_to_fp16_bits(f); }
float zero_fp16_to_fp32(uint16_t h) { return zero__fp16_bits_to_fp32(h); }

typedef void (*narrow_fn)(const float *, uint16_t *, size_t);
typedef void (*widen_fn)(const uint16_t *, float *, size_t);

static void narrow_bf16_scalar(const float *s, uint16_t *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = zero__fp32_to_bf16_bits(s[i]);
}
static void widen_bf16_scalar(const uint16_t *s, float *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = zero__bf16_bits_to_fp32(s[i]);
}
static void narrow_fp16_scalar(const float *s, uint16_t *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = zero__fp32_to_fp16_bits(s[i]);
}
static void widen_fp16_scalar(const uint16_t *s, float *d, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = zero__fp16_bits_to_fp32(s[i]);
}

/* Elements per parallel chunk: a multiple of every vector width, large enough that the OpenMP
 * hand-off costs nothing next to the memory traffic. */
#define CVT_CHUNK ((size_t)1 << 15)

zero_status zero_convert(const void *src, zero_dtype src_dt, void *dst, zero_dtype dst_dt, size_t n,
                         zero_impl impl) {
    if (n == 0) return ZERO_OK;
    if (!src || !dst) return ZERO_ERR_INVALID_ARG;
    if (impl == ZERO_IMPL_AUTO) impl = zero_impl_best();
    if (impl != ZERO_IMPL_SCALAR && impl != ZERO_IMPL_AVX2 && impl != ZERO_IMPL_AVX512)
        return ZERO_ERR_INVALID_ARG;
    if (!zero_impl_available(impl)) return ZERO_ERR_UNSUPPORTED;
    if (src_dt == dst_dt) {
        size_t es = zero_dtype_size(src_dt);
        if (es == 0) return ZERO_ERR_INVALID_ARG;
        memcpy(dst, src, n * es);
        return ZERO_OK;
    }
    int half_src = src_dt == ZERO_DTYPE_BF16 || src_dt == ZERO_DTYPE_FP16;
    int half_dst = dst_dt == ZERO_DTYPE_BF16 || dst_dt == ZERO_DTYPE_FP16;
    narrow_fn narrow = NULL;
    widen_fn widen = NULL;
    if (src_dt == ZERO_DTYPE_FP32 && half_dst) {
        int bf = dst_dt == ZERO_DTYPE_BF16;
        narrow = bf ? narrow_bf16_scalar : narrow_fp16_scalar;
        if (impl == ZERO_IMPL_AVX2) narrow = bf ? zero__cvt_fp32_to_bf16_avx2 : zero__cvt_fp32_to_fp16_avx2;
        if (impl == ZERO_IMPL_AVX512)
            narrow = bf ? zero__cvt_fp32_to_bf16_avx512 : zero__cvt_fp32_to_fp16_avx512;
    } else if (half_src && dst_dt == ZERO_DTYPE_FP32) {
        int bf = src_dt == ZERO_DTYPE_BF16;
        widen = bf ? widen_bf16_scalar : widen_fp16_scalar;
        if (impl == ZERO_IMPL_AVX2) widen = bf ? zero__cvt_bf16_to_fp32_avx2 : zero__cvt_fp16_to_fp32_avx2;
        if (impl == ZERO_IMPL_AVX512)
            widen = bf ? zero__cvt_bf16_to_fp32_avx512 : zero__cvt_fp16_to_fp32_avx512;
    } else {
        return ZERO_ERR_INVALID_ARG;
    }
    const size_t nchunks = (n + CVT_CHUNK - 1) / CVT_CHUNK;
    /* Elementwise: any split gives the same bits. */
#pragma omp parallel for schedule(static) if (nchunks > 1)
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * CVT_CHUNK, len = n - off < CVT_CHUNK ? n - off : CVT_CHUNK;
        if (narrow) narrow((const float *)src + off, (uint16_t *)dst + off, len);
        else widen((const uint16_t *)src + off, (float *)dst + off, len);
    }
    return ZERO_OK;
}
