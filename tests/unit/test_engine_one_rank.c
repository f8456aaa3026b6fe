/* On one rank a shard is the whole unit: stages 1-3 must take no more engine memory than stage 0
 * (the peak of every ZERO_MEM category and of the total) and compute bitwise what it computes.
 * The MLP of tests/mlp_model.h (fp32/bf16/fp16, accumulation 1 and 3, deterministic mode) and
 * the tiny decoder (full training and LoRA's frozen base, with and without checkpointing) train
 * on the self communicator at every stage against stage 0. */
#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "harness.h"
#include "mlp_model.h"

#define STEPS 4

typedef struct outcome {
    zero_mem_stats mem; /* after the last step */
    double norms[STEPS];
    float *params; /* every unit's values, back to back */
    size_t nparams;
} outcome;

static void outcome_free(outcome *o) {
    free(o->params);
    memset(o, 0, sizeof *o);
}

/* Every unit's values after training, back to back (read_unit). */
static int read_all(zero_engine *e, outcome *o) {
    const int nu = zero_engine_num_units(e);
    zero_unit_info ui;
    size_t n = 0;
    for (int u = 0; u < nu; u++) {
        if (zero_engine_unit_info(e, u, &ui) != ZERO_OK) return -1;
        n += ui.numel;
    }
    o->params = malloc(n * sizeof(float));
    o->nparams = n;
    if (!o->params) return -1;
    size_t at = 0;
    for (int u = 0; u < nu; u++) {
        if (zero_engine_unit_info(e, u, &ui) != ZERO_OK || zero_engine_read_unit(e, u, o->params + at) != ZERO_OK)
            return -1;
        at += ui.numel;
    }
    return 0;
}

/* Stage s against stage 0 (ref): no peak above it, and the same bits. */
static void compare(const outcome *ref, const outcome *got, int stage, const char *what) {
    for (int c = 0; c < ZERO_MEM_COUNT; c++)
        ZT_CHECKF(got->mem.peak[c] <= ref->mem.peak[c], "%s stage %d: %s peak %zu bytes, stage 0 %zu", what, stage,
                  zero_mem_category_name((zero_mem_category)c), got->mem.peak[c], ref->mem.peak[c]);
    ZT_CHECKF(got->mem.total_peak <= ref->mem.total_peak, "%s stage %d: engine peak %zu bytes, stage 0 %zu", what,
              stage, got->mem.total_peak, ref->mem.total_peak);
    for (int s = 0; s < STEPS; s++)
        ZT_CHECKF(got->norms[s] == ref->norms[s], "%s stage %d: step %d gradient norm %.17g, stage 0 %.17g", what,
                  stage, s, got->norms[s], ref->norms[s]);
    ZT_CHECK(got->nparams == ref->nparams);
    if (got->nparams == ref->nparams && got->params && ref->params)
        ZT_CHECKF(!memcmp(got->params, ref->params, got->nparams * sizeof(float)),
                  "%s stage %d: the parameters differ from stage 0's", what, stage);
}

/* ---------------------------------------------------------------- the MLP */
static int train_mlp(zero_comm *self, int stage, zero_dtype prec, int accum, int det, outcome *o) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.precision = prec;
    cfg.grad_accum = accum;
    cfg.micro_batch = 4;
    cfg.deterministic = det;
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    cfg.optim.lr = 1e-2f;
    cfg.optim.weight_decay = 0.1f;
    zero_engine *e = NULL;
    int rc = -1;
    memset(o, 0, sizeof *o);
    if (zero_engine_create(&e, self, &cfg) != ZERO_OK || mlp_register(e) || mlp_init(e, 7)) goto done;
    for (int s = 0; s < STEPS; s++) {
        zero_step_stats st;
        /* the MLP adds each sample's gradient separately: several adds per micro-batch */
        if (mlp_train_step(e, s, 1, 0, accum, 4, NULL, &st, 1.0f)) goto done;
        o->norms[s] = st.grad_norm;
    }
    zero_engine_mem_stats(e, &o->mem);
    rc = read_all(e, o);
done:
    if (rc)
        ZT_FAIL("mlp stage %d %s accum %d det %d: %s", stage, zero_dtype_name(prec), accum, det,
                e ? zero_engine_last_error(e) : "create failed");
    zero_engine_free(e);
    return rc;
}

