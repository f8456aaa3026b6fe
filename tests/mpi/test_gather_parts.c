/* zero_engine_gather_parts: a unit's trainable and frozen parts as the engine keeps them, without
 * the fp32 view zero_engine_gather makes of half parameters; and the decoder's bf16 products
 * reading them.
 *
 * The engine: the MLP of tests/mlp_model.h after a step (stages 0-3, fp32/bf16/fp16): the
 * trainable part is the whole unit, its masters rounded to the working dtype bit for bit; a gather
 * while it is held gives those values widened (fp32: the very same buffer); it counts as a gather
 * (two releases, the third is ZERO_ERR_STATE). Units mixing frozen and trainable parameters (and
 * one all frozen), the frozen dtype the working one or fp32/bf16 beside it: each part holds its
 * parameters rounded to its dtype at their grad_offset / frozen_offset. NULL out, a bad unit and a
 * NULL engine are refused and gather nothing.
 *
 * The decoder (every Hugging Face fixture: GPT-2's learned positions and tied head, Llama's,
 * Mistral's and Qwen's biases, q/k norms and untied heads), fully and with LoRA (the base frozen in
 * bf16, the adapters bf16 trainable), bf16 working precision with the products forced to bf16 (the
 * convert path where the CPU has no bf16 instructions), at stages 0 and 3 (with activation
 * checkpointing: the recomputed forward reads them too): two AdamW steps reading the parts give the
 * same losses, gradient norms and masters, bit for bit, as reading the fp32 view (and then an
 * evaluation pass the same loss, sampling the same tokens); every gather of
 * the pass read its weights in bf16 (none with it off), and the engine's transient buffers peak no
 * higher. A LoRA model on an engine without adapters fails with a one-line error. */
#include <stdint.h>

#include "decoder/decoder_internal.h"
#include "decoder_fixture.h"
#include "mlp_model.h"

/* ---------------------------------------------------------------- the engine */
/* n values rounded to dt (a copy of n elements of dt) and widened back. */
static void rounded(const float *v, size_t n, zero_dtype dt, void *r, float *back) {
    zero_convert(v, ZERO_DTYPE_FP32, r, dt, n, ZERO_IMPL_SCALAR);
    zero_convert(r, dt, back, ZERO_DTYPE_FP32, n, ZERO_IMPL_SCALAR);
}

/* The MLP after a step: the trainable part of each unit (the whole unit) is its masters rounded. */
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
        void *r = malloc(n * ws);
        ZT_OK(zero_engine_read_unit(e, u, master));
        rounded(master, n, prec, r, want);
        zero_unit_parts pt;
        memset(&pt, 0, sizeof pt);
        const zero_status st = zero_engine_gather_parts(e, u, &pt);
        ZT_CHECKF(st == ZERO_OK, "stage %d %s unit %d: %s", stage, zero_dtype_name(prec), u, zero_engine_last_error(e));
        if (st) goto next;
        ZT_CHECK(pt.frozen == NULL && pt.frozen_numel == 0 && pt.trainable_numel == n);
        ZT_EQ_INT(pt.trainable_dtype, prec);
        ZT_CHECKF(pt.trainable && !memcmp(pt.trainable, r, n * ws),
                  "stage %d %s unit %d: the working copy is not the masters rounded", stage, zero_dtype_name(prec), u);
        const float *view = zero_engine_gather(e, u);
        ZT_CHECKF(view != NULL, "stage %d %s unit %d: gather while held: %s", stage, zero_dtype_name(prec), u,
                  zero_engine_last_error(e));
        if (view) {
            ZT_CHECKF(!memcmp(view, want, n * 4), "stage %d %s unit %d: the view is not the working copy widened",
                      stage, zero_dtype_name(prec), u);
            /* on the cpu backend the fp32 view is the working copy itself (on a device, both are host copies) */
            if (prec == ZERO_DTYPE_FP32 && !strcmp(zero_engine_device(e), "cpu"))
                ZT_CHECK((const void *)view == pt.trainable);
            ZT_OK(zero_engine_release(e, u));
        }
        ZT_OK(zero_engine_release(e, u));
        ZT_EQ_INT(zero_engine_release(e, u), ZERO_ERR_STATE);
    next:
        free(master), free(want), free(r);
    }
    /* the call sequence stays whole: a step after it */
    ZT_OK(mlp_train_step(e, 1, W, rank, 1, 4, NULL, NULL, 1.0f));
    zero_engine_free(e);
}

