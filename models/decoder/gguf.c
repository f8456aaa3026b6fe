/* models/decoder/gguf.c — the decoder's GGUF plan (tensor names, sources, row orders) and metadata
 * (hyperparameters, tokenizer) as llama.cpp reads them. Rules: gguf.h, docs/CHECKPOINT.md ("GGUF"). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder_internal.h"
#include "decoder/gguf.h"

int64_t dec_gguf_perm_row(int64_t r, int64_t rows, int heads) {
    const int64_t hd = rows / heads, half = hd / 2, h = r / hd, w = r % hd;
    return h * hd + (w % 2) * half + w / 2;
}

/* llama.cpp's architecture of a configuration, or NULL with err set. */
static const char *arch_of(const dec_config *c, zero_error *err) {
    switch (c->arch) {
    case DEC_ARCH_GPT2: return "gpt2";
    case DEC_ARCH_LLAMA:
    case DEC_ARCH_MISTRAL: return "llama";
    case DEC_ARCH_QWEN2: return "qwen2";
    case DEC_ARCH_QWEN3: return "qwen3";
    default: break;
    }
    dec__errorf(err, "GGUF export of %s is not supported yet (Llama, Mistral, Qwen2, Qwen3, SmolLM and GPT-2 are)",
                dec_arch_name(c->arch));
    return NULL;
}

typedef struct builder {
    dec_gguf_plan *p;
    int cap;
    int failed;
} builder;

