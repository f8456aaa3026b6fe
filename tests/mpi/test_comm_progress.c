/* zero_comm_progress moves a non-blocking collective while its rank computes: on plain MPI (no
 * shared-memory window), rank 0 posts a large all-gather and then computes for PHASE seconds
 * before waiting, while the other ranks post the same all-gather a little later (so that their
 * messages find rank 0 computing, not inside its own post) and wait at once. When rank 0
 * calls zero_comm_progress between its pieces of work, the others' waits end long before rank 0
 * waits; when it does not (the control, which shows the check can fail), MPI moves rank 0's side
 * only in its wait and the others wait the whole PHASE. Also: progress on the self backend and
 * on NULL, and an all-gather completed with progress calls in flight gives exact results. */
#include "harness.h"
#include "zero/zero.h"

#include <mpi.h>
#include <stdlib.h>
#include <time.h>

#define PHASE 1.0 /* seconds rank 0 computes between posting and waiting */

static int R, N;

static void nap(void) {
    const struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
}

/* One round: every rank all-gathers n floats; rank 0 computes (naps) for PHASE seconds, calling
 * zero_comm_progress between naps when `poll`. Returns the slowest wait of ranks 1.. (seconds,
 * from post to completion); checks the gathered values. */
static double round_wait(zero_comm *c, float *send, float *recv, size_t n, int poll, int k) {
    for (size_t i = 0; i < n; i++) send[i] = (float)((R * 31 + (int)(i % 1000) + k) % 251);
    MPI_Barrier(MPI_COMM_WORLD);
    if (R != 0)
        for (int i = 0; i < 50; i++) nap();
    zero_request *req = NULL;
    const double t0 = zero_now();
    ZT_OK(zero_comm_iall_gather(c, send, recv, n, ZERO_DTYPE_FP32, &req));
    if (R == 0)
        while (zero_now() - t0 < PHASE) {
            nap();
            if (poll) ZT_OK(zero_comm_progress(c));
        }
    ZT_OK(zero_request_wait(req));
    double waited = R == 0 ? 0.0 : zero_now() - t0, slowest = 0.0;
    MPI_Allreduce(&waited, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int bad = 0;
    for (int r = 0; r < N; r++)
        for (size_t i = 0; i < n; i++) bad += recv[(size_t)r * n + i] != (float)((r * 31 + (int)(i % 1000) + k) % 251);
    ZT_CHECKF(!bad, "round %d (progress %s): %d gathered elements wrong", k, poll ? "on" : "off", bad);
    return slowest;
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &N);
    zt_rank = R;

    zero_comm *self = NULL;
    ZT_OK(zero_comm_init_self(&self));
    ZT_CHECK(zero_comm_progress(self) == ZERO_OK);
    ZT_CHECK(zero_comm_progress(NULL) == ZERO_ERR_INVALID_ARG);
    zero_comm_free(self);

    zero_comm_options o;
    zero_comm_options_default(&o);
    o.shm = 0; /* plain MPI: the path whose non-blocking calls need progress */
    zero_comm *c = NULL;
    ZT_OK(zero_comm_init_mpi_with(&c, NULL, &o, NULL));
    const size_t n = (size_t)2 << 20; /* 8 MiB a rank: far above any eager limit */
    float *send = malloc(n * sizeof *send), *recv = malloc((size_t)N * n * sizeof *recv);
    ZT_CHECKF(c && send && recv, "setup failed");
    if (c && send && recv) {
        ZT_OK(zero_comm_progress(c)); /* nothing in flight: a no-op */
        const double polled = round_wait(c, send, recv, n, 1, 1);
        const double control = round_wait(c, send, recv, n, 0, 2);
        if (R == 0) printf("the other ranks waited %.3f s with progress calls, %.3f s without\n", polled, control);
        if (N > 1) {
            ZT_CHECKF(control > 0.7 * PHASE, "without progress calls the others waited %.3f s: expected about %.1f s "
                      "(the control: MPI moves rank 0's side only in its wait)", control, PHASE);
            ZT_CHECKF(polled < 0.5 * PHASE, "with progress calls the others waited %.3f s: expected well under %.1f s",
                      polled, PHASE);
        }
    }
    zero_comm_free(c);
    free(send);
    free(recv);
    const int rc = zt_finish("test_comm_progress");
    int any = rc, all = 0;
    MPI_Allreduce(&any, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return all;
}
