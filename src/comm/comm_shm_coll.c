/* The collectives through the window: how a vector is cut among local ranks and nodes, the
 * node-local phases, the cross-node MPI steps, and all-reduce, reduce-scatter and all-gather. */
#ifdef ZERO_HAVE_MPI
#include "comm/shm_impl.h"
#include "zero/quant.h"

#include <limits.h>

/* ------------------------------------------------------------------ layouts */



void zero__shm_block_at(const zero__shm *s, const shm_layout *ly, int t, int g, size_t *off, size_t *len) {
    if (ly->kind == LAYOUT_PARTS) {
        size_t L = (size_t)s->nlocal;
        *off = ly->count * (size_t)t / L;
        *len = ly->count * (size_t)(t + 1) / L - *off;
    } else {
        *off = (size_t)s->world_of[g * s->nlocal + t] * ly->count;
        *len = ly->count;
    }
}

/* Elements per piece when a buffer holds `pieces` pieces: cache-line multiples when possible. */
static size_t piece_elems(const zero__shm *s, int pieces, size_t es) {
    size_t c = s->chunk / ((size_t)pieces * es), line = 64 / es;
    return c >= line ? c / line * line : c;
}







/* ------------------------------------------------------------------ node-local phases */

/* Node-local reduce-scatter of elements [a, b) of every block: for each group g, out + g*ostride
 * receives the reduction over the node's ranks (in local rank order) of block (local, g) of
 * their `send`, elements [a, b). */
static void local_rs(zero__shm *s, const shm_layout *ly, zero_op op, zero_dtype dt, const void *send,
                     void *out, size_t ostride, size_t a, size_t b) {
    const int L = s->nlocal, G = ly->groups, me = s->local;
    const size_t es = ly->es, c = piece_elems(s, L * G, es);
    const unsigned char *in = send;
    /* The result: a block of `count` (reduce-scatter), or staging for the cross-node step. */
    const int stream =
        ly->kind == LAYOUT_BLOCKS && G == 1 && ly->count * es > ZERO__SHM_STREAM_BYTES;
    for (size_t lo = a; lo < b; lo += c) {
        unsigned char *mine = buf_at(s, me, s->epoch + 1);
        for (int t = 0; t < L; t++) {
            if (t == me) continue; /* this rank's own blocks are read from `send` directly */
            for (int g = 0; g < G; g++) {
                size_t off, len;
                zero__shm_block_at(s, ly, t, g, &off, &len);
                size_t n = piece_len(lo, c, len, b);
                if (n)
                    zero__copy_stream_unfenced(mine + (size_t)(t * G + g) * c * es,
                                                   in + (off + lo) * es, n * es);
            }
        }
        zero__shm_barrier(s);
        for (int g = 0; g < G; g++) {
            size_t off, len;
            zero__shm_block_at(s, ly, me, g, &off, &len);
            size_t n = piece_len(lo, c, len, b);
            if (!n) continue;
            for (int t = 0; t < L; t++)
                s->srcs[t] = t == me ? (const void *)(in + (off + lo) * es)
                                     : (const void *)(buf_at(s, t, s->epoch) + (size_t)(me * G + g) * c * es);
            zero__shm_reduce(dt, op, s->srcs, L, (unsigned char *)out + (g * ostride + lo - a) * es, n,
                             stream, s->impl);
        }
    }
}

/* Node-local all-gather of elements [a, b) of every block: block (t, g) of recv receives local
 * rank t's in + g*istride, elements [a, b). */
