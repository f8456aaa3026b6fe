/* src/template/render.c — renders a parsed chat template: Jinja's values with Python's semantics
 * (str(), ==, truth, slicing by code point), the filters, tests, string methods and globals that chat
 * templates use, transformers' tojson, raise_exception and strftime_now; bounded output, memory, steps. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "template/internal.h"

typedef struct buf {
    char *p;
    size_t n, cap;
} buf;

typedef struct scope {
    struct scope *up;
    size_t n, cap;
    tp_str *k;
    tp_val *v;
} scope;

typedef struct rstate {
    tp_arena A;
    jmp_buf jb;
    zero_error *err;
    zero_status st;
    buf out;  /* the output (malloc'd) */
    buf *cur; /* where text goes: &out, or a capture (arena) */
    size_t (*spans)[2];
    size_t nspans, spans_cap;
    uint64_t steps, max_steps, max_out;
    int depth;
    int64_t now;
    scope *root;
} rstate;

enum { F_RANGE = 1, F_NAMESPACE, F_RAISE, F_STRFTIME, F_DICT };

static _Noreturn void fail(rstate *R, int line, zero_status st, const char *fmt, ...) {
    char m[440];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(R->err->msg, sizeof R->err->msg, "chat template line %d: %s", line, m);
    R->st = st;
    longjmp(R->jb, 1);
}
#define FAILF(line, ...) fail(R, line, ZERO_ERR_FORMAT, __VA_ARGS__)
#define FAILU(line, ...) fail(R, line, ZERO_ERR_UNSUPPORTED, __VA_ARGS__)

static void step(rstate *R, int line) {
    if (++R->steps > R->max_steps)
        fail(R, line, ZERO_ERR_NOSPACE, "more than %llu steps: the template does not end in reasonable time",
             (unsigned long long)R->max_steps);
}

