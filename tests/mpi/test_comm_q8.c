/* qgZ's quantized reduce-scatter (zero_comm_ireduce_scatter_q8) against an oracle built from
 * zero/quant.h's scalar functions (zero_quant_blockwise / zero_dequant_blockwise on int8's linear
 * map) and the documented order of the sums, bit for bit, in fp32, bf16 and fp16, blocks of 1, 32
 * and 2048, counts with partial blocks, blocking and not:
 *   - plain MPI (the shared-memory collectives off): every other rank's block coded, this rank's
 *     as it is, summed in fp32 in rank order, rounded once;
 *   - with the shared-memory collectives on and every rank on one node: the exact reduce-scatter's
 *     bits and bytes, whatever the message's size (nothing crosses a node);
 *   - on 2 fake nodes (4 ranks): the node step exact (each node's sum in its dtype), the
 *     cross-node step coded and summed in node order;
 * the counters count size x zero_quant_msg_bytes as a reduce-scatter where it codes; the values differ from the
 * exact reduce-scatter's where something was coded; bad arguments are refused naming them.
 * Runs under mpiexec with 1-4 ranks. */
#include "harness.h"
#include "zero/zero.h"

#include <math.h>

static int R, N;

static zero_comm *make(int shm, int fake_nodes) {
    zero_comm_options o;
    zero_comm_options_default(&o);
    o.shm = shm;
    o.shm_min_bytes = 0; /* every collective through the window when it is on */
    o.async = 0;
    o.fake_nodes = fake_nodes;
    zero_comm *c = NULL;
    zero_error err = {{0}};
    if (zero_comm_init_mpi_with(&c, NULL, &o, &err) != ZERO_OK) {
        fprintf(stderr, "zero_comm_init_mpi_with: %s\n", err.msg);
        exit(1);
    }
    return c;
}