static void local_ag(zero__shm *s, const shm_layout *ly, const void *in, size_t istride, void *recv,
                     size_t a, size_t b) {
    const int L = s->nlocal, G = ly->groups, me = s->local;
    const size_t es = ly->es, c = piece_elems(s, G, es);
    const unsigned char *src = in;
    unsigned char *dst = recv;
    const size_t result = ly->kind == LAYOUT_PARTS ? ly->count : ly->count * (size_t)L * (size_t)G;
    const int stream = result * es > ZERO__SHM_STREAM_BYTES;
    for (size_t lo = a; lo < b; lo += c) {
        unsigned char *mine = buf_at(s, me, s->epoch + 1);
        for (int g = 0; g < G; g++) {
            size_t off, len;
            zero__shm_block_at(s, ly, me, g, &off, &len);
            size_t n = piece_len(lo, c, len, b);
            if (n)
                zero__copy_stream_unfenced(mine + (size_t)g * c * es,
                                               src + (g * istride + lo - a) * es, n * es);
        }
        zero__shm_barrier(s);
        for (int t = 0; t < L; t++) {
            for (int g = 0; g < G; g++) {
                size_t off, len;
                zero__shm_block_at(s, ly, t, g, &off, &len);
                size_t n = piece_len(lo, c, len, b);
                if (!n) continue;
                const unsigned char *from = t == me ? src + (g * istride + lo - a) * es
                                                    : buf_at(s, t, s->epoch) + (size_t)g * c * es;
                unsigned char *to = dst + (off + lo) * es;
                if (to != from) copy_out(to, from, n * es, stream); /* in place: already there */
            }
        }
    }
}

/* ------------------------------------------------------------------ cross-node steps */





/* After a collective's last barrier: did a node peer's cross-node step or single-copy read fail
 * in this call? */
static zero_status peers_status(zero_comm *c, zero__shm *s, zero_status mine, const char *fn) {
    if (mine) return mine;
    for (int t = 0; t < s->nlocal; t++) {
        if (t == s->local) continue;
        shm_ctl *p = s->ctl[t];
        if (atomic_load_explicit(&p->failed, memory_order_acquire) != s->seq) continue;
        if (atomic_load_explicit(&p->fail_kind, memory_order_relaxed) == FAIL_CMA) {
            const int u = atomic_load_explicit(&p->fail_peer, memory_order_relaxed);
            const int e = atomic_load_explicit(&p->fail_errno, memory_order_relaxed);
            ZERO__COMM_ERR(c, "%s: local rank %d of this node (rank %d) could not read local rank %d's "
                           "buffer (rank %d) with process_vm_readv: %s (errno %d); set ZERO_COMM_CMA=0 "
                           "to do without", fn, t, world_rank(s, t), u,
                           u >= 0 && u < s->nlocal ? world_rank(s, u) : -1, strerror(e), e);
        } else {
            ZERO__COMM_ERR(c, "%s: the cross-node step failed on local rank %d of this node (rank %d); "
                           "see its error", fn, t, world_rank(s, t));
        }
        return ZERO_ERR_COMM;
    }
    return ZERO_OK;
}

/* Publishes this rank's failure of the current call (the first one counts) for peers_status;
 * the node-local protocol still runs to its end so that the node peers are not left waiting in
 * a barrier. */
void zero__shm_mark_failed(zero__shm *s, int kind, int peer, int err) {
    shm_ctl *me = s->ctl[s->local];
    if (atomic_load_explicit(&me->failed, memory_order_relaxed) == s->seq) return;
    atomic_store_explicit(&me->fail_kind, kind, memory_order_relaxed);
    atomic_store_explicit(&me->fail_peer, peer, memory_order_relaxed);
    atomic_store_explicit(&me->fail_errno, err, memory_order_relaxed);
    atomic_store_explicit(&me->failed, s->seq, memory_order_release);
}

/* Records a failed cross-node MPI call. */
static zero_status cross_failed(zero_comm *c, zero__shm *s, int rc, const char *what) {
    zero__shm_mark_failed(s, FAIL_CROSS, -1, 0);
    return zero__comm_mpi_error(c, rc, what);
}

/* ------------------------------------------------------------------ collectives */

/* The cross-node step of a hierarchical all-reduce: the first n elements of the staging buffer
 * summed over the nodes, in place; after a failure (*st set) the node-local protocol goes on. */
static void cross_all_reduce(zero_comm *c, zero__shm *s, size_t n, zero_dtype dt, zero_op op, zero_status *st) {
    if (*st) return;
    int rc = MPI_Allreduce(MPI_IN_PLACE, s->scratch, (int)n, zero__comm_mpi_type(dt), zero__comm_mpi_op(dt, op),
                           s->cross);
    if (rc != MPI_SUCCESS) *st = cross_failed(c, s, rc, "all_reduce: MPI_Allreduce (cross-node)");
}

