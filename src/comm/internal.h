/* Private parts of the comm layer: the backend vtable every communicator dispatches through,
 * the communicator and request structs, and the host reduction kernels the backends share. */
#ifndef ZERO_COMM_INTERNAL_H
#define ZERO_COMM_INTERNAL_H

#include "common/internal.h"
#include "zero/comm.h"

#include <stdatomic.h>
#include <stddef.h>

/* Bytes of backend-private state carried inline in every request (an MPI_Request and the
 * bookkeeping of what to do once it completes, or a shared-memory job for the progress thread
 * with room for its error text). */
#define ZERO__REQ_IMPL_BYTES 512

/* A backend: the public functions in comm.c validate every argument, then call these with
 * arguments already known to be consistent (valid dtype and op, non-NULL buffers when count > 0,
 * counts within max_count, in place exactly as comm.h defines it or not overlapping at all).
 *
 * The collectives take `req`: NULL means blocking (return when done); otherwise start the
 * operation, keep its state in req->impl, and finish it in wait/test. A backend without
 * ZERO__CAP_AVG never sees ZERO_OP_AVG: comm.c passes SUM and divides the host result. */
typedef struct zero__comm_ops {
    const char *name;  /* "self", "mpi", "nccl" */
    size_t max_count;  /* largest count (elements) one call accepts */
    unsigned caps;     /* ZERO__CAP_* */
    zero_status (*all_reduce)(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                              zero_op op, zero_request *req);
    zero_status (*reduce_scatter)(zero_comm *c, const void *send, void *recv, size_t count,
                                  zero_dtype dt, zero_op op, zero_request *req);
    zero_status (*all_gather)(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                              zero_request *req);
    /* qgZ's reduce-scatter (zero_comm_ireduce_scatter_q8; SUM, a float dtype, not in place) */
    zero_status (*reduce_scatter_q8)(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                                     size_t block, zero_request *req);
    zero_status (*broadcast)(zero_comm *c, void *buf, size_t count, zero_dtype dt, int root);
    zero_status (*barrier)(zero_comm *c);
    /* *out = NULL when color < 0 (this rank joins no group). */
    zero_status (*split)(zero_comm *c, int color, int key, zero_comm **out);
    /* Completes req's backend part (the request itself is freed by comm.c). */
    zero_status (*wait)(zero_request *req);
    zero_status (*test)(zero_request *req, int *done);
    /* One pass of the library's progress engine, completing nothing (NULL: nothing to do). */
    zero_status (*progress)(zero_comm *c);
    /* Releases c->impl and whatever the backend holds for c (not c itself). */
    void (*destroy)(zero_comm *c);
} zero__comm_ops;

enum {
    ZERO__CAP_AVG = 1u << 0, /* reduces with ZERO_OP_AVG itself */
};

struct zero_comm {
    const zero__comm_ops *ops;
    void *impl; /* backend context */
    int rank;
    int size;
    zero_comm_counters counters;
    int64_t timeout_ns;   /* zero_comm_options.timeout_s; 0: none */
    int64_t heartbeat_ns; /* zero_comm_options.heartbeat_s; 0: none */
    int beat;             /* the watchdog's list of this communicator's watched peers; 0: none */
    char err[512]; /* last-error text */
};


typedef struct zero__dev_req zero__dev_req;
struct zero_request {
    zero_comm *comm;
    /* Non-NULL: a collective on device memory (comm_device.c), its host collective inside; the
     * backend's wait and test do not apply to it. */
    zero__dev_req *dev;
    /* Non-NULL: once the transfer is complete, divide avg_count elements of avg_dt here by the
     * communicator size (ZERO_OP_AVG on a backend without ZERO__CAP_AVG). */
    void *avg_buf;
    size_t avg_count;
    zero_dtype avg_dt;
    union {
        max_align_t align;
        unsigned char bytes[ZERO__REQ_IMPL_BYTES];
    } impl;
};

