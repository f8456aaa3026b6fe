/* Swap files of NVMe offload: naming, the header that marks a file as ours, the ownership rule
 * (never overwrite a file that is not a stale swap file of this host), space reservation, removal,
 * and the table of block checksums (one CRC32C per ZERO_IO_ALIGN bytes of data, in RAM).
 *
 * Header (ZERO_SWAP_HEADER = 4096 bytes, native byte order: the file never leaves its machine):
 *   offset size  field
 *        0    8  magic "ZEROSWAP"
 *        8    4  format version: 2 (its owner holds an flock on it, below); 1 (no lock: pid rule)
 *       12    4  header bytes (4096)
 *       16    8  data bytes (the file is header + data)
 *       24    4  rank
 *       28    4  world size
 *       32    8  owner pid
 *       40    8  creation time (Unix seconds)
 *       48   64  owner host name (NUL-terminated)
 *      112   64  job id (NUL-terminated)
 *      176   16  kind: "optim", "param", "bench" ... (NUL-terminated)
 *      192 3904  zero
 *
 * Liveness: the creating process takes an exclusive flock(2) on the file before it writes the
 * header and holds it until after it has removed the file; the kernel drops the lock when the
 * process ends, however it ends (kill -9 included). So a format-2 swap file of this host whose
 * lock is free belongs to no running process, whatever its pid field says (pids are reused), and
 * a file with no header yet is being created (never swept). Format 1 (a file system without
 * flock, or an older zero) falls back to "the owner pid no longer runs".
 */
#define _GNU_SOURCE /* fallocate */
#include "offload/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define SWAP_VERSION_LOCKED 2u /* the owner holds an flock while the file exists */
#define SWAP_VERSION_PID    1u /* no lock could be taken: liveness by the owner's pid */
static const char swap_magic[8] = {'Z', 'E', 'R', 'O', 'S', 'W', 'A', 'P'};

typedef struct swap_header {
    char magic[8];
    uint32_t version, header_bytes;
    uint64_t data_bytes;
    int32_t rank, world;
    int64_t pid, created;
    char host[64];
    char job[64];
    char kind[16];
} swap_header;
_Static_assert(sizeof(swap_header) == 192, "the header layout above");

struct zero_swap {
    zero_io *io;
    zero_io_file *f;
    char *path;
    uint64_t data_bytes;
    int direct;
    int checksums; /* 1: crc[] holds the CRC32C of every block of the data area */
    uint32_t *crc; /* data_bytes / ZERO_IO_ALIGN entries */
    int lock_fd;   /* holds the flock that says the file is in use; -1: none (format 1) */
    int scratch;   /* its slot in the process's scratch list (zero_scratch_remove_all); -1: none */
};

/* The CRC32C of a block of zeros: what every block of a new (reserved) data area holds. */
static uint32_t zero_block_crc(void) {
    static const unsigned char zeros[ZERO_IO_ALIGN];
    uint32_t c;
    zero__swap_block_crcs(zeros, 1, &c);
    return c;
}

static void crc_reset(zero_swap *s) {
    const uint64_t n = s->data_bytes / ZERO_IO_ALIGN;
    const uint32_t z = zero_block_crc();
    for (uint64_t i = 0; i < n; i++) s->crc[i] = z;
}

static void this_host(char *buf, size_t cap) {
    if (gethostname(buf, cap) != 0) snprintf(buf, cap, "?");
    buf[cap - 1] = 0;
}

static int pid_alive(int64_t pid) {
    if (pid <= 0 || pid != (int64_t)(pid_t)pid) return 0;
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

/* The owner class of the file open as fd (opened without following a link) and its header in
 * *h. Anything but a regular file of this user with no access for others (what ZERO_IO_PRIVATE
 * creates and accepts), and a file without our header, is foreign whatever it holds: a swap file
 * is never followed, and another user's file is never removed or reused (docs/SECURITY.md). With
 * `hold`, a stale format-2 file is returned still locked by fd, so that the caller removes it
 * while no one can take it up. */
static zero_swap_owner classify(int fd, swap_header *h, int hold) {
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || (sb.st_mode & 077))
        return ZERO_SWAP_FOREIGN;
    ssize_t got = pread(fd, h, sizeof *h, 0);
    if (got != (ssize_t)sizeof *h || memcmp(h->magic, swap_magic, sizeof swap_magic) != 0 ||
        h->header_bytes != ZERO_SWAP_HEADER)
        return ZERO_SWAP_FOREIGN;
    h->host[sizeof h->host - 1] = 0;
    h->job[sizeof h->job - 1] = 0;
    h->kind[sizeof h->kind - 1] = 0;
    char host[64];
    this_host(host, sizeof host);
    if (strcmp(host, h->host) != 0) return ZERO_SWAP_REMOTE;
    if (h->version < SWAP_VERSION_LOCKED) return pid_alive(h->pid) ? ZERO_SWAP_LIVE : ZERO_SWAP_STALE;
    /* a lock we cannot take, for whatever reason, is a live owner: never remove what we cannot judge */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) return ZERO_SWAP_LIVE;
    if (!hold) flock(fd, LOCK_UN);
    return ZERO_SWAP_STALE;
}

