/* hpZ (zero_optimization.zero_hpz_partition_size, ZeRO++'s hierarchical partitions): stage 3 with
 * a secondary copy of the parameters sharded over groups of H ranks gives the bits of plain stage
 * 3 and stage 0's numbers; its memory is the formula's to the byte; its traffic counters equal
 * the formula, by path, on one node and on fake nodes (cross-node bytes 2/3 of plain stage 3's
 * at accumulation 1); checkpoints move to plain layouts; bad values are refused naming the key. */
#include <unistd.h>

#include "harness.h"
#include "mlp_model.h"

#define STEPS 6
#define HALF 3
#define BSZ 2

static int W, R; /* world size, rank */

typedef struct run {
    float *params[MLP_LAYERS];
    double losses[STEPS], norms[STEPS];
    zero_comm_counters ct;
    zero_mem_stats mem;
} run;

static void run_free(run *r) {
    for (int l = 0; l < MLP_LAYERS; l++) free(r->params[l]);
    memset(r, 0, sizeof *r);
}

static void config(zero_config *cfg, int stage, int hpz, zero_dtype prec, int accum, int64_t bucket) {
    zero_config_default(cfg);
    cfg->stage = stage;
    cfg->hpz_partition_size = hpz;
    cfg->precision = prec;
    cfg->grad_accum = accum;
    cfg->micro_batch = BSZ;
    zero_optim_hparams_default(&cfg->optim, ZERO_OPTIM_ADAMW);
    cfg->optim.lr = 1e-2f;
    cfg->optim.weight_decay = 0.1f;
    if (bucket >= 0) { /* prefetch as many units ahead as fit: several world gathers in flight */
        cfg->prefetch_bucket_size = bucket;
        cfg->set_fields |= ZERO_SET_PREFETCH_BUCKET;
    }
}

static zero_engine *make(zero_comm *comm, int stage, int hpz, zero_dtype prec, int accum, int64_t bucket,
                         uint64_t seed) {
    zero_config cfg;
    config(&cfg, stage, hpz, prec, accum, bucket);
    zero_engine *e = NULL;
    zero_error err = {{0}};
    if (zero_engine_create_with(&e, comm, &cfg, NULL, &err) != ZERO_OK || mlp_register(e) || mlp_init(e, seed)) {
        ZT_FAIL("setup stage %d hpz %d: %s", stage, hpz, e ? zero_engine_last_error(e) : err.msg);
        zero_engine_free(e);
        return NULL;
    }
    return e;
}

static int train(zero_engine *e, zero_comm *comm, int from, int to, int accum, run *out) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    for (int s = from; s < to; s++) {
        zero_step_stats st;
        double loss = 0;
        if (mlp_train_step(e, s, world, rank, accum, BSZ, &loss, &st, 1.0f)) {
            ZT_FAIL("step %d: %s", s, zero_engine_last_error(e));
            return -1;
        }
        if (out) {
            out->losses[s] = loss;
            out->norms[s] = st.grad_norm;
        }
    }
    return 0;
}

/* An evaluation pass between steps: every unit gathered once (over the world under hpZ, whose
 * secondary copies are then current). */
static void eval_pass(zero_engine *e) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        ZT_CHECK(zero_engine_gather(e, l) != NULL);
        ZT_OK(zero_engine_release(e, l));
    }
}

static void read_params(zero_engine *e, float **out) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        out[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        ZT_OK(zero_engine_read_unit(e, l, out[l]));
    }
}

static int do_run(zero_comm *comm, int stage, int hpz, zero_dtype prec, int accum, int64_t bucket, run *out) {
    memset(out, 0, sizeof *out);
    zero_engine *e = make(comm, stage, hpz, prec, accum, bucket, 7);
    if (!e) return -1;
    int rc = train(e, comm, 0, STEPS, accum, out);
    if (rc == 0) {
        read_params(e, out->params);
        zero_engine_comm_counters(e, &out->ct);
        zero_engine_mem_stats(e, &out->mem);
    }
    zero_engine_free(e);
    return rc;
}

