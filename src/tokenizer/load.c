/* src/tokenizer/load.c — reads a Hugging Face tokenizer.json (and tokenizer_config.json) into the
 * pipeline of internal.h; anything not supported is refused with a message naming the field. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <utf8proc.h>

#include "tokenizer/internal.h"

/* What a tokenizer.json and a tokenizer_config.json may be (docs/SECURITY.md): the largest
 * published ones (Gemma 3: 33 MB, ~1.8M JSON values; its tokenizer_config.json 1.2 MB) fit with
 * room. Past these a file is refused before it is read or parsed. */
#define TK_MAX_BYTES (UINT64_C(128) << 20)
#define TK_MAX_VALUES (UINT64_C(1) << 22)
#define TK_CONFIG_MAX_BYTES (UINT64_C(16) << 20)
#define TK_CONFIG_MAX_VALUES (UINT64_C(1) << 21)

/* GPT-2's pre-tokenizer regex: ByteLevel with use_regex. */
static const char GPT2_REGEX[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct loader {
    zero_tokenizer *t;
    char *msg; /* 512 bytes */
} loader;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        zero__tk_errorf(L->msg, __VA_ARGS__);                                                      \
        return -1;                                                                                 \
    } while (0)

static int nomem(loader *L) {
    zero__tk_errorf(L->msg, "out of memory reading tokenizer.json");
    return -1;
}

/* A boolean field: absent or null gives def; anything but a boolean is refused. */
static int get_bool(loader *L, const cJSON *o, const char *path, const char *key, int def, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v)) FAIL("tokenizer.json: %s.%s: expected true or false", path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

static const char *get_str(loader *L, const cJSON *o, const char *path, const char *key, int required) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if ((!v || cJSON_IsNull(v)) && !required) return NULL;
    if (!cJSON_IsString(v)) {
        zero__tk_errorf(L->msg, "tokenizer.json: %s.%s: expected a string", path, key);
        return NULL;
    }
    return v->valuestring;
}

/* A single character given as a string (Metaspace replacement, Strip content). */
static int get_char(loader *L, const cJSON *o, const char *path, const char *key, char *out, int *n) {
    const char *s = get_str(L, o, path, key, 1);
    if (!s) return -1;
    const size_t len = strlen(s);
    int k = 0;
    if (len) (void)zero__tk_utf8_decode(s, len, &k);
    if (!len || (size_t)k != len || zero__tk_utf8_valid(s, len) != len)
        FAIL("tokenizer.json: %s.%s '%s': expected one character", path, key, s);
    memcpy(out, s, len);
    out[len] = 0;
    *n = (int)len;
    return 0;
}

/* {"String": s} or {"Regex": r} */
static int get_pattern(loader *L, const cJSON *o, const char *path, tk_pattern *p) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const cJSON *s = v ? cJSON_GetObjectItemCaseSensitive(v, "String") : NULL;
    const cJSON *r = v ? cJSON_GetObjectItemCaseSensitive(v, "Regex") : NULL;
    if (cJSON_IsString(s)) {
        p->lit_n = strlen(s->valuestring);
        if (!(p->lit = strdup(s->valuestring))) return nomem(L);
        return 0;
    }
    if (cJSON_IsString(r)) {
        char why[256];
        if (zero__tk_pattern_regex(p, r->valuestring, strlen(r->valuestring), why, sizeof why))
            FAIL("tokenizer.json: %s.pattern.Regex '%.200s' does not compile with PCRE2: %s", path, r->valuestring, why);
        return 0;
    }
    FAIL("tokenizer.json: %s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", path);
}

static const char *type_of(loader *L, const cJSON *o, const char *path) {
    if (!cJSON_IsObject(o)) {
        zero__tk_errorf(L->msg, "tokenizer.json: %s: expected an object", path);
        return NULL;
    }
    const char *ty = get_str(L, o, path, "type", 1);
    return ty;
}

static int get_scheme(loader *L, const cJSON *o, const char *path, tk_prepend_scheme *out) {
    const char *s = get_str(L, o, path, "prepend_scheme", 0);
    if (!s && cJSON_GetObjectItemCaseSensitive(o, "prepend_scheme") &&
        !cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "prepend_scheme")))
        return -1;
    *out = TK_PREPEND_ALWAYS;
    if (s && !strcmp(s, "first")) *out = TK_PREPEND_FIRST;
    else if (s && !strcmp(s, "never")) *out = TK_PREPEND_NEVER;
    else if (s && strcmp(s, "always"))
        FAIL("tokenizer.json: %s.prepend_scheme '%s': expected first, always or never", path, s);
    int aps;
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "add_prefix_space");
    if (get_bool(L, o, path, "add_prefix_space", 1, &aps)) return -1;
    if (a && !cJSON_IsNull(a) && !aps) {
        if (s && *out != TK_PREPEND_NEVER)
            FAIL("tokenizer.json: %s.add_prefix_space false contradicts prepend_scheme '%s'", path, s);
        *out = TK_PREPEND_NEVER;
    }
    return 0;
}

/* ---------------------------------------------------------------- normalizer */
static int sig_add(loader *L, char **sig, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static const char *pattern_text(const cJSON *o, const char **kind);
static int add_norm(loader *L, const cJSON *o, const char *path) {
    const char *ty = type_of(L, o, path);
    if (!ty) return -1;
    zero_tokenizer *t = L->t;
    char sub[256];
    if (!strcmp(ty, "Sequence")) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "normalizers");
        if (!cJSON_IsArray(a)) FAIL("tokenizer.json: %s.normalizers: expected an array", path);
        int i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++) {
            snprintf(sub, sizeof sub, "%s.normalizers[%d]", path, i);
            if (add_norm(L, e, sub)) return -1;
        }
        return 0;
    }
    tk_norm *nn = realloc(t->norm, (size_t)(t->nnorm + 1) * sizeof *nn);
    if (!nn) return nomem(L);
    t->norm = nn;
    tk_norm *n = &t->norm[t->nnorm];
    memset(n, 0, sizeof *n);
    if (!strcmp(ty, "Prepend")) {
        const char *s = get_str(L, o, path, "prepend", 1);
        if (!s) return -1;
        n->kind = TK_NORM_PREPEND;
        n->str_n = strlen(s);
        if (!(n->str = strdup(s))) return nomem(L);
        if (sig_add(L, &t->norm_sig, "Prepend(prepend=%s)", s)) return -1;
    } else if (!strcmp(ty, "Replace")) {
        const char *s = get_str(L, o, path, "content", 1);
        if (!s) return -1;
        n->kind = TK_NORM_REPLACE;
        n->str_n = strlen(s);
        if (!(n->str = strdup(s))) return nomem(L);
        t->nnorm++; /* owned from here on, freed with the tokenizer */
        const char *kind, *pat = pattern_text(o, &kind);
        if (sig_add(L, &t->norm_sig, "Replace(%s:%s,content=%s)", kind, pat, s)) return -1;
        return get_pattern(L, o, path, &n->pat);
    } else if (!strcmp(ty, "NFC") || !strcmp(ty, "NFD") || !strcmp(ty, "NFKC") || !strcmp(ty, "NFKD")) {
        n->kind = TK_NORM_UNICODE;
        n->utf8proc_options = UTF8PROC_STABLE | (ty[2] == 'C' || ty[3] == 'C' ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE) |
                              (ty[2] == 'K' ? UTF8PROC_COMPAT : 0);
        if (sig_add(L, &t->norm_sig, "%s", ty)) return -1;
    } else {
        FAIL("tokenizer.json: %s.type '%s' is not supported (supported normalizers: Sequence, Prepend, Replace, "
             "NFC, NFD, NFKC, NFKD)", path, ty);
    }
    t->nnorm++;
    return 0;
}