/* Units mixing frozen and trainable parameters (frozen interleaved with trainable, one unit all
 * frozen), the frozen dtype the working one or fp32/bf16 beside it: each part holds its
 * parameters' values rounded to its dtype, back to back at their grad_offset / frozen_offset. */
static void check_mixed(zero_comm *world, int stage, zero_dtype prec, zero_dtype fdt) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.precision = prec;
    cfg.frozen_dtype = fdt;
    zero_engine *e = NULL;
    zero_error err = {{0}};
    if (zero_config_resolve(&cfg, zero_comm_size(world), &err) || zero_engine_create(&e, world, &cfg)) {
        ZT_FAIL("mixed: setup: %s", err.msg);
        return;
    }
    /* unit 0: a (frozen 37), b (trainable 5), c (frozen 3), d (trainable 41); unit 1: all frozen */
    const int64_t sz[5] = {37, 5, 3, 41, 29};
    const unsigned fl[5] = {ZERO_PARAM_FROZEN, 0, ZERO_PARAM_FROZEN, 0, ZERO_PARAM_FROZEN};
    const char *names[5] = {"u0.a", "u0.b", "u0.c", "u0.d", "u1.a"};
    ZT_EQ_INT(zero_engine_add_unit(e, "u0"), 0);
    for (int i = 0; i < 4; i++) ZT_OK(zero_engine_add_param(e, 0, names[i], &sz[i], 1, fl[i]));
    ZT_EQ_INT(zero_engine_add_unit(e, "u1"), 1);
    ZT_OK(zero_engine_add_param(e, 1, names[4], &sz[4], 1, fl[4]));
    ZT_OK(zero_engine_finalize(e));
    const zero_dtype fd = fdt == ZERO_DTYPE_COUNT ? prec : fdt;
    float vals[86];
    for (int i = 0; i < 86; i++) vals[i] = 0.1f + (float)i * 0.0123457f;
    ZT_OK(zero_engine_set_unit(e, 0, vals));
    ZT_OK(zero_engine_set_unit(e, 1, vals));
    for (int u = 0; u < 2; u++) {
        zero_unit_parts pt;
        if (zero_engine_gather_parts(e, u, &pt)) {
            ZT_FAIL("mixed stage %d unit %d: %s", stage, u, zero_engine_last_error(e));
            continue;
        }
        ZT_EQ_INT(pt.trainable_numel, u == 0 ? 46 : 0);
        ZT_EQ_INT(pt.frozen_numel, u == 0 ? 40 : 29);
        ZT_CHECK((pt.trainable != NULL) == (u == 0) && pt.frozen != NULL);
        ZT_EQ_INT(pt.trainable_dtype, prec);
        ZT_EQ_INT(pt.frozen_dtype, fd);
        for (int i = u == 0 ? 0 : 4; i < (u == 0 ? 4 : 5); i++) {
            zero_param_info pi;
            ZT_OK(zero_engine_param_info(e, i, &pi));
            const int fr = (fl[i] & ZERO_PARAM_FROZEN) != 0;
            const zero_dtype dt = fr ? fd : prec;
            const uint64_t off = fr ? pi.frozen_offset : pi.grad_offset;
            ZT_CHECK((fr ? pi.grad_offset : pi.frozen_offset) == UINT64_MAX);
            unsigned char r[41 * 4];
            float back[41];
            rounded(vals + pi.offset, pi.numel, dt, r, back);
            const unsigned char *part = fr ? pt.frozen : pt.trainable;
            ZT_CHECKF(part && !memcmp(part + off * zero_dtype_size(dt), r, pi.numel * zero_dtype_size(dt)),
                      "mixed stage %d %s/%s: %s is not its values rounded at its offset %llu of its part", stage,
                      zero_dtype_name(prec), zero_dtype_name(fd), names[i], (unsigned long long)off);
        }
        ZT_OK(zero_engine_release(e, u));
    }
    ZT_EQ_INT(zero_engine_gather_parts(e, 0, NULL), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "out is NULL") != NULL, "%s", zero_engine_last_error(e));
    zero_unit_parts pt;
    ZT_EQ_INT(zero_engine_gather_parts(e, 2, &pt), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_engine_gather_parts(NULL, 0, &pt), ZERO_ERR_INVALID_ARG);
    /* nothing was gathered by the refusals */
    ZT_EQ_INT(zero_engine_release(e, 0), ZERO_ERR_STATE);
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
    float eval;     /* an evaluation pass after the steps (forward only) */
    int32_t gen[4]; /* tokens sampled after it (the head on the last positions only) */
    int reads;      /* the training pass's gathers that read the bf16 working copy */
    int gathers;    /* a pass's gathers: the embeddings, each layer and the final unit, each layer again in
                     * the backward; the tied head the embeddings again and the final unit after it */
} run;

