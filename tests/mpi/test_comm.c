/* Tests of the MPI communicator under 1-4 ranks: every collective x dtype x op x count, blocking
 * and not, in place and not, against a scalar reference each rank computes from every rank's
 * deterministic inputs; byte counters against the ring rule; split; argument errors; MPI life. */
#include "comm/internal.h"
#include "harness.h"

#include "ref_half.h"
#include "zero/zero.h"

#include <mpi.h>
#include <stdint.h>
#include <time.h>

static zero_error zt_cerr; /* why the last zero_comm_init_*_with failed */

static zero_comm *W;
static int R, N;

/* ---------------------------------------------------------- inputs and reference */

/* The input of rank r at element i (salt varies it per case). Float inputs are multiples of
 * 0.5 in [-15, 15]: every partial sum over <= 4 ranks is exact in bf16 (8 significant bits) and
 * fp16, so the result cannot depend on the order MPI combines ranks, and the reference may be
 * compared bit for bit. int64 inputs exceed 32 bits; uint8 inputs stay < 64 (no wrap). */
static double input(zero_dtype dt, int r, size_t i, int salt) {
    /* 32-bit arithmetic (i < 2^23 here): the modulo is most of what the reference costs. */
    int v = (int)(((uint32_t)i * 131u + (uint32_t)r * 71u + (uint32_t)salt * 17u) % 61u) - 30;
    switch (dt) {
    case ZERO_DTYPE_FP32:
    case ZERO_DTYPE_BF16:
    case ZERO_DTYPE_FP16: return (double)v * 0.5;
    case ZERO_DTYPE_INT32: return (double)v * 1000;
    case ZERO_DTYPE_INT64: return (double)v * 1e11;
    case ZERO_DTYPE_UINT8: return (double)(((uint32_t)i * 13u + (uint32_t)r * 7u + (uint32_t)salt) % 64u);
    default: return 0;
    }
}

/* Stores v as element i of buf (floats rounded to nearest even). */
static void put(void *buf, zero_dtype dt, size_t i, double v) {
    switch (dt) {
    case ZERO_DTYPE_FP32: ((float *)buf)[i] = (float)v; break;
    case ZERO_DTYPE_BF16: ((uint16_t *)buf)[i] = ref_to_bf16((float)v); break;
    case ZERO_DTYPE_FP16: ((uint16_t *)buf)[i] = ref_to_fp16((float)v); break;
    case ZERO_DTYPE_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case ZERO_DTYPE_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case ZERO_DTYPE_UINT8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    default: break;
    }
}

static int is_float(zero_dtype dt) {
    return dt == ZERO_DTYPE_FP32 || dt == ZERO_DTYPE_BF16 || dt == ZERO_DTYPE_FP16;
}

/* op over all ranks of input(dt, r, i, salt), as comm.h defines it. */
static double reference(zero_dtype dt, zero_op op, size_t i, int salt) {
    double s = 0, m = -1e300;
    for (int r = 0; r < N; r++) {
        double v = input(dt, r, i, salt);
        s += v;
        if (v > m) m = v;
    }
    if (op == ZERO_OP_MAX) return m;
    if (op == ZERO_OP_SUM) return s;
    if (is_float(dt)) return (double)((float)s / (float)N); /* the sum is exact; divide in fp32 */
    return (double)((int64_t)s / N);                        /* C division: toward zero */
}

static void fill_inputs(void *buf, zero_dtype dt, size_t n, int r, int salt, size_t first) {
    for (size_t i = 0; i < n; i++) put(buf, dt, i, input(dt, r, first + i, salt));
}

/* Compares n elements of got with the reference for elements [first, first+n); reports the
 * first few mismatches. */
static void expect(const void *got, zero_dtype dt, size_t n, size_t first, const char *what,
                   double (*ref)(zero_dtype, zero_op, size_t, int), zero_op op, int salt) {
    size_t es = zero_dtype_size(dt);
    unsigned char want[8];
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        put(want, dt, 0, ref(dt, op, first + i, salt));
        if (memcmp((const unsigned char *)got + i * es, want, es) && bad++ < 3)
            ZT_FAIL("%s: element %zu of %zu differs from the reference %g", what, first + i, n,
                    ref(dt, op, first + i, salt));
    }
    zt_checks++;
}

