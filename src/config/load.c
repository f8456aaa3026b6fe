/* Loading DeepSpeed-style JSON into zero_config: parse with cJSON, walk the document through the
 * key schema (keys.c), and say exactly where and why a document is rejected. */
#include "config/internal.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* A config is a few KiB; anything this large is not one. */
#define ZC_MAX_FILE (16u << 20)
/* A DeepSpeed config holds a few dozen values: room for any, and a bound on cJSON's memory. */
#define ZC_MAX_VALUES (UINT64_C(1) << 16)

void zero__zc_init(zc_ctx *c, zero_error *err) {
    memset(c, 0, sizeof *c);
    c->err = err;
    c->fp16_on = c->bf16_on = -1;
    c->adam_w_mode = -1;
}

size_t zero__zc_push(zc_ctx *c, const char *name) {
    size_t old = c->len;
    int n = snprintf(c->path + c->len, sizeof c->path - c->len, "%s%s", c->len ? "." : "", name);
    if (n > 0) c->len += (size_t)n < sizeof c->path - c->len ? (size_t)n : sizeof c->path - c->len - 1;
    return old;
}

size_t zero__zc_push_index(zc_ctx *c, int index) {
    size_t old = c->len;
    int n = snprintf(c->path + c->len, sizeof c->path - c->len, "[%d]", index);
    if (n > 0) c->len += (size_t)n < sizeof c->path - c->len ? (size_t)n : sizeof c->path - c->len - 1;
    return old;
}

void zero__zc_pop(zc_ctx *c, size_t len) {
    c->len = len;
    c->path[len] = '\0';
}

