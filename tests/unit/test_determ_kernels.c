/* Deterministic mode's kernels (src/engine/determ_kernels.c): the fast quantize and convert equal
 * their double-precision scalar references bit for bit (the int32 results and the blocks' seen
 * bytes), on values that cover every exponent, subnormals, signed zeros, Inf and NaN, values past
 * the clamp, unset grids and the grid's bounds, and any chunking on block boundaries; the sums
 * of the same atoms added in any order and grouping are the same bits; where every contribution
 * fits its grid, the converted sum is the correctly rounded sum of the rounded contributions and
 * lies within atoms/2 grid steps of the exact sum; the sum of squares is exact per exponent (any
 * chunking) and its value agrees with a double sum. */
#include "engine/internal.h"
#include "harness.h"

#define N     4099 /* not a multiple of any vector width nor of the block */
#define NB    ((N + ZERO_DQ_BLOCK - 1) / ZERO_DQ_BLOCK)
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

/* Atom a's value at i: kind of element by i % 8 (any exponent, near 1, subnormal, signed zero, one
 * NaN and one Inf, rising per atom, a late jump, cancellation near 1). */
static float value(int a, int i) {
    const uint32_t r = (uint32_t)next(), sign = (r & 1u) << 31, fr = (r >> 1) & 0x7fffff;
    switch (i % 8) {
    case 0: return bits_f(sign | ((uint32_t)(1 + (r >> 24) % 254) << 23) | fr);  /* any normal */
    case 1: return bits_f(sign | ((uint32_t)(110 + (r >> 24) % 30) << 23) | fr); /* near 1 */
    case 2: return bits_f(sign | fr);                                            /* subnormal */
    case 3: return a % 2 ? 0.0f : -0.0f;
    case 4: return i == 4 && a == 5 ? NAN : i == 12 && a == 3 ? -INFINITY : bits_f(sign | (100u << 23) | fr);
    case 5: return bits_f(sign | ((uint32_t)(20 + 25 * a) << 23) | fr); /* rising */
    case 6: return bits_f(sign | ((uint32_t)(a == ATOMS - 1 ? 250 : 30) << 23) | fr); /* a late jump */
    default: return bits_f(sign | ((uint32_t)(125 + a % 3) << 23) | fr);              /* cancellation near 1 */
    }
}

static float g[ATOMS][N];
static int8_t grid[NB];

/* Grids over the whole range, block by block: unset, the bounds, and ordinary ones. */
static void some_grids(void) {
    for (int b = 0; b < NB; b++) {
        const int k = b % 7;
        grid[b] = k == 0   ? ZERO_DQ_UNSET
                  : k == 1 ? ZERO_DQ_EMIN
                  : k == 2 ? ZERO_DQ_EMAX
                           : (int8_t)(-60 + (int)(next() % 100));
    }
}

