/* Deterministic mode's exact-summation kernels (src/engine/determ_kernels.c): the fast fold, set,
 * convert and sum of squares equal their 128-bit scalar references bit for bit, on values that
 * cover every exponent, subnormals, signed zeros, Inf and NaN, and top bins raised by one and by
 * several bins; accumulators of the same atoms folded in any order and grouping (merged) are the
 * same bits; where the kept bits cover every contribution, the converted sum is the correctly
 * rounded exact sum; the sum of squares is exact per exponent (any chunking) and its value agrees
 * with a double sum. */
#include "engine/internal.h"
#include "harness.h"

#define N     4099 /* not a multiple of any vector width */
#define ATOMS 9

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Atom a's value at i: kind of element by i % 8 (wide exponents, narrow, subnormal, zero, one
 * NaN/Inf, large late contributions that raise the top bin by one or several bins). */
static float value(int a, int i) {
    const uint32_t r = (uint32_t)next(), sign = (r & 1u) << 31, fr = (r >> 1) & 0x7fffff;
    switch (i % 8) {
    case 0: return bits_f(sign | ((uint32_t)(1 + (r >> 24) % 254) << 23) | fr);  /* any normal */
    case 1: return bits_f(sign | ((uint32_t)(110 + (r >> 24) % 30) << 23) | fr); /* near 1 */
    case 2: return bits_f(sign | fr);                                            /* subnormal */
    case 3: return a % 2 ? 0.0f : -0.0f;
    case 4: return i == 4 && a == 5 ? NAN : i == 12 && a == 3 ? -INFINITY : bits_f(sign | (100u << 23) | fr);
    case 5: return bits_f(sign | ((uint32_t)(20 + 25 * a) << 23) | fr); /* rising: a raise per atom or two */
    case 6: return bits_f(sign | ((uint32_t)(a == ATOMS - 1 ? 250 : 30) << 23) | fr); /* a late jump of 5 bins */
    default: return bits_f(sign | ((uint32_t)(125 + a % 3) << 23) | fr);              /* cancellation near 1 */
    }
}

typedef struct acc {
    uint8_t bins[N];
    int64_t limbs[2 * N];
} acc;

/* The same bins, and the same limbs where they count (not under a NaN mark). */
static int acc_eq(const acc *x, const acc *y) {
    for (int i = 0; i < N; i++)
        if (x->bins[i] != y->bins[i] || (x->bins[i] != ZERO_DK_NAN && memcmp(x->limbs + 2 * i, y->limbs + 2 * i, 16))) {
            fprintf(stderr, "element %d: bins %d/%d limbs %lld %lld / %lld %lld\n", i, x->bins[i], y->bins[i],
                    (long long)x->limbs[2 * i], (long long)x->limbs[2 * i + 1], (long long)y->limbs[2 * i],
                    (long long)y->limbs[2 * i + 1]);
            return 0;
        }
    return 1;
}

static int f32_same(float a, float b) { return (isnan(a) && isnan(b)) || !memcmp(&a, &b, 4); }

static float g[ATOMS][N];

static void test_fold_set_merge(void) {
    for (int a = 0; a < ATOMS; a++)
        for (int i = 0; i < N; i++) g[a][i] = value(a, i);
    static acc ref, fast, rev, part1, part2, set;
    memset(&ref, 0, sizeof ref);
    memset(&rev, 0, sizeof rev);
    memset(&part1, 0, sizeof part1);
    zero__dk_set(fast.bins, fast.limbs, g[0], N); /* set on garbage: overwrites everything */
    zero__dk_fold_ref(ref.bins, ref.limbs, g[0], N);
    ZT_CHECKF(acc_eq(&fast, &ref), "set differs from fold_ref into an empty accumulator");
    memset(&set, 0xA5, sizeof set);
    zero__dk_set(set.bins, set.limbs, g[0], N);
    ZT_CHECKF(acc_eq(&set, &ref), "set leaves old bytes behind");
    for (int a = 1; a < ATOMS; a++) {
        zero__dk_fold_ref(ref.bins, ref.limbs, g[a], N);
        zero__dk_fold(fast.bins, fast.limbs, g[a], N);
        ZT_CHECKF(acc_eq(&fast, &ref), "fold differs from fold_ref after atom %d", a);
    }
    /* any order and grouping: reversed; atoms 0-3 and 4-8 in two accumulators, merged */
    for (int a = ATOMS - 1; a >= 0; a--) zero__dk_fold(rev.bins, rev.limbs, g[a], N);
    ZT_CHECKF(acc_eq(&rev, &ref), "reversed order changes the accumulator");
    for (int a = 3; a >= 0; a--) zero__dk_fold(part1.bins, part1.limbs, g[a], N);
    zero__dk_set(part2.bins, part2.limbs, g[ATOMS - 1], N);
    for (int a = 4; a < ATOMS - 1; a++) zero__dk_fold(part2.bins, part2.limbs, g[a], N);
    static acc m1, m2;
    m1 = part1;
    zero__dk_merge(m1.bins, m1.limbs, part2.bins, part2.limbs, N);
    m2 = part2;
    zero__dk_merge(m2.bins, m2.limbs, part1.bins, part1.limbs, N);
    ZT_CHECKF(acc_eq(&m1, &ref), "merged groups differ from one accumulator");
    ZT_CHECKF(acc_eq(&m2, &ref), "the merge's order changes the result");
    int nan = 0, raised = 0;
    for (int i = 0; i < N; i++) {
        nan += ref.bins[i] == ZERO_DK_NAN;
        raised += i % 8 == 6 && ref.bins[i] == 8;
    }
    ZT_EQ_INT(nan, 2);
    ZT_CHECKF(raised > N / 8 - 2, "the late jump raised %d elements", raised);

    /* convert: the fast kernel equals the reference, on every accumulator above */
    static float out[N], out_ref[N];
    const acc *all[] = {&ref, &part1, &part2, &set};
    for (int k = 0; k < 4; k++) {
        zero__dk_convert(all[k]->bins, all[k]->limbs, out, N);
        zero__dk_convert_ref(all[k]->bins, all[k]->limbs, out_ref, N);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += !f32_same(out[i], out_ref[i]);
        ZT_CHECKF(!bad, "convert differs from convert_ref at %d elements (accumulator %d)", bad, k);
    }
}