/* ---------------------------------------------------------------- strings and buffers */
static void bput(rstate *R, buf *b, const char *s, size_t n, int line) {
    if (!n) return;
    if (b->n + n + 1 > b->cap) {
        if (b->n + n > R->max_out)
            fail(R, line, ZERO_ERR_NOSPACE, "the output is longer than %llu bytes", (unsigned long long)R->max_out);
        size_t nc = b->cap ? 2 * b->cap : 1024;
        while (nc < b->n + n + 1) nc *= 2;
        char *np;
        if (b == &R->out) {
            np = realloc(b->p, nc);
            if (!np) fail(R, line, ZERO_ERR_NOMEM, "out of memory");
        } else {
            np = zero__tp_alloc(&R->A, nc);
            if (b->n) memcpy(np, b->p, b->n);
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static tp_val mkstr(rstate *R, const char *s, size_t n) {
    char *p = zero__tp_alloc(&R->A, n + 1);
    if (n) memcpy(p, s, n);
    return (tp_val){.t = TV_STR, .u.s = {p, n}};
}
static tp_val sval(tp_str s) { return (tp_val){.t = TV_STR, .u.s = s}; }
static tp_val ival(int64_t i) { return (tp_val){.t = TV_INT, .u.i = i}; }
static tp_val bval(int b) { return (tp_val){.t = TV_BOOL, .u.i = b != 0}; }
static tp_val undef(tp_str name) { return (tp_val){.t = TV_UNDEF, .u.s = name}; }
static tp_val cstr_val(const char *s) { return sval((tp_str){s, strlen(s)}); }

static int str_eq(tp_str a, const char *b) { return a.n == strlen(b) && !memcmp(a.p, b, a.n); }
static int str_same(tp_str a, tp_str b) { return a.n == b.n && (!a.n || !memcmp(a.p, b.p, a.n)); }

static const char *type_name(const tp_val *v) {
    static const char *n[] = {"undefined", "none", "boolean", "integer",  "float", "string",
                              "list",      "dict", "loop",    "function", "macro"};
    return v->t == TV_DICT && v->ns ? "namespace" : n[v->t];
}

/* The length of the UTF-8 sequence at s (1 for a stray byte). */
static size_t u8len(const char *s, size_t n) {
    const unsigned char c = (unsigned char)s[0];
    size_t l = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return l > n ? 1 : l;
}
static size_t u8count(tp_str s) {
    size_t c = 0;
    for (size_t i = 0; i < s.n; i += u8len(s.p + i, s.n - i)) c++;
    return c;
}
static int32_t u8dec(const char *s, size_t n, size_t *len) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &cp);
    if (l <= 0) {
        *len = 1;
        return (unsigned char)s[0];
    }
    *len = (size_t)l;
    return cp;
}

/* ---------------------------------------------------------------- str(), repr(), json */
static void fmt_float(double x, char *o, size_t cap) {
    if (isnan(x)) {
        snprintf(o, cap, "nan");
        return;
    }
    if (isinf(x)) {
        snprintf(o, cap, x < 0 ? "-inf" : "inf");
        return;
    }
    char e[40];
    int p = 1;
    for (; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    /* digits and exponent of the shortest repr, laid out as Python's float repr does */
    char dig[24] = {'0'}; /* "0" when %e gave no digit (it always gives one) */
    int nd = 0, neg = e[0] == '-';
    const char *q = e + neg;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9') dig[nd++] = *q;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int ex = atoi(q + 1);
    size_t k = 0;
    if (neg) o[k++] = '-';
    if (ex >= -4 && ex < 16) {
        if (ex < 0) {
            o[k++] = '0';
            o[k++] = '.';
            for (int z = 0; z < -ex - 1; z++) o[k++] = '0';
            for (int d = 0; d < nd; d++) o[k++] = dig[d];
        } else {
            for (int d = 0; d <= ex; d++) o[k++] = d < nd ? dig[d] : '0';
            o[k++] = '.';
            if (nd > ex + 1)
                for (int d = ex + 1; d < nd; d++) o[k++] = dig[d];
            else o[k++] = '0';
        }
        o[k] = 0;
    } else {
        o[k++] = dig[0];
        if (nd > 1) {
            o[k++] = '.';
            for (int d = 1; d < nd; d++) o[k++] = dig[d];
        }
        snprintf(o + k, cap - k, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
}

static void to_str(rstate *R, buf *b, const tp_val *v, int repr, int line);

static void repr_str(rstate *R, buf *b, tp_str s, int line) {
    const int dq = memchr(s.p, '\'', s.n) && !memchr(s.p, '"', s.n);
    const char q = dq ? '"' : '\'';
    bput(R, b, &q, 1, line);
    for (size_t i = 0; i < s.n; i++) {
        const unsigned char c = (unsigned char)s.p[i];
        char e[8];
        if (c == '\\' || c == (unsigned char)q) {
            e[0] = '\\';
            e[1] = (char)c;
            bput(R, b, e, 2, line);
        } else if (c == '\n') bput(R, b, "\\n", 2, line);
        else if (c == '\r') bput(R, b, "\\r", 2, line);
        else if (c == '\t') bput(R, b, "\\t", 2, line);
        else if (c < 0x20 || c == 0x7f) {
            snprintf(e, sizeof e, "\\x%02x", c);
            bput(R, b, e, 4, line);
        } else bput(R, b, s.p + i, 1, line);
    }
    bput(R, b, &q, 1, line);
}

static void to_str(rstate *R, buf *b, const tp_val *v, int repr, int line) {
    char t[64];
    switch (v->t) {
    case TV_UNDEF: break;
    case TV_NONE: bput(R, b, "None", 4, line); break;
    case TV_BOOL: bput(R, b, v->u.i ? "True" : "False", v->u.i ? 4 : 5, line); break;
    case TV_INT: bput(R, b, t, (size_t)snprintf(t, sizeof t, "%lld", (long long)v->u.i), line); break;
    case TV_FLOAT:
        fmt_float(v->u.f, t, sizeof t);
        bput(R, b, t, strlen(t), line);
        break;
    case TV_STR:
        if (repr) repr_str(R, b, v->u.s, line);
        else bput(R, b, v->u.s.p, v->u.s.n, line);
        break;
    case TV_LIST:
        bput(R, b, "[", 1, line);
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i) bput(R, b, ", ", 2, line);
            to_str(R, b, &v->u.l->v[i], 1, line);
        }
        bput(R, b, "]", 1, line);
        break;
    case TV_DICT:
        if (v->ns) {
            bput(R, b, "<Namespace>", 11, line);
            break;
        }
        bput(R, b, "{", 1, line);
        for (size_t i = 0; i < v->u.d->n; i++) {
            if (i) bput(R, b, ", ", 2, line);
            repr_str(R, b, v->u.d->k[i], line);
            bput(R, b, ": ", 2, line);
            to_str(R, b, &v->u.d->v[i], 1, line);
        }
        bput(R, b, "}", 1, line);
        break;
    default: FAILF(line, "a %s cannot be written as text", type_name(v));
    }
}

static tp_str str_of(rstate *R, const tp_val *v, int line) {
    if (v->t == TV_STR) return v->u.s;
    buf b = {0};
    to_str(R, &b, v, 0, line);
    return b.n ? (tp_str){b.p, b.n} : (tp_str){"", 0};
}

typedef struct jsonfmt {
    int indent;        /* -1: none */
    tp_str indent_str; /* json.dumps' indent as a string (indent = 1: one per level) */
    tp_str item_sep, key_sep;
    int sort_keys;
    int ascii; /* ensure_ascii: every code point past 0x7f as \uXXXX (surrogate pairs past 0xFFFF) */
} jsonfmt;

static void json_str(rstate *R, buf *b, tp_str s, int ascii, int line) {
    bput(R, b, "\"", 1, line);
    size_t a = 0;
    for (size_t i = 0; i < s.n; i++) {
        const unsigned char c = (unsigned char)s.p[i];
        const char *e = NULL;
        char u[16];
        if (ascii && c >= 0x80) {
            size_t l;
            const int32_t cp = u8dec(s.p + i, s.n - i, &l);
            if (cp >= 0x10000)
                snprintf(u, sizeof u, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                         0xDC00 + ((cp - 0x10000) & 0x3FF));
            else snprintf(u, sizeof u, "\\u%04x", cp >= 0 ? cp : c);
            bput(R, b, s.p + a, i - a, line);
            bput(R, b, u, strlen(u), line);
            i += l - 1;
            a = i + 1;
            continue;
        }
        if (c == '"') e = "\\\"";
        else if (c == '\\') e = "\\\\";
        else if (c == '\n') e = "\\n";
        else if (c == '\r') e = "\\r";
        else if (c == '\t') e = "\\t";
        else if (c == '\b') e = "\\b";
        else if (c == '\f') e = "\\f";
        else if (c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            e = u;
        }
        if (e) {
            bput(R, b, s.p + a, i - a, line);
            bput(R, b, e, strlen(e), line);
            a = i + 1;
        }
    }
    bput(R, b, s.p + a, s.n - a, line);
    bput(R, b, "\"", 1, line);
}

static void json_nl(rstate *R, buf *b, const jsonfmt *f, int level, int line) {
    bput(R, b, "\n", 1, line);
    if (f->indent_str.p)
        for (int i = 0; i < level; i++) bput(R, b, f->indent_str.p, f->indent_str.n, line);
    else
        for (int i = 0; i < f->indent * level; i++) bput(R, b, " ", 1, line);
}

static int key_cmp(const void *a, const void *b) {
    const tp_str *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static void to_json(rstate *R, buf *b, const tp_val *v, const jsonfmt *f, int level, int line) {
    char t[64];
    if (level > ZERO_TEMPLATE_MAX_DEPTH)
        FAILF(line, "tojson: a value nested more than %d deep", ZERO_TEMPLATE_MAX_DEPTH);
    switch (v->t) {
    case TV_NONE: bput(R, b, "null", 4, line); break;
    case TV_BOOL: bput(R, b, v->u.i ? "true" : "false", v->u.i ? 4 : 5, line); break;
    case TV_INT: bput(R, b, t, (size_t)snprintf(t, sizeof t, "%lld", (long long)v->u.i), line); break;
    case TV_FLOAT:
        if (isnan(v->u.f)) bput(R, b, "NaN", 3, line);
        else if (isinf(v->u.f)) bput(R, b, v->u.f < 0 ? "-Infinity" : "Infinity", v->u.f < 0 ? 9 : 8, line);
        else {
            fmt_float(v->u.f, t, sizeof t);
            bput(R, b, t, strlen(t), line);
        }
        break;
    case TV_STR: json_str(R, b, v->u.s, f->ascii, line); break;
    case TV_LIST:
        if (!v->u.l->n) {
            bput(R, b, "[]", 2, line);
            break;
        }
        bput(R, b, "[", 1, line);
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i) bput(R, b, f->item_sep.p, f->item_sep.n, line);
            if (f->indent >= 0) json_nl(R, b, f, level + 1, line);
            to_json(R, b, &v->u.l->v[i], f, level + 1, line);
        }
        if (f->indent >= 0) json_nl(R, b, f, level, line);
        bput(R, b, "]", 1, line);
        break;
    case TV_DICT: {
        if (v->ns) FAILF(line, "tojson: a namespace is not JSON serializable");
        const tp_dict *d = v->u.d;
        if (!d->n) {
            bput(R, b, "{}", 2, line);
            break;
        }
        size_t *ord = zero__tp_alloc(&R->A, d->n * sizeof *ord);
        for (size_t i = 0; i < d->n; i++) ord[i] = i;
        if (f->sort_keys) /* insertion sort by key (dicts here are small) */
            for (size_t i = 1; i < d->n; i++)
                for (size_t j = i; j > 0 && key_cmp(&d->k[ord[j - 1]], &d->k[ord[j]]) > 0; j--) {
                    size_t x = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = x;
                }
        bput(R, b, "{", 1, line);
        for (size_t i = 0; i < d->n; i++) {
            if (i) bput(R, b, f->item_sep.p, f->item_sep.n, line);
            if (f->indent >= 0) json_nl(R, b, f, level + 1, line);
            json_str(R, b, d->k[ord[i]], f->ascii, line);
            bput(R, b, f->key_sep.p, f->key_sep.n, line);
            to_json(R, b, &d->v[ord[i]], f, level + 1, line);
        }
        if (f->indent >= 0) json_nl(R, b, f, level, line);
        bput(R, b, "}", 1, line);
        break;
    }
    default: FAILF(line, "tojson: a %s is not JSON serializable", type_name(v));
    }
}

/* ---------------------------------------------------------------- Python semantics */
static int truthy(const tp_val *v) {
    switch (v->t) {
    case TV_UNDEF:
    case TV_NONE: return 0;
    case TV_BOOL:
    case TV_INT: return v->u.i != 0;
    case TV_FLOAT: return v->u.f != 0;
    case TV_STR: return v->u.s.n != 0;
    case TV_LIST: return v->u.l->n != 0;
    case TV_DICT: return v->ns || v->u.d->n != 0;
    default: return 1;
    }
}

static int is_num(const tp_val *v) { return v->t == TV_BOOL || v->t == TV_INT || v->t == TV_FLOAT; }
static double num(const tp_val *v) { return v->t == TV_FLOAT ? v->u.f : (double)v->u.i; }

static const tp_val *dict_get(const tp_dict *d, tp_str k) {
    for (size_t i = 0; i < d->n; i++)
        if (str_same(d->k[i], k)) return &d->v[i];
    return NULL;
}

static void dict_put(rstate *R, tp_dict *d, tp_str k, tp_val v) {
    for (size_t i = 0; i < d->n; i++)
        if (str_same(d->k[i], k)) {
            d->v[i] = v;
            return;
        }
    if (d->n == d->cap) {
        size_t nc = d->cap ? 2 * d->cap : 8;
        tp_str *nk = zero__tp_alloc(&R->A, nc * sizeof *nk);
        tp_val *nv = zero__tp_alloc(&R->A, nc * sizeof *nv);
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = nc;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

static int eq(const tp_val *a, const tp_val *b) {
    if (is_num(a) && is_num(b)) return num(a) == num(b);
    if (a->t != b->t) return 0;
    switch (a->t) {
    case TV_UNDEF:
    case TV_NONE: return 1;
    case TV_STR: return str_same(a->u.s, b->u.s);
    case TV_LIST:
        if (a->u.l->n != b->u.l->n) return 0;
        for (size_t i = 0; i < a->u.l->n; i++)
            if (!eq(&a->u.l->v[i], &b->u.l->v[i])) return 0;
        return 1;
    case TV_DICT:
        if (a->ns || b->ns) return a->u.d == b->u.d;
        if (a->u.d->n != b->u.d->n) return 0;
        for (size_t i = 0; i < a->u.d->n; i++) {
            const tp_val *o = dict_get(b->u.d, a->u.d->k[i]);
            if (!o || !eq(&a->u.d->v[i], o)) return 0;
        }
        return 1;
    case TV_LOOP: return a->u.lp == b->u.lp;
    case TV_FUNC: return a->u.i == b->u.i;
    case TV_MACRO: return a->u.m == b->u.m;
    default: return 0;
    }
}

/* <0, 0, >0; fails for types Python does not order. */
static int order(rstate *R, const tp_val *a, const tp_val *b, int line) {
    if (is_num(a) && is_num(b)) {
        double x = num(a), y = num(b);
        return (x > y) - (x < y);
    }
    if (a->t == TV_STR && b->t == TV_STR) return key_cmp(&a->u.s, &b->u.s);
    if (a->t == TV_LIST && b->t == TV_LIST) {
        for (size_t i = 0; i < a->u.l->n && i < b->u.l->n; i++) {
            if (eq(&a->u.l->v[i], &b->u.l->v[i])) continue;
            return order(R, &a->u.l->v[i], &b->u.l->v[i], line);
        }
        return (a->u.l->n > b->u.l->n) - (a->u.l->n < b->u.l->n);
    }
    FAILF(line, "'<' is not supported between a %s and a %s", type_name(a), type_name(b));
}

static int contains(rstate *R, const tp_val *hay, const tp_val *x, int line) {
    switch (hay->t) {
    case TV_STR:
        if (x->t != TV_STR) FAILF(line, "'in <string>' needs a string on the left, not a %s", type_name(x));
        if (!x->u.s.n) return 1;
        for (size_t i = 0; i + x->u.s.n <= hay->u.s.n; i++)
            if (!memcmp(hay->u.s.p + i, x->u.s.p, x->u.s.n)) return 1;
        return 0;
    case TV_LIST:
        for (size_t i = 0; i < hay->u.l->n; i++)
            if (eq(&hay->u.l->v[i], x)) return 1;
        return 0;
    case TV_DICT: return x->t == TV_STR && dict_get(hay->u.d, x->u.s) != NULL;
    case TV_UNDEF: return 0;
    default: FAILF(line, "'in': a %s is not a container", type_name(hay));
    }
}

static tp_list *mklist(rstate *R, size_t n) {
    tp_list *l = zero__tp_alloc(&R->A, sizeof *l);
    if (n > SIZE_MAX / sizeof(tp_val) / 2) FAILF(0, "a list too long");
    l->v = zero__tp_alloc(&R->A, (n ? n : 1) * sizeof *l->v);
    l->n = n;
    return l;
}
static tp_val lval(tp_list *l) { return (tp_val){.t = TV_LIST, .u.l = l}; }

/* The items a for loop, join, map... walk: a list's, a dict's keys, a string's characters. */
static tp_list *iter_list(rstate *R, const tp_val *v, int line) {
    switch (v->t) {
    case TV_LIST: return v->u.l;
    case TV_UNDEF:
    case TV_NONE:
        if (v->t == TV_NONE) FAILF(line, "'NoneType' object is not iterable");
        return mklist(R, 0);
    case TV_DICT: {
        if (v->ns) FAILF(line, "a namespace is not iterable");
        tp_list *l = mklist(R, v->u.d->n);
        for (size_t i = 0; i < v->u.d->n; i++) l->v[i] = sval(v->u.d->k[i]);
        return l;
    }
    case TV_STR: {
        tp_list *l = mklist(R, u8count(v->u.s));
        size_t k = 0;
        for (size_t i = 0; i < v->u.s.n; k++) {
            size_t n = u8len(v->u.s.p + i, v->u.s.n - i);
            l->v[k] = sval((tp_str){v->u.s.p + i, n});
            i += n;
        }
        return l;
    }
    default: FAILF(line, "a %s is not iterable", type_name(v));
    }
}

/* ---------------------------------------------------------------- JSON context */
static int cjson_is_int(const cJSON *j) {
    const double d = j->valuedouble;
    return d == floor(d) && fabs(d) < 9007199254740992.0;
}

static tp_val from_json(rstate *R, const cJSON *j, int depth) {
    if (depth > 512) fail(R, 0, ZERO_ERR_INVALID_ARG, "the context nests more than 512 deep");
    if (cJSON_IsNull(j)) return (tp_val){.t = TV_NONE};
    if (cJSON_IsBool(j)) return bval(cJSON_IsTrue(j));
    if (cJSON_IsNumber(j))
        return cjson_is_int(j) ? ival((int64_t)j->valuedouble) : (tp_val){.t = TV_FLOAT, .u.f = j->valuedouble};
    if (cJSON_IsString(j)) return mkstr(R, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j)) {
        tp_list *l = mklist(R, (size_t)cJSON_GetArraySize(j));
        size_t i = 0;
        for (const cJSON *c = j->child; c; c = c->next) l->v[i++] = from_json(R, c, depth + 1);
        return lval(l);
    }
    tp_dict *d = zero__tp_alloc(&R->A, sizeof *d);
    for (const cJSON *c = j->child; c; c = c->next) {
        tp_val k = mkstr(R, c->string, strlen(c->string));
        dict_put(R, d, k.u.s, from_json(R, c, depth + 1));
    }
    return (tp_val){.t = TV_DICT, .u.d = d};
}

/* ---------------------------------------------------------------- scopes */
static const tp_val *lookup(scope *s, tp_str k) {
    for (; s; s = s->up)
        for (size_t i = s->n; i-- > 0;)
            if (str_same(s->k[i], k)) return &s->v[i];
    return NULL;
}
static void assign(rstate *R, scope *s, tp_str k, tp_val v) {
    for (size_t i = 0; i < s->n; i++)
        if (str_same(s->k[i], k)) {
            s->v[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 8;
        tp_str *nk = zero__tp_alloc(&R->A, nc * sizeof *nk);
        tp_val *nv = zero__tp_alloc(&R->A, nc * sizeof *nv);
        if (s->n) {
            memcpy(nk, s->k, s->n * sizeof *nk);
            memcpy(nv, s->v, s->n * sizeof *nv);
        }
        s->k = nk;
        s->v = nv;
        s->cap = nc;
    }
    s->k[s->n] = k;
    s->v[s->n++] = v;
}

/* ---------------------------------------------------------------- evaluation */
static tp_val eval(rstate *R, scope *sc, const tp_node *x);
static int exec_body(rstate *R, scope *sc, const tp_node *b);

typedef struct args {
    tp_val *pos;
    int npos;
    tp_str *kwn;
    tp_val *kw;
    int nkw;
    int line;
    const char *what; /* for messages: "filter 'join'" */
} args;

static args eval_args(rstate *R, scope *sc, const tp_node *x, int skip_first_pos) {
    args a = {0};
    a.line = x->line;
    a.npos = x->nk;
    a.pos = zero__tp_alloc(&R->A, ((size_t)x->nk + 1) * sizeof *a.pos);
    for (int i = 0; i < x->nk; i++) a.pos[i] = eval(R, sc, x->kids[i]);
    a.nkw = x->nkw;
    a.kwn = x->kwn;
    a.kw = zero__tp_alloc(&R->A, ((size_t)x->nkw + 1) * sizeof *a.kw);
    for (int i = 0; i < x->nkw; i++) a.kw[i] = eval(R, sc, x->kv[i]);
    (void)skip_first_pos;
    return a;
}

/* Argument i by position, or by name; NULL when absent. Fails on more positional arguments than max. */
static const tp_val *arg(rstate *R, const args *a, int i, const char *name) {
    if (i >= 0 && i < a->npos) return &a->pos[i];
    for (int k = 0; k < a->nkw; k++)
        if (name && str_eq(a->kwn[k], name)) return &a->kw[k];
    return NULL;
}
static void arity(rstate *R, const args *a, int max, const char *const *names) {
    if (a->npos > max)
        FAILF(a->line, "%s takes at most %d argument%s, not %d", a->what, max, max == 1 ? "" : "s", a->npos);
    for (int k = 0; k < a->nkw; k++) {
        int ok = 0;
        for (int i = 0; names && names[i]; i++) ok |= str_eq(a->kwn[k], names[i]);
        if (!ok) FAILF(a->line, "%s has no argument '%.*s'", a->what, (int)a->kwn[k].n, a->kwn[k].p);
    }
}
static tp_str need_str(rstate *R, const tp_val *v, const args *a, const char *what) {
    if (!v || v->t != TV_STR)
        FAILF(a->line, "%s: %s must be a string, not %s", a->what, what, v ? type_name(v) : "missing");
    return v->u.s;
}
static int64_t need_int(rstate *R, const tp_val *v, const args *a, const char *what) {
    if (!v || (v->t != TV_INT && v->t != TV_BOOL))
        FAILF(a->line, "%s: %s must be an integer, not %s", a->what, what, v ? type_name(v) : "missing");
    return v->u.i;
}

/* Python's str.strip family; chars NULL: whitespace. which: 1 left, 2 right, 3 both. */
static tp_str strip(tp_str s, const tp_str *chars, int which) {
    size_t a = 0, b = s.n;
    for (;;) {
        if (!(which & 1) || a >= b) break;
        size_t l = u8len(s.p + a, b - a), sl;
        int hit;
        if (chars) {
            hit = 0;
            for (size_t i = 0; i < chars->n && !hit; i += u8len(chars->p + i, chars->n - i))
                hit = u8len(chars->p + i, chars->n - i) == l && !memcmp(chars->p + i, s.p + a, l);
        } else hit = zero__tp_space_at(s.p + a, b - a, &sl) && sl == l;
        if (!hit) break;
        a += l;
    }
    for (;;) {
        if (!(which & 2) || b <= a) break;
        size_t q = b - 1, sl;
        while (q > a && ((unsigned char)s.p[q] & 0xC0) == 0x80) q--;
        const size_t l = b - q;
        int hit;
        if (chars) {
            hit = 0;
            for (size_t i = 0; i < chars->n && !hit; i += u8len(chars->p + i, chars->n - i))
                hit = u8len(chars->p + i, chars->n - i) == l && !memcmp(chars->p + i, s.p + q, l);
        } else hit = zero__tp_space_at(s.p + q, l, &sl) && sl == l;
        if (!hit) break;
        b = q;
    }
    return (tp_str){s.p + a, b - a};
}

/* Python's full case mappings (Unicode's SpecialCasing.txt, unconditional) that grow a code point
 * into several, for upper() and lower(): the Latin ones (the Greek and Armenian ones differ from
 * utf8proc's single code point: docs/TOKENIZER.md names them). */
static const char *full_case(int32_t cp, int how) {
    if (how == 1) switch (cp) {
        case 0xDF: return "SS";       /* ß */
        case 0x149: return "\u02BCN"; /* ŉ */
        case 0x1F0: return "J\u030C"; /* ǰ */
        case 0x1E96: return "H\u0331";
        case 0x1E97: return "T\u0308";
        case 0x1E98: return "W\u030A";
        case 0x1E99: return "Y\u030A";
        case 0x1E9A: return "A\u02BE";
        case 0xFB00: return "FF";
        case 0xFB01: return "FI";
        case 0xFB02: return "FL";
        case 0xFB03: return "FFI";
        case 0xFB04: return "FFL";
        case 0xFB05:
        case 0xFB06: return "ST";
        default: return NULL;
        }
    return how == 2 && cp == 0x130 ? "i\u0307" : NULL; /* İ */
}

/* upper (1), lower (2), capitalize (3), title as str.title (4), title as Jinja's filter (5). */
static tp_val recase(rstate *R, tp_str s, int how) {
    buf b = {0};
    int prev_cased = 0, first = 1;
    for (size_t i = 0; i < s.n;) {
        size_t l;
        int32_t cp = u8dec(s.p + i, s.n - i, &l);
        int32_t o;
        const utf8proc_category_t cat = utf8proc_category(cp);
        const int cased = cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
        if (how == 1) o = utf8proc_toupper(cp);
        else if (how == 2) o = utf8proc_tolower(cp);
        else if (how == 3) o = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp);
        else if (how == 4) o = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp);
        else {
            const int boundary = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' ||
                                 (cp < 0x80 && (cp == ' ' || (cp >= 9 && cp <= 13)));
            o = boundary ? cp : prev_cased ? utf8proc_tolower(cp) : utf8proc_toupper(cp);
            prev_cased = !boundary;
            first = 0;
            utf8proc_uint8_t e[4];
            utf8proc_ssize_t n = utf8proc_encode_char(o, e);
            bput(R, &b, (const char *)e, (size_t)n, 0);
            i += l;
            continue;
        }
        if (how == 4) prev_cased = cased;
        first = 0;
        const char *full = full_case(cp, how);
        if (full) bput(R, &b, full, strlen(full), 0);
        else if (l == 1 && cp > 0x7f) bput(R, &b, s.p + i, 1, 0); /* a stray byte stays */
        else {
            utf8proc_uint8_t e[4];
            utf8proc_ssize_t n = utf8proc_encode_char(o, e);
            bput(R, &b, (const char *)e, (size_t)n, 0);
        }
        i += l;
    }
    return b.n ? sval((tp_str){b.p, b.n}) : cstr_val("");
}

static tp_val replace(rstate *R, tp_str s, tp_str old, tp_str nw, int64_t count, int line) {
    buf b = {0};
    int64_t done = 0;
    if (!old.n) {
        for (size_t i = 0;;) {
            if (count < 0 || done < count) bput(R, &b, nw.p, nw.n, line), done++;
            if (i >= s.n) break;
            size_t l = u8len(s.p + i, s.n - i);
            bput(R, &b, s.p + i, l, line);
            i += l;
        }
    } else {
        size_t i = 0, a = 0;
        while (i + old.n <= s.n) {
            if ((count < 0 || done < count) && !memcmp(s.p + i, old.p, old.n)) {
                bput(R, &b, s.p + a, i - a, line);
                bput(R, &b, nw.p, nw.n, line);
                i += old.n;
                a = i;
                done++;
            } else i++;
        }
        bput(R, &b, s.p + a, s.n - a, line);
    }
    return b.n ? sval((tp_str){b.p, b.n}) : cstr_val("");
}

/* Python's slice of n items: the indices it takes, in order. */
static size_t slice_idx(rstate *R, const tp_val *lo, const tp_val *hi, const tp_val *st, int64_t n, int64_t **out,
                        int line) {
    int64_t step = 1;
    if (st && st->t != TV_NONE) {
        if (st->t != TV_INT) FAILF(line, "a slice step must be an integer");
        step = st->u.i;
        if (!step) FAILF(line, "slice step cannot be zero");
    }
    int64_t a, b;
    if (step > 0) {
        a = 0;
        b = n;
    } else {
        a = n - 1;
        b = -1;
    }
    const tp_val *bounds[2] = {lo, hi};
    for (int k = 0; k < 2; k++) {
        const tp_val *v = bounds[k];
        if (!v || v->t == TV_NONE) continue;
        if (v->t != TV_INT && v->t != TV_BOOL) FAILF(line, "slice indices must be integers, not %s", type_name(v));
        int64_t x = v->u.i;
        if (x < 0) x += n;
        if (step > 0) x = x < 0 ? 0 : x > n ? n : x;
        else x = x < -1 ? -1 : x > n - 1 ? n - 1 : x;
        if (k == 0) a = x;
        else b = x;
    }
    size_t cnt = 0;
    if (step > 0 && b > a) cnt = (size_t)((b - a + step - 1) / step);
    if (step < 0 && a > b) cnt = (size_t)((a - b - step - 1) / -step);
    *out = zero__tp_alloc(&R->A, (cnt + 1) * sizeof **out);
    for (size_t i = 0; i < cnt; i++) (*out)[i] = a + (int64_t)i * step;
    return cnt;
}

static tp_val getattr_(rstate *R, const tp_val *o, tp_str name, int line) {
    switch (o->t) {
    case TV_DICT: {
        const tp_val *v = dict_get(o->u.d, name);
        return v ? *v : undef(name);
    }
    case TV_LOOP: {
        const tp_loop *lp = o->u.lp;
        const int64_t n = (int64_t)lp->items->n, i = (int64_t)lp->i;
        if (str_eq(name, "index")) return ival(i + 1);
        if (str_eq(name, "index0")) return ival(i);
        if (str_eq(name, "revindex")) return ival(n - i);
        if (str_eq(name, "revindex0")) return ival(n - i - 1);
        if (str_eq(name, "first")) return bval(i == 0);
        if (str_eq(name, "last")) return bval(i == n - 1);
        if (str_eq(name, "length")) return ival(n);
        if (str_eq(name, "depth")) return ival(1);
        if (str_eq(name, "depth0")) return ival(0);
        if (str_eq(name, "previtem")) return i > 0 ? lp->items->v[i - 1] : undef(name);
        if (str_eq(name, "nextitem")) return i + 1 < n ? lp->items->v[i + 1] : undef(name);
        FAILU(line, "loop.%.*s is not supported yet", (int)name.n, name.p);
    }
    case TV_UNDEF:
        FAILF(line, "'%.*s' is undefined (reading its attribute '%.*s')", (int)o->u.s.n, o->u.s.p, (int)name.n, name.p);
    case TV_NONE: FAILF(line, "'None' has no attribute '%.*s'", (int)name.n, name.p);
    default: return undef(name);
    }
}

static tp_val getitem(rstate *R, const tp_val *o, const tp_val *k, int line) {
    if (o->t == TV_DICT) {
        if (k->t == TV_STR) return getattr_(R, o, k->u.s, line);
        return undef((tp_str){"item", 4});
    }
    if (o->t == TV_LIST || o->t == TV_STR) {
        if (k->t != TV_INT && k->t != TV_BOOL) {
            if (k->t == TV_STR) return undef(k->u.s);
            FAILF(line, "%s indices must be integers, not %s", type_name(o), type_name(k));
        }
        int64_t i = k->u.i;
        if (o->t == TV_LIST) {
            const int64_t n = (int64_t)o->u.l->n;
            if (i < 0) i += n;
            return i >= 0 && i < n ? o->u.l->v[i] : undef((tp_str){"item", 4});
        }
        const int64_t n = (int64_t)u8count(o->u.s);
        if (i < 0) i += n;
        if (i < 0 || i >= n) return undef((tp_str){"item", 4});
        size_t p = 0;
        for (int64_t c = 0; c < i; c++) p += u8len(o->u.s.p + p, o->u.s.n - p);
        return sval((tp_str){o->u.s.p + p, u8len(o->u.s.p + p, o->u.s.n - p)});
    }
    if (o->t == TV_LOOP && k->t == TV_STR) return getattr_(R, o, k->u.s, line);
    if (o->t == TV_UNDEF) FAILF(line, "'%.*s' is undefined (reading an item of it)", (int)o->u.s.n, o->u.s.p);
    FAILF(line, "a %s cannot be indexed", type_name(o));
}

/* ---------------------------------------------------------------- tests */
static int run_test(rstate *R, tp_str name, const tp_val *v, const args *a) {
    char what[80];
    snprintf(what, sizeof what, "test '%.*s'", (int)name.n, name.p);
    args aa = *a;
    aa.what = what;
#define T(s) str_eq(name, s)
    if (T("defined")) return v->t != TV_UNDEF;
    if (T("undefined")) return v->t == TV_UNDEF;
    if (T("none")) return v->t == TV_NONE;
    if (T("boolean")) return v->t == TV_BOOL;
    if (T("true")) return v->t == TV_BOOL && v->u.i;
    if (T("false")) return v->t == TV_BOOL && !v->u.i;
    if (T("integer")) return v->t == TV_INT;
    if (T("float")) return v->t == TV_FLOAT;
    if (T("number")) return is_num(v);
    if (T("string")) return v->t == TV_STR;
    if (T("mapping")) return v->t == TV_DICT && !v->ns;
    if (T("iterable")) return v->t == TV_STR || v->t == TV_LIST || (v->t == TV_DICT && !v->ns) || v->t == TV_UNDEF;
    if (T("sequence")) return v->t == TV_STR || v->t == TV_LIST || (v->t == TV_DICT && !v->ns);
    if (T("callable")) return v->t == TV_FUNC || v->t == TV_MACRO;
    if (T("odd") || T("even")) {
        arity(R, &aa, 0, NULL);
        if (v->t != TV_INT && v->t != TV_BOOL) FAILF(a->line, "%s: expected an integer, not %s", what, type_name(v));
        return (int)((v->u.i % 2 + 2) % 2) == (T("odd") ? 1 : 0);
    }
    if (T("divisibleby")) {
        arity(R, &aa, 1, NULL);
        int64_t d = need_int(R, arg(R, &aa, 0, NULL), &aa, "the divisor");
        if (v->t != TV_INT || !d) FAILF(a->line, "%s: expected an integer and a divisor that is not 0", what);
        return v->u.i % d == 0;
    }
    if (T("lower") || T("upper")) {
        if (v->t != TV_STR) FAILF(a->line, "%s: expected a string, not %s", what, type_name(v));
        tp_val c = recase(R, v->u.s, T("lower") ? 2 : 1);
        return str_same(c.u.s, v->u.s);
    }
    static const char *const cmp_names[][3] = {
        {"eq", "equalto", "=="},    {"ne", "!=", NULL}, {"lt", "lessthan", "<"}, {"le", "<=", NULL},
        {"gt", "greaterthan", ">"}, {"ge", ">=", NULL}, {"sameas", NULL, NULL},  {"in", NULL, NULL}};
    for (int c = 0; c < 8; c++)
        for (int k = 0; k < 3 && cmp_names[c][k]; k++)
            if (T(cmp_names[c][k])) {
                arity(R, &aa, 1, NULL);
                const tp_val *o = arg(R, &aa, 0, NULL);
                if (!o) FAILF(a->line, "%s needs a value to compare with", what);
                switch (c) {
                case 0: return eq(v, o);
                case 1: return !eq(v, o);
                case 2: return order(R, v, o, a->line) < 0;
                case 3: return order(R, v, o, a->line) <= 0;
                case 4: return order(R, v, o, a->line) > 0;
                case 5: return order(R, v, o, a->line) >= 0;
                case 6:
                    return v->t == o->t &&
                           ((v->t == TV_NONE || v->t == TV_UNDEF) || (v->t == TV_BOOL && v->u.i == o->u.i) ||
                            ((v->t == TV_LIST || v->t == TV_DICT) && v->u.l == o->u.l) ||
                            (v->t == TV_INT && v->u.i == o->u.i));
                default: return contains(R, o, v, a->line);
                }
            }
#undef T
    FAILU(a->line, "test '%.*s' is not supported yet", (int)name.n, name.p);
}

/* ---------------------------------------------------------------- filters */
static tp_val apply_filter(rstate *R, scope *sc, tp_str name, const tp_val *v, args *a);

static tp_val attr_path(rstate *R, const tp_val *v, tp_str path, int line) {
    tp_val cur = *v;
    size_t i = 0;
    while (i <= path.n) {
        size_t j = i;
        while (j < path.n && path.p[j] != '.') j++;
        tp_str part = {path.p + i, j - i};
        int digit = part.n > 0;
        for (size_t q = 0; q < part.n; q++) digit &= part.p[q] >= '0' && part.p[q] <= '9';
        if (digit && cur.t == TV_LIST) {
            tp_val k = ival(strtoll(part.p, NULL, 10));
            cur = getitem(R, &cur, &k, line);
        } else if (cur.t == TV_UNDEF) return cur;
        else cur = getattr_(R, &cur, part, line);
        i = j + 1;
    }
    return cur;
}

static tp_val select_like(rstate *R, scope *sc, const tp_val *v, args *a, int attr, int keep) {
    (void)sc;
    tp_list *in = iter_list(R, v, a->line);
    tp_list *out = mklist(R, in->n);
    size_t k = 0;
    const int t0 = attr ? 1 : 0;
    tp_str attr_name = {0};
    if (attr) attr_name = need_str(R, arg(R, a, 0, NULL), a, "the attribute");
    const tp_val *tn = t0 < a->npos ? &a->pos[t0] : NULL;
    if (tn && tn->t != TV_STR) FAILF(a->line, "%s: the test name must be a string", a->what);
    args ta = *a;
    ta.pos = a->pos + (t0 + 1 < a->npos ? t0 + 1 : a->npos);
    ta.npos = a->npos > t0 + 1 ? a->npos - t0 - 1 : 0;
    ta.nkw = 0;
    for (size_t i = 0; i < in->n; i++) {
        step(R, a->line);
        tp_val x = attr ? attr_path(R, &in->v[i], attr_name, a->line) : in->v[i];
        const int ok = tn ? run_test(R, tn->u.s, &x, &ta) : truthy(&x);
        if (ok == keep) out->v[k++] = in->v[i];
    }
    out->n = k;
    return lval(out);
}

static tp_val apply_filter(rstate *R, scope *sc, tp_str name, const tp_val *v, args *a) {
    char what[80];
    snprintf(what, sizeof what, "filter '%.*s'", (int)name.n, name.p);
    a->what = what;
    const int line = a->line;
#define F(s) str_eq(name, s)
    if (F("safe") || F("e") || F("escape") || F("forceescape")) {
        if (!F("safe")) FAILU(line, "filter '%.*s' is not supported yet", (int)name.n, name.p);
        arity(R, a, 0, NULL);
        return *v;
    }
    if (F("trim")) {
        static const char *const nm[] = {"chars", NULL};
        arity(R, a, 1, nm);
        const tp_val *c = arg(R, a, 0, "chars");
        tp_str chars;
        if (c && c->t != TV_NONE) chars = need_str(R, c, a, "chars");
        return sval(strip(str_of(R, v, line), c && c->t != TV_NONE ? &chars : NULL, 3));
    }
    if (F("tojson")) {
        static const char *const nm[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
        arity(R, a, 4, nm);
        jsonfmt f = {.indent = -1, .item_sep = {", ", 2}, .key_sep = {": ", 2}};
        const tp_val *ea = arg(R, a, 0, "ensure_ascii"), *ind = arg(R, a, 1, "indent"),
                     *sep = arg(R, a, 2, "separators"), *sk = arg(R, a, 3, "sort_keys");
        f.ascii = ea && truthy(ea);
        if (ind && ind->t != TV_NONE) {
            if (ind->t == TV_STR) {
                if (ind->u.s.n > 64) FAILF(line, "tojson: an indent of %zu bytes: expected at most 64", ind->u.s.n);
                f.indent_str = ind->u.s;
                f.indent = 1;
            } else f.indent = (int)need_int(R, ind, a, "indent");
            if (f.indent < 0) f.indent = 0;
            if (f.indent > 64) FAILF(line, "tojson: indent %d: expected at most 64", f.indent);
            f.item_sep = (tp_str){",", 1};
        }
        if (sep && sep->t != TV_NONE) {
            if (sep->t != TV_LIST || sep->u.l->n != 2 || sep->u.l->v[0].t != TV_STR || sep->u.l->v[1].t != TV_STR)
                FAILF(line, "tojson: separators must be two strings");
            f.item_sep = sep->u.l->v[0].u.s;
            f.key_sep = sep->u.l->v[1].u.s;
        }
        f.sort_keys = sk && truthy(sk);
        buf b = {0};
        to_json(R, &b, v, &f, 0, line);
        return b.n ? sval((tp_str){b.p, b.n}) : cstr_val("");
    }
    if (F("length") || F("count")) {
        arity(R, a, 0, NULL);
        switch (v->t) {
        case TV_STR: return ival((int64_t)u8count(v->u.s));
        case TV_LIST: return ival((int64_t)v->u.l->n);
        case TV_DICT: return ival((int64_t)v->u.d->n);
        case TV_UNDEF: return ival(0);
        default: FAILF(line, "%s: a %s has no length", what, type_name(v));
        }
    }
    if (F("upper") || F("lower") || F("capitalize") || F("title")) {
        arity(R, a, 0, NULL);
        return recase(R, str_of(R, v, line), F("upper") ? 1 : F("lower") ? 2 : F("capitalize") ? 3 : 5);
    }
    if (F("default") || F("d")) {
        static const char *const nm[] = {"default_value", "boolean", NULL};
        arity(R, a, 2, nm);
        const tp_val *dv = arg(R, a, 0, "default_value"), *bo = arg(R, a, 1, "boolean");
        const int use = bo && truthy(bo) ? !truthy(v) : v->t == TV_UNDEF;
        if (use) return dv ? *dv : cstr_val("");
        return *v;
    }
    if (F("first") || F("last")) {
        arity(R, a, 0, NULL);
        tp_list *l = iter_list(R, v, line);
        if (!l->n) return undef(name);
        return l->v[F("first") ? 0 : l->n - 1];
    }
    if (F("join")) {
        static const char *const nm[] = {"d", "attribute", NULL};
        arity(R, a, 2, nm);
        const tp_val *d = arg(R, a, 0, "d"), *at = arg(R, a, 1, "attribute");
        tp_str sep = d ? str_of(R, d, line) : (tp_str){"", 0};
        tp_list *l = iter_list(R, v, line);
        buf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i) bput(R, &b, sep.p, sep.n, line);
            tp_val x = at ? attr_path(R, &l->v[i], need_str(R, at, a, "attribute"), line) : l->v[i];
            to_str(R, &b, &x, 0, line);
        }
        return b.n ? sval((tp_str){b.p, b.n}) : cstr_val("");
    }
    if (F("replace")) {
        static const char *const nm[] = {"old", "new", "count", NULL};
        arity(R, a, 3, nm);
        const tp_val *c = arg(R, a, 2, "count");
        return replace(R, str_of(R, v, line), need_str(R, arg(R, a, 0, "old"), a, "old"),
                       need_str(R, arg(R, a, 1, "new"), a, "new"),
                       c && c->t != TV_NONE ? need_int(R, c, a, "count") : -1, line);
    }
    if (F("string")) {
        arity(R, a, 0, NULL);
        return sval(str_of(R, v, line));
    }
    if (F("int")) {
        static const char *const nm[] = {"default", "base", NULL};
        arity(R, a, 2, nm);
        const tp_val *dv = arg(R, a, 0, "default");
        if (arg(R, a, 1, "base")) FAILU(line, "int(base=...) is not supported yet");
        if (v->t == TV_INT || v->t == TV_BOOL) return ival(v->u.i);
        if (v->t == TV_FLOAT && isfinite(v->u.f) && fabs(v->u.f) < 9.2e18) return ival((int64_t)v->u.f);
        if (v->t == TV_STR) {
            tp_str s = strip(v->u.s, NULL, 3);
            char t[64];
            if (s.n && s.n < sizeof t) {
                memcpy(t, s.p, s.n);
                t[s.n] = 0;
                char *e;
                long long x = strtoll(t, &e, 10);
                if (!*e) return ival(x);
                double f = strtod(t, &e);
                if (!*e && isfinite(f) && fabs(f) < 9.2e18) return ival((int64_t)f);
            }
        }
        return dv ? *dv : ival(0);
    }
    if (F("float")) {
        arity(R, a, 1, NULL);
        if (is_num(v)) return (tp_val){.t = TV_FLOAT, .u.f = num(v)};
        if (v->t == TV_STR) {
            tp_str s = strip(v->u.s, NULL, 3);
            char t[64];
            if (s.n && s.n < sizeof t) {
                memcpy(t, s.p, s.n);
                t[s.n] = 0;
                char *e;
                double f = strtod(t, &e);
                if (!*e) return (tp_val){.t = TV_FLOAT, .u.f = f};
            }
        }
        const tp_val *dv = arg(R, a, 0, NULL);
        return dv ? *dv : (tp_val){.t = TV_FLOAT, .u.f = 0};
    }
    if (F("list")) {
        arity(R, a, 0, NULL);
        tp_list *l = iter_list(R, v, line), *c = mklist(R, l->n);
        if (l->n) memcpy(c->v, l->v, l->n * sizeof *c->v);
        return lval(c);
    }
    if (F("items")) {
        arity(R, a, 0, NULL);
        if (v->t == TV_UNDEF) return lval(mklist(R, 0));
        if (v->t != TV_DICT || v->ns) FAILF(line, "%s: expected a mapping, not %s", what, type_name(v));
        tp_list *l = mklist(R, v->u.d->n);
        for (size_t i = 0; i < v->u.d->n; i++) {
            tp_list *p = mklist(R, 2);
            p->v[0] = sval(v->u.d->k[i]);
            p->v[1] = v->u.d->v[i];
            l->v[i] = lval(p);
        }
        return lval(l);
    }
    if (F("reverse")) {
        arity(R, a, 0, NULL);
        if (v->t == TV_STR) {
            tp_list *cs = iter_list(R, v, line);
            buf b = {0};
            for (size_t i = cs->n; i-- > 0;) bput(R, &b, cs->v[i].u.s.p, cs->v[i].u.s.n, line);
            return b.n ? sval((tp_str){b.p, b.n}) : cstr_val("");
        }
        tp_list *l = iter_list(R, v, line), *c = mklist(R, l->n);
        for (size_t i = 0; i < l->n; i++) c->v[i] = l->v[l->n - 1 - i];
        return lval(c);
    }
    if (F("abs")) {
        arity(R, a, 0, NULL);
        if (v->t == TV_INT || v->t == TV_BOOL) return ival(v->u.i < 0 ? -v->u.i : v->u.i);
        if (v->t == TV_FLOAT) return (tp_val){.t = TV_FLOAT, .u.f = fabs(v->u.f)};
        FAILF(line, "%s: expected a number, not %s", what, type_name(v));
    }
    if (F("select") || F("reject")) return select_like(R, sc, v, a, 0, F("select"));
    if (F("selectattr") || F("rejectattr")) {
        if (a->npos < 1) FAILF(line, "%s needs an attribute name", what);
        return select_like(R, sc, v, a, 1, F("selectattr"));
    }
    if (F("map")) {
        tp_list *in = iter_list(R, v, line), *out = mklist(R, in->n);
        const tp_val *at = arg(R, a, -1, "attribute");
        if (at) {
            static const char *const nm[] = {"attribute", "default", NULL};
            arity(R, a, 0, nm);
            const tp_val *dv = arg(R, a, -1, "default");
            tp_str path = need_str(R, at, a, "attribute");
            for (size_t i = 0; i < in->n; i++) {
                out->v[i] = attr_path(R, &in->v[i], path, line);
                if (out->v[i].t == TV_UNDEF && dv) out->v[i] = *dv;
            }
            return lval(out);
        }
        if (a->npos < 1) FAILF(line, "%s needs a filter name or attribute=", what);
        tp_str fname = need_str(R, &a->pos[0], a, "the filter name");
        for (size_t i = 0; i < in->n; i++) {
            step(R, line);
            args fa = *a;
            fa.pos++;
            fa.npos--;
            out->v[i] = apply_filter(R, sc, fname, &in->v[i], &fa);
        }
        return lval(out);
    }
#undef F
    FAILU(line, "filter '%.*s' is not supported yet", (int)name.n, name.p);
}