zero_status zero__zc_fail(zc_ctx *c, zero_status st, const char *fmt, ...) {
    if (!c->err) return st;
    char msg[sizeof c->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (c->len) ZERO__ERR(c->err, "%s: %s", c->path, msg);
    else ZERO__ERR(c->err, "%s", msg);
    return st;
}

const char *zero__zc_num(char buf[40], double v) {
    snprintf(buf, 40, "%.15g", v);
    if (strtod(buf, NULL) != v) snprintf(buf, 40, "%.17g", v);
    return buf;
}

int zero__zc_is_auto(const cJSON *v) { return cJSON_IsString(v) && !strcmp(v->valuestring, "auto"); }

int zero__zc_bool(const cJSON *v, int *on) {
    if (cJSON_IsBool(v)) *on = cJSON_IsTrue(v);
    else if (cJSON_IsNumber(v) && (v->valuedouble == 0 || v->valuedouble == 1)) *on = v->valuedouble == 1;
    else return 0;
    return 1;
}

int zero__zc_lax_bool(const zc_ctx *c, const cJSON *v, int *on) {
    if (zero__zc_bool(v, on)) return 1;
    if (!c->lax || !cJSON_IsString(v)) return 0;
    /* pydantic's str -> bool (lax mode), case-insensitive */
    static const char *const no[] = {"0", "off", "f", "false", "n", "no", NULL};
    static const char *const yes[] = {"1", "on", "t", "true", "y", "yes", NULL};
    for (int i = 0; no[i]; i++) {
        if (!strcasecmp(v->valuestring, no[i])) return *on = 0, 1;
        if (!strcasecmp(v->valuestring, yes[i])) return *on = 1, 1;
    }
    return 0;
}

int zero__zc_lax_number(const zc_ctx *c, const cJSON *v, int integer, double *out) {
    if (cJSON_IsNumber(v)) return *out = v->valuedouble, 1;
    if (!c->lax || !cJSON_IsString(v)) return 0;
    const char *p = v->valuestring;
    while (isspace((unsigned char)*p)) p++;
    if (!*p) return 0;
    if (integer) { /* pydantic's str -> int: an optional sign and digits */
        const char *q = p + (*p == '+' || *p == '-');
        if (!isdigit((unsigned char)*q)) return 0;
        while (isdigit((unsigned char)*q)) q++;
        while (isspace((unsigned char)*q)) q++;
        if (*q) return 0;
    }
    char *end = NULL;
    const double x = strtod(p, &end);
    if (end == p) return 0;
    while (isspace((unsigned char)*end)) end++;
    if (*end) return 0;
    *out = x;
    return 1;
}

/* "a string ("3")", "a number (2.5)", "true", "null", "an array", "an object". */
static void describe(const cJSON *v, char *out, size_t cap) {
    char nb[40];
    if (cJSON_IsString(v)) {
        char s[48];
        size_t n = strlen(v->valuestring);
        snprintf(s, sizeof s, "%.40s%s", v->valuestring, n > 40 ? "..." : "");
        snprintf(out, cap, "a string (\"%s\")", s);
    } else if (cJSON_IsNumber(v)) snprintf(out, cap, "a number (%s)", zero__zc_num(nb, v->valuedouble));
    else if (cJSON_IsTrue(v)) snprintf(out, cap, "a boolean (true)");
    else if (cJSON_IsFalse(v)) snprintf(out, cap, "a boolean (false)");
    else if (cJSON_IsNull(v)) snprintf(out, cap, "null");
    else if (cJSON_IsArray(v)) snprintf(out, cap, "an array");
    else if (cJSON_IsObject(v)) snprintf(out, cap, "an object");
    else snprintf(out, cap, "an invalid value");
}

zero_status zero__zc_type_error(zc_ctx *c, const char *expected, const cJSON *v) {
    if (zero__zc_is_auto(v))
        return zero__zc_fail(c, ZERO_ERR_CONFIG,
                             "\"auto\" is not accepted for this key (expected %s; docs/CONFIG.md lists "
                             "the keys that take \"auto\")", expected);
    char what[96];
    describe(v, what, sizeof what);
    return zero__zc_fail(c, ZERO_ERR_CONFIG, "expected %s, found %s", expected, what);
}

static int is_integer_kind(zc_kind k) { return k == ZC_INT || k == ZC_I64; }

/* The effective range of k: its own, narrowed to what the field's C type can hold. */
static void range_of(const zc_key *k, double *lo, double *hi) {
    *lo = k->lo;
    *hi = k->hi;
    if (k->kind == ZC_INT) {
        if (*lo < INT_MIN) *lo = INT_MIN;
        if (*hi > INT_MAX) *hi = INT_MAX;
    } else if (k->kind == ZC_F32) {
        if (*hi > 3.4028234663852886e38) *hi = 3.4028234663852886e38;
        if (*lo < -3.4028234663852886e38) *lo = -3.4028234663852886e38;
    }
}

static void range_text(const zc_key *k, char *out, size_t cap) {
    double lo, hi;
    range_of(k, &lo, &hi);
    const char *what = is_integer_kind(k->kind) ? "an integer" : "a number";
    char a[40], b[40];
    int lo_inf = isinf(lo) || (k->kind == ZC_I64 && lo <= -9.2e18);
    int hi_inf = isinf(hi) || (k->kind == ZC_I64 && hi >= 9.2e18) || (k->kind == ZC_INT && hi >= INT_MAX) ||
                 (k->kind == ZC_F32 && hi >= 3.4e38);
    if (hi_inf && lo_inf) snprintf(out, cap, "%s", what);
    else if (hi_inf) snprintf(out, cap, "%s %s %s", what, (k->flags & ZC_LO_OPEN) ? ">" : ">=", zero__zc_num(a, lo));
    else snprintf(out, cap, "%s in %s%s, %s%s", what, (k->flags & ZC_LO_OPEN) ? "(" : "[", zero__zc_num(a, lo),
                  zero__zc_num(b, hi), (k->flags & ZC_HI_OPEN) ? ")" : "]");
}

zero_status zero__zc_check_number(zc_ctx *c, const zc_key *k, double v) {
    char nb[40], rt[96];
    range_text(k, rt, sizeof rt);
    double lo, hi;
    range_of(k, &lo, &hi);
    if (!isfinite(v)) return zero__zc_fail(c, ZERO_ERR_CONFIG, "%s is out of range (expected %s)", zero__zc_num(nb, v), rt);
    if (is_integer_kind(k->kind) && v != floor(v))
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%s is not an integer (expected %s)", zero__zc_num(nb, v), rt);
    /* int64 fields: 2^63 itself does not fit */
    int too_big = k->kind == ZC_I64 && (v >= 9223372036854775808.0 || v < -9223372036854775808.0);
    if (too_big || v < lo || v > hi || ((k->flags & ZC_LO_OPEN) && v == lo) || ((k->flags & ZC_HI_OPEN) && v == hi))
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%s is out of range (expected %s)", zero__zc_num(nb, v), rt);
    if (k->multiple_of > 0 && fmod(v, (double)k->multiple_of) != 0)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%s is not a multiple of %lld (expected %s)", zero__zc_num(nb, v),
                             (long long)k->multiple_of, rt);
    if ((k->flags & ZC_POW2) && (v < 1 || (((int64_t)v) & ((int64_t)v - 1)) != 0))
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%s is not a power of two (expected a power of two, %s)",
                             zero__zc_num(nb, v), rt);
    return ZERO_OK;
}

