/* Private to the shared-memory collectives of the mpi backend (comm_shm*.c): the window's layout,
 * the per-communicator state, and what the files of the backend call across. */
#ifndef ZERO_COMM_SHM_IMPL_H
#define ZERO_COMM_SHM_IMPL_H
#ifdef ZERO_HAVE_MPI
#include "comm/internal.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#endif

/*
 * Window layout: every local rank t owns one segment of the node's window,
 *   [shm_ctl: 128 bytes][buffer 0][buffer 1]      (each buffer `chunk` bytes)
 * A collective runs in rounds. In round e a rank writes its pieces into its buffer e % 2, enters
 * barrier e, then reads the pieces its peers wrote. Content written before barrier e is read
 * only between barriers e and e + 1 (every reader finishes before it enters barrier e + 1), and
 * the buffer is written again only after barrier e + 1: two buffers make one barrier per round
 * enough, and the round counter (the barrier epoch) runs on across calls.
 *
 * Memory model: the window is plain shared memory (MPI_WIN_UNIFIED is checked) accessed with
 * loads and stores; the barrier is a (seq_cst, so also release) store of the rank's epoch and
 * acquire loads of its peers', so every store a rank made before entering barrier e
 * happens-before every load its peers make after leaving it. C11 atomics order both the
 * compiler and the CPU: the role MPI_Win_sync plays for a window accessed through MPI calls.
 * A waiter spins, then yields, then sleeps on a futex in the window (ranks may outnumber
 * cores); the arriving rank wakes sleepers. Nothing else in the window is atomic: a buffer has
 * one writer per round, and its readers read it only after the barrier.
 */
#define ZERO__SHM_NBUF 2
#define ZERO__SHM_DEFAULT_CHUNK ((size_t)1 << 20)
#define ZERO__SHM_DEFAULT_MIN ((uint64_t)16 << 10) /* measured: docs/BENCHMARKS.md */
#define ZERO__SHM_ENV_BYTES 64 /* longest environment value forwarded from rank 0 */
#define ZERO__SHM_NENV 8
/* Single copy (CMA): reduce-scatters and all-gathers from this many bytes read the peers'
 * buffers directly, all-reduces from ZERO__SHM_CMA_AR_FACTOR times as many (measured:
 * docs/BENCHMARKS.md; below, the window is as fast or faster); a reduce-scatter reads them in
 * pieces of at most ZERO__SHM_CMA_PIECE bytes in all (one per peer), which stay in cache until
 * the reduction reads them. */
#define ZERO__SHM_CMA_DEFAULT_MIN ((uint64_t)1 << 20)
#define ZERO__SHM_CMA_AR_FACTOR 16
#define ZERO__SHM_CMA_PIECE ((size_t)256 << 10)

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the barrier needs lock-free 64-bit atomics across processes");

typedef struct shm_ctl {
    _Atomic unsigned long long arrived; /* barriers this rank has entered */
    /* The low 32 bits of `arrived` (a futex word), and how many peers sleep on it. */
    _Atomic uint32_t arrived32;
    _Atomic uint32_t sleepers;
    char pad0[64 - sizeof(unsigned long long) - 2 * sizeof(uint32_t)];
    /* Sequence number of the last collective that failed on this rank (its cross-node step, or
     * a single-copy read: fail_kind), so that its node peers fail that call too instead of
     * returning garbage; fail_peer and fail_errno say which read failed and why. */
    _Atomic unsigned long long failed;
    /* Single copy: this rank's buffers for the current call (the reduction's source, the
     * gather's source), published before the call's first barrier. */
    _Atomic uintptr_t addr[2];
    _Atomic int fail_kind, fail_peer, fail_errno;
    char pad1[64 - sizeof(unsigned long long) - 2 * sizeof(uintptr_t) - 3 * sizeof(int)];
} shm_ctl;
_Static_assert(sizeof(shm_ctl) == 128, "one control block per rank, its own cache lines");