/* ---------------------------------------------------------------- methods of strings and dicts */
static tp_val split(rstate *R, tp_str s, const tp_val *sep, int64_t maxsplit, int line) {
    tp_list *l = mklist(R, 0);
    size_t cap = 0;
#define PUSH(x)                                                  \
    do {                                                         \
        if (l->n == cap) {                                       \
            size_t nc = cap ? 2 * cap : 8;                       \
            tp_val *nv = zero__tp_alloc(&R->A, nc * sizeof *nv); \
            if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);       \
            l->v = nv;                                           \
            cap = nc;                                            \
        }                                                        \
        l->v[l->n++] = (x);                                      \
    } while (0)
    if (!sep || sep->t == TV_NONE) {
        size_t i = 0, sl;
        int64_t done = 0;
        for (;;) {
            while (i < s.n && zero__tp_space_at(s.p + i, s.n - i, &sl)) i += sl;
            if (i >= s.n) break;
            if (maxsplit >= 0 && done >= maxsplit) {
                tp_str rest = strip((tp_str){s.p + i, s.n - i}, NULL, 2);
                PUSH(sval(rest));
                break;
            }
            size_t j = i;
            while (j < s.n && !zero__tp_space_at(s.p + j, s.n - j, &sl)) j += u8len(s.p + j, s.n - j);
            PUSH(sval((tp_str){s.p + i, j - i}));
            done++;
            i = j;
        }
        return lval(l);
    }
    if (sep->t != TV_STR) FAILF(line, "split: the separator must be a string");
    tp_str d = sep->u.s;
    if (!d.n) FAILF(line, "split: empty separator");
    size_t a = 0, i = 0;
    int64_t done = 0;
    while (i + d.n <= s.n) {
        if ((maxsplit < 0 || done < maxsplit) && !memcmp(s.p + i, d.p, d.n)) {
            PUSH(sval((tp_str){s.p + a, i - a}));
            i += d.n;
            a = i;
            done++;
        } else i++;
    }
    PUSH(sval((tp_str){s.p + a, s.n - a}));
