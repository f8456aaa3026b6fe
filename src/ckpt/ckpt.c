/* Sharded checkpoints: per-rank writers into a staging directory, rank 0's commit (manifest,
 * COMMIT, atomic publication, `latest`), and the reader that reshards while it reads. */
#include "ckpt/internal.h"
#include "zero/partition.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096
#define CONVERT_CHUNK 65536 /* elements converted per staging step when reading bf16/fp16 as fp32 */

#define COMMIT_NAME ZERO__CKPT_COMMIT
#define MANIFEST_NAME ZERO__CKPT_MANIFEST
#define LATEST_NAME ZERO__CKPT_LATEST

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *p, uint64_t *size) {
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    if (size) *size = (uint64_t)st.st_size;
    return 1;
}

static int exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

/* dst = a/b; 0 (and dst empty) when it does not fit. */
static int join(char *dst, size_t cap, const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    if (na + 1 + nb + 1 > cap) {
        if (cap) dst[0] = 0;
        return 0;
    }
    memcpy(dst, a, na);
    dst[na] = '/';
    memcpy(dst + na + 1, b, nb + 1);
    return 1;
}

/* Reads a whole small file (at most `max` bytes) into a NUL-terminated zero_mem buffer. */
static zero_status read_small(zero_io *io, const char *path, uint64_t max, char **out, size_t *len, char *err, size_t cap) {
    *out = NULL;
    zero_io_file *f = NULL;
    uint64_t size = 0;
    zero_status s = zero_io_open(io, path, ZERO_IO_READ, &f);
    if (s == ZERO_OK) s = zero_io_size(f, &size);
    if (s != ZERO_OK) {
        snprintf(err, cap, "%s", zero_io_last_error(io));
        zero_io_close(f);
        return s;
    }
    if (size > max) {
        zero_io_close(f);
        snprintf(err, cap, "%s: %llu bytes is more than the %llu expected", path, (unsigned long long)size,
                 (unsigned long long)max);
        return ZERO_ERR_FORMAT;
    }
    char *b = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)size + 1);
    if (!b) {
        zero_io_close(f);
        snprintf(err, cap, "%s: out of memory", path);
        return ZERO_ERR_NOMEM;
    }
    s = zero_io_pread(f, b, (size_t)size, 0);
    if (s != ZERO_OK) snprintf(err, cap, "%s", zero_io_last_error(io));
    zero_io_close(f);
    if (s != ZERO_OK) {
        zero_mem_free(NULL, b);
        return s;
    }
    b[size] = 0;
    *out = b;
    if (len) *len = (size_t)size;
    return ZERO_OK;
}

/* ================================================================ reader */
struct zero_ckpt {
    zero_io *io;
    int own_io;
    char dir[PATH_CAP];
    char *text;           /* manifest.json */
    zero__manifest m;
    zero_st_file **files; /* world entries */
    int **index;          /* index[r][i]: tensor i's index in file r */
    char note[1024];      /* what open chose that the caller should say ("" when nothing) */
    char err[1024];
};

static zero_status cfail(zero_ckpt *c, zero_status s, const char *fmt, ...) ZERO__PRINTF(3, 4);
static zero_status cfail(zero_ckpt *c, zero_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return s;
}

/* The files and directories a checkpoint names follow docs/SECURITY.md's rule 1: a regular file
 * (a directory), or a symbolic link resolving to one inside the directory that names it. The
 * message never quotes what an entry holds. */
static zero_status in_dir(zero_ckpt *c, const char *dir, const char *name, int want_dir, char *out, size_t cap) {
    zero_error e;
    zero_status s = zero__path_in_dir_kind(dir, name, want_dir, out, cap, &e);
    if (s != ZERO_OK) cfail(c, s, "checkpoint %s: %s", dir, e.msg);
    return s;
}

/* The committed step directory of `save` with the highest step (its COMMIT's mtime in *mtime),
 * among those whose step is above `above` and whose COMMIT is newer than `newer_than` ns; 0 when
 * there is none. */