struct zero__shm {
    MPI_Comm node;   /* the ranks sharing this window, in the order of their communicator ranks */
    MPI_Comm cross;  /* the ranks of the same local rank on every node, by node; NULL with 1 node */
    MPI_Win win;     /* MPI_WIN_NULL until the first collective that uses it */
    int nnodes, nlocal, local, node_index;
    int *world_of;   /* [m * nlocal + t]: communicator rank of local rank t on node m */
    shm_ctl **ctl;   /* [t]: local rank t's control block */
    unsigned char **seg; /* [t]: local rank t's first buffer */
    const void **srcs;   /* nlocal source pointers handed to the reduction kernel */
    size_t chunk;        /* bytes of one buffer */
    unsigned char *scratch; /* cross-node staging (nnodes > 1), scratch_bytes */
    size_t scratch_bytes;
    unsigned long long epoch; /* barriers this rank has passed */
    unsigned long long seq;   /* collectives run through the window */
    uint64_t min_bytes;
    zero_impl impl;
    /* Single copy (CMA): on when allowed and the probe at creation passed on every rank. */
    int cma;
    uint64_t cma_min;
    int *pid;                   /* [t]: local rank t's process id */
    /* [t] and [nlocal + t]: local rank t's published buffers (reduction source, gather source)
     * for the current call. */
    const unsigned char **from;
    unsigned char *cma_scratch; /* the pieces a reduce-scatter reads, cma_scratch_bytes */
    size_t cma_scratch_bytes;
    int cma_err, cma_peer;      /* the first failed read of the current call (errno; 0: none) */
    /* The progress thread (ZERO_COMM_ASYNC): started by the first job, runs the queue in order.
     * While jobs are pending only the thread touches the collectives' state above (epoch, seq,
     * scratch, from, cma_err); the caller's blocking collectives first wait for the queue to
     * empty. `wc` is the thread's view of the communicator, for its error texts. */
    int async;
    int no_thread; /* test hook (zero__shm_set_async): as if the thread could not be started */
    int thread_up, stopping;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, done; /* a job was posted (or stop); a job has run */
    zero__shm_job *head, *tail;
    unsigned pending;          /* posted and not yet run */
    zero_comm wc;
    /* Deferred cross-node steps (several nodes, no thread): the setting, and the all-gathers whose
     * node step has not run, in issue order. */
    int cross_overlap;
    zero__shm_defer *dhead, *dtail;
    uint64_t deferred; /* calls posted so (zero__shm_deferred_calls) */
    size_t deferred_bytes; /* the buffers of the pending ones */
};

typedef struct shm_settings {
    int enabled;
    uint64_t min_bytes;
    size_t chunk;
    int fake_nodes; /* 0: the real node split */
    int fake_cyclic;
    int cma;
    uint64_t cma_min;
    int async; /* 0, 1, or ASYNC_AUTO */
    int cross_overlap;
} shm_settings;
enum { ASYNC_AUTO = 2 };

/* How a collective's vector is cut among the local ranks (t) and the nodes (g): block (t, g)
 * starts at element `off` of the full vector and has `len` elements.
 *  - BLOCKS: reduce-scatter and all-gather; block (t, g) is that of communicator rank
 *    world_of[g][t], `count` elements (groups = nnodes in the hierarchical algorithms, 1 when
 *    the window carries the whole collective).
 *  - PARTS: all-reduce; the vector in nlocal balanced parts (lengths differ by at most one),
 *    part t reduced by local rank t; one group. */
enum { LAYOUT_BLOCKS, LAYOUT_PARTS };
typedef struct shm_layout {
    int kind;
    int groups;
    size_t count;
    size_t es;
} shm_layout;

/* Non-temporal stores (zero__copy_stream):
 *  - into the window, always: a peer core reads the piece next, and pulling freshly written
 *    (dirty) lines out of the writer's cache cost up to 2x in the all-gather here (measured,
 *    docs/BENCHMARKS.md);
 *  - into recv when the collective's result exceeds this many bytes: it will not stay in cache
 *    anyway, and skipping the read-for-ownership of recv's lines speeds the copy-out. */
#define ZERO__SHM_STREAM_BYTES ((size_t)16 << 20)

/* Streaming stores are fenced once per barrier (zero__shm_barrier) and once at the end of every
 * collective (before recv is handed back, perhaps to other threads), not once per piece. */
static inline void copy_out(void *dst, const void *src, size_t n, int stream) {
    if (stream) zero__copy_stream_unfenced(dst, src, n);
    else memcpy(dst, src, n);
}