/* ---------------------------------------------------------------- pre-tokenizer */
/* Appends one item to a signature line (*sig: t->pre_sig, t->norm_sig): "Type(key=value,...)",
 * joined by " | ". */
static int sig_add(loader *L, char **sig, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int sig_add(loader *L, char **sig, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    const size_t have = *sig ? strlen(*sig) : 0, sep = have ? 3 : 0;
    char *ns = realloc(*sig, have + sep + (size_t)n + 1);
    if (!ns) return nomem(L);
    *sig = ns;
    if (sep) memcpy(ns + have, " | ", 3);
    va_start(ap, fmt);
    vsnprintf(ns + have + sep, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return 0;
}

/* A Split's pattern as the signature writes it: Regex:... or String:... */
static const char *pattern_text(const cJSON *o, const char **kind) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const cJSON *r = v ? cJSON_GetObjectItemCaseSensitive(v, "Regex") : NULL;
    *kind = cJSON_IsString(r) ? "Regex" : "String";
    const cJSON *x = cJSON_IsString(r) ? r : v ? cJSON_GetObjectItemCaseSensitive(v, "String") : NULL;
    return cJSON_IsString(x) ? x->valuestring : "";
}

static int add_pre(loader *L, const cJSON *o, const char *path) {
    const char *ty = type_of(L, o, path);
    if (!ty) return -1;
    zero_tokenizer *t = L->t;
    char sub[256];
    if (!strcmp(ty, "Sequence")) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers");
        if (!cJSON_IsArray(a)) FAIL("tokenizer.json: %s.pretokenizers: expected an array", path);
        int i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++) {
            snprintf(sub, sizeof sub, "%s.pretokenizers[%d]", path, i);
            if (add_pre(L, e, sub)) return -1;
        }
        return 0;
    }
    if (t->byte_level)
        FAIL("tokenizer.json: %s: a pre-tokenizer after ByteLevel is not supported (ByteLevel must come last)", path);
    tk_pre *np = realloc(t->pre, (size_t)(t->npre + 1) * sizeof *np);
    if (!np) return nomem(L);
    t->pre = np;
    tk_pre *p = &t->pre[t->npre];
    memset(p, 0, sizeof *p);
    t->npre++;
    if (!strcmp(ty, "Split")) {
        p->kind = TK_PRE_SPLIT;
        const char *b = get_str(L, o, path, "behavior", 1);
        if (!b) return -1;
        if (!strcmp(b, "Removed")) p->behavior = TK_SPLIT_REMOVED;
        else if (!strcmp(b, "Isolated")) p->behavior = TK_SPLIT_ISOLATED;
        else if (!strcmp(b, "MergedWithPrevious")) p->behavior = TK_SPLIT_MERGED_PREV;
        else if (!strcmp(b, "MergedWithNext")) p->behavior = TK_SPLIT_MERGED_NEXT;
        else if (!strcmp(b, "Contiguous")) p->behavior = TK_SPLIT_CONTIGUOUS;
        else FAIL("tokenizer.json: %s.behavior '%s': expected Removed, Isolated, MergedWithPrevious, "
                  "MergedWithNext or Contiguous", path, b);
        if (get_bool(L, o, path, "invert", 0, &p->invert)) return -1;
        const char *kind, *pat = pattern_text(o, &kind);
        if (get_pattern(L, o, path, &p->pat)) return -1;
        return sig_add(L, &L->t->pre_sig, "Split(%s:%s,%s,invert=%d)", kind, pat, b, p->invert);
    }
    if (!strcmp(ty, "ByteLevel")) {
        int use_regex;
        p->kind = TK_PRE_BYTELEVEL;
        if (get_bool(L, o, path, "add_prefix_space", 1, &p->add_prefix_space) ||
            get_bool(L, o, path, "use_regex", 1, &use_regex))
            return -1;
        t->byte_level = 1;
        if (use_regex) {
            char why[256];
            if (zero__tk_pattern_regex(&p->pat, GPT2_REGEX, sizeof GPT2_REGEX - 1, why, sizeof why))
                FAIL("tokenizer.json: %s: the ByteLevel regex does not compile: %s", path, why);
        }
        return sig_add(L, &L->t->pre_sig, "ByteLevel(add_prefix_space=%d,use_regex=%d)", p->add_prefix_space, use_regex);
    }
    if (!strcmp(ty, "Metaspace")) {
        p->kind = TK_PRE_METASPACE;
        if (get_char(L, o, path, "replacement", p->repl, &p->repl_n) || get_scheme(L, o, path, &p->scheme) ||
            get_bool(L, o, path, "split", 1, &p->flag))
            return -1;
        return sig_add(L, &L->t->pre_sig, "Metaspace(replacement=%.*s,prepend_scheme=%s,split=%d)", p->repl_n, p->repl,
                       p->scheme == TK_PREPEND_ALWAYS  ? "always"
                       : p->scheme == TK_PREPEND_FIRST ? "first"
                                                       : "never",
                       p->flag);
    }
    if (!strcmp(ty, "Digits")) {
        p->kind = TK_PRE_DIGITS;
        if (get_bool(L, o, path, "individual_digits", 0, &p->flag)) return -1;
        return sig_add(L, &L->t->pre_sig, "Digits(individual_digits=%d)", p->flag);
    }
    FAIL("tokenizer.json: %s.type '%s' is not supported (supported pre-tokenizers: Sequence, Split, ByteLevel, "
         "Metaspace, Digits)", path, ty);
}

