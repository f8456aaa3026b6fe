/* The traffic counters by path (zero_comm_counters.path_bytes): plain MPI, the shared-memory
 * collectives inside a node, MPI between nodes; and the node split they rest on, against the
 * nodes named by the ranks' hostnames (or ZERO_COMM_FAKE_NODES' documented rule).
 * Under tests/mpi every rank shares one machine; tests/multinode runs the same program on
 * emulated hosts (network namespaces with their own hostnames), where the split must follow them. */
#include "comm/internal.h"
#include "harness.h"
#include "zero/zero.h"

#include <mpi.h>
#include <stdint.h>
#include <unistd.h>

static int R, N;

/* The node layout a communicator should see: node of every rank (nodes numbered by their first
 * rank), ranks per node L (0 when nodes differ in size), nodes K, this rank's local rank. */
typedef struct layout {
    int node_of[64];
    int K, L, local;
} layout;

static void finish_layout(layout *ly) {
    int counts[64] = {0};
    ly->K = 0;
    for (int r = 0; r < N; r++) {
        if (ly->node_of[r] + 1 > ly->K) ly->K = ly->node_of[r] + 1;
        counts[ly->node_of[r]]++;
    }
    ly->L = counts[0];
    for (int g = 1; g < ly->K; g++)
        if (counts[g] != ly->L) ly->L = 0;
    ly->local = 0;
    for (int r = 0; r < R; r++) ly->local += ly->node_of[r] == ly->node_of[R];
}

/* Nodes by hostname, numbered in the order of their first rank. */
static layout by_hostname(void) {
    layout ly;
    char names[64][64], mine[64] = {0};
    gethostname(mine, sizeof mine - 1);
    MPI_Allgather(mine, 64, MPI_CHAR, names, 64, MPI_CHAR, MPI_COMM_WORLD);
    int k = 0;
    for (int r = 0; r < N; r++) {
        ly.node_of[r] = -1;
        for (int q = 0; q < r; q++)
            if (!strcmp(names[q], names[r])) ly.node_of[r] = ly.node_of[q];
        if (ly.node_of[r] < 0) ly.node_of[r] = k++;
    }
    finish_layout(&ly);
    return ly;
}

/* ZERO_COMM_FAKE_NODES=K (consecutive ranks) or K:cyclic, cutting the real node(s) further:
 * docs/COMM.md. Used only where the real layout is one node. */
static layout fake(int k, int cyclic) {
    layout ly;
    if (k > N) k = N;
    for (int r = 0; r < N; r++) ly.node_of[r] = cyclic ? r % k : (int)((long long)r * k / N);
    finish_layout(&ly);
    return ly;
}

/* floor(f (n-1) B / n), the ring rule written out again (0 for one rank). */
static uint64_t ring(unsigned f, uint64_t bytes, int n) {
    return n <= 1 ? 0 : (uint64_t)((unsigned __int128)bytes * f * (unsigned)(n - 1) / (unsigned)n);
}

static zero_comm *make(const char *shm, const char *fake_nodes) {
    if (shm) setenv("ZERO_COMM_SHM", shm, 1);
    else unsetenv("ZERO_COMM_SHM");
    if (fake_nodes) setenv("ZERO_COMM_FAKE_NODES", fake_nodes, 1);
    else unsetenv("ZERO_COMM_FAKE_NODES");
    setenv("ZERO_COMM_ASYNC", "0", 1);
    zero_comm *c = NULL;
    if (zero_comm_init_mpi(&c, NULL) != ZERO_OK) {
        ZT_FAIL("zero_comm_init_mpi: %s", zero_comm_last_error(NULL));
        return NULL;
    }
    return c;
}

/* One communicator: the split it made, then each collective small (plain MPI) and large (the
 * window where it applies) with the path counters it must add. */
