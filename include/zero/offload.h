/* zero/offload.h — NVMe offload: swap files that hold a rank's shards on disk, and the bounded
 * pool of aligned buffers that streams them, reading ahead and writing behind the caller's compute.
 *
 * The engine uses both for offload_optimizer / offload_param {device: nvme} (docs/OFFLOAD.md);
 * `zero bench io` measures them; a program may use them for its own out-of-core data.
 *
 *   zero_io *io;       zero_offload_io_create(&io, 8, &err);        // io_uring + O_DIRECT when it can
 *   zero_swap *f;      zero_swap_create(&f, io, "/nvme", "job7", rank, world, "optim", bytes, &err);
 *   zero_offload_pool *p;  zero_offload_pool_create(&p, io, 4, 1 << 20, &acct, &err);
 *   zero_offload_pass pass = {ntiles, describe, compute, ctx};
 *   zero_offload_pool_run(p, &pass, &stats);    // read tile i+1 while compute(i) while writing i-1
 *   zero_offload_pool_free(p);  zero_swap_remove(f);  zero_io_free(io);
 *
 * Swap file ownership (the rule that keeps zero from destroying a user's data):
 *  - the name is DIR/zero_<job>_rank<rank, 5 digits>.<kind>.swp and the file opens with a
 *    ZERO_SWAP_HEADER-byte header (magic "ZEROSWAP", owner host and pid; layout in offload/swap.c);
 *  - the creating process holds an flock on its file from before the header is written until
 *    after the file is removed; the kernel drops it when the process ends, however it ends;
 *  - creation refuses (ZERO_ERR_IO, naming the file) when the name exists and is not a swap file
 *    (a regular file of this user, mode 0600, with the header), when it is the swap file of a
 *    live process (its lock is held), or of another host (zero cannot tell whether that one is
 *    alive); only a stale swap file of this host (its lock free) is replaced;
 *  - zero_swap_remove unlinks the file; the engine removes its files in zero_engine_free and on
 *    every error path; zero_scratch_remove_all (zero/common.h) removes the files of every live
 *    zero_swap from a signal handler. What a process killed outright (kill -9, a crash, the OOM
 *    killer) leaves is stale, and zero_swap_sweep removes it: the engine sweeps each nvme_path
 *    before it creates its files there.
 * Space for the data is reserved at creation (fallocate, where the file system has it), so a full
 * disk is reported then, naming the free and the needed bytes, rather than in the middle of a step.
 */
#ifndef ZERO_OFFLOAD_H
#define ZERO_OFFLOAD_H

#include "zero/common.h"
#include "zero/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes before the data area of a swap file. */
#define ZERO_SWAP_HEADER 4096u

/* The io backend offload uses: $ZERO_IO (posix|uring) when set, else io_uring with `queue_depth`
 * entries, falling back to posix when the kernel or the build has no io_uring; wrapped in the
 * fault shim when $ZERO_FAULT is set (zero/io.h). */
zero_status zero_offload_io_create(zero_io **out, int queue_depth, zero_error *err);
/* The same with the options a program gives (zero/io.h; NULL: the variables); their queue_depth,
 * when not 0, replaces queue_depth. */
zero_status zero_offload_io_create_with(zero_io **out, int queue_depth, const zero_io_options *o, zero_error *err);

/* ---------------------------------------------------------------- swap files */
typedef struct zero_swap zero_swap;

/* Creates the swap file of `data_bytes` bytes (a multiple of ZERO_IO_ALIGN; it reads as zeros)
 * under the ownership rule above; `job` and `kind` are made of [A-Za-z0-9._-] (1..63 chars).
 * The data area is opened with O_DIRECT when the file system allows it (zero_swap_direct). */
zero_status zero_swap_create(zero_swap **out, zero_io *io, const char *dir, const char *job, int rank,
                             int world, const char *kind, uint64_t data_bytes, zero_error *err);
/* Closes and unlinks the file and frees s (NULL: ZERO_OK). s is freed even when this fails. */
zero_status zero_swap_remove(zero_swap *s, zero_error *err);
const char *zero_swap_path(const zero_swap *s);
zero_io_file *zero_swap_file(const zero_swap *s); /* offsets in it include the header */
int zero_swap_direct(const zero_swap *s);
uint64_t zero_swap_data_bytes(const zero_swap *s);

