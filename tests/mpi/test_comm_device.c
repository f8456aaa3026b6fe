/* Collectives on device memory, staged through pinned host memory (src/comm/comm_device.c), on
 * the fake device (its memory unaddressable by host code, its streams racing): all-reduce,
 * reduce-scatter and all-gather of fp32, bf16 and int32, over many staging chunks and one, give
 * bitwise the host collectives' results on the same inputs; the communicator's counters count
 * them as the host collective of the whole message; the device copies each byte once each way.
 * The same for the non-blocking forms, and the reductions with AVG (the host's division); qgZ's
 * device form refuses block 0. */
#include "comm/internal.h"
#include "harness.h"
#include "zero/zero.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

static zero_comm *W;
static int R, N;
static zero_op OP = ZERO_OP_SUM; /* the reductions' op (AVG: finished on the host's staging) */

/* rank r's input i: small integers (exact in bf16 and any sum order over <= 4 ranks) */
static void fill(void *buf, zero_dtype dt, size_t n, int r, int salt) {
    for (size_t i = 0; i < n; i++) {
        const int v = (int)((i * 131u + (size_t)r * 71u + (size_t)salt * 17u) % 61u) - 30;
        if (dt == ZERO_DTYPE_FP32) ((float *)buf)[i] = (float)v * 0.5f;
        else if (dt == ZERO_DTYPE_BF16) ((uint16_t *)buf)[i] = zero_fp32_to_bf16((float)v * 0.5f);
        else ((int32_t *)buf)[i] = v * 1000;
    }
}

/* nb: the non-blocking form — its send buffer overwritten on the device as soon as the call
 * returns (the message was staged at the call), then tested to its end (nb 1) or waited for (2) */
static void one(zero_device *d, zero_stream *s, int kind, zero_dtype dt, size_t count, int salt, int nb) {
    const size_t esz = zero_dtype_size(dt), nin = kind == 1 ? (size_t)N * count : count,
                 nout = kind == 2 ? (size_t)N * count : count;
    char *hin = malloc(nin * esz), *want = malloc(nout * esz), *got = malloc(nout * esz);
    void *din = NULL, *dout = NULL;
    fill(hin, dt, nin, R, salt);
    zero_comm_counters c0, c1, c2;
    zero_comm_get_counters(W, &c0);
    /* the host collective on the same input: the reference */
    zero_request *rq = NULL;
    if (kind == 0) ZT_OK(zero_comm_iall_reduce(W, hin, want, count, dt, OP, &rq));
    else if (kind == 1) ZT_OK(zero_comm_ireduce_scatter(W, hin, want, count, dt, OP, &rq));
    else ZT_OK(zero_comm_iall_gather(W, hin, want, count, dt, &rq));
    ZT_OK(zero_request_wait(rq));
    zero_comm_get_counters(W, &c1);
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, nin * esz, &din));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, nout * esz, &dout));
    zero_device_counters d0, d1;
    ZT_OK(zero_stream_copy(s, din, hin, nin * esz));
    ZT_OK(zero_stream_sync(s));
    zero_device_counters_get(d, &d0);
    zero_status st;
    if (nb) {
        zero_request *dq = NULL;
        st = kind == 0   ? zero_comm_iall_reduce_device(W, s, din, dout, count, dt, OP, &dq)
             : kind == 1 ? zero_comm_ireduce_scatter_device(W, s, din, dout, count, dt, OP, &dq)
                         : zero_comm_iall_gather_device(W, s, din, dout, count, dt, &dq);
        if (st == ZERO_OK) st = zero_stream_memset(s, din, 0xff, nin * esz); /* NaN: the result must not see it */
        for (int done = nb == 2; st == ZERO_OK && !done;) st = zero_request_test(dq, &done);
        if (st == ZERO_OK && nb == 2) st = zero_request_wait(dq);
    } else {
        st = kind == 0   ? zero_comm_all_reduce_device(W, s, din, dout, count, dt, OP)
             : kind == 1 ? zero_comm_reduce_scatter_device(W, s, din, dout, count, dt, OP)
                         : zero_comm_all_gather_device(W, s, din, dout, count, dt);
    }
    ZT_CHECKF(st == ZERO_OK, "collective %d (non-blocking %d): %s", kind, nb, zero_comm_last_error(W));
    zero_device_counters_get(d, &d1);
    zero_comm_get_counters(W, &c2);
    ZT_OK(zero_stream_copy(s, got, dout, nout * esz));
    ZT_OK(zero_stream_sync(s));
    ZT_CHECKF(!memcmp(got, want, nout * esz),
              "collective %d dtype %d count %zu (non-blocking %d): differs from the host's", kind, (int)dt, count, nb);
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

/* Two non-blocking collectives in flight at once, waited for in the other order, and the pinned
 * staging they held released (the device's pinned bytes back where they were) once the results'
 * copies have run: the waits queue them without waiting (the lazy device runs none before a sync),
 * so right after the waits the staging is still held. */
