/* models/decoder/hf_config.c — Hugging Face config.json in and out: the fields of GPT2Config,
 * LlamaConfig, MistralConfig, Qwen2Config and Qwen3Config that change the computation, with
 * transformers' defaults, and a refusal naming the field and its value for anything else. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder_internal.h"
#include "decoder/hf.h"

/* "config.json: FIELD VALUE: expected ..." with the value printed as JSON. */
static zero_status refuse(zero_error *err, const char *field, const cJSON *v, const char *expected) {
    char *txt = v ? cJSON_PrintUnformatted(v) : NULL;
    dec__errorf(err, "config.json: %s %s: %s", field, txt ? txt : "(missing)", expected);
    cJSON_free(txt);
    return ZERO_ERR_INVALID_ARG;
}

static const cJSON *get(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }
static int present(const cJSON *o, const char *key) {
    const cJSON *v = get(o, key);
    return v && !cJSON_IsNull(v);
}

/* An integer field in [lo, hi]; absent or null: def (def < 0: required). */
static zero_status get_int(const cJSON *o, const char *key, int def, int lo, int hi, int *out, zero_error *err) {
    const cJSON *v = get(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (def < 0) return refuse(err, key, NULL, "expected an integer (the field is required)");
        *out = def;
        return ZERO_OK;
    }
    char exp[96];
    snprintf(exp, sizeof exp, "expected an integer in [%d, %d]", lo, hi);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return refuse(err, key, v, exp);
    *out = (int)v->valuedouble;
    return ZERO_OK;
}

static zero_status get_num(const cJSON *o, const char *key, double def, double lo, double hi, double *out,
                           zero_error *err) {
    const cJSON *v = get(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return ZERO_OK;
    }
    char exp[96];
    snprintf(exp, sizeof exp, "expected a number in [%g, %g]", lo, hi);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo) || !(v->valuedouble <= hi)) return refuse(err, key, v, exp);
    *out = v->valuedouble;
    return ZERO_OK;
}

static zero_status get_bool(const cJSON *o, const char *key, int def, int *out, zero_error *err) {
    const cJSON *v = get(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return ZERO_OK;
    }
    if (!cJSON_IsBool(v)) return refuse(err, key, v, "expected true or false");
    *out = cJSON_IsTrue(v);
    return ZERO_OK;
}

/* A boolean that must have one value for the computation to be ours. */
static zero_status want_bool(const cJSON *o, const char *key, int def, int want, const char *why, zero_error *err) {
    int b;
    zero_status st = get_bool(o, key, def, &b, err);
    if (st) return st;
    if (b != want) return refuse(err, key, get(o, key), why);
    return ZERO_OK;
}

/* Dropout is a training-time regularizer zero does not apply: noted, not refused. */
static void note_dropout(const cJSON *o, const char *key, char *notes, size_t cap) {
    const cJSON *v = get(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble == 0.0) return;
    const size_t at = strlen(notes);
    snprintf(notes + at, cap - at, "%s%s %g", at ? ", " : "", key, v->valuedouble);
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        zero_status st_ = (x);                                                                     \
        if (st_) return st_;                                                                       \
    } while (0)

static zero_status parse_gpt2(const cJSON *o, dec_config *c, char *notes, size_t cap, zero_error *err) {
    int L, C, H, ctx, V;
    TRY(get_int(o, "n_layer", 12, 1, 4096, &L, err));
    TRY(get_int(o, "n_embd", 768, 1, 1 << 16, &C, err));
    TRY(get_int(o, "n_head", 12, 1, 1 << 12, &H, err));
    TRY(get_int(o, "n_positions", 1024, 1, 1 << 24, &ctx, err));
    TRY(get_int(o, "vocab_size", 50257, 1, 1 << 24, &V, err));
    if (C % H) return refuse(err, "n_embd", get(o, "n_embd"), "expected a multiple of n_head");
    dec_config_gpt2(c, L, C, H, ctx, V);
    TRY(get_int(o, "n_inner", 4 * C, 1, 1 << 18, &c->n_inner, err));
    const cJSON *act = get(o, "activation_function");
    if (act && !(cJSON_IsString(act) && (!strcmp(act->valuestring, "gelu_new") ||
                                         !strcmp(act->valuestring, "gelu_pytorch_tanh"))))
        return refuse(err, "activation_function", act, "expected \"gelu_new\" (the tanh GELU; zero computes no other)");
    TRY(get_num(o, "layer_norm_epsilon", 1e-5, 1e-30, 0.5, &c->norm_eps, err));
    TRY(get_num(o, "initializer_range", 0.02, 0.0, 1.0, &c->init_std, err));
    TRY(get_bool(o, "tie_word_embeddings", 1, &c->tied, err));
    TRY(want_bool(o, "scale_attn_weights", 1, 1, "expected true (scores scaled by 1/sqrt(head_dim))", err));
    TRY(want_bool(o, "scale_attn_by_inverse_layer_idx", 0, 0, "expected false (not supported)", err));
    TRY(want_bool(o, "add_cross_attention", 0, 0, "expected false (a decoder-only model)", err));
    note_dropout(o, "resid_pdrop", notes, cap);
    note_dropout(o, "embd_pdrop", notes, cap);
    note_dropout(o, "attn_pdrop", notes, cap);
    return ZERO_OK;
}

/* partial_rotary_factor: Phi-3's rotated fraction of a head (rotary_dim = int(head_dim * f), as
 * transformers truncates it); the other architectures rotate the whole head. */
static zero_status partial_rotary(const cJSON *prf, const char *field, dec_config *c, zero_error *err) {
    if (!prf || cJSON_IsNull(prf)) return ZERO_OK;
    if (!cJSON_IsNumber(prf)) return refuse(err, field, prf, "expected a number");
    if (prf->valuedouble == 1.0) {
        c->rotary_dim = 0;
        return ZERO_OK;
    }
    if (c->arch != DEC_ARCH_PHI3) return refuse(err, field, prf, "expected 1 (RoPE on the whole head)");
    const int rd = prf->valuedouble > 0.0 && prf->valuedouble < 1.0 ? (int)(c->head_dim * prf->valuedouble) : 0;
    if (rd < 2 || rd % 2) {
        char exp[128];
        snprintf(exp, sizeof exp, "expected a factor in (0, 1] that rotates an even number >= 2 of head_dim %d",
                 c->head_dim);
        return refuse(err, field, prf, exp);
    }
    c->rotary_dim = rd;
    return ZERO_OK;
}

