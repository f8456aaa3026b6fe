/* The public communicator API: argument checks, in-place rules, byte counters, request
 * bookkeeping, and the watchdog's slot around every call that waits (watchdog.c), shared by every
 * backend; the backends (comm_self.c, comm_mpi.c) only move data. */
#include "comm/internal.h"
#include "zero/quant.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *zero_coll_name(zero_coll c) {
    static const char *names[ZERO_COLL_COUNT] = {"all_reduce", "reduce_scatter", "all_gather",
                                                 "broadcast"};
    return (unsigned)c < ZERO_COLL_COUNT ? names[c] : "invalid";
}

const char *zero_comm_path_name(zero_comm_path p) {
    static const char *names[ZERO_COMM_PATH_COUNT] = {"mpi", "shm", "cross_node"};
    return (unsigned)p < ZERO_COMM_PATH_COUNT ? names[p] : "invalid";
}

/* floor(k (N-1) M / N), saturating at UINT64_MAX (only reachable for M >= 2^62). */
static uint64_t ring_scaled(uint64_t bytes, int nranks, unsigned k) {
    if (nranks <= 1) return 0;
    unsigned __int128 v = (unsigned __int128)bytes * k * (unsigned)(nranks - 1) / (unsigned)nranks;
    return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

uint64_t zero_comm_ring_bytes(zero_coll k, uint64_t bytes, int nranks) {
    switch (k) {
    case ZERO_COLL_ALL_REDUCE: return ring_scaled(bytes, nranks, 4);
    case ZERO_COLL_REDUCE_SCATTER:
    case ZERO_COLL_ALL_GATHER:
    case ZERO_COLL_BROADCAST: return ring_scaled(bytes, nranks, 2);
    case ZERO_COLL_COUNT: break;
    }
    return 0;
}

zero_comm *zero__comm_new(const zero__comm_ops *ops, int rank, int size) {
    zero_comm *c = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof *c);
    if (!c) return NULL;
    c->ops = ops;
    c->rank = rank;
    c->size = size;
    return c;
}

void zero__comm_delete(zero_comm *c) { zero_mem_free(NULL, c); }

void zero_comm_free(zero_comm *c) {
    if (!c) return;
    if (c->ops->destroy) c->ops->destroy(c);
    zero__comm_delete(c);
}

int zero_comm_mpi_launched(void) {
    /* OpenMPI's mpirun, MPICH/Intel hydra (PMI), PMIx launchers, Slurm's srun. */
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                                 "MPI_LOCALNRANKS", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return 1;
    }
    return 0;
}

void zero__cerr_set(const zero__cerr *e, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (e && e->parent) {
        ZERO__COMM_ERR(e->parent, "%s", buf);
        return;
    }
    /* the caller's sink, or the log for the constructors without one (zero/common.h): not both */
    if (e && e->err) ZERO__ERR(e->err, "%s", buf);
    else zero__log(ZERO_LOG_ERROR, "%s", buf);
}

void zero_comm_options_default(zero_comm_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->shm = o->fake_nodes = o->fake_cyclic = o->cma = o->async = o->cross_overlap = ZERO_COMM_FROM_ENV;
    o->shm_min_bytes = o->shm_chunk = o->cma_min_bytes = o->timeout_s = o->heartbeat_s = ZERO_COMM_FROM_ENV;
}

int zero_comm_rank(const zero_comm *c) { return c ? c->rank : -1; }
int zero_comm_size(const zero_comm *c) { return c ? c->size : 0; }
const char *zero_comm_backend(const zero_comm *c) { return c ? c->ops->name : "none"; }

int zero_comm_progress_thread(const zero_comm *c) {
#ifdef ZERO_HAVE_MPI
    return zero__shm_async(zero__comm_mpi_shm(c));
#else
    (void)c;
    return 0;
#endif
}
const char *zero_comm_last_error(const zero_comm *c) {
    return c ? c->err : "no communicator (the zero_error of zero_comm_init_*_with says why an init failed)";
}

void zero_comm_get_counters(const zero_comm *c, zero_comm_counters *out) {
    if (!out) return;
    if (c) *out = c->counters;
    else memset(out, 0, sizeof *out);
}

void zero_comm_reset_counters(zero_comm *c) {
    if (c) memset(&c->counters, 0, sizeof c->counters);
}

static void count_call(zero_comm *c, zero_coll k, uint64_t bytes) {
    c->counters.calls[k]++;
    c->counters.bytes[k] += zero_comm_ring_bytes(k, bytes, c->size);
}

