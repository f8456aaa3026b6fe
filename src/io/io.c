/* The io front: argument checks, dispatch through the backend table, error text, the emulated
 * asynchronous pair for backends without one, aligned buffers, and the default backend. */
#include "io/internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_QUEUE_DEPTH 64

const char *zero_io_op_name(zero_io_op op) {
    static const char *names[ZERO_IO_OP_COUNT] = {"open",     "read",   "write",  "fsync", "close",
                                                  "truncate", "rename", "unlink", "mkdir"};
    return (unsigned)op < ZERO_IO_OP_COUNT ? names[op] : "invalid";
}

zero_status zero__io_errno(zero_io *io, int err, const char *op, const char *path, int64_t off,
                           size_t n) {
    if (off >= 0)
        zero__errorf(io->err, sizeof io->err, "%s %s at offset %lld (%zu bytes): %s", op, path,
                     (long long)off, n, strerror(err));
    else
        zero__errorf(io->err, sizeof io->err, "%s %s: %s", op, path, strerror(err));
    return (err == ENOSPC || err == EDQUOT) ? ZERO_ERR_NOSPACE : ZERO_ERR_IO;
}

zero_status zero__io_new(zero_io **out, const zero__io_vtable *vt, const char *name, int queue_depth,
                         zero_error *err) {
    zero_io *io = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *io);
    if (!io) goto fail;
    io->vt = vt;
    io->queue_depth = queue_depth;
    snprintf(io->name, sizeof io->name, "%s", name);
    if (!vt->submit) {
        io->done = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)queue_depth * sizeof *io->done);
        if (!io->done) goto fail_io;
    }
    *out = io;
    return ZERO_OK;
fail_io:
    zero_mem_free(NULL, io);
fail:
    if (err) ZERO__ERR(err, "io: out of memory creating the %s backend", name);
    return ZERO_ERR_NOMEM;
}

void zero_io_free(zero_io *io) {
    if (!io) return;
    if (io->vt->submit && io->inflight > 0) {
        /* Drain: the kernel may still write into caller buffers until completions are reaped. */
        zero_io_event ev[16];
        int got = 0;
        while (io->inflight > 0 && zero_io_complete(io, 1, ev, 16, &got) == ZERO_OK) {
        }
    }
    if (io->vt->destroy) io->vt->destroy(io);
    zero_mem_free(NULL, io->done);
    zero_mem_free(NULL, io);
}

const char *zero_io_backend(const zero_io *io) { return io ? io->name : "none"; }
const char *zero_io_last_error(const zero_io *io) { return io ? io->err : "no io backend"; }

static zero_status bad_arg(zero_io *io, const char *fmt, const char *path) {
    zero__errorf(io->err, sizeof io->err, fmt, path ? path : "(null)");
    return ZERO_ERR_INVALID_ARG;
}

/* ---------------------------------------------------------------- files */
zero_status zero__io_open_name(zero_io *io, const zero__io_name *n, unsigned flags, zero_io_file **out) {
    *out = NULL;
    zero_io_file *f = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *f);
    char *p = zero__strdup(n->shown);
    if (!f || !p) {
        zero_mem_free(NULL, f);
        zero_mem_free(NULL, p);
        zero__errorf(io->err, sizeof io->err, "open %s: out of memory", n->shown);
        return ZERO_ERR_NOMEM;
    }
    f->io = io;
    f->path = p;
    f->flags = flags;
    f->fd = -1;
    zero_status s = io->vt->open(io, n, flags, f);
    if (s != ZERO_OK) {
        zero_mem_free(NULL, p);
        zero_mem_free(NULL, f);
        return s;
    }
    *out = f;
    return ZERO_OK;
}

static int bad_flags(unsigned flags) { return !(flags & (ZERO_IO_READ | ZERO_IO_WRITE)) || (flags & ~0xffu); }