/* The input of rank `salt` itself (broadcast / all_gather: no reduction). */
static double of_rank(zero_dtype dt, zero_op r, size_t i, int salt) {
    return input(dt, (int)r, i, salt);
}

/* ---------------------------------------------------------- buffers */

static uint64_t ring(int k, uint64_t m) {
    if (N == 1) return 0;
    return m * (k == ZERO_COLL_ALL_REDUCE ? 4 : 2) * (uint64_t)(N - 1) / (uint64_t)N;
}

static void check_counted(const zero_comm_counters *before, zero_coll k, uint64_t m, const char *what) {
    zero_comm_counters after;
    zero_comm_get_counters(W, &after);
    ZT_CHECKF(after.calls[k] == before->calls[k] + 1, "%s: calls %llu -> %llu", what,
              (unsigned long long)before->calls[k], (unsigned long long)after.calls[k]);
    ZT_CHECKF(after.bytes[k] - before->bytes[k] == ring(k, m) &&
                  ring(k, m) == zero_comm_ring_bytes(k, m, N),
              "%s: counted %llu bytes for a %llu-byte message, ring rule says %llu", what,
              (unsigned long long)(after.bytes[k] - before->bytes[k]), (unsigned long long)m,
              (unsigned long long)ring(k, m));
}

/* Completes req by wait (mode 0) or by polling test (mode 1). */
static void complete(zero_request *req, int mode, const char *what) {
    if (mode == 0) {
        ZT_CHECKF(zero_request_wait(req) == ZERO_OK, "%s: wait: %s", what, zero_comm_last_error(W));
        return;
    }
    int done = 0;
    long polls = 0;
    while (!done) {
        if (zero_request_test(req, &done) != ZERO_OK) {
            ZT_FAIL("%s: test: %s", what, zero_comm_last_error(W));
            return;
        }
        polls++;
    }
    ZT_CHECK(polls >= 1);
}

/* ---------------------------------------------------------- collectives */

static void case_all_reduce(size_t n, zero_dtype dt, zero_op op, int nb, int inplace, int salt) {
    size_t es = zero_dtype_size(dt), bytes = n * es;
    char what[128];
    snprintf(what, sizeof what, "all_reduce %s op %d n %zu %s %s", zero_dtype_name(dt), (int)op, n,
             nb ? "nonblocking" : "blocking", inplace ? "in place" : "out of place");
    unsigned char *send = zt_guarded_alloc(bytes), *recv = inplace ? send : zt_guarded_alloc(bytes);
    fill_inputs(send, dt, n, R, salt, 0);
    unsigned char *keep = inplace ? NULL : zt_guarded_alloc(bytes);
    if (keep) memcpy(keep, send, bytes);
    zero_comm_counters before;
    zero_comm_get_counters(W, &before);
    zero_status s;
    zero_request *req = NULL;
    if (nb) s = zero_comm_iall_reduce(W, send, recv, n, dt, op, &req);
    else s = zero_comm_all_reduce(W, send, recv, n, dt, op);
    ZT_CHECKF(s == ZERO_OK, "%s: %s", what, zero_comm_last_error(W));
    if (nb && s == ZERO_OK) complete(req, (salt & 1), what);
    check_counted(&before, ZERO_COLL_ALL_REDUCE, bytes, what);
    expect(recv, dt, n, 0, what, reference, op, salt);
    ZT_CHECKF(zt_guard_ok(recv, bytes), "%s: wrote past recv", what);
    if (!inplace) {
        ZT_CHECKF(!memcmp(keep, send, bytes), "%s: send changed", what);
        free(keep);
        free(recv);
    }
    free(send);
}

