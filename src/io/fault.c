/* The fault-injecting shim: wraps any backend and fails the Nth call of a kind (once, or from
 * then on) with EIO or ENOSPC, or lets a read or write through with one byte flipped, so tests can
 * prove that offload and checkpoints survive a bad disk and notice data that changed. */
#include "io/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_RULES 16
#define FLIP (-1)  /* not an errno: the call succeeds with one byte of its data changed */
#define STALL (-2) /* not an errno: the open never returns (the process waits to be killed) */

typedef struct fault_rule {
    zero_io_op op;
    uint64_t n;       /* 1-based index of the failing call among those that match */
    int err;          /* EIO, ENOSPC, FLIP or STALL */
    int always;       /* fail call n and every later one */
    char path[256];   /* substring a path must contain to be counted; "" = every path */
    uint64_t seen;    /* matching calls so far */
    char text[320];   /* the rule as written, for messages */
} fault_rule;

typedef struct fault_state {
    zero_io *inner;
    int own_inner;
    fault_rule rules[MAX_RULES];
    int nrules;
    uint64_t calls[ZERO_IO_OP_COUNT];
    uint64_t injected;
} fault_state;

static fault_state *state_of(zero_io *io) { return io->impl; }

/* Counts the call against every rule; returns the errno to inject (0: none) and the rule. */
static int check(zero_io *io, zero_io_op op, const char *path, const fault_rule **which) {
    fault_state *st = state_of(io);
    int inject = 0;
    st->calls[op]++;
    for (int i = 0; i < st->nrules; i++) {
        fault_rule *r = &st->rules[i];
        if (r->op != op || (r->path[0] && !strstr(path, r->path))) continue;
        r->seen++;
        if (!inject && (r->seen == r->n || (r->always && r->seen > r->n))) {
            inject = r->err;
            *which = r;
        }
    }
    if (inject) st->injected++;
    return inject;
}

/* The message a real failure would give, marked as injected so a test log is not misleading. */
static zero_status injected(zero_io *io, int err, const fault_rule *r, const char *op, const char *path,
                            int64_t off, size_t n) {
    zero_status s = zero__io_errno(io, err, op, path, off, n);
    size_t len = strlen(io->err);
    snprintf(io->err + len, sizeof io->err - len, " (injected fault %s)", r->text);
    return s;
}

static zero_status from_inner(zero_io *io, zero_status s) {
    if (s != ZERO_OK) snprintf(io->err, sizeof io->err, "%s", state_of(io)->inner->err);
    return s;
}

static zero_io_file *inner_file(zero_io_file *f) { return f->impl; }

static zero_status fault_open(zero_io *io, const zero__io_name *n, unsigned flags, zero_io_file *f) {
    const char *path = n->shown;
    const fault_rule *r = NULL;
    int e = check(io, ZERO_IO_OP_OPEN, path, &r);
    while (e == STALL) pause(); /* a process held inside a save, for a test to kill it there */
    if (e) return injected(io, e, r, "open", path, -1, 0);
    zero_io_file *in = NULL;
    zero_status s = zero__io_open_name(state_of(io)->inner, n, flags, &in);
    if (s != ZERO_OK) return from_inner(io, s);
    f->impl = in;
    return ZERO_OK;
}

static zero_status fault_close(zero_io_file *f) {
    const fault_rule *r = NULL;
    int e = check(f->io, ZERO_IO_OP_CLOSE, f->path, &r);
    zero_status s = from_inner(f->io, zero_io_close(inner_file(f)));
    f->impl = NULL;
    if (e) return injected(f->io, e, r, "close", f->path, -1, 0);
    return s;
}

static zero_status fault_pread(zero_io_file *f, void *buf, size_t n, uint64_t off) {
    const fault_rule *r = NULL;
    int e = check(f->io, ZERO_IO_OP_READ, f->path, &r);
    if (e && e != FLIP) return injected(f->io, e, r, "read", f->path, (int64_t)off, n);
    zero_status s = from_inner(f->io, zero_io_pread(inner_file(f), buf, n, off));
    if (e == FLIP && s == ZERO_OK && n > 0) ((unsigned char *)buf)[n / 2] ^= 0x10; /* as if the disk changed it */
    return s;
}

