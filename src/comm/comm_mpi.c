/* The `mpi` backend: collectives on a duplicate of the caller's MPI communicator, with errors
 * returned (MPI_ERRORS_RETURN) and turned into ZERO_ERR_COMM; half types reduce via user ops.
 * Large reductions and gathers among ranks sharing a node go through comm_shm*.c ("mpi+shm"). */
#include "comm/internal.h"
#include "zero/quant.h"

#include <limits.h>
#include <mpi.h>
#include <string.h>

typedef struct mpi_ctx {
    MPI_Comm comm; /* our duplicate: our errhandler, our message space */
    zero__shm *shm; /* shared-memory collectives; NULL when they cannot help */
    zero_comm_options opts; /* what it was created with: a split inherits them */
} mpi_ctx;

/* What a non-blocking call leaves in zero_request.impl. */
typedef struct mpi_req {
    MPI_Request r;
    /* A shared-memory collective on the progress thread (MPI_REQUEST_NULL above), or none. */
    zero__shm *shm;
    zero__shm_job job;
    /* ... or one whose cross-node step is deferred (zero__shm_defer_start; shm set too) */
    zero__shm_defer *defer;
    /* In-place reduce_scatter: MPI leaves the block at the start of the buffer; comm.h wants it
     * at rank*count, so it is moved there once complete. */
    void *move_dst;
    const void *move_src;
    size_t move_bytes;
    /* qgZ on plain MPI (mpi_reduce_scatter_q8): the all-to-all's buffers, summed into recv once
     * it is complete (q8_finish); qr NULL: none */
    unsigned char *qs, *qr;
    const void *q_own;
    void *q_recv;
    size_t q_count, q_block;
    zero_dtype q_dt;
} mpi_req;
_Static_assert(sizeof(mpi_req) <= ZERO__REQ_IMPL_BYTES, "mpi_req fits in zero_request.impl");

static const zero__comm_ops mpi_ops, mpi_shm_ops;

/* Process-wide state, touched only by the thread that drives MPI (MPI_THREAD_FUNNELED). */
static int g_live;            /* mpi communicators zero created and has not freed */
static int g_we_initialized;  /* zero called MPI_Init_thread, so zero finalizes */

/* User-defined ops (commutative, as the non-blocking reductions require), created with the first
 * communicator and freed with the last. */
enum { OP_F32_MAX, OP_BF16_SUM, OP_BF16_MAX, OP_FP16_SUM, OP_FP16_MAX, OP_U8_SUM, OP_COUNT };
static MPI_Op g_ops[OP_COUNT];
static int g_ops_ready;

#define ZERO__MPI_USER_OP(fname, dt, op)                                                           \
    static void fname(void *in, void *inout, int *len, MPI_Datatype *type) {                      \
        (void)type;                                                                                \
        zero__comm_reduce(dt, op, in, inout, (size_t)*len);                                       \
    }
ZERO__MPI_USER_OP(op_f32_max, ZERO_DTYPE_FP32, ZERO_OP_MAX)
ZERO__MPI_USER_OP(op_bf16_sum, ZERO_DTYPE_BF16, ZERO_OP_SUM)
ZERO__MPI_USER_OP(op_bf16_max, ZERO_DTYPE_BF16, ZERO_OP_MAX)
ZERO__MPI_USER_OP(op_fp16_sum, ZERO_DTYPE_FP16, ZERO_OP_SUM)
ZERO__MPI_USER_OP(op_fp16_max, ZERO_DTYPE_FP16, ZERO_OP_MAX)
/* OpenMPI 4.1's MPI_SUM on MPI_UINT8_T saturates at 255 (its AVX op component adds with
 * saturation); comm.h promises sums that wrap, so uint8 sums take a user op. */
ZERO__MPI_USER_OP(op_u8_sum, ZERO_DTYPE_UINT8, ZERO_OP_SUM)

