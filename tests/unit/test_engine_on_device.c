/* The engine on one rank (the self communicator: no MPI) with its states on the device that
 * $ZERO_TEST_DEVICE names (default fake; scripts/gpu_check.sh runs it with cuda) against the same
 * run on the cpu backend: the MLP of tests/mlp_model.h at stages 0-3 x fp32/bf16/fp16 x
 * accumulation 1 and 2 (clipping with 2), ZeRO-Offload of the optimizer (and of stage 3's
 * parameters), SGD and Lion, 8 steps each — losses, gradient norms and final parameters bit for bit,
 * and the device holding memory (its peak is not zero). The device's kernels run the host's element
 * formulas in the host's order, so nothing may differ. Exit 77 where the backend cannot start here
 * (cuda without a GPU: ctest's unit.test_engine_on_device.cuda shows the skip); where a GPU is
 * expected ($ZERO_TEST_GPU=1, else /dev/nvidiactl exists) that is a failure instead. */
#include "harness.h"
#include "mlp_model.h"

#include <string.h>
#include <unistd.h>

#define STEPS 8
#define BSZ   3

typedef struct run_result {
    float *params[MLP_LAYERS];
    double norms[STEPS], losses[STEPS];
    uint64_t device_peak;
} run_result;

static void result_free(run_result *r) {
    for (int l = 0; l < MLP_LAYERS; l++) free(r->params[l]);
}

static void config(zero_config *cfg, int stage, zero_dtype prec, int accum, double clip, zero_optim_type opt) {
    zero_config_default(cfg);
    cfg->stage = stage;
    cfg->precision = prec;
    cfg->grad_accum = accum;
    cfg->micro_batch = BSZ;
    cfg->gradient_clipping = clip;
    zero_optim_hparams_default(&cfg->optim, opt);
    cfg->optim.lr = opt == ZERO_OPTIM_SGD ? 5e-2f : 1e-2f;
    cfg->optim.weight_decay = 0.1f;
    if (opt == ZERO_OPTIM_SGD) cfg->optim.momentum = 0.9f;
}