/* Phi-3's LongRoPE object: short_factor and long_factor (one per rotated pair),
 * original_max_position_embeddings (here or at the top level, read by the caller), and the cos/sin
 * scale transformers derives: attention_factor, else from factor (default max_position_embeddings /
 * original) as sqrt(1 + ln(factor) / ln(original)), 1 when factor <= 1. */
static zero_status parse_longrope(const cJSON *r, const char *which, dec_config *c, zero_error *err) {
    char field[96];
    const int pairs = (c->rotary_dim ? c->rotary_dim : c->head_dim) / 2;
    const char *keys[2] = {"short_factor", "long_factor"};
    double *dst[2] = {c->rope_short, c->rope_long};
    for (int k = 0; k < 2; k++) {
        snprintf(field, sizeof field, "%s.%s", which, keys[k]);
        const cJSON *a = get(r, keys[k]);
        char exp[128];
        snprintf(exp, sizeof exp, "expected a list of %d positive numbers (one per rotated pair)", pairs);
        if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != pairs || pairs > DEC_LONGROPE_MAX)
            return refuse(err, field, a, exp);
        int i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++) {
            if (!cJSON_IsNumber(e) || !(e->valuedouble > 0.0) || !isfinite(e->valuedouble)) return refuse(err, field, e, exp);
            dst[k][i] = e->valuedouble;
        }
    }
    c->rope_n_factors = pairs;
    if (present(r, "original_max_position_embeddings")) {
        snprintf(field, sizeof field, "%s.original_max_position_embeddings", which);
        const cJSON *v = get(r, "original_max_position_embeddings");
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 1 << 30)
            return refuse(err, field, v, "expected a whole number >= 1");
        c->rope_orig_ctx = (int)v->valuedouble;
    }
    c->rope_max_ctx = c->n_ctx;
    double factor = (double)c->n_ctx / c->rope_orig_ctx, attn = 0.0;
    const cJSON *f = get(r, "factor"), *af = get(r, "attention_factor");
    if (f && !cJSON_IsNull(f)) {
        snprintf(field, sizeof field, "%s.factor", which);
        if (!cJSON_IsNumber(f) || !(f->valuedouble > 0) || !isfinite(f->valuedouble))
            return refuse(err, field, f, "expected a number > 0");
        factor = f->valuedouble;
    }
    if (af && !cJSON_IsNull(af)) {
        snprintf(field, sizeof field, "%s.attention_factor", which);
        if (!cJSON_IsNumber(af) || !(af->valuedouble > 0) || !isfinite(af->valuedouble))
            return refuse(err, field, af, "expected a number > 0");
        attn = af->valuedouble;
    } else {
        attn = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log((double)c->rope_orig_ctx));
    }
    c->rope_attn_factor = attn;
    c->rope_factor = factor;
    c->rope_type = DEC_ROPE_LONGROPE;
    return ZERO_OK;
}

/* One RoPE object, `which` (rope_scaling or rope_parameters), into c's rope fields; c already
 * holds the top level's rope_theta, which the object's own wins over. */
static zero_status parse_rope_obj(const cJSON *r, const char *which, dec_config *c, zero_error *err) {
    char field[96];
    if (present(r, "rope_theta")) {
        snprintf(field, sizeof field, "%s.rope_theta", which);
        const cJSON *t = get(r, "rope_theta");
        if (!cJSON_IsNumber(t) || !(t->valuedouble > 1.0) || !isfinite(t->valuedouble))
            return refuse(err, field, t, "expected a number > 1");
        c->rope_theta = t->valuedouble;
    }
    const cJSON *prf = get(r, "partial_rotary_factor");
    snprintf(field, sizeof field, "%s.partial_rotary_factor", which);
    TRY(partial_rotary(prf, field, c, err));
    const cJSON *type = get(r, "rope_type");
    if (!type || cJSON_IsNull(type)) type = get(r, "type");
    snprintf(field, sizeof field, "%s.%s", which, get(r, "rope_type") ? "rope_type" : "type");
    const char *t = cJSON_IsString(type) ? type->valuestring : NULL;
    if (type && !cJSON_IsNull(type) && !t) return refuse(err, field, type, "expected \"default\", \"linear\" or \"llama3\"");
    if (!t) {
        /* scaling keys without a type: transformers 4 cannot build the rotary embedding, 5 takes
         * the default one and drops the factor; neither is a scaling to compute */
        for (const cJSON *k = r->child; k; k = k->next)
            if (strcmp(k->string, "rope_theta") && strcmp(k->string, "partial_rotary_factor") &&
                strcmp(k->string, "rope_type") && strcmp(k->string, "type"))
                return refuse(err, which, r,
                              "expected a \"rope_type\" (or \"type\"): \"default\", \"linear\" or \"llama3\"");
        return ZERO_OK;
    }
    if (!strcmp(t, "default")) return ZERO_OK;
    /* Phi-3 reads "su" and "yarn" as longrope (transformers' Phi3Config renames them) */
    if (c->arch == DEC_ARCH_PHI3 && (!strcmp(t, "longrope") || !strcmp(t, "su") || !strcmp(t, "yarn")))
        return parse_longrope(r, which, c, err);
    if (!strcmp(t, "longrope"))
        return refuse(err, field, type, "expected \"default\", \"linear\" or \"llama3\" (longrope: Phi-3 only)");
    if (strcmp(t, "linear") && strcmp(t, "llama3"))
        return refuse(err, field, type, "expected \"default\", \"linear\" or \"llama3\" (zero computes no other RoPE scaling)");
    c->rope_type = !strcmp(t, "linear") ? DEC_ROPE_LINEAR : DEC_ROPE_LLAMA3;
    /* every key transformers' validation requires of the type (transformers 4 refuses a llama3
     * object without original_max_position_embeddings; 5 fills in max_position_embeddings, and
     * writes it out, so only a hand-made file lacks it) */
    const char *keys[4] = {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
    const int nkeys = c->rope_type == DEC_ROPE_LINEAR ? 1 : 4;
    for (int k = 0; k < nkeys; k++) {
        snprintf(field, sizeof field, "%s.%s", which, keys[k]);
        const cJSON *v = get(r, keys[k]);
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble) ||
            (k == 3 && (v->valuedouble != floor(v->valuedouble) || v->valuedouble > 1 << 30)))
            return refuse(err, field, v, k == 3 ? "expected a whole number >= 1" : "expected a number > 0");
        if (k == 0) c->rope_factor = v->valuedouble;
        if (k == 1) c->rope_low_freq = v->valuedouble;
        if (k == 2) c->rope_high_freq = v->valuedouble;
        if (k == 3) c->rope_orig_ctx = (int)v->valuedouble;
    }
    if (c->rope_type == DEC_ROPE_LLAMA3 && !(c->rope_high_freq > c->rope_low_freq)) {
        snprintf(field, sizeof field, "%s.high_freq_factor", which);
        return refuse(err, field, get(r, "high_freq_factor"), "expected more than low_freq_factor");
    }
    return ZERO_OK;
}

