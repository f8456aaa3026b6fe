/* Block checksums of swap files: the SSE4.2 kernel equals the scalar reference (zero_crc32c per
 * block); a byte changed in the file between a pool's write and its read (by another process, on
 * posix and io_uring, through a pass and through acquire/submit/wait) or on the way to or from the
 * disk (the fault shim's flip) fails the read with ZERO_ERR_FORMAT naming the file and the
 * block's offset; restoring the byte, or rewriting the block, makes reads good again; with
 * checksums off nothing is noticed; transfers of part of a block are refused. */
#include <fcntl.h>
#include <unistd.h>

#include "harness.h"
#include "offload/internal.h"
#include "zero/zero.h"

#define BLK    4096
#define TILES  6
#define TBYTES (2 * BLK)

static char dir[256];

static void test_kernel(void) {
    unsigned char *data = malloc(11 * BLK + 8);
    uint32_t fast[11], ref[11];
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < 11 * BLK + 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        data[i] = (unsigned char)x;
    }
    for (size_t skew = 0; skew < 8; skew += 3) /* an unaligned start too */
        for (size_t n = 0; n <= 11; n++) {
            memset(fast, 0, sizeof fast);
            zero__swap_block_crcs(data + skew, n, fast);
            zero__swap_block_crcs_scalar(data + skew, n, ref);
            for (size_t i = 0; i < n; i++) {
                ZT_CHECKF(fast[i] == ref[i], "block %zu of %zu (skew %zu): %08x vs %08x", i, n, skew, fast[i], ref[i]);
                ZT_CHECK(ref[i] == zero_crc32c(0, data + skew + i * BLK, BLK));
            }
        }
    free(data);
}

typedef struct ctx {
    zero_swap *s;
    unsigned flags;
    unsigned char fill;
} ctx;

static int describe(void *c_, int64_t t, zero_offload_extent *ext) {
    ctx *c = c_;
    ext[0] = (zero_offload_extent){c->s, (uint64_t)t * TBYTES, TBYTES, 0, c->flags};
    return 1;
}

static zero_status compute(void *c_, int64_t t, void *buf) {
    ctx *c = c_;
    if (c->flags == ZERO_OFFLOAD_WRITE) memset(buf, c->fill + (int)t, TBYTES);
    return ZERO_OK;
}

static zero_status pass(zero_offload_pool *p, zero_swap *s, unsigned flags, unsigned char fill) {
    ctx c = {s, flags, fill};
    zero_offload_pass ps = {TILES, describe, compute, &c};
    return zero_offload_pool_run(p, &ps, NULL);
}

/* XORs the byte at file offset `at` with `mask` through a descriptor of our own. */
static void poke(const char *path, uint64_t at, unsigned char mask) {
    int fd = open(path, O_RDWR);
    unsigned char b = 0;
    if (fd < 0 || pread(fd, &b, 1, (off_t)at) != 1) ZT_FAIL("cannot read %s", path);
    b ^= mask;
    if (fd >= 0 && (pwrite(fd, &b, 1, (off_t)at) != 1 || fsync(fd) != 0)) ZT_FAIL("cannot write %s", path);
    if (fd >= 0) close(fd);
}

static int names_block(const char *msg, const char *path, uint64_t block_at) {
    char want[64];
    snprintf(want, sizeof want, "block at offset %llu ", (unsigned long long)block_at);
    return strstr(msg, path) && strstr(msg, want) && strstr(msg, "changed on disk");
}

