/* The streaming GGUF writer (version 3) and the Q8_0 block format: metadata and tensor infos are
 * declared, the header is written at the first data byte, the data streams in declaration order
 * with the padding between tensors added here. Layout: zero/gguf.h. */
#include "ckpt/internal.h"
#include "zero/gguf.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

enum { GV_U32 = 4, GV_I32 = 5, GV_F32 = 6, GV_BOOL = 7, GV_STRING = 8, GV_ARRAY = 9 };
enum { G_DECLARING = 0, G_WRITING, G_DONE, G_FAILED };
#define GGUF_MAX_NAME 64 /* ggml's GGML_MAX_NAME, the terminating NUL included */

typedef struct gtensor {
    char *name;
    zero_gguf_type type;
    int ndim;
    uint64_t ne[ZERO_GGUF_MAX_DIMS]; /* innermost first */
    uint64_t nbytes, offset;         /* offset from the data section's start */
} gtensor;

struct zero_gguf_writer {
    zero_io *io;
    int own_io;
    zero_io_dir *dir;
    char *name, *tmp, *path;
    zero_io_file *f;
    zero__sbuf kv; /* the metadata pairs, encoded */
    uint64_t nkv;
    char **keys;
    gtensor *t;
    int nt, cap_t, cap_k;
    int state;
    uint64_t data_start, data_total; /* the data section: where it starts, its bytes (padding included) */
    uint64_t bytes_total, written;   /* the tensors' bytes (padding left out): declared, written */
    int cur;                         /* the tensor receiving the next byte */
    uint64_t cur_done, pos;          /* its bytes written; the file offset of the next byte */
    unsigned char *stage;
    size_t stage_len;
    uint64_t stage_off;
    char err[512];
};

const char *zero_gguf_type_name(zero_gguf_type t) {
    switch (t) {
    case ZERO_GGUF_F32: return "F32";
    case ZERO_GGUF_F16: return "F16";
    case ZERO_GGUF_Q8_0: return "Q8_0";
    case ZERO_GGUF_BF16: return "BF16";
    }
    return NULL;
}

uint64_t zero_gguf_type_bytes(zero_gguf_type t, uint64_t n) {
    switch (t) {
    case ZERO_GGUF_F32: return 4 * n;
    case ZERO_GGUF_F16:
    case ZERO_GGUF_BF16: return 2 * n;
    case ZERO_GGUF_Q8_0: return n / ZERO_GGUF_Q8_0_BLOCK * 34;
    }
    return 0;
}