static void case_reduce_scatter(size_t n, zero_dtype dt, zero_op op, int nb, int inplace, int salt) {
    size_t es = zero_dtype_size(dt), bytes = n * es, full = bytes * (size_t)N;
    char what[128];
    snprintf(what, sizeof what, "reduce_scatter %s op %d n %zu %s %s", zero_dtype_name(dt), (int)op,
             n, nb ? "nonblocking" : "blocking", inplace ? "in place" : "out of place");
    unsigned char *send = zt_guarded_alloc(full);
    unsigned char *recv = inplace ? send + (size_t)R * bytes : zt_guarded_alloc(bytes);
    fill_inputs(send, dt, n * (size_t)N, R, salt, 0);
    unsigned char *keep = inplace ? NULL : zt_guarded_alloc(full);
    if (keep) memcpy(keep, send, full);
    zero_comm_counters before;
    zero_comm_get_counters(W, &before);
    zero_status s;
    zero_request *req = NULL;
    if (nb) s = zero_comm_ireduce_scatter(W, send, recv, n, dt, op, &req);
    else s = zero_comm_reduce_scatter(W, send, recv, n, dt, op);
    ZT_CHECKF(s == ZERO_OK, "%s: %s", what, zero_comm_last_error(W));
    if (nb && s == ZERO_OK) complete(req, (salt & 1), what);
    check_counted(&before, ZERO_COLL_REDUCE_SCATTER, full, what);
    /* Rank R's block is elements [R n, (R+1) n) of the full buffer. */
    expect(recv, dt, n, (size_t)R * n, what, reference, op, salt);
    if (inplace) {
        ZT_CHECKF(zt_guard_ok(send, full), "%s: wrote past send", what);
    } else {
        ZT_CHECKF(zt_guard_ok(recv, bytes), "%s: wrote past recv", what);
        ZT_CHECKF(!memcmp(keep, send, full), "%s: send changed", what);
        free(keep);
        free(recv);
    }
    free(send);
}

static void case_all_gather(size_t n, zero_dtype dt, int nb, int inplace, int salt) {
    size_t es = zero_dtype_size(dt), bytes = n * es, full = bytes * (size_t)N;
    char what[128];
    snprintf(what, sizeof what, "all_gather %s n %zu %s %s", zero_dtype_name(dt), n,
             nb ? "nonblocking" : "blocking", inplace ? "in place" : "out of place");
    unsigned char *recv = zt_guarded_alloc(full);
    unsigned char *send = inplace ? recv + (size_t)R * bytes : zt_guarded_alloc(bytes);
    fill_inputs(send, dt, n, R, salt, 0);
    zero_comm_counters before;
    zero_comm_get_counters(W, &before);
    zero_status s;
    zero_request *req = NULL;
    if (nb) s = zero_comm_iall_gather(W, send, recv, n, dt, &req);
    else s = zero_comm_all_gather(W, send, recv, n, dt);
    ZT_CHECKF(s == ZERO_OK, "%s: %s", what, zero_comm_last_error(W));
    if (nb && s == ZERO_OK) complete(req, (salt & 1), what);
    check_counted(&before, ZERO_COLL_ALL_GATHER, full, what);
    for (int r = 0; r < N; r++) expect(recv + (size_t)r * bytes, dt, n, 0, what, of_rank, (zero_op)r, salt);
    ZT_CHECKF(zt_guard_ok(recv, full), "%s: wrote past recv", what);
    if (!inplace) free(send);
    free(recv);
}

static void case_broadcast(size_t n, zero_dtype dt, int root, int salt) {
    size_t bytes = n * zero_dtype_size(dt);
    char what[128];
    snprintf(what, sizeof what, "broadcast %s n %zu root %d", zero_dtype_name(dt), n, root);
    unsigned char *buf = zt_guarded_alloc(bytes);
    fill_inputs(buf, dt, n, R, salt, 0);
    zero_comm_counters before;
    zero_comm_get_counters(W, &before);
    ZT_CHECKF(zero_comm_broadcast(W, buf, n, dt, root) == ZERO_OK, "%s: %s", what,
              zero_comm_last_error(W));
    check_counted(&before, ZERO_COLL_BROADCAST, bytes, what);
    expect(buf, dt, n, 0, what, of_rank, (zero_op)root, salt);
    ZT_CHECKF(zt_guard_ok(buf, bytes), "%s: wrote past buf", what);
    free(buf);
}

