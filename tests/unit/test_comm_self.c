/* Tests of the comm layer without MPI: the self backend (copies, in place, requests, split,
 * counters, argument errors), the ring-rule byte formula, and the host reduction arithmetic. */
#include "comm/internal.h"
#include "harness.h"

#include "ref_half.h"
#include "zero/zero.h"

#include <stdint.h>

static zero_error zt_cerr; /* why the last zero_comm_init_*_with failed */

/* ---------------------------------------------------------- independent references */

static uint64_t lcg_state = 88172645463325252ull;
static uint32_t lcg(void) {
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg_state >> 33);
}

/* ---------------------------------------------------------- host arithmetic */

static void test_reduce_half(zero_dtype dt) {
    int bf = dt == ZERO_DTYPE_BF16;
    enum { N = 5000 };
    static uint16_t a[N], b[N], y[N];
    for (int i = 0; i < N; i++) {
        /* Finite values over a wide range, both signs, some far apart in magnitude so that the
         * sum has to round. */
        float fa = ((float)(lcg() % 20001) - 10000.0f) / (float)(1u << (lcg() % 12));
        float fb = ((float)(lcg() % 20001) - 10000.0f) / (float)(1u << (lcg() % 12));
        a[i] = bf ? ref_to_bf16(fa) : ref_to_fp16(fa);
        b[i] = bf ? ref_to_bf16(fb) : ref_to_fp16(fb);
    }
    for (int op = ZERO_OP_SUM; op <= ZERO_OP_MAX; op += 2) {
        memcpy(y, a, sizeof y);
        zero__comm_reduce(dt, (zero_op)op, b, y, N);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            float fa = bf ? ref_from_bf16(a[i]) : ref_from_fp16(a[i]);
            float fb = bf ? ref_from_bf16(b[i]) : ref_from_fp16(b[i]);
            float r = op == ZERO_OP_SUM ? fa + fb : (fa > fb ? fa : fb);
            uint16_t want = bf ? ref_to_bf16(r) : ref_to_fp16(r);
            if (y[i] != want && bad++ < 5)
                ZT_FAIL("%s %s [%d]: %04x + %04x = %04x, want %04x", zero_dtype_name(dt),
                        op == ZERO_OP_SUM ? "sum" : "max", i, a[i], b[i], y[i], want);
            zt_checks++;
        }
    }
    /* Hand-computed ties: 1 + 2^-8 in bf16 is half an ulp above 1 and rounds to even (1.0);
     * 1 + 3*2^-8 is 1.5 ulp and rounds to even upward (1 + 2^-6). */
    if (bf) {
        uint16_t one = 0x3f80, tie = 0x3b80 /* 2^-8 */, three = 0x3c40 /* 3*2^-8 = 1.5*2^-7 */, out = one;
        zero__comm_reduce(dt, ZERO_OP_SUM, &tie, &out, 1);
        ZT_EQ_INT(out, 0x3f80);
        out = one;
        zero__comm_reduce(dt, ZERO_OP_SUM, &three, &out, 1);
        ZT_EQ_INT(out, 0x3f82); /* 1.01171875 -> ties to even -> 1 + 2*2^-7 */
    } else {
        uint16_t one = 0x3c00, tie = 0x1000 /* 2^-11 */, out = one;
        zero__comm_reduce(dt, ZERO_OP_SUM, &tie, &out, 1);
        ZT_EQ_INT(out, 0x3c00);
        uint16_t big = 0x7bff /* 65504 */, inf = 0x7c00;
        out = big;
        zero__comm_reduce(dt, ZERO_OP_SUM, &big, &out, 1);
        ZT_EQ_INT(out, inf); /* overflow rounds to Inf */
    }
    /* MAX: NaN on either side wins. */
    uint16_t nan = bf ? 0x7fc0 : 0x7e00, two = bf ? 0x4000 : 0x4000, out = two;
    zero__comm_reduce(dt, ZERO_OP_MAX, &nan, &out, 1);
    ZT_CHECK(isnan(bf ? ref_from_bf16(out) : ref_from_fp16(out)));
    out = nan;
    zero__comm_reduce(dt, ZERO_OP_MAX, &two, &out, 1);
    ZT_CHECK(isnan(bf ? ref_from_bf16(out) : ref_from_fp16(out)));
}

