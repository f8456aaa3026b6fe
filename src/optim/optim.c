/* Optimizer step on one shard: hyper-parameter defaults, names, validation, the per-step
 * constants, the scalar reference kernel, and the OpenMP split over the chosen implementation. */
#pragma GCC optimize("fp-contract=off") /* the scalar reference: one rounding per operation */

#include "common/internal.h"
#include "optim/internal.h"

#include <strings.h>

const char *zero_optim_name(zero_optim_type t) {
    switch (t) {
    case ZERO_OPTIM_ADAMW: return "adamw";
    case ZERO_OPTIM_ADAM: return "adam";
    case ZERO_OPTIM_SGD: return "sgd";
    case ZERO_OPTIM_LION: return "lion";
    }
    return "invalid";
}

zero_status zero_optim_parse(const char *name, zero_optim_type *out) {
    static const char *known_unsupported[] = {"lamb", "onebitadam", "onebitlamb", "zerooneadam",
                                              "adagrad", "muadam", "muadamw", "musgd"};
    if (!name || !out) return ZERO_ERR_INVALID_ARG;
    for (int t = ZERO_OPTIM_ADAMW; t <= ZERO_OPTIM_LION; t++) {
        if (!strcasecmp(name, zero_optim_name((zero_optim_type)t))) {
            *out = (zero_optim_type)t;
            return ZERO_OK;
        }
    }
    for (size_t i = 0; i < sizeof known_unsupported / sizeof known_unsupported[0]; i++)
        if (!strcasecmp(name, known_unsupported[i])) return ZERO_ERR_UNSUPPORTED;
    return ZERO_ERR_INVALID_ARG;
}

int zero_optim_state_count(zero_optim_type t, float momentum) {
    switch (t) {
    case ZERO_OPTIM_ADAMW:
    case ZERO_OPTIM_ADAM: return 2;
    case ZERO_OPTIM_SGD: return momentum != 0.0f ? 1 : 0;
    case ZERO_OPTIM_LION: return 1;
    }
    return -1;
}

void zero_optim_hparams_default(zero_optim_hparams *h, zero_optim_type t) {
    if (!h) return;
    memset(h, 0, sizeof *h);
    h->type = t;
    h->lr = 1e-3f;
    h->beta1 = 0.9f;
    h->beta2 = t == ZERO_OPTIM_LION ? 0.99f : 0.999f;
    h->eps = 1e-8f;
    h->weight_decay = t == ZERO_OPTIM_ADAMW ? 0.01f : 0.0f;
    h->momentum = 0.0f;
    h->nesterov = 0;
    h->bias_correction = 1;
}

static int in_unit(float b) { return b >= 0.0f && b < 1.0f; }

static zero_status check_hparams(const zero_optim_hparams *h) {
    if (!(h->lr >= 0.0f) || !isfinite(h->lr)) return ZERO_ERR_INVALID_ARG;
    if (!(h->weight_decay >= 0.0f) || !isfinite(h->weight_decay)) return ZERO_ERR_INVALID_ARG;
    switch (h->type) {
    case ZERO_OPTIM_ADAMW:
    case ZERO_OPTIM_ADAM:
        if (!in_unit(h->beta1) || !in_unit(h->beta2) || !(h->eps >= 0.0f) || !isfinite(h->eps))
            return ZERO_ERR_INVALID_ARG;
        return ZERO_OK;
    case ZERO_OPTIM_SGD:
        if (!(h->momentum >= 0.0f) || !isfinite(h->momentum)) return ZERO_ERR_INVALID_ARG;
        if (h->nesterov && h->momentum == 0.0f) return ZERO_ERR_INVALID_ARG; /* as torch: needs momentum */
        return ZERO_OK;
    case ZERO_OPTIM_LION:
        if (!(h->beta1 >= 0.0f && h->beta1 <= 1.0f) || !(h->beta2 >= 0.0f && h->beta2 <= 1.0f))
            return ZERO_ERR_INVALID_ARG;
        return ZERO_OK;
    }
    return ZERO_ERR_INVALID_ARG;
}

void zero__optim_consts(const zero_optim_hparams *h, int64_t step, float grad_scale, float decay,
                        zero__optim_k *k) {
    memset(k, 0, sizeof *k);
    k->type = (int)h->type;
    k->grad_scale = grad_scale;
    k->lr = h->lr;
    k->beta1 = h->beta1;
    k->beta2 = h->beta2;
    k->omb1 = (float)(1.0 - (double)h->beta1);
    k->omb2 = (float)(1.0 - (double)h->beta2);
    k->eps = h->eps;
    k->step_size = h->lr;
    k->bc2_sqrt = 1.0f;
    if (h->bias_correction) {
        k->step_size = (float)((double)h->lr / (1.0 - pow((double)h->beta1, (double)step)));
        k->bc2_sqrt = (float)sqrt(1.0 - pow((double)h->beta2, (double)step));
    }
    const double wd = (double)h->weight_decay * (double)decay;
    k->wd = (float)wd;
    const int has_wd = k->wd != 0.0f;
    k->l2 = has_wd && (h->type == ZERO_OPTIM_ADAM || h->type == ZERO_OPTIM_SGD);
    k->decoupled = has_wd && (h->type == ZERO_OPTIM_ADAMW || h->type == ZERO_OPTIM_LION);
    k->decay_mul = (float)(1.0 - (double)h->lr * wd);
    k->momentum = h->momentum;
    k->nesterov = h->nesterov != 0;
    k->first_step = step == 1;
}

