/* Private structure of the io layer: the backend table every zero_io dispatches through, and the
 * POSIX helpers the posix and io_uring backends share. */
#ifndef ZERO_IO_INTERNAL_H
#define ZERO_IO_INTERNAL_H

#include "common/internal.h"
#include "zero/io.h"

/* A name as the backends see it: `name` relative to the directory `dirfd` (AT_FDCWD for a path
 * the caller gave whole), `shown` the whole path, for messages and for fault rules' PATH. Names
 * under a zero_io_dir are one component, so nothing between the directory and the entry can be a
 * symbolic link planted after the directory was opened. */
typedef struct zero__io_name {
    int dirfd;
    const char *name;
    const char *shown;
} zero__io_name;

/* A directory opened once: the base of the *_at calls (zero/io.h). */
struct zero_io_dir {
    zero_io *io;
    int fd;
    char *path; /* as opened: messages only */
};

/* A backend: a table of functions plus its state. The front (io.c) checks arguments before
 * dispatching, so entries may assume a valid file, a non-NULL buffer and n > 0. Each entry
 * returns a zero_status and, on failure, has written the message into io->err. */
typedef struct zero__io_vtable {
    const char *name;
    zero_status (*open)(zero_io *io, const zero__io_name *n, unsigned flags, zero_io_file *f);
    zero_status (*close)(zero_io_file *f);
    zero_status (*pread)(zero_io_file *f, void *buf, size_t n, uint64_t off);
    zero_status (*pwrite)(zero_io_file *f, const void *buf, size_t n, uint64_t off);
    zero_status (*fsync)(zero_io_file *f);
    zero_status (*truncate)(zero_io_file *f, uint64_t size);
    zero_status (*size)(zero_io_file *f, uint64_t *size);
    zero_status (*rename)(zero_io *io, const zero__io_name *from, const zero__io_name *to);
    zero_status (*unlink)(zero_io *io, const zero__io_name *n, int missing_ok);
    zero_status (*mkdir)(zero_io *io, const zero__io_name *n); /* one level; an existing directory is ZERO_OK */
    zero_status (*fsync_dir)(zero_io *io, const zero__io_name *n);
    /* Asynchronous pair; NULL: the front emulates them with pread/pwrite (see io.c). */
    zero_status (*submit)(zero_io_file *f, zero_io_op op, void *buf, size_t n, uint64_t off, void *user);
    zero_status (*complete)(zero_io *io, int min_events, zero_io_event *ev, int max, int *got);
    void (*destroy)(zero_io *io);
} zero__io_vtable;

/* A completed request the emulated async path holds until zero_io_complete returns it. */
typedef struct zero__io_done {
    void *user;
    zero_status status;
    char msg[512];
} zero__io_done;

struct zero_io {
    const zero__io_vtable *vt;
    void *impl;              /* the backend's state */
    char name[64];
    int queue_depth;         /* most requests in flight */
    int inflight;            /* submitted, not yet returned */
    zero__io_done *done;     /* emulated async: finished requests, queue_depth slots, FIFO */
    int done_head, done_count;
    char err[512];
};

struct zero_io_file {
    zero_io *io;
    char *path;
    unsigned flags;
    int fd;                  /* posix and io_uring: the descriptor; -1 otherwise */
    void *impl;              /* the fault shim: the wrapped zero_io_file */
};

/* Formats "OP PATH[ at offset X (N bytes)]: strerror" into io->err and maps errno to a status
 * (ENOSPC/EDQUOT: ZERO_ERR_NOSPACE, else ZERO_ERR_IO). off < 0: no offset part. */
zero_status zero__io_errno(zero_io *io, int err, const char *op, const char *path, int64_t off,
                           size_t n);
/* Allocates a zero_io with the given table and name (impl NULL). */
zero_status zero__io_new(zero_io **out, const zero__io_vtable *vt, const char *name, int queue_depth,
                         zero_error *err);

/* POSIX building blocks (posix.c), used by the posix and io_uring tables. */
zero_status zero__posix_open(zero_io *io, const zero__io_name *n, unsigned flags, zero_io_file *f);
zero_status zero__posix_close(zero_io_file *f);
zero_status zero__posix_fsync(zero_io_file *f);
zero_status zero__posix_truncate(zero_io_file *f, uint64_t size);
zero_status zero__posix_size(zero_io_file *f, uint64_t *size);
zero_status zero__posix_rename(zero_io *io, const zero__io_name *from, const zero__io_name *to);
zero_status zero__posix_unlink(zero_io *io, const zero__io_name *n, int missing_ok);
zero_status zero__posix_mkdir(zero_io *io, const zero__io_name *n);
zero_status zero__posix_fsync_dir(zero_io *io, const zero__io_name *n);

/* The front's dispatch of a name operation (io.c), also what the fault shim calls on the backend
 * it wraps. */
zero_status zero__io_open_name(zero_io *io, const zero__io_name *n, unsigned flags, zero_io_file **out);
zero_status zero__io_rename_name(zero_io *io, const zero__io_name *from, const zero__io_name *to);
zero_status zero__io_unlink_name(zero_io *io, const zero__io_name *n, int missing_ok);
zero_status zero__io_mkdir_name(zero_io *io, const zero__io_name *n);
zero_status zero__io_fsync_dir_name(zero_io *io, const zero__io_name *n);

/* The settings of zero_io_options (o may be NULL) with the variables filling what they leave
 * NULL: *backend NULL when none is named (*bname: the field or variable that named it, for
 * messages), *fault NULL or the rules, *depth 0 for the default. -1 with err set for a value out
 * of range (then ZERO_ERR_CONFIG). The offload layer shares it (its own default backend). */
int zero__io_settings(const zero_io_options *o, const char **backend, const char **bname, const char **fault, int *depth,
                      zero_error *err);

#endif