void zero_gguf_q8_0_encode(const float *x, size_t n, void *out) {
    unsigned char *o = out;
    for (size_t b = 0; b + ZERO_GGUF_Q8_0_BLOCK <= n; b += ZERO_GGUF_Q8_0_BLOCK, o += 34) {
        float amax = 0.0f;
        for (int j = 0; j < ZERO_GGUF_Q8_0_BLOCK; j++) amax = fmaxf(amax, fabsf(x[b + j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t h = zero_fp32_to_fp16(d);
        o[0] = (unsigned char)h, o[1] = (unsigned char)(h >> 8);
        for (int j = 0; j < ZERO_GGUF_Q8_0_BLOCK; j++) o[2 + j] = (unsigned char)(int8_t)roundf(x[b + j] * id);
    }
}

void zero_gguf_q8_0_decode(const void *in, size_t n, float *x) {
    const unsigned char *p = in;
    for (size_t b = 0; b + ZERO_GGUF_Q8_0_BLOCK <= n; b += ZERO_GGUF_Q8_0_BLOCK, p += 34) {
        const float d = zero_fp16_to_fp32((uint16_t)(p[0] | p[1] << 8));
        for (int j = 0; j < ZERO_GGUF_Q8_0_BLOCK; j++) x[b + j] = d * (float)(int8_t)p[2 + j];
    }
}

static zero_status gfail(zero_gguf_writer *w, zero_status s, const char *fmt, ...) ZERO__PRINTF(3, 4);
static zero_status gfail(zero_gguf_writer *w, zero_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
    return s; /* a refused call changes nothing: only a failed write, fsync or rename is fatal */
}

static zero_status gfail_io(zero_gguf_writer *w, zero_status s) {
    snprintf(w->err, sizeof w->err, "%s", zero_io_last_error(w->io));
    w->state = G_FAILED;
    return s;
}

zero_status zero_gguf_writer_create(zero_gguf_writer **out, zero_io *io, const char *path, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    const char *slash = path ? strrchr(path, '/') : NULL;
    const char *name = slash ? slash + 1 : path;
    if (!path || !*name || strlen(path) >= 4096) {
        if (err)
            ZERO__ERR(err, "GGUF writer: path '%.200s': expected a file name, at most 4095 bytes", path ? path : "");
        return ZERO_ERR_INVALID_ARG;
    }
    char parent[4096];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == path) snprintf(parent, sizeof parent, "/");
    else snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    zero_gguf_writer *w = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *w);
    if (!w) {
        if (err) ZERO__ERR(err, "GGUF writer %s: out of memory", path);
        return ZERO_ERR_NOMEM;
    }
    w->state = G_DONE; /* nothing of ours to remove until the file is created */
    zero_status s = ZERO_OK;
    if (!io) {
        if ((s = zero_io_create_default(&io, err)) != ZERO_OK) {
            zero_gguf_writer_free(w);
            return s;
        }
        w->own_io = 1;
    }
    w->io = io;
    const size_t n = strlen(name);
    w->name = zero__strdup(name);
    w->path = zero__strdup(path);
    w->tmp = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, n + 5);
    if (!w->name || !w->path || !w->tmp) {
        if (err) ZERO__ERR(err, "GGUF writer %s: out of memory", path);
        zero_gguf_writer_free(w);
        return ZERO_ERR_NOMEM;
    }
    snprintf(w->tmp, n + 5, "%s.tmp", name);
    /* the directory as the caller names it; the file inside it never reached through a link */
    if ((s = zero_io_dir_open(io, parent, 0, &w->dir)) != ZERO_OK) {
        if (err) ZERO__ERR(err, "%s: %s", path, zero_io_last_error(io));
        zero_gguf_writer_free(w);
        return s;
    }
    (void)zero_io_unlink_at(w->dir, w->tmp, 1);
    s = zero_io_open_at(w->dir, w->tmp, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_EXCL | ZERO_IO_NOFOLLOW, &w->f);
    if (s != ZERO_OK) {
        if (err) ZERO__ERR(err, "%s", zero_io_last_error(io));
        zero_gguf_writer_free(w);
        return s;
    }
    w->state = G_DECLARING;
    *out = w;
    return ZERO_OK;
}

static void put_u32(zero__sbuf *b, uint32_t v) {
    char c[4];
    for (int i = 0; i < 4; i++) c[i] = (char)(unsigned char)(v >> (8 * i));
    zero__sbuf_put(b, c, 4);
}

static void put_u64(zero__sbuf *b, uint64_t v) {
    char c[8];
    for (int i = 0; i < 8; i++) c[i] = (char)(unsigned char)(v >> (8 * i));
    zero__sbuf_put(b, c, 8);
}

static void put_str(zero__sbuf *b, const char *s, size_t n) {
    put_u64(b, n);
    zero__sbuf_put(b, s, n);
}

