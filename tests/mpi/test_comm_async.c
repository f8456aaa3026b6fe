/* The in-node progress thread (ZERO_COMM_ASYNC=1) under load from the caller's thread: rounds of
 * non-blocking all-reduce (also in place), reduce-scatter and all-gather of sizes that take the
 * shared-memory path, waited in a rotating order or polled with zero_request_test while the
 * caller computes, every result exact (small integers in fp32). `make test-tsan` runs it under
 * ThreadSanitizer, where a race between the two threads is an error. */
#include "harness.h"
#include "zero/zero.h"

#include <mpi.h>
#include <stdlib.h>

#define ROUNDS 12
#define OPS    4

static int R, N;

/* Rank r's element i in round k: a small integer, so that every sum is exact in fp32. */
static float val(int r, size_t i, int k) { return (float)((r * 7 + (int)(i % 61) + k * 3) % 97 - 48); }

static float sum_over_ranks(size_t i, int k) {
    float s = 0;
    for (int r = 0; r < N; r++) s += val(r, i, k);
    return s;
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &N);
    zt_rank = R;
    setenv("ZERO_COMM_ASYNC", "1", 1); /* the thread, whatever the environment says */
    zero_comm *c = NULL;
    ZT_OK(zero_comm_init_mpi(&c, NULL));
    if (!c) {
        MPI_Finalize();
        return zt_finish("test_comm_async");
    }
    const size_t n = 24 * 1024; /* floats per block: 96 KiB, above the shared-memory threshold */
    float *ar = malloc(n * sizeof *ar), *ar_out = malloc(n * sizeof *ar_out), *inplace = malloc(n * sizeof *inplace);
    float *rs = malloc((size_t)N * n * sizeof *rs), *rs_out = malloc(n * sizeof *rs_out);
    float *ag = malloc(n * sizeof *ag), *ag_out = malloc((size_t)N * n * sizeof *ag_out);
    double *work = calloc(4096, sizeof *work);
    const int ok = ar && ar_out && inplace && rs && rs_out && ag && ag_out && work;
    ZT_CHECKF(ok, "out of memory");
    for (int k = 0; ok && k < ROUNDS; k++) {
        for (size_t i = 0; i < n; i++) ar[i] = inplace[i] = ag[i] = val(R, i, k);
        for (int b = 0; b < N; b++)
            for (size_t i = 0; i < n; i++) rs[(size_t)b * n + i] = val(R, (size_t)b * n + i, k);
        zero_request *req[OPS] = {NULL};
        ZT_OK(zero_comm_iall_reduce(c, ar, ar_out, n, ZERO_DTYPE_FP32, ZERO_OP_SUM, &req[0]));
        ZT_OK(zero_comm_ireduce_scatter(c, rs, rs_out, n, ZERO_DTYPE_FP32, ZERO_OP_SUM, &req[1]));
        ZT_OK(zero_comm_iall_gather(c, ag, ag_out, n, ZERO_DTYPE_FP32, &req[2]));
        ZT_OK(zero_comm_iall_reduce(c, inplace, inplace, n, ZERO_DTYPE_FP32, ZERO_OP_SUM, &req[3]));
        /* the caller's own work while the thread runs the queue */
        for (int j = 0; j < 4096; j++) work[j] = work[j] * 0.5 + k + j;
        if (k % 2 == 0) { /* wait, starting with a different request each round */
            for (int j = 0; j < OPS; j++) ZT_OK(zero_request_wait(req[(j + k) % OPS]));
        } else { /* poll them all to completion, computing between polls */
            int left = OPS;
            while (left > 0) {
                for (int j = 0; j < OPS; j++) {
                    if (!req[j]) continue;
                    int done = 0;
                    ZT_OK(zero_request_test(req[j], &done));
                    if (done) {
                        req[j] = NULL;
                        left--;
                    }
                }
                for (int j = 0; j < 4096; j++) work[j] += 1e-3 * j;
            }
        }
        int bad = 0;
        for (size_t i = 0; i < n; i++) {
            const float s = sum_over_ranks(i, k);
            bad += ar_out[i] != s || inplace[i] != s || rs_out[i] != sum_over_ranks((size_t)R * n + i, k);
        }
        for (int b = 0; b < N; b++)
            for (size_t i = 0; i < n; i++) bad += ag_out[(size_t)b * n + i] != val(b, i, k);
        ZT_CHECKF(bad == 0, "round %d: %d elements differ from the reference", k, bad);
    }
    if (N > 1 && !strcmp(zero_comm_backend(c), "mpi+shm"))
        ZT_CHECKF(zero_comm_progress_thread(c), "ZERO_COMM_ASYNC=1 on one node, but the collectives ran on the caller");
    zero_comm_free(c);
    free(ar);
    free(ar_out);
    free(inplace);
    free(rs);
    free(rs_out);
    free(ag);
    free(ag_out);
    free(work);
    const int rc = zt_finish("test_comm_async");
    int any = rc, all = 0;
    MPI_Allreduce(&any, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return all;
}
