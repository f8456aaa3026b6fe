/* The offload pool: passes over tiles with 1 to 5 buffers (posix and io_uring) read and write
 * exactly the bytes their extents name (checked against a copy kept in RAM and a plain pread of
 * the file), compute tiles in order with reads running ahead, count their bytes, hold only
 * buffers x size of RAM (+ one alignment page), and stop at an injected disk fault or a failing
 * compute with the error named, leaving the pool usable; a pool on the caller's memory (the fake
 * device's pinned memory, as the engine gives it on a device) does the same passes. */
#include <unistd.h>

#include "harness.h"
#include "zero/zero.h"
#include "zero/offload.h"

#define BLK 4096
#define TILES 23
#define TBYTES (3 * BLK) /* a tile: two blocks of file A and one of file B */

static char dir[256];

typedef struct ctx {
    zero_swap *a, *b;
    unsigned char *model_a, *model_b; /* what the files should hold */
    int64_t computed;                 /* tiles computed so far, in order */
    int bad_order;
    int rmw;                          /* 1: read, add 1 to every byte, write back; 0: write only */
    int64_t fail_at;                  /* compute fails on this tile (-1 never) */
    zero_offload_stats *st;
    uint64_t reads_ahead;             /* most tiles past t whose reads were issued, seen in compute(t) */
    int check;                        /* compute checks the read bytes against the model */
    int mismatch;
} ctx;

/* Tile t: blocks 2t..2t+1 of A at buffer 0, block (TILES-1-t) of B at buffer 2*BLK (reverse order). */
static int describe(void *c_, int64_t t, zero_offload_extent *ext) {
    ctx *c = c_;
    unsigned fl = c->rmw ? ZERO_OFFLOAD_READ | ZERO_OFFLOAD_WRITE : ZERO_OFFLOAD_WRITE;
    ext[0] = (zero_offload_extent){c->a, (uint64_t)t * 2 * BLK, 2 * BLK, 0, fl};
    ext[1] = (zero_offload_extent){c->b, (uint64_t)(TILES - 1 - t) * BLK, BLK, 2 * BLK, fl};
    return 2;
}

static zero_status compute(void *c_, int64_t t, void *buf) {
    ctx *c = c_;
    unsigned char *p = buf;
    if (t != c->computed) c->bad_order = 1;
    if (t == c->fail_at) return ZERO_ERR_INVALID_ARG;
    if (c->st && c->st->reads / 2 > (uint64_t)t + 1 + c->reads_ahead) c->reads_ahead = c->st->reads / 2 - (uint64_t)t - 1;
    unsigned char *ma = c->model_a + (size_t)t * 2 * BLK, *mb = c->model_b + (size_t)(TILES - 1 - t) * BLK;
    if (c->check && (memcmp(p, ma, 2 * BLK) || memcmp(p + 2 * BLK, mb, BLK))) c->mismatch = 1;
    for (int i = 0; i < TBYTES; i++) {
        unsigned char v = c->rmw ? (unsigned char)(p[i] + 1) : (unsigned char)(t * 7 + i * 13 + 1);
        p[i] = v;
        if (i < 2 * BLK) ma[i] = v;
        else mb[i - 2 * BLK] = v;
    }
    c->computed++;
    return ZERO_OK;
}

static int file_equals(zero_swap *s, const unsigned char *model, size_t n) {
    unsigned char *buf = zero_io_buffer_alloc(NULL, ZERO_MEM_BUFFERS, n);
    int ok = zero_io_pread(zero_swap_file(s), buf, n, ZERO_SWAP_HEADER) == ZERO_OK && !memcmp(buf, model, n);
    zero_io_buffer_free(NULL, buf);
    return ok;
}

