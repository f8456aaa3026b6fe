/* The io_uring backend (liburing): reads, writes and fsyncs go through one ring; opens, renames
 * and the other name operations are the posix ones. Compiled only when liburing is found. */
#include "io/internal.h"

#include <errno.h>
#include <liburing.h>
#include <string.h>

/* One request in the ring. Slot queue_depth is reserved for the synchronous calls, so a blocking
 * pread can run while queue_depth asynchronous requests are in flight. */
typedef struct uring_req {
    int in_use, finished, is_sync;
    zero_io_op op;
    zero_io_file *file;
    char *buf;
    size_t n, done;
    uint64_t off;
    void *user;
    zero_status status;
    char msg[512];
} uring_req;

typedef struct uring_state {
    struct io_uring ring;
    uring_req *req;  /* queue_depth + 1 slots */
    int *ready;      /* finished asynchronous slots, FIFO of queue_depth */
    int ready_head, ready_count;
} uring_state;

static uring_state *state_of(zero_io *io) { return io->impl; }

/* Queues the rest of request `slot` (from its `done` bytes on) and submits it. */
static zero_status push(zero_io *io, int slot) {
    uring_state *st = state_of(io);
    uring_req *r = &st->req[slot];
    struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
    if (!sqe) {
        zero__errorf(io->err, sizeof io->err, "%s %s: the io_uring submission queue is full",
                     zero_io_op_name(r->op), r->file->path);
        return ZERO_ERR_INTERNAL;
    }
    size_t left = r->n - r->done;
    /* One request moves at most 1 GiB: the kernel caps a transfer below 2 GiB anyway. */
    unsigned chunk = left > (1u << 30) ? (1u << 30) : (unsigned)left;
    if (r->op == ZERO_IO_OP_READ) io_uring_prep_read(sqe, r->file->fd, r->buf + r->done, chunk, r->off + r->done);
    else if (r->op == ZERO_IO_OP_WRITE) io_uring_prep_write(sqe, r->file->fd, r->buf + r->done, chunk, r->off + r->done);
    else io_uring_prep_fsync(sqe, r->file->fd, 0);
    io_uring_sqe_set_data64(sqe, (uint64_t)slot);
    int rc;
    do rc = io_uring_submit(&st->ring);
    while (rc == -EINTR);
    if (rc < 0) return zero__io_errno(io, -rc, "io_uring submit", r->file->path, (int64_t)r->off, r->n);
    return ZERO_OK;
}

static void finish(zero_io *io, int slot, zero_status s) {
    uring_state *st = state_of(io);
    uring_req *r = &st->req[slot];
    r->status = s;
    r->finished = 1;
    if (s != ZERO_OK) snprintf(r->msg, sizeof r->msg, "%s", io->err);
    if (!r->is_sync) st->ready[(st->ready_head + st->ready_count++) % io->queue_depth] = slot;
}

/* Handles one completion: retries short transfers, records the outcome. */
static void handle(zero_io *io, int slot, int res) {
    uring_req *r = &state_of(io)->req[slot];
    const char *op = zero_io_op_name(r->op);
    if (res == -EINTR || res == -EAGAIN) {
        if (push(io, slot) != ZERO_OK) finish(io, slot, ZERO_ERR_IO);
        return;
    }
    if (res < 0) {
        finish(io, slot, zero__io_errno(io, -res, op, r->file->path,
                                        r->op == ZERO_IO_OP_FSYNC ? -1 : (int64_t)(r->off + r->done),
                                        r->n - r->done));
        return;
    }
    if (r->op == ZERO_IO_OP_FSYNC) {
        finish(io, slot, ZERO_OK);
        return;
    }
    if (res == 0) {
        if (r->op == ZERO_IO_OP_READ) {
            zero__errorf(io->err, sizeof io->err,
                         "read %s at offset %llu (%zu bytes): unexpected end of file after %zu bytes",
                         r->file->path, (unsigned long long)r->off, r->n, r->done);
            finish(io, slot, ZERO_ERR_IO);
        } else {
            finish(io, slot, zero__io_errno(io, ENOSPC, op, r->file->path, (int64_t)(r->off + r->done),
                                            r->n - r->done));
        }
        return;
    }
    r->done += (size_t)res;
    if (r->done < r->n) {
        if (push(io, slot) != ZERO_OK) finish(io, slot, ZERO_ERR_IO);
        return;
    }
    finish(io, slot, ZERO_OK);
}

/* Reaps completions: waits for one when `wait`, then takes whatever else is ready. */
static zero_status reap(zero_io *io, int wait) {
    uring_state *st = state_of(io);
    struct io_uring_cqe *cqe;
    int rc;
    if (wait) {
        do rc = io_uring_wait_cqe(&st->ring, &cqe);
        while (rc == -EINTR);
        if (rc < 0) {
            zero__errorf(io->err, sizeof io->err, "io_uring wait: %s", strerror(-rc));
            return ZERO_ERR_IO;
        }
    }
    while (io_uring_peek_cqe(&st->ring, &cqe) == 0) {
        int slot = (int)io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&st->ring, cqe);
        handle(io, slot, res);
    }
    return ZERO_OK;
}

