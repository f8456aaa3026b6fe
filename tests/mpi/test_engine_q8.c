/* 8-bit optimizer states in the engine (zero_extensions.optimizer_states "int8", docs/QUANT.md): the
 * MLP of tests/mlp_model.h with AdamW, every unit's moments 8-bit (optimizer_states_min_size 0), in
 * deterministic mode (one sample a micro-batch), at the same global batch of 12:
 *   - stages 0-3 on this world (1-4 ranks) give the parameters of a 1-rank stage-0 run, bit for bit;
 *   - they differ from the same run with fp32 states (the states were 8-bit);
 *   - the optimizer's memory is the formula's: 2 bytes per state element and 8 per block of 256;
 *   - a save at step 5 resumes bitwise, on this world and on 1 rank (resharded by blocks);
 *   - a checkpoint with 8-bit states is refused by a run with fp32 ones, naming both;
 *   - with NVMe offload (the optimizer at stages 1-3, the parameters and both at stage 3, tiles of
 *     1,024 elements: a unit of two tiles on 1 rank) the same bits, the swap files the planner's
 *     NVMe bytes (each array rounded up to whole I/O blocks), nothing of the states in RAM, and
 *     checkpoints saved from NVMe resumed in RAM and the reverse, bitwise;
 *   - on the lazy fake device (the states all on it at stages 0-3, ZeRO-Offload's pinned states at
 *     1-3, the parameters in pinned memory, the optimizer on NVMe): the same bits, the device's
 *     (or pinned) optimizer bytes the formula's in 256-byte blocks, none in host memory, and a
 *     checkpoint saved on the device resumed on the host and the reverse, bitwise. */
#include "harness.h"
#include "mlp_model.h"
#include "zero/quant.h"

#include <unistd.h>

#define STEPS 10
#define HALF  5

enum { OFF_OPT = 1, OFF_PAR = 2 };
static char g_dir[256];
static int g_off;            /* the NVMe offload of the runs make() creates (OFF_*) */
static int g_cpu_off;        /* on a device: offload_optimizer (1) and offload_param (2) "cpu" */
static const char *g_device; /* the runs' device backend (NULL: $ZERO_DEVICE, else cpu) */

static void config(zero_config *cfg, int stage, int world, int global_mb, int q8) {
    zero_config_default(cfg);
    cfg->stage = stage;
    cfg->micro_batch = 1; /* deterministic mode's atom: one sample a micro-batch */
    cfg->grad_accum = global_mb / world;
    cfg->deterministic = 1;
    zero_optim_hparams_default(&cfg->optim, ZERO_OPTIM_ADAMW);
    cfg->optim.lr = 1e-2f;
    cfg->optim.weight_decay = 0.1f;
    cfg->optim_states = q8 ? ZERO_OPTIM_STATES_INT8 : ZERO_OPTIM_STATES_FP32;
    cfg->optim_states_min = 0;
    cfg->aio_block_size = 16384; /* tiles of 1,024 elements */
    if (g_off & OFF_OPT) {
        cfg->offload_optimizer.device = ZERO_OFFLOAD_NVME;
        snprintf(cfg->offload_optimizer.nvme_path, sizeof cfg->offload_optimizer.nvme_path, "%s/nv", g_dir);
    }
    if (g_off & OFF_PAR) {
        cfg->offload_param.device = ZERO_OFFLOAD_NVME;
        snprintf(cfg->offload_param.nvme_path, sizeof cfg->offload_param.nvme_path, "%s/nv", g_dir);
    }
    if (g_cpu_off & 1) cfg->offload_optimizer.device = ZERO_OFFLOAD_CPU;
    if (g_cpu_off & 2) cfg->offload_param.device = ZERO_OFFLOAD_CPU;
}

static zero_engine *make(zero_comm *comm, int stage, int global_mb, int q8) {
    zero_config cfg;
    config(&cfg, stage, zero_comm_size(comm), global_mb, q8);
    zero_engine *e = NULL;
    zero_engine_options o;
    zero_engine_options_default(&o);
    o.device.backend = g_device;
    o.device.lazy = g_device != NULL;
    if (zero_engine_create_with(&e, comm, &cfg, &o, NULL) != ZERO_OK || mlp_register(e) || mlp_init(e, 7)) {
        ZT_FAIL("stage %d: %s", stage, e ? zero_engine_last_error(e) : "create failed");
        zero_engine_free(e);
        return NULL;
    }
    return e;
}

