/* The safetensors reader: validates the whole header (lengths, JSON, dtypes, shapes, back-to-back
 * data ranges, checksum entries) before any tensor is read; ranged reads and CRC32C checks. */
#define _GNU_SOURCE /* qsort_r */
#include "ckpt/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

struct zero_st_file {
    zero_io *io;
    int own_io;
    zero_io_file *f;
    char *path;
    uint64_t size;
    zero_st_tensor *t;   /* by offset */
    int nt;
    int *by_name;        /* indices into t, sorted by name */
    char **mkey, **mval;
    int nm;
    char err[512];
};

static zero_status rfail(zero_st_file *f, zero_status s, const char *fmt, ...) ZERO__PRINTF(3, 4);
static zero_status rfail(zero_st_file *f, zero_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->err, sizeof f->err, fmt, ap);
    va_end(ap);
    return s;
}

/* A JSON number that is a whole number in [0, 2^53]. */
static int json_u64(const cJSON *n, uint64_t *out) {
    if (!cJSON_IsNumber(n)) return 0;
    double v = n->valuedouble;
    if (!(v >= 0 && v <= 9007199254740992.0) || v != (double)(uint64_t)v) return 0;
    *out = (uint64_t)v;
    return 1;
}

/* A JSON value for a message: a whole number in full (cJSON would print 2^62 as 4.6e+18),
 * anything else as its JSON text, cut to cap. */
static const char *value_text(const cJSON *v, char *buf, size_t cap) {
    if (cJSON_IsNumber(v) && v->valuedouble >= -9.2e18 && v->valuedouble <= 9.2e18 &&
        v->valuedouble == (double)(int64_t)v->valuedouble) {
        snprintf(buf, cap, "%lld", (long long)v->valuedouble);
        return buf;
    }
    char *t = cJSON_PrintUnformatted(v);
    snprintf(buf, cap, "%s", t ? t : "?");
    cJSON_free(t);
    return buf;
}

/* A tensor name with its control characters as \xNN: the JSON check lets escaped ones (\u001b)
 * through, and a message must not carry them raw to a terminal. 1 when there was one. */
static int escape_name(const char *name, char *buf, size_t cap) {
    int ctl = 0;
    size_t at = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c && at + 5 < cap; c++) {
        if (*c < 0x20 || *c == 0x7f) {
            at += (size_t)snprintf(buf + at, cap - at, "\\x%02x", *c);
            ctl = 1;
        } else {
            buf[at++] = (char)*c;
        }
    }
    buf[at] = 0;
    return ctl;
}

static int cmp_offset(const void *a, const void *b) {
    const zero_st_tensor *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->nbytes != y->nbytes) return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

