/* tests/harness.h — the test runner's checks. Each test file is one program (one ctest test,
 * with a timeout); it runs its cases and exits non-zero when any check failed, printing each
 * failure with file:line and the values compared. Under MPI every rank checks its own results;
 * ZT_MAIN_END reports the total and the exit status combines all ranks'. */
#ifndef ZERO_TEST_HARNESS_H
#define ZERO_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int zt_failures;
static int zt_checks;
static int zt_rank;

#define ZT_FAIL(...)                                                                               \
    do {                                                                                           \
        zt_failures++;                                                                             \
        fprintf(stderr, "[rank %d] FAIL %s:%d: ", zt_rank, __FILE__, __LINE__);                   \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
    } while (0)

#define ZT_CHECK(cond)                                                                             \
    do {                                                                                           \
        zt_checks++;                                                                               \
        if (!(cond)) ZT_FAIL("%s", #cond);                                                         \
    } while (0)

#define ZT_CHECKF(cond, ...)                                                                       \
    do {                                                                                           \
        zt_checks++;                                                                               \
        if (!(cond)) ZT_FAIL(__VA_ARGS__);                                                         \
    } while (0)

#define ZT_EQ_INT(a, b)                                                                            \
    do {                                                                                           \
        long long zt_a = (long long)(a), zt_b = (long long)(b);                                   \
        zt_checks++;                                                                               \
        if (zt_a != zt_b) ZT_FAIL("%s == %s: %lld != %lld", #a, #b, zt_a, zt_b);                   \
    } while (0)

/* |a-b| <= tol * max(1, |b|) */
#define ZT_NEAR(a, b, tol)                                                                         \
    do {                                                                                           \
        double zt_a = (double)(a), zt_b = (double)(b);                                             \
        double zt_s = fabs(zt_b) > 1.0 ? fabs(zt_b) : 1.0;                                         \
        zt_checks++;                                                                               \
        if (!(fabs(zt_a - zt_b) <= (tol)*zt_s))                                                    \
            ZT_FAIL("%s ~ %s: %.9g vs %.9g (tol %g)", #a, #b, zt_a, zt_b, (double)(tol));          \
    } while (0)

#define ZT_OK(expr)                                                                                \
    do {                                                                                           \
        int zt_s = (int)(expr);                                                                    \
        zt_checks++;                                                                               \
        if (zt_s != 0) ZT_FAIL("%s returned %d", #expr, zt_s);                                     \
    } while (0)

/* A buffer of `bytes` followed by ZT_GUARD bytes of 0xA5 that must stay untouched (a write past
 * the end of a receive buffer shows there); exits with status 2 when out of memory. */
enum { ZT_GUARD = 64 };
static inline unsigned char *zt_guarded_alloc(size_t bytes) {
    unsigned char *p = malloc(bytes + ZT_GUARD);
    if (!p) {
        fprintf(stderr, "out of memory for a test buffer of %zu bytes\n", bytes);
        exit(2);
    }
    memset(p, 0xA5, bytes + ZT_GUARD);
    return p;
}
static inline int zt_guard_ok(const unsigned char *p, size_t bytes) {
    for (size_t i = 0; i < ZT_GUARD; i++)
        if (p[bytes + i] != 0xA5) return 0;
    return 1;
}

/* Prints the summary line and returns the exit status. */
static inline int zt_finish(const char *name) {
    printf("%s: %d checks, %d failed (rank %d)\n", name, zt_checks, zt_failures, zt_rank);
    return zt_failures ? 1 : 0;
}

#endif