/* ---------------------------------------------------------------- decoder */
static int add_dec(loader *L, const cJSON *o, const char *path) {
    const char *ty = type_of(L, o, path);
    if (!ty) return -1;
    zero_tokenizer *t = L->t;
    char sub[256];
    if (!strcmp(ty, "Sequence")) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "decoders");
        if (!cJSON_IsArray(a)) FAIL("tokenizer.json: %s.decoders: expected an array", path);
        int i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++) {
            snprintf(sub, sizeof sub, "%s.decoders[%d]", path, i);
            if (add_dec(L, e, sub)) return -1;
        }
        return 0;
    }
    tk_dec *nd = realloc(t->dec, (size_t)(t->ndec + 1) * sizeof *nd);
    if (!nd) return nomem(L);
    t->dec = nd;
    tk_dec *d = &t->dec[t->ndec];
    memset(d, 0, sizeof *d);
    t->ndec++;
    char c[8];
    int cn;
    if (!strcmp(ty, "ByteLevel")) {
        d->kind = TK_DEC_BYTELEVEL;
    } else if (!strcmp(ty, "ByteFallback")) {
        d->kind = TK_DEC_BYTEFALLBACK;
    } else if (!strcmp(ty, "Fuse")) {
        d->kind = TK_DEC_FUSE;
    } else if (!strcmp(ty, "Replace")) {
        d->kind = TK_DEC_REPLACE;
        const char *s = get_str(L, o, path, "content", 1);
        if (!s) return -1;
        d->str_n = strlen(s);
        if (!(d->str = strdup(s))) return nomem(L);
        return get_pattern(L, o, path, &d->pat);
    } else if (!strcmp(ty, "Strip")) {
        d->kind = TK_DEC_STRIP;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "start"), *b = cJSON_GetObjectItemCaseSensitive(o, "stop");
        if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble < 0 || b->valuedouble < 0 ||
            a->valuedouble > 1e6 || b->valuedouble > 1e6)
            FAIL("tokenizer.json: %s.start/stop: expected counts >= 0", path);
        d->start = a->valueint;
        d->stop = b->valueint;
        if (get_char(L, o, path, "content", c, &cn)) return -1;
        d->str_n = (size_t)cn;
        if (!(d->str = strdup(c))) return nomem(L);
    } else if (!strcmp(ty, "Metaspace")) {
        d->kind = TK_DEC_METASPACE;
        if (get_char(L, o, path, "replacement", c, &cn) || get_scheme(L, o, path, &d->scheme)) return -1;
        d->str_n = (size_t)cn;
        if (!(d->str = strdup(c))) return nomem(L);
    } else {
        FAIL("tokenizer.json: %s.type '%s' is not supported (supported decoders: Sequence, ByteLevel, Replace, "
             "ByteFallback, Fuse, Strip, Metaspace)", path, ty);
    }
    return 0;
}

/* ---------------------------------------------------------------- post-processor */
static int add_post(loader *L, const cJSON *o, const char *path) {
    const char *ty = type_of(L, o, path);
    if (!ty) return -1;
    zero_tokenizer *t = L->t;
    char sub[256];
    if (!strcmp(ty, "Sequence")) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, "processors");
        if (!cJSON_IsArray(a)) FAIL("tokenizer.json: %s.processors: expected an array", path);
        int i = 0;
        for (const cJSON *e = a->child; e; e = e->next, i++) {
            snprintf(sub, sizeof sub, "%s.processors[%d]", path, i);
            if (add_post(L, e, sub)) return -1;
        }
        return 0;
    }
    if (!strcmp(ty, "ByteLevel")) return 0; /* only trims offsets */
    if (strcmp(ty, "TemplateProcessing"))
        FAIL("tokenizer.json: %s.type '%s' is not supported (supported post-processors: TemplateProcessing, "
             "ByteLevel, Sequence)", path, ty);
    if (t->tmpl) FAIL("tokenizer.json: %s: a second TemplateProcessing is not supported", path);
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(o, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
    if (!cJSON_IsArray(single)) FAIL("tokenizer.json: %s.single: expected an array", path);
    int cap = 1, n = 0, seq = 0;
    for (const cJSON *e = single->child; e; e = e->next) cap += 16;
    if (!(t->tmpl = malloc((size_t)cap * sizeof *t->tmpl))) return nomem(L);
    int i = 0;
    for (const cJSON *e = single->child; e; e = e->next, i++) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(e, "Sequence");
        if (sq) {
            const char *id = get_str(L, sq, "Sequence", "id", 1);
            if (!id) return -1;
            if (strcmp(id, "A") || seq)
                FAIL("tokenizer.json: %s.single[%d]: Sequence '%s': expected the sequence A, once", path, i, id);
            seq = 1;
            t->tmpl[n++] = -1;
        } else if (sp) {
            const char *name = get_str(L, sp, "SpecialToken", "id", 1);
            if (!name) return -1;
            const cJSON *st = cJSON_GetObjectItemCaseSensitive(specials, name);
            const cJSON *ids = st ? cJSON_GetObjectItemCaseSensitive(st, "ids") : NULL;
            if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) > 16)
                FAIL("tokenizer.json: %s.special_tokens['%s'].ids: expected an array of ids", path, name);
            for (const cJSON *x = ids->child; x; x = x->next) {
                if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble >= 2147483647.0)
                    FAIL("tokenizer.json: %s.special_tokens['%s'].ids: expected ids >= 0", path, name);
                t->tmpl[n++] = (int32_t)x->valuedouble;
            }
        } else {
            FAIL("tokenizer.json: %s.single[%d]: expected {\"SpecialToken\": ...} or {\"Sequence\": ...}", path, i);
        }
    }
    if (!seq) FAIL("tokenizer.json: %s.single: expected the sequence $A", path);
    t->ntmpl = n;
    return 0;
}

/* ---------------------------------------------------------------- model */
static const uint16_t *byte_alphabet(void) {
    static uint16_t cs[256];
    if (!cs[0]) {
        int n = 0;
        for (int b = 0; b < 256; b++) {
            const int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            cs[b] = (uint16_t)(keep ? b : 256 + n++);
        }
    }
    return cs;
}

/* Raw bytes of a byte-level token (alphabet characters back to bytes); -1 if a character is not in
 * the alphabet. out holds at least n bytes. */