static dec_gguf_tensor *add(builder *b, const char *src, int64_t rows, int64_t cols, int ndim, dec_gguf_order order,
                            int heads, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static dec_gguf_tensor *add(builder *b, const char *src, int64_t rows, int64_t cols, int ndim, dec_gguf_order order,
                            int heads, const char *fmt, ...) {
    if (b->failed) return NULL;
    if (b->p->n == b->cap) {
        const int cap = b->cap ? 2 * b->cap : 64;
        dec_gguf_tensor *t = realloc(b->p->t, (size_t)cap * sizeof *t);
        if (!t) {
            b->failed = 1;
            return NULL;
        }
        b->p->t = t, b->cap = cap;
    }
    dec_gguf_tensor *t = &b->p->t[b->p->n++];
    memset(t, 0, sizeof *t);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    snprintf(t->src, sizeof t->src, "%s", src);
    t->rows = rows, t->cols = cols, t->ndim = ndim, t->order = order, t->heads = heads;
    return t;
}

/* A vector: (1, n) in F32. */
#define VEC(src, n, ...)                   add(&b, src, 1, n, 1, DEC_GGUF_ROWS, 0, __VA_ARGS__)
#define MAT(src, r, cl, order, heads, ...) add(&b, src, r, cl, 2, order, heads, __VA_ARGS__)

zero_status dec_gguf_plan_make(const dec_config *c, dec_gguf_plan *out, zero_error *err) {
    memset(out, 0, sizeof *out);
    if (!(out->arch = arch_of(c, err))) return ZERO_ERR_UNSUPPORTED;
    if (c->sliding_window > 0 && c->sliding_window < c->n_ctx) {
        dec__errorf(err,
                    "GGUF export of %s with sliding_window %d (below its context of %d) is not supported yet: "
                    "llama.cpp's %s architecture attends to every earlier token",
                    dec_arch_name(c->arch), c->sliding_window, c->n_ctx, out->arch);
        return ZERO_ERR_UNSUPPORTED;
    }
    if (c->rope_type == DEC_ROPE_LONGROPE) {
        dec__errorf(err, "GGUF export of LongRoPE scaling is not supported yet");
        return ZERO_ERR_UNSUPPORTED;
    }
    dec__dims d;
    dec__dims_of(c, &d);
    builder b = {out, 0, 0};
    char s[128];
    const int llama = c->arch == DEC_ARCH_LLAMA || c->arch == DEC_ARCH_MISTRAL; /* llama.cpp's interleaved RoPE */
    const dec_gguf_order qk = llama ? DEC_GGUF_ROPE_PERM : DEC_GGUF_ROWS;
    if (c->arch == DEC_ARCH_GPT2) {
        MAT("wte.weight", c->vocab, d.C, DEC_GGUF_ROWS, 0, "token_embd.weight");
        MAT("wpe.weight", c->n_ctx, d.C, DEC_GGUF_ROWS, 0, "position_embd.weight");
        for (int l = 0; l < c->n_layer; l++) {
#define H(x) (snprintf(s, sizeof s, "h.%d.%s", l, x), s)
            VEC(H("ln_1.weight"), d.C, "blk.%d.attn_norm.weight", l);
            VEC(H("ln_1.bias"), d.C, "blk.%d.attn_norm.bias", l);
            MAT(H("attn.c_attn.weight"), 3 * (int64_t)d.C, d.C, DEC_GGUF_TRANSPOSE, 0, "blk.%d.attn_qkv.weight", l);
            VEC(H("attn.c_attn.bias"), 3 * (int64_t)d.C, "blk.%d.attn_qkv.bias", l);
            MAT(H("attn.c_proj.weight"), d.C, d.C, DEC_GGUF_TRANSPOSE, 0, "blk.%d.attn_output.weight", l);
            VEC(H("attn.c_proj.bias"), d.C, "blk.%d.attn_output.bias", l);
            VEC(H("ln_2.weight"), d.C, "blk.%d.ffn_norm.weight", l);
            VEC(H("ln_2.bias"), d.C, "blk.%d.ffn_norm.bias", l);
            MAT(H("mlp.c_fc.weight"), d.F, d.C, DEC_GGUF_TRANSPOSE, 0, "blk.%d.ffn_up.weight", l);
            VEC(H("mlp.c_fc.bias"), d.F, "blk.%d.ffn_up.bias", l);
            MAT(H("mlp.c_proj.weight"), d.C, d.F, DEC_GGUF_TRANSPOSE, 0, "blk.%d.ffn_down.weight", l);
            VEC(H("mlp.c_proj.bias"), d.C, "blk.%d.ffn_down.bias", l);
#undef H
        }
        VEC("ln_f.weight", d.C, "output_norm.weight");
        VEC("ln_f.bias", d.C, "output_norm.bias");
        if (!c->tied) MAT("lm_head.weight", c->vocab, d.C, DEC_GGUF_ROWS, 0, "output.weight");
    } else {
        MAT("model.embed_tokens.weight", c->vocab, d.C, DEC_GGUF_ROWS, 0, "token_embd.weight");
        for (int l = 0; l < c->n_layer; l++) {
#define L(x) (snprintf(s, sizeof s, "model.layers.%d.%s", l, x), s)
            VEC(L("input_layernorm.weight"), d.C, "blk.%d.attn_norm.weight", l);
            MAT(L("self_attn.q_proj.weight"), d.Q, d.C, qk, c->n_head, "blk.%d.attn_q.weight", l);
            MAT(L("self_attn.k_proj.weight"), d.KV, d.C, qk, c->n_kv_head, "blk.%d.attn_k.weight", l);
            MAT(L("self_attn.v_proj.weight"), d.KV, d.C, DEC_GGUF_ROWS, 0, "blk.%d.attn_v.weight", l);
            if (c->qkv_bias) { /* a bias is permuted as its rows are */
                add(&b, L("self_attn.q_proj.bias"), 1, d.Q, 1, qk, c->n_head, "blk.%d.attn_q.bias", l);
                add(&b, L("self_attn.k_proj.bias"), 1, d.KV, 1, qk, c->n_kv_head, "blk.%d.attn_k.bias", l);
                VEC(L("self_attn.v_proj.bias"), d.KV, "blk.%d.attn_v.bias", l);
            }
            if (c->qk_norm) {
                VEC(L("self_attn.q_norm.weight"), d.D, "blk.%d.attn_q_norm.weight", l);
                VEC(L("self_attn.k_norm.weight"), d.D, "blk.%d.attn_k_norm.weight", l);
            }
            MAT(L("self_attn.o_proj.weight"), d.C, d.Q, DEC_GGUF_ROWS, 0, "blk.%d.attn_output.weight", l);
            if (c->o_bias) VEC(L("self_attn.o_proj.bias"), d.C, "blk.%d.attn_output.bias", l);
            VEC(L("post_attention_layernorm.weight"), d.C, "blk.%d.ffn_norm.weight", l);
            MAT(L("mlp.gate_proj.weight"), d.F, d.C, DEC_GGUF_ROWS, 0, "blk.%d.ffn_gate.weight", l);
            MAT(L("mlp.up_proj.weight"), d.F, d.C, DEC_GGUF_ROWS, 0, "blk.%d.ffn_up.weight", l);
            MAT(L("mlp.down_proj.weight"), d.C, d.F, DEC_GGUF_ROWS, 0, "blk.%d.ffn_down.weight", l);
            if (c->mlp_bias) {
                VEC(L("mlp.gate_proj.bias"), d.F, "blk.%d.ffn_gate.bias", l);
                VEC(L("mlp.up_proj.bias"), d.F, "blk.%d.ffn_up.bias", l);
                VEC(L("mlp.down_proj.bias"), d.C, "blk.%d.ffn_down.bias", l);
            }
#undef L
        }
        VEC("model.norm.weight", d.C, "output_norm.weight");
        if (!c->tied) MAT("lm_head.weight", c->vocab, d.C, DEC_GGUF_ROWS, 0, "output.weight");
        if (c->rope_type == DEC_ROPE_LLAMA3) { /* llama.cpp divides each pair's frequency by its factor */
            const int half = d.D / 2;
            if (!(out->values = malloc((size_t)half * sizeof *out->values))) b.failed = 1;
            for (int i = 0; i < half && out->values; i++) {
                const double freq = pow(c->rope_theta, -2.0 * i / d.D), wavelen = 2.0 * 3.14159265358979323846 / freq;
                const double orig = c->rope_orig_ctx, lo = orig / c->rope_low_freq, hi = orig / c->rope_high_freq;
                double f = 1.0;
                if (wavelen > lo) f = c->rope_factor;
                else if (wavelen >= hi) {
                    const double sm = (orig / wavelen - c->rope_low_freq) / (c->rope_high_freq - c->rope_low_freq);
                    f = 1.0 / ((1.0 - sm) / c->rope_factor + sm);
                }
                out->values[i] = (float)f;
            }
            dec_gguf_tensor *t = add(&b, "", 1, half, 1, DEC_GGUF_VALUES, 0, "rope_freqs.weight");
            if (t) t->values = out->values;
        }
    }
    if (b.failed) {
        dec_gguf_plan_free(out);
        dec__errorf(err, "GGUF export: out of memory planning the tensors");
        return ZERO_ERR_NOMEM;
    }
    return ZERO_OK;
}

void dec_gguf_plan_free(dec_gguf_plan *p) {
    if (!p) return;
    free(p->t);
    free(p->values);
    memset(p, 0, sizeof *p);
}

/* ---------------------------------------------------------------- the tokenizer */
/* tokenizer.ggml.pre: llama.cpp's name of a byte-level pre-tokenizer, by the pipeline's signature
 * (zero_tokenizer_pre_tokenizer). */
static const struct {
    const char *pre, *sig;
} pre_names[] = {
    {"llama-bpe", "Split(Regex:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                  "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+,Isolated,invert=0) | "
                  "ByteLevel(add_prefix_space=0,use_regex=0)"},
    {"qwen2", "Split(Regex:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
              "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+,Isolated,invert=0) | "
              "ByteLevel(add_prefix_space=0,use_regex=0)"},
    {"smollm", "Digits(individual_digits=1) | ByteLevel(add_prefix_space=0,use_regex=1)"},
    {"gpt-2", "ByteLevel(add_prefix_space=0,use_regex=1)"},
};

