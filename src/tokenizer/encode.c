/* src/tokenizer/encode.c — text to ids as Hugging Face tokenizers computes them: added tokens first,
 * then normalizers, pre-tokenizers and BPE (a heap over a linked list of symbols, a word cache),
 * then the post-processor's template. Byte offsets of every token are carried along. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/internal.h"

size_t zero__tk_utf8_bad_len(const char *s, size_t n);

/* A view of text: s[0..n), byte i at original offset al ? al[i] : base + i. */
typedef struct view {
    const char *s;
    size_t n;
    const uint32_t *al;
    uint32_t base;
} view;

static inline uint32_t voff(const view *v, size_t i) { return v->al ? v->al[i] : v->base + (uint32_t)i; }
static inline view vsub(const view *v, size_t a, size_t b) {
    view r = {v->s + a, b - a, v->al ? v->al + a : NULL, v->base + (uint32_t)a};
    return r;
}

typedef struct enc {
    zero_tokenizer *t;
    zero_token_ids *out;
    int offsets;
} enc;

static int push(enc *E, int32_t id, uint32_t off) {
    zero_token_ids *o = E->out;
    if (o->n == o->cap) {
        size_t nc = o->cap ? 2 * o->cap : 256;
        int32_t *ni = realloc(o->ids, nc * sizeof *ni);
        if (!ni) return -1;
        o->ids = ni;
        if (E->offsets || o->offsets) {
            uint32_t *no = realloc(o->offsets, nc * sizeof *no);
            if (!no) return -1;
            o->offsets = no;
        }
        o->cap = nc;
    } else if (E->offsets && !o->offsets) {
        if (!(o->offsets = malloc(o->cap * sizeof *o->offsets))) return -1;
    }
    o->ids[o->n] = id;
    if (o->offsets) o->offsets[o->n] = off;
    o->n++;
    return 0;
}

/* ---------------------------------------------------------------- growable text */
static int text_reserve(tk_text *t, size_t n) {
    if (n <= t->cap) return 0;
    size_t nc = t->cap ? 2 * t->cap : 256;
    while (nc < n) nc *= 2;
    char *ns = realloc(t->s, nc);
    if (!ns) return -1;
    t->s = ns;
    uint32_t *na = realloc(t->al, nc * sizeof *na);
    if (!na) return -1;
    t->al = na;
    t->cap = nc;
    t->own_s = 1;
    return 0;
}

/* Appends bytes, each aligned to `off` (al == NULL) or to al[i]. */
static int text_add(tk_text *t, const char *s, size_t n, const uint32_t *al, uint32_t off) {
    if (!n) return 0;
    if (text_reserve(t, t->n + n)) return -1;
    memcpy(t->s + t->n, s, n);
    for (size_t i = 0; i < n; i++) t->al[t->n + i] = al ? al[i] : off;
    t->n += n;
    return 0;
}
static int text_add_view(tk_text *t, const view *v, size_t a, size_t b) {
    if (b == a) return 0;
    if (text_reserve(t, t->n + (b - a))) return -1;
    memcpy(t->s + t->n, v->s + a, b - a);
    for (size_t i = a; i < b; i++) t->al[t->n + i - a] = voff(v, i);
    t->n += b - a;
    return 0;
}

/* ---------------------------------------------------------------- normalizers */
static int is_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] >= 0x80) return 0;
    return 1;
}