static void run_case(zero_io *io, int buffers, const char *label) {
    zero_error err = {{0}};
    zero_swap *a = NULL, *b = NULL;
    char job[32];
    snprintf(job, sizeof job, "pool%d", buffers);
    if (zero_swap_create(&a, io, dir, job, 0, 1, "a", TILES * 2 * BLK, &err) ||
        zero_swap_create(&b, io, dir, job, 0, 1, "b", TILES * BLK, &err)) {
        ZT_FAIL("%s: %s", label, err.msg);
        return;
    }
    zero_memacct acct;
    memset(&acct, 0, sizeof acct);
    zero_offload_pool *p = NULL;
    ZT_OK(zero_offload_pool_create(&p, io, buffers, TBYTES - 100, &acct, &err)); /* rounded up to TBYTES */
    ZT_EQ_INT(zero_offload_pool_buffer_bytes(p), TBYTES);
    ZT_EQ_INT(acct.stats.current[ZERO_MEM_BUFFERS], (uint64_t)buffers * TBYTES + ZERO_IO_ALIGN);
    ctx c = {a, b, calloc(TILES * 2, BLK), calloc(TILES, BLK), 0, 0, 0, -1, NULL, 0, 0, 0};
    zero_offload_pass pass = {TILES, describe, compute, &c};
    zero_offload_stats st;
    memset(&st, 0, sizeof st);

    /* 1. write-only: the files take the computed bytes */
    ZT_OK(zero_offload_pool_run(p, &pass, &st));
    ZT_EQ_INT(c.computed, TILES);
    ZT_CHECK(!c.bad_order);
    ZT_CHECKF(file_equals(a, c.model_a, TILES * 2 * BLK) && file_equals(b, c.model_b, TILES * BLK), "%s: write pass", label);
    ZT_EQ_INT(st.bytes_written, (uint64_t)TILES * TBYTES);
    ZT_EQ_INT(st.writes, 2 * TILES);
    ZT_EQ_INT(st.bytes_read, 0);

    /* 2. read-modify-write: each tile sees the file's bytes, reads run ahead of compute */
    memset(&st, 0, sizeof st);
    c.rmw = 1;
    c.check = 1;
    c.computed = 0;
    c.st = &st;
    ZT_OK(zero_offload_pool_run(p, &pass, &st));
    ZT_EQ_INT(c.computed, TILES);
    ZT_CHECK(!c.bad_order && !c.mismatch);
    ZT_CHECKF(file_equals(a, c.model_a, TILES * 2 * BLK) && file_equals(b, c.model_b, TILES * BLK), "%s: rmw pass", label);
    ZT_EQ_INT(st.bytes_read, (uint64_t)TILES * TBYTES);
    ZT_EQ_INT(st.bytes_written, (uint64_t)TILES * TBYTES);
    ZT_CHECK(st.wall_s >= st.compute_s && st.io_wait_s >= 0);
    /* with B buffers the reads run B - 1 tiles ahead of compute (all buffers are free when tile 0
     * computes), never more */
    ZT_CHECKF(c.reads_ahead == (uint64_t)(buffers - 1), "%s: reads ran %llu tiles ahead", label,
              (unsigned long long)c.reads_ahead);
    ZT_EQ_INT(acct.stats.peak[ZERO_MEM_BUFFERS], (uint64_t)buffers * TBYTES + ZERO_IO_ALIGN);

    /* 3. a compute that fails stops the pass with its status; tiles before it were written */
    c.fail_at = 9;
    c.computed = 0;
    c.check = 0;
    ZT_EQ_INT(zero_offload_pool_run(p, &pass, NULL), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(c.computed, 9);
    ZT_CHECKF(strstr(zero_offload_pool_last_error(p), "tile 9") != NULL, "message: %s", zero_offload_pool_last_error(p));
    ZT_CHECKF(file_equals(a, c.model_a, 9 * 2 * BLK), "%s: tiles before the failure", label);
    c.fail_at = -1;

    /* 4. one buffer at a time */
    int held[8], n = 0;
    for (int k; n < 8 && (k = zero_offload_pool_acquire(p)) >= 0;) held[n++] = k;
    ZT_EQ_INT(n, buffers);
    zero_offload_extent x = {a, 4 * BLK, 2 * BLK, 0, ZERO_OFFLOAD_READ};
    ZT_OK(zero_offload_pool_submit(p, held[0], &x, 1));
    ZT_OK(zero_offload_pool_wait(p, held[0], NULL));
    ZT_CHECK(!memcmp(zero_offload_pool_buffer(p, held[0]), c.model_a + 4 * BLK, 2 * BLK));
    ZT_EQ_INT(zero_offload_pool_run(p, &pass, NULL), ZERO_ERR_STATE); /* buffers are taken */
    for (int k = 0; k < n; k++) zero_offload_pool_release(p, held[k]);
    /* a misaligned transfer on an O_DIRECT file is refused before it is sent */
    if (zero_swap_direct(a)) {
        int k = zero_offload_pool_acquire(p);
        zero_offload_extent bad = {a, 100, BLK, 0, ZERO_OFFLOAD_READ};
        ZT_EQ_INT(zero_offload_pool_submit(p, k, &bad, 1), ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(strstr(zero_offload_pool_last_error(p), "O_DIRECT") != NULL, "message: %s", zero_offload_pool_last_error(p));
        zero_offload_pool_release(p, k);
    }
    /* a transfer past the data area is refused too */
    int k = zero_offload_pool_acquire(p);
    zero_offload_extent past = {b, TILES * BLK, BLK, 0, ZERO_OFFLOAD_READ};
    ZT_EQ_INT(zero_offload_pool_submit(p, k, &past, 1), ZERO_ERR_INVALID_ARG);
    zero_offload_pool_release(p, k);

    zero_offload_pool_free(p);
    ZT_EQ_INT(acct.stats.current[ZERO_MEM_BUFFERS], 0);
    ZT_OK(zero_swap_remove(a, &err));
    ZT_OK(zero_swap_remove(b, &err));
    free(c.model_a);
    free(c.model_b);
}

/* A pool on the caller's memory: the fake device's pinned memory (a shared mapping, which the
 * engine hands the pools on a device), through `io` (O_DIRECT where the file system has it): the
 * write and read-modify-write passes land the same bytes; the pool's buffers are that memory;
 * memory that is short or misaligned is refused with one line. */
static void caller_memory_case(zero_io *io, const char *label) {
    zero_error err = {{0}};
    zero_device_options o;
    zero_device_options_default(&o);
    o.backend = "fake";
    o.capacity = 1u << 20;
    o.pinned_capacity = 8u << 20;
    o.max_delay_us = 0;
    zero_device *d = NULL;
    ZT_OK(zero_device_create(&d, &o, &err));
    if (!d) return;
    const size_t need = zero_offload_pool_bytes_for(3, TBYTES - 100);
    ZT_EQ_INT(need, 3 * TBYTES);
    ZT_EQ_INT(zero_offload_pool_bytes_for(0, TBYTES), 0);
    void *raw = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, need + ZERO_IO_ALIGN, &raw));
    char *m = (char *)(((uintptr_t)raw + ZERO_IO_ALIGN - 1) & ~(uintptr_t)(ZERO_IO_ALIGN - 1));
    zero_offload_pool *p = NULL;
    ZT_EQ_INT(zero_offload_pool_create_in(&p, io, 3, TBYTES, m + 256, need, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "aligned") != NULL, "message: %s", err.msg);
    ZT_EQ_INT(zero_offload_pool_create_in(&p, io, 3, TBYTES, m, need - 1, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "expected 36864 bytes or more") != NULL, "message: %s", err.msg);
    ZT_EQ_INT(zero_offload_pool_create_in(&p, io, 3, TBYTES, NULL, need, &err), ZERO_ERR_INVALID_ARG);
    ZT_OK(zero_offload_pool_create_in(&p, io, 3, TBYTES - 100, m, need, &err));
    ZT_CHECK(zero_offload_pool_buffer(p, 0) == m && zero_offload_pool_buffer(p, 2) == m + 2 * TBYTES);
    zero_swap *a = NULL, *b = NULL;
    ZT_OK(zero_swap_create(&a, io, dir, "pinned", 0, 1, "a", TILES * 2 * BLK, &err));
    ZT_OK(zero_swap_create(&b, io, dir, "pinned", 0, 1, "b", TILES * BLK, &err));
    ctx c = {a, b, calloc(TILES * 2, BLK), calloc(TILES, BLK), 0, 0, 0, -1, NULL, 0, 0, 0};
    zero_offload_pass pass = {TILES, describe, compute, &c};
    ZT_OK(zero_offload_pool_run(p, &pass, NULL));
    c.rmw = 1;
    c.check = 1;
    c.computed = 0;
    ZT_OK(zero_offload_pool_run(p, &pass, NULL));
    ZT_CHECK(c.computed == TILES && !c.bad_order && !c.mismatch);
    ZT_CHECKF(file_equals(a, c.model_a, TILES * 2 * BLK) && file_equals(b, c.model_b, TILES * BLK), "%s: passes",
              label);
    zero_offload_pool_free(p);
    zero_device_release(d, raw); /* the caller's, after the pool */
    ZT_OK(zero_swap_remove(a, &err));
    ZT_OK(zero_swap_remove(b, &err));
    zero_device_free(d);
    free(c.model_a);
    free(c.model_b);
}