static zero_swap_owner probe(const char *path, swap_header *h) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return errno == ENOENT ? ZERO_SWAP_ABSENT : ZERO_SWAP_FOREIGN;
    const zero_swap_owner o = classify(fd, h, 0);
    close(fd);
    return o;
}

zero_swap_owner zero_swap_probe(const char *path) {
    swap_header h;
    if (!path || !*path) return ZERO_SWAP_ABSENT;
    return probe(path, &h);
}

static int swap_name(const char *n) {
    const size_t len = strlen(n);
    return len > 9 && !strncmp(n, "zero_", 5) && !strcmp(n + len - 4, ".swp");
}

zero_status zero_swap_sweep(const char *dir, zero_swap_swept *out, zero_error *err) {
    zero_swap_swept none;
    if (!out) out = &none;
    memset(out, 0, sizeof *out);
    if (!dir || !*dir) return ZERO_ERR_INVALID_ARG;
    /* the directory is the user's nvme_path, followed as given; nothing in it is followed */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        if (errno == ENOENT) return ZERO_OK;
        if (err) ZERO__ERR(err, "looking for swap files left in %s: %s", dir, strerror(errno));
        return ZERO_ERR_IO;
    }
    DIR *d = fdopendir(dfd);
    if (!d) {
        if (err) ZERO__ERR(err, "looking for swap files left in %s: %s", dir, strerror(errno));
        close(dfd);
        return ZERO_ERR_IO;
    }
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (!swap_name(de->d_name)) continue;
        int fd = openat(dfd, de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) continue;
        swap_header h;
        struct stat held, now;
        /* held locked, and still the file of that name (not one another sweep replaced meanwhile) */
        if (classify(fd, &h, 1) == ZERO_SWAP_STALE && fstat(fd, &held) == 0 &&
            fstatat(dfd, de->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 && held.st_dev == now.st_dev &&
            held.st_ino == now.st_ino && unlinkat(dfd, de->d_name, 0) == 0) {
            if (!out->removed) snprintf(out->first, sizeof out->first, "%s", de->d_name);
            out->removed++;
            out->bytes += (uint64_t)held.st_size;
        }
        close(fd);
    }
    closedir(d);
    return ZERO_OK;
}

static int name_ok(const char *s) {
    size_t n = s ? strlen(s) : 0;
    if (n < 1 || n > 63) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* Free bytes for an unprivileged writer on the file system of path (0 when unknown). */
static uint64_t free_bytes(const char *path) {
    struct statvfs v;
    if (statvfs(path, &v) != 0) return 0;
    return (uint64_t)v.f_bavail * (uint64_t)v.f_frsize;
}

/* Reserves the data area so that a full disk shows now. File systems without fallocate get a
 * free-space check instead. */
static zero_status reserve(const char *path, const char *dir, uint64_t off, uint64_t bytes, zero_error *err) {
    if (bytes == 0) return ZERO_OK;
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (err) ZERO__ERR(err, "open %s to reserve %llu bytes: %s", path, (unsigned long long)bytes, strerror(errno));
        return ZERO_ERR_IO;
    }
    int rc;
    do rc = fallocate(fd, 0, (off_t)off, (off_t)bytes);
    while (rc != 0 && errno == EINTR);
    int e = rc == 0 ? 0 : errno;
    close(fd);
    if (e == 0) return ZERO_OK;
    if (e == ENOSPC || e == EDQUOT || ((e == EOPNOTSUPP || e == ENOSYS) && free_bytes(dir) < bytes)) {
        if (err)
            ZERO__ERR(err, "%s: the swap file needs %llu bytes and the file system has %llu free: free some space or "
                      "point nvme_path at a larger drive",
                      path, (unsigned long long)bytes, (unsigned long long)free_bytes(dir));
        return ZERO_ERR_NOSPACE;
    }
    if (e == EOPNOTSUPP || e == ENOSYS) return ZERO_OK;
    if (err) ZERO__ERR(err, "reserving %llu bytes for %s: %s", (unsigned long long)bytes, path, strerror(e));
    return ZERO_ERR_IO;
}