static void free_ops(void) {
    if (!g_ops_ready) return;
    for (int i = 0; i < OP_COUNT; i++)
        if (g_ops[i] != MPI_OP_NULL) MPI_Op_free(&g_ops[i]);
    g_ops_ready = 0;
}

static int create_ops(void) {
    static MPI_User_function *const fns[OP_COUNT] = {op_f32_max, op_bf16_sum, op_bf16_max,
                                                     op_fp16_sum, op_fp16_max, op_u8_sum};
    for (int i = 0; i < OP_COUNT; i++) g_ops[i] = MPI_OP_NULL;
    g_ops_ready = 1;
    for (int i = 0; i < OP_COUNT; i++) {
        int rc = MPI_Op_create(fns[i], 1, &g_ops[i]);
        if (rc != MPI_SUCCESS) {
            free_ops();
            return rc;
        }
    }
    return MPI_SUCCESS;
}

zero_status zero__comm_mpi_error(zero_comm *c, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
    msg[len < 0 ? 0 : (len > MPI_MAX_ERROR_STRING ? MPI_MAX_ERROR_STRING : len)] = '\0';
    const zero__cerr e = {c, NULL};
    zero__cerr_set(&e, "%s: %s (MPI error %d)", what, len > 0 ? msg : "unknown MPI error", rc);
    return ZERO_ERR_COMM;
}

zero_status zero__cerr_mpi(const zero__cerr *e, int rc, const char *what) {
    char msg[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) len = 0;
    msg[len < 0 ? 0 : (len > MPI_MAX_ERROR_STRING ? MPI_MAX_ERROR_STRING : len)] = '\0';
    zero__cerr_set(e, "%s: %s (MPI error %d)", what, len > 0 ? msg : "unknown MPI error", rc);
    return ZERO_ERR_COMM;
}

static MPI_Comm comm_of(const zero_comm *c) { return ((const mpi_ctx *)c->impl)->comm; }

/* Half types travel as 16-bit words; only the user ops look inside them. */
MPI_Datatype zero__comm_mpi_type(zero_dtype dt) {
    switch (dt) {
    case ZERO_DTYPE_FP32: return MPI_FLOAT;
    case ZERO_DTYPE_BF16:
    case ZERO_DTYPE_FP16: return MPI_UINT16_T;
    case ZERO_DTYPE_INT32: return MPI_INT32_T;
    case ZERO_DTYPE_INT64: return MPI_INT64_T;
    case ZERO_DTYPE_UINT8: return MPI_UINT8_T;
    case ZERO_DTYPE_COUNT: break;
    }
    return MPI_DATATYPE_NULL;
}

/* op is SUM or MAX here (no ZERO__CAP_AVG: comm.c turns AVG into SUM and divides). */
MPI_Op zero__comm_mpi_op(zero_dtype dt, zero_op op) {
    int max = op == ZERO_OP_MAX;
    switch (dt) {
    case ZERO_DTYPE_FP32: return max ? g_ops[OP_F32_MAX] : MPI_SUM;
    case ZERO_DTYPE_BF16: return g_ops[max ? OP_BF16_MAX : OP_BF16_SUM];
    case ZERO_DTYPE_FP16: return g_ops[max ? OP_FP16_MAX : OP_FP16_SUM];
    case ZERO_DTYPE_UINT8: return max ? MPI_MAX : g_ops[OP_U8_SUM];
    default: return max ? MPI_MAX : MPI_SUM;
    }
}

const zero__shm *zero__comm_mpi_shm(const zero_comm *c) {
    return c && (c->ops == &mpi_ops || c->ops == &mpi_shm_ops) ? ((const mpi_ctx *)c->impl)->shm : NULL;
}

static MPI_Datatype mpi_type(zero_dtype dt) { return zero__comm_mpi_type(dt); }
static MPI_Op mpi_op(zero_dtype dt, zero_op op) { return zero__comm_mpi_op(dt, op); }

static mpi_req *req_of(zero_request *req) { return (mpi_req *)(void *)req->impl.bytes; }