static int norm_unicode(const view *v, int options, tk_text *out) {
    utf8proc_uint8_t *whole = NULL;
    const utf8proc_ssize_t wn = utf8proc_map((const utf8proc_uint8_t *)v->s, (utf8proc_ssize_t)v->n, &whole,
                                             (utf8proc_option_t)options);
    if (wn < 0) return text_add_view(out, v, 0, v->n); /* only on invalid UTF-8, which never reaches here */
    if ((size_t)wn == v->n && !memcmp(whole, v->s, v->n)) {
        free(whole);
        return text_add_view(out, v, 0, v->n);
    }
    /* Align cluster by cluster (normalization does not cross grapheme clusters in practice); if the
     * pieces do not add up to the whole, every byte takes the piece's first offset. */
    const size_t start = out->n;
    utf8proc_int32_t state = 0, prev = -1;
    size_t cs = 0;
    int ok = 1;
    for (size_t i = 0; i <= v->n && ok;) {
        int len = 0;
        uint32_t c = 0;
        if (i < v->n) c = zero__tk_utf8_decode(v->s + i, v->n - i, &len);
        if (i == v->n || (prev >= 0 && utf8proc_grapheme_break_stateful(prev, (utf8proc_int32_t)c, &state))) {
            utf8proc_uint8_t *piece = NULL;
            const utf8proc_ssize_t pn = utf8proc_map((const utf8proc_uint8_t *)v->s + cs, (utf8proc_ssize_t)(i - cs),
                                                     &piece, (utf8proc_option_t)options);
            if (pn < 0 || text_add(out, (const char *)piece, (size_t)pn, NULL, voff(v, cs))) ok = 0;
            free(piece);
            cs = i;
        }
        if (i == v->n) break;
        prev = (utf8proc_int32_t)c;
        i += (size_t)len;
    }
    int rc = 0;
    if (!ok || out->n - start != (size_t)wn || memcmp(out->s + start, whole, (size_t)wn)) {
        out->n = start;
        rc = text_add(out, (const char *)whole, (size_t)wn, NULL, voff(v, 0));
    }
    free(whole);
    return rc;
}

int zero__tk_normalize(zero_tokenizer *t, const char *s, size_t n, const uint32_t *al, uint32_t base, tk_text *out) {
    tk_text a = {0}, b = {0};
    view cur = {s, n, al, base};
    for (int k = 0; k < t->nnorm; k++) {
        const tk_norm *z = &t->norm[k];
        b.n = 0;
        if (z->kind == TK_NORM_PREPEND) {
            if (cur.n == 0) continue;
            if (text_add(&b, z->str, z->str_n, NULL, voff(&cur, 0)) || text_add_view(&b, &cur, 0, cur.n)) goto nomem;
        } else if (z->kind == TK_NORM_REPLACE) {
            size_t from = 0, ms, me;
            while (zero__tk_pattern_next(&z->pat, t->md, cur.s, cur.n, from, &ms, &me)) {
                if (text_add_view(&b, &cur, from, ms) || text_add(&b, z->str, z->str_n, NULL, voff(&cur, ms)))
                    goto nomem;
                from = me;
            }
            if (text_add_view(&b, &cur, from, cur.n)) goto nomem;
        } else {
            if (is_ascii(cur.s, cur.n)) continue;
            if (norm_unicode(&cur, z->utf8proc_options, &b)) goto nomem;
        }
        tk_text tmp = a;
        a = b;
        b = tmp;
        cur = (view){a.s, a.n, a.al, 0};
    }
    zero__tk_text_free(&b);
    if (cur.s == s) { /* no step changed anything: copy */
        if (text_add_view(&a, &cur, 0, cur.n)) goto nomem;
    }
    if (!a.s && text_reserve(&a, 1)) goto nomem;
    *out = a;
    return 0;
nomem:
    zero__tk_text_free(&a);
    zero__tk_text_free(&b);
    return -1;
}

/* ---------------------------------------------------------------- BPE */
static int heap_push(zero_tokenizer *t, size_t *n, uint32_t rank, uint32_t pos, int32_t id) {
    if (*n == t->heap_cap) {
        size_t nc = t->heap_cap ? 2 * t->heap_cap : 256;
        struct tk_merge *nh = realloc(t->heap, nc * sizeof *nh);
        if (!nh) return -1;
        t->heap = nh;
        t->heap_cap = nc;
    }
    struct tk_merge *h = t->heap;
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p].rank < rank || (h[p].rank == rank && h[p].pos < pos)) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = (struct tk_merge){rank, pos, id};
    return 0;
}

static struct tk_merge heap_pop(zero_tokenizer *t, size_t *n) {
    struct tk_merge *h = t->heap, top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && (h[c + 1].rank < h[c].rank || (h[c + 1].rank == h[c].rank && h[c + 1].pos < h[c].pos))) c++;
        if (last.rank < h[c].rank || (last.rank == h[c].rank && last.pos <= h[c].pos)) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = last;
    return top;
}

