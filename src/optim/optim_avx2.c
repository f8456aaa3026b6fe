/* AVX2 optimizer kernels (8 lanes) with the fused bf16/fp16/fp32 write-back: optim_vec.h compiled
 * with -mavx2 -mfma -mf16c, run only when the CPU has them. Bitwise equal to zero__optim_scalar. */
/* No contraction into fma: each lane must round exactly where the scalar reference rounds. This
 * comes before every include, so that it covers the inline functions of the headers too. */
#pragma GCC optimize("fp-contract=off")

#include "optim/optim_vec.h"