zero_status zero__optim_check(const zero_optim_hparams *h, int64_t step, float grad_scale, float decay, const void *out,
                              zero_dtype out_dt) {
    zero_status st = check_hparams(h);
    if (st != ZERO_OK) return st;
    if (step < 1) return ZERO_ERR_INVALID_ARG;
    if (!isfinite(grad_scale) || !isfinite(decay) || decay < 0.0f) return ZERO_ERR_INVALID_ARG;
    if (out && out_dt != ZERO_DTYPE_FP32 && out_dt != ZERO_DTYPE_BF16 && out_dt != ZERO_DTYPE_FP16)
        return ZERO_ERR_INVALID_ARG;
    return ZERO_OK;
}

/* The reference kernel: one loop per optimizer around the element steps of kernels/elem.h. */
void zero__optim_scalar(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g,
                        size_t n, void *out, zero_dtype out_dt) {
    switch (k->type) {
    case ZERO_OPTIM_ADAMW:
    case ZERO_OPTIM_ADAM:
        for (size_t i = 0; i < n; i++) zero__adam_elem(k, p + i, s0 + i, s1 + i, g[i]);
        break;
    case ZERO_OPTIM_SGD:
        for (size_t i = 0; i < n; i++) zero__sgd_elem(k, p + i, s0 ? s0 + i : NULL, g[i]);
        break;
    case ZERO_OPTIM_LION:
        for (size_t i = 0; i < n; i++) zero__lion_elem(k, p + i, s0 + i, g[i]);
        break;
    }
    if (out) {
        if (out_dt == ZERO_DTYPE_FP32) memcpy(out, p, n * sizeof(float));
        else
            for (size_t i = 0; i < n; i++) zero__store_out(out, out_dt, i, p[i]);
    }
}

/* Elements per OpenMP work item: a multiple of every vector width (64 bytes of fp32 and more),
 * so every chunk but the last is whole vectors; large enough that scheduling costs nothing. */
#define OPTIM_CHUNK ((size_t)1 << 14)
/* Below this the step runs on the calling thread: waking the team would cost more. */
#define OPTIM_PARALLEL_MIN ((size_t)1 << 16)

zero_status zero_optim_step(const zero_optim_hparams *h, int64_t step, float *master, float *s0,
                            float *s1, const float *grad, float grad_scale, float decay,
                            size_t n, void *out, zero_dtype out_dt, zero_impl impl) {
    if (!h) return ZERO_ERR_INVALID_ARG;
    zero_status st = zero__optim_check(h, step, grad_scale, decay, out, out_dt);
    if (st != ZERO_OK) return st;
    if (impl == ZERO_IMPL_AUTO) impl = zero_impl_best();
    zero__optim_kernel kern;
    switch (impl) {
    case ZERO_IMPL_SCALAR: kern = zero__optim_scalar; break;
    case ZERO_IMPL_AVX2: kern = zero__optim_avx2; break;
    case ZERO_IMPL_AVX512: kern = zero__optim_avx512; break;
    default: return ZERO_ERR_INVALID_ARG;
    }
    if (!zero_impl_available(impl)) return ZERO_ERR_UNSUPPORTED;
    if (n == 0) return ZERO_OK;
    if (!master || !grad) return ZERO_ERR_INVALID_ARG;
    const int states = zero_optim_state_count(h->type, h->momentum);
    if ((states >= 1 && !s0) || (states >= 2 && !s1)) return ZERO_ERR_INVALID_ARG;
    if (states < 1) s0 = NULL; /* SGD without momentum keeps no buffer */
    if (states < 2) s1 = NULL;
    if (out == (void *)master && out_dt == ZERO_DTYPE_FP32) out = NULL; /* the master is the working copy */

    zero__optim_k k;
    zero__optim_consts(h, step, grad_scale, decay, &k);
    const size_t es = out ? zero_dtype_size(out_dt) : 0;
    const size_t nchunks = (n + OPTIM_CHUNK - 1) / OPTIM_CHUNK;
    /* Each element's update reads only its own slot, and every impl gives the same bits, so
     * the result does not depend on the number of threads or on where the chunks split. */
#pragma omp parallel for schedule(static) if (n >= OPTIM_PARALLEL_MIN)
    for (size_t c = 0; c < nchunks; c++) {
        const size_t off = c * OPTIM_CHUNK, len = n - off < OPTIM_CHUNK ? n - off : OPTIM_CHUNK;
        kern(&k, master + off, s0 ? s0 + off : NULL, s1 ? s1 + off : NULL, grad + off, len,
             out ? (char *)out + off * es : NULL, out_dt);
    }
    return ZERO_OK;
}