static int same_rope(const dec_config *a, const dec_config *b) {
    return a->rope_type == b->rope_type && a->rope_theta == b->rope_theta && a->rope_factor == b->rope_factor &&
           a->rope_low_freq == b->rope_low_freq && a->rope_high_freq == b->rope_high_freq &&
           a->rope_orig_ctx == b->rope_orig_ctx && a->rotary_dim == b->rotary_dim &&
           a->rope_attn_factor == b->rope_attn_factor && !memcmp(a->rope_short, b->rope_short, sizeof a->rope_short) &&
           !memcmp(a->rope_long, b->rope_long, sizeof a->rope_long);
}

/* RoPE: rope_scaling (the published form) or rope_parameters (transformers 5), rope_theta inside
 * it or at the top level (default 10000). A file with both is read when they give the same RoPE
 * (a config written for both versions) and refused when they differ: transformers 5 reads
 * rope_scaling there, and a reader that takes rope_parameters would compute another model. */
static zero_status parse_rope(const cJSON *o, dec_config *c, double def_theta, zero_error *err) {
    const char *which[2] = {"rope_scaling", "rope_parameters"};
    const cJSON *r[2];
    for (int k = 0; k < 2; k++) {
        r[k] = get(o, which[k]);
        if (r[k] && !cJSON_IsNull(r[k]) && !cJSON_IsObject(r[k]))
            return refuse(err, which[k], r[k], "expected an object or null");
        if (r[k] && !r[k]->child) r[k] = NULL; /* null or {} */
    }
    TRY(get_num(o, "rope_theta", def_theta, 1.0000001, 1e12, &c->rope_theta, err));
    c->rope_type = DEC_ROPE_DEFAULT;
    TRY(partial_rotary(get(o, "partial_rotary_factor"), "partial_rotary_factor", c, err));
    dec_config d = *c;
    if (r[0]) TRY(parse_rope_obj(r[0], which[0], c, err));
    if (r[1]) TRY(parse_rope_obj(r[1], which[1], &d, err));
    if (r[0] && r[1] && !same_rope(c, &d)) {
        char *txt = cJSON_PrintUnformatted(r[0]), exp[400];
        snprintf(exp, sizeof exp, "expected the RoPE of rope_scaling %.300s (give one of the two, or both alike)",
                 txt ? txt : "");
        cJSON_free(txt);
        return refuse(err, which[1], r[1], exp);
    }
    if (!r[0]) *c = d;
    return ZERO_OK;
}

/* The window transformers applies: Mistral's sliding_window (default 4096; null: none); Qwen's
 * only with use_sliding_window, on the layers layer_types (or max_window_layers) marks. */
static zero_status parse_window(const cJSON *o, dec_config *c, zero_error *err) {
    int window = 0, use = 1;
    const int def = 4096;
    if (c->arch == DEC_ARCH_QWEN2 || c->arch == DEC_ARCH_QWEN3) TRY(get_bool(o, "use_sliding_window", 0, &use, err));
    if (c->arch == DEC_ARCH_LLAMA) use = 0;
    if (use) {
        const cJSON *w = get(o, "sliding_window");
        if (!w) window = c->arch == DEC_ARCH_PHI3 ? 0 : def;
        else if (!cJSON_IsNull(w)) TRY(get_int(o, "sliding_window", def, 1, 1 << 30, &window, err));
    }
    if (c->arch == DEC_ARCH_QWEN2 || c->arch == DEC_ARCH_QWEN3) {
        const cJSON *lt = get(o, "layer_types");
        int any_sliding = 0;
        if (lt && !cJSON_IsNull(lt)) {
            if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layer)
                return refuse(err, "layer_types", lt, "expected one entry per layer");
            for (const cJSON *e = lt->child; e; e = e->next) {
                if (!cJSON_IsString(e) ||
                    (strcmp(e->valuestring, "full_attention") && strcmp(e->valuestring, "sliding_attention")))
                    return refuse(err, "layer_types", e, "expected \"full_attention\" or \"sliding_attention\"");
                any_sliding |= !strcmp(e->valuestring, "sliding_attention");
            }
        } else {
            int mwl;
            TRY(get_int(o, "max_window_layers", 28, 0, 1 << 20, &mwl, err));
            any_sliding = mwl < c->n_layer;
        }
        if (!any_sliding) window = 0;
    }
    c->sliding_window = window;
    return ZERO_OK;
}