static void test_quantize_matches_reference(void) {
    some_grids();
    for (int add = 0; add <= 1; add++) {
        const int FL = add ? -40 : ZERO_DQ_UNSET; /* a floor: blocks with finer grids quantize with it */
        static int32_t qa[N], qb[N], qc[N];
        uint8_t sa[NB] = {0}, sb[NB] = {0}, sc[NB] = {0};
        uint64_t ma[NB] = {0}, mb[NB] = {0}, mc[NB] = {0};
        for (int i = 0; i < N; i++) qa[i] = qb[i] = qc[i] = add ? (int32_t)(next() % 2001) - 1000 : 0;
        for (int a = 0; a < ATOMS; a++) {
            zero__dq_quantize(g[a], qa, 0, N, grid, FL, sa, ma, add || a);
            zero__dq_quantize_ref(g[a], qb, 0, N, grid, FL, sb, mb, add || a);
            /* chunked on block boundaries, the later chunk first */
            const uint64_t k = ZERO_DQ_BLOCK * (uint64_t)(1 + a * 11);
            zero__dq_quantize(g[a] + k, qc + k, k, N - k, grid, FL, sc, mc, add || a);
            zero__dq_quantize(g[a], qc, 0, k, grid, FL, sc, mc, add || a);
        }
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (qa[i] != qb[i] || qa[i] != qc[i]) bad = i;
        ZT_CHECKF(bad < 0, "add %d: element %d: fast %d, reference %d, chunked %d (grid %d)", add, bad,
                  bad < 0 ? 0 : qa[bad], bad < 0 ? 0 : qb[bad], bad < 0 ? 0 : qc[bad],
                  bad < 0 ? 0 : grid[bad / ZERO_DQ_BLOCK]);
        ZT_CHECKF(!memcmp(sa, sb, NB) && !memcmp(sa, sc, NB), "add %d: the seen bytes differ", add);
        ZT_CHECKF(!memcmp(ma, mb, sizeof ma) && !memcmp(ma, mc, sizeof ma), "add %d: the masses differ", add);
        /* the conversion with the same floor, against its reference */
        static float fa[N], fb[N];
        zero__dq_convert(qa, fa, 0, N, grid, FL, sa);
        zero__dq_convert_ref(qa, fb, 0, N, grid, FL, sa);
        ZT_CHECKF(!memcmp(fa, fb, sizeof fa), "add %d: convert differs from its reference", add);
    }
    /* in place (the stage 2-3 path) equals into another buffer */
    const int FL = ZERO_DQ_UNSET;
    static float x[N];
    static int32_t q[N];
    uint8_t s1[NB] = {0}, s2[NB] = {0};
    uint64_t m1[NB] = {0}, m2[NB] = {0};
    memcpy(x, g[2], sizeof x);
    zero__dq_quantize(g[2], q, 0, N, grid, FL, s1, m1, 0);
    zero__dq_quantize(x, (int32_t *)x, 0, N, grid, FL, s2, m2, 0);
    ZT_CHECKF(!memcmp(x, q, sizeof q), "quantizing in place differs");
}

static void test_seen_and_clamp(void) {
    const int FL = ZERO_DQ_UNSET;
    float x[2 * ZERO_DQ_BLOCK] = {0};
    int32_t q[2 * ZERO_DQ_BLOCK];
    int8_t gr[2] = {-20, ZERO_DQ_UNSET};
    uint8_t seen[2] = {0, 0};
    uint64_t mass[2] = {0, 0};
    x[3] = 0x1p-20f * 5;    /* 5 grid steps */
    x[4] = -0x1p-20f * 2.5f; /* a tie: to even, -2 */
    x[5] = 0x1p-20f * 3.5f;  /* a tie: to even, 4 */
    x[6] = 1e30f;            /* past the clamp */
    x[7] = -INFINITY;
    x[8] = NAN;
    x[ZERO_DQ_BLOCK + 1] = bits_f(0x00000123); /* a subnormal in an unset block: rounds to 0, seen 0 */
    zero__dq_quantize(x, q, 0, 2 * ZERO_DQ_BLOCK, gr, FL, seen, mass, 0);
    ZT_CHECK(q[3] == 5 && q[4] == -2 && q[5] == 4);
    ZT_CHECK(q[6] == ZERO_DQ_CLAMP && q[7] == -ZERO_DQ_CLAMP && q[8] == 0);
    ZT_CHECKF(mass[0] == ZERO_DQ_CLAMP && mass[1] == 0, "mass %llu %llu", (unsigned long long)mass[0],
              (unsigned long long)mass[1]);
    ZT_CHECKF(seen[0] == 255 && seen[1] == 0 && q[ZERO_DQ_BLOCK + 1] == 0, "seen %d %d", seen[0], seen[1]);
    x[7] = -1.0f, x[8] = 0;
    seen[0] = 0;
    zero__dq_quantize(x, q, 0, ZERO_DQ_BLOCK, gr, FL, seen, mass, 0);
    ZT_CHECKF(mass[0] == 2 * (uint64_t)ZERO_DQ_CLAMP, "mass %llu: the largest |q| of two atoms", (unsigned long long)mass[0]);
    uint32_t big;
    memcpy(&big, &x[6], 4);
    ZT_CHECKF(seen[0] == ((big >> 23) & 0xff), "seen %d: not 1e30f's exponent field", seen[0]);
    /* convert: NaN where seen says so; an unset grid's zeros stay zero */
    float out[2 * ZERO_DQ_BLOCK];
    uint8_t marks[2] = {255, 0};
    zero__dq_convert(q, out, 0, 2 * ZERO_DQ_BLOCK, gr, FL, marks);
    ZT_CHECK(isnan(out[0]) && isnan(out[3]) && out[ZERO_DQ_BLOCK + 1] == 0.0f);
}

