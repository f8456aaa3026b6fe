/* models/decoder/params.c — the decoder's configuration: presets and checks, the parameter table
 * with Hugging Face names (units, offsets, shapes, flags), parameter counts and initialization. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "decoder/decoder_internal.h"

void dec__errorf(zero_error *err, const char *fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
}

zero_status dec_check_finite(const float *x, size_t n, uint64_t first, const char *file, const char *tensor,
                              zero_error *err) {
    for (size_t k = 0; k < n; k++) {
        if (isfinite(x[k])) continue;
        dec__errorf(err, "%s: tensor '%s' holds %s at element %llu: expected finite weights (a corrupt or diverged "
                    "model)", file, tensor, isnan(x[k]) ? "NaN" : x[k] > 0 ? "+inf" : "-inf",
                    (unsigned long long)(first + k));
        return ZERO_ERR_FORMAT;
    }
    return ZERO_OK;
}

static const char *const arch_names[DEC_ARCH_COUNT] = {
    "GPT2LMHeadModel",  "LlamaForCausalLM",  "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
    "GemmaForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM",  "Phi3ForCausalLM"};
static const char *const model_types[DEC_ARCH_COUNT] = {"gpt2",   "llama",  "mistral",     "qwen2", "qwen3",
                                                        "gemma",  "gemma2", "gemma3_text", "phi3"};

const char *dec_arch_name(dec_arch a) { return a >= 0 && a < DEC_ARCH_COUNT ? arch_names[a] : "?"; }
const char *dec_arch_model_type(dec_arch a) { return a >= 0 && a < DEC_ARCH_COUNT ? model_types[a] : "?"; }

/* ---------------------------------------------------------------- presets */
void dec_config_gpt2(dec_config *c, int n_layer, int n_embd, int n_head, int n_ctx, int vocab) {
    memset(c, 0, sizeof *c);
    c->arch = DEC_ARCH_GPT2;
    c->n_layer = n_layer;
    c->n_embd = n_embd;
    c->n_head = c->n_kv_head = n_head;
    c->head_dim = n_head > 0 ? n_embd / n_head : 0;
    c->n_inner = 4 * n_embd;
    c->n_ctx = n_ctx;
    c->vocab = vocab;
    c->tied = 1;
    c->qkv_bias = c->o_bias = c->mlp_bias = 1;
    c->norm_eps = 1e-5;
    c->rope_theta = 10000.0;
    c->init_std = 0.02;
}

/* A Llama-family shape: arch, L, C, H, G, D, F, n_ctx, V, tied, rms eps, rope theta. */
static void llama_like(dec_config *c, dec_arch arch, int L, int C, int H, int G, int D, int F, int ctx, int V,
                       int tied, double eps, double theta) {
    memset(c, 0, sizeof *c);
    c->arch = arch;
    c->n_layer = L;
    c->n_embd = C;
    c->n_head = H;
    c->n_kv_head = G;
    c->head_dim = D;
    c->n_inner = F;
    c->n_ctx = ctx;
    c->vocab = V;
    c->tied = tied;
    c->qkv_bias = arch == DEC_ARCH_QWEN2;
    c->qk_norm = arch == DEC_ARCH_QWEN3;
    c->norm_eps = eps;
    c->rope_theta = theta;
    c->init_std = 0.02;
}

static void llama3_rope(dec_config *c, double factor) {
    c->rope_type = DEC_ROPE_LLAMA3;
    c->rope_factor = factor;
    c->rope_low_freq = 1.0;
    c->rope_high_freq = 4.0;
    c->rope_orig_ctx = 8192;
}

typedef struct preset {
    const char *name;
    void (*make)(dec_config *c);
} preset;