static void test_mlp(zero_comm *self) {
    const zero_dtype precs[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int p = 0; p < 3; p++)
        for (int accum = 1; accum <= 3; accum += 2)
            for (int det = 0; det <= 1; det++) {
                char what[96];
                snprintf(what, sizeof what, "mlp %s accum %d%s", zero_dtype_name(precs[p]), accum,
                         det ? " deterministic" : "");
                outcome ref;
                if (train_mlp(self, 0, precs[p], accum, det, &ref)) continue;
                for (int stage = 1; stage <= 3; stage++) {
                    outcome got;
                    if (train_mlp(self, stage, precs[p], accum, det, &got) == 0) compare(&ref, &got, stage, what);
                    outcome_free(&got);
                }
                outcome_free(&ref);
            }
}

/* ---------------------------------------------------------------- the tiny decoder */
enum { DB = 2, DT = 32, DACC = 2 };

static int train_decoder(zero_comm *self, const dec_config *g, int stage, zero_dtype prec, int lora, int ckpt,
                         outcome *o) {
    zero_config c;
    zero_config_default(&c);
    c.stage = stage;
    c.precision = prec;
    c.micro_batch = DB;
    c.grad_accum = DACC;
    zero_optim_hparams_default(&c.optim, ZERO_OPTIM_ADAMW);
    c.optim.lr = 1e-3f;
    zero_error err = {{0}};
    zero_engine *e = NULL;
    dec_model *m = NULL;
    dec_lora l;
    dec_lora_default(&l);
    l.r = 4;
    l.alpha = 8;
    int rc = -1;
    memset(o, 0, sizeof *o);
    if (zero_config_resolve(&c, 1, &err) != ZERO_OK || zero_engine_create(&e, self, &c) != ZERO_OK) goto done;
    if (lora) {
        if (dec_lora_targets(g, NULL, &l.targets, &err) || dec_lora_register(g, &l, e, &err) ||
            zero_engine_finalize(e) || dec_engine_init(g, e, 3, &err) || dec_lora_init(g, &l, e, &err))
            goto done;
    } else if (dec_engine_register(g, e, &err) || zero_engine_finalize(e) || dec_engine_init(g, e, 3, &err)) {
        goto done;
    }
    if (dec_create(&m, g, DB, DT, ckpt, &err) || (lora && dec_set_lora(m, &l, &err))) goto done;
    int32_t tok[DB * DT], tgt[DB * DT];
    for (int s = 0; s < STEPS; s++) {
        for (int k = 0; k < DACC; k++) {
            for (int i = 0; i < DB * DT; i++) {
                tok[i] = (int32_t)((i * 7 + s * 13 + k * 5 + 3) % g->vocab);
                tgt[i] = (int32_t)((i * 5 + s * 11 + k * 3 + 1) % g->vocab);
            }
            float loss = 0;
            if (dec_engine_micro_batch(m, e, tok, tgt, DB, DT, 0, &loss) || zero_engine_micro_batch_done(e)) goto done;
        }
        zero_step_stats st;
        if (zero_engine_step(e, &st)) goto done;
        o->norms[s] = st.grad_norm;
    }
    zero_engine_mem_stats(e, &o->mem);
    rc = read_all(e, o);
done:
    if (rc)
        ZT_FAIL("decoder stage %d %s lora %d ckpt %d: %s / %s / %s", stage, zero_dtype_name(prec), lora, ckpt, err.msg,
                e ? zero_engine_last_error(e) : "create failed", m ? dec_last_error(m) : "");
    dec_free(m);
    zero_engine_free(e);
    return rc;
}

static void test_decoder(zero_comm *self) {
    dec_config g;
    ZT_OK(dec_config_preset(&g, "tiny", NULL));
    const zero_dtype precs[2] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16};
    for (int p = 0; p < 2; p++)
        for (int lora = 0; lora <= 1; lora++)
            for (int ckpt = 0; ckpt <= 1; ckpt++) {
                char what[96];
                snprintf(what, sizeof what, "decoder %s%s%s", zero_dtype_name(precs[p]), lora ? " lora" : "",
                         ckpt ? " checkpointing" : "");
                outcome ref;
                if (train_decoder(self, &g, 0, precs[p], lora, ckpt, &ref)) continue;
                for (int stage = 1; stage <= 3; stage++) {
                    outcome got;
                    if (train_decoder(self, &g, stage, precs[p], lora, ckpt, &got) == 0)
                        compare(&ref, &got, stage, what);
                    outcome_free(&got);
                }
                outcome_free(&ref);
            }
}

int main(void) {
    zero_comm *self = NULL;
    if (zero_comm_init_self(&self) != ZERO_OK) return 1;
    test_mlp(self);
    test_decoder(self);
    zero_comm_free(self);
    return zt_finish("test_engine_one_rank");
}