static zero_status fault_pwrite(zero_io_file *f, const void *buf, size_t n, uint64_t off) {
    const fault_rule *r = NULL;
    int e = check(f->io, ZERO_IO_OP_WRITE, f->path, &r);
    if (e == FLIP && n > 0) { /* the disk stores other bytes than it was given (an aligned copy for O_DIRECT) */
        unsigned char *copy = zero_io_buffer_alloc(NULL, ZERO_MEM_BUFFERS, n);
        if (!copy) return zero__io_errno(f->io, ENOMEM, "write", f->path, (int64_t)off, n);
        memcpy(copy, buf, n);
        copy[n / 2] ^= 0x10;
        zero_status s = from_inner(f->io, zero_io_pwrite(inner_file(f), copy, n, off));
        zero_io_buffer_free(NULL, copy);
        return s;
    }
    if (!e || e == FLIP) return from_inner(f->io, zero_io_pwrite(inner_file(f), buf, n, off));
    /* A full disk accepts part of a write before it refuses the rest. O_DIRECT keeps its alignment. */
    size_t part = n / 2;
    if (f->flags & ZERO_IO_DIRECT) part = part / ZERO_IO_ALIGN * ZERO_IO_ALIGN;
    if (e == ENOSPC && part > 0) (void)zero_io_pwrite(inner_file(f), buf, part, off);
    return injected(f->io, e, r, "write", f->path, (int64_t)(off + (e == ENOSPC ? part : 0)),
                    n - (e == ENOSPC ? part : 0));
}

static zero_status fault_fsync(zero_io_file *f) {
    const fault_rule *r = NULL;
    int e = check(f->io, ZERO_IO_OP_FSYNC, f->path, &r);
    if (e) return injected(f->io, e, r, "fsync", f->path, -1, 0);
    return from_inner(f->io, zero_io_fsync(inner_file(f)));
}

static zero_status fault_truncate(zero_io_file *f, uint64_t size) {
    const fault_rule *r = NULL;
    int e = check(f->io, ZERO_IO_OP_TRUNCATE, f->path, &r);
    if (e) return injected(f->io, e, r, "truncate", f->path, (int64_t)size, 0);
    return from_inner(f->io, zero_io_truncate(inner_file(f), size));
}

static zero_status fault_size(zero_io_file *f, uint64_t *size) {
    return from_inner(f->io, zero_io_size(inner_file(f), size));
}

static zero_status fault_rename(zero_io *io, const zero__io_name *from, const zero__io_name *to) {
    const fault_rule *r = NULL;
    int e = check(io, ZERO_IO_OP_RENAME, from->shown, &r);
    if (e) {
        zero_status s = e == ENOSPC ? ZERO_ERR_NOSPACE : ZERO_ERR_IO;
        zero__errorf(io->err, sizeof io->err, "rename %s to %s: %s (injected fault %s)", from->shown, to->shown,
                     strerror(e), r->text);
        return s;
    }
    return from_inner(io, zero__io_rename_name(state_of(io)->inner, from, to));
}

static zero_status fault_unlink(zero_io *io, const zero__io_name *n, int missing_ok) {
    const fault_rule *r = NULL;
    int e = check(io, ZERO_IO_OP_UNLINK, n->shown, &r);
    if (e) return injected(io, e, r, "unlink", n->shown, -1, 0);
    return from_inner(io, zero__io_unlink_name(state_of(io)->inner, n, missing_ok));
}

static zero_status fault_mkdir(zero_io *io, const zero__io_name *n) {
    const fault_rule *r = NULL;
    int e = check(io, ZERO_IO_OP_MKDIR, n->shown, &r);
    if (e) return injected(io, e, r, "mkdir", n->shown, -1, 0);
    return from_inner(io, zero__io_mkdir_name(state_of(io)->inner, n));
}

static zero_status fault_fsync_dir(zero_io *io, const zero__io_name *n) {
    const fault_rule *r = NULL;
    int e = check(io, ZERO_IO_OP_FSYNC, n->shown, &r);
    if (e) return injected(io, e, r, "fsync directory", n->shown, -1, 0);
    return from_inner(io, zero__io_fsync_dir_name(state_of(io)->inner, n));
}

static void fault_destroy(zero_io *io) {
    fault_state *st = state_of(io);
    if (!st) return;
    if (st->own_inner) zero_io_free(st->inner);
    zero_mem_free(NULL, st);
}

/* Asynchronous requests go through the front's emulation, i.e. through fault_pread/pwrite, so
 * they are counted and failed like the synchronous ones. */
static const zero__io_vtable fault_vtable = {
    .name = "fault",
    .open = fault_open,
    .close = fault_close,
    .pread = fault_pread,
    .pwrite = fault_pwrite,
    .fsync = fault_fsync,
    .truncate = fault_truncate,
    .size = fault_size,
    .rename = fault_rename,
    .unlink = fault_unlink,
    .mkdir = fault_mkdir,
    .fsync_dir = fault_fsync_dir,
    .destroy = fault_destroy,
};