#undef PUSH
    return lval(l);
}

static int affix(rstate *R, tp_str s, const tp_val *x, int end, const args *a) {
    if (x && x->t == TV_LIST) {
        for (size_t i = 0; i < x->u.l->n; i++)
            if (affix(R, s, &x->u.l->v[i], end, a)) return 1;
        return 0;
    }
    tp_str p = need_str(R, x, a, "the prefix");
    return p.n <= s.n && !memcmp(end ? s.p + s.n - p.n : s.p, p.p, p.n);
}

static tp_val str_format(rstate *R, tp_str f, const args *a) {
    buf b = {0};
    int auto_i = 0;
    for (size_t i = 0; i < f.n; i++) {
        char c = f.p[i];
        if ((c == '{' || c == '}') && i + 1 < f.n && f.p[i + 1] == c) {
            bput(R, &b, &c, 1, a->line);
            i++;
            continue;
        }
        if (c == '}') FAILF(a->line, "format: a single '}' in the format string");
        if (c != '{') {
            bput(R, &b, &c, 1, a->line);
            continue;
        }
        size_t j = i + 1;
        while (j < f.n && f.p[j] != '}') j++;
        if (j >= f.n) FAILF(a->line, "format: a '{' that is never closed");
        tp_str field = {f.p + i + 1, j - i - 1};
        if (memchr(field.p, ':', field.n) || memchr(field.p, '!', field.n) || memchr(field.p, '.', field.n) ||
            memchr(field.p, '[', field.n))
            FAILU(a->line, "format: field '{%.*s}' (a conversion or spec) is not supported yet", (int)field.n, field.p);
        const tp_val *v = NULL;
        if (!field.n) {
            if (auto_i >= a->npos) FAILF(a->line, "format: not enough arguments");
            v = &a->pos[auto_i++];
        } else if (field.p[0] >= '0' && field.p[0] <= '9') {
            long k = strtol(field.p, NULL, 10);
            if (k >= a->npos) FAILF(a->line, "format: no argument %ld", k);
            v = &a->pos[k];
        } else {
            for (int k = 0; k < a->nkw && !v; k++)
                if (str_same(a->kwn[k], field)) v = &a->kw[k];
            if (!v) FAILF(a->line, "format: no argument '%.*s'", (int)field.n, field.p);
        }
        to_str(R, &b, v, 0, a->line);
        i = j;
    }
    return b.n ? sval((tp_str){b.p, b.n}) : cstr_val("");
}

