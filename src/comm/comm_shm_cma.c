/* Single copy (CMA): large node-local reductions and gathers read the peers' buffers directly
 * with process_vm_readv, after a probe at creation says every rank may. */
#ifdef ZERO_HAVE_MPI
#include "comm/shm_impl.h"

/* Reads n bytes at `remote` in process pid into dst: 0, or an errno (a short read is EFAULT). */
static int cma_read_pid(int pid, void *dst, const void *remote, size_t n) {
#ifdef __linux__
    struct iovec l = {dst, n}, r = {(void *)(uintptr_t)remote, n};
    /* Through syscall(2): the libc wrapper needs _GNU_SOURCE. */
    long got = syscall(SYS_process_vm_readv, (long)pid, &l, 1ul, &r, 1ul, 0ul);
    if (got < 0) return errno ? errno : EFAULT;
    return (size_t)got == n ? 0 : EFAULT;
#else
    (void)pid, (void)dst, (void)remote, (void)n;
    return ENOSYS;
#endif
}

/* Collective over comm (each node's ranks in sh->node): learns every local rank's pid, then
 * each rank reads a word its next local peer holds; the single-copy path is used only if every
 * rank of comm succeeded (a ptrace policy, a seccomp filter, separate pid namespaces or a kernel
 * without CMA make it fail: EPERM, ENOSYS, ESRCH), so that all ranks take the same path. */
int zero__shm_cma_probe(MPI_Comm comm, zero__shm *sh, int rank, long long *all, int *ok_all) {
    const int L = sh->nlocal;
    *ok_all = 0;
    /* The word: my communicator rank, mixed so that a stale or zero page cannot pass. */
    volatile unsigned long long word = 0x9e3779b97f4a7c15ull ^ (unsigned long long)rank;
    long long mine[2] = {(long long)getpid(), (long long)(uintptr_t)&word};
    int ok = 1;
    int rc = MPI_Allgather(mine, 2, MPI_LONG_LONG, all, 2, MPI_LONG_LONG, sh->node);
    if (rc != MPI_SUCCESS) ok = 0;
    if (ok) {
        const int t = (sh->local + 1) % L;
        unsigned long long got = 0;
        const unsigned long long want =
            0x9e3779b97f4a7c15ull ^ (unsigned long long)sh->world_of[sh->node_index * L + t];
        ok = !cma_read_pid((int)all[2 * t], &got, (const void *)(uintptr_t)all[2 * t + 1], sizeof got) &&
             got == want;
        for (int u = 0; u < L; u++) sh->pid[u] = (int)all[2 * u];
    }
    /* Also keeps `word` alive until every peer has read it. */
    int rc2 = MPI_Allreduce(&ok, ok_all, 1, MPI_INT, MPI_MIN, comm);
    (void)word;
    return rc != MPI_SUCCESS ? rc : rc2;
}

/* ------------------------------------------------------------------ single copy (CMA) */

/*
 * Large messages skip the window's copy: each rank reads the pieces it needs straight from its
 * node peers' buffers with process_vm_readv (Linux cross-memory attach; the kernel copies from
 * the peer's pages once). Per call, a rank publishes its buffers' addresses in its control
 * block and enters a barrier; after it, the peers' inputs are final (their owners are inside
 * the call) and their addresses known; a rank reads only what no rank writes during the step
 * (reduce-scatter: block t of every send, read by local rank t alone, while each rank writes
 * only its own recv, which is, in place, its own block), and a barrier at the end of the step
 * keeps every owner in the call (its buffers alive and unchanged) until every reader is done.
 * The window's buffers are not used; its control blocks carry the addresses, the barrier and
 * the failure flags.
 */

/* Whether a message of `bytes` (the ring rule's size) takes the single-copy path; `factor`
 * scales the threshold (ZERO__SHM_CMA_AR_FACTOR for all-reduce, else 1). */
int zero__shm_use_cma(const zero__shm *s, uint64_t bytes, uint64_t factor) {
    return s->cma && (bytes / factor >= s->cma_min);
}

/* Starts a single-copy collective: publishes its buffers (a: the reduction's source, b: the
 * gather's source) for the first barrier (cma_sync) to hand out. */
void zero__shm_cma_begin(zero__shm *s, const void *a, const void *b) {
    shm_ctl *me = s->ctl[s->local];
    atomic_store_explicit(&me->addr[0], (uintptr_t)a, memory_order_relaxed);
    atomic_store_explicit(&me->addr[1], (uintptr_t)b, memory_order_relaxed);
    s->cma_err = 0;
    s->cma_peer = -1;
}

/* A barrier that starts a step, and every peer's published addresses into s->from (never after
 * the call's last barrier: the owners rewrite them in their next call, which starts after it). */
