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

static const char *const COMMIT_NAME = "COMMIT";
static const char *const MANIFEST_NAME = "manifest.json";
static const char *const LATEST_NAME = "latest";

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

/* Writes a small file durably and atomically: PATH.tmp, fsync, rename to PATH. The caller
 * fsyncs the directory. On failure the message is in err and PATH.tmp is gone. */
static zero_status write_small(zero_io *io, const char *path, const char *data, size_t n, char *err, size_t cap) {
    char tmp[PATH_CAP + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    zero_io_file *f = NULL;
    (void)unlink(tmp); /* a leftover, or a symbolic link planted there: never followed */
    zero_status s = zero_io_open(io, tmp, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_EXCL | ZERO_IO_NOFOLLOW, &f);
    if (s != ZERO_OK) {
        snprintf(err, cap, "%s", zero_io_last_error(io));
        return s;
    }
    s = zero_io_pwrite(f, data, n, 0);
    if (s == ZERO_OK) s = zero_io_fsync(f);
    if (s != ZERO_OK) snprintf(err, cap, "%s", zero_io_last_error(io));
    zero_status c = zero_io_close(f);
    if (s == ZERO_OK && c != ZERO_OK) {
        s = c;
        snprintf(err, cap, "%s", zero_io_last_error(io));
    }
    if (s == ZERO_OK) {
        s = zero_io_rename(io, tmp, path);
        if (s != ZERO_OK) snprintf(err, cap, "%s", zero_io_last_error(io));
    }
    if (s != ZERO_OK) (void)zero_io_unlink(io, tmp, 1);
    return s;
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

/* Removes a directory and everything in it (best effort; one level of files, as we write them). */
static zero_status remove_tree(zero_io *io, const char *path) {
    DIR *d = opendir(path);
    if (!d) return errno == ENOENT ? ZERO_OK : ZERO_ERR_IO;
    zero_status s = ZERO_OK;
    struct dirent *e;
    char p[PATH_CAP];
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (!join(p, sizeof p, path, e->d_name)) continue;
        zero_status r = is_dir(p) ? remove_tree(io, p) : zero_io_unlink(io, p, 1);
        if (r != ZERO_OK) s = r;
    }
    closedir(d);
    zero_status r = zero_io_unlink(io, path, 1);
    return s != ZERO_OK ? s : r;
}

/* "step_00000100" or "step_00000100.N" with the given step: 1 (and *step) when name is one. */
static int parse_step_name(const char *name, int64_t *step, int *suffix_kind) {
    if (strncmp(name, "step_", 5) != 0) return 0;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(name + 5, &end, 10);
    if (errno || end == name + 5 || v < 0) return 0;
    *step = v;
    *suffix_kind = *end == 0 ? 0 : 1; /* 0: exact, 1: anything after (".N", ".tmp") */
    return 1;
}

/* ================================================================ writer */
struct zero_ckpt_writer {
    zero_io *io;
    int own_io;
    char dir[PATH_CAP];
    char staging[PATH_CAP];
    int64_t step;
    int rank, world;
    zero_st_writer *st;
    zero__mtensor *t;
    uint64_t *valid;   /* this rank's elements of each tensor */
    int nt, cap_t;
    int finished;
    char committed[64];
    char err[1024];
};

static zero_status cwfail(zero_ckpt_writer *w, zero_status s, const char *fmt, ...) ZERO__PRINTF(3, 4);
static zero_status cwfail(zero_ckpt_writer *w, zero_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
    return s;
}

static zero_status cwfail_io(zero_ckpt_writer *w, zero_status s, const char *what) {
    return cwfail(w, s, "checkpoint step %lld, rank %d: %s: %s", (long long)w->step, w->rank, what,
                  zero_io_last_error(w->io));
}

zero_status zero_ckpt_writer_begin(zero_ckpt_writer **out, zero_io *io, const char *dir, int64_t step,
                                   int rank, int world, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!dir || !*dir || strlen(dir) > PATH_CAP - 64 || step < 0 || step > 99999999999LL || world < 1 ||
        world > (1 << 24) || rank < 0 || rank >= world) {
        if (err)
            ZERO__ERR(err, "checkpoint: dir '%s', step %lld, rank %d, world %d: expected a directory path, 0 <= step, "
                      "0 <= rank < world <= 2^24", dir ? dir : "(null)", (long long)step, rank, world);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_ckpt_writer *w = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *w);
    if (!w) {
        if (err) ZERO__ERR(err, "checkpoint: out of memory");
        return ZERO_ERR_NOMEM;
    }
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    snprintf(w->staging, sizeof w->staging, "%s/step_%08lld.tmp", dir, (long long)step);
    w->step = step;
    w->rank = rank;
    w->world = world;
    zero_status s = ZERO_OK;
    if (io) {
        w->io = io;
    } else {
        s = zero_io_create_default(&w->io, err);
        if (s != ZERO_OK) goto fail;
        w->own_io = 1;
    }
    /* Every rank creates the directories (an existing one is fine), so no rank waits for another. */
    s = zero_io_mkdir(w->io, dir);
    if (s == ZERO_OK) s = zero_io_mkdir(w->io, w->staging);
    if (s != ZERO_OK) {
        cwfail_io(w, s, "creating the staging directory");
        goto fail_msg;
    }
    /* A staging directory left by an earlier failed attempt at this step may hold its COMMIT and
     * manifest: they must not outlive this attempt's rank files being replaced. */
    if (rank == 0) {
        char p[PATH_CAP];
        join(p, sizeof p, w->staging, COMMIT_NAME);
        s = zero_io_unlink(w->io, p, 1);
        join(p, sizeof p, w->staging, MANIFEST_NAME);
        if (s == ZERO_OK) s = zero_io_unlink(w->io, p, 1);
        if (s != ZERO_OK) {
            cwfail_io(w, s, "clearing a stale staging directory");
            goto fail_msg;
        }
    }
    char name[64], path[PATH_CAP];
    zero__ckpt_rank_file(name, sizeof name, rank);
    join(path, sizeof path, w->staging, name);
    /* This rank's file from an earlier attempt must not stand in for one this attempt fails to
     * write: without it, a commit that was not agreed on finds the file missing. */
    s = zero_io_unlink(w->io, path, 1);
    if (s != ZERO_OK) {
        cwfail_io(w, s, "removing this rank's file of an earlier attempt");
        goto fail_msg;
    }
    zero_error e2;
    s = zero_st_writer_create(&w->st, w->io, path, &e2);
    if (s != ZERO_OK) {
        cwfail(w, s, "checkpoint step %lld, rank %d: %s", (long long)step, rank, e2.msg);
        goto fail_msg;
    }
    char v[32];
    snprintf(v, sizeof v, "%d", ZERO_CKPT_FORMAT_VERSION);
    s = zero_st_writer_set_metadata(w->st, "zero.format_version", v);
    snprintf(v, sizeof v, "%lld", (long long)step);
    if (s == ZERO_OK) s = zero_st_writer_set_metadata(w->st, "zero.step", v);
    snprintf(v, sizeof v, "%d", rank);
    if (s == ZERO_OK) s = zero_st_writer_set_metadata(w->st, "zero.rank", v);
    snprintf(v, sizeof v, "%d", world);
    if (s == ZERO_OK) s = zero_st_writer_set_metadata(w->st, "zero.world", v);
    if (s != ZERO_OK) {
        cwfail(w, s, "%s", zero_st_writer_last_error(w->st));
        goto fail_msg;
    }
    *out = w;
    return ZERO_OK;
fail_msg:
    if (err) ZERO__ERR(err, "%s", w->err);
fail:
    zero_ckpt_writer_free(w);
    return s;
}

