/* Tests of the shared-memory collectives (mpi+shm) under 1-4 ranks: every collective x dtype x
 * op x count, in place and not, blocking and not, on one node and on fake nodes (hierarchical),
 * against a reference that follows the documented summation order bit for bit, and against the
 * plain MPI path bit for bit on exact inputs; NaN/Inf, counters, settings, fallbacks; the
 * single-copy (CMA) path against the window bit for bit, and its failures. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "comm/internal.h"
#include "harness.h"

#include "ref_half.h"
#include "zero/zero.h"

#include <errno.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static zero_error zt_cerr; /* why the last zero_comm_init_*_with failed */

static int R, N;

/* ---------------------------------------------------------- the communicators under test */

typedef struct tcomm {
    zero_comm *c;
    const char *name;
    int shm;          /* large messages through the window (backend "mpi+shm") */
    int cma;          /* large messages by single copy (expected from the settings and g_cma_ok) */
    int nnodes;       /* nodes of the layout (1: every rank on one node) */
    int async;        /* non-blocking collectives through the window on the progress thread */
    int node_of[4];   /* node of each rank, documented rule of ZERO_COMM_FAKE_NODES */
} tcomm;

/* The single-copy and progress-thread settings of the next make() (NULL: unset). */
static const char *g_cma_env, *g_cma_min_env, *g_async_env;
/* Whether this test's own probe could read every other rank's memory (process_vm_readv). */
static int g_cma_ok;

static void set_env6(const char *shm, const char *min, const char *chunk, const char *fake,
                     const char *cma, const char *cma_min) {
    const char *names[6] = {"ZERO_COMM_SHM",        "ZERO_COMM_SHM_MIN_BYTES", "ZERO_COMM_SHM_CHUNK",
                            "ZERO_COMM_FAKE_NODES", "ZERO_COMM_CMA",           "ZERO_COMM_CMA_MIN_BYTES"};
    const char *vals[6] = {shm, min, chunk, fake, cma, cma_min};
    for (int i = 0; i < 6; i++) {
        if (vals[i]) setenv(names[i], vals[i], 1);
        else unsetenv(names[i]);
    }
    /* ZERO_COMM_ASYNC only as the test sets it (0 unless it says otherwise), never from the
     * environment the test ran in: the calling thread's path is tested on every machine. */
    setenv("ZERO_COMM_ASYNC", g_async_env ? g_async_env : "0", 1);
}

static void set_env(const char *shm, const char *min, const char *chunk, const char *fake) {
    set_env6(shm, min, chunk, fake, g_cma_env, g_cma_min_env);
}

/* Independently of the library: can every rank read a word of every other rank? */
static int probe_cma(void) {
    static volatile uint64_t word;
    word = 0x1234567890abcdefull + (uint64_t)R;
    long long mine[2] = {(long long)getpid(), (long long)(uintptr_t)&word};
    long long *all = malloc(2 * sizeof *all * (size_t)N);
    if (!all) exit(2);
    MPI_Allgather(mine, 2, MPI_LONG_LONG, all, 2, MPI_LONG_LONG, MPI_COMM_WORLD);
    int ok = 1;
    for (int r = 0; r < N; r++) {
        if (r == R) continue;
        uint64_t got = 0;
        struct iovec l = {&got, sizeof got}, rm = {(void *)(uintptr_t)all[2 * r + 1], sizeof got};
        long n = syscall(SYS_process_vm_readv, (long)all[2 * r], &l, 1ul, &rm, 1ul, 0ul);
        ok &= n == (long)sizeof got && got == 0x1234567890abcdefull + (uint64_t)r;
    }
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    free(all);
    return all_ok;
}

/* fake = NULL (the real node: all ranks here), "K" or "K:cyclic". */
static tcomm make(const char *name, const char *shm, const char *min, const char *chunk,
                  const char *fake) {
    tcomm t = {0};
    t.name = name;
    set_env(shm, min, chunk, fake);
    zero_status s = zero_comm_init_mpi_with(&t.c, NULL, NULL, &zt_cerr);
    set_env6(NULL, NULL, NULL, NULL, NULL, NULL);
    ZT_CHECKF(s == ZERO_OK, "%s: init: %s", name, zt_cerr.msg);
    int k = 1, cyclic = 0;
    if (fake) {
        k = atoi(fake);
        cyclic = strstr(fake, "cyclic") != NULL;
    }
    t.nnodes = k;
    int members[4] = {0};
    for (int r = 0; r < N; r++) {
        t.node_of[r] = cyclic ? r % k : (int)((long long)r * k / N);
        members[t.node_of[r]]++;
    }
    /* The window serves when two or more ranks share a node and every node has as many. */
    int uniform = 1;
    for (int m = 0; m < k; m++) uniform &= members[m] == members[0];
    t.shm = !(shm && !strcmp(shm, "0")) && uniform && members[0] > 1;
    if (t.c) {
        const char *b = zero_comm_backend(t.c);
        ZT_CHECKF(!strcmp(b, t.shm ? "mpi+shm" : "mpi"), "%s: backend %s, expected %s", name, b,
                  t.shm ? "mpi+shm" : "mpi");
        /* The hierarchical algorithms run exactly where the layout says. */
        const zero__shm *sh = zero__comm_mpi_shm(t.c);
        ZT_EQ_INT(zero__shm_nodes(sh), t.shm ? k : 0);
        ZT_EQ_INT(zero__shm_local_size(sh), t.shm ? members[0] : 0);
        t.cma = t.shm && g_cma_ok && !(g_cma_env && !strcmp(g_cma_env, "0"));
        ZT_CHECKF(zero__shm_cma(sh) == t.cma, "%s: single copy %d, expected %d", name, zero__shm_cma(sh),
                  t.cma);
        /* The thread never calls MPI: only where the window carries the whole collective. */
        int want_async = g_async_env && !strcmp(g_async_env, "1");
        if (g_async_env && !strcmp(g_async_env, "auto")) {
            /* auto: this rank has a core beside its OMP_NUM_THREADS (and OpenBLAS) threads, on
             * the CPUs it may use, shared with the node's other ranks when it may use them all. */
            long threads = getenv("OMP_NUM_THREADS") ? atol(getenv("OMP_NUM_THREADS")) : 0;
            long blas = getenv("OPENBLAS_NUM_THREADS") ? atol(getenv("OPENBLAS_NUM_THREADS")) : 0;
            if (blas > threads && threads > 0) threads = blas;
            cpu_set_t set;
            long online = sysconf(_SC_NPROCESSORS_ONLN), mine = online;
            if (sched_getaffinity(0, sizeof set, &set) == 0) mine = CPU_COUNT(&set);
            long sharing = mine < online ? 1 : members[0];
            want_async = threads > 0 && mine >= sharing * (threads + 1);
        }
        t.async = t.shm && k == 1 && want_async;
        ZT_CHECKF(zero__shm_async(sh) == t.async, "%s: progress thread %d, expected %d", name,
                  zero__shm_async(sh), t.async);
    }
    return t;
}

