/* safetensors: a streaming writer (declare, then append data; checksums computed on the way) and
 * a reader that validates the header completely before any tensor is read. Layout: zero/ckpt.h. */
#define _GNU_SOURCE /* qsort_r */
#include "ckpt/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define STAGE_BYTES (1u << 20)
#define CRC_PREFIX "crc32c."

/* ---------------------------------------------------------------- small helpers */
char *zero__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, n);
    if (p) memcpy(p, s, n);
    return p;
}

void zero__sbuf_put(zero__sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        if (b->p) memcpy(p, b->p, b->len);
        zero_mem_free(NULL, b->p);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void zero__sbuf_printf(zero__sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->failed = 1;
        return;
    }
    zero__sbuf_put(b, tmp, (size_t)n);
}

void zero__sbuf_json_string(zero__sbuf *b, const char *s) {
    zero__sbuf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            zero__sbuf_put(b, e, 2);
        } else if (*p < 0x20) {
            zero__sbuf_printf(b, "\\u%04x", *p);
        } else {
            zero__sbuf_put(b, (const char *)p, 1);
        }
    }
    zero__sbuf_put(b, "\"", 1);
}

void zero__sbuf_free(zero__sbuf *b) {
    zero_mem_free(NULL, b->p);
    memset(b, 0, sizeof *b);
}

/* Every dtype of the format with a whole number of bytes per element. */
static const struct {
    const char *name;
    size_t size;
    zero_dtype z;
} k_dtypes[] = {
    {"F32", 4, ZERO_DTYPE_FP32},     {"BF16", 2, ZERO_DTYPE_BF16},    {"F16", 2, ZERO_DTYPE_FP16},
    {"I32", 4, ZERO_DTYPE_INT32},    {"I64", 8, ZERO_DTYPE_INT64},    {"U8", 1, ZERO_DTYPE_UINT8},
    {"F64", 8, ZERO_DTYPE_COUNT},    {"I8", 1, ZERO_DTYPE_COUNT},     {"I16", 2, ZERO_DTYPE_COUNT},
    {"U16", 2, ZERO_DTYPE_COUNT},    {"U32", 4, ZERO_DTYPE_COUNT},    {"U64", 8, ZERO_DTYPE_COUNT},
    {"BOOL", 1, ZERO_DTYPE_COUNT},   {"F8_E4M3", 1, ZERO_DTYPE_COUNT}, {"F8_E5M2", 1, ZERO_DTYPE_COUNT},
    {"F8_E8M0", 1, ZERO_DTYPE_COUNT},
};
#define NDTYPES (sizeof k_dtypes / sizeof k_dtypes[0])

const char *zero_st_dtype_name(zero_dtype dt) {
    for (size_t i = 0; i < NDTYPES; i++)
        if (k_dtypes[i].z == dt && dt != ZERO_DTYPE_COUNT) return k_dtypes[i].name;
    return NULL;
}

/* Product of dims times elem, or -1 on overflow past 2^62. */
static int64_t shape_bytes(const int64_t *shape, int ndim, size_t elem, uint64_t *numel) {
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return -1;
        if (shape[d] && n > (UINT64_C(1) << 62) / (uint64_t)shape[d]) return -1;
        n *= (uint64_t)shape[d];
    }
    if (n && n > (UINT64_C(1) << 62) / elem) return -1;
    if (numel) *numel = n;
    return (int64_t)(n * elem);
}

static const char *dir_of(const char *path, char *buf, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) return ".";
    size_t n = (size_t)(slash - path);
    if (n == 0) return "/";
    if (n >= cap) n = cap - 1;
    memcpy(buf, path, n);
    buf[n] = 0;
    return buf;
}

/* ================================================================ writer */
typedef struct wtensor {
    char *name;
    zero_dtype dt;
    int ndim;
    int64_t shape[ZERO_ST_MAX_DIMS];
    uint64_t begin, nbytes;
    uint32_t crc;
} wtensor;

enum { W_DECLARING = 0, W_WRITING, W_DONE, W_FAILED };