zero_status zero_ckpt_writer_add(zero_ckpt_writer *w, const char *name, zero_dtype dt, uint64_t numel,
                                 uint64_t align) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    zero_shard sh;
    if (!name || !*name || align < 1 || numel > (UINT64_C(1) << 53) ||
        zero_partition_shard(numel, w->world, w->rank, align, &sh) != 0)
        return cwfail(w, ZERO_ERR_INVALID_ARG,
                      "checkpoint: tensor '%s' with %llu elements and align %llu: expected a name, align >= 1 "
                      "and a size that partitions over %d ranks",
                      name ? name : "", (unsigned long long)numel, (unsigned long long)align, w->world);
    if (w->nt == w->cap_t) {
        int cap = w->cap_t ? 2 * w->cap_t : 32;
        zero__mtensor *t = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)cap * sizeof *t);
        uint64_t *v = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)cap * sizeof *v);
        if (!t || !v) {
            zero_mem_free(NULL, t);
            zero_mem_free(NULL, v);
            return cwfail(w, ZERO_ERR_NOMEM, "checkpoint: out of memory declaring '%s'", name);
        }
        if (w->nt) {
            memcpy(t, w->t, (size_t)w->nt * sizeof *t);
            memcpy(v, w->valid, (size_t)w->nt * sizeof *v);
        }
        zero_mem_free(NULL, w->t);
        zero_mem_free(NULL, w->valid);
        w->t = t;
        w->valid = v;
        w->cap_t = cap;
    }
    int64_t shape[1] = {(int64_t)sh.valid};
    zero_status s = zero_st_writer_add(w->st, name, dt, shape, 1);
    if (s != ZERO_OK) return cwfail(w, s, "checkpoint: %s", zero_st_writer_last_error(w->st));
    zero__mtensor *t = &w->t[w->nt];
    t->name = zero__strdup(name);
    if (!t->name) return cwfail(w, ZERO_ERR_NOMEM, "checkpoint: out of memory declaring '%s'", name);
    t->dtype = dt;
    t->numel = numel;
    t->align = align;
    w->valid[w->nt] = sh.valid;
    w->nt++;
    return ZERO_OK;
}