static int cmp_name_idx(const void *a, const void *b, void *ctx) {
    const zero_st_tensor *t = ctx;
    return strcmp(t[*(const int *)a].name, t[*(const int *)b].name);
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Parses and validates the header text (len bytes, NUL-terminated) into f. */
static zero_status parse_header(zero_st_file *f, const char *text, size_t len, uint64_t data_bytes) {
    const char *P = f->path;
    size_t first = 0;
    while (first < len && (text[first] == ' ' || text[first] == '\n' || text[first] == '\r' || text[first] == '\t')) first++;
    if (first == len || text[first] != '{')
        return rfail(f, ZERO_ERR_FORMAT, "%s: the header does not start with '{': not a safetensors file", P);
    zero_error je;
    if (zero_json_check(text, len, ZERO__ST_MAX_VALUES, ZERO_JSON_MAX_DEPTH, &je) != ZERO_OK)
        return rfail(f, ZERO_ERR_FORMAT, "%s: the header: %s: refused before parsing", P, je.msg);
    /* valid JSON with nothing after it but whitespace, no name twice: zero_json_check saw to it */
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) return rfail(f, ZERO_ERR_NOMEM, "%s: out of memory parsing the header", P);
    zero_status s = ZERO_ERR_FORMAT;
    if (!cJSON_IsObject(root)) {
        rfail(f, s, "%s: the header is not a JSON object", P);
        goto out;
    }
    int nt = 0, nm = 0;
    const cJSON *meta = NULL;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) {
            meta = it;
            if (!cJSON_IsObject(it)) {
                rfail(f, s, "%s: __metadata__ is not an object of strings", P);
                goto out;
            }
            for (const cJSON *m = it->child; m; m = m->next) {
                if (!cJSON_IsString(m)) {
                    rfail(f, s, "%s: __metadata__ entry '%s' is not a string", P, m->string);
                    goto out;
                }
                nm++;
            }
        } else {
            nt++;
        }
    }
    s = ZERO_ERR_NOMEM;
    if (nt) {
        f->t = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)nt * sizeof *f->t);
        f->by_name = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)nt * sizeof *f->by_name);
        if (!f->t || !f->by_name) {
            rfail(f, s, "%s: out of memory for %d tensors", P, nt);
            goto out;
        }
    }
    if (nm) {
        f->mkey = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)nm * sizeof *f->mkey);
        f->mval = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)nm * sizeof *f->mval);
        if (!f->mkey || !f->mval) {
            rfail(f, s, "%s: out of memory for %d metadata entries", P, nm);
            goto out;
        }
    }
    s = ZERO_ERR_FORMAT;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (it == meta) continue;
        zero_st_tensor *t = &f->t[f->nt];
        const char *name = it->string;
        char esc[160], val[80];
        if (escape_name(name, esc, sizeof esc)) {
            rfail(f, s, "%s: tensor name '%s' holds a control character: expected printable text", P, esc);
            goto out;
        }
        if (!cJSON_IsObject(it)) {
            rfail(f, s, "%s: tensor '%s' is not an object with dtype, shape and data_offsets", P, name);
            goto out;
        }
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(it, "shape");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
        if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off)) {
            rfail(f, s, "%s: tensor '%s': expected \"dtype\" (a string), \"shape\" and \"data_offsets\" (arrays)", P, name);
            goto out;
        }
        if (!zero__st_dtype_lookup(dt->valuestring, &t->dtype, &t->elem_size, &t->zdtype)) {
            rfail(f, s, "%s: tensor '%s': dtype '%.32s' is not one of F32, BF16, F16, F64, I8, I16, I32, I64, U8, "
                  "U16, U32, U64, BOOL, F8_E4M3, F8_E5M2, F8_E8M0", P, name, dt->valuestring);
            goto out;
        }
        int nd = cJSON_GetArraySize(sh);
        if (nd > ZERO_ST_MAX_DIMS) {
            rfail(f, s, "%s: tensor '%s' has %d dimensions: at most %d are supported", P, name, nd, ZERO_ST_MAX_DIMS);
            goto out;
        }
        t->ndim = 0;
        for (const cJSON *d = sh->child; d; d = d->next) {
            uint64_t v;
            if (!json_u64(d, &v)) {
                rfail(f, s, "%s: tensor '%s': shape entry %d is %s: expected a whole number in [0, 2^53]", P, name,
                      t->ndim, value_text(d, val, sizeof val));
                goto out;
            }
            t->shape[t->ndim++] = (int64_t)v;
        }
        uint64_t b = 0, e = 0;
        if (cJSON_GetArraySize(off) != 2 || !json_u64(off->child, &b) || !json_u64(off->child->next, &e)) {
            rfail(f, s, "%s: tensor '%s': data_offsets %s: expected two whole numbers [begin, end] in [0, 2^53]", P,
                  name, value_text(off, val, sizeof val));
            goto out;
        }
        if (e < b) {
            rfail(f, s, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", P, name,
                  (unsigned long long)b, (unsigned long long)e);
            goto out;
        }
        int64_t nb = zero__st_shape_bytes(t->shape, t->ndim, t->elem_size, &t->numel);
        if (nb < 0) {
            rfail(f, s, "%s: tensor '%s': a %s shape of %d dimensions whose bytes pass 2^62: not a tensor any file "
                  "can hold", P, name, t->dtype, t->ndim);
            goto out;
        }
        if ((uint64_t)nb != e - b) {
            rfail(f, s, "%s: tensor '%s': %s with %d dimensions needs %lld bytes but data_offsets [%llu, %llu] hold %llu",
                  P, name, t->dtype, t->ndim, (long long)nb, (unsigned long long)b, (unsigned long long)e,
                  (unsigned long long)(e - b));
            goto out;
        }
        if (e > data_bytes) {
            rfail(f, s, "%s: tensor '%s': data_offsets [%llu, %llu] end past the data (%llu bytes): truncated file?",
                  P, name, (unsigned long long)b, (unsigned long long)e, (unsigned long long)data_bytes);
            goto out;
        }
        t->nbytes = e - b;
        t->offset = b; /* relative until validated */
        t->name = zero__strdup(name);
        if (!t->name) {
            rfail(f, ZERO_ERR_NOMEM, "%s: out of memory", P);
            s = ZERO_ERR_NOMEM;
            goto out;
        }
        f->nt++;
    }
    /* Back to back from 0 to the end: sorted by (begin, size), each begins where the last ended. */
    if (f->nt) qsort(f->t, (size_t)f->nt, sizeof *f->t, cmp_offset);
    uint64_t at = 0;
    for (int i = 0; i < f->nt; i++) {
        if (f->t[i].offset != at) {
            rfail(f, s, "%s: tensor '%s' starts at data byte %llu but the previous one ends at %llu: %s", P,
                  f->t[i].name, (unsigned long long)f->t[i].offset, (unsigned long long)at,
                  f->t[i].offset < at ? "tensors overlap" : "a hole in the data");
            goto out;
        }
        at += f->t[i].nbytes;
    }
    if (at != data_bytes) {
        rfail(f, s, "%s: the tensors hold %llu data bytes but the file has %llu after the header", P,
              (unsigned long long)at, (unsigned long long)data_bytes);
        goto out;
    }
    for (int i = 0; i < f->nt; i++) f->by_name[i] = i;
    if (f->nt) qsort_r(f->by_name, (size_t)f->nt, sizeof *f->by_name, cmp_name_idx, f->t);
    if (meta) {
        for (const cJSON *m = meta->child; m; m = m->next) {
            f->mkey[f->nm] = zero__strdup(m->string);
            f->mval[f->nm] = zero__strdup(m->valuestring);
            if (!f->mkey[f->nm] || !f->mval[f->nm]) {
                zero_mem_free(NULL, f->mkey[f->nm]);
                zero_mem_free(NULL, f->mval[f->nm]);
                s = rfail(f, ZERO_ERR_NOMEM, "%s: out of memory", P);
                goto out;
            }
            f->nm++;
            if (strncmp(m->string, ZERO__ST_CRC_PREFIX, strlen(ZERO__ST_CRC_PREFIX)) != 0) continue;
            const char *tn = m->string + strlen(ZERO__ST_CRC_PREFIX);
            int i = zero_st_find(f, tn);
            const char *v = m->valuestring;
            uint32_t crc = 0;
            int ok = strlen(v) == 8;
            for (int c = 0; ok && c < 8; c++) {
                int h = hexval(v[c]);
                ok = h >= 0;
                crc = (crc << 4) | (uint32_t)(h < 0 ? 0 : h);
            }
            if (i < 0 || !ok || f->t[i].has_crc) {
                rfail(f, s, "%s: metadata '%s' = '%.16s': expected 8 hex digits, once, for an existing tensor", P,
                      m->string, v);
                goto out;
            }
            f->t[i].has_crc = 1;
            f->t[i].crc = crc;
        }
    }
    s = ZERO_OK;
