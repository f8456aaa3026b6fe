/* `zero bench io`: the read and write bandwidth of NVMe offload's buffer pool (io_uring, O_DIRECT,
 * several requests in flight, block checksums) against the same pool without checksums,
 * one-request-at-a-time O_DIRECT on the same file, and fio. */
#include "cli.h"

#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zero/offload.h"

#define MIB (1024.0 * 1024.0)
#define ROUNDS 3

typedef struct opts {
    const char *dir;
    double size;   /* bytes */
    double block;  /* bytes */
    int buffers;
    int json;
} opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero bench io [--dir DIR] [--size BYTES] [--block-size BYTES] [--buffers N] [--json]\n"
            "\n"
            "Sequential read and write bandwidth of one file in DIR (default: the current directory;\n"
            "point it at the drive of nvme_path), four ways:\n"
            "  pool   NVMe offload's buffer pool: N buffers (default 4, offload_optimizer.buffer_count)\n"
            "         of BYTES (default 1MiB, aio.block_size), io_uring, O_DIRECT, every buffer in flight,\n"
            "         a CRC32C per 4KiB block recorded on write and verified on read (as offload runs)\n"
            "  pool without checksums   the same with the checksums off: what they cost\n"
            "  plain  one buffer of the same size, O_DIRECT pread/pwrite, one request at a time\n"
            "  fio    fio --direct=1 --ioengine=io_uring --iodepth=N --bs=BYTES (when fio is installed)\n"
            "Each is measured %d times, interleaved; the best is kept. A write pass ends with fsync.\n"
            "GB/s = 1e9 bytes/s; ratio = pool / plain; checksum cost = 1 - pool / pool without checksums.\n"
            "The file (default --size 512MiB) is a swap file\n"
            "of the offload's kind: a file of that name that is not one is never overwritten.\n"
            "--json  one object: {\"dir\", \"bytes\", \"block_size\", \"buffers\", \"backend\", \"direct\",\n"
            "        \"pool\": {\"read_gbps\", \"write_gbps\"}, \"pool_no_checksums\": {...}, \"plain\": {...},\n"
            "        \"fio\": {...} or null, \"read_ratio\", \"write_ratio\",\n"
            "        \"checksum_cost\": {\"read\", \"write\"}}  (fractions of the throughput without them)\n",
            ROUNDS);
}

static int parse(int argc, char **argv, opts *o) {
    o->dir = ".";
    o->size = 512 * MIB;
    o->block = MIB;
    o->buffers = 4;
    o->json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--dir")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return -1;
            if (!*v) {
                cli_error(CLI_USAGE, "--dir '': expected a directory");
                return -1;
            }
            o->dir = v;
        } else if (!strcmp(a, "--size") || !strcmp(a, "--block-size")) {
            double x;
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_size(a, v, &x)) return -1;
            if (!strcmp(a, "--size")) o->size = x;
            else o->block = x;
        } else if (!strcmp(a, "--buffers")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_int(a, v, 1, 1024, &o->buffers)) return -1;
        } else {
            cli_error(CLI_USAGE, "bench io: unknown option '%s': expected --dir, --size, --block-size, --buffers or --json", a);
            return -1;
        }
    }
    if (o->block < ZERO_IO_ALIGN || o->block > 1024 * MIB || fmod(o->block, ZERO_IO_ALIGN) != 0) {
        cli_error(CLI_USAGE, "--block-size %.0f: expected a multiple of %u from %u bytes to 1GiB", o->block, ZERO_IO_ALIGN,
                  ZERO_IO_ALIGN);
        return -1;
    }
    if (o->size < o->block || o->size > 1024.0 * 1024 * MIB) {
        cli_error(CLI_USAGE, "--size %.0f: expected at least one block (%.0f bytes) and at most 1TiB", o->size, o->block);
        return -1;
    }
    o->size = floor(o->size / o->block) * o->block; /* whole blocks */
    return 0;
}

typedef struct pass_ctx {
    zero_swap *swap;
    size_t block;
    unsigned flag;
} pass_ctx;

static int describe(void *c_, int64_t t, zero_offload_extent *ext) {
    pass_ctx *c = c_;
    ext[0] = (zero_offload_extent){c->swap, (uint64_t)t * c->block, c->block, 0, c->flag};
    return 1;
}

