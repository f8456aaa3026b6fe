/* tests/mkernels_util.h — what the model-kernel tests share: a seeded generator, the list of
 * implementations (each vector one run where the CPU has it, reported SKIP otherwise), and an
 * element-wise comparison that prints the worst error it saw against its bound. */
#ifndef ZERO_TESTS_MKERNELS_UTIL_H
#define ZERO_TESTS_MKERNELS_UTIL_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernels/kernels.h"

static uint64_t mt_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t mt_next(void) {
    mt_state ^= mt_state >> 12;
    mt_state ^= mt_state << 25;
    mt_state ^= mt_state >> 27;
    return mt_state * 0x2545f4914f6cdd1dull;
}
/* uniform in [-a, a) */
static inline float mt_unif(float a) {
    return ((float)((mt_next() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f) * a;
}
static inline void mt_fill(float *x, size_t n, float a) {
    for (size_t i = 0; i < n; i++) x[i] = mt_unif(a);
}
static inline float *mt_alloc(size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    if (!p) {
        fprintf(stderr, "out of memory for %zu floats\n", n);
        exit(2);
    }
    return p;
}
static inline float *mt_dup(const float *x, size_t n) {
    float *p = mt_alloc(n);
    memcpy(p, x, sizeof(float) * n);
    return p;
}

static const zero_impl mt_vec_impls[] = {ZERO_IMPL_AVX2, ZERO_IMPL_AVX512};
enum { MT_NVEC = 2 };

/* Whether impl runs here; when it does not, checks that a kernel refuses it and prints a SKIP
 * line once per test program and impl. */
static inline int mt_impl_runs(zero_impl impl) {
    static int said[4];
    if (zero_impl_available(impl)) return 1;
    float x = 0.0f;
    ZT_EQ_INT(mk_gelu_fwd(&x, &x, 1, impl), ZERO_ERR_UNSUPPORTED);
    if (!said[impl]) {
        printf("SKIP %s: this CPU cannot run it (checked that the kernels refuse it)\n", zero_impl_name(impl));
        said[impl] = 1;
    }
    return 0;
}

/* Worst error seen by mt_close, by name: the tests print them (docs/KERNELS.md quotes them). */
typedef struct mt_err {
    double worst_ratio; /* max |got - ref| / bound */
    double worst_abs, worst_rel;
} mt_err;

/* Checks |got - ref| <= atol + rtol |ref| element-wise (both NaN, or equal infinities, pass).
 * Returns the number of failures; accumulates the worst figures into e. */
static inline int mt_close(const char *what, const float *got, const float *ref, size_t n,
                           double atol, double rtol, mt_err *e) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        const double g = got[i], r = ref[i];
        if (isnan(g) && isnan(r)) continue;
        if (isinf(r) && g == r) continue;
        const double d = fabs(g - r), bound = atol + rtol * fabs(r);
        const double ratio = d / bound;
        if (e) {
            if (ratio > e->worst_ratio) e->worst_ratio = ratio;
            if (d > e->worst_abs) e->worst_abs = d;
            if (fabs(r) > 1e-30 && d / fabs(r) > e->worst_rel && fabs(r) > atol) e->worst_rel = d / fabs(r);
        }
        if (!(d <= bound)) {
            if (bad < 5) ZT_FAIL("%s[%zu]: got %.9g, expected %.9g (|diff| %.3g > %.3g)", what, i, g, r, d, bound);
            bad++;
        }
    }
    zt_checks++;
    if (bad > 5) ZT_FAIL("%s: %d elements out of tolerance in all", what, bad);
    return bad;
}

static inline void mt_report(const char *what, const mt_err *e) {
    printf("  %-34s worst |diff| %.3g, worst rel %.3g, worst diff/bound %.3f\n", what, e->worst_abs,
           e->worst_rel, e->worst_ratio);
}

#endif