zero_status zero__shm_run_all_reduce(zero_comm *c, zero__shm *s, const void *send, void *recv,
                                     size_t count, zero_dtype dt, zero_op op) {
    zero_status st = zero__shm_attach(c, s, "all_reduce");
    if (st) return st;
    s->seq++;
    const shm_layout ly = {LAYOUT_PARTS, 1, count, zero_dtype_size(dt)};
    const size_t es = ly.es, span = s->scratch_bytes / es;
    const size_t longest = (count + (size_t)s->nlocal - 1) / (size_t)s->nlocal;
    size_t off, mylen;
    zero__shm_block_at(s, &ly, s->local, 0, &off, &mylen);
    if (zero__shm_use_cma(s, (uint64_t)count * es, ZERO__SHM_CMA_AR_FACTOR)) {
        /* Single copy: reduce my part (from every rank's send) into its place in recv, then
         * gather the others' parts from their recv; with several nodes, span by span through
         * the staging buffer and MPI. */
        unsigned char *mine = (unsigned char *)recv + off * es;
        zero__shm_cma_begin(s, send, s->nnodes == 1 ? mine : s->scratch);
        zero__shm_cma_sync(s);
        if (s->nnodes == 1) {
            zero__shm_cma_local_rs(s, &ly, op, dt, send, mine, 0, 0, longest);
            zero__shm_cma_sync(s);
            zero__shm_cma_local_ag(s, &ly, mine, 0, recv, 0, longest);
            zero__shm_barrier(s);
        } else {
            for (size_t a = 0; a < longest; a += span) {
                const size_t b = longest - a < span ? longest : a + span;
                zero__shm_cma_local_rs(s, &ly, op, dt, send, s->scratch, 0, a, b);
                cross_all_reduce(c, s, piece_len(a, b - a, mylen, b), dt, op, &st);
                zero__shm_cma_sync(s);
                zero__shm_cma_local_ag(s, &ly, s->scratch, 0, recv, a, b);
                zero__shm_barrier(s); /* before the staging buffer is rewritten */
            }
        }
        zero__stream_fence();
        if (!st) st = zero__shm_cma_status(c, s, "all_reduce");
        return peers_status(c, s, st, "all_reduce");
    }
    if (s->nnodes == 1) {
        /* Reduce my part straight into its place in recv (in place: over my part of send, which
         * only I read), then gather every part from there. */
        unsigned char *mine = (unsigned char *)recv + off * es;
        local_rs(s, &ly, op, dt, send, mine, 0, 0, longest);
        local_ag(s, &ly, mine, 0, recv, 0, longest);
        zero__stream_fence();
        return ZERO_OK;
    }
    for (size_t a = 0; a < longest; a += span) {
        const size_t b = longest - a < span ? longest : a + span;
        local_rs(s, &ly, op, dt, send, s->scratch, 0, a, b);
        cross_all_reduce(c, s, piece_len(a, b - a, mylen, b), dt, op, &st);
        local_ag(s, &ly, s->scratch, 0, recv, a, b);
    }
    zero__stream_fence();
    return peers_status(c, s, st, "all_reduce");
}

/* The cross-node step of a hierarchical reduce-scatter: the staging buffer's node blocks of n
 * elements reduced over the nodes, this node's block into out; as cross_all_reduce. */
static void cross_reduce_scatter(zero_comm *c, zero__shm *s, void *out, size_t n, zero_dtype dt, zero_op op,
                                 zero_status *st) {
    if (*st) return;
    int rc = MPI_Reduce_scatter_block(s->scratch, out, (int)n, zero__comm_mpi_type(dt), zero__comm_mpi_op(dt, op),
                                      s->cross);
    if (rc != MPI_SUCCESS) *st = cross_failed(c, s, rc, "reduce_scatter: MPI_Reduce_scatter_block (cross-node)");
}