static void test_reduce_other(void) {
    float fa[4] = {1.5f, -2.0f, 3.0f, NAN}, fb[4] = {2.25f, -3.0f, NAN, 1.0f};
    float fy[4];
    memcpy(fy, fa, sizeof fy);
    zero__comm_reduce(ZERO_DTYPE_FP32, ZERO_OP_SUM, fb, fy, 2);
    ZT_CHECK(fy[0] == 3.75f && fy[1] == -5.0f && fy[2] == 3.0f); /* n = 2: [2] untouched */
    memcpy(fy, fa, sizeof fy);
    zero__comm_reduce(ZERO_DTYPE_FP32, ZERO_OP_MAX, fb, fy, 4);
    ZT_CHECK(fy[0] == 2.25f && fy[1] == -2.0f && isnan(fy[2]) && isnan(fy[3]));

    int32_t ia[3] = {5, -7, INT32_MAX}, ib[3] = {-9, 4, 1};
    zero__comm_reduce(ZERO_DTYPE_INT32, ZERO_OP_SUM, ib, ia, 3);
    ZT_EQ_INT(ia[0], -4);
    ZT_EQ_INT(ia[1], -3);
    ZT_EQ_INT(ia[2], INT32_MIN); /* sums wrap (two's complement) instead of being UB */
    int64_t la[2] = {3000000000000ll, -1}, lb[2] = {-5, -2};
    zero__comm_reduce(ZERO_DTYPE_INT64, ZERO_OP_MAX, lb, la, 2);
    ZT_EQ_INT(la[0], 3000000000000ll);
    ZT_EQ_INT(la[1], -1);
    uint8_t ua[2] = {250, 3}, ub[2] = {10, 200};
    zero__comm_reduce(ZERO_DTYPE_UINT8, ZERO_OP_SUM, ub, ua, 2);
    ZT_EQ_INT(ua[0], 4);
    ZT_EQ_INT(ua[1], 203);
    ua[0] = 250;
    zero__comm_reduce(ZERO_DTYPE_UINT8, ZERO_OP_MAX, ub, ua, 2);
    ZT_EQ_INT(ua[0], 250);
    ZT_EQ_INT(ua[1], 203);
}

static void test_avg_finish(void) {
    int32_t i[4] = {-7, 7, 8, -1};
    zero__comm_avg_finish(ZERO_DTYPE_INT32, i, 4, 2);
    ZT_EQ_INT(i[0], -3); /* truncates toward zero */
    ZT_EQ_INT(i[1], 3);
    ZT_EQ_INT(i[2], 4);
    ZT_EQ_INT(i[3], 0);
    int64_t l[1] = {-10000000000ll};
    zero__comm_avg_finish(ZERO_DTYPE_INT64, l, 1, 3);
    ZT_EQ_INT(l[0], -3333333333ll);
    uint8_t u[1] = {255};
    zero__comm_avg_finish(ZERO_DTYPE_UINT8, u, 1, 4);
    ZT_EQ_INT(u[0], 63);
    float f[2] = {1.0f, 10.0f};
    zero__comm_avg_finish(ZERO_DTYPE_FP32, f, 2, 3);
    ZT_CHECK(f32_bits(f[0]) == f32_bits(1.0f / 3.0f) && f32_bits(f[1]) == f32_bits(10.0f / 3.0f));
    uint16_t b[1] = {ref_to_bf16(10.0f)}, h[1] = {ref_to_fp16(10.0f)};
    zero__comm_avg_finish(ZERO_DTYPE_BF16, b, 1, 3);
    zero__comm_avg_finish(ZERO_DTYPE_FP16, h, 1, 3);
    ZT_EQ_INT(b[0], ref_to_bf16(10.0f / 3.0f));
    ZT_EQ_INT(h[0], ref_to_fp16(10.0f / 3.0f));
    float g[1] = {5.0f};
    zero__comm_avg_finish(ZERO_DTYPE_FP32, g, 1, 1); /* one rank: identity */
    ZT_CHECK(g[0] == 5.0f);
}

/* ---------------------------------------------------------- ring rule */

