/* zero/io.h — file I/O behind one table of backends: posix (pread/pwrite, optional O_DIRECT),
 * io_uring (liburing, for pipelined offload), and a fault-injecting shim that wraps any backend.
 *
 *   zero_io *io;  zero_io_create_default(&io, &err);     // posix, or $ZERO_IO; $ZERO_FAULT applies
 *   zero_io_file *f;
 *   zero_io_open(io, "/nvme/x.bin", ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &f);
 *   zero_io_pwrite(f, buf, n, 0);  zero_io_fsync(f);  zero_io_close(f);
 *   zero_io_free(io);
 *
 * Contracts:
 *  - pread/pwrite transfer all n bytes or fail (short transfers are retried; end of file before
 *    n bytes is an error). Offsets are absolute; there is no file position.
 *  - Every failure returns ZERO_ERR_NOSPACE (ENOSPC, EDQUOT) or ZERO_ERR_IO (anything else the
 *    OS reports), or ZERO_ERR_INVALID_ARG for a bad argument, and zero_io_last_error() says
 *    which operation on which path at which offset failed, with the OS's reason (strerror).
 *  - A zero_io and its files are used from one thread at a time (give each thread its own).
 *  - Files opened with ZERO_IO_DIRECT bypass the page cache: buffers, offsets and sizes must be
 *    multiples of ZERO_IO_ALIGN (zero_io_buffer_alloc gives such buffers).
 *
 * Asynchronous transfers (submit/complete) are how offload pipelines disk traffic with compute:
 * zero_io_submit queues a read or write (the buffer must stay untouched until its completion is
 * returned); zero_io_complete returns finished ones. io_uring runs them in the kernel; posix runs
 * each at submit time and queues its completion, so the same code works on both.
 *
 * Fault injection (in the spirit of SQLite's test VFS): zero_io_create_fault wraps a backend and
 * fails the Nth call of one kind of operation, once or from then on, with EIO or ENOSPC. The spec
 * is a comma-separated list of rules  OP:N:ERR[:MODE[:PATH]]
 *   OP    open | read | write | fsync | close | truncate | rename | unlink | mkdir
 *   N     1-based index of the call of that kind (counted over calls whose path matches PATH)
 *   ERR   eio | enospc         (an enospc write first writes half of its bytes, as a full disk does)
 *         | flip               (read, write: the call succeeds, with the byte in the middle of its
 *                              data changed on the way: what a checksum must catch)
 *   MODE  once (default) | always (the Nth call and every later one fail)
 *   PATH  only calls on paths containing this text are counted (rename: the source path)
 * e.g. ZERO_FAULT="write:3:eio:once" or "fsync:1:eio:always:rank_00001". The environment variable
 * ZERO_FAULT applies to every zero_io_create_default(), so a real run of the CLI can be broken.
 */
#ifndef ZERO_IO_H
#define ZERO_IO_H

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zero_io zero_io;
typedef struct zero_io_file zero_io_file;

/* Alignment of O_DIRECT buffers, offsets and sizes (the largest logical block size in use). */
#define ZERO_IO_ALIGN 4096u

/* Open flags. READ and/or WRITE is required. */
enum {
    ZERO_IO_READ = 1u << 0,
    ZERO_IO_WRITE = 1u << 1,
    ZERO_IO_CREATE = 1u << 2, /* create when missing (mode 0666 less the umask, as other tools) */
    ZERO_IO_TRUNC = 1u << 3,  /* truncate to 0 on open */
    ZERO_IO_EXCL = 1u << 4,   /* with CREATE: fail when the file exists (a symbolic link included) */
    ZERO_IO_DIRECT = 1u << 5, /* O_DIRECT: aligned buffers, offsets and sizes */
    ZERO_IO_NOFOLLOW = 1u << 6, /* fail when the last component of the path is a symbolic link */
    ZERO_IO_PRIVATE = 1u << 7,  /* scratch: created owner-only (0600) whatever the umask, never
                                   through a symbolic link (implies NOFOLLOW), and the file opened
                                   must be a regular file of this user: ZERO_ERR_IO otherwise */
    ZERO_IO_OWNED = 1u << 8,    /* zero_io_dir_open*: the directory must belong to this user */
};

/* Kinds of operation: what a fault rule counts and what an async request does. */
typedef enum zero_io_op {
    ZERO_IO_OP_OPEN = 0,
    ZERO_IO_OP_READ = 1,
    ZERO_IO_OP_WRITE = 2,
    ZERO_IO_OP_FSYNC = 3,  /* files and directories */
    ZERO_IO_OP_CLOSE = 4,
    ZERO_IO_OP_TRUNCATE = 5,
    ZERO_IO_OP_RENAME = 6,
    ZERO_IO_OP_UNLINK = 7, /* files and (empty) directories */
    ZERO_IO_OP_MKDIR = 8,
    ZERO_IO_OP_COUNT
} zero_io_op;