/* Rank r's value i of its send buffer (N blocks of count), as fp32 before rounding to dt. */
static float value(int r, size_t i) {
    const uint64_t h = (uint64_t)(r + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;
    const double u = (double)((h ^ (h >> 29)) % 1000003) / 1000003.0 - 0.5;
    return (float)(u * (1.0 + (double)(i % 7)));
}

/* x rounded to dt and back (dt's value as fp32). */
static float in_dt(float x, zero_dtype dt) {
    uint16_t h;
    float y = x;
    if (dt == ZERO_DTYPE_FP32) return x;
    zero_convert(&x, ZERO_DTYPE_FP32, &h, dt, 1, ZERO_IMPL_SCALAR);
    zero_convert(&h, dt, &y, ZERO_DTYPE_FP32, 1, ZERO_IMPL_SCALAR);
    return y;
}

/* v (n fp32 values) coded and decoded by the scalar references, in blocks of B. */
static void code_decode(const float *v, size_t n, size_t B, float *out) {
    float map[256];
    zero_quant_linear_map(map);
    uint8_t *idx = malloc(n ? n : 1);
    float *am = malloc((n / B + 2) * sizeof *am);
    zero_quant_blockwise(v, n, B, map, idx, am);
    zero_dequant_blockwise(idx, am, map, B, 0, n, out);
    free(idx), free(am);
}

/* The oracle of this rank's block: nodes of L consecutive ranks (L = N: one node, or plain MPI
 * with L = 1: every rank its own "node"). Each node's sum of its ranks' values (fp32, in local
 * order, rounded to dt), then the nodes' sums in node order in fp32, this rank's node's as it is,
 * every other node's coded and decoded, rounded to dt. With one node: that node's sum. */
static void oracle(size_t count, zero_dtype dt, size_t B, int L, float *want) {
    const int K = N / L, mine = R / L;
    float *node = malloc(count * sizeof *node), *dec = malloc(count * sizeof *dec);
    float *acc = calloc(count, sizeof *acc);
    for (int k = 0; k < K; k++) {
        for (size_t i = 0; i < count; i++) {
            float s = in_dt(value(k * L, (size_t)R * count + i), dt);
            for (int t = 1; t < L; t++) s += in_dt(value(k * L + t, (size_t)R * count + i), dt);
            node[i] = in_dt(s, dt);
        }
        if (k != mine) code_decode(node, count, B, dec);
        for (size_t i = 0; i < count; i++) {
            const float v = k == mine ? node[i] : dec[i];
            acc[i] = k == 0 ? v : acc[i] + v;
        }
    }
    for (size_t i = 0; i < count; i++) want[i] = in_dt(acc[i], dt);
    free(node), free(dec), free(acc);
}

static void run(zero_comm *c, const char *path, int L, zero_dtype dt, size_t count, size_t B, int nonblocking) {
    const size_t es = zero_dtype_size(dt);
    float *x = malloc((size_t)N * count * sizeof *x), *want = malloc(count * sizeof *want), *got = malloc(count * 4);
    void *send = malloc((size_t)N * count * es + 1), *recv = malloc(count * es + 1), *exact = malloc(count * es + 1);
    for (size_t i = 0; i < (size_t)N * count; i++) x[i] = value(R, i);
    zero_convert(x, ZERO_DTYPE_FP32, send, dt, (size_t)N * count, ZERO_IMPL_SCALAR);
    zero_comm_counters before, after;
    zero_comm_get_counters(c, &before);
    zero_status s;
    if (nonblocking) {
        zero_request *rq = NULL;
        s = zero_comm_ireduce_scatter_q8(c, send, recv, count, dt, B, &rq);
        if (s == ZERO_OK) s = zero_request_wait(rq);
    } else {
        s = zero_comm_reduce_scatter_q8(c, send, recv, count, dt, B);
    }
    zero_comm_get_counters(c, &after);
    ZT_CHECKF(s == ZERO_OK, "%s %s count %zu block %zu: %s", path, zero_dtype_name(dt), count, B,
              zero_comm_last_error(c));
    if (s == ZERO_OK) {
        zero_convert(recv, dt, got, ZERO_DTYPE_FP32, count, ZERO_IMPL_SCALAR);
        oracle(count, dt, B, L, want);
        size_t bad = 0, first = count;
        for (size_t i = 0; i < count; i++) {
            uint32_t a, b;
            memcpy(&a, &got[i], 4);
            memcpy(&b, &want[i], 4);
            if (a != b) bad++, first = first < i ? first : i;
        }
        ZT_CHECKF(bad == 0,
                  "%s %s count %zu block %zu%s: %zu of %zu values differ from the oracle (first [%zu] %.9g, "
                  "oracle %.9g)",
                  path, zero_dtype_name(dt), count, B, nonblocking ? " (non-blocking)" : "", bad, count, first,
                  first < count ? (double)got[first] : 0.0, first < count ? (double)want[first] : 0.0);
        /* what was sent: the messages, or on one node (the window's split) the exact message */
        const uint64_t msg = L == N && N > 1 ? count * es : zero_quant_msg_bytes(count, B);
        ZT_EQ_INT(after.bytes[ZERO_COLL_REDUCE_SCATTER] - before.bytes[ZERO_COLL_REDUCE_SCATTER],
                  zero_comm_ring_bytes(ZERO_COLL_REDUCE_SCATTER, (uint64_t)N * msg, N));
        ZT_EQ_INT(after.calls[ZERO_COLL_REDUCE_SCATTER] - before.calls[ZERO_COLL_REDUCE_SCATTER], 1);
        /* against the exact reduce-scatter: the same where nothing crosses, else not everywhere
         * (blocks of 1 are exact: a value is its block's absmax, code +-1) */
        ZT_OK(zero_comm_reduce_scatter(c, send, exact, count, dt, ZERO_OP_SUM));
        const int same = memcmp(exact, recv, count * es) == 0;
        if (L == N)
            ZT_CHECKF(same, "%s %s count %zu: one node: not the exact reduce-scatter's bits", path, zero_dtype_name(dt),
                      count);
        else if (count >= 64 && B > 1)
            ZT_CHECKF(!same, "%s %s count %zu: the exact bits: nothing was coded", path, zero_dtype_name(dt), count);
    }
    free(x), free(want), free(got), free(send), free(recv), free(exact);
}

static void sweep(zero_comm *c, const char *path, int L) {
    const zero_dtype dts[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    const size_t counts[4] = {1, 37, 1000, 70000}, blocks[3] = {1, 32, 2048};
    for (int d = 0; d < 3; d++)
        for (int k = 0; k < 4; k++)
            for (int b = 0; b < 3; b++) run(c, path, L, dts[d], counts[k], blocks[b], (k + b) % 2);
}

static void bad_args(zero_comm *c) {
    float send[64] = {0}, recv[16];
    int32_t ints[64] = {0};
    zero_request *rq = NULL;
    ZT_EQ_INT(zero_comm_reduce_scatter_q8(c, send, recv, 4, ZERO_DTYPE_FP32, 0), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_comm_last_error(c), "block 0") != NULL, "%s", zero_comm_last_error(c));
    ZT_EQ_INT(zero_comm_reduce_scatter_q8(c, ints, recv, 4, ZERO_DTYPE_INT32, 32), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_comm_last_error(c), "int32") != NULL, "%s", zero_comm_last_error(c));
    ZT_EQ_INT(zero_comm_ireduce_scatter_q8(c, send, send + 4 * R, 4, ZERO_DTYPE_FP32, 32, &rq), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_comm_last_error(c), "not in place") != NULL, "%s", zero_comm_last_error(c));
    ZT_EQ_INT(zero_comm_ireduce_scatter_q8(c, send, recv, 4, ZERO_DTYPE_FP32, 32, NULL), ZERO_ERR_INVALID_ARG);
}

int main(void) {
    zero_comm *plain = make(0, 0), *shm = make(1, 0);
    N = zero_comm_size(plain);
    R = zero_comm_rank(plain);
    zt_rank = R;
    bad_args(plain);
    sweep(plain, "plain MPI", 1);
    sweep(shm, "one node", N);
    if (N == 4) {
        zero_comm *two = make(1, 2);
        ZT_EQ_INT(strcmp(zero_comm_backend(two), "mpi+shm"), 0);
        sweep(two, "2 fake nodes", 2);
        zero_comm_free(two);
    }
    zero_comm_free(shm);
    zero_comm_free(plain);
    return zt_finish("test_comm_q8");
}