/* GB/s of one pass of the pool over the file (write: then fsync), or NAN with *err set. */
static double pool_pass(zero_offload_pool *p, zero_swap *s, size_t block, int write, const char **err) {
    pass_ctx c = {s, block, write ? ZERO_OFFLOAD_WRITE : ZERO_OFFLOAD_READ};
    const int64_t tiles = (int64_t)(zero_swap_data_bytes(s) / block);
    zero_offload_pass pass = {tiles, describe, NULL, &c};
    double t0 = zero_now();
    if (zero_offload_pool_run(p, &pass, NULL) != ZERO_OK) {
        *err = zero_offload_pool_last_error(p);
        return NAN;
    }
    if (write && zero_io_fsync(zero_swap_file(s)) != ZERO_OK) {
        *err = zero_io_last_error(zero_io_file_io(zero_swap_file(s)));
        return NAN;
    }
    return (double)zero_swap_data_bytes(s) / (zero_now() - t0) / 1e9;
}

/* GB/s of one request at a time through a second, posix handle on the same file. */
static double plain_pass(zero_io_file *f, void *buf, size_t block, uint64_t bytes, int write, const char **err) {
    double t0 = zero_now();
    for (uint64_t off = 0; off < bytes; off += block) {
        zero_status s = write ? zero_io_pwrite(f, buf, block, ZERO_SWAP_HEADER + off)
                              : zero_io_pread(f, buf, block, ZERO_SWAP_HEADER + off);
        if (s != ZERO_OK) {
            *err = zero_io_last_error(zero_io_file_io(f));
            return NAN;
        }
    }
    if (write && zero_io_fsync(f) != ZERO_OK) {
        *err = zero_io_last_error(zero_io_file_io(f));
        return NAN;
    }
    return (double)bytes / (zero_now() - t0) / 1e9;
}

/* fio's bandwidth (GB/s) for rw = read|write on `path`, NAN when fio is missing or fails. */
static double fio_gbps(const char *path, const char *rw, const opts *o) {
    if (system("command -v fio >/dev/null 2>&1") != 0 || strchr(path, '\'')) return NAN;
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "fio --name=zero --filename='%s' --rw=%s --bs=%.0f --size=%.0f --direct=1 --ioengine=io_uring "
             "--iodepth=%d --end_fsync=1 --output-format=json 2>/dev/null",
             path, rw, o->block, o->size, o->buffers);
    FILE *p = popen(cmd, "r");
    if (!p) return NAN;
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    for (size_t n; out && (n = fread(out + len, 1, cap - len - 1, p)) > 0;) {
        len += n;
        if (len + 1 == cap) {
            char *bigger = realloc(out, cap * 2);
            if (!bigger) break;
            out = bigger;
            cap *= 2;
        }
    }
    int rc = pclose(p);
    double gbps = NAN;
    if (out && rc == 0) {
        out[len] = 0;
        char key[24]; /* the section, not the "rw" option's value */
        snprintf(key, sizeof key, "\"%s\" : {", rw);
        const char *sec = strstr(out, key), *bw = sec ? strstr(sec, "\"bw_bytes\"") : NULL;
        const char *colon = bw ? strchr(bw, ':') : NULL;
        if (colon) {
            double b = strtod(colon + 1, NULL);
            if (b > 0) gbps = b / 1e9;
        }
    }
    free(out);
    return gbps;
}

static double best(double a, double b) { return isnan(a) ? b : isnan(b) ? a : a > b ? a : b; }

static void json_num(double v) {
    if (isnan(v)) fputs("null", stdout);
    else printf("%.4f", v);
}

