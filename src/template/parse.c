/* src/template/parse.c — a chat template's source into a syntax tree: Jinja's lexer in the environment
 * transformers uses (trim_blocks, lstrip_blocks, newlines normalized, no trailing newline) and a
 * recursive-descent parser of the subset (docs/TOKENIZER.md, "The model's chat template"). */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "template/internal.h"

/* ---------------------------------------------------------------- arena */
struct tp_blk {
    struct tp_blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
};

void *zero__tp_alloc(tp_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n > a->limit || a->used + n > a->limit) {
        snprintf(a->err->msg, sizeof a->err->msg, "chat template: rendering needs more than %llu bytes of memory",
                 (unsigned long long)a->limit);
        *a->st = ZERO_ERR_NOSPACE;
        longjmp(*a->jb, 1);
    }
    struct tp_blk *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > (size_t)60000 ? n : (size_t)60000;
        b = malloc(sizeof *b + cap);
        if (!b) {
            snprintf(a->err->msg, sizeof a->err->msg, "chat template: out of memory");
            *a->st = ZERO_ERR_NOMEM;
            longjmp(*a->jb, 1);
        }
        b->used = 0;
        b->cap = cap;
        b->next = a->head;
        a->head = b;
    }
    void *p = b->mem + b->used;
    b->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void zero__tp_arena_free(tp_arena *a) {
    for (struct tp_blk *b = a->head, *nx; b; b = nx) {
        nx = b->next;
        free(b);
    }
    a->head = NULL;
    a->used = 0;
}