/* Before any call on c: the node steps of the all-gathers whose cross-node step was deferred
 * and is still pending run first, so that every rank runs them at the same point of its calls
 * (the same program point on every rank: docs/COMM.md, "Non-blocking calls across nodes"). */
static void drain(zero_comm *c) {
    zero__shm *s = ((mpi_ctx *)c->impl)->shm;
    if (s) zero__shm_drain_deferred(c, s);
}

/* The window's path for a message of `bytes` (the ring rule's size), or NULL for plain MPI. */
static zero__shm *shm_for(const zero_comm *c, uint64_t bytes) {
    zero__shm *s = ((const mpi_ctx *)c->impl)->shm;
    return zero__shm_wants(s, bytes) ? s : NULL;
}

/* A shared-memory collective: blocking, or non-blocking and over when it returns (its request
 * holds no MPI request and its wait/test find it complete), unless the progress thread takes
 * it (docs/COMM.md, "Shared memory" and "Progress thread"): then its request holds the job. */
static zero_status shm_call(zero_comm *c, zero__shm *shm, zero__shm_job j, zero_request *req) {
    if (req) {
        mpi_req *m = req_of(req);
        m->r = MPI_REQUEST_NULL;
        m->move_bytes = 0;
        m->shm = NULL;
        m->defer = NULL;
        if (zero__shm_async(shm)) {
            m->shm = shm;
            m->job = j;
            return zero__shm_post(c, shm, &m->job);
        }
        if (zero__shm_defers(shm, &j)) {
            zero_status st = zero__shm_defer_start(c, shm, &j, &m->defer);
            if (m->defer) m->shm = shm;
            return st;
        }
    }
    return zero__shm_run(c, shm, &j);
}

/* The path counters (comm.h, zero_comm_path) of a call moving a full message of `bytes` bytes:
 * on plain MPI, the ring rule over every rank; through the window, the node step over the L
 * ranks of the node and, with K > 1 nodes, the cross-node step over the K nodes on this rank's
 * share: an all-reduce's part of the vector (count elements in L balanced parts, docs/COMM.md),
 * a reduce-scatter's or all-gather's blocks of this local rank on every node (bytes / L). */
static void count_path(zero_comm *c, const zero__shm *shm, zero_coll k, uint64_t bytes, size_t count, size_t es) {
    uint64_t *pb = c->counters.path_bytes;
    if (!shm) {
        pb[ZERO_COMM_PATH_MPI] += zero_comm_ring_bytes(k, bytes, c->size);
        return;
    }
    const int L = zero__shm_local_size(shm), K = zero__shm_nodes(shm), t = zero__shm_local_rank(shm);
    pb[ZERO_COMM_PATH_SHM] += zero_comm_ring_bytes(k, bytes, L);
    uint64_t share = bytes / (uint64_t)L;
    if (k == ZERO_COLL_ALL_REDUCE)
        share = (uint64_t)(count * (size_t)(t + 1) / (size_t)L - count * (size_t)t / (size_t)L) * es;
    pb[ZERO_COMM_PATH_CROSS_NODE] += zero_comm_ring_bytes(k, share, K);
}

static zero__shm_job shm_job(zero__shm_kind kind, const void *send, void *recv, size_t count, zero_dtype dt,
                             zero_op op) {
    zero__shm_job j;
    memset(&j, 0, sizeof j);
    j.kind = kind;
    j.send = send;
    j.recv = recv;
    j.count = count;
    j.dt = dt;
    j.op = op;
    return j;
}