/* Ties and edges in every position of the fast kernel, its four SSE2 lanes and its scalar tail
 * (the element formula zero__dq_quantize_elem): runs of 1..8 elements from every start in a block,
 * bitwise against the double reference; ties go to even (2.5 -> 2, -3.5 -> -4, 0.5 -> 0). */
static void test_ties_every_position(void) {
    const int FL = ZERO_DQ_UNSET;
    const float st = 0x1p-20f; /* the grid step of the block below */
    const float v[] = {2.5f * st, -2.5f * st, 3.5f * st, -3.5f * st, 0.5f * st, -0.5f * st, 1.5f * st,
                       -0.0f,     0.0f,       bits_f(0x00000001u), bits_f(0x807fffffu), 1e30f, -1e30f,
                       NAN,       INFINITY,   -INFINITY, 4194304.5f * st};
    const int32_t want[] = {2, -2, 4, -4, 0, 0, 2, 0, 0, 0, 0, ZERO_DQ_CLAMP, -ZERO_DQ_CLAMP, 0,
                            ZERO_DQ_CLAMP, -ZERO_DQ_CLAMP, 4194304};
    const int NV = (int)(sizeof v / sizeof v[0]);
    int8_t gr[1] = {-20};
    float x[ZERO_DQ_BLOCK];
    int bad = 0;
    for (int start = 0; start < ZERO_DQ_BLOCK && !bad; start++)
        for (int len = 1; len <= 8 && start + len <= ZERO_DQ_BLOCK && !bad; len++) {
            for (int i = 0; i < ZERO_DQ_BLOCK; i++) x[i] = v[(i + start * 3 + len) % NV];
            int32_t qa[ZERO_DQ_BLOCK] = {0}, qb[ZERO_DQ_BLOCK] = {0};
            uint8_t sa[1] = {0}, sb[1] = {0};
            uint64_t ma[1] = {0}, mb[1] = {0};
            zero__dq_quantize(x + start, qa, (uint64_t)start, (uint64_t)len, gr, FL, sa, ma, 0);
            zero__dq_quantize_ref(x + start, qb, (uint64_t)start, (uint64_t)len, gr, FL, sb, mb, 0);
            for (int i = 0; i < len; i++) {
                const int k = (start + i + start * 3 + len) % NV;
                if (qa[i] != qb[i] || qa[i] != want[k]) {
                    ZT_FAIL("start %d len %d: %a -> %d, reference %d, expected %d", start, len, (double)x[start + i],
                            qa[i], qb[i], want[k]);
                    bad = 1;
                }
            }
            ZT_CHECKF(sa[0] == sb[0] && ma[0] == mb[0], "start %d len %d: seen %d/%d mass %llu/%llu", start, len, sa[0],
                      sb[0], (unsigned long long)ma[0], (unsigned long long)mb[0]);
        }
}

/* Any order and grouping of the same atoms: the same int32 sums; where nothing is clamped, the
 * conversion is the correctly rounded sum of the rounded contributions, within ATOMS/2 grid
 * steps of the exact sum. */