/* Allocates a communicator with zeroed counters for a backend (rank, size and impl are the
 * caller's to fill). NULL when out of memory. */
zero_comm *zero__comm_new(const zero__comm_ops *ops, int rank, int size);
/* Frees what zero__comm_new allocated (not the backend's impl). */
void zero__comm_delete(zero_comm *c);

#define ZERO__COMM_ERR(c, ...) zero__errorf((c)->err, sizeof (c)->err, __VA_ARGS__)

/* inout[i] = inout[i] op in[i] for n elements, the arithmetic of every host backend:
 * fp32 in fp32; bf16/fp16 converted to fp32, combined, rounded to nearest even once; integers
 * in their own type (sums wrap as unsigned arithmetic). MAX propagates NaN for float types.
 * AVG is not an element-wise op: use ZERO_OP_SUM then zero__comm_avg_finish. */
void zero__comm_reduce(zero_dtype dt, zero_op op, const void *in, void *inout, size_t n);

/* Turns the sums in buf (n elements) into averages over nranks: float types divide in fp32
 * (x / (float)nranks, half types converted to fp32 first and rounded back once); integers use
 * C division, which truncates toward zero. */
void zero__comm_avg_finish(zero_dtype dt, void *buf, size_t n, int nranks);

/* Where a constructor's failure text goes: the parent's last error (a split), or the caller's
 * zero_error (an init; may be NULL) and the log. No process-wide error text. */
typedef struct zero__cerr {
    zero_comm *parent;
    zero_error *err;
} zero__cerr;
void zero__cerr_set(const zero__cerr *e, const char *fmt, ...) ZERO__PRINTF(2, 3);

/* ---- watchdog.c: the thread that ends a rank stuck in a collective (docs/COMM.md, "Stopped
 * ranks") ---- */
#define ZERO__COMM_TIMEOUT_S   1800 /* ZERO_COMM_TIMEOUT's default: DeepSpeed's 30 minutes */
#define ZERO__COMM_HEARTBEAT_S 60   /* ZERO_COMM_HEARTBEAT's default */
/* zero_comm_options.timeout_s and .heartbeat_s, or ZERO_COMM_TIMEOUT and ZERO_COMM_HEARTBEAT, or
 * the defaults, in ns; ZERO_ERR_INVALID_ARG with e set on a bad value. */
zero_status zero__comm_watch_settings(const zero_comm_options *o, const zero__cerr *e, const char *fn,
                                      int64_t *timeout_ns, int64_t *heartbeat_ns);
/* Around a call that may wait for the other ranks: its slot (-1: not watched: one rank, nothing to
 * watch for, or every slot taken), and its release. */
int zero__watch_enter(const zero_comm *c, const char *fn);
void zero__watch_leave(int slot);

/* A process's heartbeat: one page of its memory, which the watchdog thread bumps every quarter
 * second. Node peers map it read-only (comm_beat.c) and find it theirs by magic, nonce and pid. */
#define ZERO__BEAT_MAGIC      0x544145424f52455aull /* the bytes "ZEROBEAT" on a little-endian machine */
#define ZERO__BEAT_PAGE_BYTES 4096
typedef struct zero__beat_page {
    uint64_t magic;
    uint64_t nonce; /* random: told to the peers through MPI */
    int64_t pid;
    _Atomic uint64_t count; /* bumped by the watchdog every tick */
    _Atomic int beating;    /* 1 once the watchdog thread runs: only then is the count judged */
} zero__beat_page;
/* Starts the watchdog (once) and gives this process's heartbeat page as a memfd and its nonce;
 * 0 when there is none (no memfd, no thread): peers then never judge this process. */
int zero__beat_self(int *fd, uint64_t *nonce);
/* Hands the watchdog the n mapped pages of a communicator's node peers (comm rank and pid of
 * each): it watches them from now on, and unmaps them in zero__beat_forget. Returns the list's id
 * (> 0), or 0 when the table is full (the pages are unmapped; nothing is watched). */
