/* Host reduction arithmetic of the comm layer: the element-wise combine that the MPI backend's
 * user-defined ops run (half types in fp32), and the division that turns sums into averages. */
#include "comm/internal.h"

#include <math.h>

/* Elements of a half-type chunk converted at a time (two fp32 copies on the stack). */
#define ZERO__HALF_CHUNK 1024

static float half_to_f32(zero_dtype dt, uint16_t h) {
    return dt == ZERO_DTYPE_BF16 ? zero_bf16_to_fp32(h) : zero_fp16_to_fp32(h);
}

static uint16_t f32_to_half(zero_dtype dt, float f) {
    return dt == ZERO_DTYPE_BF16 ? zero_fp32_to_bf16(f) : zero_fp32_to_fp16(f);
}

/* NaN-propagating max: a NaN on either side wins, so an overflow anywhere shows everywhere. */
static inline float max_f32(float a, float b) {
    if (isnan(a)) return a;
    if (isnan(b)) return b;
    return a > b ? a : b;
}

#define ZERO__REDUCE_INT(T)                                                                        \
    do {                                                                                           \
        const T *x = in;                                                                           \
        T *y = inout;                                                                              \
        if (op == ZERO_OP_MAX)                                                                     \
            for (size_t i = 0; i < n; i++) y[i] = x[i] > y[i] ? x[i] : y[i];                      \
        else                                                                                       \
            for (size_t i = 0; i < n; i++) y[i] = (T)((U)y[i] + (U)x[i]);                         \
    } while (0)

void zero__comm_reduce(zero_dtype dt, zero_op op, const void *in, void *inout, size_t n) {
    switch (dt) {
    case ZERO_DTYPE_FP32: {
        const float *x = in;
        float *y = inout;
        if (op == ZERO_OP_MAX)
            for (size_t i = 0; i < n; i++) y[i] = max_f32(y[i], x[i]);
        else
            for (size_t i = 0; i < n; i++) y[i] += x[i];
        break;
    }
    case ZERO_DTYPE_BF16:
    case ZERO_DTYPE_FP16: {
        /* Widen a chunk of each side to fp32 (the vector converters), combine, round back once. */
        const uint16_t *x = in;
        uint16_t *y = inout;
        float a[ZERO__HALF_CHUNK], b[ZERO__HALF_CHUNK];
        for (size_t off = 0; off < n; off += ZERO__HALF_CHUNK) {
            size_t len = n - off < ZERO__HALF_CHUNK ? n - off : ZERO__HALF_CHUNK;
            zero_convert(y + off, dt, a, ZERO_DTYPE_FP32, len, ZERO_IMPL_AUTO);
            zero_convert(x + off, dt, b, ZERO_DTYPE_FP32, len, ZERO_IMPL_AUTO);
            if (op == ZERO_OP_MAX)
                for (size_t i = 0; i < len; i++) a[i] = max_f32(a[i], b[i]);
            else
                for (size_t i = 0; i < len; i++) a[i] += b[i];
            zero_convert(a, ZERO_DTYPE_FP32, y + off, dt, len, ZERO_IMPL_AUTO);
        }
        break;
    }
    case ZERO_DTYPE_INT32: {
        typedef uint32_t U;
        ZERO__REDUCE_INT(int32_t);
        break;
    }
    case ZERO_DTYPE_INT64: {
        typedef uint64_t U;
        ZERO__REDUCE_INT(int64_t);
        break;
    }
    case ZERO_DTYPE_UINT8: {
        typedef uint8_t U;
        ZERO__REDUCE_INT(uint8_t);
        break;
    }
    case ZERO_DTYPE_COUNT: break;
    }
}

void zero__comm_avg_finish(zero_dtype dt, void *buf, size_t n, int nranks) {
    if (nranks <= 1 || n == 0) return;
    switch (dt) {
    case ZERO_DTYPE_FP32: {
        float *y = buf, d = (float)nranks;
        for (size_t i = 0; i < n; i++) y[i] = y[i] / d;
        break;
    }
    case ZERO_DTYPE_BF16:
    case ZERO_DTYPE_FP16: {
        uint16_t *y = buf;
        float d = (float)nranks;
        for (size_t i = 0; i < n; i++) y[i] = f32_to_half(dt, half_to_f32(dt, y[i]) / d);
        break;
    }
    case ZERO_DTYPE_INT32: {
        int32_t *y = buf;
        for (size_t i = 0; i < n; i++) y[i] = y[i] / nranks;
        break;
    }
    case ZERO_DTYPE_INT64: {
        int64_t *y = buf;
        for (size_t i = 0; i < n; i++) y[i] = y[i] / nranks;
        break;
    }
    case ZERO_DTYPE_UINT8: {
        uint8_t *y = buf;
        for (size_t i = 0; i < n; i++) y[i] = (uint8_t)(y[i] / nranks);
        break;
    }
    case ZERO_DTYPE_COUNT: break;
    }
}
