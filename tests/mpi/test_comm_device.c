/* Collectives on device memory, staged through pinned host memory (src/comm/comm_device.c), on
 * the fake device (its memory unaddressable by host code, its streams racing): all-reduce,
 * reduce-scatter and all-gather of fp32, bf16 and int32, over many staging chunks and one, give
 * bitwise the host collectives' results on the same inputs; the communicator's counters count
 * them as the host collective of the whole message; the device copies each byte once each way. */
#include "comm/internal.h"
#include "harness.h"
#include "zero/zero.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static zero_comm *W;
static int R, N;

/* rank r's input i: small integers (exact in bf16 and any sum order over <= 4 ranks) */
static void fill(void *buf, zero_dtype dt, size_t n, int r, int salt) {
    for (size_t i = 0; i < n; i++) {
        const int v = (int)((i * 131u + (size_t)r * 71u + (size_t)salt * 17u) % 61u) - 30;
        if (dt == ZERO_DTYPE_FP32) ((float *)buf)[i] = (float)v * 0.5f;
        else if (dt == ZERO_DTYPE_BF16) ((uint16_t *)buf)[i] = zero_fp32_to_bf16((float)v * 0.5f);
        else ((int32_t *)buf)[i] = v * 1000;
    }
}

static void one(zero_device *d, zero_stream *s, int kind, zero_dtype dt, size_t count, int salt) {
    const size_t esz = zero_dtype_size(dt), nin = kind == 1 ? (size_t)N * count : count,
                 nout = kind == 2 ? (size_t)N * count : count;
    char *hin = malloc(nin * esz), *want = malloc(nout * esz), *got = malloc(nout * esz);
    void *din = NULL, *dout = NULL;
    fill(hin, dt, nin, R, salt);
    zero_comm_counters c0, c1, c2;
    zero_comm_get_counters(W, &c0);
    /* the host collective on the same input: the reference */
    zero_request *rq = NULL;
    if (kind == 0) ZT_OK(zero_comm_iall_reduce(W, hin, want, count, dt, ZERO_OP_SUM, &rq));
    else if (kind == 1) ZT_OK(zero_comm_ireduce_scatter(W, hin, want, count, dt, ZERO_OP_SUM, &rq));
    else ZT_OK(zero_comm_iall_gather(W, hin, want, count, dt, &rq));
    ZT_OK(zero_request_wait(rq));
    zero_comm_get_counters(W, &c1);
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, nin * esz, &din));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, nout * esz, &dout));
    zero_device_counters d0, d1;
    ZT_OK(zero_stream_copy(s, din, hin, nin * esz));
    ZT_OK(zero_stream_sync(s));
    zero_device_counters_get(d, &d0);
    zero_status st = kind == 0   ? zero_comm_all_reduce_device(W, s, din, dout, count, dt, ZERO_OP_SUM)
                     : kind == 1 ? zero_comm_reduce_scatter_device(W, s, din, dout, count, dt, ZERO_OP_SUM)
                                 : zero_comm_all_gather_device(W, s, din, dout, count, dt);
    ZT_CHECKF(st == ZERO_OK, "collective %d: %s", kind, zero_comm_last_error(W));
    zero_device_counters_get(d, &d1);
    zero_comm_get_counters(W, &c2);
    ZT_OK(zero_stream_copy(s, got, dout, nout * esz));
    ZT_OK(zero_stream_sync(s));
    ZT_CHECKF(!memcmp(got, want, nout * esz), "collective %d dtype %d count %zu: differs from the host's", kind,
              (int)dt, count);
    const int coll = kind == 0 ? ZERO_COLL_ALL_REDUCE : kind == 1 ? ZERO_COLL_REDUCE_SCATTER : ZERO_COLL_ALL_GATHER;
    ZT_EQ_INT(c2.bytes[coll] - c1.bytes[coll], c1.bytes[coll] - c0.bytes[coll]);
    ZT_EQ_INT(d1.bytes[ZERO_COPY_D2H] - d0.bytes[ZERO_COPY_D2H], nin * esz);
    ZT_EQ_INT(d1.bytes[ZERO_COPY_H2D] - d0.bytes[ZERO_COPY_H2D], nout * esz);
    zero_device_release(d, din);
    zero_device_release(d, dout);
    free(hin);
    free(want);
    free(got);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    zero_error err;
    if (zero_comm_init_mpi(&W, NULL) != ZERO_OK) {
        fprintf(stderr, "comm: cannot start the communicator\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    R = zero_comm_rank(W);
    N = zero_comm_size(W);
    zt_rank = R;
    zero_device_options o;
    zero_device_options_default(&o);
    o.backend = "fake";
    o.capacity = 64u << 20;
    o.pinned_capacity = 64u << 20;
    o.max_delay_us = 30;
    o.seed = (uint64_t)R + 1;
    zero_device *d = NULL;
    zero_stream *s = NULL;
    ZT_OK(zero_device_create(&d, &o, &err));
    ZT_OK(zero_stream_create(d, &s));
    const zero_dtype dts[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_INT32};
    const size_t chunks[2] = {(size_t)4 << 20, 1000}; /* one chunk; many (and a short last one) */
    for (int ch = 0; ch < 2; ch++) {
        zero__comm_dev_chunk_bytes = chunks[ch];
        for (int kind = 0; kind < 3; kind++)
            for (int t = 0; t < 3; t++) {
                one(d, s, kind, dts[t], 5003, kind * 3 + t);
                one(d, s, kind, dts[t], 1, kind * 3 + t + 50);
            }
    }
    zero_stream_free(s);
    zero_device_free(d);
    zero_comm_free(W);
    int fails = zt_failures, all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (R == 0) printf("test_comm_device: %d checks on rank 0, %d failed on all ranks\n", zt_checks, all);
    MPI_Finalize();
    return all ? 1 : 0;
}