static zero_status mpi_all_reduce(zero_comm *c, const void *send, void *recv, size_t count,
                                  zero_dtype dt, zero_op op, zero_request *req) {
    drain(c);
    zero__shm *shm = shm_for(c, (uint64_t)count * zero_dtype_size(dt));
    count_path(c, shm, ZERO_COLL_ALL_REDUCE, (uint64_t)count * zero_dtype_size(dt), count, zero_dtype_size(dt));
    if (shm) return shm_call(c, shm, shm_job(ZERO__SHM_ALL_REDUCE, send, recv, count, dt, op), req);
    const void *sb = send == recv ? MPI_IN_PLACE : send;
    int rc;
    if (req) {
        mpi_req *m = req_of(req);
        rc = MPI_Iallreduce(sb, recv, (int)count, mpi_type(dt), mpi_op(dt, op), comm_of(c), &m->r);
        if (rc != MPI_SUCCESS) return zero__comm_mpi_error(c, rc, "iall_reduce: MPI_Iallreduce");
    } else {
        rc = MPI_Allreduce(sb, recv, (int)count, mpi_type(dt), mpi_op(dt, op), comm_of(c));
        if (rc != MPI_SUCCESS) return zero__comm_mpi_error(c, rc, "all_reduce: MPI_Allreduce");
    }
    return ZERO_OK;
}

static zero_status mpi_reduce_scatter(zero_comm *c, const void *send, void *recv, size_t count,
                                      zero_dtype dt, zero_op op, zero_request *req) {
    drain(c);
    size_t bytes = count * zero_dtype_size(dt);
    zero__shm *shm = shm_for(c, (uint64_t)bytes * (uint64_t)c->size);
    count_path(c, shm, ZERO_COLL_REDUCE_SCATTER, (uint64_t)bytes * (uint64_t)c->size, count, zero_dtype_size(dt));
    if (shm) return shm_call(c, shm, shm_job(ZERO__SHM_REDUCE_SCATTER, send, recv, count, dt, op), req);
    int inplace = (const char *)recv == (const char *)send + (size_t)c->rank * bytes;
    /* In place, MPI reads the whole buffer and writes our block at its start. */
    const void *sb = inplace ? MPI_IN_PLACE : send;
    void *rb = inplace ? (void *)send : recv;
    int move = inplace && recv != send && bytes > 0;
    int rc;
    if (req) {
        mpi_req *m = req_of(req);
        rc = MPI_Ireduce_scatter_block(sb, rb, (int)count, mpi_type(dt), mpi_op(dt, op), comm_of(c),
                                       &m->r);
        if (rc != MPI_SUCCESS)
            return zero__comm_mpi_error(c, rc, "ireduce_scatter: MPI_Ireduce_scatter_block");
        if (move) {
            m->move_dst = recv;
            m->move_src = send;
            m->move_bytes = bytes;
        }
    } else {
        rc = MPI_Reduce_scatter_block(sb, rb, (int)count, mpi_type(dt), mpi_op(dt, op), comm_of(c));
        if (rc != MPI_SUCCESS)
            return zero__comm_mpi_error(c, rc, "reduce_scatter: MPI_Reduce_scatter_block");
        if (move) memmove(recv, send, bytes);
    }
    return ZERO_OK;
}

static zero_status mpi_all_gather(zero_comm *c, const void *send, void *recv, size_t count,
                                  zero_dtype dt, zero_request *req) {
    drain(c);
    size_t bytes = count * zero_dtype_size(dt);
    zero__shm *shm = shm_for(c, (uint64_t)bytes * (uint64_t)c->size);
    count_path(c, shm, ZERO_COLL_ALL_GATHER, (uint64_t)bytes * (uint64_t)c->size, count, zero_dtype_size(dt));
    if (shm) return shm_call(c, shm, shm_job(ZERO__SHM_ALL_GATHER, send, recv, count, dt, ZERO_OP_SUM), req);
    int inplace = (const char *)send == (const char *)recv + (size_t)c->rank * bytes;
    const void *sb = inplace ? MPI_IN_PLACE : send;
    MPI_Datatype t = mpi_type(dt);
    int rc;
    if (req) {
        rc = MPI_Iallgather(sb, (int)count, t, recv, (int)count, t, comm_of(c), &req_of(req)->r);
        if (rc != MPI_SUCCESS) return zero__comm_mpi_error(c, rc, "iall_gather: MPI_Iallgather");
    } else {
        rc = MPI_Allgather(sb, (int)count, t, recv, (int)count, t, comm_of(c));
        if (rc != MPI_SUCCESS) return zero__comm_mpi_error(c, rc, "all_gather: MPI_Allgather");
    }
    return ZERO_OK;
}

