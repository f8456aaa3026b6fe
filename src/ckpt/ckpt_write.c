/* Saving a sharded checkpoint: per-rank writers into a staging directory, rank 0's commit
 * (manifest, COMMIT, atomic publication, `latest`), the cleanup of failed saves, and the lock that
 * gives a save directory to one run. Everything inside the save directory is done relative to
 * descriptors of directories opened once (zero_io_dir): no name zero creates, renames or removes
 * there is resolved through a symbolic link, and zero removes only what it recognises as its own. */
#include "ckpt/internal.h"
#include "zero/partition.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define PATH_CAP 4096

/* ================================================================ names zero owns */
int zero__ckpt_step_name(const char *name, int64_t *step, int *suffix) {
    if (strncmp(name, "step_", 5) != 0) return 0;
    const char *p = name + 5;
    int64_t v = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 12; p++, digits++) v = v * 10 + (*p - '0');
    if (digits < 8) return 0;
    if (*p == 0) *suffix = ZERO__STEP_EXACT;
    else if (!strcmp(p, ".tmp")) *suffix = ZERO__STEP_STAGING;
    else if (*p == '.' && p[1] >= '1' && p[1] <= '9' && strspn(p + 1, "0123456789") == strlen(p + 1) &&
             strlen(p + 1) <= 3)
        *suffix = ZERO__STEP_NUMBERED;
    else return 0;
    *step = v;
    return 1;
}

/* A file zero writes inside a step directory: a rank file, the manifest, COMMIT, or one of their
 * temporaries. */
static int is_step_file(const char *name) {
    static const char *const fixed[] = {ZERO__CKPT_MANIFEST, ZERO__CKPT_MANIFEST ".tmp", ZERO__CKPT_COMMIT,
                                        ZERO__CKPT_COMMIT ".tmp"};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (!strcmp(name, fixed[i])) return 1;
    int r = -1, len = 0;
    if (sscanf(name, "rank_%d.safetensors%n", &r, &len) != 1 || r < 0) return 0;
    char want[64];
    zero__ckpt_rank_file(want, sizeof want, r);
    return !strncmp(name, want, strlen(want)) && (!name[len] || !strcmp(name + len, ".tmp"));
}

/* The names of d's entries (zero_mem), collected first so that removing some does not disturb
 * the listing. */
typedef struct namelist {
    char **v;
    int n, cap, failed;
} namelist;

static int collect(void *ctx, const char *name) {
    namelist *l = ctx;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        char **v = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)cap * sizeof *v);
        if (!v) return l->failed = 1;
        if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof *v);
        zero_mem_free(NULL, l->v);
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = zero__strdup(name))) return l->failed = 1;
    l->n++;
    return 0;
}

static void namelist_free(namelist *l) {
    for (int i = 0; i < l->n; i++) zero_mem_free(NULL, l->v[i]);
    zero_mem_free(NULL, l->v);
    memset(l, 0, sizeof *l);
}

static zero_status list_names(zero_io_dir *d, namelist *l, char *err, size_t cap) {
    memset(l, 0, sizeof *l);
    zero_status s = zero_io_dir_list(d, collect, l);
    if (s == ZERO_OK && l->failed) s = ZERO_ERR_NOMEM;
    if (s != ZERO_OK) {
        snprintf(err, cap, "%s",
                 s == ZERO_ERR_NOMEM ? "out of memory listing a directory" : zero_io_last_error(zero_io_dir_io(d)));
        namelist_free(l);
    }
    return s;
}

static const char *kind_text(zero_io_entry_kind k) {
    switch (k) {
    case ZERO_IO_ENTRY_LINK: return "a symbolic link";
    case ZERO_IO_ENTRY_DIR: return "a directory";
    case ZERO_IO_ENTRY_FILE: return "a regular file";
    case ZERO_IO_ENTRY_MISSING: return "missing";
    default: return "a FIFO, socket or device";
    }
}

/* What step_dir does with the step directory once it has looked at it. */
enum {
    STEP_CHECK,              /* nothing */
    STEP_REMOVE,             /* removes it */
    STEP_REMOVE_UNCOMMITTED, /* removes it when it has no COMMIT; a committed one stays, whatever it holds */
};

/* Step directory NAME of root, opened once and listed once: it must hold only files zero writes,
 * as regular files (ZERO_ERR_STATE naming the first entry that is not; a directory with anything
 * foreign is left whole), and *committed says whether it has a COMMIT (-1: it could not be opened
 * as a directory of this user, ZERO_ERR_STATE). Then, as mode asks, its files and itself are
 * removed. */