static tp_val call_method(rstate *R, const tp_val *o, tp_str m, args *a) {
    char what[80];
    snprintf(what, sizeof what, "%s.%.*s()", type_name(o), (int)m.n, m.p);
    a->what = what;
    const int line = a->line;
#define M(s) str_eq(m, s)
    if (o->t == TV_STR) {
        const tp_str s = o->u.s;
        if (M("strip") || M("lstrip") || M("rstrip")) {
            arity(R, a, 1, NULL);
            const tp_val *c = arg(R, a, 0, NULL);
            tp_str chars;
            if (c && c->t != TV_NONE) chars = need_str(R, c, a, "chars");
            return sval(strip(s, c && c->t != TV_NONE ? &chars : NULL, M("strip") ? 3 : M("lstrip") ? 1 : 2));
        }
        if (M("split")) {
            static const char *const nm[] = {"sep", "maxsplit", NULL};
            arity(R, a, 2, nm);
            const tp_val *mx = arg(R, a, 1, "maxsplit");
            return split(R, s, arg(R, a, 0, "sep"), mx ? need_int(R, mx, a, "maxsplit") : -1, line);
        }
        if (M("startswith") || M("endswith")) {
            arity(R, a, 1, NULL);
            return bval(affix(R, s, arg(R, a, 0, NULL), M("endswith"), a));
        }
        if (M("upper") || M("lower") || M("title") || M("capitalize")) {
            arity(R, a, 0, NULL);
            return recase(R, s, M("upper") ? 1 : M("lower") ? 2 : M("title") ? 4 : 3);
        }
        if (M("replace")) {
            arity(R, a, 3, NULL);
            const tp_val *c = arg(R, a, 2, NULL);
            return replace(R, s, need_str(R, arg(R, a, 0, NULL), a, "old"), need_str(R, arg(R, a, 1, NULL), a, "new"),
                           c ? need_int(R, c, a, "count") : -1, line);
        }
        if (M("format")) return str_format(R, s, a);
        if (M("join")) {
            arity(R, a, 1, NULL);
            const tp_val *x = arg(R, a, 0, NULL);
            if (!x) FAILF(line, "%s needs a list", what);
            tp_list *l = iter_list(R, x, line);
            buf b = {0};
            for (size_t i = 0; i < l->n; i++) {
                if (i) bput(R, &b, s.p, s.n, line);
                bput(R, &b, need_str(R, &l->v[i], a, "each item").p, l->v[i].u.s.n, line);
            }
            return b.n ? sval((tp_str){b.p, b.n}) : cstr_val("");
        }
        if (M("find") || M("count")) {
            arity(R, a, 1, NULL);
            tp_str x = need_str(R, arg(R, a, 0, NULL), a, "the substring");
            int64_t cnt = 0;
            size_t cp = 0;
            for (size_t i = 0; i + x.n <= s.n;) {
                if (!memcmp(s.p + i, x.p, x.n)) {
                    if (M("find")) return ival((int64_t)cp);
                    cnt++;
                    i += x.n ? x.n : 1;
                    cp++;
                    continue;
                }
                size_t l = u8len(s.p + i, s.n - i);
                i += l;
                cp++;
            }
            return ival(M("find") ? -1 : cnt);
        }
        if (M("isdigit") || M("isspace") || M("isalpha") || M("isalnum")) {
            arity(R, a, 0, NULL);
            if (!s.n) return bval(0);
            for (size_t i = 0; i < s.n;) {
                size_t l;
                int32_t cp = u8dec(s.p + i, s.n - i, &l);
                utf8proc_category_t c = utf8proc_category(cp);
                int ok;
                if (M("isspace")) ok = zero__tp_space_at(s.p + i, s.n - i, &l);
                else if (M("isdigit")) ok = c == UTF8PROC_CATEGORY_ND;
                else {
                    ok = c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO;
                    if (M("isalnum"))
                        ok |= c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
                }
                if (!ok) return bval(0);
                i += l;
            }
            return bval(1);
        }
    } else if (o->t == TV_DICT && !o->ns) {
        if (M("items") || M("keys") || M("values")) {
            arity(R, a, 0, NULL);
            if (M("items")) {
                args none = {.line = line, .what = "filter 'items'"};
                return apply_filter(R, NULL, (tp_str){"items", 5}, o, &none);
            }
            tp_list *l = mklist(R, o->u.d->n);
            for (size_t i = 0; i < o->u.d->n; i++) l->v[i] = M("keys") ? sval(o->u.d->k[i]) : o->u.d->v[i];
            return lval(l);
        }
        if (M("get")) {
            arity(R, a, 2, NULL);
            const tp_val *k = arg(R, a, 0, NULL), *d = arg(R, a, 1, NULL);
            if (!k) FAILF(line, "%s needs a key", what);
            const tp_val *v = k->t == TV_STR ? dict_get(o->u.d, k->u.s) : NULL;
            return v ? *v : d ? *d : (tp_val){.t = TV_NONE};
        }
    } else if (o->t == TV_LOOP && M("cycle")) {
        if (!a->npos) FAILF(line, "loop.cycle() needs values");
        return a->pos[o->u.lp->i % (size_t)a->npos];
    } else if (o->t == TV_UNDEF) {
        FAILF(line, "'%.*s' is undefined (calling its method '%.*s')", (int)o->u.s.n, o->u.s.p, (int)m.n, m.p);
    }
#undef M
    FAILU(line, "method %s is not supported yet", what);
}

