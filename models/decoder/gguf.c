/* models/decoder/gguf.c — the decoder's GGUF plan (tensor names, sources, row orders) and metadata
 * (hyperparameters, tokenizer) as llama.cpp reads them. Rules: gguf.h, docs/CHECKPOINT.md ("GGUF"). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <ctype.h>
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
    {"tekken", "Split(Regex:[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
               "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|\\p{N}| "
               "?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+,Isolated,invert=0) | "
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

enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

#define METASPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */
/* The one SentencePiece text rule llama.cpp's "llama" tokenizer follows (add_space_prefix): every
 * space a metaspace and one before each text segment, after a special token too — Llama 2's and
 * Mistral v0.1's tokenizer.json, whose normalizer writes it so. (A Metaspace pre-tokenizer adds no
 * metaspace before a segment that starts with a space, which llama.cpp does: not this rule.) */
static const char spm_normalizer[] = "Prepend(prepend=" METASPACE ") | Replace(String: ,content=" METASPACE ")";

static int is_byte_token(const char *t, size_t n) {
    return n == 6 && !strncmp(t, "<0x", 3) && isxdigit((unsigned char)t[3]) && isxdigit((unsigned char)t[4]) &&
           t[5] == '>';
}

/* The characters of n bytes of UTF-8 (llama.cpp's merging starts from one symbol per character). */
static int utf8_chars(const char *t, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)t[i] & 0xC0) != 0x80;
    return k;
}

typedef struct {
    int32_t a, b;
} merge_pair;
static int pair_cmp(const void *x, const void *y) {
    const merge_pair *p = x, *q = y;
    return p->a != q->a ? (p->a < q->a ? -1 : 1) : p->b != q->b ? (p->b < q->b ? -1 : 1) : 0;
}

/* SentencePiece BPE in llama.cpp: adjacent symbols merge by the score of the piece they make, the
 * highest first; BPE merges the pair of the lowest rank. The two agree when every piece a merge
 * makes is made by every split of it into two symbols, the merges come grouped by the piece they
 * make in the order of its first merge, and every longer piece is made by some merge — how
 * SentencePiece's vocabularies are converted to tokenizer.json. Then a piece's score is minus the
 * rank of its first merge (0 for single characters, bytes and added tokens). Says where a
 * tokenizer's merges are not so: its GGUF would split text otherwise. */
static zero_status spm_scores(zero_tokenizer *tok, int32_t tv, float *scores, zero_error *err) {
    const int32_t nm = zero_tokenizer_num_merges(tok);
    int32_t *first = malloc((size_t)tv * sizeof *first);
    merge_pair *pairs = malloc((size_t)(nm > 0 ? nm : 1) * sizeof *pairs);
    char *buf = malloc(4096);
    zero_status st = first && pairs && buf ? ZERO_OK : ZERO_ERR_NOMEM;
    if (st) dec__errorf(err, "GGUF export: out of memory listing the tokenizer");
    for (int32_t id = 0; !st && id < tv; id++) first[id] = -1;
    int32_t prev = -1; /* the first merge of the piece the previous merge made */
    for (int32_t r = 0; !st && r < nm; r++) {
        int32_t a, b;
        size_t na, nb;
        zero_tokenizer_merge(tok, r, &a, &b);
        const char *ta = zero_tokenizer_token(tok, a, &na), *tb = zero_tokenizer_token(tok, b, &nb);
        if (na + nb >= 4096) {
            dec__errorf(err, "GGUF export: merge %d makes a piece of %zu bytes: expected below 4096", (int)r, na + nb);
            st = ZERO_ERR_UNSUPPORTED;
            break;
        }
        memcpy(buf, ta, na), memcpy(buf + na, tb, nb), buf[na + nb] = 0;
        const int32_t id = zero_tokenizer_token_id(tok, buf);
        if (id < 0 || id >= tv) {
            dec__errorf(err, "GGUF export: merge %d ('%s' + '%s') makes '%s', which is not a token", (int)r, ta, tb,
                        buf);
            st = ZERO_ERR_UNSUPPORTED;
            break;
        }
        if (first[id] < 0) first[id] = r;
        if (first[id] < prev) {
            dec__errorf(
                err,
                "GGUF export of a SentencePiece BPE tokenizer: merge %d ('%s' + '%s') makes '%s' after merges of "
                "other pieces: its merges are not grouped by the piece they make, as SentencePiece's are, so "
                "llama.cpp (which merges by the piece's score) would split text otherwise; not supported yet",
                (int)r, ta, tb, buf);
            st = ZERO_ERR_UNSUPPORTED;
            break;
        }
        prev = first[id];
        pairs[r] = (merge_pair){a, b};
    }
    if (!st) qsort(pairs, (size_t)nm, sizeof *pairs, pair_cmp);
    for (int32_t id = 0; !st && id < tv; id++) {
        size_t n = 0;
        const char *t = zero_tokenizer_token(tok, id, &n);
        scores[id] = first[id] >= 0 ? -(float)first[id] : 0.0f;
        if (!t || zero_tokenizer_is_added(tok, id) || is_byte_token(t, n) || utf8_chars(t, n) < 2) continue;
        if (first[id] < 0) {
            dec__errorf(err,
                        "GGUF export of a SentencePiece BPE tokenizer: no merge makes the token '%s' (%d), which "
                        "llama.cpp would make of its parts: its merges are not SentencePiece's; not supported yet",
                        t, (int)id);
            st = ZERO_ERR_UNSUPPORTED;
            break;
        }
        for (size_t k = 1; k < n && !st; k++) { /* every split into two symbols must be a merge */
            if (((unsigned char)t[k] & 0xC0) == 0x80) continue;
            memcpy(buf, t, k), buf[k] = 0;
            const int32_t c = zero_tokenizer_token_id(tok, buf), d = zero_tokenizer_token_id(tok, t + k);
            const int cs = c >= 0 && c < tv && (first[c] >= 0 || utf8_chars(buf, k) == 1);
            const int ds = d >= 0 && d < tv && (first[d] >= 0 || utf8_chars(t + k, n - k) == 1);
            const merge_pair key = {c, d};
            if (cs && ds && !bsearch(&key, pairs, (size_t)nm, sizeof *pairs, pair_cmp)) {
                dec__errorf(err,
                            "GGUF export of a SentencePiece BPE tokenizer: '%s' + '%s' makes the token '%s' in "
                            "llama.cpp but is not one of the merges: its merges are not SentencePiece's (llama.cpp "
                            "would split text otherwise); not supported yet",
                            buf, t + k, t);
                st = ZERO_ERR_UNSUPPORTED;
            }
        }
    }
    free(first), free(pairs), free(buf);
    return st;
}