static zero_status step_dir(zero_io_dir *root, const char *name, int mode, int *committed, char *err, size_t cap) {
    zero_io_dir *d = NULL;
    *committed = -1;
    zero_status s = zero_io_dir_open_at(root, name, ZERO_IO_OWNED, &d);
    if (s != ZERO_OK) {
        snprintf(err, cap, "%s", zero_io_last_error(zero_io_dir_io(root)));
        return ZERO_ERR_STATE;
    }
    *committed = 0;
    namelist l;
    int foreign = -1;
    zero_io_entry_kind foreign_kind = ZERO_IO_ENTRY_MISSING;
    s = list_names(d, &l, err, cap);
    for (int i = 0; i < l.n && s == ZERO_OK; i++) {
        zero_io_entry e;
        s = zero_io_stat_at(d, l.v[i], &e);
        if (s != ZERO_OK) {
            snprintf(err, cap, "%s", zero_io_last_error(zero_io_dir_io(d)));
        } else if (e.kind == ZERO_IO_ENTRY_MISSING) {
            continue; /* removed meanwhile */
        } else if (!is_step_file(l.v[i]) || e.kind != ZERO_IO_ENTRY_FILE) {
            if (foreign < 0) foreign = i, foreign_kind = e.kind;
        } else if (!strcmp(l.v[i], ZERO__CKPT_COMMIT)) {
            *committed = 1;
        }
    }
    const int keep = mode == STEP_CHECK || (mode == STEP_REMOVE_UNCOMMITTED && *committed);
    if (s == ZERO_OK && foreign >= 0 && !(mode == STEP_REMOVE_UNCOMMITTED && *committed)) {
        const char *n = l.v[foreign];
        snprintf(err, cap,
                 "%s/%s is %s that zero did not write (a step directory holds only rank files, "
                 "manifest.json and COMMIT): move it away",
                 zero_io_dir_path(d), n,
                 is_step_file(n)                      ? kind_text(foreign_kind)
                 : foreign_kind == ZERO_IO_ENTRY_FILE ? "a file"
                                                      : kind_text(foreign_kind));
        s = ZERO_ERR_STATE;
    }
    for (int i = 0; i < l.n && s == ZERO_OK && !keep; i++) {
        /* a name is removed only if it is still a regular file of zero's (a link put there since
         * is left, and the rmdir below then fails) */
        zero_io_entry e;
        if (zero_io_stat_at(d, l.v[i], &e) != ZERO_OK || e.kind != ZERO_IO_ENTRY_FILE || !is_step_file(l.v[i]))
            continue;
        s = zero_io_unlink_at(d, l.v[i], 1);
        if (s != ZERO_OK) snprintf(err, cap, "%s", zero_io_last_error(zero_io_dir_io(d)));
    }
    namelist_free(&l);
    zero_io_dir_close(d);
    if (s == ZERO_OK && !keep) {
        s = zero_io_unlink_at(root, name, 1);
        if (s != ZERO_OK) snprintf(err, cap, "%s", zero_io_last_error(zero_io_dir_io(root)));
    }
    return s;
}

/* Writes NAME in d durably and atomically: NAME.tmp (created exclusively, never through a link),
 * fsync, rename to NAME. The caller fsyncs d. On failure the message is in err and NAME.tmp is gone. */
static zero_status write_small(zero_io_dir *d, const char *name, const char *data, size_t n, char *err, size_t cap) {
    zero_io *io = zero_io_dir_io(d);
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    zero_io_file *f = NULL;
    (void)zero_io_unlink_at(d, tmp, 1); /* a leftover of a failed save */
    zero_status s = zero_io_open_at(d, tmp, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_EXCL | ZERO_IO_NOFOLLOW, &f);
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
        s = zero_io_rename_at(d, tmp, d, name);
        if (s != ZERO_OK) snprintf(err, cap, "%s", zero_io_last_error(io));
    }
    if (s != ZERO_OK) (void)zero_io_unlink_at(d, tmp, 1);
    return s;
}