static int newest_committed(const char *save, int64_t above, int64_t newer_than, char *name, size_t cap, int64_t *step_out) {
    DIR *d = opendir(save);
    if (!d) return 0;
    int found = 0;
    int64_t best = -1;
    struct dirent *e;
    char p[PATH_CAP], q[PATH_CAP];
    while ((e = readdir(d)) != NULL) {
        int64_t step;
        int suffix;
        if (!zero__ckpt_step_name(e->d_name, &step, &suffix) || suffix == ZERO__STEP_STAGING || step <= above) continue;
        zero_error ignored;
        if (zero__path_in_dir_kind(save, e->d_name, 1, p, sizeof p, &ignored) != ZERO_OK) continue;
        struct stat st;
        if (zero__path_in_dir_kind(p, COMMIT_NAME, 0, q, sizeof q, &ignored) != ZERO_OK || stat(q, &st) != 0) continue;
        const int64_t t = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        if (t <= newer_than || (found && step <= best)) continue;
        best = step;
        found = 1;
        snprintf(name, cap, "%.63s", e->d_name); /* a step name: at most 22 bytes */
    }
    closedir(d);
    if (found) *step_out = best;
    return found;
}

/* Follows `latest` when path is a save directory; leaves the step directory in c->dir. A step
 * committed after `latest` was written (a run stopped between publishing it and replacing
 * `latest`) is taken instead, with a note; so is the newest committed step when `latest` is missing. */
static zero_status resolve(zero_ckpt *c, const char *path) {
    char p[PATH_CAP];
    if (!is_dir(path)) {
        struct stat st;
        if (stat(path, &st) != 0)
            return cfail(c, ZERO_ERR_IO, "checkpoint %s: %s", path, strerror(errno));
        return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: not a directory", path);
    }
    if ((join(p, sizeof p, path, MANIFEST_NAME) && exists(p)) || (join(p, sizeof p, path, COMMIT_NAME) && exists(p))) {
        snprintf(c->dir, sizeof c->dir, "%s", path);
        return ZERO_OK;
    }
    char name[64] = "";
    int64_t step = -1, newer = -1;
    struct stat lst;
    const int has_latest = join(p, sizeof p, path, LATEST_NAME) && lstat(p, &lst) == 0;
    if (has_latest) {
        if (in_dir(c, path, LATEST_NAME, 0, p, sizeof p) != ZERO_OK) return ZERO_ERR_FORMAT;
        char *line = NULL;
        zero_status s = read_small(c->io, p, 256, &line, NULL, c->err, sizeof c->err);
        if (s != ZERO_OK) return s;
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == ' ' || line[n - 1] == '\r')) line[--n] = 0;
        int suffix;
        const int ok = n && n < sizeof name && zero__ckpt_step_name(line, &step, &suffix) && suffix != ZERO__STEP_STAGING;
        if (ok) snprintf(name, sizeof name, "%s", line);
        zero_mem_free(NULL, line);
        if (!ok)
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: does not hold the name of a step directory (step_NNNNNNNN "
                         "and a newline)", p);
        struct stat st;
        if (stat(p, &st) == 0) newer = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    }
    char later[64];
    int64_t later_step = -1;
    if (newest_committed(path, step, newer, later, sizeof later, &later_step)) {
        if (has_latest)
            snprintf(c->note, sizeof c->note, "%s/latest names %s, but %s was committed after it (the run stopped "
                     "before replacing latest): opening %s", path, name, later, later);
        else
            snprintf(c->note, sizeof c->note, "%s has no latest: opening its newest committed step, %s", path, later);
        snprintf(name, sizeof name, "%s", later);
    } else if (!has_latest) {
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        int suffix;
        if (zero__ckpt_step_name(base, &step, &suffix))
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: no manifest.json and no COMMIT: the save of this step did "
                         "not complete; use an earlier checkpoint", path);
        return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: neither a step directory (manifest.json) nor a save "
                     "directory (latest, or a committed step_NNNNNNNN)", path);
    }
    if (in_dir(c, path, name, 1, c->dir, sizeof c->dir) != ZERO_OK) {
        if (!exists(c->dir))
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: latest names %s, which does not exist", path, c->dir);
        return ZERO_ERR_FORMAT;
    }
    return ZERO_OK;
}