/* Limbs of every size the fast convert may meet: t = hi * 2^40 + lo up to 2^103, ties. */
static void test_convert_limbs(void) {
    static acc x;
    static float out[N], out_ref[N];
    for (int i = 0; i < N; i++) {
        x.bins[i] = (uint8_t)(1 + next() % 8);
        const int hb = (int)(next() % 64), lb = (int)(next() % 63);
        const uint64_t rh = next(), rl = next();
        int64_t hi = hb ? (int64_t)(rh >> (64 - hb)) : 0, lo = lb ? (int64_t)(rl >> (64 - lb)) : 0;
        if (i % 5 == 0) lo = ((int64_t)1 << 39) + (i % 10 ? 0 : 1); /* near ties after rounding */
        if (i % 3 == 0) hi = -hi;
        if (i % 7 == 0) lo = -lo;
        if (hb == 63) hi >>= 1; /* |hi| < 2^62: headroom the engine keeps */
        x.limbs[2 * i] = hi;
        x.limbs[2 * i + 1] = lo;
    }
    x.bins[0] = 0;
    x.bins[1] = ZERO_DK_NAN;
    x.limbs[2 * 2] = (int64_t)1 << 23, x.limbs[2 * 2 + 1] = 0; /* |t| = 2^63 exactly */
    x.limbs[2 * 3] = -((int64_t)1 << 23), x.limbs[2 * 3 + 1] = 0;
    zero__dk_convert(x.bins, x.limbs, out, N);
    zero__dk_convert_ref(x.bins, x.limbs, out_ref, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += !f32_same(out[i], out_ref[i]);
    ZT_CHECKF(!bad, "convert differs from convert_ref at %d of %d limb pairs", bad, N);
    ZT_CHECK(out[0] == 0.0f && !signbit(out[0]) && isnan(out[1]));
}

/* Where every contribution's bits are kept (exponents within 40 bits of the top bin's bottom),
 * the result is the exact sum rounded once: here the double sum is exact (spans < 53 bits). */
static void test_exact_rounding(void) {
    static acc x;
    static float h[ATOMS][N], out[N];
    static double exact[N];
    memset(&x, 0, sizeof x);
    memset(exact, 0, sizeof exact);
    for (int a = 0; a < ATOMS; a++) {
        for (int i = 0; i < N; i++) {
            const uint32_t r = (uint32_t)next();
            /* exponents 2^-8 .. 2^8 (bins 3-4): one bin below the top keeps every bit */
            h[a][i] = bits_f(((r & 1u) << 31) | ((uint32_t)(119 + (r >> 1) % 17) << 23) | ((r >> 6) & 0x7fffff));
            exact[i] += h[a][i];
        }
        zero__dk_fold(x.bins, x.limbs, h[a], N);
    }
    zero__dk_convert(x.bins, x.limbs, out, N);
    int bad = 0;
    for (int i = 0; i < N; i++) bad += !f32_same(out[i], (float)exact[i]);
    ZT_CHECKF(!bad, "%d of %d sums are not the correctly rounded exact sum", bad, N);
}

static void test_squares(void) {
    static float x[3 * N];
    double dsum = 0;
    for (int i = 0; i < 3 * N; i++) {
        x[i] = value(i % 5, i);
        if (isnan(x[i]) || isinf(x[i])) x[i] = 1.5f;
        dsum += (double)x[i] * x[i];
    }
    zero__dk_sq *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b), *c = calloc(1, sizeof *c);
    int bad_a = 0, bad_b = 0, bad_c = 0;
    zero__dk_sq_add(a, x, 3 * N, &bad_a);
    zero__dk_sq_add_ref(b, x, 3 * N, &bad_b);
    ZT_CHECKF(!memcmp(a, b, sizeof *a), "sq_add differs from sq_add_ref");
    for (int k = 0; k < 3 * N; k += 1000) /* chunked differently, merged */
        zero__dk_sq_add(c, x + k, (uint64_t)(3 * N - k < 1000 ? 3 * N - k : 1000), &bad_c);
    zero__dk_sq *d = calloc(1, sizeof *d);
    zero__dk_sq_merge(d, c);
    ZT_CHECKF(!memcmp(a, d, sizeof *a), "chunking changes the exact sum of squares");
    ZT_CHECK(!bad_a && !bad_b && !bad_c);
    const double v = zero__dk_sq_value(a);
    ZT_CHECKF(fabs(v - dsum) <= 1e-14 * dsum, "sum of squares %.17g, double sum %.17g", v, dsum);
    x[7] = NAN;
    zero__dk_sq_add(c, x, 8, &bad_c);
    ZT_CHECKF(bad_c, "a NaN is not reported");
    x[7] = INFINITY;
    zero__dk_sq_add_ref(d, x, 8, &bad_b);
    ZT_CHECKF(bad_b, "an Inf is not reported (reference)");
    memset(a, 0, sizeof *a);
    ZT_CHECK(zero__dk_sq_value(a) == 0.0);
    free(a), free(b), free(c), free(d);
}

int main(void) {
    test_fold_set_merge();
    test_convert_limbs();
    test_exact_rounding();
    test_squares();
    return zt_finish("test_determ_kernels");
}