static void two_in_flight(zero_device *d, zero_stream *s) {
    const size_t count = 3001, esz = 4;
    /* bytes: the results are compared bit for bit */
    char *h = malloc((size_t)N * count * esz), *want_ag = malloc((size_t)N * count * esz),
         *want_ar = malloc(count * esz);
    char *got = malloc((size_t)N * count * esz);
    fill(h, ZERO_DTYPE_FP32, (size_t)N * count, R, 99);
    zero_request *rq = NULL;
    ZT_OK(zero_comm_iall_gather(W, h, want_ag, count, ZERO_DTYPE_FP32, &rq));
    ZT_OK(zero_request_wait(rq));
    ZT_OK(zero_comm_iall_reduce(W, h, want_ar, count, ZERO_DTYPE_FP32, ZERO_OP_SUM, &rq));
    ZT_OK(zero_request_wait(rq));
    void *din = NULL, *dag = NULL, *dar = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, (size_t)N * count * esz, &din));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, (size_t)N * count * esz, &dag));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, count * esz, &dar));
    ZT_OK(zero_stream_copy(s, din, h, (size_t)N * count * esz));
    zero_mem_stats p0, p1;
    zero_device_mem_stats(d, ZERO_SPACE_HOST_PINNED, &p0);
    zero_request *a = NULL, *b = NULL;
    ZT_OK(zero_comm_iall_gather_device(W, s, din, dag, count, ZERO_DTYPE_FP32, &a));
    ZT_OK(zero_comm_iall_reduce_device(W, s, din, dar, count, ZERO_DTYPE_FP32, ZERO_OP_SUM, &b));
    ZT_OK(zero_request_wait(b));
    ZT_OK(zero_request_wait(a));
    zero_device_mem_stats(d, ZERO_SPACE_HOST_PINNED, &p1);
    ZT_CHECKF(p1.total_current > p0.total_current,
              "pinned %zu bytes after the waits, %zu before: the waits waited for "
              "the results' copies",
              p1.total_current, p0.total_current);
    ZT_OK(zero_device_sync(d));
    zero_device_mem_stats(d, ZERO_SPACE_HOST_PINNED, &p1);
    ZT_EQ_INT(p1.total_current, p0.total_current);
    /* both messages were staged at once: the all-gather's count in and N x count out, the
     * all-reduce's count (in place) */
    ZT_CHECKF(p1.total_peak >= p0.total_current + ((size_t)N + 2) * count * esz,
              "pinned peak %zu: expected %zu more than %zu", p1.total_peak, ((size_t)N + 2) * count * esz,
              p0.total_current);
    ZT_OK(zero_stream_copy(s, got, dag, (size_t)N * count * esz));
    ZT_CHECKF(!memcmp(got, want_ag, (size_t)N * count * esz), "all-gather with an all-reduce in flight: differs");
    ZT_OK(zero_stream_copy(s, got, dar, count * esz));
    ZT_CHECKF(!memcmp(got, want_ar, count * esz), "all-reduce with an all-gather in flight: differs");
    zero_device_release(d, din);
    zero_device_release(d, dag);
    zero_device_release(d, dar);
    free(h);
    free(want_ag);
    free(want_ar);
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
    o.lazy = 1; /* an operation runs once something waits for it: a missing wait is a wrong number */
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
                one(d, s, kind, dts[t], 5003, kind * 3 + t, 0);
                one(d, s, kind, dts[t], 1, kind * 3 + t + 50, 0);
            }
    }
    /* the non-blocking forms stage the whole message (no chunks) */
    for (int kind = 0; kind < 3; kind++)
        for (int t = 0; t < 3; t++)
            for (int nb = 1; nb <= 2; nb++) {
                one(d, s, kind, dts[t], 5003, kind * 3 + t + 7 * nb, nb);
                one(d, s, kind, dts[t], 1, kind * 3 + t + 70 * nb, nb);
            }
    two_in_flight(d, s);
    /* AVG: the host collective divides on the pinned staging, the result goes up as it is */
    OP = ZERO_OP_AVG;
    for (int ch = 0; ch < 2; ch++) {
        zero__comm_dev_chunk_bytes = chunks[ch];
        for (int kind = 0; kind < 2; kind++)
            for (int t = 0; t < 2; t++)
                for (int nb = 0; nb <= 2; nb++) one(d, s, kind, dts[t], 5003, kind * 3 + t + 11 * nb, nb);
    }
    OP = ZERO_OP_SUM;
    /* qgZ's device form: block 0 is refused with one line, on every rank, before anything moves */
    {
        void *din = NULL, *dout = NULL;
        ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, (size_t)N * 64 * 4, &din));
        ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, 64 * 4, &dout));
        zero_comm_counters c0, c1;
        zero_comm_get_counters(W, &c0);
        zero_request *dq = NULL;
        ZT_EQ_INT(zero_comm_ireduce_scatter_q8_device(W, s, din, dout, 64, ZERO_DTYPE_FP32, 0, &dq),
                  ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(strstr(zero_comm_last_error(W), "block 0: expected at least 1") != NULL, "%s",
                  zero_comm_last_error(W));
        ZT_CHECK(dq == NULL);
        zero_comm_get_counters(W, &c1);
        ZT_CHECK(c1.calls[ZERO_COLL_REDUCE_SCATTER] == c0.calls[ZERO_COLL_REDUCE_SCATTER]);
        zero_device_release(d, din);
        zero_device_release(d, dout);
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