/* qgZ's cross-node step: the staging buffer's node blocks of n elements, every other node's coded
 * as an int8 message, exchanged all-to-all among the nodes, and this node's result the fp32 sum
 * in node order of what arrived and its own block as it is (comm_q8.c); q: the buffers. */
typedef struct cross_q8 {
    size_t block;
    unsigned char *qs, *qr; /* nnodes messages each, of the largest span */
} cross_q8;

static void cross_reduce_scatter_q8(zero_comm *c, zero__shm *s, const cross_q8 *q, void *out, size_t n, zero_dtype dt,
                                    zero_status *st) {
    if (*st) return;
    const uint64_t R = zero_quant_msg_bytes(n, q->block);
    zero_status e = zero__comm_q8_encode(s->scratch, s->nnodes, s->node_index, n, dt, q->block, q->qs);
    if (e != ZERO_OK) {
        ZERO__COMM_ERR(c, "reduce_scatter_q8: coding the cross-node messages: %s", zero_status_string(e));
        zero__shm_mark_failed(s, FAIL_CROSS, -1, 0);
        *st = e;
        return;
    }
    int rc = MPI_Alltoall(q->qs, (int)R, MPI_BYTE, q->qr, (int)R, MPI_BYTE, s->cross);
    if (rc != MPI_SUCCESS) {
        *st = cross_failed(c, s, rc, "reduce_scatter_q8: MPI_Alltoall (cross-node)");
        return;
    }
    const size_t es = zero_dtype_size(dt);
    e = zero__comm_q8_sum(q->qr, s->nnodes, s->node_index, s->scratch + (size_t)s->node_index * n * es, n, dt,
                          q->block, out);
    if (e != ZERO_OK) {
        ZERO__COMM_ERR(c, "reduce_scatter_q8: out of memory for the fp32 sums of %zu elements", n);
        zero__shm_mark_failed(s, FAIL_CROSS, -1, 0);
        *st = e;
    }
}

/* The cross-node step of the reduce-scatter of spans of n elements: plain, or qgZ's (q->block). */
static void cross_step(zero_comm *c, zero__shm *s, const cross_q8 *q, void *out, size_t n, zero_dtype dt, zero_op op,
                       zero_status *st) {
    if (q->block) cross_reduce_scatter_q8(c, s, q, out, n, dt, st);
    else cross_reduce_scatter(c, s, out, n, dt, op, st);
}