/* make() with the single-copy settings cma and cma_min. */
static tcomm make_cma(const char *name, const char *min, const char *chunk, const char *fake,
                      const char *cma, const char *cma_min) {
    g_cma_env = cma, g_cma_min_env = cma_min;
    tcomm t = make(name, NULL, min, chunk, fake);
    g_cma_env = g_cma_min_env = NULL;
    return t;
}

/* ---------------------------------------------------------- inputs */

static float from_half(zero_dtype dt, uint16_t u) {
    return dt == ZERO_DTYPE_BF16 ? ref_from_bf16(u) : ref_from_fp16(u);
}
static uint16_t to_half(zero_dtype dt, float f) {
    return dt == ZERO_DTYPE_BF16 ? ref_to_bf16(f) : ref_to_fp16(f);
}

static int is_float(zero_dtype dt) {
    return dt == ZERO_DTYPE_FP32 || dt == ZERO_DTYPE_BF16 || dt == ZERO_DTYPE_FP16;
}

static uint32_t mix(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* Rank r's element i. Exact inputs (salt even): floats are multiples of 0.5 in [-15, 15], so
 * every partial sum over <= 4 ranks is exact in bf16 and fp16 and no order can change a bit.
 * Inexact inputs (salt odd): floats of magnitudes 2^-8..2^8 with 24 random bits, whose sums
 * round, so the result shows the order of summation. Integers: wide values, sums that wrap. */
static void put_input(void *buf, zero_dtype dt, size_t j, int r, size_t i, int salt) {
    uint32_t h = mix((uint32_t)i * 2654435761u ^ mix((uint32_t)r * 97u + (uint32_t)salt * 7919u));
    int exact = !(salt & 1);
    float f = exact ? (float)((int)(h % 61u) - 30) * 0.5f
                    : ldexpf((float)(h & 0xffffffu) / 16777216.0f - 0.5f, (int)(h >> 28) - 7);
    switch (dt) {
    case ZERO_DTYPE_FP32: ((float *)buf)[j] = f; break;
    case ZERO_DTYPE_BF16:
    case ZERO_DTYPE_FP16: ((uint16_t *)buf)[j] = to_half(dt, f); break;
    case ZERO_DTYPE_INT32: ((int32_t *)buf)[j] = (int32_t)(h * 40503u); break;
    case ZERO_DTYPE_INT64: ((int64_t *)buf)[j] = (int64_t)(((uint64_t)h << 31) ^ (uint64_t)mix(h)); break;
    case ZERO_DTYPE_UINT8: ((uint8_t *)buf)[j] = (uint8_t)h; break;
    default: break;
    }
}

static float in_f(zero_dtype dt, int r, size_t i, int salt) {
    unsigned char b[4];
    put_input(b, dt, 0, r, i, salt);
    if (dt == ZERO_DTYPE_FP32) {
        float f;
        memcpy(&f, b, 4);
        return f;
    }
    uint16_t u;
    memcpy(&u, b, 2);
    return from_half(dt, u);
}

static float fmax_nan(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
}

/* The documented result of element i: on each node the ranks combine in rank order,
 * accumulating in fp32 and rounding a half type once; the node results (rounded to the dtype)
 * then combine across nodes (two at most here, where the order cannot matter); AVG divides. */
static void reference(const tcomm *t, zero_dtype dt, zero_op op, size_t i, int salt, void *out) {
    const int max = op == ZERO_OP_MAX;
    if (is_float(dt)) {
        float total = 0;
        int first = 1;
        for (int m = 0; m < t->nnodes; m++) {
            float acc = 0;
            int any = 0;
            for (int r = 0; r < N; r++) {
                if (t->node_of[r] != m) continue;
                float x = in_f(dt, r, i, salt);
                acc = !any ? x : max ? fmax_nan(acc, x) : acc + x;
                any = 1;
            }
            if (!any) continue;
            if (dt != ZERO_DTYPE_FP32) acc = from_half(dt, to_half(dt, acc));
            total = first ? acc : max ? fmax_nan(total, acc) : total + acc;
            first = 0;
        }
        if (dt != ZERO_DTYPE_FP32) total = from_half(dt, to_half(dt, total));
        if (op == ZERO_OP_AVG) total = total / (float)N;
        if (dt == ZERO_DTYPE_FP32) memcpy(out, &total, 4);
        else {
            uint16_t u = to_half(dt, total);
            memcpy(out, &u, 2);
        }
        return;
    }
    /* Integers: exact; sums wrap; AVG is C division of the wrapped sum. */
    int64_t vmax = INT64_MIN;
    uint64_t sum = 0;
    for (int r = 0; r < N; r++) {
        unsigned char b[8] = {0};
        int64_t v = 0;
        put_input(b, dt, 0, r, i, salt);
        if (dt == ZERO_DTYPE_INT32) {
            int32_t x;
            memcpy(&x, b, 4);
            v = x;
        } else if (dt == ZERO_DTYPE_INT64) {
            memcpy(&v, b, 8);
        } else {
            v = b[0];
        }
        sum += (uint64_t)v;
        if (v > vmax) vmax = v;
    }
    if (dt == ZERO_DTYPE_INT32) {
        int32_t s = (int32_t)(uint32_t)sum, v = max ? (int32_t)vmax : op == ZERO_OP_AVG ? s / N : s;
        memcpy(out, &v, 4);
    } else if (dt == ZERO_DTYPE_INT64) {
        int64_t s = (int64_t)sum, v = max ? vmax : op == ZERO_OP_AVG ? s / N : s;
        memcpy(out, &v, 8);
    } else {
        uint8_t s = (uint8_t)sum, v = max ? (uint8_t)vmax : op == ZERO_OP_AVG ? (uint8_t)(s / N) : s;
        memcpy(out, &v, 1);
    }
}

/* ---------------------------------------------------------- buffers and checks */

static void fill(void *buf, zero_dtype dt, size_t n, int r, int salt, size_t first) {
    for (size_t i = 0; i < n; i++) put_input(buf, dt, i, r, first + i, salt);
}

static void expect_reduced(const tcomm *t, const unsigned char *got, zero_dtype dt, zero_op op,
                           size_t n, size_t first, int salt, const char *what) {
    size_t es = zero_dtype_size(dt);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char want[8];
        reference(t, dt, op, first + i, salt, want);
        if (memcmp(got + i * es, want, es) && bad++ < 3)
            ZT_FAIL("%s: element %zu of %zu differs from the reference", what, first + i, n);
    }
    zt_checks++;
}

static void expect_gathered(const unsigned char *got, zero_dtype dt, size_t n, int salt, const char *what) {
    size_t es = zero_dtype_size(dt);
    unsigned char *want = zt_guarded_alloc(n * es);
    for (int r = 0; r < N; r++) {
        fill(want, dt, n, r, salt, 0);
        ZT_CHECKF(!memcmp(got + (size_t)r * n * es, want, n * es), "%s: block of rank %d differs", what, r);
    }
    free(want);
}