struct zero_st_writer {
    zero_io *io;
    int own_io;
    char *path, *tmp;
    zero_io_file *f;
    wtensor *t;
    int nt, cap_t;
    char **mkey, **mval;
    int nm, cap_m;
    int state;
    uint64_t header_len;  /* N: the JSON with its padding */
    uint64_t data_total, written;
    int cur;              /* tensor receiving the next byte */
    uint64_t cur_done;    /* its bytes written so far */
    unsigned char *stage;
    size_t stage_len;
    uint64_t stage_off;   /* file offset of stage[0] */
    char err[512];
};

static zero_status wfail(zero_st_writer *w, zero_status s, const char *fmt, ...) ZERO__PRINTF(3, 4);
static zero_status wfail(zero_st_writer *w, zero_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
    return s; /* a refused call changes nothing: only a failed write, fsync or rename is fatal */
}

static zero_status wfail_io(zero_st_writer *w, zero_status s) {
    snprintf(w->err, sizeof w->err, "%s", zero_io_last_error(w->io));
    w->state = W_FAILED;
    return s;
}

zero_status zero_st_writer_create(zero_st_writer **out, zero_io *io, const char *path, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!path || !*path) {
        if (err) ZERO__ERR(err, "safetensors writer: empty path");
        return ZERO_ERR_INVALID_ARG;
    }
    zero_st_writer *w = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *w);
    if (!w) goto nomem;
    w->path = zero__strdup(path);
    w->tmp = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, strlen(path) + 5);
    if (!w->path || !w->tmp) goto nomem_w;
    snprintf(w->tmp, strlen(path) + 5, "%s.tmp", path);
    zero_status s = ZERO_OK;
    if (io) {
        w->io = io;
    } else {
        s = zero_io_create_default(&w->io, err);
        if (s != ZERO_OK) goto fail_w;
        w->own_io = 1;
    }
    s = zero_io_open(w->io, w->tmp, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &w->f);
    if (s != ZERO_OK) {
        if (err) ZERO__ERR(err, "%s", zero_io_last_error(w->io));
        goto fail_w;
    }
    *out = w;
    return ZERO_OK;
nomem_w:
    s = ZERO_ERR_NOMEM;
    if (err) ZERO__ERR(err, "safetensors writer %s: out of memory", path);
fail_w:
    if (w->own_io) zero_io_free(w->io);
    zero_mem_free(NULL, w->path);
    zero_mem_free(NULL, w->tmp);
    zero_mem_free(NULL, w);
    return s;
nomem:
    if (err) ZERO__ERR(err, "safetensors writer %s: out of memory", path);
    return ZERO_ERR_NOMEM;
}

static int name_taken(const zero_st_writer *w, const char *name) {
    for (int i = 0; i < w->nt; i++)
        if (!strcmp(w->t[i].name, name)) return 1;
    return 0;
}

zero_status zero_st_writer_add(zero_st_writer *w, const char *name, zero_dtype dt, const int64_t *shape,
                               int ndim) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (w->state != W_DECLARING)
        return wfail(w, ZERO_ERR_STATE, "%s: tensor '%s' declared after data was written; declare every tensor first",
                     w->path, name ? name : "");
    if (!name || !*name || !strcmp(name, "__metadata__"))
        return wfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor name '%s': expected a non-empty name other than __metadata__",
                     w->path, name ? name : "");
    if (!zero_st_dtype_name(dt))
        return wfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor '%s': dtype %d is not one of fp32, bf16, fp16, int32, int64, uint8",
                     w->path, name, (int)dt);
    if (ndim < 0 || ndim > ZERO_ST_MAX_DIMS || (ndim > 0 && !shape))
        return wfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor '%s': ndim %d: expected 0..%d with a shape", w->path,
                     name, ndim, ZERO_ST_MAX_DIMS);
    int64_t nb = shape_bytes(shape, ndim, zero_dtype_size(dt), NULL);
    if (nb < 0)
        return wfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor '%s': a dimension is negative or the size overflows",
                     w->path, name);
    if (name_taken(w, name))
        return wfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor '%s' declared twice", w->path, name);
    if (w->nt == w->cap_t) {
        int cap = w->cap_t ? 2 * w->cap_t : 16;
        wtensor *t = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)cap * sizeof *t);
        if (!t) return wfail(w, ZERO_ERR_NOMEM, "%s: out of memory declaring '%s'", w->path, name);
        if (w->t) memcpy(t, w->t, (size_t)w->nt * sizeof *t);
        zero_mem_free(NULL, w->t);
        w->t = t;
        w->cap_t = cap;
    }
    wtensor *t = &w->t[w->nt];
    memset(t, 0, sizeof *t);
    t->name = zero__strdup(name);
    if (!t->name) return wfail(w, ZERO_ERR_NOMEM, "%s: out of memory declaring '%s'", w->path, name);
    t->dt = dt;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->nbytes = (uint64_t)nb;
    t->begin = w->data_total;
    w->data_total += t->nbytes;
    w->nt++;
    return ZERO_OK;
}