out:
    cJSON_Delete(root);
    return s;
}

/* Opens path (dir == NULL: io's path; else NAME in dir, never through a link) and validates it. */
static zero_status st_open(zero_st_file **out, zero_io *io, zero_io_dir *dir, const char *path, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!path || !*path) {
        if (err) ZERO__ERR(err, "safetensors: empty path");
        return ZERO_ERR_INVALID_ARG;
    }
    zero_st_file *f = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *f);
    if (!f) {
        if (err) ZERO__ERR(err, "%s: out of memory", path);
        return ZERO_ERR_NOMEM;
    }
    zero_status s = ZERO_ERR_NOMEM;
    char *hdr = NULL;
    if (dir) {
        f->io = zero_io_dir_io(dir);
    } else if (io) {
        f->io = io;
    } else {
        zero_error e2;
        s = zero_io_create_default(&f->io, &e2);
        if (s != ZERO_OK) {
            rfail(f, s, "%s", e2.msg);
            goto fail;
        }
        f->own_io = 1;
    }
    s = dir ? zero_io_open_at(dir, path, ZERO_IO_READ | ZERO_IO_NOFOLLOW, &f->f) : zero_io_open(f->io, path, ZERO_IO_READ, &f->f);
    if (s == ZERO_OK) s = zero_io_size(f->f, &f->size);
    if (s != ZERO_OK) {
        rfail(f, s, "%s", zero_io_last_error(f->io));
        goto fail;
    }
    f->path = zero__strdup(zero_io_file_path(f->f));
    if (!f->path) {
        s = rfail(f, ZERO_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    path = f->path;
    s = ZERO_ERR_FORMAT;
    if (f->size < 8) {
        rfail(f, s, "%s: %llu bytes is too small for a safetensors file (an 8-byte header length comes first)",
              path, (unsigned long long)f->size);
        goto fail;
    }
    unsigned char len8[8];
    s = zero_io_pread(f->f, len8, 8, 0);
    if (s != ZERO_OK) {
        rfail(f, s, "%s", zero_io_last_error(f->io));
        goto fail;
    }
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | len8[i];
    s = ZERO_ERR_FORMAT;
    if (n < 2 || n > ZERO_ST_MAX_HEADER || n > f->size - 8) {
        rfail(f, s, "%s: header length %llu is impossible: expected 2..%llu (the file has %llu bytes, the format "
              "allows %u)", path, (unsigned long long)n,
              (unsigned long long)(f->size - 8 < ZERO_ST_MAX_HEADER ? f->size - 8 : ZERO_ST_MAX_HEADER),
              (unsigned long long)f->size, ZERO_ST_MAX_HEADER);
        goto fail;
    }
    hdr = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)n + 1);
    if (!hdr) {
        s = rfail(f, ZERO_ERR_NOMEM, "%s: out of memory for a %llu-byte header", path, (unsigned long long)n);
        goto fail;
    }
    s = zero_io_pread(f->f, hdr, (size_t)n, 8);
    if (s != ZERO_OK) {
        rfail(f, s, "%s", zero_io_last_error(f->io));
        goto fail;
    }
    hdr[n] = 0;
    s = parse_header(f, hdr, (size_t)n, f->size - 8 - n);
    if (s != ZERO_OK) goto fail;
    for (int i = 0; i < f->nt; i++) f->t[i].offset += 8 + n;
    zero_mem_free(NULL, hdr);
    *out = f;
    return ZERO_OK;
