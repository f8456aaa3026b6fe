/* The checks every reader of a file zero did not write shares (docs/SECURITY.md): plain names
 * inside a directory, whole-file reads bounded before they allocate, JSON size, depth and grammar. */
#define _GNU_SOURCE /* O_NOCTTY, realpath */
#include "common/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_MAX_BYTES 255

/* 1 when path p lies strictly under directory root (both canonical, without a trailing '/'). */
static int under(const char *p, const char *root) {
    const size_t n = strlen(root);
    if (n == 1 && root[0] == '/') return p[0] == '/' && p[1] != 0;
    return !strncmp(p, root, n) && p[n] == '/' && p[n + 1] != 0;
}

/* The Hugging Face hub cache keeps a model as R/snapshots/REV/NAME -> ../../blobs/HASH: for a
 * canonical dir R/snapshots/REV, writes R/blobs into buf (0), else -1. */
static int hub_blobs(const char *dir, char *buf, size_t cap) {
    const char *rev = strrchr(dir, '/');
    if (!rev || rev == dir) return -1;
    const size_t at = (size_t)(rev - dir); /* dir[0, at) = R/snapshots */
    if (at < 10 || strncmp(dir + at - 10, "/snapshots", 10)) return -1;
    const size_t r = at - 10; /* dir[0, r) = R */
    if (r == 0 || r + 7 > cap - 1) return -1;
    memcpy(buf, dir, r);
    memcpy(buf + r, "/blobs", 7);
    return 0;
}

zero_status zero_path_in_dir(const char *dir, const char *name, char *out, size_t cap, zero_error *err) {
    return zero__path_in_dir_kind(dir, name, 0, out, cap, err);
}

zero_status zero__path_in_dir_kind(const char *dir, const char *name, int want_dir, char *out, size_t cap, zero_error *err) {
    if (cap) out[0] = 0;
    if (!dir || !*dir || !name || !out) {
        if (err) ZERO__ERR(err, "zero_path_in_dir: expected a directory, a name and a buffer");
        return ZERO_ERR_INVALID_ARG;
    }
    const size_t n = strlen(name);
    int plain = n > 0 && n <= NAME_MAX_BYTES && strcmp(name, ".") && strcmp(name, "..");
    for (size_t i = 0; plain && i < n; i++) plain = name[i] != '/' && (unsigned char)name[i] >= 0x20 && name[i] != 0x7f;
    if (!plain) {
        if (err)
            ZERO__ERR(err, "%.200s: file name '%.*s%s': expected a plain file name inside the directory (no '/', no "
                      "'..', not absolute, no control characters, at most %d bytes)",
                      dir, (int)(n < 100 ? n : 100), name, n > 100 ? "..." : "", NAME_MAX_BYTES);
        return ZERO_ERR_FORMAT;
    }
    if ((size_t)snprintf(out, cap, "%s/%s", dir, name) >= cap) {
        if (cap) out[0] = 0;
        if (err) ZERO__ERR(err, "%.200s/%.100s: path too long", dir, name);
        return ZERO_ERR_INVALID_ARG;
    }
    struct stat sb;
    if (lstat(out, &sb) != 0) {
        if (errno == ENOENT) return ZERO_OK;
        if (err) ZERO__ERR(err, "%.400s: %s", out, strerror(errno));
        return ZERO_ERR_IO;
    }
    if (S_ISLNK(sb.st_mode)) {
        char *rd = realpath(dir, NULL), *rf = realpath(out, NULL);
        zero_status s = ZERO_OK;
        char blobs[PATH_MAX];
        if (!rd || !rf) {
            if (err) ZERO__ERR(err, "%.400s: a symbolic link that cannot be followed: %s", out, strerror(errno));
            s = ZERO_ERR_IO;
        } else if (!under(rf, rd) && !(hub_blobs(rd, blobs, sizeof blobs) == 0 && under(rf, blobs))) {
            if (err)
                ZERO__ERR(err, "%.200s is a symbolic link to %.200s, outside %.100s: refused (the files a directory "
                          "names stay inside it)", out, rf, rd);
            s = ZERO_ERR_FORMAT;
        } else if (stat(rf, &sb) != 0) {
            if (err) ZERO__ERR(err, "%.400s: %s", rf, strerror(errno));
            s = ZERO_ERR_IO;
        }
        free(rd);
        free(rf);
        if (s != ZERO_OK) return s;
    }
    if (want_dir ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode)) {
        if (err) ZERO__ERR(err, "%.400s: not a %s", out, want_dir ? "directory" : "regular file");
        return ZERO_ERR_FORMAT;
    }
    return ZERO_OK;
}

