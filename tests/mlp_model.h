/* tests/mlp_model.h — a small MLP with explicit forward/backward trained through the engine:
 * the equivalence oracle of the engine tests. Layer l is one unit {W (out x in), b (out)}; tanh
 * between layers; loss = mean over the micro-batch of 0.5 * |y - t|^2. Sizes are odd on purpose
 * so padding is exercised. Samples are a deterministic function of their global index. */
#ifndef ZERO_TEST_MLP_MODEL_H
#define ZERO_TEST_MLP_MODEL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zero/zero.h"

#define MLP_LAYERS 3
static const int mlp_dims[MLP_LAYERS + 1] = {13, 37, 29, 5};

static inline uint64_t mlp_hash(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
/* uniform in [-1, 1) */
static inline float mlp_uniform(uint64_t key) { return (float)((double)(mlp_hash(key) >> 11) / 9007199254740992.0 * 2.0 - 1.0); }

static inline void mlp_sample(int64_t index, float *x, float *t) {
    for (int i = 0; i < mlp_dims[0]; i++) x[i] = mlp_uniform(((uint64_t)index << 16) + (uint64_t)i);
    for (int o = 0; o < mlp_dims[MLP_LAYERS]; o++) {
        float acc = 0; /* a smooth target the MLP can fit */
        for (int i = 0; i < mlp_dims[0]; i++) acc += x[i] * mlp_uniform(0xabcdull * 1000 + (uint64_t)(o * 64 + i));
        t[o] = tanhf(acc * 0.5f);
    }
}

/* Registers the units, layer l's weight with flags wflags[l] (NULL: none; its bias is always
 * ZERO_PARAM_NO_DECAY), and finalizes; returns 0 or a negative status. */
static inline int mlp_register_flags(zero_engine *e, const unsigned *wflags) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d", l);
        int u = zero_engine_add_unit(e, name);
        if (u < 0) return u;
        int64_t wshape[2] = {mlp_dims[l + 1], mlp_dims[l]}, bshape[1] = {mlp_dims[l + 1]};
        snprintf(name, sizeof name, "layer%d.weight", l);
        int s = zero_engine_add_param(e, u, name, wshape, 2, wflags ? wflags[l] : 0);
        if (s) return s;
        snprintf(name, sizeof name, "layer%d.bias", l);
        s = zero_engine_add_param(e, u, name, bshape, 1, ZERO_PARAM_NO_DECAY);
        if (s) return s;
    }
    return zero_engine_finalize(e);
}

static inline int mlp_register(zero_engine *e) { return mlp_register_flags(e, NULL); }

static inline int mlp_unit_numel(int l) { return mlp_dims[l + 1] * mlp_dims[l] + mlp_dims[l + 1]; }

static inline int mlp_init(zero_engine *e, uint64_t seed) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        int n = mlp_unit_numel(l);
        float *v = malloc((size_t)n * sizeof *v);
        float s = 1.0f / sqrtf((float)mlp_dims[l]);
        for (int i = 0; i < n; i++) v[i] = s * mlp_uniform((seed << 40) + ((uint64_t)l << 32) + (uint64_t)i);
        int st = zero_engine_set_unit(e, l, v);
        free(v);
        if (st) return st;
    }
    return 0;
}

/* Forward + backward of one micro-batch of `bsz` samples starting at global sample `first`.
 * Adds loss_scale * d(mean loss)/d(params) into the engine's gradient buffers. Returns the
 * micro-batch mean loss, or NAN on an engine error. `inject` multiplies the gradient (to force an
 * fp16 overflow in tests; 1 otherwise). */
