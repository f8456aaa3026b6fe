/* Tests of the io layer: every backend writes, reads back and verifies (sync, async, O_DIRECT);
 * errors name path, operation and offset; the fault shim fails exactly the Nth call of each kind. */
#include "harness.h"
#include "zero/io.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[512];

static void make_dir(void) {
    const char *base = getenv("ZERO_BUILD_DIR");
    snprintf(g_dir, sizeof g_dir, "%s/zt_io_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", g_dir, strerror(errno));
        exit(1);
    }
}

static void path_of(char *dst, size_t cap, const char *name) { snprintf(dst, cap, "%s/%s", g_dir, name); }

static uint64_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (uint64_t)st.st_size : (uint64_t)-1;
}

/* Byte i of the test pattern for a stream seeded with seed. */
static unsigned char pat(uint64_t i, unsigned seed) { return (unsigned char)((i * 2654435761u + seed) >> 13); }

static void fill(unsigned char *b, size_t n, uint64_t base, unsigned seed) {
    for (size_t i = 0; i < n; i++) b[i] = pat(base + i, seed);
}

static size_t mismatches(const unsigned char *b, size_t n, uint64_t base, unsigned seed) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += b[i] != pat(base + i, seed);
    return bad;
}

/* ------------------------------------------------------------------ each backend round trips */
static void roundtrip(zero_io *io, int direct, const char *tag) {
    char p[600];
    path_of(p, sizeof p, tag);
    unsigned flags = ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC | (direct ? ZERO_IO_DIRECT : 0);
    zero_io_file *f = NULL;
    ZT_OK(zero_io_open(io, p, flags, &f));
    if (!f) {
        ZT_FAIL("%s: open: %s", tag, zero_io_last_error(io));
        return;
    }
    const size_t total = 3u << 20; /* 3 MiB in uneven chunks (multiples of 4096 for O_DIRECT) */
    unsigned char *buf = zero_io_buffer_alloc(NULL, ZERO_MEM_BUFFERS, total);
    ZT_CHECK(buf && ((uintptr_t)buf % ZERO_IO_ALIGN) == 0);
    fill(buf, total, 0, 7);
    const size_t chunks[] = {4096, 65536, 12288, 1u << 20, 8192};
    size_t off = 0;
    for (int k = 0; off < total; k++) {
        size_t c = chunks[k % 5];
        if (c > total - off) c = total - off;
        ZT_OK(zero_io_pwrite(f, buf + off, c, off));
        off += c;
    }
    ZT_OK(zero_io_fsync(f));
    uint64_t sz = 0;
    ZT_OK(zero_io_size(f, &sz));
    ZT_EQ_INT(sz, total);
    memset(buf, 0, total);
    ZT_OK(zero_io_pread(f, buf, total, 0));
    ZT_EQ_INT(mismatches(buf, total, 0, 7), 0);
    /* a range in the middle */
    ZT_OK(zero_io_pread(f, buf, 8192, 1u << 20));
    ZT_EQ_INT(mismatches(buf, 8192, 1u << 20, 7), 0);

    /* asynchronous: 8 writes of 64 KiB of a new pattern, then 8 reads, completions matched by user */
    const size_t blk = 65536;
    fill(buf, 8 * blk, 0, 99);
    for (int i = 0; i < 8; i++)
        ZT_OK(zero_io_submit(f, ZERO_IO_OP_WRITE, buf + i * blk, blk, (uint64_t)i * blk, (void *)(uintptr_t)(i + 1)));
    ZT_EQ_INT(zero_io_inflight(io), 8);
    int seen = 0, got = 0;
    unsigned mask = 0;
    zero_io_event ev[8];
    while (seen < 8) {
        ZT_OK(zero_io_complete(io, 1, ev, 8, &got));
        if (got <= 0) break;
        for (int i = 0; i < got; i++) {
            ZT_EQ_INT(ev[i].status, ZERO_OK);
            mask |= 1u << ((uintptr_t)ev[i].user - 1);
        }
        seen += got;
    }
    ZT_EQ_INT(seen, 8);
    ZT_EQ_INT(mask, 0xff);
    ZT_EQ_INT(zero_io_inflight(io), 0);
    unsigned char *rd = zero_io_buffer_alloc(NULL, ZERO_MEM_BUFFERS, 8 * blk);
    memset(rd, 0, 8 * blk);
    for (int i = 7; i >= 0; i--)
        ZT_OK(zero_io_submit(f, ZERO_IO_OP_READ, rd + i * blk, blk, (uint64_t)i * blk, (void *)(uintptr_t)(i + 1)));
    ZT_OK(zero_io_complete(io, 8, ev, 8, &got));
    ZT_EQ_INT(got, 8);
    ZT_EQ_INT(mismatches(rd, 8 * blk, 0, 99), 0);
    /* the bytes after the async writes are still the first pattern */
    ZT_OK(zero_io_pread(f, rd, blk, 8 * blk));
    ZT_EQ_INT(mismatches(rd, blk, 8 * blk, 7), 0);

    /* a read past the end fails and names the path, offset and the reason */
    zero_status s = zero_io_pread(f, rd, 2 * 4096, total - 4096);
    ZT_EQ_INT(s, ZERO_ERR_IO);
    ZT_CHECKF(strstr(zero_io_last_error(io), p) && strstr(zero_io_last_error(io), "end of file") &&
                  strstr(zero_io_last_error(io), "offset"),
              "%s: message '%s'", tag, zero_io_last_error(io));
    /* async read past the end: the event carries the failure */
    ZT_OK(zero_io_submit(f, ZERO_IO_OP_READ, rd, 2 * 4096, total - 4096, rd));
    ZT_OK(zero_io_complete(io, 1, ev, 8, &got));
    ZT_EQ_INT(got, 1);
    ZT_EQ_INT(ev[0].status, ZERO_ERR_IO);
    ZT_CHECKF(strstr(zero_io_last_error(io), "end of file") != NULL, "%s: '%s'", tag, zero_io_last_error(io));

    ZT_OK(zero_io_truncate(f, 4096));
    ZT_OK(zero_io_size(f, &sz));
    ZT_EQ_INT(sz, 4096);
    if (direct) {
        s = zero_io_pwrite(f, buf + 1, 4096, 0);
        ZT_EQ_INT(s, ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(strstr(zero_io_last_error(io), "O_DIRECT") != NULL, "'%s'", zero_io_last_error(io));
        s = zero_io_pread(f, buf, 4096, 100);
        ZT_EQ_INT(s, ZERO_ERR_INVALID_ARG);
    }
    ZT_OK(zero_io_close(f));
    ZT_EQ_INT(file_size(p), 4096);
    zero_io_buffer_free(NULL, rd);
    zero_io_buffer_free(NULL, buf);
}

static void test_names(zero_io *io) {
    char a[600], b[600], d[600];
    path_of(a, sizeof a, "name_a");
    path_of(b, sizeof b, "name_b");
    path_of(d, sizeof d, "sub");
    zero_io_file *f = NULL;
    ZT_OK(zero_io_open(io, a, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &f));
    ZT_OK(zero_io_pwrite(f, "hello", 5, 0));
    ZT_OK(zero_io_close(f));
    ZT_OK(zero_io_rename(io, a, b));
    ZT_EQ_INT(file_size(a), (uint64_t)-1);
    ZT_EQ_INT(file_size(b), 5);
    ZT_OK(zero_io_mkdir(io, d));
    ZT_OK(zero_io_mkdir(io, d)); /* existing: fine */
    ZT_OK(zero_io_fsync_dir(io, d));
    ZT_OK(zero_io_unlink(io, d, 0));
    ZT_OK(zero_io_unlink(io, b, 0));
    ZT_OK(zero_io_unlink(io, b, 1));
    zero_status s = zero_io_unlink(io, b, 0);
    ZT_EQ_INT(s, ZERO_ERR_IO);
    ZT_CHECKF(strstr(zero_io_last_error(io), b) && strstr(zero_io_last_error(io), "No such file"), "'%s'",
              zero_io_last_error(io));
    /* errors name the path and the OS's reason */
    s = zero_io_open(io, b, ZERO_IO_READ, &f);
    ZT_EQ_INT(s, ZERO_ERR_IO);
    ZT_CHECK(f == NULL);
    ZT_CHECKF(strstr(zero_io_last_error(io), "open") && strstr(zero_io_last_error(io), b) &&
                  strstr(zero_io_last_error(io), "No such file"),
              "'%s'", zero_io_last_error(io));
    ZT_EQ_INT(zero_io_open(io, b, 0, &f), ZERO_ERR_INVALID_ARG);
    /* a file opened read-only refuses writes, with the path in the message */
    ZT_OK(zero_io_open(io, a, ZERO_IO_WRITE | ZERO_IO_CREATE, &f));
    ZT_OK(zero_io_close(f));
    ZT_OK(zero_io_open(io, a, ZERO_IO_READ, &f));
    ZT_EQ_INT(zero_io_pwrite(f, "x", 1, 0), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_io_last_error(io), a) != NULL);
    ZT_OK(zero_io_close(f));
    ZT_OK(zero_io_unlink(io, a, 0));
    ZT_OK(zero_io_close(NULL));
}