static void p_tiny(dec_config *c) { dec_config_gpt2(c, 2, 64, 4, 64, 256); }
static void p_small(dec_config *c) { dec_config_gpt2(c, 6, 512, 8, 512, 256); }
static void p_gpt2(dec_config *c) { dec_config_gpt2(c, 12, 768, 12, 1024, 50257); }
static void p_gpt2m(dec_config *c) { dec_config_gpt2(c, 24, 1024, 16, 1024, 50257); }
static void p_gpt2l(dec_config *c) { dec_config_gpt2(c, 36, 1280, 20, 1024, 50257); }
static void p_gpt2xl(dec_config *c) { dec_config_gpt2(c, 48, 1600, 25, 1024, 50257); }
static void p_l1b(dec_config *c) {
    llama_like(c, DEC_ARCH_LLAMA, 16, 2048, 32, 8, 64, 8192, 131072, 128256, 1, 1e-5, 500000.0);
    llama3_rope(c, 32.0);
}
static void p_l3b(dec_config *c) {
    llama_like(c, DEC_ARCH_LLAMA, 28, 3072, 24, 8, 128, 8192, 131072, 128256, 1, 1e-5, 500000.0);
    llama3_rope(c, 32.0);
}
static void p_l8b(dec_config *c) {
    llama_like(c, DEC_ARCH_LLAMA, 32, 4096, 32, 8, 128, 14336, 131072, 128256, 0, 1e-5, 500000.0);
    llama3_rope(c, 8.0);
}
static void p_q05(dec_config *c) { llama_like(c, DEC_ARCH_QWEN2, 24, 896, 14, 2, 64, 4864, 32768, 151936, 1, 1e-6, 1e6); }
static void p_q7(dec_config *c) { llama_like(c, DEC_ARCH_QWEN2, 28, 3584, 28, 4, 128, 18944, 131072, 152064, 0, 1e-6, 1e6); }
static void p_q3_8(dec_config *c) { llama_like(c, DEC_ARCH_QWEN3, 36, 4096, 32, 8, 128, 12288, 40960, 151936, 0, 1e-6, 1e6); }
static void p_m7(dec_config *c) { llama_like(c, DEC_ARCH_MISTRAL, 32, 4096, 32, 8, 128, 14336, 32768, 32768, 0, 1e-5, 1e6); }
static void p_s135(dec_config *c) { llama_like(c, DEC_ARCH_LLAMA, 30, 576, 9, 3, 64, 1536, 8192, 49152, 1, 1e-5, 100000.0); }
static void p_s17(dec_config *c) { llama_like(c, DEC_ARCH_LLAMA, 24, 2048, 32, 32, 64, 8192, 8192, 49152, 1, 1e-5, 130000.0); }

