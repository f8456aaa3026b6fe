/* Heartbeats between the ranks of a communicator that share a node: at creation each rank tells
 * its node peers where its heartbeat page is (pid, memfd, nonce) and maps theirs for the watchdog.
 *
 * The page is mapped through /proc/<pid>/fd/<fd>: the same user's process in the same pid
 * namespace, what single-copy reads need too (docs/COMM.md). The nonce, sent through MPI and
 * compared with the page, makes sure that the mapping is the peer's (not a process of the same
 * pid in another namespace); a page that cannot be mapped or does not match leaves that peer
 * unwatched, seen only through ZERO_COMM_TIMEOUT. Nothing here has a name in a file system, so a
 * killed job leaves nothing behind. */
#ifdef ZERO_HAVE_MPI
#include "comm/internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* More ranks on one node than this go without heartbeats (the exchange lives on the stack). */
#define BEAT_MAX_LOCAL 256

/* A peer's page, mapped read-only, or NULL. */
static const zero__beat_page *map_peer(long long pid, long long fd, uint64_t nonce) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/fd/%lld", pid, fd);
    const int f = open(path, O_RDONLY | O_CLOEXEC);
    if (f < 0) return NULL;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(f, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= ZERO__BEAT_PAGE_BYTES)
        p = mmap(NULL, ZERO__BEAT_PAGE_BYTES, PROT_READ, MAP_SHARED, f, 0);
    close(f);
    if (p == MAP_FAILED) return NULL;
    const zero__beat_page *g = p;
    if (g->magic == ZERO__BEAT_MAGIC && g->nonce == nonce && g->pid == pid) return g;
    munmap(p, ZERO__BEAT_PAGE_BYTES);
    return NULL;
}

zero_status zero__beat_join(zero_comm *c, MPI_Comm comm, const zero__cerr *e, const char *fn) {
    c->beat = 0;
    if (c->size < 2) return ZERO_OK;
    MPI_Comm node = MPI_COMM_NULL;
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    char what[96];
    if (rc != MPI_SUCCESS) {
        snprintf(what, sizeof what, "%s: MPI_Comm_split_type (heartbeats)", fn);
        return zero__cerr_mpi(e, rc, what);
    }
    MPI_Comm_set_errhandler(node, MPI_ERRORS_RETURN);
    int nlocal = 0;
    MPI_Comm_size(node, &nlocal);
    /* the same answer on every rank of the node, so that all or none of them exchange */
    if (nlocal < 2 || nlocal > BEAT_MAX_LOCAL) {
        MPI_Comm_free(&node);
        return ZERO_OK;
    }
    /* per local rank: pid, memfd (-1: no heartbeat), nonce, comm rank */
    long long all[4 * BEAT_MAX_LOCAL];
    long long mine[4] = {(long long)getpid(), -1, 0, c->rank};
    int fd = -1;
    uint64_t nonce = 0;
    if (zero__beat_self(&fd, &nonce)) {
        mine[1] = fd;
        mine[2] = (long long)nonce;
    }
    rc = MPI_Allgather(mine, 4, MPI_LONG_LONG, all, 4, MPI_LONG_LONG, node);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) {
        snprintf(what, sizeof what, "%s: MPI_Allgather (heartbeats)", fn);
        return zero__cerr_mpi(e, rc, what);
    }
    const zero__beat_page *page[BEAT_MAX_LOCAL];
    int rank[BEAT_MAX_LOCAL], pid[BEAT_MAX_LOCAL], n = 0;
    for (int t = 0; t < nlocal; t++) {
        const long long *q = all + 4 * t;
        if (q[3] == c->rank || q[1] < 0) continue;
        if (!(page[n] = map_peer(q[0], q[1], (uint64_t)q[2]))) continue;
        rank[n] = (int)q[3];
        pid[n++] = (int)q[0];
    }
    if (n > 0) c->beat = zero__beat_watch(page, rank, pid, n);
    return ZERO_OK;
}
#endif