static int train(zero_engine *e, zero_comm *comm, int from, int to, int global_mb) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    for (int s = from; s < to; s++)
        if (mlp_train_step(e, s, world, rank, global_mb / world, 1, NULL, NULL, 1.0f)) {
            ZT_FAIL("step %d: %s", s, zero_engine_last_error(e));
            return -1;
        }
    return 0;
}

static void read_params(zero_engine *e, float *out[MLP_LAYERS]) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        out[l] = calloc((size_t)mlp_unit_numel(l), sizeof(float));
        ZT_OK(zero_engine_read_unit(e, l, out[l]));
    }
}

static void free_params(float *p[MLP_LAYERS]) {
    for (int l = 0; l < MLP_LAYERS; l++) free(p[l]);
}

/* Elements that differ in their bits. */
static int differ(float *a[MLP_LAYERS], float *b[MLP_LAYERS]) {
    int n = 0;
    for (int l = 0; l < MLP_LAYERS; l++)
        for (int i = 0; i < mlp_unit_numel(l); i++) {
            uint32_t x, y;
            memcpy(&x, &a[l][i], 4);
            memcpy(&y, &b[l][i], 4);
            n += x != y;
        }
    return n;
}

/* A run of stage `stage` on comm (the globals' offload and device) saved at HALF into dir. */
static void save_half(zero_comm *comm, int stage, int global_mb, const char *dir) {
    zero_engine *e = make(comm, stage, global_mb, 1);
    if (!e) return;
    train(e, comm, 0, HALF, global_mb);
    if (zero_engine_save(e, dir, NULL) != ZERO_OK) ZT_FAIL("save into %s: %s", dir, zero_engine_last_error(e));
    zero_engine_free(e);
}

/* A run of stage `stage` on comm loaded from dir and trained from HALF to STEPS: the parameters
 * whose bits differ from ref's (-1 when it did not run). */
static int resumed_differ(zero_comm *comm, int stage, int global_mb, const char *dir, float *ref[MLP_LAYERS]) {
    zero_engine *e = make(comm, stage, global_mb, 1);
    if (!e) return -1;
    int d = -1;
    if (zero_engine_load(e, dir, NULL) != ZERO_OK) ZT_FAIL("load %s: %s", dir, zero_engine_last_error(e));
    else if (train(e, comm, HALF, STEPS, global_mb) == 0) {
        float *got[MLP_LAYERS];
        read_params(e, got);
        d = differ(got, ref);
        free_params(got);
    }
    zero_engine_free(e);
    return d;
}

/* The planner's figures for the config of `stage` (the globals' offload) on world ranks. */
static void plan_of(int stage, int world, int global_mb, zero_plan_setup *ps, zero_plan_mem *pe) {
    zero_config cfg;
    config(&cfg, stage, world, global_mb, 1);
    zero_plan_setup_from_config(ps, &cfg, world);
    static uint64_t numel[MLP_LAYERS];
    for (int l = 0; l < MLP_LAYERS; l++) numel[l] = (uint64_t)mlp_unit_numel(l);
    const zero_plan_model pm = {MLP_LAYERS, numel, NULL, NULL, NULL};
    zero_error perr = {{0}};
    ZT_OK(zero_plan_estimate(&pm, ps, pe, &perr));
}