/* The call counters of a q8 reduce-scatter whose full message is `bytes` as it goes (comm.c leaves
 * them to the backend, which knows whether it quantizes). */
static void count_call_q8(zero_comm *c, uint64_t bytes) {
    c->counters.calls[ZERO_COLL_REDUCE_SCATTER]++;
    c->counters.bytes[ZERO_COLL_REDUCE_SCATTER] += zero_comm_ring_bytes(ZERO_COLL_REDUCE_SCATTER, bytes, c->size);
}

/* qgZ (zero_comm_ireduce_scatter_q8). Every rank on one node (the shared-memory collectives' node
 * split): the exact reduce-scatter. Through the window across nodes: the exact node step, the
 * cross-node step quantized (comm_shm_coll.c). On plain MPI (the split unknown: the shared-memory
 * collectives off): every other rank's block coded as an int8 message, an
 * all-to-all of the messages, and the sum of what arrived with this rank's own block as it is
 * (q8_finish: at once, or at the request's completion). */
static zero_status q8_finish(zero_comm *c, mpi_req *m) {
    if (!m->qr) return ZERO_OK;
    zero_status s = zero__comm_q8_sum(m->qr, c->size, c->rank, m->q_own, m->q_count, m->q_dt, m->q_block, m->q_recv);
    zero_mem_free(NULL, m->qs);
    zero_mem_free(NULL, m->qr);
    m->qs = m->qr = NULL;
    if (s != ZERO_OK) ZERO__COMM_ERR(c, "reduce_scatter_q8: out of memory for the fp32 sums of %zu elements", m->q_count);
    return s;
}

static zero_status mpi_reduce_scatter_q8(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                                         size_t block, zero_request *req) {
    drain(c);
    const size_t es = zero_dtype_size(dt), n = (size_t)c->size;
    const uint64_t bytes = (uint64_t)count * es * n, R = zero_quant_msg_bytes(count, block);
    const zero__shm *node = ((const mpi_ctx *)c->impl)->shm;
    if (node && zero__shm_nodes(node) == 1) { /* every rank on this node: nothing crosses, the exact sums */
        count_call_q8(c, bytes);
        return mpi_reduce_scatter(c, send, recv, count, dt, ZERO_OP_SUM, req);
    }
    count_call_q8(c, R * n);
    zero__shm *shm = shm_for(c, bytes);
    if (shm) {
        const zero__shm *sh = shm;
        const int K = zero__shm_nodes(sh), L = zero__shm_local_size(sh);
        uint64_t *pb = c->counters.path_bytes;
        pb[ZERO_COMM_PATH_SHM] += zero_comm_ring_bytes(ZERO_COLL_REDUCE_SCATTER, bytes, L);
        pb[ZERO_COMM_PATH_CROSS_NODE] += zero_comm_ring_bytes(ZERO_COLL_REDUCE_SCATTER, (uint64_t)K * R, K);
        zero__shm_job j = shm_job(ZERO__SHM_REDUCE_SCATTER, send, recv, count, dt, ZERO_OP_SUM);
        j.qblock = block;
        return shm_call(c, shm, j, req);
    }
    count_path(c, NULL, ZERO_COLL_REDUCE_SCATTER, R * n, count, es);
    if (R > INT_MAX) {
        ZERO__COMM_ERR(c, "reduce_scatter_q8: messages of %llu bytes: MPI counts are int; split the buffer",
                       (unsigned long long)R);
        return ZERO_ERR_INVALID_ARG;
    }
    mpi_req local, *m = req ? req_of(req) : &local;
    memset(m, 0, sizeof *m);
    m->r = MPI_REQUEST_NULL;
    m->qs = zero_mem_calloc(NULL, ZERO_MEM_COMM, (size_t)(R * n));
    m->qr = zero_mem_alloc(NULL, ZERO_MEM_COMM, (size_t)(R * n));
    m->q_own = (const char *)send + (size_t)c->rank * count * es;
    m->q_recv = recv;
    m->q_count = count;
    m->q_block = block;
    m->q_dt = dt;
    zero_status s = m->qs && m->qr ? ZERO_OK : ZERO_ERR_NOMEM;
    if (s != ZERO_OK) ZERO__COMM_ERR(c, "reduce_scatter_q8: out of memory for %llu bytes of messages", (unsigned long long)(2 * R * n));
    if (s == ZERO_OK && (s = zero__comm_q8_encode(send, (int)n, c->rank, count, dt, block, m->qs)) != ZERO_OK)
        ZERO__COMM_ERR(c, "reduce_scatter_q8: coding the messages: %s", zero_status_string(s));
    if (s == ZERO_OK) {
        const int rc = req ? MPI_Ialltoall(m->qs, (int)R, MPI_BYTE, m->qr, (int)R, MPI_BYTE, comm_of(c), &m->r)
                           : MPI_Alltoall(m->qs, (int)R, MPI_BYTE, m->qr, (int)R, MPI_BYTE, comm_of(c));
        if (rc != MPI_SUCCESS) s = zero__comm_mpi_error(c, rc, req ? "ireduce_scatter_q8: MPI_Ialltoall" : "reduce_scatter_q8: MPI_Alltoall");
    }
    if (s != ZERO_OK) {
        zero_mem_free(NULL, m->qs);
        zero_mem_free(NULL, m->qr);
        m->qs = m->qr = NULL;
        return s;
    }
    return req ? ZERO_OK : q8_finish(c, m);
}