/* Rank r's file matches the manifest: size, identity, and a slice of every tensor. */
static zero_status open_rank(zero_ckpt *c, int r) {
    char path[PATH_CAP];
    const zero__mfile *mf = &c->m.f[r];
    if (in_dir(c, c->dir, mf->name, 0, path, sizeof path) != ZERO_OK) return ZERO_ERR_FORMAT;
    uint64_t size = 0;
    if (!is_file(path, &size))
        return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: rank %d's file %s is missing", c->dir, r, path);
    if (size != mf->bytes)
        return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: %s has %llu bytes, the manifest says %llu: %s", c->dir, path,
                     (unsigned long long)size, (unsigned long long)mf->bytes, size < mf->bytes ? "truncated" : "altered");
    zero_error e2;
    zero_status s = zero_st_open(&c->files[r], c->io, path, &e2);
    if (s != ZERO_OK) return cfail(c, s, "checkpoint %s: %s", c->dir, e2.msg);
    zero_st_file *f = c->files[r];
    char want[ZERO_CKPT_ID_CHARS + 1];
    const char *keys[5] = {"zero.format_version", "zero.step", "zero.world", "zero.rank", "zero.save_id"};
    long long vals[4] = {c->m.version, (long long)c->m.step, c->m.world, r};
    for (int k = 0; k < (c->m.version >= 2 ? 5 : 4); k++) {
        if (k < 4) snprintf(want, sizeof want, "%lld", vals[k]);
        else snprintf(want, sizeof want, "%s", c->m.save_id);
        const char *got = zero_st_metadata(f, keys[k]);
        if (!got || strcmp(got, want) != 0)
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: %s: its %s is not the manifest's (%s): a file of another %s",
                         c->dir, path, keys[k], want, k == 4 ? "save (another run, or another save of this step)" : "save");
    }
    c->index[r] = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)(c->m.nt ? c->m.nt : 1) * sizeof(int));
    if (!c->index[r]) return cfail(c, ZERO_ERR_NOMEM, "checkpoint: out of memory");
    for (int i = 0; i < c->m.nt; i++) {
        const zero__mtensor *mt = &c->m.t[i];
        zero_shard sh;
        if (zero_partition_shard(mt->numel, c->m.world, r, mt->align, &sh) != 0)
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: tensor '%s' (%llu elements, align %llu) does not partition over %d ranks",
                         c->dir, mt->name, (unsigned long long)mt->numel, (unsigned long long)mt->align, c->m.world);
        int k = zero_st_find(f, mt->name);
        const zero_st_tensor *t = zero_st_tensor_at(f, k);
        if (!t)
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: %s lacks tensor '%s'", c->dir, path, mt->name);
        if (t->zdtype != mt->dtype || t->ndim != 1 || (uint64_t)t->shape[0] != sh.valid)
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: %s: tensor '%s' is %s[%lld...], expected %s[%llu] (rank %d's slice)",
                         c->dir, path, mt->name, t->dtype, t->ndim ? (long long)t->shape[0] : -1LL,
                         zero_st_dtype_name(mt->dtype), (unsigned long long)sh.valid, r);
        if (!t->has_crc)
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: %s: tensor '%s' has no checksum", c->dir, path, mt->name);
        c->index[r][i] = k;
    }
    return ZERO_OK;
}