/* Checks a new key and writes it and its type; the caller writes the value. */
static zero_status begin_kv(zero_gguf_writer *w, const char *key, uint32_t type) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (w->state != G_DECLARING || w->nt)
        return gfail(w, ZERO_ERR_STATE, "%s: metadata '%s' set after a tensor was declared", w->path, key ? key : "");
    if (!key || !*key) return gfail(w, ZERO_ERR_INVALID_ARG, "%s: an empty metadata key", w->path);
    for (uint64_t i = 0; i < w->nkv; i++)
        if (!strcmp(w->keys[i], key))
            return gfail(w, ZERO_ERR_INVALID_ARG, "%s: metadata '%s' set twice", w->path, key);
    if ((int)w->nkv == w->cap_k) {
        const int cap = w->cap_k ? 2 * w->cap_k : 32;
        char **k = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)cap * sizeof *k);
        if (!k) return gfail(w, ZERO_ERR_NOMEM, "%s: out of memory", w->path);
        if (w->nkv) memcpy(k, w->keys, (size_t)w->nkv * sizeof *k);
        zero_mem_free(NULL, w->keys);
        w->keys = k, w->cap_k = cap;
    }
    if (!(w->keys[w->nkv] = zero__strdup(key))) return gfail(w, ZERO_ERR_NOMEM, "%s: out of memory", w->path);
    w->nkv++;
    put_str(&w->kv, key, strlen(key));
    put_u32(&w->kv, type);
    return ZERO_OK;
}

static zero_status end_kv(zero_gguf_writer *w) {
    return w->kv.failed ? gfail(w, ZERO_ERR_NOMEM, "%s: out of memory building the metadata", w->path) : ZERO_OK;
}

zero_status zero_gguf_set_u32(zero_gguf_writer *w, const char *key, uint32_t v) {
    zero_status s = begin_kv(w, key, GV_U32);
    if (s) return s;
    put_u32(&w->kv, v);
    return end_kv(w);
}

zero_status zero_gguf_set_i32(zero_gguf_writer *w, const char *key, int32_t v) {
    zero_status s = begin_kv(w, key, GV_I32);
    if (s) return s;
    put_u32(&w->kv, (uint32_t)v);
    return end_kv(w);
}

zero_status zero_gguf_set_f32(zero_gguf_writer *w, const char *key, float v) {
    zero_status s = begin_kv(w, key, GV_F32);
    if (s) return s;
    uint32_t u;
    memcpy(&u, &v, 4);
    put_u32(&w->kv, u);
    return end_kv(w);
}

zero_status zero_gguf_set_bool(zero_gguf_writer *w, const char *key, int v) {
    zero_status s = begin_kv(w, key, GV_BOOL);
    if (s) return s;
    const char c = v ? 1 : 0;
    zero__sbuf_put(&w->kv, &c, 1);
    return end_kv(w);
}

zero_status zero_gguf_set_string(zero_gguf_writer *w, const char *key, const char *v) {
    if (!v)
        return w ? gfail(w, ZERO_ERR_INVALID_ARG, "%s: metadata '%s': NULL string", w->path, key ? key : "")
                 : ZERO_ERR_INVALID_ARG;
    zero_status s = begin_kv(w, key, GV_STRING);
    if (s) return s;
    put_str(&w->kv, v, strlen(v));
    return end_kv(w);
}

zero_status zero_gguf_set_strings(zero_gguf_writer *w, const char *key, const char *const *v, const size_t *lens,
                                  uint64_t n) {
    if (n && !v)
        return w ? gfail(w, ZERO_ERR_INVALID_ARG, "%s: metadata '%s': NULL array", w->path, key ? key : "")
                 : ZERO_ERR_INVALID_ARG;
    for (uint64_t i = 0; i < n; i++)
        if (!v[i])
            return gfail(w, ZERO_ERR_INVALID_ARG, "%s: metadata '%s': string %llu is NULL", w->path, key ? key : "",
                         (unsigned long long)i);
    zero_status s = begin_kv(w, key, GV_ARRAY);
    if (s) return s;
    put_u32(&w->kv, GV_STRING);
    put_u64(&w->kv, n);
    for (uint64_t i = 0; i < n; i++) put_str(&w->kv, v[i], lens ? lens[i] : strlen(v[i]));
    return end_kv(w);
}