static long bytelevel_raw(const char *s, size_t n, char *out) {
    static int16_t inv[512];
    static int init;
    if (!init) {
        const uint16_t *cs = byte_alphabet();
        for (int i = 0; i < 512; i++) inv[i] = -1;
        for (int b = 0; b < 256; b++) inv[cs[b]] = (int16_t)b;
        init = 1;
    }
    long k = 0;
    for (size_t i = 0; i < n;) {
        int len;
        const uint32_t c = zero__tk_utf8_decode(s + i, n - i, &len);
        if (c >= 512 || inv[c] < 0) return -1;
        out[k++] = (char)inv[c];
        i += (size_t)len;
    }
    return k;
}

static int set_token(loader *L, int32_t id, const char *s, size_t n) {
    zero_tokenizer *t = L->t;
    free(t->tok[id]);
    if (!(t->tok[id] = malloc(n + 1))) return nomem(L);
    memcpy(t->tok[id], s, n);
    t->tok[id][n] = 0;
    t->tok_n[id] = (uint32_t)n;
    return 0;
}

static int load_model(loader *L, const cJSON *m, const cJSON *added) {
    zero_tokenizer *t = L->t;
    if (!cJSON_IsObject(m)) FAIL("tokenizer.json: model: expected an object");
    const char *ty = get_str(L, m, "model", "type", 0);
    if (!ty && cJSON_GetObjectItemCaseSensitive(m, "type")) return -1;
    if (ty && strcmp(ty, "BPE"))
        FAIL("tokenizer.json: model.type '%s' is not supported (supported: BPE)", ty);
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0))
        FAIL("tokenizer.json: model.dropout is not supported (BPE dropout is random): expected null");
    const char *fields[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, fields[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
            FAIL("tokenizer.json: model.%s is not supported: expected null", fields[i]);
    }
    if (get_bool(L, m, "model", "fuse_unk", 0, &t->fuse_unk) ||
        get_bool(L, m, "model", "byte_fallback", 0, &t->byte_fallback) ||
        get_bool(L, m, "model", "ignore_merges", 0, &t->ignore_merges))
        return -1;
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    if (!cJSON_IsObject(vocab)) FAIL("tokenizer.json: model.vocab: expected an object {token: id}");
    if (merges && !cJSON_IsNull(merges) && !cJSON_IsArray(merges))
        FAIL("tokenizer.json: model.merges: expected an array");
    /* the id range: the model's ids and the added tokens' */
    int64_t maxid = -1;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= 16777216.0 ||
            e->valuedouble != (double)(int64_t)e->valuedouble)
            FAIL("tokenizer.json: model.vocab['%.100s']: expected an id in [0, 2^24)", e->string);
        if ((int64_t)e->valuedouble > maxid) maxid = (int64_t)e->valuedouble;
    }
    int i = 0;
    for (const cJSON *e = added ? added->child : NULL; e; e = e->next, i++) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= 16777216.0 ||
            id->valuedouble != (double)(int64_t)id->valuedouble)
            FAIL("tokenizer.json: added_tokens[%d].id: expected an id in [0, 2^24)", i);
        if ((int64_t)id->valuedouble > maxid) maxid = (int64_t)id->valuedouble;
    }
    if (maxid < 0) FAIL("tokenizer.json: model.vocab is empty");
    /* the tables below have one entry per id up to the largest: ids must be (nearly) dense, or a
     * file of a few tokens could make zero allocate for 2^24 */
    const int64_t ntok = (int64_t)cJSON_GetArraySize(vocab) + i;
    if (maxid >= 2 * ntok + 1024)
        FAIL("tokenizer.json: id %lld with %lld tokens: expected ids below %lld (dense, as every tokenizer has them)",
             (long long)maxid, (long long)ntok, (long long)(2 * ntok + 1024));
    t->vocab_size = (int32_t)maxid + 1;
    t->tok = calloc((size_t)t->vocab_size, sizeof *t->tok);
    t->tok_n = calloc((size_t)t->vocab_size, sizeof *t->tok_n);
    t->special = calloc((size_t)t->vocab_size, 1);
    if (!t->tok || !t->tok_n || !t->special) return nomem(L);
    char *raw = NULL;
    size_t raw_cap = 0;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        const int32_t id = (int32_t)e->valuedouble;
        const size_t n = strlen(e->string);
        if (t->tok[id]) {
            free(raw);
            FAIL("tokenizer.json: model.vocab: id %d is used by '%.100s' and '%.100s'", id, t->tok[id], e->string);
        }
        if (set_token(L, id, e->string, n) || zero__tk_strmap_put(&t->content, e->string, n, id)) {
            free(raw);
            return nomem(L);
        }
        if (t->byte_level) {
            if (n > raw_cap) {
                free(raw);
                raw_cap = 2 * n + 64;
                if (!(raw = malloc(raw_cap))) return nomem(L);
            }
            const long k = bytelevel_raw(e->string, n, raw);
            if (k > 0 && zero__tk_strmap_put(&t->match, raw, (size_t)k, id)) {
                free(raw);
                return nomem(L);
            }
        }
    }
    free(raw);
    for (int b = 0; b < 256; b++) {
        char c = (char)b, hex[8];
        t->byte_id[b] = t->byte_level ? zero__tk_strmap_get(&t->match, &c, 1) : -1;
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        t->fallback_id[b] = zero__tk_strmap_get(&t->content, hex, 6);
    }
    const char *unk = get_str(L, m, "model", "unk_token", 0);
    const cJSON *uv = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
    if (!unk && uv && !cJSON_IsNull(uv)) return -1;
    t->unk = -1;
    if (unk && (t->unk = zero__tk_strmap_get(&t->content, unk, strlen(unk))) < 0)
        FAIL("tokenizer.json: model.unk_token '%.100s' is not in model.vocab", unk);
    /* merges: "a b" or ["a", "b"]; rank = index; the merged token must be in the vocabulary */
    uint32_t rank = 0;
    char *buf = NULL;
    size_t buf_cap = 0;
    const int strings = merges && merges->child && cJSON_IsString(merges->child); /* the form of all of them */
    for (const cJSON *e = merges ? merges->child : NULL; e; e = e->next, rank++) {
        const char *a, *b;
        size_t an, bn;
        if (rank && cJSON_IsString(e) != strings && (cJSON_IsString(e) || cJSON_IsArray(e))) {
            free(buf);
            FAIL("tokenizer.json: model.merges[%u]: %s among merges written %s: expected one form for all (as "
                 "tokenizers reads them)", rank, strings ? "a pair [\"a\", \"b\"]" : "a string \"a b\"",
                 strings ? "\"a b\"" : "[\"a\", \"b\"]");
        }
        if (cJSON_IsString(e)) {
            const char *s = e->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                free(buf);
                FAIL("tokenizer.json: model.merges[%u] '%.100s': expected two tokens separated by one space", rank, s);
            }
            a = s, an = (size_t)(sp - s), b = sp + 1, bn = strlen(sp + 1);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
                   cJSON_IsString(e->child->next)) {
            a = e->child->valuestring, an = strlen(a), b = e->child->next->valuestring, bn = strlen(b);
        } else {
            free(buf);
            FAIL("tokenizer.json: model.merges[%u]: expected \"a b\" or [\"a\", \"b\"]", rank);
        }
        if (an + bn + 1 > buf_cap) {
            free(buf);
            buf_cap = 2 * (an + bn) + 64;
            if (!(buf = malloc(buf_cap))) return nomem(L);
        }
        memcpy(buf, a, an);
        memcpy(buf + an, b, bn);
        const int32_t ia = zero__tk_strmap_get(&t->content, a, an), ib = zero__tk_strmap_get(&t->content, b, bn);
        const int32_t ic = zero__tk_strmap_get(&t->content, buf, an + bn);
        if (ia < 0 || ib < 0 || ic < 0) {
            const char *w = ia < 0 ? a : ib < 0 ? b : buf;
            const size_t wn = ia < 0 ? an : ib < 0 ? bn : an + bn;
            snprintf(L->msg, 512, "tokenizer.json: model.merges[%u]: '%.*s' is not in model.vocab", rank,
                     (int)(wn < 100 ? wn : 100), w);
            free(buf);
            return -1;
        }
        if (zero__tk_pairmap_put(&t->merges, ia, ib, rank, ic)) {
            free(buf);
            return nomem(L);
        }
        if ((t->nmerge & (t->nmerge - 1)) == 0) { /* a power of two (or 0): grow */
            int32_t *nl = realloc(t->merge_list, 2 * sizeof *nl * (t->nmerge ? 2 * (size_t)t->nmerge : 1));
            if (!nl) {
                free(buf);
                return nomem(L);
            }
            t->merge_list = nl;
        }
        t->merge_list[2 * t->nmerge] = ia;
        t->merge_list[2 * t->nmerge + 1] = ib;
        t->nmerge++;
    }
    free(buf);
    return 0;
}

