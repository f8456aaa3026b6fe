/* The engine on one rank (the self communicator: no MPI) with its states on the device that
 * $ZERO_TEST_DEVICE names (default fake; scripts/gpu_check.sh runs it with cuda) against the same
 * run on the cpu backend: the MLP of tests/mlp_model.h at stages 0-3 x fp32/bf16/fp16 x
 * accumulation 1 and 2 (clipping with 2), ZeRO-Offload of the optimizer (and of stage 3's
 * parameters), SGD and Lion, 8 steps each — losses, gradient norms and final parameters bit for bit,
 * and the device holding memory (its peak is not zero); on the fake device twice, its streams after
 * random delays and then lazy. The device's kernels run the host's element
 * formulas in the host's order, so nothing may differ. Exit 77 where the backend cannot start here
 * (cuda without a GPU: ctest's unit.test_engine_on_device.cuda shows the skip); where a GPU is
 * expected ($ZERO_TEST_GPU=1, else /dev/nvidiactl exists) that is a failure instead. */
#include "device_probe.h"
#include "engine_device.h"

#include <unistd.h>

static int compared;

static void compare(zero_comm *comm, const zero_config *cfg, const char *dev, const char *what) {
    compared += ed_compare(comm, cfg, dev, 1, 0, what);
}

/* The switch that drops the wait before an upload buffer of ZeRO-Offload is filled again: the
 * host may then overwrite a chunk whose copy has not run. On the lazy fake device an operation runs
 * only after the host next waits for the device, so it does, in every run: the parameters differ
 * from the cpu backend's. The same run with the wait is bitwise right on the lazy device too (which
 * also shows the lazy device itself runs what is waited for). */
static void skipped_wait(zero_comm *comm) {
    zero_config cfg;
    ed_config(&cfg, 2, ZERO_DTYPE_BF16, 1, 0, ZERO_OPTIM_ADAMW);
    cfg.offload_optimizer.device = ZERO_OFFLOAD_CPU;
    ed_result cpu;
    if (ed_run(comm, &cfg, "cpu", 1, 0, &cpu)) return;
    ed_lazy = 1;
    int wrong[2] = {0, 0};
    for (int skip = 0; skip <= 1; skip++) {
        ed_skip_wait = skip;
        ed_result d;
        zero_engine *e = NULL;
        memset(&d, 0, sizeof d);
        int rc = ed_create(comm, &cfg, "fake", 100, &e);
        if (!rc) rc = ed_train(e, 0, ED_STEPS, 1, 1, 0, &d, 0);
        if (!rc) rc = ed_read(e, &d);
        zero_engine_free(e);
        for (int l = 0; !rc && l < MLP_LAYERS; l++)
            for (int i = 0; i < mlp_unit_numel(l); i++)
                wrong[skip] += ed_fbits(d.params[l][i]) != ed_fbits(cpu.params[l][i]);
        ed_free(&d);
        ZT_CHECKF(!rc, "the lazy fake device's run (wait %s) failed", skip ? "dropped" : "kept");
    }
    ed_skip_wait = ed_lazy = 0;
    printf("test_engine_on_device: lazy fake device, ZeRO-Offload: %d parameters wrong with the upload buffers' "
           "wait, %d without\n",
           wrong[0], wrong[1]);
    ZT_EQ_INT(wrong[0], 0);
    ZT_CHECKF(wrong[1] > 0, "the lazy fake device did not show the dropped wait");
    ed_free(&cpu);
}

/* The engine's options start from whatever the caller's memory held: the defaults set every
 * switch off (a test switch left on by stack garbage once made the upload buffers' test flaky). */
static void options_default_clears(void) {
    zero_engine_options o;
    memset(&o, 0xa5, sizeof o);
    zero_engine_options_default(&o);
    ZT_EQ_INT(o.sync_copies, 0);
    ZT_EQ_INT(o.test_skip_wait, 0);
    ZT_EQ_INT(o.device.lazy, 0);
    ZT_EQ_INT(o.device.pace, 0);
    ZT_CHECK(o.job_id == NULL && o.io.backend == NULL && o.device.backend == NULL);
}

/* stages 0-3 x fp32/bf16/fp16 x accumulation 1 and 2, ZeRO-Offload, SGD and Lion */
static void matrix(zero_comm *comm, const char *dev) {
    const zero_dtype precs[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    char what[128];
    for (int stage = 0; stage <= 3; stage++)
        for (int pi = 0; pi < 3; pi++)
            for (int accum = 1; accum <= 2; accum++) {
                zero_config cfg;
                ed_config(&cfg, stage, precs[pi], accum, accum == 2 ? 0.05 : 0.0, ZERO_OPTIM_ADAMW);
                snprintf(what, sizeof what, "%s%s: stage %d %s accum %d", dev, ed_lazy ? " (lazy)" : "", stage,
                         zero_dtype_name(precs[pi]), accum);
                compare(comm, &cfg, dev, what);
            }
    for (int stage = 1; stage <= 3; stage++)
        for (int pi = 0; pi < 2; pi++)
            for (int po = 0; po <= (stage == 3); po++) {
                zero_config cfg;
                ed_config(&cfg, stage, precs[pi], 2, 0.05, ZERO_OPTIM_ADAMW);
                cfg.offload_optimizer.device = ZERO_OFFLOAD_CPU;
                if (po) cfg.offload_param.device = ZERO_OFFLOAD_CPU;
                snprintf(what, sizeof what, "%s%s: stage %d %s offload optimizer%s", dev, ed_lazy ? " (lazy)" : "",
                         stage, zero_dtype_name(precs[pi]), po ? " and parameters" : "");
                compare(comm, &cfg, dev, what);
            }
    const zero_optim_type opts[2] = {ZERO_OPTIM_SGD, ZERO_OPTIM_LION};
    for (int k = 0; k < 2; k++)
        for (int stage = 1; stage <= 3; stage += 2) {
            zero_config cfg;
            ed_config(&cfg, stage, ZERO_DTYPE_BF16, 1, 0, opts[k]);
            snprintf(what, sizeof what, "%s%s: stage %d %s", dev, ed_lazy ? " (lazy)" : "", stage,
                     zero_optim_name(opts[k]));
            compare(comm, &cfg, dev, what);
        }
}

int main(void) {
    options_default_clears();
    const char *dev = getenv("ZERO_TEST_DEVICE");
    if (!dev || !*dev) dev = "fake";
    /* can the device start here? (cuda without a GPU cannot: a skip, named; where a GPU should be,
     * $ZERO_TEST_GPU=1 or /dev/nvidiactl, a failure) */
    const int r = zt_device_probe("test_engine_on_device", dev);
    if (r <= 0) return r == 0 ? 77 : zt_finish("test_engine_on_device");
    zero_comm *comm = NULL;
    ZT_OK(zero_comm_init_self(&comm));
    /* the fake device twice: streams after random delays, then lazy (an operation runs only once
     * something waits for it: a missing wait anywhere is a wrong number) */
    for (int lazy = 0; lazy <= !strcmp(dev, "fake"); lazy++) {
        ed_lazy = lazy;
        matrix(comm, dev);
    }
    ed_lazy = 0;
    printf("test_engine_on_device: %d runs on %s equal to the cpu backend's bit for bit\n", compared, dev);
    ZT_EQ_INT(compared, (24 + 8 + 4) * (1 + !strcmp(dev, "fake")));
    if (!strcmp(dev, "fake")) skipped_wait(comm);
    zero_comm_free(comm);
    return zt_finish("test_engine_on_device");
}