static void test_order_and_rounding(void) {
    const int FL = ZERO_DQ_UNSET;
    const int L = 5; /* 1 + ceil(log2(9)): every atom below 2^(31 - L) grid steps */
    /* finite values only, and grids that fit every block (as determ.c sets them) */
    static float v[ATOMS][N];
    for (int a = 0; a < ATOMS; a++)
        for (int i = 0; i < N; i++) v[a][i] = isfinite(g[a][i]) && fabsf(g[a][i]) < 0x1p70f ? g[a][i] : 1.0f;
    uint8_t seen[NB] = {0};
    uint64_t mass[NB] = {0};
    static int32_t tmp[N];
    for (int a = 0; a < ATOMS; a++) zero__dq_quantize(v[a], tmp, 0, N, grid, FL, seen, mass, 0);
    for (int b = 0; b < NB; b++) {
        int e = seen[b] - 126 + 3 + L - 31;
        grid[b] = (int8_t)(seen[b] == 0 ? ZERO_DQ_UNSET : e < ZERO_DQ_EMIN ? ZERO_DQ_EMIN : e);
    }
    static int32_t s1[N], s2[N], part[N];
    uint8_t x1[NB] = {0}, x2[NB] = {0};
    uint64_t m1[NB] = {0}, m2[NB] = {0};
    for (int a = 0; a < ATOMS; a++) zero__dq_quantize(v[a], s1, 0, N, grid, FL, x1, m1, a > 0);
    /* reversed, in two groups summed apart and then added (two ranks) */
    for (int a = ATOMS - 1; a >= 4; a--) zero__dq_quantize(v[a], s2, 0, N, grid, FL, x2, m2, a < ATOMS - 1);
    for (int a = 3; a >= 0; a--) zero__dq_quantize(v[a], part, 0, N, grid, FL, x2, m2, a < 3);
    for (int i = 0; i < N; i++) s2[i] = (int32_t)((uint32_t)s2[i] + (uint32_t)part[i]);
    ZT_CHECKF(!memcmp(s1, s2, sizeof s1) && !memcmp(x1, x2, NB) && !memcmp(m1, m2, sizeof m1),
              "the order of the atoms changes the sums");
    for (int b = 0; b < NB; b++) /* the mass bounds every sum of the block, and stays below 2^31 here */
        for (int i = b * ZERO_DQ_BLOCK; i < N && i < (b + 1) * ZERO_DQ_BLOCK; i++)
            if ((uint64_t)llabs((long long)s1[i]) > m1[b] || m1[b] >= (1ull << 31)) {
                ZT_FAIL("block %d: sum %d, mass %llu", b, s1[i], (unsigned long long)m1[b]);
                b = NB;
                break;
            }
    static float f1[N], f2[N];
    zero__dq_convert(s1, f1, 0, N, grid, FL, x1);
    zero__dq_convert_ref(s1, f2, 0, N, grid, FL, x1);
    ZT_CHECKF(!memcmp(f1, f2, sizeof f1), "convert differs from its reference");
    int worst = -1;
    for (int i = 0; i < N; i++) {
        const int b = i / ZERO_DQ_BLOCK;
        if (x1[b] == 0 || x1[b] == 255) continue;
        int64_t q = 0;
        double exact = 0;
        for (int a = 0; a < ATOMS; a++) {
            q += (int64_t)nearbyint(ldexp((double)v[a][i], -grid[b]));
            exact += (double)v[a][i]; /* the values of one element span < 2^53: a double holds it */
        }
        const float want = (float)ldexp((double)q, grid[b]);
        const double err = fabs((double)f1[i] - exact), bound = ATOMS * 0.5 * ldexp(1.0, grid[b]) + fabs(exact) * 0x1p-24;
        if (memcmp(&want, &f1[i], 4) || err > bound) worst = i;
    }
    ZT_CHECKF(worst < 0, "element %d: converted %.9g", worst, worst < 0 ? 0.0 : (double)f1[worst]);
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
    for (int a = 0; a < ATOMS; a++)
        for (int i = 0; i < N; i++) g[a][i] = value(a, i);
    test_quantize_matches_reference();
    test_seen_and_clamp();
    test_ties_every_position();
    test_order_and_rounding();
    test_squares();
    return zt_finish("test_determ_kernels");
}
