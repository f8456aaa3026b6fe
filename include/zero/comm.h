/* zero/comm.h — the communicator: collectives between the ranks of a data-parallel group.
 * Backends: `self` (one rank, always built) and `mpi` (any number of processes and machines);
 * a GPU build adds `nccl` behind the same calls.
 *
 * Shape of every collective (NCCL's): (send, recv, count, dtype, [op,] comm). `count` is in
 * elements of `dtype`. All ranks must call the same collectives in the same order with the same
 * count, dtype and op. bf16/fp16 sums accumulate in fp32 (MPI has no half-precision sum) and
 * round once per reduction step (to nearest even): the order in which the backend combines ranks
 * is its own, so half sums of values whose partial sums are not exact may differ in the last bit
 * from a left-to-right sum. MAX compares half types as fp32; for every float type a NaN on any
 * rank gives NaN. AVG on integer dtypes is the integer sum divided by the number of ranks with C
 * division (truncates toward zero).
 *
 * Errors: a call returns ZERO_ERR_INVALID_ARG (nothing sent, nothing counted, the reason in
 * zero_comm_last_error) for a bad dtype, op or root, a NULL buffer with count > 0, buffers that
 * overlap without being exactly "in place", or a count over the backend's limit (mpi: INT_MAX
 * elements per call; it does not split larger calls: the caller makes several). Such checks
 * depend only on arguments every rank passes alike, so all ranks fail together instead of
 * hanging. A backend failure (an MPI error code) is ZERO_ERR_COMM with MPI's text. count == 0
 * is valid: a collective that moves nothing (every rank must still call it).
 * Threads: one thread at a time drives a communicator (MPI is initialized THREAD_FUNNELED).
 *
 * Traffic counters (zero_comm_counters): for each collective, the bytes *this rank* sends plus
 * the bytes it receives in the ring algorithm, whatever algorithm the backend really uses, so
 * figures are comparable across backends and with the ZeRO paper. With N ranks and a message of
 * M bytes (M = the full, N-block buffer for reduce-scatter and all-gather):
 *   all_reduce:     sent = recv = 2 (N-1)/N M   ->  counted 4 (N-1)/N M
 *   reduce_scatter: sent = recv =   (N-1)/N M   ->  counted 2 (N-1)/N M
 *   all_gather:     sent = recv =   (N-1)/N M   ->  counted 2 (N-1)/N M
 *   broadcast:      counted 2 (N-1)/N M (pipelined ring: scatter + all-gather)
 * ZeRO's "2Ψ per step" for stages 0-2 is therefore counted as 4 (N-1)/N Ψ bytes-of-dtype
 * (sent + received), and stage 3's "3Ψ" as 6 (N-1)/N Ψ. One rank counts 0.
 * The same rule is also kept per path (path_bytes, zero_comm_path): a call on plain MPI counts
 * its bytes above under MPI; a call through the shared-memory collectives counts its node step
 * (the ring rule over the L ranks of the node, on the whole message) under SHM and, with K > 1
 * nodes, its cross-node step (over the K nodes, on this rank's 1/L share) under CROSS_NODE. Per
 * call the two add up to the flat rule: 2(L-1)/L M + 2(K-1)/K M/L = 2(N-1)/N M.
 */
#ifndef ZERO_COMM_H
#define ZERO_COMM_H

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zero_comm zero_comm;
typedef struct zero_request zero_request;

typedef enum zero_op {
    ZERO_OP_SUM = 0,
    ZERO_OP_AVG = 1, /* sum divided by the number of ranks (in fp32 for half types) */
    ZERO_OP_MAX = 2,
} zero_op;

typedef enum zero_coll {
    ZERO_COLL_ALL_REDUCE = 0,
    ZERO_COLL_REDUCE_SCATTER = 1,
    ZERO_COLL_ALL_GATHER = 2,
    ZERO_COLL_BROADCAST = 3,
    ZERO_COLL_COUNT
} zero_coll;

const char *zero_coll_name(zero_coll c); /* "all_reduce", "reduce_scatter", ... */