zero_status zero_st_writer_set_metadata(zero_st_writer *w, const char *key, const char *value) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (w->state != W_DECLARING)
        return wfail(w, ZERO_ERR_STATE, "%s: metadata '%s' set after data was written", w->path, key ? key : "");
    if (!key || !*key || !value || !strncmp(key, CRC_PREFIX, strlen(CRC_PREFIX)))
        return wfail(w, ZERO_ERR_INVALID_ARG, "%s: metadata key '%s': expected a non-empty key and a value; "
                     "keys starting with '" CRC_PREFIX "' are the writer's", w->path, key ? key : "");
    for (int i = 0; i < w->nm; i++) {
        if (!strcmp(w->mkey[i], key)) {
            char *v = zero__strdup(value);
            if (!v) return wfail(w, ZERO_ERR_NOMEM, "%s: out of memory", w->path);
            zero_mem_free(NULL, w->mval[i]);
            w->mval[i] = v;
            return ZERO_OK;
        }
    }
    if (w->nm == w->cap_m) {
        int cap = w->cap_m ? 2 * w->cap_m : 8;
        char **k = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)cap * sizeof *k);
        char **v = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)cap * sizeof *v);
        if (!k || !v) {
            zero_mem_free(NULL, k);
            zero_mem_free(NULL, v);
            return wfail(w, ZERO_ERR_NOMEM, "%s: out of memory", w->path);
        }
        if (w->nm) {
            memcpy(k, w->mkey, (size_t)w->nm * sizeof *k);
            memcpy(v, w->mval, (size_t)w->nm * sizeof *v);
        }
        zero_mem_free(NULL, w->mkey);
        zero_mem_free(NULL, w->mval);
        w->mkey = k;
        w->mval = v;
        w->cap_m = cap;
    }
    w->mkey[w->nm] = zero__strdup(key);
    w->mval[w->nm] = zero__strdup(value);
    if (!w->mkey[w->nm] || !w->mval[w->nm]) {
        zero_mem_free(NULL, w->mkey[w->nm]);
        zero_mem_free(NULL, w->mval[w->nm]);
        return wfail(w, ZERO_ERR_NOMEM, "%s: out of memory", w->path);
    }
    w->nm++;
    return ZERO_OK;
}

/* The header JSON without padding. The checksums are fixed-width hex, so the text has the same
 * length before (zeros) and after streaming: the data offset is known up front. */
static void build_header(const zero_st_writer *w, zero__sbuf *b) {
    zero__sbuf_put(b, "{\"__metadata__\":{", 17);
    for (int i = 0; i < w->nm; i++) {
        if (i) zero__sbuf_put(b, ",", 1);
        zero__sbuf_json_string(b, w->mkey[i]);
        zero__sbuf_put(b, ":", 1);
        zero__sbuf_json_string(b, w->mval[i]);
    }
    for (int i = 0; i < w->nt; i++) {
        if (i || w->nm) zero__sbuf_put(b, ",", 1);
        zero__sbuf_put(b, "\"" CRC_PREFIX, 1 + strlen(CRC_PREFIX));
        /* the key is "crc32c." + name, escaped as one string: drop the opening quote of the name */
        zero__sbuf b2 = {0};
        zero__sbuf_json_string(&b2, w->t[i].name);
        if (b2.failed) {
            ((zero__sbuf *)b)->failed = 1;
            zero__sbuf_free(&b2);
            return;
        }
        zero__sbuf_put(b, b2.p + 1, b2.len - 1);
        zero__sbuf_free(&b2);
        zero__sbuf_printf(b, ":\"%08x\"", w->t[i].crc);
    }
    zero__sbuf_put(b, "}", 1);
    for (int i = 0; i < w->nt; i++) {
        const wtensor *t = &w->t[i];
        zero__sbuf_put(b, ",", 1);
        zero__sbuf_json_string(b, t->name);
        zero__sbuf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", zero_st_dtype_name(t->dt));
        for (int d = 0; d < t->ndim; d++) zero__sbuf_printf(b, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        zero__sbuf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)t->begin,
                          (unsigned long long)(t->begin + t->nbytes));
    }
    zero__sbuf_put(b, "}", 1);
}

