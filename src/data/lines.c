/* src/data/lines.c — the line reader of data files: a block at a time, memory bounded by one line
 * (a hostile 10 GB line is measured and refused, never held: docs/SECURITY.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zero/data.h"

#define BLOCK ((size_t)1 << 16)

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
    /* buf[0, n): the start of the current line (when it is held) and what follows it */
    char *buf = NULL;
    size_t cap = 0, n = 0;
    uint64_t lineno = 1;
    int skipping = 0; /* the current line was too long: dropped up to its end */
    zero_status st = ZERO_OK;
    for (;;) {
        if (cap - n < BLOCK + 1) {
            /* n <= max_line here (a longer line is dropped below): cap stays <= max_line + BLOCK + 1 */
            size_t nc = cap ? 2 * cap : 4 * BLOCK;
            if (max_line < SIZE_MAX - 2 * BLOCK && nc > max_line + BLOCK + 1) nc = (size_t)max_line + BLOCK + 1;
            if (nc < n + BLOCK + 1) nc = n + BLOCK + 1;
            char *nb = realloc(buf, nc);
            if (!nb) {
                if (err) snprintf(err->msg, sizeof err->msg, "out of memory reading '%.400s'", path);
                st = ZERO_ERR_NOMEM;
                break;
            }
            buf = nb;
            cap = nc;
        }
        const size_t got = fread(buf + n, 1, BLOCK, f);
        if (got == 0) {
            if (ferror(f)) {
                if (err) snprintf(err->msg, sizeof err->msg, "cannot read data file '%.400s': %s", path, strerror(errno));
                st = ZERO_ERR_IO;
            }
            break;
        }
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
    fclose(f);
    return st;
}