zero_status zero_ckpt_open(zero_ckpt **out, zero_io *io, const char *path, unsigned flags, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!path || !*path || strlen(path) > PATH_CAP - 128 || (flags & ~(unsigned)ZERO_CKPT_VERIFY)) {
        if (err) ZERO__ERR(err, "checkpoint: path '%s', flags %u: expected a directory and ZERO_CKPT_VERIFY or 0",
                           path ? path : "(null)", flags);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_ckpt *c = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *c);
    if (!c) {
        if (err) ZERO__ERR(err, "checkpoint %s: out of memory", path);
        return ZERO_ERR_NOMEM;
    }
    zero_status s;
    if (io) {
        c->io = io;
    } else {
        zero_error e2;
        s = zero_io_create_default(&c->io, &e2);
        if (s != ZERO_OK) {
            cfail(c, s, "%s", e2.msg);
            goto fail;
        }
        c->own_io = 1;
    }
    s = resolve(c, path);
    if (s != ZERO_OK) goto fail;
    char p[PATH_CAP];
    join(p, sizeof p, c->dir, COMMIT_NAME);
    if (!exists(p)) {
        s = cfail(c, ZERO_ERR_FORMAT, "checkpoint %s has no COMMIT: the save did not complete (a rank failed or the "
                  "run stopped while saving); use an earlier checkpoint", c->dir);
        goto fail;
    }
    if ((s = in_dir(c, c->dir, COMMIT_NAME, 0, p, sizeof p)) != ZERO_OK) goto fail;
    if ((s = in_dir(c, c->dir, MANIFEST_NAME, 0, p, sizeof p)) != ZERO_OK) goto fail;
    size_t len = 0;
    s = read_small(c->io, p, ZERO__MANIFEST_MAX_BYTES, &c->text, &len, c->err, sizeof c->err);
    if (s != ZERO_OK) goto fail;
    s = zero__manifest_parse(c->text, len, p, &c->m, c->err, sizeof c->err);
    if (s != ZERO_OK) goto fail;
    c->files = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)c->m.world * sizeof *c->files);
    c->index = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)c->m.world * sizeof *c->index);
    if (!c->files || !c->index) {
        s = cfail(c, ZERO_ERR_NOMEM, "checkpoint %s: out of memory", c->dir);
        goto fail;
    }
    for (int r = 0; r < c->m.world && s == ZERO_OK; r++) s = open_rank(c, r);
    if (s == ZERO_OK && (flags & ZERO_CKPT_VERIFY)) s = zero_ckpt_verify(c);
    if (s != ZERO_OK) goto fail;
    *out = c;
    return ZERO_OK;
fail:
    if (err) ZERO__ERR(err, "%s", c->err);
    zero_ckpt_close(c);
    return s;
}

void zero_ckpt_close(zero_ckpt *c) {
    if (!c) return;
    for (int r = 0; c->files && r < c->m.world; r++) zero_st_close(c->files[r]);
    for (int r = 0; c->index && r < c->m.world; r++) zero_mem_free(NULL, c->index[r]);
    zero_mem_free(NULL, c->files);
    zero_mem_free(NULL, c->index);
    zero__manifest_free(&c->m);
    zero_mem_free(NULL, c->text);
    if (c->own_io) zero_io_free(c->io);
    zero_mem_free(NULL, c);
}

const char *zero_ckpt_last_error(const zero_ckpt *c) { return c ? c->err : "no checkpoint"; }
const char *zero_ckpt_dir(const zero_ckpt *c) { return c ? c->dir : ""; }
const char *zero_ckpt_note(const zero_ckpt *c) { return c ? c->note : ""; }
const char *zero_ckpt_save_id(const zero_ckpt *c) { return c ? c->m.save_id : ""; }
int64_t zero_ckpt_step(const zero_ckpt *c) { return c ? c->m.step : -1; }
int zero_ckpt_world(const zero_ckpt *c) { return c ? c->m.world : 0; }
const char *zero_ckpt_manifest(const zero_ckpt *c) { return c ? c->text : ""; }
const cJSON *zero__ckpt_manifest_json(const zero_ckpt *c) { return c ? c->m.root : NULL; }
const zero_manifest *zero_ckpt_engine_manifest(const zero_ckpt *c) { return c && c->m.has_engine ? &c->m.eng : NULL; }

void zero_ckpt_summary_get(const zero_ckpt *c, zero_ckpt_summary *s) {
    if (!s) return;
    memset(s, 0, sizeof *s);
    s->stage = s->units = s->params = -1;
    if (!c) return;
    const zero_manifest *e = zero_ckpt_engine_manifest(c);
    if (e) {
        s->stage = e->stage;
        s->precision = zero_dtype_name(e->precision);
        s->optimizer = e->optimizer;
        s->units = e->nunits;
        s->params = e->nparams;
        for (int i = 0; i < e->nunits; i++) s->unit_elements += (double)e->units[i].numel;
        for (int k = 0; k < e->nparams; k++) s->param_elements += (double)e->params[k].numel;
        return;
    }
    /* another writer's keys, where they have the engine's form */
    const cJSON *m = c->m.root;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, "stage");
    if (cJSON_IsNumber(v)) s->stage = v->valueint;
    v = cJSON_GetObjectItemCaseSensitive(m, "precision");
    if (cJSON_IsString(v)) s->precision = v->valuestring;
    v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "optimizer"), "type");
    if (cJSON_IsString(v)) s->optimizer = v->valuestring;
    const cJSON *units = cJSON_GetObjectItemCaseSensitive(m, "units");
    if (!cJSON_IsArray(units)) return;
    s->units = cJSON_GetArraySize(units);
    for (const cJSON *u = units->child; u; u = u->next) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(u, "numel");
        if (cJSON_IsNumber(n)) s->unit_elements += n->valuedouble;
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(u, "params");
        if (!cJSON_IsArray(ps)) continue;
        if (s->params < 0) s->params = 0;
        for (const cJSON *p = ps->child; p; p = p->next) {
            s->params++;
            const cJSON *shape = cJSON_GetObjectItemCaseSensitive(p, "shape");
            double x = 1;
            for (const cJSON *d = cJSON_IsArray(shape) ? shape->child : NULL; d; d = d->next) x *= d->valuedouble;
            s->param_elements += x;
        }
    }
}