/* llama.cpp marks added tokens that look like control tokens CONTROL even when not special. */
static int looks_special(const char *s, size_t n) {
    static const char bar[] = "\xef\xbd\x9c"; /* U+FF5C, the full-width bar of some templates */
    if (n >= 4 && !strncmp(s, "<|", 2) && !strncmp(s + n - 2, "|>", 2)) return 1;
    if (n >= 8 && !strncmp(s, "<", 1) && !strncmp(s + 1, bar, 3) && !strncmp(s + n - 4, bar, 3) && s[n - 1] == '>')
        return 1;
    return (n == 5 && !strncmp(s, "<pad>", 5)) || (n == 6 && !strncmp(s, "<mask>", 6));
}

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5 };

static zero_status tokenizer_metadata(const dec_config *c, zero_tokenizer *tok, zero_gguf_writer *w, zero_error *err) {
    if (strcmp(zero_tokenizer_kind(tok), "byte-level BPE") != 0) {
        dec__errorf(err,
                    "GGUF export of a %s tokenizer is not supported yet (byte-level BPE tokenizers are: Llama 3, "
                    "Qwen2/3, SmolLM, GPT-2)",
                    zero_tokenizer_kind(tok));
        return ZERO_ERR_UNSUPPORTED;
    }
    const char *sig = zero_tokenizer_pre_tokenizer(tok), *pre = NULL;
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0] && !pre; i++)
        if (!strcmp(sig, pre_names[i].sig)) pre = pre_names[i].pre;
    if (!pre) {
        dec__errorf(err,
                    "GGUF export: the tokenizer's pre-tokenizer '%.300s' is not one llama.cpp names (Llama 3's, "
                    "Qwen2's, SmolLM's, GPT-2's): a GGUF of it would split text differently; not supported yet",
                    sig);
        return ZERO_ERR_UNSUPPORTED;
    }
    const int32_t V = c->vocab, tv = zero_tokenizer_vocab_size(tok);
    if (tv > V) {
        dec__errorf(err,
                    "GGUF export: the tokenizer has %d tokens, the model %d embedding rows: expected at most as "
                    "many tokens as rows",
                    tv, V);
        return ZERO_ERR_INVALID_ARG;
    }
    const char **toks = malloc((size_t)V * sizeof *toks);
    size_t *lens = malloc((size_t)V * sizeof *lens);
    int32_t *types = malloc((size_t)V * sizeof *types);
    char *pads = malloc((size_t)V * 24);
    const int32_t nm = zero_tokenizer_num_merges(tok);
    char **merges = calloc((size_t)(nm > 0 ? nm : 1), sizeof *merges);
    zero_status st = ZERO_OK;
    if (!toks || !lens || !types || !pads || !merges) st = ZERO_ERR_NOMEM;
    for (int32_t id = 0; !st && id < V; id++) {
        size_t n = 0;
        const char *t = id < tv ? zero_tokenizer_token(tok, id, &n) : NULL;
        if (!t) { /* an embedding row no token uses (a vocabulary padded past the tokenizer) */
            lens[id] = (size_t)snprintf(pads + (size_t)id * 24, 24, "[PAD%d]", (int)id);
            toks[id] = pads + (size_t)id * 24, types[id] = TT_UNUSED;
            continue;
        }
        toks[id] = t, lens[id] = n;
        types[id] = !zero_tokenizer_is_added(tok, id)                           ? TT_NORMAL
                    : zero_tokenizer_is_special(tok, id) || looks_special(t, n) ? TT_CONTROL
                                                                                : TT_USER;
    }
    for (int32_t r = 0; !st && r < nm; r++) { /* "a b", a space inside a token written as U+0120 (Ġ) */
        int32_t a, bb;
        size_t na, nb;
        zero_tokenizer_merge(tok, r, &a, &bb);
        const char *ta = zero_tokenizer_token(tok, a, &na), *tb = zero_tokenizer_token(tok, bb, &nb);
        char *m = malloc(2 * (na + nb) + 2);
        if (!m) {
            st = ZERO_ERR_NOMEM;
            break;
        }
        size_t k = 0;
        for (int part = 0; part < 2; part++) {
            const char *x = part ? tb : ta;
            const size_t xn = part ? nb : na;
            if (part) m[k++] = ' ';
            for (size_t i = 0; i < xn; i++) {
                if (x[i] == ' ') m[k++] = (char)0xC4, m[k++] = (char)0xA0;
                else m[k++] = x[i];
            }
        }
        m[k] = 0;
        merges[r] = m;
    }
    if (st == ZERO_ERR_NOMEM) dec__errorf(err, "GGUF export: out of memory listing the tokenizer");
    /* what encoding adds around a text (the post-processor): BOS first, EOS last */
    zero_token_ids ids = {0};
    const int32_t bos = zero_tokenizer_bos(tok), eos = zero_tokenizer_eos(tok);
    int add_bos = 0, add_eos = 0;
    if (!st && zero_tokenizer_encode(tok, "", 0, ZERO_TOK_ADD_SPECIAL, &ids) == ZERO_OK) {
        add_bos = ids.n > 0 && bos >= 0 && ids.ids[0] == bos;
        add_eos = ids.n > (size_t)add_bos && eos >= 0 && ids.ids[ids.n - 1] == eos;
    }
    zero_token_ids_free(&ids);