/* ---------------------------------------------------------------- calls */
static tp_val call_macro(rstate *R, const tp_node *m, args *a);

static tp_val call_func(rstate *R, int fn, args *a) {
    const int line = a->line;
    switch (fn) {
    case F_RANGE: {
        a->what = "range()";
        arity(R, a, 3, NULL);
        if (a->npos < 1) FAILF(line, "range() needs an argument");
        int64_t lo = 0, hi, st = 1;
        if (a->npos == 1) hi = need_int(R, &a->pos[0], a, "stop");
        else {
            lo = need_int(R, &a->pos[0], a, "start");
            hi = need_int(R, &a->pos[1], a, "stop");
            if (a->npos == 3) st = need_int(R, &a->pos[2], a, "step");
        }
        if (!st) FAILF(line, "range() step must not be zero");
        int64_t n = 0;
        if (st > 0 && hi > lo) n = (hi - lo + st - 1) / st;
        if (st < 0 && lo > hi) n = (lo - hi - st - 1) / -st;
        if (n > 100000)
            FAILF(line, "range() of %lld items: at most 100000 (transformers' sandbox limit)", (long long)n);
        tp_list *l = mklist(R, (size_t)n);
        for (int64_t i = 0; i < n; i++) l->v[i] = ival(lo + i * st);
        return lval(l);
    }
    case F_NAMESPACE:
    case F_DICT: {
        a->what = fn == F_NAMESPACE ? "namespace()" : "dict()";
        tp_dict *d = zero__tp_alloc(&R->A, sizeof *d);
        for (int i = 0; i < a->npos; i++) {
            if (a->pos[i].t != TV_DICT) FAILF(line, "%s: a positional argument must be a mapping", a->what);
            for (size_t k = 0; k < a->pos[i].u.d->n; k++) dict_put(R, d, a->pos[i].u.d->k[k], a->pos[i].u.d->v[k]);
        }
        for (int i = 0; i < a->nkw; i++) dict_put(R, d, a->kwn[i], a->kw[i]);
        return (tp_val){.t = TV_DICT, .ns = fn == F_NAMESPACE, .u.d = d};
    }
    case F_RAISE: {
        tp_str m = a->npos ? str_of(R, &a->pos[0], line) : (tp_str){"", 0};
        fail(R, line, ZERO_ERR_FORMAT, "the template raised an exception: %.*s", (int)(m.n > 380 ? 380 : m.n), m.p);
    }
    case F_STRFTIME: {
        a->what = "strftime_now()";
        arity(R, a, 1, NULL);
        tp_str f = need_str(R, arg(R, a, 0, NULL), a, "the format");
        char fmt[256], o[512];
        if (f.n >= sizeof fmt) FAILF(line, "strftime_now: a format longer than 255 bytes");
        memcpy(fmt, f.p, f.n);
        fmt[f.n] = 0;
        struct tm tm;
        time_t t = (time_t)R->now;
        if (R->now) gmtime_r(&t, &tm);
        else {
            t = time(NULL);
            localtime_r(&t, &tm);
        }
        size_t n = strftime(o, sizeof o, fmt, &tm);
        return mkstr(R, o, n);
    }
    default: FAILF(line, "an unknown function");
    }
}