static zero_status set_u32s(zero_gguf_writer *w, const char *key, const void *v, uint64_t n, uint32_t type) {
    if (n && !v)
        return w ? gfail(w, ZERO_ERR_INVALID_ARG, "%s: metadata '%s': NULL array", w->path, key ? key : "")
                 : ZERO_ERR_INVALID_ARG;
    zero_status s = begin_kv(w, key, GV_ARRAY);
    if (s) return s;
    put_u32(&w->kv, type);
    put_u64(&w->kv, n);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, (const char *)v + 4 * i, 4);
        put_u32(&w->kv, u);
    }
    return end_kv(w);
}

zero_status zero_gguf_set_i32s(zero_gguf_writer *w, const char *key, const int32_t *v, uint64_t n) {
    return set_u32s(w, key, v, n, GV_I32);
}

zero_status zero_gguf_set_f32s(zero_gguf_writer *w, const char *key, const float *v, uint64_t n) {
    return set_u32s(w, key, v, n, GV_F32);
}

static uint64_t align_up(uint64_t x) {
    return (x + ZERO_GGUF_ALIGNMENT - 1) / ZERO_GGUF_ALIGNMENT * ZERO_GGUF_ALIGNMENT;
}

zero_status zero_gguf_add_tensor(zero_gguf_writer *w, const char *name, zero_gguf_type type, const int64_t *shape,
                                 int ndim) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (w->state != G_DECLARING)
        return gfail(w, ZERO_ERR_STATE, "%s: tensor '%s' declared after data was written", w->path, name ? name : "");
    if (!name || !*name || strlen(name) >= GGUF_MAX_NAME)
        return gfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor name '%.100s': expected 1 to %d bytes", w->path,
                     name ? name : "", GGUF_MAX_NAME - 1);
    if (!zero_gguf_type_name(type))
        return gfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor '%s': type %d is not F32, F16, BF16 or Q8_0", w->path, name,
                     (int)type);
    if (ndim < 1 || ndim > ZERO_GGUF_MAX_DIMS || !shape)
        return gfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor '%s': %d dimensions: expected 1 to %d", w->path, name, ndim,
                     ZERO_GGUF_MAX_DIMS);
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 1 || (uint64_t)shape[d] > (UINT64_C(1) << 40) / numel)
            return gfail(w, ZERO_ERR_INVALID_ARG,
                         "%s: tensor '%s': dimension %d is %lld: expected 1 or more (and a "
                         "size below 2^40 values)",
                         w->path, name, d, (long long)shape[d]);
        numel *= (uint64_t)shape[d];
    }
    if (type == ZERO_GGUF_Q8_0 && shape[ndim - 1] % ZERO_GGUF_Q8_0_BLOCK)
        return gfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor '%s': Q8_0 needs rows of a multiple of %d values, got %lld",
                     w->path, name, ZERO_GGUF_Q8_0_BLOCK, (long long)shape[ndim - 1]);
    for (int i = 0; i < w->nt; i++)
        if (!strcmp(w->t[i].name, name))
            return gfail(w, ZERO_ERR_INVALID_ARG, "%s: tensor '%s' declared twice", w->path, name);
    if (w->nt == w->cap_t) {
        const int cap = w->cap_t ? 2 * w->cap_t : 64;
        gtensor *t = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)cap * sizeof *t);
        if (!t) return gfail(w, ZERO_ERR_NOMEM, "%s: out of memory declaring '%s'", w->path, name);
        if (w->nt) memcpy(t, w->t, (size_t)w->nt * sizeof *t);
        zero_mem_free(NULL, w->t);
        w->t = t, w->cap_t = cap;
    }
    gtensor *t = &w->t[w->nt];
    memset(t, 0, sizeof *t);
    if (!(t->name = zero__strdup(name)))
        return gfail(w, ZERO_ERR_NOMEM, "%s: out of memory declaring '%s'", w->path, name);
    t->type = type;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->ne[d] = (uint64_t)shape[ndim - 1 - d];
    t->nbytes = zero_gguf_type_bytes(type, numel);
    t->offset = align_up(w->data_total);
    w->data_total = t->offset + t->nbytes;
    w->bytes_total += t->nbytes;
    w->nt++;
    return ZERO_OK;
}

