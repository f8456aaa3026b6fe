/* Heartbeats between the ranks of a communicator: at creation each rank tells its node peers
 * where its heartbeat page is (pid, memfd, nonce) and maps theirs for the watchdog, and tells every
 * rank its UDP port, its host's IPv4 addresses and its nonce, for the peers on other nodes.
 *
 * The page is mapped through /proc/<pid>/fd/<fd>: the same user's process in the same pid
 * namespace, what single-copy reads need too (docs/COMM.md). The nonce, sent through MPI and
 * compared with the page, makes sure that the mapping is the peer's (not a process of the same
 * pid in another namespace); a page that cannot be mapped or does not match leaves that peer
 * unwatched, seen only through ZERO_COMM_TIMEOUT. Nothing here has a name in a file system, so a
 * killed job leaves nothing behind.
 *
 * Across nodes, a rank watches the ranks of other nodes within ZERO__BEAT_REMOTE_SPAN of it in comm
 * rank order (cyclic; a symmetric relation, so it sends to exactly those that watch it): a rank
 * alone on its node has such neighbours, and so does a whole node's edge when all of it stops. */
#ifdef ZERO_HAVE_MPI
#include "comm/internal.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* What a rank tells every rank of the communicator for the heartbeats across nodes (MPI_BYTE:
 * the ranks run the same build). */
typedef struct remote_rec {
    int64_t node; /* comm rank of its node's first rank: equal for the ranks of one node */
    uint64_t nonce;
    int32_t pid;
    int32_t port; /* 0: no socket; it is not watched across nodes */
    int32_t naddr;
    uint32_t addr[ZERO__BEAT_ADDRS]; /* network byte order */
    char host[32];
} remote_rec;

/* This host's IPv4 addresses other than loopback, up to ZERO__BEAT_ADDRS (interfaces that are up). */
static int host_addrs(uint32_t *addr) {
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0) return 0;
    int n = 0;
    for (const struct ifaddrs *i = all; i && n < ZERO__BEAT_ADDRS; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        const uint32_t a = ((const struct sockaddr_in *)(const void *)i->ifa_addr)->sin_addr.s_addr;
        if ((ntohl(a) >> 24) == 127) continue;
        addr[n++] = a;
    }
    freeifaddrs(all);
    return n;
}

/* Collective over comm: every rank's remote_rec; hands the watchdog those of other nodes within
 * ZERO__BEAT_REMOTE_SPAN (into list c->beat, made if 0). */
static zero_status join_remote(zero_comm *c, MPI_Comm comm, MPI_Comm node, const zero__cerr *e, const char *fn) {
    remote_rec mine = {0};
    mine.pid = (int32_t)getpid();
    int port = 0;
    uint64_t nonce = 0;
    if (zero__beat_udp(&port, &nonce)) {
        mine.port = port;
        mine.nonce = nonce;
        mine.naddr = host_addrs(mine.addr);
    }
    if (mine.naddr == 0) mine.port = 0;
    if (gethostname(mine.host, sizeof mine.host - 1) != 0) snprintf(mine.host, sizeof mine.host, "?");
    /* the node's first rank in comm: node was split with key c->rank, so it is node rank 0 */
    MPI_Group gn, gc;
    int zero = 0, first = c->rank;
    if (MPI_Comm_group(node, &gn) == MPI_SUCCESS) {
        if (MPI_Comm_group(comm, &gc) == MPI_SUCCESS) {
            MPI_Group_translate_ranks(gn, 1, &zero, gc, &first);
            MPI_Group_free(&gc);
        }
        MPI_Group_free(&gn);
    }
    mine.node = first;
    remote_rec *all = calloc((size_t)c->size, sizeof *all);
    zero__beat_remote *r = calloc(2 * ZERO__BEAT_REMOTE_SPAN, sizeof *r);
    if (!all || !r) {
        free(all);
        free(r);
        zero__cerr_set(e, "%s: out of memory for the heartbeats across nodes", fn);
        return ZERO_ERR_NOMEM;
    }
    const int rc = MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, comm);
    if (rc != MPI_SUCCESS) {
        free(all);
        free(r);
        char what[96];
        snprintf(what, sizeof what, "%s: MPI_Allgather (heartbeats across nodes)", fn);
        return zero__cerr_mpi(e, rc, what);
    }
    int n = 0;
    for (int t = 0; t < c->size && mine.port > 0; t++) {
        const int d = abs(t - c->rank), dist = d < c->size - d ? d : c->size - d;
        const remote_rec *q = &all[t];
        if (dist == 0 || dist > ZERO__BEAT_REMOTE_SPAN || q->node == mine.node || q->port <= 0 || q->naddr <= 0 ||
            n == 2 * ZERO__BEAT_REMOTE_SPAN)
            continue;
        zero__beat_remote *p = &r[n++];
        p->nonce = q->nonce;
        p->naddr = q->naddr < ZERO__BEAT_ADDRS ? q->naddr : ZERO__BEAT_ADDRS;
        memcpy(p->addr, q->addr, sizeof p->addr);
        p->port = q->port;
        p->rank = t;
        p->pid = q->pid;
        memcpy(p->host, q->host, sizeof p->host);
        p->host[sizeof p->host - 1] = 0;
    }
    const int id = n > 0 ? zero__beat_watch_remote(c->beat, r, n) : 0;
    if (id) c->beat = id;
    free(all);
    free(r);
    /* every rank now knows its remote peers' nonces: a datagram sent from here on is taken */
    const int brc = MPI_Barrier(comm);
    if (brc != MPI_SUCCESS) {
        char what[96];
        snprintf(what, sizeof what, "%s: MPI_Barrier (heartbeats across nodes)", fn);
        return zero__cerr_mpi(e, brc, what);
    }
    if (n > 0) zero__beat_hello(c->beat);
    return ZERO_OK;
}

/* Collective over node (nlocal ranks): maps the node peers' pages into a new list c->beat. */
static zero_status join_node(zero_comm *c, MPI_Comm node, int nlocal, const zero__cerr *e, const char *fn) {
    /* the same answer on every rank of the node, so that all or none of them exchange */
    if (nlocal < 2 || nlocal > BEAT_MAX_LOCAL) return ZERO_OK;
    /* per local rank: pid, memfd (-1: no heartbeat), nonce, comm rank */
    long long all[4 * BEAT_MAX_LOCAL];
    long long mine[4] = {(long long)getpid(), -1, 0, c->rank};
    int fd = -1;
    uint64_t nonce = 0;
    if (zero__beat_self(&fd, &nonce)) {
        mine[1] = fd;
        mine[2] = (long long)nonce;
    }
    const int rc = MPI_Allgather(mine, 4, MPI_LONG_LONG, all, 4, MPI_LONG_LONG, node);
    if (rc != MPI_SUCCESS) {
        char what[96];
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
    zero_status s = join_node(c, node, nlocal, e, fn);
    /* every rank of comm or none (all on one node): the same answer everywhere */
    if (s == ZERO_OK && nlocal < c->size) s = join_remote(c, comm, node, e, fn);
    MPI_Comm_free(&node);
    return s;
}
#endif