zero_status zero_read_file(const char *path, uint64_t max_bytes, char **text, size_t *len, zero_error *err) {
    if (text) *text = NULL;
    if (len) *len = 0;
    if (!path || !text) {
        if (err) ZERO__ERR(err, "zero_read_file: expected a path");
        return ZERO_ERR_INVALID_ARG;
    }
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below) */
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (err) ZERO__ERR(err, "cannot open %.400s: %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    struct stat sb;
    zero_status s = ZERO_OK;
    char *buf = NULL;
    size_t got = 0;
    if (fstat(fd, &sb) != 0) {
        if (err) ZERO__ERR(err, "cannot read %.400s: %s", path, strerror(errno));
        s = ZERO_ERR_IO;
    } else if (!S_ISREG(sb.st_mode)) {
        if (err) ZERO__ERR(err, "%.400s: not a regular file", path);
        s = ZERO_ERR_FORMAT;
    } else if ((uint64_t)sb.st_size > max_bytes || (uint64_t)sb.st_size >= SIZE_MAX) {
        if (err)
            ZERO__ERR(err, "%.400s: %llu bytes, more than the %llu this kind of file may have: refused before reading",
                      path, (unsigned long long)sb.st_size, (unsigned long long)max_bytes);
        s = ZERO_ERR_FORMAT;
    } else if (!(buf = malloc((size_t)sb.st_size + 1))) {
        if (err) ZERO__ERR(err, "%.400s: out of memory for %llu bytes", path, (unsigned long long)sb.st_size);
        s = ZERO_ERR_NOMEM;
    } else {
        /* at most the size fstat gave: a file that grows meanwhile is read up to it */
        const size_t want = (size_t)sb.st_size;
        while (got < want) {
            const ssize_t r = read(fd, buf + got, want - got);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) {
                if (err) ZERO__ERR(err, "cannot read %.400s: %s", path, strerror(errno));
                s = ZERO_ERR_IO;
                break;
            }
            if (r == 0) break;
            got += (size_t)r;
        }
    }
    close(fd);
    if (s != ZERO_OK) {
        free(buf);
        return s;
    }
    buf[got] = 0;
    *text = buf;
    if (len) *len = got;
    return ZERO_OK;
}

/* ---- the strict JSON grammar (RFC 8259) a reader's parser is then given: one value, only
 * whitespace after it, strings of UTF-8 without raw control characters, no key twice in an
 * object. Every reader of an untrusted JSON file calls zero_json_check, so a file another tool
 * would refuse, or read otherwise (Python's json keeps the last of two equal keys, cJSON the
 * first; trailing bytes and invalid UTF-8 are errors there), is refused here in one place.
 * zero_json_check_last is the one exception, for the files that Python's json and serde_json
 * read (Hugging Face's): a key twice is theirs to take, the last one, and the text the parser is
 * given has the earlier ones blanked out. */

typedef struct {
    size_t raw;      /* offset of the key's opening quote in the text */
    size_t off;      /* its decoded bytes: in the text (no escapes) or in the arena */
    uint32_t len;
    uint32_t arena;
    size_t end;      /* just past the member: its value, and the ',' after it when there is one */
} jkey;

