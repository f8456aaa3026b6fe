/* tests/lora_fixture.h — the LoRA fixtures of scripts/make_lora_fixtures.py and
 * scripts/make_qlora_fixtures.py for the MPI tests: a golden file's batch, losses and AdamW
 * settings, and an engine with a decoder fixture's base loaded frozen (dec_hf_load) and a PEFT
 * adapter on it (dec_peft_load). */
#ifndef ZERO_TESTS_LORA_FIXTURE_H
#define ZERO_TESTS_LORA_FIXTURE_H

#include "decoder/hf.h"
#include "decoder/lora.h"
#include "decoder/peft.h"
#include "decoder_fixture.h"

typedef struct lgolden {
    int32_t tokens[ZT_FB * ZT_FT], targets[ZT_FB * ZT_FT];
    double adamw[6], grad_norm;
    double lr, beta1, beta2, eps, wd;
    char base[64];
    char format[16]; /* a QLoRA file's base format ("nf4", "int8"), else "" */
    int embeddings;  /* a QLoRA file whose embeddings and lm_head were quantized too */
    /* a QLoRA file: 20 steps at lr20, in float64 and as PyTorch computes them in float32 */
    int has20;
    double lr20, adamw20[21], adamw20_f32[21];
} lgolden;

/* tests/data/lora/NAME.golden.safetensors; -1 (and a test failure) when it is not one. */
static inline int lgolden_load(const char *name, lgolden *g) {
    memset(g, 0, sizeof *g);
    char path[1024];
    const char *src = getenv("ZERO_SOURCE_DIR");
    snprintf(path, sizeof path, "%s/tests/data/lora/%s.golden.safetensors", src ? src : ".", name);
    zero_error err = {{0}};
    zero_st_file *f = NULL;
    if (zero_st_open(&f, NULL, path, &err)) {
        ZT_FAIL("%s", err.msg);
        return -1;
    }
    int rc = zt_read_tensor(f, "tokens", g->tokens, sizeof g->tokens) ||
             zt_read_tensor(f, "targets", g->targets, sizeof g->targets) ||
             zt_read_tensor(f, "adamw", g->adamw, sizeof g->adamw) ||
             zt_read_tensor(f, "grad_norm", &g->grad_norm, sizeof g->grad_norm);
    g->lr = zt_meta(f, "lr"), g->beta1 = zt_meta(f, "beta1"), g->beta2 = zt_meta(f, "beta2");
    g->eps = zt_meta(f, "eps"), g->wd = zt_meta(f, "weight_decay");
    g->embeddings = zt_meta(f, "embeddings") == 1.0;
    if (!rc && zero_st_find(f, "adamw20") >= 0) {
        g->has20 = 1;
        g->lr20 = zt_meta(f, "lr20");
        rc = zt_read_tensor(f, "adamw20", g->adamw20, sizeof g->adamw20) ||
             zt_read_tensor(f, "adamw20_f32", g->adamw20_f32, sizeof g->adamw20_f32);
    }
    const char *b = zero_st_metadata(f, "base"), *fm = zero_st_metadata(f, "format");
    snprintf(g->base, sizeof g->base, "%s", b ? b : "");
    snprintf(g->format, sizeof g->format, "%s", fm ? fm : "");
    zero_st_close(f);
    if (rc || !g->base[0]) ZT_FAIL("%s: not a LoRA golden file", path);
    return rc || !g->base[0] ? -1 : 0;
}

/* c with the golden file's AdamW settings. */
static inline void lgolden_optim(const lgolden *g, zero_config *c) {
    zero_optim_hparams_default(&c->optim, ZERO_OPTIM_ADAMW);
    c->optim.lr = (float)g->lr, c->optim.beta1 = (float)g->beta1, c->optim.beta2 = (float)g->beta2;
    c->optim.eps = (float)g->eps, c->optim.weight_decay = (float)g->wd;
}

/* An engine of config c (resolved here for comm) with the decoder fixture `base` loaded frozen
 * and the adapter tests/data/lora/ADAPTER on it; the model's configuration and the adapter's into
 * cfg_out and l_out. NULL (and a test failure naming `what`) on failure. */
static inline zero_engine *lora_fixture_engine(zero_comm *comm, const char *what, const char *base, const char *adapter,
                                               zero_config *c, dec_config *cfg_out, dec_lora *l_out) {
    char dir[1024], adir[1024];
    zt_fixture_path(base, "", dir, sizeof dir);
    const char *src = getenv("ZERO_SOURCE_DIR");
    snprintf(adir, sizeof adir, "%s/tests/data/lora/%s", src ? src : ".", adapter);
    zero_error err = {{0}};
    dec_hf *h = NULL;
    if (dec_hf_open(&h, dir, &err)) {
        ZT_FAIL("%s: %s", what, err.msg);
        return NULL;
    }
    const dec_config *cfg = dec_hf_config(h);
    zero_engine *e = NULL;
    zero_status st = dec_peft_read_config(adir, cfg, l_out, &err);
    if (!st) st = zero_config_resolve(c, zero_comm_size(comm), &err);
    if (!st) st = zero_engine_create(&e, comm, c);
    if (!st) st = dec_lora_register(cfg, l_out, e, &err);
    if (!st) st = zero_engine_finalize(e);
    if (!st) st = dec_hf_load(h, e, &err);
    if (!st) st = dec_peft_load(adir, cfg, l_out, e, &err);
    if (st) {
        ZT_FAIL("%s: setup: %s / %s", what, err.msg, e ? zero_engine_last_error(e) : "");
        zero_engine_free(e);
        e = NULL;
    }
    *cfg_out = *cfg;
    dec_hf_close(h);
    return e;
}

#endif
