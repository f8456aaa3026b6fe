/* AVX-512 (F/BW) array converters fp32 <-> bf16/fp16, 16 elements a step: dtype_vec.h compiled
 * with the AVX-512 flags, called only when the CPU has them (bitwise equal to dtype.c). */
#define ZERO_VEC_AVX512 1
#include "common/dtype_vec.h"