const char *zero_io_op_name(zero_io_op op); /* "open", "read", ... ; "invalid" otherwise */

/* ---------------------------------------------------------------- backends */
/* Plain POSIX calls. Never fails except for memory. */
zero_status zero_io_create_posix(zero_io **out, zero_error *err);
/* io_uring with `queue_depth` (1..4096) entries: reads, writes and fsyncs go through the ring.
 * ZERO_ERR_UNSUPPORTED when built without liburing or when the kernel refuses io_uring. */
zero_status zero_io_create_uring(zero_io **out, int queue_depth, zero_error *err);
/* Wraps `inner` with the fault rules of `spec` (syntax above; NULL or "" = no rule). With
 * own_inner the shim frees inner when it is freed, also when this call fails. A bad spec is
 * ZERO_ERR_CONFIG naming the rule and what was expected. */
zero_status zero_io_create_fault(zero_io **out, zero_io *inner, int own_inner, const char *spec,
                                 zero_error *err);
/* What ZERO_IO and ZERO_FAULT set, for a program that embeds the library: a NULL field takes
 * its variable's value (zero_io_options_default leaves them all NULL and queue_depth 0). */
typedef struct zero_io_options {
    const char *backend; /* "posix" or "uring"; NULL: $ZERO_IO, else the caller's default */
    const char *fault;   /* fault rules (syntax above); NULL: $ZERO_FAULT; "": none */
    int queue_depth;     /* io_uring entries, 1..4096; 0: the default (64) */
} zero_io_options;
void zero_io_options_default(zero_io_options *o);
/* The backend the options name ("posix" when neither they nor $ZERO_IO do), wrapped in the fault
 * shim when they (or $ZERO_FAULT) give rules. A backend name other than posix or uring is
 * ZERO_ERR_CONFIG naming the field or the variable. o: NULL for the defaults. */
zero_status zero_io_create_with(zero_io **out, const zero_io_options *o, zero_error *err);
/* zero_io_create_with(out, NULL, err): $ZERO_IO ("posix", the default, or "uring"), wrapped in
 * the fault shim when $ZERO_FAULT is set and not empty. */
zero_status zero_io_create_default(zero_io **out, zero_error *err);
/* Frees the backend (NULL is a no-op). Its files must be closed first; async requests still in
 * flight are waited for. */
void zero_io_free(zero_io *io);

const char *zero_io_backend(const zero_io *io); /* "posix", "uring", "fault(posix)", ... */
const char *zero_io_last_error(const zero_io *io);

/* Fault shim only (0 on other backends): calls of kind `op` seen so far, and faults injected. */
uint64_t zero_io_fault_calls(const zero_io *io, zero_io_op op);
uint64_t zero_io_fault_injected(const zero_io *io);

/* ---------------------------------------------------------------- files */
zero_status zero_io_open(zero_io *io, const char *path, unsigned flags, zero_io_file **out);
/* Closes and frees f (NULL is a no-op returning ZERO_OK). The file is released even when the
 * close reports an error. */
zero_status zero_io_close(zero_io_file *f);
zero_status zero_io_pread(zero_io_file *f, void *buf, size_t n, uint64_t offset);
zero_status zero_io_pwrite(zero_io_file *f, const void *buf, size_t n, uint64_t offset);
/* Data and metadata durable on the device (fsync). */
zero_status zero_io_fsync(zero_io_file *f);
zero_status zero_io_truncate(zero_io_file *f, uint64_t size);
zero_status zero_io_size(zero_io_file *f, uint64_t *size);
const char *zero_io_file_path(const zero_io_file *f);
/* An exclusive advisory lock on the open file (flock, without waiting): ZERO_ERR_STATE when
 * another open file holds it. It is released when f is closed or the process ends, however. */
zero_status zero_io_lock(zero_io_file *f);
zero_io *zero_io_file_io(const zero_io_file *f);

/* ---------------------------------------------------------------- names */
/* rename(2): atomic replacement of `to` on one file system. */
zero_status zero_io_rename(zero_io *io, const char *from, const char *to);
/* Removes a file or an empty directory. A missing path is ZERO_OK when missing_ok. */
zero_status zero_io_unlink(zero_io *io, const char *path, int missing_ok);
/* Creates a directory and its missing parents (mode 0777 less the umask); an existing directory
 * is ZERO_OK. */
zero_status zero_io_mkdir(zero_io *io, const char *path);
/* Makes the directory's entries durable (fsync of the directory): after a create or rename. */
zero_status zero_io_fsync_dir(zero_io *io, const char *path);