static zero_status mpi_broadcast(zero_comm *c, void *buf, size_t count, zero_dtype dt, int root) {
    drain(c);
    count_path(c, NULL, ZERO_COLL_BROADCAST, (uint64_t)count * zero_dtype_size(dt), count, zero_dtype_size(dt));
    int rc = MPI_Bcast(buf, (int)count, mpi_type(dt), root, comm_of(c));
    return rc == MPI_SUCCESS ? ZERO_OK : zero__comm_mpi_error(c, rc, "broadcast: MPI_Bcast");
}

static zero_status mpi_barrier(zero_comm *c) {
    drain(c);
    int rc = MPI_Barrier(comm_of(c));
    return rc == MPI_SUCCESS ? ZERO_OK : zero__comm_mpi_error(c, rc, "barrier: MPI_Barrier");
}

static void finish_move(mpi_req *m) {
    if (m->move_bytes) memmove(m->move_dst, m->move_src, m->move_bytes);
}

static zero_status mpi_wait(zero_request *req) {
    mpi_req *m = req_of(req);
    if (m->defer) {
        zero__shm_defer *d = m->defer;
        m->defer = NULL;
        return zero__shm_defer_wait(req->comm, m->shm, d);
    }
    if (m->shm) return zero__shm_job_wait(req->comm, m->shm, &m->job);
    int rc = MPI_Wait(&m->r, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        zero_mem_free(NULL, m->qs);
        zero_mem_free(NULL, m->qr);
        m->qs = m->qr = NULL;
        return zero__comm_mpi_error(req->comm, rc, "request_wait: MPI_Wait");
    }
    finish_move(m);
    return q8_finish(req->comm, m);
}

static zero_status mpi_test(zero_request *req, int *done) {
    mpi_req *m = req_of(req);
    if (m->defer) {
        zero_status st = zero__shm_defer_test(req->comm, m->shm, m->defer, done);
        if (*done) m->defer = NULL;
        return st;
    }
    if (m->shm) {
        *done = zero__shm_job_done(m->shm, &m->job);
        return *done ? zero__shm_job_wait(req->comm, m->shm, &m->job) : ZERO_OK;
    }
    int flag = 0;
    int rc = MPI_Test(&m->r, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        zero_mem_free(NULL, m->qs);
        zero_mem_free(NULL, m->qr);
        m->qs = m->qr = NULL;
        *done = 1;
        return zero__comm_mpi_error(req->comm, rc, "request_test: MPI_Test");
    }
    *done = flag;
    if (!flag) return ZERO_OK;
    finish_move(m);
    return q8_finish(req->comm, m);
}