typedef struct {
    size_t from, to; /* a member [from, to) that a later one of the same key replaces */
} jspan;

typedef struct {
    const char *t;
    size_t n, i;
    jkey *keys;
    size_t nkeys, capkeys;
    char *arena;
    size_t narena, caparena;
    jspan *spans; /* with last_key: the members to blank, else NULL and a key twice is refused */
    size_t nspans, capspans;
    int last_key;
    zero_error *err;
    zero_status st;
} jscan;

static int jfail(jscan *p, size_t at, const char *what, ...) __attribute__((format(printf, 3, 4)));
static int jfail(jscan *p, size_t at, const char *what, ...) {
    if (p->st != ZERO_OK) return -1;
    p->st = ZERO_ERR_FORMAT;
    if (!p->err) return -1;
    size_t line = 1, start = 0;
    if (at > p->n) at = p->n;
    for (size_t k = 0; k < at; k++)
        if (p->t[k] == '\n') line++, start = k + 1;
    char why[200];
    va_list ap;
    va_start(ap, what);
    vsnprintf(why, sizeof why, what, ap);
    va_end(ap);
    /* the text around it on its line, up to 24 bytes before and 16 after, so the reader sees it */
    char near[48];
    size_t nn = 0;
    for (size_t k = at - start > 24 ? at - 24 : start; k < p->n && k < at + 16 && (k < at || p->t[k] != '\n'); k++)
        near[nn++] = p->t[k] >= 32 && p->t[k] < 127 ? p->t[k] : ' ';
    near[nn] = 0;
    char where[64] = ""; /* a text of one line (a JSONL example) has no line number to give */
    if (memchr(p->t, '\n', p->n)) snprintf(where, sizeof where, "line %zu, ", line);
    ZERO__ERR(p->err, "not valid JSON at %scolumn %zu (byte %zu): %s%s%s%s", where, at - start + 1, at, why,
              nn ? ", near \"" : "", near, nn ? "\"" : "");
    return -1;
}

static int jnomem(jscan *p) {
    if (p->st == ZERO_OK) {
        p->st = ZERO_ERR_NOMEM;
        if (p->err) ZERO__ERR(p->err, "out of memory checking a JSON text");
    }
    return -1;
}

static void jws(jscan *p) {
    while (p->i < p->n && (p->t[p->i] == ' ' || p->t[p->i] == '\t' || p->t[p->i] == '\n' || p->t[p->i] == '\r'))
        p->i++;
}

/* The length of the UTF-8 sequence at s (at most n bytes), 0 when it is not one (overlong
 * forms, UTF-16 surrogates and code points past U+10FFFF are not). */
static size_t utf8_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t k;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) k = 2;
    else if (c >= 0xE0 && c <= 0xEF) k = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) k = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (n < k || s[1] < lo || s[1] > hi) return 0;
    for (size_t j = 2; j < k; j++)
        if (s[j] < 0x80 || s[j] > 0xBF) return 0;
    return k;
}

static int hex4(const char *s, unsigned *v) {
    *v = 0;
    for (int j = 0; j < 4; j++) {
        const char c = s[j];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v << 4 | (unsigned)d;
    }
    return 0;
}

static int jput(jscan *p, const char *b, size_t k) {
    if (p->narena + k > p->caparena) {
        size_t cap = p->caparena ? 2 * p->caparena : 4096;
        while (cap < p->narena + k) cap *= 2;
        char *a = realloc(p->arena, cap);
        if (!a) return jnomem(p);
        p->arena = a, p->caparena = cap;
    }
    memcpy(p->arena + p->narena, b, k);
    p->narena += k;
    return 0;
}