static void test_ring_bytes(void) {
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, 1000, 4), 3000);     /* 4*3/4*1000 */
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_REDUCE_SCATTER, 1000, 4), 1500); /* 2*3/4*1000 */
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_ALL_GATHER, 1000, 4), 1500);
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_BROADCAST, 1000, 4), 1500);
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, 1000, 3), 2666);     /* floor(8000/3) */
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_ALL_GATHER, 1000, 3), 1333);
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, 4096, 2), 8192); /* 2 sends + 2 recvs of M/2 */
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, 1000, 1), 0);
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, 1000, 0), 0);
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, 0, 8), 0);
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_COUNT, 1000, 4), 0);
    /* No intermediate overflow: 2^60 bytes among 7 ranks = floor(2^60 * 24 / 7). */
    uint64_t m = 1ull << 60;
    ZT_CHECK(zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, m, 7) ==
             (uint64_t)((unsigned __int128)m * 24 / 7));
    ZT_CHECK(zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, UINT64_MAX, 4) == UINT64_MAX);
    /* ZeRO stage 0-2 per-step traffic (2 Psi elements) = one all_reduce of Psi: 4(N-1)/N Psi. */
    ZT_EQ_INT(zero_comm_ring_bytes(ZERO_COLL_REDUCE_SCATTER, 800, 8) +
                  zero_comm_ring_bytes(ZERO_COLL_ALL_GATHER, 800, 8),
              zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, 800, 8));
    ZT_CHECK(!strcmp(zero_coll_name(ZERO_COLL_ALL_REDUCE), "all_reduce"));
    ZT_CHECK(!strcmp(zero_coll_name(ZERO_COLL_REDUCE_SCATTER), "reduce_scatter"));
    ZT_CHECK(!strcmp(zero_coll_name(ZERO_COLL_ALL_GATHER), "all_gather"));
    ZT_CHECK(!strcmp(zero_coll_name(ZERO_COLL_BROADCAST), "broadcast"));
    ZT_CHECK(!strcmp(zero_coll_name(ZERO_COLL_COUNT), "invalid"));
}

/* ---------------------------------------------------------- the self backend */

static void fill(void *p, size_t bytes, unsigned seed) {
    unsigned char *b = p;
    for (size_t i = 0; i < bytes; i++) b[i] = (unsigned char)(i * 31 + seed * 7 + 1);
}

static void test_self_collectives(void) {
    zero_comm *c = NULL;
    ZT_OK(zero_comm_init_self(&c));
    if (!c) return;
    ZT_EQ_INT(zero_comm_rank(c), 0);
    ZT_EQ_INT(zero_comm_size(c), 1);
    ZT_CHECK(!strcmp(zero_comm_backend(c), "self"));
    enum { MAXN = 1009, GUARD = 16 };
    static unsigned char send[(MAXN + GUARD) * 8], recv[(MAXN + GUARD) * 8], keep[(MAXN + GUARD) * 8];
    const size_t counts[] = {0, 1, 7, 1009};
    uint64_t calls = 0;
    for (int dt = 0; dt < ZERO_DTYPE_COUNT; dt++) {
        size_t es = zero_dtype_size((zero_dtype)dt);
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            size_t n = counts[ci], bytes = n * es;
            for (int k = 0; k < 3; k++) {
                for (int nb = 0; nb < 2; nb++) {
                    for (int op = 0; op < 3; op++) {
                        if (k == ZERO_COLL_ALL_GATHER && op > 0) continue;
                        fill(send, sizeof send, (unsigned)(dt + 3 * k + op));
                        fill(recv, sizeof recv, 99);
                        memcpy(keep, send, sizeof keep);
                        zero_status s;
                        zero_request *r = NULL;
                        if (k == ZERO_COLL_ALL_REDUCE)
                            s = nb ? zero_comm_iall_reduce(c, send, recv, n, dt, op, &r)
                                   : zero_comm_all_reduce(c, send, recv, n, dt, op);
                        else if (k == ZERO_COLL_REDUCE_SCATTER)
                            s = nb ? zero_comm_ireduce_scatter(c, send, recv, n, dt, op, &r)
                                   : zero_comm_reduce_scatter(c, send, recv, n, dt, op);
                        else
                            s = nb ? zero_comm_iall_gather(c, send, recv, n, dt, &r)
                                   : zero_comm_all_gather(c, send, recv, n, dt);
                        ZT_EQ_INT(s, ZERO_OK);
                        if (nb) {
                            ZT_CHECK(r != NULL);
                            int done = 0;
                            if (op == 1) {
                                ZT_OK(zero_request_test(r, &done));
                                ZT_EQ_INT(done, 1);
                            } else {
                                ZT_OK(zero_request_wait(r));
                            }
                        }
                        calls++;
                        /* One rank: every reduction is the identity; recv = send, guard intact. */
                        ZT_CHECKF(!memcmp(recv, send, bytes), "%s dt %d n %zu", zero_coll_name(k), dt, n);
                        unsigned char g[sizeof recv];
                        fill(g, sizeof g, 99);
                        ZT_CHECKF(!memcmp(recv + bytes, g + bytes, sizeof recv - bytes),
                                  "wrote past recv: %s dt %d n %zu", zero_coll_name(k), dt, n);
                        ZT_CHECKF(!memcmp(send, keep, sizeof keep), "send changed: %s dt %d n %zu",
                                  zero_coll_name(k), dt, n);
                        /* In place: nothing moves. */
                        memcpy(recv, keep, sizeof recv);
                        if (k == ZERO_COLL_ALL_REDUCE) s = zero_comm_all_reduce(c, recv, recv, n, dt, op);
                        else if (k == ZERO_COLL_REDUCE_SCATTER)
                            s = zero_comm_reduce_scatter(c, recv, recv, n, dt, op);
                        else s = zero_comm_all_gather(c, recv, recv, n, dt);
                        ZT_EQ_INT(s, ZERO_OK);
                        calls++;
                        ZT_CHECK(!memcmp(recv, keep, sizeof keep));
                    }
                }
            }
            memcpy(keep, send, sizeof keep);
            ZT_OK(zero_comm_broadcast(c, send, n, dt, 0));
            ZT_CHECK(!memcmp(send, keep, sizeof keep));
        }
    }
    ZT_OK(zero_comm_barrier(c));

    zero_comm_counters ct;
    zero_comm_get_counters(c, &ct);
    uint64_t total_calls = 0;
    for (int k = 0; k < ZERO_COLL_COUNT; k++) {
        ZT_EQ_INT(ct.bytes[k], 0); /* one rank sends and receives nothing */
        total_calls += ct.calls[k];
    }
    ZT_EQ_INT(ct.calls[ZERO_COLL_BROADCAST], ZERO_DTYPE_COUNT * 4);
    ZT_EQ_INT(ct.calls[ZERO_COLL_ALL_GATHER], ZERO_DTYPE_COUNT * 4 * 2 * 2);
    ZT_EQ_INT(total_calls, calls + ZERO_DTYPE_COUNT * 4);
    zero_comm_reset_counters(c);
    zero_comm_get_counters(c, &ct);
    ZT_EQ_INT(ct.calls[ZERO_COLL_ALL_GATHER], 0);
    zero_comm_free(c);
}

