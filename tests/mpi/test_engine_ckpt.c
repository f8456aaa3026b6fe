/* Checkpoints through the engine: 6 straight steps equal 3 steps + save + load into a fresh
 * engine + 3 steps, bitwise at the same world size and stage (fp32 and bf16, AdamW; fp16 with the
 * loss scaler's state), and within fp32 tolerance when the load happens at another stage or on
 * fewer ranks (the world is split into groups that each load the same checkpoint: 4 -> 3+1,
 * 3 -> 2+1, 2 -> 1+1). Corrupt or mismatched checkpoints are refused on every rank. A load or a
 * set_unit while a stage-3 prefetch is in flight is seen by the next gather. */
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "mlp_model.h"

#define STEPS 6
#define HALF 3
#define BSZ 2

static zero_engine *make(zero_comm *comm, int stage, zero_dtype prec, int accum) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.precision = prec;
    cfg.grad_accum = accum;
    cfg.micro_batch = BSZ;
    cfg.initial_scale_power = 6; /* fp16: a scale that moves during the run */
    cfg.loss_scale_window = 2;
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    cfg.optim.lr = 1e-2f;
    zero_engine *e = NULL;
    if (zero_engine_create(&e, comm, &cfg) || mlp_register(e) || mlp_init(e, 11)) {
        ZT_FAIL("setup: %s", e ? zero_engine_last_error(e) : "create");
        zero_engine_free(e);
        return NULL;
    }
    return e;
}

/* Trains steps [from, to) with the global batch of `gworld` ranks x `gaccum` micro-batches
 * expressed on this engine's world (accum scaled so the global batch is the same). */
static int train(zero_engine *e, zero_comm *comm, int from, int to, int global_mb) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    for (int s = from; s < to; s++)
        if (mlp_train_step(e, s, world, rank, global_mb / world, BSZ, NULL, NULL, 1.0f)) {
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

static void compare(float **a, float **b, double tol, const char *what) {
    for (int l = 0; l < MLP_LAYERS; l++)
        for (int i = 0; i < mlp_unit_numel(l); i++) {
            int ok = tol == 0 ? a[l][i] == b[l][i] : fabs(a[l][i] - b[l][i]) <= tol * fmax(1.0, fabs(b[l][i]));
            zt_checks++;
            if (!ok) {
                ZT_FAIL("%s: layer%d[%d] %.9g vs straight %.9g", what, l, i, a[l][i], b[l][i]);
                return;
            }
        }
}

static void free_params(float **p) {
    for (int l = 0; l < MLP_LAYERS; l++) free(p[l]);
}

/* Stage 3 prefetches the next unit's all-gather once the gather order is known. Writing the
 * parameters (set_unit, load) while that prefetch is in flight or held must not leave the next
 * gather with the old values (nor race with the transfer, which reads the shards). */
static void test_write_after_prefetch(zero_comm *comm, const char *ckpt) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    for (int how = 0; how < 2; how++) {
        zero_engine *e = make(comm, 3, ZERO_DTYPE_FP32, 1);
        if (!e) return;
        train(e, comm, 0, 2, world); /* the second step prefetches: the order is known */
        ZT_CHECK(zero_engine_gather(e, 0) != NULL); /* starts the prefetch of the next unit */
        ZT_OK(zero_engine_release(e, 0));
        const int n = mlp_unit_numel(1);
        float *want = malloc((size_t)n * sizeof *want);
        if (how == 0) {
            for (int i = 0; i < n; i++) want[i] = 0.25f * (float)(i % 7) - 0.5f;
            ZT_OK(zero_engine_set_unit(e, 1, want));
        } else {
            ZT_OK(zero_engine_load(e, ckpt, NULL));
            ZT_OK(zero_engine_read_unit(e, 1, want)); /* from the shards, not a gather */
        }
        const float *got = zero_engine_gather(e, 1);
        ZT_CHECKF(got != NULL, "gather after %s: %s", how ? "load" : "set_unit", zero_engine_last_error(e));
        int bad = 0;
        for (int i = 0; got && i < n; i++) bad += got[i] != want[i];
        ZT_CHECKF(bad == 0, "rank %d: after %s, %d of %d elements of the next gather are stale", rank,
                  how ? "load" : "set_unit", bad, n);
        if (got) ZT_OK(zero_engine_release(e, 1));
        free(want);
        zero_engine_free(e);
    }
}

