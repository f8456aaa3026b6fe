/* zero_engine_gather_working: a unit's working copy as the engine keeps it, without the fp32 copy
 * zero_engine_gather makes of a half working dtype; and the decoder's bf16 products reading it.
 *
 * The engine (the MLP of tests/mlp_model.h after a step, stages 0-3, fp32/bf16/fp16): the working
 * copy holds the masters rounded to the working dtype, bit for bit; a gather while it is held
 * gives those values widened (fp32: the very same buffer); it counts as a gather (two releases,
 * the third is ZERO_ERR_STATE); a unit with a frozen parameter and a NULL dtype are refused with
 * a message.
 *
 * The decoder (every Hugging Face fixture: GPT-2's learned positions and tied head, Llama's,
 * Mistral's and Qwen's biases, q/k norms and untied heads), bf16 working precision with the
 * products forced to bf16 (the convert path where the CPU has no bf16 instructions), at stages 0
 * and 3 (with activation checkpointing: the recomputed forward reads it too): two AdamW steps
 * reading the working copy give the same losses, gradient norms and masters, bit for bit, as
 * reading the fp32 view; every gather of the pass read the working copy (none with it off), and
 * the engine's transient buffers peak no higher. */
#include <stdint.h>

#include "decoder/decoder_internal.h"
#include "decoder_fixture.h"
#include "mlp_model.h"

/* ---------------------------------------------------------------- the engine */
static void check_engine(zero_comm *world, int stage, zero_dtype prec) {
    const int W = zero_comm_size(world), rank = zero_comm_rank(world);
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.precision = prec;
    cfg.micro_batch = 4;
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    cfg.optim.lr = 1e-2f;
    zero_engine *e = NULL;
    zero_error err = {{0}};
    if (zero_config_resolve(&cfg, W, &err) || zero_engine_create(&e, world, &cfg) || mlp_register(e) ||
        mlp_init(e, 5) || mlp_train_step(e, 0, W, rank, 1, 4, NULL, NULL, 1.0f)) {
        ZT_FAIL("stage %d %s: setup: %s / %s", stage, zero_dtype_name(prec), err.msg,
                e ? zero_engine_last_error(e) : "");
        zero_engine_free(e);
        return;
    }
    const size_t ws = zero_dtype_size(prec);
    for (int u = 0; u < MLP_LAYERS; u++) {
        const size_t n = (size_t)mlp_unit_numel(u);
        float *master = malloc(n * 4), *want = malloc(n * 4);
        void *rounded = malloc(n * ws);
        ZT_OK(zero_engine_read_unit(e, u, master));
        zero_convert(master, ZERO_DTYPE_FP32, rounded, prec, n, ZERO_IMPL_SCALAR);
        zero_convert(rounded, prec, want, ZERO_DTYPE_FP32, n, ZERO_IMPL_SCALAR);
        zero_dtype dt = ZERO_DTYPE_INT64;
        const void *wk = zero_engine_gather_working(e, u, &dt);
        ZT_CHECKF(wk != NULL, "stage %d %s unit %d: %s", stage, zero_dtype_name(prec), u, zero_engine_last_error(e));
        if (!wk) goto next;
        ZT_EQ_INT(dt, prec);
        ZT_CHECKF(!memcmp(wk, rounded, n * ws), "stage %d %s unit %d: the working copy is not the masters rounded",
                  stage, zero_dtype_name(prec), u);
        const float *view = zero_engine_gather(e, u);
        ZT_CHECKF(view != NULL, "stage %d %s unit %d: gather while held: %s", stage, zero_dtype_name(prec), u,
                  zero_engine_last_error(e));
        if (view) {
            ZT_CHECKF(!memcmp(view, want, n * 4), "stage %d %s unit %d: the view is not the working copy widened",
                      stage, zero_dtype_name(prec), u);
            if (prec == ZERO_DTYPE_FP32) ZT_CHECK((const void *)view == wk);
            ZT_OK(zero_engine_release(e, u));
        }
        ZT_OK(zero_engine_release(e, u));
        ZT_EQ_INT(zero_engine_release(e, u), ZERO_ERR_STATE);
    next:
        free(master), free(want), free(rounded);
    }
    /* the call sequence stays whole: a step after it */
    ZT_OK(mlp_train_step(e, 1, W, rank, 1, 4, NULL, NULL, 1.0f));
    zero_engine_free(e);
}