fail:
    if (err) ZERO__ERR(err, "%s", f->err);
    zero_mem_free(NULL, hdr);
    zero_st_close(f);
    return s;
}

zero_status zero_st_open(zero_st_file **out, zero_io *io, const char *path, zero_error *err) {
    return st_open(out, io, NULL, path, err);
}

zero_status zero_st_open_at(zero_st_file **out, zero_io_dir *dir, const char *name, zero_error *err) {
    if (!dir) {
        if (out) *out = NULL;
        if (err) ZERO__ERR(err, "safetensors: no directory");
        return ZERO_ERR_INVALID_ARG;
    }
    return st_open(out, NULL, dir, name, err);
}

void zero_st_close(zero_st_file *f) {
    if (!f) return;
    (void)zero_io_close(f->f);
    for (int i = 0; i < f->nt; i++) zero_mem_free(NULL, (void *)f->t[i].name);
    for (int i = 0; i < f->nm; i++) {
        zero_mem_free(NULL, f->mkey[i]);
        zero_mem_free(NULL, f->mval[i]);
    }
    zero_mem_free(NULL, f->t);
    zero_mem_free(NULL, f->by_name);
    zero_mem_free(NULL, f->mkey);
    zero_mem_free(NULL, f->mval);
    zero_mem_free(NULL, f->path);
    if (f->own_io) zero_io_free(f->io);
    zero_mem_free(NULL, f);
}