int zero__beat_watch(const zero__beat_page *const *page, const int *rank, const int *pid, int n);
void zero__beat_forget(int id); /* 0: nothing */

/* Heartbeats across nodes (comm_beat.c, watchdog.c): the watchdog owns a UDP socket (any address,
 * a port of the kernel's choice) and sends, every tick, to each watched peer on another node one
 * datagram of 24 bytes, all big-endian: magic (ZERO__BEAT_MAGIC) u64, the sender's nonce u64, its
 * tick count u64. A datagram counts only when its nonce is one MPI told this process; a peer is
 * judged only once one of its datagrams has arrived (a firewall that drops them all leaves it to
 * ZERO_COMM_TIMEOUT). */
#define ZERO__BEAT_ADDRS 4 /* IPv4 addresses tried per peer (its host's non-loopback ones) */
/* Peers on other nodes watched per rank: those within this distance in comm rank order (cyclic),
 * so that each rank sends and reads at most twice this many datagrams a tick, whatever the size. */
#define ZERO__BEAT_REMOTE_SPAN 16
typedef struct zero__beat_remote {
    uint64_t nonce;
    uint32_t addr[ZERO__BEAT_ADDRS]; /* IPv4, network byte order */
    int naddr;
    int port; /* UDP, host byte order */
    int rank, pid;
    char host[32]; /* its node's name, for the log line */
} zero__beat_remote;
/* Starts the watchdog (once) and gives its UDP port and this process's nonce; 0 when there is
 * none (no socket, no thread): peers on other nodes then never judge this process. */
int zero__beat_udp(int *port, uint64_t *nonce);
/* Adds n peers on other nodes to list id (0: a new list), copied; returns the list's id, or 0
 * when out of memory or the table is full (nothing more is watched; list id stays as it was). */
int zero__beat_watch_remote(int id, const zero__beat_remote *r, int n);
/* One datagram now to every remote peer of list id, from the caller's thread: join_remote sends it
 * once every rank has its list, so that a peer stopped before its watchdog's first tick (a tiny
 * model's first steps take less) has been heard, and is judged. */
void zero__beat_hello(int id);

/* qgZ's sum (comm_q8.c): recv (count elements of dt) = the fp32 sum over n parts in order, part
 * `own` the exact values at own_vals (dt), every other part k the int8 message at msgs + k * R
 * (zero_quant_msg_bytes(count, block)), rounded once to dt. ZERO_ERR_NOMEM when the fp32 sums
 * (dt not fp32) cannot be had. */
zero_status zero__comm_q8_sum(const unsigned char *msgs, int n, int own, const void *own_vals, size_t count,
                              zero_dtype dt, size_t block, void *recv);
/* Codes the n parts of count elements of dt at send (part k at send + k * count) into msgs (part
 * k at msgs + k * R), all but part `skip` (-1: none). */
zero_status zero__comm_q8_encode(const void *send, int n, int skip, size_t count, zero_dtype dt, size_t block,
                                 unsigned char *msgs);

/* The self backend (comm_self.c). */
extern const zero__comm_ops zero__comm_self_ops;

/* Records an MPI error code in c's last-error text (or e's sink) as "<what>: <MPI's error string>
 * (MPI error <rc>)" and returns ZERO_ERR_COMM. Only in builds with MPI (comm_mpi.c). */
zero_status zero__comm_mpi_error(zero_comm *c, int rc, const char *what);
zero_status zero__cerr_mpi(const zero__cerr *e, int rc, const char *what);

/* The shared-memory collectives reduce with the common kernel (common/internal.h: zero__reduce,
 * zero__copy_stream, zero__stream_fence); op there is SUM or MAX. */
static inline void zero__shm_reduce(zero_dtype dt, zero_op op, const void *const *src, int nsrc, void *dst, size_t n,
                                    int stream, zero_impl impl) {
    zero__reduce(dt, op == ZERO_OP_MAX, src, nsrc, dst, n, stream, impl);
}