static void test_changed_file(zero_io *io, const char *label) {
    zero_error err = {{0}};
    zero_swap *s = NULL;
    ZT_OK(zero_swap_create(&s, io, dir, "ck", 0, 1, "optim", TILES * TBYTES, &err));
    zero_offload_pool *p = NULL;
    ZT_OK(zero_offload_pool_create(&p, io, 3, TBYTES, NULL, &err));
    ZT_CHECK(zero_swap_checksums(s));
    ZT_OK(pass(p, s, ZERO_OFFLOAD_READ, 0)); /* a new file reads as zeros, which verify */
    ZT_OK(pass(p, s, ZERO_OFFLOAD_WRITE, 7));
    ZT_OK(pass(p, s, ZERO_OFFLOAD_READ, 0));

    /* a byte of tile 4's second block changes under the run */
    const uint64_t byte_at = ZERO_SWAP_HEADER + 4 * TBYTES + BLK + 123, block_at = ZERO_SWAP_HEADER + 4 * TBYTES + BLK;
    poke(zero_swap_path(s), byte_at, 0x01);
    ZT_EQ_INT(pass(p, s, ZERO_OFFLOAD_READ, 0), ZERO_ERR_FORMAT);
    ZT_CHECKF(names_block(zero_offload_pool_last_error(p), zero_swap_path(s), block_at), "%s: %s", label,
              zero_offload_pool_last_error(p));
    /* the one-buffer path (stage-3 parameter reads) verifies too */
    int k = zero_offload_pool_acquire(p);
    zero_offload_extent x = {s, 4 * TBYTES, TBYTES, 0, ZERO_OFFLOAD_READ};
    ZT_OK(zero_offload_pool_submit(p, k, &x, 1));
    ZT_EQ_INT(zero_offload_pool_wait(p, k, NULL), ZERO_ERR_FORMAT);
    ZT_CHECKF(names_block(zero_offload_pool_last_error(p), zero_swap_path(s), block_at), "%s: %s", label,
              zero_offload_pool_last_error(p));
    zero_offload_pool_release(p, k);
    /* a read is verified when its own buffer is waited for, also when another pool on the same io
     * reaped it (q's wait takes p's completion first where it arrives first): q succeeds, p fails */
    zero_offload_pool *q = NULL;
    ZT_OK(zero_offload_pool_create(&q, io, 1, TBYTES, NULL, &err));
    k = zero_offload_pool_acquire(p);
    const int kq = zero_offload_pool_acquire(q);
    zero_offload_extent good = {s, 0, TBYTES, 0, ZERO_OFFLOAD_READ};
    ZT_OK(zero_offload_pool_submit(p, k, &x, 1));
    ZT_OK(zero_offload_pool_submit(q, kq, &good, 1));
    ZT_OK(zero_offload_pool_wait(q, kq, NULL));
    ZT_EQ_INT(zero_offload_pool_wait(p, k, NULL), ZERO_ERR_FORMAT);
    ZT_CHECKF(names_block(zero_offload_pool_last_error(p), zero_swap_path(s), block_at), "%s: %s", label,
              zero_offload_pool_last_error(p));
    zero_offload_pool_release(p, k);
    zero_offload_pool_release(q, kq);
    zero_offload_pool_free(q);
    /* the byte restored: the data is what zero wrote again */
    poke(zero_swap_path(s), byte_at, 0x01);
    ZT_OK(pass(p, s, ZERO_OFFLOAD_READ, 0));
    /* changed again, then the block rewritten by the pool: good again */
    poke(zero_swap_path(s), byte_at, 0x80);
    ZT_OK(pass(p, s, ZERO_OFFLOAD_WRITE, 9));
    ZT_OK(pass(p, s, ZERO_OFFLOAD_READ, 0));

    /* checksums off: the same change goes unnoticed (what they buy) */
    ZT_OK(zero_swap_set_checksums(s, 0));
    poke(zero_swap_path(s), byte_at, 0x01);
    ZT_OK(pass(p, s, ZERO_OFFLOAD_READ, 0));
    /* on again: the record restarts from zeros, so the file must be written before it is read */
    ZT_OK(zero_swap_set_checksums(s, 1));
    ZT_EQ_INT(pass(p, s, ZERO_OFFLOAD_READ, 0), ZERO_ERR_FORMAT);
    ZT_OK(pass(p, s, ZERO_OFFLOAD_WRITE, 3));
    ZT_OK(pass(p, s, ZERO_OFFLOAD_READ, 0));

    /* part of a block is refused while checksums are on */
    k = zero_offload_pool_acquire(p);
    zero_offload_extent part = {s, BLK, BLK / 2, 0, ZERO_OFFLOAD_READ};
    ZT_EQ_INT(zero_offload_pool_submit(p, k, &part, 1), ZERO_ERR_INVALID_ARG);
    zero_offload_pool_release(p, k);

    zero_offload_pool_free(p);
    ZT_OK(zero_swap_remove(s, &err));
}

/* The fault shim changes a byte on the way: spec names the Nth read or write of the swap file. */
static void test_flip(const char *spec, int write_flip) {
    zero_error err = {{0}};
    zero_io *posix = NULL, *io = NULL;
    ZT_OK(zero_io_create_posix(&posix, &err));
    ZT_OK(zero_io_create_fault(&io, posix, 1, spec, &err));
    zero_swap *s = NULL;
    ZT_OK(zero_swap_create(&s, io, dir, "flip", 0, 1, "optim", TILES * TBYTES, &err));
    zero_offload_pool *p = NULL;
    ZT_OK(zero_offload_pool_create(&p, io, 2, TBYTES, NULL, &err));
    ZT_OK(pass(p, s, ZERO_OFFLOAD_WRITE, 1)); /* writes 2..7 (1 is the header) */
    /* write 3 is tile 1's, read 2 is tile 1's: the flipped byte is the middle of tile 1, in its
     * second block */
    const uint64_t block_at = ZERO_SWAP_HEADER + 1 * TBYTES + BLK;
    ZT_EQ_INT(pass(p, s, ZERO_OFFLOAD_READ, 0), ZERO_ERR_FORMAT);
    ZT_CHECKF(names_block(zero_offload_pool_last_error(p), zero_swap_path(s), block_at), "%s: %s", spec,
              zero_offload_pool_last_error(p));
    /* a flip on the way in leaves the file right: the next read is good; one on the way out stays
     * in the file until the block is written again */
    if (write_flip) {
        ZT_EQ_INT(pass(p, s, ZERO_OFFLOAD_READ, 0), ZERO_ERR_FORMAT);
        ZT_OK(pass(p, s, ZERO_OFFLOAD_WRITE, 1));
    }
    ZT_OK(pass(p, s, ZERO_OFFLOAD_READ, 0));
    zero_offload_pool_free(p);
    ZT_OK(zero_swap_remove(s, &err));
    zero_io_free(io);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/zero_test_offload_checksum_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_kernel();
    zero_error err = {{0}};
    zero_io *posix = NULL, *uring = NULL;
    ZT_OK(zero_io_create_posix(&posix, &err));
    test_changed_file(posix, "posix");
    zero_io_free(posix);
    if (zero_io_create_uring(&uring, 8, &err) == ZERO_OK) {
        test_changed_file(uring, "uring");
        zero_io_free(uring);
    } else {
        printf("io_uring unavailable (%s): posix only\n", err.msg);
    }
    test_flip("read:2:flip:once:.optim.swp", 0);
    test_flip("write:3:flip:once:.optim.swp", 1);
    /* flip is for data: other operations refuse it */
    zero_io *px = NULL, *bad = NULL;
    ZT_OK(zero_io_create_posix(&px, &err));
    ZT_EQ_INT(zero_io_create_fault(&bad, px, 1, "fsync:1:flip", &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "flip (read and write only)") != NULL, "message: %s", err.msg);
    rmdir(dir);
    return zt_finish("test_offload_checksum");
}