static void store_number(const zc_key *k, double v, zero_config *cfg) {
    char *f = (char *)cfg + k->off;
    switch (k->kind) {
    case ZC_BOOL:
    case ZC_INT: *(int *)f = (int)v; break;
    case ZC_I64: *(int64_t *)f = (int64_t)v; break;
    case ZC_F32: *(float *)f = (float)v; break;
    case ZC_F64: *(double *)f = v; break;
    default: break;
    }
}

static zero_status load_value_inner(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg);

static zero_status load_value(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    zero_status st = load_value_inner(c, k, v, cfg);
    if (st == ZERO_OK && k->set_bit) cfg->set_fields |= k->set_bit;
    return st;
}

static zero_status load_value_inner(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    if (cJSON_IsNull(v) && (k->flags & ZC_NULL_OK)) return ZERO_OK;
    if ((k->flags & ZC_AUTO) && zero__zc_is_auto(v)) {
        cfg->auto_fields |= k->auto_bit | k->auto_group;
        return ZERO_OK;
    }
    if (k->load) return k->load(c, k, v, cfg);
    char nb[40], nb2[40];
    switch (k->kind) {
    case ZC_OBJECT: {
        if (!cJSON_IsObject(v)) return zero__zc_type_error(c, "an object", v);
        const int lax = c->lax;
        if (k->flags & ZC_PYDANTIC) c->lax = 1;
        const zero_status st = zero__zc_walk(c, k->children, v, cfg);
        c->lax = lax;
        return st;
    }
    case ZC_BOOL: {
        int on;
        if (!zero__zc_lax_bool(c, v, &on)) return zero__zc_type_error(c, "a boolean (true or false)", v);
        /* off_value says which of false (0) and true (1) is the accepted one */
        if ((k->flags & ZC_OFF_ONLY) && on != (k->off_value != 0))
            return zero__zc_fail(c, ZERO_ERR_UNSUPPORTED, "%s is not supported yet (only %s is accepted)%s%s",
                                 on ? "true" : "false", on ? "false" : "true", k->hint ? "; " : "",
                                 k->hint ? k->hint : "");
        if (!(k->flags & (ZC_NO_EFFECT | ZC_OFF_ONLY))) store_number(k, on, cfg);
        return ZERO_OK;
    }
    case ZC_INT:
    case ZC_I64:
    case ZC_F32:
    case ZC_F64: {
        double x;
        if (!zero__zc_lax_number(c, v, is_integer_kind(k->kind), &x))
            return zero__zc_type_error(c, is_integer_kind(k->kind) ? "an integer" : "a number", v);
        zero_status st = zero__zc_check_number(c, k, x);
        if (st) return st;
        if ((k->flags & ZC_OFF_ONLY) && x != k->off_value)
            return zero__zc_fail(c, ZERO_ERR_UNSUPPORTED, "%s is not supported yet (only %s is accepted)%s%s",
                                 zero__zc_num(nb, x), zero__zc_num(nb2, k->off_value), k->hint ? "; " : "",
                                 k->hint ? k->hint : "");
        if (!(k->flags & (ZC_NO_EFFECT | ZC_OFF_ONLY))) store_number(k, x, cfg);
        return ZERO_OK;
    }
    case ZC_CUSTOM: break;
    }
    return zero__zc_fail(c, ZERO_ERR_INTERNAL, "key has no loader");
}

