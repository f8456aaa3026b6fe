/* src/tokenizer/decode.c — ids back to text through the tokenizer.json decoder chain (ByteLevel,
 * Replace, ByteFallback, Fuse, Strip, Metaspace), as Hugging Face tokenizers decodes. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/internal.h"

size_t zero__tk_utf8_bad_len(const char *s, size_t n);

/* A list of strings: the tokens as they pass through the chain. */
typedef struct strs {
    char **s;
    size_t *n;
    size_t len, cap;
} strs;

static int strs_add(strs *l, const char *s, size_t n) {
    if (l->len == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        char **ns = realloc(l->s, nc * sizeof *ns);
        if (!ns) return -1;
        l->s = ns;
        size_t *nn = realloc(l->n, nc * sizeof *nn);
        if (!nn) return -1;
        l->n = nn;
        l->cap = nc;
    }
    char *c = malloc(n + 1);
    if (!c) return -1;
    memcpy(c, s, n);
    c[n] = 0;
    l->s[l->len] = c;
    l->n[l->len++] = n;
    return 0;
}

static void strs_free(strs *l) {
    for (size_t i = 0; i < l->len; i++) free(l->s[i]);
    free(l->s);
    free(l->n);
    memset(l, 0, sizeof *l);
}

/* A growable byte buffer. */
typedef struct buf {
    char *p;
    size_t n, cap;
} buf;
static int buf_add(buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) return -1;
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

/* Lossy UTF-8: each maximal ill-formed subpart becomes U+FFFD. */
static int buf_add_lossy(buf *b, const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        const size_t ok = zero__tk_utf8_valid(s + i, n - i);
        if (buf_add(b, s + i, ok)) return -1;
        i += ok;
        if (i < n) {
            if (buf_add(b, "\xEF\xBF\xBD", 3)) return -1;
            i += zero__tk_utf8_bad_len(s + i, n - i);
        }
    }
    return 0;
}

/* Replaces the tokens of l by the one string b (taking its memory). */
static int strs_set_one(strs *l, buf *b) {
    for (size_t i = 0; i < l->len; i++) free(l->s[i]);
    l->len = 0;
    if (!b->p && buf_add(b, "", 0)) return -1;
    if (l->cap == 0) {
        if (strs_add(l, "", 0)) return -1;
        free(l->s[0]);
    } else {
        l->len = 1;
    }
    l->len = 1;
    l->s[0] = b->p;
    l->n[0] = b->n;
    memset(b, 0, sizeof *b);
    return 0;
}

static int byte_of_alphabet(uint32_t c) {
    /* inverse of the byte-level alphabet: printable bytes map to themselves, the others to 256 + n */
    static int16_t inv[512];
    static int init;
    if (!init) {
        int n = 0;
        for (int i = 0; i < 512; i++) inv[i] = -1;
        for (int b = 0; b < 256; b++) {
            const int keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            inv[keep ? b : 256 + n++] = (int16_t)b;
        }
        init = 1;
    }
    return c < 512 ? inv[c] : -1;
}

static int dec_bytelevel(strs *l) {
    buf raw = {0}, out = {0};
    int rc = -1;
    for (size_t k = 0; k < l->len; k++) {
        const char *s = l->s[k];
        const size_t n = l->n[k], start = raw.n;
        int all = 1;
        for (size_t i = 0; i < n;) {
            int len;
            const int b = byte_of_alphabet(zero__tk_utf8_decode(s + i, n - i, &len));
            if (b < 0) {
                all = 0;
                break;
            }
            char c = (char)b;
            if (buf_add(&raw, &c, 1)) goto done;
            i += (size_t)len;
        }
        if (!all) {
            raw.n = start;
            if (buf_add(&raw, s, n)) goto done;
        }
    }
    if (buf_add_lossy(&out, raw.p ? raw.p : "", raw.n)) goto done;
    rc = strs_set_one(l, &out);
done:
    free(raw.p);
    free(out.p);
    return rc;
}