zero_status zero_io_open(zero_io *io, const char *path, unsigned flags, zero_io_file **out) {
    if (!io || !out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!path || !*path) return bad_arg(io, "open: empty path%s", "");
    if (bad_flags(flags))
        return bad_arg(io, "open %s: flags must include ZERO_IO_READ or ZERO_IO_WRITE and nothing unknown", path);
    const zero__io_name n = {AT_FDCWD, path, path};
    return zero__io_open_name(io, &n, flags, out);
}

zero_status zero_io_close(zero_io_file *f) {
    if (!f) return ZERO_OK;
    zero_status s = f->io->vt->close(f);
    zero_mem_free(NULL, f->path);
    zero_mem_free(NULL, f);
    return s;
}

static zero_status check_direct(zero_io_file *f, const void *buf, size_t n, uint64_t off, const char *op) {
    if (!(f->flags & ZERO_IO_DIRECT)) return ZERO_OK;
    if (((uintptr_t)buf | n | off) % ZERO_IO_ALIGN == 0) return ZERO_OK;
    zero__errorf(f->io->err, sizeof f->io->err,
                 "%s %s at offset %llu (%zu bytes, buffer %p): O_DIRECT needs buffer, offset and size "
                 "multiples of %u",
                 op, f->path, (unsigned long long)off, n, buf, ZERO_IO_ALIGN);
    return ZERO_ERR_INVALID_ARG;
}

static zero_status check_rw(zero_io_file *f, const void *buf, size_t n, uint64_t off, zero_io_op op) {
    const char *name = zero_io_op_name(op);
    unsigned need = op == ZERO_IO_OP_READ ? ZERO_IO_READ : ZERO_IO_WRITE;
    if (!(f->flags & need)) {
        zero__errorf(f->io->err, sizeof f->io->err, "%s %s: the file was not opened for %sing", name,
                     f->path, op == ZERO_IO_OP_READ ? "read" : "writ");
        return ZERO_ERR_INVALID_ARG;
    }
    if (n && !buf) {
        zero__errorf(f->io->err, sizeof f->io->err, "%s %s at offset %llu: NULL buffer for %zu bytes",
                     name, f->path, (unsigned long long)off, n);
        return ZERO_ERR_INVALID_ARG;
    }
    if (off > (uint64_t)INT64_MAX || n > (uint64_t)INT64_MAX - off) {
        zero__errorf(f->io->err, sizeof f->io->err, "%s %s: offset %llu + %zu bytes is past the largest file",
                     name, f->path, (unsigned long long)off, n);
        return ZERO_ERR_INVALID_ARG;
    }
    return check_direct(f, buf, n, off, name);
}

zero_status zero_io_pread(zero_io_file *f, void *buf, size_t n, uint64_t offset) {
    if (!f) return ZERO_ERR_INVALID_ARG;
    zero_status s = check_rw(f, buf, n, offset, ZERO_IO_OP_READ);
    if (s != ZERO_OK || n == 0) return s;
    return f->io->vt->pread(f, buf, n, offset);
}

zero_status zero_io_pwrite(zero_io_file *f, const void *buf, size_t n, uint64_t offset) {
    if (!f) return ZERO_ERR_INVALID_ARG;
    zero_status s = check_rw(f, buf, n, offset, ZERO_IO_OP_WRITE);
    if (s != ZERO_OK || n == 0) return s;
    return f->io->vt->pwrite(f, buf, n, offset);
}

zero_status zero_io_fsync(zero_io_file *f) { return f ? f->io->vt->fsync(f) : ZERO_ERR_INVALID_ARG; }

zero_status zero_io_truncate(zero_io_file *f, uint64_t size) {
    if (!f) return ZERO_ERR_INVALID_ARG;
    if (!(f->flags & ZERO_IO_WRITE) || size > (uint64_t)INT64_MAX) {
        zero__errorf(f->io->err, sizeof f->io->err,
                     "truncate %s to %llu bytes: needs a file opened for writing and a size <= 2^63-1",
                     f->path, (unsigned long long)size);
        return ZERO_ERR_INVALID_ARG;
    }
    return f->io->vt->truncate(f, size);
}

