/* The equivalence oracle: for stages 0-3 x fp32/bf16 x accumulation 1 and 3 x clipping on/off,
 * training the MLP of tests/mlp_model.h for 10 steps on this MPI world gives the parameters (and
 * the gradient norms) of a 1-rank stage-0 run over the same global batches, computed by every
 * rank itself on the `self` communicator. Runs under mpiexec with 1, 2, 3 and 4 ranks. */
#include "harness.h"
#include "mlp_model.h"

#define STEPS 10
#define BSZ 4

typedef struct run_result {
    float *params[MLP_LAYERS];
    double norms[STEPS], losses[STEPS];
    int clipped_steps;
} run_result;

static void result_free(run_result *r) {
    for (int l = 0; l < MLP_LAYERS; l++) free(r->params[l]);
}

static int run_opt(zero_comm *comm, int stage, zero_dtype prec, int accum, double clip, int world, int rank,
                   zero_optim_type opt, run_result *out) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.precision = prec;
    cfg.grad_accum = accum;
    cfg.micro_batch = BSZ;
    cfg.gradient_clipping = clip;
    zero_optim_hparams_default(&cfg.optim, opt);
    cfg.optim.lr = opt == ZERO_OPTIM_SGD ? 5e-2f : 1e-2f;
    cfg.optim.weight_decay = 0.1f;
    if (opt == ZERO_OPTIM_SGD) {
        cfg.optim.momentum = 0.9f;
        cfg.optim.nesterov = 1;
    }
    zero_engine *e = NULL;
    int rc = -1;
    memset(out, 0, sizeof *out);
    if (zero_engine_create(&e, comm, &cfg) != ZERO_OK) goto done;
    if (mlp_register(e) || mlp_init(e, 7)) goto done;
    for (int s = 0; s < STEPS; s++) {
        zero_step_stats st;
        if (mlp_train_step(e, s, world, rank, accum, BSZ, &out->losses[s], &st, 1.0f)) goto done;
        out->norms[s] = st.grad_norm;
        if (clip > 0 && st.grad_norm > clip) out->clipped_steps++;
    }
    for (int l = 0; l < MLP_LAYERS; l++) {
        out->params[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        if (zero_engine_read_unit(e, l, out->params[l])) goto done;
    }
    rc = 0;
done:
    if (rc) ZT_FAIL("stage %d %s accum %d clip %g: %s", stage, zero_dtype_name(prec), accum, clip,
                    e ? zero_engine_last_error(e) : "create failed");
    zero_engine_free(e);
    return rc;
}

static int run(zero_comm *comm, int stage, zero_dtype prec, int accum, double clip, int world, int rank,
               run_result *out) {
    return run_opt(comm, stage, prec, accum, clip, world, rank, ZERO_OPTIM_ADAMW, out);
}

/* SGD (scale-sensitive: a wrong averaging factor shows directly), Adam (L2 decay) and Lion, fp32. */
static void other_optimizers(zero_comm *world_comm, zero_comm *self, int world, int rank) {
    const zero_optim_type opts[3] = {ZERO_OPTIM_SGD, ZERO_OPTIM_ADAM, ZERO_OPTIM_LION};
    for (int o = 0; o < 3; o++) {
        run_result ref;
        if (run_opt(self, 0, ZERO_DTYPE_FP32, world, 0, 1, 0, opts[o], &ref)) continue;
        for (int stage = 0; stage <= 3; stage++) {
            run_result got;
            if (run_opt(world_comm, stage, ZERO_DTYPE_FP32, 1, 0, world, rank, opts[o], &got)) continue;
            for (int l = 0; l < MLP_LAYERS; l++)
                for (int i = 0; i < mlp_unit_numel(l); i++) ZT_NEAR(got.params[l][i], ref.params[l][i], 1e-5);
            for (int s = 0; s < STEPS; s++) ZT_NEAR(got.norms[s], ref.norms[s], 1e-5);
            result_free(&got);
        }
        result_free(&ref);
    }
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
    const zero_dtype precs[2] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16};
    const int accums[2] = {1, 3};
    const double clips[2] = {0.0, 0.05};
    double worst[2] = {0, 0};
    for (int pi = 0; pi < 2; pi++)
        for (int ai = 0; ai < 2; ai++)
            for (int ci = 0; ci < 2; ci++) {
                run_result ref;
                /* the reference: one rank, stage 0, the same global batch as world*accum micro-batches */
                if (run(self, 0, precs[pi], accums[ai] * world, clips[ci], 1, 0, &ref)) continue;
                if (clips[ci] > 0) ZT_CHECKF(ref.clipped_steps > 0, "clipping never engaged: the test would not test it");
                for (int stage = 0; stage <= 3; stage++) {
                    run_result got;
                    if (run(world_comm, stage, precs[pi], accums[ai], clips[ci], world, rank, &got)) continue;
                    /* fp32: the bound, relative 1e-5. bf16: working weights and gradients are
                     * rounded to 8 significant bits, and the two runs sum the same gradients in different
                     * orders and roundings (one rank accumulating world*accum micro-batches in bf16 vs a
                     * bf16 reduce-scatter/all-reduce), so gradients may differ by a few bf16 ulps (2^-8
                     * relative). AdamW turns a gradient into a step of at most ~lr per element, so after
                     * 10 steps at lr 1e-2 two runs can drift apart by a fraction of 10*lr only where
                     * gradients are near zero; we allow 2e-2 absolute (20% of the largest possible total
                     * movement), and the loss and norms must agree to 2%. A wrong shard, a missing rank,
                     * a wrong averaging factor or a skipped unit moves parameters by O(lr) on most
                     * elements and norms by >= 1/world. */
                    const int bf = precs[pi] == ZERO_DTYPE_BF16;
                    const double ptol = bf ? 2e-2 : 1e-5, ntol = bf ? 2e-2 : 1e-5;
                    for (int l = 0; l < MLP_LAYERS; l++)
                        for (int i = 0; i < mlp_unit_numel(l); i++) {
                            double a = got.params[l][i], b = ref.params[l][i];
                            double d = fabs(a - b) / (fabs(b) > 1 ? fabs(b) : 1);
                            if (d > worst[pi]) worst[pi] = d;
                            if (d > ptol) {
                                ZT_FAIL("stage %d %s accum %d clip %g world %d: layer%d[%d] = %.9g, reference %.9g",
                                        stage, zero_dtype_name(precs[pi]), accums[ai], clips[ci], world, l, i, a, b);
                                l = MLP_LAYERS;
                                break;
                            }
                            zt_checks++;
                        }
                    for (int s = 0; s < STEPS; s++) {
                        ZT_NEAR(got.norms[s], ref.norms[s], ntol);
                        /* the mean of the ranks' losses is the reference's global-batch loss */
                        float mine = (float)got.losses[s], mean = 0;
                        ZT_OK(zero_comm_all_reduce(world_comm, &mine, &mean, 1, ZERO_DTYPE_FP32, ZERO_OP_AVG));
                        ZT_NEAR(mean, ref.losses[s], bf ? 2e-2 : 1e-5);
                    }
                    result_free(&got);
                }
                result_free(&ref);
            }
    other_optimizers(world_comm, self, world, rank);
    printf("worst relative parameter difference: fp32 %.3g, bf16 %.3g (world %d)\n", worst[0], worst[1], world);
    zero_comm_free(self);
    zero_comm_free(world_comm);
    return zt_finish("test_engine_equiv");
}