/* The way a collective's bytes went (zero_comm_counters.path_bytes). */
typedef enum zero_comm_path {
    ZERO_COMM_PATH_MPI = 0,        /* MPI over the whole communicator: MPI picks each pair's transport */
    ZERO_COMM_PATH_SHM = 1,        /* the shared-memory collectives: inside a node */
    ZERO_COMM_PATH_CROSS_NODE = 2, /* MPI among one rank per node: between nodes only */
    ZERO_COMM_PATH_COUNT
} zero_comm_path;

const char *zero_comm_path_name(zero_comm_path p); /* "mpi", "shm", "cross_node" */

typedef struct zero_comm_counters {
    uint64_t bytes[ZERO_COLL_COUNT]; /* sent + received, ring rule above */
    uint64_t calls[ZERO_COLL_COUNT];
    uint64_t path_bytes[ZERO_COMM_PATH_COUNT]; /* the same rule, by the path taken (above) */
} zero_comm_counters;

/* What the ZERO_COMM_* environment variables set (docs/COMM.md), for a program that embeds the
 * library. zero_comm_options_default leaves every field "from the environment" (-1): the
 * variable's value where it is set, else the built-in default; a field set to another value
 * overrides its variable. Rank 0's options rule, as rank 0's variables do: every rank takes the
 * same path through every collective. A communicator from zero_comm_split keeps its parent's. */
#define ZERO_COMM_FROM_ENV (-1)
typedef struct zero_comm_options {
    int shm;                /* ZERO_COMM_SHM: 1 shared-memory collectives inside a node (default), 0 plain MPI */
    int64_t shm_min_bytes;  /* ZERO_COMM_SHM_MIN_BYTES: smallest message through the window (default 16 KiB) */
    int64_t shm_chunk;      /* ZERO_COMM_SHM_CHUNK: bytes of one staging buffer, a multiple of 64 (default 1 MiB) */
    int fake_nodes;         /* ZERO_COMM_FAKE_NODES: K fake nodes for tests (0: the real node split) */
    int fake_cyclic;        /*   1: ranks dealt to the fake nodes round-robin ("K:cyclic") */
    int cma;                /* ZERO_COMM_CMA: 1 single-copy reads where the system allows (default), 0 never */
    int64_t cma_min_bytes;  /* ZERO_COMM_CMA_MIN_BYTES: smallest message read by single copy (default 1 MiB) */
    int async;              /* ZERO_COMM_ASYNC: 0 off, 1 a progress thread, 2 auto (default) */
    int cross_overlap;      /* ZERO_COMM_CROSS_OVERLAP: 1 non-blocking reduce-scatters and all-gathers
                             * through the window across nodes post their cross-node MPI step and
                             * return (it moves while the caller computes, progressed by MPI calls;
                             * up to 64 MiB of buffers a communicator: docs/COMM.md); 0 (default)
                             * they complete at issue */
    int64_t timeout_s;      /* ZERO_COMM_TIMEOUT: seconds a collective (or a wait) may wait for the
                             * other ranks before this rank ends itself: one line naming the call
                             * and exit status 1 (default 1800, as DeepSpeed's; 0 never). Each
                             * rank's own: it changes no collective's path. */
    int64_t heartbeat_s;    /* ZERO_COMM_HEARTBEAT: seconds a collective (or a wait) may wait while
                             * a rank of this node shows no heartbeat (it is stopped: SIGSTOP, a
                             * debugger) before this rank ends itself, as above (default 60; 0
                             * never). A slow rank still beats and is waited for up to timeout_s.
                             * Each rank's own (docs/COMM.md, "Stopped ranks"). */
} zero_comm_options;

void zero_comm_options_default(zero_comm_options *o);

/* One rank, no MPI needed: collectives copy (or do nothing when in place). err (may be NULL)
 * gets the reason of a failure, as for every constructor (zero/common.h). */
zero_status zero_comm_init_self_with(zero_comm **out, zero_error *err);

/* MPI backend over `mpi_comm` (a pointer to an MPI_Comm; NULL means MPI_COMM_WORLD). The
 * communicator is duplicated, and set to MPI_ERRORS_RETURN. If MPI is not initialized, it is
 * initialized here (with MPI_THREAD_FUNNELED) and finalized by the zero_comm_free of the last
 * communicator that zero created. opts: NULL for zero_comm_options_default's; a value out of
 * range fails every rank with ZERO_ERR_INVALID_ARG naming the field (or its variable). Returns
 * ZERO_ERR_UNSUPPORTED in a build without MPI. err (may be NULL) gets the reason of a failure. */