static void test_queue_depth(void) {
    zero_io *io = NULL;
    zero_error err;
    ZT_OK(zero_io_create_posix(&io, &err));
    char p[600];
    path_of(p, sizeof p, "qd");
    zero_io_file *f = NULL;
    ZT_OK(zero_io_open(io, p, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &f));
    char c = 'x';
    for (int i = 0; i < 64; i++) ZT_OK(zero_io_submit(f, ZERO_IO_OP_WRITE, &c, 1, (uint64_t)i, NULL));
    ZT_EQ_INT(zero_io_submit(f, ZERO_IO_OP_WRITE, &c, 1, 64, NULL), ZERO_ERR_STATE);
    ZT_CHECK(strstr(zero_io_last_error(io), "queue depth") != NULL);
    zero_io_event ev[64];
    int got = 0;
    ZT_EQ_INT(zero_io_complete(io, 65, ev, 64, &got), ZERO_ERR_INVALID_ARG);
    ZT_OK(zero_io_complete(io, 64, ev, 64, &got));
    ZT_EQ_INT(got, 64);
    ZT_OK(zero_io_close(f));
    ZT_EQ_INT(file_size(p), 64);
    unlink(p);
    zero_io_free(io);
}

/* ------------------------------------------------------------------ the fault shim */
/* A fixed workload touching every kind of operation; returns the index (1-based) of the first
 * call of kind `op` that failed, 0 when none failed, and that call's status in *st. */