int cli_bench_io(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CLI_OK;
        }
    opts o;
    if (parse(argc, argv, &o)) return CLI_USAGE;
    const size_t block = (size_t)o.block;
    const uint64_t bytes = (uint64_t)o.size;
    zero_error err = {{0}};
    zero_io *io = NULL, *posix = NULL;
    zero_swap *swap = NULL;
    zero_offload_pool *pool = NULL;
    zero_io_file *plain = NULL;
    void *pbuf = NULL;
    int rc = CLI_RUNTIME;
    const char *why = NULL;
    char job[48], fio_path[1200];
    snprintf(job, sizeof job, "bench-%ld", (long)getpid());
    fio_path[0] = 0;
    if (zero_offload_io_create(&io, 2 * o.buffers + 4, &err) != ZERO_OK) {
        cli_error(CLI_RUNTIME, "bench io: %s", err.msg);
        goto out;
    }
    const char *env_job = getenv("ZERO_JOB_ID"); /* so that a test can name the file */
    if (zero_swap_create(&swap, io, o.dir, env_job && *env_job ? env_job : job, 0, 1, "bench", bytes, &err) != ZERO_OK) {
        cli_error(CLI_RUNTIME, "bench io: %s", err.msg);
        goto out;
    }
    if (zero_offload_pool_create(&pool, io, o.buffers, block, NULL, &err) != ZERO_OK ||
        zero_io_create_posix(&posix, &err) != ZERO_OK) {
        cli_error(CLI_RUNTIME, "bench io: %s", err.msg);
        goto out;
    }
    const int direct = zero_swap_direct(swap);
    const unsigned pflags = ZERO_IO_READ | ZERO_IO_WRITE | ZERO_IO_PRIVATE | (direct ? ZERO_IO_DIRECT : 0);
    if (zero_io_open(posix, zero_swap_path(swap), pflags, &plain) != ZERO_OK) {
        cli_error(CLI_RUNTIME, "bench io: %s", zero_io_last_error(posix));
        goto out;
    }
    pbuf = zero_io_buffer_alloc(NULL, ZERO_MEM_BUFFERS, block);
    if (!pbuf) {
        cli_error(CLI_RUNTIME, "bench io: out of memory for a %zu-byte buffer", block);
        goto out;
    }
    memset(pbuf, 0x5a, block);
    for (int i = 0; i < o.buffers; i++) memset(zero_offload_pool_buffer(pool, i), 0xa5, block);
    if (!o.json)
        printf("zero bench io: %s, %.0f MiB file, %d x %.0f KiB buffers, %s%s\n", zero_swap_path(swap), o.size / MIB,
               o.buffers, o.block / 1024, zero_io_backend(io), direct ? ", O_DIRECT" : ", buffered (O_DIRECT refused)");
    double pw = NAN, pr = NAN, qw = NAN, qr = NAN, nw = NAN, nr = NAN;
    /* Checksums are turned on before the pool's write pass (which records them) and stay on for its
     * read pass; the pool without them writes first and reads last. */
    for (int r = 0; r < ROUNDS && !why; r++) {
        double x;
        if (isnan(x = plain_pass(plain, pbuf, block, bytes, 1, &why))) break;
        qw = best(qw, x);
        zero_swap_set_checksums(swap, 0);
        if (isnan(x = pool_pass(pool, swap, block, 1, &why))) break;
        nw = best(nw, x);
        zero_swap_set_checksums(swap, 1);
        if (isnan(x = pool_pass(pool, swap, block, 1, &why))) break;
        pw = best(pw, x);
        if (isnan(x = plain_pass(plain, pbuf, block, bytes, 0, &why))) break;
        qr = best(qr, x);
        if (isnan(x = pool_pass(pool, swap, block, 0, &why))) break;
        pr = best(pr, x);
        zero_swap_set_checksums(swap, 0);
        if (isnan(x = pool_pass(pool, swap, block, 0, &why))) break;
        nr = best(nr, x);
    }
    if (why) {
        cli_error(CLI_RUNTIME, "bench io: %s", why);
        goto out;
    }
    /* fio on a file of its own next to ours, created here so that nothing of the user's is hit */
    double fw = NAN, fr = NAN;
    snprintf(fio_path, sizeof fio_path, "%s/zero_%s_fio.tmp", o.dir, job);
    int fd = open(fio_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600); /* scratch: private */
    if (fd >= 0) {
        close(fd);
        fw = fio_gbps(fio_path, "write", &o);
        if (!isnan(fw)) fr = fio_gbps(fio_path, "read", &o);
        unlink(fio_path);
    }
    if (o.json) {
        printf("{\"dir\":\"");
        for (const char *c = o.dir; *c; c++) printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
        printf("\",\"bytes\":%llu,\"block_size\":%zu,\"buffers\":%d,\"backend\":\"%s\",\"direct\":%s,\"pool\":{\"read_gbps\":",
               (unsigned long long)bytes, block, o.buffers, zero_io_backend(io), direct ? "true" : "false");
        json_num(pr);
        printf(",\"write_gbps\":");
        json_num(pw);
        printf("},\"pool_no_checksums\":{\"read_gbps\":");
        json_num(nr);
        printf(",\"write_gbps\":");
        json_num(nw);
        printf("},\"plain\":{\"read_gbps\":");
        json_num(qr);
        printf(",\"write_gbps\":");
        json_num(qw);
        printf("},\"fio\":");
        if (isnan(fw)) {
            printf("null");
        } else {
            printf("{\"read_gbps\":");
            json_num(fr);
            printf(",\"write_gbps\":");
            json_num(fw);
            printf("}");
        }
        printf(",\"read_ratio\":");
        json_num(pr / qr);
        printf(",\"write_ratio\":");
        json_num(pw / qw);
        printf(",\"checksum_cost\":{\"read\":");
        json_num(1 - pr / nr);
        printf(",\"write\":");
        json_num(1 - pw / nw);
        printf("}}\n");
    } else {
        printf("%-44s %10s %10s\n", "", "read GB/s", "write GB/s");
        char label[96];
        snprintf(label, sizeof label, "pool (%d buffers in flight)", o.buffers);
        printf("%-44s %10.3f %10.3f\n", label, pr, pw);
        printf("%-44s %10.3f %10.3f\n", "pool without checksums", nr, nw);
        printf("%-44s %10.3f %10.3f\n", "plain O_DIRECT (one request at a time)", qr, qw);
        if (isnan(fw)) printf("%-44s %10s %10s\n", "fio", "-", "-");
        else printf("%-44s %10.3f %10.3f\n", "fio (io_uring, same depth and block)", fr, fw);
        printf("pool / plain: read %.2fx, write %.2fx%s\n", pr / qr, pw / qw, isnan(fw) ? "  (fio not installed)" : "");
        printf("checksum cost: read %.1f%%, write %.1f%% of the throughput without them\n", 100 * (1 - pr / nr),
               100 * (1 - pw / nw));
    }
    rc = CLI_OK;