/* Ends the declarations: writes the header (and its padding to the data section). */
static zero_status close_declarations(zero_gguf_writer *w) {
    zero__sbuf b = {0};
    put_u32(&b, 0x46554747u); /* "GGUF" */
    put_u32(&b, 3);
    put_u64(&b, (uint64_t)w->nt);
    put_u64(&b, w->nkv);
    zero__sbuf_put(&b, w->kv.p ? w->kv.p : "", w->kv.len);
    for (int i = 0; i < w->nt; i++) {
        const gtensor *t = &w->t[i];
        put_str(&b, t->name, strlen(t->name));
        put_u32(&b, (uint32_t)t->ndim);
        for (int d = 0; d < t->ndim; d++) put_u64(&b, t->ne[d]);
        put_u32(&b, (uint32_t)t->type);
        put_u64(&b, t->offset);
    }
    w->data_start = align_up(b.len);
    while (!b.failed && b.len < w->data_start) zero__sbuf_put(&b, "", 1);
    if (b.failed) {
        zero__sbuf_free(&b);
        return gfail(w, ZERO_ERR_NOMEM, "%s: out of memory building the header", w->path);
    }
    w->stage = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, ZERO__ST_STAGE_BYTES);
    if (!w->stage) {
        zero__sbuf_free(&b);
        return gfail(w, ZERO_ERR_NOMEM, "%s: out of memory for the 1 MiB staging buffer", w->path);
    }
    zero_status s = zero_io_pwrite(w->f, b.p, b.len, 0);
    zero__sbuf_free(&b);
    if (s != ZERO_OK) return gfail_io(w, s);
    w->state = G_WRITING;
    w->cur = 0;
    w->pos = w->stage_off = w->data_start;
    return ZERO_OK;
}

static zero_status flush_stage(zero_gguf_writer *w) {
    if (w->stage_len == 0) return ZERO_OK;
    zero_status s = zero_io_pwrite(w->f, w->stage, w->stage_len, w->stage_off);
    if (s != ZERO_OK) return gfail_io(w, s);
    w->stage_off += w->stage_len;
    w->stage_len = 0;
    return ZERO_OK;
}

/* n bytes (zeros when p is NULL) at w->pos, through the staging buffer. */
static zero_status emit(zero_gguf_writer *w, const unsigned char *p, uint64_t n) {
    while (n > 0) {
        size_t c = ZERO__ST_STAGE_BYTES - w->stage_len;
        if (c > n) c = (size_t)n;
        if (p) memcpy(w->stage + w->stage_len, p, c);
        else memset(w->stage + w->stage_len, 0, c);
        w->stage_len += c;
        if (p) p += c;
        n -= c;
        w->pos += c;
        if (w->stage_len == ZERO__ST_STAGE_BYTES) {
            zero_status s = flush_stage(w);
            if (s != ZERO_OK) return s;
        }
    }
    return ZERO_OK;
}

/* Pads up to the current tensor's start (skipping empty ones is not needed: none is empty). */
static zero_status pad_to_cur(zero_gguf_writer *w) {
    if (w->cur >= w->nt) return emit(w, NULL, w->data_start + w->data_total - w->pos);
    return emit(w, NULL, w->data_start + w->t[w->cur].offset - w->pos);
}

