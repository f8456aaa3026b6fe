/* 8-bit optimizer states (zero_optim_step_q8, zero/optim.h; docs/QUANT.md): a chunk of whole blocks
 * at a time, the moments decoded to fp32 from the dynamic maps, zero_optim_step on them (the fp32
 * step itself), the moments coded again against their new absmax — the engine's 8-bit step
 * (src/engine/step.c) is the same sequence. */
#pragma GCC optimize("fp-contract=off")
#include "optim/internal.h"
#include "quant/internal.h"
#include "zero/quant.h"

#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* elements decoded at a time: whole blocks */
#define Q8_CHUNK ((size_t)1 << 14)

zero_status zero_optim_step_q8(const zero_optim_hparams *h, int64_t step, float *master, const zero_q8_state *st,
                               const float *grad, float grad_scale, float decay, size_t n, void *out,
                               zero_dtype out_dt) {
    if (!h || !st) return ZERO_ERR_INVALID_ARG;
    if (h->type != ZERO_OPTIM_ADAMW && h->type != ZERO_OPTIM_ADAM) return ZERO_ERR_UNSUPPORTED;
    zero_status s = zero__optim_check(h, step, grad_scale, decay, out, out_dt);
    if (s != ZERO_OK) return s;
    if (n == 0) return ZERO_OK;
    if (!master || !grad || !st->m || !st->v || !st->m_absmax || !st->v_absmax) return ZERO_ERR_INVALID_ARG;
    const float *map_signed = zero__quant_map(ZERO__QMAP_SIGNED), *map_unsigned = zero__quant_map(ZERO__QMAP_UNSIGNED);
    const size_t es = out ? zero_dtype_size(out_dt) : 0, nchunks = (n + Q8_CHUNK - 1) / Q8_CHUNK;
    const int par = n >= 4 * Q8_CHUNK;
#ifdef _OPENMP
    const int nthreads = par ? omp_get_max_threads() : 1;
#else
    const int nthreads = 1;
#endif
    /* the moments' fp32 buffers, one pair a thread, taken before anything is updated */
    float *buf = malloc((size_t)nthreads * 2 * Q8_CHUNK * sizeof *buf);
    if (!buf) return ZERO_ERR_NOMEM;
        /* chunks are independent (whole blocks): any thread count, the same bits */
#pragma omp parallel for schedule(static) if (par) num_threads(nthreads)
    for (size_t j = 0; j < nchunks; j++) {
#ifdef _OPENMP
        float *m = buf + (size_t)omp_get_thread_num() * 2 * Q8_CHUNK;
#else
        float *m = buf;
#endif
        float *v = m + Q8_CHUNK;
        const size_t c = j * Q8_CHUNK, len = n - c < Q8_CHUNK ? n - c : Q8_CHUNK, b = c / ZERO_QUANT_Q8_BLOCK;
        zero_dequant_blockwise(st->m + c, st->m_absmax + b, map_signed, ZERO_QUANT_Q8_BLOCK, 0, len, m);
        zero_dequant_blockwise(st->v + c, st->v_absmax + b, map_unsigned, ZERO_QUANT_Q8_BLOCK, 0, len, v);
        /* the arguments were checked above: the fp32 step cannot fail here */
        (void)zero_optim_step(h, step, master + c, m, v, grad + c, grad_scale, decay, len,
                              out ? (char *)out + c * es : NULL, out_dt, ZERO_IMPL_AUTO);
        zero_quant_blockwise(m, len, ZERO_QUANT_Q8_BLOCK, map_signed, st->m + c, st->m_absmax + b);
        zero_quant_blockwise(v, len, ZERO_QUANT_Q8_BLOCK, map_unsigned, st->v + c, st->v_absmax + b);
    }
    free(buf);
    return s;
}
