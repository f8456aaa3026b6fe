/* src/tokenizer/internal.h — the tokenizer layer's private structures: hash maps, the parsed
 * pipeline (normalizers, pre-tokenizers, BPE model, post-processor, decoders) and text with offsets. */
#ifndef ZERO_TOKENIZER_INTERNAL_H
#define ZERO_TOKENIZER_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "zero/tokenizer.h"

/* ---------------------------------------------------------------- hash maps */
uint64_t zero__tk_hash(const void *p, size_t n);

/* Bytes -> int32. Keys are copied into the map's own storage. */
typedef struct tk_strmap {
    uint32_t *slots; /* entry index + 1; 0 = empty */
    uint32_t mask;
    struct tk_strent {
        uint64_t hash;
        uint32_t off, len; /* key bytes in keys[] */
        int32_t val;
    } *ent;
    uint32_t n, cap;
    char *keys;
    size_t keys_n, keys_cap;
} tk_strmap;
int zero__tk_strmap_put(tk_strmap *m, const char *k, size_t n, int32_t val); /* 0, or -1 when out of memory; replaces */
int32_t zero__tk_strmap_get(const tk_strmap *m, const char *k, size_t n);   /* -1 when absent */
void zero__tk_strmap_free(tk_strmap *m);

/* (a, b) id pairs -> (rank, new id). */
typedef struct tk_pairmap {
    uint64_t *keys; /* (a << 32 | b) + 1; 0 = empty */
    uint32_t *rank;
    int32_t *id;
    uint32_t mask, n;
} tk_pairmap;
int zero__tk_pairmap_put(tk_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id);
/* 1 and *rank, *id when present. */
static inline int zero__tk_pairmap_get(const tk_pairmap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *id) {
    if (!m->keys) return 0;
    const uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint64_t h = k * 0x9E3779B97F4A7C15ull;
    for (uint32_t i = (uint32_t)(h >> 32) & m->mask;; i = (i + 1) & m->mask) {
        if (m->keys[i] == k) {
            *rank = m->rank[i];
            *id = m->id[i];
            return 1;
        }
        if (!m->keys[i]) return 0;
    }
}
void zero__tk_pairmap_free(tk_pairmap *m);

/* ---------------------------------------------------------------- UTF-8 and Unicode */
/* Decodes one code point of valid UTF-8 at s (n > 0 bytes left); *len its bytes. */
uint32_t zero__tk_utf8_decode(const char *s, size_t n, int *len);
int zero__tk_utf8_encode(uint32_t c, char *out); /* bytes written (1..4) */
/* Length of the valid prefix: the whole string when it is valid UTF-8. */
size_t zero__tk_utf8_valid(const char *s, size_t n);
int zero__tk_is_white_space(uint32_t c); /* Unicode White_Space (Rust's char::is_whitespace, regex \s) */
int zero__tk_is_word(uint32_t c);        /* regex \w: letters, marks, decimal and letter numbers, Pc, joiners */
int zero__tk_is_numeric(uint32_t c);     /* general category N* (Rust's char::is_numeric) */
int zero__tk_is_py_space(uint32_t c);    /* Python's str.isspace() (Jinja's trim) */

/* ---------------------------------------------------------------- text with offsets */
/* A string and, for each byte, its offset in the original text (al == NULL: base + i). */
typedef struct tk_text {
    char *s;
    uint32_t *al;
    size_t n, cap;
    int own_s; /* s is malloc'd (else it points into the caller's text) */
} tk_text;

/* ---------------------------------------------------------------- the parsed pipeline */
typedef enum { TK_NORM_PREPEND, TK_NORM_REPLACE, TK_NORM_UNICODE } tk_norm_kind;
typedef struct tk_pattern { /* a Split/Replace pattern: a literal string or a PCRE2 regex */
    char *lit;
    size_t lit_n;
    pcre2_code *re;
} tk_pattern;
typedef struct tk_norm {
    tk_norm_kind kind;
    char *str; /* Prepend's prepend, Replace's content */
    size_t str_n;
    tk_pattern pat;
    int utf8proc_options; /* TK_NORM_UNICODE */
} tk_norm;

typedef enum { TK_PRE_SPLIT, TK_PRE_BYTELEVEL, TK_PRE_METASPACE, TK_PRE_DIGITS } tk_pre_kind;
typedef enum { TK_SPLIT_REMOVED, TK_SPLIT_ISOLATED, TK_SPLIT_MERGED_PREV, TK_SPLIT_MERGED_NEXT,
               TK_SPLIT_CONTIGUOUS } tk_split_behavior;
typedef enum { TK_PREPEND_ALWAYS, TK_PREPEND_FIRST, TK_PREPEND_NEVER } tk_prepend_scheme;
typedef struct tk_pre {
    tk_pre_kind kind;
    tk_pattern pat;             /* SPLIT; BYTELEVEL with use_regex: the GPT-2 regex */
    tk_split_behavior behavior; /* SPLIT */
    int invert;                 /* SPLIT */
    int add_prefix_space;       /* BYTELEVEL */
    int flag;                   /* METASPACE: split; DIGITS: individual_digits */
    char repl[8];               /* METASPACE: the replacement character, UTF-8 */
    int repl_n;
    tk_prepend_scheme scheme;   /* METASPACE */
} tk_pre;