int main(void) {
    zero_comm *comm = NULL, *self = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK) return 1;
    ZT_OK(zero_comm_init_self(&self));
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zt_rank = rank;
    const int global_mb = 12;
    int64_t id = getpid();
    zero_comm_broadcast(comm, &id, 1, ZERO_DTYPE_INT64, 0);
    snprintf(g_dir, sizeof g_dir, "/tmp/zero_test_engine_q8_%lld", (long long)id);
    char *const dir = g_dir;
    if (rank == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "mkdir -p %s/nv", dir);
        if (system(cmd) != 0) ZT_FAIL("%s", cmd);
    }
    ZT_OK(zero_comm_barrier(comm));

    /* the reference: 1 rank, stage 0, 8-bit states; and the same with fp32 states */
    float *ref[MLP_LAYERS], *f32[MLP_LAYERS], *got[MLP_LAYERS];
    zero_engine *e = make(self, 0, global_mb, 1);
    if (!e) return zt_finish("test_engine_q8");
    train(e, self, 0, STEPS, global_mb);
    read_params(e, ref);
    zero_engine_free(e);
    e = make(self, 0, global_mb, 0);
    train(e, self, 0, STEPS, global_mb);
    read_params(e, f32);
    zero_engine_free(e);
    const int vs32 = differ(ref, f32);
    ZT_CHECKF(vs32 > 0, "8-bit states gave the fp32 states' parameters bit for bit: they were not 8-bit");

    for (int stage = 0; stage <= 3; stage++) {
        e = make(comm, stage, global_mb, 1);
        if (!e) continue;
        /* the optimizer's bytes: per unit, 2 index bytes per element it keeps and 8 per block */
        zero_mem_stats ms;
        zero_engine_mem_stats(e, &ms);
        uint64_t want = 0, kept = 0;
        for (int l = 0; l < MLP_LAYERS; l++) {
            const uint64_t n = (uint64_t)mlp_unit_numel(l);
            zero_shard sh;
            ZT_EQ_INT(zero_partition_shard(n, world, rank, ZERO_QUANT_Q8_BLOCK, &sh), 0);
            const uint64_t keep = stage == 0 ? sh.padded : sh.size;
            want += 2 * keep + 8 * zero_quant_blocks(keep, ZERO_QUANT_Q8_BLOCK);
            kept += keep;
        }
        ZT_CHECKF(ms.current[ZERO_MEM_OPTIM] == want, "stage %d: optimizer bytes %llu, the formula's %llu", stage,
                  (unsigned long long)ms.current[ZERO_MEM_OPTIM], (unsigned long long)want);
        /* and the planner's, from the same config (units of 4,096 and more 8-bit by default: here all) */
        zero_plan_setup ps;
        zero_plan_mem pe;
        plan_of(stage, world, global_mb, &ps, &pe);
        ZT_CHECKF(pe.bytes[ZERO_MEM_OPTIM] == want, "stage %d: the planner's optimizer bytes %llu, the engine's %llu",
                  stage, (unsigned long long)pe.bytes[ZERO_MEM_OPTIM], (unsigned long long)want);
        ps.optim_states = ZERO_OPTIM_STATES_FP32; /* fp32 states at the same alignment: 8 bytes an element */
        ps.align = ZERO_QUANT_Q8_BLOCK;
        uint64_t numel[MLP_LAYERS];
        for (int l = 0; l < MLP_LAYERS; l++) numel[l] = (uint64_t)mlp_unit_numel(l);
        const zero_plan_model pm = {MLP_LAYERS, numel, NULL, NULL, NULL};
        ZT_OK(zero_plan_estimate(&pm, &ps, &pe, NULL));
        ZT_CHECKF(pe.bytes[ZERO_MEM_OPTIM] == 8 * kept, "stage %d: fp32 states %llu bytes, expected %llu", stage,
                  (unsigned long long)pe.bytes[ZERO_MEM_OPTIM], (unsigned long long)(8 * kept));
        train(e, comm, 0, STEPS, global_mb);
        read_params(e, got);
        int d = differ(got, ref);
        ZT_CHECKF(d == 0, "stage %d on %d ranks: %d parameters differ from 1 rank's stage 0", stage, world, d);
        free_params(got);
        zero_engine_free(e);

        /* save at HALF, resume on this world and on 1 rank */
        char sub[300];
        snprintf(sub, sizeof sub, "%s/s%d", dir, stage);
        save_half(comm, stage, global_mb, sub);
        d = resumed_differ(comm, stage, global_mb, sub, ref);
        ZT_CHECKF(d == 0, "stage %d: resumed on %d ranks, %d parameters differ", stage, world, d);
        d = resumed_differ(self, (stage + 1) % 4, global_mb, sub, ref);
        ZT_CHECKF(d == 0, "stage %d on %d ranks resumed at stage %d on 1: %d parameters differ", stage, world,
                  (stage + 1) % 4, d);
        /* fp32 states cannot take it */
        e = make(self, 0, global_mb, 0);
        ZT_EQ_INT(zero_engine_load(e, sub, NULL), ZERO_ERR_FORMAT);
        ZT_CHECKF(strstr(zero_engine_last_error(e), "is 8-bit in the checkpoint and fp32 in this run") != NULL, "%s",
                  zero_engine_last_error(e));
        zero_engine_free(e);
    }
    /* NVMe offload: the optimizer's states (and master) in the swap file's tiles, the parameters in
     * the parameter file at stage 3, or both */
    static const struct {
        int stage, off;
    } nv[] = {{1, OFF_OPT}, {2, OFF_OPT}, {3, OFF_OPT}, {3, OFF_PAR}, {3, OFF_OPT | OFF_PAR}};
    for (size_t i = 0; i < sizeof nv / sizeof nv[0]; i++) {
        const int stage = nv[i].stage;
        g_off = nv[i].off;
        e = make(comm, stage, global_mb, 1);
        if (!e) continue;
        zero_mem_stats ms;
        zero_engine_mem_stats(e, &ms);
        if (g_off & OFF_OPT) ZT_EQ_INT(ms.current[ZERO_MEM_OPTIM], 0);
        zero_engine_offload_info info;
        ZT_OK(zero_engine_offload_info_get(e, &info));
        zero_plan_setup ps;
        zero_plan_mem pe;
        plan_of(stage, world, global_mb, &ps, &pe);
        /* each array of a tile rounded up to an I/O block: at most 3 arrays (master and two states)
         * of a tile per unit here (one tile a unit but on 1 rank, where unit 1 has two) */
        const uint64_t files = info.optim_file_bytes + info.param_file_bytes;
        const uint64_t slack = (uint64_t)(MLP_LAYERS + 1) * 4 * ZERO_IO_ALIGN;
        int padding = 0; /* a slice of padding is not stored: the plan counts the padded shard */
        for (int l = 0; l < MLP_LAYERS; l++) {
            zero_shard sh;
            ZT_EQ_INT(zero_partition_shard((uint64_t)mlp_unit_numel(l), world, rank, ZERO_QUANT_Q8_BLOCK, &sh), 0);
            padding |= sh.valid < sh.size;
        }
        ZT_CHECKF((padding || files >= pe.nvme) && files <= pe.nvme + slack,
                  "stage %d off %d: swap files %llu bytes, the plan's %llu", stage, g_off, (unsigned long long)files,
                  (unsigned long long)pe.nvme);
        train(e, comm, 0, STEPS, global_mb);
        read_params(e, got);
        int d = differ(got, ref);
        ZT_CHECKF(d == 0,
                  "stage %d with NVMe offload %d on %d ranks: %d parameters differ from 1 rank's stage 0 in RAM", stage,
                  g_off, world, d);
        free_params(got);
        zero_engine_free(e);

        /* a save from NVMe at HALF, resumed in RAM on 1 rank; a save in RAM resumed on NVMe */
        char sub[300];
        snprintf(sub, sizeof sub, "%s/nv%zu", dir, i);
        save_half(comm, stage, global_mb, sub);
        const int off = g_off;
        g_off = 0;
        d = resumed_differ(self, 0, global_mb, sub, ref);
        ZT_CHECKF(d == 0, "stage %d: saved from NVMe (%d), resumed in RAM: %d parameters differ", stage, off, d);
        snprintf(sub, sizeof sub, "%s/s%d", dir, stage); /* saved in RAM above */
        g_off = off;
        d = resumed_differ(comm, stage, global_mb, sub, ref);
        ZT_CHECKF(d == 0, "stage %d: saved in RAM, resumed on NVMe (%d): %d parameters differ", stage, off, d);
    }
    g_off = 0;

    /* on the fake device: the states all on it, ZeRO-Offload's pinned states, the parameters pinned,
     * the optimizer on NVMe */
    static const struct {
        int stage, cpu, off;
    } dv[] = {{0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 0, 0}, {1, 1, 0}, {2, 1, 0}, {3, 1, 0}, {3, 3, 0}, {2, 0, OFF_OPT}};
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) {
        const int stage = dv[i].stage;
        g_device = "fake";
        g_cpu_off = dv[i].cpu;
        g_off = dv[i].off;
        e = make(comm, stage, global_mb, 1);
        if (!e) continue;
        /* the optimizer's bytes where the plan puts them, each array in whole 256-byte blocks */
        uint64_t want = 0;
        for (int l = 0; l < MLP_LAYERS && !g_off; l++) {
            zero_shard sh;
            ZT_EQ_INT(zero_partition_shard((uint64_t)mlp_unit_numel(l), world, rank, ZERO_QUANT_Q8_BLOCK, &sh), 0);
            const uint64_t keep = stage == 0 ? sh.padded : sh.size, A = ZERO_DEVICE_ALIGN;
            want += 2 * ((keep + A - 1) / A * A + (4 * zero_quant_blocks(keep, ZERO_QUANT_Q8_BLOCK) + A - 1) / A * A);
        }
        zero_mem_stats ms, dm, pm;
        zero_engine_mem_stats(e, &ms);
        zero_engine_device_mem_stats(e, ZERO_SPACE_DEVICE, &dm);
        zero_engine_device_mem_stats(e, ZERO_SPACE_HOST_PINNED, &pm);
        ZT_CHECKF(ms.current[ZERO_MEM_OPTIM] == 0, "device variant %zu: %llu optimizer bytes in host memory", i,
                  (unsigned long long)ms.current[ZERO_MEM_OPTIM]);
        ZT_CHECKF((dv[i].cpu & 1 ? pm : dm).current[ZERO_MEM_OPTIM] == want &&
                      (dv[i].cpu & 1 ? dm : pm).current[ZERO_MEM_OPTIM] == 0,
                  "device variant %zu (stage %d): optimizer bytes %llu on the device, %llu pinned; expected %llu %s", i,
                  stage, (unsigned long long)dm.current[ZERO_MEM_OPTIM], (unsigned long long)pm.current[ZERO_MEM_OPTIM],
                  (unsigned long long)want, dv[i].cpu & 1 ? "pinned" : "on the device");
        train(e, comm, 0, STEPS, global_mb);
        read_params(e, got);
        int d = differ(got, ref);
        ZT_CHECKF(d == 0, "device variant %zu (stage %d, cpu offload %d, NVMe %d) on %d ranks: %d parameters differ", i,
                  stage, dv[i].cpu, g_off, world, d);
        free_params(got);
        zero_engine_free(e);
        if (i != 2) continue;
        /* stage 2 on the device: a save there resumed on the host (1 rank), a host save resumed there */
        char sub[300];
        snprintf(sub, sizeof sub, "%s/dev", dir);
        save_half(comm, stage, global_mb, sub);
        g_device = NULL;
        d = resumed_differ(self, 1, global_mb, sub, ref);
        ZT_CHECKF(d == 0, "saved on the device, resumed on the host: %d parameters differ", d);
        g_device = "fake";
        snprintf(sub, sizeof sub, "%s/s%d", dir, stage);
        d = resumed_differ(comm, stage, global_mb, sub, ref);
        ZT_CHECKF(d == 0, "saved on the host, resumed on the device: %d parameters differ", d);
    }
    g_device = NULL;
    g_cpu_off = 0;
    g_off = 0;

    /* what is refused before anything runs */
    zero_config cfg;
    config(&cfg, 2, world, global_mb, 1);
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_SGD);
    zero_error err = {{0}};
    e = NULL;
    ZT_EQ_INT(zero_engine_create_with(&e, comm, &cfg, NULL, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "needs optimizer AdamW or Adam (its two moments") != NULL, "%s", err.msg);

    free_params(ref);
    free_params(f32);
    /* every rank is done with the checkpoints (each loads them on its own, on 1 rank) before rank
     * 0 removes them: a rank still reading would find them gone */
    ZT_OK(zero_comm_barrier(comm));
    if (rank == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) ZT_FAIL("cleanup of %s", dir);
    }
    zero_comm_free(self);
    zero_comm_free(comm);
    return zt_finish("test_engine_q8");
}