static zero_status unknown_key(zc_ctx *c, const zc_key *keys, const char *name) {
    char full[sizeof c->path];
    size_t old = zero__zc_push(c, name);
    snprintf(full, sizeof full, "%s", c->path);
    zero__zc_pop(c, old);
    size_t save = c->len;
    c->len = 0; /* the whole message carries the path itself */
    zero_status st;
    const zc_key *near = zero__zc_nearest(name, keys, c->type_bit);
    char where[sizeof c->path];
    if (near) {
        st = zero__zc_fail(c, ZERO_ERR_CONFIG, "unknown key \"%s\": did you mean \"%s%s%s\"?", full, c->path,
                           save ? "." : "", near->name);
    } else if (zero__zc_find_elsewhere(name, keys, where, sizeof where)) {
        st = zero__zc_fail(c, ZERO_ERR_CONFIG, "unknown key \"%s\": did you mean \"%s\"?", full, where);
    } else {
        st = zero__zc_fail(c, ZERO_ERR_CONFIG,
                           "unknown key \"%s\" (no known key at this level is close; docs/CONFIG.md lists them)", full);
    }
    c->len = save;
    return st;
}

static zero_status wrong_type_key(zc_ctx *c, const zc_key *k) {
    char takers[128] = "";
    size_t n = 0;
    for (int t = 0; t < c->type_count && n < sizeof takers; t++) {
        if (!(k->types & (1u << t))) continue;
        int w = snprintf(takers + n, sizeof takers - n, "%s%s", n ? ", " : "", c->type_names[t]);
        if (w > 0) n += (size_t)w;
    }
    const char *cur = "this type";
    for (int t = 0; t < c->type_count; t++)
        if (c->type_bit == (1u << t)) cur = c->type_names[t];
    return zero__zc_fail(c, ZERO_ERR_CONFIG, "not a parameter of %s (only %s take%s it)", cur, takers,
                         strchr(takers, ',') ? "" : "s");
}

/* Appends c->err's message to the document's problems. */
static zero_status note_problem(zc_ctx *c, zero_status st) {
    const size_t n = strlen(c->err->msg);
    if (c->problems_len + n + 2 > c->problems_cap) {
        const size_t cap = (c->problems_len + n + 2) * 2;
        char *p = realloc(c->problems, cap);
        if (!p) {
            ZERO__ERR(c->err, "config: out of memory listing its problems");
            return ZERO_ERR_NOMEM;
        }
        c->problems = p;
        c->problems_cap = cap;
    }
    memcpy(c->problems + c->problems_len, c->err->msg, n);
    c->problems_len += n;
    c->problems[c->problems_len++] = '\n';
    c->problems[c->problems_len] = '\0';
    if (!c->nproblems++) c->first_problem = st;
    return ZERO_OK;
}

zero_status zero__zc_walk(zc_ctx *c, const zc_key *keys, const cJSON *obj, zero_config *cfg) {
    zero_status first = ZERO_OK;
    for (const cJSON *it = obj->child; it; it = it->next) {
        const char *name = it->string ? it->string : ""; /* no key twice: zero_json_check refused that */
        const zc_key *k = keys;
        while (k->name && strcmp(k->name, name)) k++;
        const int noted = c->nproblems;
        zero_status st;
        if (!k->name) {
            st = unknown_key(c, keys, name);
        } else {
            size_t old = zero__zc_push(c, name);
            if (k->types && c->type_bit && !(k->types & c->type_bit)) st = wrong_type_key(c, k);
            else st = load_value(c, k, it, cfg);
            zero__zc_pop(c, old);
        }
        if (st == ZERO_OK) continue;
        if (st != ZERO_ERR_CONFIG && st != ZERO_ERR_UNSUPPORTED) return st;
        if (c->nproblems == noted) { /* a walk inside the value noted its own */
            zero_status ns = note_problem(c, st);
            if (ns) return ns;
        }
        if (!first) first = st;
    }
    return first;
}

