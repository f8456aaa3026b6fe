/* NVMe offload when things go wrong, on every world size: a disk that fills up (ZERO_FAULT enospc)
 * or fails a read (eio) on the last rank only gives every rank an error naming the rank and, on
 * that rank, the file and the OS's reason — never a hang; the engine refuses further work; the
 * checkpoint saved before stays loadable with the values it had; the swap files are gone after
 * zero_engine_free. A file in nvme_path that is not ours stops finalize on every rank and is left
 * byte for byte as it was. Bad offload settings are errors naming the setting. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "mlp_model.h"
#include "zero/offload.h"

static char g_dir[256], g_ckpt[256];

static int count_files(void) {
    int n = 0;
    DIR *d = opendir(g_dir);
    for (struct dirent *de; d && (de = readdir(d)) != NULL;)
        if (!strncmp(de->d_name, "zero_", 5) && strstr(de->d_name, ".swp")) n++;
    if (d) closedir(d);
    return n;
}

static void make_cfg(zero_config *cfg, int stage, int par) {
    zero_config_default(cfg);
    cfg->stage = stage;
    cfg->micro_batch = 2;
    zero_optim_hparams_default(&cfg->optim, ZERO_OPTIM_ADAMW);
    cfg->optim.lr = 1e-2f;
    cfg->offload_optimizer.device = ZERO_OFFLOAD_NVME;
    snprintf(cfg->offload_optimizer.nvme_path, sizeof cfg->offload_optimizer.nvme_path, "%s", g_dir);
    if (par) {
        cfg->offload_param.device = ZERO_OFFLOAD_NVME;
        snprintf(cfg->offload_param.nvme_path, sizeof cfg->offload_param.nvme_path, "%s", g_dir);
    }
}

/* An engine with ZERO_FAULT set to `fault` on the last rank while its files are opened. */
static zero_engine *make(zero_comm *comm, const zero_config *cfg, const char *fault) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zero_engine *e = NULL;
    if (zero_engine_create(&e, comm, cfg) != ZERO_OK) {
        ZT_FAIL("create");
        return NULL;
    }
    if (fault && rank == world - 1) setenv("ZERO_FAULT", fault, 1);
    int rc = mlp_register(e);
    unsetenv("ZERO_FAULT");
    if (rc || mlp_init(e, 5)) {
        ZT_FAIL("setup: %s", zero_engine_last_error(e));
        zero_engine_free(e);
        return NULL;
    }
    return e;
}

static void read_all(zero_engine *e, float **out) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        out[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        ZT_OK(zero_engine_read_unit(e, l, out[l]));
    }
}

/* The failing rank names the file and the reason; the others name the failing rank. */
static void check_message(zero_engine *e, int world, int rank, const char *kind, const char *reason) {
    const char *msg = zero_engine_last_error(e);
    char file[64], other[64];
    snprintf(file, sizeof file, "rank%05d.%s.swp", world - 1, kind);
    snprintf(other, sizeof other, "failed on rank %d", world - 1);
    if (rank == world - 1)
        ZT_CHECKF(strstr(msg, file) && strstr(msg, reason) && strstr(msg, "injected"), "message: %s", msg);
    else
        ZT_CHECKF(strstr(msg, other) != NULL, "message: %s", msg);
}

/* Every rank counts, then every rank goes on (the next test writes files). */
static void expect_no_files(zero_comm *comm) {
    zero_comm_barrier(comm);
    ZT_EQ_INT(count_files(), 0);
    zero_comm_barrier(comm);
}