int main(void) {
    zero_comm *comm = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK) return 1;
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zt_rank = rank;
    char dir[256];
    int64_t id = getpid(); /* rank 0's pid names the directory every rank uses */
    zero_comm_broadcast(comm, &id, 1, ZERO_DTYPE_INT64, 0);
    snprintf(dir, sizeof dir, "/tmp/zero_test_engine_ckpt_%lld", (long long)id);
    const int global_mb = world == 3 ? 6 : 12; /* divisible by every group size below */
    const zero_dtype precs[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int p = 0; p < 3; p++)
        for (int stage = 0; stage <= 3; stage++) {
            char sub[300];
            snprintf(sub, sizeof sub, "%s/%s_s%d", dir, zero_dtype_name(precs[p]), stage);
            /* straight run */
            zero_engine *e = make(comm, stage, precs[p], global_mb / world);
            if (!e) continue;
            float *straight[MLP_LAYERS], *resumed[MLP_LAYERS];
            train(e, comm, 0, STEPS, global_mb);
            read_params(e, straight);
            zero_engine_free(e);
            /* half, save */
            e = make(comm, stage, precs[p], global_mb / world);
            train(e, comm, 0, HALF, global_mb);
            if (zero_engine_save(e, sub, "{\"note\":\"test\"}") != ZERO_OK) ZT_FAIL("save: %s", zero_engine_last_error(e));
            zero_engine_free(e);
            /* load into a fresh engine, same world and stage: bitwise */
            e = make(comm, stage, precs[p], global_mb / world);
            char *user = NULL;
            ZT_OK(zero_engine_load(e, sub, &user));
            ZT_CHECK(user && strstr(user, "\"note\":\"test\""));
            free(user);
            ZT_EQ_INT(zero_engine_step_count(e), HALF);
            train(e, comm, HALF, STEPS, global_mb);
            read_params(e, resumed);
            compare(resumed, straight, 0, "same world and stage");
            free_params(resumed);
            zero_engine_free(e);
            /* fp32: load at another stage, on sub-groups of the world */
            if (precs[p] == ZERO_DTYPE_FP32) {
                zero_comm *group = NULL;
                const int color = world > 1 && rank == world - 1; /* groups of world-1 ranks and 1 rank */
                ZT_OK(zero_comm_split(comm, color, rank, &group));
                const int gsize = zero_comm_size(group);
                e = make(group, (stage + 1) % 4, precs[p], global_mb / gsize);
                ZT_OK(zero_engine_load(e, sub, NULL));
                train(e, group, HALF, STEPS, global_mb);
                read_params(e, resumed);
                char what[96];
                snprintf(what, sizeof what, "saved stage %d on %d ranks, resumed stage %d on %d", stage, world,
                         (stage + 1) % 4, gsize);
                compare(resumed, straight, 1e-5, what);
                free_params(resumed);
                zero_engine_free(e);
                zero_comm_free(group);
            }
            free_params(straight);
        }

    char sub[300];
    snprintf(sub, sizeof sub, "%s/fp32_s3", dir);
    test_write_after_prefetch(comm, sub);

    /* refused: another model (an extra unit), a missing checkpoint, a corrupt rank file */
    snprintf(sub, sizeof sub, "%s/fp32_s0", dir);
    zero_config cfg;
    zero_config_default(&cfg);
    zero_engine *e = NULL;
    ZT_OK(zero_engine_create(&e, comm, &cfg));
    int u = zero_engine_add_unit(e, "other");
    int64_t shape[1] = {10};
    zero_engine_add_param(e, u, "other.w", shape, 1, 0);
    zero_engine_finalize(e);
    ZT_EQ_INT(zero_engine_load(e, sub, NULL), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "units") || strstr(zero_engine_last_error(e), "unit"), "%s",
              zero_engine_last_error(e));
    zero_engine_free(e);
    e = make(comm, 1, ZERO_DTYPE_FP32, global_mb / world);
    ZT_CHECK(zero_engine_load(e, "/nonexistent/ckpt", NULL) != ZERO_OK);
    if (rank == 0) { /* truncate rank 0's file of the fp32 stage-0 checkpoint */
        char latest[400], name[64] = {0}, path[600];
        snprintf(latest, sizeof latest, "%s/latest", sub);
        FILE *f = fopen(latest, "r");
        if (f && fgets(name, sizeof name, f)) name[strcspn(name, "\n")] = 0;
        if (f) fclose(f);
        snprintf(path, sizeof path, "%s/%s/rank_00000.safetensors", sub, name);
        ZT_OK(truncate(path, 100));
    }
    zero_comm_barrier(comm);
    ZT_CHECK(zero_engine_load(e, sub, NULL) != ZERO_OK); /* every rank, not only rank 0 */
    zero_engine_free(e);
    zero_comm_barrier(comm);
    if (rank == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ZT_OK(system(cmd));
    }
    zero_comm_free(comm);
    return zt_finish("test_engine_ckpt");
}