static int sym_reserve(zero_tokenizer *t, size_t n) {
    if (n <= t->syms_cap) return 0;
    size_t nc = t->syms_cap ? t->syms_cap : 256;
    while (nc < n) nc *= 2;
    struct tk_sym *ns = realloc(t->syms, nc * sizeof *ns);
    if (!ns) return -1;
    t->syms = ns;
    t->syms_cap = nc;
    return 0;
}

/* Appends a symbol, flushing a pending unknown first (HF's merge_word). */
static void sym_add(zero_tokenizer *t, size_t *ns, int32_t id, uint32_t len) {
    t->syms[*ns] = (struct tk_sym){id, len, (int32_t)*ns - 1, (int32_t)*ns + 1};
    (*ns)++;
}

/* BPE of one word: ids and byte lengths into t->wids / t->wlens, *count of them. */
static int bpe_word(zero_tokenizer *t, const char *w, size_t n, size_t *count) {
    if (sym_reserve(t, n + 1)) return -1;
    size_t ns = 0;
    int32_t unk_id = -1;
    uint32_t unk_len = 0;
    for (size_t i = 0; i < n;) {
        int len = 1;
        int32_t id;
        if (t->byte_level) id = t->byte_id[(unsigned char)w[i]];
        else {
            (void)zero__tk_utf8_decode(w + i, n - i, &len);
            id = zero__tk_strmap_get(&t->content, w + i, (size_t)len);
        }
        if (id >= 0) {
            if (unk_id >= 0) sym_add(t, &ns, unk_id, unk_len), unk_id = -1;
            sym_add(t, &ns, id, (uint32_t)len);
        } else {
            int fell_back = 0;
            if (t->byte_fallback) {
                fell_back = 1;
                for (int k = 0; k < len; k++)
                    if (t->fallback_id[(unsigned char)w[i + k]] < 0) fell_back = 0;
                if (fell_back) {
                    if (unk_id >= 0) sym_add(t, &ns, unk_id, unk_len), unk_id = -1;
                    if (sym_reserve(t, ns + (size_t)len + (n - i) + 1)) return -1;
                    for (int k = 0; k < len; k++) sym_add(t, &ns, t->fallback_id[(unsigned char)w[i + k]], 1);
                }
            }
            if (!fell_back && t->unk >= 0) {
                if (unk_id >= 0 && t->fuse_unk) unk_len += (uint32_t)len;
                else {
                    if (unk_id >= 0) sym_add(t, &ns, unk_id, unk_len);
                    unk_id = t->unk;
                    unk_len = (uint32_t)len;
                }
            }
        }
        i += (size_t)len;
    }
    if (unk_id >= 0) sym_add(t, &ns, unk_id, unk_len);
    if (ns) t->syms[ns - 1].next = -1;
    struct tk_sym *y = t->syms;
    size_t nh = 0;
    uint32_t rank;
    int32_t nid;
    for (size_t i = 0; i + 1 < ns; i++)
        if (zero__tk_pairmap_get(&t->merges, y[i].id, y[i + 1].id, &rank, &nid) &&
            heap_push(t, &nh, rank, (uint32_t)i, nid))
            return -1;
    while (nh) {
        const struct tk_merge m = heap_pop(t, &nh);
        struct tk_sym *a = &t->syms[m.pos];
        if (!a->len || a->next < 0) continue;
        struct tk_sym *b = &t->syms[a->next];
        if (!zero__tk_pairmap_get(&t->merges, a->id, b->id, &rank, &nid) || nid != m.id) continue;
        a->id = m.id;
        a->len += b->len;
        a->next = b->next;
        b->len = 0;
        if (a->next >= 0) t->syms[a->next].prev = (int32_t)m.pos;
        if (a->prev >= 0 && zero__tk_pairmap_get(&t->merges, t->syms[a->prev].id, a->id, &rank, &nid) &&
            heap_push(t, &nh, rank, (uint32_t)a->prev, nid))
            return -1;
        if (a->next >= 0 && zero__tk_pairmap_get(&t->merges, a->id, t->syms[a->next].id, &rank, &nid) &&
            heap_push(t, &nh, rank, m.pos, nid))
            return -1;
    }
    if (ns > t->wcap) {
        int32_t *ni = realloc(t->wids, ns * sizeof *ni);
        if (!ni) return -1;
        t->wids = ni;
        uint32_t *nl = realloc(t->wlens, ns * sizeof *nl);
        if (!nl) return -1;
        t->wlens = nl;
        t->wcap = ns;
    }
    size_t k = 0;
    for (int32_t i = ns ? 0 : -1; i >= 0; i = t->syms[i].next) {
        t->wids[k] = t->syms[i].id;
        t->wlens[k++] = t->syms[i].len;
    }
    *count = k;
    return 0;
}

