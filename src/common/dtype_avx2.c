/* AVX2 + F16C array converters fp32 <-> bf16/fp16, 8 elements a step: dtype_vec.h compiled with
 * -mavx2 -mfma -mf16c, called only when the CPU has them (bitwise equal to dtype.c). */
#include "common/dtype_vec.h"