/* ================================================================ save ids */
zero_status zero_ckpt_new_id(char *out, size_t cap) {
    if (!out || cap < ZERO_CKPT_ID_CHARS + 1) return ZERO_ERR_INVALID_ARG;
    unsigned char b[ZERO_CKPT_ID_CHARS / 2];
    size_t got = 0;
    while (got < sizeof b) {
        ssize_t r = getrandom(b + got, sizeof b - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return ZERO_ERR_IO;
        got += (size_t)r;
    }
    for (size_t i = 0; i < sizeof b; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
    return ZERO_OK;
}

int zero__ckpt_id_ok(const char *id) {
    if (!id || strlen(id) != ZERO_CKPT_ID_CHARS) return 0;
    return strspn(id, "0123456789abcdef") == ZERO_CKPT_ID_CHARS;
}

/* ================================================================ writer */
struct zero_ckpt_writer {
    zero_io *io;
    int own_io;
    zero_io_dir *root;  /* the save directory, as the caller named it */
    zero_io_dir *stage; /* step_%08lld.tmp inside it */
    char staging_name[64];
    int64_t step;
    int rank, world;
    char id[ZERO_CKPT_ID_CHARS + 1];
    zero_st_writer *st;
    zero__mtensor *t;
    uint64_t *valid; /* this rank's elements of each tensor */
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

/* What a save will touch in the save directory is what zero made: `latest` and `lock` are
 * regular files, every step_* entry is a directory of this user, and the step directories a save
 * of `step` writes into or may remove (staging directories, uncommitted ones, earlier saves of
 * its step; step < 0: of any step) hold only zero's files. Anything else is ZERO_ERR_STATE naming
 * it, before anything is written. */
static zero_status check_save_dir(zero_io_dir *root, int64_t step, char *err, size_t cap) {
    namelist l;
    zero_status s = list_names(root, &l, err, cap);
    if (s != ZERO_OK) return s;
    for (int i = 0; i < l.n && s == ZERO_OK; i++) {
        const char *n = l.v[i];
        int64_t st;
        int suffix;
        const int is_step = zero__ckpt_step_name(n, &st, &suffix);
        const int fixed =
            !strcmp(n, ZERO__CKPT_LATEST) || !strcmp(n, ZERO__CKPT_LATEST ".tmp") || !strcmp(n, ZERO__CKPT_LOCK);
        if (!is_step && !fixed) continue; /* not zero's name: never touched */
        zero_io_entry e;
        if ((s = zero_io_stat_at(root, n, &e)) != ZERO_OK) {
            snprintf(err, cap, "%s", zero_io_last_error(zero_io_dir_io(root)));
            break;
        }
        if (e.kind == ZERO_IO_ENTRY_MISSING) continue;
        if (e.kind != (is_step ? ZERO_IO_ENTRY_DIR : ZERO_IO_ENTRY_FILE)) {
            snprintf(err, cap,
                     "%s/%s is %s where zero keeps its own %s: zero never follows or replaces it; move it away",
                     zero_io_dir_path(root), n, kind_text(e.kind), is_step ? "step directory" : "file");
            s = ZERO_ERR_STATE;
            break;
        }
        int committed = 0;
        char why[768];
        /* a committed checkpoint of another step is never touched: only what this save would write
         * into or remove is refused (and a directory not of this user) */
        if (is_step && step_dir(root, n, STEP_CHECK, &committed, why, sizeof why) != ZERO_OK &&
            (committed <= 0 || st == step || suffix == ZERO__STEP_STAGING)) {
            snprintf(err, cap, "%s", why);
            s = ZERO_ERR_STATE;
        }
    }
    namelist_free(&l);
    return s;
}

zero_status zero_ckpt_save_dir_check(const char *dir, zero_error *err) {
    if (!dir || !*dir) {
        if (err) ZERO__ERR(err, "checkpoint: expected a save directory");
        return ZERO_ERR_INVALID_ARG;
    }
    struct stat st;
    if (lstat(dir, &st) != 0 && errno == ENOENT) return ZERO_OK; /* not made yet: nothing in it */
    zero_io *io = NULL;
    zero_io_dir *root = NULL;
    zero_status s = zero_io_create_posix(&io, err);
    if (s != ZERO_OK) return s;
    s = zero_io_dir_open(io, dir, 0, &root);
    if (s == ZERO_OK) {
        char msg[1024];
        s = check_save_dir(root, -1, msg, sizeof msg);
        if (s != ZERO_OK && err) ZERO__ERR(err, "%s", msg);
    } else if (err) {
        ZERO__ERR(err, "%s", zero_io_last_error(io));
    }
    zero_io_dir_close(root);
    zero_io_free(io);
    return s;
}

zero_status zero_ckpt_writer_begin(zero_ckpt_writer **out, zero_io *io, const char *dir, int64_t step, int rank,
                                   int world, const char *save_id, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!dir || !*dir || strlen(dir) > PATH_CAP - 64 || step < 0 || step > 99999999999LL || world < 1 ||
        world > (1 << 24) || rank < 0 || rank >= world || (save_id && !zero__ckpt_id_ok(save_id)) ||
        (!save_id && world > 1)) {
        if (err)
            ZERO__ERR(err,
                      "checkpoint: dir '%s', step %lld, rank %d, world %d, save id %s: expected a directory path, "
                      "0 <= step, 0 <= rank < world <= 2^24, and the save's id (%d lowercase hex digits from "
                      "zero_ckpt_new_id, the same on every rank; NULL only for one rank)",
                      dir ? dir : "(null)", (long long)step, rank, world, save_id ? "given" : "NULL",
                      ZERO_CKPT_ID_CHARS);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_ckpt_writer *w = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *w);
    if (!w) {
        if (err) ZERO__ERR(err, "checkpoint: out of memory");
        return ZERO_ERR_NOMEM;
    }
    snprintf(w->staging_name, sizeof w->staging_name, "step_%08lld.tmp", (long long)step);
    w->step = step;
    w->rank = rank;
    w->world = world;
    zero_status s = ZERO_OK;
    if (save_id) {
        snprintf(w->id, sizeof w->id, "%s", save_id);
    } else if (zero_ckpt_new_id(w->id, sizeof w->id) != ZERO_OK) {
        s = cwfail(w, ZERO_ERR_IO, "checkpoint step %lld: no random bytes for the save's id: %s", (long long)step,
                   strerror(errno));
        goto fail_msg;
    }
    if (io) {
        w->io = io;
    } else {
        s = zero_io_create_default(&w->io, err);
        if (s != ZERO_OK) goto fail;
        w->own_io = 1;
    }
    /* Every rank opens the directories (creating what is missing), so no rank waits for another. */
    s = zero_io_dir_open(w->io, dir, ZERO_IO_CREATE, &w->root);
    if (s != ZERO_OK) {
        cwfail_io(w, s, "opening the save directory");
        goto fail_msg;
    }
    if (rank == 0) {
        char why[768];
        s = check_save_dir(w->root, step, why, sizeof why);
        if (s != ZERO_OK) {
            cwfail(w, s, "checkpoint step %lld: %s", (long long)step, why);
            goto fail_msg;
        }
    }
    s = zero_io_dir_open_at(w->root, w->staging_name, ZERO_IO_CREATE | ZERO_IO_OWNED, &w->stage);
    if (s != ZERO_OK) {
        cwfail_io(w, s, "creating the staging directory");
        goto fail_msg;
    }
    /* A staging directory left by an earlier failed attempt at this step may hold its COMMIT and
     * manifest: they must not outlive this attempt's rank files being replaced. */
    if (rank == 0) {
        s = zero_io_unlink_at(w->stage, ZERO__CKPT_COMMIT, 1);
        if (s == ZERO_OK) s = zero_io_unlink_at(w->stage, ZERO__CKPT_MANIFEST, 1);
        if (s != ZERO_OK) {
            cwfail_io(w, s, "clearing a stale staging directory");
            goto fail_msg;
        }
    }
    char name[64];
    zero__ckpt_rank_file(name, sizeof name, rank);
    /* This rank's file from an earlier attempt must not stand in for one this attempt fails to
     * write: without it, a commit that was not agreed on finds the file missing. */
    s = zero_io_unlink_at(w->stage, name, 1);
    if (s != ZERO_OK) {
        cwfail_io(w, s, "removing this rank's file of an earlier attempt");
        goto fail_msg;
    }
    zero_error e2;
    s = zero_st_writer_create_at(&w->st, w->stage, name, &e2);
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
    if (s == ZERO_OK) s = zero_st_writer_set_metadata(w->st, "zero.save_id", w->id);
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

const char *zero_ckpt_writer_save_id(const zero_ckpt_writer *w) { return w ? w->id : ""; }

zero_status zero_ckpt_writer_add(zero_ckpt_writer *w, const char *name, zero_dtype dt, uint64_t numel, uint64_t align) {
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

uint64_t zero_ckpt_writer_slice(const zero_ckpt_writer *w, int i) { return w && i >= 0 && i < w->nt ? w->valid[i] : 0; }

zero_status zero_ckpt_writer_write(zero_ckpt_writer *w, const void *data, size_t n) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    zero_status s = zero_st_writer_write(w->st, data, n);
    if (s != ZERO_OK)
        return cwfail(w, s, "checkpoint step %lld, rank %d: %s", (long long)w->step, w->rank,
                      zero_st_writer_last_error(w->st));
    return ZERO_OK;
}

zero_status zero_ckpt_writer_finish(zero_ckpt_writer *w) {
    if (!w) return ZERO_ERR_INVALID_ARG;
    zero_status s = zero_st_writer_finish(w->st);
    if (s != ZERO_OK)
        return cwfail(w, s, "checkpoint step %lld, rank %d: %s", (long long)w->step, w->rank,
                      zero_st_writer_last_error(w->st));
    w->finished = 1;
    return ZERO_OK;
}

/* Rank r's file in the staging directory is complete, of this save, and holds r's slices. */
static zero_status check_rank_file(zero_ckpt_writer *w, int r, uint64_t *bytes) {
    char name[64];
    zero__ckpt_rank_file(name, sizeof name, r);
    const char *sdir = zero_io_dir_path(w->stage);
    zero_io_entry e;
    zero_status s = zero_io_stat_at(w->stage, name, &e);
    if (s != ZERO_OK) return cwfail_io(w, s, "commit");
    if (e.kind != ZERO_IO_ENTRY_FILE)
        return cwfail(w, ZERO_ERR_STATE, "checkpoint step %lld: commit: %s/%s is %s: rank %d did not finish its file",
                      (long long)w->step, sdir, name, kind_text(e.kind), r);
    zero_st_file *f = NULL;
    zero_error e2;
    s = zero_st_open_at(&f, w->stage, name, &e2);
    if (s != ZERO_OK) return cwfail(w, s, "checkpoint step %lld: commit: %s", (long long)w->step, e2.msg);
    char want[ZERO_CKPT_ID_CHARS + 1];
    const char *keys[4] = {"zero.step", "zero.world", "zero.rank", "zero.save_id"};
    long long vals[3] = {(long long)w->step, w->world, r};
    for (int k = 0; k < 4 && s == ZERO_OK; k++) {
        if (k < 3) snprintf(want, sizeof want, "%lld", vals[k]);
        else snprintf(want, sizeof want, "%s", w->id);
        const char *got = zero_st_metadata(f, keys[k]);
        if (!got || strcmp(got, want) != 0)
            s = cwfail(w, ZERO_ERR_STATE,
                       "checkpoint step %lld: commit: %s/%s: its %s is not this save's (%s): a stale "
                       "file from another save",
                       (long long)w->step, sdir, name, keys[k], want);
    }
    for (int i = 0; i < w->nt && s == ZERO_OK; i++) {
        zero_shard sh;
        zero_partition_shard(w->t[i].numel, w->world, r, w->t[i].align, &sh);
        int k = zero_st_find(f, w->t[i].name);
        const zero_st_tensor *t = zero_st_tensor_at(f, k);
        if (!t || t->zdtype != w->t[i].dtype || t->ndim != 1 || (uint64_t)t->shape[0] != sh.valid)
            s = cwfail(w, ZERO_ERR_STATE,
                       "checkpoint step %lld: commit: %s/%s: tensor '%s' is missing or not a %s slice of "
                       "%llu elements: did every rank declare the same tensors?",
                       (long long)w->step, sdir, name, w->t[i].name, zero_st_dtype_name(w->t[i].dtype),
                       (unsigned long long)sh.valid);
    }
    if (s == ZERO_OK && zero_st_count(f) != w->nt)
        s = cwfail(w, ZERO_ERR_STATE, "checkpoint step %lld: commit: %s/%s holds %d tensors, rank 0 declared %d",
                   (long long)w->step, sdir, name, zero_st_count(f), w->nt);
    *bytes = zero_st_file_size(f);
    zero_st_close(f);
    return s;
}

/* Removes what does not belong to this save from the staging directory: zero's files of a larger
 * world and temporaries of failed attempts. Anything zero did not write stops the commit. */
static zero_status clear_strays(zero_ckpt_writer *w) {
    namelist l;
    char e2[768];
    zero_status s = list_names(w->stage, &l, e2, sizeof e2);
    if (s != ZERO_OK) return cwfail(w, s, "checkpoint step %lld: %s", (long long)w->step, e2);
    for (int i = 0; i < l.n && s == ZERO_OK; i++) {
        const char *n = l.v[i];
        if (!strcmp(n, ZERO__CKPT_MANIFEST)) continue;
        int r = -1, len = 0;
        if (sscanf(n, "rank_%d.safetensors%n", &r, &len) == 1 && n[len] == 0 && r >= 0 && r < w->world) {
            char want[64];
            zero__ckpt_rank_file(want, sizeof want, r);
            if (!strcmp(want, n)) continue;
        }
        zero_io_entry e;
        s = zero_io_stat_at(w->stage, n, &e);
        if (s != ZERO_OK) {
            cwfail_io(w, s, "examining the staging directory");
        } else if (e.kind == ZERO_IO_ENTRY_MISSING) {
            continue;
        } else if (!is_step_file(n) || e.kind != ZERO_IO_ENTRY_FILE) {
            s = cwfail(w, ZERO_ERR_STATE,
                       "checkpoint step %lld: %s/%s is %s that zero did not write: the save is not "
                       "published; move it away",
                       (long long)w->step, zero_io_dir_path(w->stage), n, kind_text(e.kind));
        } else if ((s = zero_io_unlink_at(w->stage, n, 1)) != ZERO_OK) {
            cwfail_io(w, s, "removing a stray file from the staging directory");
        }
    }
    namelist_free(&l);
    return s;
}

/* After publication: uncommitted step directories and older saves of this step go, when they
 * hold nothing but zero's files. Failures here do not undo the save; they are logged and the
 * next save tries again. */
static void cleanup_after_commit(zero_ckpt_writer *w) {
    namelist l;
    char why[768];
    if (list_names(w->root, &l, why, sizeof why) != ZERO_OK) {
        zero__log(ZERO_LOG_WARN, "checkpoint: cleanup of %s: %s", zero_io_dir_path(w->root), why);
        return;
    }
    for (int i = 0; i < l.n; i++) {
        int64_t step;
        int suffix, committed = 0;
        const char *n = l.v[i];
        if (!zero__ckpt_step_name(n, &step, &suffix) || !strcmp(n, w->committed)) continue;
        zero_io_entry e;
        if (zero_io_stat_at(w->root, n, &e) != ZERO_OK || e.kind != ZERO_IO_ENTRY_DIR) continue; /* never followed */
        /* staging directories and earlier saves of this step go; other steps' only uncommitted;
         * one that is not this user's (committed < 0) is not ours to remove, and not said */
        const int mode = suffix == ZERO__STEP_STAGING || step == w->step ? STEP_REMOVE : STEP_REMOVE_UNCOMMITTED;
        if (step_dir(w->root, n, mode, &committed, why, sizeof why) != ZERO_OK && committed >= 0)
            zero__log(ZERO_LOG_WARN, "checkpoint: %s/%s left in place: %s", zero_io_dir_path(w->root), n, why);
    }
    namelist_free(&l);
    (void)zero_io_unlink_at(w->root, ZERO__CKPT_LATEST ".tmp", 1);
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
        return cwfail(w, ZERO_ERR_STATE,
                      "checkpoint step %lld: commit is rank 0's, once, after its finish (rank %d, %s)",
                      (long long)w->step, w->rank,
                      w->committed[0] ? "already committed"
                      : w->finished   ? "finished"
                                      : "not finished");
    zero_status s = ZERO_OK;
    zero__mfile *files = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)w->world * sizeof *files);
    char(*names)[32] = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)w->world * 32);
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
    const zero__mhead head = {w->step, w->world, w->id, w->t, w->nt, files};
    s = eng ? zero__manifest_build_engine(eng, &head, &text, merr, sizeof merr)
            : zero__manifest_build(manifest_json, &head, &text, merr, sizeof merr);
    if (s != ZERO_OK) {
        cwfail(w, s, "checkpoint step %lld: %s", (long long)w->step, merr);
        goto out;
    }
    char ioerr[512];
    s = write_small(w->stage, ZERO__CKPT_MANIFEST, text.p, text.len, ioerr, sizeof ioerr);
    if (s != ZERO_OK) {
        cwfail(w, s, "checkpoint step %lld: writing the manifest: %s", (long long)w->step, ioerr);
        goto out;
    }
    s = clear_strays(w);
    if (s != ZERO_OK) goto out;
    char marker[128];
    int mn = snprintf(marker, sizeof marker, "zero-checkpoint format_version %d step %lld world %d\n",
                      ZERO_CKPT_FORMAT_VERSION, (long long)w->step, w->world);
    s = write_small(w->stage, ZERO__CKPT_COMMIT, marker, (size_t)mn, ioerr, sizeof ioerr);
    if (s == ZERO_OK) {
        s = zero_io_dir_fsync(w->stage);
        if (s != ZERO_OK) snprintf(ioerr, sizeof ioerr, "%s", zero_io_last_error(w->io));
    }
    if (s != ZERO_OK) {
        cwfail(w, s, "checkpoint step %lld: writing COMMIT: %s", (long long)w->step, ioerr);
        goto out;
    }
    /* Publication never replaces anything: an earlier save of this step keeps its name until
     * `latest` has moved on, so no crash can leave `latest` naming a missing directory; a name
     * taken by anything (a link included) is skipped, never followed. */
    char name[64];
    snprintf(name, sizeof name, "step_%08lld", (long long)w->step);
    for (int k = 1; k < 1000; k++) {
        zero_io_entry e;
        if ((s = zero_io_stat_at(w->root, name, &e)) != ZERO_OK) {
            cwfail_io(w, s, "publishing the step directory");
            goto out;
        }
        if (e.kind == ZERO_IO_ENTRY_MISSING) break;
        snprintf(name, sizeof name, "step_%08lld.%d", (long long)w->step, k);
    }
    s = zero_io_rename_at(w->root, w->staging_name, w->root, name);
    if (s == ZERO_OK) s = zero_io_dir_fsync(w->root);
    if (s != ZERO_OK) {
        cwfail_io(w, s, "publishing the step directory");
        goto out;
    }
    char line[80];
    int ln = snprintf(line, sizeof line, "%s\n", name);
    s = write_small(w->root, ZERO__CKPT_LATEST, line, (size_t)ln, ioerr, sizeof ioerr);
    if (s != ZERO_OK) {
        cwfail(w, s, "checkpoint step %lld: replacing latest: %s", (long long)w->step, ioerr);
        goto out;
    }
    snprintf(w->committed, sizeof w->committed, "%s", name);
    s = zero_io_dir_fsync(w->root);
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
    zero_io_dir_close(w->stage);
    zero_io_dir_close(w->root);
    if (w->own_io) zero_io_free(w->io);
    zero_mem_free(NULL, w);
}