uint64_t zero_ckpt_writer_slice(const zero_ckpt_writer *w, int i) {
    return w && i >= 0 && i < w->nt ? w->valid[i] : 0;
}

zero_status zero_ckpt_writer_write(zero_ckpt_writer *w, const void *data, size_t n) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    zero_status s = zero_st_writer_write(w->st, data, n);
    if (s != ZERO_OK) return cwfail(w, s, "checkpoint step %lld, rank %d: %s", (long long)w->step, w->rank,
                                    zero_st_writer_last_error(w->st));
    return ZERO_OK;
}

zero_status zero_ckpt_writer_finish(zero_ckpt_writer *w) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    zero_status s = zero_st_writer_finish(w->st);
    if (s != ZERO_OK) return cwfail(w, s, "checkpoint step %lld, rank %d: %s", (long long)w->step, w->rank,
                                    zero_st_writer_last_error(w->st));
    w->finished = 1;
    return ZERO_OK;
}

/* Rank r's file in the staging directory is complete, of this save, and holds r's slices. */
static zero_status check_rank_file(zero_ckpt_writer *w, int r, uint64_t *bytes) {
    char name[64], path[PATH_CAP];
    zero__ckpt_rank_file(name, sizeof name, r);
    join(path, sizeof path, w->staging, name);
    if (!is_file(path, NULL))
        return cwfail(w, ZERO_ERR_STATE, "checkpoint step %lld: commit: %s is missing: rank %d did not finish its file",
                      (long long)w->step, path, r);
    zero_st_file *f = NULL;
    zero_error e2;
    zero_status s = zero_st_open(&f, w->io, path, &e2);
    if (s != ZERO_OK) return cwfail(w, s, "checkpoint step %lld: commit: %s", (long long)w->step, e2.msg);
    char want[32];
    const char *keys[3] = {"zero.step", "zero.world", "zero.rank"};
    long long vals[3] = {(long long)w->step, w->world, r};
    for (int k = 0; k < 3 && s == ZERO_OK; k++) {
        snprintf(want, sizeof want, "%lld", vals[k]);
        const char *got = zero_st_metadata(f, keys[k]);
        if (!got || strcmp(got, want) != 0)
            s = cwfail(w, ZERO_ERR_STATE, "checkpoint step %lld: commit: %s has %s '%s', expected '%s': a stale file "
                       "from another save", (long long)w->step, path, keys[k], got ? got : "(none)", want);
    }
    for (int i = 0; i < w->nt && s == ZERO_OK; i++) {
        zero_shard sh;
        zero_partition_shard(w->t[i].numel, w->world, r, w->t[i].align, &sh);
        int k = zero_st_find(f, w->t[i].name);
        const zero_st_tensor *t = zero_st_tensor_at(f, k);
        if (!t || t->zdtype != w->t[i].dtype || t->ndim != 1 || (uint64_t)t->shape[0] != sh.valid)
            s = cwfail(w, ZERO_ERR_STATE, "checkpoint step %lld: commit: %s: tensor '%s' is missing or not a %s slice of "
                       "%llu elements: did every rank declare the same tensors?", (long long)w->step, path,
                       w->t[i].name, zero_st_dtype_name(w->t[i].dtype), (unsigned long long)sh.valid);
    }
    if (s == ZERO_OK && zero_st_count(f) != w->nt)
        s = cwfail(w, ZERO_ERR_STATE, "checkpoint step %lld: commit: %s holds %d tensors, rank 0 declared %d",
                   (long long)w->step, path, zero_st_count(f), w->nt);
    *bytes = zero_st_file_size(f);
    zero_st_close(f);
    return s;
}

