/* Heartbeats between real ranks: every communicator of more than one rank per node watches its
 * node peers (a split too), and a slow rank is not a stopped one — the last rank sleeps, then
 * computes, three times the heartbeat limit (1 s, timeout off) before it joins an all-reduce, and
 * the others wait for it and get the exact sum. (A stopped rank ending the job is
 * tests/cli/test_launch.sh; the watchdog's judgement alone, tests/unit/test_comm_watchdog.c.) */
#include "comm/internal.h"
#include "harness.h"
#include "zero/zero.h"

#include <mpi.h>
#include <time.h>

#define LATE 3.0 /* seconds the last rank is late, three times heartbeat_s */

static int R, N;

static void late_all_reduce(zero_comm *c, int busy, int k) {
    if (R == N - 1 && N > 1) {
        const double t0 = zero_now();
        if (busy) {
            volatile double x = 0;
            while (zero_now() - t0 < LATE) x += 1e-9;
        } else {
            const struct timespec q = {(time_t)LATE, 0};
            nanosleep(&q, NULL);
        }
    }
    int64_t v = R + k, sum = 0;
    const double t0 = zero_now();
    ZT_OK(zero_comm_all_reduce(c, &v, &sum, 1, ZERO_DTYPE_INT64, ZERO_OP_SUM));
    ZT_EQ_INT(sum, (int64_t)N * (N - 1) / 2 + (int64_t)N * k);
    if (R == 0 && N > 1)
        printf("%s last rank: waited %.2f s with a heartbeat limit of 1 s\n", busy ? "computing" : "sleeping",
               zero_now() - t0);
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &N);
    zt_rank = R;

    zero_comm_options o;
    zero_comm_options_default(&o);
    o.heartbeat_s = 1;
    o.timeout_s = 0;
    zero_comm *c = NULL;
    ZT_OK(zero_comm_init_mpi_with(&c, NULL, &o, NULL));
    if (c) {
        /* the test's ranks share one node: each watches the others */
        ZT_CHECKF(N > 1 ? c->beat > 0 : c->beat == 0, "size %d: beat list %d", N, c->beat);
        ZT_EQ_INT(c->heartbeat_ns, 1000000000LL);
        late_all_reduce(c, 0, 1);
        late_all_reduce(c, 1, 2);
        /* a split keeps the settings and watches its own peers */
        zero_comm *half = NULL;
        ZT_OK(zero_comm_split(c, R % 2, R, &half));
        if (half) {
            const int n = zero_comm_size(half);
            ZT_CHECKF(n > 1 ? half->beat > 0 && half->beat != c->beat : half->beat == 0, "split of %d: beat list %d", n,
                      half->beat);
            ZT_EQ_INT(half->heartbeat_ns, 1000000000LL);
        }
        zero_comm_free(half);
    }
    zero_comm_free(c);
    const int rc = zt_finish("test_comm_heartbeat");
    int any = rc, all = 0;
    MPI_Allreduce(&any, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return all;
}