/* Line, column (1-based) and byte offset of `at` (where cJSON stopped: at the offending byte or
 * just after it) in text[0, len), with the text around it so the reader sees the mistake. */
static zero_status parse_error(zero_error *err, const char *what, const char *text, size_t len, const char *at) {
    size_t off = at && at >= text && at <= text + len ? (size_t)(at - text) : len;
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            line++;
            line_start = i + 1;
        }
    }
    size_t col = off - line_start + 1;
    /* context: up to 24 bytes before the stop (same line) and up to 16 after */
    size_t from = off - line_start > 24 ? off - 24 : line_start;
    char near[48];
    size_t n = 0;
    for (size_t i = from; i < len && n < 40 && (i < off || text[i] != '\n'); i++) {
        if (i >= off + 16) break;
        near[n++] = (text[i] >= 32 && text[i] < 127) ? text[i] : ' ';
    }
    near[n] = '\0';
    if (err) {
        if (off < len && text[off] == '\0')
            ZERO__ERR(err, "%s: malformed JSON at line %zu, column %zu (byte %zu): a NUL byte", what, line, col, off);
        else if (off >= len)
            ZERO__ERR(err, "%s: malformed JSON at line %zu, column %zu (byte %zu): the input ends after \"%s\"", what,
                      line, col, off, near);
        else
            ZERO__ERR(err, "%s: malformed JSON at line %zu, column %zu (byte %zu), near \"%s\"", what, line, col, off,
                      near);
    }
    return ZERO_ERR_CONFIG;
}

/* The document's problems into err: one as it is; several as "N problems: (1) A; (2) B; ..." (a
 * message may hold "; " itself) with as many as fit and how many did not; all of them, one a
 * line, into *all when asked. */
static zero_status report_problems(zc_ctx *c, zero_error *err, char **all) {
    if (all) {
        *all = malloc(c->problems_len + 1);
        if (!*all) {
            if (err) ZERO__ERR(err, "config: out of memory listing its problems");
            return ZERO_ERR_NOMEM;
        }
        memcpy(*all, c->problems, c->problems_len + 1);
    }
    if (!err) return c->first_problem;
    char *msg = err->msg;
    const size_t cap = sizeof err->msg;
    if (c->nproblems == 1) {
        snprintf(msg, cap, "%.*s", (int)(c->problems_len - 1), c->problems);
        return c->first_problem;
    }
    size_t n = (size_t)snprintf(msg, cap, "%d problems: ", c->nproblems);
    int shown = 0;
    for (const char *p = c->problems; *p; shown++) {
        const size_t k = strcspn(p, "\n");
        char more[64];
        const int left = c->nproblems - shown - 1;
        char head[24];
        const size_t h = (size_t)snprintf(head, sizeof head, "%s(%d) ", shown ? "; " : "", shown + 1);
        snprintf(more, sizeof more, " (and %d more)", left);
        /* the last one needs no room after it; any other keeps room for " (and K more)" */
        size_t k_fit = k;
        if (n + h + k + (left ? strlen(more) : 0) >= cap) {
            if (shown) {
                snprintf(msg + n, cap - n, " (and %d more)", c->nproblems - shown);
                break;
            }
            k_fit = cap - 1 - n - h - strlen(more); /* the first one, cut: room for the count after it */
        }
        n += (size_t)snprintf(msg + n, cap - n, "%s%.*s", head, (int)k_fit, p);
        p += k + (p[k] == '\n');
    }
    return c->first_problem;
}