static zero_status parse_llama(const cJSON *o, dec_config *c, char *notes, size_t cap, zero_error *err) {
    const dec_arch arch = c->arch;
    memset(c, 0, sizeof *c);
    c->arch = arch;
    const int qwen = arch == DEC_ARCH_QWEN2 || arch == DEC_ARCH_QWEN3, phi3 = arch == DEC_ARCH_PHI3;
    const int dV = qwen ? 151936 : phi3 ? 32064 : 32000, dC = phi3 ? 3072 : 4096;
    const int dI = arch == DEC_ARCH_MISTRAL ? 14336 : qwen ? 22016 : phi3 ? 8192 : 11008;
    const int dctx = arch == DEC_ARCH_MISTRAL ? 131072 : qwen ? 32768 : phi3 ? 4096 : 2048;
    const double deps = phi3 ? 1e-5 : 1e-6;
    TRY(get_int(o, "vocab_size", dV, 1, 1 << 24, &c->vocab, err));
    TRY(get_int(o, "hidden_size", dC, 1, 1 << 16, &c->n_embd, err));
    TRY(get_int(o, "intermediate_size", dI, 1, 1 << 18, &c->n_inner, err));
    TRY(get_int(o, "num_hidden_layers", 32, 1, 4096, &c->n_layer, err));
    TRY(get_int(o, "num_attention_heads", 32, 1, 1 << 12, &c->n_head, err));
    TRY(get_int(o, "num_key_value_heads", arch == DEC_ARCH_MISTRAL ? 8 : c->n_head, 1, 1 << 12, &c->n_kv_head, err));
    if (get(o, "num_key_value_heads") && cJSON_IsNull(get(o, "num_key_value_heads"))) c->n_kv_head = c->n_head;
    if (c->n_head % c->n_kv_head)
        return refuse(err, "num_key_value_heads", get(o, "num_key_value_heads"), "expected a divisor of num_attention_heads");
    if (arch == DEC_ARCH_QWEN3 && !present(o, "head_dim")) {
        c->head_dim = 128;
    } else if (present(o, "head_dim")) {
        TRY(get_int(o, "head_dim", 0, 2, 1 << 12, &c->head_dim, err));
    } else {
        if (c->n_embd % c->n_head)
            return refuse(err, "hidden_size", get(o, "hidden_size"), "expected a multiple of num_attention_heads (or a head_dim)");
        c->head_dim = c->n_embd / c->n_head;
    }
    if (c->head_dim % 2) return refuse(err, "head_dim", get(o, "head_dim"), "expected an even number (RoPE)");
    const cJSON *act = get(o, "hidden_act");
    if (act && !(cJSON_IsString(act) && (!strcmp(act->valuestring, "silu") || !strcmp(act->valuestring, "swish"))))
        return refuse(err, "hidden_act", act, "expected \"silu\" (SwiGLU; zero computes no other)");
    TRY(get_int(o, "max_position_embeddings", dctx, 1, 1 << 24, &c->n_ctx, err));
    TRY(get_num(o, "initializer_range", 0.02, 0.0, 1.0, &c->init_std, err));
    TRY(get_num(o, "rms_norm_eps", deps, 1e-30, 0.5, &c->norm_eps, err));
    TRY(get_bool(o, "tie_word_embeddings", 0, &c->tied, err));
    int ab = 0, mb = 0;
    if (arch == DEC_ARCH_LLAMA || arch == DEC_ARCH_QWEN3) TRY(get_bool(o, "attention_bias", 0, &ab, err));
    if (arch == DEC_ARCH_LLAMA) TRY(get_bool(o, "mlp_bias", 0, &mb, err));
    c->qkv_bias = ab || arch == DEC_ARCH_QWEN2;
    c->o_bias = ab;
    c->mlp_bias = mb;
    c->qk_norm = arch == DEC_ARCH_QWEN3;
    if (arch == DEC_ARCH_PHI3) {
        c->fused_names = 1;
        TRY(get_int(o, "original_max_position_embeddings", 4096, 1, 1 << 30, &c->rope_orig_ctx, err));
    }
    TRY(parse_rope(o, c, 10000.0, err));
    if (c->rope_type != DEC_ROPE_LONGROPE && c->rope_type != DEC_ROPE_LLAMA3) c->rope_orig_ctx = 0;
    TRY(parse_window(o, c, err));
    note_dropout(o, "attention_dropout", notes, cap);
    if (phi3) {
        note_dropout(o, "resid_pdrop", notes, cap);
        note_dropout(o, "embd_pdrop", notes, cap);
    }
    return ZERO_OK;
}

/* pad_token_id: transformers' Llama-family embeddings are nn.Embedding(padding_idx = it), whose
 * row of that token takes no gradient from the lookup (the tied head's part still reaches it). */
static zero_status parse_pad(const cJSON *o, dec_config *c, zero_error *err) {
    const cJSON *v = get(o, "pad_token_id");
    if (!v || cJSON_IsNull(v)) return ZERO_OK;
    char exp[64];
    snprintf(exp, sizeof exp, "expected a token in [0, %d) or null", c->vocab);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 || v->valuedouble >= c->vocab)
        return refuse(err, "pad_token_id", v, exp);
    c->has_pad = 1;
    c->pad_token = (int)v->valuedouble;
    return ZERO_OK;
}

/* A feature of the config that zero does not compute yet: refused, never ignored. */
static zero_status not_yet(zero_error *err, const char *field, const cJSON *v, const char *what) {
    char *txt = v ? cJSON_PrintUnformatted(v) : NULL;
    dec__errorf(err, "config.json %s %s: %s is not supported yet", field, txt ? txt : "(missing)", what);
    cJSON_free(txt);
    return ZERO_ERR_UNSUPPORTED;
}

/* A positive number or null/absent (0: none); def when absent. */
static zero_status get_opt_pos(const cJSON *o, const char *key, double def, double *out, zero_error *err) {
    const cJSON *v = get(o, key);
    if (!v) {
        *out = def;
        return ZERO_OK;
    }
    if (cJSON_IsNull(v)) {
        *out = 0.0;
        return ZERO_OK;
    }
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0.0) || !isfinite(v->valuedouble))
        return refuse(err, key, v, "expected a number > 0 or null");
    *out = v->valuedouble;
    return ZERO_OK;
}

/* Gemma 2/3's local layers: layer_types (transformers 5), else sliding_window_pattern (Gemma 3's,
 * default 6) or Gemma 2's alternation (2): layer l is local unless (l + 1) % pattern == 0. A
 * layer_types list of another shape is refused as not supported yet. */
