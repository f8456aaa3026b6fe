/* qwZ (zero_optimization.zero_quantized_weights, ZeRO++'s quantized weight gathers) on the MLP of
 * tests/mlp_model.h at stage 3, fp32 and bf16, blocks of 32 (several a shard) and the default 2048
 * (one partial block a shard), the next-unit and the deep prefetch:
 *   - a gathered unit is, bit for bit, an independent oracle built from zero/quant.h's scalar
 *     functions: this rank's shard as it is, every other rank's shard coded by
 *     zero_quant_blockwise against int8's linear map in blocks of the shard and decoded by
 *     zero_dequant_blockwise, in the working dtype (the frozen part too, in the frozen dtype);
 *     under ZERO_DEVICE=fake this holds the device's q8 kernels to the host's functions;
 *   - 6 steps train: the losses within 1e-2 (relative; measured up to 6e-3) of plain stage 3's, the parameters not
 *     bitwise plain stage 3's (the gathers were quantized: a qwZ that did nothing fails), memory
 *     of the model states the same as plain stage 3's;
 *   - the all-gathers' bytes are the formula's: each unit's message of zero_quant_msg_bytes per
 *     rank, gathered over the world (ring rule), in forward and backward; the reduce-scatters the
 *     same as plain stage 3's;
 *   - with hpZ the world's gathers are quantized, the group's not (their bytes, by the formula);
 *   - with the parameters on NVMe (the shard sent from the pool) the same bits as in RAM;
 *   - on one rank nothing is quantized: plain stage 3's bits;
 *   - the key below stage 3 is a config error naming it;
 *   - qgZ (zero_quantized_gradients) over plain MPI at stages 2-3 (and with qwZ): losses within 1e-2
 *     of the exact reduction's, not its bits, the reduce-scatter bytes the messages' formula; below
 *     stage 2 and with deterministic mode a config error naming the key.
 * Runs under mpiexec with 1, 2 and 3 ranks. */
#include <unistd.h>

#include "harness.h"
#include "mlp_model.h"
#include "zero/quant.h"

#define STEPS 6
#define BSZ   2

static int W, R;
static char g_dir[256];

typedef struct qopt {
    zero_dtype prec;
    int stage; /* 0: 3 */
    int qwz, qgz, accum, hpz, nvme;
    int64_t block;  /* 0: the default */
    int64_t bucket; /* -1: next-unit prefetch */
    int frozen;     /* layer 1's weight frozen (the gather check only) */
} qopt;

typedef struct run {
    float *params[MLP_LAYERS];
    double losses[STEPS];
    zero_comm_counters ct;
    zero_mem_stats mem;
} run;

static void run_free(run *r) {
    for (int l = 0; l < MLP_LAYERS; l++) free(r->params[l]);
    memset(r, 0, sizeof *r);
}

static void config(zero_config *cfg, const qopt *q) {
    zero_config_default(cfg);
    cfg->stage = q->stage ? q->stage : 3;
    cfg->quant_weights = q->qwz;
    cfg->quant_grads = q->qgz;
    cfg->quant_grads_block = 32;
    if (q->block) cfg->quant_weights_block = q->block;
    cfg->hpz_partition_size = q->hpz ? q->hpz : 1;
    cfg->precision = q->prec;
    cfg->grad_accum = q->accum;
    cfg->micro_batch = BSZ;
    zero_optim_hparams_default(&cfg->optim, ZERO_OPTIM_ADAMW);
    cfg->optim.lr = 1e-2f;
    cfg->optim.weight_decay = 0.1f;
    if (q->bucket >= 0) {
        cfg->prefetch_bucket_size = q->bucket;
        cfg->set_fields |= ZERO_SET_PREFETCH_BUCKET;
    }
    if (q->nvme) {
        cfg->offload_param.device = ZERO_OFFLOAD_NVME;
        snprintf(cfg->offload_param.nvme_path, sizeof cfg->offload_param.nvme_path, "%s/nv", g_dir);
    }
}

/* The MLP's units, layer 1's weight frozen when asked. */
static int register_units(zero_engine *e, int frozen) {
    static const unsigned layer1_frozen[MLP_LAYERS] = {0, ZERO_PARAM_FROZEN, 0};
    return mlp_register_flags(e, frozen ? layer1_frozen : NULL);
}