static void test_self_errors(void) {
    zero_comm *c = NULL;
    ZT_OK(zero_comm_init_self(&c));
    if (!c) return;
    float a[16] = {0}, b[16] = {0};
    zero_request *r = (zero_request *)(uintptr_t)1;
    ZT_EQ_INT(zero_comm_all_reduce(c, a, b, 4, (zero_dtype)9, ZERO_OP_SUM), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(c), "dtype 9") != NULL);
    ZT_EQ_INT(zero_comm_all_reduce(c, a, b, 4, (zero_dtype)-1, ZERO_OP_SUM), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_comm_reduce_scatter(c, a, b, 4, ZERO_DTYPE_FP32, (zero_op)3), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(c), "op 3") != NULL);
    ZT_EQ_INT(zero_comm_iall_reduce(c, a, b, 4, ZERO_DTYPE_FP32, (zero_op)-2, &r), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(r == NULL); /* *req is cleared on error */
    ZT_EQ_INT(zero_comm_broadcast(c, a, 4, ZERO_DTYPE_FP32, 1), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(c), "root 1") != NULL);
    ZT_EQ_INT(zero_comm_broadcast(c, a, 4, ZERO_DTYPE_FP32, -1), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_comm_broadcast(c, NULL, 4, ZERO_DTYPE_FP32, 0), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_comm_all_gather(c, NULL, b, 4, ZERO_DTYPE_FP32), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(c), "send buffer is NULL") != NULL);
    ZT_EQ_INT(zero_comm_all_reduce(c, a, NULL, 4, ZERO_DTYPE_FP32, ZERO_OP_SUM), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_comm_iall_gather(c, a, b, 4, ZERO_DTYPE_FP32, NULL), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(c), "req is NULL") != NULL);
    /* Partial overlap is neither in place nor disjoint. */
    ZT_EQ_INT(zero_comm_all_reduce(c, a, a + 1, 4, ZERO_DTYPE_FP32, ZERO_OP_SUM), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(c), "overlap") != NULL);
    ZT_EQ_INT(zero_comm_all_gather(c, a + 2, a, 4, ZERO_DTYPE_FP32), ZERO_ERR_INVALID_ARG);
    /* count * size * dtype size overflowing size_t. */
    ZT_EQ_INT(zero_comm_all_gather(c, a, b, SIZE_MAX / 2, ZERO_DTYPE_FP32), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(c), "overflows") != NULL);
    /* NULL buffers with count 0 are fine. */
    ZT_OK(zero_comm_all_reduce(c, NULL, NULL, 0, ZERO_DTYPE_FP32, ZERO_OP_SUM));
    ZT_OK(zero_comm_broadcast(c, NULL, 0, ZERO_DTYPE_UINT8, 0));
    /* Failed calls count nothing; the one count-0 calls above did. */
    zero_comm_counters ct;
    zero_comm_get_counters(c, &ct);
    ZT_EQ_INT(ct.calls[ZERO_COLL_ALL_REDUCE], 1);
    ZT_EQ_INT(ct.calls[ZERO_COLL_REDUCE_SCATTER], 0);
    ZT_EQ_INT(ct.calls[ZERO_COLL_ALL_GATHER], 0);
    ZT_EQ_INT(ct.calls[ZERO_COLL_BROADCAST], 1);
    /* NULL handles never crash. */
    ZT_EQ_INT(zero_comm_all_reduce(NULL, a, b, 4, ZERO_DTYPE_FP32, ZERO_OP_SUM), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_comm_barrier(NULL), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_comm_rank(NULL), -1);
    ZT_EQ_INT(zero_comm_size(NULL), 0);
    ZT_OK(zero_request_wait(NULL));
    int done = 0;
    ZT_OK(zero_request_test(NULL, &done));
    ZT_EQ_INT(done, 1);
    zero_comm_get_counters(NULL, &ct);
    ZT_EQ_INT(ct.calls[ZERO_COLL_BROADCAST], 0);
    zero_comm_free(NULL);
    ZT_EQ_INT(zero_comm_init_self_with(NULL, &zt_cerr), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zt_cerr.msg, "out is NULL") != NULL);
    ZT_EQ_INT(zero_comm_split(c, 0, 0, NULL), ZERO_ERR_INVALID_ARG);
    zero_comm_free(c);
}