/* tol 0: the same bits */
static void compare(const run *a, const run *b, double tol, const char *what) {
    for (int l = 0; l < MLP_LAYERS; l++)
        for (int i = 0; i < mlp_unit_numel(l); i++) {
            double x = a->params[l][i], y = b->params[l][i];
            int ok = tol == 0 ? memcmp(&a->params[l][i], &b->params[l][i], sizeof(float)) == 0
                              : fabs(x - y) <= tol * fmax(1.0, fabs(y));
            zt_checks++;
            if (!ok) {
                ZT_FAIL("%s: layer%d[%d] = %.9g vs %.9g", what, l, i, x, y);
                return;
            }
        }
    for (int s = 0; s < STEPS; s++) {
        if (tol == 0) {
            ZT_CHECKF(a->losses[s] == b->losses[s] && a->norms[s] == b->norms[s], "%s: step %d loss %.17g vs %.17g, "
                      "norm %.17g vs %.17g", what, s, a->losses[s], b->losses[s], a->norms[s], b->norms[s]);
        } else {
            ZT_NEAR(a->norms[s], b->norms[s], tol);
        }
    }
}

/* floor(f (n-1) B / n): comm.h's ring rule, written out again */
static uint64_t ring(unsigned f, uint64_t bytes, int n) {
    return n <= 1 ? 0 : (uint64_t)((unsigned __int128)bytes * f * (unsigned)(n - 1) / (unsigned)n);
}

/* The layouts the counters are checked on: K nodes of L ranks (fake nodes, or one node). */
typedef struct layout {
    const char *name;
    int K, L, fake;
} layout;

