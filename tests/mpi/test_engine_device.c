/* The engine on the device tier: for stages 0-3 x fp32/bf16/fp16 x accumulation 1 and 2 x
 * clipping on/off (and SGD, Lion), training the MLP of tests/mlp_model.h on the fake device — its
 * memory unaddressable by the host, new blocks NaN, every stream operation after a seeded random
 * delay — gives the losses, gradient norms and final parameters of the same run on the cpu
 * backend bit for bit, on this MPI world (1-4 ranks). The device holds the states the ownership
 * table puts there (every array's bytes against the formulas), a save on the device resumes on the
 * cpu backend and back bitwise the uninterrupted run, and a capacity too small fails finalize naming the bytes. */
#include "engine_device.h"

#include <sys/stat.h>
#include <unistd.h>

/* one configuration on the cpu backend and on the fake device */
static void both(zero_comm *comm, const zero_config *cfg, int world, int rank, const char *what) {
    ed_compare(comm, cfg, "fake", world, rank, what);
}

static void equivalence(zero_comm *comm, int world, int rank) {
    const zero_dtype precs[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    char what[96];
    for (int stage = 0; stage <= 3; stage++)
        for (int pi = 0; pi < 3; pi++)
            for (int accum = 1; accum <= 2; accum++) {
                zero_config cfg;
                ed_config(&cfg, stage, precs[pi], accum, accum == 2 ? 0.05 : 0.0, ZERO_OPTIM_ADAMW);
                snprintf(what, sizeof what, "stage %d %s accum %d", stage, zero_dtype_name(precs[pi]), accum);
                both(comm, &cfg, world, rank, what);
            }
    /* deterministic mode: its integer sums on the host, the gradient they give copied up */
    for (int stage = 0; stage <= 3; stage++)
        for (int pi = 0; pi < 2; pi++) {
            zero_config cfg;
            ed_config(&cfg, stage, precs[pi], 2, 0.05, ZERO_OPTIM_ADAMW);
            cfg.deterministic = 1;
            snprintf(what, sizeof what, "stage %d %s deterministic", stage, zero_dtype_name(precs[pi]));
            both(comm, &cfg, world, rank, what);
        }
    /* ZeRO-Offload (master, states and gradient in pinned host memory, the step on the host) and
     * stage 3's parameters in pinned host memory: the same bits again */
    for (int stage = 1; stage <= 3; stage++)
        for (int pi = 0; pi < 2; pi++)
            for (int po = 0; po <= (stage == 3); po++) {
                zero_config cfg;
                ed_config(&cfg, stage, precs[pi], 2, 0.05, ZERO_OPTIM_ADAMW);
                cfg.offload_optimizer.device = ZERO_OFFLOAD_CPU;
                if (po) cfg.offload_param.device = ZERO_OFFLOAD_CPU;
                snprintf(what, sizeof what, "stage %d %s offload optimizer%s", stage, zero_dtype_name(precs[pi]),
                         po ? " and parameters" : "");
                both(comm, &cfg, world, rank, what);
            }
    /* ZeRO-Infinity: the optimizer (stages 1-3) and stage 3's parameters on NVMe, through the pool */
    char dir[128];
    int32_t pid = (int32_t)getpid();
    zero_comm_broadcast(comm, &pid, 1, ZERO_DTYPE_INT32, 0);
    snprintf(dir, sizeof dir, "/tmp/zero_test_engine_device_nvme_%d", (int)pid);
    if (rank == 0 && mkdir(dir, 0700) != 0) ZT_FAIL("mkdir %s", dir);
    zero_comm_barrier(comm);
    for (int stage = 1; stage <= 3; stage++)
        for (int pi = 0; pi < 3; pi++)
            for (int po = 0; po <= (stage == 3); po++) {
                zero_config cfg;
                ed_config(&cfg, stage, precs[pi], 2, 0.05, ZERO_OPTIM_ADAMW);
                cfg.offload_optimizer.device = ZERO_OFFLOAD_NVME;
                snprintf(cfg.offload_optimizer.nvme_path, sizeof cfg.offload_optimizer.nvme_path, "%s", dir);
                if (po) {
                    cfg.offload_param.device = ZERO_OFFLOAD_NVME;
                    snprintf(cfg.offload_param.nvme_path, sizeof cfg.offload_param.nvme_path, "%s", dir);
                }
                snprintf(what, sizeof what, "stage %d %s nvme optimizer%s", stage, zero_dtype_name(precs[pi]),
                         po ? " and parameters" : "");
                both(comm, &cfg, world, rank, what);
            }
    /* stage 3's parameters off the device alone (pinned, or NVMe through the pool), the optimizer
     * on it: the master stays with the states (fp32 too), the step writes the working copy out */
    for (int pi = 0; pi < 3; pi++)
        for (int pn = 0; pn < 2; pn++) {
            zero_config cfg;
            ed_config(&cfg, 3, precs[pi], 2, 0.05, ZERO_OPTIM_ADAMW);
            cfg.offload_param.device = pn ? ZERO_OFFLOAD_NVME : ZERO_OFFLOAD_CPU;
            if (pn) snprintf(cfg.offload_param.nvme_path, sizeof cfg.offload_param.nvme_path, "%s", dir);
            snprintf(what, sizeof what, "stage 3 %s parameters alone on %s", zero_dtype_name(precs[pi]),
                     pn ? "nvme" : "cpu");
            both(comm, &cfg, world, rank, what);
        }
    zero_comm_barrier(comm);
    if (rank == 0) rmdir(dir);
    const zero_optim_type opts[2] = {ZERO_OPTIM_SGD, ZERO_OPTIM_LION};
    for (int o = 0; o < 2; o++)
        for (int stage = 1; stage <= 3; stage += 2) {
            zero_config cfg;
            ed_config(&cfg, stage, ZERO_DTYPE_BF16, 1, 0, opts[o]);
            snprintf(what, sizeof what, "stage %d %s", stage, zero_optim_name(opts[o]));
            both(comm, &cfg, world, rank, what);
        }
}

/* Where the states live: on the device, the bytes the table gives (each array rounded up to the
 * device's 256-byte blocks), nothing of them in host memory. */
static uint64_t r256(uint64_t b) { return (b + 255) / 256 * 256; }

static void placement(zero_comm *comm, int world, int rank) {
    for (int stage = 0; stage <= 5; stage++) {
        /* 4: stage 2 with ZeRO-Offload; 5: stage 3 with the optimizer and the parameters offloaded */
        const int offl = stage >= 4, poff = stage == 5, st = stage == 4 ? 2 : stage == 5 ? 3 : stage;
        zero_config cfg;
        ed_config(&cfg, st, ZERO_DTYPE_BF16, 1, 0, ZERO_OPTIM_ADAMW);
        if (offl) cfg.offload_optimizer.device = ZERO_OFFLOAD_CPU;
        if (poff) cfg.offload_param.device = ZERO_OFFLOAD_CPU;
        zero_engine *e = NULL;
        if (ed_create(comm, &cfg, "fake", (uint64_t)rank * 7 + 1, &e)) {
            zero_engine_free(e);
            continue;
        }
        /* the bytes of each category, and the space they belong in */
        uint64_t want[ZERO_MEM_COUNT] = {0};
        int where[ZERO_MEM_COUNT];
        for (int c = 0; c < ZERO_MEM_COUNT; c++) where[c] = ZERO_SPACE_DEVICE;
        where[ZERO_MEM_PARAMS] = poff ? ZERO_SPACE_HOST_PINNED : ZERO_SPACE_DEVICE;
        /* ZeRO-Offload: the gradient the host's step reads stays with the master and the states */
        where[ZERO_MEM_MASTER] = where[ZERO_MEM_OPTIM] = where[ZERO_MEM_GRADS] =
            offl ? ZERO_SPACE_HOST_PINNED : ZERO_SPACE_DEVICE;
        for (int l = 0; l < MLP_LAYERS; l++) {
            zero_unit_info ui;
            ZT_OK(zero_engine_unit_info(e, l, &ui));
            const uint64_t whole = ui.padded, shard = world == 1 ? ui.padded : ui.shard; /* one rank: whole */
            want[ZERO_MEM_PARAMS] += r256((st == 3 ? shard : whole) * 2);
            want[ZERO_MEM_GRADS] += r256((st >= 2 ? shard : whole) * 2);
            want[ZERO_MEM_MASTER] += r256((st >= 1 ? shard : whole) * 4);
            want[ZERO_MEM_OPTIM] += 2 * r256((st >= 1 ? shard : whole) * 4);
        }
        zero_mem_stats dev, pin, host;
        zero_engine_device_mem_stats(e, ZERO_SPACE_DEVICE, &dev);
        zero_engine_device_mem_stats(e, ZERO_SPACE_HOST_PINNED, &pin);
        zero_engine_mem_stats(e, &host);
        for (int c = ZERO_MEM_PARAMS; c <= ZERO_MEM_OPTIM; c++) {
            const zero_mem_stats *in = where[c] == ZERO_SPACE_DEVICE ? &dev : &pin,
                                 *out = where[c] == ZERO_SPACE_DEVICE ? &pin : &dev;
            const char *name = zero_mem_category_name((zero_mem_category)c);
            ZT_CHECKF(in->current[c] == want[c], "setup %d: %s: %llu bytes, expected %llu", stage, name,
                      (unsigned long long)in->current[c], (unsigned long long)want[c]);
            ZT_CHECKF(out->current[c] == 0, "setup %d: %s in the other space: %llu bytes", stage, name,
                      (unsigned long long)out->current[c]);
            ZT_CHECKF(host.current[c] == 0, "setup %d: host %s: %llu bytes on a device run", stage, name,
                      (unsigned long long)host.current[c]);
        }
        ZT_CHECK(!strcmp(zero_engine_device(e), "fake"));
        zero_engine_free(e);
    }
}

/* A checkpoint saved on the device resumes on the cpu backend (and one saved on the cpu backend on
 * the device), bitwise the uninterrupted run; at another stage too. */
static void checkpoints(zero_comm *comm, int world, int rank) {
    char dir[256];
    int32_t pid = (int32_t)getpid(); /* rank 0's: one directory for every rank */
    zero_comm_broadcast(comm, &pid, 1, ZERO_DTYPE_INT32, 0);
    snprintf(dir, sizeof dir, "/tmp/zero_test_engine_device_%d", (int)pid);
    for (int dir_i = 0; dir_i < 2; dir_i++) {
        const char *first = dir_i == 0 ? "fake" : "cpu", *second = dir_i == 0 ? "cpu" : "fake";
        zero_config cfg, cfg2;
        ed_config(&cfg, 3, ZERO_DTYPE_BF16, 2, 0.05, ZERO_OPTIM_ADAMW);
        ed_config(&cfg2, 3, ZERO_DTYPE_BF16, 2, 0.05, ZERO_OPTIM_ADAMW);
        ed_result whole, part;
        memset(&part, 0, sizeof part);
        if (ed_run(comm, &cfg2, "cpu", world, rank, &whole)) continue;
        zero_engine *e = NULL, *f = NULL;
        if (!ed_create(comm, &cfg, first, (uint64_t)rank * 7 + 1, &e) &&
            !ed_train(e, 0, ED_STEPS / 2, 2, world, rank, &part, 0)) {
            if (zero_engine_save(e, dir, NULL) != ZERO_OK) ZT_FAIL("save on %s: %s", first, zero_engine_last_error(e));
            else if (!ed_create(comm, &cfg2, second, (uint64_t)rank * 7 + 2, &f)) {
                if (zero_engine_load(f, dir, NULL) != ZERO_OK)
                    ZT_FAIL("load on %s: %s", second, zero_engine_last_error(f));
                else if (!ed_train(f, ED_STEPS / 2, ED_STEPS - ED_STEPS / 2, 2, world, rank, &part, ED_STEPS / 2))
                    ed_read(f, &part);
            }
        }
        if (part.params[MLP_LAYERS - 1]) {
            char what[64];
            snprintf(what, sizeof what, "saved on %s, resumed on %s", first, second);
            ed_same(&whole, &part, what);
        }
        zero_engine_free(e);
        zero_engine_free(f);
        ed_free(&whole);
        ed_free(&part);
        zero_comm_barrier(comm);
        if (rank == 0) {
            char cmd[300];
            snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
            if (system(cmd) != 0) ZT_FAIL("%s", cmd);
        }
        zero_comm_barrier(comm);
    }
}

/* A device too small: finalize fails with the device's line (bytes asked, in use, capacity). */
static void capacity(zero_comm *comm, int rank) {
    zero_config cfg;
    ed_config(&cfg, 0, ZERO_DTYPE_BF16, 1, 0, ZERO_OPTIM_ADAMW);
    zero_engine_options o;
    zero_engine_options_default(&o);
    o.device.backend = "fake";
    o.device.capacity = 4096;
    zero_engine *e = NULL;
    zero_error err = {{0}};
    ZT_OK(zero_engine_create_with(&e, comm, &cfg, &o, &err));
    if (!e) return;
    const int s = mlp_register(e);
    ZT_EQ_INT(s, ZERO_ERR_NOMEM);
    const char *msg = zero_engine_last_error(e);
    /* stage 0, bf16: every unit whole — parameters and gradients 2 bytes, master and two moments 4 */
    uint64_t need = 0;
    const uint64_t gran = (uint64_t)zero_comm_size(comm) * 16; /* the partition pads to world x 64 bytes */
    for (int l = 0; l < MLP_LAYERS; l++) {
        const uint64_t padded = ((uint64_t)mlp_unit_numel(l) + gran - 1) / gran * gran;
        need += 2 * r256(padded * 2) + 3 * r256(padded * 4);
    }
    char want[96];
    snprintf(want, sizeof want, "the states need %llu bytes of device memory per rank", (unsigned long long)need);
    ZT_CHECKF(strstr(msg, "finalize: stage 0: unit 'layer") && strstr(msg, "do not fit") && strstr(msg, "4096 bytes") &&
                  strstr(msg, want) && strstr(msg, "zero plan"),
              "rank %d: %s (expected '%s')", rank, msg, want);
    zero_engine_free(e);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    zero_comm *comm = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK) {
        fprintf(stderr, "cannot create the communicator\n");
        return 1;
    }
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zt_rank = rank;
    equivalence(comm, world, rank);
    placement(comm, world, rank);
    checkpoints(comm, world, rank);
    capacity(comm, rank);
    int fails = zt_failures, all = 0;
    zero_comm_all_reduce(comm, &fails, &all, 1, ZERO_DTYPE_INT32, ZERO_OP_SUM);
    if (rank == 0) printf("test_engine_device: %d checks on rank 0, %d failed on all ranks\n", zt_checks, all);
    zero_comm_free(comm);
    return all ? 1 : 0;
}
