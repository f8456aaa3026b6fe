/* Non-blocking reduce-scatters and all-gathers through the window across nodes with their
 * cross-node step deferred (docs/COMM.md, "Non-blocking calls across nodes"; 2 fake nodes of 2
 * ranks, blocked and cyclic): rounds of iall_gather, ireduce_scatter (also in place), a blocking
 * all-reduce between them and an iall_reduce, of fp32 and bf16 sizes that take the window (one
 * that takes single copy too, where the system allows it), waited in a rotating order, polled
 * with zero_request_test while the caller computes, or left in flight across later calls: every
 * result exact (small integers), the calls counted as deferred, and with cross_overlap 0 none
 * deferred and the same results. On 1-3 ranks (one node, or no window) nothing is deferred. */
#include "comm/internal.h"
#include "harness.h"
#include "zero/zero.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 6
#define OPS    5

static int R, N;

static float val(int r, size_t i, int k) { return (float)((r * 7 + (int)(i % 61) + k * 3) % 97 - 48); }

static float sum_over_ranks(size_t i, int k) {
    float s = 0;
    for (int r = 0; r < N; r++) s += val(r, i, k);
    return s;
}

static void put(void *buf, zero_dtype dt, size_t i, float v) {
    if (dt == ZERO_DTYPE_FP32) ((float *)buf)[i] = v;
    else ((uint16_t *)buf)[i] = zero_fp32_to_bf16(v);
}
static float get(const void *buf, zero_dtype dt, size_t i) {
    return dt == ZERO_DTYPE_FP32 ? ((const float *)buf)[i] : zero_bf16_to_fp32(((const uint16_t *)buf)[i]);
}