typedef struct work_result {
    int failed_at; /* which call of the counted kind failed first (0: none) */
    zero_status status;
    char msg[512];
} work_result;

static void note(work_result *w, int idx, zero_status s, zero_io *io) {
    if (s != ZERO_OK && !w->failed_at) {
        w->failed_at = idx;
        w->status = s;
        snprintf(w->msg, sizeof w->msg, "%s", zero_io_last_error(io));
    }
}

/* Calls per kind: open 3, write 5, read 2, fsync 2 (one a directory), close 3, truncate 1,
 * rename 1, unlink 2, mkdir 1. Keeps going after failures, counting each kind in order. */
static work_result workload(zero_io *io, zero_io_op kind) {
    work_result w = {0, ZERO_OK, ""};
    int idx[ZERO_IO_OP_COUNT] = {0};
    char a[600], b[600], d[600];
    path_of(a, sizeof a, "w_a");
    path_of(b, sizeof b, "w_b");
    path_of(d, sizeof d, "w_dir");
    unsigned char buf[1000];
    fill(buf, sizeof buf, 0, 3);
#define CALL(k, expr)                                                                              \
    do {                                                                                           \
        zero_status s_ = (expr);                                                                   \
        idx[k]++;                                                                                  \
        if ((k) == kind) note(&w, idx[k], s_, io);                                                 \
    } while (0)
    zero_io_file *f = NULL, *g = NULL, *h = NULL;
    CALL(ZERO_IO_OP_MKDIR, zero_io_mkdir(io, d));
    CALL(ZERO_IO_OP_OPEN, zero_io_open(io, a, ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &f));
    for (int i = 0; i < 5; i++) CALL(ZERO_IO_OP_WRITE, f ? zero_io_pwrite(f, buf, 200, (uint64_t)i * 200) : ZERO_OK);
    CALL(ZERO_IO_OP_FSYNC, f ? zero_io_fsync(f) : ZERO_OK);
    CALL(ZERO_IO_OP_READ, f ? zero_io_pread(f, buf, 100, 0) : ZERO_OK);
    CALL(ZERO_IO_OP_TRUNCATE, f ? zero_io_truncate(f, 600) : ZERO_OK);
    CALL(ZERO_IO_OP_CLOSE, zero_io_close(f));
    CALL(ZERO_IO_OP_OPEN, zero_io_open(io, a, ZERO_IO_READ, &g));
    CALL(ZERO_IO_OP_READ, g ? zero_io_pread(g, buf, 100, 500) : ZERO_OK);
    CALL(ZERO_IO_OP_CLOSE, zero_io_close(g));
    CALL(ZERO_IO_OP_RENAME, zero_io_rename(io, a, b));
    CALL(ZERO_IO_OP_FSYNC, zero_io_fsync_dir(io, g_dir));
    CALL(ZERO_IO_OP_OPEN, zero_io_open(io, b, ZERO_IO_READ, &h));
    CALL(ZERO_IO_OP_CLOSE, zero_io_close(h));
    CALL(ZERO_IO_OP_UNLINK, zero_io_unlink(io, b, 1));
    CALL(ZERO_IO_OP_UNLINK, zero_io_unlink(io, d, 1));
#undef CALL
    unlink(a);
    unlink(b);
    rmdir(d);
    return w;
}