zero_status zero_comm_init_mpi_with(zero_comm **out, const void *mpi_comm, const zero_comm_options *opts,
                                    zero_error *err);

/* The same with default options and no zero_error: the reason of a failure only goes to the log
 * callback (zero_comm_last_error(NULL) cannot hold it: there is no process-wide error text). */
zero_status zero_comm_init_self(zero_comm **out);
zero_status zero_comm_init_mpi(zero_comm **out, const void *mpi_comm);

/* True when this process was started by an MPI launcher (mpirun/mpiexec/srun) with > 1 ranks
 * or any launcher environment at all; the CLI uses it to choose a backend. */
int zero_comm_mpi_launched(void);

/* NULL is a no-op. Wait for every request of c first. */
void zero_comm_free(zero_comm *c);

int zero_comm_rank(const zero_comm *c);
int zero_comm_size(const zero_comm *c);
const char *zero_comm_backend(const zero_comm *c); /* "self", "mpi", "mpi+shm" (shared memory inside a node), later "nccl" */
/* 1 when this rank's non-blocking collectives inside the node run on a progress thread, beside
 * the caller's compute (ZERO_COMM_ASYNC, docs/COMM.md); else 0. */
int zero_comm_progress_thread(const zero_comm *c);
/* The text of c's last error ("no communicator" for NULL: an init's failure is in its zero_error). */
const char *zero_comm_last_error(const zero_comm *c);

/* recv[i] = op over ranks of send[i], i < count. In place when send == recv. */
zero_status zero_comm_all_reduce(zero_comm *c, const void *send, void *recv, size_t count,
                                 zero_dtype dt, zero_op op);
/* send has size*count elements; rank r receives in recv the reduction of block r (count
 * elements). In place when recv == (char*)send + r*count*dtype_size; then the other blocks of
 * send are left unspecified (scratch). */
zero_status zero_comm_reduce_scatter(zero_comm *c, const void *send, void *recv, size_t count,
                                     zero_dtype dt, zero_op op);
/* send has count elements; recv gets size*count, rank r's block at r*count. In place when
 * send == (char*)recv + r*count*dtype_size. */
zero_status zero_comm_all_gather(zero_comm *c, const void *send, void *recv, size_t count,
                                 zero_dtype dt);
/* The same three on device memory (zero/device.h): send and recv lie in memory of the stream's
 * device; the collective runs after what s has queued and returns when recv holds the result
 * (the stream synchronized). It is staged through pinned host memory in chunks (4 MiB), the copy
 * of the next chunk overlapping this communicator's host collective of the current one (its
 * non-blocking form: the results of zero_comm_iall_reduce etc., bit for bit), whose counters
 * count it as one such collective of the whole message. In place as the host forms. */
typedef struct zero_stream zero_stream;
zero_status zero_comm_all_reduce_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                        zero_dtype dt, zero_op op);
zero_status zero_comm_reduce_scatter_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                            zero_dtype dt, zero_op op);
zero_status zero_comm_all_gather_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                        zero_dtype dt);
/* Their non-blocking forms: the whole message is copied to pinned host memory at the call (after
 * what s has queued, waited for) and the host collective started there, in program order as every
 * collective of c; zero_request_wait (or a zero_request_test that sees it done) queues the copy of
 * the result to recv on s and returns without waiting for it: what is queued on s afterwards runs
 * after it, another stream or the host reads recv after an event recorded on s (or a sync). send
 * may change once the call returns. Pinned staging of the whole message (send's bytes and recv's)
 * is held meanwhile, and freed once the result's copy has run (zero_device_release_after).
 * count 0: *req NULL. */
zero_status zero_comm_iall_reduce_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                         zero_dtype dt, zero_op op, zero_request **req);
zero_status zero_comm_ireduce_scatter_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                             zero_dtype dt, zero_op op, zero_request **req);
zero_status zero_comm_iall_gather_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                         zero_dtype dt, zero_request **req);
/* buf on root is sent to every rank's buf. */
zero_status zero_comm_broadcast(zero_comm *c, void *buf, size_t count, zero_dtype dt, int root);
zero_status zero_comm_barrier(zero_comm *c);

