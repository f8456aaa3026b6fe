/* models/kernels/mk_avx512.c — the model kernels for AVX-512 F/BW/VL/DQ (16 lanes): mk_vec.h
 * compiled with those flags, called only after zero_impl_available(ZERO_IMPL_AVX512) said yes. */
#define ZERO_VEC_AVX512 1
#define MK_TABLE mk__isa_avx512
#include "kernels/mk_vec.h"