/* Memory and traffic of a run of `accum` micro-batches per step against the formulas. */
static void check_formulas(const run *hp, const run *plain, const layout *ly, int H, zero_dtype prec, int accum) {
    const uint64_t w = zero_dtype_size(prec);
    uint64_t P = 0, Psec = 0, world_ag = 0, group_ag = 0, rs = 0, cross = 0, shm = 0, group_mpi = 0, group_shm = 0;
    for (int l = 0; l < MLP_LAYERS; l++) {
        const uint64_t pu = zero_partition_padded((uint64_t)mlp_unit_numel(l), W, ZERO_PLAN_DEFAULT_ALIGN);
        const uint64_t M = pu * w;
        P += pu;
        Psec += pu / (uint64_t)H;
        world_ag += ring(2, M, W);
        rs += ring(2, M, W);
        group_ag += ring(2, M, H);
        /* a world collective through the window: the node step over L ranks, then this rank's
         * blocks on every node across the K nodes */
        shm += ring(2, M, ly->L);
        cross += ring(2, pu / (uint64_t)W * w * (uint64_t)ly->K, ly->K);
        /* the group's all-gather: on fake nodes a group of H consecutive ranks is cut into H
         * one-rank nodes (plain MPI); on one node it runs through the window */
        if (ly->fake) group_mpi += ring(2, M, H);
        else group_shm += ring(2, M, H);
    }
    const uint64_t S = P / (uint64_t)W;
    /* memory: the secondary shard is accounted with the parameters, to the byte (host memory on the
     * cpu backend; with ZERO_DEVICE set, the device's side table holds the states: test_engine_device) */
    const char *dev = getenv("ZERO_DEVICE");
    if (!dev || !*dev || !strcmp(dev, "cpu")) {
        ZT_EQ_INT(hp->mem.current[ZERO_MEM_PARAMS], (S + Psec) * w);
        ZT_EQ_INT(plain->mem.current[ZERO_MEM_PARAMS], S * w);
        for (int c = ZERO_MEM_GRADS; c <= ZERO_MEM_OPTIM; c++) ZT_EQ_INT(hp->mem.current[c], plain->mem.current[c]);
        ZT_EQ_INT(hp->mem.peak[ZERO_MEM_BUFFERS], plain->mem.peak[ZERO_MEM_BUFFERS]); /* the same transients */
    }
    /* traffic: step 0 gathers inside the groups (set_unit wrote the secondary copies), every later
     * step gathers each unit once over the world and 2*accum - 1 times inside its group */
    const uint64_t n_world = STEPS - 1, n_group = (uint64_t)STEPS * 2 * (uint64_t)accum - n_world;
    const uint64_t n_rs = (uint64_t)STEPS * (uint64_t)accum;
    ZT_EQ_INT(hp->ct.bytes[ZERO_COLL_ALL_GATHER], n_world * world_ag + n_group * group_ag);
    ZT_EQ_INT(hp->ct.calls[ZERO_COLL_ALL_GATHER], (n_world + n_group) * MLP_LAYERS);
    ZT_EQ_INT(hp->ct.bytes[ZERO_COLL_REDUCE_SCATTER], n_rs * rs);
    ZT_EQ_INT(hp->ct.bytes[ZERO_COLL_ALL_REDUCE], 0);
    ZT_EQ_INT(plain->ct.bytes[ZERO_COLL_ALL_GATHER], (uint64_t)STEPS * 2 * (uint64_t)accum * world_ag);
    /* by path: the world collectives split into node step and cross-node step, the group's stay
     * in the group */
    ZT_EQ_INT(hp->ct.path_bytes[ZERO_COMM_PATH_CROSS_NODE], (n_world + n_rs) * cross);
    ZT_EQ_INT(hp->ct.path_bytes[ZERO_COMM_PATH_SHM], (n_world + n_rs) * shm + n_group * group_shm);
    ZT_EQ_INT(hp->ct.path_bytes[ZERO_COMM_PATH_MPI], n_group * group_mpi);
    ZT_EQ_INT(plain->ct.path_bytes[ZERO_COMM_PATH_CROSS_NODE], (uint64_t)STEPS * 3 * (uint64_t)accum * cross);
    if (ly->K > 1 && accum == 1) {
        /* the claim: only the forward all-gather crosses; per step (after the first) 2
         * of plain stage 3's 3 collectives' cross-node bytes */
        const uint64_t hp_step = (hp->ct.path_bytes[ZERO_COMM_PATH_CROSS_NODE] - cross) / (STEPS - 1);
        const uint64_t plain_step = plain->ct.path_bytes[ZERO_COMM_PATH_CROSS_NODE] / STEPS;
        ZT_CHECKF(3 * hp_step == 2 * plain_step, "%s: cross-node bytes per step %llu with hpZ, %llu plain", ly->name,
                  (unsigned long long)hp_step, (unsigned long long)plain_step);
        if (R == 0)
            printf("%s, hpZ %d: cross-node bytes per step and rank %llu (plain stage 3: %llu)\n", ly->name, H,
                   (unsigned long long)hp_step, (unsigned long long)plain_step);
    }
}

/* hpZ against plain stage 3 (bitwise), stage 0 (fp32 1e-5) and the formulas, on one layout: every
 * group size H that divides the world (only_h 0), or only_h. */
static void test_equivalence(zero_comm *comm, const layout *ly, int only_h) {
    for (int H = 2; H < W; H++) {
        if (W % H || (only_h && H != only_h)) continue;
        const zero_dtype precs[2] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16};
        for (int p = 0; p < 2; p++)
            for (int accum = 1; accum <= 3; accum += 2)
                for (int b = 0; b < 2; b++) {
                    const int64_t bucket = b ? 100000 : -1;
                    run hp, plain, s0;
                    if (do_run(comm, 3, H, precs[p], accum, bucket, &hp)) continue;
                    if (do_run(comm, 3, 1, precs[p], accum, bucket, &plain)) continue;
                    char what[160];
                    snprintf(what, sizeof what, "%s: hpZ %d %s accum %d %s against plain stage 3", ly->name, H,
                             zero_dtype_name(precs[p]), accum, b ? "deep prefetch" : "next-unit prefetch");
                    compare(&hp, &plain, 0, what);
                    check_formulas(&hp, &plain, ly, H, precs[p], accum);
                    if (precs[p] == ZERO_DTYPE_FP32 && do_run(comm, 0, 1, precs[p], accum, bucket, &s0) == 0) {
                        snprintf(what, sizeof what, "%s: hpZ %d accum %d against stage 0", ly->name, H, accum);
                        compare(&hp, &s0, 1e-5, what);
                        run_free(&s0);
                    }
                    run_free(&hp);
                    run_free(&plain);
                }
    }
}