/* A string at p->i (its quote); a key is recorded with its decoded bytes. */
static int jstring(jscan *p, int key) {
    const size_t q = p->i++;
    int escaped = 0;
    for (;;) {
        if (p->i >= p->n) return jfail(p, q, "a string that does not end");
        const unsigned char c = (unsigned char)p->t[p->i];
        if (c == '"') break;
        if (c < 0x20) return jfail(p, p->i, "a control character (0x%02x) inside a string: expected it escaped", c);
        if (c == '\\') {
            escaped = 1;
            const size_t at = p->i;
            const char e = p->i + 1 < p->n ? p->t[p->i + 1] : 0;
            if (e && strchr("\"\\/bfnrt", e)) {
                p->i += 2;
                continue;
            }
            unsigned u, u2;
            if (e != 'u' || p->i + 6 > p->n || hex4(p->t + p->i + 2, &u))
                return jfail(p, at, "an escape that is not \\\", \\\\, \\/, \\b, \\f, \\n, \\r, \\t or \\u and 4 hex digits");
            p->i += 6;
            if (!u) /* the parser's strings end at a NUL: what follows would be dropped without a word */
                return jfail(p, at, "\\u0000 (a NUL character) inside a string is not supported");
            /* a lone surrogate is no character: serde_json (tokenizers) refuses it, Python's json reads
             * it into a str that cannot be written as UTF-8; cJSON cannot hold it */
            if (u >= 0xDC00 && u <= 0xDFFF)
                return jfail(p, at, "\\u%04X, a UTF-16 low surrogate without its high one, is not supported (it is no "
                             "character)", u);
            if (u >= 0xD800 && u <= 0xDBFF) {
                if (p->i + 6 > p->n || p->t[p->i] != '\\' || p->t[p->i + 1] != 'u' || hex4(p->t + p->i + 2, &u2) ||
                    u2 < 0xDC00 || u2 > 0xDFFF)
                    return jfail(p, at, "\\u%04X, a UTF-16 high surrogate without its low one, is not supported (it is "
                                 "no character)", u);
                p->i += 6;
            }
            continue;
        }
        if (c < 0x80) {
            p->i++;
            continue;
        }
        const size_t k = utf8_len((const unsigned char *)p->t + p->i, p->n - p->i);
        if (!k) return jfail(p, p->i, "byte 0x%02x inside a string is not UTF-8", c);
        p->i += k;
    }
    const size_t end = p->i++;
    if (!key) return 0;
    if (p->nkeys == p->capkeys) {
        const size_t cap = p->capkeys ? 2 * p->capkeys : 64;
        jkey *k = realloc(p->keys, cap * sizeof *k);
        if (!k) return jnomem(p);
        p->keys = k, p->capkeys = cap;
    }
    jkey *k = &p->keys[p->nkeys];
    k->raw = q;
    if (!escaped) {
        k->off = q + 1, k->len = (uint32_t)(end - q - 1), k->arena = 0;
    } else { /* decoded, so that "\u0041" and "A" are the same key */
        const size_t a0 = p->narena;
        for (size_t j = q + 1; j < end;) {
            if (p->t[j] != '\\') {
                if (jput(p, p->t + j, 1)) return -1;
                j++;
                continue;
            }
            const char e = p->t[j + 1];
            if (e != 'u') {
                const char *map = "\"\"\\\\//b\bf\fn\nr\rt\t";
                const char ch = strchr(map, e)[1];
                if (jput(p, &ch, 1)) return -1;
                j += 2;
                continue;
            }
            unsigned u, u2;
            hex4(p->t + j + 2, &u);
            j += 6;
            if (u >= 0xD800 && u <= 0xDBFF) {
                hex4(p->t + j + 2, &u2);
                u = 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00);
                j += 6;
            }
            char b[4];
            size_t nb;
            if (u < 0x80) b[0] = (char)u, nb = 1;
            else if (u < 0x800) b[0] = (char)(0xC0 | u >> 6), b[1] = (char)(0x80 | (u & 63)), nb = 2;
            else if (u < 0x10000)
                b[0] = (char)(0xE0 | u >> 12), b[1] = (char)(0x80 | (u >> 6 & 63)), b[2] = (char)(0x80 | (u & 63)), nb = 3;
            else
                b[0] = (char)(0xF0 | u >> 18), b[1] = (char)(0x80 | (u >> 12 & 63)), b[2] = (char)(0x80 | (u >> 6 & 63)),
                b[3] = (char)(0x80 | (u & 63)), nb = 4;
            if (jput(p, b, nb)) return -1;
        }
        k->off = a0, k->len = (uint32_t)(p->narena - a0), k->arena = 1;
    }
    p->nkeys++;
    return 0;
}