/* Length of the piece [lo, lo + c) of a block of len elements clipped to [., hi). */
static inline size_t piece_len(size_t lo, size_t c, size_t len, size_t hi) {
    size_t end = len < hi ? len : hi;
    if (lo >= end) return 0;
    return end - lo < c ? end - lo : c;
}

enum { FAIL_CROSS, FAIL_CMA };

static inline int world_rank(const zero__shm *s, int t) {
    return s->world_of[s->node_index * s->nlocal + t];
}

/* Local rank t's buffer that holds what was written before barrier `epoch`. */
static inline unsigned char *buf_at(const zero__shm *s, int t, unsigned long long epoch) {
    return s->seg[t] + (size_t)(epoch % ZERO__SHM_NBUF) * s->chunk;
}

/* comm_shm.c */
zero_status zero__shm_attach(zero_comm *c, zero__shm *s, const char *fn);
/* comm_shm_settings.c */
void zero__shm_settings_text(const zero_comm_options *o, char env[ZERO__SHM_NENV][ZERO__SHM_ENV_BYTES], unsigned *from_opts);
zero_status zero__shm_parse_settings(char env[ZERO__SHM_NENV][ZERO__SHM_ENV_BYTES], unsigned from_opts, int nranks,
                                     shm_settings *st, char *err, size_t cap);
/* comm_shm_sync.c */
void zero__shm_barrier(zero__shm *s);
/* comm_shm_cma.c */
int zero__shm_cma_probe(MPI_Comm comm, zero__shm *sh, int rank, long long *all, int *ok_all);
int zero__shm_use_cma(const zero__shm *s, uint64_t bytes, uint64_t factor);
void zero__shm_cma_begin(zero__shm *s, const void *a, const void *b);
void zero__shm_cma_sync(zero__shm *s);
zero_status zero__shm_cma_status(zero_comm *c, zero__shm *s, const char *fn);
void zero__shm_cma_local_rs(zero__shm *s, const shm_layout *ly, zero_op op, zero_dtype dt,
                            const void *send, void *out, size_t ostride, size_t a, size_t b);
void zero__shm_cma_local_ag(zero__shm *s, const shm_layout *ly, const void *in, size_t istride,
                            void *recv, size_t a, size_t b);
/* comm_shm_coll.c */
void zero__shm_block_at(const zero__shm *s, const shm_layout *ly, int t, int g, size_t *off, size_t *len);
void zero__shm_mark_failed(zero__shm *s, int kind, int peer, int err);
zero_status zero__shm_run_all_reduce(zero_comm *c, zero__shm *s, const void *send, void *recv,
                                     size_t count, zero_dtype dt, zero_op op);
/* qblock > 0: qgZ (op SUM): the cross-node step exchanges int8 messages of blocks of qblock
 * (comm_q8.c), the node step stays exact */
zero_status zero__shm_run_reduce_scatter(zero_comm *c, zero__shm *s, const void *send, void *recv,
                                         size_t count, zero_dtype dt, zero_op op, size_t qblock);
zero_status zero__shm_run_all_gather(zero_comm *c, zero__shm *s, const void *send, void *recv,
                                     size_t count, zero_dtype dt);
/* comm_shm_thread.c */
void zero__shm_stop_thread(zero__shm *s);

/* A deferred cross-node step (internal.h, zero__shm_defer_start). */
/* The buffers of a communicator's pending deferred calls together: a call that would pass it runs
 * at issue (this bounds the memory the setting adds). */
#define ZERO__SHM_DEFER_MAX ((size_t)64 << 20)
struct zero__shm_defer {
    zero__shm_defer *next; /* the pending all-gathers, in issue order */
    zero__shm_kind kind;
    MPI_Request r;
    unsigned char *col; /* the nodes' blocks of this local rank: nnodes x count (a reduce-scatter: two
                         * such, what this rank sends and what it receives) */
    void *recv;
    size_t count;
    zero_dtype dt;
    zero_op op;
    int mpi_done;       /* r completed (MPI_Test saw it) */
    int finished;       /* the node step ran (all-gather) or the MPI step completed (reduce-scatter) */
    zero_status status; /* once finished */
    char err[320];      /* its error text (the start of c->err; the last byte stays 0) */
};

#endif
#endif
