/* Faults and misuse: ranks that diverge (another unit, step against gather) get
 * ZERO_ERR_DIVERGED naming the units and ranks on every rank instead of hanging; an fp16 overflow
 * on one rank skips the step on all ranks and moves the loss scale by DeepSpeed's rule; calls out
 * of order are errors with a message. */
#include "harness.h"
#include "mlp_model.h"

static zero_engine *make(zero_comm *comm, int stage, zero_dtype prec, int accum, zero_config *cfg_out) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.precision = prec;
    cfg.grad_accum = accum;
    cfg.micro_batch = 2;
    if (cfg_out) {
        cfg.initial_scale_power = cfg_out->initial_scale_power;
        cfg.hysteresis = cfg_out->hysteresis;
        cfg.loss_scale_window = cfg_out->loss_scale_window;
        cfg.min_loss_scale = cfg_out->min_loss_scale;
        cfg.loss_scale = 0;
    }
    zero_engine *e = NULL;
    if (zero_engine_create(&e, comm, &cfg) || mlp_register(e) || mlp_init(e, 5)) {
        ZT_FAIL("setup: %s", e ? zero_engine_last_error(e) : "create");
        zero_engine_free(e);
        return NULL;
    }
    return e;
}

static void test_divergence(zero_comm *comm) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    if (world < 2) return; /* one rank cannot diverge from itself */
    zero_engine *e = make(comm, 3, ZERO_DTYPE_FP32, 1, NULL);
    if (!e) return;
    /* rank 0 gathers layer1 while the others gather layer0 */
    const float *p = zero_engine_gather(e, rank == 0 ? 1 : 0);
    ZT_CHECK(p == NULL);
    const char *msg = zero_engine_last_error(e);
    ZT_CHECKF(strstr(msg, "layer0") && strstr(msg, "layer1") && strstr(msg, "rank"), "message: %s", msg);
    ZT_CHECKF(strstr(msg, " 0 called gather of unit 'layer1'") != NULL, "message: %s", msg);
    /* the engine refuses further work */
    ZT_CHECK(zero_engine_gather(e, 0) == NULL);
    zero_engine_free(e);

    /* the last rank calls step while the others gather */
    e = make(comm, 3, ZERO_DTYPE_FP32, 1, NULL);
    if (!e) return;
    zero_status s;
    if (rank == world - 1) {
        s = zero_engine_step(e, NULL);
    } else {
        s = zero_engine_gather(e, 0) ? ZERO_OK : ZERO_ERR_DIVERGED;
    }
    ZT_EQ_INT(s, ZERO_ERR_DIVERGED);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "called step") != NULL, "message: %s", zero_engine_last_error(e));
    zero_engine_free(e);

    /* stage 2: rank 0 reduces layer2 while the others reduce layer1 (no hang in the reduce-scatter) */
    e = make(comm, 2, ZERO_DTYPE_FP32, 1, NULL);
    if (!e) return;
    int unit = rank == 0 ? 2 : 1;
    ZT_CHECK(zero_engine_grad(e, unit) != NULL);
    ZT_EQ_INT(zero_engine_grad_ready(e, unit), ZERO_ERR_DIVERGED);
    zero_engine_free(e);
}

static void read_all(zero_engine *e, float **buf) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        buf[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        ZT_OK(zero_engine_read_unit(e, l, buf[l]));
    }
}

static void test_fp16_overflow(zero_comm *comm, int stage, int hysteresis) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zero_config c;
    memset(&c, 0, sizeof c);
    c.initial_scale_power = 8;
    c.hysteresis = hysteresis;
    c.loss_scale_window = 3;
    c.min_loss_scale = 1;
    zero_engine *e = make(comm, stage, ZERO_DTYPE_FP16, 1, &c);
    if (!e) return;
    /* DeepSpeed's rule, derived by hand: scale 256; window 3; overflow at steps 1 and 2.
     * hysteresis 1: step1 overflow -> 128, step2 overflow -> 64, then 3 good steps -> 128.
     * hysteresis 2: step1 overflow -> keep 256 (delayed shift 2 -> 1), step2 -> 128, then 3 good -> 256. */
    const double want_h1[7] = {256, 256, 128, 64, 64, 64, 128};
    const double want_h2[7] = {256, 256, 256, 128, 128, 128, 256};
    const double *want = hysteresis == 1 ? want_h1 : want_h2;
    for (int s = 0; s < 6; s++) {
        ZT_NEAR(zero_engine_loss_scale(e), want[s], 0);
        float *before[MLP_LAYERS];
        read_all(e, before);
        int overflow = s == 1 || s == 2;
        /* only the last rank's gradient overflows */
        float inject = overflow && rank == world - 1 ? INFINITY : 1.0f;
        zero_step_stats st;
        if (mlp_train_step(e, s, world, rank, 1, 2, NULL, &st, inject)) {
            ZT_FAIL("stage %d step %d: %s", stage, s, zero_engine_last_error(e));
            break;
        }
        ZT_EQ_INT(st.skipped, overflow);
        float *after[MLP_LAYERS];
        read_all(e, after);
        int same = 1;
        for (int l = 0; l < MLP_LAYERS; l++) {
            same &= !memcmp(before[l], after[l], (size_t)mlp_unit_numel(l) * sizeof(float));
            free(before[l]);
            free(after[l]);
        }
        ZT_CHECKF(same == overflow, "stage %d step %d: parameters %s", stage, s, same ? "unchanged" : "changed");
    }
    ZT_NEAR(zero_engine_loss_scale(e), want[6], 0);
    zero_engine_free(e);
}