/* ---------------------------------------------------------------- the word cache */
static void cache_reset(tk_cache *c) {
    if (c->slots) memset(c->slots, 0, (c->mask + 1) * sizeof *c->slots);
    c->n = 0;
    c->bytes_n = 0;
    c->toks_n = 0;
}

static const struct tk_cent *cache_get(const tk_cache *c, const char *w, size_t n, uint64_t h) {
    if (!c->slots) return NULL;
    for (uint32_t i = (uint32_t)h & c->mask;; i = (i + 1) & c->mask) {
        const uint32_t s = c->slots[i];
        if (!s) return NULL;
        const struct tk_cent *e = &c->ent[s - 1];
        if (e->hash == h && e->klen == n && !memcmp(c->bytes + e->key, w, n)) return e;
    }
}

/* Best effort: a failed allocation only leaves the word out of the cache. */
static void cache_put(tk_cache *c, const char *w, size_t n, uint64_t h, const int32_t *ids, const uint32_t *lens,
                      size_t k) {
    if (!c->slots) {
        if (!(c->slots = calloc(2 * TK_CACHE_MAX_ENTRIES, sizeof *c->slots))) return;
        if (!(c->ent = malloc(TK_CACHE_MAX_ENTRIES * sizeof *c->ent))) {
            free(c->slots);
            c->slots = NULL;
            return;
        }
        c->mask = 2 * TK_CACHE_MAX_ENTRIES - 1;
        c->cap = TK_CACHE_MAX_ENTRIES;
    }
    if (c->n == c->cap) cache_reset(c);
    if (c->bytes_n + n > c->bytes_cap) {
        size_t nc = c->bytes_cap ? 2 * c->bytes_cap : 1 << 20;
        while (nc < c->bytes_n + n) nc *= 2;
        char *nb = realloc(c->bytes, nc);
        if (!nb) return;
        c->bytes = nb;
        c->bytes_cap = nc;
    }
    if (c->toks_n + k + 1 > c->toks_cap) {
        size_t nc = c->toks_cap ? 2 * c->toks_cap : 1 << 18;
        while (nc < c->toks_n + k + 1) nc *= 2;
        int32_t *ni = realloc(c->ids, nc * sizeof *ni);
        if (!ni) return;
        c->ids = ni;
        uint32_t *nl = realloc(c->lens, nc * sizeof *nl);
        if (!nl) return;
        c->lens = nl;
        c->toks_cap = nc;
    }
    uint32_t i = (uint32_t)h & c->mask;
    while (c->slots[i]) i = (i + 1) & c->mask;
    memcpy(c->bytes + c->bytes_n, w, n);
    if (k) {
        memcpy(c->ids + c->toks_n, ids, k * sizeof *ids);
        memcpy(c->lens + c->toks_n, lens, k * sizeof *lens);
    }
    c->ent[c->n] = (struct tk_cent){h, (uint32_t)c->bytes_n, (uint32_t)n, (uint32_t)c->toks_n, (uint32_t)k};
    c->slots[i] = ++c->n;
    c->bytes_n += n;
    c->toks_n += k;
}