static zero_status parse_gemma_layers(const cJSON *o, dec_config *c, zero_error *err) {
    const cJSON *lt = get(o, "layer_types");
    int pattern = c->arch == DEC_ARCH_GEMMA2 ? 2 : 6;
    if (c->arch == DEC_ARCH_GEMMA3) TRY(get_int(o, "sliding_window_pattern", 6, 1, 1 << 20, &pattern, err));
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layer)
            return refuse(err, "layer_types", lt, "expected one entry per layer");
        int first_full = -1, l = 0;
        for (const cJSON *e = lt->child; e; e = e->next, l++) {
            if (!cJSON_IsString(e) ||
                (strcmp(e->valuestring, "full_attention") && strcmp(e->valuestring, "sliding_attention")))
                return refuse(err, "layer_types", e, "expected \"full_attention\" or \"sliding_attention\"");
            if (first_full < 0 && !strcmp(e->valuestring, "full_attention")) first_full = l;
        }
        pattern = first_full < 0 ? c->n_layer + 1 : first_full + 1;
        l = 0;
        for (const cJSON *e = lt->child; e; e = e->next, l++)
            if (!strcmp(e->valuestring, "full_attention") != ((l + 1) % pattern == 0))
                return not_yet(err, "layer_types", lt,
                               "a pattern other than every n-th layer global (the others sliding)");
    }
    c->sliding_pattern = pattern;
    return ZERO_OK;
}

/* Gemma's activation: gelu_pytorch_tanh (gelu_new is the same function; Gemma 1's legacy "gelu"
 * means it too, as transformers reads it). Gemma 1 names it hidden_act, Gemma 2/3 hidden_activation. */
