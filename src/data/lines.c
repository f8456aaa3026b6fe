/* src/data/lines.c — the readers of JSONL and JSON data files: a block at a time, memory bounded by
 * one line or one array element (a hostile 10 GB line is measured and refused, never held:
 * docs/SECURITY.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zero/data.h"

#define BLOCK ((size_t)1 << 16)

/* Reads up to BLOCK bytes: the pre-read bytes first (*pre_n of them, consumed), then the file. */
static zero_status next_block(FILE *f, const char *path, const char **pre, size_t *pre_n, char *dst, size_t *got,
                              zero_error *err) {
    if (*pre_n) {
        memcpy(dst, *pre, *pre_n);
        *got = *pre_n;
        *pre_n = 0;
        return ZERO_OK;
    }
    *got = fread(dst, 1, BLOCK, f);
    if (*got == 0 && ferror(f)) {
        if (err) snprintf(err->msg, sizeof err->msg, "cannot read data file '%.400s': %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    return ZERO_OK;
}

/* Grows *buf to hold n + BLOCK + 1 bytes, never past max + BLOCK + 1 (what is held is <= max). */
static zero_status reserve(char **buf, size_t *cap, size_t n, uint64_t max, const char *path, zero_error *err) {
    if (*cap - n >= BLOCK + 1) return ZERO_OK;
    size_t nc = *cap ? 2 * *cap : 4 * BLOCK;
    if (max < SIZE_MAX - 2 * BLOCK && nc > max + BLOCK + 1) nc = (size_t)max + BLOCK + 1;
    if (nc < n + BLOCK + 1) nc = n + BLOCK + 1;
    char *nb = realloc(*buf, nc);
    if (!nb) {
        if (err) snprintf(err->msg, sizeof err->msg, "out of memory reading '%.400s'", path);
        return ZERO_ERR_NOMEM;
    }
    *buf = nb;
    *cap = nc;
    return ZERO_OK;
}

static zero_status foreach_line(FILE *f, const char *path, const char *pre, size_t pre_n, uint64_t max_line,
                                zero_line_fn fn, void *ctx, zero_error *err) {
    /* buf[0, n): the start of the current line (when it is held) and what follows it */
    char *buf = NULL;
    size_t cap = 0, n = 0;
    uint64_t lineno = 1;
    int skipping = 0; /* the current line was too long: dropped up to its end */
    zero_status st = ZERO_OK;
    for (;;) {
        size_t got;
        if ((st = reserve(&buf, &cap, n, max_line, path, err)) ||
            (st = next_block(f, path, &pre, &pre_n, buf + n, &got, err)))
            break;
        if (got == 0) break;
        size_t start = 0, i = n;
        n += got;
        for (; i < n && st == ZERO_OK; i++) {
            if (buf[i] != '\n') continue;
            if (skipping) {
                skipping = 0;
            } else {
                buf[i] = 0;
                st = fn(ctx, buf + start, i - start, lineno);
            }
            lineno++;
            start = i + 1;
        }
        if (st != ZERO_OK) break;
        if (skipping) { /* the rest of a line too long to hold */
            n = 0;
            continue;
        }
        if (start) memmove(buf, buf + start, n - start);
        n -= start;
        if (n > max_line) { /* refused now, before more of it is read: fn may stop here */
            st = fn(ctx, NULL, n, lineno);
            if (st != ZERO_OK) break;
            skipping = 1;
            n = 0;
        }
    }
    if (st == ZERO_OK && !skipping && n) {
        buf[n] = 0;
        st = fn(ctx, buf, n, lineno);
    }
    free(buf);
    return st;
}

zero_status zero_data_foreach_line(const char *path, uint64_t max_line, zero_line_fn fn, void *ctx, zero_error *err) {
    if (!path || !fn) {
        if (err) snprintf(err->msg, sizeof err->msg, "zero_data_foreach_line: expected a path and a function");
        return ZERO_ERR_INVALID_ARG;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err) snprintf(err->msg, sizeof err->msg, "cannot open data file '%.400s': %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    const zero_status st = foreach_line(f, path, NULL, 0, max_line, fn, ctx, err);
    fclose(f);
    return st;
}

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static zero_status array_error(const char *path, uint64_t lineno, const char *why, zero_error *err) {
    if (err)
        snprintf(err->msg, sizeof err->msg,
                 "%.300s:%llu: %.80s (a *.json file that starts with '[' is one JSON array of "
                 "examples)",
                 path, (unsigned long long)lineno, why);
    return ZERO_ERR_FORMAT;
}

/* The elements of the JSON array that starts at the file's first byte that is not whitespace. The
 * array's own grammar (brackets, commas, nothing after its ']') is checked here as it streams; each
 * element is cut at the ',' or ']' that follows it outside strings and brackets, and its own
 * grammar is the callback's to check (zero_json_check): a cut made wrong by a malformed element
 * hands the callback a text that is not JSON, never more than max_item bytes of it. */
static zero_status foreach_item(FILE *f, const char *path, const char *pre, size_t pre_n, uint64_t max_item,
                                zero_line_fn fn, void *ctx, zero_error *err) {
    enum { OPEN, FIRST, ITEM, NEXT, END } state = OPEN;
    char *item = NULL, *blk = malloc(BLOCK);
    size_t cap = 0, n = 0; /* item[0, n): the element read so far (when it is held) */
    uint64_t lineno = 1, item_line = 0;
    int skipping = 0, in_str = 0, esc = 0;
    int64_t depth = 0;
    zero_status st = blk ? ZERO_OK : ZERO_ERR_NOMEM;
    if (st && err) snprintf(err->msg, sizeof err->msg, "out of memory reading '%.400s'", path);
    while (!st) {
        size_t got;
        if ((st = next_block(f, path, &pre, &pre_n, blk, &got, err)) || got == 0) break;
        size_t seg = 0; /* where the element's bytes in this block begin */
        for (size_t i = 0; i < got && !st; i++) {
            const char c = blk[i];
            if (state != ITEM) {
                if (c == '\n') lineno++;
                if (is_ws(c)) continue;
                if (state == OPEN) {
                    if (c == '[') state = FIRST;
                    else st = array_error(path, lineno, "expected '[' first", err);
                    continue;
                }
                if (state == END) {
                    st = array_error(path, lineno, "bytes after the array's closing ']'", err);
                    continue;
                }
                if (c == ']' && state == FIRST) { /* [] */
                    state = END;
                    continue;
                }
                if (c == ']' || c == ',') {
                    st = array_error(path, lineno,
                                     c == ']' ? "a ',' before ']' (JSON has no trailing commas)"
                                              : "expected an element before ','",
                                     err);
                    continue;
                }
                state = ITEM; /* c is the element's first byte */
                item_line = lineno;
                in_str = esc = 0;
                depth = 0;
                seg = i;
            }
            if (in_str) {
                if (esc) esc = 0;
                else if (c == '\\') esc = 1;
                else if (c == '"') in_str = 0;
            } else if (c == '"') {
                in_str = 1;
            } else if (c == '[' || c == '{') {
                depth++;
            } else if ((c == ']' || c == '}') && depth > 0) {
                depth--;
            } else if (depth == 0 && (c == ',' || c == ']')) { /* the element ends before c */
                const size_t add = i - seg;
                if (!skipping && n + add > max_item) { /* refused, never held */
                    st = fn(ctx, NULL, n + add, item_line);
                } else if (!skipping && !(st = reserve(&item, &cap, n, max_item, path, err))) {
                    memcpy(item + n, blk + seg, add);
                    n += add;
                    while (n && is_ws(item[n - 1])) n--;
                    item[n] = 0;
                    st = fn(ctx, item, n, item_line);
                }
                n = 0;
                skipping = 0;
                state = c == ',' ? NEXT : END;
                continue;
            }
            if (c == '\n') lineno++;
        }
        if (st || state != ITEM || skipping) continue;
        /* the element goes on in the next block: hold what this one has of it, or refuse it now */
        const size_t add = got - seg;
        if (n + add > max_item) {
            st = fn(ctx, NULL, n + add, item_line);
            skipping = 1;
            n = 0;
        } else if (!(st = reserve(&item, &cap, n, max_item, path, err))) {
            memcpy(item + n, blk + seg, add);
            n += add;
        }
    }
    if (!st && state != END)
        st = array_error(path, lineno,
                         state == OPEN ? "expected a JSON array, found only whitespace"
                                       : "the array ends before its closing ']'",
                         err);
    free(item);
    free(blk);
    return st;
}

zero_status zero_data_foreach_example(const char *path, int json_array, uint64_t max, zero_line_fn fn, void *ctx,
                                      int *is_array, zero_error *err) {
    if (is_array) *is_array = 0;
    if (!path || !fn) {
        if (err) snprintf(err->msg, sizeof err->msg, "zero_data_foreach_example: expected a path and a function");
        return ZERO_ERR_INVALID_ARG;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err) snprintf(err->msg, sizeof err->msg, "cannot open data file '%.400s': %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    /* the first block decides, and is then read again by the reader it picks (a FIFO cannot be
     * reopened) */
    char *pre = malloc(BLOCK);
    size_t got = 0, k = 0;
    const char *none = NULL;
    size_t zero = 0;
    zero_status st = pre ? next_block(f, path, &none, &zero, pre, &got, err) : ZERO_ERR_NOMEM;
    if (!pre && err) snprintf(err->msg, sizeof err->msg, "out of memory reading '%.400s'", path);
    if (!st) {
        while (k < got && is_ws(pre[k])) k++;
        const int array = json_array && k < got && pre[k] == '[';
        if (is_array) *is_array = array;
        st = (array ? foreach_item : foreach_line)(f, path, pre, got, max, fn, ctx, err);
    }
    free(pre);
    fclose(f);
    return st;
}