/* ---------------------------------------------------------------- added tokens */
/* Whether added content c (n bytes) is the vocabulary's token v written as text (1, 0, or -1 out of
 * memory): the same string, or in a byte-level tokenizer the bytes v stands for (GPT-NeoX lists its
 * runs of spaces both as "ĠĠ" in model.vocab and as "  " in added_tokens, under one id). */
static int same_token(const zero_tokenizer *t, const char *c, size_t n, const char *v, size_t vn) {
    if (n == vn && !memcmp(c, v, n)) return 1;
    if (!t->byte_level || n > vn) return 0;
    char small[256], *raw = vn <= sizeof small ? small : malloc(vn);
    if (!raw) return -1;
    const long k = bytelevel_raw(v, vn, raw);
    const int same = k >= 0 && (size_t)k == n && !memcmp(raw, c, n);
    if (raw != small) free(raw);
    return same;
}

/* An added token may name a vocabulary token again (its id and string, as every SentencePiece
 * tokenizer lists <unk>, <s>, </s>), but one id is one string: an id the vocabulary or an earlier
 * entry gives to another string, or a string under two ids, is refused. A tokenizer.json that
 * `tokenizers` writes has neither (its added vocabulary is a map both ways); `tokenizers` itself
 * only warns, and then encodes the string to one id and decodes the id to the other. */
static int check_added(loader *L, const int32_t *entry, int i, const char *c, size_t n, int32_t id) {
    const zero_tokenizer *t = L->t;
    if (entry[id] >= 0) {
        if (t->tok_n[id] == n && !memcmp(t->tok[id], c, n))
            FAIL("tokenizer.json: added_tokens[%d]: added token '%.100s' with id %d is listed twice (also "
                 "added_tokens[%d])", i, c, id, entry[id]);
        FAIL("tokenizer.json: added_tokens[%d]: added token '%.100s' has id %d, which added_tokens[%d] gives to "
             "'%.100s'", i, c, id, entry[id], t->tok[id]);
    }
    const int same = t->tok[id] ? same_token(t, c, n, t->tok[id], t->tok_n[id]) : 1;
    if (same < 0) return nomem(L);
    if (!same)
        FAIL("tokenizer.json: added_tokens[%d]: added token '%.100s' has id %d, which the vocabulary gives to "
             "'%.100s'", i, c, id, t->tok[id]);
    const int32_t other = zero__tk_strmap_get(&t->content, c, n);
    if (other >= 0 && other != id) {
        if (entry[other] >= 0)
            FAIL("tokenizer.json: added_tokens[%d]: added token '%.100s' has id %d, and id %d in added_tokens[%d]",
                 i, c, id, other, entry[other]);
        FAIL("tokenizer.json: added_tokens[%d]: added token '%.100s' has id %d, but the vocabulary gives it id %d",
             i, c, id, other);
    }
    return 0;
}

static int load_added_entries(loader *L, const cJSON *a, int32_t *entry) {
    zero_tokenizer *t = L->t;
    int i = 0;
    char path[64];
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        snprintf(path, sizeof path, "added_tokens[%d]", i);
        const char *c = get_str(L, e, path, "content", 1);
        if (!c) return -1;
        if (!*c) continue; /* HF ignores empty added tokens */
        const int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble; /* load_model checked it */
        if (check_added(L, entry, i, c, strlen(c), id)) return -1;
        entry[id] = i;
        tk_added *x = &t->added[t->nadded];
        int sw, ls, rs, no, sp;
        if (get_bool(L, e, path, "single_word", 0, &sw) || get_bool(L, e, path, "lstrip", 0, &ls) ||
            get_bool(L, e, path, "rstrip", 0, &rs) || get_bool(L, e, path, "normalized", 1, &no) ||
            get_bool(L, e, path, "special", 0, &sp))
            return -1;
        x->single_word = (unsigned)sw, x->lstrip = (unsigned)ls, x->rstrip = (unsigned)rs;
        x->normalized = (unsigned)no, x->special = (unsigned)sp;
        x->id = id;
        x->n = strlen(c);
        if (!(x->content = strdup(c))) return nomem(L);
        t->nadded++;
        if (set_token(L, x->id, c, x->n) || zero__tk_strmap_put(&t->content, c, x->n, x->id)) return nomem(L);
        t->special[x->id] = (unsigned char)sp;
    }
    return 0;
}