static const char *jkey_bytes(const jscan *p, const jkey *k) { return (k->arena ? p->arena : p->t) + k->off; }

static int jkey_cmp(const void *a, const void *b, void *ctx) {
    const jscan *p = ctx;
    const jkey *x = a, *y = b;
    const uint32_t n = x->len < y->len ? x->len : y->len;
    const int c = memcmp(jkey_bytes(p, x), jkey_bytes(p, y), n);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->raw > y->raw) - (x->raw < y->raw);
}

static int jnumber(jscan *p) {
    const size_t at = p->i;
    if (p->t[p->i] == '-') p->i++;
#define JDIGIT (p->i < p->n && p->t[p->i] >= '0' && p->t[p->i] <= '9')
    if (p->i < p->n && p->t[p->i] == '0') p->i++;
    else if (JDIGIT) while (JDIGIT) p->i++;
    else return jfail(p, at, "a number without digits");
    if (p->i < p->n && p->t[p->i] == '.') {
        p->i++;
        if (!JDIGIT) return jfail(p, at, "a number without digits after its '.'");
        while (JDIGIT) p->i++;
    }
    if (p->i < p->n && (p->t[p->i] == 'e' || p->t[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->t[p->i] == '+' || p->t[p->i] == '-')) p->i++;
        if (!JDIGIT) return jfail(p, at, "a number without digits in its exponent");
        while (JDIGIT) p->i++;
    }
    if (JDIGIT) return jfail(p, at, "a number with a leading zero");
#undef JDIGIT
    return 0;
}

static int jvalue(jscan *p, int depth);

static int jobject(jscan *p, int depth) {
    const size_t k0 = p->nkeys, a0 = p->narena;
    p->i++;
    jws(p);
    if (p->i < p->n && p->t[p->i] == '}') {
        p->i++;
        return 0;
    }
    for (;;) {
        jws(p);
        if (p->i >= p->n || p->t[p->i] != '"') return jfail(p, p->i, "expected a key (a string)");
        if (jstring(p, 1)) return -1;
        const size_t member = p->nkeys - 1;
        jws(p);
        if (p->i >= p->n || p->t[p->i] != ':') return jfail(p, p->i, "expected ':' after the key");
        p->i++;
        if (jvalue(p, depth + 1)) return -1;
        jws(p);
        p->keys[member].end = p->i;
        if (p->i < p->n && p->t[p->i] == ',') {
            p->keys[member].end = ++p->i;
            continue;
        }
        if (p->i < p->n && p->t[p->i] == '}') break;
        return jfail(p, p->i, "expected ',' or '}' in an object");
    }
    p->i++;
    if (p->nkeys - k0 > 1) {
        qsort_r(p->keys + k0, p->nkeys - k0, sizeof *p->keys, jkey_cmp, p);
        for (size_t j = k0 + 1; j < p->nkeys; j++) {
            const jkey *x = &p->keys[j - 1], *y = &p->keys[j];
            if (x->len == y->len && !memcmp(jkey_bytes(p, x), jkey_bytes(p, y), x->len)) {
                if (p->last_key) { /* x comes before y (equal keys sort by position), and a ',' follows it */
                    if (p->nspans == p->capspans) {
                        const size_t cap = p->capspans ? 2 * p->capspans : 16;
                        jspan *sp = realloc(p->spans, cap * sizeof *sp);
                        if (!sp) return jnomem(p);
                        p->spans = sp, p->capspans = cap;
                    }
                    p->spans[p->nspans++] = (jspan){x->raw, x->end};
                    continue;
                }
                const size_t rawlen = strcspn(p->t + y->raw + 1, "\"") + 2; /* to the first quote: enough to name it */
                return jfail(p, y->raw, "the key %.*s%s appears twice in one object (first at byte %zu)",
                             (int)(rawlen < 80 ? rawlen : 80), p->t + y->raw, rawlen > 80 ? "..." : "", x->raw);
            }
        }
    }
    p->nkeys = k0, p->narena = a0;
    return 0;
}