static zero_status refuse(const char *path, zero_swap_owner o, const swap_header *h, zero_error *err) {
    if (!err) return ZERO_ERR_IO;
    switch (o) {
    case ZERO_SWAP_FOREIGN:
        ZERO__ERR(err, "%s exists and is not a zero swap file: refusing to overwrite it (move it away or choose another "
                  "nvme_path)", path);
        break;
    case ZERO_SWAP_LIVE:
        ZERO__ERR(err, "%s is the swap file of process %lld (job '%s'), which is running: two runs cannot share it (set "
                  "ZERO_JOB_ID to another value or choose another nvme_path)",
                  path, (long long)h->pid, h->job);
        break;
    default:
        ZERO__ERR(err, "%s is the swap file of process %lld on host '%s': zero cannot tell whether it still runs, so it "
                  "leaves the file alone (remove it if that run is over)",
                  path, (long long)h->pid, h->host);
        break;
    }
    return ZERO_ERR_IO;
}

zero_status zero_swap_create(zero_swap **out, zero_io *io, const char *dir, const char *job, int rank, int world,
                             const char *kind, uint64_t data_bytes, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!io || !dir || !*dir || rank < 0 || world < 1 || rank >= world || data_bytes % ZERO_IO_ALIGN ||
        data_bytes > (uint64_t)INT64_MAX - ZERO_SWAP_HEADER) {
        if (err) ZERO__ERR(err, "swap file: expected an io, a directory, 0 <= rank %d < world %d and a data size that is a "
                           "multiple of %u (got %llu)", rank, world, ZERO_IO_ALIGN, (unsigned long long)data_bytes);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!name_ok(job) || !name_ok(kind)) {
        if (err) ZERO__ERR(err, "swap file: job '%s' and kind '%s': expected 1 to 63 of [A-Za-z0-9._-]", job ? job : "",
                           kind ? kind : "");
        return ZERO_ERR_INVALID_ARG;
    }
    zero_swap *s = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *s);
    size_t cap = strlen(dir) + strlen(job) + strlen(kind) + 40;
    char *path = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, cap);
    swap_header *hbuf = zero_io_buffer_alloc(NULL, ZERO_MEM_BUFFERS, ZERO_SWAP_HEADER);
    zero_status st = ZERO_ERR_NOMEM;
    if (!s || !path || !hbuf) {
        if (err) ZERO__ERR(err, "swap file: out of memory");
        goto fail;
    }
    snprintf(path, cap, "%s/zero_%s_rank%05d.%s.swp", dir, job, rank, kind);
    s->lock_fd = s->scratch = -1;
    s->io = io;
    s->path = path;
    s->data_bytes = data_bytes;
    /* 4 bytes of RAM per 4 KiB block of data (1/1024); the data area starts as zeros */
    if (data_bytes / ZERO_IO_ALIGN > SIZE_MAX / sizeof *s->crc ||
        !(s->crc = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)(data_bytes / ZERO_IO_ALIGN) * sizeof *s->crc + 1))) {
        if (err) ZERO__ERR(err, "swap file: out of memory for the checksums of %llu bytes", (unsigned long long)data_bytes);
        st = ZERO_ERR_NOMEM;
        goto fail;
    }
    s->checksums = 1;
    crc_reset(s);

    if ((st = zero_io_mkdir(io, dir)) != ZERO_OK) {
        if (err) ZERO__ERR(err, "nvme_path: %s", zero_io_last_error(io));
        goto fail;
    }
    swap_header old;
    zero_swap_owner o = probe(path, &old);
    if (o == ZERO_SWAP_STALE) {
        zero__log(ZERO_LOG_WARN, "offload: replacing %s, the swap file of process %lld which no longer runs", path,
                  (long long)old.pid);
        if ((st = zero_io_unlink(io, path, 1)) != ZERO_OK) {
            if (err) ZERO__ERR(err, "removing the stale swap file: %s", zero_io_last_error(io));
            goto fail;
        }
    } else if (o != ZERO_SWAP_ABSENT) {
        st = refuse(path, o, &old, err);
        goto fail;
    }

    /* Create exclusively (a file that appears meanwhile is never truncated, a symbolic link never
     * followed), owner-only whatever the umask (it holds the model and its optimizer state),
     * header first. */
    zero_io_file *f = NULL;
    st = zero_io_open(io, path, ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_CREATE | ZERO_IO_EXCL | ZERO_IO_PRIVATE, &f);
    if (st != ZERO_OK) {
        if (err) ZERO__ERR(err, "creating the swap file: %s", zero_io_last_error(io));
        goto fail;
    }
    /* Listed at once, so that a stop signal from here on removes it too; locked before the header
     * makes it a swap file, so that no sweep ever sees it unlocked while this process runs. A file
     * system without flock gets a format-1 header (the owner's pid says whether it runs). */
    s->scratch = zero__scratch_add(path);
    s->lock_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (s->lock_fd >= 0 && flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        zero__log(ZERO_LOG_INFO, "offload: %s: no flock (%s); the swap file says its owner's pid instead", path,
                  strerror(errno));
        close(s->lock_fd);
        s->lock_fd = -1;
    }
    memset(hbuf, 0, ZERO_SWAP_HEADER);
    memcpy(hbuf->magic, swap_magic, sizeof swap_magic);
    hbuf->version = s->lock_fd >= 0 ? SWAP_VERSION_LOCKED : SWAP_VERSION_PID;
    hbuf->header_bytes = ZERO_SWAP_HEADER;
    hbuf->data_bytes = data_bytes;
    hbuf->rank = rank;
    hbuf->world = world;
    hbuf->pid = (int64_t)getpid();
    hbuf->created = (int64_t)time(NULL);
    this_host(hbuf->host, sizeof hbuf->host);
    snprintf(hbuf->job, sizeof hbuf->job, "%s", job);
    snprintf(hbuf->kind, sizeof hbuf->kind, "%s", kind);
    st = zero_io_pwrite(f, hbuf, ZERO_SWAP_HEADER, 0);
    if (st == ZERO_OK) st = zero_io_truncate(f, ZERO_SWAP_HEADER + data_bytes);
    if (st != ZERO_OK && err) ZERO__ERR(err, "writing the swap file header: %s", zero_io_last_error(io));
    zero_status cs = zero_io_close(f);
    if (st == ZERO_OK && cs != ZERO_OK) {
        st = cs;
        if (err) ZERO__ERR(err, "closing the new swap file: %s", zero_io_last_error(io));
    }
    if (st == ZERO_OK) st = reserve(path, dir, ZERO_SWAP_HEADER, data_bytes, err);
    if (st != ZERO_OK) goto fail_unlink;

    /* The data area goes around the page cache when the file system lets it. */
    st = zero_io_open(io, path, ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_DIRECT | ZERO_IO_PRIVATE, &s->f);
    s->direct = st == ZERO_OK;
    if (st != ZERO_OK) {
        zero__log(ZERO_LOG_INFO, "offload: %s: O_DIRECT refused (%s); using buffered I/O", path, zero_io_last_error(io));
        st = zero_io_open(io, path, ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_PRIVATE, &s->f);
    }
    if (st != ZERO_OK) {
        if (err) ZERO__ERR(err, "opening the swap file: %s", zero_io_last_error(io));
        goto fail_unlink;
    }
    zero_io_buffer_free(NULL, hbuf);
    *out = s;
    return ZERO_OK;

