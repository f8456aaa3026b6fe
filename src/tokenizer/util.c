/* src/tokenizer/util.c — the tokenizer layer's building blocks: hash maps, UTF-8, Unicode classes
 * (through utf8proc) and PCRE2 patterns (UTF + Unicode properties, JIT where available). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/internal.h"

void zero__tk_errorf(char *dst, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, 512, fmt, ap);
    va_end(ap);
}

/* ---------------------------------------------------------------- hashing */
static inline uint64_t rd64u(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

uint64_t zero__tk_hash(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 0x243F6A8885A308D3ull ^ (n * 0x9E3779B97F4A7C15ull);
    while (n >= 8) {
        h = (h ^ rd64u(p)) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) t |= (uint64_t)p[i] << (8 * i);
    h = (h ^ t) * 0x94D049BB133111EBull;
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
}

/* ---------------------------------------------------------------- bytes -> int32 */
static int strmap_grow(tk_strmap *m) {
    const uint32_t nslots = m->mask ? 2 * (m->mask + 1) : 1024;
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return -1;
    for (uint32_t e = 0; e < m->n; e++) {
        uint32_t i = (uint32_t)m->ent[e].hash & (nslots - 1);
        while (slots[i]) i = (i + 1) & (nslots - 1);
        slots[i] = e + 1;
    }
    free(m->slots);
    m->slots = slots;
    m->mask = nslots - 1;
    return 0;
}

int32_t zero__tk_strmap_get(const tk_strmap *m, const char *k, size_t n) {
    if (!m->slots) return -1;
    const uint64_t h = zero__tk_hash(k, n);
    for (uint32_t i = (uint32_t)h & m->mask;; i = (i + 1) & m->mask) {
        const uint32_t s = m->slots[i];
        if (!s) return -1;
        const struct tk_strent *e = &m->ent[s - 1];
        if (e->hash == h && e->len == n && !memcmp(m->keys + e->off, k, n)) return e->val;
    }
}

int zero__tk_strmap_put(tk_strmap *m, const char *k, size_t n, int32_t val) {
    if ((m->n + 1) * 4 >= (m->mask + 1) * 3 && strmap_grow(m)) return -1;
    const uint64_t h = zero__tk_hash(k, n);
    uint32_t i = (uint32_t)h & m->mask;
    for (; m->slots[i]; i = (i + 1) & m->mask) {
        struct tk_strent *e = &m->ent[m->slots[i] - 1];
        if (e->hash == h && e->len == n && !memcmp(m->keys + e->off, k, n)) {
            e->val = val;
            return 0;
        }
    }
    if (m->n == m->cap) {
        uint32_t nc = m->cap ? 2 * m->cap : 1024;
        struct tk_strent *ne = realloc(m->ent, nc * sizeof *ne);
        if (!ne) return -1;
        m->ent = ne;
        m->cap = nc;
    }
    if (m->keys_n + n + 1 > m->keys_cap) {
        size_t nc = m->keys_cap ? 2 * m->keys_cap : 65536;
        while (nc < m->keys_n + n + 1) nc *= 2;
        char *nk = realloc(m->keys, nc);
        if (!nk) return -1;
        m->keys = nk;
        m->keys_cap = nc;
    }
    memcpy(m->keys + m->keys_n, k, n);
    m->keys[m->keys_n + n] = 0;
    m->ent[m->n] = (struct tk_strent){h, (uint32_t)m->keys_n, (uint32_t)n, val};
    m->keys_n += n + 1;
    m->slots[i] = ++m->n;
    return 0;
}

void zero__tk_strmap_free(tk_strmap *m) {
    free(m->slots);
    free(m->ent);
    free(m->keys);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- pairs */
static int pairmap_grow(tk_pairmap *m) {
    const uint32_t nslots = m->mask ? 2 * (m->mask + 1) : 1024;
    uint64_t *keys = calloc(nslots, sizeof *keys);
    uint32_t *rank = malloc(nslots * sizeof *rank);
    int32_t *id = malloc(nslots * sizeof *id);
    if (!keys || !rank || !id) {
        free(keys);
        free(rank);
        free(id);
        return -1;
    }
    for (uint32_t j = 0; m->keys && j <= m->mask; j++) {
        if (!m->keys[j]) continue;
        const uint64_t h = m->keys[j] * 0x9E3779B97F4A7C15ull;
        uint32_t i = (uint32_t)(h >> 32) & (nslots - 1);
        while (keys[i]) i = (i + 1) & (nslots - 1);
        keys[i] = m->keys[j];
        rank[i] = m->rank[j];
        id[i] = m->id[j];
    }
    free(m->keys);
    free(m->rank);
    free(m->id);
    m->keys = keys;
    m->rank = rank;
    m->id = id;
    m->mask = nslots - 1;
    return 0;
}

int zero__tk_pairmap_put(tk_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t id) {
    if ((m->n + 1) * 2 >= (m->keys ? m->mask + 1 : 0) && pairmap_grow(m)) return -1;
    const uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    const uint64_t h = k * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & m->mask;
    while (m->keys[i] && m->keys[i] != k) i = (i + 1) & m->mask;
    if (!m->keys[i]) m->n++;
    m->keys[i] = k;
    m->rank[i] = rank;
    m->id[i] = id;
    return 0;
}

void zero__tk_pairmap_free(tk_pairmap *m) {
    free(m->keys);
    free(m->rank);
    free(m->id);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- UTF-8 */
uint32_t zero__tk_utf8_decode(const char *s, size_t n, int *len) {
    const unsigned char *p = (const unsigned char *)s;
    if (p[0] < 0x80 || n < 2) {
        *len = 1;
        return p[0];
    }
    if (p[0] < 0xE0) {
        *len = 2;
        return (uint32_t)(p[0] & 0x1F) << 6 | (p[1] & 0x3F);
    }
    if (p[0] < 0xF0 || n < 4) {
        *len = 3;
        return (uint32_t)(p[0] & 0x0F) << 12 | (uint32_t)(p[1] & 0x3F) << 6 | (p[2] & 0x3F);
    }
    *len = 4;
    return (uint32_t)(p[0] & 0x07) << 18 | (uint32_t)(p[1] & 0x3F) << 12 | (uint32_t)(p[2] & 0x3F) << 6 |
           (p[3] & 0x3F);
}

int zero__tk_utf8_encode(uint32_t c, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (c < 0x80) {
        o[0] = (unsigned char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (unsigned char)(0xC0 | c >> 6);
        o[1] = (unsigned char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        o[0] = (unsigned char)(0xE0 | c >> 12);
        o[1] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
        o[2] = (unsigned char)(0x80 | (c & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | c >> 18);
    o[1] = (unsigned char)(0x80 | (c >> 12 & 0x3F));
    o[2] = (unsigned char)(0x80 | (c >> 6 & 0x3F));
    o[3] = (unsigned char)(0x80 | (c & 0x3F));
    return 4;
}

/* Bytes of the well-formed sequence at p (Unicode table 3-7), or 0 when it is not one. */
static int utf8_seq(const unsigned char *p, size_t n) {
    const unsigned c = p[0];
    if (c < 0x80) return 1;
    int need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) need = 2, lo = 0xA0;
    else if (c == 0xED) need = 2, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) need = 2;
    else if (c == 0xF0) need = 3, lo = 0x90;
    else if (c == 0xF4) need = 3, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else return 0;
    if ((size_t)need >= n) return 0;
    if (p[1] < lo || p[1] > hi) return 0;
    for (int i = 2; i <= need; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return need + 1;
}

size_t zero__tk_utf8_valid(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        const int k = utf8_seq(p + i, n - i);
        if (!k) return i;
        i += (size_t)k;
    }
    return n;
}

/* Bytes of the maximal subpart of an ill-formed sequence at p (>= 1): the longest prefix of a
 * well-formed sequence, as Python's and Rust's lossy decoders replace it with one U+FFFD. */
size_t zero__tk_utf8_bad_len(const char *s, size_t n);
size_t zero__tk_utf8_bad_len(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    const unsigned c = p[0];
    int need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c == 0xE0) need = 2, lo = 0xA0;
    else if (c == 0xED) need = 2, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) need = 2;
    else if (c == 0xF0) need = 3, lo = 0x90;
    else if (c == 0xF4) need = 3, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) need = 3;
    else return 1;
    size_t k = 1;
    for (int i = 1; i <= need && k < n; i++) {
        const unsigned b = p[k];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
        k++;
    }
    return k;
}

/* ---------------------------------------------------------------- Unicode classes */
int zero__tk_is_white_space(uint32_t c) {
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return 0;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

int zero__tk_is_py_space(uint32_t c) {
    if (c >= 0x1C && c <= 0x1F) return 1;
    return zero__tk_is_white_space(c);
}

int zero__tk_is_word(uint32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (c == 0x200C || c == 0x200D) return 1;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}

int zero__tk_is_numeric(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    const utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

/* ---------------------------------------------------------------- patterns */
int zero__tk_pattern_regex(tk_pattern *p, const char *re, size_t n, char *msg, size_t msg_n) {
    int code;
    PCRE2_SIZE off;
    p->re = pcre2_compile((PCRE2_SPTR)re, n, PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
    if (!p->re) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(code, buf, sizeof buf);
        snprintf(msg, msg_n, "%s at offset %zu", (const char *)buf, (size_t)off);
        return -1;
    }
    (void)pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
    return 0;
}

void zero__tk_pattern_free(tk_pattern *p) {
    free(p->lit);
    if (p->re) pcre2_code_free(p->re);
    memset(p, 0, sizeof *p);
}

int zero__tk_pattern_next(const tk_pattern *p, pcre2_match_data *md, const char *s, size_t n, size_t from,
                          size_t *ms, size_t *me) {
    if (!p->re) {
        if (!p->lit_n) return 0;
        for (size_t i = from; i + p->lit_n <= n; i++) {
            const char *f = memchr(s + i, p->lit[0], n - i - p->lit_n + 1);
            if (!f) return 0;
            i = (size_t)(f - s);
            if (!memcmp(f, p->lit, p->lit_n)) {
                *ms = i;
                *me = i + p->lit_n;
                return 1;
            }
        }
        return 0;
    }
    while (from <= n) {
        const int rc = pcre2_match(p->re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0) return 0;
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] > ov[0]) {
            *ms = ov[0];
            *me = ov[1];
            return 1;
        }
        /* an empty match splits nothing: search again one character further */
        if (ov[0] >= n) return 0;
        int len;
        (void)zero__tk_utf8_decode(s + ov[0], n - ov[0], &len);
        from = ov[0] + (size_t)len;
    }
    return 0;
}

void zero__tk_text_free(tk_text *t) {
    if (t->own_s) free(t->s);
    free(t->al);
    memset(t, 0, sizeof *t);
}
