/* The posix backend: pread/pwrite/fsync on a descriptor (optionally O_DIRECT), and the name
 * operations (rename, unlink, mkdir, directory fsync) that the io_uring backend shares. */
#define _GNU_SOURCE /* O_DIRECT */
#include "io/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

zero_status zero__posix_open(zero_io *io, const zero__io_name *n, unsigned flags, zero_io_file *f) {
    const char *path = n->shown;
    int oflags = O_CLOEXEC;
    if ((flags & ZERO_IO_READ) && (flags & ZERO_IO_WRITE)) oflags |= O_RDWR;
    else if (flags & ZERO_IO_WRITE) oflags |= O_WRONLY;
    else oflags |= O_RDONLY;
    if (flags & ZERO_IO_CREATE) oflags |= O_CREAT;
    if (flags & ZERO_IO_TRUNC) oflags |= O_TRUNC;
    if (flags & ZERO_IO_EXCL) oflags |= O_EXCL;
    if (flags & ZERO_IO_DIRECT) oflags |= O_DIRECT;
    if (flags & (ZERO_IO_NOFOLLOW | ZERO_IO_PRIVATE)) oflags |= O_NOFOLLOW;
    /* a new file: what the umask leaves of 0666 (checkpoints, exports), or 0600 for scratch */
    const mode_t mode = (flags & ZERO_IO_PRIVATE) ? 0600 : 0666;
    int fd;
    do fd = openat(n->dirfd, n->name, oflags, mode);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        const int e = errno;
        if (e == ELOOP && (flags & (ZERO_IO_NOFOLLOW | ZERO_IO_PRIVATE))) {
            zero__errorf(io->err, sizeof io->err, "open %s: a symbolic link: refusing to follow it", path);
            return ZERO_ERR_IO;
        }
        return zero__io_errno(io, e, "open", path, -1, 0);
    }
    if (flags & ZERO_IO_PRIVATE) {
        /* an existing file opened as scratch must be ours and private (umask 0 cannot widen a new one) */
        struct stat st;
        const char *why = NULL;
        if (fstat(fd, &st) != 0) why = strerror(errno);
        else if (!S_ISREG(st.st_mode)) why = "not a regular file";
        else if (st.st_uid != geteuid()) why = "owned by another user";
        else if (st.st_mode & 077) why = "readable or writable by other users";
        if (why) {
            close(fd);
            zero__errorf(io->err, sizeof io->err, "open %s: %s: refusing it as private scratch", path, why);
            return ZERO_ERR_IO;
        }
    }
    f->fd = fd;
    return ZERO_OK;
}

zero_status zero__posix_close(zero_io_file *f) {
    /* Linux releases the descriptor even when close fails: never retry it. */
    if (f->fd >= 0 && close(f->fd) != 0) {
        f->fd = -1;
        return zero__io_errno(f->io, errno, "close", f->path, -1, 0);
    }
    f->fd = -1;
    return ZERO_OK;
}

static zero_status posix_pread(zero_io_file *f, void *buf, size_t n, uint64_t off) {
    char *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(f->fd, p + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            return zero__io_errno(f->io, errno, "read", f->path, (int64_t)(off + done), n - done);
        }
        if (r == 0) {
            zero__errorf(f->io->err, sizeof f->io->err,
                         "read %s at offset %llu (%zu bytes): unexpected end of file after %zu bytes",
                         f->path, (unsigned long long)off, n, done);
            return ZERO_ERR_IO;
        }
        done += (size_t)r;
    }
    return ZERO_OK;
}

static zero_status posix_pwrite(zero_io_file *f, const void *buf, size_t n, uint64_t off) {
    const char *p = buf;
    size_t done = 0;
    while (done < n) {
        ssize_t r = pwrite(f->fd, p + done, n - done, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            return zero__io_errno(f->io, errno, "write", f->path, (int64_t)(off + done), n - done);
        }
        if (r == 0) /* a zero-byte write of a non-empty buffer means no room */
            return zero__io_errno(f->io, ENOSPC, "write", f->path, (int64_t)(off + done), n - done);
        done += (size_t)r;
    }
    return ZERO_OK;
}