static tp_val call_macro(rstate *R, const tp_node *m, args *a) {
    if (++R->depth > 64) FAILF(a->line, "macro calls nested more than 64 deep");
    scope *s = zero__tp_alloc(&R->A, sizeof *s);
    s->up = R->root;
    if (a->npos > m->nnames)
        FAILF(a->line, "macro '%.*s' takes %d arguments, not %d", (int)m->s.n, m->s.p, m->nnames, a->npos);
    for (int i = 0; i < m->nnames; i++) {
        tp_val v = undef(m->names[i]);
        if (i < a->npos) v = a->pos[i];
        else {
            int found = 0;
            for (int k = 0; k < a->nkw; k++)
                if (str_same(a->kwn[k], m->names[i])) v = a->kw[k], found = 1;
            if (!found && m->kids[i]) v = eval(R, s, m->kids[i]);
        }
        assign(R, s, m->names[i], v);
    }
    for (int k = 0; k < a->nkw; k++) {
        int ok = 0;
        for (int i = 0; i < m->nnames; i++) ok |= str_same(a->kwn[k], m->names[i]);
        if (!ok)
            FAILF(a->line, "macro '%.*s' has no argument '%.*s'", (int)m->s.n, m->s.p, (int)a->kwn[k].n, a->kwn[k].p);
    }
    buf cap = {0}, *saved = R->cur;
    R->cur = &cap;
    exec_body(R, s, m->b);
    R->cur = saved;
    R->depth--;
    return cap.n ? sval((tp_str){cap.p, cap.n}) : cstr_val("");
}

/* ---------------------------------------------------------------- expressions */
static tp_val arith(rstate *R, int op, const tp_val *a, const tp_val *b, int line) {
    if (op == OP_CONCAT) {
        buf o = {0};
        to_str(R, &o, a, 0, line);
        to_str(R, &o, b, 0, line);
        return o.n ? sval((tp_str){o.p, o.n}) : cstr_val("");
    }
    if (a->t == TV_UNDEF || b->t == TV_UNDEF) {
        const tp_str n = a->t == TV_UNDEF ? a->u.s : b->u.s;
        FAILF(line, "'%.*s' is undefined (used in arithmetic)", (int)n.n, n.p);
    }
    if (op == OP_ADD && a->t == TV_STR && b->t == TV_STR) {
        if (a->u.s.n + b->u.s.n > R->max_out) FAILF(line, "a string longer than the output limit");
        char *p = zero__tp_alloc(&R->A, a->u.s.n + b->u.s.n + 1);
        memcpy(p, a->u.s.p, a->u.s.n);
        memcpy(p + a->u.s.n, b->u.s.p, b->u.s.n);
        return sval((tp_str){p, a->u.s.n + b->u.s.n});
    }
    if (op == OP_ADD && a->t == TV_LIST && b->t == TV_LIST) {
        tp_list *l = mklist(R, a->u.l->n + b->u.l->n);
        if (a->u.l->n) memcpy(l->v, a->u.l->v, a->u.l->n * sizeof *l->v);
        if (b->u.l->n) memcpy(l->v + a->u.l->n, b->u.l->v, b->u.l->n * sizeof *l->v);
        return lval(l);
    }
    if (op == OP_MUL && ((a->t == TV_STR && b->t == TV_INT) || (a->t == TV_INT && b->t == TV_STR))) {
        const tp_str s = a->t == TV_STR ? a->u.s : b->u.s;
        const int64_t k = a->t == TV_INT ? a->u.i : b->u.i;
        if (k <= 0 || !s.n) return cstr_val("");
        if ((uint64_t)k > R->max_out / s.n) FAILF(line, "a string longer than the output limit");
        char *p = zero__tp_alloc(&R->A, s.n * (size_t)k + 1);
        for (int64_t i = 0; i < k; i++) memcpy(p + (size_t)i * s.n, s.p, s.n);
        return sval((tp_str){p, s.n * (size_t)k});
    }
    static const char *ops[] = {"", "+", "-", "*", "/", "//", "%", "**"};
    if (!is_num(a) || !is_num(b))
        FAILF(line, "'%s' between a %s and a %s is not supported", ops[op], type_name(a), type_name(b));
    if (a->t != TV_FLOAT && b->t != TV_FLOAT && op != OP_DIV) {
        const int64_t x = a->u.i, y = b->u.i;
        int64_t r = 0;
        switch (op) {
        case OP_ADD:
            if (__builtin_add_overflow(x, y, &r)) FAILF(line, "integer overflow");
            return ival(r);
        case OP_SUB:
            if (__builtin_sub_overflow(x, y, &r)) FAILF(line, "integer overflow");
            return ival(r);
        case OP_MUL:
            if (__builtin_mul_overflow(x, y, &r)) FAILF(line, "integer overflow");
            return ival(r);
        case OP_FLOORDIV:
        case OP_MOD: {
            if (!y) FAILF(line, "integer division or modulo by zero");
            if (x == INT64_MIN && y == -1) FAILF(line, "integer overflow");
            int64_t q = x / y, m = x % y;
            if (m && ((m < 0) != (y < 0))) q--, m += y;
            return ival(op == OP_MOD ? m : q);
        }
        case OP_POW: {
            if (y < 0) return (tp_val){.t = TV_FLOAT, .u.f = pow((double)x, (double)y)};
            r = 1;
            for (int64_t i = 0; i < y; i++) {
                if (__builtin_mul_overflow(r, x, &r)) FAILF(line, "integer overflow");
                if (r == 0 || r == 1) break;
            }
            return ival(r);
        }
        default: break;
        }
    }
    const double x = num(a), y = num(b);
    switch (op) {
    case OP_ADD: return (tp_val){.t = TV_FLOAT, .u.f = x + y};
    case OP_SUB: return (tp_val){.t = TV_FLOAT, .u.f = x - y};
    case OP_MUL: return (tp_val){.t = TV_FLOAT, .u.f = x * y};
    case OP_DIV:
        if (y == 0) FAILF(line, "division by zero");
        return (tp_val){.t = TV_FLOAT, .u.f = x / y};
    case OP_FLOORDIV:
        if (y == 0) FAILF(line, "division by zero");
        return (tp_val){.t = TV_FLOAT, .u.f = floor(x / y)};
    case OP_MOD: {
        if (y == 0) FAILF(line, "modulo by zero");
        double m = fmod(x, y);
        if (m != 0 && ((m < 0) != (y < 0))) m += y;
        return (tp_val){.t = TV_FLOAT, .u.f = m};
    }
    default: return (tp_val){.t = TV_FLOAT, .u.f = pow(x, y)};
    }
}

static tp_val eval(rstate *R, scope *sc, const tp_node *x) {
    step(R, x->line);
    switch (x->k) {
    case TN_LIT: return x->lit;
    case TN_NAME: {
        const tp_val *v = lookup(sc, x->s);
        if (v) return *v;
        static const struct {
            const char *n;
            int f;
        } g[] = {{"range", F_RANGE},
                 {"namespace", F_NAMESPACE},
                 {"raise_exception", F_RAISE},
                 {"strftime_now", F_STRFTIME},
                 {"dict", F_DICT}};
        for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
            if (str_eq(x->s, g[i].n)) return (tp_val){.t = TV_FUNC, .u.i = g[i].f};
        return undef(x->s);
    }
    case TN_ATTR: {
        tp_val o = eval(R, sc, x->a);
        return getattr_(R, &o, x->s, x->line);
    }
    case TN_INDEX: {
        tp_val o = eval(R, sc, x->a), k = eval(R, sc, x->b);
        return getitem(R, &o, &k, x->line);
    }
    case TN_SLICE: {
        tp_val o = eval(R, sc, x->a);
        tp_val lo = x->b ? eval(R, sc, x->b) : (tp_val){.t = TV_NONE},
               hi = x->c ? eval(R, sc, x->c) : (tp_val){.t = TV_NONE},
               st = x->d ? eval(R, sc, x->d) : (tp_val){.t = TV_NONE};
        int64_t *idx;
        if (o.t == TV_LIST) {
            size_t n = slice_idx(R, &lo, &hi, &st, (int64_t)o.u.l->n, &idx, x->line);
            tp_list *l = mklist(R, n);
            for (size_t i = 0; i < n; i++) l->v[i] = o.u.l->v[idx[i]];
            return lval(l);
        }
        if (o.t == TV_STR) {
            tp_list *cs = iter_list(R, &o, x->line);
            size_t n = slice_idx(R, &lo, &hi, &st, (int64_t)cs->n, &idx, x->line);
            buf b = {0};
            for (size_t i = 0; i < n; i++) bput(R, &b, cs->v[idx[i]].u.s.p, cs->v[idx[i]].u.s.n, x->line);
            return b.n ? sval((tp_str){b.p, b.n}) : cstr_val("");
        }
        if (o.t == TV_UNDEF) FAILF(x->line, "'%.*s' is undefined (slicing it)", (int)o.u.s.n, o.u.s.p);
        FAILF(x->line, "a %s cannot be sliced", type_name(&o));
    }
    case TN_CALL: {
        if (R->depth > 64) FAILF(x->line, "calls nested more than 64 deep");
        if (x->a->k == TN_ATTR) {
            tp_val o = eval(R, sc, x->a->a);
            if (o.t == TV_STR || (o.t == TV_DICT && !o.ns) || o.t == TV_LOOP || o.t == TV_UNDEF) {
                const tp_val *member = o.t == TV_DICT ? dict_get(o.u.d, x->a->s) : NULL;
                if (!member || (member->t != TV_MACRO && member->t != TV_FUNC)) {
                    args a = eval_args(R, sc, x, 0);
                    return call_method(R, &o, x->a->s, &a);
                }
            }
        }
        tp_val f = eval(R, sc, x->a);
        args a = eval_args(R, sc, x, 0);
        if (f.t == TV_FUNC) return call_func(R, (int)f.u.i, &a);
        if (f.t == TV_MACRO) return call_macro(R, f.u.m, &a);
        if (f.t == TV_UNDEF) FAILF(x->line, "'%.*s' is undefined (calling it)", (int)f.u.s.n, f.u.s.p);
        FAILF(x->line, "a %s is not callable", type_name(&f));
    }
    case TN_FILTER: {
        tp_val v = eval(R, sc, x->a);
        args a = eval_args(R, sc, x, 0);
        return apply_filter(R, sc, x->s, &v, &a);
    }
    case TN_TEST: {
        tp_val v = eval(R, sc, x->a);
        args a = eval_args(R, sc, x, 0);
        const int r = run_test(R, x->s, &v, &a);
        return bval(x->op ? !r : r);
    }
    case TN_BIN: {
        tp_val a = eval(R, sc, x->a), b = eval(R, sc, x->b);
        return arith(R, x->op, &a, &b, x->line);
    }
    case TN_CMP: {
        tp_val a = eval(R, sc, x->a), b = eval(R, sc, x->b);
        switch (x->op) {
        case CMP_EQ: return bval(eq(&a, &b));
        case CMP_NE: return bval(!eq(&a, &b));
        case CMP_LT: return bval(order(R, &a, &b, x->line) < 0);
        case CMP_LE: return bval(order(R, &a, &b, x->line) <= 0);
        case CMP_GT: return bval(order(R, &a, &b, x->line) > 0);
        case CMP_GE: return bval(order(R, &a, &b, x->line) >= 0);
        case CMP_IN: return bval(contains(R, &b, &a, x->line));
        default: return bval(!contains(R, &b, &a, x->line));
        }
    }
    case TN_AND: {
        tp_val a = eval(R, sc, x->a);
        return truthy(&a) ? eval(R, sc, x->b) : a;
    }
    case TN_OR: {
        tp_val a = eval(R, sc, x->a);
        return truthy(&a) ? a : eval(R, sc, x->b);
    }
    case TN_NOT: {
        tp_val a = eval(R, sc, x->a);
        return bval(!truthy(&a));
    }
    case TN_NEG:
    case TN_POS: {
        tp_val a = eval(R, sc, x->a);
        if (a.t == TV_FLOAT) return (tp_val){.t = TV_FLOAT, .u.f = x->k == TN_NEG ? -a.u.f : a.u.f};
        if (a.t == TV_INT || a.t == TV_BOOL) {
            if (x->k == TN_NEG && a.u.i == INT64_MIN) FAILF(x->line, "integer overflow");
            return ival(x->k == TN_NEG ? -a.u.i : a.u.i);
        }
        FAILF(x->line, "unary '%c' of a %s", x->k == TN_NEG ? '-' : '+', type_name(&a));
    }
    case TN_COND: {
        tp_val c = eval(R, sc, x->a);
        if (truthy(&c)) return eval(R, sc, x->b);
        return x->c ? eval(R, sc, x->c) : undef((tp_str){"else", 4});
    }
    case TN_LISTLIT: {
        tp_list *l = mklist(R, (size_t)x->nk);
        for (int i = 0; i < x->nk; i++) l->v[i] = eval(R, sc, x->kids[i]);
        return lval(l);
    }
    case TN_DICTLIT: {
        tp_dict *d = zero__tp_alloc(&R->A, sizeof *d);
        for (int i = 0; i < x->nk; i++) {
            tp_val k = eval(R, sc, x->kids[i]);
            if (k.t != TV_STR) FAILF(x->line, "a dict key must be a string here, not %s", type_name(&k));
            dict_put(R, d, k.u.s, eval(R, sc, x->kv[i]));
        }
        return (tp_val){.t = TV_DICT, .u.d = d};
    }
    default: FAILF(x->line, "internal: a statement where an expression was expected");
    }
}