static void test_misuse(zero_comm *comm) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.grad_accum = 2;
    zero_engine *e = NULL;
    ZT_OK(zero_engine_create(&e, comm, &cfg));
    ZT_CHECK(zero_engine_gather(e, 0) == NULL); /* before finalize */
    ZT_CHECK(strstr(zero_engine_last_error(e), "finalize") != NULL);
    ZT_EQ_INT(zero_engine_finalize(e), ZERO_ERR_STATE); /* no units */
    ZT_CHECK(zero_engine_add_unit(e, "") < 0);
    int u = zero_engine_add_unit(e, "a");
    ZT_CHECK(zero_engine_add_unit(e, "a") < 0);
    int64_t shape[2] = {3, 0};
    ZT_EQ_INT(zero_engine_add_param(e, u, "w", shape, 2, 0), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_engine_last_error(e), "dimension 1 is 0") != NULL);
    shape[1] = 5;
    ZT_OK(zero_engine_add_param(e, u, "w", shape, 2, 0));
    ZT_EQ_INT(zero_engine_add_param(e, u, "w", shape, 2, 0), ZERO_ERR_INVALID_ARG);
    ZT_OK(zero_engine_finalize(e));
    ZT_EQ_INT(zero_engine_release(e, 0), ZERO_ERR_STATE);
    ZT_CHECK(zero_engine_gather(e, 7) == NULL);
    /* one micro-batch where gradient_accumulation_steps is 2 */
    ZT_CHECK(zero_engine_grad(e, 0) != NULL);
    ZT_OK(zero_engine_grad_ready(e, 0));
    ZT_EQ_INT(zero_engine_step(e, NULL), ZERO_ERR_STATE);
    ZT_CHECK(strstr(zero_engine_last_error(e), "gradient_accumulation_steps is 2") != NULL);
    (void)world;
    (void)rank;
    zero_engine_free(e);

    /* micro-batch boundaries are explicit: a unit's gradient twice in one micro-batch is an
     * error naming the call to make, not a silently inferred new micro-batch */
    ZT_OK(zero_engine_create(&e, comm, &cfg));
    u = zero_engine_add_unit(e, "a");
    ZT_OK(zero_engine_add_param(e, u, "w", shape, 2, 0));
    ZT_OK(zero_engine_finalize(e));
    ZT_CHECK(zero_engine_grad(e, 0) != NULL);
    ZT_OK(zero_engine_grad_ready(e, 0));
    ZT_CHECK(zero_engine_grad(e, 0) == NULL);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "zero_engine_micro_batch_done") != NULL, "%s", zero_engine_last_error(e));
    ZT_EQ_INT(zero_engine_grad_ready(e, 0), ZERO_ERR_STATE);
    ZT_OK(zero_engine_micro_batch_done(e));
    ZT_CHECK(zero_engine_grad(e, 0) != NULL);
    ZT_OK(zero_engine_grad_ready(e, 0));
    ZT_OK(zero_engine_step(e, NULL)); /* two micro-batches: the step's count */
    zero_engine_free(e);
}

int main(void) {
    zero_comm *comm = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK) return 1;
    zt_rank = zero_comm_rank(comm);
    test_divergence(comm);
    for (int stage = 0; stage <= 3; stage++) {
        test_fp16_overflow(comm, stage, 1);
        test_fp16_overflow(comm, stage, 2);
    }
    test_misuse(comm);
    zero_comm_free(comm);
    return zt_finish("test_engine_faults");
}