static void complete(zero_comm *c, zero_request *req, int by_test, const char *what) {
    if (!by_test) {
        ZT_CHECKF(zero_request_wait(req) == ZERO_OK, "%s: wait: %s", what, zero_comm_last_error(c));
        return;
    }
    int done = 0;
    while (!done) {
        if (zero_request_test(req, &done) != ZERO_OK) {
            ZT_FAIL("%s: test: %s", what, zero_comm_last_error(c));
            return;
        }
    }
}

static void check_counted(zero_comm *c, const zero_comm_counters *before, zero_coll k, uint64_t m,
                          const char *what) {
    zero_comm_counters after;
    zero_comm_get_counters(c, &after);
    uint64_t want = N == 1 ? 0 : m * (k == ZERO_COLL_ALL_REDUCE ? 4 : 2) * (uint64_t)(N - 1) / (uint64_t)N;
    ZT_CHECKF(after.calls[k] == before->calls[k] + 1 && after.bytes[k] - before->bytes[k] == want,
              "%s: counted %llu bytes, the ring rule says %llu", what,
              (unsigned long long)(after.bytes[k] - before->bytes[k]), (unsigned long long)want);
}

/* ---------------------------------------------------------- one collective */

enum { K_AR, K_RS, K_AG };
static const char *kname[3] = {"all_reduce", "reduce_scatter", "all_gather"};

/* Runs collective k on comm t with rank R's inputs; returns the malloc'd result buffer (the
 * reduced vector, rank R's block, or all blocks) for the caller to check and free. */
static unsigned char *run(const tcomm *t, int k, size_t n, zero_dtype dt, zero_op op, int nb,
                          int inplace, int salt, char *what, size_t whatcap) {
    size_t es = zero_dtype_size(dt), bytes = n * es, full = bytes * (size_t)N;
    snprintf(what, whatcap, "%s: %s %s op %d n %zu %s %s salt %d", t->name, kname[k],
             zero_dtype_name(dt), (int)op, n, nb ? "nonblocking" : "blocking",
             inplace ? "in place" : "out of place", salt);
    size_t sendn = k == K_RS ? n * (size_t)N : n, recvn = k == K_AG ? n * (size_t)N : n;
    unsigned char *big = zt_guarded_alloc(k == K_AR ? bytes : full);
    unsigned char *send, *recv;
    if (k == K_AR) {
        send = big;
        recv = inplace ? big : zt_guarded_alloc(bytes);
    } else if (k == K_RS) {
        send = big;
        recv = inplace ? big + (size_t)R * bytes : zt_guarded_alloc(bytes);
    } else {
        recv = big;
        send = inplace ? big + (size_t)R * bytes : zt_guarded_alloc(bytes);
    }
    fill(send, dt, sendn, R, salt, 0);
    unsigned char *keep = NULL;
    if (!inplace) {
        keep = zt_guarded_alloc(sendn * es);
        memcpy(keep, send, sendn * es);
    }
    zero_comm_counters before;
    zero_comm_get_counters(t->c, &before);
    zero_request *req = NULL;
    zero_status s;
    if (k == K_AR)
        s = nb ? zero_comm_iall_reduce(t->c, send, recv, n, dt, op, &req)
               : zero_comm_all_reduce(t->c, send, recv, n, dt, op);
    else if (k == K_RS)
        s = nb ? zero_comm_ireduce_scatter(t->c, send, recv, n, dt, op, &req)
               : zero_comm_reduce_scatter(t->c, send, recv, n, dt, op);
    else
        s = nb ? zero_comm_iall_gather(t->c, send, recv, n, dt, &req)
               : zero_comm_all_gather(t->c, send, recv, n, dt);
    ZT_CHECKF(s == ZERO_OK, "%s: %s", what, zero_comm_last_error(t->c));
    if (nb && s == ZERO_OK) complete(t->c, req, salt & 2, what);
    check_counted(t->c, &before, k == K_AR ? ZERO_COLL_ALL_REDUCE : k == K_RS ? ZERO_COLL_REDUCE_SCATTER
                                                                           : ZERO_COLL_ALL_GATHER,
                  k == K_AR ? bytes : full, what);
    if (inplace) {
        ZT_CHECKF(zt_guard_ok(big, k == K_AR ? bytes : full), "%s: wrote past the buffer", what);
    } else {
        ZT_CHECKF(zt_guard_ok(recv, recvn * es), "%s: wrote past recv", what);
        ZT_CHECKF(!memcmp(keep, send, sendn * es), "%s: send changed", what);
        free(keep);
    }
    /* Hand back just the result. */
    unsigned char *res = zt_guarded_alloc(recvn * es);
    memcpy(res, recv, recvn * es);
    free(big);
    if (!inplace) free(k == K_AG ? send : recv);
    return res;
}

/* One case on t: the result against the reference, and (exact inputs) against the plain path. */
static void one(const tcomm *t, const tcomm *plain, int k, size_t n, zero_dtype dt, zero_op op,
                int nb, int inplace, int salt) {
    /* Plain MPI combines 3 or more ranks in an order of its own: exact inputs only. */
    if (!t->shm && N > 2 && (salt & 1)) salt++;
    char what[200];
    unsigned char *got = run(t, k, n, dt, op, nb, inplace, salt, what, sizeof what);
    if (k == K_AG) expect_gathered(got, dt, n, salt, what);
    else expect_reduced(t, got, dt, op, n, k == K_RS ? (size_t)R * n : 0, salt, what);
    if (plain && !(salt & 1)) {
        char w2[200];
        unsigned char *ref = run(plain, k, n, dt, op, 0, 0, salt, w2, sizeof w2);
        size_t bytes = (k == K_AG ? n * (size_t)N : n) * zero_dtype_size(dt);
        ZT_CHECKF(!memcmp(ref, got, bytes), "%s: differs from the plain MPI path", what);
        free(ref);
    }
    free(got);
}

/* ---------------------------------------------------------- grids */

static int g_salt;

/* Every collective x dtype x op x {blocking, not} x {in place, not} at these counts. */
static void grid(const tcomm *t, const tcomm *plain, const size_t *counts, size_t ncounts) {
    for (size_t ci = 0; ci < ncounts; ci++) {
        for (int d = 0; d < ZERO_DTYPE_COUNT; d++) {
            zero_dtype dt = (zero_dtype)d;
            for (int v = 0; v < 4; v++) {
                int nb = v & 1, inplace = v >> 1;
                for (int op = 0; op < 3; op++) {
                    one(t, plain, K_AR, counts[ci], dt, (zero_op)op, nb, inplace, ++g_salt);
                    one(t, plain, K_RS, counts[ci], dt, (zero_op)op, nb, inplace, ++g_salt);
                }
                one(t, plain, K_AG, counts[ci], dt, ZERO_OP_SUM, nb, inplace, ++g_salt);
            }
        }
    }
}