zero_status zero_io_size(zero_io_file *f, uint64_t *size) {
    if (!f || !size) return ZERO_ERR_INVALID_ARG;
    return f->io->vt->size(f, size);
}

const char *zero_io_file_path(const zero_io_file *f) { return f ? f->path : ""; }

zero_status zero_io_lock(zero_io_file *f) {
    if (!f) return ZERO_ERR_INVALID_ARG;
    const zero_io_file *k = f;
    while (k->fd < 0 && k->impl) k = k->impl; /* the fault shim's file wraps the backend's */
    if (k->fd < 0) return bad_arg(f->io, "lock %s: the backend has no descriptor to lock", f->path);
    int r;
    do r = flock(k->fd, LOCK_EX | LOCK_NB);
    while (r != 0 && errno == EINTR);
    if (r == 0) return ZERO_OK;
    if (errno == EWOULDBLOCK) {
        zero__errorf(f->io->err, sizeof f->io->err, "lock %s: held by another process", f->path);
        return ZERO_ERR_STATE;
    }
    return zero__io_errno(f->io, errno, "lock", f->path, -1, 0);
}
zero_io *zero_io_file_io(const zero_io_file *f) { return f ? f->io : NULL; }

/* ---------------------------------------------------------------- names */
zero_status zero__io_rename_name(zero_io *io, const zero__io_name *from, const zero__io_name *to) {
    return io->vt->rename(io, from, to);
}
zero_status zero__io_unlink_name(zero_io *io, const zero__io_name *n, int missing_ok) {
    return io->vt->unlink(io, n, missing_ok);
}
zero_status zero__io_mkdir_name(zero_io *io, const zero__io_name *n) { return io->vt->mkdir(io, n); }
zero_status zero__io_fsync_dir_name(zero_io *io, const zero__io_name *n) { return io->vt->fsync_dir(io, n); }

zero_status zero_io_rename(zero_io *io, const char *from, const char *to) {
    if (!io) return ZERO_ERR_INVALID_ARG;
    if (!from || !*from || !to || !*to) return bad_arg(io, "rename: empty path%s", "");
    const zero__io_name a = {AT_FDCWD, from, from}, b = {AT_FDCWD, to, to};
    return zero__io_rename_name(io, &a, &b);
}

zero_status zero_io_unlink(zero_io *io, const char *path, int missing_ok) {
    if (!io) return ZERO_ERR_INVALID_ARG;
    if (!path || !*path) return bad_arg(io, "unlink: empty path%s", "");
    const zero__io_name n = {AT_FDCWD, path, path};
    return zero__io_unlink_name(io, &n, missing_ok);
}

zero_status zero_io_mkdir(zero_io *io, const char *path) {
    if (!io) return ZERO_ERR_INVALID_ARG;
    if (!path || !*path) return bad_arg(io, "mkdir: empty path%s", "");
    /* missing parents first, like mkdir -p: `--save runs/a/ckpt` should not need runs/a */
    char parent[4096];
    size_t n = strlen(path);
    if (n >= sizeof parent) return bad_arg(io, "mkdir: path too long: %s", path);
    memcpy(parent, path, n + 1);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        struct stat st;
        if (stat(parent, &st) != 0) {
            zero_status s = zero_io_mkdir(io, parent);
            if (s != ZERO_OK) return s;
        }
    }
    const zero__io_name nm = {AT_FDCWD, path, path};
    return zero__io_mkdir_name(io, &nm);
}

zero_status zero_io_fsync_dir(zero_io *io, const char *path) {
    if (!io) return ZERO_ERR_INVALID_ARG;
    if (!path || !*path) return bad_arg(io, "fsync directory: empty path%s", "");
    const zero__io_name n = {AT_FDCWD, path, path};
    return zero__io_fsync_dir_name(io, &n);
}

/* ---------------------------------------------------------------- directories */
/* "DIR/NAME" for messages and fault rules (a zero_mem string), and the check that NAME is one
 * component: a *_at call never walks through a directory other than d. */