static void check_refusals(zero_comm *world) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.precision = ZERO_DTYPE_BF16;
    zero_engine *e = NULL;
    zero_error err = {{0}};
    if (zero_config_resolve(&cfg, zero_comm_size(world), &err) || zero_engine_create(&e, world, &cfg)) {
        ZT_FAIL("refusals: setup: %s", err.msg);
        return;
    }
    const int64_t w[1] = {8}, b[1] = {4};
    const int u = zero_engine_add_unit(e, "mixed");
    ZT_OK(zero_engine_add_param(e, u, "mixed.w", w, 1, ZERO_PARAM_FROZEN));
    ZT_OK(zero_engine_add_param(e, u, "mixed.b", b, 1, 0));
    const int v = zero_engine_add_unit(e, "plain");
    ZT_OK(zero_engine_add_param(e, v, "plain.w", w, 1, 0));
    ZT_OK(zero_engine_finalize(e));
    zero_dtype dt;
    ZT_CHECK(zero_engine_gather_working(e, u, &dt) == NULL);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "frozen parameters") != NULL, "%s", zero_engine_last_error(e));
    ZT_CHECK(zero_engine_gather_working(e, v, NULL) == NULL);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "dtype is NULL") != NULL, "%s", zero_engine_last_error(e));
    ZT_CHECK(zero_engine_gather_working(e, 2, &dt) == NULL);
    ZT_CHECK(zero_engine_gather_working(NULL, 0, &dt) == NULL);
    /* nothing was gathered by the refusals */
    ZT_EQ_INT(zero_engine_release(e, u), ZERO_ERR_STATE);
    ZT_EQ_INT(zero_engine_release(e, v), ZERO_ERR_STATE);
    zero_engine_free(e);
}

/* ---------------------------------------------------------------- the decoder */
enum { STEPS = 2 };

typedef struct run {
    float loss[STEPS];
    double norm[STEPS];
    float *params; /* every unit's masters, back to back */
    size_t nparams;
    size_t buffers_peak;
    int reads;   /* the last pass's gathers that read the bf16 working copy */
    int gathers; /* a pass's gathers: the embeddings, each layer and the final unit, each layer again in
                  * the backward; the tied head the embeddings again and the final unit after it */
} run;

static int train(zero_comm *world, const char *name, const zt_golden *g, int stage, int ckpt, int working, run *r) {
    const int W = zero_comm_size(world), rank = zero_comm_rank(world), B = ZT_FB / W;
    dec_config c;
    memset(r, 0, sizeof *r);
    zero_engine *e = zt_fixture_engine_prec(world, name, g, stage, B, 1, ZERO_DTYPE_BF16, &c);
    dec_model *m = NULL;
    zero_error err = {{0}};
    int rc = -1;
    if (!e || dec_create(&m, &c, B, ZT_FT, ckpt, &err)) goto done;
    dec__set_matmul_prec(m, MK_PREC_BF16);
    dec__set_working_copy(m, working);
    const double denom = (double)dec_count_targets(g->targets, (size_t)ZT_FB * ZT_FT);
    const size_t first = (size_t)rank * B * ZT_FT;
    for (int s = 0; s < STEPS; s++) {
        zero_step_stats st;
        if (dec_engine_micro_batch(m, e, g->tokens + first, g->targets + first, B, ZT_FT, denom, &r->loss[s]) ||
            zero_engine_step(e, &st))
            goto done;
        r->norm[s] = st.grad_norm;
    }
    r->reads = dec__working_reads(m);
    r->gathers = 2 + 2 * c.n_layer + (c.tied ? 2 : 0);
    zero_mem_stats ms;
    zero_engine_mem_stats(e, &ms);
    r->buffers_peak = ms.peak[ZERO_MEM_BUFFERS];
    for (int u = 0; u < dec_num_units(&c); u++) r->nparams += dec_unit_numel(&c, u);
    r->params = calloc(r->nparams, sizeof(float));
    size_t at = 0;
    for (int u = 0; r->params && u < dec_num_units(&c); u++) {
        if (zero_engine_read_unit(e, u, r->params + at)) goto done;
        at += dec_unit_numel(&c, u);
    }
    rc = r->params ? 0 : -1;
done:
    if (rc)
        ZT_FAIL("%s stage %d working %d: %s / %s / %s", name, stage, working, err.msg,
                e ? zero_engine_last_error(e) : "", m ? dec_last_error(m) : "");
    dec_free(m);
    zero_engine_free(e);
    return rc;
}