/* Ends the declarations: sizes the header, allocates the staging buffer. */
static zero_status close_declarations(zero_st_writer *w) {
    zero__sbuf b = {0};
    build_header(w, &b);
    if (b.failed) {
        zero__sbuf_free(&b);
        return wfail(w, ZERO_ERR_NOMEM, "%s: out of memory building the header", w->path);
    }
    w->header_len = (b.len + 7) / 8 * 8;
    zero__sbuf_free(&b);
    if (w->header_len > ZERO_ST_MAX_HEADER)
        return wfail(w, ZERO_ERR_INVALID_ARG, "%s: header of %llu bytes exceeds the format's limit of %u",
                     w->path, (unsigned long long)w->header_len, ZERO_ST_MAX_HEADER);
    w->stage = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, STAGE_BYTES);
    if (!w->stage) return wfail(w, ZERO_ERR_NOMEM, "%s: out of memory for the 1 MiB staging buffer", w->path);
    w->stage_off = 8 + w->header_len;
    w->state = W_WRITING;
    w->cur = 0;
    while (w->cur < w->nt && w->t[w->cur].nbytes == 0) w->cur++;
    return ZERO_OK;
}

static zero_status flush_stage(zero_st_writer *w) {
    if (w->stage_len == 0) return ZERO_OK;
    zero_status s = zero_io_pwrite(w->f, w->stage, w->stage_len, w->stage_off);
    if (s != ZERO_OK) return wfail_io(w, s);
    w->stage_off += w->stage_len;
    w->stage_len = 0;
    return ZERO_OK;
}

zero_status zero_st_writer_write(zero_st_writer *w, const void *data, size_t n) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (w->state == W_DECLARING) {
        zero_status s = close_declarations(w);
        if (s != ZERO_OK) return s;
    }
    if (w->state != W_WRITING)
        return wfail(w, ZERO_ERR_STATE, "%s: write after %s", w->path, w->state == W_DONE ? "finish" : "a failure");
    if (n && !data) return wfail(w, ZERO_ERR_INVALID_ARG, "%s: NULL data for %zu bytes", w->path, n);
    if (n > w->data_total - w->written)
        return wfail(w, ZERO_ERR_INVALID_ARG, "%s: %zu bytes written past the end of the declared data (%llu left)",
                     w->path, n, (unsigned long long)(w->data_total - w->written));
    const unsigned char *p = data;
    while (n > 0) {
        wtensor *t = &w->t[w->cur];
        uint64_t left = t->nbytes - w->cur_done;
        size_t k = n < left ? n : (size_t)left;
        t->crc = zero_crc32c(t->crc, p, k);
        /* Large pieces skip the staging copy; small ones are gathered into 1 MiB writes. */
        if (w->stage_len == 0 && k >= STAGE_BYTES) {
            zero_status s = zero_io_pwrite(w->f, p, k, w->stage_off);
            if (s != ZERO_OK) return wfail_io(w, s);
            w->stage_off += k;
        } else {
            size_t done = 0;
            while (done < k) {
                size_t c = STAGE_BYTES - w->stage_len;
                if (c > k - done) c = k - done;
                memcpy(w->stage + w->stage_len, p + done, c);
                w->stage_len += c;
                done += c;
                if (w->stage_len == STAGE_BYTES) {
                    zero_status s = flush_stage(w);
                    if (s != ZERO_OK) return s;
                }
            }
        }
        p += k;
        n -= k;
        w->written += k;
        w->cur_done += k;
        if (w->cur_done == t->nbytes) {
            w->cur++;
            w->cur_done = 0;
            while (w->cur < w->nt && w->t[w->cur].nbytes == 0) w->cur++;
        }
    }
    return ZERO_OK;
}