/* Disk full in the step's write-back, after a checkpoint: error everywhere, checkpoint intact. */
static void test_disk_full(zero_comm *comm, int stage) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zero_config cfg;
    make_cfg(&cfg, stage, 0);
    /* optimizer-file writes on the last rank: 1 header, then one per unit (one tile each) per
     * step; the 9th is the second unit's in the third step */
    char fault[128];
    snprintf(fault, sizeof fault, "write:9:enospc:once:rank%05d.optim.swp", world - 1);
    zero_engine *e = make(comm, &cfg, fault);
    if (!e) return;
    for (int s = 0; s < 2; s++)
        if (mlp_train_step(e, s, world, rank, 1, 2, NULL, NULL, 1.0f)) ZT_FAIL("step %d: %s", s, zero_engine_last_error(e));
    char ckpt[300];
    snprintf(ckpt, sizeof ckpt, "%s/stage%d", g_ckpt, stage);
    ZT_OK(zero_engine_save(e, ckpt, NULL));
    float *saved[MLP_LAYERS];
    read_all(e, saved);
    zero_status s = mlp_train_step(e, 2, world, rank, 1, 2, NULL, NULL, 1.0f) ? (zero_status)-1 : ZERO_OK;
    ZT_CHECKF(s != ZERO_OK, "stage %d: the step with a full disk succeeded", stage);
    check_message(e, world, rank, "optim", "No space left on device");
    ZT_CHECK(zero_engine_gather(e, 0) == NULL); /* broken: no further work */
    ZT_CHECK(zero_engine_step(e, NULL) != ZERO_OK);
    ZT_CHECK(count_files() > 0);
    zero_comm_barrier(comm);
    zero_engine_free(e);
    expect_no_files(comm);
    /* the checkpoint of step 2 loads with the values it had (no offload: another engine kind) */
    zero_config plain;
    zero_config_default(&plain);
    plain.stage = stage;
    zero_optim_hparams_default(&plain.optim, ZERO_OPTIM_ADAMW);
    zero_engine *f = NULL;
    if (zero_engine_create(&f, comm, &plain) || mlp_register(f)) {
        ZT_FAIL("checker: %s", f ? zero_engine_last_error(f) : "create");
    } else {
        ZT_OK(zero_engine_load(f, ckpt, NULL));
        ZT_EQ_INT(zero_engine_step_count(f), 2);
        float *back[MLP_LAYERS];
        read_all(f, back);
        for (int l = 0; l < MLP_LAYERS; l++) {
            ZT_CHECKF(!memcmp(saved[l], back[l], (size_t)mlp_unit_numel(l) * 4), "stage %d: layer%d differs after load", stage, l);
            free(back[l]);
        }
    }
    zero_engine_free(f);
    for (int l = 0; l < MLP_LAYERS; l++) free(saved[l]);
}

/* A read error of a parameter shard (stage 3): the gather fails on every rank. */
static void test_read_error(zero_comm *comm) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zero_config cfg;
    make_cfg(&cfg, 3, 1);
    /* parameter-file reads: 3 gathers forward, then backward: the 5th is the second one there */
    char fault[128];
    snprintf(fault, sizeof fault, "read:5:eio:once:rank%05d.param.swp", world - 1);
    zero_engine *e = make(comm, &cfg, fault);
    if (!e) return;
    int rc = mlp_train_step(e, 0, world, rank, 1, 2, NULL, NULL, 1.0f);
    ZT_CHECKF(rc != 0, "a step with a failed read succeeded");
    check_message(e, world, rank, "param", "Input/output error");
    ZT_CHECK(zero_engine_gather(e, 0) == NULL);
    ZT_CHECK(strstr(zero_engine_last_error(e), "failed earlier") != NULL);
    zero_engine_free(e);
    expect_no_files(comm);
}