static inline double mlp_micro_batch(zero_engine *e, int64_t first, int bsz, float inject) {
    const int L = MLP_LAYERS;
    int maxd = 0;
    for (int l = 0; l <= L; l++) maxd = mlp_dims[l] > maxd ? mlp_dims[l] : maxd;
    /* act[l]: input of layer l (after tanh), l = 0..L; act[L] = output y */
    float *act = calloc((size_t)(L + 1) * bsz * maxd, sizeof(float));
    float *t = calloc((size_t)bsz * maxd, sizeof(float));
    float *d = calloc((size_t)bsz * maxd, sizeof(float)), *dn = calloc((size_t)bsz * maxd, sizeof(float));
#define ACT(l, b, i) act[((size_t)(l) * bsz + (b)) * maxd + (i)]
    for (int b = 0; b < bsz; b++) mlp_sample(first + b, &ACT(0, b, 0), &t[(size_t)b * maxd]);
    double loss = 0;
    for (int l = 0; l < L; l++) {
        const float *p = zero_engine_gather(e, l);
        if (!p) { loss = NAN; goto out; }
        const int in = mlp_dims[l], outd = mlp_dims[l + 1];
        const float *W = p, *bias = p + (size_t)in * outd;
        for (int b = 0; b < bsz; b++)
            for (int o = 0; o < outd; o++) {
                float acc = bias[o];
                for (int i = 0; i < in; i++) acc += W[(size_t)o * in + i] * ACT(l, b, i);
                ACT(l + 1, b, o) = l + 1 < L ? tanhf(acc) : acc;
            }
        zero_engine_release(e, l);
    }
    const float scale = (float)zero_engine_loss_scale(e) * inject;
    for (int b = 0; b < bsz; b++)
        for (int o = 0; o < mlp_dims[L]; o++) {
            float r = ACT(L, b, o) - t[(size_t)b * maxd + o];
            loss += 0.5 * (double)r * r;
            d[(size_t)b * maxd + o] = r * scale / (float)bsz; /* d loss / d y */
        }
    loss /= bsz;
    for (int l = L - 1; l >= 0; l--) {
        const float *p = zero_engine_gather(e, l);
        float *g = p ? zero_engine_grad(e, l) : NULL;
        if (!g) { loss = NAN; goto out; }
        const int in = mlp_dims[l], outd = mlp_dims[l + 1];
        const float *W = p;
        float *gW = g, *gb = g + (size_t)in * outd;
        for (int b = 0; b < bsz; b++)
            for (int o = 0; o < outd; o++) {
                float dv = d[(size_t)b * maxd + o];
                gb[o] += dv;
                for (int i = 0; i < in; i++) gW[(size_t)o * in + i] += dv * ACT(l, b, i);
            }
        if (l > 0)
            for (int b = 0; b < bsz; b++)
                for (int i = 0; i < in; i++) {
                    float acc = 0;
                    for (int o = 0; o < outd; o++) acc += W[(size_t)o * in + i] * d[(size_t)b * maxd + o];
                    float a = ACT(l, b, i);
                    dn[(size_t)b * maxd + i] = acc * (1 - a * a);
                }
        if (zero_engine_grad_ready(e, l) || zero_engine_release(e, l)) { loss = NAN; goto out; }
        float *tmp = d; d = dn; dn = tmp;
    }
out:
#undef ACT
    free(act); free(t); free(d); free(dn);
    return loss;
}

/* One optimizer step over `accum` micro-batches of `bsz` samples on each of `world` ranks; the
 * global batch of step s is samples [s*G, (s+1)*G), G = world*accum*bsz, and rank r's micro-batch
 * k is global micro-batch k*world + r, so any (world, accum) with equal G sees the same data. */
static int mlp_redos; /* deterministic mode: steps computed again (mlp_train_step) */

static inline int mlp_train_step(zero_engine *e, int64_t s, int world, int rank, int accum, int bsz,
                                 double *loss_out, zero_step_stats *st, float inject) {
    const int64_t G = (int64_t)world * accum * bsz;
    /* deterministic mode (counted in mlp_redos): a step whose gradients outgrew their grids (the first, always) asks for
     * the same samples again; twice in a row would mean the samples changed */
    for (int attempt = 0; attempt < 2; attempt++) {
        double loss = 0;
        for (int k = 0; k < accum; k++) {
            int64_t m = (int64_t)k * world + rank;
            double l = mlp_micro_batch(e, s * G + m * bsz, bsz, inject);
            if (isnan(l)) return -1;
            loss += l / accum;
            if (zero_engine_micro_batch_done(e)) return -1;
        }
        if (loss_out) *loss_out = loss;
        zero_step_stats mine;
        if (!st) st = &mine;
        if (zero_engine_step(e, st)) return -1;
        if (!st->redo) return 0;
        mlp_redos++;
    }
    return -1;
}

#endif