typedef enum { TK_DEC_BYTELEVEL, TK_DEC_REPLACE, TK_DEC_BYTEFALLBACK, TK_DEC_FUSE, TK_DEC_STRIP,
               TK_DEC_METASPACE } tk_dec_kind;
typedef struct tk_dec {
    tk_dec_kind kind;
    tk_pattern pat; /* REPLACE */
    char *str;      /* REPLACE's content; STRIP's and METASPACE's character (UTF-8) */
    size_t str_n;
    int start, stop; /* STRIP */
    tk_prepend_scheme scheme; /* METASPACE */
} tk_dec;

typedef struct tk_added {
    char *content;
    size_t n;
    char *norm; /* content after the normalizer when `normalized` and it differs; else NULL */
    size_t norm_n;
    int32_t id;
    unsigned single_word : 1, lstrip : 1, rstrip : 1, normalized : 1, special : 1;
} tk_added;

/* The word cache: pre-token bytes -> token ids and byte lengths. */
typedef struct tk_cache {
    uint32_t *slots; /* entry index + 1 */
    uint32_t mask;
    struct tk_cent {
        uint64_t hash;
        uint32_t key, klen; /* key bytes at bytes[key] */
        uint32_t toks, ntok; /* ids at ids[toks], lengths at lens[toks] */
    } *ent;
    uint32_t n, cap;
    char *bytes;
    size_t bytes_n, bytes_cap;
    int32_t *ids;
    uint32_t *lens;
    size_t toks_n, toks_cap;
} tk_cache;

enum { TK_CACHE_MAX_ENTRIES = 1 << 17, TK_CACHE_MAX_WORD = 256 };

struct zero_tokenizer {
    int byte_level;       /* the pre-tokenizer ends with ByteLevel: words are raw bytes */
    int32_t vocab_size;   /* max id + 1 */
    char **tok;           /* [vocab_size] content of each id (NULL: none) */
    uint32_t *tok_n;
    unsigned char *special; /* [vocab_size] special added token */
    tk_strmap content;    /* content -> id: model vocabulary, then added tokens */
    tk_strmap match;      /* byte-level: raw bytes of model tokens -> id (else unused) */
    int32_t byte_id[256]; /* byte-level: id of each single byte; -1 if none */
    int32_t fallback_id[256]; /* <0xXX> ids, -1 if none */
    tk_pairmap merges;
    int32_t *merge_list;  /* (nmerge, 2): the pair of each merge, by rank */
    uint32_t nmerge;
    int32_t unk;          /* -1: none */
    int fuse_unk, byte_fallback, ignore_merges;

    tk_norm *norm;
    int nnorm;
    tk_pre *pre;
    int npre;
    char *pre_sig;        /* the pre-tokenizers as one line (zero_tokenizer_pre_tokenizer) */
    char *norm_sig;       /* the normalizers as one line (zero_tokenizer_normalizer) */
    tk_dec *dec;
    int ndec;
    int has_decoder;
    /* post-processor: the single template as items (-1: the sequence; else an id) */
    int32_t *tmpl;
    int ntmpl;

    tk_added *added;
    int nadded;
    int has_raw_added, has_norm_added;
    uint8_t raw_first[256], norm_first[256]; /* first bytes of raw / normalized added contents */

    int32_t bos, eos, pad;
    char *chat_template;
    char *cfg_bos, *cfg_eos; /* tokenizer_config.json's bos_token / eos_token strings (NULL: absent) */

    tk_cache cache;
    pcre2_match_data *md;
    /* scratch of encode */
    struct tk_word { uint32_t off, len; } *words, *words2;
    size_t nwords_cap, nwords2_cap;
    struct tk_sym { int32_t id; uint32_t len; int32_t prev, next; } *syms;
    size_t syms_cap;
    struct tk_merge { uint32_t rank, pos; int32_t id; } *heap;
    size_t heap_cap;
    int32_t *wids;
    uint32_t *wlens;
    size_t wcap;

    char err[512];
};

/* Formats into tok->err (and err when not NULL). */
void zero__tk_errorf(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Compiles a pattern (UTF + UCP, JIT where available); 0 or -1 with msg. */
int zero__tk_pattern_regex(tk_pattern *p, const char *re, size_t n, char *msg, size_t msg_n);
void zero__tk_pattern_free(tk_pattern *p);
/* Next match of p in s[0..n) at or after `from`: 1 with [*ms, *me), 0 when none (never empty). */
int zero__tk_pattern_next(const tk_pattern *p, pcre2_match_data *md, const char *s, size_t n, size_t from,
                          size_t *ms, size_t *me);

/* Applies the normalizers to s[0..n) (offsets al or base + i) into out; 0 or -1 when out of memory. */
int zero__tk_normalize(zero_tokenizer *t, const char *s, size_t n, const uint32_t *al, uint32_t base, tk_text *out);
void zero__tk_text_free(tk_text *t);

#endif