/* Writes and the secondary copies. Part of a unit written while they are stale (after
 * finalize, after a step) reaches the next gather (over the world); while they are current (after
 * an evaluation pass) a write of part of a unit is refused naming the key, one of the whole unit
 * (set_unit) reaches them, so the next gather (inside the group) returns the values written. */
static int gather_is(zero_engine *e, int unit, const float *want, int n, const char *what) {
    const float *got = zero_engine_gather(e, unit);
    int bad = 0;
    for (int i = 0; got && i < n; i++) bad += got[i] != want[i];
    ZT_CHECKF(got && bad == 0, "%s: %d of %d elements of the next gather differ", what, bad, n);
    if (got) ZT_OK(zero_engine_release(e, unit));
    return bad;
}

static void test_writes(zero_comm *comm, int H) {
    zero_engine *e = make(comm, 3, H, ZERO_DTYPE_FP32, 1, -1, 5);
    if (!e) return;
    const int n = mlp_unit_numel(1);
    float *want = malloc((size_t)n * sizeof *want), *v = malloc((size_t)n * sizeof *v);
    const uint64_t lo = 3, hi = (uint64_t)n / 2 + 5;
    /* after a step: stale, a write of part of the unit is taken */
    train(e, comm, 0, 2, 1, NULL);
    ZT_OK(zero_engine_read_unit(e, 1, want));
    for (uint64_t i = lo; i < hi; i++) want[i] = v[i - lo] = 0.125f * (float)(i % 9) - 0.5f;
    ZT_OK(zero_engine_set_unit_range(e, 1, lo, hi, v));
    uint64_t M[MLP_LAYERS];
    for (int l = 0; l < MLP_LAYERS; l++)
        M[l] = zero_partition_padded((uint64_t)mlp_unit_numel(l), W, ZERO_PLAN_DEFAULT_ALIGN) * 4;
    zero_comm_counters c0, c1;
    zero_engine_comm_counters(e, &c0);
    gather_is(e, 1, want, n, "set_unit_range after a step");
    zero_engine_comm_counters(e, &c1);
    uint64_t d = c1.bytes[ZERO_COLL_ALL_GATHER] - c0.bytes[ZERO_COLL_ALL_GATHER];
    uint64_t next = MLP_LAYERS > 2 ? ring(2, M[2], W) : 0;
    ZT_CHECKF(d == ring(2, M[1], W) || d == ring(2, M[1], W) + next, "gather after a step moved %llu bytes "
              "(over the world: %llu)", (unsigned long long)d, (unsigned long long)ring(2, M[1], W));
    /* set_unit_range of a whole unit is not every rank's write (a rank may own all of a small
     * unit): the copies stay stale on every rank alike, the next gather goes over the world */
    {
        train(e, comm, 2, 3, 1, NULL); /* a step: the copies stale */
        const int n0 = mlp_unit_numel(0);
        float *w0 = malloc((size_t)n0 * sizeof *w0);
        for (int i = 0; i < n0; i++) w0[i] = 0.5f - 0.001f * (float)i;
        ZT_OK(zero_engine_set_unit_range(e, 0, 0, (uint64_t)n0, w0));
        zero_engine_comm_counters(e, &c0);
        gather_is(e, 0, w0, n0, "set_unit_range of the whole unit");
        zero_engine_comm_counters(e, &c1);
        d = c1.bytes[ZERO_COLL_ALL_GATHER] - c0.bytes[ZERO_COLL_ALL_GATHER];
        const uint64_t after = ring(2, M[1], W);
        ZT_CHECKF(d == ring(2, M[0], W) || d == ring(2, M[0], W) + after, "gather after a whole set_unit_range "
                  "moved %llu bytes (over the world: %llu)", (unsigned long long)d, (unsigned long long)ring(2, M[0], W));
        free(w0);
        ZT_OK(zero_engine_read_unit(e, 1, want));
    }
    /* current (the gather above and an evaluation pass): part of the unit is refused */
    eval_pass(e);
    for (uint64_t i = lo; i < hi; i++) v[i - lo] = 7.0f;
    ZT_EQ_INT(zero_engine_set_unit_range(e, 1, lo, hi, v), ZERO_ERR_UNSUPPORTED);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "zero_optimization.zero_hpz_partition_size") &&
              strstr(zero_engine_last_error(e), "is not supported yet"), "%s", zero_engine_last_error(e));
    gather_is(e, 1, want, n, "a refused write changes nothing");
    /* the whole unit: taken, the next gather stays inside the group */
    for (int i = 0; i < n; i++) want[i] = 0.01f * (float)(i % 13);
    ZT_OK(zero_engine_set_unit(e, 1, want));
    zero_engine_comm_counters(e, &c0);
    gather_is(e, 1, want, n, "set_unit while the secondary copies are current");
    zero_engine_comm_counters(e, &c1);
    /* the unit inside its group, and the next unit of the recorded order if it was prefetched:
     * also inside its group (current since the evaluation pass) */
    d = c1.bytes[ZERO_COLL_ALL_GATHER] - c0.bytes[ZERO_COLL_ALL_GATHER];
    next = MLP_LAYERS > 2 ? ring(2, M[2], H) : 0;
    ZT_CHECKF(d == ring(2, M[1], H) || d == ring(2, M[1], H) + next, "gather after set_unit moved %llu bytes "
              "(inside the group: %llu, with the next unit's prefetch %llu)", (unsigned long long)d,
              (unsigned long long)ring(2, M[1], H), (unsigned long long)(ring(2, M[1], H) + next));
    /* and the run goes on */
    ZT_CHECK(train(e, comm, 3, 4, 1, NULL) == 0);
    free(want);
    free(v);
    zero_engine_free(e);
}

