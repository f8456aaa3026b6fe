/* The streaming safetensors writer: declare every tensor, then append the data in order; the
 * checksums are computed on the way and the header is written last. Layout: zero/ckpt.h. */
#include "ckpt/internal.h"

#include <stdarg.h>
#include <string.h>
#include <unistd.h>

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
    zero_io_dir *dir;     /* where the file goes: every name below is relative to it */
    int own_dir;
    char *name, *tmp;     /* NAME and NAME.tmp in dir */
    char *path;           /* DIR/NAME, for messages */
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

/* The writer of NAME in dir: io and dir are the writer's to free when own_* (also on failure). */
static zero_status create_in(zero_st_writer **out, zero_io *io, int own_io, zero_io_dir *dir, int own_dir,
                             const char *name, zero_error *err) {
    zero_st_writer *w = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *w);
    const size_t n = strlen(name), plen = strlen(zero_io_dir_path(dir)) + 1 + n + 1;
    if (w) {
        w->io = io;
        w->own_io = own_io;
        w->dir = dir;
        w->own_dir = own_dir;
        w->name = zero__strdup(name);
        w->tmp = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, n + 5);
        w->path = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, plen);
    }
    if (!w || !w->name || !w->tmp || !w->path) {
        if (err) ZERO__ERR(err, "safetensors writer %s: out of memory", name);
        zero_st_writer_free(w);
        if (!w && own_dir) zero_io_dir_close(dir);
        if (!w && own_io) zero_io_free(io);
        return ZERO_ERR_NOMEM;
    }
    snprintf(w->tmp, n + 5, "%s.tmp", name);
    snprintf(w->path, plen, "%s/%s", zero_io_dir_path(dir), name);
    /* a leftover NAME.tmp (or a symbolic link planted there) goes, never what it points to; the
     * file is then created exclusively: nothing that appears meanwhile is followed or truncated */
    (void)zero_io_unlink_at(dir, w->tmp, 1);
    zero_status s = zero_io_open_at(dir, w->tmp, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_EXCL | ZERO_IO_NOFOLLOW, &w->f);
    if (s != ZERO_OK) {
        if (err) ZERO__ERR(err, "%s", zero_io_last_error(io));
        w->state = W_DONE; /* nothing of ours to remove */
        zero_st_writer_free(w);
        return s;
    }
    *out = w;
    return ZERO_OK;
}

zero_status zero_st_writer_create(zero_st_writer **out, zero_io *io, const char *path, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    const char *slash = path ? strrchr(path, '/') : NULL;
    const char *name = slash ? slash + 1 : path;
    if (!path || !*name || strlen(path) >= 4096) {
        if (err) ZERO__ERR(err, "safetensors writer: path '%.200s': expected a file name, at most 4095 bytes", path ? path : "");
        return ZERO_ERR_INVALID_ARG;
    }
    char parent[4096];
    if (!slash) snprintf(parent, sizeof parent, ".");
    else if (slash == path) snprintf(parent, sizeof parent, "/");
    else snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
    int own_io = 0;
    zero_status s = ZERO_OK;
    if (!io) {
        s = zero_io_create_default(&io, err);
        if (s != ZERO_OK) return s;
        own_io = 1;
    }
    /* the directory as the caller names it; the file inside it is never reached through a link */
    zero_io_dir *dir = NULL;
    s = zero_io_dir_open(io, parent, 0, &dir);
    if (s != ZERO_OK) {
        if (err) ZERO__ERR(err, "%s: %s", path, zero_io_last_error(io));
        if (own_io) zero_io_free(io);
        return s;
    }
    return create_in(out, io, own_io, dir, 1, name, err);
}

zero_status zero_st_writer_create_at(zero_st_writer **out, zero_io_dir *dir, const char *name, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!dir || !name || !*name) {
        if (err) ZERO__ERR(err, "safetensors writer: expected a directory and a file name");
        return ZERO_ERR_INVALID_ARG;
    }
    return create_in(out, zero_io_dir_io(dir), 0, dir, 0, name, err);
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
    int64_t nb = zero__st_shape_bytes(shape, ndim, zero_dtype_size(dt), NULL);
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
    if (!key || !*key || !value || !strncmp(key, ZERO__ST_CRC_PREFIX, strlen(ZERO__ST_CRC_PREFIX)))
        return wfail(w, ZERO_ERR_INVALID_ARG, "%s: metadata key '%s': expected a non-empty key and a value; "
                     "keys starting with '" ZERO__ST_CRC_PREFIX "' are the writer's", w->path, key ? key : "");
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
        zero__sbuf_put(b, "\"" ZERO__ST_CRC_PREFIX, 1 + strlen(ZERO__ST_CRC_PREFIX));
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
    w->stage = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, ZERO__ST_STAGE_BYTES);
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
        if (w->stage_len == 0 && k >= ZERO__ST_STAGE_BYTES) {
            zero_status s = zero_io_pwrite(w->f, p, k, w->stage_off);
            if (s != ZERO_OK) return wfail_io(w, s);
            w->stage_off += k;
        } else {
            size_t done = 0;
            while (done < k) {
                size_t c = ZERO__ST_STAGE_BYTES - w->stage_len;
                if (c > k - done) c = k - done;
                memcpy(w->stage + w->stage_len, p + done, c);
                w->stage_len += c;
                done += c;
                if (w->stage_len == ZERO__ST_STAGE_BYTES) {
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
    s = zero_io_rename_at(w->dir, w->tmp, w->dir, w->name);
    if (s != ZERO_OK) return wfail_io(w, s);
    s = zero_io_dir_fsync(w->dir);
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
    if (w->state != W_DONE) (void)zero_io_unlink_at(w->dir, w->tmp, 1);
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
    zero_mem_free(NULL, w->name);
    zero_mem_free(NULL, w->tmp);
    if (w->own_dir) zero_io_dir_close(w->dir);
    if (w->own_io) zero_io_free(w->io);
    zero_mem_free(NULL, w);
}

const char *zero_st_writer_last_error(const zero_st_writer *w) { return w ? w->err : "no writer"; }

uint64_t zero_st_writer_file_size(const zero_st_writer *w) {
    return w && w->state != W_DECLARING ? 8 + w->header_len + w->data_total : 0;
}