/* Removes what does not belong to this save from the staging directory (files of a larger
 * world, temporaries of failed attempts). */
static zero_status clear_strays(zero_ckpt_writer *w) {
    DIR *d = opendir(w->staging);
    if (!d) return cwfail(w, ZERO_ERR_IO, "checkpoint: cannot list %s: %s", w->staging, strerror(errno));
    zero_status s = ZERO_OK;
    struct dirent *e;
    char p[PATH_CAP];
    while ((e = readdir(d)) != NULL && s == ZERO_OK) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, MANIFEST_NAME)) continue;
        int r = -1, len = 0;
        if (sscanf(n, "rank_%d.safetensors%n", &r, &len) == 1 && n[len] == 0 && r >= 0 && r < w->world) {
            char want[64];
            zero__ckpt_rank_file(want, sizeof want, r);
            if (!strcmp(want, n)) continue;
        }
        join(p, sizeof p, w->staging, n);
        s = is_dir(p) ? remove_tree(w->io, p) : zero_io_unlink(w->io, p, 1);
        if (s != ZERO_OK) cwfail_io(w, s, "removing a stray file from the staging directory");
    }
    closedir(d);
    return s;
}

/* After publication: uncommitted step directories and older saves of this step go. Failures
 * here do not undo the save; they are logged and the next save tries again. */
static void cleanup_after_commit(zero_ckpt_writer *w) {
    DIR *d = opendir(w->dir);
    if (!d) return;
    struct dirent *e;
    char p[PATH_CAP], c[PATH_CAP];
    while ((e = readdir(d)) != NULL) {
        int64_t step;
        int kind;
        if (!parse_step_name(e->d_name, &step, &kind) || !strcmp(e->d_name, w->committed)) continue;
        if (!join(p, sizeof p, w->dir, e->d_name) || !is_dir(p)) continue;
        int committed = join(c, sizeof c, p, COMMIT_NAME) && is_file(c, NULL);
        int tmp = strstr(e->d_name, ".tmp") != NULL;
        if (!committed || tmp || step == w->step) {
            if (remove_tree(w->io, p) != ZERO_OK)
                zero__log(ZERO_LOG_WARN, "checkpoint: could not remove %s: %s", p, zero_io_last_error(w->io));
        }
    }
    closedir(d);
    join(p, sizeof p, w->dir, "latest.tmp");
    (void)zero_io_unlink(w->io, p, 1);
}

static zero_status commit(zero_ckpt_writer *w, const char *manifest_json, const zero_manifest *eng);

zero_status zero_ckpt_commit(zero_ckpt_writer *w, const char *manifest_json) { return commit(w, manifest_json, NULL); }

zero_status zero_ckpt_commit_engine(zero_ckpt_writer *w, const zero_manifest *m) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (!m) return cwfail(w, ZERO_ERR_INVALID_ARG, "checkpoint: commit_engine: the manifest is NULL");
    return commit(w, NULL, m);
}

