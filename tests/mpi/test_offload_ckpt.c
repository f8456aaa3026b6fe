/* Checkpoints with NVMe offload stream the offloaded master and states between the swap files and
 * the checkpoint through the pool: 6 straight steps with offload equal, bitwise, 3 steps + save +
 * load into a fresh offloaded engine + 3 steps, and equal a run that loads the same checkpoint
 * without offload (and one saved without offload loads into an offloaded engine): the format does
 * not depend on where the states lived. Stages 1-3, fp32 and bf16, optimizer offload and (stage
 * 3) parameter offload too. Save and load hold no more than the pool plus a fixed chunk. */
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "mlp_model.h"
#include "zero/offload.h"

#define STEPS 6
#define HALF 3

static char g_dir[256], g_ckpt[256];

static zero_engine *make(zero_comm *comm, int stage, zero_dtype prec, int opt, int par) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.precision = prec;
    cfg.micro_batch = 2;
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    cfg.optim.lr = 1e-2f;
    if (opt) {
        cfg.offload_optimizer.device = ZERO_OFFLOAD_NVME;
        snprintf(cfg.offload_optimizer.nvme_path, sizeof cfg.offload_optimizer.nvme_path, "%s", g_dir);
        cfg.aio_block_size = 8 * 4096;
    }
    if (par) {
        cfg.offload_param.device = ZERO_OFFLOAD_NVME;
        snprintf(cfg.offload_param.nvme_path, sizeof cfg.offload_param.nvme_path, "%s", g_dir);
        cfg.offload_param.buffer_count = 2;
    }
    zero_engine *e = NULL;
    if (zero_engine_create(&e, comm, &cfg) || mlp_register(e) || mlp_init(e, 11)) {
        ZT_FAIL("setup stage %d: %s", stage, e ? zero_engine_last_error(e) : "create");
        zero_engine_free(e);
        return NULL;
    }
    return e;
}

static int train(zero_engine *e, zero_comm *comm, int from, int to) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    for (int s = from; s < to; s++)
        if (mlp_train_step(e, s, world, rank, 1, 2, NULL, NULL, 1.0f)) {
            ZT_FAIL("step %d: %s", s, zero_engine_last_error(e));
            return -1;
        }
    return 0;
}

static void read_params(zero_engine *e, float **out) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        out[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        ZT_OK(zero_engine_read_unit(e, l, out[l]));
    }
}

static void same(float **a, float **b, const char *what) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        zt_checks++;
        if (memcmp(a[l], b[l], (size_t)mlp_unit_numel(l) * sizeof(float))) {
            ZT_FAIL("%s: layer%d differs", what, l);
            return;
        }
    }
}

static void free_params(float **p) {
    for (int l = 0; l < MLP_LAYERS; l++) free(p[l]);
}

/* Loads `dir` into a fresh engine (opt/par), trains to STEPS and compares with `want`. */
static void resume(zero_comm *comm, int stage, zero_dtype prec, int opt, int par, const char *dir, float **want,
                   const char *what) {
    zero_engine *e = make(comm, stage, prec, opt, par);
    if (!e) return;
    zero_mem_stats before, after;
    zero_engine_mem_stats(e, &before);
    if (zero_engine_load(e, dir, NULL) != ZERO_OK) {
        ZT_FAIL("%s: load: %s", what, zero_engine_last_error(e));
    } else {
        zero_engine_mem_stats(e, &after);
        /* load streams: beyond what the engine held, at most its 256 KiB conversion chunk (and a
         * few bytes of tile bookkeeping) */
        ZT_CHECKF(after.peak[ZERO_MEM_BUFFERS] <= before.current[ZERO_MEM_BUFFERS] + (256u << 10) + 4096,
                  "%s: load peaked at %zu bytes of buffers (%zu before)", what, after.peak[ZERO_MEM_BUFFERS],
                  before.current[ZERO_MEM_BUFFERS]);
        ZT_EQ_INT(zero_engine_step_count(e), HALF);
        if (train(e, comm, HALF, STEPS) == 0) {
            float *got[MLP_LAYERS];
            read_params(e, got);
            same(got, want, what);
            free_params(got);
        }
    }
    zero_engine_free(e);
}