static int load_added(loader *L, const cJSON *a) {
    zero_tokenizer *t = L->t;
    if (!a) return 0;
    if (!cJSON_IsArray(a)) FAIL("tokenizer.json: added_tokens: expected an array"); /* null too, as tokenizers */
    const int n = cJSON_GetArraySize(a);
    if (!(t->added = calloc((size_t)n + 1, sizeof *t->added))) return nomem(L);
    /* entry[id]: the added_tokens index that took id, -1 for none */
    int32_t *entry = malloc((size_t)t->vocab_size * sizeof *entry);
    if (!entry) return nomem(L);
    for (int32_t k = 0; k < t->vocab_size; k++) entry[k] = -1;
    const int rc = load_added_entries(L, a, entry);
    free(entry);
    return rc;
}

/* Normalized forms of the added tokens with normalized = true, and the first-byte tables. */
static int prepare_added(loader *L) {
    zero_tokenizer *t = L->t;
    for (int i = 0; i < t->nadded; i++) {
        tk_added *x = &t->added[i];
        if (x->normalized && t->nnorm) {
            tk_text out = {0};
            if (zero__tk_normalize(t, x->content, x->n, NULL, 0, &out)) return nomem(L);
            if (out.n != x->n || memcmp(out.s, x->content, x->n)) {
                if (!(x->norm = malloc(out.n + 1))) {
                    zero__tk_text_free(&out);
                    return nomem(L);
                }
                memcpy(x->norm, out.s, out.n);
                x->norm[out.n] = 0;
                x->norm_n = out.n;
            }
            zero__tk_text_free(&out);
        }
        if (x->normalized) {
            const char *s = x->norm ? x->norm : x->content;
            if ((x->norm ? x->norm_n : x->n) > 0) t->norm_first[(unsigned char)s[0]] = 1, t->has_norm_added = 1;
        } else {
            t->raw_first[(unsigned char)x->content[0]] = 1;
            t->has_raw_added = 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- tokenizer_config.json */
/* What a JSON value is, for a message: "a number (5)", "an array", ... */
static const char *json_kind(const cJSON *v, char *buf, size_t n) {
    if (cJSON_IsNumber(v)) snprintf(buf, n, "a number (%.17g)", v->valuedouble);
    else if (cJSON_IsBool(v)) snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsString(v)) snprintf(buf, n, "a string");
    else if (cJSON_IsArray(v)) snprintf(buf, n, "an array");
    else if (cJSON_IsObject(v)) snprintf(buf, n, "an object");
    else snprintf(buf, n, "null");
    return buf;
}

/* bos_token or eos_token: absent or null (*out = NULL), a string, or the object transformers
 * writes for an AddedToken ({"__type": "AddedToken", "content": "</s>", "lstrip": false, ...});
 * anything else is refused rather than read as no token (EOS would then be guessed). */
static int config_token(loader *L, const cJSON *cfg, const char *key, const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    char kind[64];
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v)) {
        *out = v->valuestring;
        return 0;
    }
    if (!cJSON_IsObject(v))
        FAIL("tokenizer_config.json: %s is %s: expected a string, null or an AddedToken object {\"content\": ...}",
             key, json_kind(v, kind, sizeof kind));
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(v, "__type");
    if (cJSON_IsString(ty) && strcmp(ty->valuestring, "AddedToken"))
        FAIL("tokenizer_config.json: %s.__type '%.60s': expected \"AddedToken\"", key, ty->valuestring);
    if (ty && !cJSON_IsString(ty))
        FAIL("tokenizer_config.json: %s.__type is %s: expected \"AddedToken\"", key, json_kind(ty, kind, sizeof kind));
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(v, "content");
    if (!cJSON_IsString(c))
        FAIL("tokenizer_config.json: %s.content is %s: expected a string (the token)", key,
             c ? json_kind(c, kind, sizeof kind) : "missing");
    *out = c->valuestring;
    return 0;
}

/* chat_template: absent or null (*out = NULL), the Jinja source as a string, or transformers' named
 * templates [{"name": "default", "template": ...}, {"name": "tool_use", ...}]: the one named
 * "default" (what apply_chat_template uses), else the first. Only its markers are read
 * (zero_chat_format_detect); it is never executed. */
static int config_template(loader *L, const cJSON *cfg, const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    char kind[64];
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v)) {
        *out = v->valuestring;
        return 0;
    }
    if (!cJSON_IsArray(v))
        FAIL("tokenizer_config.json: chat_template is %s: expected a string, null or a list of "
             "{\"name\": ..., \"template\": ...}", json_kind(v, kind, sizeof kind));
    int i = 0, dflt = -1;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name"), *tp = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (!cJSON_IsObject(e))
            FAIL("tokenizer_config.json: chat_template[%d] is %s: expected {\"name\": ..., \"template\": ...}", i,
                 json_kind(e, kind, sizeof kind));
        if (!cJSON_IsString(nm))
            FAIL("tokenizer_config.json: chat_template[%d].name is %s: expected a string", i,
                 nm ? json_kind(nm, kind, sizeof kind) : "missing");
        if (!cJSON_IsString(tp))
            FAIL("tokenizer_config.json: chat_template[%d].template is %s: expected a string", i,
                 tp ? json_kind(tp, kind, sizeof kind) : "missing");
        if (!strcmp(nm->valuestring, "default")) {
            if (dflt >= 0)
                FAIL("tokenizer_config.json: chat_template[%d]: a second template named 'default' (also "
                     "chat_template[%d]): expected one", i, dflt);
            dflt = i;
            *out = tp->valuestring;
        } else if (dflt < 0 && !*out) {
            *out = tp->valuestring;
        }
    }
    return 0;
}