/* Checksums (on from creation): every ZERO_IO_ALIGN-byte block of the data area has a CRC32C kept
 * in RAM (4 bytes per 4 KiB: 1/1024 of the data), recorded when the pool writes the block and
 * verified when the buffer that read it back is waited for (a pass, or zero_offload_pool_wait). A
 * block that changed on disk in between (another program, a failing drive) fails that read with
 * ZERO_ERR_FORMAT, the pool's last_error naming the file and the block's offset in it: never a
 * silently different model. Transfers of a swap file with checksums are whole blocks (offset and
 * bytes multiples of ZERO_IO_ALIGN). Writing the file by other means than the pool
 * (zero_swap_file) bypasses the record. zero_swap_set_checksums(s, 0)
 * turns them off (zero bench io measures their cost); turning them on again forgets what was
 * written meanwhile (every block counts as zeros), so write a block before reading it. */
zero_status zero_swap_set_checksums(zero_swap *s, int on);
int zero_swap_checksums(const zero_swap *s);

/* What a file at `path` is, for the ownership rule. */
typedef enum zero_swap_owner {
    ZERO_SWAP_ABSENT = 0,  /* no such file */
    ZERO_SWAP_FOREIGN = 1, /* not a swap file (or unreadable, a symbolic link, another user's): never touched */
    ZERO_SWAP_LIVE = 2,    /* a swap file of a live process of this host (this one included) */
    ZERO_SWAP_REMOTE = 3,  /* a swap file written on another host */
    ZERO_SWAP_STALE = 4,   /* a swap file of a process of this host that no longer runs */
} zero_swap_owner;
zero_swap_owner zero_swap_probe(const char *path);

/* Removes every stale swap file in dir (any job id: runs that were killed left them): a
 * zero_*.swp that is a regular file of this user, mode 0600, with a swap header of this host,
 * whose lock no process holds (format 1: whose owner pid no longer runs), removed while holding
 * its lock. Never another user's file, a file without the header, another host's, or anything
 * through a symbolic link. *out (may be NULL) says what went. ZERO_OK also when dir does not
 * exist; ZERO_ERR_IO when it cannot be read. */
typedef struct zero_swap_swept {
    int removed;     /* files removed */
    uint64_t bytes;  /* their sizes, summed */
    char first[256]; /* the name (in dir) of the first one removed; "" when none */
} zero_swap_swept;
zero_status zero_swap_sweep(const char *dir, zero_swap_swept *out, zero_error *err);

/* ---------------------------------------------------------------- the pool */
typedef struct zero_offload_pool zero_offload_pool;

/* One transfer of a tile: `bytes` at `offset` of the swap's data area, to or from `buf_offset`
 * of the tile's buffer. READ transfers land before the tile is computed; WRITE transfers leave
 * after. With an O_DIRECT swap, offset, bytes and buf_offset are multiples of ZERO_IO_ALIGN. */
enum { ZERO_OFFLOAD_READ = 1u, ZERO_OFFLOAD_WRITE = 2u };
#define ZERO_OFFLOAD_MAX_EXTENTS 8

typedef struct zero_offload_extent {
    zero_swap *swap;
    uint64_t offset;
    size_t bytes;
    size_t buf_offset;
    unsigned flags; /* ZERO_OFFLOAD_READ and/or ZERO_OFFLOAD_WRITE */
} zero_offload_extent;

/* A pass over `tiles` tiles, in order. describe() fills ext[] (at most ZERO_OFFLOAD_MAX_EXTENTS)
 * with tile i's transfers and returns their number, or a negative zero_status; it may be called
 * twice for a tile and must give the same answer. compute() (NULL: nothing) runs on the tile's
 * buffer after its reads landed; a non-OK status stops the pass with that status. */
typedef struct zero_offload_pass {
    int64_t tiles;
    int (*describe)(void *ctx, int64_t tile, zero_offload_extent *ext);
    zero_status (*compute)(void *ctx, int64_t tile, void *buf);
    void *ctx;
} zero_offload_pass;

/* Accumulated by every call that takes a zero_offload_stats (add, never reset). */
typedef struct zero_offload_stats {
    uint64_t bytes_read, bytes_written;
    uint64_t reads, writes; /* requests */
    double io_wait_s;       /* the caller's thread blocked on I/O */
    double compute_s;       /* in compute() */
    double wall_s;          /* in zero_offload_pool_run / _wait */
} zero_offload_stats;

