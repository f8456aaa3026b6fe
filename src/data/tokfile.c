/* src/data/tokfile.c — token files: ZEROTOK2 (tokens of 2 or 4 bytes, an optional loss-mask stream,
 * packed rows) written and read, ZEROTOK1 read. Byte layout:
 *   ZEROTOK1: 0 "ZEROTOK1" | 8 u32 1 | 12 u32 vocab | 16 u64 count | 24 u64 0 | 32 u16 tokens[count]
 *   ZEROTOK2: 0 "ZEROTOK2" | 8 u32 2 | 12 u32 vocab | 16 u64 count | 24 u32 token_bytes (2|4)
 *             | 28 u32 flags (bit 0: mask, bit 1: starts) | 32 u32 row | 36 u8[28] 0 | 64 tokens
 *             | u8 mask[count] (bit 0) | u8 starts[count] (bit 1: 1 at the first token of each example)
 * (little-endian; the file is exactly that long; docs/TOKENIZER.md). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zero/data.h"

struct zero_tokfile {
    FILE *f;
    char path[1024];
    int version;
    uint32_t vocab, row, token_bytes;
    int has_mask, has_starts;
    uint64_t count, data_off, mask_off, starts_off;
    unsigned char *buf;
    size_t buf_cap;
    char err[512];
};

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void wr64(unsigned char *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

#define SETERR(...) snprintf(err ? err->msg : dummy.msg, sizeof dummy.msg, __VA_ARGS__)

static zero_status scan(zero_tokfile *t);

zero_status zero_tokfile_open(zero_tokfile **out, const char *path, zero_error *err) {
    zero_error dummy;
    *out = NULL;
    /* O_NONBLOCK: a FIFO is refused below, not waited on (docs/SECURITY.md) */
    int fd;
    do fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        SETERR("cannot open token file '%.400s': %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    struct stat sb;
    unsigned char h[64] = {0};
    zero_status st = ZERO_ERR_FORMAT;
    if (fstat(fd, &sb) != 0) {
        SETERR("cannot stat token file '%.400s': %s", path, strerror(errno));
        close(fd);
        return ZERO_ERR_IO;
    }
    if (!S_ISREG(sb.st_mode)) {
        SETERR("token file '%.400s' is not a regular file", path);
        close(fd);
        return ZERO_ERR_FORMAT;
    }
    FILE *f = NULL;
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) != 0 || !(f = fdopen(fd, "rb"))) {
        SETERR("cannot open token file '%.400s': %s", path, strerror(errno));
        close(fd);
        return ZERO_ERR_IO;
    }
    const uint64_t size = (uint64_t)sb.st_size;
    const size_t got = fread(h, 1, 64, f);
    zero_tokfile *t = calloc(1, sizeof *t);
    if (!t) {
        SETERR("out of memory opening '%.400s'", path);
        fclose(f);
        return ZERO_ERR_NOMEM;
    }
    t->f = f;
    snprintf(t->path, sizeof t->path, "%s", path);
    if (got >= 8 && !memcmp(h, "ZEROTOK1", 8)) {
        if (got < 32) {
            SETERR("token file '%.400s' is truncated: %llu bytes, expected a 32-byte header", path,
                   (unsigned long long)size);
            goto fail;
        }
        t->version = (int)rd32(h + 8);
        t->vocab = rd32(h + 12);
        t->count = rd64(h + 16);
        t->token_bytes = 2;
        t->data_off = 32;
        if (t->version != 1) {
            SETERR("token file '%.400s': ZEROTOK1 with version %d, expected 1", path, t->version);
            goto fail;
        }
        if (t->vocab < 1 || t->vocab > 65536) {
            SETERR("token file '%.400s': vocab %u, expected 1 .. 65536", path, t->vocab);
            goto fail;
        }
    } else if (got >= 8 && !memcmp(h, "ZEROTOK2", 8)) {
        if (got < 64) {
            SETERR("token file '%.400s' is truncated: %llu bytes, expected a 64-byte header", path,
                   (unsigned long long)size);
            goto fail;
        }
        t->version = (int)rd32(h + 8);
        t->vocab = rd32(h + 12);
        t->count = rd64(h + 16);
        t->token_bytes = rd32(h + 24);
        const uint32_t flags = rd32(h + 28);
        t->row = rd32(h + 32);
        t->has_mask = (int)(flags & 1);
        t->has_starts = (int)(flags >> 1 & 1);
        t->data_off = 64;
        int reserved = 0;
        for (int i = 36; i < 64; i++) reserved |= h[i];
        if (t->version != 2) {
            SETERR("token file '%.400s': ZEROTOK2 with version %d, expected 2", path, t->version);
            goto fail;
        }
        if (t->vocab < 1 || t->vocab > 0x7FFFFFFFu) {
            SETERR("token file '%.400s': vocab %u, expected 1 .. 2^31-1", path, t->vocab);
            goto fail;
        }
        if (t->token_bytes != 2 && t->token_bytes != 4) {
            SETERR("token file '%.400s': token_bytes %u, expected 2 or 4", path, t->token_bytes);
            goto fail;
        }
        if (t->token_bytes == 2 && t->vocab > 65536) {
            SETERR("token file '%.400s': vocab %u does not fit 2-byte tokens", path, t->vocab);
            goto fail;
        }
        if ((flags & ~3u) || reserved) {
            SETERR("token file '%.400s': unknown flags 0x%x or reserved bytes set: written by a newer zero?", path,
                   flags);
            goto fail;
        }
    } else {
        SETERR("'%.400s' is not a token file: expected the magic ZEROTOK1 or ZEROTOK2", path);
        goto fail;
    }
    const uint64_t per = t->token_bytes + (t->has_mask ? 1u : 0u) + (t->has_starts ? 1u : 0u);
    if (t->count == 0 || t->count > (size - t->data_off) / per || size != t->data_off + per * t->count) {
        SETERR("token file '%.400s': header says %llu tokens, the file holds %llu bytes (expected %llu + %llu x count, "
               "count >= 1)", path, (unsigned long long)t->count, (unsigned long long)size,
               (unsigned long long)t->data_off, (unsigned long long)per);
        goto fail;
    }
    if (t->row && t->count % t->row) {
        SETERR("token file '%.400s': %llu tokens are not whole rows of %u", path, (unsigned long long)t->count, t->row);
        goto fail;
    }
    t->mask_off = t->data_off + t->token_bytes * t->count;
    t->starts_off = t->mask_off + (t->has_mask ? t->count : 0);
    /* Every token < vocab and every mask and starts byte 0 or 1, checked now (one pass, a chunk at a time): a
     * bad one found when a batch reaches it would end a long run late. */
    if ((st = scan(t)) != ZERO_OK) {
        SETERR("%s", t->err);
        goto fail;
    }
    *out = t;
    return ZERO_OK;