/* 0, or -1 with the failure reported */
static int run(zero_comm *comm, const zero_config *cfg, const char *backend, run_result *out) {
    memset(out, 0, sizeof *out);
    zero_engine_options o;
    zero_engine_options_default(&o);
    o.device.backend = backend;
    o.device.seed = 11;
    o.device.max_delay_us = 5;
    zero_error err = {{0}};
    zero_engine *e = NULL;
    if (zero_engine_create_with(&e, comm, cfg, &o, &err) != ZERO_OK) {
        ZT_FAIL("create on %s: %s", backend, err.msg);
        return -1;
    }
    int rc = mlp_register(e) || mlp_init(e, 7) ? -1 : 0;
    for (int s = 0; s < STEPS && !rc; s++) {
        zero_step_stats st = {0};
        rc = mlp_train_step(e, s, 1, 0, (int)cfg->grad_accum, BSZ, &out->losses[s], &st, 1.0f);
        out->norms[s] = st.grad_norm;
    }
    for (int l = 0; l < MLP_LAYERS && !rc; l++) {
        out->params[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        rc = zero_engine_read_unit(e, l, out->params[l]) != ZERO_OK ? -1 : 0;
    }
    if (rc) ZT_FAIL("training on %s: %s", backend, zero_engine_last_error(e));
    zero_mem_stats ms;
    zero_engine_device_mem_stats(e, ZERO_SPACE_DEVICE, &ms);
    out->device_peak = ms.total_peak;
    zero_engine_free(e);
    return rc;
}

static uint64_t dbits(double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return u;
}

static uint32_t fbits(float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

static void same(const run_result *a, const run_result *b, const char *what) {
    for (int s = 0; s < STEPS; s++) {
        ZT_CHECKF(dbits(a->losses[s]) == dbits(b->losses[s]), "%s: loss of step %d: %.17g vs %.17g", what, s,
                  a->losses[s], b->losses[s]);
        ZT_CHECKF(dbits(a->norms[s]) == dbits(b->norms[s]), "%s: norm of step %d: %.17g vs %.17g", what, s, a->norms[s],
                  b->norms[s]);
    }
    for (int l = 0; l < MLP_LAYERS; l++) {
        int bad = 0;
        for (int i = 0; i < mlp_unit_numel(l); i++) bad += fbits(a->params[l][i]) != fbits(b->params[l][i]);
        ZT_CHECKF(!bad, "%s: %d parameters of layer %d differ", what, bad, l);
    }
}

static int compared;

static void compare(zero_comm *comm, const zero_config *cfg, const char *dev, const char *what) {
    run_result cpu, d;
    memset(&cpu, 0, sizeof cpu);
    memset(&d, 0, sizeof d);
    if (run(comm, cfg, "cpu", &cpu) == 0 && run(comm, cfg, dev, &d) == 0) {
        same(&cpu, &d, what);
        /* one rank with the parameters and the optimizer (and so, ZeRO-Offload's, the gradient) in
         * pinned host memory keeps nothing on the device: the model reads the whole pinned copy */
        const int all_off =
            cfg->offload_param.device == ZERO_OFFLOAD_CPU && cfg->offload_optimizer.device == ZERO_OFFLOAD_CPU;
        if (!all_off) ZT_CHECKF(d.device_peak > 0, "%s: nothing was held on the %s device", what, dev);
        ZT_CHECKF(cpu.losses[STEPS - 1] < cpu.losses[0], "%s: the loss did not fall (%g -> %g)", what, cpu.losses[0],
                  cpu.losses[STEPS - 1]);
        compared++;
    }
    result_free(&cpu);
    result_free(&d);
}

int main(void) {
    const char *dev = getenv("ZERO_TEST_DEVICE");
    if (!dev || !*dev) dev = "fake";
    /* can the device start here? (cuda without a GPU cannot: a skip, named) */
    zero_device_options o;
    zero_device_options_default(&o);
    o.backend = dev;
    zero_device *probe = NULL;
    zero_error err = {{0}};
    if (zero_device_create(&probe, &o, &err) != ZERO_OK) {
        /* a GPU that should be there ($ZERO_TEST_GPU=1, or /dev/nvidiactl) is a failure, not a skip */
        const char *g = getenv("ZERO_TEST_GPU");
        if (!strcmp(dev, "fake") || (g && *g ? strcmp(g, "0") != 0 : access("/dev/nvidiactl", F_OK) == 0)) {
            ZT_FAIL("the %s device does not start: %s", dev, err.msg);
            return zt_finish("test_engine_on_device");
        }
        printf("test_engine_on_device: skipped: %s\n", err.msg);
        return 77;
    }
    zero_device_free(probe);
    zero_comm *comm = NULL;
    ZT_OK(zero_comm_init_self(&comm));
    const zero_dtype precs[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    char what[128];
    for (int stage = 0; stage <= 3; stage++)
        for (int pi = 0; pi < 3; pi++)
            for (int accum = 1; accum <= 2; accum++) {
                zero_config cfg;
                config(&cfg, stage, precs[pi], accum, accum == 2 ? 0.05 : 0.0, ZERO_OPTIM_ADAMW);
                snprintf(what, sizeof what, "%s: stage %d %s accum %d", dev, stage, zero_dtype_name(precs[pi]), accum);
                compare(comm, &cfg, dev, what);
            }
    for (int stage = 1; stage <= 3; stage++)
        for (int pi = 0; pi < 2; pi++)
            for (int po = 0; po <= (stage == 3); po++) {
                zero_config cfg;
                config(&cfg, stage, precs[pi], 2, 0.05, ZERO_OPTIM_ADAMW);
                cfg.offload_optimizer.device = ZERO_OFFLOAD_CPU;
                if (po) cfg.offload_param.device = ZERO_OFFLOAD_CPU;
                snprintf(what, sizeof what, "%s: stage %d %s offload optimizer%s", dev, stage,
                         zero_dtype_name(precs[pi]), po ? " and parameters" : "");
                compare(comm, &cfg, dev, what);
            }
    const zero_optim_type opts[2] = {ZERO_OPTIM_SGD, ZERO_OPTIM_LION};
    for (int k = 0; k < 2; k++)
        for (int stage = 1; stage <= 3; stage += 2) {
            zero_config cfg;
            config(&cfg, stage, ZERO_DTYPE_BF16, 1, 0, opts[k]);
            snprintf(what, sizeof what, "%s: stage %d %s", dev, stage, zero_optim_name(opts[k]));
            compare(comm, &cfg, dev, what);
        }
    printf("test_engine_on_device: %d runs on %s equal to the cpu backend's bit for bit\n", compared, dev);
    ZT_EQ_INT(compared, 24 + 8 + 4);
    zero_comm_free(comm);
    return zt_finish("test_engine_on_device");
}