/* One pass of MPI's progress engine: a probe that matches nothing advances every request in
 * flight (OpenMPI's point-to-point transfers and its non-blocking collectives' schedules move
 * only inside MPI calls over TCP) without completing any of them. */
static zero_status mpi_progress(zero_comm *c) {
    int flag = 0;
    int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_of(c), &flag, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? ZERO_OK : zero__comm_mpi_error(c, rc, "progress: MPI_Iprobe");
}

/* Called when a communicator goes away or fails to come up: the last one frees the ops, and
 * finalizes MPI if zero initialized it. */
static void release_process_state(void) {
    if (g_live > 0) return;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    free_ops();
    if (g_we_initialized) {
        g_we_initialized = 0;
        MPI_Finalize();
    }
}

static void mpi_destroy(zero_comm *c) {
    mpi_ctx *ctx = c->impl;
    if (!ctx) return;
    zero__beat_forget(c->beat); /* the peers' pages are ours to unmap, with or without MPI */
    c->beat = 0;
    int finalized = 0;
    MPI_Finalized(&finalized);
    /* After the program's own MPI_Finalize there is nothing left to free. */
    zero__shm_destroy(ctx->shm, !finalized);
    if (!finalized) MPI_Comm_free(&ctx->comm);
    zero_mem_free(NULL, ctx);
    c->impl = NULL;
    g_live--;
    release_process_state();
}


/* Wraps an MPI communicator that zero owns (a dup or a split result) into a zero_comm. On
 * failure the MPI communicator is freed and the error goes to e. */
static zero_status wrap(MPI_Comm comm, const zero__cerr *e, const zero_comm_options *opts, const char *fn,
                        zero_comm **out) {
    int rank = 0, size = 0, rc;
    zero_status s;
    mpi_ctx *ctx = NULL;
    zero_comm *c = NULL;
    if ((rc = MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN)) != MPI_SUCCESS) {
        s = zero__cerr_mpi(e, rc, fn);
        goto fail_comm;
    }
    if ((rc = MPI_Comm_rank(comm, &rank)) != MPI_SUCCESS ||
        (rc = MPI_Comm_size(comm, &size)) != MPI_SUCCESS) {
        s = zero__cerr_mpi(e, rc, fn);
        goto fail_comm;
    }
    if (!(ctx = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof *ctx))) {
        zero__cerr_set(e, "%s: out of memory for a communicator", fn);
        s = ZERO_ERR_NOMEM;
        goto fail_alloc;
    }
    ctx->opts = *opts;
    if ((s = zero__shm_create(comm, rank, size, e, opts, fn, &ctx->shm))) goto fail_alloc;
    if (!(c = zero__comm_new(ctx->shm ? &mpi_shm_ops : &mpi_ops, rank, size))) {
        zero__cerr_set(e, "%s: out of memory for a communicator", fn);
        s = ZERO_ERR_NOMEM;
        goto fail_shm;
    }
    ctx->comm = comm;
    c->impl = ctx;
    if ((s = zero__comm_watch_settings(opts, e, fn, &c->timeout_ns, &c->heartbeat_ns)) ||
        (s = zero__beat_join(c, comm, e, fn))) {
        zero__comm_delete(c);
        goto fail_shm;
    }
    g_live++;
    *out = c;
    return ZERO_OK;

fail_shm:
    zero__shm_destroy(ctx->shm, 1);
fail_alloc:
    zero_mem_free(NULL, ctx);
fail_comm:
    MPI_Comm_free(&comm);
    return s;
}

