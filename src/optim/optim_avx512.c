/* AVX-512 optimizer kernels (16 lanes) with the fused bf16/fp16/fp32 write-back: optim_vec.h
 * compiled with the AVX-512 flags, run only when the CPU has them. Bitwise equal to
 * zero__optim_scalar. */
/* No contraction into fma: each lane must round exactly where the scalar reference rounds. This
 * comes before every include, so that it covers the inline functions of the headers too. */
#pragma GCC optimize("fp-contract=off")

#define ZERO_VEC_AVX512 1
#include "optim/optim_vec.h"