static zero_engine *make(zero_comm *comm, const qopt *q) {
    zero_config cfg;
    config(&cfg, q);
    zero_engine *e = NULL;
    zero_error err = {{0}};
    if (zero_engine_create_with(&e, comm, &cfg, NULL, &err) != ZERO_OK || register_units(e, q->frozen) ||
        mlp_init(e, 7)) {
        ZT_FAIL("setup %s qwz %d block %lld: %s", zero_dtype_name(q->prec), q->qwz, (long long)q->block,
                e ? zero_engine_last_error(e) : err.msg);
        zero_engine_free(e);
        return NULL;
    }
    return e;
}

static int do_run(zero_comm *comm, const qopt *q, run *out) {
    memset(out, 0, sizeof *out);
    zero_engine *e = make(comm, q);
    if (!e) return -1;
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    int rc = 0;
    for (int s = 0; s < STEPS && rc == 0; s++)
        if (mlp_train_step(e, s, world, rank, q->accum, BSZ, &out->losses[s], NULL, 1.0f)) {
            ZT_FAIL("step %d: %s", s, zero_engine_last_error(e));
            rc = -1;
        }
    if (rc == 0) {
        for (int l = 0; l < MLP_LAYERS; l++) {
            out->params[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
            ZT_OK(zero_engine_read_unit(e, l, out->params[l]));
        }
        zero_engine_comm_counters(e, &out->ct);
        zero_engine_mem_stats(e, &out->mem);
    }
    zero_engine_free(e);
    return rc;
}

/* floor(f (n-1) B / n): comm.h's ring rule */
static uint64_t ring(unsigned f, uint64_t bytes, int n) {
    return n <= 1 ? 0 : (uint64_t)((unsigned __int128)bytes * f * (unsigned)(n - 1) / (unsigned)n);
}

static uint64_t block_of(const qopt *q) { return q->block ? (uint64_t)q->block : 2048; }

/* The oracle of one part of n values x (fp32) as this rank gathers it under qwZ over `world`
 * ranks: padded and cut into shards, each value in dtype dt; the other ranks' shards coded and
 * decoded by the scalar functions of zero/quant.h (in fp32, then rounded to dt). */
static void oracle_part(const float *x, uint64_t n, int world, zero_dtype dt, uint64_t B, float *out) {
    const uint64_t P = zero_partition_padded(n, world, ZERO_PLAN_DEFAULT_ALIGN), S = P / (uint64_t)world;
    float *v = calloc(P, sizeof *v), *dec = calloc(S, sizeof *dec), *am = calloc(S / B + 2, sizeof *am);
    uint8_t *idx = calloc(S, 1);
    uint16_t *h = calloc(P, sizeof *h);
    float map[256];
    zero_quant_linear_map(map);
    memcpy(v, x, n * sizeof *v);
    if (dt != ZERO_DTYPE_FP32) { /* the working copy: the values in dt */
        zero_convert(v, ZERO_DTYPE_FP32, h, dt, P, ZERO_IMPL_SCALAR);
        zero_convert(h, dt, v, ZERO_DTYPE_FP32, P, ZERO_IMPL_SCALAR);
    }
    for (int r = 0; r < world; r++) {
        float *sh = v + (uint64_t)r * S;
        if (r == R) continue;
        zero_quant_blockwise(sh, S, B, map, idx, am);
        zero_dequant_blockwise(idx, am, map, B, 0, S, dec);
        if (dt != ZERO_DTYPE_FP32) {
            zero_convert(dec, ZERO_DTYPE_FP32, h, dt, S, ZERO_IMPL_SCALAR);
            zero_convert(h, dt, dec, ZERO_DTYPE_FP32, S, ZERO_IMPL_SCALAR);
        }
        memcpy(sh, dec, S * sizeof *sh);
    }
    memcpy(out, v, n * sizeof *out);
    free(v), free(dec), free(am), free(idx), free(h);
}

/* Every unit gathered once after init against the oracle, bit for bit; the values differ from
 * the exact ones somewhere (the codes were used) on more than one rank. */
static void test_gather(zero_comm *comm, const qopt *q, const char *what) {
    zero_engine *e = make(comm, q);
    if (!e) return;
    const zero_dtype fdt = q->prec; /* frozen dtype "auto": the precision */
    int quantized = 0;
    for (int l = 0; l < MLP_LAYERS; l++) {
        const int n = mlp_unit_numel(l), nw = mlp_dims[l + 1] * mlp_dims[l];
        float *exact = malloc((size_t)n * sizeof *exact), *want = malloc((size_t)n * sizeof *want);
        ZT_OK(zero_engine_read_unit(e, l, exact));
        if (q->frozen && l == 1) { /* two parts: the weight (frozen part), the bias (trainable part) */
            oracle_part(exact, (uint64_t)nw, W, fdt, block_of(q), want);
            oracle_part(exact + nw, (uint64_t)(n - nw), W, q->prec, block_of(q), want + nw);
        } else {
            oracle_part(exact, (uint64_t)n, W, q->prec, block_of(q), want);
        }
        const float *got = zero_engine_gather(e, l);
        int bad = 0, first = -1;
        for (int i = 0; got && i < n; i++) {
            uint32_t a, b;
            memcpy(&a, &got[i], 4);
            memcpy(&b, &want[i], 4);
            if (a != b && first < 0) first = i;
            bad += a != b;
            quantized += got[i] != exact[i];
        }
        ZT_CHECKF(got && bad == 0,
                  "%s: unit %d: %d of %d gathered values differ from the oracle (first [%d] %.9g, "
                  "oracle %.9g)",
                  what, l, bad, n, first, first >= 0 ? (double)got[first] : 0.0,
                  first >= 0 ? (double)want[first] : 0.0);
        if (got) ZT_OK(zero_engine_release(e, l));
        free(exact), free(want);
    }
    if (W > 1) ZT_CHECKF(quantized > 0, "%s: every gathered value is exact: nothing was quantized", what);
    zero_engine_free(e);
}

/* The all-gathers' bytes of a qwZ run: every unit's message gathered over the world in forward and
 * backward, each micro-batch (hpZ: after step 0, one world gather a step, the rest in the group
 * unquantized; step 0's in the group: set_unit wrote the secondary copies). */
static uint64_t ag_bytes(const qopt *q) {
    uint64_t world_ag = 0, group_ag = 0;
    for (int l = 0; l < MLP_LAYERS; l++) {
        const uint64_t P = zero_partition_padded((uint64_t)mlp_unit_numel(l), W, ZERO_PLAN_DEFAULT_ALIGN);
        world_ag += ring(2, (uint64_t)W * zero_quant_msg_bytes(P / (uint64_t)W, block_of(q)), W);
        if (q->hpz) group_ag += ring(2, P * zero_dtype_size(q->prec), q->hpz);
    }
    const uint64_t n_all = (uint64_t)STEPS * 2 * (uint64_t)q->accum;
    if (!q->hpz) return n_all * world_ag;
    const uint64_t n_world = STEPS - 1;
    return n_world * world_ag + (n_all - n_world) * group_ag;
}

static void test_train(zero_comm *comm, const qopt *q, const char *what) {
    run qr, pr;
    qopt p = *q;
    p.qwz = 0;
    if (do_run(comm, q, &qr)) return;
    if (do_run(comm, &p, &pr)) {
        run_free(&qr);
        return;
    }
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        const double d = fabs(qr.losses[s] - pr.losses[s]) / fmax(1e-3, fabs(pr.losses[s]));
        worst = d > worst ? d : worst;
    }
    int same = 1;
    for (int l = 0; l < MLP_LAYERS; l++)
        same &= memcmp(qr.params[l], pr.params[l], (size_t)mlp_unit_numel(l) * sizeof(float)) == 0;
    if (W == 1) {
        ZT_CHECKF(same && worst == 0, "%s: one rank: not plain stage 3's bits", what);
    } else {
        ZT_CHECKF(worst <= 1e-2, "%s: losses %.3g (relative) from plain stage 3's: expected <= 1e-2", what, worst);
        ZT_CHECKF(!same, "%s: the parameters are plain stage 3's bits: nothing was quantized", what);
    }
    if (R == 0 && W > 1) printf("%s: losses within %.2e of plain stage 3\n", what, worst);
    ZT_EQ_INT(qr.ct.bytes[ZERO_COLL_ALL_GATHER], W > 1 ? ag_bytes(q) : pr.ct.bytes[ZERO_COLL_ALL_GATHER]);
    ZT_EQ_INT(qr.ct.calls[ZERO_COLL_ALL_GATHER], pr.ct.calls[ZERO_COLL_ALL_GATHER]);
    ZT_EQ_INT(qr.ct.bytes[ZERO_COLL_REDUCE_SCATTER], pr.ct.bytes[ZERO_COLL_REDUCE_SCATTER]);
    for (int c = ZERO_MEM_PARAMS; c <= ZERO_MEM_OPTIM; c++) ZT_EQ_INT(qr.mem.current[c], pr.mem.current[c]);
    run_free(&qr);
    run_free(&pr);
}