#ifdef ZERO_HAVE_MPI
#include <mpi.h>

/* The MPI datatype and op the mpi backend uses for (dt, op); op is SUM or MAX (comm_mpi.c). */
MPI_Datatype zero__comm_mpi_type(zero_dtype dt);
MPI_Op zero__comm_mpi_op(zero_dtype dt, zero_op op);

/* Shared-memory collectives of the mpi backend (comm_shm*.c, one file per job; shm_impl.h;
 * docs/COMM.md). */
typedef struct zero__shm zero__shm;

/* Collective over `comm` (rank/size of this process in it). Takes rank 0's options (each field
 * left ZERO_COMM_FROM_ENV read from its ZERO_COMM_* variable as rank 0 sees it), and probes the
 * single-copy path. *out = NULL (and ZERO_OK) when the window cannot help: turned off, no two
 * ranks share a node, or nodes of unequal sizes. Errors go to e, prefixed with fn. The window
 * itself is allocated by the first collective that uses it. */
zero_status zero__shm_create(MPI_Comm comm, int rank, int size, const zero__cerr *e, const zero_comm_options *opts,
                             const char *fn, zero__shm **out);
/* NULL is a no-op; with mpi_alive == 0 (after MPI_Finalize) only the memory is released. */
void zero__shm_destroy(zero__shm *s, int mpi_alive);
/* Whether a collective of `bytes` bytes (the ring rule's message size) goes through the window:
 * the same answer on every rank for the same call. */
int zero__shm_wants(const zero__shm *s, uint64_t bytes);
int zero__shm_nodes(const zero__shm *s);      /* 0 for NULL */
int zero__shm_local_size(const zero__shm *s); /* ranks per node; 0 for NULL */
int zero__shm_local_rank(const zero__shm *s);  /* this rank's place in its node; 0 for NULL */
int zero__shm_attached(const zero__shm *s);   /* the window exists (a collective used it) */
/* Large messages take the single-copy path (process_vm_readv): allowed (ZERO_COMM_CMA) and the
 * probe at creation passed on every rank; 0 for NULL. */
int zero__shm_cma(const zero__shm *s);
/* comm_beat.c: collective over comm (c's MPI communicator): finds c's node peers, maps their
 * heartbeat pages and hands them to the watchdog (c->beat); when comm spans several nodes, also
 * the UDP addresses of the ranks of other nodes within ZERO__BEAT_REMOTE_SPAN. A peer whose page
 * cannot be mapped (another pid namespace, /proc hidden) is not watched; an MPI failure, or no
 * memory for the exchange across nodes, is returned. */
zero_status zero__beat_join(zero_comm *c, MPI_Comm comm, const zero__cerr *e, const char *fn);
/* The shared-memory state of an mpi communicator (NULL: none, or not an mpi communicator). */
const zero__shm *zero__comm_mpi_shm(const zero_comm *c);

/* A collective through the window (and MPI between nodes), arguments already checked by comm.c
 * and op already SUM or MAX; the rules of comm.h (in place, block layout) hold. It runs on the
 * calling thread (zero__shm_run) or, non-blocking, as a job on the progress thread
 * (docs/COMM.md, "Non-blocking calls and the progress thread"): with ZERO_COMM_ASYNC on and one
 * node, the job is posted and run, in posting order, by a thread of this process while the
 * caller goes on; its request completes when the job has run. Only this rank's own work moves
 * to the thread: the protocol between the ranks is the same, so ranks may differ in the
 * setting. */