static int load_config(loader *L, const char *text) {
    zero_tokenizer *t = L->t;
    t->bos = t->eos = -1;
    cJSON *cfg = text ? cJSON_Parse(text) : NULL;
    if (text && !cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        FAIL("tokenizer_config.json is not a JSON object");
    }
    const char *bos = NULL, *eos = NULL, *pad = NULL, *tmpl = NULL;
    if (cfg && (config_token(L, cfg, "bos_token", &bos) || config_token(L, cfg, "eos_token", &eos) ||
                config_token(L, cfg, "pad_token", &pad) || config_template(L, cfg, &tmpl))) {
        cJSON_Delete(cfg);
        return -1;
    }
    if (bos && (t->bos = zero__tk_strmap_get(&t->content, bos, strlen(bos))) < 0) {
        zero__tk_errorf(L->msg, "tokenizer_config.json: bos_token '%.100s' is not a token", bos);
        cJSON_Delete(cfg);
        return -1;
    }
    if (eos && (t->eos = zero__tk_strmap_get(&t->content, eos, strlen(eos))) < 0) {
        zero__tk_errorf(L->msg, "tokenizer_config.json: eos_token '%.100s' is not a token", eos);
        cJSON_Delete(cfg);
        return -1;
    }
    t->pad = pad ? zero__tk_strmap_get(&t->content, pad, strlen(pad)) : -1; /* one that is no token: none */
    if ((tmpl && !(t->chat_template = strdup(tmpl))) || (bos && !(t->cfg_bos = strdup(bos))) ||
        (eos && !(t->cfg_eos = strdup(eos)))) {
        cJSON_Delete(cfg);
        return nomem(L);
    }
    cJSON_Delete(cfg);
    if (t->bos < 0 && t->tmpl)
        for (int i = 0; i < t->ntmpl && t->bos < 0; i++)
            if (t->tmpl[i] >= 0) t->bos = i == 0 ? t->tmpl[i] : -1;
    if (t->eos < 0) {
        static const char *names[] = {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>", "<|im_end|>", "<|eot_id|>"};
        for (size_t i = 0; i < sizeof names / sizeof names[0] && t->eos < 0; i++)
            t->eos = zero__tk_strmap_get(&t->content, names[i], strlen(names[i]));
    }
    return 0;
}

/* ---------------------------------------------------------------- entry points */
zero_status zero_tokenizer_load_json(zero_tokenizer **out, const char *json, size_t len, const char *config,
                                     zero_error *err) {
    *out = NULL;
    char msg[512] = "";
    zero_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        if (err) snprintf(err->msg, sizeof err->msg, "out of memory loading a tokenizer");
        return ZERO_ERR_NOMEM;
    }
    t->unk = t->bos = t->eos = t->pad = -1;
    loader Lv = {t, msg}, *L = &Lv;
    zero_status st = ZERO_ERR_FORMAT;
    zero_error je;
    cJSON *root = NULL;
    /* a key twice in an object: tokenizers (serde_json) and transformers (Python's json) take the
     * last; these are the texts with the earlier ones blanked, when there are any */
    char *json_last = NULL, *config_last = NULL;
    if (zero_json_check_last(json, len, TK_MAX_VALUES, ZERO_JSON_MAX_DEPTH, &json_last, &je) != ZERO_OK) {
        zero__tk_errorf(msg, "tokenizer.json: %s: refused before parsing", je.msg);
        goto done;
    }
    if (config && zero_json_check_last(config, strlen(config), TK_CONFIG_MAX_VALUES, ZERO_JSON_MAX_DEPTH, &config_last,
                                       &je) != ZERO_OK) {
        zero__tk_errorf(msg, "tokenizer_config.json: %s: refused before parsing", je.msg);
        goto done;
    }
    if (json_last) json = json_last;
    if (config_last) config = config_last;
    root = cJSON_ParseWithLength(json, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        zero__tk_errorf(msg, "tokenizer.json is not valid JSON (near byte %ld)",
                        at && at >= json && at <= json + len ? (long)(at - json) : -1L);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        zero__tk_errorf(msg, "tokenizer.json: expected a JSON object at the top");
        goto done;
    }
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (norm && !cJSON_IsNull(norm) && add_norm(L, norm, "normalizer")) goto done;
    if (pre && !cJSON_IsNull(pre) && add_pre(L, pre, "pre_tokenizer")) goto done;
    if (post && !cJSON_IsNull(post) && add_post(L, post, "post_processor")) goto done;
    if (dec && !cJSON_IsNull(dec)) {
        t->has_decoder = 1;
        if (add_dec(L, dec, "decoder")) goto done;
    }
    if (added && !cJSON_IsArray(added)) {
        zero__tk_errorf(msg, "tokenizer.json: added_tokens: expected an array");
        goto done;
    }
    if (!model) {
        zero__tk_errorf(msg, "tokenizer.json: model: missing");
        goto done;
    }
    /* the match data first: prepare_added normalizes added tokens, and a Regex Replace needs it */
    if (!(t->md = pcre2_match_data_create(4, NULL))) {
        zero__tk_errorf(msg, "out of memory loading a tokenizer");
        goto done;
    }
    if (load_model(L, model, added) || load_added(L, added) || prepare_added(L)) goto done;
    for (int i = 0; i < t->ntmpl; i++)
        if (t->tmpl[i] >= t->vocab_size || (t->tmpl[i] >= 0 && !t->tok[t->tmpl[i]])) {
            zero__tk_errorf(msg, "tokenizer.json: post_processor: special token id %d is not a token", t->tmpl[i]);
            goto done;
        }
    if (load_config(L, config)) goto done;
    st = ZERO_OK;
done:
    cJSON_Delete(root);
    free(json_last);
    free(config_last);
    if (st) {
        if (!strncmp(msg, "out of memory", 13)) st = ZERO_ERR_NOMEM;
        if (err) snprintf(err->msg, sizeof err->msg, "%s", msg);
        zero_tokenizer_free(t);
        return st;
    }
    *out = t;
    return ZERO_OK;
}

/* Reads a whole file of at most max bytes into *buf; *missing = 1 when it does not exist. */
static zero_status slurp(const char *path, uint64_t max, char **buf, size_t *len, int *missing, zero_error *err) {
    struct stat sb;
    *missing = stat(path, &sb) != 0 && errno == ENOENT;
    return zero_read_file(path, max, buf, len, err);
}