/* Large messages: each collective and dtype once, the variant and op rotating. */
static void large(const tcomm *t, const tcomm *plain, size_t n) {
    for (int d = 0; d < ZERO_DTYPE_COUNT; d++) {
        int nb = d & 1, inplace = (d >> 1) & 1;
        one(t, plain, K_AR, n, (zero_dtype)d, (zero_op)(d % 3), nb, inplace, ++g_salt);
        one(t, plain, K_RS, n, (zero_dtype)d, (zero_op)((d + 1) % 3), !nb, inplace, ++g_salt);
        one(t, plain, K_AG, n, (zero_dtype)d, ZERO_OP_SUM, nb, !inplace, ++g_salt);
    }
}

/* ---------------------------------------------------------- special cases */

/* Inf and NaN on one rank reach every rank through the window, for every float type. */
static void test_specials(const tcomm *t) {
    enum { n = 4099 };
    const zero_dtype dts[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int d = 0; d < 3; d++) {
        zero_dtype dt = dts[d];
        size_t es = zero_dtype_size(dt);
        for (int op = 0; op <= 2; op += 2) {
            unsigned char *buf = zt_guarded_alloc(n * es);
            for (size_t i = 0; i < n; i++) {
                float v = (float)(i % 7) - 3.0f;
                if (R == N - 1 && i == 5) v = INFINITY;
                if (R == 0 && i == 9) v = NAN;
                if (i == 11) v = R == 0 ? INFINITY : -INFINITY; /* Inf - Inf = NaN with > 1 rank */
                if (dt == ZERO_DTYPE_FP32) ((float *)(void *)buf)[i] = v;
                else ((uint16_t *)(void *)buf)[i] = to_half(dt, v);
            }
            ZT_OK(zero_comm_all_reduce(t->c, buf, buf, n, dt, (zero_op)op));
            float r5, r9, r11, r0;
            if (dt == ZERO_DTYPE_FP32) {
                const float *f = (const float *)(void *)buf;
                r5 = f[5], r9 = f[9], r11 = f[11], r0 = f[0];
            } else {
                const uint16_t *h = (const uint16_t *)(void *)buf;
                r5 = from_half(dt, h[5]), r9 = from_half(dt, h[9]), r11 = from_half(dt, h[11]);
                r0 = from_half(dt, h[0]);
            }
            ZT_CHECKF(isinf(r5) && r5 > 0, "%s op %d: Inf on one rank gave %g", zero_dtype_name(dt), op, r5);
            ZT_CHECKF(isnan(r9), "%s op %d: NaN on one rank gave %g", zero_dtype_name(dt), op, r9);
            if (op == ZERO_OP_SUM) {
                ZT_CHECKF(N == 1 ? isinf(r11) : isnan(r11), "%s: Inf + -Inf gave %g", zero_dtype_name(dt), r11);
                ZT_CHECKF(r0 == -3.0f * (float)N, "%s: element 0 %g", zero_dtype_name(dt), r0);
            } else {
                ZT_CHECKF(isinf(r11) && r11 > 0, "%s MAX: Inf vs -Inf gave %g", zero_dtype_name(dt), r11);
                ZT_CHECK(r0 == -3.0f);
            }
            free(buf);
        }
    }
}

/* Results over 16 MiB leave the window with streaming stores: an all-reduce and an all-gather
 * of that size, in place, against the reference. */
static void test_huge(const tcomm *t) {
    const size_t n = ((size_t)16 << 20) / 4 + 5, m = n / (size_t)N + 7;
    char what[200];
    unsigned char *got = run(t, K_AR, n, ZERO_DTYPE_FP32, ZERO_OP_SUM, 0, 1, 4000, what, sizeof what);
    expect_reduced(t, got, ZERO_DTYPE_FP32, ZERO_OP_SUM, n, 0, 4000, what);
    free(got);
    got = run(t, K_AG, m, ZERO_DTYPE_FP32, ZERO_OP_SUM, 1, 1, 4002, what, sizeof what);
    expect_gathered(got, ZERO_DTYPE_FP32, m, 4002, what);
    free(got);
}

/* Requests through the window and through plain MPI in flight together, finished in reverse
 * order; the window's complete at issue, the others at wait. */
static void test_requests(const tcomm *t) {
    enum { big = 70001, small = 5 };
    float *a = malloc(big * sizeof *a), *g = malloc((size_t)N * big * sizeof *g);
    int32_t *b = malloc((size_t)N * small * sizeof *b), *bs = malloc(small * sizeof *bs);
    float *c = malloc(small * sizeof *c);
    if (!a || !g || !b || !bs || !c) exit(2);
    fill(a, ZERO_DTYPE_FP32, big, R, 2000, 0);
    fill(b, ZERO_DTYPE_INT32, (size_t)N * small, R, 2002, 0);
    fill(c, ZERO_DTYPE_FP32, small, R, 2004, 0);
    fill(g + (size_t)R * big, ZERO_DTYPE_FP32, big, R, 2006, 0);
    zero_request *r1 = NULL, *r2 = NULL, *r3 = NULL, *r4 = NULL;
    ZT_OK(zero_comm_iall_reduce(t->c, a, a, big, ZERO_DTYPE_FP32, ZERO_OP_AVG, &r1));
    ZT_OK(zero_comm_ireduce_scatter(t->c, b, bs, small, ZERO_DTYPE_INT32, ZERO_OP_SUM, &r2));
    ZT_OK(zero_comm_iall_gather(t->c, g + (size_t)R * big, g, big, ZERO_DTYPE_FP32, &r3));
    ZT_OK(zero_comm_iall_reduce(t->c, c, c, small, ZERO_DTYPE_FP32, ZERO_OP_MAX, &r4));
    complete(t->c, r4, 1, "requests: small all_reduce");
    ZT_OK(zero_request_wait(r3));
    complete(t->c, r2, 1, "requests: small reduce_scatter");
    ZT_OK(zero_request_wait(r1));
    expect_reduced(t, (unsigned char *)a, ZERO_DTYPE_FP32, ZERO_OP_AVG, big, 0, 2000, "requests: avg");
    expect_reduced(t, (unsigned char *)bs, ZERO_DTYPE_INT32, ZERO_OP_SUM, small, (size_t)R * small, 2002,
                   "requests: reduce_scatter");
    expect_reduced(t, (unsigned char *)c, ZERO_DTYPE_FP32, ZERO_OP_MAX, small, 0, 2004, "requests: max");
    expect_gathered((unsigned char *)g, ZERO_DTYPE_FP32, big, 2006, "requests: all_gather");
    free(a);
    free(g);
    free(b);
    free(bs);
    free(c);
}