fail_unlink:
    zero__scratch_drop(s->scratch);
    (void)zero_io_unlink(io, path, 1);
    if (s->lock_fd >= 0) close(s->lock_fd); /* after the unlink: until then the file is in use */
fail:
    zero_io_buffer_free(NULL, hbuf);
    zero_mem_free(NULL, path);
    if (s) zero_mem_free(NULL, s->crc);
    zero_mem_free(NULL, s);
    return st;
}

zero_status zero_swap_remove(zero_swap *s, zero_error *err) {
    if (!s) return ZERO_OK;
    zero__scratch_drop(s->scratch);
    zero_status st = zero_io_close(s->f);
    if (st != ZERO_OK && err) ZERO__ERR(err, "closing the swap file: %s", zero_io_last_error(s->io));
    zero_status us = zero_io_unlink(s->io, s->path, 1);
    if (us != ZERO_OK) {
        if (err) ZERO__ERR(err, "removing the swap file: %s", zero_io_last_error(s->io));
        st = us;
    }
    if (s->lock_fd >= 0) close(s->lock_fd); /* released once the name is gone */
    zero_mem_free(NULL, s->path);
    zero_mem_free(NULL, s->crc);
    zero_mem_free(NULL, s);
    return st;
}

zero_status zero_swap_set_checksums(zero_swap *s, int on) {
    if (!s) return ZERO_ERR_INVALID_ARG;
    if (on && !s->checksums) crc_reset(s); /* what was written meanwhile is unknown: write before reading */
    s->checksums = on ? 1 : 0;
    return ZERO_OK;
}