zero_status zero__shm_run_reduce_scatter(zero_comm *c, zero__shm *s, const void *send, void *recv,
                                         size_t count, zero_dtype dt, zero_op op, size_t qblock) {
    zero_status st = zero__shm_attach(c, s, "reduce_scatter");
    if (st) return st;
    s->seq++;
    const size_t es = zero_dtype_size(dt);
    /* qgZ across nodes: spans of whole blocks (the blocks are then those of the whole message), the
     * messages' buffers for the largest span */
    cross_q8 q = {0, NULL, NULL};
    size_t span = s->nnodes > 1 ? s->scratch_bytes / ((size_t)s->nnodes * es) : count;
    if (qblock && s->nnodes > 1) {
        q.block = qblock;
        span = span >= qblock ? span / qblock * qblock : qblock;
        if (span > count) span = count;
        if (span * (size_t)s->nnodes * es > s->scratch_bytes) { /* a block larger than the staging */
            ZERO__COMM_ERR(c, "reduce_scatter_q8: blocks of %zu elements: the cross-node staging holds %zu bytes "
                           "(expected a block of at most %zu elements)", qblock, s->scratch_bytes,
                           s->scratch_bytes / ((size_t)s->nnodes * es));
            return ZERO_ERR_INVALID_ARG;
        }
        const size_t qb = (size_t)zero_quant_msg_bytes(span, qblock) * (size_t)s->nnodes;
        q.qs = zero_mem_alloc(NULL, ZERO_MEM_COMM, qb ? qb : 1);
        q.qr = zero_mem_alloc(NULL, ZERO_MEM_COMM, qb ? qb : 1);
        if (!q.qs || !q.qr) {
            zero_mem_free(NULL, q.qs);
            zero_mem_free(NULL, q.qr);
            ZERO__COMM_ERR(c, "reduce_scatter_q8: out of memory for %zu bytes of cross-node messages", 2 * qb);
            return ZERO_ERR_NOMEM;
        }
    }
    const uint64_t bytes = (uint64_t)count * es * (uint64_t)s->nlocal * (uint64_t)s->nnodes;
    if (zero__shm_use_cma(s, bytes, 1)) {
        /* Single copy: each rank reads its blocks from the peers' send while they read theirs
         * from its own; in place, each rank writes only its own block, read by itself alone. */
        zero__shm_cma_begin(s, send, NULL);
        zero__shm_cma_sync(s);
        if (s->nnodes == 1) {
            const shm_layout ly = {LAYOUT_BLOCKS, 1, count, es};
            zero__shm_cma_local_rs(s, &ly, op, dt, send, recv, 0, 0, count);
        } else {
            const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, count, es};
            for (size_t a = 0; a < count; a += span) {
                const size_t b = count - a < span ? count : a + span;
                zero__shm_cma_local_rs(s, &ly, op, dt, send, s->scratch, b - a, a, b);
                cross_step(c, s, &q, (unsigned char *)recv + a * es, b - a, dt, op, &st);
            }
        }
        zero__shm_barrier(s); /* no rank returns (and may rewrite its send) while a peer reads it */
        zero__stream_fence();
        if (!st) st = zero__shm_cma_status(c, s, "reduce_scatter");
        zero_mem_free(NULL, q.qs);
        zero_mem_free(NULL, q.qr);
        return peers_status(c, s, st, "reduce_scatter");
    }
    if (s->nnodes == 1) {
        const shm_layout ly = {LAYOUT_BLOCKS, 1, count, es};
        local_rs(s, &ly, op, dt, send, recv, 0, 0, count);
        zero__stream_fence();
        return ZERO_OK;
    }
    const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, count, es};
    for (size_t a = 0; a < count; a += span) {
        const size_t b = count - a < span ? count : a + span;
        local_rs(s, &ly, op, dt, send, s->scratch, b - a, a, b);
        cross_step(c, s, &q, (unsigned char *)recv + a * es, b - a, dt, op, &st);
    }
    /* Nothing after the cross-node step reads the window: one more barrier lets every node
     * peer see a failure flag set in the last span. */
    zero__shm_barrier(s);
    zero_mem_free(NULL, q.qs);
    zero_mem_free(NULL, q.qr);
    return peers_status(c, s, st, "reduce_scatter");
}