typedef enum { ZERO__SHM_ALL_REDUCE, ZERO__SHM_REDUCE_SCATTER, ZERO__SHM_ALL_GATHER } zero__shm_kind;
/* The call's name for messages: "all_reduce", "reduce_scatter", "all_gather". */
static inline const char *zero__shm_kind_name(zero__shm_kind k) {
    return k == ZERO__SHM_ALL_REDUCE ? "all_reduce" : k == ZERO__SHM_REDUCE_SCATTER ? "reduce_scatter" : "all_gather";
}
typedef struct zero__shm_job {
    struct zero__shm_job *next; /* the thread's queue */
    zero__shm_kind kind;
    const void *send;
    void *recv;
    size_t count;
    zero_dtype dt;
    zero_op op;
    size_t qblock;      /* reduce-scatter: 0 exact; else qgZ's int8 blocks for the cross-node step */
    int done;           /* under the thread's lock */
    zero_status status; /* once done */
    char err[320];      /* once done with an error */
} zero__shm_job;
/* Runs j on the calling thread and returns when it is done. It first waits for the jobs this
 * rank posted to the progress thread, so that every rank runs its collectives in the order it
 * called them. Only the kind and the arguments of j are read. */
zero_status zero__shm_run(zero_comm *c, zero__shm *s, const zero__shm_job *j);
/* Whether non-blocking collectives of s run on the progress thread. */
int zero__shm_async(const zero__shm *s);
/* Test hook, before the first job: mode 0 off, 1 on, 2 on but as if the thread could not be
 * started (jobs then run at issue); on only with one node. */
void zero__shm_set_async(zero__shm *s, int mode);
/* Posts j (kept by the caller, unmoved, until zero__shm_job_wait or a test that saw it done);
 * when the thread cannot be started the job runs here, and is done on return. */
zero_status zero__shm_post(zero_comm *c, zero__shm *s, zero__shm_job *j);
/* Waits until j has run; its error text, if any, goes to c's last error. */
zero_status zero__shm_job_wait(zero_comm *c, zero__shm *s, zero__shm_job *j);
/* Whether j has run (then as zero__shm_job_wait, which no longer blocks). */
int zero__shm_job_done(zero__shm *s, zero__shm_job *j);
/* Overlap across nodes (docs/COMM.md, "Non-blocking calls across nodes"): with several nodes, no
 * progress thread and cross_overlap on, a non-blocking reduce-scatter (exact) or all-gather of at
 * most ZERO__SHM_DEFER_MAX bytes a rank posts its cross-node step as a non-blocking MPI call
 * between the rank's peers of the other nodes, into a buffer of its own (the nodes' blocks of
 * this local rank), and returns: a reduce-scatter after its node step, an all-gather before it
 * (its node step runs when it completes). The step moves while the caller computes, in every
 * MPI call (zero_comm_progress). The node steps keep the order of the calls on every rank: an
 * all-gather's runs when it, or any later call through the window, is completed or issued, the
 * earlier ones first. */
typedef struct zero__shm_defer zero__shm_defer;
/* Whether j (a request's job) is posted that way. */
int zero__shm_defers(const zero__shm *s, const zero__shm_job *j);
zero_status zero__shm_defer_start(zero_comm *c, zero__shm *s, const zero__shm_job *j, zero__shm_defer **out);
/* Completes d (and the all-gathers posted before it) and frees it. */
zero_status zero__shm_defer_wait(zero_comm *c, zero__shm *s, zero__shm_defer *d);
/* *done 0 while d's cross-node step (or an earlier all-gather's) moves; else as the wait. */
zero_status zero__shm_defer_test(zero_comm *c, zero__shm *s, zero__shm_defer *d, int *done);
/* Runs the node steps of every all-gather still pending: the mpi backend does it first in every
 * call on the communicator (comm_mpi.c, drain), so no later node step comes before them. */
void zero__shm_drain_deferred(zero_comm *c, zero__shm *s);
/* How many calls of s were posted so (tests). */
uint64_t zero__shm_deferred_calls(const zero__shm *s);
#endif

/* comm_device.c: a device collective's request to its end — its host collective waited for
 * (block) or tested (*done 0 while it runs), then the result copied to the device. r stays the
 * caller's to free. */
zero_status zero__dev_req_finish(zero_request *r, int block, int *done);
/* comm_device.c: the staging chunk of the device collectives (a test makes it small). */
extern size_t zero__comm_dev_chunk_bytes;

#endif
