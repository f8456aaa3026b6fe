/* Mutation check of the ownership table (src/engine/owner.c): a deliberately wrong owned view,
 * planted through the engine's test hook, must make the checks of test_engine_equiv and
 * test_engine_mem fail. For each mutation the same check is run with the hook off (it must
 * pass) and on (it must fail): a decay flag lost from the owned slices and one element cut from
 * an owned slice break the equivalence with the 1-rank stage-0 reference at every stage; the
 * gradients kept whole at stage 2 break the memory figure of the table (2 ranks and more: on
 * one rank whole and shard are the same bytes). */
#include "engine/internal.h"
#include "harness.h"
#include "mlp_model.h"

#define STEPS 6
#define BSZ 4

/* Trains the MLP and returns its parameters (malloc'd per layer) and the grads bytes. */
static int train(zero_comm *comm, int stage, int accum, int world, int rank, float **params, size_t *grads_bytes) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.grad_accum = accum;
    cfg.micro_batch = BSZ;
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    cfg.optim.lr = 1e-2f;
    cfg.optim.weight_decay = 0.1f;
    zero_engine *e = NULL;
    int rc = -1;
    if (zero_engine_create(&e, comm, &cfg) != ZERO_OK || mlp_register(e) || mlp_init(e, 7)) goto done;
    zero_mem_stats m;
    zero_engine_mem_stats(e, &m);
    *grads_bytes = m.current[ZERO_MEM_GRADS];
    for (int s = 0; s < STEPS; s++)
        if (mlp_train_step(e, s, world, rank, accum, BSZ, NULL, NULL, 1.0f)) goto done;
    for (int l = 0; l < MLP_LAYERS; l++) {
        params[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        if (zero_engine_read_unit(e, l, params[l])) goto done;
    }
    rc = 0;
done:
    if (rc) ZT_FAIL("stage %d: %s", stage, e ? zero_engine_last_error(e) : "create failed");
    zero_engine_free(e);
    return rc;
}

/* The largest relative difference from the reference (test_engine_equiv's measure). */
static double worst(float **got, float **ref) {
    double w = 0;
    for (int l = 0; l < MLP_LAYERS; l++)
        for (int i = 0; i < mlp_unit_numel(l); i++) {
            double a = got[l][i], b = ref[l][i], d = fabs(a - b) / (fabs(b) > 1 ? fabs(b) : 1);
            if (d > w || d != d) w = d != d ? INFINITY : d;
        }
    return w;
}

static void free_params(float **p) {
    for (int l = 0; l < MLP_LAYERS; l++) free(p[l]);
}

int main(void) {
    zero_comm *comm = NULL, *self = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK || zero_comm_init_self(&self) != ZERO_OK) return 1;
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zt_rank = rank;
    const double tol = 1e-5; /* test_engine_equiv's fp32 bound */
    float *ref[MLP_LAYERS] = {0};
    size_t gb = 0;
    if (train(self, 0, world, 1, 0, ref, &gb)) return zt_finish("test_engine_views");

    /* equivalence: the unmutated engine passes, each mutation fails, at every stage */
    const int muts[2] = {ZERO__MUTATE_DECAY_FLAG, ZERO__MUTATE_SLICE_RANGE};
    const char *names[2] = {"decay flag dropped from the owned slices", "an owned slice one element short"};
    for (int stage = 0; stage <= 3; stage++) {
        /* the hook plants its wrong views where the update is sharded: stage 0 is the reference */
        float *got[MLP_LAYERS] = {0};
        zero__view_mutation = ZERO__MUTATE_NONE;
        if (train(comm, stage, 1, world, rank, got, &gb) == 0) {
            double w = worst(got, ref);
            ZT_CHECKF(w <= tol, "stage %d unmutated: %g from the reference", stage, w);
        }
        free_params(got);
        for (int k = 0; k < 2 && stage > 0; k++) {
            float *bad[MLP_LAYERS] = {0};
            zero__view_mutation = muts[k];
            if (train(comm, stage, 1, world, rank, bad, &gb) == 0) {
                double w = worst(bad, ref);
                ZT_CHECKF(w > tol, "stage %d, mutation '%s': the equivalence check did not catch it (%g)", stage, names[k], w);
                if (rank == 0 && stage == 3)
                    printf("mutation '%s': largest difference %.3g > %.0e: test_engine_equiv fails\n", names[k], w, tol);
            }
            free_params(bad);
        }
    }

    /* memory: stage 2 keeps the gradient shard (S*w bytes); the mutation keeps it whole */
    for (int mut = 0; mut <= 1; mut++) {
        float *got[MLP_LAYERS] = {0};
        zero__view_mutation = mut ? ZERO__MUTATE_GRADS_WHOLE : ZERO__MUTATE_NONE;
        size_t grads = 0;
        if (train(comm, 2, 1, world, rank, got, &grads) == 0) {
            uint64_t S = 0;
            for (int l = 0; l < MLP_LAYERS; l++) S += zero_partition_padded((uint64_t)mlp_unit_numel(l), world, 16) / (uint64_t)world;
            const int caught = grads != S * 4;
            if (!mut) ZT_CHECKF(!caught, "stage 2 unmutated: grads %zu bytes, the table says %llu", grads, (unsigned long long)(S * 4));
            else if (world > 1) ZT_CHECKF(caught, "stage 2 with whole gradients: test_engine_mem's figure did not change");
            if (mut && rank == 0 && world > 1)
                printf("mutation 'stage 2 keeps whole gradients': grads %zu bytes, the table says %llu: test_engine_mem fails\n",
                       grads, (unsigned long long)(S * 4));
        }
        free_params(got);
    }
    zero__view_mutation = ZERO__MUTATE_NONE;

    /* frozen parameters are a row of the table (tests/mpi/test_engine_frozen.c); other flags are refused */
    zero_config cfg;
    zero_config_default(&cfg);
    zero_engine *e = NULL;
    if (zero_engine_create(&e, comm, &cfg) == ZERO_OK) {
        int64_t shape[1] = {4};
        int u = zero_engine_add_unit(e, "u");
        ZT_OK(zero_engine_add_param(e, u, "frozen", shape, 1, ZERO_PARAM_FROZEN | ZERO_PARAM_NO_DECAY));
        ZT_EQ_INT(zero_engine_add_param(e, u, "odd", shape, 1, 1u << 7), ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(strstr(zero_engine_last_error(e), "flags 0x80") != NULL, "%s", zero_engine_last_error(e));
    }
    zero_engine_free(e);
    free_params(ref);
    zero_comm_free(self);
    zero_comm_free(comm);
    return zt_finish("test_engine_views");
}