/* One communicator's rounds; returns the calls it deferred. */
static uint64_t rounds(zero_comm *c, size_t n, zero_dtype dt) {
    const size_t es = zero_dtype_size(dt);
    unsigned char *rs = malloc((size_t)N * n * es), *rs_out = malloc(n * es), *ip = malloc((size_t)N * n * es);
    unsigned char *ag = malloc(n * es), *ag_out = malloc((size_t)N * n * es), *ag_ip = malloc((size_t)N * n * es);
    unsigned char *ar = malloc(n * es), *ar_out = malloc(n * es);
    double *work = calloc(4096, sizeof *work);
    const uint64_t before = zero__shm_deferred_calls(zero__comm_mpi_shm(c));
    if (!(rs && rs_out && ip && ag && ag_out && ag_ip && ar && ar_out && work)) {
        ZT_CHECKF(0, "out of memory");
        free(rs), free(rs_out), free(ip), free(ag), free(ag_out), free(ag_ip), free(ar), free(ar_out), free(work);
        return 0;
    }
    for (int k = 0; k < ROUNDS; k++) {
        for (size_t i = 0; i < n; i++) {
            put(ag, dt, i, val(R, i, k + 1));
            put(ag_ip, dt, (size_t)R * n + i, val(R, i, k + 2));
            put(ar, dt, i, val(R, i, k + 3));
        }
        for (size_t i = 0; i < (size_t)N * n; i++) put(rs, dt, i, val(R, i, k)), put(ip, dt, i, val(R, i, k + 4));
        zero_request *req[OPS] = {NULL};
        ZT_OK(zero_comm_iall_gather(c, ag, ag_out, n, dt, &req[0]));
        ZT_OK(zero_comm_ireduce_scatter(c, rs, rs_out, n, dt, ZERO_OP_SUM, &req[1]));
        /* a blocking call through the window while both are in flight: it runs the node steps
         * still pending first, on every rank alike */
        if (k % 3 == 2) ZT_OK(zero_comm_all_reduce(c, ar, ar_out, n, dt, ZERO_OP_SUM));
        else ZT_OK(zero_comm_iall_reduce(c, ar, ar_out, n, dt, ZERO_OP_SUM, &req[2]));
        ZT_OK(zero_comm_iall_gather(c, ag_ip + (size_t)R * n * es, ag_ip, n, dt, &req[3]));
        ZT_OK(zero_comm_ireduce_scatter(c, ip, ip + (size_t)R * n * es, n, dt, ZERO_OP_SUM, &req[4]));
        for (int j = 0; j < 4096; j++) work[j] = work[j] * 0.5 + k + j;
        if (k % 2 == 0) { /* wait, starting with a different request each round */
            for (int j = 0; j < OPS; j++)
                if (req[(j + k) % OPS]) ZT_OK(zero_request_wait(req[(j + k) % OPS]));
        } else { /* poll them all to completion, last first, computing between polls */
            int left = 0;
            for (int j = 0; j < OPS; j++) left += req[j] != NULL;
            while (left > 0) {
                for (int j = OPS - 1; j >= 0; j--) {
                    if (!req[j]) continue;
                    int done = 0;
                    ZT_OK(zero_request_test(req[j], &done));
                    if (done) req[j] = NULL, left--;
                }
                for (int j = 0; j < 4096; j++) work[j] += 1e-3 * j;
            }
        }
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            bad += get(ar_out, dt, i) != sum_over_ranks(i, k + 3);
            bad += get(rs_out, dt, i) != sum_over_ranks((size_t)R * n + i, k);
            bad += get(ip, dt, (size_t)R * n + i) != sum_over_ranks((size_t)R * n + i, k + 4);
        }
        for (int b = 0; b < N; b++)
            for (size_t i = 0; i < n; i++) {
                bad += get(ag_out, dt, (size_t)b * n + i) != val(b, i, k + 1);
                bad += get(ag_ip, dt, (size_t)b * n + i) != val(b, i, k + 2);
            }
        ZT_CHECKF(bad == 0, "round %d, %zu elements a block, %s: %zu wrong", k, n, zero_dtype_name(dt), bad);
    }
    /* a request left in flight across later blocking calls, then waited */
    zero_request *late = NULL;
    for (size_t i = 0; i < n; i++) put(ag, dt, i, val(R, i, 9));
    ZT_OK(zero_comm_iall_gather(c, ag, ag_out, n, dt, &late));
    /* rank 0 completes it by polling (its node step then runs) while the others go on to
     * blocking calls: theirs must run the gather's node step first, as rank 0 did */
    for (int done = 0; R == 0 && !done;) {
        ZT_OK(zero_request_test(late, &done));
        if (done) late = NULL;
    }
    for (int j = 0; j < 3; j++) ZT_OK(zero_comm_all_reduce(c, ar, ar_out, n, dt, ZERO_OP_SUM));
    if (late) ZT_OK(zero_request_wait(late));
    size_t bad = 0;
    for (int b = 0; b < N; b++)
        for (size_t i = 0; i < n; i++) bad += get(ag_out, dt, (size_t)b * n + i) != val(b, i, 9);
    ZT_CHECKF(bad == 0, "the gather left in flight: %zu wrong", bad);
    const uint64_t deferred = zero__shm_deferred_calls(zero__comm_mpi_shm(c)) - before;
    free(rs), free(rs_out), free(ip), free(ag), free(ag_out), free(ag_ip), free(ar), free(ar_out), free(work);
    return deferred;
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &N);
    zt_rank = R;
    /* 4 ranks: 2 fake nodes of 2; fewer: one node (or no window), where nothing is deferred */
    const int K = N == 4 ? 2 : 1;
    { /* a value other than 0 and 1 fails every rank alike, naming the field (rank 0's rules) */
        zero_comm_options o;
        zero_comm_options_default(&o);
        o.cross_overlap = 3;
        zero_error err = {{0}};
        zero_comm *c = NULL;
        ZT_EQ_INT(zero_comm_init_mpi_with(&c, NULL, &o, &err), ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(c == NULL && strstr(err.msg, "zero_comm_options.cross_overlap '3': expected 0 (off) or 1"), "%s",
                  err.msg);
    }
    const size_t sizes[2] = {6000, 300000}; /* 24 KB a block: the window; 1.2 MB: single copy too */
    for (int cyclic = 0; cyclic < 2; cyclic++)
        for (int on = 1; on >= 0; on--) {
            zero_comm_options o;
            zero_comm_options_default(&o);
            o.fake_nodes = K;
            o.fake_cyclic = cyclic;
            o.async = 0;
            o.cross_overlap = on;
            zero_comm *c = NULL;
            ZT_OK(zero_comm_init_mpi_with(&c, NULL, &o, NULL));
            if (!c) break;
            ZT_CHECK(zero__shm_nodes(zero__comm_mpi_shm(c)) == (N == 4 ? 2 : N > 1 ? 1 : 0));
            for (int s = 0; s < 2; s++)
                for (int d = 0; d < 2; d++) {
                    const zero_dtype dt = d ? ZERO_DTYPE_BF16 : ZERO_DTYPE_FP32;
                    const uint64_t deferred = rounds(c, sizes[s], dt);
                    /* 4 a round (2 gathers, 2 reduce-scatters) and the late gather */
                    ZT_CHECKF(deferred == (on && K == 2 ? 4u * ROUNDS + 1 : 0),
                              "cross_overlap %d, %s%s, %zu: %llu calls deferred", on, zero_dtype_name(dt),
                              cyclic ? ", cyclic" : "", sizes[s], (unsigned long long)deferred);
                }
            zero_comm_free(c);
        }
    MPI_Finalize();
    return zt_finish("test_comm_overlap");
}