/* Python's str.isspace(): the Unicode White_Space characters and the four separators. */
int zero__tp_space_at(const char *s, size_t n, size_t *len) {
    const unsigned char *u = (const unsigned char *)s;
    if (!n) return 0;
    *len = 1;
    if (u[0] == ' ' || (u[0] >= 9 && u[0] <= 13) || (u[0] >= 0x1c && u[0] <= 0x1f)) return 1;
    if (u[0] < 0x80) return 0;
    unsigned cp = 0;
    if ((u[0] & 0xE0) == 0xC0 && n >= 2) cp = ((u[0] & 0x1Fu) << 6) | (u[1] & 0x3Fu), *len = 2;
    else if ((u[0] & 0xF0) == 0xE0 && n >= 3)
        cp = ((u[0] & 0x0Fu) << 12) | ((u[1] & 0x3Fu) << 6) | (u[2] & 0x3Fu), *len = 3;
    else return 0;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ---------------------------------------------------------------- lexer */
enum { K_TEXT, K_VBEGIN, K_VEND, K_BBEGIN, K_BEND, K_NAME, K_STR, K_INT, K_FLOAT, K_OP, K_EOF };

typedef struct ptok {
    uint8_t k;
    int line;
    tp_str s;
    int64_t i;
    double f;
} ptok;

typedef struct parser {
    tp_arena *A;
    jmp_buf jb;
    zero_error *err;
    zero_status st;
    const char *src;
    size_t n;
    ptok *t;
    size_t nt, cap, pos;
    int depth, loops, has_gen;
} parser;

static _Noreturn void pfail(parser *P, zero_status st, int line, const char *fmt, ...) {
    char m[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    snprintf(P->err->msg, sizeof P->err->msg, "chat template line %d: %s", line, m);
    P->st = st;
    longjmp(P->jb, 1);
}

static void emit(parser *P, uint8_t k, int line, const char *s, size_t n) {
    if (P->nt == P->cap) {
        size_t nc = P->cap ? 2 * P->cap : 256;
        ptok *t = zero__tp_alloc(P->A, nc * sizeof *t);
        if (P->nt) memcpy(t, P->t, P->nt * sizeof *t);
        P->t = t;
        P->cap = nc;
    }
    P->t[P->nt++] = (ptok){.k = k, .line = line, .s = {s, n}};
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python's rstrip() of [s, s + *n). */
static void rstrip_py(const char *s, size_t *n) {
    while (*n) {
        size_t q = *n - 1, l;
        while (q > 0 && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
        if (!zero__tp_space_at(s + q, *n - q, &l) || q + l != *n) break;
        *n = q;
    }
}

static size_t skip_space_py(const char *s, size_t n, size_t i) {
    size_t l;
    while (i < n && zero__tp_space_at(s + i, n - i, &l)) i += l;
    return i;
}

static int count_nl(const char *s, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += s[i] == '\n';
    return c;
}

/* Python's unicode-escape of a string literal's body (what Jinja applies), into arena memory. */
static tp_str unescape(parser *P, int line, const char *s, size_t n) {
    char *o = zero__tp_alloc(P->A, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) {
            o[k++] = s[i];
            continue;
        }
        char c = s[++i];
        unsigned cp = 0;
        int hex = 0;
        switch (c) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case '\n': break;
        case 'x': hex = 2; break;
        case 'u': hex = 4; break;
        case 'U': hex = 8; break;
        default:
            if (c >= '0' && c <= '7') {
                int d = 0;
                while (d < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (unsigned)(s[i++] - '0'), d++;
                i--;
                hex = -1;
            } else {
                o[k++] = '\\';
                o[k++] = c;
            }
        }
        if (hex > 0) {
            if (i + (size_t)hex >= n) pfail(P, ZERO_ERR_FORMAT, line, "a truncated \\%c escape in a string", c);
            for (int d = 0; d < hex; d++) {
                char h = s[++i];
                int v = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (v < 0) pfail(P, ZERO_ERR_FORMAT, line, "a bad \\%c escape in a string", c);
                cp = cp * 16 + (unsigned)v;
            }
        }
        if (hex) {
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                pfail(P, ZERO_ERR_FORMAT, line, "escape \\U%08X in a string is not a character", cp);
            if (cp < 0x80) o[k++] = (char)cp;
            else if (cp < 0x800) o[k++] = (char)(0xC0 | (cp >> 6)), o[k++] = (char)(0x80 | (cp & 0x3F));
            else if (cp < 0x10000)
                o[k++] = (char)(0xE0 | (cp >> 12)), o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)),
                o[k++] = (char)(0x80 | (cp & 0x3F));
            else
                o[k++] = (char)(0xF0 | (cp >> 18)), o[k++] = (char)(0x80 | ((cp >> 12) & 0x3F)),
                o[k++] = (char)(0x80 | ((cp >> 6) & 0x3F)), o[k++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return (tp_str){o, k};
}

/* Lexes the tokens of one tag up to its end; returns the position after the end marker and sets
 * *strip when it is '-'. kind: '{' for {{ }}, '%' for {% %}. */
static size_t lex_tag(parser *P, size_t i, int *line, char kind, int *strip, int *plus) {
    const char *s = P->src;
    const size_t n = P->n;
    const char close = kind == '{' ? '}' : '%';
    static const char *ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
    int brackets = 0;
    for (;;) {
        while (i < n && is_ws(s[i])) *line += s[i++] == '\n';
        if (i >= n)
            pfail(P, ZERO_ERR_FORMAT, *line, "unexpected end of template: expected '%s'", kind == '{' ? "}}" : "%}");
        if (brackets == 0 && (s[i] == '-' || s[i] == '+') && i + 2 < n && s[i + 1] == close && s[i + 2] == '}') {
            *strip = s[i] == '-';
            *plus = s[i] == '+';
            return i + 3;
        }
        if (brackets == 0 && s[i] == close && i + 1 < n && s[i + 1] == '}') return i + 2;
        const size_t b = i;
        const char c = s[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            while (i < n && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' ||
                             (s[i] >= '0' && s[i] <= '9')))
                i++;
            emit(P, K_NAME, *line, s + b, i - b);
        } else if (c >= '0' && c <= '9') {
            int fl = 0;
            while (i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_')) i++;
            if (i + 1 < n && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9') {
                fl = 1;
                i++;
                while (i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '_')) i++;
            }
            if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                size_t e = i + 1;
                if (e < n && (s[e] == '+' || s[e] == '-')) e++;
                if (e < n && s[e] >= '0' && s[e] <= '9') {
                    fl = 1;
                    i = e;
                    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
                }
            }
            char num[64];
            size_t k = 0;
            for (size_t q = b; q < i && k < sizeof num - 1; q++)
                if (s[q] != '_') num[k++] = s[q];
            num[k] = 0;
            emit(P, fl ? K_FLOAT : K_INT, *line, s + b, i - b);
            if (fl) P->t[P->nt - 1].f = strtod(num, NULL);
            else {
                errno = 0;
                unsigned long long v = strtoull(num, NULL, 10);
                if (errno || v > INT64_MAX)
                    pfail(P, ZERO_ERR_UNSUPPORTED, *line, "integer %s is too large: not supported yet", num);
                P->t[P->nt - 1].i = (int64_t)v;
            }
        } else if (c == '\'' || c == '"') {
            const int l0 = *line;
            i++;
            while (i < n && s[i] != c) {
                if (s[i] == '\\' && i + 1 < n) i++;
                *line += s[i] == '\n';
                i++;
            }
            if (i >= n) pfail(P, ZERO_ERR_FORMAT, l0, "a string that is never closed");
            emit(P, K_STR, l0, NULL, 0);
            P->t[P->nt - 1].s = unescape(P, l0, s + b + 1, i - b - 1);
            i++;
        } else {
            size_t k = 0;
            for (; k < sizeof ops / sizeof ops[0]; k++) {
                size_t l = strlen(ops[k]);
                if (i + l <= n && !memcmp(s + i, ops[k], l)) break;
            }
            if (k == sizeof ops / sizeof ops[0])
                pfail(P, ZERO_ERR_FORMAT, *line, "unexpected character '%c' in a %s", c,
                      kind == '{' ? "{{ }}" : "{% %}");
            size_t l = strlen(ops[k]);
            if (c == '(' || c == '[' || c == '{') brackets++;
            if ((c == ')' || c == ']' || c == '}') && brackets > 0) brackets--;
            emit(P, K_OP, *line, s + i, l);
            i += l;
        }
    }
}

static void lex(parser *P) {
    const char *s = P->src;
    const size_t n = P->n;
    size_t i = 0;
    int line = 1, line_starting = 1;
    while (i <= n) {
        size_t q = i;
        while (q + 1 < n && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#'))) q++;
        if (q + 1 >= n) q = n;
        size_t tn = q - i;
        if (q == n) {
            if (tn) emit(P, K_TEXT, line, s + i, tn);
            break;
        }
        const char kind = s[q + 1];
        const char sign = q + 2 < n && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
        if (sign == '-') rstrip_py(s + i, &tn);
        else if (sign != '+' && kind != '{') { /* lstrip_blocks */ size_t l = tn;
            while (l > 0 && s[i + l - 1] != '\n') l--;
            if ((l > 0 || line_starting) && l < tn) {
                size_t e = l;
                while (e < tn && s[i + e] != '\n' && is_ws(s[i + e])) e++;
                if (e == tn) tn = l;
            }
        }
        if (tn) emit(P, K_TEXT, line, s + i, tn);
        line += count_nl(s + i, q - i);
        size_t j = q + 2 + (sign ? 1 : 0);
        int strip = 0, plus = 0;
        if (kind == '#') {
            size_t e = j;
            while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}')) e++;
            if (e + 1 >= n) pfail(P, ZERO_ERR_FORMAT, line, "a comment {# that is never closed");
            strip = e > j && s[e - 1] == '-';
            plus = e > j && s[e - 1] == '+';
            line += count_nl(s + j, e - j);
            j = e + 2;
        } else {
            emit(P, kind == '{' ? K_VBEGIN : K_BBEGIN, line, NULL, 0);
            j = lex_tag(P, j, &line, kind, &strip, &plus);
            emit(P, kind == '{' ? K_VEND : K_BEND, line, NULL, 0);
        }
        line_starting = 0;
        if (strip) {
            size_t e = skip_space_py(s, n, j);
            line += count_nl(s + j, e - j);
            line_starting = e > j && s[e - 1] == '\n';
            j = e;
        } else if (kind != '{' && !plus && j < n && s[j] == '\n') {
            j++;
            line++;
            line_starting = 1;
        }
        i = j;
    }
    emit(P, K_EOF, line, NULL, 0);
}

/* ---------------------------------------------------------------- parser */
static ptok *cur(parser *P) { return &P->t[P->pos]; }
static int is_op(parser *P, const char *op) {
    ptok *t = cur(P);
    return t->k == K_OP && t->s.n == strlen(op) && !memcmp(t->s.p, op, t->s.n);
}
static int is_name(parser *P, const char *nm) {
    ptok *t = cur(P);
    return t->k == K_NAME && t->s.n == strlen(nm) && !memcmp(t->s.p, nm, t->s.n);
}
static const char *tok_desc(parser *P, char *b, size_t cap) {
    ptok *t = cur(P);
    switch (t->k) {
    case K_TEXT: return "text";
    case K_VBEGIN: return "'{{'";
    case K_VEND: return "'}}'";
    case K_BBEGIN: return "'{%'";
    case K_BEND: return "'%}'";
    case K_EOF: return "the end of the template";
    case K_STR: return "a string";
    case K_INT:
    case K_FLOAT: return "a number";
    default: snprintf(b, cap, "'%.*s'", (int)(t->s.n > 40 ? 40 : t->s.n), t->s.p); return b;
    }
}
static void expect_op(parser *P, const char *op) {
    char b[64];
    if (!is_op(P, op)) pfail(P, ZERO_ERR_FORMAT, cur(P)->line, "expected '%s', found %s", op, tok_desc(P, b, sizeof b));
    P->pos++;
}
static tp_str expect_name(parser *P) {
    char b[64];
    if (cur(P)->k != K_NAME)
        pfail(P, ZERO_ERR_FORMAT, cur(P)->line, "expected a name, found %s", tok_desc(P, b, sizeof b));
    return P->t[P->pos++].s;
}
static void expect_kind(parser *P, uint8_t k, const char *what) {
    char b[64];
    if (cur(P)->k != k)
        pfail(P, ZERO_ERR_FORMAT, cur(P)->line, "expected %s, found %s", what, tok_desc(P, b, sizeof b));
    P->pos++;
}

static tp_node *mk(parser *P, uint8_t k, int line) {
    tp_node *x = zero__tp_alloc(P->A, sizeof *x);
    x->k = k;
    x->line = line;
    return x;
}

typedef struct nvec {
    tp_node **v;
    int n, cap;
} nvec;
static void npush(parser *P, nvec *v, tp_node *x) {
    if (v->n == v->cap) {
        int nc = v->cap ? 2 * v->cap : 8;
        tp_node **nv = zero__tp_alloc(P->A, (size_t)nc * sizeof(void *)); /* pointers: all one size */
        if (v->n) memcpy(nv, v->v, (size_t)v->n * sizeof(void *));
        v->v = nv;
        v->cap = nc;
    }
    v->v[v->n++] = x;
}

/* The filters and tests the renderer has (render.c): any other name is refused when the template is
 * parsed, not when a chat first reaches it. */
static int known(tp_str s, const char *const *names) {
    for (; *names; names++)
        if (s.n == strlen(*names) && !memcmp(s.p, *names, s.n)) return 1;
    return 0;
}
static const char *const FILTERS[] = {"safe",       "trim",   "tojson",  "length",     "count",      "upper", "lower",
                                      "capitalize", "title",  "default", "d",          "first",      "last",  "join",
                                      "replace",    "string", "int",     "float",      "list",       "items", "reverse",
                                      "abs",        "select", "reject",  "selectattr", "rejectattr", "map",   NULL};
static const char *const TESTS[] = {
    "defined",     "undefined", "none",    "boolean",  "true",     "false",    "integer",     "float",
    "number",      "string",    "mapping", "iterable", "sequence", "callable", "odd",         "even",
    "divisibleby", "lower",     "upper",   "eq",       "equalto",  "==",       "ne",          "!=",
    "lt",          "lessthan",  "<",       "le",       "<=",       "gt",       "greaterthan", ">",
    "ge",          ">=",        "sameas",  "in",       NULL};

static void enter(parser *P) {
    if (++P->depth > ZERO_TEMPLATE_MAX_DEPTH)
        pfail(P, ZERO_ERR_UNSUPPORTED, cur(P)->line, "nested more than %d deep: not supported",
              ZERO_TEMPLATE_MAX_DEPTH);
}

static tp_node *expr(parser *P);
static tp_node *unary(parser *P, int with_filter);

static void call_args(parser *P, tp_node *x) {
    nvec pos = {0}, kv = {0};
    tp_str *kwn = NULL;
    int nkw = 0, kwcap = 0;
    expect_op(P, "(");
    while (!is_op(P, ")")) {
        if (is_op(P, "*") || is_op(P, "**"))
            pfail(P, ZERO_ERR_UNSUPPORTED, cur(P)->line, "*args in a call are not supported yet");
        if (cur(P)->k == K_NAME && P->t[P->pos + 1].k == K_OP && P->t[P->pos + 1].s.n == 1 &&
            P->t[P->pos + 1].s.p[0] == '=') {
            tp_str nm = expect_name(P);
            P->pos++;
            if (nkw == kwcap) {
                int nc = kwcap ? 2 * kwcap : 4;
                tp_str *nn = zero__tp_alloc(P->A, (size_t)nc * sizeof *nn);
                if (nkw) memcpy(nn, kwn, (size_t)nkw * sizeof *nn);
                kwn = nn;
                kwcap = nc;
            }
            kwn[nkw++] = nm;
            npush(P, &kv, expr(P));
        } else {
            if (nkw) pfail(P, ZERO_ERR_FORMAT, cur(P)->line, "a positional argument after a keyword argument");
            npush(P, &pos, expr(P));
        }
        if (!is_op(P, ",")) break;
        P->pos++;
    }
    expect_op(P, ")");
    x->kids = pos.v;
    x->nk = pos.n;
    x->kv = kv.v;
    x->kwn = kwn;
    x->nkw = nkw;
}

static tp_node *primary(parser *P) {
    ptok *t = cur(P);
    char b[64];
    tp_node *x;
    enter(P);
    switch (t->k) {
    case K_NAME:
        P->pos++;
        x = mk(P, TN_LIT, t->line);
        if ((t->s.n == 4 && (!memcmp(t->s.p, "true", 4) || !memcmp(t->s.p, "True", 4))))
            x->lit = (tp_val){.t = TV_BOOL, .u.i = 1};
        else if (t->s.n == 5 && (!memcmp(t->s.p, "false", 5) || !memcmp(t->s.p, "False", 5)))
            x->lit = (tp_val){.t = TV_BOOL, .u.i = 0};
        else if (t->s.n == 4 && (!memcmp(t->s.p, "none", 4) || !memcmp(t->s.p, "None", 4)))
            x->lit = (tp_val){.t = TV_NONE};
        else {
            x->k = TN_NAME;
            x->s = t->s;
        }
        break;
    case K_STR: {
        x = mk(P, TN_LIT, t->line);
        size_t total = 0, k = P->pos;
        while (P->t[k].k == K_STR) total += P->t[k++].s.n;
        char *o = zero__tp_alloc(P->A, total + 1);
        total = 0;
        while (cur(P)->k == K_STR) {
            memcpy(o + total, cur(P)->s.p, cur(P)->s.n);
            total += cur(P)->s.n;
            P->pos++;
        }
        x->lit = (tp_val){.t = TV_STR, .u.s = {o, total}};
        break;
    }
    case K_INT:
        P->pos++;
        x = mk(P, TN_LIT, t->line);
        x->lit = (tp_val){.t = TV_INT, .u.i = t->i};
        break;
    case K_FLOAT:
        P->pos++;
        x = mk(P, TN_LIT, t->line);
        x->lit = (tp_val){.t = TV_FLOAT, .u.f = t->f};
        break;
    case K_OP:
        if (is_op(P, "(")) {
            P->pos++;
            if (is_op(P, ")")) { /* () : an empty tuple */
                P->pos++;
                x = mk(P, TN_LISTLIT, t->line);
                break;
            }
            x = expr(P);
            if (is_op(P, ",")) {
                nvec v = {0};
                npush(P, &v, x);
                while (is_op(P, ",")) {
                    P->pos++;
                    if (is_op(P, ")")) break;
                    npush(P, &v, expr(P));
                }
                x = mk(P, TN_LISTLIT, t->line);
                x->kids = v.v;
                x->nk = v.n;
            }
            expect_op(P, ")");
            break;
        }
        if (is_op(P, "[")) {
            P->pos++;
            nvec v = {0};
            while (!is_op(P, "]")) {
                npush(P, &v, expr(P));
                if (!is_op(P, ",")) break;
                P->pos++;
            }
            expect_op(P, "]");
            x = mk(P, TN_LISTLIT, t->line);
            x->kids = v.v;
            x->nk = v.n;
            break;
        }
        if (is_op(P, "{")) {
            P->pos++;
            nvec k = {0}, v = {0};
            while (!is_op(P, "}")) {
                npush(P, &k, expr(P));
                expect_op(P, ":");
                npush(P, &v, expr(P));
                if (!is_op(P, ",")) break;
                P->pos++;
            }
            expect_op(P, "}");
            x = mk(P, TN_DICTLIT, t->line);
            x->kids = k.v;
            x->nk = k.n;
            x->kv = v.v;
            x->nkw = v.n;
            break;
        }
        /* fallthrough */
    default: pfail(P, ZERO_ERR_FORMAT, t->line, "expected an expression, found %s", tok_desc(P, b, sizeof b));
    }
    P->depth--;
    return x;
}

static tp_node *postfix(parser *P, tp_node *x) {
    for (;;) {
        const int line = cur(P)->line;
        if (is_op(P, ".")) {
            P->pos++;
            tp_node *y = mk(P, TN_ATTR, line);
            y->a = x;
            if (cur(P)->k == K_INT) { /* x.0 is x[0] */
                y->k = TN_INDEX;
                y->b = mk(P, TN_LIT, line);
                y->b->lit = (tp_val){.t = TV_INT, .u.i = cur(P)->i};
                P->pos++;
            } else y->s = expect_name(P);
            x = y;
        } else if (is_op(P, "[")) {
            P->pos++;
            tp_node *parts[3] = {NULL, NULL, NULL};
            int np = 0;
            for (;;) {
                if (!is_op(P, ":") && !is_op(P, "]")) parts[np] = expr(P);
                if (is_op(P, ":") && np < 2) {
                    P->pos++;
                    np++;
                    continue;
                }
                break;
            }
            expect_op(P, "]");
            tp_node *y = mk(P, np ? TN_SLICE : TN_INDEX, line);
            y->a = x;
            y->b = parts[0];
            y->c = parts[1];
            y->d = parts[2];
            if (!np && !y->b) pfail(P, ZERO_ERR_FORMAT, line, "expected an index in []");
            x = y;
        } else if (is_op(P, "(")) {
            tp_node *y = mk(P, TN_CALL, line);
            y->a = x;
            call_args(P, y);
            x = y;
        } else return x;
    }
}

static tp_node *filter_expr(parser *P, tp_node *x) {
    for (;;) {
        const int line = cur(P)->line;
        if (is_op(P, "|")) {
            P->pos++;
            tp_node *y = mk(P, TN_FILTER, line);
            y->a = x;
            y->s = expect_name(P);
            if (!known(y->s, FILTERS))
                pfail(P, ZERO_ERR_UNSUPPORTED, line, "filter '%.*s' is not supported yet",
                      (int)(y->s.n > 40 ? 40 : y->s.n), y->s.p);
            if (is_op(P, "."))
                pfail(P, ZERO_ERR_UNSUPPORTED, line, "filter '%.*s.' (a dotted filter name) is not supported yet",
                      (int)y->s.n, y->s.p);
            if (is_op(P, "(")) call_args(P, y);
            x = y;
        } else if (is_name(P, "is")) {
            P->pos++;
            tp_node *y = mk(P, TN_TEST, line);
            y->a = x;
            if (is_name(P, "not")) {
                P->pos++;
                y->op = 1;
            }
            y->s = expect_name(P);
            if (!known(y->s, TESTS))
                pfail(P, ZERO_ERR_UNSUPPORTED, line, "test '%.*s' is not supported yet",
                      (int)(y->s.n > 40 ? 40 : y->s.n), y->s.p);
            if (is_op(P, "(")) call_args(P, y);
            else {
                ptok *t = cur(P);
                const int arg = (t->k == K_NAME && !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") &&
                                 !is_name(P, "if") && !is_name(P, "in") && !is_name(P, "is")) ||
                                t->k == K_STR || t->k == K_INT || t->k == K_FLOAT || is_op(P, "(") || is_op(P, "[") ||
                                is_op(P, "{");
                if (arg) {
                    nvec v = {0};
                    npush(P, &v, postfix(P, primary(P)));
                    y->kids = v.v;
                    y->nk = 1;
                }
            }
            x = y;
        } else if (is_op(P, "(")) {
            tp_node *y = mk(P, TN_CALL, line);
            y->a = x;
            call_args(P, y);
            x = y;
        } else return x;
    }
}

static tp_node *unary(parser *P, int with_filter) {
    const int line = cur(P)->line;
    tp_node *x;
    enter(P);
    if (is_op(P, "-") || is_op(P, "+")) {
        x = mk(P, is_op(P, "-") ? TN_NEG : TN_POS, line);
        P->pos++;
        x->a = unary(P, 0);
    } else x = postfix(P, primary(P));
    if (with_filter) x = filter_expr(P, x);
    P->depth--;
    return x;
}

static tp_node *bin(parser *P, uint8_t k, uint8_t op, int line, tp_node *a, tp_node *b) {
    tp_node *x = mk(P, k, line);
    x->op = op;
    x->a = a;
    x->b = b;
    return x;
}

static tp_node *pow_expr(parser *P) {
    tp_node *x = unary(P, 1);
    while (is_op(P, "**")) {
        const int line = cur(P)->line;
        P->pos++;
        x = bin(P, TN_BIN, OP_POW, line, x, unary(P, 1));
    }
    return x;
}
static tp_node *math2(parser *P) {
    tp_node *x = pow_expr(P);
    for (;;) {
        const int line = cur(P)->line;
        uint8_t op = is_op(P, "*")    ? OP_MUL
                     : is_op(P, "/")  ? OP_DIV
                     : is_op(P, "//") ? OP_FLOORDIV
                     : is_op(P, "%")  ? OP_MOD
                                      : 0;
        if (!op) return x;
        P->pos++;
        x = bin(P, TN_BIN, op, line, x, pow_expr(P));
    }
}
static tp_node *concat(parser *P) {
    tp_node *x = math2(P);
    while (is_op(P, "~")) {
        const int line = cur(P)->line;
        P->pos++;
        x = bin(P, TN_BIN, OP_CONCAT, line, x, math2(P));
    }
    return x;
}
static tp_node *math1(parser *P) {
    tp_node *x = concat(P);
    for (;;) {
        const int line = cur(P)->line;
        uint8_t op = is_op(P, "+") ? OP_ADD : is_op(P, "-") ? OP_SUB : 0;
        if (!op) return x;
        P->pos++;
        x = bin(P, TN_BIN, op, line, x, concat(P));
    }
}
static tp_node *compare(parser *P) {
    tp_node *x = math1(P), *chain = NULL, *prev = x;
    for (;;) {
        const int line = cur(P)->line;
        uint8_t op = is_op(P, "==")     ? CMP_EQ
                     : is_op(P, "!=")   ? CMP_NE
                     : is_op(P, "<")    ? CMP_LT
                     : is_op(P, "<=")   ? CMP_LE
                     : is_op(P, ">")    ? CMP_GT
                     : is_op(P, ">=")   ? CMP_GE
                     : is_name(P, "in") ? CMP_IN
                                        : 0;
        if (!op && is_name(P, "not") && P->t[P->pos + 1].k == K_NAME && P->t[P->pos + 1].s.n == 2 &&
            !memcmp(P->t[P->pos + 1].s.p, "in", 2)) {
            op = CMP_NOTIN;
            P->pos++;
        }
        if (!op) return chain ? chain : x;
        P->pos++;
        tp_node *rhs = math1(P);
        tp_node *c = bin(P, TN_CMP, op, line, prev, rhs);
        chain = chain ? bin(P, TN_AND, 0, line, chain, c) : c;
        prev = rhs;
    }
}
static tp_node *not_expr(parser *P) {
    if (is_name(P, "not")) {
        const int line = cur(P)->line;
        P->pos++;
        enter(P);
        tp_node *x = mk(P, TN_NOT, line);
        x->a = not_expr(P);
        P->depth--;
        return x;
    }
    return compare(P);
}
static tp_node *and_expr(parser *P) {
    tp_node *x = not_expr(P);
    while (is_name(P, "and")) {
        const int line = cur(P)->line;
        P->pos++;
        x = bin(P, TN_AND, 0, line, x, not_expr(P));
    }
    return x;
}
static tp_node *or_expr(parser *P) {
    tp_node *x = and_expr(P);
    while (is_name(P, "or")) {
        const int line = cur(P)->line;
        P->pos++;
        x = bin(P, TN_OR, 0, line, x, and_expr(P));
    }
    return x;
}
static tp_node *expr(parser *P) {
    enter(P);
    tp_node *x = or_expr(P);
    while (is_name(P, "if")) {
        const int line = cur(P)->line;
        P->pos++;
        tp_node *c = mk(P, TN_COND, line);
        c->b = x;
        c->a = or_expr(P);
        if (is_name(P, "else")) {
            P->pos++;
            c->c = or_expr(P);
        }
        x = c;
    }
    P->depth--;
    return x;
}

/* ---------------------------------------------------------------- statements */
static tp_node *body(parser *P, const char *const *ends, int nends, tp_str *which);

static tp_str names_list(parser *P, tp_str **out, int *n) {
    tp_str first = expect_name(P);
    int cap = 4;
    *out = zero__tp_alloc(P->A, (size_t)cap * sizeof **out);
    (*out)[0] = first;
    *n = 1;
    while (is_op(P, ",")) {
        P->pos++;
        if (*n == cap) {
            tp_str *nn = zero__tp_alloc(P->A, (size_t)cap * 2 * sizeof *nn);
            memcpy(nn, *out, (size_t)cap * sizeof *nn);
            *out = nn;
            cap *= 2;
        }
        (*out)[(*n)++] = expect_name(P);
    }
    return first;
}

static void end_tag(parser *P) { expect_kind(P, K_BEND, "'%}'"); }

static tp_node *statement(parser *P) {
    const int line = cur(P)->line;
    tp_str kw = expect_name(P);
    tp_str which;
#define KW(s) (kw.n == strlen(s) && !memcmp(kw.p, s, kw.n))
    enter(P);
    tp_node *x;
    if (KW("if")) {
        x = mk(P, TN_IF, line);
        x->a = expr(P);
        end_tag(P);
        static const char *const e[] = {"elif", "else", "endif"};
        x->b = body(P, e, 3, &which);
        tp_node *at = x;
        while (which.n == 4 && !memcmp(which.p, "elif", 4)) {
            tp_node *y = mk(P, TN_IF, cur(P)->line);
            y->a = expr(P);
            end_tag(P);
            y->b = body(P, e, 3, &which);
            at->c = y;
            at = y;
        }
        if (which.n == 4 && !memcmp(which.p, "else", 4)) {
            end_tag(P);
            static const char *const e2[] = {"endif"};
            at->c = body(P, e2, 1, &which);
        }
        end_tag(P);
    } else if (KW("for")) {
        x = mk(P, TN_FOR, line);
        names_list(P, &x->names, &x->nnames);
        if (!is_name(P, "in")) pfail(P, ZERO_ERR_FORMAT, cur(P)->line, "expected 'in' in a for loop");
        P->pos++;
        x->a = or_expr(P);
        if (is_name(P, "if")) {
            P->pos++;
            x->c = expr(P);
        }
        if (is_name(P, "recursive"))
            pfail(P, ZERO_ERR_UNSUPPORTED, cur(P)->line, "recursive for loops are not supported yet");
        end_tag(P);
        static const char *const e[] = {"else", "endfor"};
        P->loops++;
        x->b = body(P, e, 2, &which);
        P->loops--;
        if (which.n == 4) {
            end_tag(P);
            static const char *const e2[] = {"endfor"};
            x->d = body(P, e2, 1, &which);
        }
        end_tag(P);
    } else if (KW("set")) {
        x = mk(P, TN_SET, line);
        tp_str nm = names_list(P, &x->names, &x->nnames);
        (void)nm;
        if (x->nnames > 1) pfail(P, ZERO_ERR_UNSUPPORTED, line, "'set' of several names at once is not supported yet");
        if (is_op(P, ".")) {
            P->pos++;
            x->op = 1;
            x->s = expect_name(P);
        }
        if (is_op(P, "=")) {
            P->pos++;
            x->a = expr(P);
            if (is_op(P, ",")) pfail(P, ZERO_ERR_UNSUPPORTED, line, "'set' of a tuple is not supported yet");
            end_tag(P);
        } else {
            if (x->op)
                pfail(P, ZERO_ERR_FORMAT, line, "expected '=' after 'set %.*s.%.*s'", (int)x->names[0].n, x->names[0].p,
                      (int)x->s.n, x->s.p);
            if (is_op(P, "|")) pfail(P, ZERO_ERR_UNSUPPORTED, line, "a filtered block 'set' is not supported yet");
            end_tag(P);
            static const char *const e[] = {"endset"};
            x->op = 2;
            x->b = body(P, e, 1, &which);
            end_tag(P);
        }
    } else if (KW("macro")) {
        x = mk(P, TN_MACRO, line);
        x->s = expect_name(P);
        expect_op(P, "(");
        nvec defs = {0};
        int cap = 0;
        while (!is_op(P, ")")) {
            if (x->nnames == cap) {
                int nc = cap ? 2 * cap : 4;
                tp_str *nn = zero__tp_alloc(P->A, (size_t)nc * sizeof *nn);
                if (x->nnames) memcpy(nn, x->names, (size_t)x->nnames * sizeof *nn);
                x->names = nn;
                cap = nc;
            }
            x->names[x->nnames++] = expect_name(P);
            tp_node *dv = NULL;
            if (is_op(P, "=")) {
                P->pos++;
                dv = expr(P);
            }
            npush(P, &defs, dv);
            if (!is_op(P, ",")) break;
            P->pos++;
        }
        expect_op(P, ")");
        x->kids = defs.v;
        x->nk = defs.n;
        end_tag(P);
        static const char *const e[] = {"endmacro"};
        const int loops = P->loops;
        P->loops = 0;
        x->b = body(P, e, 1, &which);
        P->loops = loops;
        end_tag(P);
    } else if (KW("break") || KW("continue")) {
        if (!P->loops) pfail(P, ZERO_ERR_FORMAT, line, "'%.*s' outside a for loop", (int)kw.n, kw.p);
        x = mk(P, KW("break") ? TN_BREAK : TN_CONTINUE, line);
        end_tag(P);
    } else if (KW("generation")) {
        x = mk(P, TN_GEN, line);
        end_tag(P);
        static const char *const e[] = {"endgeneration"};
        x->b = body(P, e, 1, &which);
        end_tag(P);
        P->has_gen = 1;
    } else {
        static const char *const known_ends[] = {"endif",         "endfor", "endset", "endmacro",
                                                 "endgeneration", "elif",   "else"};
        for (size_t k = 0; k < sizeof known_ends / sizeof known_ends[0]; k++)
            if (KW(known_ends[k])) pfail(P, ZERO_ERR_FORMAT, line, "'%s' without its opening tag", known_ends[k]);
        pfail(P, ZERO_ERR_UNSUPPORTED, line, "tag '%.*s' is not supported yet", (int)(kw.n > 40 ? 40 : kw.n), kw.p);
    }
#undef KW
    P->depth--;
    return x;
}

/* Statements up to one of ends (whose name is consumed and returned in *which) or, with nends 0,
 * the end of the template. */
static tp_node *body(parser *P, const char *const *ends, int nends, tp_str *which) {
    const int line = cur(P)->line;
    tp_node *b = mk(P, TN_BODY, line);
    nvec v = {0};
    enter(P);
    for (;;) {
        ptok *t = cur(P);
        if (t->k == K_EOF) {
            if (nends) pfail(P, ZERO_ERR_FORMAT, line, "a block that is never closed: expected '%s'", ends[nends - 1]);
            break;
        }
        if (t->k == K_TEXT) {
            tp_node *x = mk(P, TN_TEXT, t->line);
            x->s = t->s;
            npush(P, &v, x);
            P->pos++;
        } else if (t->k == K_VBEGIN) {
            P->pos++;
            tp_node *x = mk(P, TN_OUT, t->line);
            x->a = expr(P);
            expect_kind(P, K_VEND, "'}}'");
            npush(P, &v, x);
        } else if (t->k == K_BBEGIN) {
            P->pos++;
            int hit = 0;
            for (int k = 0; k < nends && !hit; k++)
                if (is_name(P, ends[k])) hit = 1;
            if (hit) {
                *which = cur(P)->s;
                P->pos++;
                break;
            }
            npush(P, &v, statement(P));
        } else {
            char bb[64];
            pfail(P, ZERO_ERR_FORMAT, t->line, "unexpected %s", tok_desc(P, bb, sizeof bb));
        }
    }
    b->kids = v.v;
    b->nk = v.n;
    P->depth--;
    return b;
}

zero_status zero_template_parse(zero_template **out, const char *src, size_t len, zero_error *err) {
    zero_error scratch;
    if (!err) err = &scratch;
    *out = NULL;
    if (len > ZERO_TEMPLATE_MAX_SOURCE) {
        snprintf(err->msg, sizeof err->msg, "chat template: %zu bytes: expected at most %llu", len,
                 (unsigned long long)ZERO_TEMPLATE_MAX_SOURCE);
        return ZERO_ERR_UNSUPPORTED;
    }
    if (memchr(src, 0, len)) {
        snprintf(err->msg, sizeof err->msg, "chat template: a NUL byte in the template");
        return ZERO_ERR_FORMAT;
    }
    zero_template *t = calloc(1, sizeof *t);
    if (!t) {
        snprintf(err->msg, sizeof err->msg, "chat template: out of memory");
        return ZERO_ERR_NOMEM;
    }
    parser *P = calloc(1, sizeof *P);
    if (!P) {
        free(t);
        snprintf(err->msg, sizeof err->msg, "chat template: out of memory");
        return ZERO_ERR_NOMEM;
    }
    P->A = &t->arena;
    P->err = err;
    t->arena.limit = UINT64_C(64) << 20;
    t->arena.jb = &P->jb;
    t->arena.err = err;
    t->arena.st = &P->st;
    if (setjmp(P->jb)) {
        zero_status st = P->st;
        zero__tp_arena_free(&t->arena);
        free(t);
        free(P);
        return st;
    }
    /* newlines normalized to \n and one trailing newline dropped (keep_trailing_newline=False) */
    char *s = zero__tp_alloc(&t->arena, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') n--;
    P->src = s;
    P->n = n;
    lex(P);
    tp_str which;
    t->root = body(P, NULL, 0, &which);
    t->has_generation = P->has_gen;
    t->arena.jb = NULL;
    free(P);
    *out = t;
    return ZERO_OK;
}

void zero_template_free(zero_template *t) {
    if (!t) return;
    zero__tp_arena_free(&t->arena);
    free(t);
}

int zero_template_has_generation(const zero_template *t) { return t && t->has_generation; }
