/* tests/engine_device.h — the engine on a device against the engine on the cpu backend, for the
 * tests that hold the two to the same bits (tests/mpi/test_engine_device.c on 1-4 ranks,
 * tests/unit/test_engine_on_device.c on one rank without MPI, which scripts/gpu_check.sh runs on
 * cuda): the MLP of tests/mlp_model.h trained ED_STEPS steps, its losses, gradient norms, final
 * parameters and the device's peak. */
#ifndef ZERO_TEST_ENGINE_DEVICE_H
#define ZERO_TEST_ENGINE_DEVICE_H

#include <string.h>

#include "harness.h"
#include "mlp_model.h"

#define ED_STEPS 8
#define ED_BSZ   3

typedef struct ed_result {
    float *params[MLP_LAYERS];
    double norms[ED_STEPS], losses[ED_STEPS];
    uint64_t device_peak;
} ed_result;

static inline void ed_free(ed_result *r) {
    for (int l = 0; l < MLP_LAYERS; l++) free(r->params[l]), r->params[l] = NULL;
}

/* AdamW (SGD with momentum, Lion) with weight decay, micro-batches of ED_BSZ */
static inline void ed_config(zero_config *cfg, int stage, zero_dtype prec, int accum, double clip,
                             zero_optim_type opt) {
    zero_config_default(cfg);
    cfg->stage = stage;
    cfg->precision = prec;
    cfg->grad_accum = accum;
    cfg->micro_batch = ED_BSZ;
    cfg->gradient_clipping = clip;
    zero_optim_hparams_default(&cfg->optim, opt);
    cfg->optim.lr = opt == ZERO_OPTIM_SGD ? 5e-2f : 1e-2f;
    cfg->optim.weight_decay = 0.1f;
    if (opt == ZERO_OPTIM_SGD) cfg->optim.momentum = 0.9f;
}

/* zero_engine_options.test_skip_wait for the runs on a device (a test of the switch sets it) */
static int ed_skip_wait;
/* zero_device_options.lazy for the runs on the fake device (the test of the switch sets it) */
static int ed_lazy;

/* The engine on `backend` (its streams after random delays of up to 20 µs, seeded by `seed`),
 * the MLP registered and initialized: 0, or -1 with the failure reported (*e may need freeing). */
static inline int ed_create(zero_comm *comm, const zero_config *cfg, const char *backend, uint64_t seed,
                            zero_engine **e) {
    zero_engine_options o;
    zero_engine_options_default(&o);
    o.device.backend = backend;
    o.device.seed = seed;
    o.device.max_delay_us = 20;
    o.test_skip_wait = ed_skip_wait;
    o.device.lazy = ed_lazy;
    zero_error err = {{0}};
    if (zero_engine_create_with(e, comm, cfg, &o, &err) != ZERO_OK) {
        ZT_FAIL("create on %s: %s", backend, err.msg);
        return -1;
    }
    if (mlp_register(*e) || mlp_init(*e, 7)) {
        ZT_FAIL("register on %s: %s", backend, zero_engine_last_error(*e));
        return -1;
    }
    return 0;
}

/* Steps [first, first + steps), their figures into out from index `at`. */
static inline int ed_train(zero_engine *e, int64_t first, int steps, int accum, int world, int rank, ed_result *out,
                           int at) {
    for (int s = 0; s < steps; s++) {
        zero_step_stats st;
        if (mlp_train_step(e, first + s, world, rank, accum, ED_BSZ, &out->losses[at + s], &st, 1.0f)) {
            ZT_FAIL("step %lld: %s", (long long)(first + s), zero_engine_last_error(e));
            return -1;
        }
        out->norms[at + s] = st.grad_norm;
    }
    return 0;
}

/* The final parameters and the device's peak. */
static inline int ed_read(zero_engine *e, ed_result *out) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        out->params[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        if (zero_engine_read_unit(e, l, out->params[l])) {
            ZT_FAIL("read_unit %d: %s", l, zero_engine_last_error(e));
            return -1;
        }
    }
    zero_mem_stats ms;
    zero_engine_device_mem_stats(e, ZERO_SPACE_DEVICE, &ms);
    out->device_peak = ms.total_peak;
    return 0;
}

/* A whole run: ED_STEPS steps on `backend`. */
static inline int ed_run(zero_comm *comm, const zero_config *cfg, const char *backend, int world, int rank,
                         ed_result *out) {
    memset(out, 0, sizeof *out);
    zero_engine *e = NULL;
    int rc = ed_create(comm, cfg, backend, (uint64_t)rank * 7 + 1, &e);
    if (!rc) rc = ed_train(e, 0, ED_STEPS, (int)cfg->grad_accum, world, rank, out, 0);
    if (!rc) rc = ed_read(e, out);
    zero_engine_free(e);
    return rc;
}

static inline uint64_t ed_dbits(double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static inline uint32_t ed_fbits(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* bitwise: the same kernels on the same numbers */
static inline void ed_same(const ed_result *a, const ed_result *b, const char *what) {
    for (int s = 0; s < ED_STEPS; s++) {
        ZT_CHECKF(ed_dbits(a->losses[s]) == ed_dbits(b->losses[s]), "%s: loss of step %d: %.17g vs %.17g", what, s,
                  a->losses[s], b->losses[s]);
        ZT_CHECKF(ed_dbits(a->norms[s]) == ed_dbits(b->norms[s]), "%s: norm of step %d: %.17g vs %.17g", what, s,
                  a->norms[s], b->norms[s]);
    }
    for (int l = 0; l < MLP_LAYERS; l++) {
        int bad = 0;
        for (int i = 0; i < mlp_unit_numel(l); i++) bad += ed_fbits(a->params[l][i]) != ed_fbits(b->params[l][i]);
        ZT_CHECKF(!bad, "%s: %d parameters of layer %d differ", what, bad, l);
    }
}

/* cfg on the cpu backend and on `dev`: the same bits, the device holding memory (except one rank
 * with the parameters and the optimizer — and so ZeRO-Offload's gradient — in pinned host memory:
 * the model reads the whole pinned copy), and a loss that fell. Returns 1 when both ran. */
static inline int ed_compare(zero_comm *comm, const zero_config *cfg, const char *dev, int world, int rank,
                             const char *what) {
    ed_result cpu, d;
    memset(&cpu, 0, sizeof cpu);
    memset(&d, 0, sizeof d);
    int ran = 0;
    if (ed_run(comm, cfg, "cpu", world, rank, &cpu) == 0 && ed_run(comm, cfg, dev, world, rank, &d) == 0) {
        ed_same(&cpu, &d, what);
        const int all_off = world == 1 && cfg->offload_param.device == ZERO_OFFLOAD_CPU &&
                            cfg->offload_optimizer.device == ZERO_OFFLOAD_CPU;
        if (!all_off) ZT_CHECKF(d.device_peak > 0, "%s: nothing was held on the %s device", what, dev);
        /* one rank sees the whole batch: its loss falls (a rank of several sees its own samples) */
        if (world == 1)
            ZT_CHECKF(cpu.losses[ED_STEPS - 1] < cpu.losses[0], "%s: the loss did not fall (%g -> %g)", what,
                      cpu.losses[0], cpu.losses[ED_STEPS - 1]);
        ran = 1;
    }
    ed_free(&cpu);
    ed_free(&d);
    return ran;
}

#endif