/* ---------------------------------------------------------------- directories */
/* A directory opened once, the base of the *_at calls: work inside it is relative to its
 * descriptor, so no path is resolved again through a symbolic link planted after it was opened.
 * Every NAME given to an *_at call is one component (no '/', not "." or ".."; ZERO_ERR_INVALID_ARG
 * otherwise), and no *_at call follows a symbolic link at NAME: open_at (with NOFOLLOW, implied
 * for directories) and dir_open_at refuse one, rename_at and unlink_at act on the link itself.
 * This is how zero works in directories others may write to (docs/SECURITY.md): its saves.
 * Messages and fault rules see the whole path, DIR/NAME. Renames, unlinks, mkdirs and fsyncs go
 * through the backend (and so through the fault shim) as their path forms do; opening a
 * directory, stat and listing go straight to the OS. */
typedef struct zero_io_dir zero_io_dir;

/* Opens the directory at path (followed as given: the caller's choice), creating it and its
 * missing parents first with ZERO_IO_CREATE; with ZERO_IO_OWNED it must belong to this user. */
zero_status zero_io_dir_open(zero_io *io, const char *path, unsigned flags, zero_io_dir **out);
/* Opens the directory NAME inside d (with ZERO_IO_CREATE: made first when missing), never
 * through a symbolic link: a link or anything but a directory at NAME is ZERO_ERR_IO naming it. */
zero_status zero_io_dir_open_at(zero_io_dir *d, const char *name, unsigned flags, zero_io_dir **out);
void zero_io_dir_close(zero_io_dir *d); /* NULL is a no-op */
const char *zero_io_dir_path(const zero_io_dir *d);
zero_io *zero_io_dir_io(const zero_io_dir *d);
zero_status zero_io_open_at(zero_io_dir *d, const char *name, unsigned flags, zero_io_file **out);
/* renameat(2) between two directories of the same io; a link at `to` is replaced, not followed. */
zero_status zero_io_rename_at(zero_io_dir *from_dir, const char *from, zero_io_dir *to_dir, const char *to);
/* Removes the file, link or empty directory NAME (a link itself, never its target). */
zero_status zero_io_unlink_at(zero_io_dir *d, const char *name, int missing_ok);
zero_status zero_io_dir_fsync(zero_io_dir *d);

typedef enum zero_io_entry_kind {
    ZERO_IO_ENTRY_MISSING = 0,
    ZERO_IO_ENTRY_FILE,  /* a regular file */
    ZERO_IO_ENTRY_DIR,
    ZERO_IO_ENTRY_LINK,  /* a symbolic link (not followed) */
    ZERO_IO_ENTRY_OTHER  /* a FIFO, a socket, a device */
} zero_io_entry_kind;
typedef struct zero_io_entry {
    zero_io_entry_kind kind;
    uint64_t size;
    unsigned uid;
    int64_t mtime_ns;
} zero_io_entry;
/* What NAME in d is, without following a link; a missing NAME is ZERO_OK with kind MISSING. */
zero_status zero_io_stat_at(zero_io_dir *d, const char *name, zero_io_entry *out);
/* Calls fn for every entry of d but "." and ".." (in the directory's order) until fn returns
 * non-zero. Entries made or removed meanwhile may or may not be seen. */
zero_status zero_io_dir_list(zero_io_dir *d, int (*fn)(void *ctx, const char *name), void *ctx);

/* ---------------------------------------------------------------- asynchronous */
typedef struct zero_io_event {
    void *user;         /* what was passed to zero_io_submit */
    zero_status status; /* ZERO_OK when all bytes were transferred */
} zero_io_event;

/* Queues a read or a write of n bytes at offset (op is ZERO_IO_OP_READ or ZERO_IO_OP_WRITE).
 * At most the backend's queue depth (posix: 64) may be in flight: ZERO_ERR_STATE beyond. A
 * failed transfer is reported by its event, not here. */
zero_status zero_io_submit(zero_io_file *f, zero_io_op op, void *buf, size_t n, uint64_t offset,
                           void *user);
/* Waits until at least min_events (<= in flight) have finished, then stores up to max of them in
 * ev and their number in *got. When an event failed, zero_io_last_error() describes the first
 * failed event of this batch and the call still returns ZERO_OK (each event has its status). */
zero_status zero_io_complete(zero_io *io, int min_events, zero_io_event *ev, int max, int *got);
/* Requests submitted and not yet returned by zero_io_complete. */
int zero_io_inflight(const zero_io *io);

/* ---------------------------------------------------------------- buffers */
/* `bytes` rounded up to ZERO_IO_ALIGN, aligned to ZERO_IO_ALIGN, charged to cat in acct (may be
 * NULL); NULL on failure. Free with zero_io_buffer_free and the same account. */
void *zero_io_buffer_alloc(zero_memacct *acct, zero_mem_category cat, size_t bytes);
void zero_io_buffer_free(zero_memacct *acct, void *p);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_IO_H */