out:
    zero_io_buffer_free(NULL, pbuf);
    zero_io_close(plain);
    zero_offload_pool_free(pool);
    if (swap && zero_swap_remove(swap, &err) != ZERO_OK && rc == CLI_OK) rc = cli_error(CLI_RUNTIME, "bench io: %s", err.msg);
    zero_io_free(posix);
    zero_io_free(io);
    return rc;
}

int cli_bench_io_pool_rates(const char *dir, double size, double *read_gbps, double *write_gbps) {
    const size_t block = 1 << 20;
    const int buffers = 4;
    const uint64_t bytes = (uint64_t)(size / (double)block) * block;
    zero_error err = {{0}};
    zero_io *io = NULL;
    zero_swap *swap = NULL;
    zero_offload_pool *pool = NULL;
    const char *why = NULL;
    int rc = CLI_RUNTIME;
    char job[48];
    snprintf(job, sizeof job, "rates-%ld", (long)getpid());
    *read_gbps = *write_gbps = NAN;
    if (bytes < block) return cli_error(CLI_USAGE, "--disk-size %.0f: expected at least 1MiB", size);
    if (zero_offload_io_create(&io, 2 * buffers + 4, &err) != ZERO_OK ||
        zero_swap_create(&swap, io, dir, job, 0, 1, "rates", bytes, &err) != ZERO_OK ||
        zero_offload_pool_create(&pool, io, buffers, block, NULL, &err) != ZERO_OK) {
        cli_error(CLI_RUNTIME, "bench rates: disk '%s': %s", dir, err.msg);
        goto out;
    }
    for (int i = 0; i < buffers; i++) memset(zero_offload_pool_buffer(pool, i), 0xa5, block);
    for (int r = 0; r < ROUNDS && !why; r++) {
        double x;
        if (isnan(x = pool_pass(pool, swap, block, 1, &why))) break;
        *write_gbps = best(*write_gbps, x);
        if (isnan(x = pool_pass(pool, swap, block, 0, &why))) break;
        *read_gbps = best(*read_gbps, x);
    }
    if (why) {
        cli_error(CLI_RUNTIME, "bench rates: disk '%s': %s", dir, why);
        goto out;
    }
    rc = CLI_OK;
out:
    zero_offload_pool_free(pool);
    if (swap && zero_swap_remove(swap, &err) != ZERO_OK && rc == CLI_OK)
        rc = cli_error(CLI_RUNTIME, "bench rates: disk '%s': %s", dir, err.msg);
    zero_io_free(io);
    return rc;
}