static int dec_replace(zero_tokenizer *t, const tk_dec *d, strs *l) {
    for (size_t k = 0; k < l->len; k++) {
        buf b = {0};
        size_t from = 0, ms, me;
        while (zero__tk_pattern_next(&d->pat, t->md, l->s[k], l->n[k], from, &ms, &me)) {
            if (buf_add(&b, l->s[k] + from, ms - from) || buf_add(&b, d->str, d->str_n)) goto fail;
            from = me;
        }
        if (buf_add(&b, l->s[k] + from, l->n[k] - from)) goto fail;
        free(l->s[k]);
        l->s[k] = b.p;
        l->n[k] = b.n;
        continue;
    fail:
        free(b.p);
        return -1;
    }
    return 0;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int flush_bytes(strs *out, buf *pending) {
    if (!pending->n) return 0;
    int rc = 0;
    if (zero__tk_utf8_valid(pending->p, pending->n) == pending->n) rc = strs_add(out, pending->p, pending->n);
    else
        for (size_t i = 0; i < pending->n && !rc; i++) rc = strs_add(out, "\xEF\xBF\xBD", 3);
    pending->n = 0;
    return rc;
}

static int dec_bytefallback(strs *l) {
    strs out = {0};
    buf pending = {0};
    for (size_t k = 0; k < l->len; k++) {
        const char *s = l->s[k];
        int b = -1;
        if (l->n[k] == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && hexval(s[3]) >= 0 && hexval(s[4]) >= 0)
            b = hexval(s[3]) * 16 + hexval(s[4]);
        if (b >= 0) {
            char c = (char)b;
            if (buf_add(&pending, &c, 1)) goto fail;
        } else if (flush_bytes(&out, &pending) || strs_add(&out, s, l->n[k])) {
            goto fail;
        }
    }
    if (flush_bytes(&out, &pending)) goto fail;
    free(pending.p);
    strs_free(l);
    *l = out;
    return 0;
fail:
    free(pending.p);
    strs_free(&out);
    return -1;
}

static int dec_fuse(strs *l) {
    buf b = {0};
    for (size_t k = 0; k < l->len; k++)
        if (buf_add(&b, l->s[k], l->n[k])) {
            free(b.p);
            return -1;
        }
    if (strs_set_one(l, &b)) {
        free(b.p);
        return -1;
    }
    return 0;
}

static int dec_strip(const tk_dec *d, strs *l) {
    for (size_t k = 0; k < l->len; k++) {
        char *s = l->s[k];
        size_t a = 0, e = l->n[k];
        for (int i = 0; i < d->start && a + d->str_n <= e && !memcmp(s + a, d->str, d->str_n); i++) a += d->str_n;
        for (int i = 0; i < d->stop && e >= a + d->str_n && !memcmp(s + e - d->str_n, d->str, d->str_n); i++)
            e -= d->str_n;
        memmove(s, s + a, e - a);
        s[e - a] = 0;
        l->n[k] = e - a;
    }
    return 0;
}

static int dec_metaspace(const tk_dec *d, strs *l) {
    for (size_t k = 0; k < l->len; k++) {
        buf b = {0};
        const char *s = l->s[k];
        const size_t n = l->n[k];
        for (size_t i = 0; i < n;) {
            if (i + d->str_n <= n && !memcmp(s + i, d->str, d->str_n)) {
                if (!(k == 0 && d->scheme != TK_PREPEND_NEVER) && buf_add(&b, " ", 1)) goto fail;
                i += d->str_n;
            } else {
                if (buf_add(&b, s + i, 1)) goto fail;
                i++;
            }
        }
        if (!b.p && buf_add(&b, "", 0)) goto fail;
        free(l->s[k]);
        l->s[k] = b.p;
        l->n[k] = b.n;
        continue;
    fail:
        free(b.p);
        return -1;
    }
    return 0;
}

zero_status zero_tokenizer_decode(zero_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char **text,
                                  size_t *len) {
    *text = NULL;
    if (len) *len = 0;
    strs l = {0};
    buf out = {0};
    for (size_t i = 0; i < n; i++) {
        const int32_t id = ids[i];
        if (id < 0 || id >= t->vocab_size || !t->tok[id]) {
            zero__tk_errorf(t->err, "token id %d at index %zu: expected an id of the vocabulary (0 .. %d)", id, i,
                            t->vocab_size - 1);
            strs_free(&l);
            return ZERO_ERR_INVALID_ARG;
        }
        if ((flags & ZERO_TOK_SKIP_SPECIAL) && t->special[id]) continue;
        /* an added token with normalized = true decodes from its normalized form */
        const char *s = t->tok[id];
        size_t sn = t->tok_n[id];
        for (int k = 0; k < t->nadded; k++)
            if (t->added[k].id == id && t->added[k].norm) s = t->added[k].norm, sn = t->added[k].norm_n;
        if (strs_add(&l, s, sn)) goto nomem;
    }
    if (!t->has_decoder) { /* HF joins with spaces when there is no decoder */
        for (size_t k = 0; k < l.len; k++)
            if ((k && buf_add(&out, " ", 1)) || buf_add(&out, l.s[k], l.n[k])) goto nomem;
    } else {
        for (int k = 0; k < t->ndec; k++) {
            const tk_dec *d = &t->dec[k];
            int rc = 0;
            switch (d->kind) {
            case TK_DEC_BYTELEVEL: rc = dec_bytelevel(&l); break;
            case TK_DEC_REPLACE: rc = dec_replace(t, d, &l); break;
            case TK_DEC_BYTEFALLBACK: rc = dec_bytefallback(&l); break;
            case TK_DEC_FUSE: rc = dec_fuse(&l); break;
            case TK_DEC_STRIP: rc = dec_strip(d, &l); break;
            case TK_DEC_METASPACE: rc = dec_metaspace(d, &l); break;
            }
            if (rc) goto nomem;
        }
        for (size_t k = 0; k < l.len; k++)
            if (buf_add(&out, l.s[k], l.n[k])) goto nomem;
    }
    if (!out.p && buf_add(&out, "", 0)) goto nomem;
    strs_free(&l);
    *text = out.p;
    if (len) *len = out.n;
    return ZERO_OK;
nomem:
    strs_free(&l);
    free(out.p);
    zero__tk_errorf(t->err, "out of memory decoding %zu ids", n);
    return ZERO_ERR_NOMEM;
}

void zero_tokenizer_free_text(char *text) { free(text); }