static void test_collectives(void) {
    /* 0, 1, primes, and a large count; none is a multiple of the world size. */
    const size_t counts[] = {0, 1, 7, 1009, 4099, ((size_t)1 << 20) + 3};
    const size_t ncounts = sizeof counts / sizeof counts[0];
    int salt = 0;
    for (size_t ci = 0; ci < ncounts; ci++) {
        size_t n = counts[ci];
        for (int d = 0; d < ZERO_DTYPE_COUNT; d++) {
            zero_dtype dt = (zero_dtype)d;
            if (n > 100000) {
                /* Large: every collective and dtype once, the variant (blocking or not, in
                 * place or not) and the op rotating with the dtype so that each appears; the
                 * full grid would not run in seconds on 2 oversubscribed cores. */
                int nb = d & 1, inplace = (d >> 1) & 1;
                case_all_reduce(n, dt, (zero_op)(d % 3), nb, inplace, ++salt);
                case_reduce_scatter(n, dt, (zero_op)((d + 1) % 3), !nb, inplace, ++salt);
                case_all_gather(n, dt, nb, !inplace, ++salt);
                case_broadcast(n, dt, N - 1 - d % N, ++salt);
                continue;
            }
            for (int op = 0; op < 3; op++) {
                for (int v = 0; v < 4; v++) {
                    int nb = v & 1, inplace = v >> 1;
                    case_all_reduce(n, dt, (zero_op)op, nb, inplace, ++salt);
                    case_reduce_scatter(n, dt, (zero_op)op, nb, inplace, ++salt);
                    if (op == 0) case_all_gather(n, dt, nb, inplace, ++salt);
                }
            }
            for (int root = 0; root < N; root++) case_broadcast(n, dt, root, ++salt);
        }
    }
}

/* Several non-blocking collectives in flight at once, completed in reverse order. */
static void test_overlapping_requests(void) {
    enum { n = 3001 };
    float *a = malloc(n * sizeof *a), *g = malloc((size_t)N * n * sizeof *g);
    int32_t *b = malloc((size_t)N * n * sizeof *b), *bs = malloc(n * sizeof *bs);
    if (!a || !g || !b || !bs) exit(2);
    fill_inputs(a, ZERO_DTYPE_FP32, n, R, 901, 0);
    fill_inputs(b, ZERO_DTYPE_INT32, (size_t)N * n, R, 902, 0);
    float *own = g + (size_t)R * n;
    fill_inputs(own, ZERO_DTYPE_FP32, n, R, 903, 0);
    zero_request *r1 = NULL, *r2 = NULL, *r3 = NULL;
    ZT_OK(zero_comm_iall_reduce(W, a, a, n, ZERO_DTYPE_FP32, ZERO_OP_AVG, &r1));
    ZT_OK(zero_comm_ireduce_scatter(W, b, bs, n, ZERO_DTYPE_INT32, ZERO_OP_AVG, &r2));
    ZT_OK(zero_comm_iall_gather(W, own, g, n, ZERO_DTYPE_FP32, &r3));
    ZT_OK(zero_request_wait(r3));
    complete(r2, 1, "overlapping ireduce_scatter");
    ZT_OK(zero_request_wait(r1));
    expect(a, ZERO_DTYPE_FP32, n, 0, "overlapping iall_reduce avg", reference, ZERO_OP_AVG, 901);
    expect(bs, ZERO_DTYPE_INT32, n, (size_t)R * n, "overlapping ireduce_scatter avg", reference,
           ZERO_OP_AVG, 902);
    for (int r = 0; r < N; r++)
        expect(g + (size_t)r * n, ZERO_DTYPE_FP32, n, 0, "overlapping iall_gather", of_rank,
               (zero_op)r, 903);
    free(a);
    free(g);
    free(b);
    free(bs);
}