static void check(const char *name, zero_comm *c, const layout *ly) {
    if (!c) return;
    /* the window applies where at least two ranks share a node and every node has as many */
    const int shm = ly->L >= 2 && strcmp(name, "plain") != 0;
    ZT_CHECKF(!strcmp(zero_comm_backend(c), shm ? "mpi+shm" : "mpi"), "%s: backend %s, expected %s", name,
              zero_comm_backend(c), shm ? "mpi+shm" : "mpi");
    const zero__shm *s = zero__comm_mpi_shm(c);
    if (shm) {
        ZT_CHECKF(zero__shm_nodes(s) == ly->K && zero__shm_local_size(s) == ly->L && zero__shm_local_rank(s) == ly->local,
                  "%s: split into %d nodes of %d (local rank %d), expected %d of %d (%d)", name, zero__shm_nodes(s),
                  zero__shm_local_size(s), zero__shm_local_rank(s), ly->K, ly->L, ly->local);
    }
    /* 1009 floats: an all-reduce's L parts differ in length when L does not divide it */
    const size_t big = 1009 * 16 + 1, small = 16; /* elements per rank-block (RS/AG) or in all (AR) */
    float *a = calloc(big * (size_t)N, sizeof *a), *b = calloc(big * (size_t)N, sizeof *b);
    if (!a || !b) {
        ZT_FAIL("out of memory");
        exit(2);
    }
    for (int kind = 0; kind < 3; kind++) {
        for (int sz = 0; sz < 2; sz++) {
            const size_t n = sz ? big : small;
            zero_comm_reset_counters(c);
            zero_status st;
            uint64_t M; /* the full message, bytes */
            unsigned f = kind == 0 ? 4 : 2;
            if (kind == 0) {
                st = zero_comm_all_reduce(c, a, b, n, ZERO_DTYPE_FP32, ZERO_OP_SUM);
                M = n * 4;
            } else if (kind == 1) {
                st = zero_comm_reduce_scatter(c, a, b, n, ZERO_DTYPE_FP32, ZERO_OP_SUM);
                M = (uint64_t)n * 4 * (uint64_t)N;
            } else {
                st = zero_comm_all_gather(c, a, b, n, ZERO_DTYPE_FP32);
                M = (uint64_t)n * 4 * (uint64_t)N;
            }
            ZT_CHECKF(st == ZERO_OK, "%s: collective %d: %s", name, kind, zero_comm_last_error(c));
            zero_comm_counters ct;
            zero_comm_get_counters(c, &ct);
            uint64_t want[ZERO_COMM_PATH_COUNT] = {0, 0, 0};
            const int windowed = shm && M >= 16384; /* ZERO_COMM_SHM_MIN_BYTES' default */
            if (!windowed) {
                want[ZERO_COMM_PATH_MPI] = ring(f, M, N);
            } else {
                want[ZERO_COMM_PATH_SHM] = ring(f, M, ly->L);
                /* this rank's share: its all-reduce part, or its blocks on every node */
                uint64_t share = kind == 0 ? (uint64_t)(n * (size_t)(ly->local + 1) / (size_t)ly->L -
                                                        n * (size_t)ly->local / (size_t)ly->L) * 4
                                           : (uint64_t)n * 4 * (uint64_t)ly->K;
                want[ZERO_COMM_PATH_CROSS_NODE] = ring(f, share, ly->K);
            }
            for (int p = 0; p < ZERO_COMM_PATH_COUNT; p++)
                ZT_CHECKF(ct.path_bytes[p] == want[p], "%s: %s of %llu bytes: %s path %llu, expected %llu", name,
                          zero_coll_name((zero_coll)kind), (unsigned long long)M, zero_comm_path_name((zero_comm_path)p),
                          (unsigned long long)ct.path_bytes[p], (unsigned long long)want[p]);
            /* the flat rule is unchanged, and for blocks the two steps add up to it exactly */
            ZT_EQ_INT(ct.bytes[kind], ring(f, M, N));
            if (kind != 0 || !windowed)
                ZT_EQ_INT(ct.path_bytes[0] + ct.path_bytes[1] + ct.path_bytes[2], ring(f, M, N));
        }
    }
    zero_comm_reset_counters(c);
    ZT_OK(zero_comm_broadcast(c, a, 5000, ZERO_DTYPE_FP32, 0));
    zero_comm_counters ct;
    zero_comm_get_counters(c, &ct);
    ZT_EQ_INT(ct.path_bytes[ZERO_COMM_PATH_MPI], ring(2, 20000, N));
    ZT_EQ_INT(ct.path_bytes[ZERO_COMM_PATH_SHM] + ct.path_bytes[ZERO_COMM_PATH_CROSS_NODE], 0);
    free(a);
    free(b);
    zero_comm_free(c);
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &N);
    zt_rank = R;
    if (N > 64) {
        if (R == 0) printf("test_comm_paths: at most 64 ranks\n");
        MPI_Finalize();
        return 2;
    }
    const layout real = by_hostname();
    ZT_CHECK(zero_comm_path_name(ZERO_COMM_PATH_CROSS_NODE)[0] == 'c' && !strcmp(zero_comm_path_name(ZERO_COMM_PATH_COUNT), "invalid"));
    check("plain", make("0", NULL), &real);
    check("by host", make(NULL, NULL), &real);
    if (real.K == 1) {
        /* one machine: the hierarchical path on fake nodes */
        check("fake nodes 2", make(NULL, "2"), (layout[]){fake(2, 0)});
        check("fake nodes 2:cyclic", make(NULL, "2:cyclic"), (layout[]){fake(2, 1)});
    }
    if (R == 0)
        printf("test_comm_paths: %d ranks on %d node%s (%s ranks per node)\n", N, real.K, real.K == 1 ? "" : "s",
               real.L ? "equal" : "unequal");
    MPI_Finalize();
    return zt_finish("test_comm_paths");
}