/* Tokens of one pre-token (word) w of view v at [a, b). */
static int emit_word(enc *E, const view *v, size_t a, size_t b) {
    zero_tokenizer *t = E->t;
    const char *w = v->s + a;
    const size_t n = b - a;
    if (t->ignore_merges) {
        const int32_t id = zero__tk_strmap_get(t->byte_level ? &t->match : &t->content, w, n);
        if (id >= 0) return push(E, id, voff(v, a));
    }
    if (n <= TK_CACHE_MAX_WORD) {
        const uint64_t h = zero__tk_hash(w, n);
        const struct tk_cent *e = cache_get(&t->cache, w, n, h);
        if (e) {
            size_t pos = a;
            for (uint32_t i = 0; i < e->ntok; i++) {
                if (push(E, t->cache.ids[e->toks + i], voff(v, pos))) return -1;
                pos += t->cache.lens[e->toks + i];
            }
            return 0;
        }
        size_t k;
        if (bpe_word(t, w, n, &k)) return -1;
        cache_put(&t->cache, w, n, h, t->wids, t->wlens, k);
        size_t pos = a;
        for (size_t i = 0; i < k; i++) {
            if (push(E, t->wids[i], voff(v, pos < v->n ? pos : v->n - 1))) return -1;
            pos += t->wlens[i];
        }
        return 0;
    }
    size_t k;
    if (bpe_word(t, w, n, &k)) return -1;
    size_t pos = a;
    for (size_t i = 0; i < k; i++) {
        if (push(E, t->wids[i], voff(v, pos < v->n ? pos : v->n - 1))) return -1;
        pos += t->wlens[i];
    }
    return 0;
}

/* ---------------------------------------------------------------- pre-tokenizers */
typedef struct words {
    struct tk_word *w;
    size_t n, cap;
} words;

static int words_add(words *ws, size_t off, size_t len) {
    if (!len) return 0; /* HF drops empty splits */
    if (ws->n == ws->cap) {
        size_t nc = ws->cap ? 2 * ws->cap : 256;
        struct tk_word *nw = realloc(ws->w, nc * sizeof *nw);
        if (!nw) return -1;
        ws->w = nw;
        ws->cap = nc;
    }
    ws->w[ws->n++] = (struct tk_word){(uint32_t)off, (uint32_t)len};
    return 0;
}

/* Splits word [a, b) of s by segments (start, end, is_match) per behavior. */
typedef struct seg { size_t a, b; int m; } seg;
static int split_behave(words *out, const seg *g, size_t ng, tk_split_behavior beh) {
    if (beh == TK_SPLIT_ISOLATED) {
        for (size_t i = 0; i < ng; i++)
            if (words_add(out, g[i].a, g[i].b - g[i].a)) return -1;
        return 0;
    }
    if (beh == TK_SPLIT_REMOVED) {
        for (size_t i = 0; i < ng; i++)
            if (!g[i].m && words_add(out, g[i].a, g[i].b - g[i].a)) return -1;
        return 0;
    }
    /* merge segments into pieces, then add them */
    size_t pa = 0, pb = 0;
    int have = 0, prev = 0;
    if (beh == TK_SPLIT_MERGED_NEXT) {
        /* right to left: a match starts a piece with what follows it */
        size_t base = out->n;
        for (size_t j = ng; j-- > 0;) {
            if (g[j].m && !prev && have) pa = g[j].a;
            else {
                if (have && words_add(out, pa, pb - pa)) return -1;
                pa = g[j].a, pb = g[j].b, have = 1;
            }
            prev = g[j].m;
        }
        if (have && words_add(out, pa, pb - pa)) return -1;
        for (size_t i = base, j = out->n; i + 1 < j; i++, j--) { /* back to left-to-right order */
            struct tk_word tmp = out->w[i];
            out->w[i] = out->w[j - 1];
            out->w[j - 1] = tmp;
        }
        return 0;
    }
    for (size_t j = 0; j < ng; j++) {
        const int join = beh == TK_SPLIT_MERGED_PREV ? (g[j].m && !prev) : (g[j].m == prev);
        if (join && have) pb = g[j].b;
        else {
            if (have && words_add(out, pa, pb - pa)) return -1;
            pa = g[j].a, pb = g[j].b, have = 1;
        }
        prev = g[j].m;
    }
    if (have && words_add(out, pa, pb - pa)) return -1;
    return 0;
}

typedef struct segs {
    seg *g;
    size_t n, cap;
} segs;
static int segs_add(segs *s, size_t a, size_t b, int m) {
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 64;
        seg *ng = realloc(s->g, nc * sizeof *ng);
        if (!ng) return -1;
        s->g = ng;
        s->cap = nc;
    }
    s->g[s->n++] = (seg){a, b, m};
    return 0;
}