/* All ranks hold the same all-reduce result bit for bit, even where sums round. */
static void test_identical(const tcomm *t) {
    enum { n = 20011 }; /* above the default threshold */
    float *x = malloc(n * sizeof *x), *all = malloc((size_t)N * n * sizeof *all);
    if (!x || !all) exit(2);
    fill(x, ZERO_DTYPE_FP32, n, R, 3001, 0);
    ZT_OK(zero_comm_all_reduce(t->c, x, x, n, ZERO_DTYPE_FP32, ZERO_OP_SUM));
    ZT_OK(zero_comm_all_gather(t->c, x, all, n, ZERO_DTYPE_FP32));
    for (int r = 1; r < N; r++)
        ZT_CHECKF(!memcmp(all, all + (size_t)r * n, n * sizeof *all), "%s: rank %d's sums differ from rank 0's",
                  t->name, r);
    free(x);
    free(all);
}

/* A split of a window communicator has windows of its own. */
static void test_split(const tcomm *t) {
    zero_comm *sub = NULL;
    ZT_OK(zero_comm_split(t->c, R % 2, R, &sub));
    if (!sub) return;
    int members = (N - R % 2 + 1) / 2;
    ZT_CHECKF(!strcmp(zero_comm_backend(sub), members > 1 ? "mpi+shm" : "mpi"), "split backend %s",
              zero_comm_backend(sub));
    enum { n = 3001 };
    int64_t v[n];
    for (int i = 0; i < n; i++) v[i] = (int64_t)R * 1000003 + i;
    ZT_OK(zero_comm_all_reduce(sub, v, v, n, ZERO_DTYPE_INT64, ZERO_OP_SUM));
    int64_t want = 0;
    for (int r = R % 2; r < N; r += 2) want += (int64_t)r * 1000003;
    int bad = 0;
    for (int i = 0; i < n; i++) bad += v[i] != want + (int64_t)i * members;
    ZT_EQ_INT(bad, 0);
    zero_comm_free(sub);
}

/* The default threshold: messages under 16 KiB take plain MPI and allocate no window; the
 * first one of 16 KiB allocates it. */
static void test_threshold(void) {
    tcomm t = make("threshold", NULL, NULL, NULL, NULL);
    if (!t.c) return;
    const zero__shm *sh = zero__comm_mpi_shm(t.c);
    enum { big_n = 4096, small_n = big_n - 1 };
    static float small[small_n], big[big_n];
    for (int i = 0; i < big_n; i++) big[i] = (float)R, small[i % small_n] = (float)R;
    ZT_OK(zero_comm_all_reduce(t.c, small, small, small_n, ZERO_DTYPE_FP32, ZERO_OP_SUM));
    ZT_EQ_INT(zero__shm_attached(sh), 0);
    ZT_OK(zero_comm_all_reduce(t.c, big, big, big_n, ZERO_DTYPE_FP32, ZERO_OP_SUM));
    ZT_EQ_INT(zero__shm_attached(sh), t.shm);
    ZT_CHECK(small[0] == (float)(N * (N - 1) / 2) && big[big_n - 1] == (float)(N * (N - 1) / 2));
    zero_comm_free(t.c);
}