static zero_status tokenizer_metadata(const dec_config *c, zero_tokenizer *tok, zero_gguf_writer *w, zero_error *err) {
    const int spm = !strcmp(zero_tokenizer_kind(tok), "SentencePiece BPE");
    const char *sig = zero_tokenizer_pre_tokenizer(tok), *pre = spm ? "default" : NULL;
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0] && !pre; i++)
        if (!strcmp(sig, pre_names[i].sig)) pre = pre_names[i].pre;
    if (spm && (*sig || strcmp(zero_tokenizer_normalizer(tok), spm_normalizer) != 0)) {
        dec__errorf(err,
                    "GGUF export: the SentencePiece tokenizer's normalizer '%.200s' and pre-tokenizer '%.200s' are "
                    "not Llama 2's (a metaspace before each text segment and for every space, no pre-tokenizer): "
                    "llama.cpp would tokenize text otherwise (e.g. a segment that starts with a space); not "
                    "supported yet",
                    zero_tokenizer_normalizer(tok), sig);
        return ZERO_ERR_UNSUPPORTED;
    }
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
    float *scores = spm ? calloc((size_t)V, sizeof *scores) : NULL;
    const int32_t nm = spm ? 0 : zero_tokenizer_num_merges(tok); /* SentencePiece: scores instead */
    char **merges = calloc((size_t)(nm > 0 ? nm : 1), sizeof *merges);
    zero_status st = ZERO_OK;
    if (!toks || !lens || !types || !pads || !merges || (spm && !scores)) st = ZERO_ERR_NOMEM;
    if (!st && spm && (st = spm_scores(tok, tv, scores, err)) != ZERO_OK) {
        free(merges), free(toks), free(lens), free(types), free(pads), free(scores);
        return st;
    }
    for (int32_t id = 0; !st && id < V; id++) {
        size_t n = 0;
        const char *t = id < tv ? zero_tokenizer_token(tok, id, &n) : NULL;
        if (!t) { /* an embedding row no token uses (a vocabulary padded past the tokenizer) */
            lens[id] = (size_t)snprintf(pads + (size_t)id * 24, 24, "[PAD%d]", (int)id);
            toks[id] = pads + (size_t)id * 24, types[id] = TT_UNUSED;
            continue;
        }
        toks[id] = t, lens[id] = n;
        types[id] = spm && id == zero_tokenizer_unk(tok) ? TT_UNKNOWN
                    : !zero_tokenizer_is_added(tok, id)  ? (spm && is_byte_token(t, n) ? TT_BYTE : TT_NORMAL)
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
    W(zero_gguf_set_string(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2"));
    W(zero_gguf_set_string(w, "tokenizer.ggml.pre", pre));
    W(zero_gguf_set_strings(w, "tokenizer.ggml.tokens", toks, lens, (uint64_t)V));
    if (spm) W(zero_gguf_set_f32s(w, "tokenizer.ggml.scores", scores, (uint64_t)V));
    W(zero_gguf_set_i32s(w, "tokenizer.ggml.token_type", types, (uint64_t)V));
    if (!spm) W(zero_gguf_set_strings(w, "tokenizer.ggml.merges", (const char *const *)merges, NULL, (uint64_t)nm));
    if (bos >= 0) W(zero_gguf_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos));
    if (eos >= 0) W(zero_gguf_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos));
    if (spm && zero_tokenizer_unk(tok) >= 0)
        W(zero_gguf_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)zero_tokenizer_unk(tok)));
    if (zero_tokenizer_pad(tok) >= 0)
        W(zero_gguf_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)zero_tokenizer_pad(tok)));
    W(zero_gguf_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos));
    W(zero_gguf_set_bool(w, "tokenizer.ggml.add_eos_token", add_eos));
    if (spm) W(zero_gguf_set_bool(w, "tokenizer.ggml.add_space_prefix", 1));
    const char *tmpl = zero_tokenizer_chat_template(tok);
    if (tmpl) W(zero_gguf_set_string(w, "tokenizer.chat_template", tmpl));
    for (int32_t r = 0; merges && r < nm; r++) free(merges[r]);
    free(merges), free(toks), free(lens), free(types), free(pads), free(scores);
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