/* Splits every word of `in` by a pattern into `out` (offsets stay in the same text). */
static int pre_split(zero_tokenizer *t, const tk_pattern *pat, tk_split_behavior beh, int invert, const char *s,
                     const words *in, words *out, segs *sg) {
    for (size_t k = 0; k < in->n; k++) {
        const size_t a = in->w[k].off, n = in->w[k].len;
        size_t from = 0, ms, me;
        if (beh == TK_SPLIT_ISOLATED) { /* the hot path: matches and the gaps between them */
            while (zero__tk_pattern_next(pat, t->md, s + a, n, from, &ms, &me)) {
                if ((ms > from && words_add(out, a + from, ms - from)) || words_add(out, a + ms, me - ms)) return -1;
                from = me;
            }
            if (from < n && words_add(out, a + from, n - from)) return -1;
            continue;
        }
        sg->n = 0;
        while (zero__tk_pattern_next(pat, t->md, s + a, n, from, &ms, &me)) {
            if ((ms > from && segs_add(sg, a + from, a + ms, invert)) || segs_add(sg, a + ms, a + me, !invert)) return -1;
            from = me;
        }
        if (from < n && segs_add(sg, a + from, a + n, invert)) return -1;
        if (split_behave(out, sg->g, sg->n, beh)) return -1;
    }
    return 0;
}

static int pre_digits(int individual, const char *s, const words *in, words *out, segs *sg) {
    for (size_t k = 0; k < in->n; k++) {
        const size_t a = in->w[k].off, n = in->w[k].len;
        sg->n = 0;
        size_t run = 0;
        for (size_t i = 0; i < n;) {
            int len;
            const uint32_t c = zero__tk_utf8_decode(s + a + i, n - i, &len);
            if (zero__tk_is_numeric(c)) {
                if ((i > run && segs_add(sg, a + run, a + i, 0)) || segs_add(sg, a + i, a + i + (size_t)len, 1)) return -1;
                run = i + (size_t)len;
            }
            i += (size_t)len;
        }
        if (run < n && segs_add(sg, a + run, a + n, 0)) return -1;
        if (split_behave(out, sg->g, sg->n, individual ? TK_SPLIT_ISOLATED : TK_SPLIT_CONTIGUOUS)) return -1;
    }
    return 0;
}

/* Pre-tokenizes view v and emits the BPE tokens of every word. */
static int pretokenize(enc *E, const view *v0) {
    zero_tokenizer *t = E->t;
    words A = {t->words, 0, t->nwords_cap}, B = {t->words2, 0, t->nwords2_cap};
    segs sg = {0};
    tk_text buf[2] = {{0}, {0}};
    int nb = 0, rc = -1;
    view v = *v0;
    if (words_add(&A, 0, v.n)) goto done;
    for (int k = 0; k < t->npre; k++) {
        const tk_pre *p = &t->pre[k];
        B.n = 0;
        if (p->kind == TK_PRE_SPLIT) {
            if (pre_split(t, &p->pat, p->behavior, p->invert, v.s, &A, &B, &sg)) goto done;
        } else if (p->kind == TK_PRE_DIGITS) {
            if (pre_digits(p->flag, v.s, &A, &B, &sg)) goto done;
        } else if (p->kind == TK_PRE_BYTELEVEL) {
            if (p->add_prefix_space) { /* a space before every word that does not start with one */
                tk_text *nt = &buf[nb];
                nt->n = 0;
                for (size_t i = 0; i < A.n; i++) {
                    const size_t a = A.w[i].off, n = A.w[i].len, start = nt->n;
                    if (v.s[a] != ' ' && text_add(nt, " ", 1, NULL, voff(&v, a))) goto done;
                    if (text_add_view(nt, &v, a, a + n) || words_add(&B, start, nt->n - start)) goto done;
                }
                v = (view){nt->s, nt->n, nt->al, 0};
                nb ^= 1;
                words T = A;
                A = B;
                B = T;
                B.n = 0;
            }
            if (p->pat.re) {
                if (pre_split(t, &p->pat, TK_SPLIT_ISOLATED, 0, v.s, &A, &B, &sg)) goto done;
            } else {
                continue;
            }
        } else { /* METASPACE: spaces to the replacement, maybe one before, maybe split before each */
            tk_text *nt = &buf[nb];
            nt->n = 0;
            words C = {0};
            for (size_t i = 0; i < A.n; i++) {
                const size_t a = A.w[i].off, n = A.w[i].len, start = nt->n;
                const int starts = n >= (size_t)p->repl_n ? !memcmp(v.s + a, p->repl, (size_t)p->repl_n) || v.s[a] == ' '
                                                          : v.s[a] == ' ';
                if (!starts && (p->scheme == TK_PREPEND_ALWAYS || (p->scheme == TK_PREPEND_FIRST && voff(&v, a) == 0)) &&
                    text_add(nt, p->repl, (size_t)p->repl_n, NULL, voff(&v, a)))
                    goto done;
                for (size_t j = a; j < a + n; j++) {
                    if (v.s[j] == ' ') {
                        if (text_add(nt, p->repl, (size_t)p->repl_n, NULL, voff(&v, j))) goto done;
                    } else if (text_add(nt, v.s + j, 1, NULL, voff(&v, j))) {
                        goto done;
                    }
                }
                if (words_add(&B, start, nt->n - start)) goto done;
            }
            v = (view){nt->s, nt->n, nt->al, 0};
            nb ^= 1;
            if (p->flag) { /* split on the replacement, MergedWithNext */
                tk_pattern lit = {(char *)p->repl, (size_t)p->repl_n, NULL};
                C = A;
                C.n = 0;
                if (pre_split(t, &lit, TK_SPLIT_MERGED_NEXT, 0, v.s, &B, &C, &sg)) {
                    A = C;
                    goto done;
                }
                A = B;
                B = C;
            }
        }
        words T = A;
        A = B;
        B = T;
    }
    for (size_t i = 0; i < A.n; i++)
        if (emit_word(E, &v, A.w[i].off, A.w[i].off + A.w[i].len)) goto done;
    rc = 0;
done:
    /* keep the scratch lists for the next call */
    t->words = A.w, t->nwords_cap = A.cap;
    t->words2 = B.w, t->nwords2_cap = B.cap;
    free(sg.g);
    zero__tk_text_free(&buf[0]);
    zero__tk_text_free(&buf[1]);
    return rc;
}

