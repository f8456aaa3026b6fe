/* The safetensors dtypes (every one with a whole number of bytes per element), their sizes and
 * zero equivalents, and the byte count of a shape. */
#include "ckpt/internal.h"

#include <string.h>

/* Every dtype of the format with a whole number of bytes per element. */
static const struct {
    const char *name;
    size_t size;
    zero_dtype z;
} k_dtypes[] = {
    {"F32", 4, ZERO_DTYPE_FP32},     {"BF16", 2, ZERO_DTYPE_BF16},    {"F16", 2, ZERO_DTYPE_FP16},
    {"I32", 4, ZERO_DTYPE_INT32},    {"I64", 8, ZERO_DTYPE_INT64},    {"U8", 1, ZERO_DTYPE_UINT8},
    {"F64", 8, ZERO_DTYPE_COUNT},    {"I8", 1, ZERO_DTYPE_COUNT},     {"I16", 2, ZERO_DTYPE_COUNT},
    {"U16", 2, ZERO_DTYPE_COUNT},    {"U32", 4, ZERO_DTYPE_COUNT},    {"U64", 8, ZERO_DTYPE_COUNT},
    {"BOOL", 1, ZERO_DTYPE_COUNT},   {"F8_E4M3", 1, ZERO_DTYPE_COUNT}, {"F8_E5M2", 1, ZERO_DTYPE_COUNT},
    {"F8_E8M0", 1, ZERO_DTYPE_COUNT},
};
#define NDTYPES (sizeof k_dtypes / sizeof k_dtypes[0])

const char *zero_st_dtype_name(zero_dtype dt) {
    for (size_t i = 0; i < NDTYPES; i++)
        if (k_dtypes[i].z == dt && dt != ZERO_DTYPE_COUNT) return k_dtypes[i].name;
    return NULL;
}

int64_t zero__st_shape_bytes(const int64_t *shape, int ndim, size_t elem, uint64_t *numel) {
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return -1;
        if (shape[d] && n > (UINT64_C(1) << 62) / (uint64_t)shape[d]) return -1;
        n *= (uint64_t)shape[d];
    }
    if (n && n > (UINT64_C(1) << 62) / elem) return -1;
    if (numel) *numel = n;
    return (int64_t)(n * elem);
}

int zero__st_dtype_lookup(const char *name, const char **canonical, size_t *size, zero_dtype *z) {
    for (size_t i = 0; i < NDTYPES; i++) {
        if (!strcmp(k_dtypes[i].name, name)) {
            *canonical = k_dtypes[i].name;
            *size = k_dtypes[i].size;
            *z = k_dtypes[i].z;
            return 1;
        }
    }
    return 0;
}