static zero_status commit(zero_ckpt_writer *w, const char *manifest_json, const zero_manifest *eng) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    if (w->rank != 0 || !w->finished || w->committed[0])
        return cwfail(w, ZERO_ERR_STATE, "checkpoint step %lld: commit is rank 0's, once, after its finish (rank %d, %s)",
                      (long long)w->step, w->rank, w->committed[0] ? "already committed" : w->finished ? "finished" : "not finished");
    zero_status s = ZERO_OK;
    zero__mfile *files = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)w->world * sizeof *files);
    char (*names)[32] = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)w->world * 32);
    zero__sbuf text = {0};
    if (!files || !names) {
        s = cwfail(w, ZERO_ERR_NOMEM, "checkpoint: out of memory for %d file entries", w->world);
        goto out;
    }
    for (int r = 0; r < w->world && s == ZERO_OK; r++) {
        zero__ckpt_rank_file(names[r], 32, r);
        files[r].name = names[r];
        s = check_rank_file(w, r, &files[r].bytes);
    }
    if (s != ZERO_OK) goto out;
    char merr[512];
    s = eng ? zero__manifest_build_engine(eng, w->step, w->world, w->t, w->nt, files, &text, merr, sizeof merr)
            : zero__manifest_build(manifest_json, w->step, w->world, w->t, w->nt, files, &text, merr, sizeof merr);
    if (s != ZERO_OK) {
        cwfail(w, s, "checkpoint step %lld: %s", (long long)w->step, merr);
        goto out;
    }
    char p[PATH_CAP], final[PATH_CAP], ioerr[512];
    join(p, sizeof p, w->staging, MANIFEST_NAME);
    s = write_small(w->io, p, text.p, text.len, ioerr, sizeof ioerr);
    if (s != ZERO_OK) {
        cwfail(w, s, "checkpoint step %lld: writing the manifest: %s", (long long)w->step, ioerr);
        goto out;
    }
    s = clear_strays(w);
    if (s != ZERO_OK) goto out;
    char marker[128];
    int mn = snprintf(marker, sizeof marker, "zero-checkpoint format_version %d step %lld world %d\n",
                      ZERO_CKPT_FORMAT_VERSION, (long long)w->step, w->world);
    join(p, sizeof p, w->staging, COMMIT_NAME);
    s = write_small(w->io, p, marker, (size_t)mn, ioerr, sizeof ioerr);
    if (s == ZERO_OK) {
        s = zero_io_fsync_dir(w->io, w->staging);
        if (s != ZERO_OK) snprintf(ioerr, sizeof ioerr, "%s", zero_io_last_error(w->io));
    }
    if (s != ZERO_OK) {
        cwfail(w, s, "checkpoint step %lld: writing COMMIT: %s", (long long)w->step, ioerr);
        goto out;
    }
    /* Publication never replaces a directory: an earlier save of this step keeps its name until
     * `latest` has moved on, so no crash can leave `latest` naming a missing directory. */
    char name[64];
    snprintf(name, sizeof name, "step_%08lld", (long long)w->step);
    join(final, sizeof final, w->dir, name);
    for (int k = 1; k < 1000 && (is_dir(final) || is_file(final, NULL)); k++) {
        snprintf(name, sizeof name, "step_%08lld.%d", (long long)w->step, k);
        join(final, sizeof final, w->dir, name);
    }
    s = zero_io_rename(w->io, w->staging, final);
    if (s == ZERO_OK) s = zero_io_fsync_dir(w->io, w->dir);
    if (s != ZERO_OK) {
        cwfail_io(w, s, "publishing the step directory");
        goto out;
    }
    char line[80];
    int ln = snprintf(line, sizeof line, "%s\n", name);
    join(p, sizeof p, w->dir, LATEST_NAME);
    s = write_small(w->io, p, line, (size_t)ln, ioerr, sizeof ioerr);
    if (s != ZERO_OK) {
        cwfail(w, s, "checkpoint step %lld: replacing latest: %s", (long long)w->step, ioerr);
        goto out;
    }
    snprintf(w->committed, sizeof w->committed, "%s", name);
    s = zero_io_fsync_dir(w->io, w->dir);
    if (s != ZERO_OK) {
        cwfail_io(w, s, "making latest durable (it already names the new, complete checkpoint)");
        goto out;
    }
    cleanup_after_commit(w);
out:
    zero__sbuf_free(&text);
    zero_mem_free(NULL, files);
    zero_mem_free(NULL, names);
    return s;
}