static const preset presets[] = {
    {"tiny", p_tiny},
    {"small", p_small},
    {"gpt2", p_gpt2},
    {"gpt2-medium", p_gpt2m},
    {"gpt2-large", p_gpt2l},
    {"gpt2-xl", p_gpt2xl},
    {"llama-3.2-1b", p_l1b},
    {"llama-3.2-3b", p_l3b},
    {"llama-3.1-8b", p_l8b},
    {"qwen2.5-0.5b", p_q05},
    {"qwen2.5-7b", p_q7},
    {"qwen3-8b", p_q3_8},
    {"mistral-7b", p_m7},
    {"smollm2-135m", p_s135},
    {"smollm2-1.7b", p_s17},
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

const char *const *dec_preset_names(void) {
    static const char *names[NPRESETS + 1];
    for (int i = 0; i < NPRESETS; i++) names[i] = presets[i].name;
    names[NPRESETS] = NULL;
    return names;
}

zero_status dec_config_preset(dec_config *cfg, const char *name, zero_error *err) {
    for (int i = 0; name && i < NPRESETS; i++) {
        if (!strcmp(name, presets[i].name)) {
            presets[i].make(cfg);
            return ZERO_OK;
        }
    }
    char list[512];
    size_t at = 0;
    for (int i = 0; i < NPRESETS && at < sizeof list; i++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? ", " : "", presets[i].name);
    dec__errorf(err, "model '%s': expected one of %s, or a model directory", name ? name : "(null)", list);
    return ZERO_ERR_INVALID_ARG;
}

/* ---------------------------------------------------------------- checks */
zero_status dec_config_check(const dec_config *c, zero_error *err) {
    if (c->arch < 0 || c->arch >= DEC_ARCH_COUNT) {
        dec__errorf(err, "architecture %d: expected one of GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, "
                    "Qwen2ForCausalLM, Qwen3ForCausalLM, GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, "
                    "Phi3ForCausalLM", (int)c->arch);
        return ZERO_ERR_INVALID_ARG;
    }
    /* The limits keep B*T*QKV, V*C, F*C and B*H*T*T far below 2^62 for any B, T an int holds. */
    const struct { const char *name; int v, hi; } f[] = {
        {"n_layer", c->n_layer, 4096},     {"n_embd", c->n_embd, 1 << 16},    {"n_head", c->n_head, 1 << 12},
        {"n_kv_head", c->n_kv_head, 1 << 12}, {"head_dim", c->head_dim, 1 << 12}, {"n_inner", c->n_inner, 1 << 18},
        {"n_ctx", c->n_ctx, 1 << 24},      {"vocab", c->vocab, 1 << 24},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v < 1 || f[i].v > f[i].hi) {
            dec__errorf(err, "%s %d: expected an integer in [1, %d]", f[i].name, f[i].v, f[i].hi);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    if ((int64_t)c->n_head * c->head_dim > (1 << 18)) {
        dec__errorf(err, "n_head %d x head_dim %d: expected at most 262144 query columns", c->n_head, c->head_dim);
        return ZERO_ERR_INVALID_ARG;
    }
    if (c->n_head % c->n_kv_head) {
        dec__errorf(err, "n_kv_head %d: expected a divisor of n_head %d", c->n_kv_head, c->n_head);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!(c->norm_eps > 0.0) || !(c->norm_eps < 1.0)) {
        dec__errorf(err, "norm epsilon %g: expected a number in (0, 1)", c->norm_eps);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!(c->init_std >= 0.0) || !(c->init_std <= 1.0)) {
        dec__errorf(err, "initializer_range %g: expected a number in [0, 1]", c->init_std);
        return ZERO_ERR_INVALID_ARG;
    }
    if (c->sliding_window < 0) {
        dec__errorf(err, "sliding_window %d: expected 0 (none) or a window >= 1", c->sliding_window);
        return ZERO_ERR_INVALID_ARG;
    }
    if (c->arch == DEC_ARCH_GPT2) {
        if (c->n_embd % c->n_head) {
            dec__errorf(err, "n_embd %d: expected a multiple of n_head %d", c->n_embd, c->n_head);
            return ZERO_ERR_INVALID_ARG;
        }
        if (c->n_kv_head != c->n_head || c->head_dim * c->n_head != c->n_embd || !c->qkv_bias || !c->o_bias ||
            !c->mlp_bias || c->qk_norm) {
            dec__errorf(err, "GPT-2 has n_kv_head = n_head, head_dim = n_embd / n_head and biases everywhere "
                        "(got n_kv_head %d, head_dim %d)", c->n_kv_head, c->head_dim);
            return ZERO_ERR_INVALID_ARG;
        }
        return ZERO_OK;
    }
    if (c->head_dim % 2) {
        dec__errorf(err, "head_dim %d: expected an even number (RoPE rotates pairs)", c->head_dim);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!(c->rope_theta > 1.0) || !isfinite(c->rope_theta)) {
        dec__errorf(err, "rope_theta %g: expected a number > 1", c->rope_theta);
        return ZERO_ERR_INVALID_ARG;
    }
    if (c->rope_type != DEC_ROPE_DEFAULT && (!(c->rope_factor > 0.0) || !isfinite(c->rope_factor))) {
        dec__errorf(err, "rope factor %g: expected a number > 0", c->rope_factor);
        return ZERO_ERR_INVALID_ARG;
    }
    if (c->rotary_dim < 0 || c->rotary_dim > c->head_dim || c->rotary_dim % 2) {
        dec__errorf(err, "rotary dims %d: expected an even number <= head_dim %d (0: all)", c->rotary_dim, c->head_dim);
        return ZERO_ERR_INVALID_ARG;
    }
    if (c->has_pad && (c->pad_token < 0 || c->pad_token >= c->vocab)) {
        dec__errorf(err, "pad_token_id %d: expected a token in [0, %d)", c->pad_token, c->vocab);
        return ZERO_ERR_INVALID_ARG;
    }
    if (c->sandwich && !c->gemma) {
        dec__errorf(err, "sandwich norms without the Gemma computation: expected both (Gemma 2/3) or neither");
        return ZERO_ERR_INVALID_ARG;
    }
    const double scal[4] = {c->attn_scalar, c->attn_softcap, c->final_softcap, c->rope_local_theta};
    for (int i = 0; i < 4; i++) {
        if (!(scal[i] >= 0.0) || !isfinite(scal[i])) {
            dec__errorf(err, "%s %g: expected a finite number >= 0 (0: none)",
                        (const char *[]){"query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping",
                                         "rope_local_base_freq"}[i], scal[i]);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    if (c->sliding_pattern < 0) {
        dec__errorf(err, "sliding window pattern %d: expected 0 (none) or a period >= 1", c->sliding_pattern);
        return ZERO_ERR_INVALID_ARG;
    }
    if (c->rope_type == DEC_ROPE_LONGROPE) {
        const int rd = c->rotary_dim ? c->rotary_dim : c->head_dim;
        if (c->rope_n_factors != rd / 2 || c->rope_orig_ctx < 1 || !(c->rope_attn_factor > 0.0)) {
            dec__errorf(err, "longrope: %d factors, original_max_position_embeddings %d, attention factor %g: "
                        "expected %d factors (the rotated pairs), a context >= 1 and a factor > 0",
                        c->rope_n_factors, c->rope_orig_ctx, c->rope_attn_factor, rd / 2);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    if (c->rope_type == DEC_ROPE_LLAMA3 &&
        (!(c->rope_low_freq > 0) || !(c->rope_high_freq > c->rope_low_freq) || c->rope_orig_ctx < 1)) {
        dec__errorf(err, "llama3 rope: low_freq_factor %g, high_freq_factor %g, original_max_position_embeddings %d: "
                    "expected 0 < low < high and a context >= 1", c->rope_low_freq, c->rope_high_freq, c->rope_orig_ctx);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

zero_status dec_config_check_seq(const dec_config *c, int T, zero_error *err) {
    if (T < 1 || T > c->n_ctx) {
        dec__errorf(err, "sequence length %d: expected 1 .. %d (the model's %s)", T, c->n_ctx,
                    c->arch == DEC_ARCH_GPT2 ? "n_positions" : "max_position_embeddings");
        return ZERO_ERR_INVALID_ARG;
    }
    if ((c->arch == DEC_ARCH_QWEN2 || c->arch == DEC_ARCH_QWEN3) && c->sliding_window > 0 && T > c->sliding_window) {
        dec__errorf(err, "sequence length %d: longer than the model's sliding_window %d: %s's windowed layers "
                    "(use_sliding_window) are not supported yet (expected sequences of at most %d tokens)", T,
                    c->sliding_window, dec_arch_name(c->arch), c->sliding_window);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

int dec_layer_window(const dec_config *c, int l) {
    switch (c->arch) {
    case DEC_ARCH_MISTRAL:
    case DEC_ARCH_PHI3: return c->sliding_window;
    case DEC_ARCH_GEMMA2:
    case DEC_ARCH_GEMMA3: return c->sliding_pattern > 1 && (l + 1) % c->sliding_pattern ? c->sliding_window : 0;
    default: return 0;
    }
}

int dec_config_equal(const dec_config *a, const dec_config *b) {
    return a->arch == b->arch && a->n_layer == b->n_layer && a->n_embd == b->n_embd && a->n_head == b->n_head &&
           a->n_kv_head == b->n_kv_head && a->head_dim == b->head_dim && a->n_inner == b->n_inner &&
           a->n_ctx == b->n_ctx && a->vocab == b->vocab && a->tied == b->tied && a->qkv_bias == b->qkv_bias &&
           a->o_bias == b->o_bias && a->mlp_bias == b->mlp_bias && a->qk_norm == b->qk_norm &&
           a->norm_eps == b->norm_eps && a->rope_theta == b->rope_theta && a->rope_type == b->rope_type &&
           a->rope_factor == b->rope_factor && a->rope_low_freq == b->rope_low_freq &&
           a->rope_high_freq == b->rope_high_freq && a->rope_orig_ctx == b->rope_orig_ctx &&
           a->sliding_window == b->sliding_window && a->init_std == b->init_std && a->has_pad == b->has_pad &&
           (!a->has_pad || a->pad_token == b->pad_token) && a->gemma == b->gemma &&
           a->sandwich == b->sandwich && a->fused_names == b->fused_names && a->attn_scalar == b->attn_scalar &&
           a->attn_softcap == b->attn_softcap && a->final_softcap == b->final_softcap &&
           a->sliding_pattern == b->sliding_pattern && a->rope_local_theta == b->rope_local_theta &&
           a->rotary_dim == b->rotary_dim && a->rope_max_ctx == b->rope_max_ctx &&
           a->rope_n_factors == b->rope_n_factors && a->rope_attn_factor == b->rope_attn_factor &&
           !memcmp(a->rope_short, b->rope_short, sizeof a->rope_short) &&
           !memcmp(a->rope_long, b->rope_long, sizeof a->rope_long);
}

/* ---------------------------------------------------------------- layout */
void dec__dims_of(const dec_config *c, dec__dims *d) {
    d->C = c->n_embd;
    d->H = c->n_head;
    d->G = c->n_kv_head;
    d->D = c->head_dim;
    d->Q = c->n_head * c->head_dim;
    d->KV = c->n_kv_head * c->head_dim;
    d->QKV = d->Q + 2 * d->KV;
    d->F = c->n_inner;
    d->llama = dec_is_llama(c);
    d->FC = d->llama ? 2 * d->F : d->F;
}

/* A layer's tensors in registration order: the name after the unit's prefix, the shape (cols 0:
 * a vector), the flags and where the offset goes in the layout. */
typedef struct spec {
    const char *name;
    int64_t rows, cols;
    unsigned flags;
    uint64_t *slot; /* the layout field that receives the offset (NULL: inside a fused group) */
} spec;

static int layer_specs(const dec_config *c, dec__layout *L, spec *s) {
    dec__dims d;
    dec__dims_of(c, &d);
    const unsigned nd = ZERO_PARAM_NO_DECAY;
    int n = 0;
#define ADD(nm, r, cl, fl, sl) s[n++] = (spec){nm, r, cl, fl, sl}
    if (!d.llama) {
        ADD("ln_1.weight", d.C, 0, nd, &L->ln1_w);
        ADD("ln_1.bias", d.C, 0, nd, &L->ln1_b);
        ADD("attn.c_attn.weight", d.C, 3 * d.C, 0, &L->qkv_w);
        ADD("attn.c_attn.bias", 3 * d.C, 0, nd, &L->qkv_b);
        ADD("attn.c_proj.weight", d.C, d.C, 0, &L->o_w);
        ADD("attn.c_proj.bias", d.C, 0, nd, &L->o_b);
        ADD("ln_2.weight", d.C, 0, nd, &L->ln2_w);
        ADD("ln_2.bias", d.C, 0, nd, &L->ln2_b);
        ADD("mlp.c_fc.weight", d.C, d.F, 0, &L->fc_w);
        ADD("mlp.c_fc.bias", d.F, 0, nd, &L->fc_b);
        ADD("mlp.c_proj.weight", d.F, d.C, 0, &L->proj_w);
        ADD("mlp.c_proj.bias", d.C, 0, nd, &L->proj_b);
        return n;
    }
    ADD("input_layernorm.weight", d.C, 0, nd, &L->ln1_w);
    if (c->fused_names) { /* Phi-3: [q | k | v] and [gate | up] are one tensor each, zero's layout */
        ADD("self_attn.qkv_proj.weight", d.QKV, d.C, 0, &L->qkv_w);
        ADD("self_attn.o_proj.weight", d.C, d.Q, 0, &L->o_w);
        ADD("post_attention_layernorm.weight", d.C, 0, nd, &L->ln2_w);
        ADD("mlp.gate_up_proj.weight", 2 * (int64_t)d.F, d.C, 0, &L->fc_w);
        ADD("mlp.down_proj.weight", d.C, d.F, 0, &L->proj_w);
        return n;
    }
    ADD("self_attn.q_proj.weight", d.Q, d.C, 0, &L->qkv_w);
    ADD("self_attn.k_proj.weight", d.KV, d.C, 0, NULL);
    ADD("self_attn.v_proj.weight", d.KV, d.C, 0, NULL);
    if (c->qkv_bias) {
        ADD("self_attn.q_proj.bias", d.Q, 0, nd, &L->qkv_b);
        ADD("self_attn.k_proj.bias", d.KV, 0, nd, NULL);
        ADD("self_attn.v_proj.bias", d.KV, 0, nd, NULL);
    }
    if (c->qk_norm) {
        ADD("self_attn.q_norm.weight", d.D, 0, nd, &L->q_norm);
        ADD("self_attn.k_norm.weight", d.D, 0, nd, &L->k_norm);
    }
    ADD("self_attn.o_proj.weight", d.C, d.Q, 0, &L->o_w);
    if (c->o_bias) ADD("self_attn.o_proj.bias", d.C, 0, nd, &L->o_b);
    if (c->sandwich) { /* Gemma 2/3: post_attention_layernorm normalizes the attention's output */
        ADD("post_attention_layernorm.weight", d.C, 0, nd, &L->pan_w);
        ADD("pre_feedforward_layernorm.weight", d.C, 0, nd, &L->ln2_w);
    } else {
        ADD("post_attention_layernorm.weight", d.C, 0, nd, &L->ln2_w);
    }
    ADD("mlp.gate_proj.weight", d.F, d.C, 0, &L->fc_w);
    ADD("mlp.up_proj.weight", d.F, d.C, 0, NULL);
    if (c->mlp_bias) {
        ADD("mlp.gate_proj.bias", d.F, 0, nd, &L->fc_b);
        ADD("mlp.up_proj.bias", d.F, 0, nd, NULL);
    }
    ADD("mlp.down_proj.weight", d.C, d.F, 0, &L->proj_w);
    if (c->mlp_bias) ADD("mlp.down_proj.bias", d.C, 0, nd, &L->proj_b);
    if (c->sandwich) ADD("post_feedforward_layernorm.weight", d.C, 0, nd, &L->pfn_w);
#undef ADD
    return n;
}

static int final_specs(const dec_config *c, dec__layout *L, spec *s) {
    int n = 0;
    const unsigned nd = ZERO_PARAM_NO_DECAY;
    if (!dec_is_llama(c)) {
        s[n++] = (spec){"ln_f.weight", c->n_embd, 0, nd, &L->lnf_w};
        s[n++] = (spec){"ln_f.bias", c->n_embd, 0, nd, &L->lnf_b};
    } else {
        s[n++] = (spec){"model.norm.weight", c->n_embd, 0, nd, &L->lnf_w};
    }
    if (!c->tied) s[n++] = (spec){"lm_head.weight", c->vocab, c->n_embd, 0, &L->head_w};
    return n;
}

static int embed_specs(const dec_config *c, dec__layout *L, spec *s) {
    if (!dec_is_llama(c)) {
        s[0] = (spec){"wte.weight", c->vocab, c->n_embd, 0, NULL};
        s[1] = (spec){"wpe.weight", c->n_ctx, c->n_embd, 0, &L->wpe};
        return 2;
    }
    s[0] = (spec){"model.embed_tokens.weight", c->vocab, c->n_embd, 0, NULL};
    return 1;
}

static uint64_t spec_numel(const spec *s) { return (uint64_t)s->rows * (uint64_t)(s->cols ? s->cols : 1); }

/* Fills the offsets of a spec list; returns the unit's numel. */
static uint64_t place(spec *s, int n) {
    uint64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].slot) *s[i].slot = at;
        at += spec_numel(&s[i]);
    }
    return at;
}

#define MAX_SPECS 24

void dec__layout_of(const dec_config *c, dec__layout *L) {
    memset(L, 0xff, sizeof *L); /* every offset DEC__NONE (all bits set) until placed */
    spec s[MAX_SPECS];
    L->numel = place(s, layer_specs(c, L, s));
    L->final_numel = place(s, final_specs(c, L, s));
    L->emb_numel = place(s, embed_specs(c, L, s));
}

uint64_t dec_num_params(const dec_config *c) {
    dec__layout L;
    dec__layout_of(c, &L);
    return L.emb_numel + (uint64_t)c->n_layer * L.numel + L.final_numel;
}

int dec_num_units(const dec_config *c) { return c->n_layer + 2; }

const char *dec_unit_name(const dec_config *c, int unit, char *buf, size_t cap) {
    if (!buf || !cap) return buf;
    const int llama = dec_is_llama(c);
    if (unit == DEC_UNIT_EMBEDDINGS) snprintf(buf, cap, "%s", llama ? "embed_tokens" : "embeddings");
    else if (unit >= 1 && unit <= c->n_layer) snprintf(buf, cap, "%s.%d", llama ? "layers" : "h", unit - 1);
    else if (unit == c->n_layer + 1) snprintf(buf, cap, "%s", llama ? "norm" : "ln_f");
    else buf[0] = '\0';
    return buf;
}

uint64_t dec_unit_numel(const dec_config *c, int unit) {
    dec__layout L;
    dec__layout_of(c, &L);
    if (unit == DEC_UNIT_EMBEDDINGS) return L.emb_numel;
    if (unit >= 1 && unit <= c->n_layer) return L.numel;
    if (unit == c->n_layer + 1) return L.final_numel;
    return 0;
}

uint64_t dec_unit_offset(const dec_config *c, int unit) {
    uint64_t off = 0;
    for (int u = 0; u < unit && u < dec_num_units(c); u++) off += dec_unit_numel(c, u);
    return off;
}

int dec_num_tensors(const dec_config *c) {
    dec__layout L;
    spec s[MAX_SPECS];
    return embed_specs(c, &L, s) + c->n_layer * layer_specs(c, &L, s) + final_specs(c, &L, s);
}

zero_status dec_tensor_desc(const dec_config *c, int index, dec_param_desc *o) {
    dec__layout L;
    spec s[MAX_SPECS];
    const int ne = embed_specs(c, &L, s), nl = layer_specs(c, &L, s), nf = final_specs(c, &L, s);
    if (index < 0 || index >= ne + c->n_layer * nl + nf) return ZERO_ERR_INVALID_ARG;
    memset(o, 0, sizeof *o);
    int n, k;
    char prefix[32] = "";
    if (index < ne) {
        o->unit = DEC_UNIT_EMBEDDINGS;
        n = embed_specs(c, &L, s);
        k = index;
    } else if (index >= ne + c->n_layer * nl) {
        o->unit = c->n_layer + 1;
        n = final_specs(c, &L, s);
        k = index - ne - c->n_layer * nl;
    } else {
        const int l = (index - ne) / nl;
        o->unit = 1 + l;
        n = layer_specs(c, &L, s);
        k = (index - ne) % nl;
        snprintf(prefix, sizeof prefix, dec_is_llama(c) ? "model.layers.%d." : "h.%d.", l);
    }
    (void)n;
    for (int j = 0; j < k; j++) o->offset += spec_numel(&s[j]);
    o->ndim = s[k].cols ? 2 : 1;
    o->shape[0] = s[k].rows;
    if (o->ndim == 2) o->shape[1] = s[k].cols;
    o->numel = spec_numel(&s[k]);
    o->flags = s[k].flags;
    snprintf(o->name, sizeof o->name, "%s%s", prefix, s[k].name);
    return ZERO_OK;
}

/* ---------------------------------------------------------------- initialization */
double dec__normal(uint64_t *state) {
    /* 1 - u lies in (0, 1]: the logarithm is finite. */
    const double u1 = 1.0 - dec__uniform(state);
    const double u2 = dec__uniform(state);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fill_normal(float *dst, uint64_t n, double std, uint64_t *state) {
    for (uint64_t i = 0; i < n; i++) dst[i] = (float)(std * dec__normal(state));
}

static void fill_value(float *dst, uint64_t n, float v) {
    for (uint64_t i = 0; i < n; i++) dst[i] = v;
}

void dec_init_unit(const dec_config *c, int unit, uint64_t seed, float *dst) {
    /* One stream per (seed, unit): units initialize independently of one another. */
    uint64_t state = dec__mix64(seed ^ dec__mix64(0x6770743275ull + (uint64_t)unit));
    dec__layout L;
    spec s[MAX_SPECS];
    int n;
    if (unit == DEC_UNIT_EMBEDDINGS) n = embed_specs(c, &L, s);
    else if (unit >= 1 && unit <= c->n_layer) n = layer_specs(c, &L, s);
    else if (unit == c->n_layer + 1) n = final_specs(c, &L, s);
    else return;
    const int gpt2 = !dec_is_llama(c);
    const double std = c->init_std, proj_std = std / sqrt(2.0 * c->n_layer);
    uint64_t at = 0;
    for (int k = 0; k < n; k++) {
        const uint64_t cnt = spec_numel(&s[k]);
        if (s[k].cols) {
            /* GPT-2 scales its two residual projections (attn.c_proj, mlp.c_proj) */
            const int proj = gpt2 && strstr(s[k].name, "c_proj");
            fill_normal(dst + at, cnt, proj ? proj_std : std, &state);
        } else {
            /* norm gains are 1 (Gemma's (1 + w) gains: w = 0), biases 0 */
            const int gain = !strstr(s[k].name, "bias") && !c->gemma;
            fill_value(dst + at, cnt, gain ? 1.0f : 0.0f);
        }
        at += cnt;
    }
}