zero_status zero_tokenizer_load(zero_tokenizer **out, const char *path, zero_error *err) {
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (err) snprintf(err->msg, sizeof err->msg, "cannot open tokenizer '%s': %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    /* tokenizer.json of a directory, and tokenizer_config.json beside it, are files the directory
     * names: plain names inside it (zero_path_in_dir), never a symbolic link leading out */
    char file[4096], cfgpath[4096], dir[4096];
    zero_error perr;
    zero_status ps;
    if (S_ISDIR(sb.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        ps = zero_path_in_dir(dir, "tokenizer.json", file, sizeof file, &perr);
    } else {
        snprintf(file, sizeof file, "%s", path);
        const char *slash = strrchr(path, '/');
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + (slash == path)) : 1, slash ? path : ".");
        ps = ZERO_OK;
    }
    if (ps == ZERO_OK) ps = zero_path_in_dir(dir, "tokenizer_config.json", cfgpath, sizeof cfgpath, &perr);
    if (ps != ZERO_OK) {
        if (err) *err = perr;
        return ps;
    }
    size_t len = 0, clen = 0;
    int missing;
    char *json = NULL, *cfg = NULL;
    zero_status rs = slurp(file, TK_MAX_BYTES, &json, &len, &missing, err);
    if (rs != ZERO_OK) {
        if (missing && S_ISDIR(sb.st_mode) && err)
            snprintf(err->msg, sizeof err->msg, "tokenizer directory '%.400s' has no tokenizer.json", path);
        return rs;
    }
    zero_error cerr;
    rs = slurp(cfgpath, TK_CONFIG_MAX_BYTES, &cfg, &clen, &missing, &cerr);
    if (rs != ZERO_OK && !missing) {
        free(json);
        if (err) *err = cerr;
        return rs;
    }
    zero_error lerr;
    zero_status st = zero_tokenizer_load_json(out, json, len, cfg, &lerr);
    if (st && err) {
        /* name the file: the messages start with "tokenizer.json" or "tokenizer_config.json" */
        const int is_cfg = !strncmp(lerr.msg, "tokenizer_config.json", 21);
        const char *rest = lerr.msg;
        if (!strncmp(rest, "tokenizer.json", 14)) rest += 14;
        else if (is_cfg) rest += 21;
        else rest = NULL;
        if (rest) snprintf(err->msg, sizeof err->msg, "%.200s%.300s", is_cfg ? cfgpath : file, rest);
        else snprintf(err->msg, sizeof err->msg, "%.200s: %.300s", file, lerr.msg);
    }
    free(json);
    free(cfg);
    if (st == ZERO_OK) {
        /* chat_template.jinja beside them (what transformers writes since 4.50) is the template, over
         * tokenizer_config.json's */
        char jpath[4096];
        char *jt = NULL;
        size_t jn = 0;
        if (zero_path_in_dir(dir, "chat_template.jinja", jpath, sizeof jpath, &perr) == ZERO_OK) {
            rs = slurp(jpath, TK_CONFIG_MAX_BYTES, &jt, &jn, &missing, &cerr);
            if (rs != ZERO_OK && !missing) {
                zero_tokenizer_free(*out);
                *out = NULL;
                if (err) *err = cerr;
                return rs;
            }
            if (jt) {
                free((*out)->chat_template);
                (*out)->chat_template = jt;
            }
        }
    }
    return st;
}

void zero_tokenizer_free(zero_tokenizer *t) {
    if (!t) return;
    free(t->cfg_bos);
    free(t->cfg_eos);
    for (int32_t i = 0; t->tok && i < t->vocab_size; i++) free(t->tok[i]);
    free(t->tok);
    free(t->tok_n);
    free(t->special);
    zero__tk_strmap_free(&t->content);
    zero__tk_strmap_free(&t->match);
    zero__tk_pairmap_free(&t->merges);
    free(t->merge_list);
    free(t->pre_sig);
    free(t->norm_sig);
    for (int i = 0; i < t->nnorm; i++) {
        free(t->norm[i].str);
        zero__tk_pattern_free(&t->norm[i].pat);
    }
    free(t->norm);
    for (int i = 0; i < t->npre; i++) zero__tk_pattern_free(&t->pre[i].pat);
    free(t->pre);
    for (int i = 0; i < t->ndec; i++) {
        free(t->dec[i].str);
        zero__tk_pattern_free(&t->dec[i].pat);
    }
    free(t->dec);
    free(t->tmpl);
    for (int i = 0; i < t->nadded; i++) {
        free(t->added[i].content);
        free(t->added[i].norm);
    }
    free(t->added);
    free(t->chat_template);
    free(t->cache.slots);
    free(t->cache.ent);
    free(t->cache.bytes);
    free(t->cache.ids);
    free(t->cache.lens);
    if (t->md) pcre2_match_data_free(t->md);
    free(t->words);
    free(t->words2);
    free(t->syms);
    free(t->heap);
    free(t->wids);
    free(t->wlens);
    free(t);
}

const char *zero_tokenizer_last_error(const zero_tokenizer *t) { return t ? t->err : ""; }
const char *zero_tokenizer_kind(const zero_tokenizer *t) { return t->byte_level ? "byte-level BPE" : "SentencePiece BPE"; }
int32_t zero_tokenizer_vocab_size(const zero_tokenizer *t) { return t->vocab_size; }
int32_t zero_tokenizer_bos(const zero_tokenizer *t) { return t->bos; }
int32_t zero_tokenizer_eos(const zero_tokenizer *t) { return t->eos; }
int32_t zero_tokenizer_pad(const zero_tokenizer *t) { return t->pad; }
int32_t zero_tokenizer_unk(const zero_tokenizer *t) { return t->unk; }
const char *zero_tokenizer_chat_template(const zero_tokenizer *t) { return t->chat_template; }
const char *zero_tokenizer_pre_tokenizer(const zero_tokenizer *t) { return t->pre_sig ? t->pre_sig : ""; }
const char *zero_tokenizer_normalizer(const zero_tokenizer *t) { return t->norm_sig ? t->norm_sig : ""; }
int32_t zero_tokenizer_num_merges(const zero_tokenizer *t) { return (int32_t)t->nmerge; }

zero_status zero_tokenizer_merge(const zero_tokenizer *t, int32_t rank, int32_t *a, int32_t *b) {
    if (rank < 0 || (uint32_t)rank >= t->nmerge || !a || !b) return ZERO_ERR_INVALID_ARG;
    *a = t->merge_list[2 * (size_t)rank];
    *b = t->merge_list[2 * (size_t)rank + 1];
    return ZERO_OK;
}
const char *zero_tokenizer_config_token(const zero_tokenizer *t, int eos) { return eos ? t->cfg_eos : t->cfg_bos; }

int32_t zero_tokenizer_token_id(const zero_tokenizer *t, const char *token) {
    return token ? zero__tk_strmap_get(&t->content, token, strlen(token)) : -1;
}

const char *zero_tokenizer_token(const zero_tokenizer *t, int32_t id, size_t *len) {
    if (id < 0 || id >= t->vocab_size || !t->tok[id]) return NULL;
    if (len) *len = t->tok_n[id];
    return t->tok[id];
}

int zero_tokenizer_is_special(const zero_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->vocab_size && t->special[id];
}

int zero_tokenizer_is_added(const zero_tokenizer *t, int32_t id) {
    for (int i = 0; i < t->nadded; i++)
        if (t->added[i].id == id) return 1;
    return 0;
}