static const int calls_per_kind[ZERO_IO_OP_COUNT] = {3, 2, 5, 2, 3, 1, 1, 2, 1};

static void test_fault_each_n(void) {
    zero_error err;
    for (int k = 0; k < ZERO_IO_OP_COUNT; k++) {
        for (int n = 1; n <= calls_per_kind[k] + 1; n++) {
            for (int e = 0; e < 2; e++) {
                char spec[64];
                snprintf(spec, sizeof spec, "%s:%d:%s", zero_io_op_name((zero_io_op)k), n, e ? "enospc" : "eio");
                zero_io *inner = NULL, *io = NULL;
                ZT_OK(zero_io_create_posix(&inner, &err));
                ZT_OK(zero_io_create_fault(&io, inner, 1, spec, &err));
                work_result w = workload(io, (zero_io_op)k);
                if (n > calls_per_kind[k]) {
                    ZT_CHECKF(w.failed_at == 0, "%s: call %d failed: %s", spec, w.failed_at, w.msg);
                    ZT_EQ_INT(zero_io_fault_injected(io), 0);
                } else {
                    ZT_CHECKF(w.failed_at == n, "%s: failed at call %d (%s)", spec, w.failed_at, w.msg);
                    ZT_EQ_INT(w.status, e ? ZERO_ERR_NOSPACE : ZERO_ERR_IO);
                    ZT_CHECKF(strstr(w.msg, g_dir) && strstr(w.msg, e ? "No space left" : "Input/output error") &&
                                  strstr(w.msg, "injected"),
                              "%s: message '%s'", spec, w.msg);
                    if (k == ZERO_IO_OP_WRITE || k == ZERO_IO_OP_READ)
                        ZT_CHECKF(strstr(w.msg, "offset") != NULL, "%s: '%s'", spec, w.msg);
                    ZT_EQ_INT(zero_io_fault_injected(io), 1);
                }
                /* a failed open (or the rename before one) skips the calls on its file */
                for (int j = 0; j < ZERO_IO_OP_COUNT && k != ZERO_IO_OP_OPEN && k != ZERO_IO_OP_RENAME; j++)
                    ZT_CHECKF(zero_io_fault_calls(io, (zero_io_op)j) == (uint64_t)calls_per_kind[j],
                              "%s: %llu calls of %s", spec,
                              (unsigned long long)zero_io_fault_calls(io, (zero_io_op)j),
                              zero_io_op_name((zero_io_op)j));
                zero_io_free(io);
            }
        }
    }
}