/* qgZ (zero_quantized_gradients) on plain MPI (comm: the shared-memory collectives off, so that
 * every step is quantized): at stages 2 and 3 (with qwZ too at 3), fp32 and bf16, accumulation 2:
 * the losses within 1e-2 of the exact reduction's, the parameters not its bits, the reduce-scatters'
 * bytes each unit's N messages of zero_quant_msg_bytes(shard, 32) a micro-batch, the all-gathers'
 * those of the run without qgZ; on one rank the exact run's bits. */
static void test_qgz(zero_comm *comm) {
    for (int p = 0; p < 2; p++)
        for (int stage = 2; stage <= 3; stage++)
            for (int qwz = 0; qwz <= (stage == 3); qwz++) {
                const zero_dtype prec = p ? ZERO_DTYPE_BF16 : ZERO_DTYPE_FP32;
                const qopt q = {
                    .prec = prec, .stage = stage, .qwz = qwz, .qgz = 1, .accum = 2, .block = 32, .bucket = -1};
                qopt x = q;
                x.qgz = 0;
                run a, b;
                if (do_run(comm, &q, &a)) continue;
                if (do_run(comm, &x, &b) == 0) {
                    char what[96];
                    snprintf(what, sizeof what, "qgZ %s stage %d%s", zero_dtype_name(prec), stage, qwz ? " + qwZ" : "");
                    double worst = 0;
                    for (int s = 0; s < STEPS; s++)
                        worst = fmax(worst, fabs(a.losses[s] - b.losses[s]) / fmax(1e-3, fabs(b.losses[s])));
                    int same = 1;
                    for (int l = 0; l < MLP_LAYERS; l++)
                        same &= memcmp(a.params[l], b.params[l], (size_t)mlp_unit_numel(l) * sizeof(float)) == 0;
                    uint64_t rs = 0;
                    for (int l = 0; l < MLP_LAYERS; l++) {
                        const uint64_t P =
                            zero_partition_padded((uint64_t)mlp_unit_numel(l), W, ZERO_PLAN_DEFAULT_ALIGN);
                        rs += ring(2, (uint64_t)W * zero_quant_msg_bytes(P / (uint64_t)W, 32), W);
                    }
                    if (W == 1) {
                        ZT_CHECKF(same && worst == 0, "%s: one rank: not the exact run's bits", what);
                    } else {
                        ZT_CHECKF(worst <= 1e-2,
                                  "%s: losses %.3g (relative) from the exact reduction's: expected <= 1e-2", what,
                                  worst);
                        ZT_CHECKF(!same, "%s: the parameters are the exact reduction's bits: nothing was quantized",
                                  what);
                        ZT_EQ_INT(a.ct.bytes[ZERO_COLL_REDUCE_SCATTER], (uint64_t)STEPS * 2 * rs);
                        if (R == 0) printf("%s: losses within %.2e of the exact reduction\n", what, worst);
                    }
                    ZT_EQ_INT(a.ct.bytes[ZERO_COLL_ALL_GATHER], b.ct.bytes[ZERO_COLL_ALL_GATHER]);
                    ZT_EQ_INT(a.ct.calls[ZERO_COLL_REDUCE_SCATTER], b.ct.calls[ZERO_COLL_REDUCE_SCATTER]);
                    run_free(&b);
                }
                run_free(&a);
            }
}