zero_status zero_ckpt_user_number(const zero_ckpt *c, const char *path, double *out) {
    const cJSON *v = c ? zero__manifest_user_at(&c->m, path) : NULL;
    if (!cJSON_IsNumber(v)) return ZERO_ERR_FORMAT;
    if (out) *out = v->valuedouble;
    return ZERO_OK;
}

zero_status zero_ckpt_user_string(const zero_ckpt *c, const char *path, const char **out) {
    const cJSON *v = c ? zero__manifest_user_at(&c->m, path) : NULL;
    if (!cJSON_IsString(v)) return ZERO_ERR_FORMAT;
    if (out) *out = v->valuestring;
    return ZERO_OK;
}
zero_status zero_ckpt_user_json(const zero_ckpt *c, const char *path, char **out) {
    const cJSON *v = c ? zero__manifest_user_at(&c->m, path) : NULL;
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return ZERO_ERR_FORMAT;
    char *text = cJSON_PrintUnformatted(v);
    if (!text) return ZERO_ERR_NOMEM;
    /* the caller frees with free(): cJSON's printer may use another allocator */
    char *copy = malloc(strlen(text) + 1);
    if (copy) strcpy(copy, text);
    cJSON_free(text);
    if (!copy) return ZERO_ERR_NOMEM;
    if (out) *out = copy;
    else free(copy);
    return ZERO_OK;
}
int zero_ckpt_num_files(const zero_ckpt *c) { return c ? c->m.world : 0; }

void zero_ckpt_file_info(const zero_ckpt *c, int i, const char **name, uint64_t *bytes) {
    int ok = c && i >= 0 && i < c->m.world;
    if (name) *name = ok ? c->m.f[i].name : NULL;
    if (bytes) *bytes = ok ? c->m.f[i].bytes : 0;
}

int zero_ckpt_num_tensors(const zero_ckpt *c) { return c ? c->m.nt : 0; }

zero_status zero_ckpt_tensor_info(const zero_ckpt *c, int i, zero_ckpt_tensor *out) {
    if (!c || !out || i < 0 || i >= c->m.nt) return ZERO_ERR_INVALID_ARG;
    out->name = c->m.t[i].name;
    out->dtype = c->m.t[i].dtype;
    out->numel = c->m.t[i].numel;
    out->align = c->m.t[i].align;
    return ZERO_OK;
}

int zero_ckpt_find(const zero_ckpt *c, const char *name) {
    if (!c || !name) return -1;
    for (int i = 0; i < c->m.nt; i++)
        if (!strcmp(c->m.t[i].name, name)) return i;
    return -1;
}

/* Reads [lo, hi) of tensor `name`: raw bytes into dst (as_f32 = 0) or converted to fp32. Each
 * old rank's piece is read with one pread (fp32 or raw) or CONVERT_CHUNK elements at a time. */