static zero_status gemma_act(const cJSON *o, const dec_config *c, zero_error *err) {
    const char *key = c->arch == DEC_ARCH_GEMMA ? "hidden_act" : "hidden_activation";
    const cJSON *act = get(o, key);
    if (!act || cJSON_IsNull(act)) return ZERO_OK;
    const char *a = cJSON_IsString(act) ? act->valuestring : "";
    if (!strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_new") || (c->arch == DEC_ARCH_GEMMA && !strcmp(a, "gelu")))
        return ZERO_OK;
    return refuse(err, key, act, "expected \"gelu_pytorch_tanh\" (GeGLU with the tanh GELU; zero computes no other)");
}

/* Gemma 3's RoPE: global layers rope_theta (default 1e6) with rope_scaling, local layers
 * rope_local_base_freq (default 1e4) unscaled; or transformers 5's rope_parameters with one object
 * per layer type. A scaled local RoPE is refused as not supported yet. */
static zero_status parse_gemma3_rope(const cJSON *o, dec_config *c, zero_error *err) {
    const cJSON *rp = get(o, "rope_parameters");
    const cJSON *full = cJSON_IsObject(rp) ? get(rp, "full_attention") : NULL;
    const cJSON *slide = cJSON_IsObject(rp) ? get(rp, "sliding_attention") : NULL;
    if (!full && !slide) {
        TRY(parse_rope(o, c, 1e6, err));
        return get_num(o, "rope_local_base_freq", 10000.0, 1.0000001, 1e12, &c->rope_local_theta, err);
    }
    if (present(o, "rope_scaling")) return refuse(err, "rope_scaling", get(o, "rope_scaling"),
                                                  "expected null beside per-layer-type rope_parameters");
    TRY(get_num(o, "rope_theta", 1e6, 1.0000001, 1e12, &c->rope_theta, err));
    TRY(get_num(o, "rope_local_base_freq", 10000.0, 1.0000001, 1e12, &c->rope_local_theta, err));
    c->rope_type = DEC_ROPE_DEFAULT;
    if (full) {
        if (!cJSON_IsObject(full)) return refuse(err, "rope_parameters.full_attention", full, "expected an object");
        TRY(parse_rope_obj(full, "rope_parameters.full_attention", c, err));
    }
    if (slide) {
        if (!cJSON_IsObject(slide)) return refuse(err, "rope_parameters.sliding_attention", slide, "expected an object");
        dec_config d = *c;
        d.rope_theta = c->rope_local_theta;
        d.rope_type = DEC_ROPE_DEFAULT;
        TRY(parse_rope_obj(slide, "rope_parameters.sliding_attention", &d, err));
        if (d.rope_type != DEC_ROPE_DEFAULT)
            return not_yet(err, "rope_parameters.sliding_attention", slide, "a scaled RoPE on the local layers");
        c->rope_local_theta = d.rope_theta;
    }
    return ZERO_OK;
}

/* Gemma (1), Gemma 2, Gemma 3 (text): Llama's layout with (1 + w) RMSNorm gains, GeGLU, the
 * embeddings scaled by sqrt(hidden_size), an independent head_dim; Gemma 2/3 add the sandwich
 * norms, query_pre_attn_scalar, soft-capping and local (sliding) layers; Gemma 3 q/k norms and
 * the local layers' own RoPE base. */
static zero_status parse_gemma(const cJSON *o, dec_config *c, char *notes, size_t cap, zero_error *err) {
    const dec_arch arch = c->arch;
    memset(c, 0, sizeof *c);
    c->arch = arch;
    const int g1 = arch == DEC_ARCH_GEMMA, g3 = arch == DEC_ARCH_GEMMA3;
    c->gemma = 1;
    c->sandwich = !g1;
    c->qk_norm = g3;
    TRY(get_int(o, "vocab_size", g3 ? 262208 : 256000, 1, 1 << 24, &c->vocab, err));
    TRY(get_int(o, "hidden_size", g1 ? 3072 : 2304, 1, 1 << 16, &c->n_embd, err));
    TRY(get_int(o, "intermediate_size", g1 ? 24576 : 9216, 1, 1 << 18, &c->n_inner, err));
    TRY(get_int(o, "num_hidden_layers", g1 ? 28 : 26, 1, 4096, &c->n_layer, err));
    TRY(get_int(o, "num_attention_heads", g1 ? 16 : 8, 1, 1 << 12, &c->n_head, err));
    TRY(get_int(o, "num_key_value_heads", g1 ? 16 : 4, 1, 1 << 12, &c->n_kv_head, err));
    if (c->n_head % c->n_kv_head)
        return refuse(err, "num_key_value_heads", get(o, "num_key_value_heads"), "expected a divisor of num_attention_heads");
    TRY(get_int(o, "head_dim", 256, 2, 1 << 12, &c->head_dim, err));
    if (c->head_dim % 2) return refuse(err, "head_dim", get(o, "head_dim"), "expected an even number (RoPE)");
    TRY(gemma_act(o, c, err));
    TRY(get_int(o, "max_position_embeddings", g3 ? 131072 : 8192, 1, 1 << 24, &c->n_ctx, err));
    TRY(get_num(o, "initializer_range", 0.02, 0.0, 1.0, &c->init_std, err));
    TRY(get_num(o, "rms_norm_eps", 1e-6, 1e-30, 0.5, &c->norm_eps, err));
    TRY(get_bool(o, "tie_word_embeddings", 1, &c->tied, err));
    int ab = 0;
    TRY(get_bool(o, "attention_bias", 0, &ab, err));
    c->qkv_bias = c->o_bias = ab;
    int bidir = 0;
    TRY(get_bool(o, "use_bidirectional_attention", 0, &bidir, err));
    if (bidir) return not_yet(err, "use_bidirectional_attention", get(o, "use_bidirectional_attention"),
                              "bidirectional attention");
    if (g3) TRY(parse_gemma3_rope(o, c, err));
    else TRY(parse_rope(o, c, 10000.0, err));
    if (!g1) {
        int qs;
        TRY(get_int(o, "query_pre_attn_scalar", 256, 1, 1 << 24, &qs, err));
        c->attn_scalar = qs;
        TRY(get_opt_pos(o, "attn_logit_softcapping", g3 ? 0.0 : 50.0, &c->attn_softcap, err));
        TRY(get_opt_pos(o, "final_logit_softcapping", g3 ? 0.0 : 30.0, &c->final_softcap, err));
        TRY(parse_gemma_layers(o, c, err));
        const cJSON *w = get(o, "sliding_window");
        int window = 4096;
        if (w && cJSON_IsNull(w)) window = 0;
        else TRY(get_int(o, "sliding_window", 4096, 1, 1 << 30, &window, err));
        /* the window matters only where a layer is local: pattern 1 makes every layer global */
        c->sliding_window = c->sliding_pattern > 1 ? window : 0;
        if (!window) c->sliding_pattern = 0;
    }
    note_dropout(o, "attention_dropout", notes, cap);
    return ZERO_OK;
}

/* The stored dtype, torch_dtype (transformers 4) or dtype (5): what transformers loads the weights
 * as and what `zero export` writes back (its source_dtype), so a value that is not one of the three
 * dtypes zero reads and writes is refused, not replaced by the weights'. float64 is refused with
 * them (zero reads no F64 tensor), and "auto" is an argument of from_pretrained, not a stored
 * dtype. Both present: they must agree, since each version reads another one. */
static zero_status check_dtype(const cJSON *o, zero_error *err) {
    const char *keys[2] = {"torch_dtype", "dtype"};
    const cJSON *v[2];
    for (int k = 0; k < 2; k++) {
        v[k] = get(o, keys[k]);
        if (!v[k] || cJSON_IsNull(v[k])) {
            v[k] = NULL;
            continue;
        }
        const char *t = cJSON_IsString(v[k]) ? v[k]->valuestring : "";
        if (strcmp(t, "float32") && strcmp(t, "bfloat16") && strcmp(t, "float16"))
            return refuse(err, keys[k], v[k], "expected \"float32\", \"bfloat16\" or \"float16\" (or null)");
    }
    if (v[0] && v[1] && strcmp(v[0]->valuestring, v[1]->valuestring)) {
        char exp[96];
        snprintf(exp, sizeof exp, "expected torch_dtype's \"%s\" (transformers 5 reads dtype, 4 torch_dtype)",
                 v[0]->valuestring);
        return refuse(err, "dtype", v[1], exp);
    }
    return ZERO_OK;
}

zero_status dec_config_from_json(dec_config *cfg, const char *json, char **notes_out, zero_error *err) {
    if (notes_out) *notes_out = NULL;
    zero_error je;
    char *last = NULL; /* a key twice: the text with the earlier one blanked (transformers keeps the last) */
    if (json && zero_json_check_last(json, strlen(json), DEC_HF_CONFIG_MAX_VALUES, ZERO_JSON_MAX_DEPTH, &last, &je)) {
        dec__errorf(err, "config.json: %s: refused before parsing", je.msg);
        return ZERO_ERR_FORMAT;
    }
    cJSON *o = json ? cJSON_Parse(last ? last : json) : NULL;
    free(last);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        dec__errorf(err, "config.json: not a JSON object");
        return ZERO_ERR_FORMAT;
    }
    zero_status st = ZERO_OK;
    char notes[256] = "";
    dec_config c;
    memset(&c, 0, sizeof c);
    const cJSON *archs = get(o, "architectures"), *mt = get(o, "model_type");
    const cJSON *name = cJSON_IsArray(archs) ? cJSON_GetArrayItem(archs, 0) : NULL;
    int found = -1;
    if (archs && !cJSON_IsNull(archs) && (!cJSON_IsArray(archs) || cJSON_GetArraySize(archs) != 1 || !cJSON_IsString(name))) {
        st = refuse(err, "architectures", archs, "expected one architecture name");
        goto out;
    }
    for (int a = 0; a < DEC_ARCH_COUNT && found < 0; a++)
        if (name ? !strcmp(name->valuestring, dec_arch_name(a))
                 : cJSON_IsString(mt) && !strcmp(mt->valuestring, dec_arch_model_type(a)))
            found = a;
    if (found < 0) {
        st = refuse(err, name ? "architectures" : "model_type", name ? archs : mt,
                    "expected GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                    "Qwen3ForCausalLM, GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM or Phi3ForCausalLM "
                    "(model_type gpt2, llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3)");
        goto out;
    }
    if (present(o, "quantization_config")) { /* GPTQ, AWQ, bitsandbytes-serialized, ...: named by quant_method */
        const cJSON *qm = get(get(o, "quantization_config"), "quant_method");
        if (cJSON_IsString(qm)) {
            dec__errorf(err, "config.json: quantization_config: quant_method \"%.64s\": a base quantized by another tool is "
                        "not read yet (use its bf16, fp16 or fp32 checkpoint; zero train --quantize-base nf4|int8 "
                        "quantizes it while loading)", qm->valuestring);
            st = ZERO_ERR_UNSUPPORTED;
        } else {
            st = refuse(err, "quantization_config", get(o, "quantization_config"),
                        "expected none (a quantized checkpoint is not read yet; use a bf16, fp16 or fp32 one)");
        }
        goto out;
    }
    if ((st = check_dtype(o, err))) goto out;
    c.arch = (dec_arch)found;
    st = c.arch == DEC_ARCH_GPT2 ? parse_gpt2(o, &c, notes, sizeof notes, err)
         : c.arch == DEC_ARCH_GEMMA || c.arch == DEC_ARCH_GEMMA2 || c.arch == DEC_ARCH_GEMMA3
             ? parse_gemma(o, &c, notes, sizeof notes, err)
             : parse_llama(o, &c, notes, sizeof notes, err);
    if (st) goto out;
    if (c.arch != DEC_ARCH_GPT2 && (st = parse_pad(o, &c, err))) goto out;
    if ((st = dec_config_check(&c, err))) goto out;
    *cfg = c;
    if (notes_out && notes[0]) {
        const char *fmt = "config.json asks for dropout (%s); zero trains without dropout";
        const size_t n = strlen(fmt) + strlen(notes);
        if ((*notes_out = malloc(n))) snprintf(*notes_out, n, fmt, notes);
    }
out:
    cJSON_Delete(o);
    return st;
}