/* Parses one rule "OP:N:ERR[:MODE[:PATH]]" of length len. */
static int parse_rule(const char *s, size_t len, fault_rule *r, zero_error *err) {
    char buf[320];
    if (len >= sizeof buf) {
        if (err) ZERO__ERR(err, "fault rule '%.40s...': longer than %zu characters", s, sizeof buf - 1);
        return -1;
    }
    memcpy(buf, s, len);
    buf[len] = 0;
    memset(r, 0, sizeof *r);
    snprintf(r->text, sizeof r->text, "%s", buf);
    char *field[5] = {0};
    int nf = 0;
    char *p = buf;
    field[nf++] = p;
    /* The PATH field is the rest of the rule, so it may itself contain ':'. */
    while (nf < 5 && (p = strchr(p, ':')) != NULL) {
        *p++ = 0;
        field[nf++] = p;
    }
    int op = -1;
    for (int k = 0; k < ZERO_IO_OP_COUNT; k++)
        if (!strcmp(field[0], zero_io_op_name((zero_io_op)k))) op = k;
    char *end = NULL;
    unsigned long long n = nf > 1 ? strtoull(field[1], &end, 10) : 0;
    int bad_n = nf < 2 || !*field[1] || *end || n < 1 || field[1][0] == '-';
    int e = 0;
    if (nf > 2 && !strcmp(field[2], "eio")) e = EIO;
    else if (nf > 2 && !strcmp(field[2], "enospc")) e = ENOSPC;
    else if (nf > 2 && !strcmp(field[2], "flip") && (op == ZERO_IO_OP_READ || op == ZERO_IO_OP_WRITE)) e = FLIP;
    else if (nf > 2 && !strcmp(field[2], "stall") && op == ZERO_IO_OP_OPEN) e = STALL;
    int always = 0, bad_mode = 0;
    if (nf > 3) {
        if (!strcmp(field[3], "always")) always = 1;
        else if (strcmp(field[3], "once") != 0) bad_mode = 1;
    }
    if (op < 0 || bad_n || !e || bad_mode || (nf > 4 && !*field[4])) {
        if (err)
            ZERO__ERR(err,
                      "fault rule '%s': expected OP:N:ERR[:MODE[:PATH]] with OP one of open, read, "
                      "write, fsync, close, truncate, rename, unlink, mkdir; N >= 1; ERR eio, "
                      "enospc, flip (read and write only) or stall (open only); MODE once or always; PATH not empty",
                      r->text);
        return -1;
    }
    r->op = (zero_io_op)op;
    r->n = n;
    r->err = e;
    r->always = always;
    if (nf > 4) snprintf(r->path, sizeof r->path, "%s", field[4]);
    return 0;
}

zero_status zero_io_create_fault(zero_io **out, zero_io *inner, int own_inner, const char *spec,
                                 zero_error *err) {
    if (out) *out = NULL;
    if (!out || !inner) {
        if (err) ZERO__ERR(err, "fault shim: needs an output pointer and a backend to wrap");
        if (own_inner) zero_io_free(inner);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_status s = ZERO_ERR_NOMEM;
    fault_state *st = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *st);
    if (!st) {
        if (err) ZERO__ERR(err, "fault shim: out of memory");
        goto fail;
    }
    const char *p = spec ? spec : "";
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (st->nrules == MAX_RULES) {
            if (err) ZERO__ERR(err, "fault spec '%s': more than %d rules", spec, MAX_RULES);
            s = ZERO_ERR_CONFIG;
            goto fail_st;
        }
        if (parse_rule(p, len, &st->rules[st->nrules], err) != 0) {
            s = ZERO_ERR_CONFIG;
            goto fail_st;
        }
        st->nrules++;
        p += len + (comma ? 1 : 0);
    }
    char name[64];
    snprintf(name, sizeof name, "fault(%.50s)", inner->name);
    zero_io *io = NULL;
    s = zero__io_new(&io, &fault_vtable, name, inner->queue_depth, err);
    if (s != ZERO_OK) goto fail_st;
    st->inner = inner;
    st->own_inner = own_inner;
    io->impl = st;
    *out = io;
    return ZERO_OK;
fail_st:
    zero_mem_free(NULL, st);
fail:
    if (own_inner) zero_io_free(inner);
    return s;
}

uint64_t zero_io_fault_calls(const zero_io *io, zero_io_op op) {
    if (!io || io->vt != &fault_vtable || (unsigned)op >= ZERO_IO_OP_COUNT) return 0;
    return ((const fault_state *)io->impl)->calls[op];
}

uint64_t zero_io_fault_injected(const zero_io *io) {
    if (!io || io->vt != &fault_vtable) return 0;
    return ((const fault_state *)io->impl)->injected;
}