static void test_fault_modes(void) {
    zero_error err;
    zero_io *io = NULL, *inner = NULL;
    char p[600];
    path_of(p, sizeof p, "modes");
    unsigned char buf[1000];
    fill(buf, sizeof buf, 0, 5);

    /* always: call 3 and every later one fail; once: only call 2 */
    ZT_OK(zero_io_create_posix(&inner, &err));
    ZT_OK(zero_io_create_fault(&io, inner, 1, "write:3:eio:always", &err));
    zero_io_file *f = NULL;
    ZT_OK(zero_io_open(io, p, ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &f));
    int fails = 0;
    for (int i = 0; i < 6; i++) fails |= (zero_io_pwrite(f, buf, 10, (uint64_t)i * 10) != ZERO_OK) << i;
    ZT_EQ_INT(fails, 0x3c);
    ZT_EQ_INT(zero_io_fault_injected(io), 4);
    ZT_OK(zero_io_close(f));
    ZT_EQ_INT(file_size(p), 20);
    zero_io_free(io);

    /* enospc writes half of the bytes, then fails */
    ZT_OK(zero_io_create_posix(&inner, &err));
    ZT_OK(zero_io_create_fault(&io, inner, 1, "write:1:enospc:once", &err));
    ZT_OK(zero_io_open(io, p, ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &f));
    ZT_EQ_INT(zero_io_pwrite(f, buf, 1000, 0), ZERO_ERR_NOSPACE);
    ZT_CHECKF(strstr(zero_io_last_error(io), "offset 500 (500 bytes)") != NULL, "'%s'", zero_io_last_error(io));
    ZT_OK(zero_io_close(f));
    ZT_EQ_INT(file_size(p), 500);
    zero_io_free(io);

    /* the path filter counts only matching files; two rules at once */
    char q[600];
    path_of(q, sizeof q, "other");
    ZT_OK(zero_io_create_posix(&inner, &err));
    ZT_OK(zero_io_create_fault(&io, inner, 1, "write:2:eio:once:modes,fsync:1:enospc", &err));
    zero_io_file *g = NULL;
    ZT_OK(zero_io_open(io, q, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &g));
    ZT_OK(zero_io_open(io, p, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &f));
    ZT_OK(zero_io_pwrite(g, buf, 10, 0));
    ZT_OK(zero_io_pwrite(g, buf, 10, 10));
    ZT_OK(zero_io_pwrite(f, buf, 10, 0));
    ZT_OK(zero_io_pwrite(g, buf, 10, 20));
    ZT_EQ_INT(zero_io_pwrite(f, buf, 10, 10), ZERO_ERR_IO);
    ZT_CHECK(strstr(zero_io_last_error(io), p) != NULL);
    ZT_OK(zero_io_pwrite(f, buf, 10, 10));
    ZT_EQ_INT(zero_io_fsync(g), ZERO_ERR_NOSPACE);
    ZT_OK(zero_io_fsync(f));
    ZT_EQ_INT(zero_io_fault_calls(io, ZERO_IO_OP_WRITE), 6);
    ZT_OK(zero_io_close(f));
    ZT_OK(zero_io_close(g));
    zero_io_free(io);

    /* asynchronous requests are counted and failed like the others */
    ZT_OK(zero_io_create_posix(&inner, &err));
    ZT_OK(zero_io_create_fault(&io, inner, 1, "write:2:eio", &err));
    ZT_OK(zero_io_open(io, p, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &f));
    for (int i = 0; i < 4; i++) ZT_OK(zero_io_submit(f, ZERO_IO_OP_WRITE, buf, 10, (uint64_t)i * 10, (void *)(uintptr_t)(i + 1)));
    zero_io_event ev[4];
    int got = 0;
    ZT_OK(zero_io_complete(io, 4, ev, 4, &got));
    ZT_EQ_INT(got, 4);
    for (int i = 0; i < 4; i++) ZT_EQ_INT(ev[i].status, (uintptr_t)ev[i].user == 2 ? ZERO_ERR_IO : ZERO_OK);
    ZT_CHECKF(strstr(zero_io_last_error(io), "offset 10") != NULL, "'%s'", zero_io_last_error(io));
    ZT_OK(zero_io_close(f));
    zero_io_free(io);
    unlink(p);
    unlink(q);

    /* bad specs are refused with the rule and the expected form; the inner backend is freed */
    const char *bad[] = {"write", "write:0:eio", "write:x:eio", "write:3:eperm", "wrte:3:eio",
                         "write:3:eio:sometimes", "write:3:eio:once:", ",", "write:-1:eio"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ZT_OK(zero_io_create_posix(&inner, &err));
        err.msg[0] = 0;
        ZT_EQ_INT(zero_io_create_fault(&io, inner, 1, bad[i], &err), ZERO_ERR_CONFIG);
        ZT_CHECK(io == NULL);
        ZT_CHECKF(strstr(err.msg, "expected OP:N:ERR") != NULL, "%s: '%s'", bad[i], err.msg);
    }
}