fail:
    zero_tokfile_close(t);
    return st;
}

void zero_tokfile_close(zero_tokfile *f) {
    if (!f) return;
    if (f->f) fclose(f->f);
    free(f->buf);
    free(f);
}

const char *zero_tokfile_last_error(const zero_tokfile *f) { return f ? f->err : ""; }
uint64_t zero_tokfile_count(const zero_tokfile *f) { return f->count; }
uint32_t zero_tokfile_vocab(const zero_tokfile *f) { return f->vocab; }
uint32_t zero_tokfile_row(const zero_tokfile *f) { return f->row; }
int zero_tokfile_has_mask(const zero_tokfile *f) { return f->has_mask; }
int zero_tokfile_has_starts(const zero_tokfile *f) { return f->has_starts; }
int zero_tokfile_version(const zero_tokfile *f) { return f->version; }

static int read_at(zero_tokfile *f, uint64_t off, size_t n) {
    if (n > f->buf_cap) {
        unsigned char *nb = realloc(f->buf, n);
        if (!nb) return -1;
        f->buf = nb;
        f->buf_cap = n;
    }
    if (fseeko(f->f, (off_t)off, SEEK_SET) != 0 || fread(f->buf, 1, n, f->f) != n) return -2;
    return 0;
}

zero_status zero_tokfile_read(zero_tokfile *f, uint64_t first, uint64_t n, int32_t *tokens, uint8_t *mask) {
    if (first > f->count || n > f->count - first) {
        snprintf(f->err, sizeof f->err, "tokens [%llu, %llu) of '%.300s': the file holds %llu", (unsigned long long)first,
                 (unsigned long long)(first + n), f->path, (unsigned long long)f->count);
        return ZERO_ERR_INVALID_ARG;
    }
    const uint64_t chunk = 1 << 20;
    for (uint64_t done = 0; done < n;) {
        const uint64_t k = n - done < chunk ? n - done : chunk;
        int rc = read_at(f, f->data_off + (first + done) * f->token_bytes, (size_t)(k * f->token_bytes));
        if (rc) goto io;
        for (uint64_t i = 0; i < k; i++) {
            const unsigned char *p = f->buf + i * f->token_bytes;
            const uint32_t v = f->token_bytes == 2 ? (uint32_t)(p[0] | p[1] << 8) : rd32(p);
            if (v >= f->vocab) {
                snprintf(f->err, sizeof f->err, "token file '%.300s': token %u at index %llu, expected < vocab %u",
                         f->path, v, (unsigned long long)(first + done + i), f->vocab);
                return ZERO_ERR_FORMAT;
            }
            tokens[done + i] = (int32_t)v;
        }
        if (mask) {
            if (!f->has_mask) memset(mask + done, 1, (size_t)k);
            else {
                if ((rc = read_at(f, f->mask_off + first + done, (size_t)k))) goto io;
                for (uint64_t i = 0; i < k; i++) {
                    if (f->buf[i] > 1) {
                        snprintf(f->err, sizeof f->err, "token file '%.300s': mask byte %u at index %llu, expected 0 or 1",
                                 f->path, f->buf[i], (unsigned long long)(first + done + i));
                        return ZERO_ERR_FORMAT;
                    }
                    mask[done + i] = f->buf[i];
                }
            }
        }
        done += k;
        continue;
    io:
        if (rc == -1) {
            snprintf(f->err, sizeof f->err, "out of memory reading '%.300s'", f->path);
            return ZERO_ERR_NOMEM;
        }
        snprintf(f->err, sizeof f->err, "cannot read token file '%.300s': %s", f->path,
                 ferror(f->f) ? strerror(errno) : "unexpected end of file");
        return ZERO_ERR_IO;
    }
    return ZERO_OK;
}