static int same_bits(float a, float b) {
    uint32_t x, y;
    memcpy(&x, &a, sizeof x);
    memcpy(&y, &b, sizeof y);
    return x == y;
}

static void check_decoder(zero_comm *world, const char *name, const zt_golden *g, int stage, int ckpt) {
    run on, off;
    memset(&on, 0, sizeof on);
    memset(&off, 0, sizeof off);
    if (train(world, name, g, stage, ckpt, 1, &on) == 0 && train(world, name, g, stage, ckpt, 0, &off) == 0) {
        const char *what = name;
        for (int s = 0; s < STEPS; s++) {
            ZT_CHECKF(same_bits(on.loss[s], off.loss[s]),
                      "%s stage %d step %d: loss %.9g reading the working copy, %.9g reading the fp32 view", what,
                      stage, s, on.loss[s], off.loss[s]);
            ZT_CHECKF(on.norm[s] == off.norm[s], "%s stage %d step %d: gradient norm %.17g against %.17g", what, stage,
                      s, on.norm[s], off.norm[s]);
        }
        size_t diff = 0;
        for (size_t i = 0; i < on.nparams; i++) diff += !same_bits(on.params[i], off.params[i]);
        ZT_CHECKF(diff == 0, "%s stage %d: %zu of %zu masters differ after %d steps", what, stage, diff, on.nparams,
                  STEPS);
        ZT_CHECKF(on.reads == on.gathers && off.reads == 0,
                  "%s stage %d: %d and %d gathers read the working copy with it on and off: expected %d and 0", what,
                  stage, on.reads, off.reads, on.gathers);
        ZT_CHECKF(on.buffers_peak <= off.buffers_peak,
                  "%s stage %d: transient buffers peak at %zu bytes reading the working copy, %zu reading the fp32 "
                  "view: expected no more",
                  what, stage, on.buffers_peak, off.buffers_peak);
        if (zt_rank == 0)
            printf("%-18s stage %d%s: same bits, %d gathers of the working copy; buffers peak %zu -> %zu bytes\n", name,
                   stage, ckpt ? " (checkpointing)" : "", on.reads, off.buffers_peak, on.buffers_peak);
    }
    free(on.params), free(off.params);
}

int main(void) {
    zero_comm *world = NULL;
    if (zero_comm_init_mpi(&world, NULL) != ZERO_OK) {
        fprintf(stderr, "cannot create the communicator\n");
        return 1;
    }
    zt_rank = zero_comm_rank(world);
    const zero_dtype precs[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int stage = 0; stage <= 3; stage++)
        for (int p = 0; p < 3; p++) check_engine(world, stage, precs[p]);
    check_refusals(world);
    for (int i = 0; i < ZT_NFIXTURES; i++) {
        zt_golden g;
        if (zt_golden_load(zt_fixtures[i], &g)) continue;
        check_decoder(world, zt_fixtures[i], &g, 0, 0);
        check_decoder(world, zt_fixtures[i], &g, 3, 1);
        zt_golden_free(&g);
    }
    zero_comm_free(world);
    return zt_finish("test_gather_working");
}