/* text[len] must be '\0' (cJSON's check for trailing content reads it). */
static zero_status load_text(zero_config *cfg, const char *text, size_t len, const char *what, zero_error *err,
                             char **problems) {
    if (problems) *problems = NULL;
    const char *nul = memchr(text, '\0', len);
    if (nul) return parse_error(err, what, text, len, nul);
    /* a UTF-8 byte-order mark is not JSON, but editors write it */
    size_t skip = len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3) ? 3 : 0;
    zero_error je;
    if (zero_json_check(text + skip, len - skip, ZC_MAX_VALUES, ZERO_JSON_MAX_DEPTH, &je) != ZERO_OK) {
        if (err) ZERO__ERR(err, "%s: %s", what, je.msg);
        return ZERO_ERR_CONFIG;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text + skip, len - skip + 1, &end, 1);
    if (!root) {
        /* cJSON stops without a position when it runs out of memory; it reports one otherwise */
        return parse_error(err, what, text, len, end ? end : cJSON_GetErrorPtr());
    }
    zc_ctx c;
    zero_error one; /* each problem's message, before it joins the list */
    zero__zc_init(&c, &one);
    zero_status st;
    if (!cJSON_IsObject(root)) {
        char nb[64];
        const char *found = cJSON_IsArray(root) ? "an array" : cJSON_IsString(root) ? "a string"
                          : cJSON_IsNumber(root) ? "a number" : cJSON_IsNull(root) ? "null" : "a boolean";
        snprintf(nb, sizeof nb, "%s", found);
        if (err) ZERO__ERR(err, "%s: expected a JSON object at the top level, found %s", what, nb);
        st = ZERO_ERR_CONFIG;
    } else {
        zero_config tmp = *cfg; /* committed only when the whole document is good */
        c.root = root;
        st = zero__zc_walk(&c, zero__config_schema(), root, &tmp);
        if (!st) st = zero__config_finish(&c, &tmp);
        if (!st) *cfg = tmp;
        else if (c.nproblems) st = report_problems(&c, err, problems);
        else if (err) ZERO__ERR(err, "%s", one.msg);
    }
    free(c.problems);
    cJSON_Delete(root);
    return st;
}

zero_status zero_config_load_json_string(zero_config *cfg, const char *json, zero_error *err) {
    if (!cfg || !json) {
        if (err) ZERO__ERR(err, "zero_config_load_json_string: %s is NULL", !cfg ? "cfg" : "json");
        return ZERO_ERR_INVALID_ARG;
    }
    return load_text(cfg, json, strlen(json), "config", err, NULL);
}

zero_status zero_config_load_json_file(zero_config *cfg, const char *path, zero_error *err) {
    return zero_config_load_json_file_report(cfg, path, NULL, err);
}

zero_status zero_config_load_json_file_report(zero_config *cfg, const char *path, char **problems, zero_error *err) {
    if (problems) *problems = NULL;
    if (!cfg || !path) {
        if (err) ZERO__ERR(err, "zero_config_load_json_file: %s is NULL", !cfg ? "cfg" : "path");
        return ZERO_ERR_INVALID_ARG;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err) ZERO__ERR(err, "cannot open config \"%s\": %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    zero_status st = ZERO_OK;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        st = ZERO_ERR_NOMEM;
        if (err) ZERO__ERR(err, "config \"%s\": out of memory", path);
        goto fail_close;
    }
    for (;;) {
        if (len + 1 >= cap) {
            if (cap >= ZC_MAX_FILE) {
                st = ZERO_ERR_CONFIG;
                if (err) ZERO__ERR(err, "config \"%s\": larger than %u bytes: not a config file", path, ZC_MAX_FILE);
                goto fail_buf;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                st = ZERO_ERR_NOMEM;
                if (err) ZERO__ERR(err, "config \"%s\": out of memory", path);
                goto fail_buf;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - 1 - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                st = ZERO_ERR_IO;
                if (err) ZERO__ERR(err, "cannot read config \"%s\": %s", path, strerror(errno ? errno : EIO));
                goto fail_buf;
            }
            break;
        }
    }
    buf[len] = '\0';
    st = load_text(cfg, buf, len, path, err, problems);
fail_buf:
    free(buf);
fail_close:
    fclose(f);
    return st;
}