/* ------------------------------------------------------------------ argument checks */

static zero_status check_dtype(zero_comm *c, const char *fn, zero_dtype dt) {
    if ((unsigned)dt < ZERO_DTYPE_COUNT && zero_dtype_size(dt) > 0) return ZERO_OK;
    ZERO__COMM_ERR(c, "%s: dtype %d: expected fp32, bf16, fp16, int32, int64 or uint8", fn, (int)dt);
    return ZERO_ERR_INVALID_ARG;
}

static zero_status check_op(zero_comm *c, const char *fn, zero_op op) {
    if (op == ZERO_OP_SUM || op == ZERO_OP_AVG || op == ZERO_OP_MAX) return ZERO_OK;
    ZERO__COMM_ERR(c, "%s: op %d: expected ZERO_OP_SUM (0), ZERO_OP_AVG (1) or ZERO_OP_MAX (2)", fn,
                   (int)op);
    return ZERO_ERR_INVALID_ARG;
}

static zero_status check_count(zero_comm *c, const char *fn, size_t count) {
    if (count <= c->ops->max_count) return ZERO_OK;
    ZERO__COMM_ERR(c,
                   "%s: count %zu exceeds the %s backend's limit of %zu elements per call; split "
                   "the buffer into several calls",
                   fn, count, c->ops->name, c->ops->max_count);
    return ZERO_ERR_INVALID_ARG;
}