/* A file with our name that is not ours, on the last rank only: finalize fails everywhere. */
static void test_foreign(zero_comm *comm) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    char path[512];
    snprintf(path, sizeof path, "%s/zero_fjob_rank%05d.optim.swp", g_dir, world - 1);
    const char text[] = "precious data\n";
    if (rank == world - 1) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, text, sizeof text) != (ssize_t)sizeof text) ZT_FAIL("cannot write %s", path);
        if (fd >= 0) close(fd);
    }
    zero_comm_barrier(comm);
    setenv("ZERO_JOB_ID", "fjob", 1);
    zero_config cfg;
    make_cfg(&cfg, 1, 0);
    zero_engine *e = NULL;
    ZT_OK(zero_engine_create(&e, comm, &cfg));
    zero_status s = mlp_register(e);
    unsetenv("ZERO_JOB_ID");
    ZT_EQ_INT(s, ZERO_ERR_IO);
    const char *msg = zero_engine_last_error(e);
    if (rank == world - 1)
        ZT_CHECKF(strstr(msg, path) && strstr(msg, "not a zero swap file"), "message: %s", msg);
    else
        ZT_CHECKF(strstr(msg, "failed on rank") != NULL, "message: %s", msg);
    zero_engine_free(e);
    zero_comm_barrier(comm);
    if (rank == world - 1) {
        char back[64] = {0};
        int fd = open(path, O_RDONLY);
        ZT_CHECK(fd >= 0 && read(fd, back, sizeof back) == (ssize_t)sizeof text && !memcmp(back, text, sizeof text));
        if (fd >= 0) close(fd);
        unlink(path);
    }
    expect_no_files(comm); /* the other ranks removed theirs */
}

static void test_bad_settings(zero_comm *comm) {
    zero_config cfg;
    zero_engine *e = NULL;
    make_cfg(&cfg, 2, 1); /* parameter offload needs stage 3 */
    ZT_EQ_INT(zero_engine_create(&e, comm, &cfg), ZERO_ERR_CONFIG);
    make_cfg(&cfg, 0, 0); /* optimizer offload needs stage 1-3 */
    ZT_EQ_INT(zero_engine_create(&e, comm, &cfg), ZERO_ERR_CONFIG);
    make_cfg(&cfg, 3, 1);
    cfg.offload_param.buffer_size = 10; /* smaller than a unit's shard, given (as a config's key sets it) */
    cfg.set_fields |= ZERO_SET_PARAM_BUFFER_SIZE;
    ZT_OK(zero_engine_create(&e, comm, &cfg));
    ZT_EQ_INT(mlp_register(e), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "offload_param.buffer_size: 10 elements") != NULL, "message: %s",
              zero_engine_last_error(e));
    zero_engine_free(e);
    /* not given: the buffers hold the largest shard, whatever the default's elements */
    make_cfg(&cfg, 3, 1);
    cfg.offload_param.buffer_size = 10;
    ZT_OK(zero_engine_create(&e, comm, &cfg));
    ZT_OK(mlp_register(e));
    zero_engine_free(e);
    make_cfg(&cfg, 1, 0);
    cfg.aio_block_size = 4096; /* a tile of 1024 elements x 8 bytes does not fit */
    ZT_OK(zero_engine_create(&e, comm, &cfg));
    ZT_EQ_INT(mlp_register(e), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "aio.block_size: 4096 bytes") && strstr(zero_engine_last_error(e), "8192"),
              "message: %s", zero_engine_last_error(e));
    zero_engine_free(e);
    expect_no_files(comm);
}

int main(void) {
    zero_comm *comm = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK) return 1;
    zt_rank = zero_comm_rank(comm);
    int64_t id = getpid();
    zero_comm_broadcast(comm, &id, 1, ZERO_DTYPE_INT64, 0);
    snprintf(g_dir, sizeof g_dir, "/tmp/zero_test_offload_faults_%lld", (long long)id);
    snprintf(g_ckpt, sizeof g_ckpt, "/tmp/zero_test_offload_faults_%lld_ckpt", (long long)id);
    mkdir(g_dir, 0755);
    for (int stage = 1; stage <= 3; stage++) test_disk_full(comm, stage);
    test_read_error(comm);
    test_foreign(comm);
    test_bad_settings(comm);
    zero_comm_barrier(comm);
    if (zt_rank == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", g_dir, g_ckpt);
        if (system(cmd) != 0) ZT_FAIL("cleanup");
    }
    zero_comm_free(comm);
    return zt_finish("test_offload_faults");
}