/* ---------------------------------------------------------------- added tokens */
/* The added token (raw or normalized set) that matches longest at s[i..n), or -1. */
static int match_added(const zero_tokenizer *t, int normalized, const char *s, size_t n, size_t i) {
    int best = -1;
    size_t best_n = 0;
    for (int k = 0; k < t->nadded; k++) {
        const tk_added *x = &t->added[k];
        if ((int)x->normalized != normalized) continue;
        const char *c = normalized && x->norm ? x->norm : x->content;
        const size_t cn = normalized && x->norm ? x->norm_n : x->n;
        if (cn > best_n && cn <= n - i && c[0] == s[i] && !memcmp(c, s + i, cn)) best = k, best_n = cn;
    }
    return best;
}

static int prev_is_word(const char *s, size_t i) {
    if (i == 0) return 0;
    size_t j = i - 1;
    while (j > 0 && ((unsigned char)s[j] & 0xC0) == 0x80) j--;
    int len;
    return zero__tk_is_word(zero__tk_utf8_decode(s + j, i - j, &len));
}

typedef int (*piece_fn)(enc *E, const view *v);

/* Splits v at added tokens of one set, emitting their ids, and hands the rest to fn. */
static int split_added(enc *E, const view *v, int normalized, piece_fn fn) {
    const zero_tokenizer *t = E->t;
    const uint8_t *first = normalized ? t->norm_first : t->raw_first;
    size_t start_offset = 0;
    for (size_t i = 0; i < v->n;) {
        if (!first[(unsigned char)v->s[i]]) {
            i++;
            continue;
        }
        const int k = match_added(t, normalized, v->s, v->n, i);
        if (k < 0) {
            i++;
            continue;
        }
        const tk_added *x = &t->added[k];
        size_t start = i, stop = i + (normalized && x->norm ? x->norm_n : x->n);
        if (x->single_word) {
            int len;
            const int after = stop < v->n && zero__tk_is_word(zero__tk_utf8_decode(v->s + stop, v->n - stop, &len));
            if (prev_is_word(v->s, start) || after) {
                i = stop; /* the search goes on after the discarded match */
                continue;
            }
        }
        if (x->lstrip) {
            size_t j = start;
            while (j > 0) {
                size_t q = j - 1;
                while (q > 0 && ((unsigned char)v->s[q] & 0xC0) == 0x80) q--;
                int len;
                if (!zero__tk_is_white_space(zero__tk_utf8_decode(v->s + q, j - q, &len))) break;
                j = q;
            }
            start = j > start_offset ? j : start_offset;
        }
        if (x->rstrip) {
            while (stop < v->n) {
                int len;
                if (!zero__tk_is_white_space(zero__tk_utf8_decode(v->s + stop, v->n - stop, &len))) break;
                stop += (size_t)len;
            }
        }
        if (start_offset < start) {
            const view sub = vsub(v, start_offset, start);
            if (fn(E, &sub)) return -1;
        }
        if (push(E, x->id, voff(v, start))) return -1;
        start_offset = stop;
        i = stop;
    }
    if (start_offset < v->n) {
        const view sub = vsub(v, start_offset, v->n);
        if (fn(E, &sub)) return -1;
    }
    return 0;
}