zero_status zero_st_writer_finish(zero_st_writer *w) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (w->state == W_DECLARING) {
        zero_status s = close_declarations(w);
        if (s != ZERO_OK) return s;
    }
    if (w->state != W_WRITING)
        return wfail(w, ZERO_ERR_STATE, "%s: finish after %s", w->path, w->state == W_DONE ? "finish" : "a failure");
    if (w->written != w->data_total) {
        const wtensor *t = &w->t[w->cur];
        return wfail(w, ZERO_ERR_STATE, "%s: finish with %llu of %llu data bytes written: tensor '%s' lacks %llu bytes",
                     w->path, (unsigned long long)w->written, (unsigned long long)w->data_total, t->name,
                     (unsigned long long)(t->nbytes - w->cur_done));
    }
    zero_status s = flush_stage(w);
    if (s != ZERO_OK) return s;
    /* The length and the header (checksums filled in) go last, in one write. */
    zero__sbuf b = {0};
    char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (char)(unsigned char)(w->header_len >> (8 * i));
    zero__sbuf_put(&b, len8, 8);
    build_header(w, &b);
    while (!b.failed && b.len < 8 + w->header_len) zero__sbuf_put(&b, " ", 1);
    if (b.failed || b.len != 8 + w->header_len) {
        int nomem = b.failed;
        zero__sbuf_free(&b);
        return wfail(w, nomem ? ZERO_ERR_NOMEM : ZERO_ERR_INTERNAL, "%s: could not rebuild the header", w->path);
    }
    s = zero_io_pwrite(w->f, b.p, b.len, 0);
    zero__sbuf_free(&b);
    if (s == ZERO_OK) s = zero_io_fsync(w->f);
    if (s != ZERO_OK) return wfail_io(w, s);
    s = zero_io_close(w->f);
    w->f = NULL;
    if (s != ZERO_OK) return wfail_io(w, s);
    s = zero_io_rename(w->io, w->tmp, w->path);
    if (s != ZERO_OK) return wfail_io(w, s);
    char dbuf[4096];
    s = zero_io_fsync_dir(w->io, dir_of(w->path, dbuf, sizeof dbuf));
    if (s != ZERO_OK) return wfail_io(w, s);
    w->state = W_DONE;
    return ZERO_OK;
}

void zero_st_writer_free(zero_st_writer *w) {
    if (!w) return;
    if (w->f) {
        (void)zero_io_close(w->f);
        w->f = NULL;
    }
    if (w->state != W_DONE) (void)zero_io_unlink(w->io, w->tmp, 1);
    for (int i = 0; i < w->nt; i++) zero_mem_free(NULL, w->t[i].name);
    for (int i = 0; i < w->nm; i++) {
        zero_mem_free(NULL, w->mkey[i]);
        zero_mem_free(NULL, w->mval[i]);
    }
    zero_mem_free(NULL, w->t);
    zero_mem_free(NULL, w->mkey);
    zero_mem_free(NULL, w->mval);
    zero_mem_free(NULL, w->stage);
    zero_mem_free(NULL, w->path);
    zero_mem_free(NULL, w->tmp);
    if (w->own_io) zero_io_free(w->io);
    zero_mem_free(NULL, w);
}

const char *zero_st_writer_last_error(const zero_st_writer *w) { return w ? w->err : "no writer"; }

uint64_t zero_st_writer_file_size(const zero_st_writer *w) {
    return w && w->state != W_DECLARING ? 8 + w->header_len + w->data_total : 0;
}