const char *zero_ckpt_writer_last_error(const zero_ckpt_writer *w) { return w ? w->err : "no writer"; }
const char *zero_ckpt_writer_committed_name(const zero_ckpt_writer *w) { return w ? w->committed : ""; }

/* ================================================================ retention */
typedef struct kept {
    char name[64];
    int64_t mtime; /* its COMMIT's: when the save was made */
} kept;

static int newer_first(const void *a, const void *b) {
    const kept *x = a, *y = b;
    return x->mtime > y->mtime ? -1 : x->mtime < y->mtime ? 1 : strcmp(y->name, x->name);
}

zero_status zero_ckpt_prune(const char *dir, int keep, int *removed, zero_error *err) {
    if (removed) *removed = 0;
    if (!dir || !*dir || keep < 1) {
        if (err)
            ZERO__ERR(err, "checkpoint prune: dir '%s', keep %d: expected a save directory and keep >= 1",
                      dir ? dir : "(null)", keep);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_io *io = NULL;
    zero_io_dir *root = NULL;
    zero_status s = zero_io_create_default(&io, err);
    if (s != ZERO_OK) return s;
    if ((s = zero_io_dir_open(io, dir, 0, &root)) != ZERO_OK) {
        if (err) ZERO__ERR(err, "%s", zero_io_last_error(io));
        zero_io_free(io);
        return s;
    }
    /* the step `latest` names is kept whatever its age: it is the one a resume opens */
    char latest[64] = "";
    zero_io_file *f = NULL;
    zero_io_entry le;
    if (zero_io_stat_at(root, ZERO__CKPT_LATEST, &le) == ZERO_OK && le.kind == ZERO_IO_ENTRY_FILE &&
        le.size < sizeof latest &&
        zero_io_open_at(root, ZERO__CKPT_LATEST, ZERO_IO_READ | ZERO_IO_NOFOLLOW, &f) == ZERO_OK) {
        if (zero_io_pread(f, latest, (size_t)le.size, 0) != ZERO_OK) latest[0] = 0;
        latest[strcspn(latest, "\n")] = 0;
    }
    (void)zero_io_close(f);
    namelist l;
    char why[768];
    kept *k = NULL;
    int nk = 0;
    s = list_names(root, &l, why, sizeof why);
    if (s == ZERO_OK && l.n && !(k = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)l.n * sizeof *k))) {
        snprintf(why, sizeof why, "out of memory");
        s = ZERO_ERR_NOMEM;
    }
    /* committed step directories of this user, never through a link */
    for (int i = 0; i < l.n && s == ZERO_OK; i++) {
        int64_t step;
        int suffix;
        zero_io_entry e;
        if (!zero__ckpt_step_name(l.v[i], &step, &suffix) || suffix == ZERO__STEP_STAGING) continue;
        if (zero_io_stat_at(root, l.v[i], &e) != ZERO_OK || e.kind != ZERO_IO_ENTRY_DIR) continue;
        zero_io_dir *d = NULL;
        if (zero_io_dir_open_at(root, l.v[i], ZERO_IO_OWNED, &d) != ZERO_OK) continue;
        zero_io_entry c;
        if (zero_io_stat_at(d, ZERO__CKPT_COMMIT, &c) == ZERO_OK && c.kind == ZERO_IO_ENTRY_FILE) {
            snprintf(k[nk].name, sizeof k[nk].name, "%.63s", l.v[i]);
            k[nk++].mtime = c.mtime_ns;
        }
        zero_io_dir_close(d);
    }
    if (s == ZERO_OK && nk) qsort(k, (size_t)nk, sizeof *k, newer_first);
    /* keep newest first, with the slot of the step latest names taken by it wherever it sorts */
    int slots = keep;
    for (int i = 0; i < nk; i++)
        if (!strcmp(k[i].name, latest)) slots--;
    for (int i = 0; i < nk && s == ZERO_OK; i++) {
        if (!strcmp(k[i].name, latest)) continue;
        if (slots > 0) {
            slots--;
            continue;
        }
        /* a directory holding anything but zero's files stays (rule 7); it is said, not fatal */
        int committed;
        if (step_dir(root, k[i].name, STEP_REMOVE, &committed, why, sizeof why) != ZERO_OK)
            zero__log(ZERO_LOG_WARN, "checkpoint: --save-total-limit: %s/%s left in place: %s", dir, k[i].name, why);
        else if (removed) (*removed)++;
    }
    if (s != ZERO_OK && err) ZERO__ERR(err, "checkpoint prune %s: %s", dir, why);
    zero_mem_free(NULL, k);
    namelist_free(&l);
    zero_io_dir_close(root);
    zero_io_free(io);
    return s;
}

