/* Five AdamW steps on every Hugging Face fixture, through the engine on this MPI world, give
 * PyTorch's losses (scripts/make_decoder_fixtures.py: full-batch AdamW on 12 sequences with
 * masked targets) within 1e-4 relative, and step 0's gradient norm PyTorch's: at stages 0 and 3,
 * with the global batch split over the ranks (and over 2 micro-batches each where 12 divides),
 * the loss denominator being the global batch's count of counted targets. At 4 ranks the last
 * rank's sequences count no target at all. Loading at stage 3 (each rank reads only its ranges
 * with zero_engine_set_unit_range) gives the masters a 1-rank load gives. Runs on 1-4 ranks. */
#include <stdint.h>

#include "decoder_fixture.h"

/* Every unit's master gathered on this world equals the fixture loaded by one rank alone. */
static void check_load(zero_comm *world, zero_comm *self, const char *name, const zt_golden *g, int stage) {
    dec_config c;
    zero_engine *e = zt_fixture_engine(world, name, g, stage, ZT_FB / zero_comm_size(world), 1, &c);
    zero_engine *ref = zt_fixture_engine(self, name, g, 0, ZT_FB, 1, NULL);
    for (int u = 0; e && ref && u < dec_num_units(&c); u++) {
        const size_t n = dec_unit_numel(&c, u);
        float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
        ZT_OK(zero_engine_read_unit(e, u, a));
        ZT_OK(zero_engine_read_unit(ref, u, b));
        ZT_CHECKF(!memcmp(a, b, n * sizeof(float)), "%s stage %d: unit %d loaded differently from one rank's load", name,
                  stage, u);
        free(a), free(b);
    }
    zero_engine_free(e);
    zero_engine_free(ref);
}

static void train(zero_comm *world, const char *name, const zt_golden *g, int stage, int K, double *worst) {
    const int W = zero_comm_size(world), rank = zero_comm_rank(world);
    if (ZT_FB % (W * K)) {
        if (rank == 0) printf("SKIP %s stage %d accumulation %d: 12 sequences do not split over %d x %d\n", name, stage,
                              K, W, K);
        return;
    }
    const int B = ZT_FB / (W * K);
    dec_config c;
    zero_engine *e = zt_fixture_engine(world, name, g, stage, B, K, &c);
    dec_model *m = NULL;
    zero_error err = {{0}};
    if (!e || dec_create(&m, &c, B, ZT_FT, 0, &err)) {
        ZT_FAIL("%s: %s", name, err.msg);
        zero_engine_free(e);
        return;
    }
    /* the denominator: counted targets of the whole global batch (all ranks, all micro-batches) */
    const double denom = (double)dec_count_targets(g->targets, (size_t)ZT_FB * ZT_FT);
    double worst_here = 0;
    for (int s = 0; s <= 5; s++) {
        double mine = 0;
        for (int k = 0; k < K; k++) {
            const size_t first = (size_t)(rank * K + k) * B * ZT_FT;
            float l = 0;
            if (dec_engine_micro_batch(m, e, g->tokens + first, g->targets + first, B, ZT_FT, denom, &l)) {
                ZT_FAIL("%s stage %d step %d: %s", name, stage, s, dec_last_error(m));
                goto out;
            }
            mine += l / K;
        }
        float mine_f = (float)mine, sum = 0;
        ZT_OK(zero_comm_all_reduce(world, &mine_f, &sum, 1, ZERO_DTYPE_FP32, ZERO_OP_SUM));
        const double loss = (double)sum / W;
        const double rel = fabs(loss - g->adamw[s]) / g->adamw[s];
        ZT_CHECKF(rel <= 1e-4, "%s stage %d on %d ranks x %d: step %d loss %.9g vs PyTorch %.9g (rel %.3g)", name, stage,
                  W, K, s, loss, g->adamw[s], rel);
        worst_here = fmax(worst_here, rel);
        if (s == 5) break; /* the loss after the fifth update */
        zero_step_stats st;
        if (zero_engine_step(e, &st)) {
            ZT_FAIL("%s stage %d step %d: %s", name, stage, s, zero_engine_last_error(e));
            goto out;
        }
        if (s == 0) {
            const double rn = fabs(st.grad_norm - g->grad_norm) / g->grad_norm;
            ZT_CHECKF(rn <= 1e-4, "%s stage %d: gradient norm %.9g vs PyTorch %.9g (rel %.3g)", name, stage, st.grad_norm,
                      g->grad_norm, rn);
        }
    }
    if (rank == 0)
        printf("%-18s stage %d, %d rank%s x %d micro-batch%s of %d: 6 losses within %.1e of PyTorch's (%.5f -> %.5f)\n",
               name, stage, W, W > 1 ? "s" : "", K, K > 1 ? "es" : "", B, worst_here, g->adamw[0], g->adamw[5]);
    *worst = fmax(*worst, worst_here);
out:
    dec_free(m);
    zero_engine_free(e);
}

int main(void) {
    zero_comm *world = NULL, *self = NULL;
    if (zero_comm_init_mpi(&world, NULL) != ZERO_OK || zero_comm_init_self(&self) != ZERO_OK) {
        fprintf(stderr, "cannot create communicators\n");
        return 1;
    }
    zt_rank = zero_comm_rank(world);
    double worst = 0;
    for (int i = 0; i < ZT_NFIXTURES; i++) {
        zt_golden g;
        if (zt_golden_load(zt_fixtures[i], &g)) continue;
        check_load(world, self, zt_fixtures[i], &g, 3);
        for (int stage = 0; stage <= 3; stage += 3)
            for (int K = 1; K <= 2; K++) train(world, zt_fixtures[i], &g, stage, K, &worst);
        zt_golden_free(&g);
    }
    if (zt_rank == 0) printf("worst relative difference from PyTorch's AdamW losses: %.2e\n", worst);
    zero_comm_free(self);
    zero_comm_free(world);
    return zt_finish("test_decoder_train");
}