static char *at_shown(zero_io_dir *d, const char *name, const char *op) {
    const size_t n = name ? strlen(name) : 0;
    if (!n || n > 255 || !strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/')) {
        zero__errorf(d->io->err, sizeof d->io->err, "%s in %s: '%.255s' is not one file name (no '/', not '.' or '..')",
                     op, d->path, name ? name : "(null)");
        return NULL;
    }
    const size_t len = strlen(d->path) + 1 + n + 1;
    char *p = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, len);
    if (!p) {
        zero__errorf(d->io->err, sizeof d->io->err, "%s %s/%s: out of memory", op, d->path, name);
        return NULL;
    }
    snprintf(p, len, "%s/%s", d->path, name);
    return p;
}

static zero_status dir_new(zero_io *io, int fd, const char *path, zero_io_dir **out) {
    zero_io_dir *d = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *d);
    char *p = zero__strdup(path);
    if (!d || !p) {
        zero_mem_free(NULL, d);
        zero_mem_free(NULL, p);
        close(fd);
        zero__errorf(io->err, sizeof io->err, "open directory %s: out of memory", path);
        return ZERO_ERR_NOMEM;
    }
    d->io = io;
    d->fd = fd;
    d->path = p;
    *out = d;
    return ZERO_OK;
}

/* The directory just opened as fd must be this user's when flags ask it. */
static zero_status dir_owned(zero_io *io, int fd, const char *path, unsigned flags) {
    struct stat st;
    if (!(flags & ZERO_IO_OWNED)) return ZERO_OK;
    if (fstat(fd, &st) != 0) return zero__io_errno(io, errno, "open directory", path, -1, 0);
    if (st.st_uid != geteuid()) {
        zero__errorf(io->err, sizeof io->err, "open directory %s: owned by another user (uid %u): refusing to work in it",
                     path, (unsigned)st.st_uid);
        return ZERO_ERR_IO;
    }
    return ZERO_OK;
}

zero_status zero_io_dir_open(zero_io *io, const char *path, unsigned flags, zero_io_dir **out) {
    if (!io || !out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!path || !*path) return bad_arg(io, "open directory: empty path%s", "");
    if (flags & ~(unsigned)(ZERO_IO_CREATE | ZERO_IO_OWNED))
        return bad_arg(io, "open directory %s: flags other than ZERO_IO_CREATE and ZERO_IO_OWNED", path);
    if (flags & ZERO_IO_CREATE) {
        zero_status s = zero_io_mkdir(io, path);
        if (s != ZERO_OK) return s;
    }
    int fd;
    do fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return zero__io_errno(io, errno, "open directory", path, -1, 0);
    zero_status s = dir_owned(io, fd, path, flags);
    if (s != ZERO_OK) {
        close(fd);
        return s;
    }
    return dir_new(io, fd, path, out);
}

zero_status zero_io_dir_open_at(zero_io_dir *d, const char *name, unsigned flags, zero_io_dir **out) {
    if (!d || !out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    zero_io *io = d->io;
    if (flags & ~(unsigned)(ZERO_IO_CREATE | ZERO_IO_OWNED))
        return bad_arg(io, "open directory in %s: flags other than ZERO_IO_CREATE and ZERO_IO_OWNED", d->path);
    char *shown = at_shown(d, name, "open directory");
    if (!shown) return ZERO_ERR_INVALID_ARG;
    const zero__io_name n = {d->fd, name, shown};
    zero_status s = (flags & ZERO_IO_CREATE) ? zero__io_mkdir_name(io, &n) : ZERO_OK;
    int fd = -1;
    if (s == ZERO_OK) {
        do fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        while (fd < 0 && errno == EINTR);
        if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
            struct stat st;
            const int link = fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
            zero__errorf(io->err, sizeof io->err, "open directory %s: %s", shown,
                         link ? "a symbolic link where a directory of zero's was expected: refusing to follow it"
                              : "not a directory");
            s = ZERO_ERR_IO;
        } else if (fd < 0) {
            s = zero__io_errno(io, errno, "open directory", shown, -1, 0);
        }
    }
    if (s == ZERO_OK) s = dir_owned(io, fd, shown, flags);
    if (s == ZERO_OK) s = dir_new(io, fd, shown, out);
    else if (fd >= 0) close(fd);
    zero_mem_free(NULL, shown);
    return s;
}