static zero_status mpi_split(zero_comm *c, int color, int key, zero_comm **out) {
    drain(c);
    MPI_Comm sub = MPI_COMM_NULL;
    int rc = MPI_Comm_split(comm_of(c), color < 0 ? MPI_UNDEFINED : color, key, &sub);
    if (rc != MPI_SUCCESS) return zero__comm_mpi_error(c, rc, "split: MPI_Comm_split");
    if (sub == MPI_COMM_NULL) return ZERO_OK;
    const zero__cerr e = {c, NULL};
    return wrap(sub, &e, &((const mpi_ctx *)c->impl)->opts, "split", out);
}

/* Two tables that differ only in the name, so that zero_comm_backend says whether large
 * messages between ranks of a node take the shared-memory path; the functions look at ctx->shm. */
static const zero__comm_ops mpi_ops = {
    .name = "mpi",
    .max_count = INT_MAX, /* MPI counts are int; larger buffers take several calls */
    .caps = 0,
    .all_reduce = mpi_all_reduce,
    .reduce_scatter = mpi_reduce_scatter,
    .all_gather = mpi_all_gather,
    .reduce_scatter_q8 = mpi_reduce_scatter_q8,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .split = mpi_split,
    .wait = mpi_wait,
    .test = mpi_test,
    .progress = mpi_progress,
    .destroy = mpi_destroy,
};

static const zero__comm_ops mpi_shm_ops = {
    .name = "mpi+shm",
    .max_count = INT_MAX, /* MPI counts are int; larger buffers take several calls */
    .caps = 0,
    .all_reduce = mpi_all_reduce,
    .reduce_scatter = mpi_reduce_scatter,
    .all_gather = mpi_all_gather,
    .reduce_scatter_q8 = mpi_reduce_scatter_q8,
    .broadcast = mpi_broadcast,
    .barrier = mpi_barrier,
    .split = mpi_split,
    .wait = mpi_wait,
    .test = mpi_test,
    .progress = mpi_progress,
    .destroy = mpi_destroy,
};

zero_status zero_comm_init_mpi_with(zero_comm **out, const void *mpi_comm, const zero_comm_options *opts,
                                    zero_error *err) {
    const zero__cerr e = {NULL, err};
    zero_comm_options dflt;
    zero_comm_options_default(&dflt);
    if (!opts) opts = &dflt;
    if (!out) {
        zero__cerr_set(&e, "init_mpi: out is NULL: expected a pointer to receive the communicator");
        return ZERO_ERR_INVALID_ARG;
    }
    *out = NULL;
    int initialized = 0, finalized = 0, rc;
    MPI_Finalized(&finalized);
    if (finalized) {
        zero__cerr_set(&e, "init_mpi: MPI was already finalized in this process; it cannot be "
                               "initialized again (keep one zero communicator alive, or free it last)");
        return ZERO_ERR_STATE;
    }
    MPI_Initialized(&initialized);
    if (!initialized) {
        int provided = 0;
        if ((rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided)) != MPI_SUCCESS)
            return zero__cerr_mpi(&e, rc, "init_mpi: MPI_Init_thread");
        g_we_initialized = 1;
    }
    MPI_Comm base = mpi_comm ? *(const MPI_Comm *)mpi_comm : MPI_COMM_WORLD;
    MPI_Comm dup = MPI_COMM_NULL;
    zero_status s;
    if (base == MPI_COMM_NULL) {
        zero__cerr_set(&e, "init_mpi: the communicator is MPI_COMM_NULL: expected a valid one "
                               "(or NULL for MPI_COMM_WORLD)");
        s = ZERO_ERR_INVALID_ARG;
        goto fail;
    }
    if (!g_ops_ready && (rc = create_ops()) != MPI_SUCCESS) {
        s = zero__cerr_mpi(&e, rc, "init_mpi: MPI_Op_create");
        goto fail;
    }
    if ((rc = MPI_Comm_dup(base, &dup)) != MPI_SUCCESS) {
        s = zero__cerr_mpi(&e, rc, "init_mpi: MPI_Comm_dup");
        goto fail;
    }
    if ((s = wrap(dup, &e, opts, "init_mpi", out))) goto fail;
    return ZERO_OK;

fail:
    release_process_state();
    return s;
}