int zero_swap_checksums(const zero_swap *s) { return s ? s->checksums : 0; }

void zero__swap_record(zero_swap *s, uint64_t offset, const uint32_t *crcs, size_t bytes) {
    if (!s->checksums) return;
    memcpy(s->crc + offset / ZERO_IO_ALIGN, crcs, bytes / ZERO_IO_ALIGN * sizeof *crcs);
}

zero_status zero__swap_verify(const zero_swap *s, uint64_t offset, const void *buf, size_t bytes, char *msg,
                              size_t cap) {
    if (!s->checksums) return ZERO_OK;
    const unsigned char *p = buf;
    const uint32_t *want = s->crc + offset / ZERO_IO_ALIGN;
    uint32_t got[64];
    for (size_t done = 0, n; done < bytes / ZERO_IO_ALIGN; done += n) {
        n = bytes / ZERO_IO_ALIGN - done;
        if (n > 64) n = 64;
        zero__swap_block_crcs(p + done * ZERO_IO_ALIGN, n, got);
        for (size_t i = 0; i < n; i++) {
            if (got[i] == want[done + i]) continue;
            const uint64_t at = ZERO_SWAP_HEADER + offset + (done + i) * ZERO_IO_ALIGN;
            zero__errorf(msg, cap,
                         "%s: the %u-byte block at offset %llu changed on disk since zero wrote it (CRC32C %08x, "
                         "expected %08x): the swap file was modified by something else, or the drive returned other "
                         "data; the run cannot continue from it (resume from the last checkpoint)",
                         s->path, ZERO_IO_ALIGN, (unsigned long long)at, got[i], want[done + i]);
            return ZERO_ERR_FORMAT;
        }
    }
    return ZERO_OK;
}

const char *zero_swap_path(const zero_swap *s) { return s ? s->path : ""; }
zero_io_file *zero_swap_file(const zero_swap *s) { return s ? s->f : NULL; }
int zero_swap_direct(const zero_swap *s) { return s ? s->direct : 0; }
uint64_t zero_swap_data_bytes(const zero_swap *s) { return s ? s->data_bytes : 0; }

zero_status zero_offload_io_create(zero_io **out, int queue_depth, zero_error *err) {
    return zero_offload_io_create_with(out, queue_depth, NULL, err);
}

zero_status zero_offload_io_create_with(zero_io **out, int queue_depth, const zero_io_options *o, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    const char *b, *bname, *spec;
    int depth;
    if (zero__io_settings(o, &b, &bname, &spec, &depth, err) != 0) return ZERO_ERR_CONFIG;
    if (depth) queue_depth = depth;
    if (queue_depth < 1) queue_depth = 1;
    if (queue_depth > 4096) queue_depth = 4096;
    zero_io *inner = NULL;
    zero_status s;
    if (b && !strcmp(b, "posix")) {
        s = zero_io_create_posix(&inner, err);
    } else {
        s = zero_io_create_uring(&inner, queue_depth, err);
        if (s == ZERO_ERR_UNSUPPORTED && !b) {
            zero__log(ZERO_LOG_INFO, "offload: io_uring unavailable (%s); using posix I/O", err ? err->msg : "");
            s = zero_io_create_posix(&inner, err);
        }
    }
    if (s != ZERO_OK) return s;
    if (!spec || !*spec) {
        *out = inner;
        return ZERO_OK;
    }
    return zero_io_create_fault(out, inner, 1, spec, err);
}