/* `buffers` (1..4096) buffers of `buffer_bytes` (rounded up to ZERO_IO_ALIGN), charged to
 * ZERO_MEM_BUFFERS in acct (may be NULL): the pool's whole memory, allocated here, once. The pool
 * keeps io (does not own it); several pools may share one io. */
zero_status zero_offload_pool_create(zero_offload_pool **out, zero_io *io, int buffers, size_t buffer_bytes,
                                     zero_memacct *acct, zero_error *err);
/* The same on the caller's memory: mem (ZERO_IO_ALIGN-aligned) holds mem_bytes, at least
 * zero_offload_pool_bytes_for(buffers, buffer_bytes); the pool does not free it, and the caller
 * keeps it until zero_offload_pool_free (a device's pinned memory: docs/DEVICE.md). */
zero_status zero_offload_pool_create_in(zero_offload_pool **out, zero_io *io, int buffers, size_t buffer_bytes,
                                        void *mem, size_t mem_bytes, zero_error *err);
/* The bytes a pool of `buffers` buffers of `buffer_bytes` holds (0 when out of range). */
size_t zero_offload_pool_bytes_for(int buffers, size_t buffer_bytes);
/* Waits for whatever is in flight, frees the buffers and p (NULL: no-op). */
void zero_offload_pool_free(zero_offload_pool *p);
int zero_offload_pool_count(const zero_offload_pool *p);
size_t zero_offload_pool_buffer_bytes(const zero_offload_pool *p);
void *zero_offload_pool_buffer(const zero_offload_pool *p, int buf);
const char *zero_offload_pool_last_error(const zero_offload_pool *p);

/* Runs a pass with every buffer of the pool (all must be free: ZERO_ERR_STATE otherwise): reads of
 * later tiles are in flight while tile i is computed and the writes of earlier ones drain. On a
 * failed transfer or compute the pass stops, waits for what is in flight, and returns the first
 * error (last_error names the file, offset and the OS's reason). Tiles before the failing one may
 * have been written, later ones not: the caller decides what the data is worth. */
zero_status zero_offload_pool_run(zero_offload_pool *p, const zero_offload_pass *pass, zero_offload_stats *st);

/* One buffer at a time (the stage-3 parameter read-ahead): acquire a free buffer (-1: none),
 * submit transfers from/into it, wait for them (their first error), release it. */
int zero_offload_pool_acquire(zero_offload_pool *p);
zero_status zero_offload_pool_submit(zero_offload_pool *p, int buf, const zero_offload_extent *ext, int n);
zero_status zero_offload_pool_wait(zero_offload_pool *p, int buf, zero_offload_stats *st);
int zero_offload_pool_pending(const zero_offload_pool *p, int buf); /* transfers in flight */
/* Waits for buf's transfers (ignoring their outcome) and marks it free. */
void zero_offload_pool_release(zero_offload_pool *p, int buf);

/* ---------------------------------------------------------------- the engine's offload */
/* With offload_optimizer / offload_param on "nvme", zero_engine_finalize creates the swap files
 * and the pools and is collective (every rank learns whether every rank's files could be made);
 * zero_engine_step, _save, _load, _read_unit agree on every rank's I/O status before going on, and
 * a stage-3 gather carries its read's status in its control exchange: a failing disk is an error
 * on every rank, never a hang. After a failed step the engine refuses further work: free it. */
struct zero_engine;
/* I/O of an engine's NVMe offload since it was created: bytes, requests, the time its thread
 * waited (gathers + steps + checkpoints), and swap file bytes on disk (data areas). All zero
 * without offload. */
typedef struct zero_engine_offload_info {
    zero_offload_stats io;
    uint64_t optim_file_bytes, param_file_bytes;
    uint64_t pool_bytes;     /* RAM of the pools (charged to ZERO_MEM_BUFFERS) */
    int64_t tile_elements;   /* elements per step tile */
    int direct;              /* 1: the swap files use O_DIRECT */
    const char *backend;     /* the io backend's name */
} zero_engine_offload_info;
zero_status zero_engine_offload_info_get(const struct zero_engine *e, zero_engine_offload_info *out);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_OFFLOAD_H */