zero_status zero__shm_run_all_gather(zero_comm *c, zero__shm *s, const void *send, void *recv,
                                     size_t count, zero_dtype dt) {
    zero_status st = zero__shm_attach(c, s, "all_gather");
    if (st) return st;
    s->seq++;
    const size_t es = zero_dtype_size(dt);
    const uint64_t bytes = (uint64_t)count * es * (uint64_t)s->nlocal * (uint64_t)s->nnodes;
    if (zero__shm_use_cma(s, bytes, 1)) {
        /* Single copy: every rank reads each peer's block straight into its recv. */
        if (s->nnodes == 1) {
            const shm_layout ly = {LAYOUT_BLOCKS, 1, count, es};
            zero__shm_cma_begin(s, NULL, send);
            zero__shm_cma_sync(s);
            zero__shm_cma_local_ag(s, &ly, send, 0, recv, 0, count);
            zero__shm_barrier(s);
        } else {
            const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, count, es};
            const size_t span = s->scratch_bytes / ((size_t)s->nnodes * es);
            zero__shm_cma_begin(s, NULL, s->scratch);
            for (size_t a = 0; a < count; a += span) {
                const size_t b = count - a < span ? count : a + span;
                if (!st) {
                    MPI_Datatype t = zero__comm_mpi_type(dt);
                    int rc = MPI_Allgather((const unsigned char *)send + a * es, (int)(b - a), t,
                                           s->scratch, (int)(b - a), t, s->cross);
                    if (rc != MPI_SUCCESS)
                        st = cross_failed(c, s, rc, "all_gather: MPI_Allgather (cross-node)");
                }
                zero__shm_cma_sync(s);
                zero__shm_cma_local_ag(s, &ly, s->scratch, b - a, recv, a, b);
                zero__shm_barrier(s); /* before the staging buffer is rewritten */
            }
        }
        zero__stream_fence();
        if (!st) st = zero__shm_cma_status(c, s, "all_gather");
        return peers_status(c, s, st, "all_gather");
    }
    if (s->nnodes == 1) {
        const shm_layout ly = {LAYOUT_BLOCKS, 1, count, es};
        local_ag(s, &ly, send, 0, recv, 0, count);
        zero__stream_fence();
        return ZERO_OK;
    }
    const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, count, es};
    const size_t span = s->scratch_bytes / ((size_t)s->nnodes * es);
    for (size_t a = 0; a < count; a += span) {
        const size_t b = count - a < span ? count : a + span;
        if (!st) {
            MPI_Datatype t = zero__comm_mpi_type(dt);
            int rc = MPI_Allgather((const unsigned char *)send + a * es, (int)(b - a), t, s->scratch,
                                   (int)(b - a), t, s->cross);
            if (rc != MPI_SUCCESS) st = cross_failed(c, s, rc, "all_gather: MPI_Allgather (cross-node)");
        }
        local_ag(s, &ly, s->scratch, b - a, recv, a, b);
    }
    zero__stream_fence();
    return peers_status(c, s, st, "all_gather");
}

/* ------------------------------------------------------------------ deferred cross-node steps */

uint64_t zero__shm_deferred_calls(const zero__shm *s) { return s ? s->deferred : 0; }

int zero__shm_defers(const zero__shm *s, const zero__shm_job *j) {
    if (!s || !s->cross_overlap || s->nnodes < 2 || s->async) return 0;
    if (j->kind == ZERO__SHM_ALL_REDUCE || (j->kind == ZERO__SHM_REDUCE_SCATTER && j->qblock)) return 0;
    const size_t es = zero_dtype_size(j->dt);
    const size_t ways = j->kind == ZERO__SHM_REDUCE_SCATTER ? 2 : 1;
    return j->count <= (size_t)INT_MAX &&
           ways * j->count * es * (size_t)s->nnodes <= ZERO__SHM_DEFER_MAX - s->deferred_bytes;
}

/* d's error text kept for its own wait (it may finish inside another call). */
static void keep(zero_comm *c, zero__shm_defer *d, zero_status st) {
    d->finished = 1;
    d->status = st;
    if (st) memcpy(d->err, c->err, sizeof d->err - 1);
}

/* An all-gather's end: its cross-node step waited for, then its node step (as the blocking
 * all-gather's, from the rank's own buffer of the nodes' blocks). */
static void ag_finish(zero_comm *c, zero__shm *s, zero__shm_defer *d) {
    zero_status st = ZERO_OK;
    const int rc = d->mpi_done ? MPI_SUCCESS : MPI_Wait(&d->r, MPI_STATUS_IGNORE);
    d->mpi_done = 1;
    s->seq++;
    if (d->status) { /* the post failed: the node step still runs, so that the peers' does */
        ZERO__COMM_ERR(c, "%s", d->err);
        zero__shm_mark_failed(s, FAIL_CROSS, -1, 0);
        st = d->status;
    } else if (rc != MPI_SUCCESS) {
        st = cross_failed(c, s, rc, "all_gather: MPI_Iallgather (cross-node)");
    }
    const size_t es = zero_dtype_size(d->dt);
    const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, d->count, es};
    const uint64_t bytes = (uint64_t)d->count * es * (uint64_t)s->nlocal * (uint64_t)s->nnodes;
    if (zero__shm_use_cma(s, bytes, 1)) {
        zero__shm_cma_begin(s, NULL, d->col);
        zero__shm_cma_sync(s);
        zero__shm_cma_local_ag(s, &ly, d->col, d->count, d->recv, 0, d->count);
        zero__shm_barrier(s); /* before the rank frees the buffer its peers read */
        zero__stream_fence();
        if (!st) st = zero__shm_cma_status(c, s, "all_gather");
    } else {
        local_ag(s, &ly, d->col, d->count, d->recv, 0, d->count);
        zero__stream_fence();
    }
    keep(c, d, peers_status(c, s, st, "all_gather"));
    zero_mem_free(NULL, d->col);
    d->col = NULL;
    s->deferred_bytes -= d->count * es * (size_t)s->nnodes;
}