/* The parameters on NVMe: the shard coded from the pool buffer; the same bits as in RAM. */
static void test_nvme(zero_comm *comm) {
    const qopt q = {.prec = ZERO_DTYPE_BF16, .qwz = 1, .accum = 2, .block = 32, .bucket = -1};
    qopt qn = q;
    qn.nvme = 1;
    run a, b;
    if (do_run(comm, &q, &a)) return;
    if (do_run(comm, &qn, &b) == 0) {
        int same = 1;
        for (int l = 0; l < MLP_LAYERS; l++)
            same &= memcmp(a.params[l], b.params[l], (size_t)mlp_unit_numel(l) * sizeof(float)) == 0;
        for (int s = 0; s < STEPS; s++) same &= a.losses[s] == b.losses[s];
        ZT_CHECKF(same, "qwZ with the parameters on NVMe: not the bits of the run in RAM");
        ZT_EQ_INT(b.ct.bytes[ZERO_COLL_ALL_GATHER], a.ct.bytes[ZERO_COLL_ALL_GATHER]);
        run_free(&b);
    }
    run_free(&a);
}

/* json loads, and resolving it for 2 ranks is a config error whose message holds both needles. */
static void refused(const char *json, const char *n1, const char *n2) {
    zero_config cfg;
    zero_config_default(&cfg);
    zero_error err = {{0}};
    ZT_OK(zero_config_load_json_string(&cfg, json, &err));
    ZT_EQ_INT(zero_config_resolve(&cfg, 2, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, n1) && strstr(err.msg, n2), "%s: error: %s", json, err.msg);
}