static void test_env(void) {
    zero_error err;
    zero_io *io = NULL;
    setenv("ZERO_FAULT", "open:2:eio:always", 1);
    ZT_OK(zero_io_create_default(&io, &err));
    ZT_CHECK(io && !strcmp(zero_io_backend(io), "fault(posix)"));
    char p[600];
    path_of(p, sizeof p, "env");
    zero_io_file *f = NULL;
    ZT_OK(zero_io_open(io, p, ZERO_IO_WRITE | ZERO_IO_CREATE, &f));
    ZT_OK(zero_io_close(f));
    ZT_EQ_INT(zero_io_open(io, p, ZERO_IO_READ, &f), ZERO_ERR_IO);
    ZT_EQ_INT(zero_io_open(io, p, ZERO_IO_READ, &f), ZERO_ERR_IO);
    zero_io_free(io);
    setenv("ZERO_FAULT", "bogus", 1);
    ZT_EQ_INT(zero_io_create_default(&io, &err), ZERO_ERR_CONFIG);
    ZT_CHECK(strstr(err.msg, "bogus") != NULL);
    unsetenv("ZERO_FAULT");
    setenv("ZERO_IO", "floppy", 1);
    ZT_EQ_INT(zero_io_create_default(&io, &err), ZERO_ERR_CONFIG);
    ZT_CHECK(strstr(err.msg, "floppy") != NULL);
    setenv("ZERO_IO", "uring", 1);
    zero_status s = zero_io_create_default(&io, &err);
#ifdef ZERO_HAVE_URING
    ZT_OK(s);
    ZT_CHECK(io && !strcmp(zero_io_backend(io), "uring"));
#else
    ZT_EQ_INT(s, ZERO_ERR_UNSUPPORTED);
#endif
    zero_io_free(io);
    unsetenv("ZERO_IO");
    ZT_OK(zero_io_create_default(&io, &err));
    ZT_CHECK(!strcmp(zero_io_backend(io), "posix"));
    zero_io_free(io);
    unlink(p);
}

