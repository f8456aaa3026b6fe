/* tests/decoder_fixture.h — the Hugging Face fixtures of scripts/make_decoder_fixtures.py for the
 * decoder's tests: their names, their goldens (tokens, targets with -1, logits, losses from
 * PyTorch), and an engine loaded from a fixture directory. */
#ifndef ZERO_TEST_DECODER_FIXTURE_H
#define ZERO_TEST_DECODER_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "decoder/hf.h"
#include "decoder/lora.h"
#include "harness.h"
#include "zero/ckpt.h"

static const char *const zt_fixtures[] = {"gpt2",           "llama_gqa4",     "llama3_bias",   "llama_mqa_sharded",
                                          "mistral",        "qwen2",          "qwen3",         "gemma",
                                          "gemma2",         "gemma3",         "phi3",          "phi3_longrope",
                                          "mistral_window", "gemma2_window",  "gemma3_window", "phi3_window"};
#define ZT_NFIXTURES ((int)(sizeof zt_fixtures / sizeof zt_fixtures[0]))
enum { ZT_FB = 12, ZT_FT = 8 }; /* the golden batch: 12 sequences of 8 tokens */
enum { ZT_GEN_PROMPT = 6, ZT_GEN_NEW = 10 }; /* the *_window fixtures' greedy generation */

typedef struct zt_golden {
    int32_t tokens[ZT_FB * ZT_FT], targets[ZT_FB * ZT_FT];
    float *logits; /* (3, T, V) */
    size_t nlogits;
    double loss, grad_norm, adamw[6];
    double lr, beta1, beta2, eps, wd;
    int has_gen; /* transformers' greedy generate() (the *_window fixtures) */
    int32_t gen_prompt[ZT_GEN_PROMPT], gen_tokens[ZT_GEN_NEW];
} zt_golden;

static inline void zt_fixture_path(const char *name, const char *suffix, char *buf, size_t cap) {
    const char *src = getenv("ZERO_SOURCE_DIR");
    snprintf(buf, cap, "%s/tests/data/decoder/%s%s", src ? src : ".", name, suffix);
}

static inline int zt_read_tensor(zero_st_file *f, const char *name, void *dst, size_t bytes) {
    const int i = zero_st_find(f, name);
    if (i < 0 || zero_st_tensor_at(f, i)->nbytes != bytes) {
        ZT_FAIL("%s: tensor '%s' missing or not %zu bytes", zero_st_path(f), name, bytes);
        return -1;
    }
    return zero_st_read(f, i, 0, dst, bytes) ? -1 : 0;
}

static inline double zt_meta(zero_st_file *f, const char *key) {
    const char *v = zero_st_metadata(f, key);
    return v ? atof(v) : 0.0;
}

/* Reads NAME.golden.safetensors; 0 on success. */
static inline int zt_golden_load(const char *name, zt_golden *g) {
    memset(g, 0, sizeof *g);
    char path[1024];
    zt_fixture_path(name, ".golden.safetensors", path, sizeof path);
    zero_error err = {{0}};
    zero_st_file *f = NULL;
    if (zero_st_open(&f, NULL, path, &err)) {
        ZT_FAIL("%s", err.msg);
        return -1;
    }
    const int li = zero_st_find(f, "logits");
    int rc = li < 0;
    if (!rc) {
        g->nlogits = (size_t)zero_st_tensor_at(f, li)->numel;
        g->logits = malloc(g->nlogits * sizeof(float));
        rc = !g->logits;
    }
    rc = rc || zt_read_tensor(f, "tokens", g->tokens, sizeof g->tokens) ||
         zt_read_tensor(f, "targets", g->targets, sizeof g->targets) ||
         zt_read_tensor(f, "logits", g->logits, g->nlogits * sizeof(float)) ||
         zt_read_tensor(f, "loss", &g->loss, sizeof g->loss) ||
         zt_read_tensor(f, "grad_norm", &g->grad_norm, sizeof g->grad_norm) ||
         zt_read_tensor(f, "adamw", g->adamw, sizeof g->adamw);
    g->has_gen = zero_st_find(f, "gen_tokens") >= 0;
    if (!rc && g->has_gen)
        rc = zt_read_tensor(f, "gen_prompt", g->gen_prompt, sizeof g->gen_prompt) ||
             zt_read_tensor(f, "gen_tokens", g->gen_tokens, sizeof g->gen_tokens);
    g->lr = zt_meta(f, "lr");
    g->beta1 = zt_meta(f, "beta1");
    g->beta2 = zt_meta(f, "beta2");
    g->eps = zt_meta(f, "eps");
    g->wd = zt_meta(f, "weight_decay");
    zero_st_close(f);
    if (rc) ZT_FAIL("%s: not a golden file", path);
    return rc ? -1 : 0;
}

static inline void zt_golden_free(zt_golden *g) { free(g->logits); }

/* An engine on comm with the fixture's model loaded (dec_hf_load: at stage 3 each rank reads only
 * its shards), configured for AdamW with the golden's hyperparameters, in this working precision;
 * with lora (not NULL: its targets are set to the default ones) the base is frozen and the
 * adapters are registered and initialized. NULL on failure. */
static inline zero_engine *zt_fixture_engine_prec(zero_comm *comm, const char *name, const zt_golden *g, int stage,
                                                  int B, int K, zero_dtype precision, dec_lora *lora,
                                                  dec_config *cfg_out) {
    char dir[1024];
    zt_fixture_path(name, "", dir, sizeof dir);
    zero_error err = {{0}};
    dec_hf *h = NULL;
    if (dec_hf_open(&h, dir, &err)) {
        ZT_FAIL("%s: %s", name, err.msg);
        return NULL;
    }
    zero_config c;
    zero_config_default(&c);
    c.stage = stage;
    c.micro_batch = B;
    c.grad_accum = K;
    c.precision = precision;
    zero_optim_hparams_default(&c.optim, ZERO_OPTIM_ADAMW);
    c.optim.lr = (float)g->lr;
    c.optim.beta1 = (float)g->beta1;
    c.optim.beta2 = (float)g->beta2;
    c.optim.eps = (float)g->eps;
    c.optim.weight_decay = (float)g->wd;
    zero_engine *e = NULL;
    zero_status st = zero_config_resolve(&c, zero_comm_size(comm), &err);
    if (!st) st = zero_engine_create(&e, comm, &c);
    const dec_config *dc = dec_hf_config(h);
    if (!st && lora) st = dec_lora_targets(dc, NULL, &lora->targets, &err);
    if (!st) st = lora ? dec_lora_register(dc, lora, e, &err) : dec_engine_register(dc, e, &err);
    if (!st) st = zero_engine_finalize(e);
    if (!st) st = dec_hf_load(h, e, &err);
    if (!st && lora) st = dec_lora_init(dc, lora, e, &err);
    if (st) {
        ZT_FAIL("%s: engine setup: %s / %s", name, err.msg, e ? zero_engine_last_error(e) : "");
        zero_engine_free(e);
        e = NULL;
    }
    if (cfg_out) *cfg_out = *dec_hf_config(h);
    dec_hf_close(h);
    return e;
}

/* The same in fp32. */
static inline zero_engine *zt_fixture_engine(zero_comm *comm, const char *name, const zt_golden *g, int stage, int B,
                                             int K, dec_config *cfg_out) {
    return zt_fixture_engine_prec(comm, name, g, stage, B, K, ZERO_DTYPE_FP32, NULL, cfg_out);
}

#endif