static void check(zero_comm *comm, int stage, zero_dtype prec, int par, int idx) {
    char dir[300], what[128];
    snprintf(dir, sizeof dir, "%s/c%d", g_ckpt, idx);
    /* straight, with offload, saving at HALF */
    zero_engine *e = make(comm, stage, prec, 1, par);
    if (!e) return;
    /* save streams through the pool: a fresh engine's save peaks at the pool plus a few bytes of
     * tile bookkeeping (after training the step's transients would hide it) */
    zero_mem_stats m0, m1;
    zero_engine_mem_stats(e, &m0);
    snprintf(dir, sizeof dir, "%s/pre%d", g_ckpt, idx);
    if (zero_engine_save(e, dir, NULL) != ZERO_OK) ZT_FAIL("save: %s", zero_engine_last_error(e));
    snprintf(dir, sizeof dir, "%s/c%d", g_ckpt, idx);
    zero_engine_mem_stats(e, &m1);
    ZT_CHECKF(m1.peak[ZERO_MEM_BUFFERS] <= m0.current[ZERO_MEM_BUFFERS] + 4096, "save peaked at %zu bytes of buffers (%zu before)",
              m1.peak[ZERO_MEM_BUFFERS], m0.current[ZERO_MEM_BUFFERS]);
    if (train(e, comm, 0, HALF)) {
        zero_engine_free(e);
        return;
    }
    if (zero_engine_save(e, dir, NULL) != ZERO_OK) ZT_FAIL("save: %s", zero_engine_last_error(e));
    float *straight[MLP_LAYERS];
    int ok = train(e, comm, HALF, STEPS) == 0;
    if (ok) read_params(e, straight);
    zero_engine_free(e);
    if (!ok) return;
    snprintf(what, sizeof what, "stage %d %s%s: offload -> offload", stage, zero_dtype_name(prec), par ? " +param" : "");
    resume(comm, stage, prec, 1, par, dir, straight, what);
    snprintf(what, sizeof what, "stage %d %s%s: offload -> RAM", stage, zero_dtype_name(prec), par ? " +param" : "");
    resume(comm, stage, prec, 0, 0, dir, straight, what);
    /* and the other way: saved without offload, resumed with it */
    zero_engine *r = make(comm, stage, prec, 0, 0);
    if (r && train(r, comm, 0, HALF) == 0) {
        snprintf(dir, sizeof dir, "%s/r%d", g_ckpt, idx);
        ZT_OK(zero_engine_save(r, dir, NULL));
        snprintf(what, sizeof what, "stage %d %s%s: RAM -> offload", stage, zero_dtype_name(prec), par ? " +param" : "");
        zero_engine_free(r);
        r = NULL;
        resume(comm, stage, prec, 1, par, dir, straight, what);
    }
    zero_engine_free(r);
    free_params(straight);
}

int main(void) {
    zero_comm *comm = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK) return 1;
    zt_rank = zero_comm_rank(comm);
    int64_t id = getpid();
    zero_comm_broadcast(comm, &id, 1, ZERO_DTYPE_INT64, 0);
    snprintf(g_dir, sizeof g_dir, "/tmp/zero_test_offload_ckpt_%lld", (long long)id);
    snprintf(g_ckpt, sizeof g_ckpt, "/tmp/zero_test_offload_ckpt_%lld_ck", (long long)id);
    int idx = 0;
    for (int stage = 1; stage <= 3; stage++)
        for (int p = 0; p < 2; p++) {
            const zero_dtype prec = p ? ZERO_DTYPE_BF16 : ZERO_DTYPE_FP32;
            check(comm, stage, prec, 0, idx++);
            if (stage == 3) check(comm, stage, prec, 1, idx++);
        }
    zero_comm_barrier(comm);
    if (zt_rank == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", g_dir, g_ckpt);
        if (system(cmd) != 0) ZT_FAIL("cleanup");
    }
    zero_comm_free(comm);
    return zt_finish("test_offload_ckpt");
}