zero_status zero__posix_fsync(zero_io_file *f) {
    if (fsync(f->fd) != 0) return zero__io_errno(f->io, errno, "fsync", f->path, -1, 0);
    return ZERO_OK;
}

zero_status zero__posix_truncate(zero_io_file *f, uint64_t size) {
    int r;
    do r = ftruncate(f->fd, (off_t)size);
    while (r != 0 && errno == EINTR);
    if (r != 0) return zero__io_errno(f->io, errno, "truncate", f->path, (int64_t)size, 0);
    return ZERO_OK;
}

zero_status zero__posix_size(zero_io_file *f, uint64_t *size) {
    struct stat st;
    if (fstat(f->fd, &st) != 0) return zero__io_errno(f->io, errno, "stat", f->path, -1, 0);
    *size = (uint64_t)st.st_size;
    return ZERO_OK;
}

zero_status zero__posix_rename(zero_io *io, const zero__io_name *from, const zero__io_name *to) {
    if (renameat(from->dirfd, from->name, to->dirfd, to->name) != 0) {
        int e = errno;
        zero__errorf(io->err, sizeof io->err, "rename %s to %s: %s", from->shown, to->shown, strerror(e));
        return (e == ENOSPC || e == EDQUOT) ? ZERO_ERR_NOSPACE : ZERO_ERR_IO;
    }
    return ZERO_OK;
}

/* A symbolic link is removed itself (AT_SYMLINK_NOFOLLOW), never what it points to. */
zero_status zero__posix_unlink(zero_io *io, const zero__io_name *n, int missing_ok) {
    struct stat st;
    if (fstatat(n->dirfd, n->name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno == ENOENT && missing_ok) return ZERO_OK;
        return zero__io_errno(io, errno, "unlink", n->shown, -1, 0);
    }
    int r = unlinkat(n->dirfd, n->name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
    if (r != 0 && !(errno == ENOENT && missing_ok)) return zero__io_errno(io, errno, "unlink", n->shown, -1, 0);
    return ZERO_OK;
}

zero_status zero__posix_mkdir(zero_io *io, const zero__io_name *n) {
    if (mkdirat(n->dirfd, n->name, 0777) == 0) return ZERO_OK; /* what the umask leaves, as other tools */
    int e = errno;
    struct stat st;
    /* an existing directory is fine; a link is not followed to decide (the caller's open refuses it) */
    if (e == EEXIST && fstatat(n->dirfd, n->name, &st, n->dirfd == AT_FDCWD ? 0 : AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode))
        return ZERO_OK;
    if (e == EEXIST) {
        zero__errorf(io->err, sizeof io->err, "mkdir %s: exists and is not a directory", n->shown);
        return ZERO_ERR_IO;
    }
    return zero__io_errno(io, e, "mkdir", n->shown, -1, 0);
}

zero_status zero__posix_fsync_dir(zero_io *io, const zero__io_name *n) {
    int fd = openat(n->dirfd, n->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return zero__io_errno(io, errno, "fsync directory", n->shown, -1, 0);
    zero_status s = ZERO_OK;
    /* Some file systems cannot fsync a directory (EINVAL); their renames are durable anyway. */
    if (fsync(fd) != 0 && errno != EINVAL) s = zero__io_errno(io, errno, "fsync directory", n->shown, -1, 0);
    close(fd);
    return s;
}

static const zero__io_vtable posix_vtable = {
    .name = "posix",
    .open = zero__posix_open,
    .close = zero__posix_close,
    .pread = posix_pread,
    .pwrite = posix_pwrite,
    .fsync = zero__posix_fsync,
    .truncate = zero__posix_truncate,
    .size = zero__posix_size,
    .rename = zero__posix_rename,
    .unlink = zero__posix_unlink,
    .mkdir = zero__posix_mkdir,
    .fsync_dir = zero__posix_fsync_dir,
};

zero_status zero_io_create_posix(zero_io **out, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    return zero__io_new(out, &posix_vtable, "posix", 64, err);
}