static zero_status run_sync(zero_io_file *f, zero_io_op op, void *buf, size_t n, uint64_t off) {
    zero_io *io = f->io;
    uring_state *st = state_of(io);
    int slot = io->queue_depth;
    uring_req *r = &st->req[slot];
    *r = (uring_req){.in_use = 1, .is_sync = 1, .op = op, .file = f, .buf = buf, .n = n, .off = off};
    zero_status s = push(io, slot);
    while (s == ZERO_OK && !r->finished) s = reap(io, 1);
    if (s == ZERO_OK) s = r->status;
    if (s != ZERO_OK && r->finished) snprintf(io->err, sizeof io->err, "%s", r->msg);
    r->in_use = 0;
    return s;
}

static zero_status uring_pread(zero_io_file *f, void *buf, size_t n, uint64_t off) {
    return run_sync(f, ZERO_IO_OP_READ, buf, n, off);
}

static zero_status uring_pwrite(zero_io_file *f, const void *buf, size_t n, uint64_t off) {
    return run_sync(f, ZERO_IO_OP_WRITE, (void *)buf, n, off);
}

static zero_status uring_fsync(zero_io_file *f) { return run_sync(f, ZERO_IO_OP_FSYNC, NULL, 0, 0); }

static zero_status uring_submit(zero_io_file *f, zero_io_op op, void *buf, size_t n, uint64_t off, void *user) {
    zero_io *io = f->io;
    uring_state *st = state_of(io);
    int slot = 0;
    while (slot < io->queue_depth && st->req[slot].in_use) slot++;
    if (slot == io->queue_depth) {
        zero__errorf(io->err, sizeof io->err, "submit %s: no free request slot", f->path);
        return ZERO_ERR_STATE;
    }
    uring_req *r = &st->req[slot];
    *r = (uring_req){.in_use = 1, .op = op, .file = f, .buf = buf, .n = n, .off = off, .user = user};
    if (n == 0) {
        finish(io, slot, ZERO_OK);
        return ZERO_OK;
    }
    zero_status s = push(io, slot);
    if (s != ZERO_OK) r->in_use = 0;
    return s;
}

static zero_status uring_complete(zero_io *io, int min_events, zero_io_event *ev, int max, int *got) {
    uring_state *st = state_of(io);
    zero_status s = reap(io, 0);
    while (s == ZERO_OK && st->ready_count < min_events) s = reap(io, 1);
    if (s != ZERO_OK) return s;
    int n = 0, failed = 0;
    while (n < max && st->ready_count > 0) {
        int slot = st->ready[st->ready_head];
        uring_req *r = &st->req[slot];
        ev[n].user = r->user;
        ev[n].status = r->status;
        if (r->status != ZERO_OK && !failed) {
            failed = 1;
            snprintf(io->err, sizeof io->err, "%s", r->msg);
        }
        r->in_use = 0;
        st->ready_head = (st->ready_head + 1) % io->queue_depth;
        st->ready_count--;
        n++;
    }
    *got = n;
    return ZERO_OK;
}

static void uring_destroy(zero_io *io) {
    uring_state *st = state_of(io);
    if (!st) return;
    io_uring_queue_exit(&st->ring);
    zero_mem_free(NULL, st->ready);
    zero_mem_free(NULL, st->req);
    zero_mem_free(NULL, st);
}

static const zero__io_vtable uring_vtable = {
    .name = "uring",
    .open = zero__posix_open,
    .close = zero__posix_close,
    .pread = uring_pread,
    .pwrite = uring_pwrite,
    .fsync = uring_fsync,
    .truncate = zero__posix_truncate,
    .size = zero__posix_size,
    .rename = zero__posix_rename,
    .unlink = zero__posix_unlink,
    .mkdir = zero__posix_mkdir,
    .fsync_dir = zero__posix_fsync_dir,
    .submit = uring_submit,
    .complete = uring_complete,
    .destroy = uring_destroy,
};

zero_status zero_io_create_uring(zero_io **out, int queue_depth, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (queue_depth < 1 || queue_depth > 4096) {
        if (err) ZERO__ERR(err, "io_uring queue depth %d: expected 1..4096", queue_depth);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_io *io = NULL;
    zero_status s = zero__io_new(&io, &uring_vtable, "uring", queue_depth, err);
    if (s != ZERO_OK) return s;
    uring_state *st = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *st);
    if (!st) goto fail_nomem;
    io->impl = st;
    st->req = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)(queue_depth + 1) * sizeof *st->req);
    st->ready = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)queue_depth * sizeof *st->ready);
    if (!st->req || !st->ready) goto fail_nomem;
    int rc = io_uring_queue_init((unsigned)queue_depth + 1, &st->ring, 0);
    if (rc < 0) {
        if (err) ZERO__ERR(err, "io_uring: the kernel refused a ring of %d entries: %s", queue_depth + 1,
                           strerror(-rc));
        zero_mem_free(NULL, st->ready);
        zero_mem_free(NULL, st->req);
        zero_mem_free(NULL, st);
        io->impl = NULL;
        zero_io_free(io);
        return ZERO_ERR_UNSUPPORTED;
    }
    *out = io;
    return ZERO_OK;
fail_nomem:
    if (st) {
        zero_mem_free(NULL, st->ready);
        zero_mem_free(NULL, st->req);
        zero_mem_free(NULL, st);
    }
    io->impl = NULL;
    zero_io_free(io);
    if (err) ZERO__ERR(err, "io_uring: out of memory for %d requests", queue_depth);
    return ZERO_ERR_NOMEM;
}