void zero_ckpt_writer_free(zero_ckpt_writer *w) {
    if (!w) return;
    zero_st_writer_free(w->st); /* removes an unfinished rank file */
    for (int i = 0; i < w->nt; i++) zero_mem_free(NULL, w->t[i].name);
    zero_mem_free(NULL, w->t);
    zero_mem_free(NULL, w->valid);
    if (w->own_io) zero_io_free(w->io);
    zero_mem_free(NULL, w);
}

const char *zero_ckpt_writer_last_error(const zero_ckpt_writer *w) { return w ? w->err : "no writer"; }
const char *zero_ckpt_writer_committed_name(const zero_ckpt_writer *w) { return w ? w->committed : ""; }

/* ================================================================ reader */
struct zero_ckpt {
    zero_io *io;
    int own_io;
    char dir[PATH_CAP];
    char *text;           /* manifest.json */
    zero__manifest m;
    zero_st_file **files; /* world entries */
    int **index;          /* index[r][i]: tensor i's index in file r */
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

/* Follows `latest` when path is a save directory; leaves the step directory in c->dir. */
static zero_status resolve(zero_ckpt *c, const char *path) {
    char p[PATH_CAP];
    if (!is_dir(path)) {
        struct stat st;
        if (stat(path, &st) != 0)
            return cfail(c, ZERO_ERR_IO, "checkpoint %s: %s", path, strerror(errno));
        return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: not a directory", path);
    }
    if ((join(p, sizeof p, path, MANIFEST_NAME) && is_file(p, NULL)) ||
        (join(p, sizeof p, path, COMMIT_NAME) && is_file(p, NULL))) {
        snprintf(c->dir, sizeof c->dir, "%s", path);
        return ZERO_OK;
    }
    if (!join(p, sizeof p, path, LATEST_NAME) || !is_file(p, NULL)) {
        int64_t step;
        int kind;
        const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
        if (parse_step_name(base, &step, &kind))
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: no manifest.json and no COMMIT: the save of this step did "
                         "not complete; use an earlier checkpoint", path);
        return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: neither a step directory (manifest.json) nor a save "
                     "directory (latest)", path);
    }
    char *line = NULL;
    zero_status s = read_small(c->io, p, 256, &line, NULL, c->err, sizeof c->err);
    if (s != ZERO_OK) return s;
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == ' ' || line[n - 1] == '\r')) line[--n] = 0;
    int64_t step;
    int kind;
    if (!n || strchr(line, '/') || !parse_step_name(line, &step, &kind)) {
        s = cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: '%.64s' is not the name of a step directory", p, line);
        zero_mem_free(NULL, line);
        return s;
    }
    if (snprintf(c->dir, sizeof c->dir, "%s/%s", path, line) >= (int)sizeof c->dir) s = cfail(c, ZERO_ERR_INVALID_ARG, "checkpoint %s: path too long", path);
    zero_mem_free(NULL, line);
    if (s == ZERO_OK && !is_dir(c->dir))
        s = cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: latest names %s, which does not exist", path, c->dir);
    return s;
}

/* Rank r's file matches the manifest: size, identity, and a slice of every tensor. */
static zero_status open_rank(zero_ckpt *c, int r) {
    char path[PATH_CAP];
    const zero__mfile *mf = &c->m.f[r];
    join(path, sizeof path, c->dir, mf->name);
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
    char want[32];
    const char *keys[4] = {"zero.format_version", "zero.step", "zero.world", "zero.rank"};
    long long vals[4] = {ZERO_CKPT_FORMAT_VERSION, (long long)c->m.step, c->m.world, r};
    for (int k = 0; k < 4; k++) {
        snprintf(want, sizeof want, "%lld", vals[k]);
        const char *got = zero_st_metadata(f, keys[k]);
        if (!got || strcmp(got, want) != 0)
            return cfail(c, ZERO_ERR_FORMAT, "checkpoint %s: %s has %s '%s', the manifest says '%s': a file of another save",
                         c->dir, path, keys[k], got ? got : "(none)", want);
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
    if (!is_file(p, NULL)) {
        s = cfail(c, ZERO_ERR_FORMAT, "checkpoint %s has no COMMIT: the save did not complete (a rank failed or the "
                  "run stopped while saving); use an earlier checkpoint", c->dir);
        goto fail;
    }
    join(p, sizeof p, c->dir, MANIFEST_NAME);
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