/* ---------------------------------------------------------------- writing */
static void set_item(cJSON *o, const char *key, cJSON *v) {
    if (get(o, key)) cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    else cJSON_AddItemToObject(o, key, v);
}

static cJSON *fresh(const dec_config *c) {
    cJSON *o = cJSON_CreateObject();
    const char *arch = dec_arch_name(c->arch);
    cJSON_AddItemToObject(o, "architectures", cJSON_CreateStringArray(&arch, 1));
    cJSON_AddStringToObject(o, "model_type", dec_arch_model_type(c->arch));
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab);
    if (c->arch == DEC_ARCH_GPT2) {
        cJSON_AddNumberToObject(o, "n_positions", c->n_ctx);
        cJSON_AddNumberToObject(o, "n_embd", c->n_embd);
        cJSON_AddNumberToObject(o, "n_layer", c->n_layer);
        cJSON_AddNumberToObject(o, "n_head", c->n_head);
        if (c->n_inner == 4 * c->n_embd) cJSON_AddNullToObject(o, "n_inner");
        else cJSON_AddNumberToObject(o, "n_inner", c->n_inner);
        cJSON_AddStringToObject(o, "activation_function", "gelu_new");
        cJSON_AddNumberToObject(o, "layer_norm_epsilon", c->norm_eps);
        cJSON_AddNumberToObject(o, "initializer_range", c->init_std);
        /* zero trains without dropout: say so, so that a fine-tune in transformers matches */
        cJSON_AddNumberToObject(o, "resid_pdrop", 0.0);
        cJSON_AddNumberToObject(o, "embd_pdrop", 0.0);
        cJSON_AddNumberToObject(o, "attn_pdrop", 0.0);
        cJSON_AddTrueToObject(o, "scale_attn_weights");
        /* GPT-2's <|endoftext|> when the vocabulary has it; a byte-level model has none */
        if (c->vocab > 50256) {
            cJSON_AddNumberToObject(o, "bos_token_id", 50256);
            cJSON_AddNumberToObject(o, "eos_token_id", 50256);
        } else {
            cJSON_AddNullToObject(o, "bos_token_id");
            cJSON_AddNullToObject(o, "eos_token_id");
        }
    } else {
        cJSON_AddNumberToObject(o, "hidden_size", c->n_embd);
        cJSON_AddNumberToObject(o, "intermediate_size", c->n_inner);
        cJSON_AddNumberToObject(o, "num_hidden_layers", c->n_layer);
        cJSON_AddNumberToObject(o, "num_attention_heads", c->n_head);
        cJSON_AddNumberToObject(o, "num_key_value_heads", c->n_kv_head);
        cJSON_AddNumberToObject(o, "head_dim", c->head_dim);
        if (!c->gemma) cJSON_AddStringToObject(o, "hidden_act", "silu");
        else cJSON_AddStringToObject(o, c->arch == DEC_ARCH_GEMMA ? "hidden_act" : "hidden_activation", "gelu_pytorch_tanh");
        cJSON_AddNumberToObject(o, "max_position_embeddings", c->n_ctx);
        cJSON_AddNumberToObject(o, "initializer_range", c->init_std);
        cJSON_AddNumberToObject(o, "rms_norm_eps", c->norm_eps);
        cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
        if (c->rotary_dim) { /* transformers truncates int(head_dim * factor): a factor that gives it back */
            double f = (double)c->rotary_dim / c->head_dim;
            if ((int)(c->head_dim * f) != c->rotary_dim) f = (c->rotary_dim + 0.5) / c->head_dim;
            cJSON_AddNumberToObject(o, "partial_rotary_factor", f);
        }
        if (c->arch == DEC_ARCH_GEMMA3) cJSON_AddNumberToObject(o, "rope_local_base_freq", c->rope_local_theta);
        if (c->rope_type == DEC_ROPE_LONGROPE) {
            cJSON_AddNumberToObject(o, "original_max_position_embeddings", c->rope_orig_ctx);
            cJSON *r = cJSON_AddObjectToObject(o, "rope_scaling");
            cJSON_AddStringToObject(r, "type", "longrope");
            cJSON_AddItemToObject(r, "short_factor", cJSON_CreateDoubleArray(c->rope_short, c->rope_n_factors));
            cJSON_AddItemToObject(r, "long_factor", cJSON_CreateDoubleArray(c->rope_long, c->rope_n_factors));
            cJSON_AddNumberToObject(r, "factor", c->rope_factor);
            cJSON_AddNumberToObject(r, "attention_factor", c->rope_attn_factor);
        } else if (c->rope_type == DEC_ROPE_DEFAULT) {
            cJSON_AddNullToObject(o, "rope_scaling");
        } else {
            cJSON *r = cJSON_AddObjectToObject(o, "rope_scaling");
            cJSON_AddStringToObject(r, "rope_type", c->rope_type == DEC_ROPE_LINEAR ? "linear" : "llama3");
            cJSON_AddNumberToObject(r, "factor", c->rope_factor);
            if (c->rope_type == DEC_ROPE_LLAMA3) {
                cJSON_AddNumberToObject(r, "low_freq_factor", c->rope_low_freq);
                cJSON_AddNumberToObject(r, "high_freq_factor", c->rope_high_freq);
                cJSON_AddNumberToObject(r, "original_max_position_embeddings", c->rope_orig_ctx);
            }
        }
        if (c->arch == DEC_ARCH_LLAMA || c->arch == DEC_ARCH_QWEN3 || c->gemma)
            cJSON_AddBoolToObject(o, "attention_bias", c->o_bias);
        if (c->has_pad) cJSON_AddNumberToObject(o, "pad_token_id", c->pad_token);
        if (c->sandwich) {
            cJSON_AddNumberToObject(o, "query_pre_attn_scalar", c->attn_scalar);
            if (c->attn_softcap > 0) cJSON_AddNumberToObject(o, "attn_logit_softcapping", c->attn_softcap);
            else cJSON_AddNullToObject(o, "attn_logit_softcapping");
            if (c->final_softcap > 0) cJSON_AddNumberToObject(o, "final_logit_softcapping", c->final_softcap);
            else cJSON_AddNullToObject(o, "final_logit_softcapping");
            if (c->sliding_window) cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
            else cJSON_AddNullToObject(o, "sliding_window");
            cJSON *lt = cJSON_AddArrayToObject(o, "layer_types");
            for (int l = 0; l < c->n_layer; l++)
                cJSON_AddItemToArray(lt, cJSON_CreateString(c->sliding_pattern > 1 && (l + 1) % c->sliding_pattern
                                                                ? "sliding_attention"
                                                                : "full_attention"));
        }
        if (c->arch == DEC_ARCH_PHI3) {
            if (c->sliding_window) cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
            else cJSON_AddNullToObject(o, "sliding_window");
        }
        if (c->arch == DEC_ARCH_LLAMA) cJSON_AddBoolToObject(o, "mlp_bias", c->mlp_bias);
        cJSON_AddNumberToObject(o, "attention_dropout", 0.0);
        if (c->arch == DEC_ARCH_MISTRAL) {
            if (c->sliding_window) cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
            else cJSON_AddNullToObject(o, "sliding_window");
        }
        if (c->arch == DEC_ARCH_QWEN2 || c->arch == DEC_ARCH_QWEN3) {
            cJSON_AddBoolToObject(o, "use_sliding_window", c->sliding_window > 0);
            if (c->sliding_window) {
                cJSON_AddNumberToObject(o, "sliding_window", c->sliding_window);
                cJSON_AddNumberToObject(o, "max_window_layers", 0);
            } else {
                cJSON_AddNullToObject(o, "sliding_window");
            }
        }
    }
    cJSON_AddBoolToObject(o, "tie_word_embeddings", c->tied);
    return o;
}