static int jvalue(jscan *p, int depth) {
    jws(p);
    if (p->i >= p->n) return jfail(p, p->i, "the text ends where a value was expected");
    if (depth > ZERO_JSON_MAX_DEPTH) return jfail(p, p->i, "nested more than %d levels", ZERO_JSON_MAX_DEPTH);
    const char c = p->t[p->i];
    if (c == '{') return jobject(p, depth);
    if (c == '[') {
        p->i++;
        jws(p);
        if (p->i < p->n && p->t[p->i] == ']') {
            p->i++;
            return 0;
        }
        for (;;) {
            if (jvalue(p, depth + 1)) return -1;
            jws(p);
            if (p->i < p->n && p->t[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->t[p->i] == ']') break;
            return jfail(p, p->i, "expected ',' or ']' in an array");
        }
        p->i++;
        return 0;
    }
    if (c == '"') return jstring(p, 0);
    /* Python's json reads these (and writes them: json.dumps(float("nan"))); RFC 8259 has no such
     * number, serde_json and cJSON refuse them */
    static const char *const nonfinite[] = {"NaN", "Infinity", "-Infinity"};
    for (int j = 0; j < 3; j++) {
        const size_t k = strlen(nonfinite[j]);
        if (p->n - p->i >= k && !memcmp(p->t + p->i, nonfinite[j], k))
            return jfail(p, p->i, "%s is not JSON (RFC 8259 has no such number) and is not supported", nonfinite[j]);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return jnumber(p);
    static const char *const lit[] = {"true", "false", "null"};
    for (int j = 0; j < 3; j++) {
        const size_t k = strlen(lit[j]);
        if (p->n - p->i >= k && !memcmp(p->t + p->i, lit[j], k)) {
            p->i += k;
            return 0;
        }
    }
    if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f)
        return jfail(p, p->i, "'%c' where a value was expected", c);
    return jfail(p, p->i, "byte 0x%02x where a value was expected", (unsigned char)c);
}

static zero_status json_check(const char *text, size_t len, uint64_t max_values, int max_depth, char **last,
                              zero_error *err) {
    if (last) *last = NULL;
    if (!text && len) {
        if (err) ZERO__ERR(err, "%s: no text", last ? "zero_json_check_last" : "zero_json_check");
        return ZERO_ERR_INVALID_ARG;
    }
    /* First the bounds, without allocating: values <= 1 + brackets + commas (each value but the
     * first of a container follows a comma). */
    uint64_t values = 1;
    int depth = 0;
    for (size_t i = 0; i < len; i++) {
        const char c = text[i];
        if (c == '"') {
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\') i++;
        } else if (c == '{' || c == '[') {
            values++;
            if (++depth > max_depth) {
                if (err) ZERO__ERR(err, "JSON nested more than %d levels deep (at byte %zu) is not supported", max_depth, i);
                return ZERO_ERR_FORMAT;
            }
        } else if (c == '}' || c == ']') {
            if (depth > 0) depth--;
        } else if (c == ',') {
            values++;
        } else {
            continue;
        }
        if (values > max_values) {
            if (err) ZERO__ERR(err, "JSON with more than %llu values (at byte %zu)", (unsigned long long)max_values, i);
            return ZERO_ERR_FORMAT;
        }
    }
    /* Then the grammar; its keys (at most the values counted) are what it allocates. */
    jscan p = {.t = text, .n = len, .err = err, .last_key = last != NULL};
    if (len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3)) {
        jfail(&p, 0, "a UTF-8 byte order mark (EF BB BF) before the value: expected the JSON text itself (Python's "
                     "json and serde_json refuse it too; save the file without it)");
    } else if (!jvalue(&p, 0)) {
        jws(&p);
        if (p.i < p.n) jfail(&p, p.i, "bytes after the JSON value");
    }
    if (p.st == ZERO_OK && p.nspans) {
        /* each replaced member becomes blanks (its line breaks kept, so that lines and bytes still
         * point where they did); what is left is JSON holding each key once, the last */
        char *t = malloc(len + 1);
        if (!t) {
            jnomem(&p);
        } else {
            memcpy(t, text, len);
            t[len] = 0;
            for (size_t k = 0; k < p.nspans; k++)
                for (size_t j = p.spans[k].from; j < p.spans[k].to; j++)
                    if (t[j] != '\n') t[j] = ' ';
            *last = t;
        }
    }
    free(p.keys);
    free(p.arena);
    free(p.spans);
    return p.st;
}