/* ================================================================ the save directory's lock */
struct zero_ckpt_lock {
    zero_io *io;
    zero_io_file *f; /* held open: the lock goes with it, and with the process however it ends */
};

void zero_ckpt_lock_release(zero_ckpt_lock *l) {
    if (!l) return;
    (void)zero_io_close(l->f);
    zero_io_free(l->io);
    zero_mem_free(NULL, l);
}

zero_status zero_ckpt_lock_acquire(zero_ckpt_lock **out, const char *dir, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!dir || !*dir) {
        if (err) ZERO__ERR(err, "checkpoint lock: expected a save directory");
        return ZERO_ERR_INVALID_ARG;
    }
    zero_ckpt_lock *l = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *l);
    if (!l) {
        if (err) ZERO__ERR(err, "save directory %s: out of memory", dir);
        return ZERO_ERR_NOMEM;
    }
    zero_io_dir *d = NULL;
    zero_status s = zero_io_create_posix(&l->io, err);
    if (s == ZERO_OK) s = zero_io_dir_open(l->io, dir, ZERO_IO_CREATE, &d);
    zero_io_entry e = {0};
    if (s == ZERO_OK) s = zero_io_stat_at(d, ZERO__CKPT_LOCK, &e);
    if (s == ZERO_OK && e.kind != ZERO_IO_ENTRY_MISSING && e.kind != ZERO_IO_ENTRY_FILE) {
        if (err)
            ZERO__ERR(err, "%s/%s is %s where zero keeps the lock of its save directory: move it away", dir,
                      ZERO__CKPT_LOCK, kind_text(e.kind));
        zero_io_dir_close(d);
        zero_ckpt_lock_release(l);
        return ZERO_ERR_STATE;
    }
    if (s == ZERO_OK)
        s = zero_io_open_at(d, ZERO__CKPT_LOCK, ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_NOFOLLOW,
                            &l->f);
    if (s != ZERO_OK && l->io && err) ZERO__ERR(err, "save directory %s: its lock: %s", dir, zero_io_last_error(l->io));
    if (s == ZERO_OK) s = zero_io_lock(l->f);
    if (s == ZERO_ERR_STATE) {
        /* what the other run wrote is shown only when it is a pid and a plain host name */
        char holder[96] = "", host[65] = "";
        uint64_t size = 0;
        long long pid = 0;
        const int known = zero_io_size(l->f, &size) == ZERO_OK && size > 0 && size < sizeof holder &&
                          zero_io_pread(l->f, holder, (size_t)size, 0) == ZERO_OK &&
                          sscanf(holder, "%lld %64[A-Za-z0-9.-]", &pid, host) == 2 && pid > 0;
        if (err && known)
            ZERO__ERR(err,
                      "save directory %s is in use by another run (pid %lld on %s holds %s/%s): one save directory "
                      "belongs to one run; give this run another --save",
                      dir, pid, host, dir, ZERO__CKPT_LOCK);
        else if (err)
            ZERO__ERR(err,
                      "save directory %s is in use by another run (it holds %s/%s): one save directory belongs to "
                      "one run; give this run another --save",
                      dir, dir, ZERO__CKPT_LOCK);
    } else if (s != ZERO_OK && l->f && err) {
        ZERO__ERR(err, "save directory %s: %s", dir, zero_io_last_error(l->io));
    }
    if (s == ZERO_OK) {
        char me[128], host[65] = "";
        (void)gethostname(host, sizeof host - 1);
        const int n = snprintf(me, sizeof me, "%lld %s\n", (long long)getpid(), host);
        s = zero_io_truncate(l->f, 0);
        if (s == ZERO_OK) s = zero_io_pwrite(l->f, me, (size_t)n, 0);
        if (s != ZERO_OK && err)
            ZERO__ERR(err, "save directory %s: writing its lock: %s", dir, zero_io_last_error(l->io));
    }
    zero_io_dir_close(d);
    if (s != ZERO_OK) {
        zero_ckpt_lock_release(l);
        return s;
    }
    *out = l;
    return ZERO_OK;
}