zero_status zero_gguf_write(zero_gguf_writer *w, const void *data, size_t n) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (w->state == G_DECLARING) {
        zero_status s = close_declarations(w);
        if (s != ZERO_OK) return s;
    }
    if (w->state != G_WRITING)
        return gfail(w, ZERO_ERR_STATE, "%s: write after %s", w->path, w->state == G_DONE ? "finish" : "a failure");
    if (n && !data) return gfail(w, ZERO_ERR_INVALID_ARG, "%s: NULL data for %zu bytes", w->path, n);
    if (n > w->bytes_total - w->written)
        return gfail(w, ZERO_ERR_INVALID_ARG, "%s: %zu bytes written past the end of the declared tensors (%llu left)",
                     w->path, n, (unsigned long long)(w->bytes_total - w->written));
    w->written += n;
    const unsigned char *p = data;
    while (n > 0) {
        zero_status s = w->cur_done == 0 ? pad_to_cur(w) : ZERO_OK;
        if (s != ZERO_OK) return s;
        const gtensor *t = &w->t[w->cur];
        const uint64_t left = t->nbytes - w->cur_done, k = n < left ? n : left;
        if ((s = emit(w, p, k)) != ZERO_OK) return s;
        p += k, n -= (size_t)k;
        w->cur_done += k;
        if (w->cur_done == t->nbytes) w->cur++, w->cur_done = 0;
    }
    return ZERO_OK;
}

zero_status zero_gguf_finish(zero_gguf_writer *w) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (w->state == G_DECLARING) {
        zero_status s = close_declarations(w);
        if (s != ZERO_OK) return s;
    }
    if (w->state != G_WRITING)
        return gfail(w, ZERO_ERR_STATE, "%s: finish after %s", w->path, w->state == G_DONE ? "finish" : "a failure");
    if (w->cur < w->nt)
        return gfail(w, ZERO_ERR_STATE, "%s: finish with tensor '%s' lacking %llu of its %llu bytes", w->path,
                     w->t[w->cur].name, (unsigned long long)(w->t[w->cur].nbytes - w->cur_done),
                     (unsigned long long)w->t[w->cur].nbytes);
    zero_status s = pad_to_cur(w);
    if (s == ZERO_OK) s = flush_stage(w);
    if (s != ZERO_OK) return s;
    if ((s = zero_io_fsync(w->f)) != ZERO_OK) return gfail_io(w, s);
    s = zero_io_close(w->f);
    w->f = NULL;
    if (s != ZERO_OK) return gfail_io(w, s);
    if ((s = zero_io_rename_at(w->dir, w->tmp, w->dir, w->name)) != ZERO_OK) return gfail_io(w, s);
    if ((s = zero_io_dir_fsync(w->dir)) != ZERO_OK) return gfail_io(w, s);
    w->state = G_DONE;
    return ZERO_OK;
}

void zero_gguf_writer_free(zero_gguf_writer *w) {
    if (!w) return;
    if (w->f) (void)zero_io_close(w->f);
    if (w->state != G_DONE && w->dir) (void)zero_io_unlink_at(w->dir, w->tmp, 1);
    for (int i = 0; i < w->nt; i++) zero_mem_free(NULL, w->t[i].name);
    for (uint64_t i = 0; i < w->nkv; i++) zero_mem_free(NULL, w->keys[i]);
    zero_mem_free(NULL, w->t);
    zero_mem_free(NULL, w->keys);
    zero__sbuf_free(&w->kv);
    zero_mem_free(NULL, w->stage);
    zero_mem_free(NULL, w->name);
    zero_mem_free(NULL, w->tmp);
    zero_mem_free(NULL, w->path);
    if (w->dir) zero_io_dir_close(w->dir);
    if (w->own_io) zero_io_free(w->io);
    zero_mem_free(NULL, w);
}

const char *zero_gguf_writer_last_error(const zero_gguf_writer *w) { return w ? w->err : "no writer"; }

uint64_t zero_gguf_writer_file_size(const zero_gguf_writer *w) {
    return w && w->state != G_DECLARING ? w->data_start + w->data_total : 0;
}