zero_status zero_tokfile_read_starts(zero_tokfile *f, uint64_t first, uint64_t n, uint8_t *starts) {
    if (first > f->count || n > f->count - first) {
        snprintf(f->err, sizeof f->err, "tokens [%llu, %llu) of '%.300s': the file holds %llu", (unsigned long long)first,
                 (unsigned long long)(first + n), f->path, (unsigned long long)f->count);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!f->has_starts) {
        memset(starts, 0, (size_t)n);
        return ZERO_OK;
    }
    const uint64_t chunk = 1 << 20;
    for (uint64_t done = 0; done < n;) {
        const uint64_t k = n - done < chunk ? n - done : chunk;
        const int rc = read_at(f, f->starts_off + first + done, (size_t)k);
        if (rc) {
            if (rc == -1) snprintf(f->err, sizeof f->err, "out of memory reading '%.300s'", f->path);
            else
                snprintf(f->err, sizeof f->err, "cannot read token file '%.300s': %s", f->path,
                         ferror(f->f) ? strerror(errno) : "unexpected end of file");
            return rc == -1 ? ZERO_ERR_NOMEM : ZERO_ERR_IO;
        }
        for (uint64_t i = 0; i < k; i++) {
            if (f->buf[i] > 1) {
                snprintf(f->err, sizeof f->err, "token file '%.300s': starts byte %u at index %llu, expected 0 or 1",
                         f->path, f->buf[i], (unsigned long long)(first + done + i));
                return ZERO_ERR_FORMAT;
            }
            starts[done + i] = f->buf[i];
        }
        done += k;
    }
    return ZERO_OK;
}