/* NaN on one rank makes MAX NaN on every rank, for every float type. */
static void test_max_nan(void) {
    float f[3] = {1.0f, (float)R, -2.0f};
    if (R == N - 1) f[1] = NAN;
    ZT_OK(zero_comm_all_reduce(W, f, f, 3, ZERO_DTYPE_FP32, ZERO_OP_MAX));
    ZT_CHECK(f[0] == 1.0f && isnan(f[1]) && f[2] == -2.0f);
    uint16_t h[2] = {ref_to_bf16((float)R), ref_to_bf16(3.0f)}, k[2] = {ref_to_fp16((float)R), ref_to_fp16(3.0f)};
    if (R == 0) h[1] = 0x7fc0, k[1] = 0x7e00;
    ZT_OK(zero_comm_all_reduce(W, h, h, 2, ZERO_DTYPE_BF16, ZERO_OP_MAX));
    ZT_OK(zero_comm_all_reduce(W, k, k, 2, ZERO_DTYPE_FP16, ZERO_OP_MAX));
    ZT_EQ_INT(h[0], ref_to_bf16((float)(N - 1)));
    ZT_EQ_INT(k[0], ref_to_fp16((float)(N - 1)));
    ZT_CHECK((h[1] & 0x7f80) == 0x7f80 && (h[1] & 0x7f) != 0);
    ZT_CHECK((k[1] & 0x7c00) == 0x7c00 && (k[1] & 0x3ff) != 0);
    /* MAX of half types compares values, not bit patterns: -1 has the larger pattern. */
    uint16_t m[1] = {R == 0 ? ref_to_bf16(-1.0f) : ref_to_bf16(0.5f)};
    ZT_OK(zero_comm_all_reduce(W, m, m, 1, ZERO_DTYPE_BF16, ZERO_OP_MAX));
    ZT_EQ_INT(m[0], N == 1 ? ref_to_bf16(-1.0f) : ref_to_bf16(0.5f));
}

/* ---------------------------------------------------------- split */

/* All ranks of these runs share one machine: with two or more, large messages take the
 * shared-memory path (unless ZERO_COMM_SHM=0), and the backend's name says so. Fake nodes
 * (ZERO_COMM_FAKE_NODES, test_comm_shm.c checks those) may leave one rank per node. */
static int backend_ok(const char *name, int members) {
    const char *v = getenv("ZERO_COMM_SHM"), *fake = getenv("ZERO_COMM_FAKE_NODES");
    if (fake && *fake) return !strcmp(name, "mpi") || !strcmp(name, "mpi+shm");
    return !strcmp(name, members > 1 && !(v && !strcmp(v, "0")) ? "mpi+shm" : "mpi");
}