zero_status zero_json_check(const char *text, size_t len, uint64_t max_values, int max_depth, zero_error *err) {
    return json_check(text, len, max_values, max_depth, NULL, err);
}

zero_status zero_json_check_last(const char *text, size_t len, uint64_t max_values, int max_depth, char **last,
                                 zero_error *err) {
    if (!last) {
        if (err) ZERO__ERR(err, "zero_json_check_last: no place for the text");
        return ZERO_ERR_INVALID_ARG;
    }
    return json_check(text, len, max_values, max_depth, last, err);
}

zero_status zero_check_replaceable(const char *path, zero_error *err) {
    struct stat sb;
    if (!path || !*path) {
        if (err) ZERO__ERR(err, "'': expected a file name to write");
        return ZERO_ERR_INVALID_ARG;
    }
    if (lstat(path, &sb) != 0 || S_ISREG(sb.st_mode) || S_ISLNK(sb.st_mode)) return ZERO_OK;
    const char *kind = S_ISDIR(sb.st_mode)    ? "a directory"
                       : S_ISCHR(sb.st_mode)  ? "a character device"
                       : S_ISBLK(sb.st_mode)  ? "a block device"
                       : S_ISFIFO(sb.st_mode) ? "a FIFO"
                       : S_ISSOCK(sb.st_mode) ? "a socket"
                                              : "not a regular file";
    if (err)
        ZERO__ERR(err, "%.400s is %s: expected a regular file to replace, or a new name (a rename would put a "
                  "file in its place)", path, kind);
    return ZERO_ERR_INVALID_ARG;
}

int zero_create_tmp(const char *path, char *tmp, size_t cap, zero_error *err) {
    if (zero_check_replaceable(path, err) != ZERO_OK) {
        if (tmp && cap) tmp[0] = 0;
        return -1;
    }
    if (!tmp || (size_t)snprintf(tmp, cap, "%s.tmp", path) >= cap) {
        if (tmp && cap) tmp[0] = 0;
        if (err) ZERO__ERR(err, "%.400s: path too long for its temporary file", path);
        return -1;
    }
    if (unlink(tmp) != 0 && errno != ENOENT && errno != EISDIR && errno != EPERM) {
        if (err) ZERO__ERR(err, "cannot remove the leftover %.400s: %s", tmp, strerror(errno));
        return -1;
    }
    int fd;
    do fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    while (fd < 0 && errno == EINTR);
    if (fd < 0 && err) ZERO__ERR(err, "cannot create %.400s: %s", tmp, strerror(errno));
    return fd;
}