static int piece_normalized(enc *E, const view *v) { return pretokenize(E, v); }

/* A piece between raw added tokens: normalize, then split at normalized added tokens. */
static int piece_raw(enc *E, const view *v) {
    zero_tokenizer *t = E->t;
    if (!t->nnorm) return t->has_norm_added ? split_added(E, v, 1, piece_normalized) : pretokenize(E, v);
    tk_text nt = {0};
    if (zero__tk_normalize(t, v->s, v->n, v->al, v->base, &nt)) return -1;
    const view nv = {nt.s, nt.n, nt.al, 0};
    int rc = 0;
    if (nv.n) rc = t->has_norm_added ? split_added(E, &nv, 1, piece_normalized) : pretokenize(E, &nv);
    zero__tk_text_free(&nt);
    return rc;
}

/* ---------------------------------------------------------------- entry point */
zero_status zero_tokenizer_encode(zero_tokenizer *t, const char *text, size_t len, unsigned flags,
                                  zero_token_ids *out) {
    if (len > 0xFFFFFF00u || (!text && len)) {
        zero__tk_errorf(t->err, "text of %zu bytes at %p: expected at most 4 GiB, and a text unless empty", len,
                        (const void *)text);
        return ZERO_ERR_INVALID_ARG;
    }
    enc E = {t, out, (flags & ZERO_TOK_OFFSETS) != 0};
    tk_text clean = {0};
    view v = {text ? text : "", len, NULL, 0};
    size_t ok = zero__tk_utf8_valid(v.s, len);
    if (ok < len) { /* invalid UTF-8: each maximal ill-formed subpart becomes U+FFFD */
        size_t i = 0;
        while (i < len) {
            if (ok > i && text_add_view(&clean, &v, i, ok)) goto nomem;
            i = ok;
            if (i >= len) break;
            const size_t bad = zero__tk_utf8_bad_len(text + i, len - i);
            if (text_add(&clean, "\xEF\xBF\xBD", 3, NULL, (uint32_t)i)) goto nomem;
            i += bad;
            ok = i + zero__tk_utf8_valid(text + i, len - i);
        }
        v = (view){clean.s, clean.n, clean.al, 0};
    }
    const int special = (flags & ZERO_TOK_ADD_SPECIAL) && t->tmpl;
    int k = 0;
    for (; special && k < t->ntmpl && t->tmpl[k] >= 0; k++)
        if (push(&E, t->tmpl[k], 0)) goto nomem;
    if (v.n && (t->has_raw_added ? split_added(&E, &v, 0, piece_raw) : piece_raw(&E, &v))) goto nomem;
    for (k++; special && k < t->ntmpl; k++)
        if (push(&E, t->tmpl[k], (uint32_t)len)) goto nomem;
    zero__tk_text_free(&clean);
    return ZERO_OK;
nomem:
    zero__tk_text_free(&clean);
    zero__tk_errorf(t->err, "out of memory encoding %zu bytes of text", len);
    return ZERO_ERR_NOMEM;
}

void zero_token_ids_free(zero_token_ids *v) {
    if (!v) return;
    free(v->ids);
    free(v->offsets);
    memset(v, 0, sizeof *v);
}