#define W(call)                                                                                                   \
    do {                                                                                                          \
        if (!st && (st = (call)) != ZERO_OK) dec__errorf(err, "GGUF export: %s", zero_gguf_writer_last_error(w)); \
    } while (0)
    W(zero_gguf_set_string(w, "tokenizer.ggml.model", "gpt2"));
    W(zero_gguf_set_string(w, "tokenizer.ggml.pre", pre));
    W(zero_gguf_set_strings(w, "tokenizer.ggml.tokens", toks, lens, (uint64_t)V));
    W(zero_gguf_set_i32s(w, "tokenizer.ggml.token_type", types, (uint64_t)V));
    W(zero_gguf_set_strings(w, "tokenizer.ggml.merges", (const char *const *)merges, NULL, (uint64_t)nm));
    if (bos >= 0) W(zero_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos));
    if (eos >= 0) W(zero_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos));
    if (zero_tokenizer_pad(tok) >= 0)
        W(zero_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)zero_tokenizer_pad(tok)));
    W(zero_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos));
    W(zero_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", add_eos));
    const char *tmpl = zero_tokenizer_chat_template(tok);
    if (tmpl) W(zero_gguf_set_string(w, "tokenizer.chat_template", tmpl));
    for (int32_t r = 0; merges && r < nm; r++) free(merges[r]);
    free(merges), free(toks), free(lens), free(types), free(pads);
    return st;
}