static void test_split(void) {
    int color = R % 2, members = (N - color + 1) / 2;
    zero_comm *sub = NULL;
    zero_comm_counters wc0, wc1, sc;
    zero_comm_get_counters(W, &wc0);
    ZT_OK(zero_comm_split(W, color, -R, &sub)); /* key -R: reverse world order */
    ZT_CHECK(sub != NULL);
    if (!sub) return;
    ZT_EQ_INT(zero_comm_size(sub), members);
    /* Same-parity ranks above R come first. */
    int above = 0;
    for (int r = R + 1; r < N; r++) above += r % 2 == color;
    ZT_EQ_INT(zero_comm_rank(sub), above);
    ZT_CHECK(backend_ok(zero_comm_backend(sub), members));
    zero_comm_get_counters(sub, &sc);
    for (int k = 0; k < ZERO_COLL_COUNT; k++) ZT_EQ_INT(sc.calls[k] + sc.bytes[k], 0);

    enum { n = 1009 };
    int64_t v[n], want = 0;
    for (int r = color; r < N; r += 2) want += (int64_t)r * 1000000007ll;
    for (int i = 0; i < n; i++) v[i] = (int64_t)R * 1000000007ll + i;
    ZT_OK(zero_comm_all_reduce(sub, v, v, n, ZERO_DTYPE_INT64, ZERO_OP_SUM));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += v[i] != want + (int64_t)i * members;
    ZT_EQ_INT(bad, 0);
    float g[8] = {0}, mine = (float)R;
    ZT_OK(zero_comm_all_gather(sub, &mine, g, 1, ZERO_DTYPE_FP32));
    for (int s = 0; s < members; s++) {
        /* sub rank s is the s-th largest world rank of this parity */
        int expect_r = -1, seen = 0;
        for (int r = N - 1; r >= 0; r--)
            if (r % 2 == color && seen++ == s) expect_r = r;
        ZT_CHECKF(g[s] == (float)expect_r, "sub all_gather slot %d: %g, want %d", s, g[s], expect_r);
    }
    float b = zero_comm_rank(sub) == 0 ? 42.0f + (float)color : -1.0f;
    ZT_OK(zero_comm_broadcast(sub, &b, 1, ZERO_DTYPE_FP32, 0));
    ZT_CHECK(b == 42.0f + (float)color);
    ZT_OK(zero_comm_barrier(sub));
    /* The sub-communicator counted its own traffic, the parent none of it. */
    zero_comm_get_counters(sub, &sc);
    uint64_t m = (uint64_t)n * 8;
    uint64_t want_ar = members > 1 ? m * 4 * (uint64_t)(members - 1) / (uint64_t)members : 0;
    ZT_EQ_INT(sc.calls[ZERO_COLL_ALL_REDUCE], 1);
    ZT_EQ_INT(sc.bytes[ZERO_COLL_ALL_REDUCE], want_ar);
    ZT_EQ_INT(sc.calls[ZERO_COLL_ALL_GATHER], 1);
    ZT_EQ_INT(sc.bytes[ZERO_COLL_ALL_GATHER], zero_comm_ring_bytes(ZERO_COLL_ALL_GATHER, 4 * (uint64_t)members, members));
    zero_comm_get_counters(W, &wc1);
    ZT_CHECK(!memcmp(&wc0, &wc1, sizeof wc0));
    zero_comm_free(sub);

    /* Negative color: not in any group. */
    sub = (zero_comm *)(uintptr_t)1;
    ZT_OK(zero_comm_split(W, R % 2 ? -1 : 0, 0, &sub));
    if (R % 2) {
        ZT_CHECK(sub == NULL);
    } else {
        ZT_CHECK(sub && zero_comm_size(sub) == (N + 1) / 2 && zero_comm_rank(sub) == R / 2);
        int x = 1;
        if (sub) ZT_OK(zero_comm_all_reduce(sub, &x, &x, 1, ZERO_DTYPE_INT32, ZERO_OP_SUM));
        ZT_EQ_INT(x, (N + 1) / 2);
        zero_comm_free(sub);
    }
    /* Same color for all: a duplicate. */
    ZT_OK(zero_comm_split(W, 7, 0, &sub));
    ZT_CHECK(sub && zero_comm_size(sub) == N && zero_comm_rank(sub) == R);
    zero_comm_free(sub);
}

/* ---------------------------------------------------------- errors */

