/* TensorBoard event files: the TFRecord framing around serialized tensorflow.Event protobufs,
 * encoded by hand (scalars only), so that zero train needs no protobuf library.
 *
 * A record (all integers little-endian):
 *   u64 length of data
 *   u32 masked CRC32C of those 8 length bytes
 *   data: length bytes, one serialized Event
 *   u32 masked CRC32C of data
 * masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (mod 2^32).
 *
 * The Event fields written (tag byte = field << 3 | wire type):
 *   0x09 wall_time  double, 8 bytes (seconds since the epoch)
 *   0x10 step       int64 varint
 *   0x1a file_version  length-delimited "brain.Event:2" (the first record only)
 *   0x2a summary    length-delimited Summary:
 *          0x0a value  length-delimited Value:
 *                 0x0a tag           length-delimited UTF-8
 *                 0x15 simple_value  float, 4 bytes */
#include "tensorboard.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zero/ckpt.h"
#include "zero/zero.h"

struct cli_tb {
    int fd;
    unsigned char *buf; /* queued records, written by cli_tb_flush */
    size_t len, cap;
};

typedef struct {
    unsigned char b[512]; /* one scalar event; tags are cut to fit (TB_TAG_MAX) */
    size_t n;
} pb;

enum { TB_TAG_MAX = 256 };

static void put_byte(pb *p, unsigned v) { p->b[p->n++] = (unsigned char)v; }

static void put_varint(pb *p, uint64_t v) {
    while (v >= 0x80) {
        put_byte(p, (unsigned)(v & 0x7f) | 0x80);
        v >>= 7;
    }
    put_byte(p, (unsigned)v);
}

static void put_le(pb *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) put_byte(p, (unsigned)(v >> (8 * i)) & 0xff);
}

static void put_bytes(pb *p, unsigned tag, const void *s, size_t n) {
    put_byte(p, tag);
    put_varint(p, n);
    memcpy(p->b + p->n, s, n);
    p->n += n;
}

static void put_double(pb *p, unsigned tag, double v) {
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put_byte(p, tag);
    put_le(p, u, 8);
}

static uint32_t masked_crc(const void *data, size_t n) {
    const uint32_t c = zero_crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* Frames one serialized Event as a record at the end of the queue. */
static int queue_record(cli_tb *tb, const pb *ev) {
    const size_t need = tb->len + 8 + 4 + ev->n + 4;
    if (need > tb->cap || !tb->buf) {
        size_t cap = tb->cap ? tb->cap * 2 : 4096;
        while (cap < need) cap *= 2;
        unsigned char *b = realloc(tb->buf, cap);
        if (!b) return -1;
        tb->buf = b, tb->cap = cap;
    }
    pb head = {.n = 0};
    put_le(&head, ev->n, 8);
    put_le(&head, masked_crc(head.b, 8), 4);
    pb tail = {.n = 0};
    put_le(&tail, masked_crc(ev->b, ev->n), 4);
    memcpy(tb->buf + tb->len, head.b, head.n);
    memcpy(tb->buf + tb->len + head.n, ev->b, ev->n);
    memcpy(tb->buf + tb->len + head.n + ev->n, tail.b, tail.n);
    tb->len = need;
    return 0;
}

static double wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int cli_tb_scalar(cli_tb *tb, const char *tag, int64_t step, double value) {
    const size_t tn = strnlen(tag, TB_TAG_MAX);
    pb value_msg = {.n = 0};
    put_bytes(&value_msg, 0x0a, tag, tn);
    const float f = (float)value;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    put_byte(&value_msg, 0x15);
    put_le(&value_msg, u, 4);
    pb summary = {.n = 0};
    put_bytes(&summary, 0x0a, value_msg.b, value_msg.n);
    pb ev = {.n = 0};
    put_double(&ev, 0x09, wall_now());
    put_byte(&ev, 0x10);
    put_varint(&ev, (uint64_t)step); /* int64: a negative step would take ten bytes, as protobuf has it */
    put_bytes(&ev, 0x2a, summary.b, summary.n);
    return queue_record(tb, &ev);
}

int cli_tb_flush(cli_tb *tb) {
    size_t off = 0;
    while (off < tb->len) {
        const ssize_t w = write(tb->fd, tb->buf + off, tb->len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            if (w == 0) errno = EIO;
            return -1;
        }
        off += (size_t)w;
    }
    tb->len = 0;
    return 0;
}

/* mkdir -p: each component that exists must be a directory (stat follows a link the user made). */
static int make_dirs(const char *dir, char *err, size_t cap) {
    char p[4096];
    const size_t n = strlen(dir);
    if (n >= sizeof p) {
        snprintf(err, cap, "'%s': path too long", dir);
        return -1;
    }
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        const char c = p[i];
        p[i] = '\0';
        struct stat sb;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            snprintf(err, cap, "cannot create directory '%s': %s", p, strerror(errno));
            return -1;
        }
        if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            snprintf(err, cap, "'%s' is not a directory", p);
            return -1;
        }
        p[i] = c;
    }
    return 0;
}

cli_tb *cli_tb_open(const char *dir, char *path, size_t path_cap, char *err, size_t err_cap) {
    if (make_dirs(dir, err, err_cap)) return NULL;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0) strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    const long now = (long)time(NULL);
    char name[4096];
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 1000; tries++) {
        int n =
            tries ? snprintf(name, sizeof name, "%s/events.out.tfevents.%010ld.%s.%ld.%d", dir, now, host,
                             (long)getpid(), tries)
                  : snprintf(name, sizeof name, "%s/events.out.tfevents.%010ld.%s.%ld", dir, now, host, (long)getpid());
        if (n < 0 || (size_t)n >= sizeof name) {
            snprintf(err, err_cap, "'%s': path too long", dir);
            return NULL;
        }
        fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) {
            snprintf(err, err_cap, "cannot create '%s': %s", name, strerror(errno));
            return NULL;
        }
    }
    if (fd < 0) {
        snprintf(err, err_cap, "'%s': no free event file name", dir);
        return NULL;
    }
    cli_tb *tb = calloc(1, sizeof *tb);
    if (!tb) {
        close(fd);
        unlink(name);
        snprintf(err, err_cap, "out of memory");
        return NULL;
    }
    tb->fd = fd;
    static const char version[] = "brain.Event:2";
    pb ev = {.n = 0};
    put_double(&ev, 0x09, wall_now());
    put_byte(&ev, 0x10);
    put_varint(&ev, 0);
    put_bytes(&ev, 0x1a, version, sizeof version - 1);
    if (queue_record(tb, &ev) || cli_tb_flush(tb)) {
        snprintf(err, err_cap, "'%s': write failed: %s", name, strerror(errno ? errno : ENOMEM));
        cli_tb_close(tb);
        unlink(name);
        return NULL;
    }
    if (path) snprintf(path, path_cap, "%s", name);
    return tb;
}

int cli_tb_close(cli_tb *tb) {
    if (!tb) return 0;
    int rc = cli_tb_flush(tb);
    const int e = errno;
    if (close(tb->fd) != 0 && rc == 0) rc = -1;
    else errno = e;
    free(tb->buf);
    free(tb);
    return rc;
}