/* Byte ranges [a, a+na) and [b, b+nb) intersect. */
static int overlap(const void *a, size_t na, const void *b, size_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

/* The checks all_reduce / reduce_scatter / all_gather share. Sets *sendn and *recvn to the
 * element counts of the two buffers and *bytes to the message size M of the ring rule. */
static zero_status check_coll(zero_comm *c, zero_coll k, const char *fn, const void *send,
                              void *recv, size_t count, zero_dtype dt, size_t *sendn, size_t *recvn,
                              uint64_t *bytes, zero_request **req, int nonblocking) {
    zero_status s;
    if (nonblocking) {
        if (!req) {
            ZERO__COMM_ERR(c, "%s: req is NULL: expected a pointer to receive the request", fn);
            return ZERO_ERR_INVALID_ARG;
        }
        *req = NULL;
    }
    if ((s = check_dtype(c, fn, dt)) || (s = check_count(c, fn, count))) return s;
    size_t es = zero_dtype_size(dt), n = (size_t)c->size;
    if (count > SIZE_MAX / n / es) {
        ZERO__COMM_ERR(c, "%s: count %zu times %zu ranks times %zu bytes overflows size_t", fn, count,
                       n, es);
        return ZERO_ERR_INVALID_ARG;
    }
    *sendn = k == ZERO_COLL_REDUCE_SCATTER ? count * n : count;
    *recvn = k == ZERO_COLL_ALL_GATHER ? count * n : count;
    *bytes = (uint64_t)count * (k == ZERO_COLL_ALL_REDUCE ? 1 : n) * es;
    if (count > 0 && (!send || !recv)) {
        ZERO__COMM_ERR(c, "%s: %s buffer is NULL with count %zu: expected memory for the elements",
                       fn, !send ? "send" : "recv", count);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

static zero_status new_request(zero_comm *c, const char *fn, zero_request **out) {
    zero_request *r = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof *r);
    if (!r) {
        ZERO__COMM_ERR(c, "%s: out of memory for a request (%zu bytes)", fn, sizeof *r);
        return ZERO_ERR_NOMEM;
    }
    r->comm = c;
    *out = r;
    return ZERO_OK;
}

/* ------------------------------------------------------------------ reductions */

static zero_status reduce_common(zero_comm *c, zero_coll k, const void *send, void *recv,
                                 size_t count, zero_dtype dt, zero_op op, zero_request **req,
                                 int nonblocking) {
    const char *fn = nonblocking ? (k == ZERO_COLL_ALL_REDUCE ? "iall_reduce" : "ireduce_scatter")
                                 : zero_coll_name(k);
    if (!c) return ZERO_ERR_INVALID_ARG;
    size_t sendn, recvn;
    uint64_t bytes;
    zero_status s =
        check_coll(c, k, fn, send, recv, count, dt, &sendn, &recvn, &bytes, req, nonblocking);
    if (s || (s = check_op(c, fn, op))) return s;
    size_t es = zero_dtype_size(dt);
    int inplace;
    if (k == ZERO_COLL_ALL_REDUCE) inplace = send == recv;
    else inplace = (const char *)recv == (const char *)send + (size_t)c->rank * count * es;
    if (!inplace && overlap(send, sendn * es, recv, recvn * es)) {
        ZERO__COMM_ERR(c,
                       "%s: send %p and recv %p overlap without being in place (in place means %s)",
                       fn, send, (void *)recv,
                       k == ZERO_COLL_ALL_REDUCE ? "send == recv"
                                                 : "recv == send + rank*count elements");
        return ZERO_ERR_INVALID_ARG;
    }
    zero_op bop = op;
    int post_avg = op == ZERO_OP_AVG && !(c->ops->caps & ZERO__CAP_AVG);
    if (post_avg) bop = ZERO_OP_SUM;
    zero_request *r = NULL;
    if (nonblocking && (s = new_request(c, fn, &r))) return s;
    if (k == ZERO_COLL_ALL_REDUCE) s = c->ops->all_reduce(c, send, recv, count, dt, bop, r);
    else s = c->ops->reduce_scatter(c, send, recv, count, dt, bop, r);
    if (s) {
        zero_mem_free(NULL, r);
        return s;
    }
    count_call(c, k, bytes);
    if (nonblocking) {
        if (post_avg) {
            r->avg_buf = recv;
            r->avg_count = count;
            r->avg_dt = dt;
        }
        *req = r;
    } else if (post_avg) {
        zero__comm_avg_finish(dt, recv, count, c->size);
    }
    return ZERO_OK;
}

zero_status zero_comm_all_reduce(zero_comm *c, const void *send, void *recv, size_t count,
                                 zero_dtype dt, zero_op op) {
    const int w = zero__watch_enter(c, "all_reduce");
    const zero_status s = reduce_common(c, ZERO_COLL_ALL_REDUCE, send, recv, count, dt, op, NULL, 0);
    zero__watch_leave(w);
    return s;
}

zero_status zero_comm_reduce_scatter(zero_comm *c, const void *send, void *recv, size_t count,
                                     zero_dtype dt, zero_op op) {
    const int w = zero__watch_enter(c, "reduce_scatter");
    const zero_status s = reduce_common(c, ZERO_COLL_REDUCE_SCATTER, send, recv, count, dt, op, NULL, 0);
    zero__watch_leave(w);
    return s;
}

/* The non-blocking forms are watched too: without a progress thread they run on the caller's thread
 * (docs/COMM.md) and wait for the peers as a blocking call does. */
zero_status zero_comm_iall_reduce(zero_comm *c, const void *send, void *recv, size_t count,
                                  zero_dtype dt, zero_op op, zero_request **req) {
    const int w = zero__watch_enter(c, "iall_reduce");
    const zero_status s = reduce_common(c, ZERO_COLL_ALL_REDUCE, send, recv, count, dt, op, req, 1);
    zero__watch_leave(w);
    return s;
}

zero_status zero_comm_ireduce_scatter(zero_comm *c, const void *send, void *recv, size_t count,
                                      zero_dtype dt, zero_op op, zero_request **req) {
    const int w = zero__watch_enter(c, "ireduce_scatter");
    const zero_status s = reduce_common(c, ZERO_COLL_REDUCE_SCATTER, send, recv, count, dt, op, req, 1);
    zero__watch_leave(w);
    return s;
}

/* ------------------------------------------------------------------ data movement */

/* qgZ's reduce-scatter: reduce_common's checks for SUM, a float dtype, not in place, block >= 1.
 * The backend counts the call, as it goes (quantized or not). */
static zero_status reduce_q8_common(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                                    size_t block, zero_request **req, int nonblocking) {
    const char *fn = nonblocking ? "ireduce_scatter_q8" : "reduce_scatter_q8";
    if (!c) return ZERO_ERR_INVALID_ARG;
    size_t sendn, recvn;
    uint64_t bytes;
    zero_status s = check_coll(c, ZERO_COLL_REDUCE_SCATTER, fn, send, recv, count, dt, &sendn, &recvn, &bytes, req,
                               nonblocking);
    if (s) return s;
    if (dt != ZERO_DTYPE_FP32 && dt != ZERO_DTYPE_BF16 && dt != ZERO_DTYPE_FP16) {
        ZERO__COMM_ERR(c, "%s: dtype %s: expected fp32, bf16 or fp16 (the int8 messages code floats)", fn,
                       zero_dtype_name(dt));
        return ZERO_ERR_INVALID_ARG;
    }
    if (block < 1) {
        ZERO__COMM_ERR(c, "%s: block %zu: expected at least 1 element per absmax", fn, block);
        return ZERO_ERR_INVALID_ARG;
    }
    const size_t es = zero_dtype_size(dt);
    if (overlap(send, sendn * es, recv, recvn * es)) {
        ZERO__COMM_ERR(c, "%s: send %p and recv %p overlap: the quantized reduce-scatter is not in place", fn, send,
                       (void *)recv);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!c->ops->reduce_scatter_q8) {
        ZERO__COMM_ERR(c, "%s on the %s backend is not supported yet", fn, c->ops->name);
        return ZERO_ERR_UNSUPPORTED;
    }
    zero_request *r = NULL;
    if (nonblocking && (s = new_request(c, fn, &r))) return s;
    if ((s = c->ops->reduce_scatter_q8(c, send, recv, count, dt, block, r))) {
        zero_mem_free(NULL, r);
        return s;
    }
    if (nonblocking) *req = r; /* (the backend counted the call: it knows whether it quantized) */
    return ZERO_OK;
}

zero_status zero_comm_reduce_scatter_q8(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                                        size_t block) {
    const int w = zero__watch_enter(c, "reduce_scatter_q8");
    const zero_status s = reduce_q8_common(c, send, recv, count, dt, block, NULL, 0);
    zero__watch_leave(w);
    return s;
}

zero_status zero_comm_ireduce_scatter_q8(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                                         size_t block, zero_request **req) {
    const int w = zero__watch_enter(c, "ireduce_scatter_q8");
    const zero_status s = reduce_q8_common(c, send, recv, count, dt, block, req, 1);
    zero__watch_leave(w);
    return s;
}

static zero_status gather_common(zero_comm *c, const void *send, void *recv, size_t count,
                                 zero_dtype dt, zero_request **req, int nonblocking) {
    const char *fn = nonblocking ? "iall_gather" : "all_gather";
    if (!c) return ZERO_ERR_INVALID_ARG;
    size_t sendn, recvn;
    uint64_t bytes;
    zero_status s =
        check_coll(c, ZERO_COLL_ALL_GATHER, fn, send, recv, count, dt, &sendn, &recvn, &bytes, req,
                   nonblocking);
    if (s) return s;
    size_t es = zero_dtype_size(dt);
    int inplace = (const char *)send == (const char *)recv + (size_t)c->rank * count * es;
    if (!inplace && overlap(send, sendn * es, recv, recvn * es)) {
        ZERO__COMM_ERR(c,
                       "%s: send %p and recv %p overlap without being in place (in place means "
                       "send == recv + rank*count elements)",
                       fn, send, (void *)recv);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_request *r = NULL;
    if (nonblocking && (s = new_request(c, fn, &r))) return s;
    if ((s = c->ops->all_gather(c, send, recv, count, dt, r))) {
        zero_mem_free(NULL, r);
        return s;
    }
    count_call(c, ZERO_COLL_ALL_GATHER, bytes);
    if (nonblocking) *req = r;
    return ZERO_OK;
}

zero_status zero_comm_all_gather(zero_comm *c, const void *send, void *recv, size_t count,
                                 zero_dtype dt) {
    const int w = zero__watch_enter(c, "all_gather");
    const zero_status s = gather_common(c, send, recv, count, dt, NULL, 0);
    zero__watch_leave(w);
    return s;
}

zero_status zero_comm_iall_gather(zero_comm *c, const void *send, void *recv, size_t count,
                                  zero_dtype dt, zero_request **req) {
    const int w = zero__watch_enter(c, "iall_gather");
    const zero_status s = gather_common(c, send, recv, count, dt, req, 1);
    zero__watch_leave(w);
    return s;
}

zero_status zero_comm_broadcast(zero_comm *c, void *buf, size_t count, zero_dtype dt, int root) {
    if (!c) return ZERO_ERR_INVALID_ARG;
    zero_status s;
    if ((s = check_dtype(c, "broadcast", dt)) || (s = check_count(c, "broadcast", count))) return s;
    if (root < 0 || root >= c->size) {
        ZERO__COMM_ERR(c, "broadcast: root %d: expected a rank in [0, %d)", root, c->size);
        return ZERO_ERR_INVALID_ARG;
    }
    if (count > 0 && !buf) {
        ZERO__COMM_ERR(c, "broadcast: buf is NULL with count %zu: expected memory for the elements",
                       count);
        return ZERO_ERR_INVALID_ARG;
    }
    size_t es = zero_dtype_size(dt);
    if (count > SIZE_MAX / es) {
        ZERO__COMM_ERR(c, "broadcast: count %zu times %zu bytes overflows size_t", count, es);
        return ZERO_ERR_INVALID_ARG;
    }
    const int w = zero__watch_enter(c, "broadcast");
    s = c->ops->broadcast(c, buf, count, dt, root);
    zero__watch_leave(w);
    if (s) return s;
    count_call(c, ZERO_COLL_BROADCAST, (uint64_t)count * es);
    return ZERO_OK;
}

zero_status zero_comm_barrier(zero_comm *c) {
    if (!c) return ZERO_ERR_INVALID_ARG;
    const int w = zero__watch_enter(c, "barrier");
    const zero_status s = c->ops->barrier(c);
    zero__watch_leave(w);
    return s;
}

zero_status zero_comm_progress(zero_comm *c) {
    if (!c) return ZERO_ERR_INVALID_ARG;
    return c->ops->progress ? c->ops->progress(c) : ZERO_OK;
}

zero_status zero_comm_split(zero_comm *c, int color, int key, zero_comm **out) {
    if (!c) return ZERO_ERR_INVALID_ARG;
    if (!out) {
        ZERO__COMM_ERR(c, "split: out is NULL: expected a pointer to receive the communicator");
        return ZERO_ERR_INVALID_ARG;
    }
    *out = NULL;
    const int w = zero__watch_enter(c, "split");
    const zero_status s = c->ops->split(c, color, key, out);
    zero__watch_leave(w);
    if (s == ZERO_OK && *out) {
        (*out)->timeout_ns = c->timeout_ns;
        (*out)->heartbeat_ns = c->heartbeat_ns;
    }
    return s;
}

/* ------------------------------------------------------------------ requests */

static zero_status finish(zero_request *r, zero_status s) {
    if (s == ZERO_OK && r->avg_buf) zero__comm_avg_finish(r->avg_dt, r->avg_buf, r->avg_count, r->comm->size);
    zero_mem_free(NULL, r);
    return s;
}

zero_status zero_request_wait(zero_request *req) {
    if (!req) return ZERO_OK;
    if (req->dev) { /* a device collective: its host collective's own wait is watched */
        int done = 0;
        return finish(req, zero__dev_req_finish(req, 1, &done));
    }
    const int w = zero__watch_enter(req->comm, "a wait on a non-blocking collective");
    const zero_status s = req->comm->ops->wait(req);
    zero__watch_leave(w);
    return finish(req, s);
}

zero_status zero_request_test(zero_request *req, int *done) {
    if (!done) return ZERO_ERR_INVALID_ARG;
    *done = 0;
    if (!req) {
        *done = 1;
        return ZERO_OK;
    }
    zero_status s = req->dev ? zero__dev_req_finish(req, 0, done) : req->comm->ops->test(req, done);
    if (s) {
        /* A failed request is over: free it so that the caller does not wait on it again. */
        *done = 1;
        return finish(req, s);
    }
    if (*done) return finish(req, ZERO_OK);
    return ZERO_OK;
}

/* ------------------------------------------------------------------ construction */

zero_status zero_comm_init_self_with(zero_comm **out, zero_error *err) {
    const zero__cerr e = {NULL, err};
    if (!out) {
        zero__cerr_set(&e, "init_self: out is NULL: expected a pointer to receive the communicator");
        return ZERO_ERR_INVALID_ARG;
    }
    if (!(*out = zero__comm_new(&zero__comm_self_ops, 0, 1))) {
        zero__cerr_set(&e, "init_self: out of memory for a communicator");
        return ZERO_ERR_NOMEM;
    }
    return ZERO_OK;
}

zero_status zero_comm_init_self(zero_comm **out) { return zero_comm_init_self_with(out, NULL); }
zero_status zero_comm_init_mpi(zero_comm **out, const void *mpi_comm) {
    return zero_comm_init_mpi_with(out, mpi_comm, NULL, NULL);
}

#ifndef ZERO_HAVE_MPI
zero_status zero_comm_init_mpi_with(zero_comm **out, const void *mpi_comm, const zero_comm_options *opts,
                                    zero_error *err) {
    (void)mpi_comm;
    (void)opts;
    if (out) *out = NULL;
    const zero__cerr e = {NULL, err};
    zero__cerr_set(&e, "init_mpi: this build of zero has no MPI (configure with MPI installed and -DZERO_MPI=ON)");
    return ZERO_ERR_UNSUPPORTED;
}
#endif