static int train(zero_comm *world, const char *name, const zt_golden *g, int stage, int ckpt, int lora, int working,
                 run *r) {
    const int W = zero_comm_size(world), rank = zero_comm_rank(world), B = ZT_FB / W;
    dec_config c;
    dec_lora l;
    dec_lora_default(&l);
    l.r = 4, l.alpha = 8;
    memset(r, 0, sizeof *r);
    zero_engine *e = zt_fixture_engine_prec(world, name, g, stage, B, 1, ZERO_DTYPE_BF16, lora ? &l : NULL, &c);
    dec_model *m = NULL;
    zero_error err = {{0}};
    int rc = -1;
    if (!e || dec_create(&m, &c, B, ZT_FT, ckpt, &err) || (lora && dec_set_lora(m, &l, &err))) goto done;
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
    const dec_sampling samp = {1.0f, 0, 7};
    if (dec_engine_eval(m, e, g->tokens + first, g->targets + first, B, ZT_FT, &r->eval) ||
        dec_engine_generate(m, e, g->tokens + first, 3, 4, &samp, r->gen))
        goto done;
    zero_mem_stats ms;
    zero_engine_mem_stats(e, &ms);
    r->buffers_peak = ms.peak[ZERO_MEM_BUFFERS];
    zero_unit_info ui;
    for (int u = 0; u < dec_num_units(&c); u++) {
        if (zero_engine_unit_info(e, u, &ui)) goto done;
        r->nparams += ui.numel;
    }
    r->params = calloc(r->nparams, sizeof(float));
    size_t at = 0;
    for (int u = 0; r->params && u < dec_num_units(&c); u++) {
        if (zero_engine_read_unit(e, u, r->params + at) || zero_engine_unit_info(e, u, &ui)) goto done;
        at += ui.numel;
    }
    rc = r->params ? 0 : -1;
done:
    if (rc)
        ZT_FAIL("%s stage %d lora %d working %d: %s / %s / %s", name, stage, lora, working, err.msg,
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

static void check_decoder(zero_comm *world, const char *name, const zt_golden *g, int stage, int ckpt, int lora) {
    run on, off;
    memset(&on, 0, sizeof on);
    memset(&off, 0, sizeof off);
    char what[64];
    snprintf(what, sizeof what, "%s%s", name, lora ? " (LoRA)" : "");
    if (train(world, name, g, stage, ckpt, lora, 1, &on) == 0 &&
        train(world, name, g, stage, ckpt, lora, 0, &off) == 0) {
        for (int s = 0; s < STEPS; s++) {
            ZT_CHECKF(same_bits(on.loss[s], off.loss[s]),
                      "%s stage %d step %d: loss %.9g reading the working copy, %.9g reading the fp32 view", what,
                      stage, s, on.loss[s], off.loss[s]);
            ZT_CHECKF(on.norm[s] == off.norm[s], "%s stage %d step %d: gradient norm %.17g against %.17g", what, stage,
                      s, on.norm[s], off.norm[s]);
        }
        ZT_CHECKF(same_bits(on.eval, off.eval), "%s stage %d: evaluation loss %.9g against %.9g", what, stage, on.eval,
                  off.eval);
        ZT_CHECKF(!memcmp(on.gen, off.gen, sizeof on.gen), "%s stage %d: sampled %d %d %d %d against %d %d %d %d", what,
                  stage, on.gen[0], on.gen[1], on.gen[2], on.gen[3], off.gen[0], off.gen[1], off.gen[2], off.gen[3]);
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
            printf("%-25s stage %d%s: same bits, %d gathers read in bf16; buffers peak %zu -> %zu bytes\n", what, stage,
                   ckpt ? " (checkpointing)" : "", on.reads, off.buffers_peak, on.buffers_peak);
    }
    free(on.params), free(off.params);
}

/* A LoRA model on an engine registered without adapters (its layers all trainable, nothing
 * frozen): the embeddings' parts are not the frozen base the pass reads, and the
 * micro-batch fails with a one-line error naming them instead of reading past the unit. */
static void check_mismatch(zero_comm *world, const zt_golden *g) {
    const int W = zero_comm_size(world), B = ZT_FB / W;
    dec_config c;
    dec_lora l;
    dec_lora_default(&l);
    zero_error err = {{0}};
    zero_engine *e = zt_fixture_engine_prec(world, zt_fixtures[0], g, 0, B, 1, ZERO_DTYPE_BF16, NULL, &c);
    dec_model *m = NULL;
    if (!e || dec_lora_targets(&c, NULL, &l.targets, &err) || dec_create(&m, &c, B, ZT_FT, 0, &err) ||
        dec_set_lora(m, &l, &err)) {
        ZT_FAIL("mismatch: setup: %s", err.msg);
    } else {
        dec__set_matmul_prec(m, MK_PREC_BF16);
        const size_t first = (size_t)zero_comm_rank(world) * B * ZT_FT;
        float loss = 0;
        ZT_EQ_INT(dec_engine_micro_batch(m, e, g->tokens + first, g->targets + first, B, ZT_FT, 0, &loss),
                  ZERO_ERR_STATE);
        ZT_CHECKF(strstr(dec_last_error(m), "unit 0: parts of 1920 trainable") &&
                      strstr(dec_last_error(m), "base (frozen)"),
                  "%s", dec_last_error(m));
    }
    dec_free(m);
    zero_engine_free(e);
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
        for (int p = 0; p < 3; p++) {
            check_engine(world, stage, precs[p]);
            check_mixed(world, stage, precs[p], ZERO_DTYPE_COUNT);
        }
    for (int stage = 0; stage <= 3; stage += 3) {
        check_mixed(world, stage, ZERO_DTYPE_FP32, ZERO_DTYPE_BF16);
        check_mixed(world, stage, ZERO_DTYPE_BF16, ZERO_DTYPE_FP32);
    }
    for (int i = 0; i < ZT_NFIXTURES; i++) {
        zt_golden g;
        if (zt_golden_load(zt_fixtures[i], &g)) continue;
        if (i == 0) check_mismatch(world, &g);
        for (int lora = 0; lora <= 1; lora++) {
            check_decoder(world, zt_fixtures[i], &g, 0, 0, lora);
            check_decoder(world, zt_fixtures[i], &g, 3, 1, lora);
        }
        zt_golden_free(&g);
    }
    zero_comm_free(world);
    return zt_finish("test_gather_parts");
}