void zero_io_dir_close(zero_io_dir *d) {
    if (!d) return;
    close(d->fd);
    zero_mem_free(NULL, d->path);
    zero_mem_free(NULL, d);
}

const char *zero_io_dir_path(const zero_io_dir *d) { return d ? d->path : ""; }
zero_io *zero_io_dir_io(const zero_io_dir *d) { return d ? d->io : NULL; }

zero_status zero_io_open_at(zero_io_dir *d, const char *name, unsigned flags, zero_io_file **out) {
    if (!d || !out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (bad_flags(flags))
        return bad_arg(d->io, "open in %s: flags must include ZERO_IO_READ or ZERO_IO_WRITE and nothing unknown", d->path);
    char *shown = at_shown(d, name, "open");
    if (!shown) return ZERO_ERR_INVALID_ARG;
    const zero__io_name n = {d->fd, name, shown};
    zero_status s = zero__io_open_name(d->io, &n, flags, out);
    zero_mem_free(NULL, shown);
    return s;
}

zero_status zero_io_rename_at(zero_io_dir *from_dir, const char *from, zero_io_dir *to_dir, const char *to) {
    if (!from_dir || !to_dir) return ZERO_ERR_INVALID_ARG;
    if (from_dir->io != to_dir->io) return bad_arg(from_dir->io, "rename in %s: the directories belong to two io backends%s", "");
    char *a = at_shown(from_dir, from, "rename");
    char *b = a ? at_shown(to_dir, to, "rename") : NULL;
    zero_status s = ZERO_ERR_INVALID_ARG;
    if (b) {
        const zero__io_name x = {from_dir->fd, from, a}, y = {to_dir->fd, to, b};
        s = zero__io_rename_name(from_dir->io, &x, &y);
    }
    zero_mem_free(NULL, a);
    zero_mem_free(NULL, b);
    return s;
}

zero_status zero_io_unlink_at(zero_io_dir *d, const char *name, int missing_ok) {
    if (!d) return ZERO_ERR_INVALID_ARG;
    char *shown = at_shown(d, name, "unlink");
    if (!shown) return ZERO_ERR_INVALID_ARG;
    const zero__io_name n = {d->fd, name, shown};
    zero_status s = zero__io_unlink_name(d->io, &n, missing_ok);
    zero_mem_free(NULL, shown);
    return s;
}

zero_status zero_io_dir_fsync(zero_io_dir *d) {
    if (!d) return ZERO_ERR_INVALID_ARG;
    const zero__io_name n = {d->fd, ".", d->path};
    return zero__io_fsync_dir_name(d->io, &n);
}

zero_status zero_io_stat_at(zero_io_dir *d, const char *name, zero_io_entry *out) {
    if (!d || !out) return ZERO_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    char *shown = at_shown(d, name, "stat");
    if (!shown) return ZERO_ERR_INVALID_ARG;
    struct stat st;
    zero_status s = ZERO_OK;
    if (fstatat(d->fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT) out->kind = ZERO_IO_ENTRY_MISSING;
        else s = zero__io_errno(d->io, errno, "stat", shown, -1, 0);
    } else {
        out->kind = S_ISREG(st.st_mode)   ? ZERO_IO_ENTRY_FILE
                    : S_ISDIR(st.st_mode) ? ZERO_IO_ENTRY_DIR
                    : S_ISLNK(st.st_mode) ? ZERO_IO_ENTRY_LINK
                                          : ZERO_IO_ENTRY_OTHER;
        out->size = (uint64_t)st.st_size;
        out->uid = (unsigned)st.st_uid;
        out->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    }
    zero_mem_free(NULL, shown);
    return s;
}

zero_status zero_io_dir_list(zero_io_dir *d, int (*fn)(void *ctx, const char *name), void *ctx) {
    if (!d || !fn) return ZERO_ERR_INVALID_ARG;
    /* a descriptor of its own: readdir's position must not be shared with d */
    const int fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dp = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dp) {
        zero_status s = zero__io_errno(d->io, errno, "list", d->path, -1, 0);
        if (fd >= 0) close(fd);
        return s;
    }
    const struct dirent *e;
    errno = 0;
    while ((e = readdir(dp)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (fn(ctx, e->d_name)) break;
        errno = 0;
    }
    zero_status s = errno && !e ? zero__io_errno(d->io, errno, "list", d->path, -1, 0) : ZERO_OK;
    closedir(dp);
    return s;
}

/* ---------------------------------------------------------------- asynchronous */
/* Backends without a native pair run the transfer now and keep its outcome (status and message)
 * in a FIFO of queue_depth slots until zero_io_complete hands it back. */
static zero_status emulated_submit(zero_io_file *f, zero_io_op op, void *buf, size_t n, uint64_t off,
                                   void *user) {
    zero_io *io = f->io;
    zero_status s = op == ZERO_IO_OP_READ ? zero_io_pread(f, buf, n, off) : zero_io_pwrite(f, buf, n, off);
    zero__io_done *d = &io->done[(io->done_head + io->done_count) % io->queue_depth];
    d->user = user;
    d->status = s;
    d->msg[0] = 0;
    if (s != ZERO_OK) snprintf(d->msg, sizeof d->msg, "%s", io->err);
    io->done_count++;
    return ZERO_OK;
}

static zero_status emulated_complete(zero_io *io, int min_events, zero_io_event *ev, int max, int *got) {
    (void)min_events; /* everything submitted has already finished */
    int n = 0, first_failed = -1;
    while (n < max && io->done_count > 0) {
        zero__io_done *d = &io->done[io->done_head];
        ev[n].user = d->user;
        ev[n].status = d->status;
        if (d->status != ZERO_OK && first_failed < 0) {
            first_failed = n;
            snprintf(io->err, sizeof io->err, "%s", d->msg);
        }
        io->done_head = (io->done_head + 1) % io->queue_depth;
        io->done_count--;
        n++;
    }
    *got = n;
    return ZERO_OK;
}

zero_status zero_io_submit(zero_io_file *f, zero_io_op op, void *buf, size_t n, uint64_t offset,
                           void *user) {
    if (!f) return ZERO_ERR_INVALID_ARG;
    zero_io *io = f->io;
    if (op != ZERO_IO_OP_READ && op != ZERO_IO_OP_WRITE) {
        zero__errorf(io->err, sizeof io->err, "submit %s: operation %d is neither read nor write",
                     f->path, (int)op);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_status s = check_rw(f, buf, n, offset, op);
    if (s != ZERO_OK) return s;
    if (io->inflight >= io->queue_depth) {
        zero__errorf(io->err, sizeof io->err,
                     "submit %s %s: %d requests in flight already (queue depth %d): complete some first",
                     zero_io_op_name(op), f->path, io->inflight, io->queue_depth);
        return ZERO_ERR_STATE;
    }
    s = io->vt->submit ? io->vt->submit(f, op, buf, n, offset, user)
                       : emulated_submit(f, op, buf, n, offset, user);
    if (s == ZERO_OK) io->inflight++;
    return s;
}

zero_status zero_io_complete(zero_io *io, int min_events, zero_io_event *ev, int max, int *got) {
    if (!io || !got) return ZERO_ERR_INVALID_ARG;
    *got = 0;
    if (max < 0 || (max > 0 && !ev) || min_events < 0 || min_events > max || min_events > io->inflight) {
        zero__errorf(io->err, sizeof io->err,
                     "complete: min_events %d must be in [0, min(max %d, in flight %d)]", min_events,
                     max, io->inflight);
        return ZERO_ERR_INVALID_ARG;
    }
    if (max == 0 || io->inflight == 0) return ZERO_OK;
    zero_status s = io->vt->complete ? io->vt->complete(io, min_events, ev, max, got)
                                     : emulated_complete(io, min_events, ev, max, got);
    if (s == ZERO_OK) io->inflight -= *got;
    return s;
}

int zero_io_inflight(const zero_io *io) { return io ? io->inflight : 0; }

/* ---------------------------------------------------------------- buffers */
/* The aligned block sits inside a zero_mem block; the word before it holds that block's start. */
void *zero_io_buffer_alloc(zero_memacct *acct, zero_mem_category cat, size_t bytes) {
    if (bytes == 0 || bytes > SIZE_MAX - 2 * ZERO_IO_ALIGN) return NULL;
    size_t rounded = (bytes + ZERO_IO_ALIGN - 1) / ZERO_IO_ALIGN * ZERO_IO_ALIGN;
    char *raw = zero_mem_alloc(acct, cat, rounded + ZERO_IO_ALIGN);
    if (!raw) return NULL;
    uintptr_t a = ((uintptr_t)raw + ZERO_IO_ALIGN) & ~(uintptr_t)(ZERO_IO_ALIGN - 1);
    ((void **)a)[-1] = raw;
    return (void *)a;
}

void zero_io_buffer_free(zero_memacct *acct, void *p) {
    if (p) zero_mem_free(acct, ((void **)p)[-1]);
}

#ifndef ZERO_HAVE_URING
zero_status zero_io_create_uring(zero_io **out, int queue_depth, zero_error *err) {
    (void)queue_depth;
    if (out) *out = NULL;
    if (err) ZERO__ERR(err, "io_uring: this build has no liburing (install liburing-dev and rebuild)");
    return ZERO_ERR_UNSUPPORTED;
}
#endif

/* ---------------------------------------------------------------- default */
void zero_io_options_default(zero_io_options *o) {
    if (o) *o = (zero_io_options){NULL, NULL, 0};
}

int zero__io_settings(const zero_io_options *o, const char **backend, const char **bname, const char **fault, int *depth,
                      zero_error *err) {
    static const zero_io_options none = {NULL, NULL, 0};
    if (!o) o = &none;
    *bname = o->backend ? "zero_io_options.backend" : "ZERO_IO";
    *backend = o->backend ? o->backend : getenv("ZERO_IO");
    if (*backend && !**backend) *backend = NULL;
    *fault = o->fault ? o->fault : getenv("ZERO_FAULT");
    *depth = o->queue_depth;
    if (*depth < 0 || *depth > 4096) {
        if (err) ZERO__ERR(err, "zero_io_options.queue_depth %d: expected 1..4096, or 0 for the default", *depth);
        return -1;
    }
    if (*backend && strcmp(*backend, "posix") && strcmp(*backend, "uring") && strcmp(*backend, "io_uring")) {
        if (err) ZERO__ERR(err, "%s '%s': expected posix or uring", *bname, *backend);
        return -1;
    }
    return 0;
}

zero_status zero_io_create_with(zero_io **out, const zero_io_options *o, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    const char *b, *bname, *spec;
    int depth;
    if (zero__io_settings(o, &b, &bname, &spec, &depth, err) != 0) return ZERO_ERR_CONFIG;
    zero_io *inner = NULL;
    zero_status s = !b || !strcmp(b, "posix") ? zero_io_create_posix(&inner, err)
                                              : zero_io_create_uring(&inner, depth ? depth : DEFAULT_QUEUE_DEPTH, err);
    if (s != ZERO_OK) return s;
    if (!spec || !*spec) {
        *out = inner;
        return ZERO_OK;
    }
    return zero_io_create_fault(out, inner, 1, spec, err);
}

zero_status zero_io_create_default(zero_io **out, zero_error *err) { return zero_io_create_with(out, NULL, err); }
