/* The engine on one rank (the self communicator: no MPI) with its states on the device that
 * $ZERO_TEST_DEVICE names (default fake; scripts/gpu_check.sh runs it with cuda) against the same
 * run on the cpu backend: the MLP of tests/mlp_model.h at stages 0-3 x fp32/bf16/fp16 x
 * accumulation 1 and 2 (clipping with 2), ZeRO-Offload of the optimizer (and of stage 3's
 * parameters), SGD and Lion, 8 steps each — losses, gradient norms and final parameters bit for bit,
 * and the device holding memory (its peak is not zero). The device's kernels run the host's element
 * formulas in the host's order, so nothing may differ. Exit 77 where the backend cannot start here
 * (cuda without a GPU: ctest's unit.test_engine_on_device.cuda shows the skip); where a GPU is
 * expected ($ZERO_TEST_GPU=1, else /dev/nvidiactl exists) that is a failure instead. */
#include "engine_device.h"

#include <unistd.h>

static int compared;

static void compare(zero_comm *comm, const zero_config *cfg, const char *dev, const char *what) {
    compared += ed_compare(comm, cfg, dev, 1, 0, what);
}

/* The switch that drops the wait before an upload buffer of ZeRO-Offload is filled again: the
 * host may then overwrite a chunk whose copy has not run, and the fake device's stream delays make
 * that happen — the parameters differ from the cpu backend's (in every seed tried here; a run that
 * happened to come out right would be a different seed's luck, so several are tried and one
 * caught is enough). The same run with the wait is bitwise right (above). */
static void skipped_wait(zero_comm *comm) {
    zero_config cfg;
    ed_config(&cfg, 2, ZERO_DTYPE_BF16, 1, 0, ZERO_OPTIM_ADAMW);
    cfg.offload_optimizer.device = ZERO_OFFLOAD_CPU;
    ed_result cpu, d;
    if (ed_run(comm, &cfg, "cpu", 1, 0, &cpu)) return;
    int caught = 0, tries = 0;
    ed_skip_wait = 1;
    for (; tries < 5 && !caught; tries++) {
        zero_engine *e = NULL;
        memset(&d, 0, sizeof d);
        int rc = ed_create(comm, &cfg, "fake", 100 + (uint64_t)tries, &e);
        if (!rc) rc = ed_train(e, 0, ED_STEPS, 1, 1, 0, &d, 0);
        if (!rc) rc = ed_read(e, &d);
        zero_engine_free(e);
        for (int l = 0; !rc && l < MLP_LAYERS; l++)
            for (int i = 0; i < mlp_unit_numel(l); i++)
                caught += ed_fbits(d.params[l][i]) != ed_fbits(cpu.params[l][i]);
        ed_free(&d);
        if (rc) break;
    }
    ed_skip_wait = 0;
    printf("test_engine_on_device: without the upload buffers' wait, %d parameters wrong after %d run(s)\n", caught,
           tries);
    ZT_CHECKF(caught > 0, "the fake device did not show the dropped wait in %d runs", tries);
    ed_free(&cpu);
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
                ed_config(&cfg, stage, precs[pi], accum, accum == 2 ? 0.05 : 0.0, ZERO_OPTIM_ADAMW);
                snprintf(what, sizeof what, "%s: stage %d %s accum %d", dev, stage, zero_dtype_name(precs[pi]), accum);
                compare(comm, &cfg, dev, what);
            }
    for (int stage = 1; stage <= 3; stage++)
        for (int pi = 0; pi < 2; pi++)
            for (int po = 0; po <= (stage == 3); po++) {
                zero_config cfg;
                ed_config(&cfg, stage, precs[pi], 2, 0.05, ZERO_OPTIM_ADAMW);
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
            ed_config(&cfg, stage, ZERO_DTYPE_BF16, 1, 0, opts[k]);
            snprintf(what, sizeof what, "%s: stage %d %s", dev, stage, zero_optim_name(opts[k]));
            compare(comm, &cfg, dev, what);
        }
    printf("test_engine_on_device: %d runs on %s equal to the cpu backend's bit for bit\n", compared, dev);
    ZT_EQ_INT(compared, 24 + 8 + 4);
    if (!strcmp(dev, "fake")) skipped_wait(comm);
    zero_comm_free(comm);
    return zt_finish("test_engine_on_device");
}