/* Injected faults: the Nth read or write of file A fails; the pass reports it and the pool runs
 * the next pass normally (after a torn write: once the torn block, found by its checksum, is
 * written again). */
static void fault_case(const char *spec, zero_status want, const char *text, const char *torn) {
    zero_error err = {{0}};
    zero_io *posix = NULL, *io = NULL;
    ZT_OK(zero_io_create_posix(&posix, &err));
    ZT_OK(zero_io_create_fault(&io, posix, 1, spec, &err));
    zero_swap *a = NULL, *b = NULL;
    ZT_OK(zero_swap_create(&a, io, dir, "fault", 0, 1, "a", TILES * 2 * BLK, &err));
    ZT_OK(zero_swap_create(&b, io, dir, "fault", 0, 1, "b", TILES * BLK, &err));
    zero_offload_pool *p = NULL;
    ZT_OK(zero_offload_pool_create(&p, io, 3, TBYTES, NULL, &err));
    ctx c = {a, b, calloc(TILES * 2, BLK), calloc(TILES, BLK), 0, 0, 1, -1, NULL, 0, 0, 0};
    zero_offload_pass pass = {TILES, describe, compute, &c};
    zero_status s = zero_offload_pool_run(p, &pass, NULL);
    ZT_EQ_INT(s, want);
    const char *msg = zero_offload_pool_last_error(p);
    ZT_CHECKF(strstr(msg, text) && strstr(msg, "injected") && strstr(msg, "zero_fault_rank00000.a.swp"), "%s: %s", spec, msg);
    ZT_CHECK(c.computed < TILES);
    c.computed = 0;
    if (torn) {
        /* the full disk took half of the write: the next read of that block finds other bytes
         * than zero last wrote there, and says which block */
        ZT_EQ_INT(zero_offload_pool_run(p, &pass, NULL), ZERO_ERR_FORMAT);
        msg = zero_offload_pool_last_error(p);
        ZT_CHECKF(strstr(msg, torn) && strstr(msg, "changed on disk") && strstr(msg, "zero_fault_rank00000.a.swp"),
                  "%s: %s", spec, msg);
        c.rmw = 0; /* a write-only pass rewrites every block */
        c.computed = 0;
        ZT_OK(zero_offload_pool_run(p, &pass, NULL));
        c.rmw = 1;
        c.computed = 0;
    }
    ZT_OK(zero_offload_pool_run(p, &pass, NULL)); /* "once": the disk works again */
    ZT_EQ_INT(c.computed, TILES);
    zero_offload_pool_free(p);
    ZT_OK(zero_swap_remove(a, &err));
    ZT_OK(zero_swap_remove(b, &err));
    zero_io_free(io);
    free(c.model_a);
    free(c.model_b);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/zero_test_offload_pool_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    zero_error err = {{0}};
    zero_io *posix = NULL, *uring = NULL;
    ZT_OK(zero_io_create_posix(&posix, &err));
    for (int b = 1; b <= 5; b++) {
        char label[64];
        snprintf(label, sizeof label, "posix, %d buffers", b);
        run_case(posix, b, label);
    }
    caller_memory_case(posix, "posix, the fake device's pinned memory");
    if (zero_io_create_uring(&uring, 8, &err) == ZERO_OK) {
        for (int b = 1; b <= 5; b++) {
            char label[64];
            snprintf(label, sizeof label, "uring, %d buffers", b);
            run_case(uring, b, label);
        }
        caller_memory_case(uring, "uring, the fake device's pinned memory");
        /* two pools on one ring: each reaps the other's completions and credits them right */
        zero_swap *a = NULL;
        ZT_OK(zero_swap_create(&a, uring, dir, "two", 0, 1, "a", 8 * BLK, &err));
        zero_offload_pool *p1 = NULL, *p2 = NULL;
        ZT_OK(zero_offload_pool_create(&p1, uring, 2, BLK, NULL, &err));
        ZT_OK(zero_offload_pool_create(&p2, uring, 2, BLK, NULL, &err));
        int k1 = zero_offload_pool_acquire(p1), k2 = zero_offload_pool_acquire(p2);
        memset(zero_offload_pool_buffer(p1, k1), 3, BLK);
        zero_offload_extent w = {a, 0, BLK, 0, ZERO_OFFLOAD_WRITE}, r = {a, BLK, BLK, 0, ZERO_OFFLOAD_READ};
        ZT_OK(zero_offload_pool_submit(p1, k1, &w, 1));
        ZT_OK(zero_offload_pool_submit(p2, k2, &r, 1));
        ZT_OK(zero_offload_pool_wait(p2, k2, NULL));
        ZT_OK(zero_offload_pool_wait(p1, k1, NULL));
        ZT_EQ_INT(zero_offload_pool_pending(p1, k1) + zero_offload_pool_pending(p2, k2), 0);
        zero_offload_pool_free(p1);
        zero_offload_pool_free(p2);
        ZT_OK(zero_swap_remove(a, &err));
        zero_io_free(uring);
    } else {
        printf("io_uring unavailable (%s): posix only\n", err.msg);
    }
    zero_io_free(posix);
    fault_case("read:5:eio:once:.a.swp", ZERO_ERR_IO, "Input/output error", NULL);
    /* write 1 is the header; write 4 is tile 2's (data offset 4 blocks): half of it lands */
    fault_case("write:4:enospc:once:.a.swp", ZERO_ERR_NOSPACE, "No space left", "block at offset 20480 ");
    /* bad arguments */
    zero_offload_pool *p = NULL;
    ZT_EQ_INT(zero_offload_pool_create(&p, NULL, 2, BLK, NULL, &err), ZERO_ERR_INVALID_ARG);
    ZT_OK(zero_io_create_posix(&posix, &err));
    ZT_EQ_INT(zero_offload_pool_create(&p, posix, 0, BLK, NULL, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "0 buffers") != NULL, "message: %s", err.msg);
    zero_io_free(posix);
    zero_offload_pool_free(NULL);
    rmdir(dir);
    return zt_finish("test_offload_pool");
}