zero_status zero_tokfile_write(const char *path, const int32_t *tokens, const uint8_t *mask, const uint8_t *starts,
                               uint64_t count, uint32_t vocab, uint32_t row, zero_error *err) {
    zero_error dummy;
    if (vocab < 1 || vocab > 0x7FFFFFFFu || count == 0 || (row && count % row)) {
        SETERR("token file '%.400s': vocab %u, %llu tokens, rows of %u: expected vocab in 1 .. 2^31-1, at least one "
               "token and whole rows", path, vocab, (unsigned long long)count, row);
        return ZERO_ERR_INVALID_ARG;
    }
    for (uint64_t i = 0; i < count; i++) {
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= vocab || (mask && mask[i] > 1) || (starts && starts[i] > 1)) {
            SETERR("token %d (mask %d, start %d) at index %llu: expected 0 <= token < vocab %u, a mask and a start of "
                   "0 or 1", tokens[i], mask ? mask[i] : 1, starts ? starts[i] : 0, (unsigned long long)i, vocab);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    char tmp[4200];
    zero_error terr;
    const int fd = zero_create_tmp(path, tmp, sizeof tmp, &terr);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        if (fd >= 0) SETERR("cannot create token file '%.400s': %s", tmp, strerror(errno));
        else SETERR("token file: %.480s", terr.msg);
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return ZERO_ERR_IO;
    }
    const uint32_t tb = vocab <= 65536 ? 2 : 4;
    unsigned char h[64] = {0}, chunk[1 << 16];
    memcpy(h, "ZEROTOK2", 8);
    wr32(h + 8, 2);
    wr32(h + 12, vocab);
    wr64(h + 16, count);
    wr32(h + 24, tb);
    wr32(h + 28, (mask ? 1u : 0u) | (starts ? 2u : 0u));
    wr32(h + 32, row);
    int ok = fwrite(h, 1, 64, f) == 64;
    for (uint64_t i = 0; ok && i < count;) {
        size_t k = 0;
        for (; k + tb <= sizeof chunk && i < count; i++, k += tb) {
            if (tb == 2) chunk[k] = (unsigned char)tokens[i], chunk[k + 1] = (unsigned char)(tokens[i] >> 8);
            else wr32(chunk + k, (uint32_t)tokens[i]);
        }
        ok = fwrite(chunk, 1, k, f) == k;
    }
    if (ok && mask) ok = fwrite(mask, 1, (size_t)count, f) == count;
    if (ok && starts) ok = fwrite(starts, 1, (size_t)count, f) == count;
    if (ok) ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
    const int e = errno;
    if (fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    if (!ok) {
        SETERR("cannot write token file '%.400s': %s", path, strerror(e ? e : errno));
        remove(tmp);
        return errno == ENOSPC ? ZERO_ERR_NOSPACE : ZERO_ERR_IO;
    }
    return ZERO_OK;
}

static zero_status scan(zero_tokfile *t) {
    const uint64_t chunk = t->count < (1u << 20) ? t->count : (1u << 20);
    int32_t *tokens = malloc((size_t)chunk * sizeof *tokens);
    uint8_t *mask = t->has_mask ? malloc((size_t)chunk) : NULL, *starts = t->has_starts ? malloc((size_t)chunk) : NULL;
    zero_status st = ZERO_OK;
    if (!tokens || (t->has_mask && !mask) || (t->has_starts && !starts)) {
        snprintf(t->err, sizeof t->err, "token file '%.300s': out of memory checking its tokens", t->path);
        st = ZERO_ERR_NOMEM;
    }
    for (uint64_t at = 0; st == ZERO_OK && at < t->count; at += chunk) {
        const uint64_t k = t->count - at < chunk ? t->count - at : chunk;
        st = zero_tokfile_read(t, at, k, tokens, mask);
        if (st == ZERO_OK && starts) st = zero_tokfile_read_starts(t, at, k, starts);
    }
    free(tokens);
    free(mask);
    free(starts);
    return st;
}