static void test_errors(void) {
    float a[8] = {0}, b[8 * 4] = {0};
    zero_comm_counters c0, c1;
    zero_comm_get_counters(W, &c0);
    ZT_EQ_INT(zero_comm_all_reduce(W, a, b, 4, (zero_dtype)6, ZERO_OP_SUM), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(W), "dtype 6") != NULL);
    ZT_EQ_INT(zero_comm_ireduce_scatter(W, b, a, 4, ZERO_DTYPE_FP32, (zero_op)7, &(zero_request *){NULL}),
              ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(W), "op 7") != NULL);
    ZT_EQ_INT(zero_comm_broadcast(W, a, 4, ZERO_DTYPE_FP32, N), ZERO_ERR_INVALID_ARG);
    char want[64];
    snprintf(want, sizeof want, "root %d", N);
    ZT_CHECK(strstr(zero_comm_last_error(W), want) != NULL);
    ZT_EQ_INT(zero_comm_all_gather(W, a, NULL, 4, ZERO_DTYPE_FP32), ZERO_ERR_INVALID_ARG);
    /* Over MPI's int count: refused before any memory is touched. */
    size_t huge = (size_t)INT32_MAX + 1;
    ZT_EQ_INT(zero_comm_all_reduce(W, a, b, huge, ZERO_DTYPE_UINT8, ZERO_OP_SUM), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_comm_last_error(W), "2147483648") && strstr(zero_comm_last_error(W), "limit"));
    ZT_EQ_INT(zero_comm_broadcast(W, a, huge, ZERO_DTYPE_UINT8, 0), ZERO_ERR_INVALID_ARG);
    zero_comm_get_counters(W, &c1);
    ZT_CHECK(!memcmp(&c0, &c1, sizeof c0)); /* refused calls count nothing */
    /* The communicator still works afterwards (no rank was left inside a collective). */
    int x = R + 1;
    ZT_OK(zero_comm_all_reduce(W, &x, &x, 1, ZERO_DTYPE_INT32, ZERO_OP_SUM));
    ZT_EQ_INT(x, N * (N + 1) / 2);
    /* MPI error codes become ZERO_ERR_COMM with MPI's own text. */
    char mpimsg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(MPI_ERR_TRUNCATE, mpimsg, &len);
    ZT_EQ_INT(zero__comm_mpi_error(W, MPI_ERR_TRUNCATE, "probe"), ZERO_ERR_COMM);
    ZT_CHECKF(strstr(zero_comm_last_error(W), mpimsg) && !strncmp(zero_comm_last_error(W), "probe: ", 7),
              "last error '%s'", zero_comm_last_error(W));
}

static void test_barrier(void) {
    ZT_OK(zero_comm_barrier(W));
    double t0 = MPI_Wtime();
    if (R == 0) {
        struct timespec ts = {0, 150 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    ZT_OK(zero_comm_barrier(W));
    double dt = MPI_Wtime() - t0;
    /* Nobody leaves the barrier before rank 0 has slept (minus the skew of the first barrier). */
    ZT_CHECKF(dt >= 0.1, "left the barrier after %.3f s while rank 0 slept 0.15 s", dt);
}

int main(void) {
    int inited = 1, finalized = 1;
    MPI_Initialized(&inited);
    ZT_EQ_INT(inited, 0);
    zero_status s = zero_comm_init_mpi_with(&W, NULL, NULL, &zt_cerr);
    if (s != ZERO_OK) {
        fprintf(stderr, "zero_comm_init_mpi: %s\n", zt_cerr.msg);
        return 1;
    }
    MPI_Initialized(&inited);
    ZT_EQ_INT(inited, 1); /* zero initialized MPI */
    R = zero_comm_rank(W);
    N = zero_comm_size(W);
    zt_rank = R;
    int wsize = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &wsize);
    ZT_EQ_INT(N, wsize);
    ZT_CHECK(backend_ok(zero_comm_backend(W), N));
    ZT_EQ_INT(zero_comm_mpi_launched(), 1);

    double t0 = MPI_Wtime();
    test_collectives();
    test_overlapping_requests();
    test_max_nan();
    test_split();
    test_errors();
    test_barrier();
    if (R == 0) printf("test_comm: %d ranks, %.2f s\n", N, MPI_Wtime() - t0);

    /* A second communicator keeps MPI alive past the first free. */
    zero_comm *second = NULL;
    ZT_OK(zero_comm_init_mpi(&second, NULL));
    zero_comm_free(W);
    MPI_Finalized(&finalized);
    ZT_EQ_INT(finalized, 0);
    int y = 2;
    ZT_OK(zero_comm_all_reduce(second, &y, &y, 1, ZERO_DTYPE_INT32, ZERO_OP_MAX));
    ZT_EQ_INT(y, 2);
    zero_comm_free(second); /* the last one zero created: finalizes */
    MPI_Finalized(&finalized);
    ZT_EQ_INT(finalized, 1);
    zero_comm *late = (zero_comm *)(uintptr_t)1;
    ZT_EQ_INT(zero_comm_init_mpi_with(&late, NULL, NULL, &zt_cerr), ZERO_ERR_STATE);
    ZT_CHECK(late == NULL && strstr(zt_cerr.msg, "finalized"));
    return zt_finish("test_comm");
}
