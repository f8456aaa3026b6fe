/* Reference conversions for the tests, independent of src/common: the bits of an fp32, bf16
 * rounded to nearest even by bit arithmetic (a NaN stays a quiet NaN), fp16 by the compiler's
 * IEEE binary16 (GCC 12 on x86-64). */
#ifndef ZERO_TESTS_REF_HALF_H
#define ZERO_TESTS_REF_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint16_t ref_to_bf16(float f) {
    uint32_t u = f32_bits(f);
    if (f != f) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
static inline float ref_from_bf16(uint16_t h) { return bits_f32((uint32_t)h << 16); }
static inline uint16_t ref_to_fp16(float f) {
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}
static inline float ref_from_fp16(uint16_t u) {
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

#endif