/* transformers 5's configs are strict dataclasses: a field typed float refuses an integer
 * ("final_logit_softcapping ... expected float, got int"), and cJSON prints 3.0 as 3. The numbers
 * of these fields (and of the lists under them) are written back with a decimal point. */
static const char *const float_keys[] = {
    "rope_theta", "rms_norm_eps", "layer_norm_epsilon", "initializer_range", "attention_dropout", "resid_pdrop",
    "embd_pdrop", "attn_pdrop", "attn_logit_softcapping", "final_logit_softcapping", "rope_local_base_freq", "factor",
    "attention_factor", "low_freq_factor", "high_freq_factor", "partial_rotary_factor", "short_factor",
    "long_factor"};

/* v as a raw JSON number that keeps a decimal point (the shortest of 15 or 17 digits that reads
 * back as v), or NULL when out of memory. An infinity (a literal past the double range, such as
 * 2e500, which the grammar allows and reads as one) is written 1e999, which reads back as it:
 * "inf" is not JSON. */
static cJSON *float_raw(double v) {
    char buf[64];
    if (isinf(v)) return cJSON_CreateRaw(v > 0 ? "1e999" : "-1e999");
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.17g", v);
    if (!strpbrk(buf, ".eEni")) strcat(buf, ".0");
    return cJSON_CreateRaw(buf);
}

static void floats_of(cJSON *o) {
    for (cJSON *k = o ? o->child : NULL; k; k = k->next) {
        if (cJSON_IsObject(k)) {
            floats_of(k);
            continue;
        }
        int fl = 0;
        for (size_t i = 0; k->string && i < sizeof float_keys / sizeof float_keys[0]; i++)
            fl |= !strcmp(k->string, float_keys[i]);
        if (!fl) continue;
        if (cJSON_IsNumber(k)) {
            /* this very item replaced, its key handed over: by name, a repeated key (which the
             * grammar allows) would replace the first one again and again */
            cJSON *raw = float_raw(k->valuedouble);
            if (raw) {
                raw->string = k->string;
                raw->type |= k->type & cJSON_StringIsConst;
                k->string = NULL;
                cJSON_ReplaceItemViaPointer(o, k, raw);
                k = raw;
            }
        } else if (cJSON_IsArray(k)) {
            for (cJSON *e = k->child; e; e = e->next) {
                if (!cJSON_IsNumber(e)) continue;
                cJSON *raw = float_raw(e->valuedouble);
                if (raw) cJSON_ReplaceItemViaPointer(k, e, raw), e = raw;
            }
        }
    }
}

char *dec_config_to_json(const dec_config *c, const char *base, const char *dtype) {
    cJSON *o = base ? cJSON_Parse(base) : NULL;
    if (base && (!o || !cJSON_IsObject(o))) {
        cJSON_Delete(o);
        o = NULL;
    }
    if (!o) o = fresh(c);
    if (!o) return NULL;
    if (dtype) {
        int set = 0;
        if (get(o, "dtype")) set = 1, set_item(o, "dtype", cJSON_CreateString(dtype));
        if (get(o, "torch_dtype") || !set) set_item(o, "torch_dtype", cJSON_CreateString(dtype));
    }
    floats_of(o);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    return dec__json_indent(text);
}

char *dec__json_indent(char *t) {
    /* cJSON indents with tabs and puts one after each colon; JSON strings hold no raw tab, so
     * every tab is layout: two spaces of indentation, one space after a colon, as transformers */
    if (!t) return NULL;
    char *out = malloc(2 * strlen(t) + 1), *w = out;
    if (!out) return t;
    for (const char *r = t; *r; r++) {
        if (*r != '\t') {
            *w++ = *r;
        } else if (r > t && r[-1] == ':') {
            *w++ = ' ';
        } else {
            *w++ = ' ';
            *w++ = ' ';
        }
    }
    *w = '\0';
    cJSON_free(t);
    return out;
}