/* Bad settings fail the init with the variable named, on every rank alike. */
static void test_settings(void) {
    static const char *cases[][7] = {
        {"ZERO_COMM_SHM", "yes", NULL, NULL, NULL, NULL, NULL},
        {"ZERO_COMM_SHM_MIN_BYTES", NULL, "-5", NULL, NULL, NULL, NULL},
        {"ZERO_COMM_SHM_CHUNK", NULL, NULL, "100", NULL, NULL, NULL},
        {"ZERO_COMM_SHM_CHUNK", NULL, NULL, "2G", NULL, NULL, NULL},
        {"ZERO_COMM_FAKE_NODES", NULL, NULL, NULL, "0", NULL, NULL},
        {"ZERO_COMM_FAKE_NODES", NULL, NULL, NULL, "2:round", NULL, NULL},
        {"ZERO_COMM_CMA", NULL, NULL, NULL, NULL, "2", NULL},
        {"ZERO_COMM_CMA", NULL, NULL, NULL, NULL, "on", NULL},
        {"ZERO_COMM_CMA_MIN_BYTES", NULL, NULL, NULL, NULL, NULL, "1T"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        set_env6(cases[i][1], cases[i][2], cases[i][3], cases[i][4], cases[i][5], cases[i][6]);
        zero_comm *c = (zero_comm *)(uintptr_t)1;
        zero_status s = zero_comm_init_mpi_with(&c, NULL, NULL, &zt_cerr);
        set_env6(NULL, NULL, NULL, NULL, NULL, NULL);
        ZT_EQ_INT(s, ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(c == NULL && strstr(zt_cerr.msg, cases[i][0]), "case %zu: '%s'", i,
                  zt_cerr.msg);
        if (s == ZERO_OK) zero_comm_free(c);
    }
    g_async_env = "yes";
    set_env6(NULL, NULL, NULL, NULL, NULL, NULL);
    zero_comm *ca = (zero_comm *)(uintptr_t)1;
    zero_status sa = zero_comm_init_mpi_with(&ca, NULL, NULL, &zt_cerr);
    g_async_env = NULL;
    set_env6(NULL, NULL, NULL, NULL, NULL, NULL);
    ZT_EQ_INT(sa, ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(ca == NULL && strstr(zt_cerr.msg, "ZERO_COMM_ASYNC 'yes'"), "'%s'",
              zt_cerr.msg);
    /* More fake nodes than ranks: one rank per node, so no window (and no error: a small
     * split of a run with K fake nodes gets no more nodes than ranks). */
    char k[16];
    snprintf(k, sizeof k, "%d", N + 1);
    set_env(NULL, "0", NULL, k);
    zero_comm *c = NULL;
    ZT_OK(zero_comm_init_mpi(&c, NULL));
    set_env(NULL, NULL, NULL, NULL);
    ZT_CHECK(c && !strcmp(zero_comm_backend(c), "mpi"));
    zero_comm_free(c);
}

/* ---------------------------------------------------------- single copy (CMA) */

/* The same call through the single-copy path (a) and the window (b): bit for bit equal, on
 * inexact inputs (where the order of summation shows), and equal to the reference. */
static void cma_one(const tcomm *a, const tcomm *b, int k, size_t n, zero_dtype dt, zero_op op,
                    int inplace, int salt) {
    /* Nodes of unequal sizes are plain MPI, whose order over 3 or more ranks is its own. */
    if (!a->shm && N > 2 && (salt & 1)) salt++;
    char what[200], w2[200];
    unsigned char *got = run(a, k, n, dt, op, 0, inplace, salt, what, sizeof what);
    unsigned char *ref = run(b, k, n, dt, op, (salt >> 1) & 1, inplace, salt, w2, sizeof w2);
    const size_t bytes = (k == K_AG ? n * (size_t)N : n) * zero_dtype_size(dt);
    ZT_CHECKF(!memcmp(got, ref, bytes), "%s: single copy differs from the window path", what);
    if (k == K_AG) expect_gathered(got, dt, n, salt, what);
    else expect_reduced(a, got, dt, op, n, k == K_RS ? (size_t)R * n : 0, salt, what);
    free(got);
    free(ref);
}

/* Every collective x fp32/bf16/fp16 x {in place, not} at these counts (SUM, MAX on the side);
 * the large counts once per dtype, the variant rotating. */
static void cma_grid(const tcomm *a, const tcomm *b, const size_t *counts, size_t ncounts,
                     size_t huge, size_t big) {
    const zero_dtype dts[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int d = 0; d < 3; d++) {
        for (size_t ci = 0; ci < ncounts; ci++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                zero_op op = ci % 3 == 2 ? ZERO_OP_MAX : ZERO_OP_SUM;
                for (int k = 0; k < 3; k++)
                    cma_one(a, b, k, counts[ci], dts[d], op, inplace, 2 * ++g_salt + 1);
            }
        }
        /* Each collective crosses the piece size once per dtype (`big` with 2 ranks, bf16/fp16:
         * 131072 elements a piece), one of them at `huge`. */
        for (int k = 0; k < 3; k++) {
            size_t n = k == d ? huge : big;
            if (n) cma_one(a, b, k, n, dts[d], ZERO_OP_SUM, (d + k) & 1, 2 * ++g_salt + 1);
        }
    }
}

/* A peer buffer the kernel cannot read (PROT_NONE on the rank that owns it, a page it never
 * touches itself) fails the call on every rank, naming the peer and the errno, without a hang;
 * the communicator works afterwards. */
static void test_cma_fault(const tcomm *t, int nb) { /* nb: 0 blocking, 1 on the thread, 2 either */
    if (!t->cma || N < 2) return;
    const long page = sysconf(_SC_PAGESIZE);
    const size_t n = (size_t)page; /* fp32 elements per block or part: 4 pages */
    for (int k = 0; k < 2; k++) {
        const size_t total = n * (size_t)N; /* N blocks (reduce-scatter) or N parts (all-reduce) */
        const size_t bytes = total * sizeof(float);
        float *send = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        float *recv = malloc((k == K_RS ? n : total) * sizeof(float));
        if (send == MAP_FAILED || !recv) exit(2);
        for (size_t i = 0; i < total; i++) send[i] = (float)(R + 1);
        /* Block / part 0 of rank 1's send is read by local rank 0 alone. */
        if (R == 1) ZT_CHECK(mprotect(send, (size_t)page, PROT_NONE) == 0);
        zero_status s;
        if (nb) {
            zero_request *req = NULL;
            s = k == K_RS ? zero_comm_ireduce_scatter(t->c, send, recv, n, ZERO_DTYPE_FP32, ZERO_OP_SUM, &req)
                          : zero_comm_iall_reduce(t->c, send, recv, total, ZERO_DTYPE_FP32, ZERO_OP_SUM, &req);
            /* On the thread the start always succeeds and wait reports; without it (nb == 2)
             * either may. */
            if (nb == 1) ZT_CHECKF(s == ZERO_OK, "fault %s: the start failed: %s", kname[k], zero_comm_last_error(t->c));
            if (s == ZERO_OK) s = zero_request_wait(req);
        } else {
            s = k == K_RS ? zero_comm_reduce_scatter(t->c, send, recv, n, ZERO_DTYPE_FP32, ZERO_OP_SUM)
                          : zero_comm_all_reduce(t->c, send, recv, total, ZERO_DTYPE_FP32, ZERO_OP_SUM);
        }
        const char *msg = zero_comm_last_error(t->c);
        ZT_CHECKF(s == ZERO_ERR_COMM, "fault %s: status %d (%s)", kname[k], (int)s, msg);
        char want[64];
        snprintf(want, sizeof want, "errno %d", EFAULT);
        ZT_CHECKF(strstr(msg, want) && strstr(msg, "local rank 1") && strstr(msg, "process_vm_readv"),
                  "fault: rank %d's message '%s'", R, msg);
        if (R == 0)
            ZT_CHECKF(strstr(msg, "of local rank 1's buffer"), "fault: reader's message '%s'", msg);
        else
            ZT_CHECKF(strstr(msg, "local rank 0 of this node"), "fault: peer's message '%s'", msg);
        if (R == 1) ZT_CHECK(mprotect(send, (size_t)page, PROT_READ | PROT_WRITE) == 0);
        /* The next call is whole again. */
        ZT_OK(zero_comm_all_reduce(t->c, send, send, total, ZERO_DTYPE_FP32, ZERO_OP_SUM));
        int bad = 0;
        for (size_t i = 0; i < total; i++) bad += send[i] != (float)(N * (N + 1) / 2);
        ZT_EQ_INT(bad, 0);
        munmap(send, bytes);
        free(recv);
    }
}

static void test_cma(void) {
    /* Everything through the window from 1 byte: single copy from 0 bytes vs never. */
    tcomm a = make_cma("single copy", "0", NULL, NULL, NULL, "0");
    tcomm b = make_cma("window (ZERO_COMM_CMA=0)", "0", "64K", NULL, "0", NULL);
    if (!a.c || !b.c) return;
    /* Primes; 65537 crosses the 256 KiB piece of fp32 with 2 ranks (of every type with more). */
    const size_t counts[] = {1, 7, 1009, 65537};
    cma_grid(&a, &b, counts, sizeof counts / sizeof counts[0], ((size_t)1 << 20) + 3, 131101);
    test_cma_fault(&a, 0);
    zero_comm_free(a.c);
    zero_comm_free(b.c);
    /* The default threshold keeps small messages on the window; ZERO_COMM_CMA=1 is the default. */
    tcomm d = make_cma("single copy, ZERO_COMM_CMA=1", NULL, NULL, NULL, "1", NULL);
    if (d.c) {
        test_huge(&d);
        zero_comm_free(d.c);
    }
    /* Hierarchical: single copy only in the node step; small chunks give many spans. */
    for (int f = 0; f < 2 && N >= 2; f++) {
        const char *fake = f ? "2:cyclic" : "2";
        char n1[64], n2[64];
        snprintf(n1, sizeof n1, "fake nodes %s, single copy, chunk 1K", fake);
        snprintf(n2, sizeof n2, "fake nodes %s, window, chunk 1K", fake);
        tcomm ha = make_cma(n1, "0", "1K", fake, NULL, "0");
        tcomm hb = make_cma(n2, "0", "1K", fake, "0", NULL);
        if (!ha.c || !hb.c) continue;
        const size_t hcounts[] = {1, 7, 1009};
        cma_grid(&ha, &hb, hcounts, sizeof hcounts / sizeof hcounts[0], 0, f ? 0 : 65537);
        zero_comm_free(ha.c);
        zero_comm_free(hb.c);
    }
}

/* ---------------------------------------------------------- progress thread (ZERO_COMM_ASYNC) */

/* make() with ZERO_COMM_ASYNC = async and the single-copy threshold cma_min. */
static tcomm make_async(const char *name, const char *async, const char *min, const char *fake,
                        const char *cma_min) {
    g_async_env = async, g_cma_min_env = cma_min;
    tcomm t = make(name, NULL, min, NULL, fake);
    g_async_env = g_cma_min_env = NULL;
    return t;
}

/* A non-blocking collective on the thread returns before the peers have made theirs: rank 0
 * starts a reduce-scatter (single copy) and an all-gather (window) and finds both running, and
 * only then lets the other ranks start theirs (on the caller's thread, rank 0's first call would
 * wait for peers that wait for it); every result is the reference's. */
static void test_async_early(const tcomm *t) {
    if (R == 0 && !zero__shm_async(zero__comm_mpi_shm(t->c))) ZT_FAIL("early: rank 0 is not on the thread");
    if (!t->async) return; /* the same on every rank */
    enum { nr = 70001, ng = 1009 }; /* N*nr floats take the single copy, N*ng the window */
    float *rs = malloc((size_t)N * nr * sizeof *rs), *rs_out = malloc(nr * sizeof *rs_out);
    float *ag = malloc(ng * sizeof *ag), *ag_out = malloc((size_t)N * ng * sizeof *ag_out);
    if (!rs || !rs_out || !ag || !ag_out) exit(2);
    fill(rs, ZERO_DTYPE_FP32, (size_t)N * nr, R, 5001, 0);
    fill(ag, ZERO_DTYPE_FP32, ng, R, 5003, 0);
    /* The window is allocated (collectively, on the calling thread) by its first collective. */
    float warm[16] = {0};
    ZT_OK(zero_comm_all_reduce(t->c, warm, warm, 16, ZERO_DTYPE_FP32, ZERO_OP_SUM));
    zero_request *a = NULL, *b = NULL;
    int token = 0;
    if (R == 0) {
        ZT_OK(zero_comm_ireduce_scatter(t->c, rs, rs_out, nr, ZERO_DTYPE_FP32, ZERO_OP_SUM, &a));
        ZT_OK(zero_comm_iall_gather(t->c, ag, ag_out, ng, ZERO_DTYPE_FP32, &b));
        int da = 1, db = 1;
        ZT_OK(zero_request_test(a, &da));
        ZT_OK(zero_request_test(b, &db));
        ZT_CHECKF(!da && !db, "early: rank 0's collectives done (%d, %d) before any peer started", da, db);
        if (da) a = NULL; /* a finished request is freed by the test */
        if (db) b = NULL;
        token = 1;
    }
    MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (R != 0) {
        ZT_OK(zero_comm_ireduce_scatter(t->c, rs, rs_out, nr, ZERO_DTYPE_FP32, ZERO_OP_SUM, &a));
        ZT_OK(zero_comm_iall_gather(t->c, ag, ag_out, ng, ZERO_DTYPE_FP32, &b));
    }
    ZT_OK(zero_request_wait(b));
    ZT_OK(zero_request_wait(a));
    expect_reduced(t, (unsigned char *)rs_out, ZERO_DTYPE_FP32, ZERO_OP_SUM, nr, (size_t)R * nr, 5001,
                   "early: reduce_scatter");
    expect_gathered((unsigned char *)ag_out, ZERO_DTYPE_FP32, ng, 5003, "early: all_gather");
    free(rs);
    free(rs_out);
    free(ag);
    free(ag_out);
}

/* One collective of test_async_queue: its buffers and request. */
typedef struct qcall {
    int k;
    zero_dtype dt;
    zero_op op;
    size_t n;
    int inplace, nb, salt;
    unsigned char *buf, *out; /* the send (in place: the only) buffer, and recv */
    zero_request *req;
} qcall;

static void q_start(const tcomm *t, qcall *q) {
    const size_t es = zero_dtype_size(q->dt), n = q->n;
    const size_t sendn = q->k == K_RS ? n * (size_t)N : n, recvn = q->k == K_AG ? n * (size_t)N : n;
    q->buf = malloc((q->k == K_AG && q->inplace ? recvn : sendn) * es);
    q->out = q->inplace ? NULL : malloc(recvn * es);
    if (!q->buf || (!q->inplace && !q->out)) exit(2);
    unsigned char *send = q->buf, *recv = q->out;
    if (q->inplace) {
        send = q->k == K_AG ? q->buf + (size_t)R * n * es : q->buf;
        recv = q->k == K_RS ? q->buf + (size_t)R * n * es : q->buf;
    }
    fill(send, q->dt, sendn, R, q->salt, 0);
    zero_status s;
    zero_request **r = q->nb ? &q->req : NULL;
    if (q->k == K_AR)
        s = r ? zero_comm_iall_reduce(t->c, send, recv, n, q->dt, q->op, r)
              : zero_comm_all_reduce(t->c, send, recv, n, q->dt, q->op);
    else if (q->k == K_RS)
        s = r ? zero_comm_ireduce_scatter(t->c, send, recv, n, q->dt, q->op, r)
              : zero_comm_reduce_scatter(t->c, send, recv, n, q->dt, q->op);
    else
        s = r ? zero_comm_iall_gather(t->c, send, recv, n, q->dt, r) : zero_comm_all_gather(t->c, send, recv, n, q->dt);
    ZT_CHECKF(s == ZERO_OK, "queue: %s salt %d: %s", kname[q->k], q->salt, zero_comm_last_error(t->c));
}

static void q_finish(const tcomm *t, qcall *q) {
    char what[96];
    snprintf(what, sizeof what, "queue: %s %s n %zu salt %d", kname[q->k], zero_dtype_name(q->dt), q->n, q->salt);
    if (q->req) ZT_CHECKF(zero_request_wait(q->req) == ZERO_OK, "%s: %s", what, zero_comm_last_error(t->c));
    const size_t es = zero_dtype_size(q->dt);
    const unsigned char *res = q->inplace ? q->buf : q->out;
    if (q->inplace && q->k == K_RS) res += (size_t)R * q->n * es;
    if (q->k == K_AG) expect_gathered(res, q->dt, q->n, q->salt, what);
    else expect_reduced(t, res, q->dt, q->op, q->n, q->k == K_RS ? (size_t)R * q->n : 0, q->salt, what);
    free(q->buf);
    free(q->out);
}

/* Many collectives on the thread at once, of every kind, through the window and by single copy,
 * in place and not, with blocking ones (window and plain MPI) among them, finished in reverse
 * order: the thread runs them in call order on every rank, and each result is the reference's
 * bit for bit. */
static void test_async_queue(const tcomm *t) {
    qcall q[] = {
        {K_AR, ZERO_DTYPE_FP32, ZERO_OP_SUM, 300007, 0, 1, 0, NULL, NULL, NULL},
        {K_RS, ZERO_DTYPE_BF16, ZERO_OP_SUM, 262147, 1, 1, 0, NULL, NULL, NULL},
        {K_AG, ZERO_DTYPE_FP32, ZERO_OP_SUM, 5003, 0, 1, 0, NULL, NULL, NULL},
        {K_AR, ZERO_DTYPE_INT32, ZERO_OP_SUM, 7, 0, 0, 0, NULL, NULL, NULL}, /* plain MPI, blocking */
        {K_AR, ZERO_DTYPE_FP16, ZERO_OP_MAX, 4099, 1, 1, 0, NULL, NULL, NULL},
        {K_RS, ZERO_DTYPE_FP32, ZERO_OP_AVG, 1009, 0, 1, 0, NULL, NULL, NULL},
        {K_RS, ZERO_DTYPE_FP32, ZERO_OP_SUM, 65537, 0, 0, 0, NULL, NULL, NULL}, /* window, blocking */
        {K_AG, ZERO_DTYPE_BF16, ZERO_OP_SUM, 600001, 1, 1, 0, NULL, NULL, NULL},
        {K_AR, ZERO_DTYPE_INT64, ZERO_OP_MAX, 3, 0, 1, 0, NULL, NULL, NULL}, /* plain MPI */
    };
    const int nq = (int)(sizeof q / sizeof q[0]);
    for (int i = 0; i < nq; i++) {
        q[i].salt = 2 * ++g_salt + 1;
        q_start(t, &q[i]);
    }
    for (int i = nq - 1; i >= 0; i--) q_finish(t, &q[i]);
}

static void test_async(void) {
    if (N < 2) return;
    /* Everything through the window from 1 byte, single copy from 1 MiB (the default). */
    tcomm a = make_async("progress thread", "1", "0", NULL, NULL);
    if (!a.c) return;
    test_async_early(&a);
    test_async_queue(&a);
    const size_t counts[] = {1, 1009};
    grid(&a, NULL, counts, sizeof counts / sizeof counts[0]);
    large(&a, NULL, ((size_t)1 << 17) + 3);
    test_requests(&a);
    zero_comm_free(a.c);
    /* Ranks may differ: the thread on even ranks (rank 0 among them: the early test needs it
     * there), the calling thread on odd ones; then every rank on a thread that cannot be
     * started, so that jobs run at issue. Same protocol, same results. */
    for (int mode = 0; mode < 2; mode++) {
        tcomm m = make_async(mode ? "progress thread that cannot start" : "progress thread on even ranks", "1",
                             "0", NULL, NULL);
        if (!m.c) continue;
        zero__shm *sh = (zero__shm *)(uintptr_t)zero__comm_mpi_shm(m.c);
        zero__shm_set_async(sh, mode ? 2 : R % 2 == 0);
        if (!mode) test_async_early(&m);
        test_async_queue(&m);
        const size_t few[] = {1009};
        grid(&m, NULL, few, 1);
        ZT_EQ_INT(zero__shm_async(sh), mode ? 0 : R % 2 == 0); /* 2: off after the first job */
        zero_comm_free(m.c);
    }
    /* A failed read where the thread could not be started: the error text reaches wait. */
    tcomm g = make_async("no thread, single copy from 0 bytes", "1", "0", NULL, "0");
    if (g.c) {
        zero__shm_set_async((zero__shm *)(uintptr_t)zero__comm_mpi_shm(g.c), 2);
        test_cma_fault(&g, 2);
        zero_comm_free(g.c);
    }
    /* A failed single-copy read on the thread reaches the request's wait on every rank. */
    tcomm f = make_async("progress thread, single copy from 0 bytes", "1", "0", NULL, "0");
    if (f.c) {
        test_cma_fault(&f, 1);
        zero_comm_free(f.c);
    }
    /* Fake nodes (hierarchical, MPI between them): the caller's thread does the work. */
    tcomm h = make_async("progress thread asked, fake nodes 2", "1", "0", "2", NULL);
    if (h.c) {
        test_requests(&h);
        zero_comm_free(h.c);
    }
    /* auto (the default) and 0. */
    tcomm d = make_async("progress thread auto", "auto", NULL, NULL, NULL);
    tcomm o = make_async("progress thread off", "0", NULL, NULL, NULL);
    if (d.c) zero_comm_free(d.c);
    if (o.c) zero_comm_free(o.c);
}

int main(int argc, char **argv) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &R);
    MPI_Comm_size(MPI_COMM_WORLD, &N);
    zt_rank = R;
    double t0 = MPI_Wtime();
    g_cma_ok = probe_cma();
    if (!g_cma_ok && R == 0 && N > 1)
        printf("test_comm_shm: process_vm_readv is not allowed here: single-copy cases not run\n");

    tcomm plain = make("plain", "0", NULL, NULL, NULL);
    /* Everything through the window, in small chunks: many rounds, ragged last pieces. */
    tcomm tiny = make("shm chunk 1K", NULL, "0", "1K", NULL);
    /* The defaults: the threshold picks the path, big chunks. */
    tcomm dflt = make("shm defaults", NULL, NULL, NULL, NULL);
    if (!plain.c || !tiny.c || !dflt.c) return zt_finish("test_comm_shm");

    const size_t counts[] = {0, 1, 7, 1009, 4099};
    grid(&tiny, &plain, counts, sizeof counts / sizeof counts[0]);
    large(&dflt, &plain, ((size_t)1 << 17) + 3);
    test_specials(&tiny);
    test_huge(&dflt);
    test_requests(&dflt);
    test_requests(&tiny);
    test_identical(&dflt);
    test_split(&dflt);

    /* Fake nodes: hierarchical where every node has as many ranks, plain MPI otherwise. */
    const char *fakes[2] = {"2", "2:cyclic"};
    for (int f = 0; f < 2; f++) {
        if (N < 2) break;
        char name[64];
        snprintf(name, sizeof name, "fake nodes %s, chunk 1K", fakes[f]);
        /* Small chunks: a count of 1009 takes several cross-node spans of several rounds. */
        tcomm h = make(name, NULL, "0", "1K", fakes[f]);
        snprintf(name, sizeof name, "fake nodes %s, chunk 64K", fakes[f]);
        tcomm h2 = make(name, NULL, "0", "64K", fakes[f]);
        if (!h.c || !h2.c) continue;
        const size_t hcounts[] = {1, 7, 1009};
        grid(&h, &plain, hcounts, sizeof hcounts / sizeof hcounts[0]);
        test_specials(&h);
        test_requests(&h);
        large(&h2, &plain, 100003);
        test_identical(&h2);
        zero_comm_free(h.c);
        zero_comm_free(h2.c);
    }
    test_cma();
    test_async();
    test_threshold();
    test_settings();

    zero_comm_free(dflt.c);
    zero_comm_free(tiny.c);
    zero_comm_free(plain.c);
    if (R == 0) printf("test_comm_shm: %d ranks, %.2f s\n", N, MPI_Wtime() - t0);
    MPI_Finalize();
    return zt_finish("test_comm_shm");
}