static void test_config(void) {
    refused("{\"zero_optimization\": {\"stage\": 1, \"zero_quantized_gradients\": true}}",
            "zero_optimization.zero_quantized_gradients", "stage is 1");
    refused("{\"zero_optimization\": {\"stage\": 3, \"zero_quantized_gradients\": true}, "
            "\"zero_extensions\": {\"deterministic\": true}}",
            "zero_optimization.zero_quantized_gradients", "deterministic");
    refused("{\"zero_optimization\": {\"stage\": 2, \"zero_quantized_weights\": true}}",
            "zero_optimization.zero_quantized_weights", "stage is 2");
    zero_config cfg;
    zero_config_default(&cfg);
    zero_error err = {{0}};
    ZT_OK(zero_config_load_json_string(&cfg,
                                       "{\"zero_optimization\": {\"stage\": 3, \"zero_quantized_weights\": true}, "
                                       "\"zero_extensions\": {\"quantized_weights_block\": 256}}",
                                       &err));
    ZT_OK(zero_config_resolve(&cfg, 2, &err));
    ZT_EQ_INT(cfg.quant_weights, 1);
    ZT_EQ_INT(cfg.quant_weights_block, 256);
    zero_config_default(&cfg);
    ZT_EQ_INT(zero_config_load_json_string(&cfg, "{\"zero_extensions\": {\"quantized_weights_block\": 0}}", &err),
              ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "quantized_weights_block"), "error: %s", err.msg);
}

int main(void) {
    zero_comm_options o;
    zero_comm_options_default(&o);
    o.async = 0;
    zero_comm *comm = NULL;
    zero_error err = {{0}};
    if (zero_comm_init_mpi_with(&comm, NULL, &o, &err) != ZERO_OK) {
        fprintf(stderr, "zero_comm_init_mpi_with: %s\n", err.msg);
        return 1;
    }
    W = zero_comm_size(comm);
    R = zero_comm_rank(comm);
    zt_rank = R;
    snprintf(g_dir, sizeof g_dir, "/tmp/zero_qwz_%d", (int)getpid());
    if (R == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "mkdir -p %s", g_dir);
        if (system(cmd)) return 1;
    }
    zero_comm_broadcast(comm, g_dir, sizeof g_dir, ZERO_DTYPE_UINT8, 0);
    zero_comm_barrier(comm);
    test_config();
    const zero_dtype precs[2] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16};
    const int64_t blocks[2] = {32, 0};
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < 2; b++)
            for (int f = 0; f < 2; f++) {
                const qopt q = {.prec = precs[p], .qwz = 1, .accum = 1, .block = blocks[b], .bucket = -1, .frozen = f};
                char what[128];
                snprintf(what, sizeof what, "gather %s block %lld%s", zero_dtype_name(precs[p]),
                         (long long)block_of(&q), f ? " frozen weight" : "");
                test_gather(comm, &q, what);
            }
    for (int p = 0; p < 2; p++)
        for (int accum = 1; accum <= 2; accum++)
            for (int deep = 0; deep < 2; deep++) {
                const qopt q = {.prec = precs[p], .qwz = 1, .accum = accum, .block = 32, .bucket = deep ? 100000 : -1};
                char what[128];
                snprintf(what, sizeof what, "train %s accum %d %s", zero_dtype_name(precs[p]), accum,
                         deep ? "deep prefetch" : "next-unit prefetch");
                test_train(comm, &q, what);
            }
    if (W % 2 == 0 && W > 2) {
        const qopt q = {.prec = ZERO_DTYPE_FP32, .qwz = 1, .accum = 2, .block = 32, .bucket = -1, .hpz = 2};
        test_train(comm, &q, "train fp32 with hpZ 2");
    }
    test_nvme(comm);
    zero_comm_options po;
    zero_comm_options_default(&po);
    po.async = 0;
    po.shm = 0; /* plain MPI: qgZ quantizes every step (through the window one node's sums stay exact) */
    zero_comm *plain = NULL;
    if (zero_comm_init_mpi_with(&plain, NULL, &po, &err) != ZERO_OK) {
        fprintf(stderr, "zero_comm_init_mpi_with: %s\n", err.msg);
        return 1;
    }
    test_qgz(plain);
    zero_comm_free(plain);
    zero_comm_barrier(comm);
    if (R == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
        if (system(cmd)) ZT_FAIL("removing %s", g_dir);
    }
    zero_comm_free(comm);
    return zt_finish("test_engine_qwz");
}
