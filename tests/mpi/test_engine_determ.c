/* Deterministic mode (zero_extensions.deterministic) in the engine: the MLP of tests/mlp_model.h
 * trained with one sample per micro-batch (the atom) gives bitwise the parameters, gradient norms
 * and loss scales of a 1-rank stage-0 run over the same global batches (every rank computes it on
 * `self`), at every stage, in fp32, bf16 and fp16, with clipping, and redoes the same steps (the
 * first, and one whose gradients grow 64-fold); on one rank it agrees with the
 * default mode to fp32 rounding. The transient memory stays within zero_plan_estimate's bound
 * with the accumulators counted, and holds at least the accumulators it counts. Runs under
 * mpiexec with 1, 2, 3 and 4 ranks. */
#include "harness.h"
#include "mlp_model.h"

#define STEPS 12
#define ATOMS 12 /* samples per step, all ranks: divisible by 1, 2, 3 and 4 */
#define GROW  7  /* the step whose gradients grow 64-fold */

typedef struct run_result {
    float *params[MLP_LAYERS];
    double norms[STEPS], scales[STEPS];
    int skipped, redos;
} run_result;

static void result_free(run_result *r) {
    for (int l = 0; l < MLP_LAYERS; l++) free(r->params[l]);
}

/* The engine's peak memory against the planner's figures for the same configuration: the
 * gradients (with deterministic mode's grid bytes) exactly; the transient at most the estimate's;
 * in deterministic mode at least what is alive together at the step (the seen bytes and masses,
 * and in half precision the int32 sums: 4 bytes a padded element where gradients are kept whole, a shard
 * element where they are sharded). */
static void check_transient(zero_engine *e, const zero_config *cfg, int world, int stage, zero_dtype prec) {
    /* the host's figures: with ZERO_DEVICE set the states and buffers live on the device, whose own
     * figures test_engine_device checks */
    if (strcmp(zero_engine_device(e), "cpu")) return;
    uint64_t numel[MLP_LAYERS], blocks = 0;
    zero_plan_model pm = {MLP_LAYERS, numel, NULL, NULL, NULL};
    zero_plan_setup s;
    zero_plan_setup_from_config(&s, cfg, world);
    for (int l = 0; l < MLP_LAYERS; l++) {
        numel[l] = (uint64_t)mlp_unit_numel(l);
        blocks += (zero_partition_padded(numel[l], world, s.align) + 31) / 32;
    }
    zero_plan_mem est;
    ZT_OK(zero_plan_estimate(&pm, &s, &est, NULL));
    zero_mem_stats m;
    zero_engine_mem_stats(e, &m);
    const uint64_t peak = m.peak[ZERO_MEM_BUFFERS];
    const int whole = stage <= 1 || world == 1, half = prec != ZERO_DTYPE_FP32;
    ZT_CHECKF(peak <= est.transient, "det %d stage %d %s on %d ranks: transient peak %llu > the estimate's %llu",
              cfg->deterministic, stage, zero_dtype_name(prec), world, (unsigned long long)peak,
              (unsigned long long)est.transient);
    ZT_CHECKF(m.peak[ZERO_MEM_GRADS] == est.bytes[ZERO_MEM_GRADS], "det %d stage %d %s on %d ranks: grads %llu, estimate %llu",
              cfg->deterministic, stage, zero_dtype_name(prec), world, (unsigned long long)m.peak[ZERO_MEM_GRADS],
              (unsigned long long)est.bytes[ZERO_MEM_GRADS]);
    if (!cfg->deterministic) {
        ZT_EQ_INT(est.accumulator, 0);
        return;
    }
    const uint64_t U1 = est.largest_unit, chunk = U1 < (1u << 18) ? U1 : 1u << 18;
    const uint64_t sums = half ? 4 * (whole ? est.padded : est.shard) : 0;
    ZT_EQ_INT(est.accumulator, 9 * blocks + (half ? sums + 4 * chunk : whole ? 4 * (U1 + est.second_unit) : 0) +
                                   4104 * (uint64_t)(world + 1));
    const uint64_t alive = 9 * blocks + sums; /* the seen bytes and masses, the int32 sums */
    ZT_CHECKF(peak >= alive, "stage %d %s on %d ranks: transient peak %llu < the %llu bytes of the sums", stage,
              zero_dtype_name(prec), world, (unsigned long long)peak, (unsigned long long)alive);
}