/* ---------------------------------------------------------------- statements */
enum { FLOW_NEXT = 0, FLOW_BREAK, FLOW_CONTINUE };

static void unpack(rstate *R, scope *s, const tp_node *x, const tp_val *item) {
    if (x->nnames == 1) {
        assign(R, s, x->names[0], *item);
        return;
    }
    tp_list *l = iter_list(R, item, x->line);
    if (l->n != (size_t)x->nnames) FAILF(x->line, "cannot unpack %zu values into %d names", l->n, x->nnames);
    for (int i = 0; i < x->nnames; i++) assign(R, s, x->names[i], l->v[i]);
}

static int exec_node(rstate *R, scope *sc, const tp_node *x) {
    step(R, x->line);
    switch (x->k) {
    case TN_TEXT: bput(R, R->cur, x->s.p, x->s.n, x->line); return FLOW_NEXT;
    case TN_OUT: {
        tp_val v = eval(R, sc, x->a);
        to_str(R, R->cur, &v, 0, x->line);
        return FLOW_NEXT;
    }
    case TN_IF:
        for (const tp_node *c = x; c;) {
            if (c->k == TN_BODY) return exec_body(R, sc, c);
            tp_val v = eval(R, sc, c->a);
            if (truthy(&v)) return exec_body(R, sc, c->b);
            c = c->c;
        }
        return FLOW_NEXT;
    case TN_FOR: {
        tp_val it = eval(R, sc, x->a);
        tp_list *items = iter_list(R, &it, x->line);
        scope *s = zero__tp_alloc(&R->A, sizeof *s);
        s->up = sc;
        if (x->c) { /* the loop filter: loop.* counts the items it keeps */
            tp_list *kept = mklist(R, items->n);
            size_t k = 0;
            for (size_t i = 0; i < items->n; i++) {
                unpack(R, s, x, &items->v[i]);
                tp_val ok = eval(R, s, x->c);
                if (truthy(&ok)) kept->v[k++] = items->v[i];
            }
            kept->n = k;
            items = kept;
            s->n = 0;
        }
        tp_loop *lp = zero__tp_alloc(&R->A, sizeof *lp);
        lp->items = items;
        for (size_t i = 0; i < items->n; i++) {
            step(R, x->line);
            lp->i = i;
            assign(R, s, (tp_str){"loop", 4}, (tp_val){.t = TV_LOOP, .u.lp = lp});
            unpack(R, s, x, &items->v[i]);
            if (exec_body(R, s, x->b) == FLOW_BREAK) break;
        }
        if (!items->n && x->d) return exec_body(R, sc, x->d);
        return FLOW_NEXT;
    }
    case TN_SET: {
        if (x->op == 1) {
            const tp_val *ns = lookup(sc, x->names[0]);
            if (!ns || ns->t != TV_DICT || !ns->ns)
                FAILF(x->line, "'set %.*s.%.*s': %.*s is not a namespace()", (int)x->names[0].n, x->names[0].p,
                      (int)x->s.n, x->s.p, (int)x->names[0].n, x->names[0].p);
            if (x->s.n && x->s.p[0] == '_') FAILF(x->line, "a namespace attribute cannot start with '_'");
            dict_put(R, ns->u.d, x->s, eval(R, sc, x->a));
            return FLOW_NEXT;
        }
        if (x->op == 2) {
            buf cap = {0}, *saved = R->cur;
            R->cur = &cap;
            exec_body(R, sc, x->b);
            R->cur = saved;
            assign(R, sc, x->names[0], cap.n ? sval((tp_str){cap.p, cap.n}) : cstr_val(""));
            return FLOW_NEXT;
        }
        assign(R, sc, x->names[0], eval(R, sc, x->a));
        return FLOW_NEXT;
    }
    case TN_MACRO: assign(R, sc, x->s, (tp_val){.t = TV_MACRO, .u.m = x}); return FLOW_NEXT;
    case TN_BREAK: return FLOW_BREAK;
    case TN_CONTINUE: return FLOW_CONTINUE;
    case TN_GEN: {
        const size_t a = R->cur->n;
        const int f = exec_body(R, sc, x->b);
        if (R->cur == &R->out) {
            if (R->nspans == R->spans_cap) {
                size_t nc = R->spans_cap ? 2 * R->spans_cap : 16;
                size_t(*ns)[2] = realloc(R->spans, nc * sizeof *ns);
                if (!ns) fail(R, x->line, ZERO_ERR_NOMEM, "out of memory");
                R->spans = ns;
                R->spans_cap = nc;
            }
            R->spans[R->nspans][0] = a;
            R->spans[R->nspans++][1] = R->out.n;
        }
        return f;
    }
    case TN_BODY: return exec_body(R, sc, x);
    default: {
        tp_val v = eval(R, sc, x);
        (void)v;
        return FLOW_NEXT;
    }
    }
}

static int exec_body(rstate *R, scope *sc, const tp_node *b) {
    if (++R->depth > ZERO_TEMPLATE_MAX_DEPTH + 64) FAILF(b->line, "blocks nested too deep");
    for (int i = 0; i < b->nk; i++) {
        const int f = exec_node(R, sc, b->kids[i]);
        if (f != FLOW_NEXT) {
            R->depth--;
            return f;
        }
    }
    R->depth--;
    return FLOW_NEXT;
}

/* ---------------------------------------------------------------- entry */
void zero_template_opts_default(zero_template_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_output = UINT64_C(256) << 20;
    o->max_memory = UINT64_C(1) << 30;
    o->max_steps = UINT64_C(1) << 28;
}

zero_status zero_template_render(const zero_template *t, const char *context, size_t len, const zero_template_opts *o,
                                 zero_template_output *out, zero_error *err) {
    zero_error scratch;
    if (!err) err = &scratch;
    memset(out, 0, sizeof *out);
    zero_template_opts dflt;
    if (!o) {
        zero_template_opts_default(&dflt);
        o = &dflt;
    }
    cJSON *volatile ctx = cJSON_ParseWithLength(context, len);
    if (!ctx || !cJSON_IsObject(ctx)) {
        cJSON_Delete(ctx);
        snprintf(err->msg, sizeof err->msg, "chat template: the context is not a JSON object");
        return ZERO_ERR_INVALID_ARG;
    }
    rstate *R = calloc(1, sizeof *R);
    if (!R) {
        cJSON_Delete(ctx);
        snprintf(err->msg, sizeof err->msg, "chat template: out of memory");
        return ZERO_ERR_NOMEM;
    }
    R->err = err;
    R->A.limit = o->max_memory;
    R->A.jb = &R->jb;
    R->A.err = err;
    R->A.st = &R->st;
    R->max_out = o->max_output;
    R->max_steps = o->max_steps;
    R->now = o->now;
    R->cur = &R->out;
    if (setjmp(R->jb)) {
        zero_status st = R->st;
        cJSON_Delete(ctx);
        free(R->out.p);
        free(R->spans);
        zero__tp_arena_free(&R->A);
        free(R);
        return st;
    }
    R->root = zero__tp_alloc(&R->A, sizeof *R->root);
    for (const cJSON *c = ctx->child; c; c = c->next) {
        tp_val k = mkstr(R, c->string, strlen(c->string));
        assign(R, R->root, k.u.s, from_json(R, c, 0));
    }
    cJSON_Delete(ctx);
    ctx = NULL;
    exec_body(R, R->root, t->root);
    if (!R->out.p) {
        R->out.p = malloc(1);
        if (!R->out.p) fail(R, 0, ZERO_ERR_NOMEM, "out of memory");
        R->out.p[0] = 0;
    }
    out->text = R->out.p;
    out->len = R->out.n;
    out->spans = R->spans;
    out->nspans = R->nspans;
    zero__tp_arena_free(&R->A);
    free(R);
    return ZERO_OK;
}

void zero_template_output_free(zero_template_output *out) {
    if (!out) return;
    free(out->text);
    free(out->spans);
    memset(out, 0, sizeof *out);
}