/* A checkpoint saved under hpZ resumes on plain layouts: plain stage 3 on the same ranks (bitwise:
 * the same numbers), stage 0 on them and stage 3 on one rank (fp32 tolerance); and an hpZ engine
 * whose secondary copies were current with other values loads it and continues bitwise. */
static void test_checkpoint(zero_comm *comm, zero_comm *self, int H) {
    char dir[256];
    int64_t id = getpid();
    zero_comm_broadcast(comm, &id, 1, ZERO_DTYPE_INT64, 0);
    snprintf(dir, sizeof dir, "/tmp/zero_test_engine_hpz_%lld", (long long)id);
    run straight, resumed;
    if (do_run(comm, 3, H, ZERO_DTYPE_FP32, 1, -1, &straight)) return;
    zero_engine *e = make(comm, 3, H, ZERO_DTYPE_FP32, 1, -1, 7);
    if (!e) return;
    train(e, comm, 0, HALF, 1, NULL);
    eval_pass(e); /* the secondary copies are current at the save: nothing of them is saved */
    ZT_OK(zero_engine_save(e, dir, NULL));
    zero_engine_free(e);
    const struct { zero_comm *c; int stage, hpz; double tol; const char *what; } to[4] = {
        {comm, 3, 1, 0, "plain stage 3, same ranks"},
        {comm, 3, H, 0, "hpZ, over current secondary copies of other values"},
        {comm, 0, 1, 1e-5, "stage 0, same ranks"},
        {self, 3, 1, 1e-5, "stage 3 on one rank"},
    };
    for (int k = 0; k < 4; k++) {
        const int world = zero_comm_size(to[k].c), accum = W / world;
        e = make(to[k].c, to[k].stage, to[k].hpz, ZERO_DTYPE_FP32, accum, -1, 99);
        if (!e) continue;
        if (k == 1) { /* other values, their secondary copies current */
            train(e, to[k].c, 0, 1, accum, NULL);
            eval_pass(e);
        }
        ZT_OK(zero_engine_load(e, dir, NULL));
        memset(&resumed, 0, sizeof resumed);
        if (train(e, to[k].c, HALF, STEPS, accum, &resumed) == 0) {
            read_params(e, resumed.params);
            /* the steps before the save are the straight run's; on one rank the loss is the global
             * batch's, not this rank's: compare() then checks the norms only (tol > 0) */
            for (int s = 0; s < HALF; s++) resumed.losses[s] = straight.losses[s], resumed.norms[s] = straight.norms[s];
            char what[160];
            snprintf(what, sizeof what, "saved under hpZ %d on %d ranks, resumed as %s", H, W, to[k].what);
            compare(&resumed, &straight, to[k].tol, what);
        }
        run_free(&resumed);
        zero_engine_free(e);
    }
    run_free(&straight);
    zero_comm_barrier(comm);
    if (R == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        ZT_OK(system(cmd));
    }
}