static zero_status read_range(zero_ckpt *c, const char *name, uint64_t lo, uint64_t hi, void *dst, int as_f32) {
    if (!c) return ZERO_ERR_INVALID_ARG;
    int i = zero_ckpt_find(c, name);
    if (i < 0) return cfail(c, ZERO_ERR_INVALID_ARG, "checkpoint %s has no tensor '%s'", c->dir, name ? name : "(null)");
    const zero__mtensor *mt = &c->m.t[i];
    if (lo > hi || hi > mt->numel || (hi > lo && !dst))
        return cfail(c, ZERO_ERR_INVALID_ARG, "checkpoint %s: tensor '%s': range [%llu, %llu) is not inside its %llu elements",
                     c->dir, name, (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)mt->numel);
    int convert = as_f32 && mt->dtype != ZERO_DTYPE_FP32;
    if (convert && mt->dtype != ZERO_DTYPE_BF16 && mt->dtype != ZERO_DTYPE_FP16)
        return cfail(c, ZERO_ERR_INVALID_ARG, "checkpoint %s: tensor '%s' is %s, not a float type: read it with "
                     "zero_ckpt_read_range_raw", c->dir, name, zero_st_dtype_name(mt->dtype));
    size_t esz = zero_dtype_size(mt->dtype);
    size_t osz = as_f32 ? sizeof(float) : esz;
    void *stage = NULL;
    zero_status s = ZERO_OK;
    for (int r = 0; r < c->m.world && s == ZERO_OK; r++) {
        uint64_t start = 0;
        uint64_t len = zero_partition_overlap(mt->numel, c->m.world, r, mt->align, lo, hi, &start);
        if (len == 0) continue;
        zero_shard sh;
        zero_partition_shard(mt->numel, c->m.world, r, mt->align, &sh);
        zero_st_file *f = c->files[r];
        int k = c->index[r][i];
        const zero_st_tensor *t = zero_st_tensor_at(f, k);
        uint64_t local = start - sh.offset;
        char *out = (char *)dst + (start - lo) * osz;
        /* A piece that is the rank's whole slice is checked against its checksum for free. */
        int whole = local == 0 && len == sh.valid;
        uint32_t crc = 0;
        if (!convert) {
            s = zero_st_read(f, k, local * esz, out, (size_t)(len * esz));
            if (s == ZERO_OK && whole) crc = zero_crc32c(0, out, (size_t)(len * esz));
            if (s != ZERO_OK) cfail(c, s, "checkpoint %s: %s", c->dir, zero_st_last_error(f));
        } else {
            if (!stage) stage = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, CONVERT_CHUNK * esz);
            if (!stage) {
                s = cfail(c, ZERO_ERR_NOMEM, "checkpoint: out of memory for a %d-element staging buffer", CONVERT_CHUNK);
                break;
            }
            for (uint64_t at = 0; at < len && s == ZERO_OK; at += CONVERT_CHUNK) {
                size_t n = (size_t)(len - at < CONVERT_CHUNK ? len - at : CONVERT_CHUNK);
                s = zero_st_read(f, k, (local + at) * esz, stage, n * esz);
                if (s != ZERO_OK) {
                    cfail(c, s, "checkpoint %s: %s", c->dir, zero_st_last_error(f));
                    break;
                }
                if (whole) crc = zero_crc32c(crc, stage, n * esz);
                s = zero_convert(stage, mt->dtype, (float *)out + at, ZERO_DTYPE_FP32, n, ZERO_IMPL_AUTO);
                if (s != ZERO_OK) cfail(c, s, "checkpoint: converting '%s' from %s failed", name, t->dtype);
            }
        }
        if (s == ZERO_OK && whole && crc != t->crc)
            s = cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: %s: tensor '%s': checksum mismatch (stored crc32c %08x, data "
                      "has %08x): the file is corrupt", c->dir, zero_st_path(f), name, t->crc, crc);
    }
    zero_mem_free(NULL, stage);
    return s;
}

zero_status zero_ckpt_read_range(zero_ckpt *c, const char *name, uint64_t lo, uint64_t hi, float *dst) {
    return read_range(c, name, lo, hi, dst, 1);
}

zero_status zero_ckpt_read_range_raw(zero_ckpt *c, const char *name, uint64_t lo, uint64_t hi, void *dst) {
    return read_range(c, name, lo, hi, dst, 0);
}

zero_status zero_ckpt_verify(zero_ckpt *c) {
    if (!c) return ZERO_ERR_INVALID_ARG;
    for (int r = 0; r < c->m.world; r++) {
        zero_st_file *f = c->files[r];
        for (int k = 0; k < zero_st_count(f); k++) {
            zero_status s = zero_st_verify(f, k);
            if (s != ZERO_OK) return cfail(c, s, "checkpoint %s: %s", c->dir, zero_st_last_error(f));
        }
    }
    return ZERO_OK;
}