/* Non-blocking forms: same rules; buffers must stay untouched until zero_request_wait returns.
 * *req is set to a request that must be waited (or tested to completion) exactly once. */
zero_status zero_comm_iall_reduce(zero_comm *c, const void *send, void *recv, size_t count,
                                  zero_dtype dt, zero_op op, zero_request **req);
zero_status zero_comm_ireduce_scatter(zero_comm *c, const void *send, void *recv, size_t count,
                                      zero_dtype dt, zero_op op, zero_request **req);
zero_status zero_comm_iall_gather(zero_comm *c, const void *send, void *recv, size_t count,
                                  zero_dtype dt, zero_request **req);

/* ZeRO++'s quantized reduce-scatter (qgZ, zero_optimization.zero_quantized_gradients): the
 * reduce-scatter (SUM) of zero_comm_ireduce_scatter in fp32, bf16 or fp16, whose steps over MPI
 * carry int8 messages (zero/quant.h: int8's linear map, an fp32 absmax per `block` elements of
 * each destination block, zero_quant_msg_bytes of them) exchanged all-to-all; each rank decodes
 * what it receives and sums in fp32 in rank (node) order, its own block as it is, then rounds once
 * to dt. With the shared-memory collectives on, where every rank is on one node nothing is
 * quantized (zero_comm_reduce_scatter's sums), and across nodes the node step sums exactly (in dt)
 * and only the cross-node step is quantized; with them off (the node split unknown) every block
 * goes as a message (docs/COMM.md, "Quantized reduce-scatter"). Not in place (send and recv must
 * not overlap). The counters count what was sent: the messages as a reduce_scatter of them (the
 * ring rule over size x zero_quant_msg_bytes(count, block)), or on one node the exact message.
 * block >= 1. */
zero_status zero_comm_ireduce_scatter_q8(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                                         size_t block, zero_request **req);
zero_status zero_comm_reduce_scatter_q8(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                                        size_t block);
/* On device memory, as the device forms above (staged in chunks of whole blocks, so that the
 * blocks are the host form's; the host form runs on each chunk). */
zero_status zero_comm_ireduce_scatter_q8_device(zero_comm *c, zero_stream *s, const void *send, void *recv,
                                                size_t count, zero_dtype dt, size_t block, zero_request **req);

/* Waits for and frees req (NULL is a no-op returning ZERO_OK). */
zero_status zero_request_wait(zero_request *req);
/* Sets *done; when done the request is freed and must not be used again. */
zero_status zero_request_test(zero_request *req, int *done);

/* Lets the bytes of the non-blocking collectives in flight move, completing none of them: one
 * pass of the backend's progress engine (MPI: OpenMPI over TCP advances non-blocking collectives
 * only inside MPI calls, so a rank that computes between posting and waiting would move them only
 * in the wait). Cheap (a probe); not collective; a no-op on the self backend. */
zero_status zero_comm_progress(zero_comm *c);

/* Splits into sub-communicators by color (ranks with equal color), ordered by key then rank.
 * Collective. Used for hybrid sharding and for the engine's control channel (same color for
 * all = a duplicate with its own counters). A negative color joins no group: *out = NULL.
 * The new communicator has the parent's backend, zeroed counters, and must be freed. */
zero_status zero_comm_split(zero_comm *c, int color, int key, zero_comm **out);

void zero_comm_get_counters(const zero_comm *c, zero_comm_counters *out);
void zero_comm_reset_counters(zero_comm *c);

/* Bytes the ring rule above counts for one call of collective `k` moving a full message of
 * `bytes` bytes among `nranks` ranks: floor(f (N-1) M / N) with f = 4 (all_reduce) or 2 (the
 * others); 0 when nranks <= 1 or k is invalid; saturates at UINT64_MAX. Calls that fail the
 * argument checks count nothing; every started call counts, blocking or not. */
uint64_t zero_comm_ring_bytes(zero_coll k, uint64_t bytes, int nranks);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_COMM_H */