/* Bad values are refused by zero_engine_create (and by zero_config_resolve: tests/unit/test_config.c)
 * naming the key; H equal to the world is accepted and changes nothing. */
static void test_values(zero_comm *comm) {
    const struct { int stage, hpz, nvme; zero_status st; const char *msg; } bad[] = {
        {3, W + 1, 0, ZERO_ERR_CONFIG, "is larger than the world size"},
        {3, 2 * W, 0, ZERO_ERR_CONFIG, "is larger than the world size"},
        {3, -1, 0, ZERO_ERR_CONFIG, "-1 is out of range"},
        {3, 0, 0, ZERO_ERR_CONFIG, "0 is out of range"},
        {2, W, 0, ZERO_ERR_CONFIG, "needs zero_optimization.stage 3 (stage is 2)"},
        {3, W, 1, ZERO_ERR_UNSUPPORTED, "offload_param.device \"nvme\" is not supported yet"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (bad[i].hpz == W && W == 1) continue; /* 1 is off: nothing to refuse */
        zero_config cfg;
        config(&cfg, bad[i].stage, bad[i].hpz, ZERO_DTYPE_FP32, 1, -1);
        if (bad[i].nvme) {
            cfg.offload_param.device = ZERO_OFFLOAD_NVME;
            snprintf(cfg.offload_param.nvme_path, sizeof cfg.offload_param.nvme_path, "/tmp");
        }
        zero_engine *e = NULL;
        zero_error err = {{0}};
        ZT_EQ_INT(zero_engine_create_with(&e, comm, &cfg, NULL, &err), bad[i].st);
        ZT_CHECK(e == NULL);
        ZT_CHECKF(strstr(err.msg, "zero_optimization.zero_hpz_partition_size") && strstr(err.msg, bad[i].msg),
                  "hpz %d stage %d: %s", bad[i].hpz, bad[i].stage, err.msg);
    }
    if (W > 2 && W % 2) { /* does not divide */
        zero_config cfg;
        config(&cfg, 3, 2, ZERO_DTYPE_FP32, 1, -1);
        zero_engine *e = NULL;
        zero_error err = {{0}};
        ZT_EQ_INT(zero_engine_create_with(&e, comm, &cfg, NULL, &err), ZERO_ERR_CONFIG);
        ZT_CHECKF(strstr(err.msg, "zero_optimization.zero_hpz_partition_size: 2 does not divide the world size"), "%s",
                  err.msg);
    }
    if (W >= 4 && W % 2 == 0) { /* frozen parameters: not combined with hpZ yet, refused at finalize */
        zero_config cfg;
        config(&cfg, 3, 2, ZERO_DTYPE_FP32, 1, -1);
        zero_engine *e = NULL;
        zero_error err = {{0}};
        ZT_OK(zero_engine_create_with(&e, comm, &cfg, NULL, &err));
        int u = -1;
        const int64_t shape[1] = {8};
        if (e && (u = zero_engine_add_unit(e, "u")) >= 0) {
            ZT_OK(zero_engine_add_param(e, u, "w", shape, 1, 0));
            ZT_OK(zero_engine_add_param(e, u, "base", shape, 1, ZERO_PARAM_FROZEN));
            ZT_EQ_INT(zero_engine_finalize(e), ZERO_ERR_UNSUPPORTED);
            ZT_CHECKF(strstr(zero_engine_last_error(e), "zero_hpz_partition_size 2 with ZERO_PARAM_FROZEN") &&
                          strstr(zero_engine_last_error(e), "not supported yet"),
                      "%s", zero_engine_last_error(e));
        }
        zero_engine_free(e);
    }
    /* H = world: the secondary shard would be the world shard: the run is plain stage 3's, its
     * memory and its counters included */
    run a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    if (do_run(comm, 3, W, ZERO_DTYPE_BF16, 1, -1, &a) == 0 && do_run(comm, 3, 1, ZERO_DTYPE_BF16, 1, -1, &b) == 0) {
        compare(&a, &b, 0, "hpZ equal to the world against plain stage 3");
        for (int c = 0; c < ZERO_MEM_COUNT; c++) ZT_EQ_INT(a.mem.current[c], b.mem.current[c]);
        ZT_CHECK(memcmp(&a.ct, &b.ct, sizeof a.ct) == 0);
    }
    run_free(&a);
    run_free(&b);
}

static zero_comm *make_comm(int fake_nodes) {
    zero_comm_options o;
    zero_comm_options_default(&o);
    o.shm_min_bytes = 0; /* every collective through the window, so that every path is counted */
    o.async = 0;
    o.fake_nodes = fake_nodes;
    zero_comm *c = NULL;
    zero_error err = {{0}};
    if (zero_comm_init_mpi_with(&c, NULL, &o, &err) != ZERO_OK) {
        fprintf(stderr, "zero_comm_init_mpi_with: %s\n", err.msg);
        exit(1);
    }
    return c;
}

int main(void) {
    zero_comm *comm = make_comm(0), *self = NULL;
    if (zero_comm_init_self(&self) != ZERO_OK) return 1;
    W = zero_comm_size(comm);
    R = zero_comm_rank(comm);
    zt_rank = R;
    /* one node: the groups' all-gathers through the window, nothing crosses */
    const layout one = {"one node", 1, W, 0};
    test_equivalence(comm, &one, 0); /* on 6 ranks: groups of 2 and of 3 */
    test_values(comm);
    if (W == 4) {
        test_writes(comm, 2);
        test_checkpoint(comm, self, 2);
    }
    if (W == 4 || W == 6) {
        /* W/2 fake nodes of two ranks, H = 2: the node's all-gathers stay off the cross-node path.
         * (A group is one sub-communicator, which fake nodes cut again into one-rank nodes: H = 2
         * keeps that cut simple, plain MPI; 3 fake nodes give an odd node count.) */
        zero_comm *fake = make_comm(W / 2);
        const layout fl = {W == 4 ? "2 fake nodes x 2" : "3 fake nodes x 2", W / 2, 2, 1};
        test_equivalence(fake, &fl, 2);
        zero_comm_free(fake);
    }
    zero_comm_free(self);
    zero_comm_free(comm);
    return zt_finish("test_engine_hpz");
}