zero_status dec_gguf_metadata(const dec_config *c, const dec_gguf_plan *p, zero_tokenizer *tok, const char *name,
                              uint32_t file_type, zero_gguf_writer *w, zero_error *err) {
    if (!tok) {
        dec__errorf(err, "GGUF export: the model has no tokenizer.json to describe (a GGUF without its tokenizer does "
                         "not run in llama.cpp)");
        return ZERO_ERR_INVALID_ARG;
    }
    dec__dims d;
    dec__dims_of(c, &d);
    const char *a = p->arch;
    char k[96];
    zero_status st = ZERO_OK;
#define KEY(x) (snprintf(k, sizeof k, "%s.%s", a, x), k)
    W(zero_gguf_set_string(w, "general.architecture", a));
    W(zero_gguf_set_string(w, "general.name", name && *name ? name : a));
    W(zero_gguf_set_u32(w, "general.file_type", file_type));
    W(zero_gguf_set_u32(w, "general.quantization_version", 2));
    W(zero_gguf_set_u32(w, KEY("context_length"), (uint32_t)c->n_ctx));
    W(zero_gguf_set_u32(w, KEY("embedding_length"), (uint32_t)d.C));
    W(zero_gguf_set_u32(w, KEY("block_count"), (uint32_t)c->n_layer));
    W(zero_gguf_set_u32(w, KEY("feed_forward_length"), (uint32_t)d.F));
    W(zero_gguf_set_u32(w, KEY("attention.head_count"), (uint32_t)c->n_head));
    if (c->arch == DEC_ARCH_GPT2) {
        W(zero_gguf_set_f32(w, KEY("attention.layer_norm_epsilon"), (float)c->norm_eps));
    } else {
        W(zero_gguf_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_kv_head));
        W(zero_gguf_set_f32(w, KEY("rope.freq_base"), (float)c->rope_theta));
        W(zero_gguf_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)c->norm_eps));
        if (d.D * c->n_head != d.C) { /* llama.cpp's default head width is n_embd / n_head */
            W(zero_gguf_set_u32(w, KEY("attention.key_length"), (uint32_t)d.D));
            W(zero_gguf_set_u32(w, KEY("attention.value_length"), (uint32_t)d.D));
        }
        if (!strcmp(a, "llama")) {
            W(zero_gguf_set_u32(w, KEY("vocab_size"), (uint32_t)c->vocab));
            W(zero_gguf_set_u32(w, KEY("rope.dimension_count"), (uint32_t)d.D));
        }
        if (c->rope_type == DEC_ROPE_LINEAR) {
            W(zero_gguf_set_string(w, KEY("rope.scaling.type"), "linear"));
            W(zero_gguf_set_f32(w, KEY("rope.scaling.factor"), (float)c->rope_factor));
        }
    }
#undef KEY
    if (!st) st = tokenizer_metadata(c, tok, w, err);
    return st;
}
