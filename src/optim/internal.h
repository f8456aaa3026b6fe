/* Private to the optim layer: the per-step constants every kernel reads, the scalar loop over the
 * kernel layer's element steps (the reference, also the vector tails) and the per-ISA entry points. */
#ifndef ZERO_OPTIM_INTERNAL_H
#define ZERO_OPTIM_INTERNAL_H

#include "common/dtype_impl.h"
#include "kernels/elem.h"
#include "zero/optim.h"

#include <math.h>

/* Everything a kernel needs for one step, computed once (in double, rounded to float) so that
 * every implementation reads the same float constants: zero__optim_k, a struct of the kernel
 * layer (kernels/elem.h), which a GPU kernel takes by value. h is valid (check_hparams). */
void zero__optim_consts(const zero_optim_hparams *h, int64_t step, float grad_scale, float decay, zero__optim_k *k);

/* The arguments zero_optim_step and zero_optim_step_q8 share: ZERO_ERR_INVALID_ARG for a bad one. */
zero_status zero__optim_check(const zero_optim_hparams *h, int64_t step, float grad_scale, float decay, const void *out,
                              zero_dtype out_dt);

/* A kernel on n elements: p (master), s0/s1 (states), g (gradient); out: the write-back of
 * element 0 of this range in out_dt, or NULL. Vector kernels equal the scalar one bitwise. */
typedef void (*zero__optim_kernel)(const zero__optim_k *k, float *p, float *s0, float *s1,
                                   const float *g, size_t n, void *out, zero_dtype out_dt);

void zero__optim_scalar(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                        size_t n, void *out, zero_dtype out_dt);
void zero__optim_avx2(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                      size_t n, void *out, zero_dtype out_dt);
void zero__optim_avx512(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                        size_t n, void *out, zero_dtype out_dt);

/* The scalar reference is a loop over the kernel layer's element steps (zero__adam_elem,
 * zero__sgd_elem, zero__lion_elem: kernels/elem.h), each a fixed order of single IEEE float
 * operations (no fma: the files that use them are compiled with fp-contract off), which the
 * vector bodies (optim_vec.h) repeat lane by lane: that is what makes them bitwise equal. */

static inline void zero__store_out(void *out, zero_dtype dt, size_t i, float x) {
    if (dt == ZERO_DTYPE_BF16) ((uint16_t *)out)[i] = zero__fp32_to_bf16_bits(x);
    else if (dt == ZERO_DTYPE_FP16) ((uint16_t *)out)[i] = zero__fp32_to_fp16_bits(x);
    else ((float *)out)[i] = x;
}

/* The scalar loop over [i0, n): the reference kernel, and the tails of the vector kernels. */
static inline void zero__optim_scalar_range(const zero__optim_k *k, float *p, float *s0, float *s1,
                                            const float *g, size_t i0, size_t n, void *out,
                                            zero_dtype out_dt) {
    for (size_t i = i0; i < n; i++) {
        switch (k->type) {
        case ZERO_OPTIM_ADAMW:
        case ZERO_OPTIM_ADAM: zero__adam_elem(k, p + i, s0 + i, s1 + i, g[i]); break;
        case ZERO_OPTIM_SGD: zero__sgd_elem(k, p + i, s0 ? s0 + i : NULL, g[i]); break;
        case ZERO_OPTIM_LION: zero__lion_elem(k, p + i, s0 + i, g[i]); break;
        }
        if (out) zero__store_out(out, out_dt, i, p[i]);
    }
}

#endif