/* Finishes the pending all-gathers in issue order, up to `upto` (NULL: all). */
static void finish_until(zero_comm *c, zero__shm *s, const zero__shm_defer *upto) {
    while (s->dhead) {
        zero__shm_defer *d = s->dhead;
        s->dhead = d->next;
        if (!s->dhead) s->dtail = NULL;
        ag_finish(c, s, d);
        if (d == upto) return;
    }
}

void zero__shm_drain_deferred(zero_comm *c, zero__shm *s) {
    if (s && s->dhead) finish_until(c, s, NULL);
}

zero_status zero__shm_defer_start(zero_comm *c, zero__shm *s, const zero__shm_job *j, zero__shm_defer **out) {
    *out = NULL;
    zero_status st = zero__shm_attach(c, s, zero__shm_kind_name(j->kind));
    if (st) return st;
    const size_t es = zero_dtype_size(j->dt), K = (size_t)s->nnodes;
    zero__shm_defer *d = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof *d);
    const size_t col_bytes = (j->kind == ZERO__SHM_REDUCE_SCATTER ? 2 : 1) * j->count * es * K;
    unsigned char *col = zero_mem_alloc(NULL, ZERO_MEM_COMM, col_bytes > 0 ? col_bytes : 1);
    /* Out of memory here is this rank's alone: the call runs at issue, as it would without the
     * setting (the same protocol between the ranks: the node steps in call order). */
    if (!d || !col) {
        zero_mem_free(NULL, d);
        zero_mem_free(NULL, col);
        return zero__shm_run(c, s, j);
    }
    s->deferred++;
    s->deferred_bytes += col_bytes;
    d->kind = j->kind;
    d->col = col;
    d->recv = j->recv;
    d->count = j->count;
    d->dt = j->dt;
    d->op = j->op;
    d->r = MPI_REQUEST_NULL;
    MPI_Datatype t = zero__comm_mpi_type(j->dt);
    int rc;
    if (j->kind == ZERO__SHM_ALL_GATHER) {
        rc = MPI_Iallgather(j->send, (int)j->count, t, col, (int)j->count, t, s->cross, &d->r);
        if (rc != MPI_SUCCESS) { /* the peers' node steps still expect this rank's */
            d->mpi_done = 1;
            d->status = zero__comm_mpi_error(c, rc, "all_gather: MPI_Iallgather (cross-node)");
            memcpy(d->err, c->err, sizeof d->err - 1);
        }
        if (s->dtail) s->dtail->next = d;
        else s->dhead = d;
        s->dtail = d;
        *out = d;
        return ZERO_OK;
    }
    /* reduce-scatter: the node step now, in call order (the backend's call ran the pending ones
     * first), into the rank's buffer of the nodes' blocks */
    s->seq++;
    const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, j->count, es};
    const uint64_t bytes = (uint64_t)j->count * es * (uint64_t)s->nlocal * K;
    if (zero__shm_use_cma(s, bytes, 1)) {
        zero__shm_cma_begin(s, j->send, NULL);
        zero__shm_cma_sync(s);
        zero__shm_cma_local_rs(s, &ly, j->op, j->dt, j->send, col, j->count, 0, j->count);
        zero__shm_barrier(s); /* no rank returns (and may rewrite its send) while a peer reads it */
        zero__stream_fence();
        st = zero__shm_cma_status(c, s, "reduce_scatter");
    } else {
        local_rs(s, &ly, j->op, j->dt, j->send, col, j->count, 0, j->count);
        zero__shm_barrier(s);
    }
    st = peers_status(c, s, st, "reduce_scatter");
    /* each node's block to that node, every node's block of this one back (K - 1 blocks each way,
     * what a reduce-scatter must move; OpenMPI's MPI_Ireduce_scatter_block moves half as much
     * again on 2 nodes), summed in node order when it completes */
    if (st == ZERO_OK) {
        rc = MPI_Ialltoall(col, (int)j->count, t, col + j->count * es * K, (int)j->count, t, s->cross, &d->r);
        if (rc != MPI_SUCCESS) st = zero__comm_mpi_error(c, rc, "reduce_scatter: MPI_Ialltoall (cross-node)");
    }
    if (st) {
        s->deferred_bytes -= col_bytes;
        zero_mem_free(NULL, col);
        zero_mem_free(NULL, d);
        return st;
    }
    *out = d;
    return ZERO_OK;
}