/* ================================================================ reader */
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
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        const char *ep = cJSON_GetErrorPtr();
        size_t at = ep && ep >= text && ep <= text + len ? (size_t)(ep - text) : 0;
        return rfail(f, ZERO_ERR_FORMAT, "%s: the JSON header does not parse (near byte %zu of %zu)", P, at, len);
    }
    zero_status s = ZERO_ERR_FORMAT;
    for (const char *q = end; q < text + len; q++) {
        if (*q != ' ' && *q != '\n' && *q != '\r' && *q != '\t') {
            rfail(f, s, "%s: unexpected bytes after the JSON header (at byte %zu of %zu): only spaces may pad it", P,
                  (size_t)(q - text), len);
            goto out;
        }
    }
    if (!cJSON_IsObject(root)) {
        rfail(f, s, "%s: the header is not a JSON object", P);
        goto out;
    }
    int nt = 0, nm = 0;
    const cJSON *meta = NULL;
    for (const cJSON *it = root->child; it; it = it->next) {
        if (!strcmp(it->string, "__metadata__")) {
            if (meta) {
                rfail(f, s, "%s: two __metadata__ entries", P);
                goto out;
            }
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
        size_t k = 0;
        while (k < NDTYPES && strcmp(k_dtypes[k].name, dt->valuestring)) k++;
        if (k == NDTYPES) {
            rfail(f, s, "%s: tensor '%s': dtype '%.32s' is not one of F32, BF16, F16, F64, I8, I16, I32, I64, U8, "
                  "U16, U32, U64, BOOL, F8_E4M3, F8_E5M2, F8_E8M0", P, name, dt->valuestring);
            goto out;
        }
        t->dtype = k_dtypes[k].name;
        t->zdtype = k_dtypes[k].z;
        t->elem_size = k_dtypes[k].size;
        int nd = cJSON_GetArraySize(sh);
        if (nd > ZERO_ST_MAX_DIMS) {
            rfail(f, s, "%s: tensor '%s' has %d dimensions: at most %d are supported", P, name, nd, ZERO_ST_MAX_DIMS);
            goto out;
        }
        t->ndim = 0;
        for (const cJSON *d = sh->child; d; d = d->next) {
            uint64_t v;
            if (!json_u64(d, &v)) {
                rfail(f, s, "%s: tensor '%s': shape entry %d is not a whole number >= 0", P, name, t->ndim);
                goto out;
            }
            t->shape[t->ndim++] = (int64_t)v;
        }
        uint64_t b = 0, e = 0;
        if (cJSON_GetArraySize(off) != 2 || !json_u64(off->child, &b) || !json_u64(off->child->next, &e)) {
            rfail(f, s, "%s: tensor '%s': data_offsets must be two whole numbers [begin, end]", P, name);
            goto out;
        }
        if (e < b) {
            rfail(f, s, "%s: tensor '%s': data_offsets [%llu, %llu] end before they begin", P, name,
                  (unsigned long long)b, (unsigned long long)e);
            goto out;
        }
        int64_t nb = shape_bytes(t->shape, t->ndim, t->elem_size, &t->numel);
        if (nb < 0 || (uint64_t)nb != e - b) {
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
    for (int i = 1; i < f->nt; i++) {
        if (!strcmp(f->t[f->by_name[i]].name, f->t[f->by_name[i - 1]].name)) {
            rfail(f, s, "%s: tensor '%s' appears twice in the header", P, f->t[f->by_name[i]].name);
            goto out;
        }
    }
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
            if (strncmp(m->string, CRC_PREFIX, strlen(CRC_PREFIX)) != 0) continue;
            const char *tn = m->string + strlen(CRC_PREFIX);
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

zero_status zero_st_open(zero_st_file **out, zero_io *io, const char *path, zero_error *err) {
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
    f->path = zero__strdup(path);
    if (!f->path) {
        rfail(f, s, "%s: out of memory", path);
        goto fail;
    }
    if (io) {
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
    s = zero_io_open(f->io, path, ZERO_IO_READ, &f->f);
    if (s == ZERO_OK) s = zero_io_size(f->f, &f->size);
    if (s != ZERO_OK) {
        rfail(f, s, "%s", zero_io_last_error(f->io));
        goto fail;
    }
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
    size_t cap = t->nbytes < STAGE_BYTES ? (size_t)t->nbytes : STAGE_BYTES;
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