static int run(zero_comm *comm, int det, int stage, zero_dtype prec, int world, int rank, run_result *out) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.precision = prec;
    cfg.deterministic = det;
    cfg.micro_batch = 1;
    cfg.grad_accum = ATOMS / world;
    cfg.gradient_clipping = 0.05;
    if (prec == ZERO_DTYPE_FP16) cfg.initial_scale_power = 30; /* overflows first: skipped steps too */
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    cfg.optim.lr = 1e-2f;
    cfg.optim.weight_decay = 0.1f;
    zero_engine *e = NULL;
    int rc = -1;
    memset(out, 0, sizeof *out);
    if (zero_engine_create(&e, comm, &cfg) != ZERO_OK) goto done;
    if (mlp_register(e) || mlp_init(e, 7)) goto done;
    mlp_redos = 0;
    for (int s = 0; s < STEPS; s++) {
        zero_step_stats st;
        /* step GROW's gradients 64 times the others: they outgrow their grids (a redo) */
        if (mlp_train_step(e, s, world, rank, ATOMS / world, 1, NULL, &st, s == GROW ? 64.0f : 1.0f)) goto done;
        out->norms[s] = st.grad_norm;
        out->scales[s] = st.loss_scale;
        out->skipped += st.skipped;
    }
    out->redos = mlp_redos;
    check_transient(e, &cfg, world, stage, prec);
    for (int l = 0; l < MLP_LAYERS; l++) {
        out->params[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        if (zero_engine_read_unit(e, l, out->params[l])) goto done;
    }
    rc = 0;
done:
    if (rc)
        ZT_FAIL("det %d stage %d %s: %s", det, stage, zero_dtype_name(prec),
                e ? zero_engine_last_error(e) : "create failed");
    zero_engine_free(e);
    return rc;
}

/* Number of elements whose bits differ. */
static int differing(const run_result *a, const run_result *b) {
    int n = 0;
    for (int l = 0; l < MLP_LAYERS; l++)
        for (int i = 0; i < mlp_unit_numel(l); i++) n += memcmp(&a->params[l][i], &b->params[l][i], 4) != 0;
    return n;
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    zero_comm *world_comm = NULL, *self = NULL;
    if (zero_comm_init_mpi(&world_comm, NULL) != ZERO_OK || zero_comm_init_self(&self) != ZERO_OK) {
        fprintf(stderr, "cannot create communicators\n");
        return 1;
    }
    const int world = zero_comm_size(world_comm), rank = zero_comm_rank(world_comm);
    zt_rank = rank;
    const zero_dtype precs[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int pi = 0; pi < 3; pi++) {
        run_result ref;
        if (run(self, 1, 0, precs[pi], 1, 0, &ref)) continue;
        if (precs[pi] == ZERO_DTYPE_FP16) ZT_CHECKF(ref.skipped > 0, "fp16: no step skipped: the scaler is not tested");
        else /* the first step (no grids yet) and step GROW */
            ZT_CHECKF(ref.redos == 2, "%s: %d steps redone, expected 2", zero_dtype_name(precs[pi]), ref.redos);
        for (int stage = 0; stage <= 3; stage++) {
            run_result got;
            if (run(world_comm, 1, stage, precs[pi], world, rank, &got)) continue;
            const int d = differing(&got, &ref);
            ZT_CHECKF(got.redos == ref.redos, "stage %d %s on %d ranks: %d steps redone, 1 rank %d", stage,
                      zero_dtype_name(precs[pi]), world, got.redos, ref.redos);
            ZT_CHECKF(d == 0, "deterministic stage %d %s on %d ranks: %d parameters differ from 1 rank's bits", stage,
                      zero_dtype_name(precs[pi]), world, d);
            for (int s = 0; s < STEPS; s++) {
                ZT_CHECKF(got.norms[s] == ref.norms[s], "stage %d %s step %d: norm %.17g, 1 rank %.17g", stage,
                          zero_dtype_name(precs[pi]), s, got.norms[s], ref.norms[s]);
                ZT_CHECKF(got.scales[s] == ref.scales[s], "stage %d %s step %d: loss scale %g, 1 rank %g", stage,
                          zero_dtype_name(precs[pi]), s, got.scales[s], ref.scales[s]);
            }
            if (precs[pi] == ZERO_DTYPE_FP32) { /* what the default mode gives here, for the record */
                run_result def;
                if (run(world_comm, 0, stage, precs[pi], world, rank, &def) == 0) {
                    if (rank == 0)
                        printf(
                            "default mode, stage %d fp32, %d ranks: %d of the parameters differ from 1 rank's bits\n",
                            stage, world, differing(&def, &ref));
                    result_free(&def);
                }
            }
            result_free(&got);
        }
        result_free(&ref);
    }
    /* the same model as the default mode: on one rank, within fp32 rounding */
    run_result det, def;
    if (run(self, 1, 0, ZERO_DTYPE_FP32, 1, 0, &det) == 0 && run(self, 0, 0, ZERO_DTYPE_FP32, 1, 0, &def) == 0) {
        for (int l = 0; l < MLP_LAYERS; l++)
            for (int i = 0; i < mlp_unit_numel(l); i++) ZT_NEAR(det.params[l][i], def.params[l][i], 1e-5);
        for (int s = 0; s < STEPS; s++) ZT_NEAR(det.norms[s], def.norms[s], 1e-5);
        result_free(&det);
        result_free(&def);
    }
    zero_comm_free(self);
    zero_comm_free(world_comm);
    return zt_finish("test_engine_determ");
}