/* A reduce-scatter's end, its blocks arrived: this rank's block summed over the nodes, in node order. */
static zero_status rs_sum(zero_comm *c, zero__shm *s, zero__shm_defer *d) {
    const size_t es = zero_dtype_size(d->dt), K = (size_t)s->nnodes;
    const void **src = zero_mem_alloc(NULL, ZERO_MEM_COMM, K * sizeof *src);
    if (!src) {
        ZERO__COMM_ERR(c, "reduce_scatter: out of memory for %zu pointers", K);
        return ZERO_ERR_NOMEM;
    }
    for (size_t g = 0; g < K; g++) src[g] = d->col + (K + g) * d->count * es;
    zero__shm_reduce(d->dt, d->op, src, (int)K, d->recv, d->count, 0, s->impl);
    zero_mem_free(NULL, src);
    return ZERO_OK;
}

static zero_status defer_end(zero_comm *c, zero__shm *s, zero__shm_defer *d) {
    const zero_status st = d->status;
    if (st && d->err[0]) ZERO__COMM_ERR(c, "%s", d->err);
    if (d->col)
        s->deferred_bytes -= (d->kind == ZERO__SHM_REDUCE_SCATTER ? 2 : 1) * d->count * zero_dtype_size(d->dt) *
                             (size_t)s->nnodes;
    zero_mem_free(NULL, d->col);
    zero_mem_free(NULL, d);
    return st;
}

zero_status zero__shm_defer_wait(zero_comm *c, zero__shm *s, zero__shm_defer *d) {
    if (d->kind == ZERO__SHM_ALL_GATHER) {
        if (!d->finished) finish_until(c, s, d);
        return defer_end(c, s, d);
    }
    const int rc = MPI_Wait(&d->r, MPI_STATUS_IGNORE);
    d->status = rc == MPI_SUCCESS ? rs_sum(c, s, d) : zero__comm_mpi_error(c, rc, "reduce_scatter: MPI_Wait (cross-node)");
    d->err[0] = 0;
    return defer_end(c, s, d);
}

zero_status zero__shm_defer_test(zero_comm *c, zero__shm *s, zero__shm_defer *d, int *done) {
    *done = 0;
    if (d->kind == ZERO__SHM_ALL_GATHER) {
        /* done once its cross-node step and those of the all-gathers before it have arrived:
         * then their node steps run (waits for the node peers only) */
        for (zero__shm_defer *p = s->dhead; p && !d->finished; p = p->next) {
            if (!p->mpi_done) {
                int flag = 0;
                const int rc = MPI_Test(&p->r, &flag, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS) flag = 1; /* its error comes with its node step */
                else p->mpi_done = flag;
                if (!flag) return ZERO_OK;
            }
            if (p == d) break;
        }
        *done = 1;
        return zero__shm_defer_wait(c, s, d);
    }
    int flag = 0;
    const int rc = MPI_Test(&d->r, &flag, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS && !flag) return ZERO_OK;
    *done = 1;
    d->status = rc == MPI_SUCCESS ? rs_sum(c, s, d) : zero__comm_mpi_error(c, rc, "reduce_scatter: MPI_Test (cross-node)");
    d->err[0] = 0;
    return defer_end(c, s, d);
}
#endif