static void test_self_split(void) {
    zero_comm *c = NULL, *d = NULL, *e = (zero_comm *)(uintptr_t)1;
    ZT_OK(zero_comm_init_self(&c));
    if (!c) return;
    float x[4] = {1, 2, 3, 4}, y[4];
    ZT_OK(zero_comm_all_reduce(c, x, y, 4, ZERO_DTYPE_FP32, ZERO_OP_AVG));
    ZT_CHECK(y[3] == 4.0f);
    ZT_OK(zero_comm_split(c, 3, 0, &d));
    ZT_CHECK(d && d != c);
    if (d) {
        ZT_EQ_INT(zero_comm_size(d), 1);
        ZT_CHECK(!strcmp(zero_comm_backend(d), "self"));
        zero_comm_counters ct;
        zero_comm_get_counters(d, &ct);
        ZT_EQ_INT(ct.calls[ZERO_COLL_ALL_REDUCE], 0); /* its own, zeroed counters */
        ZT_OK(zero_comm_all_gather(d, x, y, 4, ZERO_DTYPE_FP32));
        zero_comm_get_counters(c, &ct);
        ZT_EQ_INT(ct.calls[ZERO_COLL_ALL_GATHER], 0);
        ZT_EQ_INT(ct.calls[ZERO_COLL_ALL_REDUCE], 1);
    }
    ZT_OK(zero_comm_split(c, -1, 0, &e));
    ZT_CHECK(e == NULL);
    zero_comm_free(d);
    zero_comm_free(c);
}

static void test_launched(void) {
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                                 "MPI_LOCALNRANKS", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) unsetenv(vars[i]);
    ZT_EQ_INT(zero_comm_mpi_launched(), 0);
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        setenv(vars[i], "2", 1);
        ZT_CHECKF(zero_comm_mpi_launched() == 1, "%s set", vars[i]);
        unsetenv(vars[i]);
    }
    setenv("OMPI_COMM_WORLD_SIZE", "", 1); /* empty: not a launcher */
    ZT_EQ_INT(zero_comm_mpi_launched(), 0);
    unsetenv("OMPI_COMM_WORLD_SIZE");
#ifndef ZERO_HAVE_MPI
    zero_comm *c = (zero_comm *)(uintptr_t)1;
    ZT_EQ_INT(zero_comm_init_mpi_with(&c, NULL, NULL, &zt_cerr), ZERO_ERR_UNSUPPORTED);
    ZT_CHECK(c == NULL);
    ZT_CHECK(strstr(zt_cerr.msg, "no MPI") != NULL);
#endif
}

int main(void) {
    test_reduce_half(ZERO_DTYPE_BF16);
    test_reduce_half(ZERO_DTYPE_FP16);
    test_reduce_other();
    test_avg_finish();
    test_ring_bytes();
    test_self_collectives();
    test_self_errors();
    test_self_split();
    test_launched();
    return zt_finish("test_comm_self");
}