void zero__shm_cma_sync(zero__shm *s) {
    zero__shm_barrier(s);
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < s->nlocal; t++)
            s->from[k * s->nlocal + t] =
                (const unsigned char *)atomic_load_explicit(&s->ctl[t]->addr[k], memory_order_relaxed);
}

/* Reads n bytes at peer t's address `remote` into dst; the first failure of the call is kept
 * (and published) and later reads are skipped, their destinations left as they were. */
static int cma_read(zero__shm *s, int t, void *dst, const unsigned char *remote, size_t n) {
    if (s->cma_err) return -1;
    int e = cma_read_pid(s->pid[t], dst, remote, n);
    if (!e) return 0;
    s->cma_err = e;
    s->cma_peer = t;
    zero__shm_mark_failed(s, FAIL_CMA, t, e);
    return -1;
}

/* This rank's own failed read of the current call, as an error (ZERO_OK when none). */
zero_status zero__shm_cma_status(zero_comm *c, zero__shm *s, const char *fn) {
    if (!s->cma_err) return ZERO_OK;
    const int t = s->cma_peer;
    ZERO__COMM_ERR(c, "%s: process_vm_readv of local rank %d's buffer (rank %d, pid %d) failed: %s "
                   "(errno %d); set ZERO_COMM_CMA=0 to do without", fn, t, world_rank(s, t), s->pid[t],
                   strerror(s->cma_err), s->cma_err);
    return ZERO_ERR_COMM;
}

/* local_rs by single copy, between cma_sync and a barrier: s->from[t] is local rank t's
 * send. For each piece, the peers' slices go into the private scratch (cache-sized) and the
 * same L-way left-to-right reduction as local_rs's combines them with this rank's own slice,
 * in local rank order: the same bits as the window path. */
void zero__shm_cma_local_rs(zero__shm *s, const shm_layout *ly, zero_op op, zero_dtype dt,
                            const void *send, void *out, size_t ostride, size_t a, size_t b) {
    const int L = s->nlocal, G = ly->groups, me = s->local;
    const size_t es = ly->es, line = 64 / es;
    size_t c = s->cma_scratch_bytes / ((size_t)(L - 1) * es);
    if (c >= line) c = c / line * line;
    /* Streaming stores for a large result, and for an all-reduce's part on one node, which the
     * peers read next (as the window's pieces: no dirty lines to pull out of this cache). */
    const int stream =
        (ly->kind == LAYOUT_BLOCKS && G == 1 && ly->count * es > ZERO__SHM_STREAM_BYTES) ||
        (ly->kind == LAYOUT_PARTS && s->nnodes == 1);
    for (int g = 0; g < G; g++) {
        size_t off, len;
        zero__shm_block_at(s, ly, me, g, &off, &len);
        for (size_t lo = a; lo < b; lo += c) {
            const size_t n = piece_len(lo, c, len, b);
            if (!n) break;
            int k = 0;
            for (int t = 0; t < L; t++) {
                if (t == me) {
                    s->srcs[t] = (const unsigned char *)send + (off + lo) * es;
                    continue;
                }
                unsigned char *piece = s->cma_scratch + (size_t)k++ * c * es;
                if (cma_read(s, t, piece, s->from[t] + (off + lo) * es, n * es)) return;
                s->srcs[t] = piece;
            }
            zero__shm_reduce(dt, op, s->srcs, L, (unsigned char *)out + (g * ostride + lo - a) * es, n,
                             stream, s->impl);
        }
    }
}

/* local_ag by single copy, between cma_sync and a barrier: s->from[nlocal + t] is local rank t's
 * `in`; each peer's slice is read straight into its place in recv. */
void zero__shm_cma_local_ag(zero__shm *s, const shm_layout *ly, const void *in, size_t istride,
                            void *recv, size_t a, size_t b) {
    const int L = s->nlocal, G = ly->groups, me = s->local;
    const size_t es = ly->es;
    const size_t result = ly->kind == LAYOUT_PARTS ? ly->count : ly->count * (size_t)L * (size_t)G;
    const int stream = result * es > ZERO__SHM_STREAM_BYTES;
    for (int i = 1; i <= L; i++) {
        const int t = (me + i) % L; /* peers first, each from a different one; mine last */
        for (int g = 0; g < G; g++) {
            size_t off, len;
            zero__shm_block_at(s, ly, t, g, &off, &len);
            const size_t n = piece_len(a, b - a, len, b);
            if (!n) continue;
            unsigned char *to = (unsigned char *)recv + (off + a) * es;
            if (t == me) {
                const unsigned char *from = (const unsigned char *)in + g * istride * es;
                if (to != from) copy_out(to, from, n * es, stream);
            } else if (cma_read(s, t, to, s->from[L + t] + g * istride * es, n * es)) {
                return;
            }
        }
    }
}
#endif