static void test_buffers(void) {
    zero_memacct a;
    memset(&a, 0, sizeof a);
    void *p = zero_io_buffer_alloc(&a, ZERO_MEM_BUFFERS, 5000);
    ZT_CHECK(p && (uintptr_t)p % ZERO_IO_ALIGN == 0);
    ZT_EQ_INT(a.stats.current[ZERO_MEM_BUFFERS], 8192 + ZERO_IO_ALIGN);
    memset(p, 1, 8192);
    zero_io_buffer_free(&a, p);
    ZT_EQ_INT(a.stats.current[ZERO_MEM_BUFFERS], 0);
    ZT_CHECK(zero_io_buffer_alloc(&a, ZERO_MEM_BUFFERS, 0) == NULL);
}

int main(void) {
    make_dir();
    zero_error err;
    zero_io *io = NULL;
    ZT_OK(zero_io_create_posix(&io, &err));
    ZT_CHECK(!strcmp(zero_io_backend(io), "posix"));
    roundtrip(io, 0, "posix.bin");
    roundtrip(io, 1, "posix_direct.bin");
    test_names(io);
    zero_io_free(io);
#ifdef ZERO_HAVE_URING
    io = NULL;
    ZT_OK(zero_io_create_uring(&io, 8, &err));
    if (io) {
        roundtrip(io, 0, "uring.bin");
        roundtrip(io, 1, "uring_direct.bin");
        test_names(io);
        zero_io_free(io);
    } else {
        ZT_FAIL("io_uring: %s", err.msg);
    }
    ZT_EQ_INT(zero_io_create_uring(&io, 0, &err), ZERO_ERR_INVALID_ARG);
    /* the shim wraps io_uring as well: pass-through, then an injected full disk */
    zero_io *ring = NULL;
    ZT_OK(zero_io_create_uring(&ring, 8, &err)); /* roundtrip keeps 8 requests in flight */
    ZT_OK(zero_io_create_fault(&io, ring, 1, "", &err));
    ZT_CHECK(!strcmp(zero_io_backend(io), "fault(uring)"));
    roundtrip(io, 0, "fault_uring.bin");
    zero_io_free(io);
    ZT_OK(zero_io_create_uring(&ring, 4, &err));
    ZT_OK(zero_io_create_fault(&io, ring, 1, "write:2:enospc", &err));
    char up[600];
    path_of(up, sizeof up, "fault_uring2.bin");
    zero_io_file *uf = NULL;
    unsigned char ub[4096];
    fill(ub, sizeof ub, 0, 11);
    ZT_OK(zero_io_open(io, up, ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_TRUNC, &uf));
    ZT_OK(zero_io_pwrite(uf, ub, 4096, 0));
    ZT_EQ_INT(zero_io_pwrite(uf, ub, 4096, 4096), ZERO_ERR_NOSPACE);
    ZT_CHECKF(strstr(zero_io_last_error(io), "offset 6144 (2048 bytes)") != NULL, "'%s'", zero_io_last_error(io));
    ZT_OK(zero_io_close(uf));
    ZT_EQ_INT(file_size(up), 6144);
    zero_io_free(io);
#endif
    /* the shim passes everything through to the backend it wraps */
    zero_io *inner = NULL;
    ZT_OK(zero_io_create_posix(&inner, &err));
    ZT_OK(zero_io_create_fault(&io, inner, 1, "", &err));
    roundtrip(io, 0, "fault_passthrough.bin");
    zero_io_free(io);
    test_queue_depth();
    test_fault_each_n();
    test_fault_modes();
    test_env();
    test_buffers();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return zt_finish("test_io");
}