const char *zero_st_last_error(const zero_st_file *f) { return f ? f->err : "no file"; }
const char *zero_st_path(const zero_st_file *f) { return f ? f->path : ""; }
uint64_t zero_st_file_size(const zero_st_file *f) { return f ? f->size : 0; }
int zero_st_count(const zero_st_file *f) { return f ? f->nt : 0; }

const zero_st_tensor *zero_st_tensor_at(const zero_st_file *f, int i) {
    return f && i >= 0 && i < f->nt ? &f->t[i] : NULL;
}

int zero_st_find(const zero_st_file *f, const char *name) {
    if (!f || !name) return -1;
    int lo = 0, hi = f->nt - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        int c = strcmp(f->t[f->by_name[mid]].name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

zero_status zero_st_read(zero_st_file *f, int i, uint64_t byte_lo, void *dst, size_t nbytes) {
    if (!f) return ZERO_ERR_INVALID_ARG;
    if (i < 0 || i >= f->nt)
        return rfail(f, ZERO_ERR_INVALID_ARG, "%s: tensor index %d: expected 0..%d", f->path, i, f->nt - 1);
    const zero_st_tensor *t = &f->t[i];
    if (byte_lo > t->nbytes || nbytes > t->nbytes - byte_lo || (nbytes && !dst))
        return rfail(f, ZERO_ERR_INVALID_ARG, "%s: tensor '%s': bytes [%llu, %llu) are outside its %llu bytes",
                     f->path, t->name, (unsigned long long)byte_lo, (unsigned long long)(byte_lo + nbytes),
                     (unsigned long long)t->nbytes);
    if (nbytes == 0) return ZERO_OK;
    zero_status s = zero_io_pread(f->f, dst, nbytes, t->offset + byte_lo);
    if (s != ZERO_OK) return rfail(f, s, "%s", zero_io_last_error(f->io));
    return ZERO_OK;
}

zero_status zero_st_verify(zero_st_file *f, int i) {
    if (!f) return ZERO_ERR_INVALID_ARG;
    if (i < 0 || i >= f->nt)
        return rfail(f, ZERO_ERR_INVALID_ARG, "%s: tensor index %d: expected 0..%d", f->path, i, f->nt - 1);
    const zero_st_tensor *t = &f->t[i];
    if (!t->has_crc) return ZERO_OK;
    size_t cap = t->nbytes < ZERO__ST_STAGE_BYTES ? (size_t)t->nbytes : ZERO__ST_STAGE_BYTES;
    unsigned char *buf = cap ? zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, cap) : NULL;
    if (cap && !buf) return rfail(f, ZERO_ERR_NOMEM, "%s: out of memory verifying '%s'", f->path, t->name);
    uint32_t crc = 0;
    zero_status s = ZERO_OK;
    for (uint64_t at = 0; at < t->nbytes && s == ZERO_OK; at += cap) {
        size_t k = t->nbytes - at < cap ? (size_t)(t->nbytes - at) : cap;
        s = zero_io_pread(f->f, buf, k, t->offset + at);
        if (s == ZERO_OK) crc = zero_crc32c(crc, buf, k);
        else rfail(f, s, "%s", zero_io_last_error(f->io));
    }
    zero_mem_free(NULL, buf);
    if (s == ZERO_OK && crc != t->crc)
        s = rfail(f, ZERO_ERR_FORMAT, "%s: tensor '%s': checksum mismatch (stored crc32c %08x, data has %08x): the file is corrupt",
                  f->path, t->name, t->crc, crc);
    return s;
}

const char *zero_st_metadata(const zero_st_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (int i = 0; i < f->nm; i++)
        if (!strcmp(f->mkey[i], key)) return f->mval[i];
    return NULL;
}

int zero_st_metadata_count(const zero_st_file *f) { return f ? f->nm : 0; }

void zero_st_metadata_at(const zero_st_file *f, int i, const char **key, const char **value) {
    int ok = f && i >= 0 && i < f->nm;
    if (key) *key = ok ? f->mkey[i] : NULL;
    if (value) *value = ok ? f->mval[i] : NULL;
}
