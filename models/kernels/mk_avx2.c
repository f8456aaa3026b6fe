/* models/kernels/mk_avx2.c — the model kernels for AVX2 + FMA (8 lanes): mk_vec.h compiled with
 * -mavx2 -mfma -mf16c, called only after zero_impl_available(ZERO_IMPL_AVX2) said yes. */
#define MK_TABLE mk__isa_avx2
#include "kernels/mk_vec.h"
